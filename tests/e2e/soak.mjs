// Soak: 8 concurrent clients mix every route (completions, chat streamed and not, sessions, contexts
// created, forked, continued, snapshotted, restored and deleted, clients that abort a stream, list,
// metrics, health) for SOAK_SECONDS (60 by default) against one server started with a 64 MiB KV budget.
// Passes when no request got a 5xx or failed at the transport, every context a client made was deleted
// by it (nothing held at the end), and the server's resident memory stayed under RSS_LIMIT_MIB and did not
// grow: the largest VmRSS of the last 20 s is at most the largest of the first 20 s plus
// RSS_GROWTH_MIB. Prints requests per route with p50/p99 latency and the status counts. Run by run.sh.
import { URL_MAIN as U, rssKiB, sleep } from './lib/server.mjs';

const SECONDS = Number(process.env.SOAK_SECONDS ?? 60);
const CLIENTS = 8;
const RSS_LIMIT_MIB = 256;  // the demo model (3 MiB), a 64 MiB KV budget, 16 HTTP threads, snapshots in flight
const RSS_GROWTH_MIB = 32;
// SOAK_RSS_CHECKS=0 (set by CMake for sanitizer builds, whose shadow memory and quarantine make RSS say
// nothing about the server) reports RSS without judging it.
const RSS_CHECKS = process.env.SOAK_RSS_CHECKS !== '0';
const WINDOW_S = Math.round(Math.min(20, SECONDS / 3));
const PID = Number(process.env.LLAMAY_PID);
if (!PID) {
  console.error('LLAMAY_PID is unset: run this through run.sh');
  process.exit(2);
}

// --- statistics -----------------------------------------------------------------------------------------
const routes = new Map();  // route -> { n, ms: [], statuses: Map }
const statuses = new Map();
const problems = [];        // 5xx, transport errors, unexpected statuses, failed invariants
function note(route, status, ms) {
  let r = routes.get(route);
  if (!r) routes.set(route, (r = { n: 0, ms: [], statuses: new Map() }));
  r.n++;
  r.ms.push(ms);
  r.statuses.set(status, (r.statuses.get(status) ?? 0) + 1);
  statuses.set(status, (statuses.get(status) ?? 0) + 1);
}
function problem(what) {
  if (problems.length < 50) problems.push(what);
  else if (problems.length === 50) problems.push('... (more problems left out)');
}

// One request; `route` names it in the summary. Streams are read to their end (or aborted after
// `abortAfter` events). Returns { status, json, text } or null after a transport error.
async function call(route, path, { method = 'POST', body, raw, stream = false, abortAfter = 0, expect = [200] } = {}) {
  const t0 = performance.now();
  const ac = new AbortController();
  const timer = setTimeout(() => ac.abort(new Error('no answer in 60 s')), 60000);
  try {
    const init = { method, signal: ac.signal, headers: {} };
    if (body !== undefined) {
      init.body = JSON.stringify(body);
      init.headers['content-type'] = 'application/json';
    } else if (raw !== undefined) {
      init.body = raw;
      init.headers['content-type'] = 'application/octet-stream';
    }
    const res = await fetch(`${U}${path}`, init);
    let text = '';
    let bytes;
    if (stream && res.status === 200) {
      const reader = res.body.getReader();
      const dec = new TextDecoder();
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        text += dec.decode(value, { stream: true });
        if (abortAfter && text.split('data: ').length - 1 >= abortAfter) {
          ac.abort();
          await reader.cancel().catch(() => {});
          break;
        }
      }
      if (!abortAfter && !text.trimEnd().endsWith('data: [DONE]')) problem(`${route}: stream did not end with [DONE]: ...${text.slice(-200)}`);
      if (text.includes('"error"')) problem(`${route}: error event in stream: ${text.slice(0, 300)}`);
    } else if (res.headers.get('content-type')?.startsWith('application/octet-stream')) {
      bytes = new Uint8Array(await res.arrayBuffer());
    } else {
      text = await res.text();
    }
    const ms = performance.now() - t0;
    note(route, res.status, ms);
    if (res.status >= 500) problem(`${route}: ${res.status} ${text.slice(0, 300)}`);
    else if (!expect.includes(res.status)) problem(`${route}: unexpected ${res.status} ${text.slice(0, 300)}`);
    let json;
    if (!stream && text) {
      try {
        json = JSON.parse(text);
      } catch {}
    }
    return { status: res.status, json, text, bytes };
  } catch (e) {
    if (abortAfter && ac.signal.aborted) {
      note(route, 'aborted', performance.now() - t0);
      return { status: 0 };
    }
    note(route, 'transport error', performance.now() - t0);
    problem(`${route}: transport error: ${e.cause?.message ?? e.message}`);
    return null;
  } finally {
    clearTimeout(timer);
  }
}

// --- the clients ----------------------------------------------------------------------------------------
function prng(seed) {  // mulberry32: each client's mix is reproducible
  return () => {
    seed = (seed + 0x6d2b79f5) | 0;
    let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
const WORDS = ['fork', 'branch', 'snapshot', 'restore', 'agent', 'context', 'page', 'token', 'prefix', 'tree', 'cache', 'llamay'];

async function client(k, deadline) {
  const rnd = prng(1000 + k);
  const pick = (a) => a[Math.floor(rnd() * a.length)];
  const text = (n) => Array.from({ length: n }, () => pick(WORDS)).join(' ');
  const int = (lo, hi) => lo + Math.floor(rnd() * (hi - lo + 1));
  const temp = () => (rnd() < 0.5 ? 0 : 0.8);
  const held = new Set();  // contexts this client made and has not deleted yet
  const del = async (id) => {
    const r = await call('DELETE /v1/contexts/{id}', `/v1/contexts/${id}`, { method: 'DELETE' });
    if (r?.status === 200) held.delete(id);
  };
  const ops = [
    [3, async () => call('POST /v1/completions', '/v1/completions', { body: { prompt: text(int(2, 12)), max_tokens: int(4, 24), temperature: temp() } })],
    [1, async () => call('POST /v1/completions (n=3)', '/v1/completions', { body: { prompt: text(int(2, 8)), max_tokens: int(4, 12), temperature: temp(), n: 3 } })],
    [3, async () => call('POST /v1/chat/completions', '/v1/chat/completions', { body: { messages: [{ role: 'user', content: text(int(2, 10)) }], max_tokens: int(4, 24), temperature: temp() } })],
    [3, async () => call('POST /v1/chat/completions (stream)', '/v1/chat/completions', { stream: true, body: { messages: [{ role: 'user', content: text(int(2, 10)) }], max_tokens: int(4, 24), temperature: temp(), stream: true, stream_options: { include_usage: rnd() < 0.5 } } })],
    [1, async () => call('POST /v1/chat/completions (stream, aborted)', '/v1/chat/completions', { stream: true, abortAfter: 2, body: { messages: [{ role: 'user', content: text(4) }], max_tokens: 400, temperature: temp(), stream: true } })],
    // A context's whole life: create, fork, continue a branch, snapshot, restore, continue, delete all.
    [2, async () => {
      const c = await call('POST /v1/contexts', '/v1/contexts', { body: { prompt: text(int(10, 40)) } });
      if (c?.status !== 200) return;
      held.add(c.json.id);
      const f = await call('POST /v1/contexts/{id}/fork', `/v1/contexts/${c.json.id}/fork?n=${int(1, 4)}`, {});
      if (f?.status === 200) for (const b of f.json.branches) held.add(b.id);
      if (f?.status === 200) {
        const b = pick(f.json.branches).id;
        await call('POST /v1/completions (session)', '/v1/completions', { body: { prompt: [70, 71, 72], max_tokens: int(4, 16), temperature: 0, llamay_session: b } });
      }
      const s = await call('GET /v1/contexts/{id}/snapshot', `/v1/contexts/${c.json.id}/snapshot`, { method: 'GET' });
      if (s?.status === 200 && s.bytes) {
        const r = await call('POST /v1/contexts/restore', '/v1/contexts/restore', { raw: s.bytes });
        if (r?.status === 200) {
          held.add(r.json.id);
          if (r.json.tokens !== c.json.tokens) problem(`restore: ${r.json.tokens} tokens, the snapshot's context held ${c.json.tokens}`);
          await call('POST /v1/completions (session)', '/v1/completions', { body: { prompt: [73], max_tokens: int(4, 16), temperature: 0, llamay_session: r.json.id } });
        }
      } else if (s) problem(`snapshot: status ${s.status} without bytes`);
      for (const id of [...held]) await del(id);
    }],
    // A chat session: a context from a system message, three turns (one streamed), then deleted.
    [2, async () => {
      const c = await call('POST /v1/contexts', '/v1/contexts', { body: { messages: [{ role: 'system', content: text(int(4, 12)) }] } });
      if (c?.status !== 200) return;
      held.add(c.json.id);
      for (let turn = 0; turn < 3; turn++) {
        const stream = turn === 1;
        await call(`POST /v1/chat/completions (session${stream ? ', stream' : ''})`, '/v1/chat/completions', {
          stream,
          body: { messages: [{ role: 'user', content: text(int(1, 6)) }], max_tokens: int(4, 16), temperature: temp(), stream, llamay_session: c.json.id },
        });
      }
      await del(c.json.id);
    }],
    // llamay_retain_prefix pins the prompt in the prefix tree for good (docs/server.md), so pinned prompts
    // come from a fixed set: pins stay bounded and the budget cannot fill with them.
    [1, async () => call('POST /v1/chat/completions (retain_prefix)', '/v1/chat/completions', {
      body: { messages: [{ role: 'system', content: `pinned system prompt ${int(1, 3)}` }, { role: 'user', content: 'hello' }], max_tokens: int(4, 12), temperature: temp(), llamay_retain_prefix: true },
    })],
    [1, async () => {
      await call('GET /v1/contexts', '/v1/contexts', { method: 'GET' });
      await call('GET /metrics', '/metrics', { method: 'GET' });
      await call('GET /health', '/health', { method: 'GET' });
      await call('GET /v1/models', '/v1/models', { method: 'GET' });
    }],
  ];
  const total = ops.reduce((s, [w]) => s + w, 0);
  while (Date.now() < deadline) {
    let x = rnd() * total;
    const op = ops.find(([w]) => (x -= w) < 0) ?? ops[0];
    await op[1]();
  }
  for (const id of [...held]) await del(id);
  if (held.size) problem(`client ${k} could not delete ${[...held].join(', ')}`);
}

// --- run ------------------------------------------------------------------------------------------------
const rss = [];  // [seconds since start, MiB]
const t0 = Date.now();
const sampler = setInterval(() => {
  const kib = rssKiB(PID);
  if (Number.isFinite(kib)) rss.push([(Date.now() - t0) / 1000, kib / 1024]);
  else problem('the server process is gone');
}, 250);
const deadline = t0 + SECONDS * 1000;
console.log(`soak: ${CLIENTS} clients for ${SECONDS} s against ${U} (pid ${PID}, VmRSS ${(rssKiB(PID) / 1024).toFixed(1)} MiB at start)`);
await Promise.all(Array.from({ length: CLIENTS }, (_, k) => client(k, deadline)));
clearInterval(sampler);
const elapsed = (Date.now() - t0) / 1000;

// Nothing held, and the server answers.
await sleep(200);
const list = await call('GET /v1/contexts', '/v1/contexts', { method: 'GET' });
const leftover = list?.json?.data?.length;
const metrics = (await call('GET /metrics', '/metrics', { method: 'GET' }))?.text ?? '';
const metric = (name) => Number(metrics.match(new RegExp(`^${name} ([0-9.e+]+)$`, 'm'))?.[1]);

// --- summary --------------------------------------------------------------------------------------------
const pct = (a, p) => {
  const s = [...a].sort((x, y) => x - y);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))] ?? NaN;
};
const fmtStatuses = (m) => [...m].sort((a, b) => String(a[0]).localeCompare(String(b[0]))).map(([s, n]) => `${s}:${n}`).join(' ');
let requests = 0;
console.log(`\n${'route'.padEnd(48)} ${'count'.padStart(6)} ${'p50 ms'.padStart(8)} ${'p99 ms'.padStart(8)}  statuses`);
for (const [route, r] of [...routes].sort((a, b) => b[1].n - a[1].n)) {
  requests += r.n;
  console.log(`${route.padEnd(48)} ${String(r.n).padStart(6)} ${pct(r.ms, 50).toFixed(0).padStart(8)} ${pct(r.ms, 99).toFixed(0).padStart(8)}  ${fmtStatuses(r.statuses)}`);
}
const all = [...routes.values()].flatMap((r) => r.ms);
console.log(`${'all'.padEnd(48)} ${String(requests).padStart(6)} ${pct(all, 50).toFixed(0).padStart(8)} ${pct(all, 99).toFixed(0).padStart(8)}  ${fmtStatuses(statuses)}`);
console.log(`${(requests / elapsed).toFixed(1)} requests/s over ${elapsed.toFixed(1)} s; ${metric('llamay_completion_tokens_total')} tokens generated; ` +
  `${metric('llamay_kv_pages_live')} KV pages live at the end, ${metric('llamay_prefix_tree_evictions_total')} prefix-tree evictions`);
const first = rss.filter(([t]) => t <= WINDOW_S).map(([, m]) => m);
const last = rss.filter(([t]) => t >= elapsed - WINDOW_S).map(([, m]) => m);
const maxOf = (a) => Math.max(...a);
console.log(`VmRSS MiB: start ${rss[0]?.[1].toFixed(1)}, max of the first ${WINDOW_S} s ${maxOf(first).toFixed(1)}, ` +
  `max of the last ${WINDOW_S} s ${maxOf(last).toFixed(1)}, max ${maxOf(rss.map(([, m]) => m)).toFixed(1)} (${rss.length} samples)`);
const every10 = [];
for (let t = 10; t <= elapsed + 0.01; t += 10) every10.push(maxOf(rss.filter(([s]) => s > t - 10 && s <= t).map(([, m]) => m)).toFixed(0));
console.log(`VmRSS MiB, max of each 10 s: ${every10.join(' ')}`);

// --- verdict --------------------------------------------------------------------------------------------
const checks = [
  ['no 5xx, transport error or unexpected status', problems.length === 0, problems.join('\n  ')],
  ['every client got through requests of each kind', routes.size >= 14 && requests >= CLIENTS * 5, `${routes.size} routes, ${requests} requests`],
  ['the server still answers /health and /v1/contexts', list?.status === 200 && metrics.length > 0, ''],
  ['every context a client made was deleted: nothing held', leftover === 0 && metric('llamay_contexts_held') === 0, `${leftover} contexts listed`],
];
if (RSS_CHECKS) {
  checks.push([`VmRSS stayed under ${RSS_LIMIT_MIB} MiB`, rss.length > 10 && maxOf(rss.map(([, m]) => m)) < RSS_LIMIT_MIB, '']);
  checks.push([`VmRSS did not grow: last ${WINDOW_S} s max <= first ${WINDOW_S} s max + ${RSS_GROWTH_MIB} MiB`,
    first.length > 0 && last.length > 0 && maxOf(last) <= maxOf(first) + RSS_GROWTH_MIB, `${maxOf(first).toFixed(1)} -> ${maxOf(last).toFixed(1)} MiB`]);
} else {
  console.log('VmRSS not judged (SOAK_RSS_CHECKS=0: a sanitizer build)');
}
let failed = 0;
for (const [what, ok, detail] of checks) {
  console.log(`${ok ? 'ok  ' : 'FAIL'} ${what}${!ok && detail ? `\n  ${detail}` : ''}`);
  if (!ok) failed++;
}
console.log(`${checks.length - failed} passed, ${failed} failed`);
process.exit(failed ? 1 : 0);
