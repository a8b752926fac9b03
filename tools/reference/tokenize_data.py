#!/usr/bin/env python3
"""Tokenise .data/text/{train,test}.txt with the demo tokenizer into int32 streams (one line = one
entry, kept with its newline) plus the UTF-8 byte length of every token id (for bits per byte).
usage: tokenize_data.py MODEL_DIR TEXT_DIR OUT_DIR"""
import os
import sys

import torch


def main():
    d, tdir, out = sys.argv[1:4]
    from tokenizers import Tokenizer
    tok = Tokenizer.from_file(os.path.join(d, "tokenizer.json"))
    os.makedirs(out, exist_ok=True)
    for split in ("train", "test"):
        lines = open(os.path.join(tdir, split + ".txt"), encoding="utf-8").read().splitlines(keepends=True)
        ids = []
        for i in range(0, len(lines), 4096):
            for e in tok.encode_batch(lines[i:i + 4096], add_special_tokens=False):
                ids.extend(e.ids)
        torch.save(torch.tensor(ids, dtype=torch.int32), os.path.join(out, split + ".pt"))
        print(split, "lines", len(lines), "tokens", len(ids))
    V = tok.get_vocab_size(with_added_tokens=True)
    added = tok.get_added_tokens_decoder()
    # byte-level BPE: one token-string char = one byte; added tokens count their UTF-8 text
    nbytes = [len(added[i].content.encode("utf-8")) if i in added else len(tok.id_to_token(i)) for i in range(V)]
    torch.save(torch.tensor(nbytes), os.path.join(out, "token_bytes.pt"))


if __name__ == "__main__":
    main()
