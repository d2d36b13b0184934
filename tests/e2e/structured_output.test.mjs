// Structured output through the official `openai` client: response_format json_schema and json_object on
// both routes, over every schema of the grammar corpus (src/grammar/testdata/schemas) and many seeds, each
// answer checked by ajv, an independent JSON Schema validator; a streamed answer assembled by the client;
// malformed and unsupported schemas as the client's BadRequestError, with the server still up. Whatever
// model run.sh serves (the demo model, or -m): a random-weight model, forced through the grammar, must
// still produce valid output. Run by run.sh.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { createRequire } from 'node:module';
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { URL_MAIN as U, requestTimeout, recordingFetch, serverErrors } from './lib/server.mjs';

const here = path.dirname(fileURLToPath(import.meta.url));
const require = createRequire(path.join(here, 'package.json'));
let OpenAI, Ajv2020, AjvDraft7, addFormats;
try {
  OpenAI = require('openai').default ?? require('openai');
  Ajv2020 = require('ajv/dist/2020').default;
  AjvDraft7 = require('ajv').default;
  addFormats = require('ajv-formats').default;
} catch (e) {
  console.error(`FAIL: openai, ajv and ajv-formats must be installed in tests/e2e/node_modules (${e.code ?? e.message}); run scripts/setup`);
  process.exit(1);
}
const ajvOptions = { strict: false, allErrors: true, validateFormats: true };
const ajv2020 = addFormats(new Ajv2020(ajvOptions)), ajv7 = addFormats(new AjvDraft7(ajvOptions));
const compiled = new Map();
const ajvFor = (schema) => (String(schema.$schema ?? '').includes('draft-07') ? ajv7 : ajv2020);
const client = new OpenAI({ baseURL: `${U}/v1`, apiKey: 'unused', maxRetries: 0, timeout: requestTimeout(120000), fetch: recordingFetch });
const model = (await client.models.list()).data[0].id;
const corpus = path.join(here, '../../src/grammar/testdata/schemas');
const schemas = readdirSync(corpus).filter((f) => f.endsWith('.json')).sort()
  .map((f) => ({ name: f.replace(/\.json$/, ''), schema: JSON.parse(readFileSync(path.join(corpus, f), 'utf8')).schema }));
// The demo model's vocabulary is printable ASCII and newline (no byte fallback): no token spells the "é"
// of a schema literal, so on it the corpus is limited to schemas written in ASCII.
const demo = model === 'llamay-demo';
const usable = schemas.filter(({ schema }) => !demo || /^[\x20-\x7e\n]*$/.test(JSON.stringify(schema)));
assert.ok(usable.length >= schemas.length - 2);
const SEEDS = Number(process.env.STRUCTURED_SEEDS ?? 6);

function check(schemaName, schema, text, where) {
  let value;
  assert.doesNotThrow(() => { value = JSON.parse(text); }, `${where}: not JSON: ${text}`);
  const key = JSON.stringify(schema);
  if (!compiled.has(key)) compiled.set(key, ajvFor(schema).compile(schema));
  const validate = compiled.get(key);
  assert.ok(validate(value), `${where} (${schemaName}): ${ajv2020.errorsText(validate.errors)}: ${text}`);
}

test('json_schema answers validate with ajv, every corpus schema, many seeds, both routes', async () => {
  let complete = 0, total = 0;
  for (const { name, schema } of usable) {
    for (let seed = 0; seed < SEEDS; ++seed) {
      const response_format = { type: 'json_schema', json_schema: { name, schema, strict: true } };
      const chat = seed % 2 === 0;
      const r = chat
        ? await client.chat.completions.create({ model, messages: [{ role: 'user', content: `A ${name}, please.` }],
          max_tokens: 400, temperature: 1, seed, response_format })
        : await client.completions.create({ model, prompt: `${name}:`, max_tokens: 400, temperature: 1, seed,
          response_format });
      assert.ok(r.choices, `${name} seed ${seed}: ${JSON.stringify(r)}`);
      const c = r.choices[0];
      ++total;
      if (c.finish_reason !== 'stop') continue;  // cut by max_tokens: a prefix of a valid answer
      ++complete;
      check(name, schema, chat ? c.message.content : c.text, `seed ${seed}`);
    }
  }
  // Nearly every answer completes within max_tokens: the checks above ran.
  assert.ok(complete >= total * 0.75, `only ${complete} of ${total} answers completed`);
});

test('json_object answers are JSON objects', async () => {
  for (let seed = 0; seed < SEEDS; ++seed) {
    const r = await client.chat.completions.create({ model, messages: [{ role: 'user', content: 'JSON please' }],
      max_tokens: 300, temperature: 1, seed, response_format: { type: 'json_object' } });
    if (r.choices[0].finish_reason !== 'stop') continue;
    const v = JSON.parse(r.choices[0].message.content);
    assert.equal(typeof v, 'object');
    assert.ok(v !== null && !Array.isArray(v));
  }
});

test('a streamed structured answer, assembled by the client, is the same valid JSON', async () => {
  const { name, schema } = schemas.find((s) => s.name === 'person') ?? schemas[0];
  const body = { model, messages: [{ role: 'user', content: 'who?' }], max_tokens: 300, temperature: 0.9, seed: 4,
    response_format: { type: 'json_schema', json_schema: { name, schema } } };
  const whole = await client.chat.completions.create(body);
  let text = '';
  for await (const chunk of await client.chat.completions.create({ ...body, stream: true }))
    text += chunk.choices[0]?.delta?.content ?? '';
  assert.equal(text, whole.choices[0].message.content);
  if (whole.choices[0].finish_reason === 'stop') check(name, schema, text, 'stream');
});

test('malformed and unsupported schemas are 400s that name the problem', async () => {
  const bad = [
    [{ type: 'json_schema', json_schema: { name: 'x', schema: { type: 'object', patternProperties: {} } } }, /patternProperties/],
    [{ type: 'json_schema', json_schema: { name: 'x', schema: { type: 'strang' } } }, /strang/],
    [{ type: 'json_schema', json_schema: { name: 'x', schema: { $ref: '#/$defs/missing' } } }, /missing/],
    [{ type: 'json_schema' }, /json_schema/],
    [{ type: 'yaml' }, /yaml/],
  ];
  for (const [response_format, re] of bad) {
    await assert.rejects(
      client.chat.completions.create({ model, messages: [{ role: 'user', content: 'x' }], max_tokens: 4, response_format }),
      (e) => e instanceof OpenAI.BadRequestError && re.test(e.message), JSON.stringify(response_format));
  }
  const ok = await client.chat.completions.create({ model, messages: [{ role: 'user', content: 'x' }], max_tokens: 4 });
  assert.equal(ok.choices.length, 1);
});

after(() => {
  assert.deepEqual(serverErrors, [], 'no request got a 5xx');
});
