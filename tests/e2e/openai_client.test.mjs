// The official `openai` npm client (v6, pinned in package.json) against `llamay serve` on loopback: chat
// completions, streaming, n > 1, usage (with stream_options.include_usage), legacy completions, stop
// strings, llamay_session, errors as the client's typed exceptions, an API key, and a stream the client
// aborts. Greedy (temperature 0) output is compared exactly across these paths. Run by run.sh.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { URL_MAIN as U, requestTimeout, http, recordingFetch, serverErrors, startServer, sleep } from './lib/server.mjs';

let OpenAI;
try {
  ({ default: OpenAI } = await import('openai'));
} catch (e) {
  console.error(`FAIL: the openai npm package is not installed in tests/e2e/node_modules (${e.code ?? e.message}).\n` +
    'Run scripts/setup (it runs `npm ci` in tests/e2e), or `cd tests/e2e && npm ci`.');
  process.exit(1);
}

// Every response the client gets is recorded, so the last test can assert that none was a 5xx.
const client = new OpenAI({ baseURL: `${U}/v1`, apiKey: 'unused', maxRetries: 0, timeout: requestTimeout(60000), fetch: recordingFetch });
const messages = [{ role: 'user', content: 'Say something about forks.' }];
const MAX = 12;

async function collect(stream) {
  const chunks = [];
  for await (const c of stream) chunks.push(c);
  return chunks;
}

test('models.list names the served model', async () => {
  const ids = [];
  for await (const m of client.models.list()) ids.push(m.id);
  assert.deepEqual(ids, ['llamay-demo']);
});

let whole;  // the greedy chat completion every other path is compared with
test('chat.completions: shape, usage, greedy repeatability and the prefix cache', async () => {
  whole = await client.chat.completions.create({ model: 'llamay-demo', messages, max_tokens: MAX, temperature: 0 });
  assert.match(whole.id, /^chatcmpl-/);
  assert.equal(whole.object, 'chat.completion');
  assert.equal(typeof whole.created, 'number');
  assert.equal(whole.model, 'llamay-demo');
  assert.equal(whole.choices.length, 1);
  const c = whole.choices[0];
  assert.equal(c.index, 0);
  assert.equal(c.message.role, 'assistant');
  assert.equal(typeof c.message.content, 'string');
  assert.ok(c.message.content.length > 0);
  assert.equal(c.finish_reason, 'length');
  const u = whole.usage;
  assert.ok(u.prompt_tokens > 0);
  assert.equal(u.completion_tokens, MAX);
  assert.equal(u.total_tokens, u.prompt_tokens + u.completion_tokens);
  assert.equal(u.prompt_tokens_details.cached_tokens, u.llamay_cached_prompt_tokens);
  // Again: the same text, and the prompt (all but its last token) comes from the prefix cache.
  const again = await client.chat.completions.create({ model: 'llamay-demo', messages, max_tokens: MAX, temperature: 0 });
  assert.equal(again.choices[0].message.content, c.message.content);
  assert.equal(again.usage.prompt_tokens, u.prompt_tokens);
  assert.equal(again.usage.llamay_cached_prompt_tokens, u.prompt_tokens - 1);
  assert.equal(again.usage.prompt_tokens_details.cached_tokens, u.prompt_tokens - 1);
});

test('streaming with stream_options.include_usage: the same text, then one usage chunk', async () => {
  const chunks = await collect(await client.chat.completions.create({
    model: 'llamay-demo', messages, max_tokens: MAX, temperature: 0, stream: true, stream_options: { include_usage: true },
  }));
  assert.ok(chunks.length >= 3, `${chunks.length} chunks`);
  for (const ch of chunks) {
    assert.equal(ch.object, 'chat.completion.chunk');
    assert.equal(ch.id, chunks[0].id);
  }
  assert.equal(chunks[0].choices[0].delta.role, 'assistant');
  const usage = chunks.at(-1);
  assert.deepEqual(usage.choices, []);
  assert.equal(usage.usage.prompt_tokens, whole.usage.prompt_tokens);
  assert.equal(usage.usage.completion_tokens, MAX);
  assert.equal(usage.usage.total_tokens, whole.usage.prompt_tokens + MAX);
  assert.equal(typeof usage.usage.llamay_cached_prompt_tokens, 'number');
  const body = chunks.slice(0, -1);
  assert.ok(body.every((ch) => !ch.usage), 'usage only in the last chunk');
  const text = body.map((ch) => ch.choices[0]?.delta?.content ?? '').join('');
  assert.equal(text, whole.choices[0].message.content);
  const finishes = body.map((ch) => ch.choices[0]?.finish_reason).filter(Boolean);
  assert.deepEqual(finishes, ['length']);
});

test('streaming without stream_options sends no usage chunk', async () => {
  const chunks = await collect(await client.chat.completions.create({ model: 'llamay-demo', messages, max_tokens: MAX, temperature: 0, stream: true }));
  assert.ok(chunks.every((ch) => !ch.usage));
  assert.ok(chunks.every((ch) => ch.choices.length === 1));
  assert.equal(chunks.map((ch) => ch.choices[0].delta.content ?? '').join(''), whole.choices[0].message.content);
});

test('n = 3: three greedy choices, identical to the single one; usage counts all of them', async () => {
  const r = await client.chat.completions.create({ model: 'llamay-demo', messages, max_tokens: MAX, temperature: 0, n: 3 });
  assert.deepEqual(r.choices.map((c) => c.index), [0, 1, 2]);
  for (const c of r.choices) {
    assert.equal(c.message.content, whole.choices[0].message.content);
    assert.equal(c.finish_reason, 'length');
  }
  assert.equal(r.usage.completion_tokens, 3 * MAX);
  assert.equal(r.usage.prompt_tokens, whole.usage.prompt_tokens);
});

test('n = 2 streamed: each index reassembles to the same text; usage counts both', async () => {
  const chunks = await collect(await client.chat.completions.create({
    model: 'llamay-demo', messages, max_tokens: MAX, temperature: 0, n: 2, stream: true, stream_options: { include_usage: true },
  }));
  const text = ['', ''];
  const finish = [[], []];
  for (const ch of chunks) {
    for (const c of ch.choices) {
      text[c.index] += c.delta.content ?? '';
      if (c.finish_reason) finish[c.index].push(c.finish_reason);
    }
  }
  assert.deepEqual(text, [whole.choices[0].message.content, whole.choices[0].message.content]);
  assert.deepEqual(finish, [['length'], ['length']]);
  assert.equal(chunks.at(-1).usage.completion_tokens, 2 * MAX);
});

test('sampling at temperature 0.9 with a seed repeats exactly, choice by choice', async () => {
  const req = { model: 'llamay-demo', messages, max_tokens: MAX, temperature: 0.9, seed: 1234, n: 2 };
  const a = await client.chat.completions.create(req);
  const b = await client.chat.completions.create(req);
  assert.deepEqual(a.choices.map((c) => c.message.content), b.choices.map((c) => c.message.content));
});

test('stop strings cut the text, streamed or not, with finish_reason stop', async () => {
  const full = whole.choices[0].message.content;
  const stop = full.slice(4, 6);
  const want = full.slice(0, full.indexOf(stop));
  const r = await client.chat.completions.create({ model: 'llamay-demo', messages, max_tokens: MAX, temperature: 0, stop: [stop] });
  assert.equal(r.choices[0].message.content, want);
  assert.equal(r.choices[0].finish_reason, 'stop');
  const chunks = await collect(await client.chat.completions.create({ model: 'llamay-demo', messages, max_tokens: MAX, temperature: 0, stop, stream: true }));
  assert.equal(chunks.map((ch) => ch.choices[0]?.delta?.content ?? '').join(''), want);
  assert.equal(chunks.map((ch) => ch.choices[0]?.finish_reason).filter(Boolean).join(), 'stop');
});

test('completions (legacy): string and token-array prompts, n = 2, streaming', async () => {
  const a = await client.completions.create({ model: 'llamay-demo', prompt: 'Once upon a time', max_tokens: MAX, temperature: 0 });
  assert.equal(a.object, 'text_completion');
  assert.equal(a.choices[0].finish_reason, 'length');
  assert.equal(a.usage.completion_tokens, MAX);
  const ids = [1, 51, 82, 71];  // <s> O n c (the demo's byte tokens: printable ASCII c is c - 28)
  const b = await client.completions.create({ model: 'llamay-demo', prompt: ids, max_tokens: MAX, temperature: 0, n: 2 });
  assert.equal(b.usage.prompt_tokens, ids.length);
  assert.equal(b.choices.length, 2);
  assert.equal(b.choices[0].text, b.choices[1].text);
  const chunks = await collect(await client.completions.create({ model: 'llamay-demo', prompt: ids, max_tokens: MAX, temperature: 0, stream: true }));
  assert.equal(chunks.map((ch) => ch.choices[0]?.text ?? '').join(''), b.choices[0].text);
});

test('llamay_session through the client: cached prompt tokens, forks continue alike', async () => {
  const ctx = await http(`${U}/v1/contexts`, { body: { messages: [{ role: 'system', content: 'You are a forking assistant.' }] } });
  assert.equal(ctx.status, 200, ctx.text);
  const fork = await http(`${U}/v1/contexts/${ctx.json.id}/fork?n=2`, { method: 'POST' });
  assert.equal(fork.status, 200, fork.text);
  const turn = (id) => client.chat.completions.create({ model: 'llamay-demo', messages, max_tokens: MAX, temperature: 0, llamay_session: id });
  const p = await turn(ctx.json.id);
  assert.ok(p.usage.llamay_cached_prompt_tokens >= ctx.json.tokens - 1, `${p.usage.llamay_cached_prompt_tokens} cached of a ${ctx.json.tokens}-token context`);
  for (const b of fork.json.branches) assert.equal((await turn(b.id)).choices[0].message.content, p.choices[0].message.content);
  // A streamed second turn on the parent and one on a branch: still alike.
  const s1 = await collect(await client.chat.completions.create({ model: 'llamay-demo', messages, max_tokens: MAX, temperature: 0, stream: true, llamay_session: ctx.json.id }));
  const s2 = await collect(await client.chat.completions.create({ model: 'llamay-demo', messages, max_tokens: MAX, temperature: 0, stream: true, llamay_session: fork.json.branches[0].id }));
  const join = (cs) => cs.map((ch) => ch.choices[0]?.delta?.content ?? '').join('');
  assert.equal(join(s1), join(s2));
  for (const id of [ctx.json.id, ...fork.json.branches.map((b) => b.id)])
    assert.equal((await http(`${U}/v1/contexts/${id}`, { method: 'DELETE' })).status, 200);
});

test('errors arrive as the client\'s typed exceptions', async () => {
  await assert.rejects(client.chat.completions.create({ model: 'llamay-demo', messages, temperature: -2 }), (e) => {
    assert.ok(e instanceof OpenAI.BadRequestError, e.constructor.name);
    assert.equal(e.status, 400);
    assert.equal(e.type, 'invalid_request_error');
    return true;
  });
  await assert.rejects(client.chat.completions.create({ model: 'llamay-demo', messages: [] }), OpenAI.BadRequestError);
  await assert.rejects(client.chat.completions.create({ model: 'llamay-demo', messages, llamay_session: 'ctx_none' }), (e) => {
    assert.ok(e instanceof OpenAI.NotFoundError, e.constructor.name);
    return true;
  });
  await assert.rejects(client.chat.completions.create({ model: 'llamay-demo', messages, n: 100 }), OpenAI.BadRequestError);
});

test('an API key: a wrong one is AuthenticationError, the right one works', async () => {
  const s = await startServer(['--api-key', 'sekrit']);
  const wrong = new OpenAI({ baseURL: `${s.url}/v1`, apiKey: 'nope', maxRetries: 0, fetch: recordingFetch });
  await assert.rejects(wrong.chat.completions.create({ model: 'llamay-demo', messages, max_tokens: 2 }), OpenAI.AuthenticationError);
  const right = new OpenAI({ baseURL: `${s.url}/v1`, apiKey: 'sekrit', maxRetries: 0, fetch: recordingFetch });
  const r = await right.chat.completions.create({ model: 'llamay-demo', messages, max_tokens: MAX, temperature: 0 });
  assert.equal(r.choices[0].message.content, whole.choices[0].message.content);
  assert.equal((await s.stop()).code, 0);
});

test('a stream the client aborts stops on the server; the server keeps serving', async () => {
  const stream = await client.chat.completions.create({ model: 'llamay-demo', messages, max_tokens: 3000, temperature: 0, stream: true });
  let n = 0;
  for await (const ch of stream) {
    if (++n === 3) {
      stream.controller.abort();
      break;
    }
  }
  assert.equal(n, 3);
  let active = NaN;
  for (let i = 0; i < 100 && active !== 0; i++) {
    const m = (await http(`${U}/metrics`)).text.match(/^llamay_requests_active ([0-9.]+)$/m);
    active = m ? Number(m[1]) : NaN;
    if (active !== 0) await sleep(100);
  }
  assert.equal(active, 0, 'the aborted request still runs');
  const r = await client.chat.completions.create({ model: 'llamay-demo', messages, max_tokens: MAX, temperature: 0 });
  assert.equal(r.choices[0].message.content, whole.choices[0].message.content);
});

test('no response was a 5xx', () => {
  assert.deepEqual(serverErrors, []);
});

after(() => {
  if (serverErrors.length) console.error(`5xx responses:\n${serverErrors.join('\n')}`);
});
