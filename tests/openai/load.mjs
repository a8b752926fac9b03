// load.mjs BASE_URL MODEL REQUESTS.jsonl EXPECTED.jsonl N DISCONNECTS
// A bounded load test of `deepinfer serve` (run by tests/serve/test_serve_load.c):
//  1. N concurrent streaming chat requests, request k being line k % K of REQUESTS.jsonl
//     (the `deepinfer generate --prompts` format); each must complete with [DONE] and a
//     finish_reason, or be refused with 429/503; the streamed text must equal EXPECTED.jsonl
//     (`deepinfer generate --output` of the same requests: the non-HTTP path).
//  2. DISCONNECTS clients that go away after their first chunk; afterwards /metrics must
//     show empty pools and no running or waiting requests, and the aborts counted.
// Prints a summary; exits 0 only when every check held.
import fs from 'node:fs';

const [base, model, reqPath, expPath, nArg, dArg] = process.argv.slice(2);
const N = Number(nArg), D = Number(dArg);
const reqs = fs.readFileSync(reqPath, 'utf8').trim().split('\n').map((l) => JSON.parse(l));
// generate writes each result as its request finishes, with its prompt's position in "index"
const exp = [];
for (const l of fs.readFileSync(expPath, 'utf8').trim().split('\n')) { const o = JSON.parse(l); exp[o.index] = o; }
let bad = 0;
const fail = (m) => { bad++; if (bad <= 20) console.log('FAIL ' + m); };

function body(r, extra) {
  const sp = r.sampling_params;
  return JSON.stringify({ model, messages: r.messages, temperature: sp.temperature, max_tokens: sp.max_tokens,
                          seed: sp.seed, stream: true, ...extra });
}

// One streaming request; resolves {status, text, finish, done} (abortAfterFirst: leave after one chunk).
async function stream(k, abortAfterFirst) {
  const r = reqs[k % reqs.length];
  const ac = new AbortController();
  const res = await fetch(base + '/v1/chat/completions', {
    method: 'POST', headers: { 'content-type': 'application/json' }, signal: ac.signal,
    body: body(r, abortAfterFirst ? { max_tokens: 2000, ignore_eos: true } : {}),
  });
  if (res.status !== 200) return { status: res.status, text: await res.text() };
  const reader = res.body.getReader();
  const dec = new TextDecoder();
  let buf = '', text = '', finish = null, done = false, chunks = 0;
  for (;;) {
    const { value, done: end } = await reader.read();
    if (end) break;
    buf += dec.decode(value, { stream: true });
    let i;
    while ((i = buf.indexOf('\n\n')) >= 0) {
      const ev = buf.slice(0, i);
      buf = buf.slice(i + 2);
      if (!ev.startsWith('data: ')) { fail(`request ${k}: not an SSE data line: ${ev.slice(0, 80)}`); continue; }
      const data = ev.slice(6);
      if (data === '[DONE]') { done = true; continue; }
      const j = JSON.parse(data);
      chunks++;
      for (const c of j.choices) {
        text += c.delta.content || '';
        if (c.finish_reason) finish = c.finish_reason;
      }
    }
    if (abortAfterFirst && chunks > 0) {
      ac.abort();
      return { status: 200, aborted: true };
    }
  }
  return { status: 200, text, finish, done };
}

const t0 = Date.now();
const results = await Promise.all(Array.from({ length: N }, (_, k) => stream(k, false).catch((e) => ({ error: String(e) }))));
const t1 = Date.now();
let completed = 0, refused = 0;
results.forEach((r, k) => {
  if (r.error) return fail(`request ${k}: ${r.error}`);
  if (r.status === 429 || r.status === 503) {
    refused++;
    try {
      if (!JSON.parse(r.text).error.code) fail(`request ${k}: refusal without an OpenAI error`);
    } catch (e) { fail(`request ${k}: refusal body ${r.text}`); }
    return;
  }
  if (r.status !== 200) return fail(`request ${k}: status ${r.status} ${r.text}`);
  if (!r.done || !r.finish) return fail(`request ${k}: truncated (done ${r.done}, finish ${r.finish})`);
  const want = exp[k % exp.length].outputs[0].text;
  if (r.text !== want) return fail(`request ${k}: ${JSON.stringify(r.text)} != generate's ${JSON.stringify(want)}`);
  completed++;
});
if (completed + refused !== N) fail(`${N - completed - refused} of ${N} requests lost`);
if (completed === 0) fail('no request completed');
console.log(`${N} concurrent streams: ${completed} completed and equal to generate, ${refused} refused (429/503), ` +
            `${((t1 - t0) / 1000).toFixed(2)} s`);

async function metrics() {
  const m = await (await fetch(base + '/metrics')).text();
  const v = (name) => { const x = m.match(new RegExp('^' + name + ' (\\S+)$', 'm')); return x ? Number(x[1]) : NaN; };
  return { pages: v('deepinfer_pool_pages_in_use'), running: v('deepinfer_requests_running'),
           waiting: v('deepinfer_requests_waiting'), aborted: v('deepinfer_requests_aborted_total'),
           finished: v('deepinfer_requests_finished_total') };
}

const before = await metrics();
const gone = await Promise.all(Array.from({ length: D }, (_, k) => stream(k, true).catch((e) => ({ error: String(e) }))));
gone.forEach((r, k) => { if (!r.aborted && r.status !== 429 && r.status !== 503) fail(`disconnect ${k}: ${JSON.stringify(r).slice(0, 200)}`); });
let m = await metrics();
for (let i = 0; i < 200 && (m.pages !== 0 || m.running !== 0 || m.waiting !== 0 || m.finished - before.finished < D); i++) {
  await new Promise((r) => setTimeout(r, 50));
  m = await metrics();
}
console.log(`${D} clients disconnected mid-stream: ${m.aborted - before.aborted} aborted by the server; ` +
            `pool pages in use ${m.pages}, running ${m.running}, waiting ${m.waiting}`);
if (m.pages !== 0 || m.running !== 0 || m.waiting !== 0) fail('the pools are not empty after the disconnects');
if (m.aborted - before.aborted < D) fail(`only ${m.aborted - before.aborted} of ${D} disconnected requests were aborted`);
console.log(bad ? `${bad} failure(s)` : 'load test passed');
process.exit(bad ? 1 : 0);
