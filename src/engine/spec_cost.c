/* spec_cost.c — step costs and confidence-scheduled draft lengths (spec_cost.h). */
#include "engine/spec_cost.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static double interp(const int *x, const double *y, int n, int at) {
    if (n <= 0 || at <= 0) return 0.0;
    if (n == 1) return y[0] * at / (x[0] > 0 ? x[0] : 1);
    int i = 1;
    while (i < n - 1 && x[i] < at) i++;
    /* segment [i-1, i]; before the first point the first segment's line, after the last the last's */
    double t = (double)(at - x[i - 1]) / (double)(x[i] - x[i - 1]);
    double v = y[i - 1] + t * (y[i] - y[i - 1]);
    return v > 0 ? v : 0.0;
}

double di_spec_cost_target(const di_spec_cost *c, int rows) { return interp(c->rows, c->sec, c->n, rows); }

double di_spec_cost_draft(const di_spec_cost *c, int n) { return interp(c->reqs, c->dsec, c->nd, n); }

static int bucket(int rows) {
    int b = 0;
    while ((1 << (b + 1)) <= rows && b + 1 < DI_SPEC_COST_POINTS) b++;
    return b;
}

void di_spec_cost_observe(di_spec_cost *c, int plain, int rows, int drafting, double secs) {
    if (rows < 1 || secs <= 0) return;
    if (plain) {
        double *p = &c->plain[bucket(rows)];
        *p = *p > 0 ? 0.8 * *p + 0.2 * secs : secs;
        return;
    }
    double pred = di_spec_cost_target(c, rows) + di_spec_cost_draft(c, drafting);
    if (pred <= 0) return;
    double r = secs / pred;
    c->ratio = c->ratio > 0 ? 0.8 * c->ratio + 0.2 * r : r;
}

static int by_survival(const void *a, const void *b) {
    const di_spec_cand *x = a, *y = b;
    if (x->s != y->s) return x->s > y->s ? -1 : 1;
    if (x->seq != y->seq) return x->seq < y->seq ? -1 : 1;
    return x->j < y->j ? -1 : x->j > y->j;
}

int di_spec_cost_exploring(const int64_t *drafted_at) {
    return !drafted_at || drafted_at[0] < DI_SPEC_EXPLORE_OUTCOMES;
}

void di_spec_choose(const di_spec_cost *c, int base_rows, int commit_rows, int n, const int *kmax,
                    const float *const *conf, const int64_t *accepted_at, const int64_t *drafted_at, int explore,
                    int *k, di_spec_cand *cand) {
    int m = 0;
    for (int i = 0; i < n; i++) {
        k[i] = 0;
        float s = 1.0f;
        for (int j = 0; j < kmax[i]; j++) {
            /* measured: P(drafts 1..j+1 all accepted), the mean of its Beta(1, 1) posterior */
            double nj = accepted_at ? (double)drafted_at[j] + 2.0 : 2.0;
            double mj = accepted_at ? (double)(accepted_at[j] + 1) / nj : 0.5 * s;
            /* exploring: optimistic, two posterior deviations above the measured rate */
            double uj = mj + 2.0 * sqrt(mj * (1.0 - mj) / (nj + 1.0));
            if (uj > 1.0) uj = 1.0;
            if (isnan(conf[i][j])) {
                double r = explore ? uj : mj;
                s = r < s ? (float)r : s; /* never above S_j */
            } else {
                s *= di_spec_calib_prob(&c->cal, j, conf[i][j]);
                if (explore && s < uj) s = (float)uj;
            }
            if (j > 0 && s > cand[m - 1].s) s = cand[m - 1].s;
            cand[m++] = (di_spec_cand){.s = s, .seq = i, .j = j};
        }
    }
    if (!m) return;
    qsort(cand, (size_t)m, sizeof *cand, by_survival);
    /* value of every prefix of the order: expected committed tokens per second. No drafts: a plain
     * step, at its measured cost where known; drafts: the table's, scaled by the measured ratio of
     * speculative steps to it — before any was measured, by the plain steps' ratio to it (recorded
     * steps run faster than the profile's eager forwards, drafts or not) */
    double t0 = di_spec_cost_target(c, base_rows), pl = c->plain[bucket(base_rows)];
    double scale = c->ratio > 0 ? c->ratio : pl > 0 && t0 > 0 ? pl / t0 : 1.0;
    if (pl > 0 && pl < t0 * scale) t0 = pl;
    else t0 *= scale;
    double tokens = commit_rows > n ? commit_rows : n, best = tokens / (t0 > 0 ? t0 : 1e-9);
    int best_len = 0, drafting = 0;
    for (int p = 0; p < m; p++) {
        tokens += cand[p].s;
        if (cand[p].j == 0) drafting++;
        double t = scale * (di_spec_cost_target(c, base_rows + p + 1) + di_spec_cost_draft(c, drafting));
        double v = tokens / (t > 0 ? t : 1e-9);
        if (v > best) best = v, best_len = p + 1;
    }
    for (int p = 0; p < best_len; p++)
        if (cand[p].j + 1 > k[cand[p].seq]) k[cand[p].seq] = cand[p].j + 1;
}

void di_spec_cost_format(const di_spec_cost *c, char *buf, size_t cap) {
    size_t u = 0;
    int w = snprintf(buf, cap, "verify cost  rows:ms");
    if (w > 0) u = (size_t)w;
    for (int i = 0; i < c->n && u < cap; i++) {
        w = snprintf(buf + u, cap - u, " %d:%.3f", c->rows[i], c->sec[i] * 1e3);
        if (w > 0) u += (size_t)w;
    }
    if (u < cap) {
        w = snprintf(buf + u, cap - u, "; drafter requests:ms");
        if (w > 0) u += (size_t)w;
    }
    for (int i = 0; i < c->nd && u < cap; i++) {
        w = snprintf(buf + u, cap - u, " %d:%.3f", c->reqs[i], c->dsec[i] * 1e3);
        if (w > 0) u += (size_t)w;
    }
    if (u < cap) snprintf(buf + u, cap - u, "\n");
}
