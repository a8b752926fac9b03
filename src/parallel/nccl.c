/*
 * nccl.c — the communicator over NCCL, loaded at run time (comm.h).
 *
 * libnccl.so.2 is dlopen'ed like ICU (util/icu_loader.c), so deepinfer
 * builds without NCCL's headers and starts where NCCL is absent; the few
 * symbols used are declared here with NCCL's documented signatures.
 * All-to-all-v and all-gather-v are ncclSend / ncclRecv pairs in one
 * ncclGroupStart / ncclGroupEnd group; the barrier is an ncclAllGather of
 * one int per rank. The blocking collectives wait for their stream (the
 * caller's sync) before they return, so buffers may be reused at once; the
 * stream-ordered ones (comm.h di_comm_alltoallv_async) only enqueue.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "parallel/comm.h"
#include "util/env.h"

/* NCCL's ABI (nccl.h): ncclResult_t is an int enum with ncclSuccess = 0,
 * ncclDataType_t an int enum with ncclUint8 = 1, ncclComm_t an opaque
 * pointer, ncclUniqueId a 128-byte struct passed by value. */
typedef int nccl_result;
typedef void *nccl_comm;
typedef struct nccl_uid {
    char internal[DI_NCCL_ID_BYTES];
} nccl_uid;
enum { NCCL_SUCCESS = 0, NCCL_UINT8 = 1 };

typedef struct nccl_api {
    nccl_result (*GetUniqueId)(nccl_uid *id);
    nccl_result (*CommInitRank)(nccl_comm *comm, int nranks, nccl_uid id, int rank);
    nccl_result (*CommDestroy)(nccl_comm comm);
    nccl_result (*Send)(const void *buf, size_t count, int dtype, int peer, nccl_comm comm, void *stream);
    nccl_result (*Recv)(void *buf, size_t count, int dtype, int peer, nccl_comm comm, void *stream);
    nccl_result (*AllGather)(const void *send, void *recv, size_t count, int dtype, nccl_comm comm, void *stream);
    nccl_result (*GroupStart)(void);
    nccl_result (*GroupEnd)(void);
    const char *(*GetErrorString)(nccl_result r);
} nccl_api;

#define NEED_NCCL "multi-GPU runs need NCCL (libnccl.so.2, part of the CUDA toolkit's NCCL package): install it or set DEEPINFER_NCCL_LIB=/path/to/libnccl.so.2"

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static int g_tried;
static deepinfer_status g_status;
static char g_msg[sizeof(((di_error *)0)->msg)];
static nccl_api g_api;

static deepinfer_status load_locked(const char *lib, di_error *err) {
    if (!lib) lib = di_env(DI_ENV_NCCL_LIB);
    if (!lib) lib = "libnccl.so.2";
    void *h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        const char *why = dlerror();
        return di_error_set(err, DEEPINFER_ERR_NOT_FOUND, "%s: %s (%s)", lib, why ? why : "cannot be opened", NEED_NCCL);
    }
    static const struct {
        const char *name;
        size_t off;
    } syms[] = {
        {"ncclGetUniqueId", offsetof(nccl_api, GetUniqueId)}, {"ncclCommInitRank", offsetof(nccl_api, CommInitRank)},
        {"ncclCommDestroy", offsetof(nccl_api, CommDestroy)}, {"ncclSend", offsetof(nccl_api, Send)},
        {"ncclRecv", offsetof(nccl_api, Recv)},               {"ncclAllGather", offsetof(nccl_api, AllGather)},
        {"ncclGroupStart", offsetof(nccl_api, GroupStart)},   {"ncclGroupEnd", offsetof(nccl_api, GroupEnd)},
        {"ncclGetErrorString", offsetof(nccl_api, GetErrorString)},
    };
    nccl_api api;
    for (size_t i = 0; i < sizeof syms / sizeof syms[0]; i++) {
        void *f = dlsym(h, syms[i].name);
        if (!f) {
            dlclose(h);
            return di_error_set(err, DEEPINFER_ERR_UNSUPPORTED, "%s has no %s (NCCL 2.7 or later is needed)", lib,
                                syms[i].name);
        }
        memcpy((char *)&api + syms[i].off, &f, sizeof f);
    }
    g_api = api;
    return DEEPINFER_OK;
}

deepinfer_status di_nccl_load(const char *lib, di_error *err) {
    pthread_mutex_lock(&g_mu);
    if (!g_tried) {
        /* NVLink multicast stays off; set once here, before rank threads init their communicators */
        if (!di_env(DI_ENV_NCCL_NVLS)) setenv(di_env_name(DI_ENV_NCCL_NVLS), "0", 0);
        di_error e = {0};
        g_status = load_locked(lib, &e);
        snprintf(g_msg, sizeof g_msg, "%s", e.msg);
        g_tried = 1;
    }
    deepinfer_status st = g_status;
    pthread_mutex_unlock(&g_mu);
    if (st) return di_error_set(err, st, "%s", g_msg);
    return DEEPINFER_OK;
}

static deepinfer_status nccl_fail(nccl_result r, const char *what, di_error *err) {
    return di_error_set(err, DEEPINFER_ERR_INTERNAL, "NCCL %s: %s", what,
                        g_api.GetErrorString ? g_api.GetErrorString(r) : "error");
}

deepinfer_status di_nccl_unique_id(di_nccl_id *id, di_error *err) {
    deepinfer_status st = di_nccl_load(NULL, err);
    if (st) return st;
    nccl_uid u;
    nccl_result r = g_api.GetUniqueId(&u);
    if (r != NCCL_SUCCESS) return nccl_fail(r, "ncclGetUniqueId", err);
    memcpy(id->bytes, u.internal, sizeof u.internal);
    return DEEPINFER_OK;
}

typedef struct nccl_impl {
    nccl_comm comm;
    di_nccl_params p;
} nccl_impl;

static deepinfer_status wait_stream(nccl_impl *n, di_error *err) {
    if (n->p.sync && n->p.sync(n->p.sync_ctx, n->p.stream))
        return di_error_set(err, DEEPINFER_ERR_INTERNAL, "NCCL: the collective's stream failed");
    return DEEPINFER_OK;
}

static deepinfer_status nc_barrier(di_comm *c, di_error *err) {
    nccl_impl *n = c->impl;
    nccl_result r = g_api.AllGather((char *)n->p.scratch + 4 * (size_t)c->rank, n->p.scratch, 4, NCCL_UINT8, n->comm,
                                    n->p.stream);
    if (r != NCCL_SUCCESS) return nccl_fail(r, "ncclAllGather (barrier)", err);
    return wait_stream(n, err);
}

/* The Send / Recv group of an all-to-all-v, enqueued on the stream; wait: then waited for. */
static deepinfer_status a2a(di_comm *c, const void *send, const size_t *send_bytes, const size_t *send_off, void *recv,
                            const size_t *recv_bytes, const size_t *recv_off, int wait, di_error *err) {
    nccl_impl *n = c->impl;
    nccl_result r = g_api.GroupStart(), r2;
    for (int p = 0; r == NCCL_SUCCESS && p < c->size; p++) {
        if (send_bytes[p])
            r = g_api.Send((const char *)send + send_off[p], send_bytes[p], NCCL_UINT8, p, n->comm, n->p.stream);
        if (r == NCCL_SUCCESS && recv_bytes[p])
            r = g_api.Recv((char *)recv + recv_off[p], recv_bytes[p], NCCL_UINT8, p, n->comm, n->p.stream);
    }
    r2 = g_api.GroupEnd(); /* always closes the group */
    if (r != NCCL_SUCCESS || r2 != NCCL_SUCCESS) return nccl_fail(r ? r : r2, "all-to-all-v (ncclSend/ncclRecv)", err);
    return wait ? wait_stream(n, err) : DEEPINFER_OK;
}

static deepinfer_status agv(di_comm *c, const void *send, size_t bytes, void *recv, const size_t *recv_bytes,
                            const size_t *recv_off, int wait, di_error *err) {
    nccl_impl *n = c->impl;
    nccl_result r = g_api.GroupStart(), r2;
    for (int p = 0; r == NCCL_SUCCESS && p < c->size; p++) {
        if (p == c->rank) continue; /* own part: copied below when not in place */
        if (bytes) r = g_api.Send(send, bytes, NCCL_UINT8, p, n->comm, n->p.stream);
        if (r == NCCL_SUCCESS && recv_bytes[p])
            r = g_api.Recv((char *)recv + recv_off[p], recv_bytes[p], NCCL_UINT8, p, n->comm, n->p.stream);
    }
    /* own part: a send to self (NCCL allows it) unless it is in place */
    char *own = (char *)recv + recv_off[c->rank];
    if (r == NCCL_SUCCESS && bytes && own != (const char *)send) {
        r = g_api.Send(send, bytes, NCCL_UINT8, c->rank, n->comm, n->p.stream);
        if (r == NCCL_SUCCESS) r = g_api.Recv(own, bytes, NCCL_UINT8, c->rank, n->comm, n->p.stream);
    }
    r2 = g_api.GroupEnd();
    if (r != NCCL_SUCCESS || r2 != NCCL_SUCCESS) return nccl_fail(r ? r : r2, "all-gather-v (ncclSend/ncclRecv)", err);
    return wait ? wait_stream(n, err) : DEEPINFER_OK;
}

static deepinfer_status nc_alltoallv(di_comm *c, const void *send, const size_t *sb, const size_t *so, void *recv,
                                     const size_t *rb, const size_t *ro, di_error *err) {
    return a2a(c, send, sb, so, recv, rb, ro, 1, err);
}

static deepinfer_status nc_alltoallv_async(di_comm *c, const void *send, const size_t *sb, const size_t *so,
                                           void *recv, const size_t *rb, const size_t *ro, di_error *err) {
    return a2a(c, send, sb, so, recv, rb, ro, 0, err);
}

static deepinfer_status nc_allgatherv(di_comm *c, const void *send, size_t bytes, void *recv, const size_t *rb,
                                      const size_t *ro, di_error *err) {
    return agv(c, send, bytes, recv, rb, ro, 1, err);
}

static deepinfer_status nc_allgatherv_async(di_comm *c, const void *send, size_t bytes, void *recv, const size_t *rb,
                                            const size_t *ro, di_error *err) {
    return agv(c, send, bytes, recv, rb, ro, 0, err);
}

static void nc_free(di_comm *c) {
    nccl_impl *n = c->impl;
    if (n && n->comm) g_api.CommDestroy(n->comm);
    free(n);
    free(c);
}

static const di_comm_vt k_nccl = {nc_barrier, nc_alltoallv, nc_allgatherv, nc_free, nc_alltoallv_async,
                                  nc_allgatherv_async};

deepinfer_status di_comm_nccl_create(const di_nccl_params *p, di_comm **out, di_error *err) {
    *out = NULL;
    if (!p || !p->id || p->size < 1 || p->rank < 0 || p->rank >= p->size || !p->scratch)
        return di_error_set(err, DEEPINFER_ERR_INVALID_ARGUMENT,
                            "NCCL communicator: needs an id, a scratch buffer and 0 <= rank < size");
    deepinfer_status st = di_nccl_load(NULL, err);
    if (st) return st;
    pthread_mutex_lock(&g_mu);
    if (!di_env(DI_ENV_NCCL_NVLS)) setenv(di_env_name(DI_ENV_NCCL_NVLS), "0", 0); /* NVLink multicast stays off */
    pthread_mutex_unlock(&g_mu);
    di_comm *c = calloc(1, sizeof *c);
    nccl_impl *n = calloc(1, sizeof *n);
    if (!c || !n) {
        free(c), free(n);
        return di_error_set(err, DEEPINFER_ERR_OUT_OF_MEMORY, "NCCL communicator: out of memory");
    }
    n->p = *p;
    nccl_uid u;
    memcpy(u.internal, p->id->bytes, sizeof u.internal);
    nccl_result r = g_api.CommInitRank(&n->comm, p->size, u, p->rank);
    if (r != NCCL_SUCCESS) {
        free(c), free(n);
        return nccl_fail(r, "ncclCommInitRank", err);
    }
    *c = (di_comm){.rank = p->rank, .size = p->size, .vt = &k_nccl, .impl = n};
    *out = c;
    return DEEPINFER_OK;
}
