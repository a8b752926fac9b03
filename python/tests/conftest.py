"""Shared fixtures: the package from this source tree, one CPU engine on the
embedded demo model for the whole session, the CLI next to the library."""
import json
import os
import subprocess
import sys

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(REPO, "python"))
# the tests are about the embedded demo model: the engine's default when no model is given
os.environ.pop("DEEPINFER_HF_MODEL_DIR", None)

from deepinfer import LLM  # noqa: E402

DEMO = os.path.join(REPO, "models", "deepinfer-demo-v41")
CLI = os.path.join(REPO, "build", "deepinfer")


@pytest.fixture(scope="session")
def llm():
    with LLM(accelerator="cpu") as engine:
        yield engine


def cli_generate(*args):
    """`deepinfer generate ... --output - --quiet` on the demo model; the JSON lines it prints."""
    r = subprocess.run([CLI, "generate", "--model", DEMO, "--accelerator", "cpu", "--quiet", "--output", "-", *args],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    lines = [json.loads(line) for line in r.stdout.splitlines() if line.strip()]
    return sorted(lines, key=lambda o: o.get("index", 0))  # written in finish order, with the prompt's index
