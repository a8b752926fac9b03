/*
 * cu_glue.h — the CUDA backend's side of the ops vtable (src/ops/dev_ops.h):
 * one cu_exec per di_exec (stream, dic_ctx, host-table staging), shared by
 * cu_exec.c (contexts, allocator, install), cu_ops.c (dense ops),
 * cu_ops_model.c (device-shaped model ops), cu_plan.c (recorded steps),
 * cu_lines.c (concurrent lines), cu_queue.c (the engine queue's device
 * side), cu_probe.c (measurements) and cu_backend.c (the backend table).
 * Compiled only into CUDA builds.
 */
#ifndef DI_OPS_CUDA_CU_GLUE_H
#define DI_OPS_CUDA_CU_GLUE_H

#include <cuda_runtime_api.h>

#include "ops/backend.h"
#include "ops/cuda/dic.h"
#include "ops/dev_ops.h"

typedef struct cu_exec {
    dic_ctx dc;             /* stream (shared by every exec: one queue), device scratch */
    /* Host tables: staged in `hst` (host), copied in one cudaMemcpyAsync
     * into `dtab` (device) before the op's launch. Reused by the next op:
     * the stream orders the next copy after this op's kernels, and a copy
     * from pageable memory returns once the source was read. */
    unsigned char *hst, *dtab;
    size_t tab_cap, tab_off;
    cudaError_t err;        /* first failure (sticky) */
    char err_op[128];       /* the failing op, as cu_check named it (the longest message is 65 bytes) */
    struct cu_plan *plan;   /* the step plan (cu_plan.c), NULL: per-op staging above */
    /* Concurrent lines of a captured step (cu_lines.c, ops.h di_exec_branch):
     * side streams forked from and joined into the main stream; while any is
     * forked every line uses its own 1/(DI_EXEC_BRANCHES+1) of the scratch. */
    cudaStream_t main_stream;
    cudaStream_t side[DI_EXEC_BRANCHES];
    cudaEvent_t fork_ev[DI_EXEC_BRANCHES], join_ev[DI_EXEC_BRANCHES];
    unsigned forked;        /* bit b-1: side line b forked since the last join */
    int line;               /* where ops go now (0 = main) */
    int line_armed[DI_EXEC_BRANCHES + 1]; /* per line: its last operation was a kernel (PDL may follow) */
    void *scratch_all;      /* the whole scratch (dc.scratch points into it) */
    size_t scratch_cap_all;
    /* Fused greedy argmax (cu_step.h di_cuda_argmax_fuse): the GEMM writing am_m rows of am_v
     * fp32 logits at am_logits (row stride am_v) also writes their argmax to am_ids where
     * dic_gemm_argmax applies; am_taken says it did (read and cleared by the caller). */
    const float *am_logits;
    int32_t *am_ids;
    int am_m, am_v, am_taken;
    struct cu_exec *live_next; /* the live execs (cu_exec.c di_cuda_set_batch_invariant_live) */
} cu_exec;

/* The step plan (cu_plan.c, docs/cuda-backend.md §6). While a plan step
 * is open, cu_tab_put appends every op's tables of the whole step to one
 * pinned host buffer (double-buffered) at offsets that depend only on the
 * step's shape, returns their address in `dtab`, and nothing is copied per
 * op; the step's end copies the buffer once, then launches the kernels:
 * recorded into a CUDA graph the first time a shape is seen (capture), or
 * not issued at all (plan_only: the graph of that shape is replayed). */
typedef struct cu_plan {
    unsigned char *host[2]; /* pinned (cudaHostAlloc) */
    cudaEvent_t copied[2];  /* the copy out of host[i] finished */
    int cur;                /* the host buffer this step fills */
    int open;               /* a step is between begin and end */
    int capturing;          /* kernels are recorded into a graph */
    int plan_only;          /* kernels are not issued (the graph replays them) */
    int64_t pos_bound;      /* positions of the steps stay below: page-table reserves */
    uint64_t sig;           /* launches and table layout of this step (checked against the graph's) */
    void *sink;             /* device rows that padded scatters write (never read) */
    size_t sink_bytes;
    struct cu_graph *graphs; /* one per shape key */
    int ngraphs;
    int cur_graph;
    cudaEvent_t *ev;        /* [2 * ev_cap]: start, end of the first ev_cap steps (0: no timing) */
    int ev_cap, nsteps;     /* nsteps: steps timed so far (<= ev_cap) */
    int64_t nrecorded;      /* recorded steps ended (captured or replayed) */
    int64_t nreplayed;      /* of which replays of an existing graph */
    size_t last_bytes;      /* plan bytes of the last recorded step */
} cu_plan;

static inline cu_exec *cu_of(const di_exec *x) { return (cu_exec *)x->dev_ctx; }

/* Record a failure of `op` (first one wins). */
void cu_check(cu_exec *c, cudaError_t e, const char *op);
/* A checked call: its failure is recorded under the name `op`. */
#define CU_CHECK(c, call, op) cu_check((c), (call), (op))
/* Every kernel launch and device copy of an op: in an open plan step the
 * site joins the step's signature (cu_plan.c checks a replay against its
 * graph's), and in a plan-only step (the graph of the shape replays the
 * kernels) the call is not made; a copy (an op named di_copy_*) is not a
 * kernel, so the next kernel takes no programmatic edge from it. */
#define CU_LAUNCH(x, call, op)                                               \
    do {                                                                     \
        cu_exec *cu_c_ = cu_of(x);                                           \
        if (cu_planning(cu_c_)) cu_plan_note(cu_c_, (op));                   \
        if (!(cu_planning(cu_c_) && cu_c_->plan->plan_only)) {               \
            if ((op)[0] == 'd' && (op)[1] == 'i' && (op)[2] == '_')          \
                dic_pdl_disarm(); /* di_copy_*: a copy, not a kernel */      \
            CU_CHECK(cu_c_, (call), (op));                                   \
        }                                                                    \
    } while (0)
void cu_plan_note(cu_exec *c, const char *op);
void cu_plan_mix(cu_exec *c, uint64_t v);
void cu_plan_free(cu_exec *c);
/* Concurrent lines (cu_lines.c): the vtable's branch / join; join every
 * forked line (the step's end calls it before ending a capture); free. */
void cu_lines_branch(di_exec *x, int b);
void cu_lines_join(di_exec *x);
void cu_lines_join_all(cu_exec *c);
void cu_lines_free(cu_exec *c);

/* 1 while a plan step is open (tables go to the plan, no per-op copy). */
static inline int cu_planning(const cu_exec *c) { return c->plan && c->plan->open; }

/* Host-table staging: start an op's tables, add one (returns its device
 * address), copy them all. NULL src or 0 bytes: NULL. */
void cu_tab_begin(cu_exec *c);
void *cu_tab_put(cu_exec *c, const void *src, size_t bytes);
/* The same, reserving `reserve` >= bytes in a plan step, so the offsets of
 * the tables that follow do not depend on positions (page tables grow). */
void *cu_tab_put_res(cu_exec *c, const void *src, size_t bytes, size_t reserve);
/* Pages of a page table with `rows_per_page` rows that a plan step reserves
 * for `ratio` (>= 1) positions per row: every position below pos_bound. */
size_t cu_tab_pages_bound(const cu_exec *c, int64_t rows_needed, int rows_per_page, int ratio);
void cu_tab_flush(cu_exec *c);

/* dic_wmat view of a weight's raw (device) bytes; records an error and
 * returns 0 when the weight has none. */
int cu_wmat(cu_exec *c, const di_wmat *w, dic_wmat *out);

/* The two halves of the ops table. */
void cu_fill_dense_ops(di_dev_ops *t);
void cu_fill_model_ops(di_dev_ops *t);

/* Entries of the backend table (cu_backend.c, ops/backend.h di_device_backend), with the meaning
 * of the backend.h functions they serve: the installation (cu_exec.c), the device side of the
 * engine's queue (cu_queue.c), device measurements (cu_probe.c); the step plan's are in
 * cu_step.h. */
int di_cuda_backend_install(char *why, size_t why_len);
void di_cuda_backend_uninstall(void);
int di_cuda_rank_bind(int device, char *why, size_t why_len);
void di_cuda_rank_unbind(void);
/* The stream of the calling thread's device context (the process's or its rank's, cu_exec.c). */
cudaStream_t cu_thread_stream(void);
void di_cuda_set_batch_invariant(int on);
int di_cuda_set_batch_invariant_live(int on); /* backend.h di_backend_set_batch_invariant_live */
/* Drop the step plan's recorded graphs, keeping the plan enabled (cu_plan.c; the next step of each
 * shape records again). */
void cu_plan_drop_graphs(cu_exec *c);
__typeof__(di_backend_dq_new) di_cuda_dq_new;
__typeof__(di_backend_dq_free) di_cuda_dq_free;
__typeof__(di_backend_dq_begin) di_cuda_dq_begin;
__typeof__(di_backend_dq_feed) di_cuda_dq_feed;
__typeof__(di_backend_dq_sample) di_cuda_dq_sample;
__typeof__(di_backend_dq_end) di_cuda_dq_end;
__typeof__(di_backend_dq_finish) di_cuda_dq_finish;
__typeof__(di_backend_copy_gbs) di_cuda_copy_gbs;
__typeof__(di_backend_fp8_tflops) di_cuda_fp8_tflops;
__typeof__(di_backend_mem_info) di_cuda_mem_info;

/* cu_slab.c: device allocations of 1..64 MiB that are not whole 2 MiB granules, carved from
 * 256 MiB slabs (the allocator's dev_alloc / dev_free), one set per device context (cu_exec.c). */
typedef struct cu_slabs {
    struct cu_slab *v; /* sorted by base */
    int n, cap, cur;   /* cur: the slab being filled, -1 none */
} cu_slabs;
int cu_slab_wants(size_t bytes);
void *cu_slab_alloc(cu_slabs *S, size_t bytes);
int cu_slab_free(cu_slabs *S, void *p); /* 1 when p was a slab piece (then freed) */
void cu_slabs_release(cu_slabs *S);     /* the set's list freed once every piece was */

#endif
