#!/usr/bin/env python3
"""ptx_kernels_diff.py — which kernels of a .cu file changed between two PTX dumps (lab/README.md).

A "same bits" refactor of src/ops/cuda (a switch hard-wired, a variant moved to lab/) must leave every
kept kernel's code as it was. Dump both sides without line info, e.g.
    nvcc -O3 -std=c++17 -fmad=false -gencode arch=compute_90a,code=compute_90a -Iinclude -Isrc -ptx F.cu -o F.new.ptx
(the same command in a checkout of the older commit for F.old.ptx), then
    lab/tools/ptx_kernels_diff.py F.old.ptx F.new.ptx
prints per .entry / .func: identical, differs, only before, only after. Compared after normalising what
does not change the code: basic-block label numbers, callseq comments, the per-file hash of
internal names, and shared variables demoted into a kernel once it is their only user.
"""
import re
import sys


INTERNAL = re.compile(r'_INTERNAL_(?:[0-9a-f]{8}_)?\d+_[A-Za-z0-9_]+?_cu_[0-9a-f]{8}')


def funcs(path):
    s = INTERNAL.sub('_INTERNAL_', open(path).read())
    out = {}
    for p in re.split(r'\n(?=(?:\.visible |\.weak |)?\.(?:entry|func) )', s):
        m = re.match(r'(?:\.visible |\.weak |)?\.(entry|func)\s+(?:\([^)]*\)\s*)?([A-Za-z0-9_$]+)', p)
        if m:
            out[m.group(2)] = p
    return out


def norm(body):
    body = re.sub(r'\$L__BB\d+_', '$L__BB_', body)
    body = re.sub(r'// callseq \d+', '// callseq', body)
    return [l for l in body.split('\n')
            if l.strip() and '// demoted variable' not in l and not re.match(r'\s*\.shared .*_ZZN\d+_INTERNAL', l)]


def main(argv):
    if len(argv) != 3:
        print(__doc__)
        return 2
    old, new = funcs(argv[1]), funcs(argv[2])
    rc = 0
    for k in sorted(set(old) | set(new)):
        if k not in new:
            print('only before  ', k)
        elif k not in old:
            print('only after   ', k)
            rc = 1
        elif norm(old[k]) == norm(new[k]):
            print('identical    ', k)
        else:
            print('DIFFERS      ', k)
            rc = 1
    return rc


if __name__ == '__main__':
    sys.exit(main(sys.argv))
