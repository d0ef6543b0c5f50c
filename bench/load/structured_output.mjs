// Constrained against unconstrained decode through `fornace serve`, one stream: in each round an
// unconstrained request (ignore_eos) and one with response_format (json_object, then a schema)
// run back to back, and decode tok/s is (tokens - 1) / (time of the last token - time of the
// first), measured by the client from the streamed chunks, so that the mask is counted (a JSON
// text that ends before 90 % of the tokens is run again with another seed). Prints the
// median and range of each kind and the median of the paired ratios.
//
// node bench/load/structured_output.mjs --fornace build/bin/fornace \
//   --model models/synth-qwen2.5-0.5b [--tokens 128] [--rounds 5] [--threads 2]
import { startServer } from './serve_process.mjs';

const options = { fornace: 'build/bin/fornace', model: 'models/synth-qwen2.5-0.5b', tokens: '128', rounds: '5', threads: '2' };
for (let i = 2; i < process.argv.length; i += 2) {
  const key = process.argv[i].replace(/^--/, '');
  if (!(key in options) || i + 1 >= process.argv.length) {
    console.error(`error: unknown or incomplete option ${process.argv[i]}; options: ${Object.keys(options).map((k) => `--${k}`).join(' ')}`);
    process.exit(2);
  }
  options[key] = process.argv[i + 1];
}
const tokens = Number(options.tokens);
const rounds = Number(options.rounds);

const schema = {
  type: 'object',
  properties: {
    name: { type: 'string' }, age: { type: 'integer' }, tags: { type: 'array', items: { type: 'string' }, maxItems: 4 },
    address: { type: 'object', properties: { city: { type: 'string' }, zip: { type: 'integer' } }, required: ['city', 'zip'] },
  },
  required: ['name', 'age', 'tags', 'address'],
};
const kinds = {
  unconstrained: { ignore_eos: true },
  json_object: { response_format: { type: 'json_object' } },
  json_schema: { response_format: { type: 'json_schema', json_schema: { name: 'person', schema } } },
};

// One streamed chat completion; resolves to { tokens, tokensPerSecond, text }.
async function run(url, extra, seed) {
  const response = await fetch(`${url}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({
      messages: [{ role: 'user', content: 'Describe a person as JSON.' }], max_tokens: tokens, seed, temperature: 1,
      stream: true, stream_options: { include_usage: true }, ...extra,
    }),
  });
  if (!response.ok) throw new Error(`HTTP ${response.status}: ${await response.text()}`);
  const decoder = new TextDecoder();
  let buffer = '';
  let first = 0;
  let last = 0;
  let usage = null;
  let text = '';
  for await (const bytes of response.body) {
    buffer += decoder.decode(bytes, { stream: true });
    let end;
    while ((end = buffer.indexOf('\n\n')) >= 0) {
      const line = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      if (!line.startsWith('data: ') || line === 'data: [DONE]') continue;  // Comments: keep-alive.
      const event = line.slice('data: '.length);
      const chunk = JSON.parse(event);
      if (chunk.usage) usage = chunk.usage;
      const content = chunk.choices?.[0]?.delta?.content;
      if (content) {
        const now = performance.now();
        if (!first) first = now;
        last = now;
        text += content;
      }
    }
  }
  return { tokens: usage.completion_tokens, tokensPerSecond: (usage.completion_tokens - 1) / ((last - first) / 1000), text };
}

const median = (values) => {
  const sorted = [...values].sort((a, b) => a - b);
  const middle = Math.floor(sorted.length / 2);
  return sorted.length % 2 ? sorted[middle] : (sorted[middle - 1] + sorted[middle]) / 2;
};
const summary = (values, digits = 1) =>
  `median ${median(values).toFixed(digits)} (range ${Math.min(...values).toFixed(digits)}-${Math.max(...values).toFixed(digits)})`;

const server = await startServer(options.fornace, ['--model', options.model, '--threads', options.threads, '--parallel', '1']);
try {
  await run(server.url, kinds.unconstrained, 0);  // Warm-up.
  const rates = Object.fromEntries(Object.keys(kinds).map((kind) => [kind, []]));
  const ratios = { json_object: [], json_schema: [] };
  for (let round = 0; round < rounds; ++round) {
    const measured = {};
    for (const [kind, extra] of Object.entries(kinds)) {
      // A JSON text that the model ends early says little about the rate: another seed then.
      let result;
      for (let attempt = 0; attempt < 8; ++attempt) {
        result = await run(server.url, extra, 1000 * attempt + round + 1);
        if (result.tokens >= 0.9 * tokens) break;
      }
      if (kind !== 'unconstrained') JSON.parse(result.text);
      measured[kind] = result.tokensPerSecond;
      rates[kind].push(result.tokensPerSecond);
      console.log(`round ${round + 1} ${kind}: ${result.tokens} tokens, ${result.tokensPerSecond.toFixed(2)} tok/s`);
    }
    for (const kind of Object.keys(ratios)) ratios[kind].push(measured[kind] / measured.unconstrained);
  }
  for (const [kind, values] of Object.entries(rates)) console.log(`${kind}: tok/s ${summary(values, 2)}`);
  for (const [kind, values] of Object.entries(ratios)) console.log(`${kind} / unconstrained, paired: ${summary(values, 3)}`);
} finally {
  server.child.kill('SIGTERM');
}
