#!/usr/bin/env python3
"""Drafter-only self-distillation of the demo model's DSpark stages (issue 8, tau target).

The target (every non-mtp weight) stays frozen and byte-identical. Steps, each under a wall clock:
  1. held-out tau before: evaluate.py's protocol (8 test prompts of 64 tokens, 96 greedy target tokens,
     exact numerics, batch 8) and a larger set (32 other test prompts, same lengths);
  2. training data: greedy continuations (96 tokens) of many 32-token prompts from the TRAINING split,
     generated in one large batch with the training-mode forward (no KV cache: recompute); the batch
     is halved while the projected time exceeds the budget; a slice is held out as validation;
  3. DSpark-only training (stages, main_proj/main_norm, Markov head, confidence head; train.py's block
     objective: anchor = real token, targets = the target's argmax, Markov inputs teacher-forced,
     weights 0.8^i, + 0.2 confidence BCE) on those sequences (target hiddens precomputed), mixed with
     fresh corpus windows; tau on the validation generations every few seconds, best state kept,
     early stop when it stops improving;
  4. export of the best drafter in the release format (mtp.* tensors only), reload of exactly those
     bytes into the released target, held-out tau after (exact numerics), refreshed demo drafts.

usage: distill_dspark.py --model-dir models/NAME --data DIR(test.txt.xz, train_sample.txt.xz) --out DIR
"""
import argparse
import io
import json
import lzma
import math
import os
import sys
import time
import traceback

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import dsv41_io as IO  # noqa: E402
import dsv41_model as M  # noqa: E402
from evaluate import dspark_acceptance, greedy  # noqa: E402
from train import HP, load_model  # noqa: E402

T0 = time.time()


def el():
    return time.time() - T0


def log(*a):
    print("[%6.1fs]" % el(), *a, flush=True)


def sync():
    if torch.cuda.is_available():
        torch.cuda.synchronize()


def encode_text(tok, text):
    """As tokenize_data.py: one line (with its newline) at a time, concatenated."""
    lines = text.splitlines(keepends=True)
    ids = []
    for i in range(0, len(lines), 4096):
        for e in tok.encode_batch(lines[i:i + 4096], add_special_tokens=False):
            ids.extend(e.ids)
    return torch.tensor(ids, dtype=torch.long)


def read_xz_text(path):
    """Text as open(path, encoding='utf-8').read() would give it (universal newlines)."""
    return io.TextIOWrapper(io.BytesIO(lzma.decompress(open(path, "rb").read())), encoding="utf-8").read()


def prompts(stream, starts, P, dev):
    """BOS + (P-1) tokens at each start (evaluate.py's layout)."""
    pr = torch.stack([stream[int(s):int(s) + P - 1] for s in starts]).long().to(dev)
    return torch.cat([torch.zeros(pr.shape[0], 1, dtype=torch.long, device=dev), pr], 1)


@torch.no_grad()
def tau_fast(model, G, H, p0):
    """dspark_acceptance's rule, batched (current RT numerics): drafts at p = p0-1 .. L-bs-2."""
    bs = model.cfg.dspark_block_size
    B, L = G.shape
    dev = G.device
    ctx = model.dspark_ctx(model.dspark_main_x(H))
    ps = torch.arange(p0 - 1, L - bs - 1, device=dev)
    n = ps.numel()
    bidx = torch.arange(B, device=dev).repeat_interleave(n)
    pp = ps.repeat(B)
    _, _, drafted = model.dspark_draft(ctx, bidx, pp, G[bidx, pp + 1])
    off = torch.arange(bs, device=dev)
    truth = G[bidx.unsqueeze(1), pp.unsqueeze(1) + 2 + off]
    match = (drafted == truth).int().cumprod(1).sum(1).view(B, n).tolist()
    taus = []
    for row in match:
        p = 0
        while p < n:
            taus.append(row[p] + 1)
            p += row[p] + 1
    return sum(taus) / len(taus), len(taus)


def block_loss(model, ids, g, ctx, bidx, pp, stats):
    """train.py's DSpark objective for blocks at positions pp of rows bidx."""
    bs = model.cfg.dspark_block_size
    off = torch.arange(bs, device=ids.device)
    tgt = g[bidx.unsqueeze(1), pp.unsqueeze(1) + 1 + off]
    anchor = ids[bidx, pp + 1]
    prev = torch.cat([anchor.unsqueeze(1), tgt[:, :-1]], 1)
    dl, conf, _ = model.dspark_draft(ctx, bidx, pp, anchor, prev_ids=prev, stats=stats, frozen_shared=True)
    ce = F.cross_entropy(dl.flatten(0, 1).float(), tgt.flatten(), reduction="none").view(-1, bs)
    wts = HP["ds_decay"] ** off.float()
    hit = (dl.argmax(-1) == tgt).float()
    bce = F.binary_cross_entropy_with_logits(conf.float(), hit)
    return (ce.mean(0) * wts).sum() / wts.sum() + HP["conf_weight"] * bce, hit


@torch.no_grad()
def demo_drafts(model, man, dev):
    ids = torch.tensor([man["prompt_token_ids"] + man["decode"]["input_tokens"]], device=dev)
    _, hid = model(ids)
    ctx = model.dspark_ctx(model.dspark_main_x(hid))
    ps = torch.tensor(man["dspark"]["positions"], device=dev)
    _, conf, drafted = model.dspark_draft(ctx, torch.zeros_like(ps), ps, ids[0, ps + 1])
    return {"anchors": ids[0, ps + 1].tolist(), "drafted_ids": drafted.tolist(), "confidence": conf.float().tolist()}


def target_checksum(model):
    with torch.no_grad():
        return float(sum(p.double().abs().sum().item() for n, p in model.named_parameters() if not n.startswith("mtp.")))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model-dir", required=True)
    ap.add_argument("--data", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--deadline", type=float, default=320, help="whole script, seconds")
    ap.add_argument("--gen-seconds", type=float, default=85)
    ap.add_argument("--train-seconds", type=float, default=130)
    ap.add_argument("--n-prompts", type=int, default=2048)
    ap.add_argument("--min-prompts", type=int, default=384)
    ap.add_argument("--prompt-len", type=int, default=32)
    ap.add_argument("--gen", type=int, default=96)
    ap.add_argument("--lr", type=float, default=4e-4)
    ap.add_argument("--seqs-per-step", type=int, default=128)
    ap.add_argument("--anchors", type=int, default=24)
    ap.add_argument("--corpus-seqs", type=int, default=16)
    ap.add_argument("--corpus-len", type=int, default=256)
    ap.add_argument("--corpus-anchors", type=int, default=48)
    ap.add_argument("--corpus-weight", type=float, default=0.25)
    ap.add_argument("--val-every", type=float, default=12.0)
    ap.add_argument("--patience", type=int, default=4)
    ap.add_argument("--eval-gen", type=int, default=96, help="96 = evaluate.py's protocol (smaller only for smoke tests)")
    ap.add_argument("--eval-n32", type=int, default=32)
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    res = {"args": vars(a)}

    def save():
        res["elapsed_s"] = el()
        json.dump(res, open(os.path.join(a.out, "result.json"), "w"), indent=1)

    dev = "cuda" if torch.cuda.is_available() else "cpu"
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.manual_seed(4321)
    log("device", dev, torch.cuda.get_device_name(0) if dev == "cuda" else "", "torch", torch.__version__)

    # ---------------------------------------------------------------- setup (required)
    from tokenizers import Tokenizer
    tok = Tokenizer.from_file(os.path.join(a.model_dir, "tokenizer.json"))
    test = encode_text(tok, read_xz_text(os.path.join(a.data, "test.txt.xz")))
    train = encode_text(tok, read_xz_text(os.path.join(a.data, "train_sample.txt.xz")))
    log("tokens: test", test.numel(), "train sample", train.numel())
    model = load_model(a.model_dir, "cpu")
    missing, unexpected = IO.load_into(model, a.model_dir)
    res["load"] = {"missing": missing, "unexpected": unexpected}
    if missing or unexpected:
        log("WARNING load:", res["load"])
    model.to(dev).eval()
    res["target_checksum_before"] = target_checksum(model)
    demo_path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "../../tests/data/demo/manifest.json")
    man = json.load(open(demo_path)) if os.path.exists(demo_path) else None
    log("model loaded")

    # ---------------------------------------------------------------- 1. held-out tau before
    M.RT.exact, M.RT.wsim = True, False
    P, T = 64, a.eval_gen
    seqs8 = seqs32 = None
    try:
        t = time.time()
        starts8 = torch.linspace(0, test.numel() - 2 * P, 8).long()            # evaluate.py's prompts
        seqs8, _ = greedy(model, prompts(test, starts8, P, dev), T)
        res["before_8"] = dspark_acceptance(model, seqs8, P)
        res["gen8_s"] = time.time() - t
        log("held-out 8 before", res["before_8"], "(%.1fs)" % res["gen8_s"])
        save()
        if res["gen8_s"] < 40:
            t = time.time()
            n32 = a.eval_n32
            span = test.numel() - 2 * P
            starts32 = ((torch.arange(n32, dtype=torch.float64) + 0.5) * span / n32).long()  # between the 8
            seqs32, _ = greedy(model, prompts(test, starts32, P, dev), T)
            res["before_32"] = dspark_acceptance(model, seqs32, P)
            res["gen32_s"] = time.time() - t
            log("held-out 32 before", res["before_32"], "(%.1fs)" % res["gen32_s"])
        if man is not None:
            d = demo_drafts(model, man, dev)
            res["demo_before_matches_manifest"] = d["drafted_ids"] == man["dspark"]["drafted_ids"]
            log("demo drafts (before) match manifest:", res["demo_before_matches_manifest"])
    except Exception:
        res["error_before"] = traceback.format_exc()
        log(res["error_before"])
    save()

    # ---------------------------------------------------------------- 2. training generations
    M.RT.exact, M.RT.wsim = False, False   # weights already on the grid: fake-quant is the identity
    M.indexer_kl = lambda *args, **kw: None   # training-only aux loss of the target: not needed here
    G = None
    try:
        Pg = a.prompt_len + 1
        st = torch.randint(0, train.numel() - a.prompt_len - 1, (a.n_prompts,))
        ids = prompts(train, st, Pg, dev)
        t_g = time.time()
        budget = max(20.0, min(a.gen_seconds, 175 - el()))
        res["gen_budget_s"] = budget
        steps_done = 0
        with torch.no_grad():
            for step in range(a.gen):
                ts = time.time()
                lg, _ = model(ids)
                ids = torch.cat([ids, lg[:, -1].argmax(-1, keepdim=True)], 1)
                del lg
                sync()
                steps_done = step + 1
                dt = time.time() - ts
                spent = time.time() - t_g
                if step % 8 == 0:
                    log("gen step %d batch %d len %d dt %.3fs spent %.1fs" % (step, ids.shape[0], ids.shape[1], dt, spent))
                if spent > budget:
                    log("generation budget reached at step", step)
                    break
                rem = a.gen - 1 - step
                cur = ids.shape[1]
                est = dt * sum((cur + j) / cur for j in range(1, rem + 1))
                if step >= 2 and spent + est > budget and ids.shape[0] // 2 >= a.min_prompts:
                    ids = ids[:ids.shape[0] // 2]
                    log("projected %.0fs > budget: batch -> %d" % (spent + est, ids.shape[0]))
        G = ids
        if G.shape[1] < Pg + 24:
            raise RuntimeError("generations too short: %s" % (tuple(G.shape),))
        res["gen"] = {"seqs": G.shape[0], "len": G.shape[1], "steps": steps_done, "seconds": time.time() - t_g}
        log("generated", res["gen"])
        # target hiddens + argmax of every generated sequence (training numerics)
        Hs, gs = [], []
        with torch.no_grad():
            for i in range(0, G.shape[0], 256):
                lg, hd = model(G[i:i + 256])
                gs.append(lg.argmax(-1))
                Hs.append(hd)
                del lg
        Hs, gs = torch.cat(Hs), torch.cat(gs)
        gen_agree = (gs[:, Pg - 1:-1] == G[:, Pg:]).float().mean().item()
        res["gen"]["full_forward_argmax_agrees_with_generated"] = gen_agree
        N = G.shape[0]
        nval = max(1, min(128, N // 8))
        assert N - nval >= 1, "too few generations"
        Gtr, Htr, gtr = G[:N - nval], Hs[:N - nval], gs[:N - nval]
        Gv, Hv = G[N - nval:], Hs[N - nval:]
        res["gen"]["train_seqs"], res["gen"]["val_seqs"] = Gtr.shape[0], nval
        log("hiddens done; argmax agreement %.4f; train %d val %d" % (gen_agree, Gtr.shape[0], nval))
    except Exception:
        G = None
        res["error_gen"] = traceback.format_exc()
        log(res["error_gen"])
    save()

    # ---------------------------------------------------------------- 3. DSpark-only training
    best_sd, best_val, best_step, last_ok = None, None, 0, False
    curve = []
    try:
        if G is None:
            raise RuntimeError("no generations: training skipped")
        Pg = a.prompt_len + 1
        for p in model.parameters():
            p.requires_grad_(False)
        params = [p for n, p in model.mtp.named_parameters() if not n.endswith("bias") and not n.endswith("bias_vl")]
        for p in params:
            p.requires_grad_(True)
        res["trained_params"] = sum(p.numel() for p in params)
        opt = torch.optim.AdamW(params, lr=a.lr, betas=(0.9, 0.95), weight_decay=0.0)
        M.RT.exact, M.RT.wsim = False, True
        v0, nv0 = tau_fast(model, Gv, Hv, Pg)
        best_val, best_sd, best_step = v0, {k: v.detach().clone() for k, v in model.mtp.state_dict().items()}, 0
        curve.append({"step": 0, "t": round(el(), 1), "val_tau": v0, "val_steps": nv0})
        log("val tau before %.4f (%d verify steps)" % (v0, nv0))
        train_dev = train.to(dev)
        T_tr = min(a.train_seconds, a.deadline - 45 - el())
        res["train_budget_s"] = T_tr
        bs = model.cfg.dspark_block_size
        B, L = Gtr.shape
        S_c = a.corpus_len
        t_tr = time.time()
        t_val = t_tr
        step, bad = 0, 0
        while time.time() - t_tr < T_tr:
            fr = min(1.0, (time.time() - t_tr) / T_tr)
            lr_t = a.lr * min(1.0, (step + 1) / 20) * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * fr)))
            for gr in opt.param_groups:
                gr["lr"] = lr_t
            stats = []
            # target's own greedy generations
            M.RT.wsim = True
            sel = torch.randint(0, B, (a.seqs_per_step,), device=dev)
            ctx = model.dspark_ctx(model.dspark_main_x(Htr[sel]))
            K = a.anchors
            pp = torch.randint(16, L - bs - 1, (a.seqs_per_step, K), device=dev).flatten()
            bidx = torch.arange(a.seqs_per_step, device=dev).unsqueeze(1).expand(-1, K).flatten()
            l1, hit = block_loss(model, Gtr[sel], gtr[sel], ctx, bidx, pp, stats)
            loss = (1 - a.corpus_weight) * l1
            # fresh corpus windows (target forward without gradient)
            if a.corpus_weight > 0:
                with torch.no_grad():
                    M.RT.wsim = False
                    cs = torch.randint(0, train_dev.numel() - S_c, (a.corpus_seqs,), device=dev)
                    cid = train_dev[cs.unsqueeze(1) + torch.arange(S_c - 1, device=dev)]
                    cid = torch.cat([torch.zeros(a.corpus_seqs, 1, dtype=torch.long, device=dev), cid], 1)
                    clg, chid = model(cid)
                    cg = clg.argmax(-1)
                    del clg
                    M.RT.wsim = True
                cctx = model.dspark_ctx(model.dspark_main_x(chid))
                Kc = a.corpus_anchors
                cpp = torch.randint(0, S_c - bs - 1, (a.corpus_seqs, Kc), device=dev).flatten()
                cb = torch.arange(a.corpus_seqs, device=dev).unsqueeze(1).expand(-1, Kc).flatten()
                l2, _ = block_loss(model, cid, cg, cctx, cb, cpp, stats)
                loss = loss + a.corpus_weight * l2
            opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(params, 1.0)
            opt.step()
            with torch.no_grad():
                for moe, cnt in stats:
                    moe.gate.bias += HP["bias_lr"] * torch.sign(cnt.float().mean() - cnt.float())
            step += 1
            if step % 25 == 0 or step == 1:
                log("step %d lr %.2e loss %.4f acc0 %.3f acc %.3f" % (step, lr_t, loss.item(), hit[:, 0].mean().item(),
                                                                      hit.mean().item()))
            if time.time() - t_val > a.val_every or time.time() - t_tr >= T_tr:
                t_val = time.time()
                v, nv = tau_fast(model, Gv, Hv, Pg)
                curve.append({"step": step, "t": round(el(), 1), "val_tau": v, "val_steps": nv, "loss": loss.item(),
                              "lr": lr_t})
                if v > best_val:
                    best_val, best_step, bad = v, step, 0
                    best_sd = {k: x.detach().clone() for k, x in model.mtp.state_dict().items()}
                else:
                    bad += 1
                log("step %d val tau %.4f (best %.4f at step %d)" % (step, v, best_val, best_step))
                res["val_curve"] = curve
                save()
                if bad >= a.patience and len(curve) >= 4:
                    log("val tau stopped improving: early stop")
                    break
        last_ok = True
        res["train"] = {"steps": step, "seconds": time.time() - t_tr, "best_step": best_step, "best_val_tau": best_val,
                        "val_tau_before": v0}
        log("training done", res["train"])
    except Exception:
        res["error_train"] = traceback.format_exc()
        log(res["error_train"])
    res["val_curve"] = curve
    save()

    # ---------------------------------------------------------------- 4. export, reload, tau after
    try:
        if best_sd is None:
            raise RuntimeError("nothing trained")
        for p in model.parameters():
            p.requires_grad_(False)
        model.mtp.load_state_dict(best_sd)
        # release-format bytes of the drafter only (param_formats depends on module types, not on the prefix)
        wmap = json.load(open(os.path.join(a.model_dir, "model.safetensors.index.json")))["weight_map"]
        want = {k for k in wmap if k.startswith("mtp.")}
        try:
            tensors = [("mtp." + n, dt, sh, b) for n, dt, sh, b in IO.export_tensors(model.mtp)]
            assert {t[0] for t in tensors} == want, "mtp tensor names differ"
        except Exception:
            log("mtp-only export failed, full export:", traceback.format_exc())
            tensors = [t for t in IO.export_tensors(model) if t[0].startswith("mtp.")]
        assert {t[0] for t in tensors} == want, "mtp tensor names differ from the released index"
        IO.write_safetensors(os.path.join(a.out, "mtp.safetensors"), tensors)
        tmp = "/tmp/distill_mtp_ckpt"
        IO.write_checkpoint(tmp, tensors, 1)
        missing, unexpected = IO.load_into(model, tmp)   # exactly the exported bytes, decoded
        res["reload"] = {"n_mtp_tensors": len(tensors), "missing_mtp": [m for m in missing if m.startswith("mtp.")],
                         "unexpected": unexpected}
        assert not res["reload"]["missing_mtp"] and not unexpected, res["reload"]
        log("exported and reloaded %d mtp tensors" % len(tensors))
        M.RT.exact, M.RT.wsim = True, False
        res["target_checksum_after"] = target_checksum(model)
        res["target_unchanged"] = res["target_checksum_after"] == res["target_checksum_before"]
        if seqs8 is not None:
            res["after_8"] = dspark_acceptance(model, seqs8, P)
            log("held-out 8 after", res["after_8"])
        if seqs32 is not None:
            res["after_32"] = dspark_acceptance(model, seqs32, P)
            log("held-out 32 after", res["after_32"])
        save()
        if man is not None:
            res["demo_dspark_after"] = demo_drafts(model, man, dev)
            res["demo_generated_by"] = "tools/reference/distill_dspark.py (exact reference numerics, PyTorch %s, %s)" % (
                torch.__version__, dev)
    except Exception:
        res["error_export"] = traceback.format_exc()
        log(res["error_export"])
    save()
    s = {k: res[k]["tau_mean"] for k in ("before_8", "after_8", "before_32", "after_32") if k in res}
    log("SUMMARY tau", json.dumps(s), "train", json.dumps(res.get("train")), "total %.0fs" % el())


if __name__ == "__main__":
    try:
        main()
    except Exception:
        traceback.print_exc()
        sys.exit(1)
