// Starts `fornace serve` on a free port and resolves once it prints its listening line; shared
// by the load benchmark and the OpenAI client tests.
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
