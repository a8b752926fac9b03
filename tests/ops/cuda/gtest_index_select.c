/* gtest_index_select.c — the device index selection (dic_model.h dic_index_select) against the
 * CPU op (src/ops/cpu/index_select.c), bitwise, at prefill and decode shapes.
 * Outputs poisoned with 0xFF bytes; each test runs all its shapes, prints shape, element and both
 * values of the first mismatches, then fails (split from gtest_model_ops.c by family). */
#include <stdio.h>
#include <string.h>

#include "ops/cuda/gpu_util.h"
#include "ops/cuda/model_ops_util.h"
#include "ops/cuda/dic_model.h"
#include "ops/ops.h"

/* ---------------------------------------------------- index select ---- */
/* mode: 0 every key (V4), 1 candidate source (cand_out), 2 restricted to
 * candidate blocks (cand_in), 3 both. g_is_koff: the pages start g_is_koff
 * bf16 values into their pool (1: keys 2 bytes off 16-byte alignment, the
 * kernels' unaligned-key path). g_is_bi: the context's batch-invariant mode (both modes take the same
 * paths: both give the CPU's bits, docs/determinism.md §7); dic_index_select_one_launch picks the path. */
static int g_is_koff, g_is_bi;
static size_t index_select_case(int M, int nh, int maxvis, int K, int bs, int KB, int mode, int sort_sel, int pr,
                                int coarse, uint64_t *s) {
    const int IHD = 128;
    dic_ctx c;
    size_t stride = (size_t)maxvis + 3, bstride = (stride + bs - 1) / bs + 1;
    if (!gt_ctx(&c, dic_index_select_scratch(M, stride, bstride))) return 1;
    c.batch_invariant = g_is_bi;
    uint16_t *q = malloc((size_t)M * nh * IHD * 2);
    float *w = malloc((size_t)M * nh * 4);
    gt_fill_bf16(q, (size_t)M * nh * IHD, 1.0f, s);
    gt_fill_f32(w, (size_t)M * nh, 0.5f, s);
    int64_t *nvis = malloc((size_t)M * 8), *kcap = malloc((size_t)M * 8);
    int *prs = malloc((size_t)M * 4);
    uint16_t ***hpages = malloc((size_t)M * sizeof *hpages), ***dpages_h = malloc((size_t)M * sizeof *dpages_h);
    uint16_t **dpool = malloc((size_t)M * sizeof *dpool), **hpool = malloc((size_t)M * sizeof *hpool);
    size_t bytes = 0;
    for (int m = 0; m < M; m++) {
        nvis[m] = m % 5 == 4 ? urand(s, K + 1) : maxvis - urand(s, maxvis / 3 + 1); /* some below K */
        if (m == 1) nvis[m] = 0;
        kcap[m] = m % 3 == 2 ? nvis[m] - urand(s, 40) : nvis[m]; /* keys past kcap score 0 */
        if (kcap[m] < 0) kcap[m] = 0;
        prs[m] = pr;
        int np = (int)((nvis[m] + pr - 1) / pr) + 1;
        size_t pb = (size_t)pr * IHD * 2;
        hpool[m] = malloc((size_t)np * pb + 16);
        for (size_t i = 0; i < (size_t)np * pr * IHD + 8; i++) {
            float v = gt_normal(s);
            if (coarse) v = roundf(v * 2.0f) * 0.5f; /* many equal scores: ties */
            hpool[m][i] = di_f32_to_bf16(v);
        }
        dpool[m] = gt_to_dev(hpool[m], (size_t)np * pb + 16);
        hpages[m] = malloc((size_t)np * sizeof **hpages);
        uint16_t **dp = malloc((size_t)np * sizeof *dp);
        for (int g = 0; g < np; g++) { /* pages in reverse order in the pool */
            hpages[m][g] = hpool[m] + g_is_koff + (size_t)(np - 1 - g) * pr * IHD;
            dp[g] = dpool[m] + g_is_koff + (size_t)(np - 1 - g) * pr * IHD;
        }
        dpages_h[m] = gt_to_dev(dp, (size_t)np * sizeof *dp);
        free(dp);
        bytes += (size_t)np * pb;
    }
    int *cin = NULL, *ncin = NULL;
    if (mode & 2) {
        cin = malloc((size_t)M * KB * 4), ncin = malloc((size_t)M * 4);
        for (int m = 0; m < M; m++) {
            int nb = (int)((nvis[m] + bs - 1) / bs), n = 0;
            for (int b = 0; b < nb && n < KB; b++)
                if (b == nb - 1 || urand(s, 3) == 0) cin[(size_t)m * KB + n++] = b;
            ncin[m] = n;
        }
    }
    int *cout = (mode & 1) ? malloc((size_t)M * KB * 4) : NULL, *ncout = (mode & 1) ? malloc((size_t)M * 4) : NULL;
    int *topk = malloc((size_t)M * K * 4), *ntopk = malloc((size_t)M * 4);
    if (cout) memset(cout, 0xFF, (size_t)M * KB * 4);
    memset(topk, 0xFF, (size_t)M * K * 4);
    int nscr = 16;
    float *isc = malloc((size_t)nscr * stride * 4), *bsc = malloc((size_t)nscr * bstride * 4);
    di_index_select_args a = {.M = M, .nh = nh, .q = q, .w = w, .kpages = hpages, .page_rows = prs, .nvis = nvis,
                              .kcap = kcap, .cand_in = cin, .ncand_in = ncin, .cand_out = cout, .ncand_out = ncout,
                              .bs = bs, .KB = KB, .K = K, .sort_sel = sort_sel, .topk = topk, .ntopk = ntopk,
                              .iscore = isc, .iscore_stride = stride, .bscore = bsc, .bscore_stride = bstride,
                              .nscratch = nscr};
    di_exec x;
    if (di_exec_init(&x, 0, NULL) != DEEPINFER_OK) return 1;
    di_index_select(&x, &a);
    di_exec_free(&x);
    /* device copy of the struct */
    di_index_select_args d = a;
    d.q = gt_to_dev(q, (size_t)M * nh * IHD * 2);
    d.w = gt_to_dev(w, (size_t)M * nh * 4);
    d.kpages = gt_to_dev(dpages_h, (size_t)M * sizeof *dpages_h);
    d.page_rows = gt_to_dev(prs, (size_t)M * 4);
    d.nvis = gt_to_dev(nvis, (size_t)M * 8);
    d.kcap = gt_to_dev(kcap, (size_t)M * 8);
    d.cand_in = cin ? gt_to_dev(cin, (size_t)M * KB * 4) : NULL;
    d.ncand_in = cin ? gt_to_dev(ncin, (size_t)M * 4) : NULL;
    d.cand_out = cout ? gt_dev_poison((size_t)M * KB * 4) : NULL;
    d.ncand_out = cout ? gt_dev_poison((size_t)M * 4) : NULL;
    d.topk = gt_dev_poison((size_t)M * K * 4);
    d.ntopk = gt_dev_poison((size_t)M * 4);
    d.iscore = NULL, d.bscore = NULL;
    size_t bad = 0;
    cudaError_t e = dic_index_select(&c, &d);
    if (e == cudaSuccess) e = cudaDeviceSynchronize();
    if (e != cudaSuccess) {
        fprintf(stderr, "index_select M=%d: %s\n", M, cudaGetErrorString(e));
        bad = 1;
    } else {
        int *gt = gt_d2h(d.topk, (size_t)M * K * 4), *gnt = gt_d2h(d.ntopk, (size_t)M * 4);
        int *gc = cout ? gt_d2h(d.cand_out, (size_t)M * KB * 4) : NULL, *gnc = cout ? gt_d2h(d.ncand_out, (size_t)M * 4) : NULL;
        bad += mdiff("index ntopk", gnt, ntopk, (size_t)M, 4, 0);
        for (int m = 0; m < M && gt && gnt; m++) { /* the CPU writes ntopk entries; the GPU -1 after them */
            int n = ntopk[m] < K ? ntopk[m] : K;
            size_t b = mdiff("index topk", gt + (size_t)m * K, topk + (size_t)m * K, (size_t)n, 4, 0);
            for (int i = n; i < K; i++) b += gt[(size_t)m * K + i] != -1;
            if (b) fprintf(stderr, "  ^ row %d (nvis %lld kcap %lld)\n", m, (long long)nvis[m], (long long)kcap[m]);
            bad += b;
        }
        if (cout) {
            bad += mdiff("index ncand_out", gnc, ncout, (size_t)M, 4, 0);
            for (int m = 0; m < M; m++) {
                int n = ncout[m] < KB ? ncout[m] : KB;
                size_t b = mdiff("index cand_out", gc + (size_t)m * KB, cout + (size_t)m * KB, (size_t)n, 4, 0);
                if (b) fprintf(stderr, "  ^ row %d (nvis %lld)\n", m, (long long)nvis[m]);
                bad += b;
            }
        }
        free(gt), free(gnt), free(gc), free(gnc);
    }
    if (bad)
        fprintf(stderr, "index_select M=%d nh=%d maxvis=%d K=%d bs=%d KB=%d mode=%d sort=%d page_rows=%d coarse=%d: "
                "%zu differ\n", M, nh, maxvis, K, bs, KB, mode, sort_sel, pr, coarse, bad);
    cudaFree((void *)d.q), cudaFree((void *)d.w), cudaFree((void *)d.kpages), cudaFree((void *)d.page_rows);
    cudaFree((void *)d.nvis), cudaFree((void *)d.kcap), cudaFree((void *)d.cand_in), cudaFree((void *)d.ncand_in);
    cudaFree(d.cand_out), cudaFree(d.ncand_out), cudaFree(d.topk), cudaFree(d.ntopk), cudaFree(c.scratch);
    for (int m = 0; m < M; m++) cudaFree(dpool[m]), cudaFree(dpages_h[m]), free(hpool[m]), free(hpages[m]);
    cudaStreamDestroy(c.stream);
    free(q), free(w), free(nvis), free(kcap), free(prs), free(hpages), free(dpages_h), free(dpool), free(hpool);
    free(cin), free(ncin), free(cout), free(ncout), free(topk), free(ntopk), free(isc), free(bsc);
    (void)bytes;
    return bad;
}

TEST(gpu_index_select) {
    uint64_t s = 31337;
    size_t bad = 0;
    bad += index_select_case(1, 64, 300, 512, 64, 16, 0, 0, 64, 0, &s);     /* V4 decode, nvis < K */
    bad += index_select_case(4, 64, 5000, 512, 64, 16, 0, 0, 64, 0, &s);    /* V4 decode */
    bad += index_select_case(7, 64, 3000, 512, 64, 16, 0, 1, 128, 1, &s);   /* sorted, ties */
    bad += index_select_case(9, 64, 9000, 1024, 128, 32, 1, 1, 64, 0, &s);  /* V4.1 candidate source */
    bad += index_select_case(9, 64, 9000, 1024, 128, 32, 2, 1, 64, 0, &s);  /* V4.1 restricted */
    bad += index_select_case(5, 32, 4100, 512, 100, 7, 3, 0, 96, 1, &s);    /* odd block / page sizes, ties */
    bad += index_select_case(70, 64, 2000, 512, 64, 8, 1, 1, 64, 0, &s);    /* more rows than the CPU group */
    bad += index_select_case(3, 64, 70000, 2048, 256, 64, 1, 1, 64, 0, &s); /* long context */
    CHECK_MSG(bad == 0, "index_select: %zu values differ from the CPU", bad);
}

/* Decode shapes in both modes and on both paths (v: 0 = the two kernels forced, 1 = the one launch with
 * the last CTA selecting where the shape allows, else the two kernels; the same in both modes): 4K context (1024 keys at ratio 4) and 32K (8192 keys), M = 1, 2,
 * 8, ties, sorted and restricted selections, fewer keys than K, a row without keys (row 1 of M >= 2). */
TEST(gpu_index_select_dec) {
    size_t bad = 0;
    for (int v = 0; v <= 3; v++) {
        g_is_bi = v & 1;
        dic_index_select_one_launch(v >> 1);
        uint64_t s = 4242;
        bad += index_select_case(1, 64, 1024, 512, 64, 16, 0, 0, 64, 0, &s);  /* V4-Flash, ctx 4096 */
        bad += index_select_case(1, 64, 8192, 512, 64, 16, 0, 0, 64, 0, &s);  /* ctx 32768 */
        bad += index_select_case(2, 64, 8192, 512, 64, 16, 0, 1, 64, 1, &s);  /* sorted, ties */
        bad += index_select_case(8, 64, 1030, 512, 64, 16, 0, 0, 64, 0, &s);
        bad += index_select_case(8, 64, 4100, 512, 64, 16, 0, 0, 32, 1, &s); /* ties */
        bad += index_select_case(1, 64, 300, 512, 64, 16, 0, 0, 64, 1, &s);   /* fewer keys than K */
        bad += index_select_case(3, 64, 9000, 1024, 128, 32, 2, 1, 64, 0, &s); /* restricted (cand_in) */
        bad += index_select_case(5, 32, 2000, 100, 64, 8, 0, 0, 96, 1, &s);   /* odd K, nh 32 */
        bad += index_select_case(16, 64, 700, 512, 64, 8, 0, 0, 64, 0, &s);   /* M = 16 */
        g_is_koff = 1; /* keys 2 bytes off 16-byte alignment (k_isel_dec stages them in shared memory) */
        bad += index_select_case(1, 64, 1024, 512, 64, 16, 0, 0, 64, 0, &s);
        bad += index_select_case(3, 64, 2000, 512, 64, 16, 2, 1, 64, 1, &s);  /* restricted (cand_in), sorted, ties */
        g_is_koff = 0;
        /* V4.1's candidate source at ctx 4096 (ratio 1: 4097 keys, blocks of 8, 2048 blocks kept): one launch
         * (every block kept); a row without keys */
        bad += index_select_case(1, 32, 4097, 512, 8, 2048, 1, 1, 64, 0, &s);
        bad += index_select_case(2, 32, 4097, 512, 8, 2048, 1, 1, 64, 1, &s); /* row 1 without keys, ties */
        bad += index_select_case(8, 32, 2000, 512, 8, 2048, 1, 1, 96, 0, &s);
        bad += index_select_case(3, 32, 9000, 512, 8, 64, 1, 1, 64, 0, &s); /* > KB blocks: the two kernels */
        printf("  index_select_dec %s mode, %s: %zu differ so far\n", g_is_bi ? "batch-invariant" : "fast",
               v >> 1 ? "one launch where it applies" : "two kernels", bad);
    }
    g_is_bi = 0;
    dic_index_select_one_launch(1);
    CHECK_MSG(bad == 0, "index_select (decode, both modes): %zu values differ from the CPU", bad);
}

