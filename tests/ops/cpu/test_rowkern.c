/* The vectorised row kernels of the CPU ops: for every op, every ISA path
 * gives the same bits as the scalar code, and each row computed alone gives
 * the bits it has inside a batch of 37 rows (which spans full and partial
 * groups of 16 rows per vector). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "io/numfmt.h"
#include "ops/ops.h"
#include "test.h"
#include "util/cpu.h"

#define M 37

static uint32_t g_rng = 4242;
static float frand(void) {
    g_rng = g_rng * 1664525u + 1013904223u;
    return (float)(g_rng >> 8) / (float)(1u << 24) * 2.0f - 1.0f;
}

/* An op applied to rows [m0, m0 + n) of in (row stride ld elements), in place
 * on a copy; out receives the result. */
typedef void (*row_op)(di_exec *x, int n, void *buf, size_t ld);

static di_exec g_x;

/* Runs `op` on M rows of `bytes_per_row` (ld in elements of size esz) for
 * every ISA and row by row; checks all agree with the batched scalar run. */
static int check_op(const char *name, row_op op, const void *init, size_t ld, size_t esz) {
    size_t rb = ld * esz, total = rb * M;
    unsigned char *ref = malloc(total), *buf = malloc(total);
    di_isa hw = di_cpu_isa_hw();
    int ok = 1;
    for (int isa = DI_ISA_SCALAR; isa <= (int)hw && ok; isa++) {
        di_cpu_set_isa((di_isa)isa);
        memcpy(buf, init, total);
        op(&g_x, M, buf, ld);
        if (isa == DI_ISA_SCALAR) memcpy(ref, buf, total);
        else if (memcmp(ref, buf, total)) {
            fprintf(stderr, "    %s: %s path differs from scalar\n", name, di_isa_name((di_isa)isa));
            ok = 0;
        }
        for (int m = 0; m < M && ok; m += 5) { /* alone */
            memcpy(buf, (const unsigned char *)init + rb * m, rb);
            op(&g_x, 1, buf, ld);
            if (memcmp(buf, ref + rb * m, rb)) {
                fprintf(stderr, "    %s: row %d alone differs from the batch (%s)\n", name, m, di_isa_name((di_isa)isa));
                ok = 0;
            }
        }
    }
    di_cpu_set_isa(hw);
    free(ref), free(buf);
    return ok;
}

static uint16_t *bf_rows(int n, float scale) {
    uint16_t *v = malloc(2 * (size_t)n);
    for (int i = 0; i < n; i++) v[i] = di_f32_to_bf16(frand() * scale * (i % 17 == 3 ? 40.0f : 1.0f));
    return v;
}

static float g_w[512];
static void op_rmsnorm_w(di_exec *x, int n, void *b, size_t ld) { di_rmsnorm(x, n, b, ld, g_w, 512, 1e-6f, b, ld); }
static void op_rmsnorm(di_exec *x, int n, void *b, size_t ld) { di_rmsnorm(x, n, b, ld, NULL, 128, 1e-6f, b, ld); }
static void op_hnorm(di_exec *x, int n, void *b, size_t ld) { di_head_rmsnorm_bf16(x, n, b, ld, 4, 128, 1e-6f); }
static void op_fp8(di_exec *x, int n, void *b, size_t ld) { di_qat_fp8(x, n, b, ld, 448, 64); }
static void op_fp4(di_exec *x, int n, void *b, size_t ld) { di_qat_fp4(x, n, b, ld, 512, 32); }
static void op_fp4e(di_exec *x, int n, void *b, size_t ld) { di_qat_fp4_e4m3(x, n, b, ld, 512, 16); }
static void op_had(di_exec *x, int n, void *b, size_t ld) { di_hadamard128(x, n, b, ld, 4); }
static float g_cs[M * 32], g_sn[M * 32];
static void op_rope(di_exec *x, int n, void *b, size_t ld) {
    di_rope_tab(x, n, b, ld, 4, 128, 64, g_cs, g_sn, 0); /* every row at one position, so a row alone sees its table */
    di_rope_tab(x, n, b, ld, 2, 256, 64, g_cs, g_sn, 1);
}
static float g_rw[M];
static void op_swiglu(di_exec *x, int n, void *b, size_t ld) {
    uint16_t *g = b;
    di_swiglu(x, n, g, g + 200, ld, 200, 10.0f, NULL, g + 400, ld);
    di_swiglu(x, n, g, g + 200, ld, 130, 0.0f, NULL, g + 600, ld);
}

TEST(row_kernels_isa_and_batch_identical) {
    di_error e = {0};
    di_exec_init(&g_x, 0, &e);
    for (int i = 0; i < 512; i++) g_w[i] = 1.0f + frand();
    for (int i = 0; i < M * 32; i++) g_cs[i] = cosf(0.37f * (i % 32)), g_sn[i] = sinf(0.37f * (i % 32));
    uint16_t *a = bf_rows(M * 512, 3.0f);
    CHECK(check_op("rmsnorm (weight, D 512)", op_rmsnorm_w, a, 512, 2));
    CHECK(check_op("rmsnorm (no weight, D 128)", op_rmsnorm, a, 512, 2));
    CHECK(check_op("head rmsnorm bf16", op_hnorm, a, 512, 2));
    CHECK(check_op("qat fp8", op_fp8, a, 512, 2));
    CHECK(check_op("qat fp4", op_fp4, a, 512, 2));
    CHECK(check_op("hadamard128", op_had, a, 512, 2));
    CHECK(check_op("qat fp4 (e4m3 scales)", op_fp4e, a, 512, 2));
    CHECK(check_op("rope (+ inverse)", op_rope, a, 512, 2));
    uint16_t *s = bf_rows(M * 800, 6.0f);
    CHECK(check_op("swiglu", op_swiglu, s, 800, 2));
    /* mHC mix scaling: residual rows of 512, mixes [M][24] */
    float min[M * 24], mout[3][M * 24], one[24];
    for (int i = 0; i < M * 24; i++) min[i] = frand() * 5;
    di_isa hw = di_cpu_isa_hw();
    for (int isa = DI_ISA_SCALAR; isa <= (int)hw; isa++) {
        di_cpu_set_isa((di_isa)isa);
        di_hc_scale_mixes(&g_x, M, a, 512, 512, 1e-6f, min, 24, mout[isa]);
        CHECK(!memcmp(mout[isa], mout[0], sizeof mout[0]));
        for (int m = 0; m < M; m += 4) {
            di_hc_scale_mixes(&g_x, 1, a + m * 512, 512, 512, 1e-6f, min + m * 24, 24, one);
            CHECK(!memcmp(one, mout[0] + m * 24, sizeof one));
        }
    }
    di_cpu_set_isa(hw);
    free(a), free(s);
    di_exec_free(&g_x);
    if (hw == DI_ISA_SCALAR) SKIP("only the scalar path on this CPU: no vector path to compare with it"); /* batch invariance checked; the ISA half cannot be */
}

TEST(sinkhorn_rows_equal_per_token_sinkhorn) {
    /* the batched entry point (16 tokens per vector) against the per-token op on the scalar path */
    di_error e = {0};
    di_exec_init(&g_x, 0, &e);
    float mixes[M * 24], s3[3] = {0.8f, 1.2f, 0.95f}, base[24], out[3][M * 24], one[24];
    for (int i = 0; i < M * 24; i++) mixes[i] = frand() * 4;
    for (int i = 0; i < 24; i++) base[i] = frand();
    di_isa hw = di_cpu_isa_hw();
    for (int isa = DI_ISA_SCALAR; isa <= (int)hw; isa++) {
        di_cpu_set_isa((di_isa)isa);
        di_hc_sinkhorn_rows(&g_x, M, mixes, s3, base, 20, 1e-6f, out[isa], out[isa] + M * 4, out[isa] + M * 8);
        for (int m = 0; m < M; m++) {
            di_cpu_set_isa(DI_ISA_SCALAR);
            di_hc_sinkhorn(mixes + m * 24, s3, base, 20, 1e-6f, one, one + 4, one + 8);
            di_cpu_set_isa((di_isa)isa);
            CHECK(!memcmp(one, out[isa] + m * 4, 16) && !memcmp(one + 4, out[isa] + M * 4 + m * 4, 16));
            CHECK(!memcmp(one + 8, out[isa] + M * 8 + m * 16, 64));
        }
    }
    di_cpu_set_isa(hw);
    di_exec_free(&g_x);
}

TEST(swiglu_weighted_and_pool_sinkhorn_isa_identical) {
    if (di_cpu_isa_hw() == DI_ISA_SCALAR) SKIP("only the scalar path on this CPU: no vector path to compare with it");
    /* row weights, the softmax pooling (channels per vector) and Sinkhorn */
    di_error e = {0};
    di_exec_init(&g_x, 0, &e);
    uint16_t *g = malloc(2 * M * 96), *u = malloc(2 * M * 96), *o[3];
    for (int i = 0; i < M * 96; i++) g[i] = di_f32_to_bf16(frand() * 12), u[i] = di_f32_to_bf16(frand() * 12);
    for (int m = 0; m < M; m++) g_rw[m] = frand();
    float kv[128 * 40], sc[128 * 40], pool[3][40], mixes[24], s3[3] = {0.9f, 1.1f, 1.05f}, base[24], sk[3][24];
    for (int i = 0; i < 128 * 40; i++) kv[i] = frand() * 3, sc[i] = (i % 9 == 4) ? -INFINITY : frand() * 6;
    for (int i = 0; i < 24; i++) mixes[i] = frand() * 3, base[i] = frand();
    di_isa hw = di_cpu_isa_hw();
    int np = 0;
    for (int isa = DI_ISA_SCALAR; isa <= (int)hw; isa++, np++) {
        di_cpu_set_isa((di_isa)isa);
        o[np] = malloc(2 * M * 96);
        di_swiglu(&g_x, M, g, u, 96, 90, 7.0f, g_rw, o[np], 96);
        di_softmax_pool(kv, sc, 40, 128, 37, pool[np]);
        di_hc_sinkhorn(mixes, s3, base, 20, 1e-6f, sk[np], sk[np] + 4, sk[np] + 8);
    }
    di_cpu_set_isa(hw);
    for (int p = 1; p < np; p++) {
        CHECK(!memcmp(o[0], o[p], 2 * M * 96));
        CHECK(!memcmp(pool[0], pool[p], sizeof pool[0]));
        CHECK(!memcmp(sk[0], sk[p], sizeof sk[0]));
    }
    for (int p = 0; p < np; p++) free(o[p]);
    free(g), free(u);
    di_exec_free(&g_x);
}

TEST(elementwise_helpers_isa_identical) {
    if (di_cpu_isa_hw() == DI_ISA_SCALAR) SKIP("only the scalar path on this CPU: no vector path to compare with it");
    enum { N = 1000 + 13 };
    static float y[3][N], a[N], b[N], s[3][N];
    static uint16_t v[N], o[3][N];
    for (int i = 0; i < N; i++) a[i] = frand() * 100, b[i] = frand(), v[i] = di_f32_to_bf16(frand() * 7);
    a[5] = NAN, b[7] = INFINITY;
    di_isa hw = di_cpu_isa_hw();
    for (int isa = DI_ISA_SCALAR; isa <= (int)hw; isa++) {
        di_cpu_set_isa((di_isa)isa);
        memcpy(y[isa], a, sizeof a);
        di_add_bf16_f32(y[isa], v, N - (size_t)isa); /* tails of different lengths */
        di_add_f32(s[isa], a, b, N);
        di_f32_to_bf16_n(a, o[isa], N);
        CHECK(!memcmp(y[isa], y[0], sizeof(float) * (N - 2)) && !memcmp(s[isa], s[0], sizeof s[0]));
        CHECK(!memcmp(o[isa], o[0], sizeof o[0]));
    }
    di_cpu_set_isa(hw);
}

TEST(topk_isa_identical_with_ties_and_nans) {
    if (di_cpu_isa_hw() == DI_ISA_SCALAR) SKIP("only the scalar path on this CPU: no vector path to compare with it");
    enum { N = 3000 };
    static float sc[N];
    static int got[3][N];
    for (int i = 0; i < N; i++) sc[i] = di_round_bf16(frand() * 4); /* bf16: many ties */
    sc[17] = NAN, sc[1500] = NAN, sc[2999] = INFINITY;
    int ks[3] = {16, 300, 2900}, ns[3] = {40, 900, N};
    di_isa hw = di_cpu_isa_hw();
    for (int t = 0; t < 3; t++)
        for (int isa = DI_ISA_SCALAR; isa <= (int)hw; isa++) {
            di_cpu_set_isa((di_isa)isa);
            int c = di_topk_desc(sc, ns[t], ks[t], got[isa]);
            CHECK_EQ_INT(c, ks[t] < ns[t] ? ks[t] : ns[t]);
            CHECK(!memcmp(got[isa], got[0], sizeof(int) * (size_t)c));
        }
    di_cpu_set_isa(hw);
}
