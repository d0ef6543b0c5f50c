// Tool calls through `fornace serve` and the official OpenAI Node client, on the tiny random-weight
// model (Qwen3's chat template): required and named calls constrained to valid calls whose
// arguments Ajv validates, streamed call deltas that add up to the whole response, histories with
// tool calls and results, and each kind of bad tool definition or choice as a 400 naming it. Run
// by CTest as OpenAIClient.ToolCalls (environment as OpenAIClient.Serve).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { createRequire } from 'node:module';

import { OpenAI, startServer } from './support.mjs';

const require = createRequire(new URL('../json_schema/package.json', import.meta.url));
const Ajv = require('ajv');

let server;
let client;

before(async () => {
  server = await startServer(['--parallel', '2']);
  client = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: 'unused', maxRetries: 0, timeout: 120000 });
});

after(() => {
  if (server && server.child.exitCode === null) server.child.kill('SIGKILL');
});

const weather = {
  type: 'function',
  function: {
    name: 'get_weather',
    description: 'The weather in a city.',
    parameters: {
      type: 'object',
      properties: { city: { type: 'string', enum: ['Paris', 'Oslo', 'Lima'] }, days: { type: 'integer' },
        unit: { enum: ['celsius', 'fahrenheit'] } },
      required: ['city', 'days'],
      additionalProperties: false,
    },
  },
};
const time = {
  type: 'function',
  function: { name: 'get_time', parameters: { type: 'object', properties: { zone: { type: 'string', enum: ['UTC', 'CET'] } }, required: ['zone'] } },
};
const tools = [weather, time];
const messages = [{ role: 'user', content: 'What is the weather in Paris for three days?' }];
const base = { messages, tools, max_tokens: 300, temperature: 0.8, seed: 3 };

function checkCall(call, allowed) {
  assert.equal(call.type, 'function');
  assert.match(call.id, /^call_/);
  const tool = allowed.find((candidate) => candidate.function.name === call.function.name);
  assert.ok(tool, `called ${call.function.name}`);
  const validate = new Ajv().compile(tool.function.parameters);
  const args = JSON.parse(call.function.arguments);
  assert.ok(validate(args), `${call.function.arguments}: ${JSON.stringify(validate.errors)}`);
}

test('required: the answer is a call of one of the tools, its arguments valid', async () => {
  for (const seed of [1, 2, 3, 4]) {
    const response = await client.chat.completions.create({ ...base, seed, tool_choice: 'required' });
    const choice = response.choices[0];
    assert.equal(choice.finish_reason, 'tool_calls');
    assert.equal(choice.message.content, null);
    assert.equal(choice.message.tool_calls.length, 1);
    checkCall(choice.message.tool_calls[0], tools);
  }
});

test('a named function: the call is of that function', async () => {
  for (const seed of [5, 6]) {
    const response = await client.chat.completions.create({
      ...base, seed, tool_choice: { type: 'function', function: { name: 'get_time' } },
    });
    const call = response.choices[0].message.tool_calls[0];
    assert.equal(call.function.name, 'get_time');
    checkCall(call, [time]);
  }
});

test('streamed call deltas: the id, type and name first, then arguments that add up', async () => {
  const request = { ...base, seed: 9, tool_choice: 'required' };
  const whole = await client.chat.completions.create(request);
  const stream = await client.chat.completions.create({ ...request, stream: true });
  const calls = [];
  let finish = null;
  let content = '';
  for await (const chunk of stream) {
    const choice = chunk.choices[0];
    if (!choice) continue;
    content += choice.delta?.content ?? '';
    if (choice.finish_reason) finish = choice.finish_reason;
    for (const piece of choice.delta?.tool_calls ?? []) {
      if (piece.id) {
        assert.equal(piece.index, calls.length);
        assert.equal(piece.type, 'function');
        calls.push({ name: piece.function.name, arguments: piece.function.arguments ?? '' });
      } else {
        calls[piece.index].arguments += piece.function.arguments;
      }
    }
  }
  assert.equal(finish, 'tool_calls');
  assert.equal(content, '');
  assert.deepEqual(calls, whole.choices[0].message.tool_calls.map((call) => ({
    name: call.function.name, arguments: call.function.arguments,
  })));
});

test('auto with a history of calls and results renders and answers', async () => {
  const history = [
    ...messages,
    // Qwen3's template needs a string content beside the calls (it looks for '</think>' in it).
    { role: 'assistant', content: '', tool_calls: [{ id: 'call_1', type: 'function',
      function: { name: 'get_weather', arguments: '{"city": "Paris", "days": 3}' } }] },
    { role: 'tool', tool_call_id: 'call_1', content: '{"forecast": ["sun", "rain", "sun"]}' },
  ];
  const response = await client.chat.completions.create({ messages: history, tools, max_tokens: 8, temperature: 0 });
  const choice = response.choices[0];
  assert.ok(['stop', 'length', 'tool_calls'].includes(choice.finish_reason));
  assert.ok(response.usage.prompt_tokens > 100, 'the tools and the history are in the prompt');
  if (choice.finish_reason !== 'tool_calls') assert.equal(typeof choice.message.content, 'string');
  const none = await client.chat.completions.create({ messages: history, tools, tool_choice: 'none', max_tokens: 8, temperature: 0 });
  assert.equal(none.choices[0].message.tool_calls, undefined);
});

test('bad tools and choices are 400s that name the parameter', async () => {
  const cases = [
    [{ tools: 'get_weather' }, 'tools'],
    [{ tools: [{ type: 'retrieval' }] }, 'tools[0].type'],
    [{ tools: [{ type: 'function', function: { name: 'bad name!' } }] }, 'tools[0].function.name'],
    [{ tools: [{ type: 'function', function: { name: 'f', parameters: { type: 'string', pattern: 'a+' } } }] },
      'tools[0].function.parameters'],
    [{ tools: [{ type: 'function', function: { name: 'f', parameters: [] } }] }, 'tools[0].function.parameters'],
    [{ tools, tool_choice: 'always' }, 'tool_choice'],
    [{ tools, tool_choice: { type: 'function', function: { name: 'nope' } } }, 'tool_choice'],
    [{ tool_choice: 'required' }, 'tool_choice'],
    [{ tools, tool_choice: 'required', response_format: { type: 'json_object' } }, 'tool_choice'],
    [{ messages: [...messages, { role: 'assistant', tool_calls: [{ type: 'function', function: {} }] }] },
      'messages[1].tool_calls[0].function.name'],
    [{ messages: [{ role: 'user', content: 'x', tool_calls: [] }] }, 'messages[0].tool_calls'],
  ];
  for (const [body, param] of cases) {
    await assert.rejects(client.chat.completions.create({ messages, max_tokens: 4, ...body }), (error) => {
      assert.ok(error instanceof OpenAI.BadRequestError, `${JSON.stringify(body)}: ${error}`);
      assert.equal(error.param, param, JSON.stringify(body));
      return true;
    });
  }
});
