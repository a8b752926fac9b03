#!/usr/bin/env python3
"""gen_tiny_checkpoint.py — write a tiny random DeepSeek-V4-Flash checkpoint in
the released format (architecture.md §2): config.json, two safetensors shards
and model.safetensors.index.json.

Python 3 standard library only. The output is a pure function of the
arguments (fixed seed, fixed tensor order), so regenerating gives the same
bytes. The default shape differs from the golden v4-tiny-a on purpose:
hidden 256, 3 layers (ratios 0, 4, 128) + MTP, 4 heads x 128, q_lora 128,
4 output groups x 64, 4 routed experts (top 2) x 128, vocab 384, window 16.

  FP8 linears   X.weight F8_E4M3 [out, in] + X.scale F8_E8M0 [ceil(out/128), ceil(in/128)]
  routed experts X.weight I8 [out, in/2] (e2m1, low nibble first) + X.scale F8_E8M0 [out, in/32]
  BF16 / F32 / I64 tensors as released (tid2eid in the hash layers)

Weights are N(0, 1/fan_in) in value (sublayer outputs damped x0.1, hc_fn
x0.3, as the golden generator's profile), so the random model stays finite.

usage: gen_tiny_checkpoint.py OUT_DIR [--seed N]
"""
import bisect
import json
import math
import os
import random
import struct
import sys

CFG = {
    "architectures": ["DeepseekV4ForCausalLM"],
    "model_type": "deepseek_v4",
    "vocab_size": 384,
    "hidden_size": 256,
    "num_hidden_layers": 3,
    "num_attention_heads": 4,
    "num_key_value_heads": 1,
    "head_dim": 128,
    "qk_rope_head_dim": 64,
    "q_lora_rank": 128,
    "o_lora_rank": 64,
    "o_groups": 4,
    "n_routed_experts": 4,
    "n_shared_experts": 1,
    "num_experts_per_tok": 2,
    "moe_intermediate_size": 128,
    "scoring_func": "sqrtsoftplus",
    "topk_method": "noaux_tc",
    "norm_topk_prob": True,
    "routed_scaling_factor": 1.5,
    "num_hash_layers": 1,
    "swiglu_limit": 10.0,
    "sliding_window": 16,
    "compress_ratios": [0, 4, 128, 0],
    "compress_rope_theta": 160000,
    "rope_theta": 10000,
    "rope_scaling": {"type": "yarn", "factor": 16, "beta_fast": 32, "beta_slow": 1,
                     "original_max_position_embeddings": 65536},
    "max_position_embeddings": 1048576,
    "index_n_heads": 2,
    "index_head_dim": 128,
    "index_topk": 4,
    "hc_mult": 4,
    "hc_sinkhorn_iters": 20,
    "hc_eps": 1e-06,
    "rms_norm_eps": 1e-06,
    "num_nextn_predict_layers": 1,
    "bos_token_id": 0,
    "eos_token_id": 1,
    "tie_word_embeddings": False,
    "torch_dtype": "bfloat16",
    "quantization_config": {"activation_scheme": "dynamic", "fmt": "e4m3", "quant_method": "fp8",
                            "scale_fmt": "ue8m0", "weight_block_size": [128, 128]},
}

BLOCK = 128

# ---- number formats ----------------------------------------------------------

def e4m3_value(b):
    e, m = (b >> 3) & 15, b & 7
    v = m * 2.0 ** -9 if e == 0 else (1 + m / 8) * 2.0 ** (e - 7)
    return -v if b & 0x80 else v

E4M3_VALS = [e4m3_value(b) for b in range(0x7F)]  # codes 0..126, increasing; 0x7F is NaN


def e4m3_encode(x):
    """Round to nearest e4m3, ties to the even code, saturating at 448."""
    a = min(abs(x), 448.0)
    hi = bisect.bisect_left(E4M3_VALS, a)
    if hi == 0:
        code = 0
    elif hi == len(E4M3_VALS):
        code = hi - 1
    else:
        lo = hi - 1
        dl, dh = a - E4M3_VALS[lo], E4M3_VALS[hi] - a
        code = lo if dl < dh or (dl == dh and lo % 2 == 0) else hi
    return code | (0x80 if x < 0 else 0)


E2M1 = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0]


def e2m1_encode(x):
    a = min(abs(x), 6.0)
    best = min(range(8), key=lambda c: (abs(E2M1[c] - a), c & 1))
    return best | (8 if x < 0 else 0)


def bf16_bits(x):
    u = struct.unpack("<I", struct.pack("<f", x))[0]
    u += 0x7FFF + ((u >> 16) & 1)
    return (u >> 16) & 0xFFFF


def pow2_exp(x):
    """ceil(log2(x)) for x > 0."""
    return math.ceil(math.log2(x)) if x > 0 else -126

# ---- tensor builders -----------------------------------------------------------

class Writer:
    def __init__(self, seed):
        self.rng = random.Random(seed)
        self.tensors = []  # (name, dtype, shape, bytes)

    def add(self, name, dtype, shape, data):
        self.tensors.append((name, dtype, list(shape), bytes(data)))

    def gauss(self, std):
        return self.rng.gauss(0.0, std)

    def bf16(self, name, shape, std=None, mean=0.0, const=None):
        n = math.prod(shape)
        vals = [const if const is not None else mean + self.gauss(std) for _ in range(n)]
        self.add(name, "BF16", shape, b"".join(struct.pack("<H", bf16_bits(v)) for v in vals))

    def f32(self, name, shape, std, mean=0.0):
        n = math.prod(shape)
        self.add(name, "F32", shape, struct.pack("<%df" % n, *[mean + self.gauss(std) for _ in range(n)]))

    def fp8_linear(self, name, out, inp, gain=1.0):
        std = gain / math.sqrt(inp)
        w = [[self.gauss(std) for _ in range(inp)] for _ in range(out)]
        sr, sc = (out + BLOCK - 1) // BLOCK, (inp + BLOCK - 1) // BLOCK
        scales = bytearray()
        exps = [[0] * sc for _ in range(sr)]
        for br in range(sr):
            for bc in range(sc):
                amax = max(abs(w[r][c]) for r in range(br * BLOCK, min(out, (br + 1) * BLOCK))
                           for c in range(bc * BLOCK, min(inp, (bc + 1) * BLOCK)))
                exps[br][bc] = pow2_exp(amax / 448.0)
                scales.append(exps[br][bc] + 127)
        q = bytearray()
        for r in range(out):
            for c in range(inp):
                q.append(e4m3_encode(w[r][c] / 2.0 ** exps[r // BLOCK][c // BLOCK]))
        self.add(name + ".weight", "F8_E4M3", [out, inp], q)
        self.add(name + ".scale", "F8_E8M0", [sr, sc], scales)

    def fp4_linear(self, name, out, inp, gain=1.0):
        std = gain / math.sqrt(inp)
        packed, scales = bytearray(), bytearray()
        for _ in range(out):
            row = [self.gauss(std) for _ in range(inp)]
            codes = []
            for g in range(inp // 32):
                blk = row[g * 32:(g + 1) * 32]
                e = pow2_exp(max(abs(v) for v in blk) / 6.0)
                scales.append(e + 127)
                codes += [e2m1_encode(v / 2.0 ** e) for v in blk]
            for j in range(0, inp, 2):
                packed.append(codes[j] | (codes[j + 1] << 4))
        self.add(name + ".weight", "I8", [out, inp // 2], packed)
        self.add(name + ".scale", "F8_E8M0", [out, inp // 32], scales)

# ---- the model -----------------------------------------------------------------

def hc_site(w, p, site, c):
    hc, d = c["hc_mult"], c["hidden_size"]
    mix = hc if site == "head" else (2 + hc) * hc
    w.f32(p + "hc_%s_fn" % site, [mix, hc * d], 0.3 / math.sqrt(hc * d))
    base = [w.gauss(0.5) for _ in range(mix)]
    if site != "head":
        for j in range(hc):
            base[2 * hc + j * hc + j] += 2.0
    w.add(p + "hc_%s_base" % site, "F32", [mix], struct.pack("<%df" % mix, *base))
    w.f32(p + "hc_%s_scale" % site, [1 if site == "head" else 3], 0.1, 1.0)


def block(w, p, c, ratio, hash_layer):
    d, H, hd = c["hidden_size"], c["num_attention_heads"], c["head_dim"]
    ql, G, R = c["q_lora_rank"], c["o_groups"], c["o_lora_rank"]
    E, I, ihd, ihn = c["n_routed_experts"], c["moe_intermediate_size"], c["index_head_dim"], c["index_n_heads"]
    hc_site(w, p, "attn", c)
    hc_site(w, p, "ffn", c)
    w.bf16(p + "attn_norm.weight", [d], 0.1, 1.0)
    w.bf16(p + "ffn_norm.weight", [d], 0.1, 1.0)
    w.f32(p + "attn.attn_sink", [H], 1.0)
    w.fp8_linear(p + "attn.wq_a", ql, d)
    w.bf16(p + "attn.q_norm.weight", [ql], 0.1, 1.0)
    w.fp8_linear(p + "attn.wq_b", H * hd, ql)
    w.fp8_linear(p + "attn.wkv", hd, d)
    w.bf16(p + "attn.kv_norm.weight", [hd], 0.1, 1.0)
    w.fp8_linear(p + "attn.wo_a", G * R, H * hd // G)
    w.fp8_linear(p + "attn.wo_b", d, G * R, 0.1)
    if ratio:
        k = 2 if ratio == 4 else 1
        w.f32(p + "attn.compressor.ape", [ratio, k * hd], 0.5)
        w.bf16(p + "attn.compressor.wkv.weight", [k * hd, d], 1 / math.sqrt(d))
        w.bf16(p + "attn.compressor.wgate.weight", [k * hd, d], 1 / math.sqrt(d))
        w.bf16(p + "attn.compressor.norm.weight", [hd], 0.1, 1.0)
        if ratio == 4:
            w.fp8_linear(p + "attn.indexer.wq_b", ihn * ihd, ql)
            w.bf16(p + "attn.indexer.weights_proj.weight", [ihn, d], 1 / math.sqrt(d))
            w.f32(p + "attn.indexer.compressor.ape", [ratio, 2 * ihd], 0.5)
            w.bf16(p + "attn.indexer.compressor.wkv.weight", [2 * ihd, d], 1 / math.sqrt(d))
            w.bf16(p + "attn.indexer.compressor.wgate.weight", [2 * ihd, d], 1 / math.sqrt(d))
            w.bf16(p + "attn.indexer.compressor.norm.weight", [ihd], 0.1, 1.0)
    w.bf16(p + "ffn.gate.weight", [E, d], 1 / math.sqrt(d))
    if hash_layer:
        k, V = c["num_experts_per_tok"], c["vocab_size"]
        ids = []
        for _ in range(V):
            ids += w.rng.sample(range(E), k)
        w.add(p + "ffn.gate.tid2eid", "I64", [V, k], struct.pack("<%dq" % len(ids), *ids))
    else:
        w.f32(p + "ffn.gate.bias", [E], 0.1)
    w.fp8_linear(p + "ffn.shared_experts.w1", I, d)
    w.fp8_linear(p + "ffn.shared_experts.w2", d, I, 0.1)
    w.fp8_linear(p + "ffn.shared_experts.w3", I, d)
    for e in range(E):
        w.fp4_linear(p + "ffn.experts.%d.w1" % e, I, d)
        w.fp4_linear(p + "ffn.experts.%d.w2" % e, d, I, 0.1)
        w.fp4_linear(p + "ffn.experts.%d.w3" % e, I, d)


def build(seed):
    c = CFG
    w = Writer(seed)
    d, V = c["hidden_size"], c["vocab_size"]
    w.bf16("embed.weight", [V, d], 1.0)
    w.bf16("head.weight", [V, d], 3.0 / math.sqrt(d))
    w.bf16("norm.weight", [d], 0.1, 1.0)
    hc_site(w, "", "head", c)
    L = c["num_hidden_layers"]
    for l in range(L):
        block(w, "layers.%d." % l, c, c["compress_ratios"][l], l < c["num_hash_layers"])
    p = "mtp.0."
    block(w, p, c, 0, False)
    w.fp8_linear(p + "e_proj", d, d)
    w.fp8_linear(p + "h_proj", d, d)
    for n in ("enorm", "hnorm", "norm"):
        w.bf16(p + n + ".weight", [d], 0.1, 1.0)
    hc_site(w, p, "head", c)
    return w


def write_shard(path, tensors):
    header, off = {"__metadata__": {"format": "pt"}}, 0
    for name, dtype, shape, data in tensors:
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [off, off + len(data)]}
        off += len(data)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for t in tensors:
            f.write(t[3])


def main(argv):
    if len(argv) < 2 or argv[1] in ("-h", "--help"):
        print(__doc__)
        return 0 if len(argv) >= 2 else 2
    out, seed = argv[1], 4242
    if len(argv) >= 4 and argv[2] == "--seed":
        seed = int(argv[3])
    os.makedirs(out, exist_ok=True)
    w = build(seed)
    half = len(w.tensors) // 2
    shards = [w.tensors[:half], w.tensors[half:]]
    names = ["model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"]
    weight_map, total = {}, 0
    for sname, ts in zip(names, shards):
        write_shard(os.path.join(out, sname), ts)
        for t in ts:
            weight_map[t[0]] = sname
            total += len(t[3])
    with open(os.path.join(out, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": total}, "weight_map": dict(sorted(weight_map.items()))}, f, indent=2)
        f.write("\n")
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(CFG, f, indent=2)
        f.write("\n")
    print("wrote %d tensors (%d bytes) to %s" % (len(w.tensors), total, out))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
