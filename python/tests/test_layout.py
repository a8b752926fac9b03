"""The ctypes structs (python/deepinfer/_structs.py) against include/deepinfer.h:
a small C program compiled against the header prints every struct's size and
every field's offset, which must equal ctypes'."""
import ctypes
import os
import re
import shutil
import subprocess

import pytest

from conftest import REPO
from deepinfer import _structs as S


def test_struct_sizes_and_offsets_match_the_header(tmp_path):
    cc = shutil.which(os.environ.get("CC", "cc")) or shutil.which("gcc")
    assert cc, "a C compiler (build-essential) is needed to read the header's layout"
    lines = ['#include <stddef.h>', '#include <stdio.h>', '#include "deepinfer.h"', "int main(void) {"]
    expect = []
    for cls, cname in S.ALL:
        lines.append(f'    printf("{cname} %zu\\n", sizeof(struct {cname}));')
        expect.append(f"{cname} {ctypes.sizeof(cls)}")
        for field, _ in cls._fields_:
            lines.append(f'    printf("{cname}.{field} %zu\\n", offsetof(struct {cname}, {field}));')
            expect.append(f"{cname}.{field} {getattr(cls, field).offset}")
    lines += ["    return 0;", "}"]
    src, exe = tmp_path / "layout.c", tmp_path / "layout"
    src.write_text("\n".join(lines) + "\n")
    subprocess.run([cc, "-std=c11", "-Wall", "-Werror", "-I", os.path.join(REPO, "include"), str(src), "-o", str(exe)],
                   check=True, capture_output=True)
    got = subprocess.run([str(exe)], check=True, capture_output=True, text=True).stdout.split("\n")[:-1]
    assert got == expect


def test_every_header_field_is_mirrored():
    """A field added to the header but not here would still compile above: count the header's fields."""
    header = open(os.path.join(REPO, "include", "deepinfer.h")).read()
    for cls, cname in S.ALL:
        start = header.index(f"typedef struct {cname} {{")
        body = header[header.index("{", start) + 1:header.index(f"}} {cname};", start)]
        body = re.sub(r"/\*.*?\*/", "", body, flags=re.S)
        names = []
        for decl in body.split(";")[:-1]:  # "int a, b;" declares several; array bounds dropped
            decl = re.sub(r"\[[^\]]*\]", "", decl)
            names += [re.findall(r"\w+", part)[-1] for part in decl.split(",")]
        assert names == [f for f, _ in cls._fields_], cname


def test_init_fills_what_the_structs_cover():
    """_lib checked this at import; an exact restatement: init's defaults read back through ctypes."""
    from deepinfer._lib import lib
    p = S.SamplingParamsC()
    lib.deepinfer_sampling_params_init(ctypes.byref(p))
    assert (p.temperature, p.max_tokens, p.n, p.logprobs, p.skip_special_tokens, p.top_p) == (1.0, 16, 1, -1, 1, 1.0)
    c = S.EngineConfigC()
    lib.deepinfer_engine_config_init(ctypes.byref(c))
    assert (c.batch_invariant, c.async_scheduling, c.cuda_graphs, c.max_num_seqs) == (-1, -1, -1, 0)


@pytest.mark.parametrize("r, name", [(S.FINISH_STOP, "stop"), (S.FINISH_LENGTH, "length"), (S.FINISH_EOS, "eos"),
                                     (S.FINISH_ABORT, "abort"), (S.FINISH_ERROR, "error")])
def test_finish_reason_numbers(r, name):
    from deepinfer._lib import lib
    assert lib.deepinfer_finish_reason_name(r).decode() == name


def test_end_of_sequence_is_reported_as_stop_like_vllm():
    from deepinfer import outputs
    from deepinfer.llm import _finish_name
    c = S.CompletionC()
    c.finish_reason = S.FINISH_EOS
    c.stop_token = 1
    out = outputs._completion(c, _finish_name)
    assert out.finish_reason == "stop" and out.stop_reason is None
    c.finish_reason = S.FINISH_LENGTH
    assert outputs._completion(c, _finish_name).finish_reason == "length"
