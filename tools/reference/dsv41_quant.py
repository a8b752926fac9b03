"""Number formats and quantisation simulations of DeepSeek-V4.1 (architecture.md §2.2, §2.3, §3).

Pure torch (no float8 dtypes needed, so it also runs on old CPU torch). Every simulation returns
values that are exactly representable in bf16, and every one is wrapped in a straight-through
estimator (forward = quantised value, backward = identity) so the same code trains and infers.
"""
import torch

FP8_MAX = 448.0
FP4_MAX = 6.0
E2M1_VALUES = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0]


def ste(x, q):
    """Forward q exactly, gradient of identity w.r.t. x (x - x.detach() is exactly zero)."""
    return q.detach().to(x.dtype) + (x - x.detach())


def pow2_ceil_scale(amax, max_inv):
    """2^ceil(log2(amax * max_inv)) from the fp32 bit pattern (§3.2: exponent - 127 + (mantissa != 0))."""
    t = (amax.float() * torch.tensor(max_inv, dtype=torch.float32)).contiguous()
    bits = t.view(torch.int32)
    e = ((bits >> 23) & 0xFF) - 127 + ((bits & 0x7FFFFF) != 0).to(torch.int32)
    return ((e + 127) << 23).view(torch.float32)


def e4m3_round(x):
    """fp32 -> nearest OCP e4m3 value (RNE, saturating at +-448), returned as fp32."""
    x = x.float().clamp(-FP8_MAX, FP8_MAX)
    _, ex = torch.frexp(x)                       # x = m * 2^ex, |m| in [0.5, 1)
    e = torch.clamp(ex - 1, min=-6)              # unbiased exponent; below 2^-6 the grid is subnormal
    quantum = ((e - 3 + 127).to(torch.int32) << 23).view(torch.float32)  # exact 2^(e-3)
    return torch.round(x / quantum) * quantum    # torch.round = half to even; /quantum is exact


def e2m1_round(v):
    """fp32 in [-6, 6] -> nearest e2m1 value, ties to the even code (0.25->0, 0.75->1, 2.5->2, 5->4)."""
    a = v.abs()
    # magnitude grid and RNE: below 2 the step is 0.5, 2..4 step 1, 4..6 step 2
    r = torch.where(a < 2, torch.round(a * 2) / 2, torch.where(a < 4, torch.round(a), torch.round(a / 2) * 2))
    return torch.copysign(r.clamp(max=FP4_MAX), v)


def act_quant_sim(x, block=32):
    """Per-row blocks of `block` along the last dim, e8m0 scale, e4m3 values (§3.2). bf16 in/out."""
    shp = x.shape
    xg = x.float().reshape(*shp[:-1], shp[-1] // block, block)
    amax = xg.abs().amax(-1, keepdim=True).clamp_min(1e-4)
    s = pow2_ceil_scale(amax, 1.0 / FP8_MAX)
    q = (e4m3_round(xg / s) * s).reshape(shp)
    return ste(x, q.to(x.dtype))


def fp4_sim_e8m0(x, block=32):
    """FP4 round trip with e8m0 scales (index q/k, §3.5)."""
    shp = x.shape
    xg = x.float().reshape(*shp[:-1], shp[-1] // block, block)
    amax = xg.abs().amax(-1, keepdim=True).clamp_min(6 * 2.0 ** -126)
    s = pow2_ceil_scale(amax, 1.0 / FP4_MAX)
    q = (e2m1_round((xg / s).clamp(-FP4_MAX, FP4_MAX)) * s).reshape(shp)
    return ste(x, q.to(x.dtype))


def fp4_sim_e4m3(x, block=16):
    """FP4 round trip with e4m3 scales, blocks of 16 (compressed KV, §3.5)."""
    shp = x.shape
    xg = x.float().reshape(*shp[:-1], shp[-1] // block, block)
    amax = xg.abs().amax(-1, keepdim=True).clamp_min(6 * 2.0 ** -9)
    s = e4m3_round(amax / FP4_MAX)
    q = (e2m1_round((xg / s).clamp(-FP4_MAX, FP4_MAX)) * s).reshape(shp)
    return ste(x, q.to(x.dtype))


# ---- weights (fp32 master -> quantised values; codes + scales for export) ----

def fp8_weight_codes(w, block=32):
    """[out, in] -> (e4m3 values fp32 [out,in], pow2 scales fp32 [ceil(out/B), ceil(in/B)])."""
    o, i = w.shape
    po, pi = -o % block, -i % block
    wp = torch.nn.functional.pad(w.float(), (0, pi, 0, po))
    g = wp.reshape((o + po) // block, block, (i + pi) // block, block)
    amax = g.abs().amax(dim=(1, 3)).clamp_min(1e-4)
    s = pow2_ceil_scale(amax, 1.0 / FP8_MAX)
    q = e4m3_round(g / s[:, None, :, None]).reshape(o + po, i + pi)[:o, :i]
    return q, s


def fp8_weight_sim(w, block=32):
    q, s = fp8_weight_codes(w, block)
    sf = s.repeat_interleave(block, 0)[: w.shape[0]].repeat_interleave(block, 1)[:, : w.shape[1]]
    return ste(w, q * sf)


def fp4_weight_codes(w, block=32):
    """[out, in] -> (e2m1 values fp32, pow2 scales [out, in/32]) (FP4 experts, §2.3)."""
    o, i = w.shape
    g = w.float().reshape(o, i // block, block)
    amax = g.abs().amax(-1).clamp_min(1e-4)
    s = pow2_ceil_scale(amax, 1.0 / FP4_MAX)
    q = e2m1_round((g / s[..., None]).clamp(-FP4_MAX, FP4_MAX)).reshape(o, i)
    return q, s


def fp4_weight_sim(w, block=32):
    q, s = fp4_weight_codes(w, block)
    return ste(w, q * s.repeat_interleave(block, 1))


def rowblock_fp8_codes(w, block=32):
    """Engram table: e4m3 values with one e8m0 scale per row per `block` columns."""
    r, c = w.shape
    g = w.float().reshape(r, c // block, block)
    amax = g.abs().amax(-1).clamp_min(1e-4)
    s = pow2_ceil_scale(amax, 1.0 / FP8_MAX)
    return e4m3_round(g / s[..., None]).reshape(r, c), s


def rowblock_fp8_sim(w, block=32):
    q, s = rowblock_fp8_codes(w, block)
    return ste(w, q * s.repeat_interleave(block, 1))


# ---- byte codecs (release format) ----

def _e4m3_table():
    t = []
    for b in range(256):
        sgn = -1.0 if b & 0x80 else 1.0
        e, m = (b >> 3) & 0xF, b & 7
        if e == 0xF and m == 7:
            t.append(float("nan"))
        elif e == 0:
            t.append(sgn * m * 2.0 ** -9)
        else:
            t.append(sgn * (1 + m / 8) * 2.0 ** (e - 7))
    return torch.tensor(t, dtype=torch.float32)


E4M3_TABLE = _e4m3_table()
FP4_TABLE = torch.tensor(E2M1_VALUES + [-v for v in E2M1_VALUES], dtype=torch.float32)


def decode_e4m3(u8):
    return E4M3_TABLE.to(u8.device)[u8.long()]


def decode_e8m0(u8):
    return torch.pow(torch.tensor(2.0, dtype=torch.float64, device=u8.device), u8.double() - 127).float()


def decode_fp4(i8, scale_u8, block=32):
    """I8 [out, in/2] (element 2j in the low nibble) x e8m0 [out, in/32] -> fp32 [out, in]."""
    b = i8.view(torch.uint8).long() if i8.dtype == torch.int8 else i8.long()
    tab = FP4_TABLE.to(b.device)
    v = torch.stack([tab[b & 0xF], tab[b >> 4]], -1).flatten(-2)
    return v * decode_e8m0(scale_u8).repeat_interleave(block, -1)


def decode_fp8_block(w_u8, s_u8, block=32):
    o, i = w_u8.shape
    s = decode_e8m0(s_u8).repeat_interleave(block, 0)[:o].repeat_interleave(block, 1)[:, :i]
    return decode_e4m3(w_u8) * s


def encode_e4m3(v):
    """Exact e4m3 values (fp32) -> bytes. Values must already lie on the e4m3 grid."""
    tab = E4M3_TABLE.to(v.device)
    pos = tab[:127]  # codes 0..126 (0x7F is NaN), ascending
    idx = torch.searchsorted(pos, v.abs().float().contiguous())
    idx = idx.clamp(max=126)
    assert torch.equal(pos[idx], v.abs().float()), "value not on the e4m3 grid"
    return (idx | ((v < 0).long() << 7)).to(torch.uint8)


def encode_e8m0(s):
    _, ex = torch.frexp(s.float())
    b = ex - 1 + 127
    assert torch.equal(decode_e8m0(b.to(torch.uint8)), s.float())
    return b.to(torch.uint8)


def encode_fp4(q):
    """e2m1 values [out, in] -> uint8 [out, in/2] with element 2j in the low nibble."""
    mags = torch.tensor(E2M1_VALUES, device=q.device)
    code = torch.searchsorted(mags, q.abs().contiguous())
    assert torch.equal(mags[code], q.abs()), "value not on the e2m1 grid"
    code = code | ((q < 0).long() << 3)
    return (code[:, 0::2] | (code[:, 1::2] << 4)).to(torch.uint8)
