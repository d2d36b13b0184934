// Bad input end to end, with plain fetch: malformed JSON, wrong types, unknown ids, corrupt and truncated
// snapshots, a snapshot from other weights (409 snapshot_wrong_model, distinct from a damaged file's 400),
// oversized bodies (413), fork n out of range, and clients that disconnect mid-stream. Each gets its own
// 4xx error object; afterwards the server is healthy, a context another client holds is unchanged (token
// count and continuation), and no request ever got a 5xx. Run by run.sh (ctest -L e2e).
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { BIN, SHARED, TMP, URL_MAIN as U, http, serverErrors, startServer, sleep } from './lib/server.mjs';

const json = (o) => ({ body: o });
const raw = (s, type = 'application/json') => ({ body: s, headers: { 'content-type': type } });

// Asserts an OpenAI error object with this status (and code, when given).
function assertError(r, status, what, code) {
  assert.equal(r.status, status, `${what}: status ${r.status}, body ${r.text?.slice(0, 300)}`);
  assert.ok(r.json?.error, `${what}: no error object in ${r.text?.slice(0, 300)}`);
  assert.equal(typeof r.json.error.message, 'string', `${what}: error.message`);
  assert.ok(r.json.error.message.length > 0, `${what}: empty error.message`);
  assert.equal(typeof r.json.error.type, 'string', `${what}: error.type`);
  if (code !== undefined) assert.equal(r.json.error.code, code, `${what}: error.code (${r.json.error.message})`);
}

async function newContext(url, prompt) {
  const r = await http(`${url}/v1/contexts`, json({ prompt }));
  assert.equal(r.status, 200, r.text);
  return r.json;
}
async function tokensOf(url, id) {
  const r = await http(`${url}/v1/contexts`);
  assert.equal(r.status, 200);
  return r.json.data.find((c) => c.id === id);
}
const MORE = [70, 71, 72, 73];
async function continueSession(url, id, max = 16) {
  const r = await http(`${url}/v1/completions`, json({ prompt: MORE, max_tokens: max, temperature: 0, logprobs: 1, llamay_session: id }));
  assert.equal(r.status, 200, `continue ${id}: ${r.text}`);
  return { text: r.json.choices[0].text, logprobs: JSON.stringify(r.json.choices[0].logprobs) };
}

// A context held by "another client" all along: it must come through every test below unchanged. Its
// fork, continued now, is the reference continuation.
let held, heldTokens, heldWant;
test('setup: a context another client holds, and its reference continuation', async () => {
  held = await newContext(U, 'Another client holds this context while everything below goes wrong.');
  heldTokens = held.tokens;
  const f = await http(`${U}/v1/contexts/${held.id}/fork?n=1`, { method: 'POST' });
  assert.equal(f.status, 200, f.text);
  heldWant = await continueSession(U, f.json.branches[0].id);
  assert.ok(heldWant.text.length > 0);
  assert.equal((await http(`${U}/v1/contexts/${f.json.branches[0].id}`, { method: 'DELETE' })).status, 200);
});

test('malformed JSON is a 400 error object on every JSON route', async () => {
  const bodies = ['{not json', '{"prompt": "x"', '{"prompt": "x"}}', '\u0000\u00ff', "{'prompt': 'x'}", '{"prompt": "x",}'];
  for (const route of ['/v1/completions', '/v1/chat/completions', '/v1/contexts']) {
    for (const b of bodies) assertError(await http(`${U}${route}`, raw(b)), 400, `${route} ${JSON.stringify(b)}`);
    // Valid JSON that is not an object.
    for (const b of ['null', '[1,2]', '"a string"', '42', 'true']) assertError(await http(`${U}${route}`, raw(b)), 400, `${route} ${b}`);
  }
  // No body at all is a 400 for completions (it is an empty context for /v1/contexts).
  assertError(await http(`${U}/v1/completions`, { method: 'POST' }), 400, 'completions without a body');
  assertError(await http(`${U}/v1/chat/completions`, raw('')), 400, 'chat with an empty body');
});

test('wrong types and out-of-range values are 400s', async () => {
  const completions = [
    { prompt: 5 }, { prompt: {} }, { prompt: [] }, { prompt: [1, 'a'] }, { prompt: [1.5] }, { prompt: [-1] },
    { prompt: [99999] }, { prompt: [4294967298] }, { prompt: ['a', 'b'] }, { prompt: true },
    { prompt: 'x', max_tokens: '10' }, { prompt: 'x', max_tokens: -1 }, { prompt: 'x', max_tokens: 1.5 },
    { prompt: 'x', max_tokens: 2e6 }, { prompt: 'x', n: 0 }, { prompt: 'x', n: 65 }, { prompt: 'x', n: '2' },
    { prompt: 'x', n: 1.5 }, { prompt: 'x', temperature: 'hot' }, { prompt: 'x', temperature: -2 },
    { prompt: 'x', top_p: 'x' }, { prompt: 'x', top_k: 'x' }, { prompt: 'x', frequency_penalty: [] },
    { prompt: 'x', stop: 5 }, { prompt: 'x', stop: [1] }, { prompt: 'x', stop: ['a', 'b', 'c', 'd', 'e'] },
    { prompt: 'x', stop: [''] }, { prompt: 'x', stream: 'yes' }, { prompt: 'x', llamay_session: 5 },
    { prompt: 'x', llamay_retain_prefix: 'yes' }, { prompt: 'x', stream: true, stream_options: { include_usage: 'x' } },
  ];
  // Every case runs; the failures are reported together.
  const failures = [];
  const check = async (route, b) => {
    try {
      assertError(await http(`${U}${route}`, json(b)), 400, `${route} ${JSON.stringify(b)}`);
    } catch (e) {
      failures.push(e.message.split('\n')[0]);
    }
  };
  for (const b of completions) await check('/v1/completions', b);
  const m = [{ role: 'user', content: 'hi' }];
  const chat = [
    {}, { messages: 'x' }, { messages: [] }, { messages: [1] }, { messages: [{}] }, { messages: [{ role: 5 }] },
    { messages: [{ role: 'user', content: 5 }] }, { messages: [{ role: 'user' }] }, { messages: m, logprobs: 'x' },
    { messages: m, logprobs: true, top_logprobs: 50 }, { messages: m, max_completion_tokens: -5 },
    { messages: m, n: 2, llamay_session: held.id },
  ];
  for (const b of chat) await check('/v1/chat/completions', b);
  const contexts = [{ prompt: 5 }, { prompt: ['x'] }, { messages: 'x' }, { messages: [1] }, { prompt: 'x', llamay_retain_prefix: 'yes' }];
  for (const b of contexts) await check('/v1/contexts', b);
  assert.deepEqual(failures, [], `${failures.length} bad requests were not answered with a 400`);
  // null means unset, as OpenAI clients send it.
  const ok = await http(`${U}/v1/completions`, json({ prompt: 'x', max_tokens: 2, temperature: null, stop: null, n: null, seed: null }));
  assert.equal(ok.status, 200, ok.text);
});

test('a session request the engine refuses leaves the session as it was', async () => {
  const s = await newContext(U, 'a session that must survive a bad request');
  const f = await http(`${U}/v1/contexts/${s.id}/fork?n=1`, { method: 'POST' });
  assert.equal(f.status, 200, f.text);
  const want = await continueSession(U, f.json.branches[0].id);
  // Token ids outside the vocabulary pass the HTTP layer's checks and are refused by the engine.
  for (const prompt of [[99999], [70, 98, 99]]) {
    assertError(await http(`${U}/v1/completions`, json({ prompt, max_tokens: 4, llamay_session: s.id })), 400, `session prompt ${prompt}`);
    const listed = await tokensOf(U, s.id);
    assert.ok(listed && !listed.busy, `the session after a refused request: ${JSON.stringify(listed)}`);
    assert.equal(listed.tokens, s.tokens, 'the refused request changed the session');
  }
  assert.deepEqual(await continueSession(U, s.id), want);
  for (const id of [s.id, f.json.branches[0].id]) assert.equal((await http(`${U}/v1/contexts/${id}`, { method: 'DELETE' })).status, 200);
});

test('unknown ids and routes are 404s', async () => {
  for (const id of ['ctx_nope', 'ctx_999999', 'ctx_0', '..', '%2e%2e', 'x'.repeat(4000)]) {
    assertError(await http(`${U}/v1/contexts/${id}/fork?n=2`, { method: 'POST' }), 404, `fork ${id.slice(0, 20)}`);
    assertError(await http(`${U}/v1/contexts/${id}/snapshot`), 404, `snapshot ${id.slice(0, 20)}`);
    assertError(await http(`${U}/v1/contexts/${id}`, { method: 'DELETE' }), 404, `delete ${id.slice(0, 20)}`);
  }
  assertError(await http(`${U}/v1/completions`, json({ prompt: [70], llamay_session: 'ctx_nope' })), 404, 'completion on an unknown session');
  assertError(await http(`${U}/v1/chat/completions`, json({ messages: [{ role: 'user', content: 'x' }], llamay_session: 'ctx_nope' })), 404, 'chat on an unknown session');
  for (const path of ['/v1/nothing', '/v2/completions', '/v1/contexts/a/b/c', '/v1/models/x'])
    assertError(await http(`${U}${path}`), 404, `GET ${path}`);
  const wrongMethod = await http(`${U}/v1/completions`);
  assert.ok(wrongMethod.status >= 400 && wrongMethod.status < 500, `GET /v1/completions: ${wrongMethod.status}`);
});

test('fork n=0, negative, huge or not a number is a 400; the context is unchanged', async () => {
  const c = await newContext(U, 'fork me');
  const before = (await http(`${U}/v1/contexts`)).json.data.length;
  for (const n of ['0', '-1', '257', '1000000', '99999999999999999999', 'abc', '', '1.5', '2x', '0x10'])
    assertError(await http(`${U}/v1/contexts/${c.id}/fork?n=${n}`, { method: 'POST' }), 400, `fork n=${n}`);
  assert.equal((await tokensOf(U, c.id)).tokens, c.tokens);
  assert.equal((await http(`${U}/v1/contexts`)).json.data.length, before, 'no branch was made by a refused fork');
  assert.equal((await http(`${U}/v1/contexts/${c.id}`, { method: 'DELETE' })).status, 200);
});

let snapshot;  // an intact snapshot of the demo model, for the tests below
test('corrupt and truncated snapshots are refused with 400 and their reason', async () => {
  const c = await newContext(U, 'a context to damage in transit');
  const s = await http(`${U}/v1/contexts/${c.id}/snapshot`, { binary: true });
  assert.equal(s.status, 200);
  snapshot = s.bytes;
  assert.ok(snapshot.length > 1000, `snapshot of ${snapshot.length} bytes`);
  const restore = (bytes) => http(`${U}/v1/contexts/restore`, { body: bytes, headers: { 'content-type': 'application/octet-stream' } });
  const flip = (at) => {
    const b = new Uint8Array(snapshot);
    b[at] ^= 0x5a;
    return b;
  };
  assertError(await restore(flip(0)), 400, 'magic flipped', 'snapshot_bad_magic');
  assertError(await restore(flip(snapshot.length >> 1)), 400, 'a byte flipped in the middle', 'snapshot_checksum_mismatch');
  assertError(await restore(flip(snapshot.length - 1)), 400, 'the last byte flipped', 'snapshot_checksum_mismatch');
  // Every damaged byte of the header (128 bytes: lengths, the version, the weight digest, the section
  // table) is a 400 with a snapshot_ code: never a 409 (that says "other weights"), never a 5xx.
  for (let at = 0; at < 128; at++) {
    const r = await restore(flip(at));
    assertError(r, 400, `byte ${at} flipped`);
    assert.match(r.json.error.code, /^snapshot_/, `byte ${at} flipped: code ${r.json.error.code}`);
  }
  for (const n of [0, 1, 7, 8, 16, 64, 100, snapshot.length >> 1, snapshot.length - 4, snapshot.length - 1]) {
    const r = await restore(snapshot.slice(0, n));
    assertError(r, 400, `truncated to ${n} bytes`);
    assert.match(r.json.error.code, /^snapshot_/, `truncated to ${n}`);
    if (n >= 100) assert.equal(r.json.error.code, 'snapshot_truncated', `truncated to ${n}`);
  }
  const garbage = new Uint8Array(4096).map((_, i) => (i * 2654435761) >>> 24);
  assertError(await restore(garbage), 400, 'garbage', 'snapshot_bad_magic');
  assertError(await http(`${U}/v1/contexts/restore`, raw('{"prompt":"not a snapshot"}')), 400, 'JSON instead of a snapshot', 'snapshot_bad_magic');
  // The intact file still restores, and continues as its source does.
  const ok = await restore(snapshot);
  assert.equal(ok.status, 200, ok.text);
  assert.deepEqual(await continueSession(U, ok.json.id), await continueSession(U, c.id));
  for (const id of [c.id, ok.json.id]) assert.equal((await http(`${U}/v1/contexts/${id}`, { method: 'DELETE' })).status, 200);
});

// The demo model written to a file, and a copy whose weights differ (rope base doubled): same geometry,
// other weights, so the digest must differ and nothing else can refuse the snapshot.
function demoVariants() {
  const demo = `${TMP}/demo.gguf`;
  const variant = `${TMP}/demo-variant.gguf`;
  execFileSync(BIN, ['model', 'demo', '-o', demo], { stdio: 'ignore' });
  const b = readFileSync(demo);
  const key = Buffer.from('llama.rope.freq_base');
  const at = b.indexOf(key);
  assert.ok(at > 0, 'llama.rope.freq_base in the demo GGUF');
  assert.equal(b.readUInt32LE(at + key.length), 6, 'llama.rope.freq_base is a float32');
  b.writeFloatLE(b.readFloatLE(at + key.length + 4) * 2, at + key.length + 4);
  writeFileSync(variant, b);
  return { demo, variant };
}

test('a snapshot from other weights is refused with 409 snapshot_wrong_model', async () => {
  const { demo, variant } = demoVariants();
  // The same weights read from a file: accepted.
  const same = await startServer(['-m', demo]);
  const r1 = await http(`${same.url}/v1/contexts/restore`, { body: snapshot });
  assert.equal(r1.status, 200, `the demo GGUF restores the built-in demo's snapshot: ${r1.text}`);
  assert.equal((await same.stop()).code, 0);
  // Other weights of the same shape.
  const other = await startServer(['-m', variant]);
  assertError(await http(`${other.url}/v1/contexts/restore`, { body: snapshot }), 409, 'variant weights', 'snapshot_wrong_model');
  // ... which differs from a damaged file's refusal on the same server.
  const damaged = new Uint8Array(snapshot);
  damaged[damaged.length >> 1] ^= 1;
  assertError(await http(`${other.url}/v1/contexts/restore`, { body: damaged }), 400, 'damaged, on the variant', 'snapshot_checksum_mismatch');
  // And the other way round: the variant's snapshot on the demo server.
  const vc = await newContext(other.url, 'made by the variant');
  const vs = await http(`${other.url}/v1/contexts/${vc.id}/snapshot`, { binary: true });
  assert.equal(vs.status, 200);
  assertError(await http(`${U}/v1/contexts/restore`, { body: vs.bytes }), 409, 'variant snapshot on the demo', 'snapshot_wrong_model');
  assert.equal((await other.stop()).code, 0);
});

const tinyLlama = `${SHARED}/ref/models/tiny-llama-f32.gguf`;
test('a snapshot from another model (tiny-llama) is refused with 409 snapshot_wrong_model', { skip: !existsSync(tinyLlama) && `${tinyLlama} is absent` }, async () => {
  const tiny = await startServer(['-m', tinyLlama]);
  assertError(await http(`${tiny.url}/v1/contexts/restore`, { body: snapshot }), 409, 'demo snapshot on tiny-llama', 'snapshot_wrong_model');
  const tc = await newContext(tiny.url, 'tiny llama context');
  const ts = await http(`${tiny.url}/v1/contexts/${tc.id}/snapshot`, { binary: true });
  assert.equal(ts.status, 200);
  assertError(await http(`${U}/v1/contexts/restore`, { body: ts.bytes }), 409, 'tiny-llama snapshot on the demo', 'snapshot_wrong_model');
  assert.equal((await tiny.stop()).code, 0);
});

test('bodies over --max-body are 413, on every POST route, sized or chunked', async () => {
  const small = await startServer(['--max-body', '1']);
  const big = JSON.stringify({ prompt: 'x', max_tokens: 1, pad: 'p'.repeat(1536 * 1024) });
  for (const route of ['/v1/completions', '/v1/chat/completions', '/v1/contexts', '/v1/contexts/restore'])
    assertError(await http(`${small.url}${route}`, raw(big)), 413, `${route} with 1.5 MiB`);
  // Chunked transfer encoding (no Content-Length): the limit holds as the body arrives.
  const chunked = new ReadableStream({
    start(c) {
      for (let i = 0; i < 24; i++) c.enqueue(new TextEncoder().encode(i === 0 ? '{"prompt":"x","pad":"' : 'q'.repeat(64 * 1024)));
      c.close();
    },
  });
  assertError(await http(`${small.url}/v1/completions`, { body: chunked, headers: { 'content-type': 'application/json' } }), 413, 'chunked 1.5 MiB');
  // Just under the limit is served.
  const fits = await http(`${small.url}/v1/completions`, raw(JSON.stringify({ prompt: 'x', max_tokens: 1, pad: 'p'.repeat(1000 * 1000) })));
  assert.equal(fits.status, 200, fits.text.slice(0, 300));
  assert.equal((await http(`${small.url}/health`)).status, 200);
  assert.equal((await small.stop()).code, 0);
});

// Reads a server-sent-event response until `chunks` data lines have arrived, then aborts it.
async function abortAfter(url, body, chunks) {
  const ac = new AbortController();
  const res = await fetch(url, { method: 'POST', body: JSON.stringify(body), headers: { 'content-type': 'application/json' }, signal: ac.signal });
  assert.equal(res.status, 200);
  const reader = res.body.getReader();
  let seen = 0;
  let text = '';
  while (seen < chunks) {
    const { value, done } = await reader.read();
    assert.ok(!done, 'the stream ended before the client aborted it');
    text += new TextDecoder().decode(value);
    seen = text.split('data: ').length - 1;
  }
  ac.abort();
  await reader.read().catch(() => {});
  return seen;
}

async function metric(url, name) {
  const r = await http(`${url}/metrics`);
  const m = r.text.match(new RegExp(`^${name} ([0-9.e+]+)$`, 'm'));
  return m ? Number(m[1]) : NaN;
}

test('clients that disconnect mid-stream: their work stops, the server stays up, other contexts are unchanged', async () => {
  const own = await newContext(U, 'a session whose client goes away');
  const long = { max_tokens: 3000, temperature: 0, stream: true };
  await Promise.all([
    abortAfter(`${U}/v1/chat/completions`, { ...long, messages: [{ role: 'user', content: 'talk forever' }] }, 3),
    abortAfter(`${U}/v1/completions`, { ...long, prompt: 'and so on', n: 3 }, 5),
    abortAfter(`${U}/v1/completions`, { ...long, prompt: [70, 71], llamay_session: own.id }, 3),
    abortAfter(`${U}/v1/chat/completions`, { ...long, messages: [{ role: 'user', content: 'usage too' }], stream_options: { include_usage: true } }, 1),
  ]);
  // The aborted requests are cancelled, not run to 3000 tokens each.
  let active = NaN;
  for (let i = 0; i < 100; i++) {
    active = await metric(U, 'llamay_requests_active');
    if (active === 0) break;
    await sleep(100);
  }
  assert.equal(active, 0, 'requests still running 10 s after their clients went away');
  // The aborted session's context comes back and serves its next request.
  let back;
  for (let i = 0; i < 100; i++) {
    back = await tokensOf(U, own.id);
    if (back && !back.busy) break;
    await sleep(100);
  }
  assert.ok(back && !back.busy, `the aborted session's context is still busy: ${JSON.stringify(back)}`);
  assert.ok(back.tokens >= own.tokens, `the aborted session holds ${back.tokens} < ${own.tokens} tokens`);
  const again = await http(`${U}/v1/completions`, json({ prompt: [70], max_tokens: 4, temperature: 0, llamay_session: own.id }));
  assert.equal(again.status, 200, again.text);
  assert.equal((await http(`${U}/v1/contexts/${own.id}`, { method: 'DELETE' })).status, 200);
});

test('afterwards: healthy, the held context is unchanged, and no request ever got a 5xx', async () => {
  assert.equal((await http(`${U}/health`)).status, 200);
  assert.equal((await http(`${U}/v1/models`)).status, 200);
  const h = await tokensOf(U, held.id);
  assert.equal(h.tokens, heldTokens, 'the held context kept its token count');
  assert.deepEqual(await continueSession(U, held.id), heldWant, 'the held context continues as it did before');
  const c = await http(`${U}/v1/completions`, json({ prompt: 'still serving', max_tokens: 4, temperature: 0 }));
  assert.equal(c.status, 200);
  assert.equal(c.json.choices.length, 1);
  assert.deepEqual(serverErrors, [], 'requests answered with a 5xx');
});

after(() => {
  if (serverErrors.length) console.error(`5xx responses:\n${serverErrors.join('\n')}`);
});
