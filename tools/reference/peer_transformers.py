#!/usr/bin/env python3
"""peer_transformers.py — the peer for `deepinfer bench --dummy` (issue #6):
transformers' DeepseekV4ForCausalLM on a reduced-layer DeepSeek-V4-Flash
config (real dimensions, all 256 experts, random bf16 weights), on the GPU
machine (transformers 5.17, torch 2.11 there; nothing is downloaded).

For each batch size: prefill a random prompt of --prompt tokens, then time
--steps greedy decode steps through the model's KV cache; prints prefill
and decode tokens/s as JSON lines and a table. Each configuration runs under
a try/except so an out-of-memory or an unsupported path is reported, not
fatal. Run: python3 tools/reference/peer_transformers.py --layers 4 \
  --batch 1,8,32 --prompt 4096 --steps 8
"""
import argparse
import json
import sys
import time

import torch


def build(layers):
    from transformers import DeepseekV4Config, DeepseekV4ForCausalLM

    ratios = ([0, 0] + [4, 128] * 21)[:layers]  # V4-Flash's schedule, first `layers` layers
    cfg = DeepseekV4Config(
        num_hidden_layers=layers,
        compress_ratios=ratios,
        num_hash_layers=min(3, layers),
        rope_parameters={"rope_type": "yarn", "factor": 16.0, "beta_fast": 32, "beta_slow": 1,
                         "original_max_position_embeddings": 65536},
    )
    torch.manual_seed(0)
    torch.set_default_dtype(torch.bfloat16)
    with torch.device("cuda"):
        model = DeepseekV4ForCausalLM(cfg)
    model.eval()
    return cfg, model


def run_one(model, vocab, B, P, steps):
    ids = torch.randint(0, vocab, (B, P), device="cuda")
    with torch.no_grad():
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        out = model(input_ids=ids, use_cache=True)
        torch.cuda.synchronize()
        t_pre = time.perf_counter() - t0
        past = out.past_key_values
        nxt = out.logits[:, -1:].argmax(-1)
        out = model(input_ids=nxt, past_key_values=past, use_cache=True)  # warm-up step
        past, nxt = out.past_key_values, out.logits[:, -1:].argmax(-1)
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(steps):
            out = model(input_ids=nxt, past_key_values=past, use_cache=True)
            past, nxt = out.past_key_values, out.logits[:, -1:].argmax(-1)
        torch.cuda.synchronize()
        t_dec = (time.perf_counter() - t0) / steps
    return B * P / t_pre, t_dec, B / t_dec


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--batch", default="1,8,32")
    ap.add_argument("--prompt", type=int, default=4096)
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--budget-s", type=float, default=150.0, help="skip remaining configurations after this")
    a = ap.parse_args()
    import transformers

    t_start = time.perf_counter()
    cfg, model = build(a.layers)
    nparam = sum(p.numel() for p in model.parameters())
    print(f"# transformers {transformers.__version__}, torch {torch.__version__}, {torch.cuda.get_device_name()}; "
          f"DeepseekV4ForCausalLM, {a.layers} layers, {nparam / 1e9:.2f} B params bf16, "
          f"attn impl {getattr(cfg, '_attn_implementation', '?')}; built in {time.perf_counter() - t_start:.1f} s",
          flush=True)
    rows = []
    for B in [int(x) for x in a.batch.split(",")]:
        if time.perf_counter() - t_start > a.budget_s:
            print(f"# batch {B}: skipped (time budget)", flush=True)
            continue
        try:
            pre, step, tps = run_one(model, cfg.vocab_size, B, a.prompt, a.steps)
            r = {"batch": B, "prompt": a.prompt, "prefill_tok_s": round(pre, 1), "decode_step_ms": round(step * 1e3, 3),
                 "decode_tok_s": round(tps, 2)}
        except Exception as e:  # report OOM / unsupported paths and go on
            r = {"batch": B, "prompt": a.prompt, "error": f"{type(e).__name__}: {str(e)[:200]}"}
            torch.cuda.empty_cache()
        rows.append(r)
        print(json.dumps(r), flush=True)
    print("batch  prompt  prefill tok/s  decode ms/step  decode tok/s")
    for r in rows:
        if "error" in r:
            print(f"{r['batch']:5d}  {r['prompt']:6d}  {r['error']}")
        else:
            print(f"{r['batch']:5d}  {r['prompt']:6d}  {r['prefill_tok_s']:13.1f}  {r['decode_step_ms']:14.3f}  "
                  f"{r['decode_tok_s']:12.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
