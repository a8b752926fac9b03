/* cu_queue.c — the device side of the engine's queue (ops/backend.h
 * di_backend_dq_*, docs/cuda-backend.md §8): the sampler on the device
 * (dic_sample_rows: the host sampler's token), the next step's tokens taken
 * from the previous step's sampled ids (or a drafter's ids held for it) on
 * the device (dic_feed_tokens), and
 * the device time of every step (events before its first and after its
 * last device work).
 *
 * Everything runs on the exec's stream, in submission order. Step n uses
 * buffer slot n & 1 (pinned host staging, device ids) and event pair
 * n & 3; the engine finishes step n before it begins step n + 2, so a slot
 * is never rewritten while a copy out of it may still run, and the end mark
 * of step n - 1 is still the one recorded for it when step n finishes. */
#include <stdlib.h>
#include <string.h>

#include "ops/backend.h"
#include "ops/cuda/cu_glue.h"

typedef struct dq_slot {
    int32_t *d_ids, *h_ids;         /* [max_rows]: device, pinned host */
    int32_t *d_feed, *h_feed;       /* [2 * max_rows]: tokens then src */
    unsigned char *d_stage, *h_stage; /* sampler params + their arrays */
    size_t stage_cap;
} dq_slot;

struct di_backend_dq {
    di_exec *x;
    int max_rows, V;
    dq_slot slot[2];
    cudaEvent_t start[4], end[4];
    uint64_t started[4], ended[4];  /* the step whose start / end mark event pair i holds (0: none) */
    void *scratch;                  /* k_sample's per-row scratch */
    size_t scratch_cap;
};

static deepinfer_status cuda_fail(di_error *err, cudaError_t e, const char *what) {
    return di_error_set(err, DEEPINFER_ERR_INTERNAL, "CUDA device queue: %s: %s", what, cudaGetErrorString(e));
}

void di_cuda_dq_free(di_backend_dq *q) {
    if (!q) return;
    cudaStreamSynchronize(cu_of(q->x)->dc.stream);
    for (int i = 0; i < 2; i++) {
        dq_slot *s = &q->slot[i];
        if (s->d_ids) cudaFree(s->d_ids);
        if (s->h_ids) cudaFreeHost(s->h_ids);
        if (s->d_feed) cudaFree(s->d_feed);
        if (s->h_feed) cudaFreeHost(s->h_feed);
        if (s->d_stage) cudaFree(s->d_stage);
        if (s->h_stage) cudaFreeHost(s->h_stage);
    }
    for (int i = 0; i < 4; i++) {
        if (q->start[i]) cudaEventDestroy(q->start[i]);
        if (q->end[i]) cudaEventDestroy(q->end[i]);
    }
    if (q->scratch) cudaFree(q->scratch);
    free(q);
}

deepinfer_status di_cuda_dq_new(di_exec *x, int max_rows, int vocab, di_backend_dq **out, di_error *err) {
    *out = NULL;
    if (!di_exec_on_device(x)) return di_error_set(err, DEEPINFER_ERR_UNSUPPORTED, "device queue: not a CUDA exec");
    if (max_rows < 1 || vocab < 1)
        return di_error_set(err, DEEPINFER_ERR_INVALID_ARGUMENT, "device queue: %d rows, vocabulary %d", max_rows, vocab);
    di_backend_dq *q = calloc(1, sizeof *q);
    if (!q) return di_error_set(err, DEEPINFER_ERR_OUT_OF_MEMORY, "device queue: out of memory");
    q->x = x;
    q->max_rows = max_rows;
    q->V = vocab;
    size_t n = (size_t)max_rows;
    cudaError_t e = cudaSuccess;
    for (int i = 0; i < 2 && e == cudaSuccess; i++) {
        dq_slot *s = &q->slot[i];
        e = cudaMalloc((void **)&s->d_ids, n * 4);
        if (e == cudaSuccess) e = cudaHostAlloc((void **)&s->h_ids, n * 4, cudaHostAllocDefault);
        if (e == cudaSuccess) e = cudaMalloc((void **)&s->d_feed, 2 * n * 4);
        if (e == cudaSuccess) e = cudaHostAlloc((void **)&s->h_feed, 2 * n * 4, cudaHostAllocDefault);
    }
    for (int i = 0; i < 4 && e == cudaSuccess; i++) {
        e = cudaEventCreate(&q->start[i]);
        if (e == cudaSuccess) e = cudaEventCreate(&q->end[i]);
    }
    if (e != cudaSuccess) {
        di_cuda_dq_free(q);
        return cuda_fail(err, e, "allocation");
    }
    *out = q;
    return DEEPINFER_OK;
}

void di_cuda_dq_begin(di_backend_dq *q, uint64_t seq) {
    cu_exec *c = cu_of(q->x);
    cu_check(c, cudaEventRecord(q->start[seq & 3], c->dc.stream), "device queue: step start event");
    q->started[seq & 3] = seq;
}

void di_cuda_dq_end(di_backend_dq *q, uint64_t seq) {
    cu_exec *c = cu_of(q->x);
    cu_check(c, cudaEventRecord(q->end[seq & 3], c->dc.stream), "device queue: step end event");
    q->ended[seq & 3] = seq;
}

deepinfer_status di_cuda_dq_feed(di_backend_dq *q, uint64_t seq, int n, const int32_t *tokens, const int32_t *src,
                                 const int32_t *from, int32_t *dtok, di_error *err) {
    cu_exec *c = cu_of(q->x);
    if (n < 1 || n > q->max_rows || (seq < 2 && !from))
        return di_error_set(err, DEEPINFER_ERR_INTERNAL, "device queue: feed of %d rows at step %llu", n,
                            (unsigned long long)seq);
    dq_slot *s = &q->slot[seq & 1];
    const int32_t *prev = from ? from : q->slot[(seq - 1) & 1].d_ids;
    memcpy(s->h_feed, tokens, (size_t)n * 4);
    memcpy(s->h_feed + n, src, (size_t)n * 4);
    cu_check(c, cudaMemcpyAsync(s->d_feed, s->h_feed, (size_t)n * 8, cudaMemcpyHostToDevice, c->dc.stream),
             "device queue: tokens copy");
    dic_pdl_disarm(); /* the kernel follows a copy */
    cu_check(c, dic_feed_tokens(&c->dc, n, s->d_feed, prev, dtok), "dic_feed_tokens");
    if (c->err != cudaSuccess) return cuda_fail(err, c->err, c->err_op);
    return DEEPINFER_OK;
}

static size_t al16(size_t v) { return (v + 15) & ~(size_t)15; }

/* Bytes of one step's sampler staging: the params, then each row's arrays. */
static size_t stage_bytes(const di_backend_sample_row *rows, int M, size_t mask_bytes) {
    size_t b = al16((size_t)M * sizeof(dic_sample_params));
    for (int i = 0; i < M; i++) {
        const di_backend_sample_row *r = &rows[i];
        b += al16((size_t)r->n_stop_ids * 4);
        if (r->repetition_penalty != 1.0f) b += al16((size_t)r->n_prompt * 4);
        if (r->repetition_penalty != 1.0f || r->presence_penalty != 0.0f || r->frequency_penalty != 0.0f)
            b += al16((size_t)r->n_output * 4);
        if (r->allow_mask && !(i && rows[i - 1].allow_mask == r->allow_mask)) b += al16(mask_bytes);
    }
    return b;
}

static cudaError_t grow(dq_slot *s, size_t need, cudaStream_t st) {
    if (need <= s->stage_cap) return cudaSuccess;
    cudaStreamSynchronize(st); /* a copy out of the old buffers may still run */
    if (s->d_stage) cudaFree(s->d_stage);
    if (s->h_stage) cudaFreeHost(s->h_stage);
    s->d_stage = NULL, s->h_stage = NULL, s->stage_cap = 0;
    size_t cap = need + need / 2 + 4096;
    cudaError_t e = cudaMalloc((void **)&s->d_stage, cap);
    if (e == cudaSuccess) e = cudaHostAlloc((void **)&s->h_stage, cap, cudaHostAllocDefault);
    if (e == cudaSuccess) s->stage_cap = cap;
    return e;
}

deepinfer_status di_cuda_dq_sample(di_backend_dq *q, uint64_t seq, const float *dlogits, int M,
                                   const di_backend_sample_row *rows, di_error *err) {
    cu_exec *c = cu_of(q->x);
    cudaStream_t st = c->dc.stream;
    if (M < 1 || M > q->max_rows)
        return di_error_set(err, DEEPINFER_ERR_INTERNAL, "device queue: %d sampled rows (1..%d)", M, q->max_rows);
    dq_slot *s = &q->slot[seq & 1];
    size_t mask_bytes = (size_t)(q->V + 31) / 32 * 4;
    cudaError_t e = grow(s, stage_bytes(rows, M, mask_bytes), st);
    size_t need_scr = dic_sample_rows_scratch(M, q->V);
    if (e == cudaSuccess && need_scr > q->scratch_cap) {
        cudaStreamSynchronize(st); /* the previous step's sampler may still use it */
        if (q->scratch) cudaFree(q->scratch);
        q->scratch = NULL, q->scratch_cap = 0;
        e = cudaMalloc(&q->scratch, need_scr);
        if (e == cudaSuccess) q->scratch_cap = need_scr;
    }
    if (e != cudaSuccess) return cuda_fail(err, e, "sampler buffers");
    /* the params with device pointers into the same staging block */
    dic_sample_params *P = (dic_sample_params *)s->h_stage;
    size_t off = al16((size_t)M * sizeof *P), mask_off = 0;
#define DQ_PUT(ptr, bytes) \
    (memcpy(s->h_stage + off, (ptr), (bytes)), off += al16(bytes), (const void *)(s->d_stage + off - al16(bytes)))
    for (int i = 0; i < M; i++) {
        const di_backend_sample_row *r = &rows[i];
        dic_sample_params *p = &P[i];
        memset(p, 0, sizeof *p);
        p->temperature = r->temperature;
        p->top_k = r->top_k;
        p->top_p = r->top_p;
        p->min_p = r->min_p;
        p->log_min_p = r->log_min_p;
        p->repetition_penalty = r->repetition_penalty;
        p->presence_penalty = r->presence_penalty;
        p->frequency_penalty = r->frequency_penalty;
        p->min_tokens = r->min_tokens;
        p->eos_id = r->eos_id;
        p->n_stop_ids = r->n_stop_ids;
        p->stop_ids = r->n_stop_ids ? DQ_PUT(r->stop_ids, (size_t)r->n_stop_ids * 4) : NULL;
        int rep = r->repetition_penalty != 1.0f;
        int pf = r->presence_penalty != 0.0f || r->frequency_penalty != 0.0f;
        p->n_prompt = rep ? r->n_prompt : 0;
        p->prompt_ids = rep && r->n_prompt ? DQ_PUT(r->prompt_ids, (size_t)r->n_prompt * 4) : NULL;
        p->n_output = r->n_output; /* min_tokens reads the count */
        p->output_ids = (rep || pf) && r->n_output ? DQ_PUT(r->output_ids, (size_t)r->n_output * 4) : NULL;
        if (r->allow_mask) {
            if (!(i && rows[i - 1].allow_mask == r->allow_mask)) {
                mask_off = off;
                DQ_PUT(r->allow_mask, mask_bytes);
            }
            p->allow_mask = (const uint32_t *)(s->d_stage + mask_off);
        }
        p->seed = r->seed;
        p->position = r->position;
        p->stream = r->stream;
        p->purpose = r->purpose;
    }
#undef DQ_PUT
    cu_check(c, cudaMemcpyAsync(s->d_stage, s->h_stage, off, cudaMemcpyHostToDevice, st), "device queue: sampler copy");
    dic_ctx dc = c->dc;
    dc.scratch = q->scratch;
    dc.scratch_cap = q->scratch_cap;
    dc.join = NULL;
    dic_pdl_disarm(); /* after a copy */
    int greedy = 1; /* every row greedy without penalties: the small kernel (same ids) */
    for (int i = 0; i < M; i++)
        greedy = greedy && P[i].temperature == 0.0f && P[i].repetition_penalty == 1.0f &&
                 P[i].presence_penalty == 0.0f && P[i].frequency_penalty == 0.0f;
    cu_check(c,
             (greedy ? dic_sample_rows_greedy : dic_sample_rows)(&dc, M, dlogits, (size_t)q->V, q->V,
                                                                 (const dic_sample_params *)s->d_stage, s->d_ids),
             "dic_sample_rows");
    cu_check(c, cudaMemcpyAsync(s->h_ids, s->d_ids, (size_t)M * 4, cudaMemcpyDeviceToHost, st), "device queue: ids copy");
    dic_pdl_disarm();
    di_cuda_dq_end(q, seq);
    if (c->err != cudaSuccess) return cuda_fail(err, c->err, c->err_op);
    return DEEPINFER_OK;
}

deepinfer_status di_cuda_dq_finish(di_backend_dq *q, uint64_t seq, int M, int32_t *ids, double *busy_s,
                                   double *idle_s, di_error *err) {
    cu_exec *c = cu_of(q->x);
    int i = (int)(seq & 3), p = (int)((seq - 1) & 3);
    cu_check(c, cudaEventSynchronize(q->end[i]), "device queue: step end (synchronize)");
    cu_check(c, cudaGetLastError(), "device queue: step end");
    if (c->err != cudaSuccess)
        return di_error_set(err, DEEPINFER_ERR_INTERNAL, "CUDA: %s: %s", c->err_op, cudaGetErrorString(c->err));
    float busy = 0, idle = 0;
    int timed = q->started[i] == seq && q->ended[i] == seq;
    if (timed && cudaEventElapsedTime(&busy, q->start[i], q->end[i]) != cudaSuccess) busy = 0;
    if (timed && seq > 1 && q->ended[p] == seq - 1 && cudaEventElapsedTime(&idle, q->end[p], q->start[i]) != cudaSuccess)
        idle = 0;
    if (idle < 0) idle = 0; /* the marks' resolution */
    (void)cudaGetLastError(); /* a failed timing query is not the step's failure */
    if (busy_s) *busy_s = busy * 1e-3;
    if (idle_s) *idle_s = idle * 1e-3;
    if (ids && M > 0) memcpy(ids, q->slot[seq & 1].h_ids, (size_t)M * 4);
    return DEEPINFER_OK;
}
