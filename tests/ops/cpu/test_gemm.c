/* GEMM tests: every weight format against a double-precision reference with
 * its own activation quantiser; scalar / AVX2 / AVX-512 bit-identical; a row's
 * result independent of the other rows, of M and of the thread count. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "io/numfmt.h"
#include "ops/ops.h"
#include "test.h"
#include "util/cpu.h"

static uint32_t rng_state = 12345;
static uint32_t rnd(void) {
    rng_state = rng_state * 1664525u + 1013904223u;
    return rng_state >> 8;
}
static float frand(void) { return (float)rnd() / (float)(1u << 24) * 2.0f - 1.0f; }

typedef struct tcase {
    di_wfmt fmt;
    int n, k, block, act_block;
    void *w;
    uint8_t *scale;
    di_wmat W;
} tcase;

static void make_case(tcase *c, di_wfmt fmt, int n, int k, int block, int act_block) {
    memset(c, 0, sizeof *c);
    c->fmt = fmt;
    c->n = n;
    c->k = k;
    c->block = block;
    c->act_block = act_block;
    size_t nk = (size_t)n * k;
    switch (fmt) {
    case DI_WFMT_BF16: {
        uint16_t *w = malloc(nk * 2);
        for (size_t i = 0; i < nk; i++) w[i] = di_f32_to_bf16(frand() * 0.5f);
        c->w = w;
        break;
    }
    case DI_WFMT_F32: {
        float *w = malloc(nk * 4);
        for (size_t i = 0; i < nk; i++) w[i] = frand() * 0.3f;
        c->w = w;
        break;
    }
    case DI_WFMT_FP8: {
        uint8_t *w = malloc(nk);
        for (size_t i = 0; i < nk; i++) {
            uint8_t b;
            do b = (uint8_t)rnd(); while ((b & 0x7F) == 0x7F);
            w[i] = b;
        }
        size_t ns = (size_t)((n + block - 1) / block) * (size_t)(k / block);
        c->scale = malloc(ns);
        for (size_t i = 0; i < ns; i++) c->scale[i] = (uint8_t)(118 + rnd() % 8);
        c->w = w;
        break;
    }
    case DI_WFMT_FP4: {
        uint8_t *w = malloc(nk / 2);
        for (size_t i = 0; i < nk / 2; i++) w[i] = (uint8_t)rnd();
        size_t ns = (size_t)n * (size_t)(k / 32);
        c->scale = malloc(ns);
        for (size_t i = 0; i < ns; i++) c->scale[i] = (uint8_t)(120 + rnd() % 6);
        c->w = w;
        break;
    }
    }
    di_error err = {0};
    di_wmat_pack(&c->W, fmt, c->w, c->scale, n, k, block, &err);
}

static void free_case(tcase *c) {
    di_wmat_free(&c->W);
    free(c->w);
    free(c->scale);
}

/* Exact weight value from the checkpoint bytes (independent of the packer). */
static double wref(const tcase *c, int n, int k) {
    switch (c->fmt) {
    case DI_WFMT_BF16: return di_bf16_to_f32(((uint16_t *)c->w)[(size_t)n * c->k + k]);
    case DI_WFMT_F32: return ((float *)c->w)[(size_t)n * c->k + k];
    case DI_WFMT_FP8: {
        double s = ldexp(1.0, c->scale[(size_t)(n / c->block) * (size_t)(c->k / c->block) + (size_t)(k / c->block)] - 127);
        return di_e4m3_to_f32(((uint8_t *)c->w)[(size_t)n * c->k + k]) * s;
    }
    case DI_WFMT_FP4: {
        uint8_t b = ((uint8_t *)c->w)[(size_t)n * (c->k / 2) + k / 2];
        double s = ldexp(1.0, c->scale[(size_t)n * (size_t)(c->k / 32) + (size_t)(k / 32)] - 127);
        return di_e2m1_to_f32((k & 1) ? (uint8_t)(b >> 4) : (uint8_t)(b & 15)) * s;
    }
    }
    return 0;
}

/* Reference activation quantisation (architecture.md §3.2) via numfmt's encoder. */
static void ref_quant(const uint16_t *x, int K, int blk, double *q) {
    for (int b = 0; b < K / blk; b++) {
        float amax = 0;
        for (int i = 0; i < blk; i++) amax = fmaxf(amax, fabsf(di_bf16_to_f32(x[b * blk + i])));
        amax = fmaxf(amax, 1e-4f);
        float s = di_pow2_ceil(amax * (float)(1.0 / 448.0));
        for (int i = 0; i < blk; i++) {
            float v = di_bf16_to_f32(x[b * blk + i]) / s;
            v = fminf(fmaxf(v, -448.0f), 448.0f);
            q[b * blk + i] = (double)di_round_e4m3(v) * s;
        }
    }
}

/* Check one case: C vs double reference within a bound on the fp32 rounding
 * of the (exact-product) sums; and optionally return C. */
static int check_case(tcase *c, int M, const uint16_t *A, float *C, double *max_rel) {
    di_exec x;
    di_error err = {0};
    if (di_exec_init(&x, 0, &err)) return 0;
    di_gemm(&x, M, A, (size_t)c->k, &c->W, c->act_block, C, NULL, (size_t)c->n);
    di_exec_free(&x);
    double *q = malloc(sizeof(double) * (size_t)c->k);
    int ok = 1;
    *max_rel = 0;
    for (int m = 0; m < M && ok; m++) {
        const uint16_t *a = A + (size_t)m * c->k;
        int quant = c->fmt == DI_WFMT_FP8 || c->fmt == DI_WFMT_FP4;
        if (quant) ref_quant(a, c->k, c->act_block, q);
        else
            for (int k = 0; k < c->k; k++) q[k] = di_bf16_to_f32(a[k]);
        for (int n = 0; n < c->n; n++) {
            double s = 0, sa = 0;
            for (int k = 0; k < c->k; k++) {
                double t = q[k] * wref(c, n, k);
                s += t;
                sa += fabs(t);
            }
            double d = fabs(C[(size_t)m * c->n + n] - s);
            double bound = sa * 1e-6 + 1e-30;
            if (d / (sa + 1e-30) > *max_rel) *max_rel = d / (sa + 1e-30);
            if (d > bound) {
                di_test_fail(__FILE__, __LINE__, "fmt %d m %d n %d: %.9g vs ref %.9g (|terms| %.3g)", c->fmt, m, n,
                             C[(size_t)m * c->n + n], s, sa);
                ok = 0;
                break;
            }
        }
    }
    free(q);
    return ok;
}

static uint16_t *rand_acts(int M, int K) {
    uint16_t *A = malloc((size_t)M * K * 2);
    for (size_t i = 0; i < (size_t)M * K; i++) {
        float v = frand() * 4.0f;
        if (rnd() % 64 == 0) v *= 40.0f; /* outliers stress the block scales */
        A[i] = di_f32_to_bf16(v);
    }
    return A;
}

static const struct {
    di_wfmt fmt;
    int n, k, block, act;
} k_cases[] = {
    {DI_WFMT_FP8, 200, 384, 128, 128}, {DI_WFMT_FP8, 64, 256, 32, 32},  {DI_WFMT_FP4, 72, 256, 32, 128},
    {DI_WFMT_FP4, 40, 192, 32, 32},    {DI_WFMT_BF16, 50, 130, 0, 0},   {DI_WFMT_F32, 24, 96, 0, 0},
};

TEST(gemm_matches_double_reference) {
    for (size_t ci = 0; ci < sizeof k_cases / sizeof k_cases[0]; ci++) {
        tcase c;
        make_case(&c, k_cases[ci].fmt, k_cases[ci].n, k_cases[ci].k, k_cases[ci].block, k_cases[ci].act);
        int M = 7;
        uint16_t *A = rand_acts(M, c.k);
        float *C = malloc(sizeof(float) * (size_t)M * c.n);
        double rel;
        int ok = check_case(&c, M, A, C, &rel);
        free(A);
        free(C);
        free_case(&c);
        CHECK(ok);
    }
}

TEST(gemm_isa_paths_bit_identical) {
    di_isa hw = di_cpu_isa_hw();
    if (hw == DI_ISA_SCALAR) SKIP("only the scalar path on this CPU: no vector path to compare with it");
    for (size_t ci = 0; ci < sizeof k_cases / sizeof k_cases[0]; ci++) {
        tcase c;
        make_case(&c, k_cases[ci].fmt, k_cases[ci].n, k_cases[ci].k, k_cases[ci].block, k_cases[ci].act);
        int M = 9;
        uint16_t *A = rand_acts(M, c.k);
        size_t nout = (size_t)M * c.n;
        float *C[3] = {malloc(4 * nout), malloc(4 * nout), malloc(4 * nout)};
        uint16_t *H[3] = {malloc(2 * nout), malloc(2 * nout), malloc(2 * nout)};
        di_exec x;
        di_error err = {0};
        CHECK(di_exec_init(&x, 0, &err) == DEEPINFER_OK);
        int npaths = 0;
        for (int isa = DI_ISA_SCALAR; isa <= (int)hw; isa++) {
            di_cpu_set_isa((di_isa)isa);
            di_gemm(&x, M, A, (size_t)c.k, &c.W, c.act_block, C[npaths], NULL, (size_t)c.n);
            di_gemm(&x, M, A, (size_t)c.k, &c.W, c.act_block, NULL, H[npaths], (size_t)c.n);
            npaths++;
        }
        di_cpu_set_isa(hw);
        for (int p = 1; p < npaths; p++) {
            CHECK_MSG(!memcmp(C[0], C[p], 4 * nout), "fmt %d: ISA path %d differs from scalar", c.fmt, p);
            CHECK_MSG(!memcmp(H[0], H[p], 2 * nout), "fmt %d: ISA path %d (bf16 out) differs", c.fmt, p);
        }
        for (size_t i = 0; i < nout; i++) CHECK(H[0][i] == di_f32_to_bf16(C[0][i]));
        di_exec_free(&x);
        for (int p = 0; p < 3; p++) {
            free(C[p]);
            free(H[p]);
        }
        free(A);
        free_case(&c);
    }
}

TEST(gemm_batch_invariant) {
    /* Row r computed inside batches of different sizes, alone, with a tiny
     * scratch (forcing row chunking) and on 1 thread: all bit-identical. */
    for (size_t ci = 0; ci < sizeof k_cases / sizeof k_cases[0]; ci++) {
        tcase c;
        make_case(&c, k_cases[ci].fmt, k_cases[ci].n, k_cases[ci].k, k_cases[ci].block, k_cases[ci].act);
        int M = 13;
        uint16_t *A = rand_acts(M, c.k);
        float *Cfull = malloc(sizeof(float) * (size_t)M * c.n), *Cone = malloc(sizeof(float) * (size_t)c.n);
        di_exec x, small, serial;
        di_error err = {0};
        CHECK(di_exec_init(&x, 0, &err) == DEEPINFER_OK);
        CHECK(di_exec_init(&small, di_gemm_scratch_per_row(c.k) * 2, &err) == DEEPINFER_OK);
        CHECK(di_exec_init(&serial, 0, &err) == DEEPINFER_OK);
        serial.tp = NULL;
        di_gemm(&x, M, A, (size_t)c.k, &c.W, c.act_block, Cfull, NULL, (size_t)c.n);
        for (int m = 0; m < M; m++) {
            di_gemm(&x, 1, A + (size_t)m * c.k, (size_t)c.k, &c.W, c.act_block, Cone, NULL, (size_t)c.n);
            CHECK(!memcmp(Cone, Cfull + (size_t)m * c.n, 4 * (size_t)c.n));
        }
        float *C2 = malloc(sizeof(float) * (size_t)M * c.n);
        di_gemm(&small, M, A, (size_t)c.k, &c.W, c.act_block, C2, NULL, (size_t)c.n);
        CHECK(!memcmp(C2, Cfull, sizeof(float) * (size_t)M * c.n));
        di_gemm(&serial, M, A, (size_t)c.k, &c.W, c.act_block, C2, NULL, (size_t)c.n);
        CHECK(!memcmp(C2, Cfull, sizeof(float) * (size_t)M * c.n));
        /* rows 3..8 as their own batch */
        di_gemm(&x, 6, A + 3 * (size_t)c.k, (size_t)c.k, &c.W, c.act_block, C2, NULL, (size_t)c.n);
        CHECK(!memcmp(C2, Cfull + 3 * (size_t)c.n, sizeof(float) * 6 * (size_t)c.n));
        di_exec_free(&x);
        di_exec_free(&small);
        di_exec_free(&serial);
        free(C2);
        free(Cfull);
        free(Cone);
        free(A);
        free_case(&c);
    }
}

TEST(wmat_get_roundtrips_checkpoint_values) {
    for (size_t ci = 0; ci < sizeof k_cases / sizeof k_cases[0]; ci++) {
        tcase c;
        make_case(&c, k_cases[ci].fmt, k_cases[ci].n, k_cases[ci].k, k_cases[ci].block, k_cases[ci].act);
        for (int n = 0; n < c.n; n++)
            for (int k = 0; k < c.k; k++) CHECK((double)di_wmat_get(&c.W, n, k) == wref(&c, n, k));
        free_case(&c);
    }
}

TEST(gemm2_equals_two_gemms) {
    /* di_gemm2 (one quantisation, one region for both weights) against two
     * di_gemm calls, every format, bf16 and fp32 outputs, with row chunking */
    for (size_t ci = 0; ci < sizeof k_cases / sizeof k_cases[0]; ci++) {
        tcase a, b;
        make_case(&a, k_cases[ci].fmt, k_cases[ci].n, k_cases[ci].k, k_cases[ci].block, k_cases[ci].act);
        make_case(&b, k_cases[ci].fmt, k_cases[ci].n, k_cases[ci].k, k_cases[ci].block, k_cases[ci].act);
        int M = 37;
        uint16_t *A = rand_acts(M, a.k);
        size_t nout = (size_t)M * a.n;
        float *r32[2] = {malloc(4 * nout), malloc(4 * nout)}, *g32[2] = {malloc(4 * nout), malloc(4 * nout)};
        uint16_t *r16[2] = {malloc(2 * nout), malloc(2 * nout)}, *g16[2] = {malloc(2 * nout), malloc(2 * nout)};
        di_exec x, small;
        di_error err = {0};
        CHECK(di_exec_init(&x, 0, &err) == DEEPINFER_OK);
        CHECK(di_exec_init(&small, di_gemm_scratch_per_row(a.k) * 5, &err) == DEEPINFER_OK);
        di_gemm(&x, M, A, (size_t)a.k, &a.W, a.act_block, r32[0], NULL, (size_t)a.n);
        di_gemm(&x, M, A, (size_t)a.k, &b.W, b.act_block, r32[1], NULL, (size_t)a.n);
        di_gemm(&x, M, A, (size_t)a.k, &a.W, a.act_block, NULL, r16[0], (size_t)a.n);
        di_gemm(&x, M, A, (size_t)a.k, &b.W, b.act_block, NULL, r16[1], (size_t)a.n);
        for (int s = 0; s < 2; s++) {
            di_exec *e = s ? &small : &x;
            di_gemm2(e, M, A, (size_t)a.k, &a.W, &b.W, a.act_block, g32[0], NULL, g32[1], NULL, (size_t)a.n);
            di_gemm2(e, M, A, (size_t)a.k, &a.W, &b.W, a.act_block, NULL, g16[0], NULL, g16[1], (size_t)a.n);
            for (int w = 0; w < 2; w++) {
                CHECK_MSG(!memcmp(g32[w], r32[w], 4 * nout), "fmt %d weight %d (fp32 out, scratch %d)", a.fmt, w, s);
                CHECK_MSG(!memcmp(g16[w], r16[w], 2 * nout), "fmt %d weight %d (bf16 out, scratch %d)", a.fmt, w, s);
            }
        }
        di_exec_free(&x);
        di_exec_free(&small);
        for (int w = 0; w < 2; w++) free(r32[w]), free(g32[w]), free(r16[w]), free(g16[w]);
        free(A);
        free_case(&a);
        free_case(&b);
    }
}
