/*
 * golden_util.h — helpers for the golden-vector tests (tests/data/golden,
 * README there): manifest fields, logit files, the comparison statistics of
 * the pass criteria, and a V4 scoring driver. Included by the golden test
 * files only.
 */
#ifndef DI_TESTS_GOLDEN_UTIL_H
#define DI_TESTS_GOLDEN_UTIL_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/json.h"
#include "model/dsv4.h"
#include "test.h"
#include "util/file.h"

typedef struct golden_stats {
    double max_abs, mean_abs, argmax_agree;
    int rows, nonfinite;
} golden_stats;

static inline int golden_argmax(const float *v, int n) {
    int b = 0;
    for (int i = 1; i < n; i++)
        if (v[i] > v[b]) b = i;
    return b;
}

/* Statistics over rows [r0, r1) of two [rows][V] logit arrays. */
static inline golden_stats golden_compare(const float *a, const float *b, int r0, int r1, int V) {
    golden_stats s = {0, 0, 0, r1 - r0, 0};
    double sum = 0;
    int agree = 0;
    for (int r = r0; r < r1; r++) {
        const float *x = a + (size_t)r * V, *y = b + (size_t)r * V;
        for (int i = 0; i < V; i++) {
            if (!isfinite(x[i])) s.nonfinite++;
            double d = fabs((double)x[i] - (double)y[i]);
            sum += d;
            if (d > s.max_abs) s.max_abs = d;
        }
        agree += golden_argmax(x, V) == golden_argmax(y, V);
    }
    s.mean_abs = sum / ((double)(r1 - r0) * V);
    s.argmax_agree = (double)agree / (r1 - r0);
    return s;
}

/* Max abs diff of each row (for the "early rows" criterion). */
static inline double golden_row_max(const float *a, const float *b, int r, int V) {
    double m = 0;
    for (int i = 0; i < V; i++) m = fmax(m, fabs((double)a[(size_t)r * V + i] - (double)b[(size_t)r * V + i]));
    return m;
}

/* A whole little-endian float32 file; NULL on error. *n = float count. */
static inline float *golden_read_f32(const char *path, size_t *n) {
    char *buf = NULL;
    size_t len = 0;
    di_error e = {0};
    if (di_read_file(path, 0, &buf, &len, &e)) return NULL;
    *n = len / 4;
    float *f = malloc(len ? len : 4);
    if (f) memcpy(f, buf, len);
    free(buf);
    return f;
}

static inline di_json_doc *golden_manifest(const char *dir) {
    char path[4096];
    snprintf(path, sizeof path, "%s/expected/manifest.json", dir);
    char *buf = NULL;
    size_t len = 0;
    di_error e = {0};
    if (di_read_file(path, 0, &buf, &len, &e)) return NULL;
    di_json_doc *doc = NULL;
    di_json_parse(buf, len, NULL, &doc, &e);
    free(buf);
    return doc;
}

/* An integer array at `key` (a path like "decode.input_tokens"); count in *n. */
static inline int32_t *golden_ints(const di_json *root, const char *k1, const char *k2, int *n) {
    const di_json *v = di_json_get(root, k1);
    if (k2) v = di_json_get(v, k2);
    if (!v || v->type != DI_JSON_ARRAY) return NULL;
    int32_t *out = malloc(sizeof(int32_t) * (v->count ? v->count : 1));
    for (uint32_t i = 0; i < v->count; i++) {
        int64_t x = 0;
        di_json_as_i64(di_json_at(v, i), &x);
        out[i] = (int32_t)x;
    }
    *n = (int)v->count;
    return out;
}

static inline double golden_num(const di_json *root, const char *k1, const char *k2, const char *k3) {
    const di_json *v = di_json_get(root, k1);
    if (k2) v = di_json_get(v, k2);
    if (k3) v = di_json_get(v, k3);
    double d = NAN;
    di_json_as_f64(v, &d);
    return d;
}

/* A model's forward step (V4 or V4.1), for the generic runner below. */
typedef deepinfer_status (*golden_fwd_fn)(void *model, const di_v4_batch *b, di_error *err);

static inline deepinfer_status golden_v4_fwd(void *m, const di_v4_batch *b, di_error *err) {
    return di_v4_forward(m, b, err);
}

/* Feed `n` tokens of one sequence in chunks of `chunk` rows (0 = all at
 * once) starting at the sequence's position; logits of every row into
 * out[n][V] (may be NULL), final residuals into hidden[n][hc*dim] (may be
 * NULL), DSpark inputs into target[n][n_targets*dim] (V4.1; may be NULL).
 * Returns the status. */
static inline deepinfer_status golden_run_fn(golden_fwd_fn fwd, void *m, const di_model_config *c, di_seq_state *s,
                                             const int32_t *tok, int n, int chunk, float *out, uint16_t *hidden,
                                             uint16_t *target, di_error *err) {
    if (chunk <= 0) chunk = n;
    int64_t *pos = malloc(sizeof(int64_t) * (size_t)chunk);
    int *rows = malloc(sizeof(int) * (size_t)chunk);
    di_seq_state **seqs = malloc(sizeof(*seqs) * (size_t)chunk);
    deepinfer_status st = DEEPINFER_OK;
    size_t hcd = (size_t)(c->hc_mult * c->hidden_size), td = (size_t)c->n_dspark_target_layer_ids * c->hidden_size;
    for (int i0 = 0; i0 < n && !st; i0 += chunk) {
        int k = n - i0 < chunk ? n - i0 : chunk;
        for (int i = 0; i < k; i++) {
            pos[i] = s->n_tokens + i;
            rows[i] = i;
            seqs[i] = s;
        }
        di_v4_batch b = {.n = k, .tokens = tok + i0, .pos = pos, .seq = seqs, .n_logits = out ? k : 0,
                         .logit_rows = rows, .logits = out ? out + (size_t)i0 * c->vocab_size : NULL,
                         .hidden = hidden ? hidden + (size_t)i0 * hcd : NULL,
                         .target_hidden = target ? target + (size_t)i0 * td : NULL};
        st = fwd(m, &b, err);
    }
    free(pos), free(rows), free(seqs);
    return st;
}

static inline deepinfer_status golden_run(di_v4_model *m, di_seq_state *s, const int32_t *tok, int n, int chunk,
                                          float *out, uint16_t *hidden, di_error *err) {
    return golden_run_fn(golden_v4_fwd, m, di_v4_config(m), s, tok, n, chunk, out, hidden, NULL, err);
}

/* The reference's top-1 minus top-2 logit of a row: how firmly it chose. */
static inline double golden_margin(const float *r, int V) {
    int a = golden_argmax(r, V);
    float second = -INFINITY;
    for (int v = 0; v < V; v++)
        if (v != a && r[v] > second) second = r[v];
    return (double)r[a] - (double)second;
}

/* A greedy trajectory checked against the reference's (the golden README's
 * rule): the engine's tokens must equal the reference's up to the first step
 * whose reference margin is below `spread` (the reference's own CPU-vs-CUDA
 * max |diff|: there the reference itself could have chosen otherwise); from
 * that step on the reference's tokens are fed (teacher-forced) and every row's
 * argmax must still equal the reference's wherever its margin is >= spread.
 * Until the engine leaves the reference the two ways of feeding are the same
 * inputs, so this is one teacher-forced run: step i feeds want[i - 1]
 * (first_in for i = 0) and compares row i with ref[i]. */
typedef struct golden_traj {
    int steps;       /* decode steps run */
    int free_equal;  /* leading steps whose argmax equals the reference's */
    int near_ties;   /* steps that differ where the reference margin < spread */
    int bad;         /* steps that differ where the reference margin >= spread */
    int first_bad;   /* the first of those (-1 = none) */
    double first_bad_margin, first_tie_margin;
    golden_stats tf; /* logits of the rows from the first difference on (teacher-forced part) */
} golden_traj;

static inline deepinfer_status golden_trajectory(golden_fwd_fn fwd, void *m, const di_model_config *c, di_seq_state *s,
                                                 int32_t first_in, const int32_t *want, int no, const float *ref,
                                                 double spread, golden_traj *t, di_error *err) {
    int V = (int)c->vocab_size;
    float *rows = malloc(sizeof(float) * (size_t)(no ? no : 1) * V);
    memset(t, 0, sizeof *t);
    t->first_bad = -1, t->first_tie_margin = t->first_bad_margin = NAN;
    deepinfer_status st = DEEPINFER_OK;
    int diverged = -1;
    for (int i = 0; i < no && !st; i++) {
        int32_t in = i ? want[i - 1] : first_in;
        st = golden_run_fn(fwd, m, c, s, &in, 1, 1, rows + (size_t)i * V, NULL, NULL, err);
        if (st) break;
        t->steps++;
        int a = golden_argmax(rows + (size_t)i * V, V);
        if (a == want[i]) {
            if (diverged < 0) t->free_equal++;
            continue;
        }
        if (diverged < 0) diverged = i;
        double mg = golden_margin(ref + (size_t)i * V, V);
        if (mg < spread) {
            if (!t->near_ties++) t->first_tie_margin = mg;
        } else if (!t->bad++) {
            t->first_bad = i, t->first_bad_margin = mg;
        }
    }
    if (diverged >= 0) t->tf = golden_compare(rows, ref, diverged, t->steps, V);
    free(rows);
    return st;
}

#endif
