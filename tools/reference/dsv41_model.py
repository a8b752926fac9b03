"""DeepSeek-V4.1 text model + DSpark drafter in plain PyTorch (architecture.md §3, §5, §7.2).

One code path serves two uses:
  * exact inference (`RT.exact = True`): the reference rounding points (bf16 activations and
    residual, 32-wide activation quantisation before every FP8/FP4 linear, fp32 GEMM of the exact
    quantised values, blocked online-softmax attention with bf16 probabilities, BF16 indexer scores,
    fp32 router/head);
  * training (`RT.exact = False`): the same functions, with every quantisation simulation behind a
    straight-through estimator, bf16 GEMMs and a dense masked single-block softmax.
Parameters are fp32 "logical" weights named exactly like the release checkpoint (without `.scale`).
Sequences always start at position 0 (the prefill-consistent function; decode = recompute).
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

from dsv41_quant import act_quant_sim, fp4_sim_e4m3, fp4_sim_e8m0, fp4_weight_sim, fp8_weight_sim, rowblock_fp8_sim

BF = torch.bfloat16


class RT:
    exact = True       # reference numerics (see module doc)
    wsim = True        # fake-quantise weights (False when they were loaded already quantised)
    attn_block = 64    # online-softmax block of the reference sparse_attn kernel
    order = False      # exact-order mode (dsv41_exact.py): the engine's summation orders, CPU only


# ----------------------------------------------------------------------------- basic modules

class QLinear(nn.Module):
    """kind: fp8 (32x32 e8m0 blocks), fp4 (routed experts, 1x32 e8m0), bf16, f32 (bf16-stored,
    fp32 compute). FP8/FP4 linears quantise their input per 32-wide block first (§3.2)."""

    def __init__(self, fin, fout, kind):
        super().__init__()
        self.kind = kind
        self.weight = nn.Parameter(torch.empty(fout, fin))

    def w(self):
        w = self.weight
        if self.kind == "fp8":
            w = fp8_weight_sim(w) if RT.wsim else w
        elif self.kind == "fp4":
            w = fp4_weight_sim(w) if RT.wsim else w
        return w.to(BF)

    def forward(self, x):
        if self.kind == "f32":
            return F.linear(x.float(), self.w().float())
        w = self.w()
        if self.kind == "bf16":
            return F.linear(x.to(BF), w)
        xq = act_quant_sim(x.to(BF), 32)
        if RT.exact:
            return F.linear(xq.float(), w.float()).to(BF)
        return F.linear(xq, w)


class RMSNorm(nn.Module):
    def __init__(self, dim, eps):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        xf = x.float()
        y = xf * torch.rsqrt(xf.square().mean(-1, keepdim=True) + self.eps)
        return (self.weight.to(BF).float() * y).to(x.dtype)  # weight multiplied in fp32 before the cast (§3.4)


def rope(x, cos, sin, inverse=False):
    """Interleaved pairs on the last dims of x; cos/sin [S, rd/2] broadcast over heads (§4.3)."""
    xf = x.float().unflatten(-1, (-1, 2))
    a, b = xf[..., 0], xf[..., 1]
    if inverse:
        sin = -sin
    y = torch.stack([a * cos - b * sin, a * sin + b * cos], -1).flatten(-2)
    return y.to(x.dtype)


def rope_tail(x, cos, sin, rd, inverse=False):
    return torch.cat([x[..., :-rd], rope(x[..., -rd:], cos, sin, inverse)], -1)


def rope_table(freqs, positions):
    ang = torch.outer(positions.float(), freqs.to(positions.device))
    return torch.cos(ang), torch.sin(ang)


# ----------------------------------------------------------------------------- attention core

def attend(q, kv, sink, idx, scale):
    """Sparse single-KV-head attention (§3.6). q [N, M, H, d] bf16, kv [N, T, d] bf16 (K = V),
    idx [N, M, K] long into kv (-1 = none), sink [H]. Returns bf16 [N, M, H, d]."""
    N, M, H, d = q.shape
    K = idx.shape[-1]
    qf = q.float()
    if RT.exact:  # online softmax over blocks of 64 gathered rows, bf16 probabilities before P.V
        acc = torch.zeros(N, M, H, d, device=q.device)
        den = torch.zeros(N, M, H, device=q.device)
        mx = torch.full((N, M, H), -1e30, device=q.device)
        bidx = torch.arange(N, device=q.device).view(N, 1, 1)
        kvf = kv.float()
        for t in range(0, K, RT.attn_block):
            ii = idx[:, :, t:t + RT.attn_block]
            valid = ii >= 0
            blk = kvf[bidx, ii.clamp_min(0)] * valid.unsqueeze(-1)
            s = torch.einsum("nmhd,nmkd->nmhk", qf, blk)
            s = torch.where(valid.unsqueeze(2), s, torch.tensor(-math.inf, device=q.device)) * scale
            mprev, mx = mx, torch.maximum(mx, s.amax(-1))
            corr = torch.exp(mprev - mx)
            p = torch.exp(s - mx.unsqueeze(-1))
            den = den * corr + p.sum(-1)
            acc = acc * corr.unsqueeze(-1) + torch.einsum("nmhk,nmkd->nmhd", p.to(BF).float(), blk)
        den = den + torch.exp(sink.float() - mx)
        return (acc / den.unsqueeze(-1)).to(BF)
    # training: dense masked single-block softmax (same function up to bf16 rounding of p)
    allowed = torch.zeros(N, M, kv.shape[1] + 1, dtype=torch.bool, device=q.device)
    allowed.scatter_(2, torch.where(idx >= 0, idx, kv.shape[1]), True)
    allowed = allowed[..., :-1]
    kvf = kv.float()
    s_raw = torch.einsum("nmhd,ntd->nmht", qf, kvf) * scale
    s = s_raw.masked_fill(~allowed.unsqueeze(2), -math.inf)
    mx = torch.maximum(s.amax(-1), torch.tensor(-1e30, device=q.device)).detach()
    p = torch.exp(s - mx.unsqueeze(-1))
    den = p.sum(-1) + torch.exp(sink.float() - mx)
    o = torch.einsum("nmht,ntd->nmhd", p.to(BF).float(), kvf) / den.unsqueeze(-1)
    return o.to(BF), s_raw


def window_idx(S, W, device):
    """Window rows per query, oldest first: positions max(0, p-W+1)..p, -1 past p (as R41)."""
    end = torch.arange(S, device=device).unsqueeze(1)
    ii = (end - W + 1).clamp(0) + torch.arange(min(S, W), device=device)
    return torch.where(ii > end, -1, ii)


def select_candidate_blocks(score, clen, topk_blocks, bs):
    """Level one of the two-level top-k (§5.5). score [B, S, T] (-inf where invisible), clen [S, 1]."""
    T = score.shape[-1]
    sc = F.pad(score.float(), (0, -T % bs), value=-math.inf).unflatten(-1, (-1, bs)).amax(-1)
    nb = sc.shape[-1]
    last = (clen - 1) // bs
    sc = sc.masked_fill(torch.arange(nb, device=score.device) == last, math.inf)
    top = sc.topk(min(topk_blocks, nb), dim=-1)
    keep = torch.zeros_like(sc, dtype=torch.bool).scatter_(-1, top.indices, top.values > -math.inf)
    return keep.repeat_interleave(bs, dim=-1)[..., :T]


# ----------------------------------------------------------------------------- attention layer

class Compressor(nn.Module):
    """KV-source compressor (§5.3): ratio 2 = fp32 gated softmax pooling of token pairs, ratio 1 =
    plain bf16 projection. Returns the pre-RoPE latent rows [B, S//r, hd] (bf16)."""

    def __init__(self, cfg, ratio):
        super().__init__()
        self.ratio = ratio
        D, hd = cfg.hidden_size, cfg.head_dim
        self.wkv = QLinear(D, hd, "f32" if ratio > 1 else "bf16")
        if ratio > 1:
            self.wgate = QLinear(D, hd, "f32")
        self.norm = RMSNorm(hd, cfg.rms_norm_eps)

    def forward(self, x):
        r = self.ratio
        if r == 1:
            return self.norm(self.wkv(x))
        B, S, _ = x.shape
        n = S // r
        xf = x[:, :n * r].float()
        kv, sc = self.wkv(xf), self.wgate(xf)
        kv = (kv.unflatten(1, (n, r)) * sc.unflatten(1, (n, r)).softmax(dim=2)).sum(2)
        return self.norm(kv.to(BF))


class Indexer(nn.Module):
    def __init__(self, cfg, layer):
        super().__init__()
        self.owns_k = cfg.is_kv_source(layer)
        self.H, self.d = cfg.index_n_heads, cfg.index_head_dim
        self.wq_b = QLinear(cfg.q_lora_rank, self.H * self.d, "fp8")
        self.weights_proj = QLinear(cfg.hidden_size, self.H, "bf16")
        if self.owns_k:
            self.wk = QLinear(cfg.head_dim, self.d, "bf16")
            self.k_norm = RMSNorm(self.d, cfg.rms_norm_eps)


class Attention(nn.Module):
    def __init__(self, cfg, layer):
        super().__init__()
        self.cfg, self.layer = cfg, layer
        D, H, hd = cfg.hidden_size, cfg.num_attention_heads, cfg.head_dim
        self.H, self.hd, self.rd = H, hd, cfg.qk_rope_head_dim
        self.ratio = cfg.ratio(layer)
        self.attn_sink = nn.Parameter(torch.zeros(H))
        self.wq_a = QLinear(D, cfg.q_lora_rank, "fp8")
        self.q_norm = RMSNorm(cfg.q_lora_rank, cfg.rms_norm_eps)
        self.wq_b = QLinear(cfg.q_lora_rank, H * hd, "fp8")
        self.wkv = QLinear(D, hd, "fp8")
        self.kv_norm = RMSNorm(hd, cfg.rms_norm_eps)
        self.wo_a = QLinear(H * hd // cfg.o_groups, cfg.o_groups * cfg.o_lora_rank, "fp8")  # used as bf16 (§3.3)
        self.wo_b = QLinear(cfg.o_groups * cfg.o_lora_rank, D, "fp8")
        if cfg.is_kv_source(layer):
            self.compressor = Compressor(cfg, self.ratio)
        if cfg.is_index_source(layer):
            self.indexer = Indexer(cfg, layer)
        self.register_buffer("freqs", cfg.rope_freqs(layer), persistent=False)

    def out_proj(self, o, cos, sin):
        """Inverse RoPE on the output tail, grouped low-rank wo_a (bf16 einsum), wo_b (FP8)."""
        cfg = self.cfg
        o = rope_tail(o, cos.unsqueeze(-2), sin.unsqueeze(-2), self.rd, inverse=True)
        N, M = o.shape[:2]
        o = o.reshape(N, M, cfg.o_groups, -1)
        wo_a = self.wo_a.w().view(cfg.o_groups, cfg.o_lora_rank, -1)
        if RT.exact:
            z = torch.einsum("nmgd,grd->nmgr", o.float(), wo_a.float()).to(BF)
        else:
            z = torch.einsum("nmgd,grd->nmgr", o, wo_a)
        return self.wo_b(z.flatten(2))

    def indexer_scores(self, x, qr, cos, sin, shared, n_c, S):
        """BF16 index scores [B, S, n_c] with invisible rows at -inf (§5.4)."""
        ix = self.indexer
        B = x.shape[0]
        q = ix.wq_b(qr).unflatten(-1, (ix.H, ix.d))
        q = fp4_sim_e8m0(rope_tail(q, cos.unsqueeze(1), sin.unsqueeze(1), self.rd), 32)
        w = ix.weights_proj(x) * (ix.d ** -0.5 * ix.H ** -0.5)
        k = shared["index_k"]
        sc = torch.einsum("bshd,btd->bsht", q, k)
        sc = (sc.relu() * w.unsqueeze(-1)).sum(dim=2)
        clen = (torch.arange(1, S + 1, device=x.device) // self.ratio).unsqueeze(-1)
        sc = sc.masked_fill(torch.arange(n_c, device=x.device) >= clen, -math.inf)
        return sc, clen

    def forward(self, x, shared, aux):
        """x [B, S, D] bf16 = attn_norm(collapse(R)). shared: per-forward CSA2 runtime (§5.0)."""
        cfg = self.cfg
        B, S, _ = x.shape
        pos = torch.arange(S, device=x.device)
        cos, sin = rope_table(self.freqs, pos)
        qr = self.q_norm(self.wq_a(x))
        q = rope_tail(self.wq_b(qr).unflatten(-1, (self.H, self.hd)), cos.unsqueeze(1), sin.unsqueeze(1), self.rd)
        kv = act_quant_sim(rope_tail(self.kv_norm(self.wkv(x)), cos, sin, self.rd), 32)  # window KV FP8 QAT
        idx = window_idx(S, cfg.sliding_window, x.device).unsqueeze(0).expand(B, -1, -1)
        kv_all = kv
        r = self.ratio
        if r:
            n_c = S // r
            if cfg.is_kv_source(self.layer):
                latent = self.compressor(x) if n_c else None
                if n_c:
                    gp = torch.arange(n_c, device=x.device) * r      # row j is RoPE'd at position j*r
                    gcos, gsin = rope_table(self.freqs, gp)
                    if cfg.is_index_source(self.layer):  # index keys from the pre-RoPE latent (§5.4)
                        ix = self.indexer
                        lat_i = latent if RT.exact else latent.detach()
                        k = ix.k_norm(ix.wk(lat_i))
                        shared["index_k"] = fp4_sim_e8m0(rope_tail(k, gcos, gsin, self.rd), 32)
                    shared["ckv"] = fp4_sim_e4m3(rope_tail(latent, gcos, gsin, self.rd), 16)
            if cfg.is_index_source(self.layer):
                if n_c:
                    xi, qri = (x, qr) if RT.exact else (x.detach(), qr.detach())
                    sc, clen = self.indexer_scores(xi, qri, cos, sin, shared, n_c, S)
                    if cfg.is_candidate_source(self.layer):
                        shared["cand"] = select_candidate_blocks(sc, clen, cfg.candidate_topk_blocks, cfg.candidate_block_size)
                    elif cfg.uses_candidates(self.layer):
                        sc = sc.masked_fill(~shared["cand"], -math.inf)
                    kk = min(cfg.index_topk, n_c)
                    top = sc.float().topk(kk, dim=-1).indices.sort(-1).values
                    shared["topk"] = torch.where(top < clen, top, -1)
                    shared["iscore"] = sc
                else:
                    shared["topk"] = torch.full((B, S, 0), -1, dtype=torch.long, device=x.device)
                    shared.pop("iscore", None)
            if n_c:
                cidx = shared["topk"]
                idx = torch.cat([idx, torch.where(cidx >= 0, cidx + S, -1)], -1)
                kv_all = torch.cat([kv, shared["ckv"][:, :n_c]], 1)
        res = attend(q, kv_all, self.attn_sink, idx, self.hd ** -0.5)
        if RT.exact:
            o = res
        else:
            o, s = res
            if r and cfg.is_index_source(self.layer) and S // r and "iscore" in shared:
                aux.append(indexer_kl(s[..., S:].detach(), shared["iscore"], S, r))
        return self.out_proj(o, cos, sin)


def indexer_kl(s_c, iscore, S, r):
    """Training-only aux loss: KL(head-averaged attention over visible compressed rows || indexer
    softmax). Only the indexer's own parameters receive its gradient (inputs detached)."""
    vis = torch.isfinite(iscore)
    tgt = torch.softmax(s_c.masked_fill(~vis.unsqueeze(2), -math.inf).float(), -1)
    tgt = torch.nan_to_num(tgt).mean(2)
    logp = torch.log_softmax(iscore.float(), -1)
    kl = torch.where(vis, tgt * (torch.log(tgt.clamp_min(1e-20)) - logp), torch.zeros_like(tgt)).sum(-1)
    rows = vis.any(-1)
    return (kl * rows).sum() / rows.sum().clamp_min(1)


# ----------------------------------------------------------------------------- MoE

class Expert(nn.Module):
    def __init__(self, D, I, kind):
        super().__init__()
        self.w1, self.w2, self.w3 = QLinear(D, I, kind), QLinear(I, D, kind), QLinear(D, I, kind)


def swiglu(g, u, limit):
    g, u = g.float(), u.float()
    if limit > 0:  # up clamped both sides, gate from above only; shared expert too in V4.1 (§5.6)
        u = u.clamp(-limit, limit)
        g = g.clamp(max=limit)
    return F.silu(g) * u


class Gate(nn.Module):
    def __init__(self, D, E):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(E, D))
        self.bias = nn.Parameter(torch.zeros(E), requires_grad=False)   # selection only (noaux_tc)
        self.bias_vl = nn.Parameter(torch.zeros(E), requires_grad=False)  # image tokens only: unused


class MoE(nn.Module):
    def __init__(self, cfg, layer):
        super().__init__()
        self.cfg = cfg
        E, self.k = cfg.moe_shape(layer)
        D, I = cfg.hidden_size, cfg.moe_intermediate_size
        self.gate = Gate(D, E)
        self.experts = nn.ModuleList([Expert(D, I, "fp4") for _ in range(E)])
        self.shared_experts = Expert(D, I, "fp8")

    def route(self, x):
        cfg = self.cfg
        sc = F.linear(x.float(), self.gate.weight.to(BF).float()) / cfg.gate_temp
        sc = F.softplus(sc).sqrt()
        ind = (sc + self.gate.bias).topk(self.k, dim=-1).indices
        w = sc.gather(-1, ind)
        if cfg.norm_topk_prob and self.k > 1:
            w = w / (w.sum(-1, keepdim=True) + 1e-20)
        return w * cfg.routed_scaling_factor, ind

    def stacked(self, name):
        """[E, out, in] bf16 weights of all routed experts, FP4-simulated in one go (row blocks of 32)."""
        w = torch.stack([getattr(e, name).weight for e in self.experts])
        if RT.wsim:
            w = fp4_weight_sim(w.flatten(0, 1)).view(w.shape)
        return w.to(BF)

    def forward(self, x, stats=None):
        cfg = self.cfg
        shp = x.shape
        x = x.reshape(-1, shp[-1])
        w, ind = self.route(x)
        E = len(self.experts)
        if stats is not None:
            stats.append((self, torch.bincount(ind.flatten(), minlength=E).detach()))
        y = torch.zeros(x.shape, dtype=torch.float32, device=x.device)
        if RT.exact:
            for e in range(E):
                tok, slot = torch.where(ind == e)
                if tok.numel() == 0:
                    continue
                ex = self.experts[e]
                h = (swiglu(ex.w1(x[tok]), ex.w3(x[tok]), cfg.swiglu_limit) * w[tok, slot, None]).to(BF)
                y.index_add_(0, tok, ex.w2(h).float())
        else:  # dense over all experts, routing weight 0 where not selected (same function)
            wd = torch.zeros(x.shape[0], E, device=x.device).scatter(1, ind, w)
            xq = act_quant_sim(x.to(BF), 32)
            W1, W3, W2 = (self.stacked(n) for n in ("w1", "w3", "w2"))
            g = torch.einsum("td,eid->tei", xq, W1)
            u = torch.einsum("td,eid->tei", xq, W3)
            h = (swiglu(g, u, cfg.swiglu_limit) * wd.unsqueeze(-1)).to(BF)
            y = y + torch.einsum("tei,edi->td", act_quant_sim(h, 32), W2).float()
        se = self.shared_experts
        y = y + se.w2(swiglu(se.w1(x), se.w3(x), cfg.swiglu_limit).to(BF)).float()
        return y.to(BF).view(shp)


# ----------------------------------------------------------------------------- Engram

class EngramEmbed(nn.Module):
    def __init__(self, rows, dim):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(rows, dim))

    def forward(self, ids):
        t = rowblock_fp8_sim(self.weight) if RT.wsim else self.weight
        return F.embedding(ids, t).to(BF)


class Engram(nn.Module):
    """§5.8: n-gram hash lookup -> wkv -> per-copy key + shared value, per-copy sigmoid gate."""

    def __init__(self, cfg, slot):
        super().__init__()
        self.cfg = cfg
        D, hc = cfg.hidden_size, cfg.hc_mult
        ncol = (cfg.engram_max_ngram_size - 1) * cfg.engram_n_heads
        self.embed = EngramEmbed(cfg.engram_num_embeddings[slot], cfg.engram_head_dim)
        self.wkv = QLinear(ncol * cfg.engram_head_dim, D * (hc + 1), "fp8")
        self.q_weight = nn.Parameter(torch.ones(hc, D))
        self.k_weight = nn.Parameter(torch.ones(hc, D))

    def forward(self, R, ids):
        cfg = self.cfg
        D, hc = cfg.hidden_size, cfg.hc_mult
        kv = self.wkv(self.embed(ids).flatten(-2))
        key = kv[..., :hc * D].float().unflatten(-1, (hc, D))
        val = kv[..., hc * D:]
        wt = self.q_weight.to(BF).float() * self.k_weight.to(BF).float()
        h, eps = R.float(), cfg.rms_norm_eps
        rstd = torch.rsqrt(h.square().mean(-1) + eps) * torch.rsqrt(key.square().mean(-1) + eps)
        dot = (h * wt * key).sum(-1) * rstd * D ** -0.5
        gate = torch.sigmoid(torch.copysign(dot.abs().clamp_min(1e-6).sqrt(), dot))
        return (h + gate.unsqueeze(-1) * val.float().unsqueeze(-2)).to(R.dtype)


# ----------------------------------------------------------------------------- mHC block

class HC(nn.Module):
    """One mHC site's parameters (§4.2) and its mixes: (pre, post, Sinkhorn comb)."""

    def __init__(self, cfg):
        super().__init__()
        hc = cfg.hc_mult
        self.cfg = cfg
        self.fn = nn.Parameter(torch.zeros((2 + hc) * hc, hc * cfg.hidden_size))
        self.base = nn.Parameter(torch.zeros((2 + hc) * hc))
        self.scale = nn.Parameter(torch.ones(3))

    def mixes(self, R):
        cfg, hc = self.cfg, self.cfg.hc_mult
        xf = R.flatten(-2).float()
        m = F.linear(xf, self.fn) * torch.rsqrt(xf.square().mean(-1, keepdim=True) + cfg.rms_norm_eps)
        pre = torch.sigmoid(m[..., :hc] * self.scale[0] + self.base[:hc]) + cfg.hc_eps
        post = 2 * torch.sigmoid(m[..., hc:2 * hc] * self.scale[1] + self.base[hc:2 * hc])
        c = (m[..., 2 * hc:] * self.scale[2] + self.base[2 * hc:]).unflatten(-1, (hc, hc))
        c = torch.exp(c - c.amax(-1, keepdim=True).detach())
        c = c / c.sum(-1, keepdim=True) + cfg.hc_eps
        c = c / (c.sum(-2, keepdim=True) + cfg.hc_eps)
        for _ in range(cfg.hc_sinkhorn_iters - 1):
            c = c / (c.sum(-1, keepdim=True) + cfg.hc_eps)
            c = c / (c.sum(-2, keepdim=True) + cfg.hc_eps)
        return pre, post, c


def hc_pre(R, pre):
    return (pre.unsqueeze(-1) * R.float()).sum(-2).to(R.dtype)


def hc_post(f, R, post, comb):
    """R'[k] = post_k f + sum_j comb[j][k] R[j]  (comb used transposed, §11.4)."""
    y = post.unsqueeze(-1) * f.unsqueeze(-2).float() + (comb.unsqueeze(-1) * R.unsqueeze(-2).float()).sum(-3)
    return y.to(f.dtype)


class Block(nn.Module):
    def __init__(self, cfg, layer):
        super().__init__()
        self.layer = layer
        self.attn = DSparkAttention(cfg, layer) if layer >= cfg.n_layers else Attention(cfg, layer)
        self.ffn = MoE(cfg, layer)
        self.attn_norm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)
        self.ffn_norm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)
        self.hc_attn = HC(cfg)
        self.hc_ffn = HC(cfg)
        if layer in cfg.engram_layer_ids and layer < cfg.n_layers:
            self.engram = Engram(cfg, cfg.engram_layer_ids.index(layer))

    def forward(self, R, pre_in, attn_fn, stats=None):
        """Single-pass mHC (§5.1): attention collapses with the previous site's pre, FFN with the
        attention site's pre; returns (R'', f_pre)."""
        a_pre, a_post, a_comb = self.hc_attn.mixes(R)
        x = self.attn_norm(hc_pre(R, pre_in))
        R1 = hc_post(attn_fn(x), R, a_post, a_comb)
        f_pre, f_post, f_comb = self.hc_ffn.mixes(R1)
        y = self.ffn(self.ffn_norm(hc_pre(R1, a_pre)), stats)
        return hc_post(y, R1, f_post, f_comb), f_pre


# ----------------------------------------------------------------------------- DSpark

class DSparkAttention(Attention):
    """Stage attention (§7.2): block queries attend to the stage's context ring (kv of main_x at
    the target positions, base RoPE) and bidirectionally to the 5 block rows."""

    def ctx_kv(self, main_x, pos):
        cos, sin = rope_table(self.freqs, pos)
        return act_quant_sim(rope_tail(self.kv_norm(self.wkv(main_x)), cos, sin, self.rd), 32)

    def block_forward(self, x, ctx, ctx_valid, bpos):
        """x [N, bs, D] normed block stream; ctx [N, C, hd] ring rows (invalid rows masked by
        ctx_valid [N, C]); bpos [N, bs] block positions."""
        N, bs, _ = x.shape
        cos, sin = rope_table(self.freqs, bpos.flatten())
        cos, sin = cos.view(N, bs, -1), sin.view(N, bs, -1)
        qr = self.q_norm(self.wq_a(x))
        q = rope_tail(self.wq_b(qr).unflatten(-1, (self.H, self.hd)), cos.unsqueeze(2), sin.unsqueeze(2), self.rd)
        kv = act_quant_sim(rope_tail(self.kv_norm(self.wkv(x)), cos, sin, self.rd), 32)
        C = ctx.shape[1]
        kv_all = torch.cat([ctx, kv], 1)
        # reference index list: the valid ring slots (a prefix of the slots) then the block rows
        nv = ctx_valid.sum(-1, keepdim=True)
        j = torch.arange(C + bs, device=x.device).unsqueeze(0)
        idx = torch.where(j < nv, j, torch.where(j < nv + bs, C + j - nv, -1))
        res = attend(q, kv_all, self.attn_sink, idx.unsqueeze(1).expand(-1, bs, -1), self.hd ** -0.5)
        o = res if RT.exact else res[0]
        return self.out_proj(o, cos, sin)


class MarkovHead(nn.Module):
    def __init__(self, V, rank):
        super().__init__()
        self.embed = nn.Embedding(V, rank)
        self.head = QLinear(rank, V, "f32")

    def forward(self, ids):
        m = self.embed.weight.to(BF)[ids]
        return self.head(m), m


class ConfidenceHead(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.proj = QLinear(dim, 1, "f32")


class DSparkStage(Block):
    def __init__(self, cfg, layer):
        super().__init__(cfg, layer)
        stage = layer - cfg.n_layers
        D = cfg.hidden_size
        if stage == 0:
            self.main_proj = QLinear(D * len(cfg.dspark_target_layer_ids), D, "fp8")
            self.main_norm = RMSNorm(D, cfg.rms_norm_eps)
        if stage == cfg.num_nextn_predict_layers - 1:
            self.norm = RMSNorm(D, cfg.rms_norm_eps)
            self.markov_head = MarkovHead(cfg.vocab_size, cfg.dspark_markov_rank)
            self.confidence_head = ConfidenceHead(D + cfg.dspark_markov_rank)


# ----------------------------------------------------------------------------- model

class Transformer(nn.Module):
    def __init__(self, cfg, hasher=None):
        super().__init__()
        self.cfg = cfg
        self.hasher = hasher
        D, V = cfg.hidden_size, cfg.vocab_size
        self.embed = nn.Embedding(V, D)
        self.layers = nn.ModuleList([Block(cfg, l) for l in range(cfg.n_layers)])
        self.norm = RMSNorm(D, cfg.rms_norm_eps)
        self.head = QLinear(D, V, "f32")
        self.mtp = nn.ModuleList([DSparkStage(cfg, cfg.n_layers + i) for i in range(cfg.num_nextn_predict_layers)])

    def emb(self, ids):
        return self.embed.weight.to(BF)[ids]

    def forward(self, ids, stats=None, aux=None, want_hidden=True):
        """ids [B, S] from position 0 -> (fp32 logits [B, S, V], main_hidden [B, S, 3D] bf16)."""
        if RT.order:  # the target's logits in the C engine's pinned fp32 orders (no DSpark hiddens)
            import dsv41_exact
            return dsv41_exact.forward(self, ids), None
        cfg = self.cfg
        B, S = ids.shape
        hashes = self.hasher(ids) if (self.hasher is not None and cfg.engram_layer_ids) else None
        R = self.emb(ids).unsqueeze(2).expand(B, S, cfg.hc_mult, cfg.hidden_size).contiguous()
        pre = torch.zeros(B, S, cfg.hc_mult, device=ids.device)
        pre[..., 0] = 1.0
        shared, hidden = {}, []
        aux = [] if aux is None else aux
        for l, layer in enumerate(self.layers):
            if hasattr(layer, "engram"):
                R = layer.engram(R, hashes[:, :, cfg.engram_layer_ids.index(l)])
            if l in cfg.dspark_target_layer_ids:
                hidden.append(R.float().mean(2).to(BF))  # residual ENTERING the target layer, mean over copies
            R, pre = layer(R, pre, lambda x, a=layer.attn: a(x, shared, aux), stats)
        x = self.norm(hc_pre(R, pre))
        logits = self.head(x)
        return logits, (torch.cat(hidden, -1) if hidden else None)

    # ---- DSpark (§7.2) ----
    def dspark_main_x(self, main_hidden):
        m0 = self.mtp[0]
        return m0.main_norm(m0.main_proj(main_hidden))

    def dspark_ctx(self, main_x):
        """Per-stage context kv for every position [B, S, hd] (ring contents before slotting)."""
        S = main_x.shape[1]
        pos = torch.arange(S, device=main_x.device)
        return [st.attn.ctx_kv(main_x, pos) for st in self.mtp]

    def dspark_draft(self, ctx, bidx, anchor_pos, anchors, prev_ids=None, stats=None, frozen_shared=False):
        """Draft blocks for anchors at positions p = anchor_pos (target just processed p, anchor =
        token p+1). ctx: per-stage [B, S, hd]; bidx [N] batch row of each block. prev_ids [N, bs]
        teacher-forced Markov inputs (training) or None (greedy drafting). frozen_shared: no gradient
        into the main embedding / head (training the drafter must not change the target).
        Returns (logits [N, bs, V] after the Markov bias, confidence [N, bs], drafted ids [N, bs])."""
        cfg = self.cfg
        W, bs = cfg.sliding_window, cfg.dspark_block_size
        N = anchors.shape[0]
        dev = anchors.device
        # ring slots in the reference order: slot s holds the newest position q <= p with q % W == s
        slot = torch.arange(W, device=dev)
        p = anchor_pos.unsqueeze(1)
        q = p - ((p - slot) % W)
        valid = q >= 0
        ids = torch.full((N, bs), cfg.dspark_noise_token_id, dtype=torch.long, device=dev)
        ids[:, 0] = anchors
        E = self.embed.weight.detach() if frozen_shared else self.embed.weight
        R = E.to(BF)[ids].unsqueeze(2).expand(N, bs, cfg.hc_mult, cfg.hidden_size).contiguous()
        pre = torch.zeros(N, bs, cfg.hc_mult, device=dev)
        pre[..., 0] = 1.0
        bpos = anchor_pos.unsqueeze(1) + 1 + torch.arange(bs, device=dev)
        for st, c in zip(self.mtp, ctx):
            rows = c[bidx.unsqueeze(1), q.clamp_min(0)]
            R, pre = st(R, pre, lambda x, a=st.attn, rows=rows: a.block_forward(x, rows, valid, bpos), stats)
        last = self.mtp[-1]
        xh = hc_pre(R, pre)
        hw = self.head.weight.detach() if frozen_shared else self.head.weight
        U = F.linear(last.norm(xh).float(), hw.to(BF).float())
        if prev_ids is None:
            out, prev, ms, lg = [], anchors, [], []
            for i in range(bs):
                bias, m = last.markov_head(prev)
                li = U[:, i] + bias
                prev = li.argmax(-1)
                out.append(prev), ms.append(m), lg.append(li)
            logits, m, drafted = torch.stack(lg, 1), torch.stack(ms, 1), torch.stack(out, 1)
        else:
            bias, m = last.markov_head(prev_ids)
            logits = U + bias
            drafted = logits.argmax(-1)
        conf = last.confidence_head.proj(torch.cat([xh, m], -1)).squeeze(-1)
        return logits, conf, drafted
