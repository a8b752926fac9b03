#!/usr/bin/env node
// gen_tiny.js — small synthetic tokenizer.json files that exercise the options
// DeepSeek's file does not use (ByteLevel's own regex and add_prefix_space,
// added-token lstrip / rstrip / single_word / normalized, Split behaviors and
// invert, ignore_merges, unk_token), with HF tokenizers' ids for a set of strings.
// Writes tests/data/tokenizer/tiny/<name>.json and tests/data/tokenizer/tiny/cases.jsonl
// ({"tokenizer": name, "text": ..., "ids": [...]}).
//   (cd tests/oracle && npm ci && node gen_tiny.js)
'use strict';
const fs = require('fs');
const path = require('path');
const { Tokenizer } = require('tokenizers');

const OUT = path.resolve(__dirname, '..', 'data', 'tokenizer', 'tiny');
fs.mkdirSync(OUT, { recursive: true });

// GPT-2 byte alphabet.
function byteChars() {
  const bs = [];
  for (let b = 33; b <= 126; b++) bs.push(b);
  for (let b = 161; b <= 172; b++) bs.push(b);
  for (let b = 174; b <= 255; b++) bs.push(b);
  const cs = bs.slice();
  let n = 0;
  for (let b = 0; b < 256; b++) if (!bs.includes(b)) { bs.push(b); cs.push(256 + n++); }
  const m = {};
  bs.forEach((b, i) => { m[b] = String.fromCodePoint(cs[i]); });
  return m;
}
const BC = byteChars();
const enc = (s) => Array.from(Buffer.from(s, 'utf8')).map((b) => BC[b]).join('');

function model(extraMerges, opts = {}) {
  const vocab = {};
  let id = 0;
  for (let b = 0; b < 256; b++) if (!(opts.dropByte === b)) vocab[BC[b]] = id++;
  const merges = [];
  for (const [a, b] of extraMerges) {
    const A = enc(a), B = enc(b);
    if (!(A in vocab)) vocab[A] = id++;
    if (!(B in vocab)) vocab[B] = id++;
    if (!(A + B in vocab)) vocab[A + B] = id++;
    merges.push(opts.pairs ? [A, B] : A + ' ' + B);
  }
  if (opts.unk) vocab['<unk>'] = id++;
  return { type: 'BPE', dropout: null, unk_token: opts.unk ? '<unk>' : null, continuing_subword_prefix: null,
    end_of_word_suffix: null, fuse_unk: !!opts.fuseUnk, byte_fallback: false, ignore_merges: !!opts.ignoreMerges, vocab, merges };
}
const MERGES = [['t', 'h'], ['h', 'e'], ['th', 'e'], [' ', 't'], [' t', 'he'], ['a', 'n'], ['an', 'd'], [' ', 'a'], ['n', 'd'], [' a', 'nd'],
  ['i', 'n'], ['in', 'g'], ['o', 'n'], ['n', 'y'], ['o', 'ny'], ['e', 'r'], ['1', '2'], ['12', '3'], ['\xc3', '\xa4'], [' ', ' '], ['  ', '  ']];
const added = (id0, list) => list.map((t, i) => Object.assign({ id: id0 + i, single_word: false, lstrip: false,
  rstrip: false, normalized: false, special: false }, t));

function tok(name, pre, extra = {}) {
  const m = model(extra.merges || MERGES, extra.modelOpts || {});
  const n = Object.keys(m.vocab).length;
  const j = { version: '1.0', truncation: null, padding: null,
    added_tokens: added(n, extra.added || []), normalizer: null, pre_tokenizer: pre,
    post_processor: null, decoder: { type: 'ByteLevel', add_prefix_space: true, trim_offsets: true, use_regex: true }, model: m };
  fs.writeFileSync(path.join(OUT, name + '.json'), JSON.stringify(j));
  return name;
}
const split = (pattern, behavior, invert = false, literal = false) =>
  ({ type: 'Split', pattern: literal ? { String: pattern } : { Regex: pattern }, behavior, invert });
const BL = (prefix, regex) => ({ type: 'ByteLevel', add_prefix_space: prefix, trim_offsets: true, use_regex: regex });

const TOKS = [
  tok('gpt2_prefix', BL(true, true), { added: [
    { content: '<mask>', lstrip: true, rstrip: true, single_word: true },
    { content: '[SEP]', special: true },
    { content: 'ony', single_word: true, normalized: true },
    { content: 'and', normalized: true },
    { content: '<L>', lstrip: true },
    { content: '<R>', rstrip: true }] }),
  tok('gpt2_noprefix', BL(false, true), { modelOpts: { ignoreMerges: true } }),
  tok('split_removed', { type: 'Sequence', pretokenizers: [split('\\s+', 'Removed'), BL(false, false)] }),
  tok('split_prev', { type: 'Sequence', pretokenizers: [split('[,.!?]', 'MergedWithPrevious'), BL(true, false)] }),
  tok('split_next', { type: 'Sequence', pretokenizers: [split(' ', 'MergedWithNext', false, true), BL(false, false)] }),
  tok('split_contig', { type: 'Sequence', pretokenizers: [split('\\d', 'Contiguous'), BL(false, false)] }),
  tok('split_invert', { type: 'Sequence', pretokenizers: [split('\\p{L}+', 'Isolated', true), split('\\w+|\\W', 'Isolated'), BL(false, false)] }),
  tok('added_ids', BL(false, true), { added: [
    { id: 500, content: '<X>', special: true }, { id: 400, content: '<Y>' }, { id: 999, content: 'th' },
    { id: 7, content: '<Z>', normalized: true }, { id: 400, content: '<Y>', lstrip: true }] }),
  tok('unk_pairs', BL(false, true), { modelOpts: { unk: true, fuseUnk: true, dropByte: 0x7a, pairs: true } }),
];

const TEXTS = ['', 'the and the', ' the', 'Hello, world! How are you?', '<mask> My name <mask> A<mask> <mask>ony <mask>',
  'Hi <mask> there\t<mask>\t<mask>\u2000', '[SEP]the[SEP] [SEP]', 'pony ony tony, ony.', 'sand and band',
  'x<L>y  <L>z <R> w<R>  v', '  leading and trailing  ', 'a\n\nb\r\n c', '123456 7 89', 'äöäö üß', 'zzz z zebra',
  'ünïcödé 你好 👋🏽', "it's they'll I'M", '...!!!???', '\u00a0nbsp\u3000ideo', 'tab\there', 'ab12cd3 4e',
  '<mask><mask>', 'a<X>b<Y>c <Y> th<Z>the', ' <mask> ', 'and<mask>and', 'thething  thing', ''.padEnd(40, 'th')];

async function main() {
  const lines = [];
  for (const name of TOKS) {
    const t = Tokenizer.fromFile(path.join(OUT, name + '.json'));
    for (const text of TEXTS) {
      const e = await t.encode(text, null, { addSpecialTokens: false });
      lines.push(JSON.stringify({ tokenizer: name, text, ids: Array.from(e.getIds()) }));
    }
  }
  fs.writeFileSync(path.join(OUT, 'cases.jsonl'), lines.join('\n') + '\n');
  console.log(`wrote ${lines.length} cases for ${TOKS.length} tokenizers`);
}
main().catch((e) => { console.error(e); process.exit(1); });
