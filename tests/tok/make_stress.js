// make_stress.js: writes the tokenizer test's Unicode stress files into OUT_DIR, the same
// bytes on every run (a seeded generator):
//   stress.txt     CJK, emoji (ZWJ sequences, flags, skin tones), combining marks, RTL, NBSP
//                  and the other Unicode spaces, CRLF, tabs, long runs of spaces and digits,
//                  contractions, punctuation runs, added tokens written in the text
//   plain.txt      stress.txt without added tokens or U+2581 (for round trips)
//   invalid.txt    the same kind of text with invalid UTF-8 mixed in (stray continuation
//                  bytes, truncated sequences, overlongs, surrogates, bytes F5-FF)
//   random.bin     random bytes
// (random code points: make_codepoints.py)
// Usage: node make_stress.js OUT_DIR
'use strict';
const fs = require('fs');
const path = require('path');
const out = process.argv[2];
fs.mkdirSync(out, { recursive: true });
let state = 0x2545F4914F6CDD1Dn;
function rnd() { // xorshift64*
  state ^= state >> 12n; state ^= (state << 25n) & 0xFFFFFFFFFFFFFFFFn; state ^= state >> 27n;
  return Number(((state * 0x2545F4914F6CDD1Dn) & 0xFFFFFFFFFFFFFFFFn) >> 33n);
}
const pick = (a) => a[rnd() % a.length];

const fragments = [
  'Hello, world! ', "It's a test: don't, won't, I'm, you're, we've, they'll, she'd. ", "IT'S DON'T I'M ",
  'The year 2024 had 366 days; π ≈ 3.14159265358979. ', '1234567890123456789012345678901234567890 ',
  '東京は日本の首都です。', '中文文本，包括标点符号！', '한국어 텍스트입니다. ', 'ｆｕｌｌｗｉｄｔｈ　ＡＢＣ１２３ ',
  '😀😃😄 👍🏽 👨‍👩‍👧‍👦 🇫🇷🇯🇵 ❤️ 🏳️‍🌈 ', 'e\u0301 a\u0308 n\u0303 Z\u0351\u0352\u0353a\u0354\u0355lgo ',
  'مرحبا بالعالم، هذا نص عربي. ', 'שלום עולם, זה טקסט בעברית. ', '\u202Eright-to-left override\u202C ',
  'NBSP:\u00A0x thin:\u2009x hair:\u200Ax em:\u2003x ideographic:\u3000x nnbsp:\u202Fx mmsp:\u205Fx ',
  'ogham:\u1680x mvs:\u180Ex nel:\u0085x ls:\u2028x ps:\u2029x zwsp:\u200Bx bom:\uFEFFx ',
  'fs:\u001Cx gs:\u001Dx rs:\u001Ex us:\u001Fx vt:\u000Bx ff:\u000Cx nul:\u0000x ',
  'Windows\r\nline\r\nendings\r\n', 'tabs\tand\t\ttabs\n', '\n\n\n', ' \n \n  \n',
  'Ελληνικά κείμενα. Русский текст, ёжик. ', 'Ǆǅǆ ǈ İstanbul ıi ß ẞ ﬁ ﬀ ',
  "apostrophes: it’s l'été 'S 'T 'RE 'ſ 'K ", '!!!??? ... --- *** ### $$$ %%% ^^^ ',
  '<|endoftext|>', ' <|endoftext|> ', '<s>', '</s>', ' <s> hello</s>', '<|begin_of_text|>', '<|eot_id|>',
  '<|start_header_id|>user<|end_header_id|>\n\n', '<unk>', '<pad>', ' <pad>', '<mask>', '  <mask> ', '<sep>  x',
  'cat', ' cat ', 'concatenate', 'cat.', '<|im_start|>', '<|im', ' dog ', '▁already▁metaspace▁', '\u2581\u2581x',
  '<0x0A>', 'function f(x) { return x * 2; }\n', '    indented code\n        more\n', '#include <stdio.h>\n',
  'https://example.com/path?q=1&r=2#frag ', 'user@example.com ', 'ÀÉÎÕÜ àéîõü ç Ç ñ Ñ ',
  'ℕ ℤ ℚ ℝ ∀x∃y ∑∏∫ ½ ⅓ ¾ ① ② Ⅻ ٣ ४ ๕ ', '𝐀𝐁𝐂 𝕏 𓀀 𠀀𠀁 ',
];
function spaces() { return ' '.repeat(1 + (rnd() % 300)); }
function digits() { let s = ''; const n = 1 + (rnd() % 200); for (let i = 0; i < n; i++) s += String(rnd() % 10); return s; }
let text = '';
while (Buffer.byteLength(text) < 120000) {
  const r = rnd() % 20;
  text += r === 0 ? spaces() : r === 1 ? digits() : r === 2 ? '\n'.repeat(1 + (rnd() % 5)) : pick(fragments);
}
fs.writeFileSync(path.join(out, 'stress.txt'), text);

// the same without added tokens and U+2581 (Llama 2 decodes U+2581 as a space, and HF's decoders
// do not give back the spaces around special tokens): the round-trip file for every tokenizer
const special = /<\|[a-z_]+\|>|<\/?s>|<unk>|<pad>|<mask>|<sep>|<\|im|cat|dog|\u2581/g;
fs.writeFileSync(path.join(out, 'plain.txt'), text.replace(special, 'x'));

const invalid = [[0x80], [0xBF], [0xC0, 0x80], [0xC1, 0xBF], [0xE0, 0x80, 0x80], [0xED, 0xA0, 0x80], [0xF0, 0x80],
  [0xF4, 0x90, 0x80, 0x80], [0xF5], [0xFF], [0xFE], [0xE2, 0x82], [0xF0, 0x9F, 0x98], [0xC3], [0xE6, 0x97]];
const parts = [];
let size = 0;
while (size < 40000) {
  const b = rnd() % 3 === 0 ? Buffer.from(pick(invalid)) : Buffer.from(pick(fragments));
  parts.push(b);
  size += b.length;
}
fs.writeFileSync(path.join(out, 'invalid.txt'), Buffer.concat(parts));

const rb = Buffer.alloc(50000);
for (let i = 0; i < rb.length; i++) rb[i] = rnd() & 0xFF;
fs.writeFileSync(path.join(out, 'random.bin'), rb);
