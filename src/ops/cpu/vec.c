#include "ops/cpu/vec.h"

#include "io/numfmt.h"
#include "util/cpu.h"

int di_vec_use_avx512(void) { return di_cpu_isa() == DI_ISA_AVX512 && di_cpu_has_avx512bf16(); }

static int use_avx512(void) { return di_vec_use_avx512(); }

float di_vdot_bf16(const uint16_t *a, const uint16_t *b, int n) {
    if (use_avx512()) return di_vdot_bf16_avx512(a, b, n);
    if (di_cpu_isa() >= DI_ISA_AVX2) return di_vdot_bf16_avx2(a, b, n);
    float lane[16] = {0};
    for (int s = 0; s < n; s += 32)
        for (int l = 0; l < 16; l++) {
            lane[l] += di_bf16_to_f32(a[s + 2 * l + 1]) * di_bf16_to_f32(b[s + 2 * l + 1]);
            lane[l] += di_bf16_to_f32(a[s + 2 * l]) * di_bf16_to_f32(b[s + 2 * l]);
        }
    for (int w = 8; w >= 1; w /= 2)
        for (int l = 0; l < w; l++) lane[l] += lane[l + w];
    return lane[0];
}

void di_vaxpy_bf16(float *o, float p, const uint16_t *v, int n) {
    if (use_avx512()) {
        di_vaxpy_bf16_avx512(o, p, v, n);
        return;
    }
    if (di_cpu_isa() >= DI_ISA_AVX2) {
        di_vaxpy_bf16_avx2(o, p, v, n);
        return;
    }
    for (int i = 0; i < n; i++) o[i] += p * di_bf16_to_f32(v[i]);
}

void di_vscale(float *o, float a, int n) {
    for (int i = 0; i < n; i++) o[i] *= a;
}

typedef struct rows_ctx {
    di_rows_fn fn;
    void *ctx;
    int M;
} rows_ctx;

static void rows_task(void *p, int t, int n) {
    rows_ctx *c = p;
    size_t b, e;
    di_split_range((size_t)c->M, t, n, &b, &e);
    if (b < e) c->fn(c->ctx, (int)b, (int)e);
}

void di_par_rows(di_exec *x, int M, double row_cost, di_rows_fn fn, void *ctx) {
    if (M <= 0) return;
    rows_ctx c = {fn, ctx, M};
    di_threadpool *tp = x ? x->tp : NULL;
    di_threadpool_run_n(tp, di_chunks_for(tp, (double)M * row_cost, (double)(1 << 17), M), rows_task, &c);
}
