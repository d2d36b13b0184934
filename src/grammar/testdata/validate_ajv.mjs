// Validates constrained-decoding outputs with ajv, an independent JSON Schema validator, and checks that
// the schema corpus's own instances are what they claim to be (valid ones pass ajv, invalid ones fail it,
// "stricter" ones pass it although the grammar refuses them).
//
// usage: node validate_ajv.mjs E2E_DIR OUTPUTS.json SCHEMAS_DIR
//   E2E_DIR      tests/e2e (ajv and ajv-formats are installed in its node_modules)
//   OUTPUTS.json [{schema, output, seed}] written by grammar_test with LLAMAY_GRAMMAR_DUMP
// Prints "N passed, M failed" and exits 1 when anything failed.
import { createRequire } from "node:module";
import fs from "node:fs";
import path from "node:path";

const [e2eDir, outputsPath, schemasDir] = process.argv.slice(2);
const require = createRequire(path.join(path.resolve(e2eDir), "package.json"));
const Ajv2020 = require("ajv/dist/2020").default;
const AjvDraft7 = require("ajv").default;
const addFormats = require("ajv-formats").default;

const options = { strict: false, allErrors: true, validateFormats: true };
const ajv2020 = addFormats(new Ajv2020(options));
const ajv7 = addFormats(new AjvDraft7(options));
const compiled = new Map();
function validator(schema) {
  const key = JSON.stringify(schema);
  if (!compiled.has(key)) {
    const draft7 = typeof schema === "object" && String(schema.$schema || "").includes("draft-07");
    compiled.set(key, (draft7 ? ajv7 : ajv2020).compile(schema));
  }
  return compiled.get(key);
}

let passed = 0, failed = 0;
function check(ok, what) {
  if (ok) {
    passed++;
  } else {
    failed++;
    console.log("FAIL " + what);
  }
}

for (const { schema, output, seed } of JSON.parse(fs.readFileSync(outputsPath, "utf8"))) {
  let value;
  try {
    value = JSON.parse(output);
  } catch (e) {
    check(false, `seed ${seed}: not JSON (${e.message}): ${output}`);
    continue;
  }
  const validate = validator(schema);
  check(validate(value), `seed ${seed}: ${JSON.stringify(validate.errors)}\n  output: ${output}\n  schema: ${JSON.stringify(schema)}`);
}

for (const file of fs.readdirSync(schemasDir).sort()) {
  const c = JSON.parse(fs.readFileSync(path.join(schemasDir, file), "utf8"));
  const validate = validator(c.schema);
  for (const v of c.valid || []) check(validate(v), `${file}: valid instance rejected by ajv: ${JSON.stringify(v)}`);
  for (const v of c.stricter || []) check(validate(v), `${file}: "stricter" instance rejected by ajv: ${JSON.stringify(v)}`);
  for (const v of c.invalid || []) check(!validate(v), `${file}: invalid instance accepted by ajv: ${JSON.stringify(v)}`);
}

console.log(`${passed} passed, ${failed} failed`);
process.exit(failed ? 1 : 0);
