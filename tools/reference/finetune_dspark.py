#!/usr/bin/env python3
"""Short DSpark-only fine-tune on the TARGET'S OWN GREEDY CONTINUATIONS (the distribution the
drafter meets at decode time), on top of an exported model. The target (every non-mtp weight) is
frozen and unchanged. Measures tau before/after on the held-out prompts of evaluate.py, writes the
new mtp.* tensors (release format) and refreshed demo DSpark drafts.

usage: finetune_dspark.py --model-dir models/NAME --text-dir DIR --seconds 60 --out DIR
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
from evaluate import dspark_acceptance, greedy  # noqa: E402
from train import HP, load_model  # noqa: E402


def encode_lines(tok, path, max_chars):
    text = open(path, encoding="utf-8").read()[:max_chars]
    ids = []
    for e in tok.encode_batch(text.splitlines(keepends=True), add_special_tokens=False):
        ids.extend(e.ids)
    return torch.tensor(ids, dtype=torch.long)


@torch.no_grad()
def greedy_fast(model, ids, steps):
    """Greedy continuation with the training-mode forward (only used to make training data)."""
    for _ in range(steps):
        lg, _ = model(ids)
        ids = torch.cat([ids, lg[:, -1].argmax(-1, keepdim=True)], 1)
    return ids


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model-dir", required=True)
    ap.add_argument("--text-dir", required=True)
    ap.add_argument("--seconds", type=float, default=60)
    ap.add_argument("--out", required=True)
    ap.add_argument("--n-train", type=int, default=128)
    ap.add_argument("--gen", type=int, default=64)
    ap.add_argument("--eval-seqs", type=int, default=8)
    ap.add_argument("--eval-gen", type=int, default=96)
    a = ap.parse_args()
    t0 = time.time()
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.manual_seed(7)
    os.makedirs(a.out, exist_ok=True)
    from tokenizers import Tokenizer
    tok = Tokenizer.from_file(os.path.join(a.model_dir, "tokenizer.json"))
    test = encode_lines(tok, os.path.join(a.text_dir, "test.txt"), 10 ** 9)
    train = encode_lines(tok, os.path.join(a.text_dir, "train.txt"), 3 * 10 ** 6)
    model = load_model(a.model_dir, "cpu")
    IO.load_into(model, a.model_dir)
    model.to(dev)
    res = {}
    # held-out tau: the same prompts as evaluate.py (exact numerics; weights exact -> wsim idempotent)
    M.RT.exact, M.RT.wsim = True, True
    P = 64
    with torch.no_grad():
        starts = torch.linspace(0, test.numel() - 2 * P, a.eval_seqs).long()
        prom = torch.stack([test[s:s + P - 1] for s in starts]).to(dev)
        prom = torch.cat([torch.zeros(a.eval_seqs, 1, dtype=torch.long, device=dev), prom], 1)
        seqs, _ = greedy(model, prom, a.eval_gen)
        res["before"] = dspark_acceptance(model, seqs, P)
    print("t=%.0fs before" % (time.time() - t0), res["before"], flush=True)
    # training data: greedy continuations of training-text prompts (training-mode forward)
    M.RT.exact = False
    st = torch.randint(0, train.numel() - P, (a.n_train,))
    tp = torch.stack([train[s:s + P - 1] for s in st]).to(dev)
    tp = torch.cat([torch.zeros(a.n_train, 1, dtype=torch.long, device=dev), tp], 1)
    G = greedy_fast(model, tp, a.gen)
    with torch.no_grad():
        lg, hidden = model(G)
        g = lg.argmax(-1)
    print("t=%.0fs generated %s" % (time.time() - t0, tuple(G.shape)), flush=True)
    for p in model.parameters():
        p.requires_grad_(False)
    params = [p for n, p in model.mtp.named_parameters() if not n.endswith("bias") and not n.endswith("bias_vl")]
    for p in params:
        p.requires_grad_(True)
    opt = torch.optim.AdamW(params, lr=5e-4, betas=(0.9, 0.95), weight_decay=0.0)
    cfg = model.cfg
    bs, B, S = cfg.dspark_block_size, G.shape[0], G.shape[1]
    K = 16
    off = torch.arange(bs, device=dev)
    wts = HP["ds_decay"] ** off.float()
    t_train, step, log = time.time(), 0, []
    while time.time() - t_train < a.seconds:
        fr = (time.time() - t_train) / a.seconds
        for gr in opt.param_groups:
            gr["lr"] = 5e-4 * min(1.0, (step + 1) / 10) * 0.5 * (1 + math.cos(math.pi * fr))
        stats = []
        ctx = model.dspark_ctx(model.dspark_main_x(hidden))
        pp = torch.randint(P // 2, S - bs - 1, (B, K), device=dev).flatten()   # mostly generated region
        bidx = torch.arange(B, device=dev).unsqueeze(1).expand(B, K).flatten()
        tgt = g[bidx.unsqueeze(1), pp.unsqueeze(1) + 1 + off]
        anchor = G[bidx, pp + 1]
        prev = torch.cat([anchor.unsqueeze(1), tgt[:, :-1]], 1)
        dl, conf, _ = model.dspark_draft(ctx, bidx, pp, anchor, prev_ids=prev, stats=stats, frozen_shared=True)
        ce = F.cross_entropy(dl.flatten(0, 1), tgt.flatten(), reduction="none").view(-1, bs)
        hit = (dl.argmax(-1) == tgt).float()
        loss = (ce.mean(0) * wts).sum() / wts.sum() + 0.2 * F.binary_cross_entropy_with_logits(conf.float(), hit)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        with torch.no_grad():
            for moe, cnt in stats:
                moe.gate.bias += HP["bias_lr"] * torch.sign(cnt.float().mean() - cnt.float())
        step += 1
        if step % 25 == 0 or step == 1:
            log.append((step, round(time.time() - t0, 1), round(loss.item(), 4), round(hit[:, 0].mean().item(), 4),
                        round(hit.mean().item(), 4)))
            print("step %d t=%.0fs loss=%.4f acc0=%.3f acc=%.3f" % log[-1], flush=True)
    res["finetune"] = {"steps": step, "seconds": time.time() - t_train, "log": log, "n_train_seqs": B,
                       "gen_tokens": a.gen, "anchors_per_seq": K}
    M.RT.exact, M.RT.wsim = True, True
    with torch.no_grad():
        res["after"] = dspark_acceptance(model, seqs, P)
    print("t=%.0fs after" % (time.time() - t0), res["after"], flush=True)
    # new mtp.* tensors in the release format + refreshed demo drafts
    model.cpu()
    mtp = [t for t in IO.export_tensors(model) if t[0].startswith("mtp.")]
    IO.write_safetensors(os.path.join(a.out, "mtp.safetensors"), mtp)
    model.to(dev)
    demo = os.path.join(os.path.dirname(os.path.abspath(__file__)), "../../tests/data/demo/manifest.json")
    if os.path.exists(demo):
        man = json.load(open(demo))
        ids = torch.tensor([man["prompt_token_ids"] + man["decode"]["input_tokens"]], device=dev)
        with torch.no_grad():
            _, hid = model(ids)
            ctx = model.dspark_ctx(model.dspark_main_x(hid))
            ps = torch.tensor(man["dspark"]["positions"], device=dev)
            _, conf, drafted = model.dspark_draft(ctx, torch.zeros_like(ps), ps, ids[0, ps + 1])
        res["demo_dspark"] = {"anchors": ids[0, ps + 1].tolist(), "drafted_ids": drafted.tolist(),
                              "confidence": conf.float().tolist()}
    res["seconds_total"] = time.time() - t0
    json.dump(res, open(os.path.join(a.out, "finetune.json"), "w"), indent=1)
    print(json.dumps({k: res[k] for k in ("before", "after")}), "total %.0fs" % res["seconds_total"], flush=True)


if __name__ == "__main__":
    main()
