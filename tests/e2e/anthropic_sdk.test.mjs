// The Anthropic Messages API through the official `@anthropic-ai/sdk` client: messages.create with the
// usage Claude Code reads (cache_read_input_tokens once the prefix tree holds the conversation),
// messages.stream whose assembled message equals the non-streamed one at temperature 0, the tool_use then
// tool_result round trip (a forced tool through the grammar, so a random-weight model calls it too, with
// input that validates against the tool's schema), countTokens equal to a request's input tokens, and
// the SDK's error classes for bad requests. Whatever model run.sh serves. Run by run.sh.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { URL_MAIN as U, requestTimeout, recordingFetch, serverErrors } from './lib/server.mjs';

const here = path.dirname(fileURLToPath(import.meta.url));
const require = createRequire(path.join(here, 'package.json'));
let Anthropic, Ajv2020;
try {
  Anthropic = require('@anthropic-ai/sdk').default ?? require('@anthropic-ai/sdk');
  Ajv2020 = require('ajv/dist/2020').default;
} catch (e) {
  console.error(`FAIL: @anthropic-ai/sdk and ajv must be installed in tests/e2e/node_modules (${e.code ?? e.message}); run scripts/setup`);
  process.exit(1);
}
const ajv = new Ajv2020({ strict: false, allErrors: true });
const client = new Anthropic({ baseURL: U, apiKey: 'unused', maxRetries: 0, timeout: requestTimeout(120000), fetch: recordingFetch });
const model = (await client.models.list()).data[0].id;

const weather = {
  type: 'object',
  properties: { city: { type: 'string', minLength: 1, maxLength: 12 }, unit: { enum: ['celsius', 'fahrenheit'] } },
  required: ['city', 'unit'], additionalProperties: false,
};
const tools = [{ name: 'get_weather', description: 'The weather in a city', input_schema: weather }];
const validWeather = ajv.compile(weather);

test('messages.create answers with text blocks, and the next turn reads its prefix from the cache', async () => {
  const system = 'You are a terse assistant that answers in one line.';
  const messages = [{ role: 'user', content: 'Name a colour.' }];
  const first = await client.messages.create({ model, system, messages, max_tokens: 12, temperature: 0 });
  assert.equal(first.type, 'message');
  assert.equal(first.role, 'assistant');
  assert.match(first.id, /^msg_/);
  assert.ok(['end_turn', 'max_tokens'].includes(first.stop_reason), first.stop_reason);
  assert.ok(first.content.length >= 1);
  for (const b of first.content) assert.equal(b.type, 'text');
  assert.ok(first.usage.input_tokens > 0);
  assert.ok(first.usage.output_tokens > 0 && first.usage.output_tokens <= 12);
  const text = first.content.map((b) => b.text).join('');
  messages.push({ role: 'assistant', content: text }, { role: 'user', content: 'And another?' });
  const second = await client.messages.create({ model, system, messages, max_tokens: 4, temperature: 0 });
  // The first turn's prompt is in the prefix tree: Anthropic counts it apart from the uncached input.
  assert.ok(second.usage.cache_read_input_tokens >= first.usage.input_tokens,
    `read ${second.usage.cache_read_input_tokens} from the cache; the first prompt had ${first.usage.input_tokens}`);
  assert.ok(second.usage.input_tokens > 0);
});

test('messages.stream assembles the same message as the non-streamed request', async () => {
  const body = { model, messages: [{ role: 'user', content: 'Tell me a story.' }], max_tokens: 24, temperature: 0 };
  const whole = await client.messages.create(body);
  const stream = client.messages.stream(body);
  const kinds = new Set();
  let deltas = '';
  stream.on('streamEvent', (e) => kinds.add(e.type));
  stream.on('text', (t) => (deltas += t));
  const final = await stream.finalMessage();
  for (const k of ['message_start', 'content_block_start', 'content_block_delta', 'content_block_stop', 'message_delta', 'message_stop'])
    assert.ok(kinds.has(k), `no ${k} event (saw ${[...kinds].join(', ')})`);
  assert.deepEqual(final.content, whole.content);
  assert.equal(deltas, whole.content.map((b) => b.text).join(''));
  assert.equal(final.stop_reason, whole.stop_reason);
  assert.equal(final.usage.output_tokens, whole.usage.output_tokens);
});

test('tool_use, then a tool_result in the next turn', async () => {
  const messages = [{ role: 'user', content: 'Weather in Oslo?' }];
  const first = await client.messages.create({ model, messages, tools, tool_choice: { type: 'tool', name: 'get_weather', disable_parallel_tool_use: true },
    max_tokens: 400, temperature: 0.7 });
  assert.equal(first.stop_reason, 'tool_use');
  const uses = first.content.filter((b) => b.type === 'tool_use');
  assert.equal(uses.length, 1);
  assert.match(uses[0].id, /^toolu_/);
  assert.equal(uses[0].name, 'get_weather');
  assert.ok(validWeather(uses[0].input), `${ajv.errorsText(validWeather.errors)}: ${JSON.stringify(uses[0].input)}`);
  messages.push({ role: 'assistant', content: first.content });
  messages.push({ role: 'user', content: [{ type: 'tool_result', tool_use_id: uses[0].id, content: '21 degrees, clear' }] });
  const second = await client.messages.create({ model, messages, tools, tool_choice: { type: 'none' }, max_tokens: 8,
    temperature: 0 });
  assert.ok(['end_turn', 'max_tokens'].includes(second.stop_reason), second.stop_reason);
  assert.equal(second.content.filter((b) => b.type === 'tool_use').length, 0);
  assert.ok(second.usage.cache_read_input_tokens > 0);

  // Streamed, the forced call's input arrives as input_json_delta fragments that parse to the same input.
  const stream = client.messages.stream({ model, messages: messages.slice(0, 1), tools,
    tool_choice: { type: 'tool', name: 'get_weather', disable_parallel_tool_use: true }, max_tokens: 400, temperature: 0 });
  let json = '';
  stream.on('inputJson', (partial) => (json += partial));
  const final = await stream.finalMessage();
  const use = final.content.find((b) => b.type === 'tool_use');
  assert.ok(use, 'no tool_use block streamed');
  assert.deepEqual(JSON.parse(json), use.input);
  assert.equal(final.stop_reason, 'tool_use');
});

test('countTokens equals the input_tokens of the same request', async () => {
  const body = { model, system: 'Be brief.', messages: [{ role: 'user', content: 'What is a token?' }], tools };
  const counted = await client.messages.countTokens(body);
  assert.ok(counted.input_tokens > 0);
  // A fresh system text, so that nothing of it is in the cache.
  const fresh = { ...body, system: `Be brief. ${Date.now()}` };
  const c2 = await client.messages.countTokens(fresh);
  const r = await client.messages.create({ ...fresh, max_tokens: 1, temperature: 0 });
  assert.equal(r.usage.input_tokens + r.usage.cache_read_input_tokens, c2.input_tokens);
});

test('bad requests are the SDK\'s BadRequestError, and images are refused by name', async () => {
  await assert.rejects(client.messages.create({ model, messages: [], max_tokens: 4 }), Anthropic.BadRequestError);
  await assert.rejects(
    client.messages.create({ model, max_tokens: 4, messages: [{ role: 'user', content: [
      { type: 'image', source: { type: 'base64', media_type: 'image/png', data: 'iVBORw0KGgo=' } }] }] }),
    (e) => e instanceof Anthropic.BadRequestError && /image/.test(e.message));
  await assert.rejects(client.messages.create({ model, max_tokens: -1, messages: [{ role: 'user', content: 'x' }] }),
    (e) => e instanceof Anthropic.BadRequestError && /max_tokens/.test(e.message));
});

after(() => assert.deepEqual(serverErrors, [], 'no request got a 5xx'));
