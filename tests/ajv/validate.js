// validate.js SCHEMA.json INSTANCE...
// Validates each instance file (one JSON text each, whitespace as generated)
// against the schema with ajv (draft 2020-12, formats on, strict mode off).
// Prints one line per instance and exits 0 only if every instance is valid
// JSON and valid against the schema. The independent oracle of
// tests/structured/test_so_ajv.c.
'use strict';
const fs = require('fs');
const Ajv2020 = require('ajv/dist/2020');
const addFormats = require('ajv-formats');

const [schemaPath, ...instances] = process.argv.slice(2);
if (!schemaPath || instances.length === 0) {
  console.error('usage: node validate.js SCHEMA.json INSTANCE...');
  process.exit(2);
}
const ajv = new Ajv2020({ strict: false, allErrors: true });
addFormats(ajv);
const validate = ajv.compile(JSON.parse(fs.readFileSync(schemaPath, 'utf8')));
let bad = 0;
for (const path of instances) {
  const text = fs.readFileSync(path, 'utf8');
  let value;
  try {
    value = JSON.parse(text);
  } catch (e) {
    console.log(`${path}: not JSON (${e.message}): ${JSON.stringify(text)}`);
    bad++;
    continue;
  }
  if (validate(value)) console.log(`${path}: valid`);
  else {
    console.log(`${path}: INVALID ${ajv.errorsText(validate.errors)}: ${JSON.stringify(text)}`);
    bad++;
  }
}
console.log(`${instances.length - bad}/${instances.length} valid`);
process.exit(bad ? 1 : 0);
