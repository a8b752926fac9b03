/* rope_table.c — the rotary embedding's host tables (ops.h
 * di_rope_inv_freq, di_rope_table), shared by every backend: the
 * reference's fp32 inverse frequencies (precompute_freqs_cis, optional YaRN
 * ramp) and cos/sin evaluated in double from the fp32 angle and rounded
 * (torch.polar). The rotation itself is each backend's (cpu/rope.c). */
#include <math.h>

#include "ops/ops.h"

static double correction_dim(double rotations, int dim, double base, double max_len) {
    return dim * log(max_len / (rotations * 2.0 * M_PI)) / (2.0 * log(base));
}

void di_rope_inv_freq(int rd, double base, int orig_len, double factor, double beta_fast, double beta_slow,
                      float *inv_freq) {
    int half = rd / 2;
    for (int i = 0; i < half; i++) {
        float e = (float)(2 * i) / (float)rd;
        float p = (float)pow((double)(float)base, (double)e);
        inv_freq[i] = 1.0f / p;
    }
    if (orig_len <= 0) return;
    double lo = floor(correction_dim(beta_fast, rd, base, orig_len));
    double hi = ceil(correction_dim(beta_slow, rd, base, orig_len));
    if (lo < 0) lo = 0;
    if (hi > rd - 1) hi = rd - 1;
    if (lo == hi) hi += 0.001;
    float flo = (float)lo, fden = (float)(hi - lo), ffac = (float)factor;
    for (int i = 0; i < half; i++) {
        float ramp = ((float)i - flo) / fden;
        if (ramp < 0.0f) ramp = 0.0f;
        if (ramp > 1.0f) ramp = 1.0f;
        float smooth = 1.0f - ramp;
        float f = inv_freq[i];
        inv_freq[i] = f / ffac * (1.0f - smooth) + f * smooth;
    }
}

void di_rope_table(int M, const int64_t *pos, const float *inv_freq, int rd, float *cs, float *sn) {
    int half = rd / 2;
    for (int m = 0; m < M; m++) {
        float t = (float)pos[m];
        for (int i = 0; i < half; i++) {
            float ang = t * inv_freq[i];
            cs[(size_t)m * half + i] = (float)cos((double)ang);
            sn[(size_t)m * half + i] = (float)sin((double)ang);
        }
    }
}
