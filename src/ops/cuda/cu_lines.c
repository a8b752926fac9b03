/* cu_lines.c — concurrent lines of a captured step (ops.h di_exec_branch,
 * docs/DEVICE-FORWARD.md §9).
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
 * it ($DEEPINFER_CUDA_LINE_PDL=0: no PDL after any switch, the first
 * version). Scratch: ops use the context's scratch only inside one op
 * (GEMM quantisation, split-K partials and counters, attention phases), so
 * while lines run concurrently each gets its own slice. */
#include <stdlib.h>
#include <string.h>

#include "ops/cuda/cu_glue.h"

static int g_lines_on = -1, g_line_pdl_on = -1; /* -1: read the environment */
static unsigned g_line_mask = ~0u;                /* side lines in use (bit b: line b); others run on the main line */

static int env_on(const char *name) {
    const char *e = getenv(name);
    return !(e && e[0] == '0' && !e[1]);
}

/* $name=0|1, else def */
static int env_on_default(const char *name, int def) {
    const char *e = getenv(name);
    return e && (e[0] == '0' || e[0] == '1') && !e[1] ? e[0] - '0' : def;
}

/* The main line's first kernel after a join: 0 = no PDL (its dependencies are the joined lines' events), 1 = PDL
 * when every joined line ended with a kernel, fast mode only (cu_lines_join_all). Measured 2026-12-01 (b1
 * V4-Flash, 4 layers, fast mode, one process): 926.1 / 927.4 / 926.8 us vs 939.5 / 937.0 without; b2 1143.9 /
 * 1145.8 vs 1153.2 / 1156.6 (before the line check). */
#define JOIN_PDL_DEF 1

static int lines_enabled(void) {
    if (g_lines_on < 0) g_lines_on = env_on("DEEPINFER_CUDA_LINES");
    return g_lines_on;
}

static int line_pdl(void) {
    if (g_line_pdl_on < 0) g_line_pdl_on = env_on("DEEPINFER_CUDA_LINE_PDL");
    return g_line_pdl_on;
}

void cu_lines_tune(int lines, int line_pdl_on) {
    g_lines_on = lines < 0 ? env_on("DEEPINFER_CUDA_LINES") : lines != 0;
    g_line_pdl_on = line_pdl_on < 0 ? env_on("DEEPINFER_CUDA_LINE_PDL") : line_pdl_on != 0;
}

void cu_lines_mask(int mask) { g_line_mask = mask < 0 ? ~0u : (unsigned)mask; }

static int g_join_pdl = -1; /* -1: read the environment */
void cu_lines_join_pdl(int on) { g_join_pdl = on < 0 ? env_on_default("DEEPINFER_CUDA_JOIN_PDL", JOIN_PDL_DEF) : on != 0; }
static int join_pdl(void) {
    if (g_join_pdl < 0) cu_lines_join_pdl(-1);
    return g_join_pdl;
}

static int g_line_prio = -1; /* -1: read the environment */
void cu_lines_prio(int mask) {
    if (mask < 0) {
        const char *e = getenv("DEEPINFER_CUDA_LINE_PRIO");
        mask = e && *e ? atoi(e) : 0;
    }
    g_line_prio = mask < 0 ? 0 : mask;
}

/* The stream of side line b (b >= 1) in this capture: picked at its fork, kept until the join. */
static cudaStream_t side_of(const cu_exec *c, int b) {
    return (c->side_used >> (b - 1)) & 1u ? c->side_hi[b - 1] : c->side[b - 1];
}

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
    dic_pdl_set_armed(line_pdl() && c->line_armed[b]);
}

static int make_line(cu_exec *c, int b) {
    if (c->side[b - 1]) return 1;
    int least = 0, greatest = 0;
    cudaError_t e = cudaDeviceGetStreamPriorityRange(&least, &greatest);
    if (e == cudaSuccess) e = cudaStreamCreateWithFlags(&c->side[b - 1], cudaStreamNonBlocking);
    if (e == cudaSuccess) e = cudaStreamCreateWithPriority(&c->side_hi[b - 1], cudaStreamNonBlocking, greatest);
    if (e == cudaSuccess) e = cudaEventCreateWithFlags(&c->fork_ev[b - 1], cudaEventDisableTiming);
    if (e == cudaSuccess) e = cudaEventCreateWithFlags(&c->join_ev[b - 1], cudaEventDisableTiming);
    cu_check(c, e, "concurrent line (stream / event create)");
    return e == cudaSuccess;
}

void cu_lines_branch(di_exec *x, int b) {
    cu_exec *c = cu_of(x);
    if (b > 0 && !((g_line_mask >> b) & 1u)) b = 0; /* a line switched off (cu_skip's linemask knob) */
    if (!capturing(c) || !lines_enabled() || b == c->line) return;
    if (b > 0) {
        if (!make_line(c, b)) return;
        if (!(c->forked & (1u << (b - 1)))) {
            if (g_line_prio < 0) cu_lines_prio(-1);
            c->side_used = ((unsigned)g_line_prio >> b) & 1u ? c->side_used | (1u << (b - 1))
                                                                : c->side_used & ~(1u << (b - 1));
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
     * with nothing since its fork) keeps the event edge a full one: no PDL then. Mode 1 (the exact kernels) keeps
     * the full edges as before (its steps were not measured with PDL after a join). */
    int keep = join_pdl() && !c->dc.batch_invariant;
    for (int b = 1; b <= DI_EXEC_BRANCHES; b++)
        if ((joined >> (b - 1)) & 1u) keep = keep && c->line_armed[b];
    if (!keep) {
        dic_pdl_disarm(); /* the main line's next kernel follows the join's events */
        c->line_armed[0] = 0;
    } /* else it keeps the main line's programmatic edge besides the joined kernels' edges (cu_lines_join_pdl) */
}

void cu_lines_join(di_exec *x) {
    cu_exec *c = cu_of(x);
    if (c->forked || c->line) cu_lines_join_all(c);
}

void cu_lines_free(cu_exec *c) {
    for (int b = 0; b < DI_EXEC_BRANCHES; b++) {
        if (c->side[b]) cudaStreamDestroy(c->side[b]);
        if (c->side_hi[b]) cudaStreamDestroy(c->side_hi[b]);
        if (c->fork_ev[b]) cudaEventDestroy(c->fork_ev[b]);
        if (c->join_ev[b]) cudaEventDestroy(c->join_ev[b]);
    }
    if (c->scratch_all) {
        c->dc.scratch = c->scratch_all;
        c->dc.scratch_cap = c->scratch_cap_all;
        c->dc.stream = c->main_stream;
    }
}
