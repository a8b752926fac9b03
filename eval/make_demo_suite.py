#!/usr/bin/env python3
"""Build the bundled demo suite (eval/demo/) from the demo model's held-out split (stdlib only).

usage: python3 eval/make_demo_suite.py [--test .data/text/test.txt] [--deepinfer build/deepinfer]
                                       [--model models/deepinfer-demo-v41] [--out eval/demo]
       python3 eval/make_demo_suite.py --generation-only [--out eval/demo]   (from eval/demo/heldout.txt)

Input: the held-out test split that tools/reference/prepare_data.py writes (.data/text/test.txt:
the last 4% of every source, tools/reference/DATA.md). Tokenization uses `deepinfer tokenize`
(the engine's tokenizer; on this text it gives the same ids as the recipe's per-line Hugging Face
encoding, 288,500 tokens).

Outputs:
  heldout.txt   the text tools/reference/evaluate.py scores: the split's first 256 x 511 = 130,816
                tokens (its default --ppl-windows 256 of 511 tokens), decoded back to text. It ends on
                a token boundary, re-encodes to exactly those ids, and its UTF-8 length (564,576 bytes)
                is the recipe's byte count.
  cloze.jsonl   multiple choice: a held-out sentence with its last word blanked; the answer and three
                distractors (held-out words of about the same length), {"context", "choices", "answer"}.
                Sentences come from the rest of the split (after heldout.txt), so the two do not overlap.
  lastword.jsonl generation, exact match: a line of heldout.txt with its last word left out, after the
                whole lines before it (at least CONTEXT_BYTES bytes: ~450 tokens, longer than bounded
                replay's default tail of 140, so compact prefill can change the answer); the answer is
                the word, extracted from the output as its first word. Made from heldout.txt alone
                (--generation-only rebuilds it from the bundled file).
Everything is deterministic (a fixed random.Random seed, sorted inputs).
"""
import argparse
import json
import os
import random
import re
import subprocess

RECIPE_TOKENS = 256 * 511
N_CLOZE = 200
N_LASTWORD = 100
CONTEXT_BYTES = 2000
SEED = 20240530
WORD_RE = r"^\s*([A-Za-z]+)"


def tokenize(exe, model, text):
    out = subprocess.run([exe, "tokenize", "--tokenizer", model], input=json.dumps(text) + "\n",
                         capture_output=True, text=True, check=True).stdout
    return [int(x) for x in out.split()]


def decode(exe, model, ids):
    out = subprocess.run([exe, "tokenize", "--tokenizer", model, "--decode"], input=" ".join(map(str, ids)) + "\n",
                         capture_output=True, text=True, check=True).stdout
    return json.loads(out)


def sentences(text):
    """Sentences of 8..40 words that end in a plain word + '.', '!' or '?'."""
    out = []
    for line in text.splitlines():
        for s in re.split(r"(?<=[.!?])\s+", line):
            s = s.strip()
            w = s.split()
            if 8 <= len(w) <= 40 and re.fullmatch(r"[A-Za-z]{3,}[.!?]", w[-1]) and '"' not in s:
                out.append(s)
    return out


def cloze(text, n, rng):
    sents = sentences(text)
    words = sorted({m.lower() for m in re.findall(r"\b[a-z]{3,}\b", text)})
    by_len = {}
    for w in words:
        by_len.setdefault(len(w), []).append(w)
    picks = rng.sample(range(len(sents)), min(n, len(sents)))
    items = []
    for i in sorted(picks):
        s = sents[i]
        head, last = s.rsplit(" ", 1)
        word, punct = last[:-1], last[-1]
        pool = [w for L in (len(word) - 1, len(word), len(word) + 1) for w in by_len.get(L, []) if w != word.lower()]
        dis = rng.sample(pool, 3)
        if word[0].isupper():
            dis = [d.capitalize() for d in dis]
        choices = [" " + word] + [" " + d for d in dis]
        order = list(range(4))
        rng.shuffle(order)
        items.append({"context": head, "choices": [choices[k] for k in order], "answer": order.index(0),
                      "source_sentence": s, "punct": punct})
    return items


def lastword(held, n):
    """N_LASTWORD lines spread evenly over the text whose last word is a plain word of 3+ letters and a
    final '.', ',', ';', ':', '!' or '?'; the prompt is the lines before it (>= CONTEXT_BYTES bytes)
    and the line up to that word."""
    lines = held.split("\n")
    starts, pos = [], 0
    for line in lines:
        starts.append(pos)
        pos += len(line) + 1
    ok = [i for i, line in enumerate(lines)
          if starts[i] >= CONTEXT_BYTES and re.search(r"\s[A-Za-z]{3,}[.,;:!?]$", line)]
    picks = [ok[(k * len(ok)) // n] for k in range(min(n, len(ok)))]
    items = []
    for i in picks:
        head, last = lines[i].rsplit(" ", 1)
        begin = max(j for j in range(i) if starts[i] - starts[j] >= CONTEXT_BYTES)
        prompt = "\n".join(lines[begin:i]) + "\n" + head
        items.append({"prompt": prompt, "answer": last[:-1], "regex": WORD_RE, "stop": ["\n"]})
    return items


def write_lastword(held, out):
    with open(os.path.join(out, "lastword.jsonl"), "w", encoding="utf-8") as f:
        for it in lastword(held, N_LASTWORD):
            f.write(json.dumps(it, ensure_ascii=False) + "\n")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--test", default=".data/text/test.txt")
    ap.add_argument("--deepinfer", default="build/deepinfer")
    ap.add_argument("--model", default="models/deepinfer-demo-v41")
    ap.add_argument("--out", default="eval/demo")
    ap.add_argument("--generation-only", action="store_true",
                    help="only lastword.jsonl, from the bundled OUT/heldout.txt (no split needed)")
    a = ap.parse_args()
    if a.generation_only:
        with open(os.path.join(a.out, "heldout.txt"), encoding="utf-8", newline="") as f:
            write_lastword(f.read(), a.out)
        return
    text = open(a.test, encoding="utf-8").read()
    ids = tokenize(a.deepinfer, a.model, text)
    held = decode(a.deepinfer, a.model, ids[:RECIPE_TOKENS])
    assert text.startswith(held), "the decoded prefix is not a prefix of the split"
    assert tokenize(a.deepinfer, a.model, held) == ids[:RECIPE_TOKENS], "the prefix does not re-encode to the same ids"
    os.makedirs(a.out, exist_ok=True)
    with open(os.path.join(a.out, "heldout.txt"), "w", encoding="utf-8", newline="") as f:
        f.write(held)
    rng = random.Random(SEED)
    rest = text[len(held):]
    rest = rest[rest.find("\n") + 1:]  # from the next whole entry on
    with open(os.path.join(a.out, "cloze.jsonl"), "w", encoding="utf-8") as f:
        for it in cloze(rest, N_CLOZE, rng):
            f.write(json.dumps({"context": it["context"], "choices": it["choices"], "answer": it["answer"]},
                               ensure_ascii=False) + "\n")
    write_lastword(held, a.out)
    print("heldout.txt: %d tokens, %d bytes; split: %d tokens" % (RECIPE_TOKENS, len(held.encode()), len(ids)))


if __name__ == "__main__":
    main()
