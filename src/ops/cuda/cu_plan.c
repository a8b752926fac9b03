/* cu_plan.c — the step plan and CUDA graphs per step shape (cu_step.h,
 * cu_glue.h struct cu_plan). */
#include <stdlib.h>
#include <string.h>

#include "ops/cuda/cu_glue.h"
#include "ops/cuda/cu_step.h"

#define SINK_BYTES ((size_t)4 << 20)

typedef struct cu_graph {
    uint64_t key, sig;
    size_t bytes;            /* plan bytes of the shape */
    cudaGraph_t g;
    cudaGraphExec_t exec;
} cu_graph;

void cu_plan_mix(cu_exec *c, uint64_t v) { c->plan->sig = (c->plan->sig ^ v) * 1099511628211ull; }
void cu_plan_note(cu_exec *c, const char *op) { cu_plan_mix(c, (uint64_t)(uintptr_t)op); }

static void destroy_graphs(cu_plan *p) {
    for (int i = 0; i < p->ngraphs; i++) {
        if (p->graphs[i].exec) cudaGraphExecDestroy(p->graphs[i].exec);
        if (p->graphs[i].g) cudaGraphDestroy(p->graphs[i].g);
    }
    free(p->graphs);
    p->graphs = NULL;
    p->ngraphs = 0;
}

void cu_plan_drop_graphs(cu_exec *c) {
    if (!c->plan) return;
    cudaStreamSynchronize(c->dc.stream);
    destroy_graphs(c->plan);
}

void cu_plan_free(cu_exec *c) {
    cu_plan *p = c->plan;
    if (!p) return;
    cudaStreamSynchronize(c->dc.stream);
    destroy_graphs(p);
    for (int i = 0; i < 2; i++) {
        if (p->host[i]) cudaFreeHost(p->host[i]);
        if (p->copied[i]) cudaEventDestroy(p->copied[i]);
    }
    for (int i = 0; p->ev && i < 2 * p->ev_cap; i++)
        if (p->ev[i]) cudaEventDestroy(p->ev[i]);
    free(p->ev);
    if (p->sink) cudaFree(p->sink);
    free(p);
    c->plan = NULL;
}

deepinfer_status di_cuda_plan_enable(di_exec *x, int64_t pos_bound, int max_steps, di_error *err) {
    if (!di_exec_on_device(x)) return di_error_set(err, DEEPINFER_ERR_UNSUPPORTED, "step plan: not a CUDA exec");
    cu_exec *c = cu_of(x);
    cu_plan_free(c);
    cu_plan *p = calloc(1, sizeof *p);
    if (!p) return di_error_set(err, DEEPINFER_ERR_OUT_OF_MEMORY, "step plan: out of memory");
    c->plan = p;
    p->pos_bound = pos_bound;
    p->ev_cap = max_steps > 0 ? max_steps : 0; /* 0: no timing, any number of steps */
    p->ev = p->ev_cap ? calloc((size_t)2 * p->ev_cap, sizeof *p->ev) : NULL;
    p->sink_bytes = SINK_BYTES;
    cudaError_t e = p->ev || !p->ev_cap ? cudaSuccess : cudaErrorMemoryAllocation;
    for (int i = 0; i < 2 && e == cudaSuccess; i++) {
        e = cudaHostAlloc((void **)&p->host[i], c->tab_cap, cudaHostAllocDefault);
        if (e == cudaSuccess) e = cudaEventCreateWithFlags(&p->copied[i], cudaEventDisableTiming);
    }
    for (int i = 0; i < 2 * p->ev_cap && e == cudaSuccess; i++) e = cudaEventCreate(&p->ev[i]);
    if (e == cudaSuccess) e = cudaMalloc(&p->sink, p->sink_bytes);
    if (e != cudaSuccess) {
        cu_plan_free(c);
        return di_error_set(err, DEEPINFER_ERR_OUT_OF_MEMORY, "step plan: %s", cudaGetErrorString(e));
    }
    return DEEPINFER_OK;
}

void di_cuda_plan_disable(di_exec *x) {
    if (di_exec_on_device(x)) cu_plan_free(cu_of(x));
}

static deepinfer_status fail(cu_exec *c, di_error *err, const char *what) {
    if (c->err != cudaSuccess)
        return di_error_set(err, DEEPINFER_ERR_INTERNAL, "CUDA step: %s: %s (%s)", what, c->err_op, cudaGetErrorString(c->err));
    return di_error_set(err, DEEPINFER_ERR_INTERNAL, "CUDA step: %s", what);
}

deepinfer_status di_cuda_step_begin(di_exec *x, uint64_t key, di_error *err) {
    cu_exec *c = di_exec_on_device(x) ? cu_of(x) : NULL;
    cu_plan *p = c ? c->plan : NULL;
    if (!p || p->open) return di_error_set(err, DEEPINFER_ERR_INVALID_ARGUMENT, "step plan: not enabled, or a step is open");
    /* the buffer's previous copy (two steps back) must have read it */
    cu_check(c, cudaEventSynchronize(p->copied[p->cur]), "plan buffer reuse (event synchronize)");
    p->cur_graph = -1;
    for (int i = 0; i < p->ngraphs; i++)
        if (p->graphs[i].key == key) p->cur_graph = i;
    if (p->cur_graph < 0) {
        cu_graph *g = realloc(p->graphs, (size_t)(p->ngraphs + 1) * sizeof *g);
        if (!g) return di_error_set(err, DEEPINFER_ERR_OUT_OF_MEMORY, "step plan: out of memory");
        p->graphs = g;
        memset(&g[p->ngraphs], 0, sizeof *g);
        g[p->ngraphs].key = key;
        p->cur_graph = p->ngraphs++;
        dic_pdl_disarm(); /* the graph's first kernel has no kernel before it */
        cu_check(c, cudaStreamBeginCapture(c->dc.stream, cudaStreamCaptureModeRelaxed), "cudaStreamBeginCapture");
        p->capturing = 1;
        p->plan_only = 0;
    } else {
        p->capturing = 0;
        p->plan_only = 1;
    }
    if (c->err != cudaSuccess) return fail(c, err, "begin");
    c->tab_off = 0;
    p->sig = 0;
    p->open = 1;
    return DEEPINFER_OK;
}

deepinfer_status di_cuda_step_end(di_exec *x, di_error *err) {
    cu_exec *c = di_exec_on_device(x) ? cu_of(x) : NULL;
    cu_plan *p = c ? c->plan : NULL;
    if (!p || !p->open) return di_error_set(err, DEEPINFER_ERR_INVALID_ARGUMENT, "step plan: no open step");
    cu_graph *g = &p->graphs[p->cur_graph];
    int replay = !p->capturing;
    p->open = 0;
    if (p->capturing) {
        cu_lines_join_all(c); /* a line left open joins before the capture ends */
        p->capturing = 0;
        cudaGraph_t graph = NULL;
        cu_check(c, cudaStreamEndCapture(c->dc.stream, &graph), "cudaStreamEndCapture");
        if (c->err == cudaSuccess) cu_check(c, cudaGraphInstantiate(&g->exec, graph, cudaGraphInstantiateFlagUseNodePriority), "cudaGraphInstantiate");
        g->g = graph;
        g->sig = p->sig;
        g->bytes = c->tab_off;
        if (c->err != cudaSuccess) { /* forget the shape */
            if (g->exec) cudaGraphExecDestroy(g->exec);
            if (graph) cudaGraphDestroy(graph);
            p->ngraphs--;
            return fail(c, err, "capture");
        }
    } else if (g->sig != p->sig || g->bytes != c->tab_off) {
        size_t bytes = c->tab_off;
        p->plan_only = 0; /* nothing ran: later eager work launches again */
        c->tab_off = 0;
        return di_error_set(err, DEEPINFER_ERR_INTERNAL,
                            "CUDA step: shape key %llu: the step's launches or table layout differ from its graph's "
                            "(%zu plan bytes, graph %zu)",
                            (unsigned long long)g->key, bytes, g->bytes);
    }
    if (c->err != cudaSuccess) return fail(c, err, "plan");
    p->plan_only = 0;
    cudaStream_t st = c->dc.stream;
    int timed = p->nsteps < p->ev_cap; /* timing events while there are any left (di_cuda_step_times) */
    if (timed) cu_check(c, cudaEventRecord(p->ev[2 * p->nsteps], st), "step start event");
    if (c->tab_off)
        cu_check(c, cudaMemcpyAsync(c->dtab, p->host[p->cur], c->tab_off, cudaMemcpyHostToDevice, st), "step plan copy");
    cu_check(c, cudaEventRecord(p->copied[p->cur], st), "plan copied event");
    cu_check(c, cudaGraphLaunch(g->exec, st), "cudaGraphLaunch");
    if (timed) cu_check(c, cudaEventRecord(p->ev[2 * p->nsteps + 1], st), "step end event");
    if (timed) p->nsteps++;
    p->nrecorded++;
    p->nreplayed += replay;
    p->last_bytes = c->tab_off;
    p->cur ^= 1;
    c->tab_off = 0;
    return c->err == cudaSuccess ? DEEPINFER_OK : fail(c, err, "launch");
}

void di_cuda_step_abort(di_exec *x) {
    cu_exec *c = di_exec_on_device(x) ? cu_of(x) : NULL;
    cu_plan *p = c ? c->plan : NULL;
    if (!p || !p->open) return;
    p->open = 0;
    if (p->capturing) { /* end the capture and forget the shape: its graph may be incomplete */
        cu_lines_join_all(c);
        p->capturing = 0;
        cudaGraph_t graph = NULL;
        cu_check(c, cudaStreamEndCapture(c->dc.stream, &graph), "cudaStreamEndCapture (aborted step)");
        if (graph) cudaGraphDestroy(graph);
        p->ngraphs--; /* the step's graph is the last one (step_begin appended it) */
    }
    p->plan_only = 0;
    c->tab_off = 0;
}

void di_cuda_mark(di_exec *x, int end) {
    cu_exec *c = di_exec_on_device(x) ? cu_of(x) : NULL;
    cu_plan *p = c ? c->plan : NULL;
    if (!p || p->open || p->nsteps >= p->ev_cap) return;
    cu_check(c, cudaEventRecord(p->ev[2 * p->nsteps + (end ? 1 : 0)], c->dc.stream), "step event");
    if (end) p->nsteps++;
}

void di_cuda_argmax(di_exec *x, int M, const float *logits, int V, int32_t *ids) {
    if (M > 0) CU_LAUNCH(x, dic_argmax(&cu_of(x)->dc, M, logits, (size_t)V, V, ids), "dic_argmax");
}

void di_cuda_argmax_fuse(di_exec *x, int M, const float *logits, int V, int32_t *ids) {
    if (!di_exec_on_device(x)) return;
    cu_exec *c = cu_of(x);
    c->am_logits = logits, c->am_ids = M > 0 ? ids : NULL, c->am_m = M, c->am_v = V, c->am_taken = 0;
}

void di_cuda_argmax_rest(di_exec *x, int M, const float *logits, int V, int32_t *ids) {
    if (!di_exec_on_device(x)) return;
    cu_exec *c = cu_of(x);
    const int taken = c->am_taken && c->am_logits == logits && c->am_m == M && c->am_v == V;
    c->am_logits = NULL, c->am_ids = NULL, c->am_m = c->am_v = c->am_taken = 0;
    if (!taken) di_cuda_argmax(x, M, logits, V, ids);
}

int di_cuda_step_times(di_exec *x, float *busy_ms, float *start_ms, int n) {
    cu_exec *c = di_exec_on_device(x) ? cu_of(x) : NULL;
    cu_plan *p = c ? c->plan : NULL;
    if (!p) return 0;
    cudaStreamSynchronize(c->dc.stream);
    int k = p->nsteps < n ? p->nsteps : n;
    for (int i = 0; i < k; i++) {
        float b = 0, s = 0;
        cudaEventElapsedTime(&b, p->ev[2 * i], p->ev[2 * i + 1]);
        cudaEventElapsedTime(&s, p->ev[0], p->ev[2 * i]);
        if (busy_ms) busy_ms[i] = b;
        if (start_ms) start_ms[i] = s;
    }
    return k;
}

int di_cuda_plan_graphs(const di_exec *x) {
    const cu_exec *c = di_exec_on_device(x) ? cu_of(x) : NULL;
    return c && c->plan ? c->plan->ngraphs : 0;
}

int di_cuda_plan_stats(const di_exec *x, int *graphs, int64_t *recorded, int64_t *replayed, size_t *last_bytes,
                       size_t *cap_bytes) {
    const cu_exec *c = di_exec_on_device(x) ? cu_of(x) : NULL;
    const cu_plan *p = c ? c->plan : NULL;
    if (!p) return -1;
    *graphs = p->ngraphs;
    *recorded = p->nrecorded;
    *replayed = p->nreplayed;
    *last_bytes = p->last_bytes;
    *cap_bytes = c->tab_cap;
    return 0;
}
