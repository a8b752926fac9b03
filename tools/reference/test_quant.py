#!/usr/bin/env python3
"""Check the pure-torch number formats against torch's native float8 casts (torch >= 2.1) and the
e2m1 tie rules of architecture.md §3.5."""
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from dsv41_quant import E4M3_TABLE, e2m1_round, e4m3_round, pow2_ceil_scale  # noqa: E402


def main():
    ok = True
    x = torch.cat([torch.randn(200000) * 10 ** torch.empty(200000).uniform_(-4, 2.5), E4M3_TABLE[:127],
                   (E4M3_TABLE[:126] + E4M3_TABLE[1:127]) / 2])  # grid points and exact midpoints (ties)
    x = torch.cat([x, -x]).clamp(-448, 448)
    if hasattr(torch, "float8_e4m3fn"):
        ref = x.to(torch.float8_e4m3fn).float()
        bad = (ref != e4m3_round(x)).sum().item()
        print("e4m3 RNE vs torch.float8_e4m3fn mismatches:", bad)
        ok &= bad == 0
    ties = torch.tensor([0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0, 7.0, -0.25, -2.5])
    exp = torch.tensor([0.0, 1.0, 1.0, 2.0, 2.0, 4.0, 4.0, 6.0, -0.0, -2.0])
    print("e2m1 ties:", e2m1_round(ties.clamp(-6, 6)).tolist())
    ok &= torch.equal(e2m1_round(ties.clamp(-6, 6)), exp)
    a = torch.tensor([448.0, 449.0, 1e-4, 3.0])
    print("pow2 scales:", pow2_ceil_scale(a, 1 / 448).tolist())
    ok &= pow2_ceil_scale(a, 1 / 448).tolist()[:2] == [1.0, 2.0]
    print("quant tests", "PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
