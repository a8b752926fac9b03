/* alloc.c — backend memory (ops.h di_set_allocator): host memory, 64-byte
 * aligned, unless a device backend installs its allocator; and the
 * weights' raw bytes in that memory (di_wmat_set_raw). */
#include <stdlib.h>
#include <string.h>

#include "ops/ops.h"

static void *host_alloc(void *ctx, size_t bytes) {
    (void)ctx;
    if (!bytes) bytes = 64;
    return aligned_alloc(64, (bytes + 63) & ~(size_t)63);
}

static void host_free(void *ctx, void *p) {
    (void)ctx;
    free(p);
}

static void host_zero(void *ctx, void *p, size_t bytes) {
    (void)ctx;
    memset(p, 0, bytes);
}

static void host_upload(void *ctx, void *dst, const void *src, size_t bytes) {
    (void)ctx;
    memcpy(dst, src, bytes);
}

static di_allocator g_alloc = {host_alloc, host_free, host_zero, host_upload, NULL, NULL, NULL, NULL};

void di_set_allocator(const di_allocator *a) {
    if (a) g_alloc = *a;
    else g_alloc = (di_allocator){host_alloc, host_free, host_zero, host_upload, NULL, NULL, NULL, NULL};
}

deepinfer_status di_dev_fill(void *dst, size_t bytes, di_fill_fn fill, void *ctx, di_error *err) {
    if (!bytes) return DEEPINFER_OK;
    if (!g_alloc.stage_get) return fill(ctx, 0, dst, bytes, err); /* host memory: in place */
    for (size_t off = 0; off < bytes;) {
        size_t cap = 0;
        void *buf = g_alloc.stage_get(g_alloc.ctx, &cap);
        if (!buf || !cap)
            return di_error_set(err, DEEPINFER_ERR_OUT_OF_MEMORY, "no host staging buffer for the upload");
        size_t n = bytes - off < cap ? bytes - off : cap;
        deepinfer_status st = fill(ctx, off, buf, n, err);
        if (st) return st;
        g_alloc.stage_put(g_alloc.ctx, buf, (unsigned char *)dst + off, n);
        off += n;
    }
    return DEEPINFER_OK;
}

void di_dev_fill_finish(void) {
    if (g_alloc.stage_finish) g_alloc.stage_finish(g_alloc.ctx);
}

void di_dev_zero(void *p, size_t bytes) {
    if (p && bytes) g_alloc.zero(g_alloc.ctx, p, bytes);
}

void di_dev_upload(void *dst, const void *src, size_t bytes) {
    if (bytes) g_alloc.upload(g_alloc.ctx, dst, src, bytes);
}

void *di_dev_alloc(size_t bytes) { return g_alloc.alloc(g_alloc.ctx, bytes); }

void *di_dev_dup(const void *src, size_t bytes) {
    void *p = di_dev_alloc(bytes);
    if (p) di_dev_upload(p, src, bytes);
    return p;
}

void di_dev_free(void *p) {
    if (p) g_alloc.free(g_alloc.ctx, p);
}

int di_allocator_is_host(void) { return g_alloc.alloc == host_alloc; }

int di_wmat_raw(const di_wmat *w, const void **wbytes, const uint8_t **scale) {
    *wbytes = w->raw_w;
    *scale = w->raw_scale;
    return w->raw_w != NULL;
}

deepinfer_status di_wmat_set_raw(di_wmat *w, const void *wsrc, size_t wbytes, const uint8_t *ssrc, size_t sbytes,
                                 di_error *err) {
    if (di_allocator_is_host()) { /* borrowed: the checkpoint stays mapped */
        w->raw_w = wsrc;
        w->raw_scale = ssrc;
        w->raw_owned = 0;
        return DEEPINFER_OK;
    }
    void *a = di_dev_alloc(wbytes), *b = ssrc ? di_dev_alloc(sbytes) : NULL;
    if (!a || (ssrc && !b)) {
        di_dev_free(a);
        di_dev_free(b);
        return di_error_set(err, DEEPINFER_ERR_OUT_OF_MEMORY, "out of backend memory for a [%d,%d] weight", w->n, w->k);
    }
    di_dev_upload(a, wsrc, wbytes);
    if (b) di_dev_upload(b, ssrc, sbytes);
    w->raw_w = a;
    w->raw_scale = b;
    w->raw_owned = 1;
    return DEEPINFER_OK;
}

deepinfer_status di_wmat_alloc_raw(di_wmat *w, di_wfmt fmt, int n, int k, int wblock, size_t wbytes, size_t sbytes,
                                   di_error *err) {
    memset(w, 0, sizeof *w);
    w->fmt = fmt, w->n = n, w->k = k;
    w->wblock = fmt == DI_WFMT_FP8 ? wblock : fmt == DI_WFMT_FP4 ? 32 : 0;
    void *a = di_dev_alloc(wbytes), *b = sbytes ? di_dev_alloc(sbytes) : NULL;
    if (!a || (sbytes && !b)) {
        di_dev_free(a);
        di_dev_free(b);
        return di_error_set(err, DEEPINFER_ERR_OUT_OF_MEMORY, "out of backend memory for a [%d,%d] weight (%zu bytes)",
                            n, k, wbytes + sbytes);
    }
    w->raw_w = a, w->raw_scale = b, w->raw_owned = 1;
    w->bytes = wbytes + sbytes;
    return DEEPINFER_OK;
}

deepinfer_status di_wmat_set_raw_fp8(di_wmat *w, const uint8_t *wsrc, const uint8_t *ssrc, int wblock, di_error *err) {
    if (w->fmt != DI_WFMT_BF16 || wblock <= 0 || wblock % 16 || w->k % wblock)
        return di_error_set(err, DEEPINFER_ERR_INVALID_ARGUMENT, "FP8 storage of a [%d,%d] weight: block %d", w->n, w->k,
                            wblock);
    size_t sb = (size_t)((w->n + wblock - 1) / wblock) * (size_t)(w->k / wblock);
    deepinfer_status st = di_wmat_set_raw(w, wsrc, (size_t)w->n * (size_t)w->k, ssrc, sb, err);
    if (!st) w->raw_fp8_block = wblock;
    return st;
}
