// The Responses API through the official `openai` client and the OpenAI Agents SDK: responses.create,
// streamed and not (the streamed events assemble into the non-streamed response at temperature 0);
// previous_response_id continuing a stored response with cached_tokens > 0, retrieved, counted by
// input_tokens and deleted; the function-call round trip;
// a custom tool whose input follows its grammar; text.format; and an Agents SDK agent loop with a
// function tool over both of its model classes (Responses and Chat Completions). Whatever model run.sh
// serves. Run by run.sh.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { URL_MAIN as U, requestTimeout, recordingFetch, serverErrors } from './lib/server.mjs';

const here = path.dirname(fileURLToPath(import.meta.url));
const require = createRequire(path.join(here, 'package.json'));
let OpenAI, agents, z;
try {
  OpenAI = require('openai').default ?? require('openai');
  agents = await import(require.resolve('@openai/agents'));
  z = require('zod');
} catch (e) {
  console.error(`FAIL: openai, @openai/agents and zod must be installed in tests/e2e/node_modules (${e.code ?? e.message}); run scripts/setup`);
  process.exit(1);
}
const client = new OpenAI({ baseURL: `${U}/v1`, apiKey: 'unused', maxRetries: 0, timeout: requestTimeout(120000), fetch: recordingFetch });
const model = (await client.models.list()).data[0].id;
const instructions = 'You are a careful assistant. Answer in one short sentence, and use the tools when they help.';

const weatherTool = {
  type: 'function', name: 'get_weather', description: 'The weather in a city', strict: true,
  parameters: { type: 'object', properties: { city: { type: 'string', minLength: 1, maxLength: 12 } },
    required: ['city'], additionalProperties: false },
};

test('responses.create: a message, and the same response streamed', async () => {
  const body = { model, instructions, input: 'Name a colour.', max_output_tokens: 16, temperature: 0 };
  const whole = await client.responses.create(body);
  assert.equal(whole.object, 'response');
  assert.match(whole.id, /^resp_/);
  assert.ok(['completed', 'incomplete'].includes(whole.status), whole.status);
  assert.equal(whole.output.filter((i) => i.type === 'message').length, 1);
  assert.equal(typeof whole.output_text, 'string');
  assert.ok(whole.usage.input_tokens > 0 && whole.usage.output_tokens > 0);

  const stream = await client.responses.create({ ...body, stream: true });
  let text = '', last = -1, final = null;
  const kinds = new Set();
  for await (const e of stream) {
    kinds.add(e.type);
    assert.equal(e.sequence_number, last + 1);
    last = e.sequence_number;
    if (e.type === 'response.output_text.delta') text += e.delta;
    if (e.type === 'response.completed' || e.type === 'response.incomplete') final = e.response;
  }
  for (const k of ['response.created', 'response.in_progress', 'response.output_item.added', 'response.output_text.delta',
    'response.output_text.done', 'response.output_item.done'])
    assert.ok(kinds.has(k), `no ${k} (saw ${[...kinds].join(', ')})`);
  assert.equal(text, whole.output_text);
  assert.equal(final.output_text ?? final.output.find((i) => i.type === 'message').content[0].text, whole.output_text);
  // The usage but the cached tokens (the streamed request reads the first one's prompt from the tree).
  assert.equal(final.usage.input_tokens, whole.usage.input_tokens);
  assert.equal(final.usage.output_tokens, whole.usage.output_tokens);
  assert.ok(final.usage.input_tokens_details.cached_tokens > 0);

  // The SDK's streaming helper reads the same events.
  const helper = client.responses.stream(body);
  const done = await helper.finalResponse();
  assert.equal(done.output_text, whole.output_text);
});

test('previous_response_id continues the stored response: only the new input is prefilled', async () => {
  const first = await client.responses.create({ model, instructions, input: 'Hello!', max_output_tokens: 8, temperature: 0 });
  const second = await client.responses.create({ model, previous_response_id: first.id, input: 'And then?',
    max_output_tokens: 8, temperature: 0 });
  assert.equal(second.previous_response_id, first.id);
  const cached = second.usage.input_tokens_details.cached_tokens;
  assert.ok(cached >= first.usage.input_tokens, `cached ${cached} of the first turn's ${first.usage.input_tokens}`);
  // The new user turn only: a fraction of the first prompt (the instructions are not prefilled again).
  assert.ok(second.usage.input_tokens - cached < first.usage.input_tokens / 2, JSON.stringify(second.usage));
  await assert.rejects(client.responses.create({ model, previous_response_id: 'resp_nope', input: 'x' }),
    (e) => e instanceof OpenAI.NotFoundError && e.code === 'previous_response_not_found');
  // input_tokens counts what the turn reports, without running it; retrieve gives the response as answered
  // until it is deleted.
  const counted = await client.responses.inputTokens.count({ model, previous_response_id: first.id, input: 'And then?' });
  assert.equal(counted.input_tokens, second.usage.input_tokens);
  const got = await client.responses.retrieve(first.id);
  assert.equal(got.id, first.id);
  assert.equal(got.output_text, first.output_text);
  assert.deepEqual(got.usage, first.usage);
  await client.responses.delete(first.id);
  await assert.rejects(client.responses.retrieve(first.id), (e) => e instanceof OpenAI.NotFoundError);
});

test('the function-call round trip', async () => {
  const first = await client.responses.create({ model, instructions, input: 'Weather in Oslo?', tools: [weatherTool],
    tool_choice: 'required', parallel_tool_calls: false, max_output_tokens: 200, temperature: 0.7 });
  const calls = first.output.filter((i) => i.type === 'function_call');
  assert.equal(calls.length >= 1, true, JSON.stringify(first.output));
  const call = calls[0];
  assert.equal(call.name, 'get_weather');
  assert.match(call.call_id, /^call_/);
  const args = JSON.parse(call.arguments);
  assert.equal(typeof args.city, 'string');
  assert.ok(args.city.length >= 1 && args.city.length <= 12);
  const second = await client.responses.create({ model, previous_response_id: first.id, tools: [weatherTool],
    input: calls.map((c) => ({ type: 'function_call_output', call_id: c.call_id, output: '21 degrees and clear' })),
    max_output_tokens: 8, temperature: 0 });
  assert.ok(second.usage.input_tokens_details.cached_tokens >= first.usage.input_tokens);
  // Stateless, as Codex sends it (store: false, the whole history as items).
  const stateless = await client.responses.create({ model, instructions, store: false, tools: [weatherTool],
    input: [{ role: 'user', content: 'Weather in Oslo?' }, ...calls,
      ...calls.map((c) => ({ type: 'function_call_output', call_id: c.call_id, output: '21 degrees and clear' }))],
    max_output_tokens: 8, temperature: 0 });
  assert.ok(stateless.usage.input_tokens_details.cached_tokens > 0);
});

test('a custom tool: its input follows the grammar', async () => {
  const tool = { type: 'custom', name: 'set_version', description: 'Sets the version',
    format: { type: 'grammar', syntax: 'regex', definition: '^v[0-9]{1,3}\\.[0-9]{1,3}$' } };
  const r = await client.responses.create({ model, input: 'Bump it.', tools: [tool],
    tool_choice: { type: 'custom', name: 'set_version' }, max_output_tokens: 100, temperature: 0.8, seed: 1 });
  const call = r.output.find((i) => i.type === 'custom_tool_call');
  assert.ok(call, JSON.stringify(r.output));
  assert.equal(call.name, 'set_version');
  assert.match(call.input, /^v[0-9]{1,3}\.[0-9]{1,3}$/);
});

test('text.format json_schema constrains the answer', async () => {
  const r = await client.responses.create({ model, input: 'A number, please.', max_output_tokens: 60, temperature: 0.5, seed: 1,
    text: { format: { type: 'json_schema', name: 'n', strict: true,
      schema: { type: 'object', properties: { n: { type: 'integer' } }, required: ['n'], additionalProperties: false } } } });
  if (r.status === 'completed') assert.equal(Number.isInteger(JSON.parse(r.output_text).n), true, r.output_text);
  assert.equal(r.text.format.type, 'json_schema');
});

test('an Agents SDK agent loop with a function tool, over both model classes', async () => {
  agents.setTracingDisabled(true);
  const sdkClient = new OpenAI({ baseURL: `${U}/v1`, apiKey: 'unused', maxRetries: 0, timeout: requestTimeout(120000), fetch: recordingFetch });
  let called = 0;
  const getWeather = agents.tool({
    name: 'get_weather', description: 'The weather in a city',
    parameters: z.object({ city: z.string().max(12) }),
    execute: async ({ city }) => { ++called; return `21 degrees in ${city}`; },
  });
  for (const Model of [agents.OpenAIResponsesModel, agents.OpenAIChatCompletionsModel]) {
    const before = called;
    const agent = new agents.Agent({ name: 'weather', instructions, tools: [getWeather],
      model: new Model(sdkClient, model),
      modelSettings: { toolChoice: 'required', parallelToolCalls: false, maxTokens: 300, temperature: 0.7 },
      // After the first call the loop ends, so that a tiny model's answer need not be sensible.
      toolUseBehavior: 'stop_on_first_tool' });
    const result = await agents.run(agent, 'What is the weather in Oslo?', { maxTurns: 3 });
    assert.ok(called > before, `${Model.name}: the tool was not called`);
    assert.match(String(result.finalOutput), /^21 degrees in /, `${Model.name}: ${result.finalOutput}`);
  }
});

after(() => assert.deepEqual(serverErrors, [], 'no request got a 5xx'));
