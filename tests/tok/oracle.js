// oracle.js: Hugging Face `tokenizers` (npm) as the reference for myriad's tokenizer tests
// and benchmark. Run with NODE_PATH=$CACHE/node/node_modules (npm_setup.sh).
//   encode TOK.json OUT FILE...   OUT.ids: one line per FILE, its ids separated by spaces (the
//                                 file read as UTF-8, invalid bytes replaced by U+FFFD; no
//                                 BOS/EOS: add_special_tokens=False); OUT.dec: decode() of each
//                                 line, one after another (myriad tokenize FILE... | detokenize --lines)
//   shards TOK.json DIR PRE SUF FILE...   compare DIR/train_*.bin with, per FILE in order: PRE
//                                 ids, FILE's ids, SUF ids (PRE/SUF: comma lists or "-")
//   bench TOK.json FILE...        encode every FILE (one document each) in one encodeBatch call
//                                 per ~1 MB, print MB/s (the benchmark's baseline)
'use strict';
const fs = require('fs');
const { Tokenizer } = require('tokenizers');
const [cmd, tokPath, ...rest] = process.argv.slice(2);
const tok = Tokenizer.fromFile(tokPath);
const text = (f) => fs.readFileSync(f).toString('utf8');

async function ids(s) {
  const e = await tok.encode(s, null, { addSpecialTokens: false });
  return e.getIds();
}

function readShards(dir, split) {
  const names = fs.readdirSync(dir).filter((n) => n.startsWith(split + '_') && n.endsWith('.bin')).sort();
  const out = [];
  for (const n of names) {
    const b = fs.readFileSync(dir + '/' + n);
    const magic = b.readInt32LE(0), version = b.readInt32LE(4), count = b.readInt32LE(8);
    const width = magic === 20240520 && version === 1 ? 2 : magic === 20240801 && version === 7 ? 4 : 0;
    if (!width) throw new Error(n + ': not an llm.c shard');
    if (b.length !== 1024 + count * width) throw new Error(n + ': size does not match its header');
    for (let i = 0; i < count; i++) out.push(width === 2 ? b.readUInt16LE(1024 + 2 * i) : b.readUInt32LE(1024 + 4 * i));
  }
  return out;
}

(async () => {
  if (cmd === 'encode') {
    const [out, ...files] = rest;
    const lines = [], texts = [];
    for (const f of files) {
      const list = await ids(text(f));
      lines.push(list.join(' ') + '\n');
      texts.push(await tok.decode(Array.from(list), false));
    }
    fs.writeFileSync(out + '.ids', lines.join(''));
    fs.writeFileSync(out + '.dec', texts.join(''));
  } else if (cmd === 'shards') {
    const [dir, pre, suf, ...files] = rest;
    const list = (s) => (s === '-' ? [] : s.split(',').map(Number));
    const want = [];
    for (const f of files) want.push(...list(pre), ...(await ids(text(f))), ...list(suf));
    const got = readShards(dir, 'train');
    const n = Math.min(want.length, got.length);
    let i = 0;
    while (i < n && want[i] === got[i]) i++;
    if (i === want.length && i === got.length) { console.log('shards match: ' + got.length + ' tokens'); return; }
    console.log('shards differ at token ' + i + ' of ' + want.length + ' (got ' + got.length + '): want ' +
      want.slice(i, i + 8).join(' ') + ' got ' + got.slice(i, i + 8).join(' '));
    process.exitCode = 1;
  } else if (cmd === 'bench') {
    const docs = rest.map(text);
    let bytes = 0;
    for (const f of rest) bytes += fs.statSync(f).size;
    const t0 = process.hrtime.bigint();
    let tokens = 0;
    for (let i = 0; i < docs.length;) {
      const batch = [];
      for (let size = 0; i < docs.length && size < (1 << 20); i++) { batch.push(docs[i]); size += docs[i].length; }
      const encs = await tok.encodeBatch(batch, { addSpecialTokens: false });
      for (const e of encs) tokens += e.getIds().length;
    }
    const s = Number(process.hrtime.bigint() - t0) / 1e9;
    console.log(JSON.stringify({ bytes, tokens, seconds: s, mb_per_s: bytes / 1e6 / s }));
  } else {
    console.error('usage: oracle.js encode|shards|bench TOK.json ...');
    process.exitCode = 2;
  }
})().catch((e) => { console.error('oracle.js: ' + (e && e.message || e)); process.exitCode = 1; });
