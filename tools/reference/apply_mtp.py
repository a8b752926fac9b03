#!/usr/bin/env python3
"""Put new DSpark drafter tensors (mtp.*, release format, e.g. from distill_dspark.py) into a released
checkpoint IN PLACE, stdlib only: every mtp.* tensor must exist with the same dtype and shape, so
its bytes are overwritten at the same offsets; headers, the index and every non-mtp byte stay as
they were (checked after writing). Optionally refreshes the DSpark part of tests/data/demo.

usage: apply_mtp.py --model-dir models/NAME --mtp mtp.safetensors [--result result.json --manifest tests/data/demo/manifest.json]
"""
import argparse
import hashlib
import json
import os
import struct


def parse(raw):
    n = struct.unpack("<Q", raw[:8])[0]
    return json.loads(raw[8:8 + n]), 8 + n


def tensor_bytes(raw):
    hdr, base = parse(raw)
    return {k: raw[base + v["data_offsets"][0]:base + v["data_offsets"][1]] for k, v in hdr.items() if k != "__metadata__"}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model-dir", required=True)
    ap.add_argument("--mtp", required=True)
    ap.add_argument("--result", default=None)
    ap.add_argument("--manifest", default=None)
    a = ap.parse_args()
    new_raw = open(a.mtp, "rb").read()
    new_hdr, _ = parse(new_raw)
    new = tensor_bytes(new_raw)
    idx = json.load(open(os.path.join(a.model_dir, "model.safetensors.index.json")))["weight_map"]
    want = {k for k in idx if k.startswith("mtp.")}
    assert set(new) == want, ("tensor names differ", sorted(set(new) ^ want)[:10])
    changed = 0
    for shard in sorted({idx[k] for k in want}):
        path = os.path.join(a.model_dir, shard)
        raw = open(path, "rb").read()
        hdr, base = parse(raw)
        out = bytearray(raw)
        for k, v in hdr.items():
            if not k.startswith("mtp."):
                continue
            nv = new_hdr[k]
            assert nv["dtype"] == v["dtype"] and nv["shape"] == v["shape"], (k, nv, v)
            s, e = v["data_offsets"]
            assert len(new[k]) == e - s, k
            changed += new[k] != raw[base + s:base + e]
            out[base + s:base + e] = new[k]
        open(path, "wb").write(bytes(out))
        # check: same header, same non-mtp bytes, new mtp bytes
        after = open(path, "rb").read()
        assert parse(after)[0] == hdr and len(after) == len(raw)
        old_t, new_t = tensor_bytes(raw), tensor_bytes(after)
        assert all(old_t[k] == new_t[k] for k in old_t if not k.startswith("mtp.")), "non-mtp bytes changed"
        assert all(new_t[k] == new[k] for k in new_t if k.startswith("mtp.")), "mtp bytes not written"
        print(shard, "sha256", hashlib.sha256(after).hexdigest(), "non-mtp tensors identical:",
              sum(1 for k in old_t if not k.startswith("mtp.")))
    print("mtp tensors:", len(want), "changed:", changed)
    if a.result and a.manifest:
        res = json.load(open(a.result))
        d = res["demo_dspark_after"]
        man = json.load(open(a.manifest))
        assert d["anchors"] == man["dspark"]["anchors"], "demo anchors differ"
        man["dspark"]["drafted_ids"] = d["drafted_ids"]
        man["dspark"]["confidence"] = d["confidence"]
        man["dspark"]["generated_by"] = res.get("demo_generated_by", "tools/reference/distill_dspark.py")
        json.dump(man, open(a.manifest, "w"), indent=1)
        print("manifest dspark drafts refreshed")


if __name__ == "__main__":
    main()
