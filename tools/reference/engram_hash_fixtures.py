#!/usr/bin/env python3
"""Fixtures for the Engram n-gram hash (architecture.md §5.8), python3 stdlib only.

Usage: python3 tools/reference/engram_hash_fixtures.py [OUT.json]
       (default tests/data/engram/hash_fixtures.json; run from the repository root)

An independent implementation of the reference formulas (DeepSeek-V4.1 inference/engram.py:
EngramLayout.from_args, NgramHashState.forward), used to check src/model/engram_hash.c:

  * layout: per Engram layer, per n-gram size 2..max_ngram, per head, the next prime above
    engram_vocab_size - 1 not drawn before (each n-gram size restarts the search at
    engram_vocab_size - 1, skipping drawn primes); a column's offset is the sum of the primes
    before it in its layer; the primes of a layer sum to engram_num_embeddings[layer];
  * hash of position p (absolute; history c[] of class ids, DEAD = -1 for image-span tokens):
      blocked = False; for s in 0..max_ngram-1:
          src = c[max(p - s, 0)]; blocked |= p < s or src == DEAD
          tok[s] = pad_class if blocked else src
      h = tok[0] * mult[0]; for n in 1..max_ngram-1: h ^= tok[n] * mult[n]
          id[(n-1) * n_heads + k] = h % prime[n-1][k] + offset[(n-1) * n_heads + k]
    with int64 wrap-around and torch's remainder (sign of the divisor).

Cases written:
  released: the V4.1-Flash config (multipliers from architecture.md §5.8, which were recomputed
            with numpy there; numpy's PCG64 stream is not reproduced here), a pseudo-random class
            sequence with DEAD marks (also at position 0 and as runs) and pad classes;
  golden:   tests/data/golden/v41-tiny-a: its config.json, the manifest's `engram` constants and
            its synthetic engram_token_map.json, over the prompt followed by the teacher-forced
            decode inputs (`decode_fixed.input_tokens`, positions N..N+23).
"""
import json, os, random, sys

DEAD = -1
INT64 = 1 << 64

RELEASED = {
    "engram_layer_ids": [1, 14],
    "engram_num_embeddings": [384006168, 384016682],
    "engram_max_ngram_size": 4,
    "engram_vocab_size": 16000000,
    "engram_n_heads": 8,
    "engram_head_dim": 256,
    "engram_pad_token_id": 2,
    "engram_compressed_vocab_size": 99092,
}
RELEASED_MULTIPLIERS = [
    [76632096046245, 4839876093313, 35959672319349, 73987337458391],
    [67716810739261, 51510806800915, 30921347202721, 82619226485591],
]
RELEASED_PAD_CLASS = 2  # ids 0, 1, 2 are the first three tokens and distinct specials


def is_prime(n):
    if n < 2:
        return False
    if n % 2 == 0:
        return n == 2
    f = 3
    while f * f <= n:
        if n % f == 0:
            return False
        f += 2
    return True


def layout(cfg):
    """primes[layer][col], offsets[layer][col] with col = (n-2) * n_heads + head."""
    seen, primes, offsets = set(), [], []
    for rows in cfg["engram_num_embeddings"]:
        cols = []
        for _ in range(cfg["engram_max_ngram_size"] - 1):
            cand = cfg["engram_vocab_size"] - 1
            for _ in range(cfg["engram_n_heads"]):
                cand += 1
                while not is_prime(cand) or cand in seen:
                    cand += 1
                seen.add(cand)
                cols.append(cand)
        offs, acc = [], 0
        for p in cols:
            offs.append(acc)
            acc += p
        assert acc == rows, ("prime sum", acc, rows)
        primes.append(cols)
        offsets.append(offs)
    return primes, offsets


def wrap64(x):
    x %= INT64
    return x - INT64 if x >= INT64 // 2 else x


def hash_ids(cfg, primes, offsets, mults, pad, classes):
    ng, nh = cfg["engram_max_ngram_size"], cfg["engram_n_heads"]
    out = []
    for p in range(len(classes)):
        blocked, tok = False, []
        for s in range(ng):
            src = classes[max(p - s, 0)]
            blocked = blocked or p < s or src == DEAD
            tok.append(pad if blocked else src)
        per_layer = []
        for l, m in enumerate(mults):
            h = wrap64(tok[0] * m[0])
            ids = []
            for n in range(1, ng):
                h = wrap64(h ^ wrap64(tok[n] * m[n]))
                for k in range(nh):
                    c = (n - 1) * nh + k
                    ids.append(h % primes[l][c] + offsets[l][c])  # Python % == torch remainder here
            per_layer.append(ids)
        out.append(per_layer)
    return out


def released_case():
    cfg = RELEASED
    primes, offsets = layout(cfg)
    rng = random.Random(20260910)
    classes = [DEAD, 5, 7]  # DEAD at position 0
    for _ in range(61):
        r = rng.random()
        if r < 0.1:
            classes.append(DEAD)
        elif r < 0.15:
            classes.append(RELEASED_PAD_CLASS)
        else:
            classes.append(rng.randrange(cfg["engram_compressed_vocab_size"]))
    classes[20:23] = [DEAD, DEAD, DEAD]  # a run of DEAD
    classes[-1] = cfg["engram_compressed_vocab_size"] - 1
    return {
        "config": cfg,
        "primes": primes,
        "offsets": offsets,
        "multipliers": RELEASED_MULTIPLIERS,
        "pad_class": RELEASED_PAD_CLASS,
        "classes": classes,
        "ids": hash_ids(cfg, primes, offsets, RELEASED_MULTIPLIERS, RELEASED_PAD_CLASS, classes),
    }


def golden_case(root):
    d = os.path.join(root, "tests/data/golden/v41-tiny-a")
    cfg = json.load(open(os.path.join(d, "config.json")))["text_config"]
    man = json.load(open(os.path.join(d, "expected/manifest.json")))
    eng = man["engram"]
    tmap = json.load(open(os.path.join(d, "engram_token_map.json")))
    primes, offsets = layout(cfg)
    nh = cfg["engram_n_heads"]
    assert primes == [[p for ng in layer for p in ng] for layer in eng["primes"]], "primes vs manifest"
    assert offsets == eng["offsets"], "offsets vs manifest"
    lookup = tmap["map"]
    pad = lookup[cfg["engram_pad_token_id"]]
    assert pad == eng["pad_class"] == tmap["pad_class"]
    assert max(lookup) + 1 == cfg["engram_compressed_vocab_size"]
    tokens = man["prompt_token_ids"] + man["decode_fixed"]["input_tokens"]
    assert man["decode_fixed"]["positions"][0] == len(man["prompt_token_ids"])
    classes = [lookup[t] for t in tokens]
    return {
        "config": {k: cfg[k] for k in RELEASED},
        "n_heads": nh,
        "tokens": tokens,
        "classes": classes,
        "pad_class": pad,
        "ids": hash_ids(cfg, primes, offsets, eng["multipliers"], pad, classes),
    }


def main():
    root = os.getcwd()
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(root, "tests/data/engram/hash_fixtures.json")
    fx = {
        "description": "Engram hash ids computed by tools/reference/engram_hash_fixtures.py from the "
                       "reference formulas (architecture.md §5.8). ids[position][layer][column].",
        "released": released_case(),
        "golden": golden_case(root),
    }
    with open(out, "w") as f:
        json.dump(fx, f, separators=(",", ":"))
        f.write("\n")
    r = fx["released"]
    print("released primes:", r["primes"])
    print("released sums:", [sum(p) for p in r["primes"]])
    print("wrote", out, "(%d released positions, %d golden positions)" % (len(r["classes"]), len(fx["golden"]["tokens"])))


if __name__ == "__main__":
    main()
