/* comm.c — argument checks in front of a communicator's implementation (comm.h). */
#include "parallel/comm.h"

static deepinfer_status check(const di_comm *c, di_error *err) {
    if (!c || !c->vt) return di_error_set(err, DEEPINFER_ERR_INVALID_ARGUMENT, "communicator: none given");
    return DEEPINFER_OK;
}

deepinfer_status di_comm_barrier(di_comm *c, di_error *err) {
    deepinfer_status st = check(c, err);
    return st ? st : c->vt->barrier(c, err);
}

deepinfer_status di_comm_alltoallv(di_comm *c, const void *send, const size_t *send_bytes, const size_t *send_off,
                                   void *recv, const size_t *recv_bytes, const size_t *recv_off, di_error *err) {
    deepinfer_status st = check(c, err);
    if (st) return st;
    if (!send_bytes || !send_off || !recv_bytes || !recv_off)
        return di_error_set(err, DEEPINFER_ERR_INVALID_ARGUMENT, "all-to-all-v: counts and offsets are required");
    return c->vt->alltoallv(c, send, send_bytes, send_off, recv, recv_bytes, recv_off, err);
}

deepinfer_status di_comm_allgatherv(di_comm *c, const void *send, size_t bytes, void *recv, const size_t *recv_bytes,
                                    const size_t *recv_off, di_error *err) {
    deepinfer_status st = check(c, err);
    if (st) return st;
    if (!recv_bytes || !recv_off)
        return di_error_set(err, DEEPINFER_ERR_INVALID_ARGUMENT, "all-gather-v: counts and offsets are required");
    return c->vt->allgatherv(c, send, bytes, recv, recv_bytes, recv_off, err);
}

int di_comm_stream_ordered(const di_comm *c) { return c && c->vt && c->vt->alltoallv_async && c->vt->allgatherv_async; }

deepinfer_status di_comm_alltoallv_async(di_comm *c, const void *send, const size_t *send_bytes,
                                         const size_t *send_off, void *recv, const size_t *recv_bytes,
                                         const size_t *recv_off, di_error *err) {
    if (!di_comm_stream_ordered(c)) return di_comm_alltoallv(c, send, send_bytes, send_off, recv, recv_bytes, recv_off, err);
    if (!send_bytes || !send_off || !recv_bytes || !recv_off)
        return di_error_set(err, DEEPINFER_ERR_INVALID_ARGUMENT, "all-to-all-v: counts and offsets are required");
    return c->vt->alltoallv_async(c, send, send_bytes, send_off, recv, recv_bytes, recv_off, err);
}

deepinfer_status di_comm_allgatherv_async(di_comm *c, const void *send, size_t bytes, void *recv,
                                          const size_t *recv_bytes, const size_t *recv_off, di_error *err) {
    if (!di_comm_stream_ordered(c)) return di_comm_allgatherv(c, send, bytes, recv, recv_bytes, recv_off, err);
    if (!recv_bytes || !recv_off)
        return di_error_set(err, DEEPINFER_ERR_INVALID_ARGUMENT, "all-gather-v: counts and offsets are required");
    return c->vt->allgatherv_async(c, send, bytes, recv, recv_bytes, recv_off, err);
}

void di_comm_free(di_comm *c) {
    if (c && c->vt) c->vt->free(c);
}
