"""Where the package finds libdeepinfer.so: the source tree's build/, else an
installed prefix above the package (PREFIX/lib, where `make install` puts it)."""
import os
import shutil
import subprocess
import sys

from conftest import REPO
from deepinfer import _lib


def test_in_the_source_tree_it_loads_build_libdeepinfer():
    assert os.path.realpath(_lib.lib.path) == os.path.realpath(os.path.join(REPO, "build", "libdeepinfer.so"))


def test_installed_under_a_prefix_it_loads_prefix_lib(tmp_path):
    prefix = tmp_path / "prefix"
    site = prefix / "lib" / "python3" / "dist-packages"
    shutil.copytree(os.path.join(REPO, "python", "deepinfer"), site / "deepinfer",
                    ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(os.path.join(REPO, "build", "libdeepinfer.so"), prefix / "lib" / "libdeepinfer.so.0")
    code = ("import deepinfer, deepinfer._lib as l; from deepinfer import LLM, SamplingParams\n"
            "print(l.lib.path)\n"
            "with LLM(accelerator='cpu') as llm:\n"
            "    print(len(llm.generate('hi', SamplingParams(max_tokens=3))[0].outputs[0].token_ids))\n")
    env = {k: v for k, v in os.environ.items() if k != "DEEPINFER_HF_MODEL_DIR"}
    env["PYTHONPATH"] = str(site)
    r = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 0, r.stderr
    path, n = r.stdout.split()
    assert path == str(prefix / "lib" / "libdeepinfer.so.0") and n == "3"
