// Tool calls through the official `openai` client, the agent loop: a request with tools gets tool_calls
// (tool_choice "required" or a named function forces a call through the grammar, so a random-weight model
// makes one too), the arguments validate against the function's schema (ajv), the call and a `tool`
// result go back in the next turn, which prefills only what is new (the prefix tree) and answers; streamed
// tool-call deltas assembled by the client equal the non-streamed call; malformed tools and tool_choice
// are BadRequestErrors and the server stays up; with a response format too, "auto" answers with valid calls
// or JSON that validates. Whatever model run.sh serves. Run by run.sh.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { URL_MAIN as U, requestTimeout, recordingFetch, serverErrors } from './lib/server.mjs';

const here = path.dirname(fileURLToPath(import.meta.url));
const require = createRequire(path.join(here, 'package.json'));
let OpenAI, Ajv2020;
try {
  OpenAI = require('openai').default ?? require('openai');
  Ajv2020 = require('ajv/dist/2020').default;
} catch (e) {
  console.error(`FAIL: openai and ajv must be installed in tests/e2e/node_modules (${e.code ?? e.message}); run scripts/setup`);
  process.exit(1);
}
const ajv = new Ajv2020({ strict: false, allErrors: true });
const client = new OpenAI({ baseURL: `${U}/v1`, apiKey: 'unused', maxRetries: 0, timeout: requestTimeout(120000), fetch: recordingFetch });
const model = (await client.models.list()).data[0].id;
const SEEDS = Number(process.env.STRUCTURED_SEEDS ?? 8);  // fewer under sanitizers

const weather = {
  type: 'object',
  properties: { city: { type: 'string', minLength: 1, maxLength: 12 }, unit: { enum: ['celsius', 'fahrenheit'] } },
  required: ['city', 'unit'], additionalProperties: false,
};
const search = {
  type: 'object', properties: { query: { type: 'string', maxLength: 20 }, limit: { type: 'integer', minimum: 1, maximum: 5 } },
  required: ['query'], additionalProperties: false,
};
const tools = [
  { type: 'function', function: { name: 'get_weather', description: 'The weather in a city', parameters: weather } },
  { type: 'function', function: { name: 'search', description: 'Search the web', parameters: search } },
];
const schemaOf = { get_weather: ajv.compile(weather), search: ajv.compile(search) };

function checkCall(call, where) {
  assert.match(call.id, /^call_[A-Za-z0-9]{24}$/, where);
  assert.equal(call.type, 'function', where);
  assert.ok(call.function.name in schemaOf, `${where}: unknown function ${call.function.name}`);
  const args = JSON.parse(call.function.arguments);
  const validate = schemaOf[call.function.name];
  assert.ok(validate(args), `${where}: ${ajv.errorsText(validate.errors)}: ${call.function.arguments}`);
}

test('the agent loop: tool_calls, a tool result, an answer; the next turn prefills only what is new', async () => {
  const messages = [{ role: 'system', content: 'You are a helpful agent.' }, { role: 'user', content: 'Weather in Oslo?' }];
  const first = await client.chat.completions.create({ model, messages, tools, tool_choice: 'required',
    max_tokens: 600, temperature: 0.7, seed: 3 });
  const c = first.choices[0];
  assert.equal(c.finish_reason, 'tool_calls');
  assert.equal(c.message.content, null);
  assert.ok(c.message.tool_calls.length >= 1);
  c.message.tool_calls.forEach((call, i) => checkCall(call, `call ${i}`));
  messages.push(c.message);
  for (const call of c.message.tool_calls)
    messages.push({ role: 'tool', tool_call_id: call.id, content: JSON.stringify({ temperature: 21, sky: 'clear' }) });
  const second = await client.chat.completions.create({ model, messages, tools, tool_choice: 'none',
    max_tokens: 16, temperature: 0 });
  assert.equal(second.choices[0].message.role, 'assistant');
  assert.equal(typeof second.choices[0].message.content, 'string');
  assert.equal(second.choices[0].message.tool_calls, undefined);
  // Everything the first turn's prompt held came from the prefix tree.
  assert.ok(second.usage.prompt_tokens_details.cached_tokens >= first.usage.prompt_tokens,
    `cached ${second.usage.prompt_tokens_details.cached_tokens} of the first prompt's ${first.usage.prompt_tokens}`);
  assert.ok(second.usage.prompt_tokens > first.usage.prompt_tokens);
});

test('a named function is the one called, with valid arguments, whatever the seed', async () => {
  for (let seed = 0; seed < SEEDS; ++seed) {
    const r = await client.chat.completions.create({ model, messages: [{ role: 'user', content: 'find cats' }], tools,
      tool_choice: { type: 'function', function: { name: 'search' } }, parallel_tool_calls: false,
      max_tokens: 600, temperature: 1, seed });
    const c = r.choices[0];
    if (c.finish_reason === 'length') continue;
    assert.equal(c.finish_reason, 'tool_calls');
    assert.equal(c.message.tool_calls.length, 1);
    assert.equal(c.message.tool_calls[0].function.name, 'search');
    checkCall(c.message.tool_calls[0], `seed ${seed}`);
  }
});

test('streamed tool-call deltas assemble into the same call', async () => {
  const body = { model, messages: [{ role: 'user', content: 'Weather in Rome?' }], tools, tool_choice: 'required',
    max_tokens: 600, temperature: 0.9, seed: 12 };
  const whole = (await client.chat.completions.create(body)).choices[0];
  const calls = [];
  let finish = null, content = '', firstDeltas = 0;
  for await (const chunk of await client.chat.completions.create({ ...body, stream: true })) {
    const ch = chunk.choices[0];
    if (!ch) continue;
    content += ch.delta?.content ?? '';
    for (const d of ch.delta?.tool_calls ?? []) {
      if (d.id) {
        // A call's first delta: index, id, type and name.
        ++firstDeltas;
        assert.equal(d.index, calls.length);
        assert.equal(d.type, 'function');
        calls.push({ id: d.id, name: d.function.name, arguments: d.function.arguments ?? '' });
      } else {
        calls[d.index].arguments += d.function?.arguments ?? '';
      }
    }
    if (ch.finish_reason) finish = ch.finish_reason;
  }
  assert.equal(finish, whole.finish_reason);
  assert.equal(firstDeltas, calls.length);
  assert.equal(content, whole.message.content ?? '');
  assert.deepEqual(calls.map((x) => [x.name, x.arguments]),
    whole.message.tool_calls.map((x) => [x.function.name, x.function.arguments]));
});

test('tool_choice auto without a trigger is plain text, and none never parses calls', async () => {
  for (const tool_choice of ['auto', 'none']) {
    const r = await client.chat.completions.create({ model, messages: [{ role: 'user', content: 'hello' }], tools,
      tool_choice, max_tokens: 12, temperature: 0 });
    const m = r.choices[0].message;
    if (tool_choice === 'none') assert.equal(m.tool_calls, undefined);
    if (m.tool_calls === undefined) assert.equal(typeof m.content, 'string');
  }
});

// An agent with tools and a typed output (the Agents SDK's output_type) sends both: in "auto" the answer is
// then valid calls or JSON of the format, never free text; "required" answers with calls.
test('tools with a response format: valid calls or JSON that validates, whatever the model', async () => {
  const answer = {
    type: 'object', properties: { summary: { type: 'string', maxLength: 30 }, done: { type: 'boolean' } },
    required: ['summary', 'done'], additionalProperties: false,
  };
  const validate = ajv.compile(answer);
  const response_format = { type: 'json_schema', json_schema: { name: 'answer', schema: answer, strict: true } };
  const messages = [{ role: 'user', content: 'Weather in Oslo?' }];
  const seen = { calls: 0, answers: 0 };
  for (let seed = 0; seed < SEEDS; ++seed) {
    for (const stream of [false, true]) {
      const where = `seed ${seed}${stream ? ' streamed' : ''}`;
      const body = { model, messages, tools, tool_choice: 'auto', response_format, max_tokens: 600, temperature: 1, seed };
      let msg, finish;
      if (stream) {
        const s = client.chat.completions.stream({ ...body, stream: true });
        const done = await s.finalChatCompletion();
        msg = done.choices[0].message;
        finish = done.choices[0].finish_reason;
      } else {
        const r = await client.chat.completions.create(body);
        msg = r.choices[0].message;
        finish = r.choices[0].finish_reason;
      }
      if (finish === 'tool_calls') {
        seen.calls++;
        msg.tool_calls.forEach((t, i) => checkCall(t, `${where} call ${i}`));
      } else {
        assert.equal(finish, 'stop', where);
        seen.answers++;
        const j = JSON.parse(msg.content);
        assert.ok(validate(j), `${where}: ${ajv.errorsText(validate.errors)}: ${msg.content}`);
      }
    }
  }
  assert.equal(seen.calls + seen.answers, 2 * SEEDS);
  console.log(`tools with a response format: ${seen.calls} answers with calls, ${seen.answers} with JSON`);
  const forced = await client.chat.completions.create({ model, messages, tools, tool_choice: 'required',
    response_format, max_tokens: 600, temperature: 1, seed: 1 });
  assert.equal(forced.choices[0].finish_reason, 'tool_calls');
  forced.choices[0].message.tool_calls.forEach((t, i) => checkCall(t, `required call ${i}`));
});

test('malformed tools and tool_choice are 400s that name the problem', async () => {
  const msgs = [{ role: 'user', content: 'x' }];
  const bad = [
    [{ tools: [{ type: 'function', function: { name: 3 } }] }, /tools\[0\]\.function\.name/],
    [{ tools: [{ type: 'retrieval' }] }, /tools\[0\]/],
    [{ tools: [{ type: 'function', function: { name: 'f', parameters: { type: 'object', patternProperties: {} } } }] }, /patternProperties/],
    [{ tools, tool_choice: { type: 'function', function: { name: 'nope' } } }, /nope/],
    [{ tools, tool_choice: 'sometimes' }, /tool_choice/],
    [{ tool_choice: 'required' }, /tool/],
    [{ tools, grammar: 'root ::= "x"' }, /grammar.*cannot be combined with tools/],
  ];
  for (const [extra, re] of bad) {
    await assert.rejects(client.chat.completions.create({ model, messages: msgs, max_tokens: 4, ...extra }),
      (e) => e instanceof OpenAI.BadRequestError && re.test(e.message), JSON.stringify(extra));
  }
  const ok = await client.chat.completions.create({ model, messages: msgs, max_tokens: 4 });
  assert.equal(ok.choices.length, 1);
});

after(() => {
  assert.deepEqual(serverErrors, [], 'no request got a 5xx');
});
