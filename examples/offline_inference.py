#!/usr/bin/env python3
"""offline_inference.py — DeepInfer's / vLLM's offline example on deepinfer's
Python API: a few prompts, one SamplingParams, one generate call, the
completions printed.

    python3 examples/offline_inference.py [--model DIR|ORG/NAME] [--max-tokens N] [--seed S]

Without --model the engine picks its default model ($DEEPINFER_HF_MODEL_DIR,
else the embedded demo model models/deepinfer-demo-v41). Run it from a
source tree after ./build.sh; the package is python/deepinfer.
"""
import argparse
import os
import sys

try:
    from deepinfer import LLM, SamplingParams
except ImportError:  # not installed: the package in this source tree
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
    from deepinfer import LLM, SamplingParams


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default=None, help="model directory or ORG/NAME[@REV] (default: the engine's default)")
    ap.add_argument("--accelerator", default="auto", choices=["auto", "cpu", "cuda"])
    ap.add_argument("--max-tokens", type=int, default=32)
    ap.add_argument("--seed", type=int, default=0, help="seq_seed of every prompt (reproducible runs)")
    args = ap.parse_args()

    prompts = [
        "Hello, my name is",
        "The president of the United States is",
        "The capital of France is",
        "The future of AI is",
    ]
    sampling_params = SamplingParams(temperature=0.8, top_p=0.95, max_tokens=args.max_tokens, seq_seed=args.seed)

    with LLM(model=args.model, accelerator=args.accelerator) as llm:
        outputs = llm.generate(prompts, sampling_params)

    print("\nGenerated Outputs:\n" + "-" * 60)
    for output in outputs:
        print(f"Prompt:    {output.prompt!r}")
        print(f"Output:    {output.outputs[0].text!r}")
        print("-" * 60)


if __name__ == "__main__":
    main()
