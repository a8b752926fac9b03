#!/usr/bin/env python3
"""Train the demo DeepSeek-V4.1 model (all mechanisms active) with quantisation-aware STEs.

Losses: next-token CE (main); DSpark block drafting (anchor = true next token, 4 noise tokens,
teacher-forced Markov head, targets = the following 5 tokens) + confidence BCE (does the draft's
argmax match?); indexer KL (indexer params only). Router balance: aux-loss-free bias update.
DSpark sees the target's hidden states detached and the shared embed/head frozen, so it never
changes the main model.

usage: train.py --model-dir models/NAME --tokens DIR --minutes 7 --ckpt /tmp/ckpt.pt --log loss.csv
       train.py --smoke   (tiny random config on CPU, for testing the code)
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
import dsv41_model as M  # noqa: E402
from dsv41_config import Cfg  # noqa: E402
from dsv41_engram import EngramHasher  # noqa: E402

HP = dict(seq=512, batch=64, lr=2.5e-3, min_lr_frac=0.1, warmup=100, wd=0.1, clip=1.0, betas=(0.9, 0.95),
          ds_anchors=48, ds_weight=1.0, ds_decay=0.8, conf_weight=0.2, idx_weight=1.0, bias_lr=1e-3, seed=1234)


def init_weights(model):
    cfg = model.cfg
    g = torch.Generator().manual_seed(HP["seed"])
    depth = 1.0 / math.sqrt(2 * cfg.n_layers)
    for name, p in model.named_parameters():
        shape = p.shape
        if name.endswith("hc_attn.fn") or name.endswith("hc_ffn.fn"):
            v = torch.randn(shape, generator=g) * (0.02 / math.sqrt(shape[1]))
        elif name.endswith(".base"):
            hc = cfg.hc_mult
            v = torch.zeros(shape)
            v[:hc] = math.log(1 / (hc - 1))          # pre weights sigmoid = 1/hc: collapse keeps scale
            v[2 * hc:] = (torch.eye(hc) * 3.0).flatten()  # comb near identity
        elif name.endswith(".scale") or "norm" in name.split(".")[-2] or name.endswith("q_weight") or name.endswith("k_weight"):
            v = torch.ones(shape)
        elif name.endswith("attn_sink") or name.endswith("gate.bias") or name.endswith("bias_vl"):
            v = torch.zeros(shape)
        elif name == "embed.weight" or name.endswith("engram.embed.weight") or name.endswith("markov_head.embed.weight"):
            v = torch.randn(shape, generator=g)
        elif name.endswith("markov_head.head.weight"):
            v = torch.randn(shape, generator=g) * 0.02
        elif name.endswith("confidence_head.proj.weight"):
            v = torch.zeros(shape)
        else:  # linear weights [out, in]
            v = torch.randn(shape, generator=g) / math.sqrt(shape[1])
            if name.endswith("wo_b.weight") or name.endswith("w2.weight"):
                v = v * depth
            if ".engram.wkv" in name:
                v = v * 0.1
        with torch.no_grad():
            p.copy_(v)


def load_model(model_dir, device):
    cfg = Cfg.from_json(os.path.join(model_dir, "config.json"))
    tmap = json.load(open(os.path.join(model_dir, "engram_token_map.json")))["map"]
    consts = json.load(open(os.path.join(model_dir, "engram_hash.json")))
    hasher = EngramHasher(tmap, consts, cfg.engram_max_ngram_size, cfg.engram_n_heads)
    return M.Transformer(cfg, hasher).to(device)


def dspark_loss(model, ids, hidden, logits, stats):
    """Block drafting trained by self-distillation on the target's greedy choices: g[q] = argmax of
    the target at q (its token for q+1). Anchor = the true token p+1; Markov inputs teacher-forced
    [anchor, g[p+1], ..]; targets g[p+1..p+5]; confidence target = (draft argmax == target)."""
    cfg = model.cfg
    B, S = ids.shape
    bs, K = cfg.dspark_block_size, HP["ds_anchors"]
    g = logits.detach().argmax(-1)
    main_x = model.dspark_main_x(hidden.detach())
    ctx = model.dspark_ctx(main_x)
    p = torch.randint(0, S - bs - 1, (B, K), device=ids.device)          # target processed position p
    bidx = torch.arange(B, device=ids.device).unsqueeze(1).expand(B, K).flatten()
    p = p.flatten()
    off = torch.arange(bs, device=ids.device)
    tgt = g[bidx.unsqueeze(1), p.unsqueeze(1) + 1 + off]                # logits_i predicts token p+2+i
    anchor = ids[bidx, p + 1]
    prev = torch.cat([anchor.unsqueeze(1), tgt[:, :-1]], 1)
    dl, conf, _ = model.dspark_draft(ctx, bidx, p, anchor, prev_ids=prev, stats=stats, frozen_shared=True)
    ce = F.cross_entropy(dl.flatten(0, 1), tgt.flatten(), reduction="none").view(-1, bs)
    wts = HP["ds_decay"] ** off.float()
    hit = (dl.argmax(-1) == tgt).float()
    bce = F.binary_cross_entropy_with_logits(conf.float(), hit)
    return (ce.mean(0) * wts).sum() / wts.sum(), bce, hit.mean(0)


def update_bias(stats):
    with torch.no_grad():
        for moe, cnt in stats:
            load = cnt.float()
            moe.gate.bias += HP["bias_lr"] * torch.sign(load.mean() - load)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model-dir")
    ap.add_argument("--tokens")
    ap.add_argument("--minutes", type=float, default=7.0)
    ap.add_argument("--max-steps", type=int, default=100000)
    ap.add_argument("--ckpt", default="/tmp/ckpt.pt")
    ap.add_argument("--log", default="loss.csv")
    ap.add_argument("--smoke", action="store_true")
    ap.add_argument("--batch", type=int, default=None)
    ap.add_argument("--seq", type=int, default=None)
    a = ap.parse_args()
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    torch.manual_seed(HP["seed"])
    torch.backends.cuda.matmul.allow_tf32 = False
    if a.smoke:
        from make_config import build
        from dsv41_engram import engram_constants
        conf = build(512, 300, 511, [0, 0])
        tc = conf["text_config"]
        tc.update(hidden_size=64, moe_intermediate_size=64, q_lora_rank=64, o_lora_rank=64, engram_vocab_size=50,
                  sliding_window=16, index_topk=8, candidate_topk_blocks=2, candidate_block_size=4)
        cfg = Cfg.from_json(conf)
        consts = engram_constants(cfg, 300, 2)
        cfg.engram_num_embeddings = consts["num_embeddings"]
        hasher = EngramHasher([min(i, 299) for i in range(512)], consts, 4, 2)
        model = M.Transformer(cfg, hasher).to(dev)
        HP.update(seq=64, batch=2, ds_anchors=4, warmup=2)
        train_ids = torch.randint(0, 500, (20000,), dtype=torch.int32)
    else:
        model = load_model(a.model_dir, dev)
        cfg = model.cfg
        train_ids = torch.load(os.path.join(a.tokens, "train.pt"))
    if a.batch:
        HP["batch"] = a.batch
    if a.seq:
        HP["seq"] = a.seq
    init_weights(model)
    model.to(dev)
    train_ids = train_ids.to(dev).long()
    M.RT.exact, M.RT.wsim = False, True
    decay, no_decay = [], []
    for n, p in model.named_parameters():
        if not p.requires_grad:
            continue
        (decay if p.dim() == 2 and "embed" not in n and ".fn" not in n else no_decay).append(p)
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": HP["wd"]}, {"params": no_decay, "weight_decay": 0.0}],
                            lr=HP["lr"], betas=HP["betas"], **({"fused": True} if dev == "cuda" else {}))
    S, B = HP["seq"], HP["batch"]
    n_params = sum(p.numel() for p in model.parameters())
    print("params", n_params, "device", dev, "HP", HP, flush=True)
    HP["batch_used"] = B
    log = open(a.log, "w")
    log.write("step,seconds,tokens,lr,loss,ds_loss,ds_acc0,ds_acc_all,conf_bce,idx_kl\n")
    t0 = time.time()
    budget = a.minutes * 60
    total = a.max_steps
    step = 0
    while step < total:
        if step == 20:  # fix the schedule length from the measured speed
            per = (time.time() - t_start) / 15
            total = min(a.max_steps, int(20 + (budget - (time.time() - t0)) / per))
            print("sec/step %.3f -> total steps %d" % (per, total), flush=True)
        if step == 5:
            t_start = time.time()
        lr_t = HP["lr"] * min(1.0, (step + 1) / HP["warmup"])
        if step >= HP["warmup"] and total > HP["warmup"]:
            fr = min(1.0, (step - HP["warmup"]) / max(1, total - HP["warmup"]))
            lr_t = HP["lr"] * (HP["min_lr_frac"] + (1 - HP["min_lr_frac"]) * 0.5 * (1 + math.cos(math.pi * fr)))
        for gr in opt.param_groups:
            gr["lr"] = lr_t
        try:
            st = torch.randint(0, train_ids.numel() - S, (B,), device=dev)
            ids = train_ids[st.unsqueeze(1) + torch.arange(S - 1, device=dev)]
            ids = torch.cat([torch.zeros(B, 1, dtype=torch.long, device=dev), ids], 1)  # BOS + 511 tokens
            stats, aux = [], []
            logits, hidden = model(ids, stats=stats, aux=aux)
            loss = F.cross_entropy(logits[:, :-1].flatten(0, 1), ids[:, 1:].flatten())
            ds, bce, acc = dspark_loss(model, ids, hidden, logits, stats)
            idx = torch.stack(aux).mean() if aux else torch.zeros((), device=dev)
            tot = loss + HP["ds_weight"] * ds + HP["conf_weight"] * bce + HP["idx_weight"] * idx
            opt.zero_grad(set_to_none=True)
            tot.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), HP["clip"])
            opt.step()
        except torch.cuda.OutOfMemoryError:
            if step > 0 or B <= 8:
                raise
            B //= 2
            print("OOM at the first step: batch ->", B, flush=True)
            stats = aux = None
            opt.zero_grad(set_to_none=True)
            torch.cuda.empty_cache()
            continue
        update_bias(stats)
        HP["batch_used"] = B
        step += 1
        if step % 25 == 0 or step == total or step < 3:
            el = time.time() - t0
            row = (step, el, step * B * S, lr_t, loss.item(), ds.item(), acc[0].item(), acc.mean().item(), bce.item(), idx.item())
            log.write("%d,%.1f,%d,%.2e,%.4f,%.4f,%.4f,%.4f,%.4f,%.4f\n" % row)
            log.flush()
            print("step %d t=%.0fs tok=%d lr=%.2e loss=%.4f ds=%.4f acc0=%.3f acc=%.3f bce=%.3f idxkl=%.4f" % row, flush=True)
        if time.time() - t0 > budget + 30:
            print("time budget exceeded, stopping", flush=True)
            break
    torch.save({k: v.detach().cpu() for k, v in model.state_dict().items()}, a.ckpt)
    json.dump(dict(HP, steps=step, seconds=time.time() - t0), open(os.path.splitext(a.log)[0] + "_hp.json", "w"), indent=1)
    print("saved", a.ckpt, "steps", step, "seconds", time.time() - t0, flush=True)


if __name__ == "__main__":
    main()
