"""Release-format checkpoint I/O (architecture.md §2): a small safetensors reader/writer of our own,
exact FP8/FP4/E8M0 decoding into the model's logical fp32 weights, and the export writer."""
import json
import os
import struct

import torch

import dsv41_model as M
from dsv41_quant import (decode_e4m3, decode_e8m0, decode_fp4, decode_fp8_block, encode_e4m3, encode_e8m0,
                         encode_fp4, fp4_weight_codes, fp8_weight_codes, rowblock_fp8_codes)

_DT = {"BF16": (torch.int16, 2), "F32": (torch.float32, 4), "F8_E4M3": (torch.uint8, 1), "F8_E8M0": (torch.uint8, 1),
       "I8": (torch.int8, 1), "I64": (torch.int64, 8), "U8": (torch.uint8, 1)}


def read_safetensors(path):
    """-> {name: (dtype string, tensor)}; BF16 is returned as float32 (exact), FP8 bytes as uint8."""
    raw = open(path, "rb").read()
    n = struct.unpack("<Q", raw[:8])[0]
    hdr = json.loads(raw[8:8 + n])
    out = {}
    for k, v in hdr.items():
        if k == "__metadata__":
            continue
        a, b = v["data_offsets"]
        tdt, _ = _DT[v["dtype"]]
        buf = bytearray(raw[8 + n + a:8 + n + b])
        t = torch.frombuffer(buf, dtype=tdt).clone() if b > a else torch.empty(0, dtype=tdt)
        if v["dtype"] == "BF16":
            t = (t.to(torch.int32) << 16).view(torch.float32)
        out[k] = (v["dtype"], t.reshape(v["shape"]))
    return out


def read_checkpoint(folder):
    idx = json.load(open(os.path.join(folder, "model.safetensors.index.json")))
    out = {}
    for f in sorted(set(idx["weight_map"].values())):
        out.update(read_safetensors(os.path.join(folder, f)))
    return out


def ckpt_name(param):
    return param.replace("hc_attn.", "hc_attn_").replace("hc_ffn.", "hc_ffn_")


def param_formats(model):
    """Model parameter name -> storage format in the release."""
    fm = {}
    for mname, mod in model.named_modules():
        pre = mname + "." if mname else ""
        if isinstance(mod, M.QLinear):
            fm[pre + "weight"] = {"fp8": "fp8", "fp4": "fp4"}.get(mod.kind, "bf16")
        elif isinstance(mod, (M.RMSNorm, torch.nn.Embedding)):
            fm[pre + "weight"] = "bf16"
        elif isinstance(mod, M.EngramEmbed):
            fm[pre + "weight"] = "engram"
        elif isinstance(mod, M.HC):
            for p in ("fn", "base", "scale"):
                fm[pre + p] = "f32"
        elif isinstance(mod, M.Gate):
            fm[pre + "weight"], fm[pre + "bias"], fm[pre + "bias_vl"] = "bf16", "f32", "f32"
        elif isinstance(mod, M.Engram):
            fm[pre + "q_weight"] = fm[pre + "k_weight"] = "bf16"
        elif isinstance(mod, M.Attention):
            fm[pre + "attn_sink"] = "f32"
    names = {n for n, _ in model.named_parameters()}
    assert names == set(fm), (names ^ set(fm))
    return fm


def load_into(model, folder):
    """Dequantise a release checkpoint exactly into the model. Returns (missing, unexpected)."""
    ck = read_checkpoint(folder)
    fm = param_formats(model)
    sd = model.state_dict()
    used, missing = set(), []
    for p, f in fm.items():
        c = ckpt_name(p)
        if c not in ck:
            missing.append(c)
            continue
        dt, t = ck[c]
        used.add(c)
        if dt == "F8_E4M3" and f == "engram":
            used.add(c[:-6] + "scale")
            s = ck[c[:-6] + "scale"][1]
            v = decode_e4m3(t) * decode_e8m0(s).repeat_interleave(t.shape[1] // s.shape[1], 1)
        elif dt == "F8_E4M3":
            used.add(c[:-6] + "scale")
            v = decode_fp8_block(t, ck[c[:-6] + "scale"][1])
        elif dt == "I8":
            used.add(c[:-6] + "scale")
            v = decode_fp4(t, ck[c[:-6] + "scale"][1])
        else:
            v = t.float()
        assert v.shape == sd[p].shape, (c, v.shape, sd[p].shape)
        sd[p].copy_(v)
    return missing, sorted(set(ck) - used)


def _bf16_bytes(t):
    b = t.detach().float().cpu().contiguous().view(torch.int32)
    r = ((b + 0x7FFF + ((b >> 16) & 1)) >> 16).to(torch.int16)  # round to nearest even
    return r.numpy().tobytes()


def export_tensors(model):
    """-> list of (ckpt name, dtype string, shape, bytes) in the release format."""
    fm = param_formats(model)
    params = dict(model.named_parameters())
    out = []
    for p, f in fm.items():
        w = params[p].detach().float().cpu()
        c = ckpt_name(p)
        if f == "fp8":
            q, s = fp8_weight_codes(w)
            out += [(c, "F8_E4M3", list(w.shape), encode_e4m3(q).numpy().tobytes()),
                    (c[:-6] + "scale", "F8_E8M0", list(s.shape), encode_e8m0(s).numpy().tobytes())]
        elif f == "fp4":
            q, s = fp4_weight_codes(w)
            out += [(c, "I8", [w.shape[0], w.shape[1] // 2], encode_fp4(q).numpy().tobytes()),
                    (c[:-6] + "scale", "F8_E8M0", list(s.shape), encode_e8m0(s).numpy().tobytes())]
        elif f == "engram":
            q, s = rowblock_fp8_codes(w)
            out += [(c, "F8_E4M3", list(w.shape), encode_e4m3(q).numpy().tobytes()),
                    (c[:-6] + "scale", "F8_E8M0", list(s.shape), encode_e8m0(s).numpy().tobytes())]
        elif f == "bf16":
            out.append((c, "BF16", list(w.shape), _bf16_bytes(w)))
        else:
            out.append((c, "F32", list(w.shape), w.contiguous().numpy().tobytes()))
    return out


def write_safetensors(path, tensors):
    hdr, off = {"__metadata__": {"format": "pt"}}, 0
    for name, dt, shape, data in tensors:
        hdr[name] = {"dtype": dt, "shape": shape, "data_offsets": [off, off + len(data)]}
        off += len(data)
    h = json.dumps(hdr, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h)
        for _, _, _, data in tensors:
            f.write(data)


def write_checkpoint(folder, tensors, n_shards=2):
    os.makedirs(folder, exist_ok=True)
    total = sum(len(t[3]) for t in tensors)
    shards, cur, acc = [[] for _ in range(n_shards)], 0, 0
    for t in tensors:  # contiguous split by bytes, in parameter order
        if acc > (cur + 1) * total / n_shards and cur < n_shards - 1:
            cur += 1
        shards[cur].append(t)
        acc += len(t[3])
    wmap = {}
    for i, sh in enumerate(shards):
        fn = "model-%05d-of-%05d.safetensors" % (i + 1, n_shards)
        write_safetensors(os.path.join(folder, fn), sh)
        wmap.update({t[0]: fn for t in sh})
    json.dump({"metadata": {"total_size": total}, "weight_map": dict(sorted(wmap.items()))},
              open(os.path.join(folder, "model.safetensors.index.json"), "w"), indent=2)
    return total
