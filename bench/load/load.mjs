// Load benchmark of `fornace serve`: 1, 2, 4 and 8 concurrent streams of 128 tokens, time to first
// token and per-token latency, aggregate tok/s; and single-stream decode against `fornace` itself,
// in alternating runs; the machine's roofs before each round. Writes
// runs/<date>-<commit>-load.{csv,md,svg} and -load-roofs.csv.
//
// node bench/load/load.mjs --fornace build/bin/fornace --model models/synth-qwen2.5-0.5b
//   [--streams 1,2,4,8] [--tokens 128] [--rounds 3] [--threads 2] [--out runs]
import { spawn, spawnSync } from 'node:child_process';
import { readFileSync, writeFileSync, mkdirSync, rmSync } from 'node:fs';
import { cpus, getPriority, setPriority, tmpdir } from 'node:os';
import { dirname } from 'node:path';
import { parseOptions, sseChunks, startServer } from './serve_process.mjs';

function parseArgs(argv) {
  const options = parseOptions(argv, {
    fornace: 'build/bin/fornace', model: 'models/synth-qwen2.5-0.5b', streams: '1,2,4,8',
    tokens: '128', rounds: '3', threads: '2', out: 'runs', prompt: 'bench/prompts/alice-512.txt',
  });
  options.streams = options.streams.split(',').map(Number);
  for (const key of ['tokens', 'rounds', 'threads']) options[key] = Number(options[key]);
  if (options.streams.some((n) => !(n >= 1)) || !(options.tokens >= 2) || !(options.rounds >= 1)) {
    console.error('error: --streams, --tokens (>= 2) and --rounds need positive integers');
    process.exit(2);
  }
  return options;
}

// Nearest-rank quantile of sorted values.
function quantile(sorted, q) {
  if (sorted.length === 0) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1))];
}
const median = (values) => quantile([...values].sort((a, b) => a - b), 0.5);

// One streamed completion: times of the start, of each text chunk and of the end, and the
// tokens the usage chunk reports.
async function streamCompletion(url, prompt, tokens) {
  const start = performance.now();
  const response = await fetch(`${url}/v1/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ prompt, max_tokens: tokens, temperature: 0, ignore_eos: true, stream: true,
      stream_options: { include_usage: true } }),
  });
  if (!response.ok) throw new Error(`HTTP ${response.status}: ${await response.text()}`);
  const chunkTimes = [];
  let usage = null;
  for await (const { chunk, now } of sseChunks(response)) {
    if (chunk.usage) usage = chunk.usage;
    if (chunk.choices?.[0]?.text) chunkTimes.push(now);
  }
  if (!usage || chunkTimes.length === 0) throw new Error('a stream ended without text or usage');
  return { start, end: performance.now(), chunkTimes, promptTokens: usage.prompt_tokens, completionTokens: usage.completion_tokens };
}

async function serverCounters(url) {
  const text = await (await fetch(`${url}/metrics`)).text();
  const value = (name) => Number(new RegExp(`^${name} (\\S+)$`, 'm').exec(text)?.[1] ?? NaN);
  return { tokens: value('fornace_completion_tokens_total'), decodeSeconds: value('fornace_decode_seconds_total') };
}

// N concurrent streams. The aggregate counts every token over the wall time of the whole batch;
// the decode aggregate is the engine's: tokens of decode passes over the time in them (each
// request's first token comes from its prefill).
async function runLevel(url, prompts, streams, tokens) {
  const before = await serverCounters(url);
  const results = await Promise.all(prompts.slice(0, streams).map((prompt) => streamCompletion(url, prompt, tokens)));
  const after = await serverCounters(url);
  const first = Math.min(...results.map((r) => r.start));
  const last = Math.max(...results.map((r) => r.end));
  const total = results.reduce((sum, r) => sum + r.completionTokens, 0);
  const decode = (after.tokens - before.tokens - streams) / (after.decodeSeconds - before.decodeSeconds);
  return { results, aggregate: (1000 * total) / (last - first), decode };
}

// Decode tok/s of one stream as `fornace` reports it: tokens after the first over their time.
function streamDecodeRate(result) {
  const decodeMs = result.chunkTimes[result.chunkTimes.length - 1] - result.chunkTimes[0];
  return (1000 * (result.completionTokens - 1)) / decodeMs;
}

// `fornace` at the priority the server runs at (this client runs below it).
async function fornaceDecodeRate(options, promptFile, priority) {
  const child = spawn(options.fornace, ['--model', options.model, '--prompt-file', promptFile,
    '--max-new-tokens', String(options.tokens), '--ignore-eos', '--threads', String(options.threads),
    '--json', '--quiet'], { stdio: ['ignore', 'pipe', 'pipe'] });
  setPriority(child.pid, priority);
  let stdout = '', stderr = '';
  child.stdout.on('data', (data) => { stdout += data; });
  child.stderr.on('data', (data) => { stderr += data; });
  const code = await new Promise((resolve) => child.on('exit', resolve));
  if (code !== 0) throw new Error(`fornace failed: ${stderr}`);
  const lines = stdout.trim().split('\n');
  return JSON.parse(lines[lines.length - 1]).decode_tok_s;
}

function format(value, digits = 1) {
  return Number.isFinite(value) ? value.toFixed(digits) : '–';
}

// Aggregate tok/s against streams (end to end, and the engine's decode passes, with the single
// stream times N as the ideal), and TTFT and
// per-token latency quantiles against streams.
function svgPlot(rows, title) {
  const width = 900, height = 360, margin = 60, panel = (width - 3 * margin) / 2;
  const xs = rows.map((r) => r.streams);
  const xScale = (x, left) => left + (Math.log2(x) / Math.log2(Math.max(...xs, 2))) * panel;
  const line = (points, color, dash = '') =>
    `<polyline fill="none" stroke="${color}" stroke-width="2" ${dash ? `stroke-dasharray="${dash}"` : ''} points="${points.map(([x, y]) => `${x.toFixed(1)},${y.toFixed(1)}`).join(' ')}"/>` +
    points.map(([x, y]) => `<circle cx="${x.toFixed(1)}" cy="${y.toFixed(1)}" r="3" fill="${color}"/>`).join('');
  const axes = (left, maxY, label) => {
    let out = `<line x1="${left}" y1="${height - margin}" x2="${left + panel}" y2="${height - margin}" stroke="#333"/>` +
      `<line x1="${left}" y1="${margin}" x2="${left}" y2="${height - margin}" stroke="#333"/>` +
      `<text x="${left + panel / 2}" y="${height - 20}" text-anchor="middle" font-size="12">concurrent streams</text>` +
      `<text x="${left}" y="${margin - 10}" font-size="12">${label}</text>`;
    for (const x of xs) out += `<text x="${xScale(x, left)}" y="${height - margin + 16}" text-anchor="middle" font-size="11">${x}</text>`;
    for (let i = 0; i <= 4; i++) {
      const y = height - margin - (i / 4) * (height - 2 * margin);
      out += `<text x="${left - 6}" y="${y + 4}" text-anchor="end" font-size="11">${format((maxY * i) / 4, 0)}</text>`;
    }
    return out;
  };
  const yScale = (v, maxY) => height - margin - (v / maxY) * (height - 2 * margin);
  const left1 = margin, left2 = 2 * margin + panel;
  const single = rows[0].aggregate / rows[0].streams;
  const maxTok = Math.max(...rows.map((r) => Math.max(r.aggregate, r.decode, single * r.streams))) * 1.05;
  const maxMs = Math.max(...rows.map((r) => Math.max(r.ttftP99, r.itlP99))) * 1.05;
  let svg = `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" font-family="sans-serif">` +
    `<rect width="100%" height="100%" fill="white"/><text x="${width / 2}" y="20" text-anchor="middle" font-size="14">${title}</text>`;
  svg += axes(left1, maxTok, 'aggregate tok/s (median of rounds)');
  svg += line(rows.map((r) => [xScale(r.streams, left1), yScale(single * r.streams, maxTok)]), '#999', '4 4');
  svg += line(rows.map((r) => [xScale(r.streams, left1), yScale(r.aggregate, maxTok)]), '#c0392b');
  svg += line(rows.map((r) => [xScale(r.streams, left1), yScale(r.decode, maxTok)]), '#e67e22');
  svg += `<text x="${left1 + 8}" y="${margin + 12}" font-size="11" fill="#c0392b">fornace serve, end to end</text>` +
    `<text x="${left1 + 8}" y="${margin + 26}" font-size="11" fill="#e67e22">engine decode passes</text>` +
    `<text x="${left1 + 8}" y="${margin + 40}" font-size="11" fill="#999">1 stream × N (dashed)</text>`;
  svg += axes(left2, maxMs, 'latency, ms');
  const series = [['ttftP50', '#2471a3', '', 'TTFT p50'], ['ttftP99', '#2471a3', '4 4', 'TTFT p99'],
    ['itlP50', '#27ae60', '', 'per token p50'], ['itlP99', '#27ae60', '4 4', 'per token p99']];
  series.forEach(([key, color, dash, label], i) => {
    svg += line(rows.map((r) => [xScale(r.streams, left2), yScale(r[key], maxMs)]), color, dash);
    svg += `<text x="${left2 + 8}" y="${margin + 12 + 14 * i}" font-size="11" fill="${color}">${label}${dash ? ' (dashed)' : ''}</text>`;
  });
  return `${svg}</svg>\n`;
}

// The machine's roofs as fornace-bench measures them (next to the fornace binary), before a round:
// the ratios between levels depend on how fast memory is, which drifts between processes.
async function measureRoofs(options, priority) {
  const bench = `${dirname(options.fornace)}/fornace-bench`;
  const child = spawn(bench, ['roofs', '--threads', String(options.threads)], { stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '', stderr = '';
  child.on('error', (error) => { stderr += error.message; });
  child.stdout.on('data', (data) => { stdout += data; });
  child.stderr.on('data', (data) => { stderr += data; });
  if (child.pid) setPriority(child.pid, priority);
  const code = await new Promise((resolve) => child.on('close', resolve));
  if (code !== 0) throw new Error(`${bench} roofs failed: ${stderr.trim()}`);
  return JSON.parse(stdout.trim().split('\n').pop());
}

async function main() {
  const options = parseArgs(process.argv);
  const text = readFileSync(options.prompt, 'utf8');
  const maxStreams = Math.max(...options.streams);
  // A different prompt per stream, about 100 tokens each.
  const prompts = Array.from({ length: maxStreams }, (_, i) => `Request ${i + 1}. ${text.slice(400 * i, 400 * i + 400)}`);
  const promptFile = `${tmpdir()}/fornace-load-prompt-${process.pid}.txt`;
  mkdirSync(options.out, { recursive: true });
  writeFileSync(promptFile, prompts[0]);

  // The client runs at the lowest priority, so that on a machine with as many cores as compute
  // threads it takes time from the server's threads only when they leave some.
  const priority = getPriority();
  setPriority(19);
  const requests = [];
  const levels = new Map(options.streams.map((n) => [n, []]));
  const fornaceRates = [];
  const serverSingleRates = [];
  // A fresh server per round, as `fornace` is a fresh process per run: a process's memory
  // bandwidth differs from the next one's on a shared machine, so the rounds pair them.
  const roofs = [];
  for (let round = 0; round < options.rounds; round++) {
    roofs.push(await measureRoofs(options, priority));
    console.error(`round ${round + 1}/${options.rounds}: read ${format(roofs.at(-1).read_gbs)} GB/s`);
    fornaceRates.push(await fornaceDecodeRate(options, promptFile, priority));
    const server = await startServer(options.fornace, ['--model', options.model, '--parallel', String(maxStreams),
      '--ctx-size', '1024', '--threads', String(options.threads)]);
    setPriority(server.child.pid, priority);
    try {
      await runLevel(server.url, prompts, 1, 16);  // Warm-up.
      for (const streams of options.streams) {
        const level = await runLevel(server.url, prompts, streams, options.tokens);
        levels.get(streams).push(level);
        if (streams === 1) serverSingleRates.push(streamDecodeRate(level.results[0]));
        level.results.forEach((result, index) => requests.push({ streams, round, index, result }));
        console.error(`round ${round + 1}/${options.rounds}, ${streams} stream(s): ${format(level.aggregate)} tok/s`);
      }
    } finally {
      server.child.kill('SIGTERM');
      await server.exited;
    }
  }

  rmSync(promptFile, { force: true });

  const rows = options.streams.map((streams) => {
    const runs = levels.get(streams);
    const results = runs.flatMap((level) => level.results);
    const ttft = results.map((r) => r.chunkTimes[0] - r.start).sort((a, b) => a - b);
    const itl = results.flatMap((r) => r.chunkTimes.slice(1).map((t, i) => t - r.chunkTimes[i])).sort((a, b) => a - b);
    const aggregates = runs.map((level) => level.aggregate);
    // Against the single stream of the same round (the same server process).
    const ratioOf = (key) => (levels.has(1) ? runs.map((level, round) => level[key] / levels.get(1)[round][key]) : [NaN]);
    const ratios = ratioOf('aggregate');
    const decodes = runs.map((level) => level.decode);
    const decodeRatios = ratioOf('decode');
    return {
      ratio: median(ratios), ratioMin: Math.min(...ratios), ratioMax: Math.max(...ratios),
      decode: median(decodes), decodeMin: Math.min(...decodes), decodeMax: Math.max(...decodes),
      decodeRatio: median(decodeRatios), decodeRatioMin: Math.min(...decodeRatios), decodeRatioMax: Math.max(...decodeRatios),
      streams, aggregate: median(aggregates), aggregateMin: Math.min(...aggregates), aggregateMax: Math.max(...aggregates),
      ttftP50: quantile(ttft, 0.5), ttftP99: quantile(ttft, 0.99), ttftSamples: ttft.length,
      itlP50: quantile(itl, 0.5), itlP99: quantile(itl, 0.99), itlSamples: itl.length,
    };
  });

  const commit = spawnSync('git', ['rev-parse', '--short', 'HEAD'], { encoding: 'utf8' }).stdout.trim() || 'unknown';
  const date = new Date().toISOString().slice(0, 10);
  const base = `${options.out}/${date}-${commit}-load`;
  const cpu = cpus()[0]?.model ?? 'unknown CPU';
  writeFileSync(`${base}.csv`, ['streams,round,request,prompt_tokens,completion_tokens,ttft_ms,total_ms,stream_decode_tok_s',
    ...requests.map(({ streams, round, index, result }) => [streams, round, index, result.promptTokens, result.completionTokens,
      format(result.chunkTimes[0] - result.start, 2), format(result.end - result.start, 2), format(streamDecodeRate(result), 2)].join(','))].join('\n') + '\n');

  const range = (mid, low, high, digits = 1) => `${format(mid, digits)} (${format(low, digits)}–${format(high, digits)})`;
  const table = ['| streams | aggregate tok/s | × 1 stream | engine decode tok/s | × 1 stream | TTFT p50 / p99 ms | per-token p50 / p99 ms |',
    '| --- | --- | --- | --- | --- | --- | --- |',
    ...rows.map((r) => `| ${r.streams} | ${range(r.aggregate, r.aggregateMin, r.aggregateMax)} | ` +
      `${range(r.ratio, r.ratioMin, r.ratioMax, 2)} | ${range(r.decode, r.decodeMin, r.decodeMax)} | ` +
      `${range(r.decodeRatio, r.decodeRatioMin, r.decodeRatioMax, 2)} | ${format(r.ttftP50)} / ${format(r.ttftP99)} (${r.ttftSamples} requests) | ` +
      `${format(r.itlP50)} / ${format(r.itlP99)} (${r.itlSamples} gaps) |`)];
  const ratios = serverSingleRates.map((rate, i) => rate / fornaceRates[i]);
  const sorted = (values) => [...values].sort((a, b) => a - b);
  const decodeLine = `Single-stream decode, alternating runs: fornace serve ${format(median(serverSingleRates))} tok/s ` +
    `(${sorted(serverSingleRates).map((v) => format(v)).join(', ')}), fornace ${format(median(fornaceRates))} tok/s ` +
    `(${sorted(fornaceRates).map((v) => format(v)).join(', ')}); server / fornace per round: ${ratios.map((v) => format(v, 3)).join(', ')} ` +
    `(median ${format(median(ratios), 3)}).`;
  const reads = roofs.map((roof) => roof.read_gbs);
  const peaks = roofs.map((roof) => roof.peak_gflops);
  const roofLine = `Roofs measured before each round (\`fornace-bench roofs\`): streaming read ` +
    `${sorted(reads).map((v) => format(v)).join(', ')} GB/s; BF16 peak ${sorted(peaks).map((v) => format(v, 0)).join(', ')} GFLOP/s.`;
  writeFileSync(`${base}-roofs.csv`, ['round,read_gbs,peak_gflops',
    ...roofs.map((roof, round) => [round, format(roof.read_gbs, 2), format(roof.peak_gflops, 1)].join(','))].join('\n') + '\n');
  const markdown = [`# fornace serve under load: ${options.model}`, '',
    `Commit ${commit}, ${date}, ${cpu} (${cpus().length} CPUs), --threads ${options.threads}, --parallel ${maxStreams}; ` +
    `${options.tokens} tokens per stream (greedy, ignore_eos), prompts of about 100 tokens, ${options.rounds} rounds, ` +
    'each on a fresh server after a fresh `fornace` run. ' +
    'Aggregate tok/s: every completion token of a round over the wall time from the first request sent to the last stream ended ' +
    '(prefill included). Engine decode tok/s: the tokens of decode passes over the time in them, from /metrics (prefill ' +
    'excluded). × 1 stream: against the single stream of the same round and server. Medians of the rounds, ranges in ' +
    'brackets. TTFT: request sent to first text chunk. Per token: gaps between text chunks.', '',
    ...table, '', decodeLine, '', roofLine, ''].join('\n');
  writeFileSync(`${base}.md`, markdown);
  writeFileSync(`${base}.svg`, svgPlot(rows, `fornace serve, ${options.model.split('/').pop()}, ${commit}`));
  console.log(markdown);
  console.log(`wrote ${base}.csv, ${base}-roofs.csv, ${base}.md, ${base}.svg`);
}

main().catch((error) => {
  console.error(`error: ${error.message}`);
  process.exit(1);
});
