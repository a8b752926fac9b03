/* Tests of the non-GEMM CPU ops against scalar double-precision references
 * (tolerances are a few bf16 ulps where the op's output is bf16), plus the
 * ISA-path and batch-invariance properties. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "io/numfmt.h"
#include "ops/cpu/vec.h"
#include "ops/ops.h"
#include "test.h"
#include "util/cpu.h"

static uint32_t g_rng = 777;
static float frand(void) {
    g_rng = g_rng * 1664525u + 1013904223u;
    return (float)(g_rng >> 8) / (float)(1u << 24) * 2.0f - 1.0f;
}
static uint16_t bfr(float scale) { return di_f32_to_bf16(frand() * scale); }
static double bf(uint16_t h) { return di_bf16_to_f32(h); }

/* |a - b| within `ulps` bf16 ulps of max(|b|, floor). */
static int near_bf16(double a, double b, double ulps, double floor_) {
    double m = fmax(fabs(b), floor_);
    return fabs(a - b) <= ulps * m * (1.0 / 128.0);
}

static di_exec g_x;
static void init_exec(void) {
    di_error e = {0};
    di_exec_init(&g_x, 0, &e);
}

TEST(rmsnorm_matches_double) {
    init_exec();
    int M = 5, D = 384;
    uint16_t *x = malloc(2 * (size_t)M * D), *y = malloc(2 * (size_t)M * D);
    float *w = malloc(4 * (size_t)D);
    for (int i = 0; i < M * D; i++) x[i] = bfr(3.0f);
    for (int i = 0; i < D; i++) w[i] = (float)bf(bfr(1.0f)) + 1.0f;
    di_rmsnorm(&g_x, M, x, (size_t)D, w, D, 1e-6f, y, (size_t)D);
    for (int m = 0; m < M; m++) {
        double ss = 0;
        for (int i = 0; i < D; i++) ss += bf(x[m * D + i]) * bf(x[m * D + i]);
        double r = 1.0 / sqrt(ss / D + 1e-6);
        for (int i = 0; i < D; i++) CHECK(near_bf16(bf(y[m * D + i]), w[i] * bf(x[m * D + i]) * r, 1.01, 1e-3));
    }
    /* in place gives the same bits */
    uint16_t *z = malloc(2 * (size_t)M * D);
    memcpy(z, x, 2 * (size_t)M * D);
    di_rmsnorm(&g_x, M, z, (size_t)D, w, D, 1e-6f, z, (size_t)D);
    CHECK(!memcmp(z, y, 2 * (size_t)M * D));
    free(x), free(y), free(z), free(w);
}

TEST(head_rmsnorm_bf16_matches_double) {
    init_exec();
    int M = 3, H = 4, hd = 128;
    uint16_t *q = malloc(2 * (size_t)M * H * hd), *q0 = malloc(2 * (size_t)M * H * hd);
    for (int i = 0; i < M * H * hd; i++) q0[i] = q[i] = bfr(2.0f);
    di_head_rmsnorm_bf16(&g_x, M, q, (size_t)H * hd, H, hd, 1e-6f);
    for (int m = 0; m < M; m++)
        for (int h = 0; h < H; h++) {
            const uint16_t *a = q0 + (m * H + h) * hd, *b = q + (m * H + h) * hd;
            double ss = 0;
            for (int i = 0; i < hd; i++) ss += bf(a[i]) * bf(a[i]);
            double r = 1.0 / sqrt(ss / hd + 1e-6);
            for (int i = 0; i < hd; i++) CHECK(near_bf16(bf(b[i]), bf(a[i]) * r, 4.0, 1e-2));
        }
    free(q), free(q0);
}

TEST(rope_inv_freq_yarn_ramp) {
    float f0[32], f1[32];
    di_rope_inv_freq(64, 10000.0, 0, 16.0, 32, 1, f0);
    di_rope_inv_freq(64, 160000.0, 65536, 16.0, 32, 1, f1);
    for (int i = 0; i < 32; i++) {
        CHECK(fabs(f0[i] - pow(10000.0, -2.0 * i / 64)) <= 2e-7 * pow(10000.0, -2.0 * i / 64));
        double f = pow(160000.0, -2.0 * i / 64);
        /* architecture.md §4.3: low = 15, high = 25 for these parameters */
        double ramp = fmin(fmax((i - 15) / 10.0, 0), 1);
        double want = f / 16 * ramp + f * (1 - ramp);
        CHECK(fabs(f1[i] - want) <= 4e-7 * want);
    }
}

TEST(rope_rotates_and_inverts) {
    init_exec();
    int M = 4, H = 3, hd = 128, rd = 64;
    float inv[32];
    di_rope_inv_freq(rd, 160000.0, 65536, 16.0, 32, 1, inv);
    int64_t pos[4] = {0, 1, 283, 70000};
    uint16_t *v = malloc(2 * (size_t)M * H * hd), *v0 = malloc(2 * (size_t)M * H * hd);
    for (int i = 0; i < M * H * hd; i++) v0[i] = v[i] = bfr(1.0f);
    di_rope(&g_x, M, v, (size_t)H * hd, H, hd, rd, pos, inv, 0);
    for (int m = 0; m < M; m++)
        for (int h = 0; h < H; h++) {
            const uint16_t *a = v0 + (m * H + h) * hd, *b = v + (m * H + h) * hd;
            for (int i = 0; i < hd - rd; i++) CHECK(a[i] == b[i]);
            for (int i = 0; i < rd / 2; i++) {
                double ang = (double)(float)((float)pos[m] * inv[i]);
                double x0 = bf(a[hd - rd + 2 * i]), x1 = bf(a[hd - rd + 2 * i + 1]);
                double re = x0 * cos(ang) - x1 * sin(ang), im = x0 * sin(ang) + x1 * cos(ang);
                CHECK(fabs(bf(b[hd - rd + 2 * i]) - re) <= 1e-2 * fmax(fabs(re), 0.05));
                CHECK(fabs(bf(b[hd - rd + 2 * i + 1]) - im) <= 1e-2 * fmax(fabs(im), 0.05));
            }
        }
    di_rope(&g_x, M, v, (size_t)H * hd, H, hd, rd, pos, inv, 1);
    for (int i = 0; i < M * H * hd; i += 2) {
        double mag = fmax(fabs(bf(v0[i])), fabs(bf(v0[i + 1]))); /* errors scale with the pair's size */
        CHECK(fabs(bf(v[i]) - bf(v0[i])) <= 3.0 / 256 * mag + 1e-6);
        CHECK(fabs(bf(v[i + 1]) - bf(v0[i + 1])) <= 3.0 / 256 * mag + 1e-6);
    }
    free(v), free(v0);
}

/* Reference quantisation simulation through numfmt's exhaustive-tested encoders. */
static double ref_qsim(const uint16_t *blk, int n, int i, int fp4) {
    double amax = 0;
    for (int j = 0; j < n; j++) amax = fmax(amax, fabs(bf(blk[j])));
    float famax = (float)fmax(amax, fp4 ? 6.0 * ldexp(1, -126) : 1e-4);
    float s = di_pow2_ceil(famax * (fp4 ? (float)(1.0 / 6.0) : (float)(1.0 / 448.0)));
    double q = bf(blk[i]) / s;
    if (fp4) return di_round_bf16((float)(di_e2m1_to_f32(di_f32_to_e2m1((float)q)) * s));
    q = fmin(fmax(q, -448), 448);
    return di_round_bf16((float)(di_e4m3_to_f32(di_f32_to_e4m3((float)q)) * s));
}

TEST(qat_fp8_fp4_exact) {
    init_exec();
    int M = 6, n = 448, ld = 512;
    uint16_t *v = malloc(2 * (size_t)M * ld), *v0 = malloc(2 * (size_t)M * ld);
    for (int i = 0; i < M * ld; i++) v0[i] = v[i] = bfr(i % 97 == 0 ? 50.0f : 1.5f);
    di_qat_fp8(&g_x, M, v, (size_t)ld, n, 64);
    for (int m = 0; m < M; m++) {
        for (int i = 0; i < n; i++) CHECK(bf(v[m * ld + i]) == ref_qsim(v0 + m * ld + (i / 64) * 64, 64, i % 64, 0));
        for (int i = n; i < ld; i++) CHECK(v[m * ld + i] == v0[m * ld + i]);
    }
    memcpy(v, v0, 2 * (size_t)M * ld);
    di_qat_fp4(&g_x, M, v, (size_t)ld, ld, 32);
    for (int m = 0; m < M; m++)
        for (int i = 0; i < ld; i++) CHECK(bf(v[m * ld + i]) == ref_qsim(v0 + m * ld + (i / 32) * 32, 32, i % 32, 1));
    free(v), free(v0);
}

TEST(hadamard128_matches_matrix) {
    init_exec();
    uint16_t v[2 * 128], v0[2 * 128];
    for (int i = 0; i < 256; i++) v0[i] = v[i] = bfr(1.0f);
    di_hadamard128(&g_x, 1, v, 256, 2);
    for (int vec = 0; vec < 2; vec++)
        for (int i = 0; i < 128; i++) {
            double s = 0;
            for (int j = 0; j < 128; j++) s += (__builtin_popcount((unsigned)(i & j)) & 1 ? -1.0 : 1.0) * bf(v0[vec * 128 + j]);
            s /= sqrt(128.0);
            CHECK(near_bf16(bf(v[vec * 128 + i]), s, 1.01, 1e-2));
        }
}

TEST(vdot_paths_identical_and_accurate) {
    uint16_t a[512], b[512];
    for (int i = 0; i < 512; i++) a[i] = bfr(2.0f), b[i] = bfr(2.0f);
    di_isa hw = di_cpu_isa_hw();
    float r[3];
    int np = 0;
    for (int isa = 0; isa <= (int)hw; isa++) {
        di_cpu_set_isa((di_isa)isa);
        r[np++] = di_vdot_bf16(a, b, 512);
    }
    di_cpu_set_isa(hw);
    for (int p = 1; p < np; p++) CHECK(memcmp(&r[0], &r[p], 4) == 0);
    /* the fused AVX-512 index-score loop agrees with the generic one */
    float w[4] = {0.5f, -0.25f, 0.375f, 1.0f}, s0[4], s1[4];
    di_cpu_set_isa(DI_ISA_SCALAR);
    di_index_scores(a, 4, w, b, 128, 4, s0);
    di_cpu_set_isa(hw);
    di_index_scores(a, 4, w, b, 128, 4, s1);
    CHECK(memcmp(s0, s1, sizeof s0) == 0);
    double s = 0, sa = 0;
    for (int i = 0; i < 512; i++) s += bf(a[i]) * bf(b[i]), sa += fabs(bf(a[i]) * bf(b[i]));
    CHECK(fabs(r[0] - s) <= sa * 1e-6);
    if (hw == DI_ISA_SCALAR) SKIP("only the scalar path on this CPU: no vector path to compare with it"); /* accuracy checked; the "paths identical" half cannot be */
}

/* Double reference of sink attention (exact softmax; bf16 output). */
static void ref_attn(const uint16_t *q, int H, int hd, const uint16_t *const *kv, int n, const float *sink, double scale,
                     double *out, double *out_abs) {
    for (int h = 0; h < H; h++) {
        double mx = -INFINITY, l[256];
        for (int j = 0; j < n; j++) {
            if (!kv[j]) {
                l[j] = -INFINITY;
                continue;
            }
            double s = 0;
            for (int d = 0; d < hd; d++) s += bf(q[h * hd + d]) * bf(kv[j][d]);
            l[j] = s * scale;
            mx = fmax(mx, l[j]);
        }
        double den = exp(sink[h] - mx);
        for (int j = 0; j < n; j++) den += kv[j] ? exp(l[j] - mx) : 0;
        for (int d = 0; d < hd; d++) {
            double o = 0, oa = 0;
            for (int j = 0; j < n; j++)
                if (kv[j]) o += exp(l[j] - mx) * bf(kv[j][d]), oa += exp(l[j] - mx) * fabs(bf(kv[j][d]));
            out[h * hd + d] = o / den;
            out_abs[h * hd + d] = oa / den;
        }
    }
}

TEST(sparse_attn_matches_double_and_is_invariant) {
    init_exec();
    int M = 3, H = 10, hd = 128, nkv = 150, maxn = 160;
    uint16_t *q = malloc(2 * (size_t)M * H * hd), *kvbuf = malloc(2 * (size_t)nkv * hd);
    uint16_t *out = malloc(2 * (size_t)M * H * hd), *out1 = malloc(2 * (size_t)H * hd);
    const uint16_t **kv = calloc((size_t)M * maxn, sizeof *kv);
    int nidx[3] = {1, 70, 150};
    float sink[10];
    for (int i = 0; i < M * H * hd; i++) q[i] = bfr(0.6f);
    for (int i = 0; i < nkv * hd; i++) kvbuf[i] = bfr(1.0f);
    for (int h = 0; h < H; h++) sink[h] = frand();
    for (int m = 0; m < M; m++)
        for (int i = 0; i < nidx[m]; i++) kv[m * maxn + i] = (i % 13 == 5) ? NULL : kvbuf + (size_t)((i * 7 + m) % nkv) * hd;
    float scale = 1.0f / sqrtf((float)hd);
    di_sparse_attn(&g_x, M, q, (size_t)H * hd, H, hd, kv, (size_t)maxn, nidx, sink, scale, out, (size_t)H * hd);
    double *ref = malloc(sizeof(double) * (size_t)H * hd), *refa = malloc(sizeof(double) * (size_t)H * hd);
    for (int m = 0; m < M; m++) {
        ref_attn(q + (size_t)m * H * hd, H, hd, kv + m * maxn, nidx[m], sink, scale, ref, refa);
        /* bf16 probabilities: relative 2^-9 per term; bf16 output: 2^-9 */
        for (int i = 0; i < H * hd; i++)
            CHECK_MSG(fabs(bf(out[(size_t)m * H * hd + i]) - ref[i]) <= 2.5e-3 * refa[i] + fabs(ref[i]) / 256 + 1e-7,
                      "m %d i %d: %g vs %g", m, i, bf(out[(size_t)m * H * hd + i]), ref[i]);
        /* the same row alone, on one thread */
        di_exec serial = g_x;
        serial.tp = NULL;
        di_sparse_attn(&serial, 1, q + (size_t)m * H * hd, (size_t)H * hd, H, hd, kv + m * maxn, (size_t)maxn, &nidx[m],
                       sink, scale, out1, (size_t)H * hd);
        CHECK(!memcmp(out1, out + (size_t)m * H * hd, 2 * (size_t)H * hd));
    }
    free(q), free(kvbuf), free(out), free(out1), free(kv), free(ref), free(refa);
}

TEST(sinkhorn_matches_double) {
    float mixes[24], sc[3] = {0.9f, 1.1f, 1.05f}, base[24], pre[4], post[4], comb[16];
    for (int i = 0; i < 24; i++) mixes[i] = frand() * 2, base[i] = frand() + (i >= 8 && (i - 8) % 5 == 0 ? 2 : 0);
    di_hc_sinkhorn(mixes, sc, base, 20, 1e-6f, pre, post, comb);
    double c[4][4], eps = 1e-6;
    for (int j = 0; j < 4; j++) {
        CHECK(fabs(pre[j] - (1 / (1 + exp(-(mixes[j] * (double)sc[0] + base[j]))) + eps)) < 1e-6);
        CHECK(fabs(post[j] - 2 / (1 + exp(-(mixes[4 + j] * (double)sc[1] + base[4 + j])))) < 2e-6);
        double mx = -1e30, s = 0;
        for (int k = 0; k < 4; k++) c[j][k] = mixes[8 + 4 * j + k] * (double)sc[2] + base[8 + 4 * j + k], mx = fmax(mx, c[j][k]);
        for (int k = 0; k < 4; k++) s += exp(c[j][k] - mx);
        for (int k = 0; k < 4; k++) c[j][k] = exp(c[j][k] - mx) / s + eps;
    }
    for (int it = 0; it < 20; it++) {
        if (it)
            for (int j = 0; j < 4; j++) {
                double s = 0;
                for (int k = 0; k < 4; k++) s += c[j][k];
                for (int k = 0; k < 4; k++) c[j][k] /= s + eps;
            }
        for (int k = 0; k < 4; k++) {
            double s = 0;
            for (int j = 0; j < 4; j++) s += c[j][k];
            for (int j = 0; j < 4; j++) c[j][k] /= s + eps;
        }
    }
    for (int j = 0; j < 4; j++)
        for (int k = 0; k < 4; k++) CHECK(fabs(comb[j * 4 + k] - c[j][k]) < 1e-5);
}

TEST(hc_collapse_expand_match_double) {
    init_exec();
    int M = 3, d = 96;
    uint16_t *R = malloc(2 * (size_t)M * 4 * d), *f = malloc(2 * (size_t)M * d), *y = malloc(2 * (size_t)M * d);
    uint16_t *R2 = malloc(2 * (size_t)M * 4 * d);
    float pre[12], post[12], comb[48], mix[3 * 24], mixo[3 * 24];
    for (int i = 0; i < M * 4 * d; i++) R[i] = bfr(2.0f);
    for (int i = 0; i < M * d; i++) f[i] = bfr(1.0f);
    for (int i = 0; i < 12; i++) pre[i] = frand() + 1, post[i] = frand() + 1;
    for (int i = 0; i < 48; i++) comb[i] = frand() * 0.5f + 0.5f;
    for (int i = 0; i < 72; i++) mix[i] = frand();
    di_hc_collapse(&g_x, M, pre, R, (size_t)4 * d, d, y, (size_t)d);
    di_hc_expand(&g_x, M, post, comb, f, (size_t)d, R, R2, (size_t)4 * d, d);
    di_hc_scale_mixes(&g_x, M, R, (size_t)4 * d, 4 * d, 1e-6f, mix, 24, mixo);
    for (int m = 0; m < M; m++) {
        double ss = 0;
        for (int i = 0; i < 4 * d; i++) ss += bf(R[m * 4 * d + i]) * bf(R[m * 4 * d + i]);
        double rs = 1 / sqrt(ss / (4 * d) + 1e-6);
        for (int j = 0; j < 24; j++) CHECK(fabs(mixo[m * 24 + j] - mix[m * 24 + j] * rs) <= 1e-6 * fabs(mix[m * 24 + j] * rs) + 1e-9);
        for (int i = 0; i < d; i++) {
            double s = 0;
            for (int k = 0; k < 4; k++) s += pre[m * 4 + k] * bf(R[m * 4 * d + k * d + i]);
            CHECK(near_bf16(bf(y[m * d + i]), s, 1.01, 1e-3));
            for (int k = 0; k < 4; k++) {
                double o = post[m * 4 + k] * bf(f[m * d + i]);
                for (int j = 0; j < 4; j++) o += comb[m * 16 + j * 4 + k] * bf(R[m * 4 * d + j * d + i]);
                CHECK(near_bf16(bf(R2[m * 4 * d + k * d + i]), o, 1.01, 1e-3));
            }
        }
    }
    free(R), free(f), free(y), free(R2);
}

TEST(softmax_pool_matches_double) {
    int S = 8, D = 40;
    float kv[8 * 40], sc[8 * 40], out[40];
    for (int i = 0; i < S * D; i++) kv[i] = frand() * 3, sc[i] = frand() * 4;
    for (int d = 0; d < D; d++) sc[d] = -INFINITY, kv[d] = 0; /* an absent slot */
    di_softmax_pool(kv, sc, (size_t)D, S, D, out);
    for (int d = 0; d < D; d++) {
        double mx = -INFINITY, s = 0, o = 0;
        for (int k = 0; k < S; k++) mx = fmax(mx, sc[k * D + d]);
        for (int k = 0; k < S; k++) s += exp(sc[k * D + d] - mx);
        for (int k = 0; k < S; k++) o += kv[k * D + d] * exp(sc[k * D + d] - mx) / s;
        CHECK(fabs(out[d] - o) <= 1e-5 * (fabs(o) + 1));
    }
}

TEST(index_scores_and_topk) {
    int nh = 4, n = 40;
    uint16_t q[4 * 128], kbuf[40 * 128];
    const uint16_t *k[40];
    float w[4], sc[40];
    (void)k;
    for (int i = 0; i < 4 * 128; i++) q[i] = bfr(1.0f);
    for (int i = 0; i < 40 * 128; i++) kbuf[i] = bfr(1.0f);
    for (int h = 0; h < nh; h++) w[h] = (float)bf(bfr(0.5f));
    for (int j = 0; j < n; j++) k[j] = kbuf + j * 128;
    di_index_scores(q, nh, w, kbuf, 128, n, sc);
    for (int j = 0; j < n; j++) {
        double s = 0;
        for (int h = 0; h < nh; h++) {
            double dt = 0;
            for (int d = 0; d < 128; d++) dt += bf(q[h * 128 + d]) * bf(k[j][d]);
            s += fmax(dt, 0) * w[h];
        }
        CHECK(fabs(sc[j] - s) <= 4.0 / 128 * fmax(fabs(s), 0.1));
        CHECK(sc[j] == di_round_bf16(sc[j]));
    }
    float v[10] = {3, 1, 4, 1, 5, 9, 2, 6, 5, 3};
    int idx[10];
    CHECK_EQ_INT(di_topk_desc(v, 10, 4, idx), 4);
    CHECK(idx[0] == 5 && idx[1] == 7 && idx[2] == 4 && idx[3] == 8); /* tie 5@4, 5@8: lower index first */
    CHECK_EQ_INT(di_topk_desc(v, 3, 8, idx), 3);
    CHECK(idx[0] == 2 && idx[1] == 0 && idx[2] == 1);
    /* the heap path (large n) selects exactly what a full sort would */
    int N = 5000, K = 300;
    float *big = malloc(sizeof(float) * (size_t)N);
    int *got = malloc(sizeof(int) * (size_t)K), *ord = malloc(sizeof(int) * (size_t)N);
    for (int i = 0; i < N; i++) big[i] = di_round_bf16(frand()), ord[i] = i; /* bf16: many ties */
    CHECK_EQ_INT(di_topk_desc(big, N, K, got), K);
    for (int i = 0; i < N; i++) /* reference: selection sort by (score desc, index asc) */
        for (int j = i + 1; j < N && i < K; j++)
            if (big[ord[j]] > big[ord[i]] || (big[ord[j]] == big[ord[i]] && ord[j] < ord[i])) {
                int t = ord[i];
                ord[i] = ord[j];
                ord[j] = t;
            }
    for (int i = 0; i < K; i++) CHECK(got[i] == ord[i]);
    free(big), free(got), free(ord);
}

TEST(route_and_swiglu_match_double) {
    float l[6] = {0.3f, -1.2f, 25.0f, 0.9f, -0.1f, 2.0f}, bias[6] = {0, 0.5f, -30, 0, 0, 0}, w[2];
    int sel[2];
    di_route(l, 6, bias, NULL, 2, 1.5f, 0.0f, sel, w);
    double s[6];
    for (int e = 0; e < 6; e++) s[e] = sqrt(l[e] > 20 ? l[e] : log1p(exp(l[e])));
    CHECK(sel[0] == 5 && sel[1] == 3); /* expert 2 is pushed out by its bias */
    CHECK(fabs(w[0] - s[5] / (s[5] + s[3]) * 1.5) < 1e-6 && fabs(w[1] - s[3] / (s[5] + s[3]) * 1.5) < 1e-6);
    int fixed[2] = {2, 0};
    di_route(l, 6, NULL, fixed, 2, 1.5f, 0.0f, sel, w);
    CHECK(sel[0] == 2 && sel[1] == 0 && fabs(w[0] - s[2] / (s[2] + s[0]) * 1.5) < 1e-6);

    init_exec();
    int I = 64;
    uint16_t g[64], u[64], o[64];
    for (int i = 0; i < I; i++) g[i] = bfr(14.0f), u[i] = bfr(14.0f);
    float rw = 0.37f;
    di_swiglu(&g_x, 1, g, u, (size_t)I, I, 10.0f, &rw, o, (size_t)I);
    for (int i = 0; i < I; i++) {
        double gv = fmin(bf(g[i]), 10), uv = fmin(fmax(bf(u[i]), -10), 10);
        double h = rw * gv / (1 + exp(-gv)) * uv;
        CHECK(near_bf16(bf(o[i]), h, 1.01, 1e-3));
    }
    di_swiglu(&g_x, 1, g, u, (size_t)I, I, 0.0f, NULL, o, (size_t)I);
    for (int i = 0; i < I; i++) {
        double gv = bf(g[i]), uv = bf(u[i]);
        CHECK(near_bf16(bf(o[i]), gv / (1 + exp(-gv)) * uv, 1.01, 1e-3));
    }
}
