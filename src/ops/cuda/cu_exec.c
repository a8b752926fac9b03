/* cu_exec.c — CUDA execution contexts, the device allocator and the
 * backend's installation (backend.h di_backend_use). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops/cuda/cu_glue.h"
#include "util/env.h"

#define TAB_CAP DI_DEV_EXEC_TAB_BYTES      /* host tables of one op (ops/backend.h: the load plan counts it) */
#define MIN_SCRATCH DI_DEV_EXEC_MIN_SCRATCH /* dic scratch: GEMM quantisation, attention, indexer scores */

/* Device memory starts as 0xFF bytes (NaN, -1) so that reads of unwritten
 * memory show. */
#define POISON_BYTE 0xFF

static cudaStream_t g_stream;
static di_exec g_state_exec;
static int g_batch_invariant = -1; /* di_cuda_set_batch_invariant; -1: default_batch_invariant() */

/* backend.h di_backend_set_batch_invariant (through the table, cu_backend.c):
 * the mode of the execs created from now on. */
void di_cuda_set_batch_invariant(int on) { g_batch_invariant = on < 0 ? -1 : on != 0; }

/* Every exec alive (ctx_new links, ctx_free unlinks): di_cuda_set_batch_invariant_live. */
static cu_exec *g_live;
static int default_batch_invariant(void);

int di_cuda_set_batch_invariant_live(int on) {
    di_cuda_set_batch_invariant(on);
    const int mode = g_batch_invariant >= 0 ? g_batch_invariant : default_batch_invariant();
    int n = 0;
    for (cu_exec *c = g_live; c; c = c->live_next, n++) {
        cudaStreamSynchronize(c->dc.stream);
        c->dc.batch_invariant = mode;
        cu_plan_drop_graphs(c); /* recorded with the old mode's kernels */
    }
    return n;
}

/* The mode of execs when no caller chose one: $DEEPINFER_BATCH_INVARIANT (util/env.h; the engine
 * resolves and checks it itself and passes its choice), else 1. */
static int default_batch_invariant(void) {
    int on = 1;
    di_error err = {0};
    if (di_env_flag(DI_ENV_BATCH_INVARIANT, &on, &err)) on = 1;
    return on;
}

void cu_check(cu_exec *c, cudaError_t e, const char *op) {
    if (e == cudaSuccess || c->err != cudaSuccess) return;
    c->err = e;
    snprintf(c->err_op, sizeof c->err_op, "%s", op);
}

void cu_tab_begin(cu_exec *c) {
    if (!cu_planning(c)) c->tab_off = 0; /* a plan step accumulates every op's tables */
}

void *cu_tab_put_res(cu_exec *c, const void *src, size_t bytes, size_t reserve) {
    int plan = cu_planning(c);
    if (!plan) reserve = bytes;
    if (!reserve) return NULL;
    if (!src && !plan) return NULL;
    if (bytes > reserve) {
        cu_check(c, cudaErrorInvalidValue, "step plan: a table outgrew its reserve (raise the position bound)");
        return NULL;
    }
    size_t at = (c->tab_off + 255) & ~(size_t)255;
    if (at + reserve > c->tab_cap) {
        cu_check(c, cudaErrorMemoryAllocation, "host-table staging (64 MiB per op / per planned step) overflow");
        return NULL;
    }
    unsigned char *h = plan ? c->plan->host[c->plan->cur] : c->hst;
    if (src && bytes) memcpy(h + at, src, bytes);
    c->tab_off = at + reserve;
    if (plan) cu_plan_mix(c, (uint64_t)at * 131u + reserve); /* the layout joins the signature */
    return c->dtab + at;
}

void *cu_tab_put(cu_exec *c, const void *src, size_t bytes) {
    if (!src || !bytes) return NULL;
    return cu_tab_put_res(c, src, bytes, bytes);
}

size_t cu_tab_pages_bound(const cu_exec *c, int64_t rows_needed, int rows_per_page, int ratio) {
    if (rows_per_page < 1) rows_per_page = 1;
    int64_t rows = rows_needed;
    if (cu_planning(c)) {
        int64_t b = c->plan->pos_bound / (ratio > 0 ? ratio : 1) + 1;
        if (b > rows) rows = b;
    }
    return rows > 0 ? (size_t)((rows + rows_per_page - 1) / rows_per_page) : 0;
}

void cu_tab_flush(cu_exec *c) {
    if (cu_planning(c)) return; /* the step's end copies the whole plan once */
    if (c->tab_off) {
        dic_pdl_disarm();
        cu_check(c, cudaMemcpyAsync(c->dtab, c->hst, c->tab_off, cudaMemcpyHostToDevice, c->dc.stream),
                 "host-table copy");
    }
}

int cu_wmat(cu_exec *c, const di_wmat *w, dic_wmat *out) {
    const void *wb;
    const uint8_t *sb;
    if (!di_wmat_raw(w, &wb, &sb)) {
        cu_check(c, cudaErrorInvalidValue, "a weight without device bytes (di_wmat_raw)");
        return 0;
    }
    *out = (dic_wmat){.fmt = (int)w->fmt, .n = w->n, .k = w->k, .wblock = w->wblock, .w = wb, .scale = sb};
    if (w->fmt == DI_WFMT_BF16 && w->raw_fp8_block > 0) /* FP8 storage, BF16 math (dic.h DIC_WFMT_FP8B) */
        out->fmt = DIC_WFMT_FP8B, out->wblock = w->raw_fp8_block;
    return 1;
}

static void *ctx_new(size_t scratch_bytes) {
    cu_exec *c = calloc(1, sizeof *c);
    if (!c) return NULL;
    /* one slice of the model's scratch size per concurrent line (cu_lines.c: main + DI_EXEC_BRANCHES) */
    const size_t lines = DI_EXEC_BRANCHES + 1;
    size_t sc = scratch_bytes * lines > MIN_SCRATCH ? scratch_bytes * lines : MIN_SCRATCH;
    int dev = 0;
    cudaGetDevice(&dev);
    c->dc.stream = g_stream;
    c->dc.scratch_cap = sc;
    /* 1: the CPU's results for every batch shape (default); 0 (the engine's batch_invariant
     * through di_backend_set_batch_invariant, else $DEEPINFER_BATCH_INVARIANT=0) picks the
     * fastest kernel per shape (rows then depend on the batch, within rounding). */
    c->dc.batch_invariant = g_batch_invariant >= 0 ? g_batch_invariant : default_batch_invariant();
    cudaDeviceGetAttribute(&c->dc.num_sms, cudaDevAttrMultiProcessorCount, dev);
    c->tab_cap = TAB_CAP;
    c->hst = malloc(TAB_CAP);
    if (!c->hst || cudaMalloc(&c->dc.scratch, sc) != cudaSuccess || cudaMalloc((void **)&c->dtab, TAB_CAP) != cudaSuccess) {
        if (c->dc.scratch) cudaFree(c->dc.scratch);
        free(c->hst);
        free(c);
        return NULL;
    }
    cudaMemset(c->dc.scratch, POISON_BYTE, sc); /* reads of unwritten scratch show */
    c->live_next = g_live;
    g_live = c;
    return c;
}

static int fixed_shapes(const di_exec *x) { return cu_planning(cu_of(x)); }

static void ctx_free(void *p) {
    cu_exec *c = p;
    if (!c) return;
    for (cu_exec **l = &g_live; *l; l = &(*l)->live_next)
        if (*l == c) {
            *l = c->live_next;
            break;
        }
    cu_plan_free(c);
    cu_lines_free(c);
    cudaStreamSynchronize(c->dc.stream);
    cudaFree(c->dc.scratch);
    cudaFree(c->dtab);
    free(c->hst);
    free(c);
}

static deepinfer_status sync(di_exec *x, di_error *err) {
    cu_exec *c = cu_of(x);
    if (cu_planning(c)) { /* the step is not issued yet (cu_plan.c ends it) */
        if (c->err == cudaSuccess) return DEEPINFER_OK;
        return di_error_set(err, DEEPINFER_ERR_INTERNAL, "CUDA: %s: %s", c->err_op, cudaGetErrorString(c->err));
    }
    cu_check(c, cudaStreamSynchronize(c->dc.stream), "stream synchronize");
    cu_check(c, cudaGetLastError(), "stream synchronize");
    if (c->err == cudaSuccess) return DEEPINFER_OK;
    return di_error_set(err, DEEPINFER_ERR_INTERNAL, "CUDA: %s: %s", c->err_op, cudaGetErrorString(c->err));
}

/* ---- the backend allocator (ops.h di_set_allocator) ---- */

static void *dev_alloc(void *ctx, size_t bytes) {
    (void)ctx;
    void *p = NULL;
    if (!bytes) bytes = 256;
    if (cu_slab_wants(bytes)) p = cu_slab_alloc(bytes); /* no 2 MiB granule tail per allocation (cu_slab.c) */
    else if (cudaMalloc(&p, bytes) != cudaSuccess) p = NULL;
    if (!p) return NULL;
    cudaMemset(p, POISON_BYTE, bytes);
    return p;
}

static void dev_free(void *ctx, void *p) {
    (void)ctx;
    if (!p) return;
    cudaStreamSynchronize(g_stream);
    if (!cu_slab_free(p)) cudaFree(p);
}

static void dev_zero(void *ctx, void *p, size_t bytes) {
    (void)ctx;
    dic_pdl_disarm();
    cudaMemsetAsync(p, 0, bytes, g_stream);
}

static void dev_upload(void *ctx, void *dst, const void *src, size_t bytes) {
    (void)ctx;
    cudaStreamSynchronize(g_stream);
    cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice);
}

/* The load's staging ring (ops.h di_dev_fill): STAGE_COUNT pinned buffers of STAGE_BYTES, each
 * copied on the legacy stream (ordered after dev_alloc's poison memset) with an event that
 * says when it may be refilled. Allocated at the first chunk of a load, freed at its end. */
#define STAGE_COUNT DI_DEV_STAGE_COUNT
#define STAGE_BYTES DI_DEV_STAGE_BYTES

typedef struct stage_ring {
    void *buf[STAGE_COUNT];
    cudaEvent_t done[STAGE_COUNT];
    int used[STAGE_COUNT];
    int next, ready;
} stage_ring;

static stage_ring g_ring;

static void stage_finish(void *ctx) {
    (void)ctx;
    if (!g_ring.ready) return;
    cudaStreamSynchronize(0);
    for (int i = 0; i < STAGE_COUNT; i++) {
        cudaFreeHost(g_ring.buf[i]);
        cudaEventDestroy(g_ring.done[i]);
    }
    memset(&g_ring, 0, sizeof g_ring);
}

static void *stage_get(void *ctx, size_t *cap) {
    if (!g_ring.ready) {
        memset(&g_ring, 0, sizeof g_ring);
        for (int i = 0; i < STAGE_COUNT; i++)
            if (cudaHostAlloc(&g_ring.buf[i], STAGE_BYTES, cudaHostAllocDefault) != cudaSuccess ||
                cudaEventCreateWithFlags(&g_ring.done[i], cudaEventDisableTiming) != cudaSuccess) {
                g_ring.ready = 1;
                stage_finish(ctx);
                *cap = 0;
                return NULL;
            }
        g_ring.ready = 1;
    }
    int i = g_ring.next;
    if (g_ring.used[i]) cudaEventSynchronize(g_ring.done[i]);
    g_ring.used[i] = 0;
    *cap = STAGE_BYTES;
    return g_ring.buf[i];
}

static void stage_put(void *ctx, void *buf, void *dst, size_t bytes) {
    (void)ctx;
    int i = g_ring.next;
    (void)buf; /* the buffer stage_get handed out last */
    cudaMemcpyAsync(dst, g_ring.buf[i], bytes, cudaMemcpyHostToDevice, 0);
    cudaEventRecord(g_ring.done[i], 0);
    g_ring.used[i] = 1;
    g_ring.next = (i + 1) % STAGE_COUNT;
}

static di_dev_ops g_ops;

/* backend.h di_backend_use (through the table, cu_backend.c): install the
 * allocator and the ops table; execs created from now on run on the GPU. */
int di_cuda_backend_install(char *why, size_t why_len) {
    if (g_ops.name) return 0;
    cudaError_t e = cudaSetDevice(0);
    if (e == cudaSuccess) e = cudaStreamCreateWithFlags(&g_stream, cudaStreamNonBlocking);
    if (e != cudaSuccess) {
        snprintf(why, why_len, "%s", cudaGetErrorString(e));
        return -1;
    }
    g_ops.name = "cuda";
    g_ops.ctx_new = ctx_new;
    g_ops.ctx_free = ctx_free;
    g_ops.sync = sync;
    g_ops.fixed_shapes = fixed_shapes;
    g_ops.branch = cu_lines_branch;
    g_ops.join = cu_lines_join;
    cu_fill_dense_ops(&g_ops);
    cu_fill_model_ops(&g_ops);
    di_allocator a = {dev_alloc, dev_free, dev_zero, dev_upload, NULL, stage_get, stage_put, stage_finish};
    di_set_allocator(&a);
    g_state_exec.dev_ctx = ctx_new(0);
    if (!g_state_exec.dev_ctx) {
        snprintf(why, why_len, "cannot create the CUDA state context");
        di_set_allocator(NULL);
        return -1;
    }
    g_state_exec.dev = &g_ops;
    di_set_dev_ops(&g_ops, &g_state_exec);
    return 0;
}

/* Back to the CPU (tests that run both backends in one process). Device
 * memory of models loaded under CUDA must be freed before. */
void di_cuda_backend_uninstall(void) {
    if (!g_ops.name) return;
    cudaStreamSynchronize(g_stream);
    stage_finish(NULL);
    di_set_dev_ops(NULL, NULL);
    di_set_allocator(NULL);
    ctx_free(g_state_exec.dev_ctx);
    memset(&g_state_exec, 0, sizeof g_state_exec);
    cudaStreamDestroy(g_stream);
    memset(&g_ops, 0, sizeof g_ops);
}
