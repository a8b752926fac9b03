/*
 * gemm.c — the GEMM driver: per-row activation quantisation (§3.2), row
 * chunking to the scratch size, static split of the output panels over the
 * thread pool, and the scalar reference kernel that defines the summation
 * order the vector kernels reproduce bit for bit.
 *
 * Batch invariance: a row's quantisation depends on that row only; an
 * output element is one fixed sequence of fp32 operations over K (ops.h), so
 * neither M, the row chunking, nor the panel split changes any result.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "io/numfmt.h"
#include "ops/cpu/gemm_kern.h"
#include "ops/cpu/gemm_layout.h"
#include "ops/cpu/cpu_ops.h"
#include "ops/ops.h"
#include "util/cpu.h"

/* e4m3 round-to-nearest-even of |v| <= 448 (already clamped), as fp32. */
static inline float round_e4m3(float v) {
    float a = fabsf(v), r;
    if (a < 0x1p-6f) {
        r = nearbyintf(a * 512.0f) * (1.0f / 512.0f); /* subnormal grid m * 2^-9 */
    } else {
        uint32_t u = di_f32_bits(a);
        u += 0x7FFFFu + ((u >> 20) & 1u); /* keep 3 mantissa bits, ties to even */
        u &= 0xFFF00000u;
        r = di_bits_f32(u);
    }
    return copysignf(r, v);
}

/* Quantise one row in blocks of `blk` (§3.2): q holds the e4m3 values as bf16
 * bit patterns (exact), s the power-of-two block scales. */
static void act_quant_row(const uint16_t *x, int K, int blk, uint16_t *q, float *s) {
    const float inv448 = (float)(1.0 / 448.0);
    for (int b = 0; b < K / blk; b++) {
        const uint16_t *xb = x + (size_t)b * blk;
        float amax = 0.0f;
        for (int i = 0; i < blk; i++) {
            float a = fabsf(di_bf16_to_f32(xb[i]));
            if (a > amax) amax = a;
        }
        if (!(amax >= 1e-4f)) amax = 1e-4f;
        float sc = di_pow2_ceil(amax * inv448);
        s[b] = sc;
        for (int i = 0; i < blk; i++) {
            float v = di_bf16_to_f32(xb[i]) / sc;
            if (v > 448.0f) v = 448.0f;
            if (v < -448.0f) v = -448.0f;
            q[(size_t)b * blk + i] = (uint16_t)(di_f32_bits(round_e4m3(v)) >> 16);
        }
    }
}

size_t di_gemm_scratch_per_row(int K) {
    size_t q = ((size_t)K * 2 + 63) & ~(size_t)63;
    size_t s = ((size_t)(K / 16 + 1) * 4 + 63) & ~(size_t)63;
    return q + s;
}

void di_gemm_store(const di_gemm_job *j, int m, int P, const float *v16) {
    int n0 = P * DI_PANEL, cnt = j->W->n - n0 < DI_PANEL ? j->W->n - n0 : DI_PANEL;
    if (j->C32) {
        memcpy(j->C32 + (size_t)m * j->ldc + n0, v16, (size_t)cnt * sizeof(float));
    } else {
        uint16_t *o = j->C16 + (size_t)m * j->ldc + n0;
        for (int l = 0; l < cnt; l++) o[l] = di_f32_to_bf16(v16[l]);
    }
}

/* ---- scalar reference kernel -------------------------------------------- */

/* Decoded weight element (without its scale) at (lane l, column k) of panel P. */
static inline float wval(const di_wmat *W, size_t P, int l, size_t k) {
    size_t K = (size_t)W->k;
    switch (W->fmt) {
    case DI_WFMT_BF16:
        return di_bf16_to_f32(((const uint16_t *)W->data)[(P * (K / 2) + k / 2) * 32 + 2 * (size_t)l + (k & 1)]);
    case DI_WFMT_F32: return ((const float *)W->data)[(P * K + k) * 16 + (size_t)l];
    case DI_WFMT_FP8:
        return di_e4m3_to_f32(((const uint8_t *)W->data)[(P * (K / 4) + k / 4) * 64 + (size_t)di_fp8_pos(l, (int)(k % 4))]);
    case DI_WFMT_FP4: {
        size_t p = k / 2;
        uint8_t b = ((const uint8_t *)W->data)[(P * (K / 8) + p / 4) * 64 + (size_t)di_fp4_pos(l, (int)(p % 4))];
        return di_e2m1_to_f32((k & 1) ? (uint8_t)(b >> 4) : (uint8_t)(b & 15));
    }
    }
    return 0.0f;
}

static inline float wscale(const di_wmat *W, size_t P, int l, size_t k) {
    size_t K = (size_t)W->k;
    if (W->fmt == DI_WFMT_FP8)
        return W->scale[(P * DI_PANEL / (size_t)W->wblock) * (K / (size_t)W->wblock) + k / (size_t)W->wblock];
    return W->scale[(P * (K / 32) + k / 32) * 16 + (size_t)l];
}

void di_gemm_panels_scalar(const di_gemm_job *j, int p0, int p1) {
    const di_wmat *W = j->W;
    size_t K = (size_t)W->k;
    float out[DI_PANEL];
    for (int P = p0; P < p1; P++) {
        for (int m = 0; m < j->M; m++) {
            const uint16_t *a = j->A + (size_t)m * j->lda;
            for (int l = 0; l < DI_PANEL; l++) {
                float c = 0.0f;
                if (W->fmt == DI_WFMT_F32) {
                    for (size_t k = 0; k < K; k++) c = fmaf(di_bf16_to_f32(a[k]), wval(W, (size_t)P, l, k), c);
                } else if (W->fmt == DI_WFMT_BF16) {
                    for (size_t k = 0; k < K; k += 2) {
                        c += di_bf16_to_f32(a[k + 1]) * wval(W, (size_t)P, l, k + 1);
                        c += di_bf16_to_f32(a[k]) * wval(W, (size_t)P, l, k);
                    }
                } else {
                    size_t kb = (size_t)j->kb;
                    for (size_t k0 = 0; k0 < K; k0 += kb) {
                        float acc = 0.0f;
                        for (size_t k = k0; k < k0 + kb; k += 2) {
                            acc += di_bf16_to_f32(a[k + 1]) * wval(W, (size_t)P, l, k + 1);
                            acc += di_bf16_to_f32(a[k]) * wval(W, (size_t)P, l, k);
                        }
                        float s = j->sA[(size_t)m * (size_t)j->nsa + k0 / (size_t)j->act_block] * wscale(W, (size_t)P, l, k0);
                        c += acc * s;
                    }
                }
                out[l] = c;
            }
            di_gemm_store(j, m, P, out);
        }
    }
}

/* ---- driver -------------------------------------------------------------- */

typedef void (*panel_fn)(const di_gemm_job *, int, int);

/* The panels of one or two jobs (same rows, one weight each) as one range. */
typedef struct par_ctx {
    const di_gemm_job *job[2];
    panel_fn fn;
    int np[2];
} par_ctx;

static void par_panels(void *p, int t, int n) {
    par_ctx *c = p;
    size_t b, e;
    di_split_range((size_t)(c->np[0] + c->np[1]), t, n, &b, &e);
    int np0 = c->np[0];
    if ((int)b < np0) c->fn(c->job[0], (int)b, (int)e < np0 ? (int)e : np0);
    if ((int)e > np0) c->fn(c->job[1], (int)b > np0 ? (int)b - np0 : 0, (int)e - np0);
}

typedef struct quant_ctx {
    const uint16_t *A;
    size_t lda;
    int M, K, blk;
    uint16_t *q;
    float *s;
    size_t qstride, sstride;
} quant_ctx;

static void par_quant(void *p, int t, int n) {
    quant_ctx *c = p;
    size_t b, e;
    di_split_range((size_t)c->M, t, n, &b, &e);
    if (di_cpu_isa() == DI_ISA_AVX512 && c->blk % 16 == 0) {
        if (b < e)
            di_act_quant_rows_avx512(c->A + b * c->lda, c->lda, (int)(e - b), c->K, c->blk, c->q + b * c->qstride,
                                     c->qstride, c->s + b * c->sstride, c->sstride);
        return;
    }
    for (size_t m = b; m < e; m++)
        act_quant_row(c->A + m * c->lda, c->K, c->blk, c->q + m * c->qstride, c->s + m * c->sstride);
}

static panel_fn pick_kernel(void) {
    di_isa isa = di_cpu_isa();
    if (isa == DI_ISA_AVX512 && di_cpu_has_avx512bf16() && di_cpu_has_avx512vbmi()) return di_gemm_panels_avx512;
    if (isa >= DI_ISA_AVX2) return di_gemm_panels_avx2;
    return di_gemm_panels_scalar;
}

static int threads_for(di_exec *x, double work, int items) {
    return di_chunks_for(x ? x->tp : NULL, work, (double)(1 << 18), items);
}

/* C = A W^T for nw (1 or 2) weights of one format and K, with A quantised once. */
static void gemm_n(di_exec *x, int M, const uint16_t *A, size_t lda, int nw, const di_wmat *const *W, int act_block,
                   float *const *C32, uint16_t *const *C16, size_t ldc) {
    if (M <= 0) return;
    panel_fn fn = pick_kernel();
    di_gemm_job job[2];
    par_ctx pc = {{&job[0], &job[1]}, fn, {0, 0}};
    double macs = 0;
    for (int w = 0; w < nw; w++) {
        job[w] = (di_gemm_job){.M = M, .A = A, .lda = lda, .W = W[w], .C32 = C32[w], .C16 = C16[w], .ldc = ldc,
                               .act_block = act_block};
        pc.np[w] = W[w]->npanels;
        macs += (double)W[w]->n * W[w]->k;
    }
    int quant = W[0]->fmt == DI_WFMT_FP8 || W[0]->fmt == DI_WFMT_FP4;
    if (!quant) {
        di_threadpool_run_n(x->tp, threads_for(x, M * macs, pc.np[0] + pc.np[1]), par_panels, &pc);
        return;
    }
    int K = W[0]->k;
    size_t qstride = ((size_t)K * 2 + 63) / 64 * 64 / 2;
    size_t sstride = (size_t)(K / act_block);
    size_t per_row = qstride * 2 + sstride * 4;
    int rows_fit = (int)(x->scratch_cap / per_row);
    if (rows_fit < 1) { /* contract violated (ops.h): make it visible rather than overrun the scratch */
        for (int w = 0; w < nw; w++)
            for (int m = 0; m < M; m++)
                for (int n = 0; n < W[w]->n; n++) {
                    if (C32[w]) C32[w][(size_t)m * ldc + n] = NAN;
                    else C16[w][(size_t)m * ldc + n] = 0x7FC0;
                }
        return;
    }
    for (int m0 = 0; m0 < M; m0 += rows_fit) {
        int mc = M - m0 < rows_fit ? M - m0 : rows_fit;
        uint16_t *q = (uint16_t *)x->scratch;
        float *s = (float *)(x->scratch + (size_t)mc * qstride * 2);
        quant_ctx qc = {A + (size_t)m0 * lda, lda, mc, K, act_block, q, s, qstride, sstride};
        di_threadpool_run_n(x->tp, threads_for(x, (double)mc * K * 64, mc), par_quant, &qc);
        di_gemm_job jc[2];
        par_ctx pq = {{&jc[0], &jc[1]}, fn, {pc.np[0], pc.np[1]}};
        for (int w = 0; w < nw; w++) {
            jc[w] = job[w];
            jc[w].kb = W[w]->fmt == DI_WFMT_FP8 ? (act_block < W[w]->wblock ? act_block : W[w]->wblock) : 32;
            jc[w].nsa = K / act_block;
            jc[w].M = mc;
            jc[w].A = q;
            jc[w].lda = qstride;
            jc[w].sA = s;
            if (C32[w]) jc[w].C32 = C32[w] + (size_t)m0 * ldc;
            else jc[w].C16 = C16[w] + (size_t)m0 * ldc;
        }
        di_threadpool_run_n(x->tp, threads_for(x, mc * macs, pq.np[0] + pq.np[1]), par_panels, &pq);
    }
}

void di_cpu_gemm(di_exec *x, int M, const uint16_t *A, size_t lda, const di_wmat *W, int act_block, float *C32,
                 uint16_t *C16, size_t ldc) {
    gemm_n(x, M, A, lda, 1, &W, act_block, &C32, &C16, ldc);
}

void di_cpu_gemm2(di_exec *x, int M, const uint16_t *A, size_t lda, const di_wmat *W1, const di_wmat *W2, int act_block,
                  float *C1_32, uint16_t *C1_16, float *C2_32, uint16_t *C2_16, size_t ldc) {
    const di_wmat *W[2] = {W1, W2};
    float *C32[2] = {C1_32, C2_32};
    uint16_t *C16[2] = {C1_16, C2_16};
    if (W1->fmt != W2->fmt || W1->k != W2->k || (W1->fmt == DI_WFMT_FP8 && W1->wblock != W2->wblock)) {
        gemm_n(x, M, A, lda, 1, &W[0], act_block, &C32[0], &C16[0], ldc);
        gemm_n(x, M, A, lda, 1, &W[1], act_block, &C32[1], &C16[1], ldc);
        return;
    }
    gemm_n(x, M, A, lda, 2, W, act_block, C32, C16, ldc);
}
