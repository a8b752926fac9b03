/* cu_exec.c — CUDA execution contexts, the device allocator and the
 * backend's installation (backend.h di_backend_use), and the device contexts
 * of rank threads (backend.h di_backend_rank_bind; docs/cuda-backend.md §11).
 *
 * The allocator and the ops table are process-wide tables; what they act on
 * is the calling thread's device context: its device, the device's stream,
 * the state exec, the load's staging ring and the allocator's slabs. The
 * process's context (device 0) serves every thread that did not bind one, so
 * one-rank engines run on any thread as before; a rank thread binds its own. */
#include <pthread.h>
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

static int g_batch_invariant = -1; /* di_cuda_set_batch_invariant; -1: default_batch_invariant() */

/* backend.h di_backend_set_batch_invariant (through the table, cu_backend.c):
 * the mode of the execs created from now on. */
void di_cuda_set_batch_invariant(int on) { g_batch_invariant = on < 0 ? -1 : on != 0; }

/* Every exec alive (ctx_new links, ctx_free unlinks): di_cuda_set_batch_invariant_live. Rank
 * threads create and free execs concurrently: the list has a lock. */
static cu_exec *g_live;
static pthread_mutex_t g_live_mu = PTHREAD_MUTEX_INITIALIZER;
static int default_batch_invariant(void);

int di_cuda_set_batch_invariant_live(int on) {
    di_cuda_set_batch_invariant(on);
    const int mode = g_batch_invariant >= 0 ? g_batch_invariant : default_batch_invariant();
    int n = 0;
    pthread_mutex_lock(&g_live_mu);
    for (cu_exec *c = g_live; c; c = c->live_next, n++) {
        cudaStreamSynchronize(c->dc.stream);
        c->dc.batch_invariant = mode;
        cu_plan_drop_graphs(c); /* recorded with the old mode's kernels */
    }
    pthread_mutex_unlock(&g_live_mu);
    return n;
}

/* ---- device contexts ---- */

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

/* What the backend holds per driving thread: the process's context (g_proc, device 0) or a rank
 * thread's (t_ctx). The stream is the device's: every context on one device shares it, so that
 * several ranks placed on one GPU (tests) run their kernels in one order; kernels that keep
 * counters in __device__ memory for the running launch must not overlap other launches of theirs. */
typedef struct cu_devctx {
    int dev;
    cudaStream_t stream;
    di_exec state_exec;
    stage_ring ring;
    cu_slabs slabs;
} cu_devctx;

static cu_devctx g_proc = {.slabs = {.cur = -1}};
static _Thread_local cu_devctx *t_ctx;

static cu_devctx *cur(void) { return t_ctx ? t_ctx : &g_proc; }

enum { MAX_DEVICES = 64 };
static struct {
    cudaStream_t stream;
    int refs;
} g_dev_stream[MAX_DEVICES];
static pthread_mutex_t g_dev_mu = PTHREAD_MUTEX_INITIALIZER;
static int g_shared_streams; /* devices whose stream more than one context holds (dic_pdl_set_shared) */

/* The stream of device `dev` (the calling thread's current device), made by its first context. */
static cudaError_t stream_acquire(int dev, cudaStream_t *out) {
    cudaError_t e = cudaSuccess;
    pthread_mutex_lock(&g_dev_mu);
    if (!g_dev_stream[dev].refs) e = cudaStreamCreateWithFlags(&g_dev_stream[dev].stream, cudaStreamNonBlocking);
    if (e == cudaSuccess) g_dev_stream[dev].refs++, *out = g_dev_stream[dev].stream;
    if (e == cudaSuccess && g_dev_stream[dev].refs == 2) dic_pdl_set_shared(++g_shared_streams > 0);
    pthread_mutex_unlock(&g_dev_mu);
    return e;
}

static void stream_release(int dev) {
    pthread_mutex_lock(&g_dev_mu);
    if (g_dev_stream[dev].refs == 2) dic_pdl_set_shared(--g_shared_streams > 0);
    if (g_dev_stream[dev].refs > 0 && --g_dev_stream[dev].refs == 0) {
        cudaStreamSynchronize(g_dev_stream[dev].stream);
        cudaStreamDestroy(g_dev_stream[dev].stream);
        g_dev_stream[dev].stream = NULL;
    }
    pthread_mutex_unlock(&g_dev_mu);
}

cudaStream_t cu_thread_stream(void) { return cur()->stream; }

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
    c->dc.stream = cur()->stream;
    c->dc.scratch_cap = sc;
    /* 1: a row's bits independent of the batch shape (default, docs/determinism.md §7); 0 (the
     * engine's batch_invariant through di_backend_set_batch_invariant, else
     * $DEEPINFER_BATCH_INVARIANT=0) picks the
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
    pthread_mutex_lock(&g_live_mu);
    c->live_next = g_live;
    g_live = c;
    pthread_mutex_unlock(&g_live_mu);
    return c;
}

static int fixed_shapes(const di_exec *x) { return cu_planning(cu_of(x)); }

static void ctx_free(void *p) {
    cu_exec *c = p;
    if (!c) return;
    pthread_mutex_lock(&g_live_mu);
    for (cu_exec **l = &g_live; *l; l = &(*l)->live_next)
        if (*l == c) {
            *l = c->live_next;
            break;
        }
    pthread_mutex_unlock(&g_live_mu);
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

/* ---- the backend allocator (ops.h di_set_allocator): the calling thread's context ---- */

static void *dev_alloc(void *ctx, size_t bytes) {
    (void)ctx;
    void *p = NULL;
    if (!bytes) bytes = 256;
    if (cu_slab_wants(bytes)) p = cu_slab_alloc(&cur()->slabs, bytes); /* no 2 MiB granule tail per allocation (cu_slab.c) */
    else if (cudaMalloc(&p, bytes) != cudaSuccess) p = NULL;
    if (!p) return NULL;
    cudaMemset(p, POISON_BYTE, bytes);
    return p;
}

static void dev_free(void *ctx, void *p) {
    (void)ctx;
    if (!p) return;
    cudaStreamSynchronize(cur()->stream);
    if (!cu_slab_free(&cur()->slabs, p)) cudaFree(p);
}

static void dev_zero(void *ctx, void *p, size_t bytes) {
    (void)ctx;
    dic_pdl_disarm();
    cudaMemsetAsync(p, 0, bytes, cur()->stream);
}

static void dev_upload(void *ctx, void *dst, const void *src, size_t bytes) {
    (void)ctx;
    cudaStreamSynchronize(cur()->stream);
    cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice);
}

/* The staging ring of the calling thread's context (see stage_ring above). */
static void stage_finish(void *ctx) {
    (void)ctx;
    stage_ring *ring = &cur()->ring;
    if (!ring->ready) return;
    cudaStreamSynchronize(0);
    for (int i = 0; i < STAGE_COUNT; i++) {
        cudaFreeHost(ring->buf[i]);
        cudaEventDestroy(ring->done[i]);
    }
    memset(ring, 0, sizeof *ring);
}

static void *stage_get(void *ctx, size_t *cap) {
    stage_ring *ring = &cur()->ring;
    if (!ring->ready) {
        memset(ring, 0, sizeof *ring);
        for (int i = 0; i < STAGE_COUNT; i++)
            if (cudaHostAlloc(&ring->buf[i], STAGE_BYTES, cudaHostAllocDefault) != cudaSuccess ||
                cudaEventCreateWithFlags(&ring->done[i], cudaEventDisableTiming) != cudaSuccess) {
                ring->ready = 1;
                stage_finish(ctx);
                *cap = 0;
                return NULL;
            }
        ring->ready = 1;
    }
    int i = ring->next;
    if (ring->used[i]) cudaEventSynchronize(ring->done[i]);
    ring->used[i] = 0;
    *cap = STAGE_BYTES;
    return ring->buf[i];
}

static void stage_put(void *ctx, void *buf, void *dst, size_t bytes) {
    (void)ctx;
    stage_ring *ring = &cur()->ring;
    int i = ring->next;
    (void)buf; /* the buffer stage_get handed out last */
    cudaMemcpyAsync(dst, ring->buf[i], bytes, cudaMemcpyHostToDevice, 0);
    cudaEventRecord(ring->done[i], 0);
    ring->used[i] = 1;
    ring->next = (i + 1) % STAGE_COUNT;
}

static di_dev_ops g_ops;

/* backend.h di_backend_use (through the table, cu_backend.c): install the
 * allocator and the ops table; execs created from now on run on the GPU. */
int di_cuda_backend_install(char *why, size_t why_len) {
    if (g_ops.name) return 0;
    cudaError_t e = cudaSetDevice(0);
    if (e == cudaSuccess) e = stream_acquire(0, &g_proc.stream);
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
    g_proc.state_exec.dev_ctx = ctx_new(0);
    if (!g_proc.state_exec.dev_ctx) {
        snprintf(why, why_len, "cannot create the CUDA state context");
        di_set_allocator(NULL);
        stream_release(0);
        memset(&g_ops, 0, sizeof g_ops);
        return -1;
    }
    g_proc.state_exec.dev = &g_ops;
    di_set_dev_ops(&g_ops, &g_proc.state_exec);
    return 0;
}

/* Back to the CPU (tests that run both backends in one process). Device
 * memory of models loaded under CUDA must be freed before. */
void di_cuda_backend_uninstall(void) {
    if (!g_ops.name) return;
    cudaStreamSynchronize(g_proc.stream);
    stage_finish(NULL);
    di_set_dev_ops(NULL, NULL);
    di_set_allocator(NULL);
    ctx_free(g_proc.state_exec.dev_ctx);
    memset(&g_proc.state_exec, 0, sizeof g_proc.state_exec);
    stream_release(0);
    g_proc.stream = NULL;
    memset(&g_ops, 0, sizeof g_ops);
}

/* backend.h di_backend_rank_bind: the calling thread drives `device` with a context of its own. */
int di_cuda_rank_bind(int device, char *why, size_t why_len) {
    if (!g_ops.name) {
        snprintf(why, why_len, "the CUDA backend is not installed (di_backend_use first)");
        return -1;
    }
    if (t_ctx) {
        snprintf(why, why_len, "this thread already drives device %d", t_ctx->dev);
        return -1;
    }
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess || device < 0 || device >= n || device >= MAX_DEVICES) {
        snprintf(why, why_len, "device %d: %d visible", device, n);
        return -1;
    }
    cu_devctx *c = calloc(1, sizeof *c);
    if (!c) {
        snprintf(why, why_len, "out of memory");
        return -1;
    }
    c->dev = device;
    c->slabs.cur = -1;
    cudaError_t e = cudaSetDevice(device);
    if (e == cudaSuccess) e = stream_acquire(device, &c->stream);
    if (e != cudaSuccess) {
        snprintf(why, why_len, "device %d: %s", device, cudaGetErrorString(e));
        free(c);
        return -1;
    }
    t_ctx = c; /* the state exec is made on this context's stream */
    c->state_exec.dev_ctx = ctx_new(0);
    if (!c->state_exec.dev_ctx) {
        snprintf(why, why_len, "device %d: cannot create the CUDA state context", device);
        t_ctx = NULL;
        stream_release(device);
        free(c);
        return -1;
    }
    c->state_exec.dev = &g_ops;
    di_set_thread_dev_exec(&c->state_exec);
    return 0;
}

/* backend.h di_backend_rank_unbind: after the thread freed its device memory. */
void di_cuda_rank_unbind(void) {
    cu_devctx *c = t_ctx;
    if (!c) return;
    cudaStreamSynchronize(c->stream);
    stage_finish(NULL);
    di_set_thread_dev_exec(NULL);
    ctx_free(c->state_exec.dev_ctx);
    cu_slabs_release(&c->slabs);
    t_ctx = NULL;
    stream_release(c->dev);
    free(c);
}
