#!/usr/bin/env python3
"""Evaluate the exported demo model with the exact (reference-numerics) PyTorch forward:
held-out perplexity (per token / per byte), greedy samples, DSpark acceptance at temperature 0,
and the C-engine parity vectors for tests/data/demo/.

usage: evaluate.py --model-dir models/NAME --tokens DIR --json eval.json [--demo-out tests/data/demo]
"""
import argparse
import json
import math
import os
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import dsv41_io as IO  # noqa: E402
import dsv41_model as M  # noqa: E402
from train import load_model  # noqa: E402

PROMPTS = ["In the beginning God created", "The Lord is my shepherd;", "And Jesus said unto them,",
           "CYNIC, n. A blackguard whose"]


@torch.no_grad()
def greedy(model, ids, steps):
    """ids [B, P] -> (ids [B, P+steps], logits of every decode step [B, steps+1, V]) by recompute."""
    rows = []
    for _ in range(steps + 1):
        lg, _ = model(ids)
        rows.append(lg[:, -1].float())
        if len(rows) <= steps:
            ids = torch.cat([ids, lg[:, -1].argmax(-1, keepdim=True)], 1)
    return ids, torch.stack(rows, 1)


@torch.no_grad()
def perplexity(model, test, nbytes, windows, dev):
    S = 511
    n = min(windows, test.numel() // S)
    nll, ntok, nb = 0.0, 0, 0
    for i in range(0, n, 16):
        x = test[i * S:min(n, i + 16) * S].view(-1, S).long().to(dev)
        ids = torch.cat([torch.zeros(x.shape[0], 1, dtype=torch.long, device=dev), x], 1)
        lg, _ = model(ids)
        nll += F.cross_entropy(lg[:, :-1].flatten(0, 1).float(), x.flatten(), reduction="sum").item()
        ntok += x.numel()
        nb += nbytes[x.cpu()].sum().item()
    return {"windows": n, "tokens": ntok, "bytes": nb, "nll_per_token": nll / ntok, "ppl_per_token": math.exp(nll / ntok),
            "bits_per_byte": nll / nb / math.log(2), "ppl_per_byte": math.exp(nll / nb)}


@torch.no_grad()
def dspark_acceptance(model, seqs, P):
    """Speculative decoding at temperature 0, simulated exactly: the target's greedy sequence is
    fixed, so at processed position p (anchor = token p+1) drafts d1..d5 are accepted while they
    equal tokens p+2..p+6; tau = accepted + 1 (bonus), next p = p + accepted + 1."""
    cfg = model.cfg
    bs = cfg.dspark_block_size
    B, L = seqs.shape
    _, hidden = model(seqs)
    ctx = model.dspark_ctx(model.dspark_main_x(hidden))
    ps = torch.arange(P - 1, L - bs - 1, device=seqs.device)
    taus, accs, conf_hits = [], [], []
    for b in range(B):
        bidx = torch.full_like(ps, b)
        _, conf, drafted = model.dspark_draft(ctx, bidx, ps, seqs[b, ps + 1])
        truth = seqs[b, (ps.unsqueeze(1) + 2 + torch.arange(bs, device=seqs.device))]
        match = (drafted == truth).int().cumprod(1).sum(1).tolist()
        p = 0
        while p < len(ps):
            taus.append(match[p] + 1)
            accs.append(match[p])
            p += match[p] + 1
        conf_hits.append(((torch.sigmoid(conf[:, 0]) > 0.5) == (drafted[:, 0] == truth[:, 0])).float().mean().item())
    return {"verify_steps": len(taus), "tau_mean": sum(taus) / len(taus), "accepted_drafts_mean": sum(accs) / len(accs),
            "confidence0_accuracy": sum(conf_hits) / len(conf_hits), "block_size": bs}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model-dir", required=True)
    ap.add_argument("--tokens", required=True)
    ap.add_argument("--json", default="eval.json")
    ap.add_argument("--demo-out", default=None)
    ap.add_argument("--ppl-windows", type=int, default=256)
    a = ap.parse_args()
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.set_grad_enabled(False)
    from tokenizers import Tokenizer
    tok = Tokenizer.from_file(os.path.join(a.model_dir, "tokenizer.json"))
    model = load_model(a.model_dir, "cpu")
    IO.load_into(model, a.model_dir)
    model.to(dev).eval()
    M.RT.exact, M.RT.wsim = True, False
    test = torch.load(os.path.join(a.tokens, "test.pt"))
    nbytes = torch.load(os.path.join(a.tokens, "token_bytes.pt"))
    res, t0 = {}, time.time()
    res["perplexity"] = perplexity(model, test, nbytes, a.ppl_windows, dev)
    print(json.dumps(res), flush=True)
    res["samples"] = []
    for p in PROMPTS:
        ids = torch.tensor([[0] + tok.encode(p, add_special_tokens=False).ids], device=dev)
        out, _ = greedy(model, ids, 40)
        res["samples"].append({"prompt": p, "continuation": tok.decode(out[0, ids.shape[1]:].tolist())})
        print(res["samples"][-1], flush=True)
    # DSpark acceptance on held-out text: 8 prompts of 64 tokens, 96 greedy target tokens each
    P, T = 64, 96
    starts = torch.linspace(0, test.numel() - 2 * P, 8).long()
    prom = torch.stack([test[s:s + P - 1] for s in starts]).long().to(dev)
    prom = torch.cat([torch.zeros(8, 1, dtype=torch.long, device=dev), prom], 1)
    seqs, _ = greedy(model, prom, T)
    res["dspark"] = dspark_acceptance(model, seqs, P)
    print(res["dspark"], flush=True)
    if a.demo_out:
        os.makedirs(a.demo_out, exist_ok=True)
        text = ("Blessed are the peacemakers: for they shall be called the children of God. Rejoice, and be "
                "exceeding glad: for great is your reward in heaven. Ye are the salt of the earth, and the light of "
                "the world. A city that is set on an hill cannot be hid. Let your light so shine before men.")
        ids = [0] + tok.encode(text, add_special_tokens=False).ids
        ids = torch.tensor([ids[:64]], device=dev)
        N = ids.shape[1]
        pre, hidden = model(ids)
        seq, steps = greedy(model, ids, 16)
        # step i feeds input_tokens[i] at position N+i; row i = logits of that position
        inp = seq[0, N:N + 16].tolist()
        dec = steps[0, 1:17]
        outs = dec.argmax(-1).tolist()
        open(os.path.join(a.demo_out, "prefill_logits_all.bin"), "wb").write(pre[0].float().cpu().numpy().tobytes())
        open(os.path.join(a.demo_out, "decode_logits.bin"), "wb").write(dec.float().cpu().numpy().tobytes())
        full, hid = model(seq[:, :N + 16])
        ctx = model.dspark_ctx(model.dspark_main_x(hid))
        ps = torch.arange(N - 1, N + 15, device=dev)
        _, conf, drafted = model.dspark_draft(ctx, torch.zeros_like(ps), ps, seq[0, ps + 1])
        man = {"model": os.path.basename(os.path.normpath(a.model_dir)), "prompt_text": text,
               "prompt_token_ids": ids[0].tolist(), "prompt_len": N, "vocab_size": model.cfg.vocab_size,
               "files": {"prefill_logits_all.bin": {"shape": [N, model.cfg.vocab_size], "dtype": "float32 little-endian",
                                                    "description": "logits of every prompt position (single prefill from position 0)"},
                         "decode_logits.bin": {"shape": [16, model.cfg.vocab_size], "dtype": "float32 little-endian",
                                               "description": "greedy decode: row i = logits at position prompt_len+i after feeding input_tokens[i]"}},
               "decode": {"first_token_from_prefill": int(pre[0, -1].argmax()), "input_tokens": inp, "output_tokens": outs,
                          "positions": list(range(N, N + 16)),
                          "rule": "input_tokens[0] = argmax(prefill last row); input_tokens[i+1] = output_tokens[i] = argmax(row i)"},
               "dspark": {"convention": "at decode step i (target processed position p = prompt_len-1+i, anchor = the target's token "
                                        "for p+1): drafts for p+2..p+6 at temperature 0 (block [anchor, noise x4])",
                          "positions": ps.tolist(), "anchors": seq[0, ps + 1].tolist(), "drafted_ids": drafted.tolist(),
                          "confidence": conf.float().tolist()},
               "generated_by": "tools/reference/evaluate.py (exact reference numerics, PyTorch %s, %s)" % (torch.__version__, dev),
               "compare": "as tests/data/golden/README.md: early rows tight, all rows mean abs diff and argmax agreement"}
        json.dump(man, open(os.path.join(a.demo_out, "manifest.json"), "w"), indent=1)
    res["seconds"] = time.time() - t0
    json.dump(res, open(a.json, "w"), indent=1)
    print(json.dumps(res, indent=1))


if __name__ == "__main__":
    main()
