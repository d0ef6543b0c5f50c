// What the OpenAI client tests share: the client package, the tiny model and the server start.

export let OpenAI;
try {
  ({ default: OpenAI } = await import('openai'));
} catch (error) {
  console.error(`error: the npm package openai is not installed (${error.message}); run scripts/get-test-packages.sh`);
  process.exit(1);
}

export { fornace, modelId, startServer, tinyModel } from '../tiny_server.mjs';
