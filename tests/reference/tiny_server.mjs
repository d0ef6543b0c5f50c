// `fornace serve` on the tiny random-weight model, for the Node tests: FORNACE_BIN (the fornace
// binary), FORNACE_MODELS (a folder for the model) and FORNACE_TOKENIZER_DIR (the tokenizers).
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, renameSync, rmSync } from 'node:fs';
import { startServer as startServeProcess } from '../../bench/load/serve_process.mjs';

export const fornace = process.env.FORNACE_BIN;
const modelsDir = process.env.FORNACE_MODELS;
const tokenizerDir = process.env.FORNACE_TOKENIZER_DIR;
export const modelId = 'tiny-openai';

// The tiny f32 model, written once per build folder (to a temporary name, then renamed; the
// first of several test processes to finish wins).
export function tinyModel() {
  const dir = `${modelsDir}/${modelId}`;
  if (existsSync(`${dir}/model.safetensors`)) return dir;
  mkdirSync(modelsDir, { recursive: true });
  const partial = `${dir}.partial-${process.pid}`;
  const synth = spawnSync(fornace, ['synth', '--preset', 'tiny', '--dtype', 'f32', '--seed', '7',
    '--tokenizer-dir', tokenizerDir, '--out', partial], { encoding: 'utf8' });
  assert.equal(synth.status, 0, synth.stderr);
  try {
    renameSync(partial, dir);
  } catch (error) {
    // Another test process wrote it first.
    rmSync(partial, { recursive: true, force: true });
    if (!existsSync(`${dir}/model.safetensors`)) throw error;
  }
  return dir;
}

// Resolves to { child, url, exited } (see bench/load/serve_process.mjs).
export function startServer(extraArgs = []) {
  return startServeProcess(fornace, ['--model', tinyModel(), '--threads', '2', '--ctx-size', '1024',
    ...extraArgs], 30000);
}
