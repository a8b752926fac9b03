/* cu_lines.c — concurrent lines of a captured step (ops.h di_exec_branch,
 * docs/cuda-backend.md §9).
 *
 * A decode step at batch 1 is a chain of ~200 small kernels, most of them
 * latency-bound; independent stretches (the shared expert beside the routed
 * ones, the kv path beside the query path) can overlap. While a step is
 * captured into a CUDA graph, side line b is a second stream that waits for
 * an event recorded on the main stream (the fork) and is waited for by the
 * main stream at the join, so the graph gets the fork / join edges. Outside
 * a capture (eager steps, plan-only steps whose graph replays) nothing
 * changes: the ops run in call order on the one stream.
 *
 * Programmatic dependent launch follows each line's own history: a kernel
 * takes a programmatic edge from the previous kernel of its stream, so the
 * first kernel of a line after a fork or a join (its dependency is an event)
 * launches without it, while a line that is switched back to continues with
 * it. After a join the main line's first kernel keeps its programmatic edge
 * in fast mode when every joined line ended with a kernel
 * (cu_lines_join_all). Scratch: ops use the context's scratch only inside one op
 * (GEMM quantisation, split-K partials and counters, attention phases), so
 * while lines run concurrently each gets its own slice. */
#include "ops/cuda/cu_glue.h"

/* The stream of side line b (b >= 1). */
static cudaStream_t side_of(const cu_exec *c, int b) { return c->side[b - 1]; }

static int capturing(const cu_exec *c) { return c->plan && c->plan->open && c->plan->capturing; }

/* Point the op context at line b's stream and scratch slice. */
static void use_line(cu_exec *c, int b) {
    if (!c->scratch_all) {
        c->scratch_all = c->dc.scratch;
        c->scratch_cap_all = c->dc.scratch_cap;
        c->main_stream = c->dc.stream;
    }
    size_t slice = (c->scratch_cap_all / (DI_EXEC_BRANCHES + 1)) & ~(size_t)255;
    c->line_armed[c->line] = dic_pdl_armed();
    c->line = b;
    c->dc.stream = b ? side_of(c, b) : c->main_stream;
    c->dc.scratch = (char *)c->scratch_all + (c->forked ? (size_t)b * slice : 0);
    c->dc.scratch_cap = c->forked ? slice : c->scratch_cap_all;
    dic_pdl_set_armed(c->line_armed[b]);
}

static int make_line(cu_exec *c, int b) {
    if (c->side[b - 1]) return 1;
    cudaError_t e = cudaStreamCreateWithFlags(&c->side[b - 1], cudaStreamNonBlocking);
    if (e == cudaSuccess) e = cudaEventCreateWithFlags(&c->fork_ev[b - 1], cudaEventDisableTiming);
    if (e == cudaSuccess) e = cudaEventCreateWithFlags(&c->join_ev[b - 1], cudaEventDisableTiming);
    cu_check(c, e, "concurrent line (stream / event create)");
    return e == cudaSuccess;
}

void cu_lines_branch(di_exec *x, int b) {
    cu_exec *c = cu_of(x);
    if (!capturing(c) || b == c->line) return;
    if (b > 0) {
        if (!make_line(c, b)) return;
        if (!(c->forked & (1u << (b - 1)))) {
            cu_check(c, cudaEventRecord(c->fork_ev[b - 1], c->main_stream ? c->main_stream : c->dc.stream), "line fork (record)");
            cu_check(c, cudaStreamWaitEvent(side_of(c, b), c->fork_ev[b - 1], 0), "line fork (wait)");
            c->forked |= 1u << (b - 1);
            c->line_armed[b] = 0; /* its next kernel follows an event */
        }
    }
    use_line(c, b);
}

void cu_lines_join_all(cu_exec *c) {
    if (!c->forked) {
        if (c->line) use_line(c, 0);
        return;
    }
    for (int b = 1; b <= DI_EXEC_BRANCHES; b++) {
        if (!(c->forked & (1u << (b - 1)))) continue;
        cu_check(c, cudaEventRecord(c->join_ev[b - 1], side_of(c, b)), "line join (record)");
        cu_check(c, cudaStreamWaitEvent(c->main_stream, c->join_ev[b - 1], 0), "line join (wait)");
    }
    const unsigned joined = c->forked;
    c->forked = 0;
    use_line(c, 0); /* saves the line it leaves: line_armed[b] = its last operation was a kernel */
    /* With PDL the next kernel's edges from the joined lines' last operations may become programmatic too; only a
     * kernel's completion is what griddepcontrol.wait waits for, so a line that ended with a copy or a memset (or
     * with nothing since its fork) keeps the event edge a full one: no PDL then. The same in both modes: an edge's
     * kind changes when a kernel starts, never what it computes (docs/determinism.md §7). */
    int keep = 1;
    for (int b = 1; b <= DI_EXEC_BRANCHES; b++)
        if ((joined >> (b - 1)) & 1u) keep = keep && c->line_armed[b];
    if (!keep) {
        dic_pdl_disarm(); /* the main line's next kernel follows the join's events */
        c->line_armed[0] = 0;
    } /* else it keeps the main line's programmatic edge besides the joined kernels' edges */
}

void cu_lines_join(di_exec *x) {
    cu_exec *c = cu_of(x);
    if (c->forked || c->line) cu_lines_join_all(c);
}

void cu_lines_free(cu_exec *c) {
    for (int b = 0; b < DI_EXEC_BRANCHES; b++) {
        if (c->side[b]) cudaStreamDestroy(c->side[b]);
        if (c->fork_ev[b]) cudaEventDestroy(c->fork_ev[b]);
        if (c->join_ev[b]) cudaEventDestroy(c->join_ev[b]);
    }
    if (c->scratch_all) {
        c->dc.scratch = c->scratch_all;
        c->dc.scratch_cap = c->scratch_cap_all;
        c->dc.stream = c->main_stream;
    }
}
