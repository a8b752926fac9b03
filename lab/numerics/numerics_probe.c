/*
 * numerics_probe.c — which tensor-core families give the same bits (lab/numerics/README.md; issue
 * #26: the unified batch-invariant kernel set picks one family's bits).
 *
 * Part 1 (mma_bits.cu): block partials P = sum of one K-block (kb = 32: V4.1's activation blocks and
 * FP4's weight blocks; kb = 128: V4's) of e4m3 x e4m3 products from +0, per instruction family, on two
 * inputs: "quant" (activations quantised per row block to amax 448, weights per 128 x 128 block, as
 * dic_gemm_quant and the checkpoints make them) and "raw" (every finite e4m3 code, uniformly). Each
 * family is fed its product kernel's k slots where it has one (dic_gemm_mma.cu's 8t..8t+7 lanes for
 * the invariant tiles, dic_gemm_f16.cu's pairs for k_gemm_f16 / k_gemm_dec, the TMA's natural order
 * for wgmma v3), or the same slots as its partner ("same slots"), and compared bitwise.
 * Part 2: the product's dic_gemm in both modes at M = 1, 8, 64, 65, 128, 4096 on V4-Flash / V4.1-Flash
 * shapes: every row of every M against the same row computed alone (M = 1), and fast against
 * batch-invariant at the same M.
 * Output: one line per pair: bitwise equal yes/no, values that differ, max |diff| in ulp (fp32).
 * `numerics_probe 1` runs part 1 only, `numerics_probe 2` part 2 only.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_util.h"
#include "io/numfmt.h"
#include "numerics_lab.h"
#include "ops/cuda/dic.h"

#define NTR 32 /* trials per configuration */
#define TOK 64
#define WR 256

static double nrm(void) { /* Box-Muller on the benches' xorshift */
    double u = (rnd() + 1.0) / 4294967297.0, v = (rnd() + 1.0) / 4294967297.0;
    return sqrt(-2.0 * log(u)) * cos(6.283185307179586 * v);
}

/* rows x kb e4m3 bytes: quant = per-row-block amax scaling (blocks of `rb` rows share one scale, as a
 * weight block; rb = 1: activations), else uniform finite codes */
static void gen(uint8_t *o, int rows, int kb, int quant, int rb) {
    if (!quant) {
        for (int i = 0; i < rows * kb; i++) {
            uint8_t b;
            do b = (uint8_t)rnd(); while ((b & 0x7F) == 0x7F);
            o[i] = b;
        }
        return;
    }
    float *x = malloc(sizeof(float) * (size_t)rows * kb);
    for (int i = 0; i < rows * kb; i++) x[i] = (float)(nrm() * (rnd() % 97 == 0 ? 20.0 : 1.0));
    for (int r0 = 0; r0 < rows; r0 += rb) {
        float amax = 0;
        for (int i = r0 * kb; i < (r0 + rb) * kb; i++) amax = fabsf(x[i]) > amax ? fabsf(x[i]) : amax;
        float s = amax > 0 ? amax / 448.0f : 1.0f;
        for (int i = r0 * kb; i < (r0 + rb) * kb; i++) o[i] = di_f32_to_e4m3(x[i] / s);
    }
    free(x);
}

/* slot s of each 32-k sub-block -> the k it holds */
static int perm_inv(int s) { return s < 16 ? 8 * (s / 4) + s % 4 : 8 * ((s - 16) / 4) + 4 + s % 4; }
static int perm_f16(int s) {
    int h = s / 16, r = s % 16; /* HMMA h of the pair: k 8t + 4h + (0..3) */
    return r < 8 ? 8 * (r / 2) + 4 * h + r % 2 : 8 * ((r - 8) / 2) + 4 * h + 2 + r % 2;
}
static int perm_id(int s) { return s; }

static void permute(const uint8_t *in, uint8_t *out, size_t rows, int kb, int (*pm)(int)) {
    for (size_t r = 0; r < rows; r++)
        for (int b = 0; b < kb; b += 32)
            for (int s = 0; s < 32; s++) out[r * kb + b + s] = in[r * kb + b + pm(s)];
}

static int64_t ord(float f) {
    int32_t i;
    memcpy(&i, &f, 4);
    return i < 0 ? (int64_t)INT32_MIN - i : i;
}

typedef struct cmp {
    size_t n, diff;
    int64_t ulp;
} cmp;
static cmp compare(const float *a, const float *b, size_t n) {
    cmp c = {n, 0, 0};
    for (size_t i = 0; i < n; i++) {
        if (memcmp(&a[i], &b[i], 4)) c.diff++;
        int64_t d = ord(a[i]) - ord(b[i]);
        if (d < 0) d = -d;
        if (d > c.ulp) c.ulp = d;
    }
    return c;
}
static void row(const char *what, int kb, const char *data, cmp c) {
    printf("%-62s kb %3d %-5s %-3s %9zu/%-9zu %8lld\n", what, kb, data, c.diff ? "no" : "yes", c.diff, c.n,
           (long long)c.ulp);
}

/* ---- part 1 ---------------------------------------------------------------------------------- */

typedef struct fam {
    const char *name;
    int fam, N, swap;
    int (*pm)(int);
    float *p; /* host result */
    int ok;
} fam;

static void part1(void) {
    const size_t na = (size_t)NTR * TOK * 128, nw = (size_t)NTR * WR * 128, np = (size_t)NTR * TOK * WR;
    uint8_t *A = malloc(na), *W = malloc(nw), *Ap = malloc(na), *Wp = malloc(nw), *dA, *dW;
    float *dP, *ex = malloc(np * 4);
    CK(cudaMalloc((void **)&dA, na));
    CK(cudaMalloc((void **)&dW, nw));
    CK(cudaMalloc((void **)&dP, np * 4));
    fam F[] = {
        {"mma e4m3 (invariant tiles' slots)", NL_MMA_E4M3, 0, 0, perm_inv, NULL, 0},
        {"mma e4m3 (natural slots)", NL_MMA_E4M3, 0, 0, perm_id, NULL, 0},
        {"mma f16 (k_gemm_f16's slots, weights 16-row)", NL_MMA_F16, 0, 0, perm_f16, NULL, 0},
        {"mma f16 (natural slots)", NL_MMA_F16, 0, 0, perm_id, NULL, 0},
        {"mma f16 (k_gemm_f16's slots, tokens 16-row)", NL_MMA_F16, 0, 1, perm_f16, NULL, 0},
        {"wgmma f16 N8 (k_gemm_f16's slots)", NL_WG_F16, 8, 0, perm_f16, NULL, 0},
        {"wgmma f16 N16 (k_gemm_f16's slots)", NL_WG_F16, 16, 0, perm_f16, NULL, 0},
        {"wgmma f16 N128 (k_gemm_f16's slots)", NL_WG_F16, 128, 0, perm_f16, NULL, 0},
        {"wgmma f16 N128 (natural slots)", NL_WG_F16, 128, 0, perm_id, NULL, 0},
        {"wgmma f16 swap N8 (k_gemm_f16's slots)", NL_WG_F16, 8, 1, perm_f16, NULL, 0},
        {"wgmma f16 swap N64 (k_gemm_f16's slots)", NL_WG_F16, 64, 1, perm_f16, NULL, 0},
        {"wgmma e4m3 N8", NL_WG_E4M3, 8, 0, perm_id, NULL, 0},
        {"wgmma e4m3 N16", NL_WG_E4M3, 16, 0, perm_id, NULL, 0},
        {"wgmma e4m3 N32", NL_WG_E4M3, 32, 0, perm_id, NULL, 0},
        {"wgmma e4m3 N64", NL_WG_E4M3, 64, 0, perm_id, NULL, 0},
        {"wgmma e4m3 N128 (v3)", NL_WG_E4M3, 128, 0, perm_id, NULL, 0},
        {"wgmma e4m3 N256", NL_WG_E4M3, 256, 0, perm_id, NULL, 0},
        {"wgmma e4m3 swap-AB N8 tokens", NL_WG_E4M3, 8, 1, perm_id, NULL, 0},
        {"wgmma e4m3 swap-AB N16 tokens", NL_WG_E4M3, 16, 1, perm_id, NULL, 0},
        {"wgmma e4m3 swap-AB N32 tokens", NL_WG_E4M3, 32, 1, perm_id, NULL, 0},
        {"wgmma e4m3 swap-AB N64 tokens", NL_WG_E4M3, 64, 1, perm_id, NULL, 0},
        {"wgmma e4m3 N128 (invariant tiles' slots)", NL_WG_E4M3, 128, 0, perm_inv, NULL, 0},
    };
    enum { INV, E4ID, F16, F16ID, F16S, WF8, WF16, WF128, WFID, WFS8, WFS64, WE8, WE16, WE32, WE64, WE128, WE256,
           WES8, WES16, WES32, WES64, WEINV, NF };
    for (int i = 0; i < NF; i++) F[i].p = malloc(np * 4);
    printf("\n== part 1: block partials, %d trials of 64 tokens x 256 weight rows per line\n", NTR);
    printf("%-62s %6s %-5s %-3s %19s %8s\n", "pair", "", "data", "eq", "differ/total", "max ulp");
    for (int kb = 32; kb <= 128; kb += 96)
        for (int quant = 1; quant >= 0; quant--) {
            const char *dn = quant ? "quant" : "raw";
            for (int t = 0; t < NTR; t++) {
                for (int m = 0; m < TOK; m++) gen(A + ((size_t)t * TOK + m) * kb, 1, kb, quant, 1);
                for (int r = 0; r < WR; r += 128) gen(W + ((size_t)t * WR + r) * kb, 128, kb, quant, 128);
            }
            for (int t = 0; t < NTR; t++) /* exact sums (double holds them: |P| < 2^41, 2^-18 resolution) */
                for (int m = 0; m < TOK; m++)
                    for (int n = 0; n < WR; n++) {
                        double s = 0;
                        const uint8_t *a = A + ((size_t)t * TOK + m) * kb, *w = W + ((size_t)t * WR + n) * kb;
                        for (int k = 0; k < kb; k++) s += (double)di_e4m3_to_f32(a[k]) * di_e4m3_to_f32(w[k]);
                        ex[((size_t)t * TOK + m) * WR + n] = (float)s;
                    }
            for (int i = 0; i < NF; i++) {
                permute(A, Ap, (size_t)NTR * TOK, kb, F[i].pm);
                permute(W, Wp, (size_t)NTR * WR, kb, F[i].pm);
                CK(cudaMemcpy(dA, Ap, (size_t)NTR * TOK * kb, cudaMemcpyHostToDevice));
                CK(cudaMemcpy(dW, Wp, (size_t)NTR * WR * kb, cudaMemcpyHostToDevice));
                CK(cudaMemset(dP, 0xFF, np * 4));
                cudaError_t e = nl_run(F[i].fam, F[i].N, F[i].swap, kb, NTR, dA, dW, dP);
                if (e == cudaSuccess) e = cudaDeviceSynchronize();
                F[i].ok = e == cudaSuccess;
                if (!F[i].ok) {
                    printf("%-62s kb %3d %-5s not run: %s\n", F[i].name, kb, dn, cudaGetErrorString(e));
                    cudaGetLastError();
                    continue;
                }
                CK(cudaMemcpy(F[i].p, dP, np * 4, cudaMemcpyDeviceToHost));
            }
            static const struct { int a, b; const char *what; } pr[] = {
                {INV, F16, "invariant mma e4m3 vs k_gemm_f16 mma f16 (each its slots)"},
                {E4ID, F16ID, "mma e4m3 vs mma f16 (same slots)"},
                {F16, F16ID, "mma f16: k_gemm_f16's slots vs natural"},
                {INV, E4ID, "mma e4m3: invariant tiles' slots vs natural"},
                {F16, F16S, "mma f16: weights 16-row vs tokens 16-row"},
                {WF8, F16, "wgmma f16 N8 vs mma f16 (k_gemm_f16's slots)"},
                {WF16, F16, "wgmma f16 N16 vs mma f16 (k_gemm_f16's slots)"},
                {WF128, F16, "wgmma f16 N128 vs mma f16 (k_gemm_f16's slots)"},
                {WFID, F16ID, "wgmma f16 N128 vs mma f16 (natural slots)"},
                {WFS8, F16, "wgmma f16 swap N8 vs mma f16"},
                {WFS64, F16, "wgmma f16 swap N64 vs mma f16"},
                {WE8, WE128, "wgmma e4m3 N8 vs N128 (v3)"},
                {WE16, WE128, "wgmma e4m3 N16 vs N128 (v3)"},
                {WE32, WE128, "wgmma e4m3 N32 vs N128 (v3)"},
                {WE64, WE128, "wgmma e4m3 N64 vs N128 (v3)"},
                {WE256, WE128, "wgmma e4m3 N256 vs N128 (v3)"},
                {WES8, WE128, "wgmma e4m3 swap-AB N8 vs v3 N128"},
                {WES16, WE128, "wgmma e4m3 swap-AB N16 vs v3 N128"},
                {WES32, WE128, "wgmma e4m3 swap-AB N32 vs v3 N128"},
                {WES64, WE128, "wgmma e4m3 swap-AB N64 vs v3 N128"},
                {WE128, F16ID, "wgmma e4m3 v3 vs mma f16 (natural slots)"},
                {WE128, F16, "wgmma e4m3 v3 vs k_gemm_f16 mma f16 (each its slots)"},
                {WE128, E4ID, "wgmma e4m3 vs mma e4m3 (natural slots)"},
                {WEINV, INV, "wgmma e4m3 vs mma e4m3 (invariant tiles' slots)"},
                {WE128, INV, "wgmma e4m3 v3 vs invariant mma e4m3 (each its slots)"},
            };
            for (size_t j = 0; j < sizeof pr / sizeof *pr; j++)
                if (F[pr[j].a].ok && F[pr[j].b].ok) row(pr[j].what, kb, dn, compare(F[pr[j].a].p, F[pr[j].b].p, np));
            static const int vs_exact[] = {INV, F16, F16ID, WF128, WE128};
            for (size_t j = 0; j < sizeof vs_exact / sizeof *vs_exact; j++) {
                char w[96];
                snprintf(w, sizeof w, "%s vs exact", F[vs_exact[j]].name);
                if (F[vs_exact[j]].ok) row(w, kb, dn, compare(F[vs_exact[j]].p, ex, np));
            }
        }
    for (int i = 0; i < NF; i++) free(F[i].p);
    free(A), free(W), free(Ap), free(Wp), free(ex);
    cudaFree(dA), cudaFree(dW), cudaFree(dP);
}

/* ---- part 2 ---------------------------------------------------------------------------------- */

typedef struct shape {
    const char *name;
    int N, K, fmt, act_block;
} shape;

static void part2(void) {
    static const shape S[] = {
        {"V4 wq_a  N 1024  K 4096 FP8 act 128", 1024, 4096, 2, 128},
        {"V4 wq_b  N 32768 K 1024 FP8 act 128", 32768, 1024, 2, 128},
        {"V4 wo_b  N 4096  K 8192 FP8 act 128", 4096, 8192, 2, 128},
        {"V4.1 wq_a N 1280 K 5120 FP8 act 32", 1280, 5120, 2, 32},
        {"V4 expert w1 N 2048 K 4096 FP4 act 128", 2048, 4096, 3, 128},
    };
    static const int Ms[] = {1, 8, 64, 65, 128, 4096};
    const int nM = (int)(sizeof Ms / sizeof *Ms), MMAX = 4096;
    dic_ctx c;
    bench_ctx_init(&c, 256);
    size_t scr = 0;
    for (size_t i = 0; i < sizeof S / sizeof *S; i++)
        for (int j = 0; j < nM; j++) {
            size_t b = dic_gemm_scratch(Ms[j], S[i].N, S[i].K);
            scr = b > scr ? b : scr;
        }
    CK(cudaFree(c.scratch));
    c.scratch_cap = scr;
    CK(cudaMalloc(&c.scratch, scr));
    printf("\n== part 2: dic_gemm, each row of M rows vs the same row alone (M = 1); fast vs invariant at the same M\n");
    printf("%-62s %-10s %-3s %19s %8s\n", "shape, mode, M", "", "eq", "differ/total", "max ulp");
    for (size_t i = 0; i < sizeof S / sizeof *S; i++) {
        const int N = S[i].N, K = S[i].K, fp4 = S[i].fmt == 3;
        const size_t wb = fp4 ? (size_t)N * K / 2 : (size_t)N * K;
        const size_t sb = fp4 ? (size_t)N * (K / 32) : (size_t)((N + 127) / 128) * (K / 128);
        uint8_t *hw = malloc(wb), *hs = malloc(sb);
        for (size_t k = 0; k < wb; k++) {
            uint8_t b;
            do b = (uint8_t)rnd(); while (!fp4 && (b & 0x7F) == 0x7F);
            if (!fp4) b = di_f32_to_e4m3((float)nrm() * 64.0f); /* checkpoint-like e4m3 weights */
            hw[k] = b;
        }
        for (size_t k = 0; k < sb; k++) hs[k] = (uint8_t)(118 + rnd() % 9);
        uint16_t *ha = malloc((size_t)MMAX * K * 2);
        for (size_t k = 0; k < (size_t)MMAX * K; k++) ha[k] = di_f32_to_bf16((float)(nrm() * (rnd() % 251 ? 1.0 : 30.0)));
        void *dw;
        uint8_t *ds;
        uint16_t *da;
        float *ref[2], *out[2];
        CK(cudaMalloc(&dw, wb));
        CK(cudaMalloc((void **)&ds, sb));
        CK(cudaMalloc((void **)&da, (size_t)MMAX * K * 2));
        for (int md = 0; md < 2; md++) {
            CK(cudaMalloc((void **)&ref[md], (size_t)MMAX * N * 4));
            CK(cudaMalloc((void **)&out[md], (size_t)MMAX * N * 4));
        }
        CK(cudaMemcpy(dw, hw, wb, cudaMemcpyHostToDevice));
        CK(cudaMemcpy(ds, hs, sb, cudaMemcpyHostToDevice));
        CK(cudaMemcpy(da, ha, (size_t)MMAX * K * 2, cudaMemcpyHostToDevice));
        const dic_wmat W = {S[i].fmt, N, K, fp4 ? 32 : 128, dw, ds};
        float *h1 = malloc((size_t)MMAX * N * 4), *h2 = malloc((size_t)MMAX * N * 4), *h3 = malloc((size_t)MMAX * N * 4);
        for (int md = 0; md < 2; md++) { /* md 0: batch-invariant, 1: fast */
            c.batch_invariant = !md;
            for (int r = 0; r < MMAX; r++)
                CK(dic_gemm(&c, 1, da + (size_t)r * K, (size_t)K, &W, S[i].act_block, ref[md] + (size_t)r * N, NULL,
                            (size_t)N));
            CK(cudaStreamSynchronize(c.stream));
        }
        for (int j = 0; j < nM; j++) {
            const int M = Ms[j];
            for (int md = 0; md < 2; md++) {
                c.batch_invariant = !md;
                CK(cudaMemsetAsync(out[md], 0xFF, (size_t)M * N * 4, c.stream));
                CK(dic_gemm(&c, M, da, (size_t)K, &W, S[i].act_block, out[md], NULL, (size_t)N));
                CK(cudaStreamSynchronize(c.stream));
                CK(cudaMemcpy(h1, out[md], (size_t)M * N * 4, cudaMemcpyDeviceToHost));
                CK(cudaMemcpy(h2, ref[md], (size_t)M * N * 4, cudaMemcpyDeviceToHost));
                char w[128];
                snprintf(w, sizeof w, "%s, %s, M %d vs alone", S[i].name, md ? "fast" : "invariant", M);
                cmp cm = compare(h1, h2, (size_t)M * N);
                printf("%-73s %-3s %9zu/%-9zu %8lld\n", w, cm.diff ? "no" : "yes", cm.diff, cm.n, (long long)cm.ulp);
                if (md) {
                    CK(cudaMemcpy(h3, out[0], (size_t)M * N * 4, cudaMemcpyDeviceToHost));
                    snprintf(w, sizeof w, "%s, fast vs invariant, M %d", S[i].name, M);
                    cm = compare(h1, h3, (size_t)M * N);
                    printf("%-73s %-3s %9zu/%-9zu %8lld\n", w, cm.diff ? "no" : "yes", cm.diff, cm.n, (long long)cm.ulp);
                }
            }
        }
        free(hw), free(hs), free(ha), free(h1), free(h2), free(h3);
        cudaFree(dw), cudaFree(ds), cudaFree(da);
        for (int md = 0; md < 2; md++) cudaFree(ref[md]), cudaFree(out[md]);
    }
    cudaFree(c.scratch);
    cudaStreamDestroy(c.stream);
}

int main(int argc, char **argv) {
    const int which = argc > 1 ? atoi(argv[1]) : 0;
    if (which == 0 || which == 1) part1();
    if (which == 0 || which == 2) part2();
    return 0;
}
