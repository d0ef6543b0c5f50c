// The tokenizer golden cases shared by every tokenizer: prose from the corpus, whitespace, digits,
// contractions, scripts, combining marks, emoji, Qwen's special tokens, code, long runs, edges.
'use strict';

// The cases as {name, text}, in a fixed order; `corpus` is the text of alice.txt.
function commonCases(corpus) {
  const cases = [];
  function add(name, text) {
    cases.push({name, text});
  }

  // Prose: paragraphs spread evenly over the book, and a few longer runs with their line breaks.
  const paragraphs = corpus.split(/\n\n+/).filter((paragraph) => paragraph.trim().length > 0);
  const paragraphCount = 110;
  for (let index = 0; index < paragraphCount; ++index) {
    const pick = Math.floor((index * paragraphs.length) / paragraphCount);
    add(`alice paragraph ${pick}`, paragraphs[pick]);
  }
  const chapterStart = corpus.indexOf('CHAPTER I\n');
  add('alice chapter I opening, 3000 characters', corpus.slice(chapterStart, chapterStart + 3000));
  add('alice title page', corpus.slice(0, chapterStart));
  add('alice ending', corpus.slice(corpus.length - 1500));
  add('alice lines joined with CRLF', corpus.slice(chapterStart, chapterStart + 1200).replace(/\n/g, '\r\n'));

  // Whitespace: every kind alone, in runs, between and around words.
  const whitespace = {
    'space': ' ', 'tab': '\t', 'line feed': '\n', 'carriage return': '\r', 'CRLF': '\r\n',
    'vertical tab': '\v', 'form feed': '\f', 'next line U+0085': '\u0085', 'NBSP U+00A0': '\u00a0',
    'ogham space U+1680': '\u1680', 'en quad U+2000': '\u2000', 'em space U+2003': '\u2003',
    'thin space U+2009': '\u2009', 'hair space U+200A': '\u200a', 'line separator U+2028': '\u2028',
    'paragraph separator U+2029': '\u2029', 'narrow NBSP U+202F': '\u202f',
    'math space U+205F': '\u205f', 'ideographic space U+3000': '\u3000',
    'mongolian vowel separator U+180E': '\u180e', 'zero width space U+200B': '\u200b',
    'BOM U+FEFF': '\ufeff', 'file separator U+001C': '\u001c',
  };
  for (const [name, space] of Object.entries(whitespace)) {
    add(`${name} alone`, space);
    add(`${name} run of 3`, space.repeat(3));
    add(`${name} between words`, `hello${space}world`);
    add(`${name} run between words`, `hello${space.repeat(4)}world`);
    add(`${name} around a word`, `${space}${space}word${space}`);
    add(`${name} before a line feed`, `a${space}\nb`);
  }
  for (const [name, text] of Object.entries({
    'mixed run': ' \t \n\n  x',
    'CRLF pairs': 'one\r\n\r\ntwo\r\nthree\r\n',
    'lone CR between words': 'one\rtwo\r\rthree',
    'spaces then newline then spaces': 'end   \n   start',
    'trailing spaces': 'trailing   ',
    'leading spaces': '    leading',
    'only newlines': '\n\n\n\n',
    'tabs before code': '\t\tif (x) {\n\t\t\treturn;\n\t\t}',
    'space before punctuation': 'wait , what ? ! ;',
    'newline then punctuation': 'line\n!\n?\n',
    'NBSP inside French': 'Il a dit\u00a0: «\u00a0bonjour\u00a0»\u202f!',
    'ideographic spaces in Japanese': '日本語\u3000の\u3000文章',
    'every whitespace in one run': Object.values(whitespace).join(''),
    'spaces of length 1 to 9': Array.from({length: 9}, (_, n) => 'x' + ' '.repeat(n + 1)).join('') + 'x',
    'newline runs of length 1 to 6': Array.from({length: 6}, (_, n) => 'y' + '\n'.repeat(n + 1)).join(''),
  })) {
    add(`whitespace: ${name}`, text);
  }

  // Digits.
  for (const [name, text] of Object.entries({
    'single digit': '7', 'long number': '12345678901234567890', 'decimal': 'pi is 3.14159265',
    'thousands': '1,000,000 and 1 000 000', 'version': 'v1.2.3-rc4', 'date': '2024-01-31T12:34:56Z',
    'phone': '+1 (555) 010-9999', 'negative and exponent': '-4.2e-10 +7E+3',
    'arabic-indic digits': '٠١٢٣٤٥٦٧٨٩', 'devanagari digits': '०१२३४५६७८९',
    'circled numbers': '①②③ ⑩', 'superscripts': 'x² + y³ = z⁴', 'roman numeral letters': 'Ⅻ ⅻ Ⅳ',
    'fullwidth digits': '１２３４５', 'fractions': '½ ¾ ⅓', 'digits glued to letters': 'abc123def456',
    'hex': '0xDEADBEEF 0b1010', 'money': '$1,234.56 €99 ¥1000',
  })) {
    add(`digits: ${name}`, text);
  }

  // Contractions in every letter case, after words and alone.
  const contractions = ['s', 't', 're', 've', 'm', 'll', 'd'];
  function letterCases(suffix) {
    const variants = new Set();
    for (let mask = 0; mask < 1 << suffix.length; ++mask) {
      variants.add([...suffix].map((c, i) => (mask & (1 << i) ? c.toUpperCase() : c)).join(''));
    }
    return [...variants];
  }
  for (const suffix of contractions) {
    for (const variant of letterCases(suffix)) {
      add(`contraction '${variant}`, `word'${variant} WORD'${variant} '${variant} x'${variant}y`);
    }
  }
  for (const [name, text] of Object.entries({
    'sentence': "I'm sure you'll see they've said it's what we'd do, and you're right; don't.",
    'shouting': "I'M SURE YOU'LL SEE THEY'VE SAID IT'S WHAT WE'D DO, AND YOU'RE RIGHT; DON'T.",
    'curly apostrophes': 'It’s what they’ve said; don’t',
    'long s': "it'ſ the ſame",
    'quotes around words': "'quoted' and 'S' and ''s",
    'apostrophe then digit': "'70s and '99",
    'kelvin sign': "'K and 'k 5 K",
  })) {
    add(`contractions: ${name}`, text);
  }

  // Scripts.
  for (const [name, text] of Object.entries({
    'chinese': '爱丽丝开始感到厌倦了，她和姐姐坐在河岸上，无事可做。',
    'chinese traditional': '愛麗絲漫遊奇境記',
    'japanese': '不思議の国のアリスは、ルイス・キャロルの小説です。',
    'japanese halfwidth katakana': 'ｱﾘｽ ﾜﾝﾀﾞｰﾗﾝﾄﾞ',
    'korean': '이상한 나라의 앨리스는 루이스 캐럴의 소설이다.',
    'cyrillic': 'Алиса в Стране чудес — повесть Льюиса Кэрролла.',
    'cyrillic upper': 'АЛИСА В СТРАНЕ ЧУДЕС',
    'ukrainian': 'Аліса в Країні Див, ґанок, їжак, є',
    'arabic': 'أليس في بلاد العجائب هي رواية للكاتب لويس كارول.',
    'arabic with harakat': 'بِسْمِ اللَّهِ الرَّحْمَنِ الرَّحِيمِ',
    'persian with ZWNJ': 'می‌خواهم کتاب‌ها را بخوانم',
    'hebrew': 'הרפתקאות אליס בארץ הפלאות',
    'hebrew with niqqud': 'בְּרֵאשִׁית בָּרָא אֱלֹהִים',
    'devanagari': 'एलिस इन वंडरलैंड लुईस कैरल का उपन्यास है।',
    'devanagari conjuncts': 'क्षत्रिय श्रीमान् द्वार',
    'tamil': 'ஆலிஸின் அற்புத உலகம்',
    'thai': 'อลิซในแดนมหัศจรรย์',
    'greek': 'Η Αλίκη στη Χώρα των Θαυμάτων',
    'armenian': 'Ալիսը Հրաշքների աշխարհում',
    'georgian': 'ალისა საოცრებათა ქვეყანაში',
    'amharic': 'አሊስ በድንቅ ምድር',
    'vietnamese': 'Alice ở xứ sở thần tiên',
    'turkish dotted i': 'İstanbul ıstakoz İI ıi',
    'german': 'Straße, Größe, ÄÖÜ äöü ẞ',
    'mixed scripts': 'Alice (Алиса, 爱丽丝, アリス, 앨리스, أليس) read 3 books.',
    'cjk extension B': '𠀀𠀁𡃁',
    'math letters': '𝐀𝐁𝐂 𝔸𝔹ℂ 𝒜',
  })) {
    add(`script: ${name}`, text);
  }

  // Combining marks against precomposed letters (NFC).
  for (const [name, text] of Object.entries({
    'e acute precomposed': 'caf\u00e9',
    'e acute combining': 'cafe\u0301',
    'A ring precomposed': '\u00c5ngstr\u00f6m',
    'A ring combining': 'A\u030angstro\u0308m',
    'angstrom sign': '\u212b',
    'ohm sign': '\u2126',
    'n tilde both ways': '\u00f1 n\u0303 N\u0303',
    'stacked marks reordered': 'q\u0307\u0323 s\u0323\u0307',
    'vietnamese decomposed': 'Vie\u0302\u0323t Nam',
    'hangul jamo': '\u1100\u1161\u11a8 \u1112\u1161\u11ab',
    'hangul syllables': '각 한',
    'combining mark alone': '\u0301',
    'combining mark after space': 'a \u0301b',
    'combining mark after digit': '1\u0301 2\u20e3',
    'many combining marks': 'Z\u0351\u036b\u0343\u036a\u0302\u036b\u033d\u034f\u0334\u0319\u0324\u031e\u0349\u035a\u032f\u031e\u0320\u034dA\u0334\u0335\u031c\u0330\u0354L\u0368\u0367\u0369\u0358\u0320G\u0311\u0357\u030e\u0305\u035b\u0341\u0334\u033b\u0348\u034d\u0354\u0339O\u0342\u030c\u030c\u0358\u0328\u0335\u0339\u033b\u031d\u0333',
    'compatibility forms kept by NFC': 'ﬁ ﬀ ① ｶ ㎏',
    'devanagari nukta': '\u0915\u093c \u0958',
    'greek tonos': '\u03ac \u03b1\u0301',
    'CJK compatibility ideograph': '\uf900\uf901',
  })) {
    add(`nfc: ${name}`, text);
  }

  // Emoji.
  for (const [name, text] of Object.entries({
    'thumbs up': '👍',
    'skin tone': '👍🏽 👋🏿',
    'family ZWJ': '👨‍👩‍👧‍👦',
    'rainbow flag': '🏳️‍🌈',
    'flags': '🇫🇷🇩🇪🇯🇵 🇺🇸',
    'subdivision flag': '🏴󠁧󠁢󠁳󠁣󠁴󠁿',
    'heart with variation selector': '❤️ ❤',
    'keycap': '1️⃣ #️⃣',
    'emoji in text': 'I love tea 🍵 and cake 🍰!',
    'emoji run': '😀😃😄😁😆😅😂🤣',
    'profession ZWJ': '👩🏽‍💻 🧑‍🚀',
  })) {
    add(`emoji: ${name}`, text);
  }

  // Special and added tokens inside text, and broken ones.
  for (const [name, text] of Object.entries({
    'chat turn': '<|im_start|>user\nHello!<|im_end|>\n<|im_start|>assistant\n',
    'endoftext': 'The end.<|endoftext|>',
    'adjacent specials': '<|im_end|><|im_end|><|endoftext|>',
    'special glued to words': 'a<|im_start|>b',
    'special between spaces': 'a <|im_start|> b',
    'think tags': '<think>\nreasoning\n</think>\n\nanswer',
    'tool call': '<tool_call>\n{"name": "f", "arguments": {}}\n</tool_call>',
    'vision tokens': '<|vision_start|><|image_pad|><|vision_end|>',
    'fim tokens': '<|fim_prefix|>def f():<|fim_suffix|>\n<|fim_middle|>',
    'missing closing bar': '<|im_start>',
    'missing closing angle': '<|im_start|',
    'missing opening': 'im_start|>',
    'space inside': '<|im_sta rt|>',
    'spaces around name': '<| im_start |>',
    'doubled angles': '<<|im_start|>>',
    'upper case': '<|IM_START|>',
    'truncated endoftext': '<|endoftext',
    'unknown special-looking': '<|not_a_token|>',
    'nested': '<|im_<|im_end|>start|>',
    'bars only': '<||> <|> |>',
    'special at end without newline': 'hi<|im_end|>',
    'think tag broken': '<think </think',
  })) {
    add(`special: ${name}`, text);
  }

  // Code, JSON, URLs and markup.
  for (const [name, text] of Object.entries({
    'python': 'def fib(n: int) -> int:\n    """Return the n-th number."""\n    a, b = 0, 1\n    for _ in range(n):\n        a, b = b, a + b\n    return a\n',
    'c++': '#include <vector>\n\nint main() {\n  std::vector<int> v{1, 2, 3};\n  for (auto& x : v) x *= 2;\n  return v[0] != 2;\n}\n',
    'javascript': 'const f = async (x) => { await g(x?.y ?? 0); return `${x}!`; };',
    'rust': 'fn main() { let v: Vec<u8> = vec![0xff; 4]; println!("{:?}", v); }',
    'shell': 'for f in *.txt; do wc -l "$f" | sort -n >> out.log 2>&1; done',
    'sql': "SELECT name, COUNT(*) FROM users WHERE age >= 18 GROUP BY name HAVING COUNT(*) > 1;",
    'json object': '{"name": "Alice", "age": 7, "pets": ["Dinah"], "nested": {"a": [1, 2.5, null, true]}}',
    'json compact': '{"a":1,"b":[1,2,3],"c":{"d":"e"}}',
    'json escapes': '{"text": "line\\nbreak \\"quoted\\" \\u00e9"}',
    'url': 'https://example.com/path/to/page?query=1&lang=en#section-2',
    'url with percent': 'http://example.org/a%20b/%E4%B8%AD?x=%3D',
    'email': 'alice.liddell@wonderland.example',
    'unix path': '/usr/local/lib/python3.11/site-packages/__init__.py',
    'windows path': 'C:\\Users\\Alice\\Documents\\rabbit-hole.txt',
    'html': '<p class="intro">Down the <b>Rabbit</b>-Hole &amp; beyond</p>',
    'markdown': '# Title\n\n- item *one*\n- item **two**\n\n```python\nprint(1)\n```\n',
    'regex': '^(?:[a-z0-9!#$%&\'*+/=?^_`{|}~-]+)@\\w+\\.[a-z]{2,}$',
    'yaml': 'key: value\nlist:\n  - a\n  - b\n',
    'latex': '\\frac{1}{2} + \\sum_{i=0}^{n} x_i^2',
    'punctuation soup': '!!! ??? ... --- *** ### @@@ $$$ %%% ^^^ &&& ((( ))) [[[ ]]] {{{ }}}',
    'operators': 'a+=b; c-->d; e<=>f; g&&h||!i; j<<2>>3',
  })) {
    add(`code: ${name}`, text);
  }

  // Long runs of one character.
  for (const [name, unit] of Object.entries({
    'a': 'a', 'space': ' ', 'line feed': '\n', 'digit 1': '1', 'exclamation': '!', 'e acute': 'é',
    'CJK 中': '中', 'tab': '\t', 'underscore': '_', 'hyphen': '-', 'ab pair': 'ab', 'emoji': '😀',
    'CRLF': '\r\n', 'NBSP': '\u00a0',
  })) {
    const count = [...unit].length === 1 ? 5000 : 2500;
    add(`repeat: ${count} x ${name}`, unit.repeat(count));
  }
  add('repeat: word and space 1000 times', 'the '.repeat(1000));

  // Edges and odd characters.
  for (const [name, text] of Object.entries({
    'empty': '',
    'single letter': 'a',
    'single space': ' ',
    'printable ascii': Array.from({length: 95}, (_, i) => String.fromCharCode(32 + i)).join(''),
    'control characters': Array.from({length: 32}, (_, i) => String.fromCharCode(i)).join('') + '\u007f',
    'NUL inside text': 'a\u0000b',
    'latin-1 supplement': Array.from({length: 96}, (_, i) => String.fromCharCode(0xa0 + i)).join(''),
    'private use': '\ue000\uf8ff',
    'noncharacters': '\ufdd0\ufffe\uffff',
    'last code point': '\u{10ffff}',
    'replacement character': '\ufffd',
    'soft hyphen': 'co\u00adoperate',
    'zero width joiner alone': 'a\u200db',
    'bidi controls': '\u202eabc\u202c \u200f',
    'variation selectors': '\u845b\udb40\udd00',
    'tag characters': '\udb40\udc41\udb40\udc42',
    'box drawing': '┌─┐\n│x│\n└─┘',
    'arrows and symbols': '→ ⇒ ∀∃ ∑ ∞ ≠ ≤ ™ © ®',
  })) {
    add(`edge: ${name}`, text);
  }


  return cases;
}

// Cases made for one tokenizer, from its own tokenizer.json (`json`, parsed) and vocabulary
// (`vocab`, token to id, added tokens included): its added tokens in and around text, characters
// its vocabulary lacks (byte fallback), long words and whitespace runs, and pseudo-random mixes.
function familyCases(json, vocab, chatSnippets) {
  const cases = [];
  function add(name, text) {
    cases.push({name, text});
  }

  // Added tokens: every special one when few, else a spread; a spread of the others.
  const spread = (tokens, count) =>
    tokens.length <= count
      ? tokens
      : Array.from({length: count}, (_, n) => tokens[Math.floor((n * tokens.length) / count)]);
  const added = json.added_tokens.filter((token) => token.content.length > 0);
  const picked = [
    ...spread(added.filter((token) => token.special), 12),
    ...spread(added.filter((token) => !token.special), 12),
  ];
  for (const {content, special} of picked) {
    const label = `${special ? 'special' : 'added'} ${JSON.stringify(content)}`;
    add(`${label} alone`, content);
    add(`${label} inside text`, `Hello${content}world ${content} end`);
    add(`${label} twice`, content + content);
    add(`${label} cut short`, content.slice(0, -1) + ' ' + content.slice(1));
  }
  for (const [name, text] of Object.entries(chatSnippets)) add(`chat: ${name}`, text);

  // Characters the model's vocabulary lacks, spread over the planes (byte fallback for Gemma).
  const missing = [];
  for (const [first, last, step] of [
    [0x80, 0x2fff, 7], [0x3000, 0xd7ff, 97], [0xe000, 0xffff, 131], [0x10000, 0x2ffff, 977],
    [0xe0000, 0xe01ef, 13], [0xf0000, 0x10ffff, 9973],
  ]) {
    let found = 0;
    for (let code = first; code <= last && found < 12; code += step) {
      const character = String.fromCodePoint(code);
      if (!(character in vocab) && /\P{Cs}/u.test(character)) {
        missing.push(character);
        ++found;
      }
    }
  }
  for (let index = 0; index < missing.length; index += 3) {
    const three = missing.slice(index, index + 3);
    const codes = three.map((c) => 'U+' + c.codePointAt(0).toString(16).toUpperCase()).join(' ');
    add(`rare: ${codes}`, `a${three[0]} ${three.join('')}b ${three[three.length - 1]}`);
  }
  add('rare: all in one run', missing.join(''));
  add('rare: between spaces and newlines', missing.slice(0, 10).join(' \n'));

  // Long words, number runs and whitespace runs longer than any token.
  for (const [name, text] of Object.entries({
    'english': 'supercalifragilisticexpialidocious antidisestablishmentarianism',
    'german compound': 'Donaudampfschifffahrtselektrizitätenhauptbetriebswerkbauunterbeamtengesellschaft',
    'identifier': 'AbstractSingletonProxyFactoryBeanDefinitionRegistryPostProcessorImpl_v2',
    'letters without a pattern': Array.from({length: 300}, (_, n) => 'qxzjkvbwfgmp'[(n * n + 3 * n) % 12]).join(''),
    'welsh place': 'Llanfairpwllgwyngyllgogerychwyrndrobwllllantysiliogogogoch',
    'long number': '3141592653589793238462643383279502884197169399375105820974944592307816406286',
    'digits with spaces': '1 22 333 4444 55555 666666 7777777 88888888',
    'spaces 40': 'a' + ' '.repeat(40) + 'b',
    'newlines 40': 'a' + '\n'.repeat(40) + 'b',
    'tabs 40': 'a' + '\t'.repeat(40) + 'b',
    'lower blocks 40': 'a' + '\u2581'.repeat(40) + 'b',
    'lower blocks in text': '\u2581Hello \u2581\u2581world\u2581',
    'mixed runs': ' \n \t\n\n\t  \n\n\n   \t\t\n',
    'leading and trailing': '   \n\tpadded text\t\n   ',
    'only spaces 7': '       ',
    'newline space pairs': '\n \n \n \n ',
    'crlf runs': '\r\n\r\n\r\n\r\nx\r\r\n',
    'punctuation run': '?!?!?!...,,,;;;:::---___===+++***&&&^^^%%%$$$###@@@!!!~~~```',
    'ellipsis and dashes': 'Wait\u2026 what\u2014really\u2013no?!',
  })) {
    add(`long: ${name}`, text);
  }

  // Pseudo-random mixes of fragments (seeded, so the cases are the same on every run).
  let seed = 0x2545f491;
  const random = () => {
    seed = (seed + 0x6d2b79f5) | 0;
    let value = Math.imul(seed ^ (seed >>> 15), 1 | seed);
    value = (value + Math.imul(value ^ (value >>> 7), 61 | value)) ^ value;
    return ((value ^ (value >>> 14)) >>> 0) / 4294967296;
  };
  const fragments = [
    'the', ' the', 'Alice', ' rabbit', 'hole', "'s", "'LL", ' ', '  ', '   ', '\t', '\n', '\n\n',
    '\r\n', '\u00a0', '\u3000', '0', '42', '2024', '1234567', '3.14', '-', '...', '!', '?', '"',
    '(', ')', '{', '}', '<', '>', '</', '/>', '#', '@', '_', '=', '=>', '::', '中文', '日本語', 'カタカナ',
    '한국어', 'العربية', 'עברית', 'русский', 'ελληνικά', 'हिन्दी', 'ไทย', 'e\u0301', 'n\u0303',
    '\u00e9', '\u212b', '\ufb01', '😀', '👍🏽', '👨‍👩‍👧', '🇫🇷', '❤️', '\u200d', '\u2581',
    ...missing.slice(0, 8), ...picked.map((token) => token.content),
  ];
  for (let index = 0; index < 60; ++index) {
    const length = 1 + Math.floor(random() * 24);
    let text = '';
    for (let part = 0; part < length; ++part) text += fragments[Math.floor(random() * fragments.length)];
    add(`mix ${index}`, text);
  }
  return cases;
}

module.exports = {commonCases, familyCases};
