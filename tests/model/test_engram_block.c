/* The Engram block (architecture.md §5.8): the full gather -> wkv (the
 * shared FP8 GEMM) -> gating -> residual update, against double-precision
 * references written here, on random weights in the released formats; ISA
 * paths and batch splits must agree bit for bit. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "io/numfmt.h"
#include "model/engram.h"
#include "test.h"
#include "util/cpu.h"

static uint64_t g_rng = 0x9E3779B97F4A7C15ull;
static uint32_t rnd(void) {
    g_rng ^= g_rng << 13, g_rng ^= g_rng >> 7, g_rng ^= g_rng << 17;
    return (uint32_t)(g_rng >> 11);
}
static double urand(void) { return (rnd() & 0xFFFFFF) / 16777216.0; }
static double nrand(void) { return sqrt(-2 * log(urand() + 1e-12)) * cos(6.283185307179586 * urand()); }
static uint8_t rnd_e4m3(void) {
    uint8_t b;
    do b = (uint8_t)rnd(); while ((b & 0x7F) == 0x7F);
    return b;
}
static uint8_t rnd_e8m0(int lo, int hi) { return (uint8_t)(lo + (int)(rnd() % (uint32_t)(hi - lo + 1))); }

/* Reference activation quantisation (architecture.md §3.2): the scale is
 * 2^ceil(log2 t) of the fp32 t = amax · fp32(1/448), worked out with frexp. */
static void ref_quant(const float *x, int k, double *q, double *s) {
    for (int b = 0; b < k / 32; b++) {
        float amax = 1e-4f;
        for (int j = 0; j < 32; j++) amax = fabsf(x[b * 32 + j]) > amax ? fabsf(x[b * 32 + j]) : amax;
        float t = amax * (1.0f / 448.0f);
        int e;
        double m = frexp((double)t, &e);
        s[b] = m == 0.5 ? (double)t : ldexp(1.0, e);
        for (int j = 0; j < 32; j++) q[b * 32 + j] = di_e4m3_to_f32(di_f32_to_e4m3((float)(x[b * 32 + j] / s[b])));
    }
}

/* y = Σ_blocks (Σ q·w)·s_x·s_w in double. */
static double ref_linear_row(const double *q, const double *s, const uint8_t *w, const uint8_t *ws, int j, int k) {
    double acc = 0;
    for (int b = 0; b < k / 32; b++) {
        double p = 0;
        for (int t = 0; t < 32; t++) p += q[b * 32 + t] * di_e4m3_to_f32(w[(size_t)j * k + b * 32 + t]);
        acc += p * s[b] * di_e8m0_to_f32(ws[(j / 32) * (k / 32) + b]);
    }
    return acc;
}

/* ---- the block ----------------------------------------------------------------------------- */

typedef struct toy {
    int dim, hc, n_cols, hd;
    int64_t rows;
    uint8_t *table, *tscale, *wkv, *wscale;
    uint16_t *qw, *kw;
    float *qwf, *kwf;
    di_wmat W;  /* wkv packed for the shared GEMM */
    di_exec x;
} toy;

static void toy_make(toy *t, int dim, int hc, int n_cols, int hd, int64_t rows) {
    t->dim = dim, t->hc = hc, t->n_cols = n_cols, t->hd = hd, t->rows = rows;
    const int k = n_cols * hd, n = (hc + 1) * dim;
    t->table = malloc((size_t)rows * hd);
    t->tscale = malloc((size_t)rows * (hd / 32));
    t->wkv = malloc((size_t)n * k);
    t->wscale = malloc((size_t)((n + 31) / 32) * (k / 32));
    t->qw = malloc(sizeof(uint16_t) * hc * dim), t->kw = malloc(sizeof(uint16_t) * hc * dim);
    t->qwf = malloc(sizeof(float) * hc * dim), t->kwf = malloc(sizeof(float) * hc * dim);
    for (int64_t i = 0; i < rows * hd; i++) t->table[i] = rnd_e4m3();
    for (int64_t i = 0; i < rows * (hd / 32); i++) t->tscale[i] = rnd_e8m0(118, 124);
    for (int64_t i = 0; i < (int64_t)n * k; i++) t->wkv[i] = rnd_e4m3();
    for (int i = 0; i < ((n + 31) / 32) * (k / 32); i++) t->wscale[i] = rnd_e8m0(112, 118);
    di_error err;
    if (di_wmat_pack(&t->W, DI_WFMT_FP8, t->wkv, t->wscale, n, k, 32, &err) ||
        di_exec_init(&t->x, di_gemm_scratch_per_row(k) * 64, &err))
        abort();
    for (int i = 0; i < hc * dim; i++) {
        t->qw[i] = di_f32_to_bf16((float)(1 + 0.5 * nrand()));
        t->kw[i] = di_f32_to_bf16((float)(1 + 0.5 * nrand()));
        t->qwf[i] = (float)(1 + 0.5 * nrand());
        t->kwf[i] = (float)(1 + 0.5 * nrand());
    }
}

static void toy_free(toy *t) {
    di_wmat_free(&t->W);
    di_exec_free(&t->x);
    free(t->table), free(t->tscale), free(t->wkv), free(t->wscale);
    free(t->qw), free(t->kw), free(t->qwf), free(t->kwf);
}

static di_engram_layer_desc toy_desc(const toy *t, int f32) {
    di_engram_layer_desc d = {t->dim, t->hc, t->n_cols, t->hd, t->rows, 1e-20f, 32, t->table, t->tscale, &t->W,
                              f32 ? (const void *)t->qwf : t->qw, f32 ? (const void *)t->kwf : t->kw, f32, 0, 0};
    return d;
}

/* Double-precision Engram of one token: out[hc][dim] (before the BF16 cast), gates[hc]. */
static void ref_token(const toy *t, int f32, const int64_t *ids, const uint16_t *R, double *out, double *gates) {
    const int k = t->n_cols * t->hd, n = (t->hc + 1) * t->dim, dim = t->dim;
    float *e = malloc(sizeof(float) * k);
    double *q = malloc(sizeof(double) * k), *s = malloc(sizeof(double) * (k / 32)), *kv = malloc(sizeof(double) * n);
    for (int c = 0; c < t->n_cols; c++)
        for (int j = 0; j < t->hd; j++)
            e[c * t->hd + j] = (float)(di_e4m3_to_f32(t->table[ids[c] * t->hd + j]) *
                                       (double)di_e8m0_to_f32(t->tscale[ids[c] * (t->hd / 32) + j / 32]));
    ref_quant(e, k, q, s);
    for (int j = 0; j < n; j++) kv[j] = di_round_bf16((float)ref_linear_row(q, s, t->wkv, t->wscale, j, k));
    for (int c = 0; c < t->hc; c++) {
        double sh = 0, sk = 0, dot = 0;
        for (int d = 0; d < dim; d++) {
            double h = di_bf16_to_f32(R[c * dim + d]), key = kv[c * dim + d];
            double w = f32 ? (double)t->qwf[c * dim + d] * t->kwf[c * dim + d]
                           : (double)di_bf16_to_f32(t->qw[c * dim + d]) * di_bf16_to_f32(t->kw[c * dim + d]);
            sh += h * h, sk += key * key, dot += h * w * key;
        }
        dot *= 1 / sqrt(sh / dim + 1e-20) / sqrt(sk / dim + 1e-20) / sqrt((double)dim);
        double g = 1 / (1 + exp(-copysign(sqrt(fmax(fabs(dot), 1e-6)), dot)));
        gates[c] = g;
        for (int d = 0; d < dim; d++) out[c * dim + d] = di_bf16_to_f32(R[c * dim + d]) + g * kv[t->hc * dim + d];
    }
    free(e), free(q), free(s), free(kv);
}

static void fill_R(uint16_t *R, int64_t n) {
    for (int64_t i = 0; i < n; i++) R[i] = di_f32_to_bf16((float)nrand());
}

TEST(engram_gather_exact) {
    toy t;
    toy_make(&t, 64, 4, 6, 64, 300);
    di_engram_layer l;
    di_error err;
    di_engram_layer_desc d = toy_desc(&t, 0);
    CHECK(di_engram_layer_init(&l, &d, &err) == DEEPINFER_OK);
    int64_t ids[2 * 6];
    for (int i = 0; i < 12; i++) ids[i] = rnd() % 300;
    ids[5] = 299, ids[6] = 0;
    float out[2 * 6 * 64];
    deepinfer_status st = di_engram_gather(&l, ids, 6, 2, out, &err);
    int exact = 1;
    for (int i = 0; i < 12 && !st; i++)
        for (int j = 0; j < 64; j++) {
            double v = (double)di_e4m3_to_f32(t.table[ids[i] * 64 + j]) * di_e8m0_to_f32(t.tscale[ids[i] * 2 + j / 32]);
            exact &= out[i * 64 + j] == (float)v;
        }
    ids[7] = 300;
    deepinfer_status st_bad = di_engram_gather(&l, ids, 6, 2, out, &err);
    di_engram_layer_free(&l);
    toy_free(&t);
    CHECK(st == DEEPINFER_OK && exact);
    CHECK(st_bad == DEEPINFER_ERR_INVALID_ARGUMENT);
}

TEST(engram_block_matches_double_reference) {
    for (int f32 = 0; f32 < 2; f32++) {
        toy t;
        toy_make(&t, 64, 4, 6, 32, 500); /* the golden tiny model's shapes */
        const int T = 7, dim = 64, hc = 4;
        di_engram_layer l;
        di_engram_workspace ws;
        di_error err;
        di_engram_layer_desc d = toy_desc(&t, f32);
        CHECK(di_engram_layer_init(&l, &d, &err) == DEEPINFER_OK);
        CHECK(di_engram_workspace_init(&ws, &l, 4, &err) == DEEPINFER_OK);
        int64_t ids[7 * 6];
        for (int i = 0; i < T * 6; i++) ids[i] = rnd() % 500;
        uint16_t R[7 * 4 * 64], R0[7 * 4 * 64];
        fill_R(R, T * hc * dim);
        memcpy(R0, R, sizeof R);
        float gates[7 * 4];
        deepinfer_status st = di_engram_forward(&t.x, &l, &ws, R, T, ids, 6, NULL, gates, &err);
        double out[4 * 64], g[4], worst_g = 0, worst_o = 0, gmin = 1, gmax = 0;
        for (int tk = 0; tk < T && !st; tk++) {
            ref_token(&t, f32, ids + tk * 6, R0 + tk * hc * dim, out, g);
            for (int c = 0; c < hc; c++) {
                worst_g = fmax(worst_g, fabs(gates[tk * hc + c] - g[c]));
                gmin = fmin(gmin, g[c]), gmax = fmax(gmax, g[c]);
                for (int j = 0; j < dim; j++) {
                    double o = di_bf16_to_f32(R[(tk * hc + c) * dim + j]);
                    worst_o = fmax(worst_o, fabs(o - out[c * dim + j]) / (fabs(out[c * dim + j]) + 1e-3));
                }
            }
        }
        di_engram_workspace_free(&ws);
        di_engram_layer_free(&l);
        toy_free(&t);
        CHECK_MSG(st == DEEPINFER_OK, "%s", err.msg);
        CHECK_MSG(worst_g < 2e-5, "gate error %.3g (f32 qk %d)", worst_g, f32);
        CHECK_MSG(worst_o <= 1.0 / 256, "output error %.3g of |out| (f32 qk %d)", worst_o, f32); /* 1 bf16 ulp */
        CHECK_MSG(gmin < 0.45 && gmax > 0.55, "gates not exercised: %.3f..%.3f", gmin, gmax);
    }
}

/* Batch invariance, chunking, masking, and ISA paths: bit-identical rows. */
TEST(engram_block_batch_invariant) {
    toy t;
    toy_make(&t, 64, 4, 6, 32, 500);
    const int T = 40, dim = 64, hc = 4, row = hc * dim;
    di_engram_layer l;
    di_error err;
    di_engram_layer_desc d = toy_desc(&t, 0);
    CHECK(di_engram_layer_init(&l, &d, &err) == DEEPINFER_OK);
    int64_t ids[40 * 6];
    for (int i = 0; i < T * 6; i++) ids[i] = rnd() % 500;
    uint16_t *R0 = malloc(sizeof(uint16_t) * T * row), *ref = malloc(sizeof(uint16_t) * T * row),
             *R = malloc(sizeof(uint16_t) * T * row);
    fill_R(R0, (int64_t)T * row);
    uint8_t mask[40];
    for (int i = 0; i < T; i++) mask[i] = (uint8_t)(i % 7 != 3);
    int ok = 1;
    di_engram_workspace ws;
    CHECK(di_engram_workspace_init(&ws, &l, 40, &err) == DEEPINFER_OK);
    memcpy(ref, R0, sizeof(uint16_t) * T * row);
    ok &= di_engram_forward(&t.x, &l, &ws, ref, T, ids, 6, NULL, NULL, &err) == DEEPINFER_OK;
    di_engram_workspace_free(&ws);
    for (int isa = 0; isa < 3 && ok; isa++) {
        di_cpu_set_isa((di_isa)isa);
        const int max_rows[3] = {40, 3, 1};
        for (int v = 0; v < 3; v++) {
            ok &= di_engram_workspace_init(&ws, &l, max_rows[v], &err) == DEEPINFER_OK;
            memcpy(R, R0, sizeof(uint16_t) * T * row);
            if (v < 2) {
                ok &= di_engram_forward(&t.x, &l, &ws, R, T, ids, 6, NULL, NULL, &err) == DEEPINFER_OK;
            } else { /* one token per call, as decode does */
                for (int i = 0; i < T; i++)
                    ok &= di_engram_forward(&t.x, &l, &ws, R + i * row, 1, ids + i * 6, 6, NULL, NULL, &err) == 0;
            }
            ok &= !memcmp(R, ref, sizeof(uint16_t) * T * row);
            /* masked tokens are untouched, the others unchanged by their neighbours' masking */
            memcpy(R, R0, sizeof(uint16_t) * T * row);
            float gates[40 * 4];
            ok &= di_engram_forward(&t.x, &l, &ws, R, T, ids, 6, mask, gates, &err) == DEEPINFER_OK;
            for (int i = 0; i < T; i++) {
                const uint16_t *want = mask[i] ? ref + i * row : R0 + i * row;
                ok &= !memcmp(R + i * row, want, sizeof(uint16_t) * row);
                if (!mask[i]) ok &= gates[i * 4] == 0.0f && gates[i * 4 + 3] == 0.0f;
            }
            di_engram_workspace_free(&ws);
            if (!ok) break;
        }
    }
    di_cpu_set_isa(di_cpu_isa_hw());
    di_engram_layer_free(&l);
    toy_free(&t);
    free(R0), free(ref), free(R);
    CHECK(ok);
}

TEST(engram_layer_init_errors) {
    toy t;
    toy_make(&t, 64, 4, 6, 32, 50);
    di_engram_layer l;
    di_error err;
    di_engram_layer_desc d = toy_desc(&t, 0);
    d.head_dim = 48;
    CHECK(di_engram_layer_init(&l, &d, &err) == DEEPINFER_ERR_INVALID_ARGUMENT);
    d = toy_desc(&t, 0);
    d.wkv = NULL;
    CHECK(di_engram_layer_init(&l, &d, &err) == DEEPINFER_ERR_INVALID_ARGUMENT);
    d = toy_desc(&t, 0);
    CHECK(di_engram_layer_init(&l, &d, &err) == DEEPINFER_OK);
    di_engram_workspace ws;
    CHECK(di_engram_workspace_init(&ws, &l, 2, &err) == DEEPINFER_OK);
    int64_t ids[6] = {0, 1, 2, 3, 4, 50};
    uint16_t R[4 * 64] = {0};
    deepinfer_status st = di_engram_forward(&t.x, &l, &ws, R, 1, ids, 6, NULL, NULL, &err);
    uint8_t masked = 0; /* a masked token's ids are not read */
    deepinfer_status st_masked = di_engram_forward(&t.x, &l, &ws, R, 1, ids, 6, &masked, NULL, &err);
    di_engram_workspace_free(&ws);
    di_engram_layer_free(&l);
    toy_free(&t);
    CHECK(st == DEEPINFER_ERR_INVALID_ARGUMENT);
    CHECK(st_masked == DEEPINFER_OK);
}
