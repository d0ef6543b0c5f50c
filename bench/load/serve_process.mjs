// Starts `fornace serve` on a free port and resolves once it prints its listening line, and reads
// the `--name value` options of a benchmark; shared by the load benchmarks and the OpenAI client
// tests.
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
