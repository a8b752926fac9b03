#!/usr/bin/env node
// gen_fixtures.js — build the tokenizer oracle fixtures.
//
// Generates a deterministic, varied set of test strings (seeded PRNG), encodes
// each with Hugging Face's official tokenizers (Rust, npm `tokenizers`, pinned
// in package.json) using DeepSeek's tokenizer.json, and writes one JSON object
// per line:
//   {"text": "...", "ids": [...]}            valid UTF-8 input
//   {"hex": "e4b8...", "decoded": "...", "ids": [...]}
//                                            raw bytes with invalid UTF-8; the
//                                            oracle saw TextDecoder's lossy decoding
//                                            (WHATWG: each maximal invalid subpart
//                                            -> U+FFFD); "decoded" is HF's decode(ids)
//   "skip": "..."                            (optional) decode(ids, skipSpecial=true)
//                                            when it differs from the text
//
// Usage (from the repository root):
//   (cd tests/oracle && npm ci && node gen_fixtures.js)
// writes tests/data/tokenizer/oracle_deepseek.jsonl.gz (gzip: the repository travels under a size limit).
//
// Characters are kept to those assigned in Unicode <= 14 where the regex
// engines' tables could disagree (PCRE2 10.42 is Unicode 14; see
// docs/tokenizer.md section 2).
'use strict';
const fs = require('fs');
const path = require('path');
const zlib = require('zlib');
const { Tokenizer } = require('tokenizers');

const ROOT = path.resolve(__dirname, '..', '..');
const TOK = path.join(ROOT, 'tests/data/tokenizer/tokenizer.json');
const OUT = path.join(ROOT, 'tests/data/tokenizer/oracle_deepseek.jsonl.gz');

// ---- deterministic PRNG (mulberry32) ----
let seed = 0x5eed1234;
function rnd() {
  seed |= 0; seed = (seed + 0x6D2B79F5) | 0;
  let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
  t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
  return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
}
const ri = (n) => Math.floor(rnd() * n);
const pick = (a) => a[ri(a.length)];
const range = (a, b) => String.fromCodePoint(a + ri(b - a + 1));
const rep = (n, f) => Array.from({ length: n }, f).join('');

// ---- pools ----
const WORDS = ('the of and to in is was that for it with as his on be at by had are but from or have an they which one ' +
  'you were her all she there would their we him been has when who will more no if out so said what up its about into ' +
  'than them can only other new some could time these two may then do first any my now such like our over man me even ' +
  'most made after also did many before must through back years where much your way well down should because each just ' +
  'those people Mr how too little state good very make world still own see men work long get here between both life being ' +
  'under never day same another know while last might us great old year off come since against go came right used take ' +
  'three tokenizer inference engine DeepSeek matrix kernel throughput latency don\'t it\'s we\'re they\'ve I\'m you\'ll ' +
  'she\'d O\'Brien rock\'n\'roll e-mail co-operate naïve café résumé Zürich façade jalapeño Ærøskøbing straße').split(' ');
const PUNCT = ['.', ',', ';', ':', '!', '?', '...', '—', '–', '-', '(', ')', '[', ']', '{', '}', '"', "'", '“', '”', '‘', '’',
  '«', '»', '„', '…', '¿', '¡', '§', '¶', '©', '®', '™', '°', '€', '$', '£', '¥', '%', '‰', '&', '*', '#', '@', '^', '~',
  '`', '|', '\\', '/', '<', '>', '=', '+', '_', '>;\n', ' ~', '~~', '!!!', '?!', '```', '=>', '->', '::', '//', '/*', '*/',
  '{{', '}}', '<<<', '>>>', '</', '/>', '&&', '||', '!=', '==', '===', '+=', '**', ');\n', '};\n', '),\n', '\'\'', '"""'];
const WS = [' ', ' ', ' ', '  ', '   ', '\t', '\t\t', '\n', '\n\n', '\r\n', '\r\n\r\n', '\r', ' \n', '\n ', '\u00A0', '\u3000',
  '\u180E', '\u2000', '\u2003', '\u2009', '\u200A', '\u2028', '\u2029', '\u202F', '\u205F', '\u0085', '\u000B', '\u000C',
  '\u200B', '\uFEFF', '\u1680', ' \u00A0 ', '\t \n', '    ', '        '];
const SPECIAL = ['<｜begin▁of▁sentence｜>', '<｜end▁of▁sentence｜>', '<｜▁pad▁｜>', '<｜User｜>', '<｜Assistant｜>',
  '<|EOT|>', '<｜fim▁hole｜>', '<｜fim▁begin｜>', '<｜fim▁end｜>', '<｜tool▁calls▁begin｜>', '<｜tool▁calls▁end｜>',
  '<｜tool▁call▁begin｜>', '<｜tool▁call▁end｜>', '<｜tool▁outputs▁begin｜>', '<｜tool▁sep｜>', '<｜place▁holder▁no▁0｜>',
  '<｜place▁holder▁no▁7｜>', '<｜place▁holder▁no▁799｜>', '<｜place▁holder▁no▁42｜>'];
const NEAR_SPECIAL = ['<｜User', '｜User｜>', '<｜user｜>', '<|User|>', '<｜<｜User｜>', '<｜User｜｜>', '<<｜Assistant｜>>',
  '<｜end▁of▁sentence', '<think>', '</think>', '<｜place▁holder▁no▁800｜>', '<｜▁pad▁｜', '｜DSML｜'];

function englishSentence() {
  const n = 3 + ri(18);
  let s = '';
  for (let i = 0; i < n; i++) {
    let w = pick(WORDS);
    if (i === 0) w = w[0].toUpperCase() + w.slice(1);
    if (rnd() < 0.05) w = w.toUpperCase();
    if (rnd() < 0.06) w = String(ri(100000));
    s += (i ? ' ' : '') + w;
    if (rnd() < 0.08) s += pick([',', ';', ':', ' -', ' —']);
  }
  return s + pick(['.', '.', '.', '!', '?', '...', '."', '?"', ':']);
}
function prose() {
  const n = 1 + ri(6);
  let s = '';
  for (let i = 0; i < n; i++) s += (i ? pick([' ', ' ', '  ', '\n', '\n\n']) : '') + englishSentence();
  return s;
}

const CODE = [
  () => `int ${pick(['main', 'foo', 'di_encode'])}(int argc, char **argv) {\n\tfor (int i = 0; i < argc; i++) {\n\t\tprintf("%s\\n", argv[i]);\n\t}\n\treturn ${ri(3)};\n}\n`,
  () => `def ${pick(['f', 'encode', 'run_bench'])}(x, y=${ri(10)}):\n    """Docstring."""\n    if x > y:  \n        return [i ** 2 for i in range(x)]\n    return {'a': x, "b": y}\n`,
  () => `const ${pick(['a', 'tok', 'ids'])} = await fetch(\`/api/\${id}\`).then((r) => r.json());\nconsole.log(a?.b ?? 'none');   \n`,
  () => `fn main() -> Result<(), Box<dyn Error>> {\n    let v: Vec<u32> = (0..${ri(100)}).collect();\n    println!("{:?}", v);\n    Ok(())\n}\n`,
  () => `func (s *Server) Handle(w http.ResponseWriter, r *http.Request) {\n\tif err := s.do(r); err != nil {\n\t\thttp.Error(w, err.Error(), 500)\n\t}\n}\n`,
  () => `SELECT u.id, COUNT(*) AS n FROM users u LEFT JOIN orders o ON o.user_id = u.id WHERE u.created_at >= '2024-01-01' GROUP BY u.id HAVING n > ${ri(9)};\r\n`,
  () => `<div class="row">\n  <a href="https://example.com/?q=${ri(999)}&amp;x=1">Link</a>\n  <!-- comment -->\n</div>\n`,
  () => `#!/bin/sh\nset -euo pipefail\nfor f in *.c; do\n  gcc -O2 -c "$f" -o "\${f%.c}.o" || exit 1\ndone\n`,
  () => `{\n  "name": "x",\n  "version": "1.${ri(20)}.0",\n  "deps": {"a": "^2.0.0"},\n  "list": [1, 2.5, -3e10, true, null]\n}\n`,
  () => `    x = y;\t\t// trailing tab\t\n\tz  =  w ;   \n}\n\n\n`,
  () => `public static void Main(string[] args)\r\n{\r\n    Console.WriteLine("Hello, World!");\r\n}\r\n`,
  () => `matrix = [[${ri(9)}, 2, 3],\n          [4, 5, 6]]  # comment ~ with tilde\nprint(matrix[0][1:] >= 2)\n`,
];

function cjk() {
  const n = 1 + ri(30);
  let s = '';
  for (let i = 0; i < n; i++) {
    const r = rnd();
    if (r < 0.6) s += range(0x4E00, 0x9FA5);
    else if (r < 0.7) s += range(0x9FA6, 0x9FFC);
    else if (r < 0.8) s += pick(['，', '。', '、', '！', '？', '：', '；', '「', '」', '『', '』', '（', '）', '《', '》', '…', '〜']);
    else if (r < 0.9) s += range(0x3400, 0x4DBF);
    else s += range(0xFF01, 0xFF5E);
  }
  return s;
}
function kana() {
  const n = 1 + ri(25);
  let s = '';
  for (let i = 0; i < n; i++) {
    const r = rnd();
    if (r < 0.4) s += range(0x3041, 0x3096);
    else if (r < 0.75) s += range(0x30A1, 0x30FA);
    else if (r < 0.8) s += 'ー';
    else if (r < 0.9) s += range(0x4E00, 0x9FA5);
    else s += range(0xFF66, 0xFF9D);
  }
  return s;
}
const SCRIPTS = [
  () => rep(1 + ri(12), () => range(0x0621, 0x064A)) + (rnd() < 0.3 ? range(0x064B, 0x0652) : '') + (rnd() < 0.3 ? ' ' + rep(1 + ri(6), () => range(0x0660, 0x0669)) : ''),
  () => rep(1 + ri(12), () => range(0x0410, 0x044F)) + pick([' ', ', ', '. ']) + rep(1 + ri(8), () => range(0x0430, 0x044F)),
  () => rep(1 + ri(10), () => range(0x0391, 0x03C9)),
  () => rep(1 + ri(10), () => range(0x05D0, 0x05EA)) + (rnd() < 0.3 ? range(0x05B0, 0x05BC) : ''),
  () => rep(1 + ri(8), () => range(0x0905, 0x0939) + (rnd() < 0.5 ? range(0x093E, 0x094C) : '')) + (rnd() < 0.3 ? '।' : ''),
  () => rep(1 + ri(10), () => range(0x0E01, 0x0E2E) + (rnd() < 0.3 ? range(0x0E31, 0x0E3A) : '')),
  () => rep(1 + ri(10), () => range(0xAC00, 0xD7A3)) + pick(['', ' ', '. ', '? ']),
  () => rep(1 + ri(6), () => range(0x10A0, 0x10C5) + range(0x10D0, 0x10FA)),
  () => rep(1 + ri(8), () => range(0x1200, 0x1248)),
  () => rep(1 + ri(6), () => range(0x1D400, 0x1D4FF)),               // math alphanumerics (astral letters)
  () => rep(1 + ri(5), () => range(0x10400, 0x1044F)),               // Deseret
  () => rep(1 + ri(4), () => range(0x20000, 0x2A6DF)),               // CJK Ext B
];
function emoji() {
  const r = rnd();
  if (r < 0.3) return rep(1 + ri(5), () => range(0x1F600, 0x1F64F));
  if (r < 0.45) return rep(1 + ri(4), () => range(0x1F300, 0x1F5FF));
  if (r < 0.6) return pick(['👨‍👩‍👧‍👦', '👩‍💻', '🏳️‍🌈', '🧑‍🚀', '👁️‍🗨️', '❤️‍🔥', '🧔‍♂️', '👨🏽‍🦰', '🏴‍☠️']);
  if (r < 0.7) return range(0x1F44B, 0x1F450) + range(0x1F3FB, 0x1F3FF);
  if (r < 0.8) return rep(1 + ri(3), () => range(0x1F1E6, 0x1F1FF) + range(0x1F1E6, 0x1F1FF)); // flags
  if (r < 0.9) return pick(['1️⃣', '#️⃣', '*️⃣', '©️', '™️', '☺️', '✌🏿', '⚠️', '✔️', '☕']);
  return rep(1 + ri(6), () => range(0x2600, 0x26FF));
}
function combining() {
  const base = pick(['a', 'e', 'o', 'Z', 'n', 'i', ' ', '1', 'ア', 'α', 'я', '']);
  return base + rep(1 + ri(6), () => range(0x0300, 0x036F)) + (rnd() < 0.3 ? range(0x20D0, 0x20F0) : '') + (rnd() < 0.2 ? '\u200D' : '');
}
function digits() {
  const r = rnd();
  if (r < 0.4) return rep(1 + ri(40), () => String(ri(10)));
  if (r < 0.5) return rep(1 + ri(10), () => range(0x0660, 0x0669));
  if (r < 0.6) return rep(1 + ri(10), () => range(0xFF10, 0xFF19));
  if (r < 0.7) return pick(['²', '³', '¹', '¼', '½', '¾', 'Ⅻ', 'ⅷ', '①', '⑳', '𝟙𝟚𝟛', '٣٫١٤', '12,345.67', '3.14159', '1e-10', '0x1F', '-42', '+7']);
  if (r < 0.8) return rep(1 + ri(8), () => range(0x0966, 0x096F));
  return String(ri(1e9)) + pick(['', '.', ',', '%', 'px', 'ms', 'GB']) + String(ri(1000));
}
function ctrl() { return rep(1 + ri(4), () => String.fromCharCode(ri(32))) + (rnd() < 0.3 ? '\x7f' : ''); }
function special() { return rnd() < 0.75 ? pick(SPECIAL) : pick(NEAR_SPECIAL); }

const FRAGMENTS = [
  [prose, 14], [() => pick(CODE)(), 8], [cjk, 7], [kana, 4], [() => pick(SCRIPTS)(), 10], [emoji, 6], [combining, 4],
  [digits, 6], [() => pick(PUNCT), 8], [() => pick(WS), 10], [special, 5], [ctrl, 1], [() => pick(WORDS), 8],
];
const TOTALW = FRAGMENTS.reduce((a, [, w]) => a + w, 0);
function fragment() {
  let r = ri(TOTALW);
  for (const [f, w] of FRAGMENTS) { if (r < w) return f(); r -= w; }
  return '';
}
function mix(maxParts) {
  const n = 1 + ri(maxParts);
  let s = '';
  for (let i = 0; i < n; i++) s += fragment();
  return s;
}

// ---- invalid UTF-8 byte strings ----
const BAD = [[0x80], [0xBF], [0xC0, 0xAF], [0xC1, 0xBF], [0xE0, 0x80, 0xAF], [0xED, 0xA0, 0x80], [0xED, 0xBF, 0xBF],
  [0xF4, 0x90, 0x80, 0x80], [0xF5, 0x80], [0xFE], [0xFF], [0xE4, 0xB8], [0xE4], [0xF0, 0x9F, 0x98], [0xF0, 0x9F],
  [0xC3], [0xF8, 0x88, 0x80, 0x80, 0x80], [0xE2, 0x28, 0xA1], [0xF0, 0x28, 0x8C, 0x28], [0xC3, 0x28], [0xA0, 0xA1]];
function invalidBytes() {
  const parts = [];
  const n = 1 + ri(6);
  for (let i = 0; i < n; i++) {
    const r = rnd();
    if (r < 0.45) parts.push(Buffer.from(pick(BAD)));
    else if (r < 0.55) parts.push(Buffer.from(rep(1 + ri(6), () => String.fromCharCode(0)).split('').map(() => ri(256))));
    else parts.push(Buffer.from(fragment(), 'utf8'));
  }
  return Buffer.concat(parts);
}

// ---- the case list ----
function cases() {
  const out = [];
  const T = (s) => out.push({ text: s });
  T('');
  for (let c = 0; c < 128; c++) T(String.fromCharCode(c));
  for (const s of SPECIAL.concat(NEAR_SPECIAL)) { T(s); T(' ' + s + ' '); T('x' + s + 'y'); T(s + s); }
  for (const s of WS) { T(s); T('a' + s + 'b'); T(s + 'word'); T('word' + s); }
  for (const p of PUNCT) { T(p); T('x ' + p + ' y'); T(p + '\n'); }
  T(' ~'); T('a ~ b'); T('~/.bashrc'); T('x >;\n y'); T('foo();\n\n\nbar();\r\n\r\n');
  T('Hello! 毕老师！1 + 1 = 2 ĠÑĤÐ²ÑĬÑĢ');
  T('<｜User｜>hi<｜Assistant｜>');
  for (let i = 0; i < 400; i++) T(prose());
  for (let i = 0; i < 300; i++) T(pick(CODE)() + (rnd() < 0.5 ? pick(CODE)() : ''));
  for (let i = 0; i < 250; i++) T(cjk());
  for (let i = 0; i < 150; i++) T(kana());
  for (let i = 0; i < 300; i++) T(pick(SCRIPTS)());
  for (let i = 0; i < 250; i++) T(emoji() + (rnd() < 0.5 ? ' ' + emoji() : ''));
  for (let i = 0; i < 200; i++) T(combining() + (rnd() < 0.5 ? pick(WORDS) : ''));
  for (let i = 0; i < 250; i++) T(digits() + (rnd() < 0.4 ? ' ' + digits() : ''));
  for (let i = 0; i < 250; i++) T(rep(1 + ri(6), () => pick(WS)) + (rnd() < 0.5 ? pick(WORDS) : '') + rep(ri(3), () => pick(WS)));
  for (let i = 0; i < 250; i++) T(rep(1 + ri(5), () => pick(PUNCT)) + (rnd() < 0.5 ? pick(WORDS) : ''));
  for (let i = 0; i < 250; i++) T(mix(3) + special() + mix(3) + (rnd() < 0.4 ? special() + special() : ''));
  for (let i = 0; i < 2300; i++) T(mix(8));
  // long strings
  T(rep(400, () => englishSentence() + ' '));
  T('a'.repeat(5000)); T('ab'.repeat(3000)); T('1234567890'.repeat(300)); T(' '.repeat(3000) + 'x');
  T('\n'.repeat(2000)); T(' \n'.repeat(1000)); T('\t'.repeat(1500) + 'end'); T(cjk().repeat(1) + rep(2000, () => range(0x4E00, 0x9FA5)));
  T(rep(800, () => emoji())); T(rep(300, () => pick(CODE)())); T(rep(1000, () => pick(PUNCT)));
  T('z' + '\u0301'.repeat(2000)); T(rep(3000, () => range(0x0410, 0x044F)));
  // invalid UTF-8
  for (let i = 0; i < 400; i++) out.push({ bytes: invalidBytes() });
  for (const b of BAD) { out.push({ bytes: Buffer.from(b) }); out.push({ bytes: Buffer.concat([Buffer.from('ab'), Buffer.from(b), Buffer.from('cd')]) }); }
  return out;
}

async function main() {
  const tok = Tokenizer.fromFile(TOK);
  const list = cases();
  // ignoreBOM: keep a leading U+FEFF as text (the C side never strips it).
  const dec = new TextDecoder('utf-8', { ignoreBOM: true });
  const lines = [];
  let bad = 0;
  for (const c of list) {
    const text = c.bytes ? dec.decode(c.bytes) : c.text;
    const enc = await tok.encode(text, null, { addSpecialTokens: false });
    const ids = Array.from(enc.getIds());
    const back = await tok.decode(ids, false);
    if (back !== text) { bad++; console.error('round-trip differs for', JSON.stringify(text).slice(0, 80)); }
    const rec = c.bytes ? { hex: c.bytes.toString('hex'), decoded: back, ids } : { text, ids };
    const skip = await tok.decode(ids, true);
    if (skip !== text) rec.skip = skip;
    lines.push(JSON.stringify(rec));
  }
  fs.writeFileSync(OUT, zlib.gzipSync(lines.join('\n') + '\n', { level: 9 }));
  const size = fs.statSync(OUT).size;
  console.log(`wrote ${lines.length} cases (${size} bytes) to ${path.relative(ROOT, OUT)}; oracle round-trip mismatches: ${bad}`);
}
main().catch((e) => { console.error(e); process.exit(1); });
