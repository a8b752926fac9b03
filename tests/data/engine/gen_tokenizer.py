#!/usr/bin/env python3
"""gen_tokenizer.py — write tests/data/engine/tokenizer.json: a small byte-level
BPE tokenizer with exactly 1024 ids, to pair with the golden V4 checkpoint
(vocab 1024, BOS 0, EOS 1) in the engine's text tests.

ids 0..5    added tokens: BOS, EOS (special), <｜User｜>, <｜Assistant｜>, <think>, </think>
ids 6..261  the 256 single-byte tokens (GPT-2 ByteLevel alphabet)
ids 262..   merges: common English pairs and words, two-byte UTF-8 characters
            (é, ß, ü, ñ, ...), the first half of three-byte characters, and
            pairs of letters until 1024 ids.
The output is a pure function of this file. Python 3 standard library only.
usage: gen_tokenizer.py OUT.json
"""
import json
import sys


def byte_alphabet():
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {b: chr(c) for b, c in zip(bs, cs)}


def main(out):
    B = byte_alphabet()
    added = ["<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>", "<｜User｜>", "<｜Assistant｜>", "<think>", "</think>"]
    vocab, merges = {}, []
    for i, c in enumerate(added):  # HF keeps added tokens in the vocab too
        vocab[c] = i
    for b in range(256):
        vocab[B[b]] = 6 + b

    def enc(s):
        return "".join(B[x] for x in s.encode("utf-8"))

    def add_merge(a, b):
        if len(vocab) >= 1024 or enc(a) not in vocab or enc(b) not in vocab or enc(a + b) in vocab:
            return
        merges.append(enc(a) + " " + enc(b))
        vocab[enc(a + b)] = len(vocab)

    def add_word(w):  # left to right merges
        for i in range(2, len(w) + 1):
            add_merge(w[: i - 1], w[i - 1])

    for w in ["th", "he", "the", " t", " the", "an", "and", " a", " and", "in", "ing", "er", "on", "re", " s", " w",
              "hello", " hello", "world", " world", "stop", " stop", "END", " END", "ab", "abc", "abcd", "xy", "xyz",
              "\n\n", "  ", "    "]:
        add_word(w)
    for ch in "éèàüößñçøåæœ€—“”‘’…中文日本語":
        bs = ch.encode("utf-8")
        pieces = [bytes([x]) for x in bs]
        cur = pieces[0]
        for p in pieces[1:]:  # merge byte by byte (raw bytes, ByteLevel strings)
            a, b = "".join(B[x] for x in cur), "".join(B[x] for x in p)
            if a + b not in vocab and len(vocab) < 1024:
                merges.append(a + " " + b)
                vocab[a + b] = len(vocab)
            cur = cur + p
    letters = "etaoinshrdlucmfwypvbgkqjxz ETAOINSHRD.,!?"
    for a in letters:
        for b in letters:
            add_merge(a, b)
    assert len(vocab) == 1024 and sorted(vocab.values()) == list(range(1024)), len(vocab)
    tok = {
        "version": "1.0", "truncation": None, "padding": None,
        "added_tokens": [{"id": i, "content": c, "single_word": False, "lstrip": False, "rstrip": False,
                          "normalized": False, "special": i < 2} for i, c in enumerate(added)],
        "normalizer": None,
        "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True},
        "post_processor": None,
        "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
        "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
                  "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
                  "vocab": vocab, "merges": merges},
    }
    with open(out, "w", encoding="utf-8") as f:
        json.dump(tok, f, ensure_ascii=False, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main(sys.argv[1])
