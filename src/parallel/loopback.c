/*
 * loopback.c — the communicator of ranks that are threads of one process
 * (comm.h). A collective publishes each rank's buffers in its slot, meets at
 * a barrier, lets every rank copy what it receives straight out of the
 * senders' buffers, and meets at a second barrier so that no sender returns
 * (and reuses its buffers) while a receiver still reads them. The barrier is
 * a mutex + condition variable with a generation count, so every read of a
 * slot happens after the write that filled it.
 *
 * The device variant (di_comm_loopback_group_dev: ranks on one GPU, tests)
 * makes each receiver's copies with the backend's copier on the receiver's
 * thread and waits for them before the second barrier.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "parallel/comm.h"

typedef struct slot {
    const unsigned char *send;
    const size_t *send_bytes, *send_off; /* all-to-all-v */
    size_t bytes;                        /* all-gather-v */
} slot;

typedef struct group {
    int size;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int arrived;
    unsigned long gen;
    int refs;
    slot *slots;
    di_comm *comms; /* [size] */
    di_comm_copier cp; /* copy NULL: memcpy */
} group;

static void copy_bytes(const group *g, void *dst, const void *src, size_t n) {
    if (g->cp.copy) g->cp.copy(dst, src, n);
    else memcpy(dst, src, n);
}

/* The receiver's copies done (device variant); 0 = done. */
static int copies_wait(const group *g) { return g->cp.wait ? g->cp.wait() : 0; }

static void barrier_wait(group *g) {
    pthread_mutex_lock(&g->mu);
    unsigned long gen = g->gen;
    if (++g->arrived == g->size) {
        g->arrived = 0;
        g->gen++;
        pthread_cond_broadcast(&g->cv);
    } else {
        while (gen == g->gen) pthread_cond_wait(&g->cv, &g->mu);
    }
    pthread_mutex_unlock(&g->mu);
}

static deepinfer_status lb_barrier(di_comm *c, di_error *err) {
    (void)err;
    barrier_wait(c->impl);
    return DEEPINFER_OK;
}

static deepinfer_status lb_alltoallv(di_comm *c, const void *send, const size_t *send_bytes, const size_t *send_off,
                                     void *recv, const size_t *recv_bytes, const size_t *recv_off, di_error *err) {
    group *g = c->impl;
    int me = c->rank, bad = -1;
    g->slots[me] = (slot){.send = send, .send_bytes = send_bytes, .send_off = send_off};
    barrier_wait(g);
    for (int r = 0; r < g->size; r++) {
        const slot *s = &g->slots[r];
        size_t n = s->send_bytes[me];
        if (n != recv_bytes[r]) {
            if (bad < 0) bad = r;
            continue;
        }
        if (n) copy_bytes(g, (unsigned char *)recv + recv_off[r], s->send + s->send_off[me], n);
    }
    size_t sent = bad >= 0 ? g->slots[bad].send_bytes[me] : 0;
    int failed = copies_wait(g);
    barrier_wait(g);
    if (bad >= 0)
        return di_error_set(err, DEEPINFER_ERR_INTERNAL, "all-to-all-v: rank %d expects %zu bytes from rank %d, which sends %zu",
                            me, recv_bytes[bad], bad, sent);
    if (failed) return di_error_set(err, DEEPINFER_ERR_INTERNAL, "all-to-all-v: rank %d's device copies failed", me);
    return DEEPINFER_OK;
}

static deepinfer_status lb_allgatherv(di_comm *c, const void *send, size_t bytes, void *recv, const size_t *recv_bytes,
                                      const size_t *recv_off, di_error *err) {
    group *g = c->impl;
    int me = c->rank, bad = -1;
    g->slots[me] = (slot){.send = send, .bytes = bytes};
    barrier_wait(g);
    for (int r = 0; r < g->size; r++) {
        const slot *s = &g->slots[r];
        if (s->bytes != recv_bytes[r]) {
            if (bad < 0) bad = r;
            continue;
        }
        unsigned char *dst = (unsigned char *)recv + recv_off[r];
        if (s->bytes && dst != s->send) copy_bytes(g, dst, s->send, s->bytes); /* in place: already there */
    }
    size_t sent = bad >= 0 ? g->slots[bad].bytes : 0;
    int failed = copies_wait(g);
    barrier_wait(g);
    if (bad >= 0)
        return di_error_set(err, DEEPINFER_ERR_INTERNAL, "all-gather-v: rank %d expects %zu bytes from rank %d, which sends %zu",
                            me, recv_bytes[bad], bad, sent);
    if (failed) return di_error_set(err, DEEPINFER_ERR_INTERNAL, "all-gather-v: rank %d's device copies failed", me);
    return DEEPINFER_OK;
}

static void group_unref(group *g) {
    pthread_mutex_lock(&g->mu);
    int last = --g->refs == 0;
    pthread_mutex_unlock(&g->mu);
    if (!last) return;
    pthread_mutex_destroy(&g->mu);
    pthread_cond_destroy(&g->cv);
    free(g->slots);
    free(g->comms);
    free(g);
}

static void lb_free(di_comm *c) { group_unref(c->impl); }

static const di_comm_vt k_loopback = {lb_barrier, lb_alltoallv, lb_allgatherv, lb_free, NULL, NULL}; /* blocking only */

int di_comm_is_loopback(const di_comm *c) { return c && c->vt == &k_loopback; }

deepinfer_status di_comm_loopback_group(int size, di_comm **out, di_error *err) {
    return di_comm_loopback_group_dev(size, NULL, out, err);
}

deepinfer_status di_comm_loopback_group_dev(int size, const di_comm_copier *cp, di_comm **out, di_error *err) {
    if (size < 1) return di_error_set(err, DEEPINFER_ERR_INVALID_ARGUMENT, "loopback communicator: %d ranks (at least 1)", size);
    group *g = calloc(1, sizeof *g);
    if (g) {
        g->slots = calloc((size_t)size, sizeof *g->slots);
        g->comms = calloc((size_t)size, sizeof *g->comms);
    }
    if (!g || !g->slots || !g->comms) {
        if (g) free(g->slots), free(g->comms);
        free(g);
        return di_error_set(err, DEEPINFER_ERR_OUT_OF_MEMORY, "loopback communicator: out of memory");
    }
    g->size = g->refs = size;
    if (cp) g->cp = *cp;
    pthread_mutex_init(&g->mu, NULL);
    pthread_cond_init(&g->cv, NULL);
    for (int r = 0; r < size; r++) {
        g->comms[r] = (di_comm){.rank = r, .size = size, .vt = &k_loopback, .impl = g};
        out[r] = &g->comms[r];
    }
    return DEEPINFER_OK;
}
