/*
 * The NCCL communicator (src/parallel/nccl.c, comm.h) on the GPUs of this
 * host: one thread per GPU as a rank; all-to-all-v with a distinct size per
 * (sender, receiver) pair, all-gather-v in place and the barrier, repeated
 * so that buffers are reused; every received byte checked. Needs two GPUs
 * and libnccl.so.2 (SKIP otherwise, with the reason).
 */
#include <pthread.h>

#include "gpu_util.h"
#include "parallel/comm.h"

#define NMAX 8

typedef struct nrank {
    int rank, size;
    const di_nccl_id *id;
    int ok;
    char msg[256];
} nrank;

static int sync_stream(void *ctx, void *stream) {
    (void)ctx;
    return cudaStreamSynchronize((cudaStream_t)stream) != cudaSuccess;
}

static void *rank_main(void *p) {
    nrank *r = p;
    int me = r->rank, S = r->size;
    cudaStream_t stream = NULL;
    unsigned char *dsend = NULL, *drecv = NULL, *dgat = NULL, *scratch = NULL;
    di_comm *c = NULL;
    di_error err = {0};
    r->ok = 0;
    if (cudaSetDevice(me) != cudaSuccess || cudaStreamCreate(&stream) != cudaSuccess ||
        cudaMalloc((void **)&dsend, 4096) != cudaSuccess || cudaMalloc((void **)&drecv, 4096) != cudaSuccess ||
        cudaMalloc((void **)&dgat, 1024) != cudaSuccess || cudaMalloc((void **)&scratch, 4 * NMAX) != cudaSuccess) {
        snprintf(r->msg, sizeof r->msg, "rank %d: CUDA setup failed", me);
        goto done;
    }
    di_nccl_params prm = {.rank = me, .size = S, .id = r->id, .stream = stream, .sync = sync_stream, .scratch = scratch};
    if (di_comm_nccl_create(&prm, &c, &err)) {
        snprintf(r->msg, sizeof r->msg, "rank %d: %.200s", me, err.msg);
        goto done;
    }
    r->ok = 1;
    for (int round = 0; round < 20 && r->ok; round++) {
        unsigned char send[4096], recv[4096], gat[1024];
        size_t sb[NMAX], so[NMAX], rb[NMAX], ro[NMAX], gb[NMAX], go[NMAX], at = 0, rat = 0, gat_at = 0;
        for (int q = 0; q < S; q++) {
            so[q] = at, sb[q] = (size_t)(me + 1) * (size_t)(q + 3);
            memset(send + at, 16 * me + q + round, sb[q]);
            at += sb[q];
            ro[q] = rat, rb[q] = (size_t)(q + 1) * (size_t)(me + 3);
            rat += rb[q];
            go[q] = gat_at, gb[q] = (size_t)q + 5;
            gat_at += gb[q];
        }
        memset(gat, 0xee, sizeof gat);
        memset(gat + go[me], me + round, gb[me]);
        if (cudaMemcpy(dsend, send, at, cudaMemcpyHostToDevice) != cudaSuccess ||
            cudaMemcpy(dgat, gat, gat_at, cudaMemcpyHostToDevice) != cudaSuccess) {
            r->ok = 0;
            break;
        }
        if (di_comm_alltoallv(c, dsend, sb, so, drecv, rb, ro, &err) ||
            di_comm_allgatherv(c, dgat + go[me], gb[me], dgat, gb, go, &err) || di_comm_barrier(c, &err)) {
            snprintf(r->msg, sizeof r->msg, "rank %d: %.200s", me, err.msg);
            r->ok = 0;
            break;
        }
        if (cudaMemcpy(recv, drecv, rat, cudaMemcpyDeviceToHost) != cudaSuccess ||
            cudaMemcpy(gat, dgat, gat_at, cudaMemcpyDeviceToHost) != cudaSuccess) {
            r->ok = 0;
            break;
        }
        for (int q = 0; q < S; q++) {
            for (size_t i = 0; i < rb[q]; i++) r->ok &= recv[ro[q] + i] == (unsigned char)(16 * q + me + round);
            for (size_t i = 0; i < gb[q]; i++) r->ok &= gat[go[q] + i] == (unsigned char)(q + round);
        }
        if (!r->ok) snprintf(r->msg, sizeof r->msg, "rank %d round %d: wrong bytes received", me, round);
    }
done:
    di_comm_free(c);
    cudaFree(dsend), cudaFree(drecv), cudaFree(dgat), cudaFree(scratch);
    if (stream) cudaStreamDestroy(stream);
    return NULL;
}

TEST(nccl_comm_alltoallv_allgatherv_barrier) {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess || n < 2) {
        SKIP("needs 2 GPUs (found %d)", n);
    }
    if (n > NMAX) n = NMAX;
    di_error err = {0};
    if (di_nccl_load(NULL, &err)) {
        SKIP("%s", err.msg);
    }
    di_nccl_id id;
    CHECK_MSG(di_nccl_unique_id(&id, &err) == DEEPINFER_OK, "%s", err.msg);
    nrank ranks[NMAX];
    pthread_t th[NMAX];
    for (int r = 0; r < n; r++) {
        ranks[r] = (nrank){.rank = r, .size = n, .id = &id};
        CHECK(pthread_create(&th[r], NULL, rank_main, &ranks[r]) == 0);
    }
    for (int r = 0; r < n; r++) pthread_join(th[r], NULL);
    for (int r = 0; r < n; r++) CHECK_MSG(ranks[r].ok, "%s", ranks[r].msg);
}
