#!/usr/bin/env python3
"""stamps_timeline.py — name the kernels of a DIC_STAMPS timeline (lab/README.md; a -DDIC_STAMPS build).

A timeline build (make BUILD=build-stamps NVCC_EXTRA=-DDIC_STAMPS cuda) run with
DEEPINFER_CUDA_STAMPS=FILE writes one line per stamp: index, enter / go times (µs), wait, grid, block and
the stamp's source site as HASH:LINE, where HASH is the low 16 bits of the FNV-1a hash of the source
file's base name (dic_common.cuh DIC_STAMP_SITE). This tool finds the file among the CUDA sources,
names the function around that line, and prints the stamps in order with the time from each kernel's
go to the next kernel's go (on one line of the step that is the kernel's cost on the critical path;
kernels of concurrent lines interleave, so read it with the grid sizes). Phase marks (grid 0) are
shown under their kernel with their tag.

usage: lab/tools/stamps_timeline.py STAMPS_FILE [--src DIR] [--from US] [--to US]
"""
import argparse
import os
import re
import sys

LB = re.compile(r'__launch_bounds__\s*\([^)]*\)')
FUNC = re.compile(r'^(?:template\s*<[^>]*>\s*)?(?:static\s+)?(?:__global__|__device__|__host__)[^(;]*?\b(\w+)\s*\(')


def fnv_base(path):
    h = 2166136261
    for ch in path:
        h = 2166136261 if ch == '/' else ((h ^ ord(ch)) * 16777619) & 0xFFFFFFFF
    return h & 0xFFFF


def source_index(src):
    files = {}
    for root, _, names in os.walk(src):
        for n in names:
            if n.endswith(('.cu', '.cuh', '.h')):
                files.setdefault(fnv_base(n), []).append(os.path.join(root, n))
    return files


def enclosing(path, line, cache):
    if path not in cache:
        with open(path, encoding='utf-8', errors='replace') as f:
            cache[path] = f.read().split('\n')
    lines = cache[path]
    for i in range(min(line, len(lines)) - 1, -1, -1):
        text = lines[i].strip()
        if not re.match(r'^(?:template\s*<[^>]*>\s*)?(?:static\s+)?(?:__global__|__device__|__host__)', text):
            continue
        text = LB.sub('', text + ' ' + (lines[i + 1].strip() if i + 1 < len(lines) else ''))
        m = FUNC.match(text)
        if m:
            return m.group(1)
    return '?'


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('stamps')
    ap.add_argument('--src', default=os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'src'))
    ap.add_argument('--from', dest='t0', type=float, default=-1e30)
    ap.add_argument('--to', dest='t1', type=float, default=1e30)
    a = ap.parse_args()
    files, cache = source_index(a.src), {}
    rows = []
    with open(a.stamps) as f:
        for ln in f:
            if ln.startswith('#') or not ln.strip():
                continue
            p = ln.split()
            if len(p) < 7:
                sys.exit('%s: no site column (a stamps file from before DIC_STAMP_SITE)' % a.stamps)
            h, line = p[6].split(':')
            cands = files.get(int(h, 16), [])
            name = '?'
            if len(cands) == 1:
                name = '%s (%s:%s)' % (enclosing(cands[0], int(line), cache), os.path.basename(cands[0]), line)
            elif cands:
                name = 'one of %s:%s' % ('/'.join(os.path.basename(c) for c in cands), line)
            rows.append((int(p[0]), float(p[1]), float(p[2]), float(p[3]), int(p[4]), int(p[5]), name))
    kern = [r for r in rows if r[4] > 0]
    nxt = {r[0]: (kern[j + 1][2] - r[2] if j + 1 < len(kern) else 0.0) for j, r in enumerate(kern)}
    print('%5s %9s %7s %6s %6s %5s  %s' % ('i', 'go_us', 'to_next', 'wait', 'grid', 'block', 'kernel (site)'))
    for r in rows:
        if not (a.t0 <= r[2] <= a.t1):
            continue
        if r[4] > 0:
            print('%5d %9.2f %7.2f %6.2f %6d %5d  %s' % (r[0], r[2], nxt[r[0]], r[3], r[4], r[5], r[6]))
        else:
            print('%5d %9.2f %7s %6s %6s %5s    mark %d in %s' % (r[0], r[2], '', '', '', '', r[5], r[6]))
    return 0


if __name__ == '__main__':
    sys.exit(main())
