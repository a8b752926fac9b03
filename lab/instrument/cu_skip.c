/* cu_skip.c — timing-only ablation of launch sites in captured steps
 * (docs/cuda-backend.md §7). $DEEPINFER_CUDA_SKIP = "op[#n][,op[#n]...]"
 * leaves the n-th call (0-based, counted per step; every call without #n)
 * of launch site `op` (the CU_CHECK name, e.g. dic_moe_routed_dec; `*` any
 * site; a suffix `@L` only the calls on concurrent line L, e.g. `*@1`) out of
 * the graphs being captured: a replayed step then runs without it and the
 * step time drops by what that launch costs on the step's critical path.
 * The skipped op's outputs keep the values of the eager steps before the
 * capture, so later kernels read valid (stale) data; results are WRONG and
 * the switch exists for measurements only. "list" prints every launch site
 * of each capture with its per-step index. Eager steps never skip.
 * A set may also turn the kernels' variant knobs (same bits or within the
 * tested tolerance; every knob back to its default when a set is chosen):
 * hct=V (mHC transition variant),
 * gdec=FLAGS[:CPS] (decode GEMM, DIC_DEC_* safe flags), lean=0|1 (the lean code-size
 * instantiations of the decode kernels or the full ones; dic_lean_set),
 * headcw=32|64 (fused head),
 * lines=0|1, linepdl=0|1 (concurrent lines, PDL after a switch back), linemask=BITS (bit b: side
 * line b in use; a line switched off runs on the main line), lprio=BITS (bit b: side line b at the greatest
 * stream priority), joinpdl=0|1 (PDL for the main line's first kernel after a join), l1gdec=FLAGS[:CPS] (decode-GEMM
 * flags of the launches on line 1 only: how the shared expert's GEMMs share the SMs),
 * lmarg=0|1 (the decode loop's greedy argmax fused into the
 * lm_head launch, dic_gemm_argmax, at every M, or the separate dic_argmax launch; default
 * $DEEPINFER_LM_ARGMAX, unset: fused from M = 2, or at every M where the stream kernel runs), lmstream=0|1
 * (dic_gemv_stream_enable: the lm_head through the bulk-copy stream kernel or the GEMV / MMA tiles),
 * gqrule=0|1 (dic_gemm_dec_qrule: when the decode GEMM quantises its
 * own rows: act blocks (0, default) or values (1) per CTA; same bits). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops/cuda/cu_glue.h"
#include "ops/cuda/dic_gemm_int.h"
#include "ops/cuda/dic_model.h"

#define SKIP_MAX 32
#define SEEN_MAX 128

static struct {
    int parsed, list, n;
    char name[SKIP_MAX][48];
    int idx[SKIP_MAX];  /* -1: every call */
    int line[SKIP_MAX]; /* -1: any line */
    const char *seen[SEEN_MAX];
    int count[SEEN_MAX], nseen;
} g_skip;

static int g_hct_default = -1;
static int g_l1_flags = -1, g_l1_cps, g_l1_save_flags, g_l1_save_cps; /* l1gdec knob */

int cu_line_gemm_begin(const cu_exec *c) {
    if (g_l1_flags < 0 || c->line != 1) return 0;
    g_l1_save_flags = dic_gemm_dec_flags(), g_l1_save_cps = dic_gemm_dec_cps();
    dic_gemm_dec_tune(g_l1_flags, g_l1_cps);
    return 1;
}
void cu_line_gemm_end(int switched) {
    if (switched) dic_gemm_dec_tune(g_l1_save_flags, g_l1_save_cps);
}

/* Every knob back to its default (the environment's where it has one). */
static void knobs_reset(void) {
    if (g_hct_default < 0) g_hct_default = dic_hc_transition_variant(-1);
    dic_hc_transition_variant(g_hct_default);
    dic_gemm_dec_tune(-1, 0);
    dic_hc_head_cw(64);
    cu_lines_tune(-1, -1);
    cu_lines_mask(-1);
    cu_lines_prio(-1);
    cu_lines_join_pdl(-1);
    dic_lean_set(1);
    dic_gemm_argmax_enable(-1);
    dic_gemv_stream_enable(-1);
    dic_gemm_dec_qrule(-1);
    g_l1_flags = -1;
}

static void knob(const char *t) {
    int v[4] = {-1, -1, -1, -1};
    const char *e = strchr(t, '=');
    size_t n = (size_t)(e - t);
    sscanf(e + 1, "%i:%i:%i:%i", &v[0], &v[1], &v[2], &v[3]);
    if (n == 3 && !strncmp(t, "hct", 3)) dic_hc_transition_variant(v[0]);
    else if (n == 4 && !strncmp(t, "gdec", 4)) dic_gemm_dec_tune(v[0], v[1] < 0 ? 0 : v[1]);
    else if (n == 6 && !strncmp(t, "headcw", 6)) dic_hc_head_cw(v[0]);
    else if (n == 5 && !strncmp(t, "lines", 5)) cu_lines_tune(v[0], -1);
    else if (n == 7 && !strncmp(t, "linepdl", 7)) cu_lines_tune(-1, v[0]);
    else if (n == 8 && !strncmp(t, "linemask", 8)) cu_lines_mask(v[0]);
    else if (n == 5 && !strncmp(t, "lprio", 5)) cu_lines_prio(v[0]);
    else if (n == 7 && !strncmp(t, "joinpdl", 7)) cu_lines_join_pdl(v[0]);
    else if (n == 4 && !strncmp(t, "lean", 4)) dic_lean_set(v[0]);
    else if (n == 5 && !strncmp(t, "lmarg", 5)) dic_gemm_argmax_enable(v[0]);
    else if (n == 8 && !strncmp(t, "lmstream", 8)) dic_gemv_stream_enable(v[0]);
    else if (n == 6 && !strncmp(t, "gqrule", 6)) dic_gemm_dec_qrule(v[0]);
    else if (n == 6 && !strncmp(t, "l1gdec", 6)) g_l1_flags = v[0], g_l1_cps = v[1] < 0 ? 0 : v[1];
    else fprintf(stderr, "DEEPINFER_CUDA_SKIP: unknown knob %s\n", t);
}

static void skip_parse_str(const char *s) {
    g_skip.parsed = 1;
    g_skip.n = 0;
    g_skip.list = 0;
    if (!s || !*s) return;
    char buf[1024];
    snprintf(buf, sizeof buf, "%s", s);
    for (char *save = NULL, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        if (!strcmp(t, "list")) {
            g_skip.list = 1;
            continue;
        }
        if (strchr(t, '=')) {
            knob(t);
            continue;
        }
        if (g_skip.n >= SKIP_MAX) break;
        char *at = strchr(t, '@');
        g_skip.line[g_skip.n] = at ? atoi(at + 1) : -1;
        if (at) *at = 0;
        char *h = strchr(t, '#');
        g_skip.idx[g_skip.n] = h ? atoi(h + 1) : -1;
        if (h) *h = 0;
        snprintf(g_skip.name[g_skip.n], sizeof g_skip.name[0], "%s", t);
        g_skip.n++;
    }
}

static void skip_parse(void) { skip_parse_str(getenv("DEEPINFER_CUDA_SKIP")); }

/* $DEEPINFER_CUDA_SKIP_SETS = "spec;spec;...": ablations the bench runs one
 * after the other in one process (cu_step.h di_cuda_skip_use). */
static char g_set[1024];

int di_cuda_skip_sets(void) {
    const char *s = getenv("DEEPINFER_CUDA_SKIP_SETS");
    if (!s || !*s) return 0;
    int n = 1;
    for (; *s; s++) n += *s == ';';
    return n;
}

const char *di_cuda_skip_use(int i) {
    const char *s = getenv("DEEPINFER_CUDA_SKIP_SETS");
    if (i < 0 || !s) {
        knobs_reset();
        skip_parse();
        return "";
    }
    for (int k = 0; k < i && s; k++) {
        s = strchr(s, ';');
        if (s) s++;
    }
    if (!s) s = "";
    knobs_reset();
    size_t n = strcspn(s, ";");
    if (n >= sizeof g_set) n = sizeof g_set - 1;
    memcpy(g_set, s, n);
    g_set[n] = 0;
    skip_parse_str(g_set);
    return g_set;
}

void cu_skip_step_begin(void) { g_skip.nseen = 0; }

int cu_skip(cu_exec *c, const char *op) {
    if (!g_skip.parsed) skip_parse();
    if ((!g_skip.n && !g_skip.list) || !c->plan || !c->plan->open || !c->plan->capturing) return 0;
    int k = 0;
    while (k < g_skip.nseen && g_skip.seen[k] != op && strcmp(g_skip.seen[k], op)) k++;
    if (k == g_skip.nseen) {
        if (k == SEEN_MAX) return 0;
        g_skip.seen[k] = op;
        g_skip.count[k] = 0;
        g_skip.nseen++;
    }
    int n = g_skip.count[k]++;
    int skip = 0;
    for (int i = 0; i < g_skip.n; i++)
        if ((!strcmp(g_skip.name[i], op) || !strcmp(g_skip.name[i], "*")) && (g_skip.idx[i] < 0 || g_skip.idx[i] == n) &&
            (g_skip.line[i] < 0 || g_skip.line[i] == c->line))
            skip = 1;
    if (g_skip.list) fprintf(stderr, "capture launch %s#%d%s (line %d)\n", op, n, skip ? " SKIPPED" : "", c->line);
    return skip;
}
