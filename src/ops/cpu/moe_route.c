/* moe_route.c — batched MoE routing, dispatch, gather and combine (ops.h
 * di_route_rows, di_route_gate, di_moe_dispatch, di_moe_gather, di_moe_combine). */
#include <math.h>
#include <string.h>

#include "ops/cpu/cpu_ops.h"
#include "ops/ops.h"

void di_cpu_route_rows(di_exec *x, int M, float *logits, int E, float temp, const float *bias, const int32_t *tid2eid,
                       const int32_t *tokens, int k, float route_scale, float norm_eps, int normalize, int *sel0,
                       float *w0) {
    (void)x;
    if (temp != 1.0f)
        for (size_t i = 0; i < (size_t)M * E; i++) logits[i] /= temp;
    for (int m = 0; m < M; m++) {
        const int *fixed = tid2eid ? tid2eid + (size_t)tokens[m] * k : NULL;
        const float *l = logits + (size_t)m * E;
        int *sel = sel0 + (size_t)m * k;
        float *w = w0 + (size_t)m * k;
        di_route(l, E, bias, fixed, k, route_scale, norm_eps, sel, w);
        if (!normalize) /* the unnormalised scores: sqrt(softplus(l)) * route_scale, as di_route computes them */
            for (int i = 0; i < k; i++) {
                float z = l[sel[i]];
                w[i] = sqrtf(z > 20.0f ? z : log1pf(expf(z))) * route_scale;
            }
    }
}

void di_cpu_moe_dispatch(di_exec *x, int M, int k, const int *sel, int E, int *off, int *rows, int *inv) {
    (void)x;
    int n = M * k;
    memset(off, 0, sizeof(int) * (size_t)(E + 1));
    for (int i = 0; i < n; i++) off[sel[i] + 1]++;
    for (int e = 0; e < E; e++) off[e + 1] += off[e];
    /* a stable counting sort: entries in increasing (token, slot) within an expert */
    for (int e = E; e > 0; e--) off[e] = off[e - 1];
    off[0] = 0;
    for (int i = 0; i < n; i++) {
        int at = off[sel[i] + 1]++;
        rows[at] = i;
        inv[i] = at;
    }
}

void di_cpu_moe_gather(di_exec *x, int n_max, const int *off, int E, const int *rows, int k, const uint16_t *xn,
                       size_t ldx, int d, const float *rw, uint16_t *xe, size_t lde, float *erw) {
    (void)x;
    int n = off[E];
    if (n > n_max) n = n_max;
    for (int i = 0; i < n; i++) {
        memcpy(xe + (size_t)i * lde, xn + (size_t)(rows[i] / k) * ldx, (size_t)d * 2);
        erw[i] = rw[rows[i]];
    }
}

void di_cpu_moe_combine(di_exec *x, int M, int k, const int *inv, const uint16_t *eo, size_t ldo, int d, float *y) {
    (void)x;
    enum { KMAX = 64 };
    memset(y, 0, sizeof(float) * (size_t)M * (size_t)d);
    for (int m = 0; m < M; m++) {
        int at[KMAX];
        int kk = k < KMAX ? k : KMAX;
        for (int i = 0; i < kk; i++) { /* insertion sort: the expert loop's order */
            int v = inv[(size_t)m * k + i], j = i;
            for (; j > 0 && at[j - 1] > v; j--) at[j] = at[j - 1];
            at[j] = v;
        }
        for (int i = 0; i < kk; i++) di_add_bf16_f32(y + (size_t)m * d, eo + (size_t)at[i] * ldo, (size_t)d);
    }
}

void di_cpu_moe_routed(di_exec *x, int M, int k, const int *sel, const float *rw, int E, const di_wmat *W1,
                       const di_wmat *W3, const di_wmat *W2, const uint16_t *xn, size_t ldx, int d, int act_block,
                       float limit, const di_moe_bufs *b, const uint16_t *shared, float *y, uint16_t *out, size_t ldo) {
    if (M <= 0) return;
    int I = W1[0].n;
    di_moe_dispatch(x, M, k, sel, E, b->off, b->rows, b->inv);
    di_moe_gather(x, M * k, b->off, E, b->rows, k, xn, ldx, d, rw, b->xe, (size_t)d, b->erw);
    di_gemm2_grouped(x, E, W1, W3, b->off, b->xe, (size_t)d, act_block, b->g, b->u, (size_t)I);
    di_swiglu_n(x, b->off, E, b->g, b->u, (size_t)I, I, limit, b->erw, b->h, (size_t)I);
    di_gemm_grouped(x, E, W2, b->off, b->h, (size_t)I, act_block, b->eo, (size_t)d);
    di_moe_combine(x, M, k, b->inv, b->eo, (size_t)d, d, y);
    for (int m = 0; m < M; m++) {
        float *ym = y + (size_t)m * d;
        if (shared) di_add_bf16_f32(ym, shared + (size_t)m * ldo, (size_t)d);
        di_f32_to_bf16_n(ym, out + (size_t)m * ldo, (size_t)d);
    }
}
