/* rope.c — interleaved tail rotary embedding (§4.3) with the reference's
 * fp32 frequency table (precompute_freqs_cis), optional YaRN ramp and no
 * magnitude scaling; the inverse rotation uses the conjugate. cos/sin are
 * evaluated in double from the fp32 angle and rounded (torch.polar); the
 * tables are src/ops/rope_table.c's, shared with the CUDA backend.
 *
 * The rotation is the complex product the reference evaluates on CUDA,
 * where c10::complex's (a*c - b*s, a*s + b*c) is compiled with FMA
 * contraction of the first product: re = fma(a, c, -(b*s)),
 * im = fma(a, s, b*c). Measured on the golden vectors this matches the
 * reference markedly better than unfused arithmetic or the other
 * contraction (indexer selections before the first divergence, mean logit
 * difference), so it is the documented order here. */
#include <math.h>

#include "io/numfmt.h"
#include "ops/cpu/elem.h"
#include "ops/cpu/vec.h"
#include "ops/cpu/cpu_ops.h"
#include "ops/ops.h"
#include "util/cpu.h"

typedef struct rope_ctx {
    uint16_t *v;
    size_t ld;
    int nheads, hd, rd;
    const int64_t *pos;       /* with inv_freq: compute per row */
    const float *inv_freq;
    const float *cs, *sn;     /* or a table [M][rd/2] */
    int inverse;
} rope_ctx;

static void rope_rows(void *p, int m0, int m1) {
    rope_ctx *c = p;
    float tcs[128], tsn[128];
    int half = c->rd / 2;
    int vec = di_cpu_isa() == DI_ISA_AVX512 && half % 16 == 0;
    for (int m = m0; m < m1; m++) {
        const float *cs, *sn;
        if (c->cs) {
            cs = c->cs + (size_t)m * half;
            sn = c->sn + (size_t)m * half;
        } else {
            di_rope_table(1, c->pos + m, c->inv_freq, c->rd, tcs, tsn);
            cs = tcs;
            sn = tsn;
        }
        for (int h = 0; h < c->nheads; h++) {
            uint16_t *x = c->v + (size_t)m * c->ld + (size_t)h * c->hd + (c->hd - c->rd);
            if (vec) {
                di_rope_row_avx512(x, half, cs, sn, c->inverse);
                continue;
            }
            for (int i = 0; i < half; i++) {
                float a = di_bf16_to_f32(x[2 * i]), b = di_bf16_to_f32(x[2 * i + 1]);
                /* (a + ib)(c + is) as the CUDA reference computes it: c10::complex
                 * multiplication compiled with FMA contraction of the first product */
                float cc = cs[i], ss = c->inverse ? -sn[i] : sn[i];
                float re = fmaf(a, cc, -(b * ss));
                float im = fmaf(a, ss, b * cc);
                x[2 * i] = di_f32_to_bf16(re);
                x[2 * i + 1] = di_f32_to_bf16(im);
            }
        }
    }
}

void di_cpu_rope(di_exec *x, int M, uint16_t *v, size_t ld, int nheads, int hd, int rd, const int64_t *pos,
                 const float *inv_freq, int inverse) {
    rope_ctx c = {v, ld, nheads, hd, rd, pos, inv_freq, NULL, NULL, inverse};
    di_par_rows(x, M, 8.0 * nheads * rd + 40.0 * rd, rope_rows, &c);
}

void di_cpu_rope_tab(di_exec *x, int M, uint16_t *v, size_t ld, int nheads, int hd, int rd, const float *cs,
                     const float *sn, int inverse) {
    rope_ctx c = {v, ld, nheads, hd, rd, NULL, NULL, cs, sn, inverse};
    di_par_rows(x, M, 8.0 * nheads * rd, rope_rows, &c);
}
