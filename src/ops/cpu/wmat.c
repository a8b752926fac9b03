/*
 * wmat.c — packing checkpoint weights into the CPU GEMM panel layouts
 * (gemm_layout.h). Packing is a one-time copy at load; scales are decoded
 * from e8m0 to fp32 (exact powers of two).
 */
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "io/numfmt.h"
#include "ops/cpu/gemm_layout.h"
#include "ops/cpu/threadpool.h"
#include "ops/ops.h"

/* Packed panels: 64-byte aligned; large ones on 2 MiB boundaries with transparent huge pages
 * asked for, so that writing a model's packed weights takes 512x fewer first-touch faults. */
#define HUGE_ALIGN ((size_t)2 << 20)

static void *alloc64(size_t bytes) {
    if (bytes == 0) bytes = 64;
    bytes = (bytes + 63) & ~(size_t)63;
    if (bytes < 2 * HUGE_ALIGN) return aligned_alloc(64, bytes);
    bytes = (bytes + HUGE_ALIGN - 1) & ~(HUGE_ALIGN - 1);
    void *p = aligned_alloc(HUGE_ALIGN, bytes);
#ifdef MADV_HUGEPAGE
    if (p) madvise(p, bytes, MADV_HUGEPAGE); /* a hint */
#endif
    return p;
}

void di_wmat_free(di_wmat *w) {
    if (!w) return;
    free(w->data);
    free(w->scale);
    if (w->raw_owned) {
        di_dev_free((void *)w->raw_w);
        di_dev_free((void *)w->raw_scale);
    }
    memset(w, 0, sizeof *w);
}

static deepinfer_status check_shape(di_wfmt fmt, int n, int k, int wblock, di_error *err) {
    if (n <= 0 || k <= 0) return di_error_set(err, DEEPINFER_ERR_INVALID_ARGUMENT, "weight shape [%d,%d] is empty", n, k);
    switch (fmt) {
    case DI_WFMT_BF16:
        if (k % 2) return di_error_set(err, DEEPINFER_ERR_UNSUPPORTED, "BF16 weight needs an even K (got %d)", k);
        break;
    case DI_WFMT_F32: break;
    case DI_WFMT_FP8:
        if (wblock <= 0 || wblock % 16 || k % wblock)
            return di_error_set(err, DEEPINFER_ERR_UNSUPPORTED, "FP8 weight [%d,%d]: K must be a multiple of the block %d",
                                n, k, wblock);
        break;
    case DI_WFMT_FP4:
        if (k % 32) return di_error_set(err, DEEPINFER_ERR_UNSUPPORTED, "FP4 weight [%d,%d]: K must be a multiple of 32", n, k);
        break;
    }
    return DEEPINFER_OK;
}

static deepinfer_status alloc_wmat(di_wmat *out, di_wfmt fmt, int n, int k, int wblock, di_error *err) {
    memset(out, 0, sizeof *out);
    deepinfer_status st = check_shape(fmt, n, k, wblock, err);
    if (st) return st;
    out->fmt = fmt;
    out->n = n;
    out->k = k;
    out->wblock = fmt == DI_WFMT_FP8 ? wblock : fmt == DI_WFMT_FP4 ? 32 : 0;
    out->npanels = (n + DI_PANEL - 1) / DI_PANEL;
    size_t rows = (size_t)out->npanels * DI_PANEL;
    size_t dbytes = 0, sbytes = 0;
    switch (fmt) {
    case DI_WFMT_BF16: dbytes = rows * (size_t)k * 2; break;
    case DI_WFMT_F32: dbytes = rows * (size_t)k * 4; break;
    case DI_WFMT_FP8:
        dbytes = rows * (size_t)k;
        sbytes = (size_t)((n + wblock - 1) / wblock + 1) * (size_t)(k / wblock) * 4;
        break;
    case DI_WFMT_FP4:
        dbytes = rows * (size_t)k / 2;
        sbytes = rows * (size_t)(k / 32) * 4;
        break;
    }
    out->data = alloc64(dbytes);
    out->scale = sbytes ? alloc64(sbytes) : NULL;
    if (!out->data || (sbytes && !out->scale)) {
        di_wmat_free(out);
        return di_error_set(err, DEEPINFER_ERR_OUT_OF_MEMORY, "out of memory packing a [%d,%d] weight", n, k);
    }
    memset(out->data, 0, dbytes);
    out->bytes = dbytes + sbytes;
    return DEEPINFER_OK;
}

/* e8m0 -> fp32 (NaN codes are rejected by the weight binder before packing). */
static float e8m0(uint8_t b) { return di_e8m0_to_f32(b); }

/* One packing job: rows [r0, r1) of W (whole panels, except the last) into out. */
typedef struct pack_job {
    di_wmat *out;
    const uint8_t *src;    /* row 0 of the rows being packed */
    const uint8_t *scale;  /* FP4: the scale row of row 0 */
    int n;
} pack_job;

static void pack_rows_range(const pack_job *j, int r0, int r1) {
    di_wmat *out = j->out;
    size_t K = (size_t)out->k;
    switch (out->fmt) {
    case DI_WFMT_BF16: { /* the source may be only byte-aligned (a mapped checkpoint): pairs copied as bytes */
        uint16_t *dst = out->data;
        for (int r = r0; r < r1; r++) {
            size_t P = (size_t)r / DI_PANEL, l = (size_t)r % DI_PANEL;
            for (size_t p = 0; p < K / 2; p++) memcpy(dst + (P * (K / 2) + p) * 32 + 2 * l, j->src + ((size_t)r * K + 2 * p) * 2, 4);
        }
        break;
    }
    case DI_WFMT_F32: {
        float *dst = out->data;
        for (int r = r0; r < r1; r++) {
            size_t P = (size_t)r / DI_PANEL, l = (size_t)r % DI_PANEL;
            for (size_t kk = 0; kk < K; kk++) memcpy(&dst[(P * K + kk) * 16 + l], j->src + ((size_t)r * K + kk) * 4, 4);
        }
        break;
    }
    case DI_WFMT_FP8: {
        uint8_t *dst = out->data;
        for (int r = r0; r < r1; r++) {
            size_t P = (size_t)r / DI_PANEL;
            int l = r % DI_PANEL;
            for (size_t kk = 0; kk < K; kk++) {
                size_t c = kk / 4;
                dst[(P * (K / 4) + c) * 64 + (size_t)di_fp8_pos(l, (int)(kk % 4))] = j->src[(size_t)r * K + kk];
            }
        }
        break;
    }
    case DI_WFMT_FP4: {
        size_t kb = K / 2, nsb = K / 32;
        uint8_t *dst = out->data;
        for (int r = r0; r < r1; r++) {
            size_t P = (size_t)r / DI_PANEL;
            int l = r % DI_PANEL;
            for (size_t p = 0; p < kb; p++) {
                size_t c = p / 4;
                dst[(P * (kb / 4) + c) * 64 + (size_t)di_fp4_pos(l, (int)(p % 4))] = j->src[(size_t)r * kb + p];
            }
            for (size_t b = 0; b < nsb; b++) out->scale[(P * nsb + b) * 16 + (size_t)l] = e8m0(j->scale[(size_t)r * nsb + b]);
        }
        break;
    }
    }
}

/* Panels are independent: load-time packing runs on the pool (a pure copy, so the result is the
 * same however it is split), PACK_PANELS panels per chunk. */
#define PACK_PANELS 64

static void pack_chunk(void *ctx, int t, int nchunks) {
    (void)nchunks;
    const pack_job *j = ctx;
    int r0 = t * PACK_PANELS * DI_PANEL, r1 = r0 + PACK_PANELS * DI_PANEL;
    pack_rows_range(j, r0, r1 < j->n ? r1 : j->n);
}

deepinfer_status di_wmat_pack_rows(di_wmat *out, di_wfmt fmt, const void *w, const uint8_t *scale, int row0, int n,
                                   int k, int wblock, di_error *err) {
    if (fmt == DI_WFMT_FP8 && (wblock <= 0 || row0 % wblock)) {
        memset(out, 0, sizeof *out);
        return di_error_set(err, DEEPINFER_ERR_INVALID_ARGUMENT, "FP8 row offset %d is not a multiple of the block %d",
                            row0, wblock);
    }
    deepinfer_status st = alloc_wmat(out, fmt, n, k, wblock, err);
    if (st) return st;
    size_t K = (size_t)k, rowb = fmt == DI_WFMT_FP4 ? K / 2 : K * (fmt == DI_WFMT_FP8 ? 1 : fmt == DI_WFMT_BF16 ? 2 : 4);
    pack_job j = {out, (const uint8_t *)w + (size_t)row0 * rowb, fmt == DI_WFMT_FP4 ? scale + (size_t)row0 * (K / 32) : NULL,
                  n};
    int nchunks = (out->npanels + PACK_PANELS - 1) / PACK_PANELS;
    if (nchunks > 1) di_threadpool_run_n(di_threadpool_global(), nchunks, pack_chunk, &j);
    else pack_rows_range(&j, 0, n);
    if (fmt == DI_WFMT_FP8) {
        int sb_k = k / wblock, full_k = sb_k;
        int sb_n = (n + wblock - 1) / wblock;
        const uint8_t *ssrc = scale + (size_t)(row0 / wblock) * (size_t)full_k;
        for (int bn = 0; bn < sb_n; bn++)
            for (int bk = 0; bk < sb_k; bk++) out->scale[(size_t)bn * sb_k + bk] = e8m0(ssrc[(size_t)bn * full_k + bk]);
    } else if (fmt == DI_WFMT_FP4) { /* padding rows: scale 1 (their weights are zero) */
        size_t nsb = K / 32;
        for (int r = n; r < out->npanels * DI_PANEL; r++) {
            size_t P = (size_t)r / DI_PANEL, l = (size_t)r % DI_PANEL;
            for (size_t b = 0; b < nsb; b++) out->scale[(P * nsb + b) * 16 + l] = 1.0f;
        }
    }
    return DEEPINFER_OK;
}

deepinfer_status di_wmat_pack(di_wmat *out, di_wfmt fmt, const void *w, const uint8_t *scale, int n, int k, int wblock,
                              di_error *err) {
    return di_wmat_pack_rows(out, fmt, w, scale, 0, n, k, wblock, err);
}

float di_wmat_get(const di_wmat *w, int n, int k) {
    size_t K = (size_t)w->k, P = (size_t)n / DI_PANEL;
    int l = n % DI_PANEL;
    switch (w->fmt) {
    case DI_WFMT_BF16: {
        const uint16_t *d = w->data;
        return di_bf16_to_f32(d[(P * (K / 2) + (size_t)k / 2) * 32 + 2 * (size_t)l + (size_t)(k & 1)]);
    }
    case DI_WFMT_F32: return ((const float *)w->data)[(P * K + (size_t)k) * 16 + (size_t)l];
    case DI_WFMT_FP8: {
        const uint8_t *d = w->data;
        uint8_t b = d[(P * (K / 4) + (size_t)k / 4) * 64 + (size_t)di_fp8_pos(l, k % 4)];
        return di_e4m3_to_f32(b) * w->scale[(size_t)(n / w->wblock) * (K / (size_t)w->wblock) + (size_t)k / (size_t)w->wblock];
    }
    case DI_WFMT_FP4: {
        const uint8_t *d = w->data;
        size_t p = (size_t)k / 2;
        uint8_t b = d[(P * (K / 8) + p / 4) * 64 + (size_t)di_fp4_pos(l, (int)(p % 4))];
        uint8_t nib = (k & 1) ? (uint8_t)(b >> 4) : (uint8_t)(b & 15);
        return di_e2m1_to_f32(nib) * w->scale[(P * (K / 32) + (size_t)k / 32) * 16 + (size_t)l];
    }
    }
    return 0.0f;
}
