/* cmp_state.c — the gated compressor's per-sequence state update and group
 * pooling for a whole step (ops.h di_cmp_gated_rows). The state holds
 * `groups` blocks of r slots; group g lives in block g mod groups
 * (model/seq_state.h), so pooling only reads. */
#include <string.h>

#include "ops/cpu/cpu_ops.h"
#include "ops/ops.h"

#define MAX_OVERLAP_SLOTS 16
#define MAX_HD 1024

/* Pool group g from (kv, score) into out[hd] (fp32). */
static void pool_group(const float *kv, const float *score, int width, int ratio, int overlap, int groups, int64_t g,
                       int hd, float *out) {
    size_t blk = (size_t)ratio * (size_t)width;
    size_t own = (size_t)(g % groups) * blk;
    if (!overlap) {
        di_softmax_pool(kv + own, score + own, (size_t)width, ratio, hd, out);
        return;
    }
    /* the 2r overlap slots gathered contiguously (runs on the calling thread) */
    static _Thread_local float tkv[MAX_OVERLAP_SLOTS * MAX_HD], tsc[MAX_OVERLAP_SLOTS * MAX_HD];
    size_t prev = (size_t)((g + groups - 1) % groups) * blk;
    int S = 2 * ratio;
    for (int s = 0; s < S; s++) {
        /* slots 0..r-1: previous group, A half [:hd]; r..2r-1: own group, B half [hd:] */
        size_t off = s < ratio ? prev + (size_t)s * (size_t)width : own + (size_t)(s - ratio) * (size_t)width + (size_t)hd;
        memcpy(tkv + (size_t)s * hd, kv + off, (size_t)hd * 4);
        memcpy(tsc + (size_t)s * hd, score + off, (size_t)hd * 4);
    }
    di_softmax_pool(tkv, tsc, (size_t)hd, S, hd, out);
}

void di_cpu_cmp_gated_rows(di_exec *x, int M, const int *row_seg, const int *emit, const int64_t *pos,
                           float *const *skv, float *const *ssc, const float *pk0, const float *ps0, const float *ape,
                           int r, int ov, int groups, int hd, float *out) {
    (void)x;
    int width = (ov ? 2 : 1) * hd;
    for (int row = 0; row < M; row++) { /* a segment's rows are consecutive, in position order */
        int s = row_seg[row];
        float *kv = skv[s], *sc = ssc[s];
        int64_t t = pos[row], g = t / r;
        int o = (int)(t % r);
        size_t slot = (size_t)(g % groups) * (size_t)r + (size_t)o;
        const float *pk = pk0 + (size_t)row * width, *ps = ps0 + (size_t)row * width;
        float *sk = kv + slot * (size_t)width, *ss = sc + slot * (size_t)width;
        memcpy(sk, pk, (size_t)width * 4);
        if (ape) di_add_f32(ss, ps, ape + (size_t)o * width, (size_t)width);
        else memcpy(ss, ps, (size_t)width * 4);
        if (emit[row] < 0) continue;
        pool_group(kv, sc, width, r, ov, groups, g, hd, out + (size_t)emit[row] * hd);
    }
}
