/* gtest_attn_dec.c — the fast-mode decode attention kernels (ops.h
 * di_attn_dec, di_q_post, di_attn_kv_post; dic_attn_dec.cu,
 * dic_norm_rope.cu) against the CPU op sequences, at M = 1, 2, 8 and odd
 * shapes: window-only, compressed (all visible rows) and indexed (top-k)
 * layers, rings that wrap, windows that reach before position 0, segments
 * of one and of two rows; V4 (per-head query norm, QAT of the non-RoPE
 * dims in blocks of 64) and V4.1 (no query norm, QAT of every dim in
 * blocks of 128).
 *
 * di_q_post in both modes at M up to 70001: every row bitwise the row alone
 * (gpu_q_post_inv).
 *
 * Tolerances: di_attn_kv_post is bitwise; di_q_post is bitwise but for a
 * rare bf16 mean on a rounding boundary (fixed-tree fp32 sum: at most 1 ulp
 * on a few heads); di_attn_dec differs by fp32 / bf16 rounding (split
 * softmax, tensor-core sums): per (row, head) max |gpu - cpu| <= 2^-6 of the
 * head's largest |cpu| value. */
#include <stdio.h>
#include <string.h>

#include "ops/cuda/gpu_util.h"
#include "ops/cpu/threadpool.h"
#include "ops/cuda/dic_model.h"
#include "ops/ops.h"

static di_exec cpu_exec(void) {
    di_exec x = {.tp = di_threadpool_global()};
    return x;
}

static void rope_tabs(int M, const int64_t *pos, int rd, float **cs, float **sn) {
    float invf[256];
    di_rope_inv_freq(rd, 10000.0, 65536, 16.0, 32.0, 1.0, invf);
    *cs = malloc((size_t)M * (rd / 2) * 4 + 4);
    *sn = malloc((size_t)M * (rd / 2) * 4 + 4);
    di_rope_table(M, pos, invf, rd, *cs, *sn);
}

/* ------------------------------------------------------------------------- */

typedef struct dcase {
    int M, H, hd, rd, win, ratio, indexed, K, page_rows, seg_rows;
    int64_t p0;
    uint64_t seed;
} dcase;

static void dec_case(dcase d) {
    const int M = d.M, H = d.H, hd = d.hd, ns = (M + d.seg_rows - 1) / d.seg_rows;
    uint64_t s = d.seed;
    di_exec x = cpu_exec();
    int64_t *pos = malloc((size_t)M * 8), *pos0 = malloc((size_t)ns * 8);
    int *seg = malloc((size_t)M * 4), *row0 = malloc((size_t)ns * 4), *prs = malloc((size_t)ns * 4);
    for (int g = 0; g < ns; g++) {
        pos0[g] = d.p0 + 37 * g;
        row0[g] = g * d.seg_rows;
        prs[g] = d.page_rows;
    }
    for (int m = 0; m < M; m++) {
        seg[m] = m / d.seg_rows;
        pos[m] = pos0[seg[m]] + (m - row0[seg[m]]);
    }
    /* step kv rows, rings, compressed stores (host and device twins) */
    uint16_t *kv = malloc((size_t)M * hd * 2);
    gt_fill_bf16(kv, (size_t)M * hd, 1.0f, &s);
    uint16_t *dkv = gt_to_dev(kv, (size_t)M * hd * 2);
    uint16_t **hring = malloc((size_t)ns * sizeof *hring), **dring = malloc((size_t)ns * sizeof *dring);
    uint16_t ***hckv = calloc((size_t)ns, sizeof *hckv), ***dckv_h = calloc((size_t)ns, sizeof *dckv_h);
    uint16_t **hpool = calloc((size_t)ns, sizeof *hpool), **dpool = calloc((size_t)ns, sizeof *dpool);
    int64_t maxvis = 0;
    for (int g = 0; g < ns; g++) {
        size_t rn = (size_t)d.win * hd;
        hring[g] = malloc(rn * 2);
        gt_fill_bf16(hring[g], rn, 1.0f, &s);
        dring[g] = gt_to_dev(hring[g], rn * 2);
        CHECK(dring[g]);
        if (d.ratio > 0) {
            int64_t vis = (pos0[g] + d.seg_rows) / d.ratio + 1, np = (vis + d.page_rows - 1) / d.page_rows;
            if (vis > maxvis) maxvis = vis;
            size_t pn = (size_t)np * d.page_rows * hd;
            hpool[g] = malloc(pn * 2);
            gt_fill_bf16(hpool[g], pn, 1.0f, &s);
            dpool[g] = gt_to_dev(hpool[g], pn * 2);
            CHECK(dpool[g]);
            hckv[g] = malloc((size_t)np * sizeof(uint16_t *));
            uint16_t **dp = malloc((size_t)np * sizeof(uint16_t *));
            for (int64_t i = 0; i < np; i++) {
                hckv[g][i] = hpool[g] + (size_t)i * d.page_rows * hd;
                dp[i] = dpool[g] + (size_t)i * d.page_rows * hd;
            }
            dckv_h[g] = gt_to_dev(dp, (size_t)np * sizeof(uint16_t *));
            free(dp);
        }
    }
    int K = d.indexed ? d.K : 0;
    int *topk = NULL, *ntopk = NULL;
    if (d.indexed) {
        topk = malloc((size_t)M * K * 4);
        ntopk = malloc((size_t)M * 4);
        for (int m = 0; m < M; m++) {
            int64_t vis = (pos[m] + 1) / d.ratio;
            ntopk[m] = vis < K ? (int)vis : K;
            if (m % 3 == 2 && ntopk[m] > 5) ntopk[m] -= 5; /* fewer than K */
            for (int i = 0; i < K; i++) topk[(size_t)m * K + i] = vis > 0 ? (int)(gt_rand_u64(&s) % (uint64_t)vis) : 0;
        }
    }
    size_t stride = (size_t)d.win + (d.ratio > 0 ? (size_t)(d.indexed ? K : maxvis) : 0) + 16;
    size_t ldq = (size_t)H * hd + 8, ldo = (size_t)H * hd + 16;
    uint16_t *q = malloc((size_t)M * ldq * 2);
    gt_fill_bf16(q, (size_t)M * ldq, 2.0f, &s);
    float *sink = malloc((size_t)H * 4);
    gt_fill_f32(sink, H, 2.0f, &s);
    float *cs, *sn;
    rope_tabs(M, pos, d.rd, &cs, &sn);
    float scale = 1.0f / sqrtf((float)hd);

    /* CPU: the op sequence */
    const uint16_t **list = malloc(((size_t)M * stride) * sizeof *list);
    int *nidx = malloc((size_t)M * 4);
    uint16_t *ref = malloc((size_t)M * ldo * 2), *got = malloc((size_t)M * ldo * 2);
    memset(ref, 0, (size_t)M * ldo * 2);
    di_attn_dec(&x, M, pos, seg, row0, pos0, hring, d.win, kv, hd, d.ratio > 0 ? hckv : NULL, prs, d.ratio, topk, K,
                ntopk, list, stride, nidx, NULL, q, ldq, H, sink, scale, d.rd, cs, sn, ref, ldo);

    /* GPU */
    dic_ctx c;
    CHECK(gt_ctx(&c, dic_attn_dec_scratch(M, H, hd, stride)));
    CHECK(dic_attn_dec_ok(&c, M, H, hd, d.rd, stride, ldo));
    int64_t *dpos = gt_to_dev(pos, (size_t)M * 8), *dpos0 = gt_to_dev(pos0, (size_t)ns * 8);
    int *dseg = gt_to_dev(seg, (size_t)M * 4), *drow0 = gt_to_dev(row0, (size_t)ns * 4), *dprs = gt_to_dev(prs, (size_t)ns * 4);
    uint16_t *const *dringt = gt_to_dev(dring, (size_t)ns * sizeof *dring);
    uint16_t **const *dckvt = d.ratio > 0 ? gt_to_dev(dckv_h, (size_t)ns * sizeof *dckv_h) : NULL;
    int *dtopk = d.indexed ? gt_to_dev(topk, (size_t)M * K * 4) : NULL, *dntopk = d.indexed ? gt_to_dev(ntopk, (size_t)M * 4) : NULL;
    uint16_t *dq = gt_to_dev(q, (size_t)M * ldq * 2), *dout = gt_dev_poison((size_t)M * ldo * 2);
    float *dsink = gt_to_dev(sink, (size_t)H * 4);
    float *dcs = gt_to_dev(cs, (size_t)M * (d.rd / 2) * 4 + 4), *dsn = gt_to_dev(sn, (size_t)M * (d.rd / 2) * 4 + 4);
    int *dn = gt_dev_poison((size_t)M * 4);
    CHECK(dpos && dpos0 && dseg && drow0 && dprs && dringt && dq && dout && dsink && dcs && dsn && dn);
    /* the kernel twice (determinism); the variants' bitwise checks are lab/attn_decode/'s bench */
    {
    uint16_t *prev = NULL;
    for (int rep = 0; rep < 2; rep++) {
    CUDA_SYNC_CHECK(dic_attn_dec(&c, M, dpos, dseg, drow0, dpos0, dringt, d.win, dkv, hd, dckvt, dprs, d.ratio, dtopk, K,
                                 dntopk, stride, dn, dq, ldq, H, dsink, scale, d.rd, dcs, dsn, dout, ldo));
    CUDA_CHECK(cudaMemcpy(got, dout, (size_t)M * ldo * 2, cudaMemcpyDeviceToHost));
    int gn[64];
    CUDA_CHECK(cudaMemcpy(gn, dn, (size_t)M * 4, cudaMemcpyDeviceToHost));
    for (int m = 0; m < M; m++) CHECK_MSG(gn[m] == nidx[m], "attn_dec n_idx row %d: gpu %d cpu %d", m, gn[m], nidx[m]);
    size_t same = 0, tot = 0, badh = 0;
    double worst = 0;
    for (int m = 0; m < M; m++)
        for (int h = 0; h < H; h++) {
            double mx = 0, err = 0;
            for (int i = 0; i < hd; i++) {
                size_t k = (size_t)m * ldo + (size_t)h * hd + i;
                double r = di_bf16_to_f32(ref[k]), g = di_bf16_to_f32(got[k]);
                if (fabs(r) > mx) mx = fabs(r);
                double e = g == g ? fabs(g - r) : INFINITY;
                if (e > err) err = e;
                same += got[k] == ref[k];
                tot++;
            }
            double rel = mx > 0 ? err / mx : err;
            if (rel > worst) worst = rel;
            if (rel > 0x1p-6) badh++;
        }
    if (rep == 0)
        printf("  attn_dec M=%d H=%d hd=%d win=%d ratio=%d idx=%d p0=%lld seg_rows=%d: n=%d, %.2f%% bitwise, worst head err %.2e of max\n",
               M, H, hd, d.win, d.ratio, d.indexed, (long long)d.p0, d.seg_rows, nidx[0],
               100.0 * (double)same / (double)tot, worst);
    CHECK_MSG(badh == 0, "attn_dec M=%d H=%d hd=%d: %zu heads beyond 2^-6 (worst %.3e)", M, H, hd, badh, worst);
    if (rep == 0) {
        prev = malloc((size_t)M * ldo * 2);
        memcpy(prev, got, (size_t)M * ldo * 2);
    } else {
        CHECK_MSG(memcmp(prev, got, (size_t)M * ldo * 2) == 0, "attn_dec M=%d: not deterministic", M);
        free(prev);
    }
    }
    }

    cudaFree(dkv); cudaFree(dpos); cudaFree(dpos0); cudaFree(dseg); cudaFree(drow0); cudaFree(dprs);
    cudaFree((void *)dringt); cudaFree((void *)dckvt); cudaFree(dtopk); cudaFree(dntopk); cudaFree(dq); cudaFree(dout);
    cudaFree(dsink); cudaFree(dcs); cudaFree(dsn); cudaFree(dn); cudaFree(c.scratch);
    for (int g = 0; g < ns; g++) {
        free(hring[g]); cudaFree(dring[g]); free(hpool[g]); cudaFree(dpool[g]); free(hckv[g]); cudaFree(dckv_h[g]);
    }
    free(hring); free(dring); free(hckv); free(dckv_h); free(hpool); free(dpool);
    free(pos); free(pos0); free(seg); free(row0); free(prs); free(kv); free(topk); free(ntopk); free(q); free(sink);
    free(cs); free(sn); free(list); free(nidx); free(ref); free(got);
}

TEST(gpu_attn_dec_v4_flash) { /* 64 heads x 512, window 128, top-512 of the ratio-4 rows */
    dec_case((dcase){1, 64, 512, 64, 128, 4, 1, 512, 64, 1, 4095, 101});
    dec_case((dcase){2, 64, 512, 64, 128, 4, 1, 512, 64, 1, 300, 102});   /* fewer visible rows than K */
    dec_case((dcase){8, 64, 512, 64, 128, 4, 1, 512, 64, 1, 5000, 103});
    dec_case((dcase){8, 64, 512, 64, 128, 4, 1, 512, 64, 2, 777, 104});   /* segments of two rows */
}
TEST(gpu_attn_dec_ctx32k) { /* position 32767: the indexed and the ratio-128 layers */
    dec_case((dcase){1, 64, 512, 64, 128, 4, 1, 512, 64, 1, 32767, 105});
    dec_case((dcase){2, 64, 512, 64, 128, 128, 0, 0, 64, 1, 32767, 106});
}
TEST(gpu_attn_dec_layers) {
    dec_case((dcase){1, 64, 512, 64, 128, 128, 0, 0, 64, 1, 4095, 111}); /* compressed, not indexed */
    dec_case((dcase){2, 64, 512, 64, 128, 128, 0, 0, 16, 1, 20000, 112});
    dec_case((dcase){8, 64, 512, 64, 128, 0, 0, 0, 64, 1, 5, 113});      /* window only, before position win */
    dec_case((dcase){1, 64, 512, 64, 128, 0, 0, 0, 64, 1, 1000, 114});   /* window only, ring wrapped */
}
TEST(gpu_attn_dec_step_counts) { /* the b1 step's entry counts: 128 (window), 160 (ratio 128), 640, odd */
    dec_case((dcase){1, 64, 512, 64, 128, 0, 0, 0, 64, 1, 4095, 131});    /* n = 128 */
    dec_case((dcase){2, 64, 512, 64, 128, 0, 0, 0, 64, 1, 4095, 132});
    dec_case((dcase){8, 64, 512, 64, 128, 0, 0, 0, 64, 1, 4095, 133});
    dec_case((dcase){1, 64, 512, 64, 128, 128, 0, 0, 64, 1, 4095, 134});  /* n = 160 */
    dec_case((dcase){2, 64, 512, 64, 128, 128, 0, 0, 64, 1, 4095, 135});
    dec_case((dcase){8, 64, 512, 64, 128, 128, 0, 0, 64, 1, 4095, 136});  /* n = 160 .. 160 */
    dec_case((dcase){8, 64, 512, 64, 128, 128, 0, 0, 64, 1, 5000, 137});  /* n = 167: odd */
    dec_case((dcase){2, 64, 512, 64, 128, 4, 0, 0, 64, 1, 700, 138});     /* n = 303: odd, not indexed */
    dec_case((dcase){8, 64, 512, 64, 128, 4, 1, 512, 64, 1, 1300, 139}); /* n = 453 .. 454 (< K) */
}
TEST(gpu_attn_dec_odd_shapes) {
    dec_case((dcase){3, 16, 128, 64, 64, 4, 1, 100, 8, 1, 1000, 121});  /* golden checkpoints' head dim */
    dec_case((dcase){2, 32, 96, 32, 20, 0, 0, 0, 8, 2, 50, 122});
    dec_case((dcase){5, 48, 256, 64, 70, 8, 0, 0, 32, 1, 3000, 123});
}

/* ------------------------------------------------------------------------- */

static void qpost_case(int M, int H, int hd, int rd, int norm, size_t ld, uint64_t seed) {
    dic_ctx c;
    CHECK(gt_ctx(&c, 0));
    di_exec x = cpu_exec();
    uint64_t s = seed;
    size_t n = (size_t)M * ld;
    uint16_t *v = malloc(n * 2), *got = malloc(n * 2);
    gt_fill_bf16(v, n, 3.0f, &s);
    int64_t pos[64];
    for (int m = 0; m < M; m++) pos[m] = (int64_t)(gt_rand_u64(&s) % 100000);
    float *cs, *sn;
    rope_tabs(M, pos, rd, &cs, &sn);
    uint16_t *dv = gt_to_dev(v, n * 2);
    float *dcs = gt_to_dev(cs, (size_t)M * (rd / 2) * 4 + 4), *dsn = gt_to_dev(sn, (size_t)M * (rd / 2) * 4 + 4);
    CHECK(dv && dcs && dsn);
    float eps = 1e-6f;
    di_q_post(&x, M, v, ld, H, hd, norm, eps, rd, cs, sn);
    CHECK(dic_q_post_ok(&c, M, dv, ld, hd, rd));
    CUDA_SYNC_CHECK(dic_q_post(&c, M, dv, ld, H, hd, norm, eps, rd, dcs, dsn));
    CUDA_CHECK(cudaMemcpy(got, dv, n * 2, cudaMemcpyDeviceToHost));
    size_t diff = 0, far = 0;
    for (size_t i = 0; i < n; i++)
        if (got[i] != v[i]) {
            diff++;
            int du = (int)(got[i] & 0x7FFF) - (int)(v[i] & 0x7FFF);
            if ((got[i] ^ v[i]) & 0x8000 || du > 1 || du < -1) far++;
        }
    printf("  q_post M=%d H=%d hd=%d rd=%d norm=%d: %zu of %zu values differ (%zu by more than 1 ulp)\n", M, H, hd, rd,
           norm, diff, (size_t)M * H * hd, far);
    CHECK_MSG(far == 0 && diff * 100 <= n, "q_post M=%d H=%d hd=%d norm=%d: %zu differ, %zu by > 1 ulp", M, H, hd, norm,
              diff, far);
    cudaFree(dv); cudaFree(dcs); cudaFree(dsn);
    free(v); free(got); free(cs); free(sn);
}

TEST(gpu_q_post) {
    for (int norm = 0; norm < 2; norm++) {
        qpost_case(1, 64, 512, 64, norm, 64 * 512, 201 + norm);
        qpost_case(2, 64, 512, 64, norm, 64 * 512 + 8, 203 + norm);
        qpost_case(8, 64, 512, 64, norm, 64 * 512, 205 + norm);
        qpost_case(3, 16, 128, 64, norm, 16 * 128, 207 + norm);
        qpost_case(5, 7, 96, 32, norm, 7 * 96 + 16, 209 + norm);
    }
}

/* k_q_post in both modes at every M (docs/determinism.md §7, row-invariant): Ms ascending; the first M rows
 * of one Mmax-row input. Every checked row of an M-row launch in mode 1 bitwise equal to that row launched
 * alone (M = 1); mode 0 the same bits as mode 1; rows >= M and the padding columns untouched; within the CPU
 * op's tolerance (1 ulp on a few values, as gpu_q_post). Checked rows: all below 4096, else a sample around
 * the grid's y limit (65535 rows: the CTAs walk the rows past it). */
static int qp_checked(int m, int Mmax) {
    if (Mmax <= 4096 || m < 3 || m >= Mmax - 2 || m % 997 == 0) return 1;
    return m >= 65533 && m <= 65538;
}

static void qpost_inv_case(int H, int hd, int rd, int norm, const int *Ms, int nM, uint64_t seed) {
    const int Mmax = Ms[nM - 1], half = rd / 2;
    const size_t ld = (size_t)H * hd + 8, n = (size_t)Mmax * ld, tb = (size_t)Mmax * half * 4 + 4;
    dic_ctx c;
    CHECK(gt_ctx(&c, 0));
    di_exec x = cpu_exec();
    uint64_t s = seed;
    uint16_t *v = malloc(n * 2), *cpu = malloc(n * 2), *alone = malloc(n * 2), *got[2] = {malloc(n * 2), malloc(n * 2)};
    int64_t *pos = malloc((size_t)Mmax * 8);
    CHECK(v && cpu && alone && got[0] && got[1] && pos);
    gt_fill_bf16(v, n, 3.0f, &s);
    for (int m = 0; m < Mmax; m++) pos[m] = (int64_t)(gt_rand_u64(&s) % 100000);
    float *cs, *sn;
    rope_tabs(Mmax, pos, rd, &cs, &sn);
    uint16_t *dsrc = gt_to_dev(v, n * 2), *dv = gt_to_dev(v, n * 2);
    float *dcs = gt_to_dev(cs, tb), *dsn = gt_to_dev(sn, tb);
    CHECK(dsrc && dv && dcs && dsn);
    if (di_test_failed()) return;
    const float eps = 1e-6f;
    memcpy(cpu, v, n * 2);
    di_q_post(&x, Mmax, cpu, ld, H, hd, norm, eps, rd, cs, sn);
    /* the rows alone, each its own launch of one row in mode 1 */
    c.batch_invariant = 1;
    for (int m = 0; m < Mmax; m++)
        if (qp_checked(m, Mmax))
            CHECK(dic_q_post(&c, 1, dv + (size_t)m * ld, ld, H, hd, norm, eps, rd, dcs + (size_t)m * half,
                             dsn + (size_t)m * half) == cudaSuccess);
    CUDA_CHECK(cudaStreamSynchronize(c.stream));
    CUDA_CHECK(cudaMemcpy(alone, dv, n * 2, cudaMemcpyDeviceToHost));
    size_t bad_alone = 0, bad_modes = 0, bad_rest = 0, diff = 0, far = 0, nval = 0;
    for (int im = 0; im < nM && !di_test_failed(); im++) {
        const int M = Ms[im];
        for (int mode = 1; mode >= 0; mode--) {
            c.batch_invariant = mode;
            CHECK_MSG(dic_q_post_ok(&c, M, dv, ld, hd, rd), "q_post_ok(mode %d, M=%d) = 0", mode, M);
            CUDA_CHECK(cudaMemcpy(dv, dsrc, n * 2, cudaMemcpyDeviceToDevice));
            CUDA_SYNC_CHECK(dic_q_post(&c, M, dv, ld, H, hd, norm, eps, rd, dcs, dsn));
            CUDA_CHECK(cudaMemcpy(got[mode], dv, n * 2, cudaMemcpyDeviceToHost));
        }
        bad_modes += gt_count_diff_u16(got[0], got[1], n);
        bad_rest += gt_count_diff_u16(got[1] + (size_t)M * ld, v + (size_t)M * ld, (size_t)(Mmax - M) * ld);
        for (int m = 0; m < M; m++) {
            const size_t o = (size_t)m * ld;
            if (qp_checked(m, Mmax)) bad_alone += gt_count_diff_u16(got[1] + o, alone + o, ld);
            for (size_t i = o; i < o + ld; i++) {
                nval++;
                if (got[1][i] == cpu[i]) continue;
                diff++;
                const int du = (int)(got[1][i] & 0x7FFF) - (int)(cpu[i] & 0x7FFF);
                if ((got[1][i] ^ cpu[i]) & 0x8000 || du > 1 || du < -1) far++;
            }
        }
        printf("  q_post inv M=%d H=%d hd=%d rd=%d norm=%d: vs alone %zu, mode 0 vs 1 %zu, rows >= M %zu differ; "
               "vs CPU so far %zu of %zu (%zu by more than 1 ulp)\n", M, H, hd, rd, norm, bad_alone, bad_modes,
               bad_rest, diff, nval, far);
    }
    CHECK_MSG(bad_alone == 0, "q_post mode 1 H=%d hd=%d norm=%d: %zu values differ from the rows alone", H, hd, norm,
              bad_alone);
    CHECK_MSG(bad_modes == 0, "q_post H=%d hd=%d norm=%d: mode 0 and mode 1 differ in %zu values", H, hd, norm,
              bad_modes);
    CHECK_MSG(bad_rest == 0, "q_post H=%d hd=%d norm=%d: %zu values of rows >= M written", H, hd, norm, bad_rest);
    CHECK_MSG(far == 0 && diff * 100 <= nval, "q_post H=%d hd=%d norm=%d vs CPU: %zu differ, %zu by > 1 ulp", H, hd,
              norm, diff, far);
    cudaFree(dsrc), cudaFree(dv), cudaFree(dcs), cudaFree(dsn);
    cudaStreamDestroy(c.stream);
    free(v), free(cpu), free(alone), free(got[0]), free(got[1]), free(pos), free(cs), free(sn);
}

TEST(gpu_q_post_inv) {
    static const int Ms[] = {1, 5, 64, 65, 1000};
    static const int Mbig[] = {1, 65, 65535, 65536, 70001}; /* past the grid's y limit */
    for (int norm = 0; norm < 2; norm++) {
        qpost_inv_case(64, 512, 64, norm, Ms, 5, 301 + norm); /* V4-Flash / V4.1-Flash: 64 heads x 512, rd 64 */
        qpost_inv_case(7, 96, 32, norm, Ms, 5, 303 + norm);   /* odd: a partial head group, chunks < 32 lanes */
        qpost_inv_case(2, 64, 32, norm, Mbig, 5, 305 + norm);
    }
}

/* ------------------------------------------------------------------------- */

static int g_kv_mode; /* the context's batch_invariant: the fused kernel serves both modes */
static void kvpost_case(int M, int D, int rd, int qn, int qblk, int nscat, uint64_t seed) {
    dic_ctx c;
    CHECK(gt_ctx(&c, 0));
    c.batch_invariant = g_kv_mode;
    di_exec x = cpu_exec();
    uint64_t s = seed;
    size_t ld = (size_t)D + 8, n = (size_t)M * ld;
    uint16_t *v = malloc(n * 2), *got = malloc(n * 2);
    for (size_t i = 0; i < n; i++) v[i] = di_f32_to_bf16(gt_normal(&s) * (i % 97 == 0 ? 30.0f : 1.0f));
    float *w = malloc((size_t)D * 4);
    for (int i = 0; i < D; i++) w[i] = 1.0f + 0.2f * gt_rand_unit(&s);
    int64_t pos[64];
    for (int m = 0; m < M; m++) pos[m] = (int64_t)(gt_rand_u64(&s) % 100000);
    float *cs, *sn;
    rope_tabs(M, pos, rd, &cs, &sn);
    /* scatter: rows m = M-1, M-3, ... into slots of a ring of 16 rows */
    int win = 16, src[64];
    uint16_t *ring = calloc((size_t)win * D, 2), *gring = malloc((size_t)win * D * 2), *hdst[64], *ddst[64];
    uint16_t *dring = gt_to_dev(ring, (size_t)win * D * 2);
    for (int i = 0; i < nscat; i++) {
        src[i] = M - 1 - 2 * i;
        int slot = (int)((pos[src[0]] + 3 * i) % win); /* distinct slots */
        hdst[i] = ring + (size_t)slot * D;
        ddst[i] = dring + (size_t)slot * D;
    }
    uint16_t *dv = gt_to_dev(v, n * 2);
    float *dw = gt_to_dev(w, (size_t)D * 4);
    float *dcs = gt_to_dev(cs, (size_t)M * (rd / 2) * 4 + 4), *dsn = gt_to_dev(sn, (size_t)M * (rd / 2) * 4 + 4);
    int *dsrc = gt_to_dev(src, (size_t)(nscat ? nscat : 1) * 4);
    uint16_t *const *ddt = gt_to_dev(ddst, (size_t)(nscat ? nscat : 1) * sizeof *ddst);
    CHECK(dv && dw && dcs && dsn && dsrc && ddt && dring);
    float eps = 1e-6f;
    di_attn_kv_post(&x, M, v, ld, w, D, eps, rd, cs, sn, qn, qblk, nscat, src, hdst);
    CHECK(dic_attn_kv_post_ok(&c, M, dv, ld, D, rd, qn, qblk));
    CUDA_SYNC_CHECK(dic_attn_kv_post(&c, M, dv, ld, dw, D, eps, rd, dcs, dsn, qn, qblk, nscat, dsrc, ddt));
    CUDA_CHECK(cudaMemcpy(got, dv, n * 2, cudaMemcpyDeviceToHost));
    CUDA_CHECK(cudaMemcpy(gring, dring, (size_t)win * D * 2, cudaMemcpyDeviceToHost));
    size_t bad = 0, badr = 0;
    for (int m = 0; m < M; m++)
        for (int i = 0; i < D; i++) bad += got[(size_t)m * ld + i] != v[(size_t)m * ld + i];
    badr = gt_count_diff_u16(gring, ring, (size_t)win * D);
    printf("  kv_post mode %d M=%d D=%d rd=%d qn=%d qblk=%d scatter=%d: %zu kv, %zu ring values differ\n", g_kv_mode, M,
           D, rd, qn, qblk, nscat, bad, badr);
    CHECK_MSG(bad == 0 && badr == 0, "kv_post M=%d D=%d qn=%d qblk=%d: %zu kv / %zu ring values differ", M, D, qn, qblk,
              bad, badr);
    cudaFree(dv); cudaFree(dw); cudaFree(dcs); cudaFree(dsn); cudaFree(dsrc); cudaFree((void *)ddt); cudaFree(dring);
    free(v); free(got); free(w); free(cs); free(sn); free(ring); free(gring);
}

/* Both modes (docs/determinism.md §7: the kernel is the default mode's path too), M up to the kernel's 64. */
TEST(gpu_attn_kv_post_bitwise) {
    int Ms[4] = {1, 2, 8, 64};
    for (g_kv_mode = 0; g_kv_mode <= 1; g_kv_mode++) {
        for (int i = 0; i < 4; i++) {
            kvpost_case(Ms[i], 512, 64, 448, 64, 1, 301 + i);                  /* V4 */
            kvpost_case(Ms[i], 512, 64, 512, 128, (Ms[i] + 1) / 2 < 8 ? (Ms[i] + 1) / 2 : 8, 311 + i); /* V4.1 */
            kvpost_case(Ms[i], 512, 64, 448, 64, 0, 321 + i);                  /* no ring write */
        }
        kvpost_case(5, 256, 64, 192, 64, 2, 331); /* golden-sized */
        kvpost_case(3, 1024, 64, 1024, 256, 1, 332);
    }
    g_kv_mode = 0;
}
