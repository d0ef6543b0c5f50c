// Makes the tokenizer goldens with the Hugging Face tokenizers library (its Rust core through the
// @anush008/tokenizers node binding), and cuts the benchmark prompts to exact token counts.
//
//   cd tests/reference && npm install && node make_tokenizer_golden.js ../../models ../../../shared
//
// Writes (paths relative to the repository root):
//   tests/data/tokenizer-golden.jsonl    one case per line: name, text, ids, nfc, decoded,
//                                        decoded_skip_special, decoded_each (short cases)
//   tests/data/tokenizer-golden-<family>.jsonl  the same (without nfc) for each tokenizer of
//                                        models/tokenizers/ named in `families`, the last line
//                                        the ids of alice.txt
//   tests/data/tokenizer-alice-ids.json  the ids of tests/data/alice.txt (the benchmark corpus)
//   tests/data/alice.txt                 a copy of the corpus
//   bench/prompts/alice-512.txt          the start of chapter I, 513 tokens
//   bench/prompts/alice-2048.txt         the start of chapter I, 2049 tokens
'use strict';

const fs = require('fs');
const path = require('path');
const {Tokenizer} = require('@anush008/tokenizers');
const {commonCases, familyCases} = require('./tokenizer_cases.js');

const repository = path.resolve(__dirname, '..', '..');
const modelDirectory = path.resolve(process.argv[2] || path.join(repository, 'models'));
const sharedDirectory = path.resolve(process.argv[3] || path.join(repository, '..', 'shared'));

const corpus = fs.readFileSync(path.join(sharedDirectory, 'corpus', 'alice.txt'), 'utf8');

const cases = commonCases(corpus);
const chapterStart = corpus.indexOf('CHAPTER I\n');

// The tokenizers of the other families (scripts/get-tokenizer.sh fetches them into
// models/tokenizers/<name>/), with chat-formatted snippets in each one's own markup.
const families = {
  gemma3: {
    'turns': '<bos><start_of_turn>user\nWho are you?<end_of_turn>\n<start_of_turn>model\nA rabbit.<end_of_turn>\n',
    'image markers': 'See <start_of_image><image_soft_token><end_of_image> here.',
    'html tokens': '<table><tr><td>1</td><td>two</td></tr></table>\n<h1>Title</h1><b>bold</b>',
  },
  llama3: {
    'turns': '<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nWho are you?<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n',
    'end of text': 'The end.<|end_of_text|>',
  },
  llama3_1: {
    'turns': '<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nBe brief.<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>',
    'tool call': '<|python_tag|>search("rabbit")<|eom_id|>',
  },
  qwen3: {
    'turns': '<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\nHello.<|im_end|>',
    'tool response': '<tool_response>\n{"ok": true}\n</tool_response>',
  },
};

// ---- Running the reference --------------------------------------------------------------------

// One JSON line per case: name, text, ids (add_special_tokens off: no template tokens such as a
// BOS), the decoded text with and without special tokens, and each id decoded alone (short cases).
async function goldenLines(tokenizer, cases, withNfc) {
  const names = new Set();
  const lines = [];
  for (const {name, text} of cases) {
    if (names.has(name)) throw new Error(`duplicate case name: ${name}`);
    names.add(name);
    const ids = (await tokenizer.encode(text, null, {addSpecialTokens: false})).getIds();
    const record = {name, text, ids};
    if (withNfc) record.nfc = text.normalize('NFC');
    record.decoded = await tokenizer.decode(ids, false);
    record.decoded_skip_special = await tokenizer.decode(ids, true);
    if (ids.length <= 64) {
      record.decoded_each = [];
      for (const id of ids) record.decoded_each.push(await tokenizer.decode([id], false));
    }
    lines.push(JSON.stringify(record));
  }
  return lines;
}

async function main() {
  const tokenizer = Tokenizer.fromFile(path.join(modelDirectory, 'tokenizer.json'));
  const encode = async (text) => (await tokenizer.encode(text)).getIds();

  const dataDirectory = path.join(repository, 'tests', 'data');
  const lines = await goldenLines(tokenizer, cases, true);
  fs.writeFileSync(path.join(dataDirectory, 'tokenizer-golden.jsonl'), lines.join('\n') + '\n');

  fs.writeFileSync(path.join(dataDirectory, 'alice.txt'), corpus);
  const aliceIds = await encode(corpus);
  fs.writeFileSync(path.join(dataDirectory, 'tokenizer-alice-ids.json'), JSON.stringify(aliceIds) + '\n');

  // Prompts: the longest cut of chapter I at a word end whose encoding has exactly `target` ids.
  const chapter = corpus.slice(chapterStart);
  const wordEnds = [];
  for (let index = 1; index < chapter.length; ++index) {
    if (/\s/.test(chapter[index]) && !/\s/.test(chapter[index - 1])) wordEnds.push(index);
  }
  const promptDirectory = path.join(repository, 'bench', 'prompts');
  fs.mkdirSync(promptDirectory, {recursive: true});
  for (const [file, target] of [['alice-512.txt', 513], ['alice-2048.txt', 2049]]) {
    let low = 0, high = wordEnds.length - 1;  // Largest word end with at most `target` ids.
    while (low < high) {
      const middle = Math.ceil((low + high) / 2);
      if ((await encode(chapter.slice(0, wordEnds[middle]))).length <= target) low = middle;
      else high = middle - 1;
    }
    // Prefer a word end; otherwise cut at any character between this word end and the next.
    let cut = -1;
    for (let index = low; index >= Math.max(0, low - 50) && cut < 0; --index) {
      if ((await encode(chapter.slice(0, wordEnds[index]))).length === target) cut = wordEnds[index];
    }
    const next = wordEnds[Math.min(low + 1, wordEnds.length - 1)];
    for (let position = next; position > wordEnds[low] && cut < 0; --position) {
      if ((await encode(chapter.slice(0, position))).length === target) cut = position;
    }
    if (cut < 0) throw new Error(`no word end gives exactly ${target} tokens`);
    fs.writeFileSync(path.join(promptDirectory, file), chapter.slice(0, cut));
    console.log(`${file}: ${cut} characters, ${target} tokens`);
  }
  console.log(`tokenizer-golden.jsonl: ${lines.length} cases; alice: ${aliceIds.length} ids`);

  // Each family: the common cases and its own, then the whole corpus (its text is alice.txt).
  for (const [family, chatSnippets] of Object.entries(families)) {
    const file = path.join(modelDirectory, 'tokenizers', family, 'tokenizer.json');
    const familyTokenizer = Tokenizer.fromFile(file);
    const json = JSON.parse(fs.readFileSync(file, 'utf8'));
    const vocab = familyTokenizer.getVocab(true);
    const familyLines = await goldenLines(
        familyTokenizer, [...cases, ...familyCases(json, vocab, chatSnippets)], false);
    const corpusIds =
        (await familyTokenizer.encode(corpus, null, {addSpecialTokens: false})).getIds();
    const corpusDecoded = await familyTokenizer.decode(corpusIds, false);
    if (corpusDecoded !== corpus) throw new Error(`${family}: the corpus does not decode to itself`);
    familyLines.push(JSON.stringify(
        {name: 'alice corpus', text_file: 'tests/data/alice.txt', ids: corpusIds, decoded_is_text: true}));
    const output = `tokenizer-golden-${family}.jsonl`;
    fs.writeFileSync(path.join(dataDirectory, output), familyLines.join('\n') + '\n');
    console.log(`${output}: ${familyLines.length} cases; alice: ${corpusIds.length} ids`);
  }
}

main().catch((error) => {
  console.error(error);
  process.exit(1);
});
