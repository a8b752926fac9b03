#!/usr/bin/env python3
"""Export a trained state_dict to the release checkpoint format (FP8 e4m3 + e8m0 32x32 scales, FP4
experts as I8 + e8m0 per 32, Engram table FP8 + per-row scales, BF16/F32 as released), sharded,
then re-load the files and compare with the trained model.

usage: export.py --model-dir models/NAME --ckpt /tmp/ckpt.pt --tokens DIR [--shards 3] [--json out]
"""
import argparse
import json
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import dsv41_io as IO  # noqa: E402
import dsv41_model as M  # noqa: E402
from train import load_model  # noqa: E402


def stats(a, b):
    d = (a - b).abs()
    return {"max_abs_diff": d.max().item(), "mean_abs_diff": d.mean().item(),
            "argmax_agreement": (a.argmax(-1) == b.argmax(-1)).float().mean().item()}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model-dir", required=True)
    ap.add_argument("--ckpt", required=True)
    ap.add_argument("--tokens", default=None)
    ap.add_argument("--shards", type=int, default=3)
    ap.add_argument("--json", default=None)
    a = ap.parse_args()
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    torch.backends.cuda.matmul.allow_tf32 = False
    trained = load_model(a.model_dir, "cpu")
    trained.load_state_dict(torch.load(a.ckpt))
    total = IO.write_checkpoint(a.model_dir, IO.export_tensors(trained), a.shards)
    loaded = load_model(a.model_dir, "cpu")
    missing, unexpected = IO.load_into(loaded, a.model_dir)
    trained.to(dev), loaded.to(dev)
    res = {"tensor_bytes": total, "missing": missing, "unexpected": unexpected}
    if a.tokens:
        ids = torch.load(os.path.join(a.tokens, "test.pt"))[:4 * 511].long().view(4, 511)
    else:
        ids = torch.randint(3, loaded.cfg.vocab_size - 8, (2, 100))
    ids = torch.cat([torch.zeros(ids.shape[0], 1, dtype=torch.long), ids], 1).to(dev)
    with torch.no_grad():
        M.RT.exact, M.RT.wsim = True, False
        l_exp, _ = loaded(ids)
        M.RT.exact, M.RT.wsim = True, True
        l_fq, _ = trained(ids)
        M.RT.exact, M.RT.wsim = False, True
        l_ste, _ = trained(ids)
    res["exported_exact_vs_trained_fakequant_exact"] = stats(l_exp, l_fq)
    res["exported_exact_vs_trained_STE_forward"] = stats(l_exp, l_ste.float())
    print(json.dumps(res, indent=1))
    if a.json:
        json.dump(res, open(a.json, "w"), indent=1)


if __name__ == "__main__":
    main()
