"""examples/offline_inference.py runs from the source tree and prints the
completions generate() gives for its prompts and parameters."""
import ast
import os
import subprocess
import sys

from conftest import REPO
from deepinfer import SamplingParams


def test_offline_inference_example_prints_the_completions(llm):
    script = os.path.join(REPO, "examples", "offline_inference.py")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "DEEPINFER_HF_MODEL_DIR")}
    r = subprocess.run([sys.executable, script, "--max-tokens", "12", "--seed", "3"], cwd=REPO, env=env,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    prompts = [ast.literal_eval(l.split(":", 1)[1].strip()) for l in r.stdout.splitlines() if l.startswith("Prompt:")]
    texts = [ast.literal_eval(l.split(":", 1)[1].strip()) for l in r.stdout.splitlines() if l.startswith("Output:")]
    assert len(prompts) == len(texts) == 4 and all(texts)
    expect = llm.generate(prompts, SamplingParams(temperature=0.8, top_p=0.95, max_tokens=12, seq_seed=3))
    assert texts == [o.outputs[0].text for o in expect]
