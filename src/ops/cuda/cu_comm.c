/* cu_comm.c — communicators on CUDA devices: a rank over NCCL on the calling thread's device
 * (ops/backend.h di_backend_comm_rank; di_backend_comm_one: a group of one), the NCCL communicator
 * (parallel/nccl.c) on the device's stream (cu_exec.c cu_thread_stream: the stream every exec of the
 * device runs its ops on), with the barrier's scratch; a thin wrapper frees both with it. The
 * blocking exchanges wait for that stream (cudaStreamSynchronize); the stream-ordered ones
 * (comm.h di_comm_alltoallv_async) only enqueue, after the exec's earlier ops and before its later
 * ones, so the MoE exchange needs no host sync (moe_ep.c) and a recorded step may hold it. And the
 * device loopback group (di_backend_comm_loopback_dev, ranks on one device: tests): copies on the
 * calling thread's stream, blocking. */
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "ops/backend.h"
#include "ops/cuda/cu_glue.h"
#include "parallel/comm.h"

typedef struct one {
    di_comm *nccl;
    void *scratch;
} one;

static int sync_stream(void *ctx, void *stream) {
    (void)ctx;
    return cudaStreamSynchronize((cudaStream_t)stream) != cudaSuccess;
}

static deepinfer_status w_barrier(di_comm *c, di_error *err) { return di_comm_barrier(((one *)c->impl)->nccl, err); }

static deepinfer_status w_alltoallv(di_comm *c, const void *send, const size_t *sb, const size_t *so, void *recv,
                                    const size_t *rb, const size_t *ro, di_error *err) {
    return di_comm_alltoallv(((one *)c->impl)->nccl, send, sb, so, recv, rb, ro, err);
}

static deepinfer_status w_allgatherv(di_comm *c, const void *send, size_t bytes, void *recv, const size_t *rb,
                                     const size_t *ro, di_error *err) {
    return di_comm_allgatherv(((one *)c->impl)->nccl, send, bytes, recv, rb, ro, err);
}

/* The next kernel after an NCCL launch starts without a programmatic edge (dic.h dic_pdl_disarm). */
static deepinfer_status w_alltoallv_async(di_comm *c, const void *send, const size_t *sb, const size_t *so, void *recv,
                                          const size_t *rb, const size_t *ro, di_error *err) {
    dic_pdl_disarm();
    return di_comm_alltoallv_async(((one *)c->impl)->nccl, send, sb, so, recv, rb, ro, err);
}

static deepinfer_status w_allgatherv_async(di_comm *c, const void *send, size_t bytes, void *recv, const size_t *rb,
                                           const size_t *ro, di_error *err) {
    dic_pdl_disarm();
    return di_comm_allgatherv_async(((one *)c->impl)->nccl, send, bytes, recv, rb, ro, err);
}

static void w_free(di_comm *c) {
    one *o = c->impl;
    di_comm_free(o->nccl);
    if (o->scratch) cudaFree(o->scratch);
    free(o);
    free(c);
}

static const di_comm_vt WRAP = {w_barrier, w_alltoallv, w_allgatherv, w_free, w_alltoallv_async, w_allgatherv_async};

deepinfer_status di_cuda_comm_rank(const di_nccl_id *id, int rank, int size, di_comm **out, di_error *err) {
    *out = NULL;
    deepinfer_status st = di_nccl_load(NULL, err);
    if (st) return st;
    one *o = calloc(1, sizeof *o);
    di_comm *c = calloc(1, sizeof *c);
    if (!o || !c) {
        free(o), free(c);
        return di_error_set(err, DEEPINFER_ERR_OUT_OF_MEMORY, "out of memory");
    }
    size_t scratch = 4 * (size_t)size > 64 ? 4 * (size_t)size : 64; /* the barrier's all-gather */
    if (cudaMalloc(&o->scratch, scratch) != cudaSuccess) {
        *c = (di_comm){.rank = rank, .size = size, .vt = &WRAP, .impl = o};
        w_free(c);
        return di_error_set(err, DEEPINFER_ERR_INTERNAL, "NCCL communicator: no CUDA scratch");
    }
    di_nccl_params p = {.rank = rank, .size = size, .id = id, .stream = cu_thread_stream(), .sync = sync_stream,
                        .scratch = o->scratch};
    *c = (di_comm){.rank = rank, .size = size, .vt = &WRAP, .impl = o};
    if ((st = di_comm_nccl_create(&p, &o->nccl, err))) {
        w_free(c);
        return st;
    }
    *out = c;
    return DEEPINFER_OK;
}

deepinfer_status di_cuda_comm_one(di_comm **out, di_error *err) {
    *out = NULL;
    deepinfer_status st = di_nccl_load(NULL, err);
    if (st) return st;
    di_nccl_id id;
    if ((st = di_nccl_unique_id(&id, err))) return st;
    return di_cuda_comm_rank(&id, 0, 1, out, err);
}

/* ---- the device loopback group ---- */

static _Thread_local cudaError_t t_copy_err; /* the first failed copy since the last wait */

static void dev_copy(void *dst, const void *src, size_t bytes) {
    cudaError_t e = cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, cu_thread_stream());
    if (e != cudaSuccess && t_copy_err == cudaSuccess) t_copy_err = e;
}

static int dev_wait(void) {
    cudaError_t e = cudaStreamSynchronize(cu_thread_stream());
    int bad = e != cudaSuccess || t_copy_err != cudaSuccess;
    t_copy_err = cudaSuccess;
    return bad;
}

deepinfer_status di_cuda_comm_loopback_dev(int size, di_comm **out, di_error *err) {
    static const di_comm_copier cp = {dev_copy, dev_wait};
    return di_comm_loopback_group_dev(size, &cp, out, err);
}
