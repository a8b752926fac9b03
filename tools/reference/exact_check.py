#!/usr/bin/env python3
"""Exact-order mode (dsv41_exact.py) on the demo model, CPU only.

  exact_check.py vectors [--model-dir models/deepinfer-demo-v41] [--out tests/data/demo]
      the manifest's 64-token prompt: prefill logits of all 64 positions, 16 greedy decode steps
      (ids + logits); writes exact_prefill_logits.bin [64, V], exact_decode_logits.bin [16, V] (fp32
      LE) and exact.json (decode input/output ids) next to manifest.json.
  exact_check.py greedy --prompts FILE --steps 32 [--out results.json]
      greedy trajectories (ids) of the prompts in FILE (one JSON list of token-id lists).
  exact_check.py heldout [--n 8 --steps 32 --json FILE]
      the first n lines of the held-out split: engine (build/deepinfer score) vs exact-mode greedy.

Greedy decoding is computed as the prefill-consistent function (the model is causal: row t depends
on tokens <= t only), so a greedy trajectory of n steps is checked with ONE forward over prompt +
trajectory: every next token must be the argmax of its row ("teacher-forced greedy"); the script
extends the trajectory step by step and reruns only when a row's argmax disagrees.
"""
import argparse
import json
import os
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import dsv41_io as IO  # noqa: E402
import dsv41_model as M  # noqa: E402
from train import load_model  # noqa: E402

ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))


def load(model_dir):
    torch.set_grad_enabled(False)
    model = load_model(model_dir, "cpu")
    IO.load_into(model, model_dir)
    model.eval()
    M.RT.exact, M.RT.wsim, M.RT.order = True, False, True
    return model


def logits(model, ids):
    lg, _ = model(torch.tensor([ids]))
    return lg[0].float()


def greedy(model, prompt, steps, guess=None):
    """Greedy ids after `prompt` (steps tokens) and the logits of every row of prompt + ids[:steps-1].
    guess: a candidate trajectory (e.g. the engine's), verified by one forward; from the first row
    whose argmax differs, the trajectory is extended one forward per token."""
    P = len(prompt)
    traj = list(guess or [])[:steps]
    while True:
        n = min(len(traj), steps - 1)
        lg = logits(model, prompt + traj[:n])
        am = lg[P - 1:].argmax(-1).tolist()
        i = 0
        while i < n and am[i] == traj[i]:
            i += 1
        traj = traj[:i] + [am[i]]
        if i == n == steps - 1:
            return traj, lg


def cmd_vectors(a):
    model = load(a.model_dir)
    man = json.load(open(os.path.join(a.out, "manifest.json")))
    prompt = man["prompt_token_ids"]
    P, V = len(prompt), man["vocab_size"]
    t0 = time.time()
    out, full = greedy(model, prompt, 17, man["decode"]["input_tokens"] + [man["decode"]["output_tokens"][-1]])
    pre, dec = full[:P].contiguous(), full[P:P + 16].contiguous()
    open(os.path.join(a.out, "exact_prefill_logits.bin"), "wb").write(pre.numpy().tobytes())
    open(os.path.join(a.out, "exact_decode_logits.bin"), "wb").write(dec.numpy().tobytes())
    info = {"description": "exact-order mode (tools/reference/dsv41_exact.py, RT.order) on the exported weights, CPU",
            "files": {"exact_prefill_logits.bin": {"shape": [P, V], "dtype": "float32 little-endian",
                                                   "description": "logits of every prompt position"},
                      "exact_decode_logits.bin": {"shape": [16, V], "dtype": "float32 little-endian",
                                                  "description": "row i = logits at position prompt_len+i after feeding input_tokens[i]"}},
            "decode": {"first_token_from_prefill": out[0], "input_tokens": out[:16], "output_tokens": out[1:17],
                       "positions": list(range(P, P + 16)),
                       "rule": "input_tokens[0] = argmax(prefill last row); input_tokens[i+1] = output_tokens[i] = argmax(row i)"},
            "generated_by": "tools/reference/exact_check.py vectors (PyTorch %s, cpu)" % torch.__version__,
            "compare": "bitwise: every logit equal (tests/model/test_demo_exact.c)"}
    json.dump(info, open(os.path.join(a.out, "exact.json"), "w"), indent=1)
    print("prompt %d rows, decode 16 rows, greedy %s (%.1f s)" % (P, out, time.time() - t0))


def cmd_greedy(a):
    model = load(a.model_dir)
    prompts = json.load(open(a.prompts))
    guesses = json.load(open(a.guess)) if a.guess else [None] * len(prompts)
    res = []
    for p, g in zip(prompts, guesses):
        t0 = time.time()
        out, lg = greedy(model, p, a.steps, g)
        top2 = lg[len(p) - 1:].topk(2, -1).values
        res.append({"prompt": p, "greedy": out, "min_margin": float((top2[:, 0] - top2[:, 1]).min()),
                    "seconds": time.time() - t0})
        print(json.dumps(res[-1]), flush=True)
    json.dump(res, open(a.out, "w"), indent=1)


def cmd_heldout(a):
    """The first 8 non-empty lines of the held-out split (.data/text/test.txt, DATA.md), each
    BOS + its tokens (at most 48), 32 greedy steps: the engine's trajectory (deepinfer score) and
    exact mode's (verified by one forward when they agree)."""
    import subprocess
    lines = [ln.rstrip("\n") for ln in open(a.text, encoding="utf-8") if ln.strip()][:a.n]
    cli = os.path.join(ROOT, "build", "deepinfer")
    enc = subprocess.run([cli, "tokenize", "--tokenizer", os.path.join(a.model_dir, "tokenizer.json")],
                         input="\n".join(json.dumps(x) for x in lines) + "\n", capture_output=True, text=True,
                         check=True).stdout.splitlines()
    prompts = [[0] + [int(t) for t in e.split()][:48] for e in enc]
    model = load(a.model_dir)
    res = []
    for p in prompts:
        ids = "/tmp/exact_check_ids_%d.txt" % os.getpid()
        subprocess.run([cli, "score", "--model", a.model_dir, "--prompt-ids", ",".join(map(str, p)), "--steps",
                        str(a.steps), "--logits-out", "/dev/null", "--ids-out", ids], check=True, capture_output=True)
        eng = [int(x) for x in open(ids).read().split()]  # argmax of the last prompt row, then of each step
        os.unlink(ids)
        t0 = time.time()
        out, lg = greedy(model, p, a.steps, eng[:a.steps])
        top2 = lg[len(p) - 1:].topk(2, -1).values
        res.append({"prompt_ids": p, "engine": eng[:a.steps], "exact": out, "identical": out == eng[:a.steps],
                    "min_margin": float((top2[:, 0] - top2[:, 1]).min()), "seconds": round(time.time() - t0, 1)})
        print(json.dumps({k: v for k, v in res[-1].items() if k != "prompt_ids"}), flush=True)
    print("%d/%d trajectories identical" % (sum(r["identical"] for r in res), len(res)))
    if a.json:
        json.dump(res, open(a.json, "w"), indent=1)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("cmd", choices=["vectors", "greedy", "heldout"])
    ap.add_argument("--text", default=os.path.join(ROOT, ".data", "text", "test.txt"))
    ap.add_argument("--n", type=int, default=8)
    ap.add_argument("--json")
    ap.add_argument("--model-dir", default=os.path.join(ROOT, "models", "deepinfer-demo-v41"))
    ap.add_argument("--out", default=os.path.join(ROOT, "tests", "data", "demo"))
    ap.add_argument("--prompts")
    ap.add_argument("--guess")
    ap.add_argument("--steps", type=int, default=32)
    a = ap.parse_args()
    {"vectors": cmd_vectors, "greedy": cmd_greedy, "heldout": cmd_heldout}[a.cmd](a)


if __name__ == "__main__":
    main()
