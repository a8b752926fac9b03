/* cmp_state.c — the gated compressor's per-sequence state update and group
 * pooling for a whole step (ops.h di_cmp_gated_rows). */
#include <string.h>

#include "ops/cpu/cpu_ops.h"
#include "ops/ops.h"

#define MAX_OVERLAP_SLOTS 16
#define MAX_HD 1024

/* Pool the completed group in (kv, score) into out[hd] (fp32). */
static void pool_group(const float *kv, const float *score, int width, int ratio, int overlap, int hd, float *out) {
    if (!overlap) {
        di_softmax_pool(kv, score, (size_t)width, ratio, hd, out);
        return;
    }
    /* the 2r overlap slots gathered contiguously (runs on the calling thread) */
    static _Thread_local float tkv[MAX_OVERLAP_SLOTS * MAX_HD], tsc[MAX_OVERLAP_SLOTS * MAX_HD];
    int S = 2 * ratio;
    for (int s = 0; s < S; s++) {
        /* slots 0..r-1: previous group, A half [:hd]; r..2r-1: own group, B half [hd:] */
        size_t off = (size_t)s * (size_t)width + (s < ratio ? 0 : (size_t)hd);
        memcpy(tkv + (size_t)s * hd, kv + off, (size_t)hd * 4);
        memcpy(tsc + (size_t)s * hd, score + off, (size_t)hd * 4);
    }
    di_softmax_pool(tkv, tsc, (size_t)hd, S, hd, out);
}

void di_cpu_cmp_gated_rows(di_exec *x, int M, const int *row_seg, const int *emit, const int64_t *pos,
                           float *const *skv, float *const *ssc, const float *pk0, const float *ps0, const float *ape,
                           int r, int ov, int hd, float *out) {
    (void)x;
    int width = (ov ? 2 : 1) * hd;
    for (int row = 0; row < M; row++) { /* a segment's rows are consecutive, in position order */
        int s = row_seg[row];
        float *kv = skv[s], *sc = ssc[s];
        int64_t t = pos[row];
        int o = (int)(t % r);
        int slot = ov ? r + o : o;
        const float *pk = pk0 + (size_t)row * width, *ps = ps0 + (size_t)row * width;
        float *sk = kv + (size_t)slot * width, *ss = sc + (size_t)slot * width;
        memcpy(sk, pk, (size_t)width * 4);
        if (ape) di_add_f32(ss, ps, ape + (size_t)o * width, (size_t)width);
        else memcpy(ss, ps, (size_t)width * 4);
        if (emit[row] < 0) continue;
        pool_group(kv, sc, width, r, ov, hd, out + (size_t)emit[row] * hd);
        if (ov) { /* the completed group becomes the previous one */
            memcpy(kv, kv + (size_t)r * width, (size_t)r * width * 4);
            memcpy(sc, sc + (size_t)r * width, (size_t)r * width * 4);
        }
    }
}
