// Starts `fornace serve` on a free port and resolves once it prints its listening line, reads the
// `--name value` options of a benchmark and the chunks of a streamed response; shared by the load
// benchmarks and the OpenAI client tests.
import { spawn } from 'node:child_process';

// Resolves to { child, url, exited } where `exited` resolves to { code, signal, stderr }.
export function startServer(fornace, args, timeoutMs = 60000) {
  const child = spawn(fornace, ['serve', '--port', '0', ...args], { stdio: ['ignore', 'ignore', 'pipe'] });
  let stderr = '';
  const exited = new Promise((resolve) => child.on('exit', (code, signal) => resolve({ code, signal, stderr })));
  const listening = new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`no listening line in ${timeoutMs / 1000} s: ${stderr}`)), timeoutMs);
    child.stderr.on('data', (data) => {
      stderr += data;
      const match = /listening on (http:\/\/[^\s]+)\n/.exec(stderr);
      if (match) {
        clearTimeout(timer);
        resolve(match[1]);
      }
    });
    exited.then(({ code }) => {
      clearTimeout(timer);
      reject(new Error(`fornace serve exited with ${code}: ${stderr}`));
    });
  });
  return listening.then((url) => ({ child, url, exited }));
}

// `--key value` pairs of argv over `defaults` (strings); an unknown or incomplete option is an
// error line and exit 2.
export function parseOptions(argv, defaults) {
  const options = { ...defaults };
  for (let i = 2; i < argv.length; i += 2) {
    const key = argv[i].replace(/^--/, '');
    if (!(key in options) || i + 1 >= argv.length) {
      console.error(`error: unknown or incomplete option ${argv[i]}; options: ${Object.keys(options).map((k) => `--${k}`).join(' ')}`);
      process.exit(2);
    }
    options[key] = argv[i + 1];
  }
  return options;
}

// The JSON chunks of a server-sent event stream, each with the time its bytes arrived.
export async function* sseChunks(response) {
  const decoder = new TextDecoder();
  let buffer = '';
  for await (const bytes of response.body) {
    const now = performance.now();
    buffer += decoder.decode(bytes, { stream: true });
    let end;
    while ((end = buffer.indexOf('\n\n')) >= 0) {
      const event = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      if (!event.startsWith('data: ') || event === 'data: [DONE]') continue;
      yield { chunk: JSON.parse(event.slice(6)), now };
    }
  }
}
