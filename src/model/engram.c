/*
 * engram.c — the Engram block: table gather, wkv FP8 linear, per-copy gating
 * (architecture.md §5.8; see engram.h for the formulas).
 *
 * Rounding points follow the reference: the gathered rows are BF16, wkv's
 * output is BF16, the gate math and the residual update run in fp32 and the
 * result is rounded to BF16. Sums run in a fixed order (8 interleaved
 * partial sums, then a fixed tree), independent of the batch. This file
 * relies on ISO C's default of no floating-point contraction (-std=c11).
 */
#include "model/engram.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "io/numfmt.h"

#define SCALE_BLOCK 32  /* one e8m0 table scale per 32 columns of a row */

deepinfer_status di_engram_layer_init(di_engram_layer *l, const di_engram_layer_desc *d, di_error *err) {
    memset(l, 0, sizeof *l);
    if (d->dim < 1 || d->hc < 1 || d->n_cols < 1 || d->head_dim < 32 || d->head_dim % SCALE_BLOCK ||
        d->rows < 1 || (int64_t)d->n_cols * d->head_dim > (1 << 24) || (int64_t)(d->hc + 1) * d->dim > (1 << 24))
        return di_error_set(err, DEEPINFER_ERR_INVALID_ARGUMENT,
                            "engram: unsupported shapes (dim %d, hc %d, %d columns of %d; head_dim must be a "
                            "multiple of 32)", d->dim, d->hc, d->n_cols, d->head_dim);
    if (!d->table || !d->table_scale || !d->wkv || !d->q_weight || !d->k_weight)
        return di_error_set(err, DEEPINFER_ERR_INVALID_ARGUMENT, "engram: a weight pointer is missing");
    if (d->wkv->fmt != DI_WFMT_FP8 || d->wkv->n != (d->hc + 1) * d->dim || d->wkv->k != d->n_cols * d->head_dim ||
        d->act_block < 1 || d->wkv->k % d->act_block)
        return di_error_set(err, DEEPINFER_ERR_INVALID_ARGUMENT,
                            "engram: wkv must be an FP8 [%d, %d] matrix with K a multiple of the activation block",
                            (d->hc + 1) * d->dim, d->n_cols * d->head_dim);
    if (!(d->eps >= 0.0f))
        return di_error_set(err, DEEPINFER_ERR_INVALID_ARGUMENT, "engram: eps must be >= 0");
    size_t n = (size_t)d->hc * (size_t)d->dim;
    l->qk = malloc(n * sizeof *l->qk);
    if (!l->qk) return di_error_set(err, DEEPINFER_ERR_OUT_OF_MEMORY, "engram: out of memory");
    for (size_t i = 0; i < n; i++) {
        float q = d->qk_f32 ? ((const float *)d->q_weight)[i] : di_bf16_to_f32(((const uint16_t *)d->q_weight)[i]);
        float k = d->qk_f32 ? ((const float *)d->k_weight)[i] : di_bf16_to_f32(((const uint16_t *)d->k_weight)[i]);
        l->qk[i] = q * k;
    }
    l->d = *d;
    l->dqk = l->qk;
    if (d->tables_in_backend) l->dev_tables = 1;
    if (!di_allocator_is_host() && d->tables_host) { /* the tables stay on the host; qk on the device */
        l->host_tables = 1;
        l->dqk = di_dev_dup(l->qk, n * sizeof *l->qk);
        if (!l->dqk) {
            l->d.tables_host = 0; /* handed over on success only */
            di_engram_layer_free(l);
            return di_error_set(err, DEEPINFER_ERR_OUT_OF_MEMORY, "engram: out of device memory for q*k");
        }
    } else if (!di_allocator_is_host()) { /* device backends: the table and qk in device memory */
        size_t tb = (size_t)d->rows * (size_t)d->head_dim, sb = tb / SCALE_BLOCK;
        l->dqk = di_dev_dup(l->qk, n * sizeof *l->qk);
        if (!d->tables_in_backend) {
            l->d.table = di_dev_dup(d->table, tb);
            l->d.table_scale = di_dev_dup(d->table_scale, sb);
        }
        l->dev_tables = 1;
        if (!l->dqk || !l->d.table || !l->d.table_scale) {
            if (d->tables_in_backend) l->d.table = l->d.table_scale = NULL; /* handed over on success only */
            di_engram_layer_free(l);
            return di_error_set(err, DEEPINFER_ERR_OUT_OF_MEMORY, "engram: out of device memory for the table");
        }
    }
    return DEEPINFER_OK;
}

void di_engram_layer_free(di_engram_layer *l) {
    if (!l) return;
    if (l->dev_tables) {
        di_dev_free((void *)l->d.table);
        di_dev_free((void *)l->d.table_scale);
    }
    if (l->d.tables_host == 2) {
        free((void *)l->d.table);
        free((void *)l->d.table_scale);
    }
    if (l->dqk != l->qk) di_dev_free(l->dqk);
    free(l->qk);
    memset(l, 0, sizeof *l);
}

deepinfer_status di_engram_workspace_init(di_engram_workspace *ws, const di_engram_layer *l, int max_rows,
                                          di_error *err) {
    memset(ws, 0, sizeof *ws);
    if (max_rows < 1) return di_error_set(err, DEEPINFER_ERR_INVALID_ARGUMENT, "engram: max_rows must be >= 1");
    size_t k = (size_t)l->d.n_cols * (size_t)l->d.head_dim, n = (size_t)(l->d.hc + 1) * (size_t)l->d.dim;
    size_t r = (size_t)max_rows;
    ws->e = di_dev_alloc(r * k * sizeof(uint16_t));
    ws->kv = di_dev_alloc(r * n * sizeof(uint16_t));
    ws->kvf = di_dev_alloc(n * sizeof(float));
    ws->rows = malloc(r * sizeof(int64_t));
    ws->h = di_dev_alloc((size_t)l->d.dim * sizeof(float));
    ws->max_rows = max_rows;
    if (l->host_tables) ws->e_host = malloc(r * k * sizeof(uint16_t));
    if (!ws->e || !ws->kv || !ws->kvf || !ws->rows || !ws->h || (l->host_tables && !ws->e_host)) {
        di_engram_workspace_free(ws);
        return di_error_set(err, DEEPINFER_ERR_OUT_OF_MEMORY, "engram: out of memory for a %d-row workspace",
                            max_rows);
    }
    return DEEPINFER_OK;
}

void di_engram_workspace_free(di_engram_workspace *ws) {
    if (!ws) return;
    di_dev_free(ws->e);
    di_dev_free(ws->kv);
    di_dev_free(ws->kvf);
    free(ws->rows);
    di_dev_free(ws->h);
    free(ws->e_host);
    memset(ws, 0, sizeof *ws);
}

/* ---- gather -------------------------------------------------------------------------------- */

static deepinfer_status check_ids(const di_engram_layer *l, const int64_t *ids, int64_t n, di_error *err) {
    for (int64_t c = 0; c < n; c++)
        if (ids[c] < 0 || ids[c] >= l->d.rows)
            return di_error_set(err, DEEPINFER_ERR_INVALID_ARGUMENT,
                                "engram: hash id %lld is outside the table's %lld rows", (long long)ids[c],
                                (long long)l->d.rows);
    return DEEPINFER_OK;
}

/* The table rows of one token, dequantised and rounded to BF16 (exact: e4m3 × 2^k fits bf16). */
static void gather_token(const di_engram_layer *l, const int64_t *ids, uint16_t *out) {
    di_engram_gather_rows(NULL, 1, ids, 0, l->d.n_cols, l->d.table, l->d.table_scale, l->d.head_dim, out);
}

deepinfer_status di_engram_gather(const di_engram_layer *l, const int64_t *ids, int64_t ids_stride, int64_t n_tok,
                                  float *out, di_error *err) {
    const int64_t k = (int64_t)l->d.n_cols * l->d.head_dim;
    for (int64_t t = 0; t < n_tok; t++) {
        deepinfer_status st = check_ids(l, ids + t * ids_stride, l->d.n_cols, err);
        if (st) return st;
    }
    uint16_t *row = malloc((size_t)k * sizeof *row);
    if (!row) return di_error_set(err, DEEPINFER_ERR_OUT_OF_MEMORY, "engram: out of memory");
    for (int64_t t = 0; t < n_tok; t++) {
        gather_token(l, ids + t * ids_stride, row);
        di_bf16_to_f32_n(row, (size_t)k, out + t * k);
    }
    free(row);
    return DEEPINFER_OK;
}

static int cmp_range(const void *a, const void *b) {
    uintptr_t x = ((const uintptr_t *)a)[0], y = ((const uintptr_t *)b)[0];
    return (x > y) - (x < y);
}

/* madvise each distinct run of pages once: the ids of a step mostly share
 * pages (small tables, repeated n-grams), and a syscall per id and token
 * was most of a small model's decode step. Ranges are collected in chunks,
 * sorted and merged; a chunk's runs that repeat the previous call's run are
 * skipped. */
void di_engram_prefetch(const di_engram_layer *l, const int64_t *ids, int64_t ids_stride, int64_t n_tok) {
    if (l->dev_tables) return; /* device memory: nothing to page in */
    enum { CHUNK = 256 };
    const uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
    const int hd = l->d.head_dim, nsb = hd / SCALE_BLOCK;
    uintptr_t r[CHUNK][2], last[2] = {0, 0};
    int n = 0;
    int64_t total = n_tok * l->d.n_cols, done = 0;
    for (int64_t t = 0; t < n_tok; t++)
        for (int c = 0; c < l->d.n_cols; c++) {
            int64_t id = ids[t * ids_stride + c];
            done++;
            if (id >= 0 && id < l->d.rows) {
                const uint8_t *p[2] = {l->d.table + id * hd, l->d.table_scale + id * nsb};
                const size_t len[2] = {(size_t)hd, (size_t)nsb};
                for (int i = 0; i < 2; i++) {
                    r[n][0] = (uintptr_t)p[i] & ~(page - 1);
                    r[n][1] = ((uintptr_t)p[i] + len[i] + page - 1) & ~(page - 1);
                    n++;
                }
            }
            if (n + 2 <= CHUNK && done < total) continue;
            qsort(r, (size_t)n, sizeof r[0], cmp_range);
            for (int i = 0; i < n;) {
                uintptr_t a = r[i][0], z = r[i][1];
                for (i++; i < n && r[i][0] <= z; i++)
                    if (r[i][1] > z) z = r[i][1];
                if (a >= last[0] && z <= last[1]) continue;
                (void)madvise((void *)a, z - a, MADV_WILLNEED);
                last[0] = a, last[1] = z;
            }
            n = 0;
        }
}

/* ---- forward ------------------------------------------------------------------------------- */

/* The rows of m tokens into ws->e: gathered by the backend from its tables, or, with the tables
 * in host memory (d.tables_host), gathered on the host (the same dequantisation, exact in BF16)
 * and copied to the device in the model's stream order. The host gather runs while the device
 * still executes the layers queued before this one. */
static void gather_pass(di_exec *x, const di_engram_layer *l, di_engram_workspace *ws, int m, const int64_t *ids,
                        int64_t ids_stride) {
    if (!ws->e_host) {
        di_engram_gather_rows(x, m, ids, ids_stride, l->d.n_cols, l->d.table, l->d.table_scale, l->d.head_dim, ws->e);
        return;
    }
    size_t k = (size_t)l->d.n_cols * (size_t)l->d.head_dim;
    di_engram_gather_rows(NULL, m, ids, ids_stride, l->d.n_cols, l->d.table, l->d.table_scale, l->d.head_dim,
                          ws->e_host);
    di_copy_h2d(x, ws->e, ws->e_host, (size_t)m * k * sizeof(uint16_t));
}

/* The model's path: whole passes of ops. */
deepinfer_status di_engram_forward_ops(di_exec *x, const di_engram_layer *l, di_engram_workspace *ws, uint16_t *R,
                                       int64_t n_tok, const int64_t *ids, int64_t ids_stride, float *gates) {
    const int dim = l->d.dim, hc = l->d.hc;
    const int k = l->d.n_cols * l->d.head_dim, n = (hc + 1) * dim;
    for (int64_t t0 = 0; t0 < n_tok; t0 += ws->max_rows) {
        int m = n_tok - t0 < ws->max_rows ? (int)(n_tok - t0) : ws->max_rows;
        gather_pass(x, l, ws, m, ids + t0 * ids_stride, ids_stride);
        di_gemm(x, m, ws->e, (size_t)k, l->d.wkv, l->d.act_block, NULL, ws->kv, (size_t)n); /* BF16 out */
        di_engram_gate_rows(x, m, NULL, ws->kv, (size_t)n, R + t0 * hc * dim, l->dqk, dim, hc, l->d.eps, ws->kvf,
                            ws->h, gates ? gates + t0 * hc : NULL);
    }
    return DEEPINFER_OK;
}

deepinfer_status di_engram_forward(di_exec *x, const di_engram_layer *l, di_engram_workspace *ws, uint16_t *R,
                                   int64_t n_tok, const int64_t *ids, int64_t ids_stride, const uint8_t *mask,
                                   float *gates, di_error *err) {
    const int dim = l->d.dim, hc = l->d.hc;
    const int k = l->d.n_cols * l->d.head_dim, n = (hc + 1) * dim;
    for (int64_t t = 0; t < n_tok; t++) {
        if (mask && !mask[t]) continue;
        deepinfer_status st = check_ids(l, ids + t * ids_stride, l->d.n_cols, err);
        if (st) return st;
    }
    if (!mask) return di_engram_forward_ops(x, l, ws, R, n_tok, ids, ids_stride, gates);
    for (int64_t t0 = 0; t0 < n_tok;) {
        int m = 0; /* collect up to max_rows unmasked tokens */
        for (; t0 < n_tok && m < ws->max_rows; t0++) {
            if (!mask[t0]) {
                if (gates)
                    for (int c = 0; c < hc; c++) gates[t0 * hc + c] = 0.0f;
                continue;
            }
            ws->rows[m] = t0;
            gather_token(l, ids + t0 * ids_stride, (ws->e_host ? ws->e_host : ws->e) + (int64_t)m * k);
            m++;
        }
        if (!m) continue;
        if (ws->e_host) di_copy_h2d(x, ws->e, ws->e_host, (size_t)m * (size_t)k * sizeof(uint16_t));
        di_gemm(x, m, ws->e, (size_t)k, l->d.wkv, l->d.act_block, NULL, ws->kv, (size_t)n); /* BF16 out */
        di_engram_gate_rows(x, m, ws->rows, ws->kv, (size_t)n, R, l->dqk, dim, hc, l->d.eps, ws->kvf, ws->h, gates);
    }
    return DEEPINFER_OK;
}
