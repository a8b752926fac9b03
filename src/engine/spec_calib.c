/* spec_calib.c — Platt scaling of the confidence logits from verified drafts (spec_calib.h). */
#include "engine/spec_calib.h"

#include <math.h>

#define PRIOR_WEIGHT 1.0 /* the prior weighs about as much as one outcome's curvature */
#define NEWTON_ITERS 30

static int bin_of(float c) {
    int i = (int)floorf((c + 8.0f) * 2.0f);
    return i < 0 ? 0 : i >= DI_SPEC_CALIB_BINS ? DI_SPEC_CALIB_BINS - 1 : i;
}

void di_spec_calib_add(di_spec_calib *cal, const float *conf, int drafted, int accepted) {
    if (drafted > DEEPINFER_MAX_DRAFT) drafted = DEEPINFER_MAX_DRAFT;
    for (int j = 0; j < drafted && j <= accepted; j++) {
        if (isnan(conf[j])) return;
        if (cal->obs[j] >= DI_SPEC_CALIB_HORIZON) {
            for (int i = 0; i < DI_SPEC_CALIB_BINS; i++)
                cal->acc[j][i] *= 0.5, cal->rej[j][i] *= 0.5, cal->csum[j][i] *= 0.5;
            cal->obs[j] *= 0.5;
        }
        int i = bin_of(conf[j]);
        if (j < accepted) cal->acc[j][i] += 1.0;
        else cal->rej[j][i] += 1.0;
        cal->csum[j][i] += conf[j];
        cal->obs[j] += 1.0;
        cal->pending += 1.0;
    }
}

static double sigmoid(double z) { return 1.0 / (1.0 + exp(-z)); }

/* log(1 + e^z), without overflow */
static double softplus(double z) { return z > 0 ? z + log1p(exp(-z)) : log1p(exp(z)); }

/* The objective: -sum(acc log p + rej log(1 - p)) + w/2 ((a - a0)^2 + (b - b0)^2), p = sigmoid(a c + b). */
static double objective(const di_spec_calib *cal, int j, double a, double b, double a0, double b0) {
    double f = 0.5 * PRIOR_WEIGHT * ((a - a0) * (a - a0) + (b - b0) * (b - b0));
    for (int i = 0; i < DI_SPEC_CALIB_BINS; i++) {
        double n = cal->acc[j][i] + cal->rej[j][i];
        if (n <= 0) continue;
        double z = a * cal->csum[j][i] / n + b;
        f += cal->acc[j][i] * softplus(-z) + cal->rej[j][i] * softplus(z);
    }
    return f;
}

/* Newton's method with backtracking (a plain Newton step overshoots from a start far in a saturated
 * region of the sigmoid); the prior keeps the Hessian positive definite. */
static void fit_position(di_spec_calib *cal, int j, double a0, double b0) {
    double a = cal->fitted ? cal->a[j] : a0, b = cal->fitted ? cal->b[j] : b0;
    double f = objective(cal, j, a, b, a0, b0);
    for (int it = 0; it < NEWTON_ITERS; it++) {
        double ga = PRIOR_WEIGHT * (a - a0), gb = PRIOR_WEIGHT * (b - b0);
        double haa = PRIOR_WEIGHT, hab = 0, hbb = PRIOR_WEIGHT;
        for (int i = 0; i < DI_SPEC_CALIB_BINS; i++) {
            double n = cal->acc[j][i] + cal->rej[j][i];
            if (n <= 0) continue;
            double c = cal->csum[j][i] / n, p = sigmoid(a * c + b), r = n * p - cal->acc[j][i];
            double w = n * p * (1.0 - p);
            ga += r * c, gb += r;
            haa += w * c * c, hab += w * c, hbb += w;
        }
        double det = haa * hbb - hab * hab;
        double da = (hbb * ga - hab * gb) / det, db = (haa * gb - hab * ga) / det;
        double t = 1.0, fn = objective(cal, j, a - da, b - db, a0, b0);
        while (fn > f && t > 1e-6) {
            t *= 0.5;
            fn = objective(cal, j, a - t * da, b - t * db, a0, b0);
        }
        if (fn > f) break; /* no descent left: at the minimum to rounding */
        a -= t * da, b -= t * db, f = fn;
        if (fabs(t * da) < 1e-4 && fabs(t * db) < 1e-4) break; /* far below what scheduling resolves */
    }
    cal->a[j] = (float)a, cal->b[j] = (float)b;
}

void di_spec_calib_fit(di_spec_calib *cal) {
    if (cal->pending <= 0 || cal->pending * 64.0 < cal->obs[0]) return;
    double a0 = 1.0, b0 = 0.0;
    for (int j = 0; j < DEEPINFER_MAX_DRAFT; j++) {
        fit_position(cal, j, a0, b0);
        a0 = cal->a[j], b0 = cal->b[j];
    }
    cal->fitted = 1;
    cal->pending = 0;
}

float di_spec_calib_prob(const di_spec_calib *cal, int j, float conf) {
    double z = cal->fitted && j < DEEPINFER_MAX_DRAFT ? cal->a[j] * (double)conf + cal->b[j] : (double)conf;
    return (float)sigmoid(z);
}
