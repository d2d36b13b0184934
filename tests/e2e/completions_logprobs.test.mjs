// The official `openai` npm client (v6) on /v1/completions logprobs, `echo` and their streaming: the
// fields of CompletionChoice.Logprobs (tokens, token_logprobs, top_logprobs, text_offset) streamed and not,
// echo with max_tokens 0 (how lm-evaluation-harness scores) and with generation, n > 1 with logprobs, and
// the chat route's streamed logprobs. On stories260K (when ../shared has it), the echoed logprobs rank a
// right continuation above a scrambled one. Run by run.sh against the demo model.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { URL_MAIN as U, requestTimeout, SHARED, record, serverErrors, startServer } from './lib/server.mjs';

let OpenAI;
try {
  ({ default: OpenAI } = await import('openai'));
} catch (e) {
  console.error(`FAIL: the openai npm package is not installed in tests/e2e/node_modules (${e.code ?? e.message}).\n` +
    'Run scripts/setup (it runs `npm ci` in tests/e2e), or `cd tests/e2e && npm ci`.');
  process.exit(1);
}

const recordingFetch = async (url, init) => {
  const res = await fetch(url, init);
  record(init?.method ?? 'GET', String(url), res.status);
  return res;
};
const clientFor = (url) => new OpenAI({ baseURL: `${url}/v1`, apiKey: 'unused', maxRetries: 0, timeout: requestTimeout(60000), fetch: recordingFetch });
const client = clientFor(U);
const model = 'llamay-demo';
const prompt = 'Once upon a time';

// CompletionChoice.Logprobs: four arrays of one length; each top_logprobs object holds its token.
function checkLogprobs(lp, n, top, { echoed = 0 } = {}) {
  assert.ok(lp && typeof lp === 'object', `logprobs: ${JSON.stringify(lp)}`);
  assert.equal(lp.content, undefined, 'the chat format on the completions route');
  for (const k of ['tokens', 'token_logprobs', 'top_logprobs', 'text_offset']) {
    assert.ok(Array.isArray(lp[k]), k);
    assert.equal(lp[k].length, n, k);
  }
  lp.tokens.forEach((t, i) => {
    assert.equal(typeof t, 'string');
    assert.equal(typeof lp.text_offset[i], 'number');
    if (i > 0) assert.ok(lp.text_offset[i] >= lp.text_offset[i - 1]);
    if (echoed > 0 && i === 0) {
      assert.equal(lp.token_logprobs[0], null);
      assert.equal(lp.top_logprobs[0], null);
      return;
    }
    assert.equal(typeof lp.token_logprobs[i], 'number');
    assert.ok(lp.token_logprobs[i] <= 0);
    const keys = Object.keys(lp.top_logprobs[i]);
    assert.ok(keys.length >= Math.min(top, 1) && keys.length <= top + 1, `${keys.length} alternatives`);
    assert.equal(lp.top_logprobs[i][t], lp.token_logprobs[i]);
  });
}

async function collect(stream) {
  const chunks = [];
  for await (const c of stream) chunks.push(c);
  return chunks;
}

// The chunks' logprobs of each choice, appended.
function mergeChunks(chunks, n) {
  const merged = Array.from({ length: n }, () => ({ text: '', tokens: [], token_logprobs: [], top_logprobs: [], text_offset: [] }));
  for (const ch of chunks) {
    for (const c of ch.choices) {
      const m = merged[c.index];
      m.text += c.text;
      if (!c.logprobs) continue;
      for (const k of ['tokens', 'token_logprobs', 'top_logprobs', 'text_offset']) m[k].push(...c.logprobs[k]);
    }
  }
  return merged;
}

let plain;  // greedy, 8 tokens, logprobs 3, no echo
test('completions logprobs: the Completions API fields', async () => {
  plain = await client.completions.create({ model, prompt, max_tokens: 8, temperature: 0, logprobs: 3 });
  const c = plain.choices[0];
  checkLogprobs(c.logprobs, 8, 3);
  assert.equal(c.logprobs.tokens.join(''), c.text);
  assert.equal(c.logprobs.text_offset[0], 0);
  const none = await client.completions.create({ model, prompt, max_tokens: 2, temperature: 0 });
  assert.equal(none.choices[0].logprobs, null);
});

test('completions logprobs streamed: each chunk carries its tokens', async () => {
  const chunks = await collect(await client.completions.create({ model, prompt, max_tokens: 8, temperature: 0, logprobs: 3, stream: true }));
  assert.ok(chunks.filter((ch) => ch.choices[0]?.logprobs).length >= 2, 'logprobs in one chunk only');
  const [m] = mergeChunks(chunks, 1);
  assert.equal(m.text, plain.choices[0].text);
  const { text, ...lp } = m;
  assert.deepEqual(lp, plain.choices[0].logprobs);
});

test('echo with max_tokens 0: the prompt and its logprobs, first null', async () => {
  const r = await client.completions.create({ model, prompt, max_tokens: 0, echo: true, logprobs: 1 });
  const c = r.choices[0];
  assert.equal(c.text, prompt);
  assert.equal(c.finish_reason, 'length');
  assert.equal(r.usage.completion_tokens, 0);
  checkLogprobs(c.logprobs, r.usage.prompt_tokens, 1, { echoed: r.usage.prompt_tokens });
  // Streamed: the same.
  const chunks = await collect(await client.completions.create({ model, prompt, max_tokens: 0, echo: true, logprobs: 1, stream: true }));
  const [m] = mergeChunks(chunks, 1);
  assert.equal(m.text, prompt);
  assert.deepEqual(m.token_logprobs, c.logprobs.token_logprobs);
});

test('echo with generation: the prompt, then the same completion and its logprobs', async () => {
  const r = await client.completions.create({ model, prompt, max_tokens: 8, temperature: 0, echo: true, logprobs: 3 });
  const c = r.choices[0];
  assert.equal(c.text, prompt + plain.choices[0].text);
  const n = r.usage.prompt_tokens;
  checkLogprobs(c.logprobs, n + 8, 3, { echoed: n });
  assert.deepEqual(c.logprobs.tokens.slice(n), plain.choices[0].logprobs.tokens);
  assert.deepEqual(c.logprobs.token_logprobs.slice(n), plain.choices[0].logprobs.token_logprobs);
  assert.deepEqual(c.logprobs.text_offset.slice(n), plain.choices[0].logprobs.text_offset.map((o) => o + prompt.length));
  const echoOnly = await client.completions.create({ model, prompt, max_tokens: 8, temperature: 0, echo: true });
  assert.equal(echoOnly.choices[0].text, c.text);
  assert.equal(echoOnly.choices[0].logprobs, null);
});

test('n > 1 with logprobs, echoed or not, streamed or not', async () => {
  for (const echo of [false, true]) {
    const req = { model, prompt, max_tokens: 6, temperature: 0, logprobs: 2, echo, n: 3 };
    const r = await client.completions.create(req);
    assert.deepEqual(r.choices.map((c) => c.index), [0, 1, 2]);
    const n = echo ? r.usage.prompt_tokens : 0;
    for (const c of r.choices) {
      checkLogprobs(c.logprobs, n + 6, 2, { echoed: n });
      assert.deepEqual(c.logprobs, r.choices[0].logprobs);
    }
    const merged = mergeChunks(await collect(await client.completions.create({ ...req, stream: true })), 3);
    merged.forEach(({ text, ...lp }, i) => {
      assert.equal(text, r.choices[i].text);
      assert.deepEqual(lp, r.choices[i].logprobs);
    });
  }
});

test('chat logprobs streamed: choices[0].logprobs.content, chunk by chunk', async () => {
  const req = { model, messages: [{ role: 'user', content: 'hi' }], max_tokens: 6, temperature: 0, logprobs: true, top_logprobs: 2 };
  const whole = await client.chat.completions.create(req);
  const content = whole.choices[0].logprobs.content;
  assert.equal(content.length, 6);
  for (const e of content) {
    assert.equal(typeof e.token, 'string');
    assert.equal(typeof e.logprob, 'number');
    assert.ok(Array.isArray(e.bytes));
    assert.equal(e.top_logprobs.length, 2);
  }
  const chunks = await collect(await client.chat.completions.create({ ...req, stream: true }));
  const streamed = chunks.flatMap((ch) => ch.choices[0]?.logprobs?.content ?? []);
  assert.deepEqual(streamed, content);
});

const stories = `${SHARED}/ref/models/stories260K.gguf`;
test('stories260K: echoed logprobs rank the right continuation first', { skip: !existsSync(stories) && `${stories} is absent` }, async () => {
  const s = await startServer(['-m', stories]);
  try {
    const c = clientFor(s.url);
    const context = 'Once upon a time,';
    const ctx = await c.completions.create({ model: 'stories260K', prompt: context, max_tokens: 0, echo: true, logprobs: 0 });
    const ctxlen = ctx.usage.prompt_tokens;
    const score = async (text) => {
      const r = await c.completions.create({ model: 'stories260K', prompt: text, max_tokens: 0, echo: true, logprobs: 1 });
      assert.equal(r.choices[0].text, text);
      assert.deepEqual(r.choices[0].logprobs.tokens.slice(0, ctxlen), ctx.choices[0].logprobs.tokens);
      return r.choices[0].logprobs.token_logprobs.slice(ctxlen).reduce((a, b) => a + b, 0);
    };
    const right = await score(`${context} there was a little girl`);
    const wrong = await score(`${context} girl little a was there`);
    assert.ok(right > wrong + 5, `right ${right} vs wrong ${wrong}`);
  } finally {
    assert.equal((await s.stop()).code, 0);
  }
});

test('no response was a 5xx', () => {
  assert.deepEqual(serverErrors, []);
});

after(() => {
  if (serverErrors.length) console.error(`5xx responses:\n${serverErrors.join('\n')}`);
});
