/*
 * cu_glue.h — the CUDA backend's side of the ops vtable (src/ops/dev_ops.h):
 * one cu_exec per di_exec (stream, dic_ctx, host-table staging), shared by
 * cu_exec.c (contexts, allocator, install), cu_ops.c (dense ops) and
 * cu_ops_model.c (device-shaped model ops). Compiled only into CUDA builds.
 */
#ifndef DI_OPS_CUDA_CU_GLUE_H
#define DI_OPS_CUDA_CU_GLUE_H

#include <cuda_runtime_api.h>

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
    char err_op[64];
} cu_exec;

static inline cu_exec *cu_of(const di_exec *x) { return (cu_exec *)x->dev_ctx; }

/* Record a failure of `op` (first one wins). */
void cu_check(cu_exec *c, cudaError_t e, const char *op);
#define CU_CHECK(x, call, op) cu_check(cu_of(x), (call), (op))

/* Host-table staging: start an op's tables, add one (returns its device
 * address), copy them all. NULL src or 0 bytes: NULL. */
void cu_tab_begin(cu_exec *c);
void *cu_tab_put(cu_exec *c, const void *src, size_t bytes);
void cu_tab_flush(cu_exec *c);

/* dic_wmat view of a weight's raw (device) bytes; records an error and
 * returns 0 when the weight has none. */
int cu_wmat(cu_exec *c, const di_wmat *w, dic_wmat *out);

/* The two halves of the ops table. */
void cu_fill_dense_ops(di_dev_ops *t);
void cu_fill_model_ops(di_dev_ops *t);

#endif
