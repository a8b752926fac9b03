#!/usr/bin/env python3
"""Train the demo byte-level BPE (HF `tokenizers`) with DeepSeek's pre-tokenizer (architecture.md §9.1,
docs/tokenizer.md §2): 3 Split(Isolated) regexes + ByteLevel(add_prefix_space=false, use_regex=false),
ByteLevel decoder. Ids 0/1/2 = BOS/EOS/pad; the chat tokens are the LAST ids of the vocab, and
`<｜System｜>` (the very last id) doubles as DSpark's noise token.

usage: train_tokenizer.py --text .data/text/train.txt --vocab 8192 --out models/NAME
"""
import argparse
import json
import os

BOS, EOS, PAD = "<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>", "<｜▁pad▁｜>"
CHAT = ["<｜User｜>", "<｜Assistant｜>", "<think>", "</think>", "<｜System｜>"]
SPECIAL = {BOS, EOS, PAD, "<｜System｜>"}
# DeepSeek-V3/V4 pre-tokenizer (same structure and regexes as tests/data/tokenizer/tokenizer.json)
PRE_TOKENIZER = {"type": "Sequence", "pretokenizers": [
    {"type": "Split", "pattern": {"Regex": "\\p{N}{1,3}"}, "behavior": "Isolated", "invert": False},
    {"type": "Split", "pattern": {"Regex": "[\u4e00-\u9fa5\u3040-\u309f\u30a0-\u30ff]+"}, "behavior": "Isolated", "invert": False},
    {"type": "Split", "pattern": {"Regex": "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+| ?[\\p{P}\\p{S}]+[\r\n]*|\\s*[\r\n]+|\\s+(?!\\S)|\\s+"},
     "behavior": "Isolated", "invert": False},
    {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": False}]}


def added(i, content):
    return {"id": i, "content": content, "single_word": False, "lstrip": False, "rstrip": False,
            "normalized": False, "special": content in SPECIAL}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--text", required=True)
    ap.add_argument("--vocab", type=int, default=8192)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    ref = os.path.join(os.path.dirname(os.path.abspath(__file__)), "../../tests/data/tokenizer/tokenizer.json")
    if os.path.exists(ref):  # take DeepSeek's structure verbatim when the reference file is present
        assert json.load(open(ref))["pre_tokenizer"] == PRE_TOKENIZER
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    tok = Tokenizer(models.BPE())
    skeleton = json.loads(tok.to_str())
    skeleton["pre_tokenizer"] = PRE_TOKENIZER
    tok = Tokenizer.from_str(json.dumps(skeleton))
    tok.decoder = decoders.ByteLevel()
    n_bpe = a.vocab - len(CHAT)  # BOS/EOS/pad count inside the trainer's vocab
    tr = trainers.BpeTrainer(vocab_size=n_bpe, min_frequency=2, special_tokens=[BOS, EOS, PAD],
                             initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train([a.text], tr)
    d = json.loads(tok.to_str())
    vocab = d["model"]["vocab"]
    assert vocab[BOS] == 0 and vocab[EOS] == 1 and vocab[PAD] == 2
    n = len(vocab)
    pads = []
    while n + len(pads) < n_bpe:  # pad to the planned size so the chat tokens end the vocab
        pads.append("<｜place▁holder▁no▁%d｜>" % len(pads))
    d["added_tokens"] = [added(0, BOS), added(1, EOS), added(2, PAD)]
    for i, c in enumerate(pads + CHAT):
        d["added_tokens"].append(added(n + i, c))
    for p in pads:
        SPECIAL.add(p)
    d["added_tokens"] = [dict(t, special=t["content"] in SPECIAL) for t in d["added_tokens"]]
    d["normalizer"] = {"type": "Sequence", "normalizers": []}
    d["pre_tokenizer"] = PRE_TOKENIZER
    d["post_processor"] = {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": False, "use_regex": True}
    d["decoder"] = {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True}
    os.makedirs(a.out, exist_ok=True)
    final = Tokenizer.from_str(json.dumps(d, ensure_ascii=False))
    final.save(os.path.join(a.out, "tokenizer.json"))
    V = final.get_vocab_size(with_added_tokens=True)
    assert V == a.vocab, (V, a.vocab)
    cfg = {"add_bos_token": False, "add_eos_token": False, "bos_token": BOS, "eos_token": EOS, "pad_token": PAD,
           "clean_up_tokenization_spaces": False, "model_max_length": 1048576,
           "tokenizer_class": "PreTrainedTokenizerFast", "legacy": False}
    json.dump(cfg, open(os.path.join(a.out, "tokenizer_config.json"), "w"), indent=2, ensure_ascii=False)
    t = Tokenizer.from_file(os.path.join(a.out, "tokenizer.json"))
    s = "<｜User｜>In the beginning God created the heavens and the earth.<｜Assistant｜>"
    enc = t.encode(s, add_special_tokens=False)
    print("vocab", V, "bpe", n, "pads", len(pads), "ids of chat tokens", [t.token_to_id(c) for c in CHAT])
    print(enc.ids, repr(t.decode(enc.ids, skip_special_tokens=False)))


if __name__ == "__main__":
    main()
