// `fornace serve` driven by the official OpenAI Node client (npm openai): chat and text
// completions, streamed and not, usage, stop strings, lengths, concurrent requests, prompt reuse,
// logprobs, n choices, errors, the API key, /metrics, /health, flags and SIGTERM. Run by CTest as OpenAIClient.Serve with
// FORNACE_BIN (build/bin/fornace), FORNACE_MODELS (a folder for the tiny model) and
// FORNACE_TOKENIZER_DIR (the tokenizer the tiny model carries).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { OpenAI, fornace, modelId, tinyModel, startServer } from './support.mjs';

function clientFor(server, apiKey = 'unused') {
  return new OpenAI({ baseURL: `${server.url}/v1`, apiKey, maxRetries: 0, timeout: 30000 });
}

let server;
let client;

before(async () => {
  server = await startServer(['--parallel', '4']);
  client = clientFor(server);
});

after(() => {
  if (server && server.child.exitCode === null) server.child.kill('SIGKILL');
});

const greedy = { temperature: 0, ignore_eos: true };
const chatMessages = [{ role: 'system', content: 'You are terse.' }, { role: 'user', content: 'Name a colour.' }];

async function collect(stream) {
  const chunks = [];
  for await (const chunk of stream) chunks.push(chunk);
  return chunks;
}

test('chat completion: shape, usage and finish_reason length', async () => {
  const response = await client.chat.completions.create({ model: modelId, messages: chatMessages, max_tokens: 12, ...greedy });
  assert.equal(response.object, 'chat.completion');
  assert.match(response.id, /^chatcmpl-/);
  assert.equal(response.model, modelId);
  assert.equal(response.choices.length, 1);
  assert.equal(response.choices[0].message.role, 'assistant');
  assert.equal(typeof response.choices[0].message.content, 'string');
  assert.ok(response.choices[0].message.content.length > 0);
  assert.equal(response.choices[0].finish_reason, 'length');
  assert.equal(response.usage.completion_tokens, 12);
  assert.ok(response.usage.prompt_tokens > 5);
  assert.equal(response.usage.total_tokens, response.usage.prompt_tokens + 12);
});

test('streamed chat gives the same text, the role first, and usage when asked', async () => {
  const whole = await client.chat.completions.create({ messages: chatMessages, max_completion_tokens: 16, ...greedy });
  const chunks = await collect(await client.chat.completions.create({
    messages: chatMessages, max_completion_tokens: 16, stream: true, stream_options: { include_usage: true }, ...greedy,
  }));
  assert.equal(chunks[0].object, 'chat.completion.chunk');
  assert.equal(chunks[0].choices[0].delta.role, 'assistant');
  const text = chunks.map((chunk) => chunk.choices[0]?.delta?.content ?? '').join('');
  assert.equal(text, whole.choices[0].message.content);
  const withReason = chunks.filter((chunk) => chunk.choices[0]?.finish_reason);
  assert.equal(withReason.length, 1);
  assert.equal(withReason[0].choices[0].finish_reason, 'length');
  const last = chunks.at(-1);
  assert.deepEqual(last.choices, []);
  assert.deepEqual(last.usage, whole.usage);
  assert.ok(chunks.every((chunk) => chunk.id === chunks[0].id));
});

test('text completions, streamed and not, with a prompt as text or token ids', async () => {
  const whole = await client.completions.create({ model: modelId, prompt: 'Once upon a time', max_tokens: 10, ...greedy });
  assert.equal(whole.object, 'text_completion');
  assert.match(whole.id, /^cmpl-/);
  assert.equal(whole.choices[0].finish_reason, 'length');
  assert.equal(whole.usage.completion_tokens, 10);
  const chunks = await collect(await client.completions.create({ prompt: 'Once upon a time', max_tokens: 10, stream: true, ...greedy }));
  assert.equal(chunks.map((chunk) => chunk.choices[0].text).join(''), whole.choices[0].text);
  assert.equal(chunks.at(-1).choices[0].finish_reason, 'length');
  assert.ok(chunks.every((chunk) => chunk.usage === undefined || chunk.usage === null));
  const tokenize = spawnSync(fornace, ['tokenize', '--model', tinyModel()], { input: '"Once upon a time"\n', encoding: 'utf8' });
  assert.equal(tokenize.status, 0, tokenize.stderr);
  const ids = JSON.parse(tokenize.stdout);
  const byIds = await client.completions.create({ prompt: ids, max_tokens: 10, ...greedy });
  assert.equal(byIds.choices[0].text, whole.choices[0].text);
  assert.equal(byIds.usage.prompt_tokens, whole.usage.prompt_tokens);
});

test('stop strings end the text before them with finish_reason stop', async () => {
  const request = { prompt: 'The weather today is', max_tokens: 40, ...greedy };
  const full = (await client.completions.create(request)).choices[0].text;
  assert.ok(full.length >= 8, full);
  const stop = full.slice(Math.floor(full.length / 2), Math.floor(full.length / 2) + 2);
  const expected = full.slice(0, full.indexOf(stop));
  const stopped = await client.completions.create({ ...request, stop: [stop, 'never-seen-text'] });
  assert.equal(stopped.choices[0].text, expected);
  assert.equal(stopped.choices[0].finish_reason, 'stop');
  const chunks = await collect(await client.completions.create({ ...request, stop, stream: true }));
  assert.equal(chunks.map((chunk) => chunk.choices[0].text).join(''), expected);
  assert.equal(chunks.at(-1).choices[0].finish_reason, 'stop');
});

test('six concurrent greedy requests on four slots give the text each gives alone', async () => {
  const prompts = ['One', 'Two cats', 'Three blind mice', 'Four', 'Five little ducks went', 'Six'];
  const ask = (prompt, stream) => client.chat.completions.create({
    messages: [{ role: 'user', content: prompt }], max_tokens: 20, stream, ...greedy,
  });
  const alone = [];
  for (const prompt of prompts) alone.push((await ask(prompt, false)).choices[0].message.content);
  const together = await Promise.all(prompts.map(async (prompt, index) => {
    if (index % 2 === 0) return (await ask(prompt, false)).choices[0].message.content;
    const chunks = await collect(await ask(prompt, true));
    return chunks.map((chunk) => chunk.choices[0]?.delta?.content ?? '').join('');
  }));
  assert.deepEqual(together, alone);
});

test('bad requests throw the client errors OpenAI would', async () => {
  const bad = [
    { messages: chatMessages, temperature: 5 },
    { messages: chatMessages, max_tokens: 0 },
    { messages: [] },
    { messages: [{ role: 'wizard', content: 'hi' }] },
    { messages: chatMessages, top_p: 'high' },
    { messages: chatMessages, n: 5 },
    { messages: chatMessages, top_logprobs: 2 },
    { messages: chatMessages, logprobs: true, top_logprobs: 21 },
  ];
  for (const body of bad) {
    await assert.rejects(client.chat.completions.create(body), (error) => {
      assert.ok(error instanceof OpenAI.BadRequestError, `${JSON.stringify(body)}: ${error}`);
      assert.equal(error.status, 400);
      assert.equal(error.type, 'invalid_request_error');
      return true;
    });
  }
  await assert.rejects(client.completions.create({ prompt: 'x '.repeat(2000) }), (error) => {
    assert.ok(error instanceof OpenAI.BadRequestError);
    assert.equal(error.code, 'context_length_exceeded');
    return true;
  });
  await assert.rejects(client.chat.completions.create({ model: 'gpt-4o', messages: chatMessages }), (error) => {
    assert.ok(error instanceof OpenAI.NotFoundError, String(error));
    assert.equal(error.code, 'model_not_found');
    return true;
  });
  const models = await client.models.list();
  assert.deepEqual(models.data.map((model) => model.id), [modelId]);
  await assert.rejects(client.models.retrieve('gpt-4o'), OpenAI.NotFoundError);
});

test('a second turn reuses the slot cache of the first and answers as a whole prefill does', async () => {
  const first = [{ role: 'user', content: 'Tell me a long story about a fox and a crow, please.' }];
  const answer = await client.chat.completions.create({ messages: first, max_tokens: 24, ...greedy });
  const second = [...first, { role: 'assistant', content: answer.choices[0].message.content },
    { role: 'user', content: 'And then?' }];
  const reused = await client.chat.completions.create({ messages: second, max_tokens: 12, ...greedy });
  const whole = await client.chat.completions.create({ messages: second, max_tokens: 12, cache_prompt: false, ...greedy });
  assert.equal(whole.usage.prompt_tokens_details.cached_tokens, 0);
  assert.ok(reused.usage.prompt_tokens_details.cached_tokens > answer.usage.prompt_tokens / 2,
    JSON.stringify(reused.usage));
  assert.equal(reused.choices[0].message.content, whole.choices[0].message.content);
  const metrics = await (await fetch(`${server.url}/metrics`)).text();
  assert.match(metrics, /^fornace_prompt_tokens_reused_total [1-9]\d*$/m);
});

// Float32 values of a .npy file that fornace --dump-logits wrote: [rows, vocab].
function readNpy(path) {
  const bytes = readFileSync(path);
  const headerLength = bytes.readUInt16LE(8);
  const header = bytes.subarray(10, 10 + headerLength).toString('latin1');
  assert.match(header, /'descr': '<f4'/);
  const shape = /'shape': \((\d+), (\d+)\)/.exec(header).slice(1).map(Number);
  const start = 10 + headerLength;
  const values = new Float32Array(bytes.buffer.slice(bytes.byteOffset + start, bytes.byteOffset + bytes.length));
  return Array.from({ length: shape[0] }, (_, row) => values.subarray(row * shape[1], (row + 1) * shape[1]));
}

function logSoftmax(row) {
  let max = -Infinity;
  for (const value of row) max = Math.max(max, value);
  let sum = 0;
  for (const value of row) sum += Math.exp(value - max);
  const logSum = max + Math.log(sum);
  return Array.from(row, (value) => value - logSum);
}

test('logprobs equal the log-softmax of the logits that fornace itself computes', async () => {
  const prompt = 'The quick brown fox';
  const response = await client.completions.create({ prompt, max_tokens: 4, logprobs: 3, ...greedy });
  const logprobs = response.choices[0].logprobs;
  assert.equal(logprobs.tokens.length, 4);
  const dir = mkdtempSync(join(tmpdir(), 'fornace-logits-'));
  const run = spawnSync(fornace, ['--model', tinyModel(), '--prompt', prompt, '--max-new-tokens', '4',
    '--ignore-eos', '--temperature', '0', '--repeat-penalty', '1', '--threads', '2', '--quiet',
    '--dump-logits', `${dir}/logits.npy`], { encoding: 'utf8' });
  assert.equal(run.status, 0, run.stderr);
  const rows = readNpy(`${dir}/logits.npy`);
  rmSync(dir, { recursive: true, force: true });
  assert.equal(rows.length, 4);
  let offset = 0;
  for (let step = 0; step < 4; ++step) {
    const expected = logSoftmax(rows[step]);
    const order = [...expected.keys()].sort((a, b) => expected[b] - expected[a] || a - b);
    // Greedy: the token taken is the most likely one.
    assert.ok(Math.abs(logprobs.token_logprobs[step] - expected[order[0]]) < 1e-4, `step ${step}`);
    const top = Object.values(logprobs.top_logprobs[step]).sort((a, b) => b - a);
    assert.equal(top.length, 3);
    for (let rank = 0; rank < 3; ++rank) assert.ok(Math.abs(top[rank] - expected[order[rank]]) < 1e-4);
    assert.equal(logprobs.text_offset[step], offset);
    offset += Buffer.byteLength(logprobs.tokens[step]);
  }

  const chat = await client.chat.completions.create({ messages: chatMessages, max_tokens: 6, logprobs: true,
    top_logprobs: 2, ...greedy });
  const content = chat.choices[0].logprobs.content;
  assert.equal(content.length, 6);
  for (const entry of content) {
    assert.equal(entry.top_logprobs.length, 2);
    assert.equal(entry.top_logprobs[0].token, entry.token);
    assert.ok(Math.abs(entry.top_logprobs[0].logprob - entry.logprob) < 1e-12);
    assert.ok(entry.top_logprobs[1].logprob <= entry.logprob && entry.logprob <= 0);
    // A token that ends inside a UTF-8 character reads as U+FFFD; its bytes stay exact.
    if (!entry.token.includes('\uFFFD')) assert.deepEqual(entry.bytes, [...Buffer.from(entry.token, 'utf8')]);
  }
  const chunks = await collect(await client.chat.completions.create({ messages: chatMessages, max_tokens: 6,
    logprobs: true, top_logprobs: 2, stream: true, ...greedy }));
  const streamed = chunks.flatMap((chunk) => chunk.choices[0]?.logprobs?.content ?? []);
  // The same tokens; the values to float rounding (this prompt's prefix now comes from the cache).
  const values = (entries) => entries.flatMap((entry) => [entry.logprob, ...entry.top_logprobs.map((top) => top.logprob)]);
  const tokensOnly = (entries) => JSON.stringify(entries, (key, value) => (key === 'logprob' ? undefined : value));
  assert.equal(tokensOnly(streamed), tokensOnly(content));
  values(streamed).forEach((value, index) => assert.ok(Math.abs(value - values(content)[index]) < 1e-4));
});

test('n choices: one per slot, seeded in turn, streamed by index', async () => {
  const request = { messages: chatMessages, max_tokens: 8, temperature: 1.5, seed: 5, ignore_eos: true };
  const whole = await client.chat.completions.create({ ...request, n: 3 });
  assert.deepEqual(whole.choices.map((choice) => choice.index), [0, 1, 2]);
  assert.equal(whole.usage.completion_tokens, 24);
  const texts = whole.choices.map((choice) => choice.message.content);
  assert.ok(new Set(texts).size > 1, 'different seeds give different samples');
  const single = await client.chat.completions.create({ ...request, seed: 6 });
  assert.equal(single.choices[0].message.content, texts[1]);
  const chunks = await collect(await client.chat.completions.create({ ...request, n: 3, stream: true }));
  const streamed = ['', '', ''];
  for (const chunk of chunks) {
    for (const choice of chunk.choices) streamed[choice.index] += choice.delta?.content ?? '';
  }
  assert.deepEqual(streamed, texts);
  assert.equal(chunks.filter((chunk) => chunk.choices[0]?.finish_reason).length, 3);
});

test('/health and /metrics answer with fetch', async () => {
  const health = await fetch(`${server.url}/health`);
  assert.equal(health.status, 200);
  assert.deepEqual(await health.json(), { status: 'ok' });
  const metrics = await fetch(`${server.url}/metrics`);
  assert.equal(metrics.status, 200);
  assert.match(metrics.headers.get('content-type'), /^text\/plain/);
  const text = await metrics.text();
  assert.match(text, /^fornace_slots 4$/m);
  assert.match(text, /^fornace_active_slots 0$/m);
  assert.match(text, /^fornace_queue_length 0$/m);
  assert.match(text, /^fornace_requests_total\{endpoint="\/v1\/chat\/completions",status="200"\} \d+$/m);
  assert.match(text, /^fornace_requests_total\{endpoint="\/v1\/chat\/completions",status="400"\} \d+$/m);
  assert.match(text, /^fornace_completion_tokens_total [1-9]\d*$/m);
  assert.match(text, /^fornace_time_to_first_token_seconds_count [1-9]\d*$/m);
  assert.match(text, /^fornace_decode_tokens_per_second [0-9.e+-]+$/m);
});

test('--api-key: a wrong or missing key is AuthenticationError 401, /health stays open', async () => {
  const keyed = await startServer(['--api-key', 'sk-fornace-test', '--parallel', '1']);
  try {
    await assert.rejects(clientFor(keyed, 'sk-wrong').models.list(), OpenAI.AuthenticationError);
    await assert.rejects(
      clientFor(keyed, 'sk-wrong').chat.completions.create({ messages: chatMessages, max_tokens: 2 }),
      (error) => error instanceof OpenAI.AuthenticationError && error.status === 401 && error.code === 'invalid_api_key');
    const noKey = await fetch(`${keyed.url}/v1/models`);
    assert.equal(noKey.status, 401);
    assert.equal((await noKey.json()).error.code, 'invalid_api_key');
    const response = await clientFor(keyed, 'sk-fornace-test').chat.completions.create({ messages: chatMessages, max_tokens: 2 });
    assert.equal(response.usage.completion_tokens <= 2, true);
    assert.equal((await fetch(`${keyed.url}/health`)).status, 200);
  } finally {
    keyed.child.kill('SIGTERM');
    assert.equal((await keyed.exited).code, 0);
  }
});

test('bad flags exit 2 and a port in use exits 1, each with one error line', () => {
  const badFlag = spawnSync(fornace, ['serve', '--model', tinyModel(), '--port', 'eighty'], { encoding: 'utf8' });
  assert.equal(badFlag.status, 2);
  assert.match(badFlag.stderr, /^error: .*--port.*\n$/);
  const port = new URL(server.url).port;
  const inUse = spawnSync(fornace, ['serve', '--model', tinyModel(), '--port', port], { encoding: 'utf8', timeout: 30000 });
  assert.equal(inUse.status, 1, inUse.stderr);
  assert.match(inUse.stderr, /^error: cannot listen on 127\.0\.0\.1:\d+.*\n$/);
});

test('SIGTERM ends a running stream with its last chunk and exits 0', async () => {
  const stream = await client.completions.create({ prompt: 'A long story', max_tokens: 5000, stream: true, ...greedy });
  const chunks = [];
  for await (const chunk of stream) {
    chunks.push(chunk);
    if (chunks.length === 3) server.child.kill('SIGTERM');
  }
  assert.ok(chunks.length >= 4);
  assert.equal(chunks.at(-1).choices[0].finish_reason, 'stop');
  const { code, stderr } = await server.exited;
  assert.equal(code, 0, stderr);
  await assert.rejects(fetch(`${server.url}/health`));
});
