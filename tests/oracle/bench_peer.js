#!/usr/bin/env node
// bench_peer.js FILE [REPEAT] [CHUNK] — the peer for bench/tokenizer_bench.sh:
// encode FILE (decoded as UTF-8) with HF tokenizers (native Rust, npm
// `tokenizers`) and with tokenizers.js (`@huggingface/tokenizers`), one call at a
// time on one thread, best of REPEAT runs, and print MB/s of the file's bytes.
// CHUNK > 0 cuts the text into pieces of about CHUNK bytes ending at a newline
// (the same cut as `deepinfer tokenize --bench FILE --chunk CHUNK`) and encodes
// them one after another; HF is much slower on one multi-megabyte string.
'use strict';
const fs = require('fs');
const path = require('path');
const { Tokenizer } = require('tokenizers');

async function main() {
  const file = process.argv[2];
  const repeat = Number(process.argv[3] || 5);
  const TOK = path.resolve(__dirname, '..', 'data', 'tokenizer', 'tokenizer.json');
  const buf = fs.readFileSync(file);
  const chunk = Number(process.argv[4] || 0);
  const pieces = [];
  if (chunk > 0) {
    let a = 0;
    while (a < buf.length) {
      let b = Math.min(a + chunk, buf.length);
      const nl = buf.indexOf(10, b - 1);
      b = nl < 0 ? buf.length : nl + 1;
      pieces.push(buf.subarray(a, b).toString('utf8'));
      a = b;
    }
  } else pieces.push(buf.toString('utf8'));
  const native = Tokenizer.fromFile(TOK);
  let best = Infinity, n = 0;
  for (let i = 0; i < repeat; i++) {
    const t0 = process.hrtime.bigint();
    n = 0;
    for (const p of pieces) n += (await native.encode(p, null, { addSpecialTokens: false })).getIds().length;
    const t1 = process.hrtime.bigint();
    best = Math.min(best, Number(t1 - t0) / 1e9);
  }
  console.log(`tokenizers@0.23.2 (native) bytes ${buf.length} ids ${n} best_seconds ${best.toFixed(4)} MB_per_s ${(buf.length / best / 1e6).toFixed(2)}`);
  const { Tokenizer: JsTok } = await import('@huggingface/tokenizers');
  const json = JSON.parse(fs.readFileSync(TOK, 'utf8'));
  const cfg = JSON.parse(fs.readFileSync(path.join(path.dirname(TOK), 'tokenizer_config.json'), 'utf8'));
  const js = new JsTok(json, cfg);
  best = Infinity;
  for (let i = 0; i < repeat; i++) {
    const t0 = process.hrtime.bigint();
    n = 0;
    for (const p of pieces) n += js.encode(p, { add_special_tokens: false }).ids.length;
    const t1 = process.hrtime.bigint();
    best = Math.min(best, Number(t1 - t0) / 1e9);
  }
  console.log(`@huggingface/tokenizers@0.2.0 (JS) bytes ${buf.length} ids ${n} best_seconds ${best.toFixed(4)} MB_per_s ${(buf.length / best / 1e6).toFixed(2)}`);
}
main().catch((e) => { console.error(e); process.exit(1); });
