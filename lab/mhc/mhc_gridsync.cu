/*
 * lab/mhc/mhc_gridsync.cu (was src/ops/cuda/dic_mhc_gridsync.cu, variant 9 of lab/mhc/mhc_variants.cu) — the fused mHC transition (ops.h di_hc_transition, architecture.md §4.2) at M <= 2 as
 * one grid that synchronises twice, instead of handing the whole tail to its last CTA (k_transition2).
 *
 * Why: in the decode step the transition was ~12.5 µs, and 7.4 µs of it was the last CTA's serial tail
 * (bench/RESULTS.md timeline): load the partial mixes (2.0), collapse all d columns of the row from L2 (3.0),
 * the RMSNorm scale (0.8) and the xn stores (1.6), all on one SM. Here every column CTA keeps its own slice:
 *
 *   column CTA s < S (32 columns of the M rows, S = d / 32), 256 threads:
 *     A  expand its columns (k_transition2's phase A: R written back, bf16 values kept in shared memory,
 *        the double sum of their squares) — the pre of a V4.1 chain (pre_in) is read here too;
 *     B  the 24 partial mixes of its slice (k_transition2's phase B, CW = 32: the same lanes, the same
 *        fmaf chains, the same xor tree) and its sum of squares, to scratch;
 *   grid barrier 1 (S + 1 CTAs; in a V4.1 chain the column CTAs only arrive and skip C: their collapse takes
 *      the carried pre);
 *     C  every CTA adds all the partials in k_transition2's fixed order (the same lanes per output, the same
 *        xor trees: the same mixes bit for bit) and scales them; pre (sk_pre1) for the collapse;
 *     E  collapse of its own columns from the values already in shared memory (no R reload), x stored, the
 *        double sum of the squares of its bf16 x values (xor tree over the 32 columns) to scratch;
 *   grid barrier 2 (the S column CTAs);
 *     F  the row's double sum (S slices, fixed order), dic_rms_scale (k_rmsnorm's decision: the float mean it
 *        gives does not depend on the summation order except where the rounding is ambiguous, and there it
 *        re-sums x in the CPU's order), xn of its own columns;
 *   the Sinkhorn CTA (blockIdx.x == S): barrier 1, phase C, then the Sinkhorn (post, comb) on warps 0-1 while
 *     the other warps store the mixes, pre and the carried pre: off the collapse's chain (its outputs are
 *     read by the next transition's expand only).
 *
 * Bits: R, mixes, pre, post, comb, x and xn equal k_transition2's with 32 columns per CTA (variants 1, 2, 5,
 * 6, 7, 8), so a row's bits do not depend on M. Deterministic (no float atomics). Co-residency: every CTA
 * of the grid must be resident at once (the launcher checks the occupancy; a dependent launch cannot take
 * the SMs first, since PDL starts it only after every CTA of this grid has started). One launch at a time
 * per device (the two barrier words are module state): the engine's one stream serialises them.
 */
#include "ops/cuda/dic_mhc_int.cuh"
#include "mhc_lab.h"
#include "ops/cuda/dic_model.h"

#define GS_T 256   /* threads per CTA */
#define GS_CW 32   /* columns per column CTA */
#define GS_MAXM 2  /* rows per launch */
#define GS_MAXS 512 /* column CTAs: phase C's per-lane loads cover at most 16 L lanes x 32 */

static __device__ unsigned int g_gs_bar[2]; /* grid barriers 1 and 2: the top bit flips once per barrier */

/* Grid barrier over the first n CTAs (block 0 among them): arrival releases the CTA's stores (bar.sync
 * orders every thread's stores before thread 0's fence), the exit acquires every other CTA's. Block 0 adds
 * 2^31 - (n - 1), the others 1: when all n have arrived the top bit has flipped and the low bits are back. */
/* wait = 0: arrive only (the CTA needs nothing the others wrote; its stores before it are still released). */
static __device__ __forceinline__ void gs_grid_barrier(unsigned int *bar, unsigned int n, int wait = 1) {
    __syncthreads();
    if (threadIdx.x == 0) {
        const unsigned int nb = blockIdx.x == 0 ? 0x80000000u - (n - 1) : 1u;
        unsigned int old, cur;
        __threadfence();
        asm volatile("atom.add.release.gpu.u32 %0, [%1], %2;" : "=r"(old) : "l"(bar), "r"(nb) : "memory");
        if (wait) {
            do {
                asm volatile("ld.acquire.gpu.u32 %0, [%1];" : "=r"(cur) : "l"(bar) : "memory");
            } while (!((old ^ cur) & 0x80000000u));
            __threadfence();
        }
    }
    __syncthreads();
}

static __global__ void __launch_bounds__(GS_T, 2) k_transition_gs(const ht_args a, double *ssx) {
    constexpr int CW = GS_CW, LPM = 32, MPR = GS_T / LPM, NU = HT_NMIX / MPR, CV = CW / 4;
    __shared__ __align__(16) float sr[GS_MAXM][HC * CW];
    __shared__ float smix[GS_MAXM][HT_NMIX];
    __shared__ float spre[GS_MAXM][HC];
    __shared__ double sss[GS_T / 32];
    __shared__ float srs[GS_MAXM];
    const unsigned full = 0xFFFFFFFFu;
    const int t = threadIdx.x, lane = t & 31;
    const int S = (int)gridDim.x - 1, s = blockIdx.x;
    const int sink = s == S; /* the Sinkhorn CTA */
    const int d = a.d, hcd = HC * d, mt = a.M;
    const int i0 = s * CW;
    const int li = t % LPM, ng = t / LPM;
    const int chain = a.pre_in != NULL; /* a V4.1 chain collapses with the carried pre */
    /* before the wait: this slice of fn (k_transition2's register layout at CW = 32) and of the norm weights */
    float4 wv[NU] = {};
    float wn = 1.0f;
    if (!sink) {
#pragma unroll
        for (int u = 0; u < NU; u++)
            wv[u] = __ldg((const float4 *)(a.fn + (size_t)(u * MPR + ng) * hcd + (size_t)(li / CV) * d + i0 +
                                           4 * (li % CV)));
        if (a.norm_w && t < GS_MAXM * CW) wn = __ldg(a.norm_w + i0 + (t & 31));
    }
    DIC_PDL_ENTER();

    float pin = 0.0f; /* the carried pre of (row t / HC, k = t % HC), read before barrier 1 */
    if (chain && t < mt * HC) pin = a.pre_in[t];
    if (!sink) {
        /* A: thread = (row t / 32, column t % 32) */
        const int mm = t >> 5, c = t & 31;
        double ss = 0.0;
        if (mm < mt) {
            float rv[HC];
            ht_expand_col(a, mm, i0 + c, d, a.R + (size_t)mm * a.ldr, rv);
#pragma unroll
            for (int j = 0; j < HC; j++) {
                sr[mm][j * CW + c] = rv[j];
                const double v = rv[j];
                ss = __dadd_rn(ss, __dmul_rn(v, v));
            }
        }
        if (t < GS_MAXM * CW) {
#pragma unroll 1
            for (int o = 16; o > 0; o >>= 1) ss = __dadd_rn(ss, __shfl_xor_sync(full, ss, o));
            if (lane == 0) sss[t >> 5] = ss;
        }
        __syncthreads();
        DIC_STAMP_PHASE(321); /* block 0: expand done */
        if (t < mt) a.ssp[(size_t)t * S + s] = sss[t];
        /* B: partial mixes (k_transition2 phase B at CW = 32: one float4 per lane and mix) */
#pragma unroll 1
        for (int u = 0; u < NU; u++) {
            const int n = u * MPR + ng;
            float4 w4 = wv[0];
#pragma unroll
            for (int x = 1; x < NU; x++)
                if (x == u) w4 = wv[x];
#pragma unroll 1
            for (int mm2 = 0; mm2 < mt; mm2++) {
                const float4 r4 = *(const float4 *)&sr[mm2][(li / CV) * CW + 4 * (li % CV)];
                float acc = __fmul_rn(w4.x, r4.x);
                acc = fmaf(w4.y, r4.y, acc);
                acc = fmaf(w4.z, r4.z, acc);
                acc = fmaf(w4.w, r4.w, acc);
#pragma unroll 1
                for (int o = LPM / 2; o > 0; o >>= 1) acc = __fadd_rn(acc, __shfl_xor_sync(full, acc, o));
                if (li == 0) a.part[((size_t)mm2 * HT_NMIX + n) * S + s] = acc;
            }
        }
        DIC_STAMP_PHASE(322); /* block 0: partials issued */
    }
    /* grid barrier 1; in a chain the column CTAs only arrive (only the Sinkhorn CTA needs this site's mixes) */
    gs_grid_barrier(&g_gs_bar[0], (unsigned)S + 1u, sink || !chain);
    DIC_STAMP_PHASE(323); /* block 0: barrier 1 passed */

    /* C: k_transition2's phase C (the same lanes per output and the same trees: the same mixes) */
    if (sink || !chain) {
        double sv[8];
        const int sm = t >> 6, sl = t & 63;
        const int ns = (S - sl + 63) >> 6;
        {
            const double *ps = a.ssp + (size_t)sm * S + sl;
            const int nsl = sm < mt ? ns : 0;
#pragma unroll
            for (int c = 0; c < 8; c++) sv[c] = c < nsl ? __ldcg(ps + 64 * c) : 0.0;
        }
        const int lg = S <= 128 ? 3 : S <= 256 ? 4 : 5, L = 1 << lg, P = GS_T / L, nout = mt * HT_NMIX;
        const int ol = t >> lg, ll = t & (L - 1);
        const int nc = (S - ll + L - 1) >> lg;
        float x[16];
#pragma unroll 1
        for (int ob = -P; ob < nout; ob += P) {
            const int o = ob + ol, on = o + P;
            const int ncl = on < nout ? nc : 0;
            const float *pp = a.part + (size_t)on * S + ll;
            float xn[16];
#pragma unroll
            for (int c = 0; c < 16; c++) {
                xn[c] = c < ncl ? __ldcg(pp) : 0.0f;
                pp += L;
            }
            if (ob >= 0) {
                float v = 0.0f;
#pragma unroll
                for (int c = 0; c < 16; c++)
                    if (c < nc) v = __fadd_rn(v, x[c]);
#pragma unroll 1
                for (int o2 = L / 2; o2 > 0; o2 >>= 1) v = __fadd_rn(v, __shfl_xor_sync(full, v, o2));
                if (ll == 0 && o < nout) smix[o / HT_NMIX][o % HT_NMIX] = v;
            }
#pragma unroll
            for (int c = 0; c < 16; c++) x[c] = xn[c];
        }
        double v = 0.0;
#pragma unroll
        for (int c = 0; c < 8; c++)
            if (c < ns) v = __dadd_rn(v, sv[c]);
#pragma unroll 1
        for (int o = 16; o > 0; o >>= 1) v = __dadd_rn(v, __shfl_xor_sync(full, v, o));
        if (lane == 0) sss[t >> 5] = v;
        __syncthreads();
        if (t < mt) srs[t] = hc_mix_rs<1>(__dadd_rn(sss[2 * t], sss[2 * t + 1]), hcd, a.rms_eps);
        __syncthreads();
        if (t < mt * HT_NMIX) {
            const int mm = t / HT_NMIX, n = t % HT_NMIX;
            const float v2 = __fmul_rn(smix[mm][n], srs[mm]);
            smix[mm][n] = v2;
            if (sink) a.mixes[t] = v2;
        }
        __syncthreads();
    }
    DIC_STAMP_PHASE(324); /* block 0: mixes summed and scaled */

    if (sink) {
        if (t < 64) { /* D: Sinkhorn on warps 0-1 (16 lanes per row; surplus groups redo the last row) */
            const int g = t >> 4, mm = g < mt ? g : mt - 1;
            sk_group(t & 15, smix[mm], a.scale3, a.base, a.iters, a.hc_eps, g < mt, NULL,
                     a.post + (size_t)mm * HC, a.comb + (size_t)mm * HC * HC, 0);
            if (t == 0) DIC_STAMP_MARK(328); /* the Sinkhorn CTA: post / comb stores issued */
        } else if (t - 64 < mt * HC) { /* this site's pre; the chain carries it */
            const int te = t - 64, mm = te / HC, k = te % HC;
            const float p = sk_pre1(smix[mm], k, a.scale3[0], a.base, a.hc_eps);
            a.pre[te] = p;
            if (chain) a.pre_in[te] = p;
        }
        return;
    }

    /* E: pre of the collapse (this site's, or the carried one), then the collapse of this CTA's columns */
    if (t < mt * HC)
        spre[t / HC][t % HC] = chain ? pin : sk_pre1(smix[t / HC], t % HC, a.scale3[0], a.base, a.hc_eps);
    __syncthreads();
    const int mm = t >> 5, c = t & 31;
    float xf = 0.0f;
    if (t < GS_MAXM * CW) {
        double sq = 0.0;
        if (mm < mt) {
            const float p[HC] = {spre[mm][0], spre[mm][1], spre[mm][2], spre[mm][3]};
            const uint16_t b = dic_f32_to_bf16(collapse1(p, sr[mm][c], sr[mm][CW + c], sr[mm][2 * CW + c],
                                                         sr[mm][3 * CW + c]));
            a.xo[(size_t)mm * a.ldx + i0 + c] = b;
            xf = dic_bf16_to_f32(b);
            const double v = xf;
            sq = __dmul_rn(v, v);
        }
#pragma unroll 1
        for (int o = 16; o > 0; o >>= 1) sq = __dadd_rn(sq, __shfl_xor_sync(full, sq, o));
        if (lane == 0 && mm < mt) ssx[(size_t)mm * S + s] = sq;
    }
    DIC_STAMP_PHASE(325); /* block 0: collapse done */
    gs_grid_barrier(&g_gs_bar[1], (unsigned)S);
    DIC_STAMP_PHASE(326); /* block 0: barrier 2 passed */

    /* F: the row's sum of squares over the S slices (lane l: slices l, l + 32, ... in order, then a fixed
     * xor tree), k_rmsnorm's scale, xn of this CTA's columns */
    if (t < GS_MAXM * CW && mm < mt) {
        double v = 0.0;
        for (int j = lane; j < S; j += 32) v = __dadd_rn(v, __ldcg(ssx + (size_t)mm * S + j));
#pragma unroll 1
        for (int o = 16; o > 0; o >>= 1) v = __dadd_rn(v, __shfl_xor_sync(full, v, o));
        if (lane == 0) srs[mm] = dic_rms_scale<1>(v, a.xo + (size_t)mm * a.ldx, d, a.norm_eps);
    }
    __syncthreads();
    if (t < GS_MAXM * CW && mm < mt) {
        float y = __fmul_rn(xf, srs[mm]);
        if (a.norm_w) y = __fmul_rn(wn, y);
        a.xn[(size_t)mm * a.ldx + i0 + c] = dic_f32_to_bf16(y);
    }
    DIC_STAMP_PHASE(327); /* block 0: xn stored */
}


/* Launch at M <= GS_MAXM when the S + 1 CTAs fit on the device at once; else cudaErrorNotSupported (nothing
 * launched: the caller takes k_transition2). a.M = M rows from a.R / a.xo / ..., a.part and a.ssp as
 * k_transition2's (one tile); ssx: S doubles per row of scratch. */
cudaError_t lab_hc_transition_gs(const dic_ctx *c, const ht_args *a, double *ssx) {
    static int occ = -1;
    const int S = a->d / GS_CW;
    if (a->M < 1 || a->M > GS_MAXM || a->d % GS_CW || S > GS_MAXS || S < 2) return cudaErrorNotSupported;
    if (occ < 0) {
        if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&occ, k_transition_gs, GS_T, 0) != cudaSuccess) occ = 0;
        (void)cudaGetLastError();
    }
    if ((long)occ * c->num_sms < (long)S + 1) return cudaErrorNotSupported;
    DIC_LAUNCH(k_transition_gs, dim3((unsigned)S + 1u), GS_T, 0, c->stream, *a, ssx);
    return cudaGetLastError();
}
