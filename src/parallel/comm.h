/*
 * comm.h — the communicator of a group of ranks (docs/DESIGN.md "Parallel").
 *
 * Narrow on purpose: rank, size, barrier, all-to-all-v and all-gather-v of
 * byte buffers. There is no floating-point all-reduce: every sum the model
 * makes across ranks is formed by one rank in a fixed order (moe_ep.h), so
 * results never depend on a reduction tree.
 *
 * Every call is collective: all ranks of the communicator make the same
 * calls in the same order, each from its own thread (loopback, and NCCL
 * ranks of one process: one thread and device each) or process (NCCL).
 * Buffers are host memory for the loopback communicator, device memory for
 * NCCL, either for the device loopback variant.
 *
 * Implementations: di_comm_loopback_* (ranks are threads of one process,
 * shared-memory exchange: the CPU backend and the tests) and di_comm_nccl_*
 * (libnccl.so.2 loaded at run time, nccl.c).
 */
#ifndef DI_PARALLEL_COMM_H
#define DI_PARALLEL_COMM_H

#include <stddef.h>

#include "util/error.h"

typedef struct di_comm di_comm;

/* What an implementation provides (the calls below check arguments first). */
typedef struct di_comm_vt {
    deepinfer_status (*barrier)(di_comm *c, di_error *err);
    deepinfer_status (*alltoallv)(di_comm *c, const void *send, const size_t *send_bytes, const size_t *send_off,
                                  void *recv, const size_t *recv_bytes, const size_t *recv_off, di_error *err);
    deepinfer_status (*allgatherv)(di_comm *c, const void *send, size_t bytes, void *recv, const size_t *recv_bytes,
                                   const size_t *recv_off, di_error *err);
    void (*free)(di_comm *c);
    /* stream-ordered variants (di_comm_alltoallv_async); NULL: the blocking calls serve */
    deepinfer_status (*alltoallv_async)(di_comm *c, const void *send, const size_t *send_bytes,
                                        const size_t *send_off, void *recv, const size_t *recv_bytes,
                                        const size_t *recv_off, di_error *err);
    deepinfer_status (*allgatherv_async)(di_comm *c, const void *send, size_t bytes, void *recv,
                                         const size_t *recv_bytes, const size_t *recv_off, di_error *err);
} di_comm_vt;

struct di_comm {
    int rank, size;
    const di_comm_vt *vt;
    void *impl;
};

static inline int di_comm_rank(const di_comm *c) { return c ? c->rank : 0; }
static inline int di_comm_size(const di_comm *c) { return c ? c->size : 1; }
/* 1 for the loopback groups (ranks as threads of this process, on the CPU or sharing one device). */
int di_comm_is_loopback(const di_comm *c);

/* Every rank waits until all have arrived. */
deepinfer_status di_comm_barrier(di_comm *c, di_error *err);

/* All-to-all-v: this rank sends send_bytes[r] bytes at send + send_off[r]
 * to rank r and receives recv_bytes[r] bytes from rank r at recv +
 * recv_off[r] (arrays of size(c); a rank's own pair is copied too).
 * recv_bytes[r] must equal what rank r sends here (an error otherwise).
 * send and recv regions must not overlap. */
deepinfer_status di_comm_alltoallv(di_comm *c, const void *send, const size_t *send_bytes, const size_t *send_off,
                                   void *recv, const size_t *recv_bytes, const size_t *recv_off, di_error *err);

/* All-gather-v: rank r's `bytes` at `send` land at recv + recv_off[r] on
 * every rank (recv_bytes[r] must equal rank r's bytes). `send` may be this
 * rank's own region of `recv` (in place). */
deepinfer_status di_comm_allgatherv(di_comm *c, const void *send, size_t bytes, void *recv, const size_t *recv_bytes,
                                    const size_t *recv_off, di_error *err);

/* Stream-ordered collectives: with a communicator that has them (NCCL on a
 * CUDA rank, src/ops/cuda/cu_comm.c) the exchange is enqueued on the stream
 * of the device the communicator was made on, the stream every exec of that
 * device runs its ops on, and the call returns without waiting: it reads
 * what earlier ops wrote and later ops read what it wrote, with no host
 * synchronisation, so a recorded step (a CUDA graph) may hold it; the host
 * syncs the exec before it reads the results. Byte counts and offsets are
 * host arrays read at the call. A communicator without them (loopback)
 * runs the blocking call: its caller syncs its exec before the call (the
 * exchange reads the buffers at once). di_comm_stream_ordered says which. */
int di_comm_stream_ordered(const di_comm *c);
deepinfer_status di_comm_alltoallv_async(di_comm *c, const void *send, const size_t *send_bytes,
                                         const size_t *send_off, void *recv, const size_t *recv_bytes,
                                         const size_t *recv_off, di_error *err);
deepinfer_status di_comm_allgatherv_async(di_comm *c, const void *send, size_t bytes, void *recv,
                                          const size_t *recv_bytes, const size_t *recv_off, di_error *err);

/* Free one rank's communicator (not collective); safe on NULL. */
void di_comm_free(di_comm *c);

/* ---- loopback: ranks are threads of one process (loopback.c) ----
 * di_comm_loopback_group makes the `size` communicators of one group (out[r]
 * for rank r); each rank's thread uses its own. Free each with di_comm_free
 * after every rank has left its last call (the group goes with the last). */
deepinfer_status di_comm_loopback_group(int size, di_comm **out, di_error *err);

/* The loopback group over device memory (ranks that are threads on one GPU: the tests of the
 * multi-rank device path, ops/backend.h di_backend_comm_loopback_dev): each receiver copies with
 * cp->copy on its own thread (the backend's asynchronous copy on that thread's stream; any mix
 * of host and device pointers) and waits with cp->wait (0 = done) before the collective returns.
 * cp NULL: di_comm_loopback_group. */
typedef struct di_comm_copier {
    void (*copy)(void *dst, const void *src, size_t bytes);
    int (*wait)(void);
} di_comm_copier;
deepinfer_status di_comm_loopback_group_dev(int size, const di_comm_copier *cp, di_comm **out, di_error *err);

/* ---- NCCL (nccl.c): libnccl.so.2 loaded at run time ----
 * `lib` NULL: $DEEPINFER_NCCL_LIB or libnccl.so.2. NCCL_NVLS_ENABLE is set to
 * 0 before the first init unless the user set it (NVLink multicast stays off). */
enum { DI_NCCL_ID_BYTES = 128 };
typedef struct di_nccl_id {
    char bytes[DI_NCCL_ID_BYTES];
} di_nccl_id;

/* Load libnccl (once per process; later calls return the first result). */
deepinfer_status di_nccl_load(const char *lib, di_error *err);
/* The group's id: made by rank 0, given to every rank out of band. */
deepinfer_status di_nccl_unique_id(di_nccl_id *id, di_error *err);
/* This rank's communicator (ncclCommInitRank; the CUDA device must be set on
 * the calling thread). Collectives run on `stream` (a cudaStream_t); the
 * blocking ones are waited for with sync(sync_ctx, stream), which the
 * caller's backend provides (this file does not link CUDA), the
 * stream-ordered ones (di_comm_alltoallv_async) are not. `scratch`: device memory of at
 * least 4 * size bytes (the barrier's all-gather). */
typedef struct di_nccl_params {
    int rank, size;
    const di_nccl_id *id;
    void *stream;
    int (*sync)(void *sync_ctx, void *stream); /* 0 = done */
    void *sync_ctx;
    void *scratch;
} di_nccl_params;
deepinfer_status di_comm_nccl_create(const di_nccl_params *p, di_comm **out, di_error *err);

#endif
