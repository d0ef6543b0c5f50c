// Structured outputs of `fornace serve` through the official OpenAI Node client: response_format
// json_object and json_schema on a random-weight model, every output parsed with JSON.parse and
// validated with Ajv (tests/reference/json_schema); bad schemas refused with a 400 that names the
// parameter. Run by CTest as OpenAIClient.StructuredOutputs (environment as OpenAIClient.Serve).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { createRequire } from 'node:module';

import { OpenAI, modelId, startServer } from './support.mjs';

let Ajv;
try {
  const require = createRequire(new URL('../json_schema/package.json', import.meta.url));
  Ajv = require('ajv');
} catch (error) {
  console.error(`error: the npm package ajv is not installed (${error.message}); run scripts/get-test-packages.sh`);
  process.exit(1);
}

let server;
let client;

before(async () => {
  server = await startServer(['--parallel', '4']);
  client = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: 'unused', maxRetries: 0, timeout: 120000 });
});

after(() => {
  if (server && server.child.exitCode === null) server.child.kill('SIGKILL');
});

const messages = [{ role: 'user', content: 'Describe a person as JSON.' }];
// Enough tokens for a random model's strings to end on their own, most of the time.
const maxTokens = 400;

const schemas = {
  person: {
    type: 'object',
    properties: {
      name: { type: 'string' },
      age: { type: 'integer' },
      height: { type: 'number' },
      married: { type: 'boolean' },
      spouse: { type: ['string', 'null'] },
    },
    required: ['name', 'age', 'height', 'married', 'spouse'],
    additionalProperties: false,
  },
  optional_properties: {
    type: 'object',
    properties: { a: { type: 'integer' }, b: { type: 'boolean' }, c: { type: 'null' }, d: { const: 'd' } },
    required: ['b'],
  },
  nested: {
    type: 'object',
    properties: {
      address: {
        type: 'object',
        properties: {
          city: { enum: ['Paris', 'Rome', 'Oslo'] },
          zip: { type: 'integer' },
          geo: { type: 'object', properties: { lat: { type: 'number' }, lon: { type: 'number' } }, required: ['lat', 'lon'] },
        },
        required: ['city', 'geo'],
      },
    },
    required: ['address'],
  },
  bounded_arrays: {
    type: 'object',
    properties: {
      flags: { type: 'array', items: { type: 'boolean' }, minItems: 2, maxItems: 4 },
      codes: { type: 'array', items: { enum: [1, 2, 3, 'x', null] }, minItems: 1 },
      empty: { type: 'array', maxItems: 0 },
    },
    required: ['flags', 'codes', 'empty'],
  },
  enum_and_const: {
    type: 'object',
    properties: {
      kind: { const: 'fixed' },
      colour: { type: 'string', enum: ['red', 'green', 'blue'] },
      mixed: { enum: [true, 0, 'zero', { deep: [1, 2] }] },
    },
    required: ['kind', 'colour', 'mixed'],
  },
  defs_and_refs: {
    $defs: {
      point: { type: 'object', properties: { x: { type: 'integer' }, y: { type: 'integer' } }, required: ['x', 'y'] },
    },
    type: 'object',
    properties: { from: { $ref: '#/$defs/point' }, to: { $ref: '#/$defs/point' } },
    required: ['from', 'to'],
  },
  recursion: {
    definitions: {
      node: {
        type: 'object',
        properties: {
          value: { type: 'integer' },
          children: { type: 'array', items: { $ref: '#/definitions/node' }, maxItems: 2 },
        },
        required: ['value'],
      },
    },
    $ref: '#/definitions/node',
  },
  any_of_and_lists: {
    type: 'array',
    items: { anyOf: [{ type: 'integer' }, { type: 'object', properties: { s: { type: 'string' } }, required: ['s'] }, { type: 'null' }] },
    minItems: 1,
    maxItems: 3,
  },
  top_level_scalar: { type: 'number' },
};

function validator(schema) {
  return new Ajv({ allErrors: true }).compile(schema);
}

async function structured(responseFormat, seed, extra = {}) {
  return client.chat.completions.create({
    model: modelId, messages, max_tokens: maxTokens, seed, temperature: 1, response_format: responseFormat, ...extra,
  });
}

test('json_object: every output is a JSON object', async () => {
  const responses = await Promise.all([1, 2, 3, 4].map((seed) => structured({ type: 'json_object' }, seed)));
  for (const response of responses) {
    const text = response.choices[0].message.content;
    const value = JSON.parse(text);
    assert.equal(typeof value, 'object', text);
    assert.ok(value !== null && !Array.isArray(value), text);
  }
});

for (const [name, schema] of Object.entries(schemas)) {
  test(`json_schema ${name}: outputs parse and validate with Ajv`, async () => {
    const validate = validator(schema);
    const responseFormat = { type: 'json_schema', json_schema: { name, schema, strict: true } };
    const responses = await Promise.all([11, 12, 13].map((seed) => structured(responseFormat, seed)));
    let stopped = 0;
    for (const response of responses) {
      const text = response.choices[0].message.content;
      let value;
      assert.doesNotThrow(() => { value = JSON.parse(text); }, `not JSON: ${text}`);
      assert.ok(validate(value), `${JSON.stringify(validate.errors)} in ${text}`);
      if (response.choices[0].finish_reason === 'stop') stopped += 1;
    }
    // The model ended the JSON itself (the end-of-sequence id is the only one allowed after it).
    assert.ok(stopped > 0, 'no output ended with finish_reason stop');
  });
}

test('a short max_tokens still ends in valid JSON', async () => {
  const schema = schemas.person;
  const validate = validator(schema);
  const responseFormat = { type: 'json_schema', json_schema: { name: 'short', schema } };
  // The shortest instance is 59 bytes; 70 tokens leave little room beyond it.
  const responses = await Promise.all([21, 22, 23].map((seed) => structured(responseFormat, seed, { max_tokens: 70 })));
  for (const response of responses) {
    const text = response.choices[0].message.content;
    assert.ok(validate(JSON.parse(text)), `${JSON.stringify(validate.errors)} in ${text}`);
    assert.ok(response.usage.completion_tokens <= 70);
  }
});

test('streamed structured output is the same valid JSON', async () => {
  const responseFormat = { type: 'json_schema', json_schema: { name: 'defs', schema: schemas.defs_and_refs } };
  const whole = await structured(responseFormat, 31, { temperature: 0 });
  const stream = await structured(responseFormat, 31, { temperature: 0, stream: true });
  let text = '';
  for await (const chunk of stream) text += chunk.choices[0]?.delta?.content ?? '';
  assert.equal(text, whole.choices[0].message.content);
  assert.ok(validator(schemas.defs_and_refs)(JSON.parse(text)), text);
});

test('each of n choices is its own valid JSON', async () => {
  const schema = schemas.enum_and_const;
  const validate = validator(schema);
  const response = await structured({ type: 'json_schema', json_schema: { name: 'choices', schema } }, 51, { n: 3 });
  assert.equal(response.choices.length, 3);
  for (const choice of response.choices) {
    const text = choice.message.content;
    assert.ok(validate(JSON.parse(text)), `${JSON.stringify(validate.errors)} in ${text}`);
  }
});

test('text completions take response_format too', async () => {
  const response = await client.completions.create({
    model: modelId, prompt: 'JSON:', max_tokens: maxTokens, seed: 41, response_format: { type: 'json_object' },
  });
  const value = JSON.parse(response.choices[0].text);
  assert.ok(typeof value === 'object' && value !== null && !Array.isArray(value));
});

async function refusal(responseFormat) {
  try {
    await client.chat.completions.create({ model: modelId, messages, max_tokens: 4, response_format: responseFormat });
  } catch (error) {
    assert.ok(error instanceof OpenAI.APIError, String(error));
    return error;
  }
  assert.fail('the request was accepted');
}

const schemaParam = 'response_format.json_schema.schema';
const badRequests = [
  ['an unsupported keyword', { type: 'string', pattern: '^a' }, schemaParam, /'pattern' is not supported \(at #\)/],
  ['an unsupported keyword deep inside', { type: 'object', properties: { a: { type: 'array', uniqueItems: true } } }, schemaParam,
    /'uniqueItems' is not supported \(at #\/properties\/a\)/],
  ['a reference that does not resolve', { $ref: '#/$defs/missing' }, schemaParam, /'\$ref' '#\/\$defs\/missing' does not resolve/],
  ['a remote reference', { $ref: 'https://example.com/s.json' }, schemaParam, /does not resolve/],
  ['a wrong type name', { type: 'text' }, schemaParam, /'type' 'text' is not one of/],
  ['a wrong keyword type', { type: 'object', required: 'a' }, schemaParam, /'required' must be an array/],
  ['a required property that is not declared', { type: 'object', properties: {}, required: ['a'] }, schemaParam,
    /required property 'a' is not in 'properties'/],
  ['minItems above maxItems', { type: 'array', minItems: 3, maxItems: 1 }, schemaParam, /'minItems' is greater than 'maxItems'/],
  ['a schema with no finite instance', { type: 'object', properties: { a: { $ref: '#' } }, required: ['a'] }, schemaParam,
    /no JSON instance of bounded size/],
];

for (const [what, schema, param, message] of badRequests) {
  test(`400 for ${what}`, async () => {
    const error = await refusal({ type: 'json_schema', json_schema: { name: 'bad', schema } });
    assert.equal(error.status, 400);
    assert.equal(error.param, param);
    assert.match(error.message, message);
  });
}

test('400 for a malformed response_format, naming the parameter', async () => {
  const cases = [
    [{ type: 'json_schema', json_schema: { name: 'x', schema: 'string' } }, schemaParam, /expected an object/],
    [{ type: 'json_schema', json_schema: { name: 'x', schema: [] } }, schemaParam, /expected an object/],
    [{ type: 'json_schema', json_schema: { schema: {} } }, 'response_format.json_schema.name', /Missing required parameter/],
    [{ type: 'json_schema', json_schema: { name: 'a b', schema: {} } }, 'response_format.json_schema.name', /letters, digits/],
    [{ type: 'json_schema' }, 'response_format.json_schema', /Missing required parameter/],
    [{ type: 'yaml' }, 'response_format.type', /expected one of 'text', 'json_object' or 'json_schema'/],
    [{}, 'response_format.type', /Missing required parameter/],
    ['json', 'response_format', /expected an object/],
  ];
  for (const [responseFormat, param, message] of cases) {
    const error = await refusal(responseFormat);
    assert.equal(error.status, 400, JSON.stringify(responseFormat));
    assert.equal(error.param, param, JSON.stringify(responseFormat));
    assert.match(error.message, message);
  }
});
