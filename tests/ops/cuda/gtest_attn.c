/* gtest_attn.c — the norm, RoPE, QAT, Hadamard, sparse-attention and
 * indexer CUDA ops (dic_norm_rope.cu, dic_qsim.cu, dic_attention.cu,
 * dic_indexer.cu) return the CPU ops' bits on random inputs at the real
 * model sizes (architecture.md §1) and at odd ones. */
#include <stdio.h>
#include <string.h>

#include "ops/cuda/gpu_util.h"
#include "ops/cpu/threadpool.h"
#include "ops/ops.h"

static di_exec cpu_exec(void) {
    di_exec x = {.tp = di_threadpool_global()};
    return x;
}

/* First differing bf16 of rows x cols (stride ld); 0 if equal, else writes a message. */
static size_t diff_u16(const uint16_t *gpu, const uint16_t *cpu, int rows, int cols, size_t ld, char *msg, size_t cap) {
    size_t bad = 0;
    int fr = -1, fc = -1;
    for (int r = 0; r < rows; r++)
        for (int c = 0; c < cols; c++) {
            size_t i = (size_t)r * ld + c;
            if (gpu[i] != cpu[i]) {
                if (!bad) fr = r, fc = c;
                bad++;
            }
        }
    if (bad) {
        size_t i = (size_t)fr * ld + fc;
        snprintf(msg, cap, "%zu of %d x %d differ; first [%d][%d]: gpu %a (0x%04x) cpu %a (0x%04x)", bad, rows, cols, fr,
                 fc, (double)di_bf16_to_f32(gpu[i]), gpu[i], (double)di_bf16_to_f32(cpu[i]), cpu[i]);
    }
    return bad;
}
static size_t diff_f32(const float *gpu, const float *cpu, int rows, int cols, size_t ld, char *msg, size_t cap) {
    size_t bad = 0;
    int fr = -1, fc = -1;
    for (int r = 0; r < rows; r++)
        for (int c = 0; c < cols; c++) {
            size_t i = (size_t)r * ld + c;
            if (di_f32_bits(gpu[i]) != di_f32_bits(cpu[i]) && !(gpu[i] != gpu[i] && cpu[i] != cpu[i])) {
                if (!bad) fr = r, fc = c;
                bad++;
            }
        }
    if (bad) {
        size_t i = (size_t)fr * ld + fc;
        snprintf(msg, cap, "%zu of %d x %d differ; first [%d][%d]: gpu %a cpu %a", bad, rows, cols, fr, fc,
                 (double)gpu[i], (double)cpu[i]);
    }
    return bad;
}

/* bf16 with a random exponent in [elo, ehi] and random sign / mantissa. */
static uint16_t wide_bf16(uint64_t *s, int elo, int ehi) {
    float f = ldexpf(1.0f + 0.5f * (gt_rand_unit(s) + 1.0f), elo + (int)(gt_rand_u64(s) % (uint64_t)(ehi - elo + 1)));
    return di_f32_to_bf16(gt_rand_u64(s) & 1 ? -f : f);
}

/* ------------------------------------------------------------------------- */

TEST(gpu_rmsnorm_bitwise) {
    static const struct { int M, D, ldx, wide, weight, inplace; } cs[] = {
        {1, 4096, 4096, 0, 1, 0}, {7, 5120, 5200, 0, 1, 0}, {33, 4096, 4096, 1, 1, 0}, {5, 16384, 16384, 0, 0, 0},
        {9, 100, 101, 1, 1, 0},   {3, 8192, 8192, 2, 1, 1}, {300, 512, 512, 1, 0, 1},  {4, 512, 512, 3, 1, 0},
    };
    dic_ctx c;
    CHECK(gt_ctx(&c, 0));
    di_exec x = cpu_exec();
    uint64_t s = 0x1234567ull;
    char msg[256];
    for (size_t t = 0; t < sizeof cs / sizeof cs[0]; t++) {
        int M = cs[t].M, D = cs[t].D;
        size_t ld = (size_t)cs[t].ldx, n = (size_t)M * ld;
        uint16_t *in = malloc(n * 2), *ref = malloc(n * 2), *got = malloc(n * 2);
        float *w = malloc((size_t)D * 4);
        for (size_t i = 0; i < n; i++) {
            if (cs[t].wide == 0) in[i] = di_f32_to_bf16(2.0f * gt_rand_unit(&s));
            else if (cs[t].wide == 1) in[i] = wide_bf16(&s, -40, 12); /* squares span ~100 binades: no exact sum */
            else in[i] = wide_bf16(&s, -126, 60);
        }
        if (cs[t].wide == 3) { /* var exactly on an fp32 midpoint (0.5 + 2^-25): forces the sequential fallback */
            for (int m = 0; m < M; m++)
                for (int i = 0; i < D; i++) {
                    float v = i < 256 ? 1.0f : i == 256 ? 0x1p-8f : ldexpf(1.0f, -60 - (int)(gt_rand_u64(&s) % 8));
                    in[(size_t)m * ld + i] = di_f32_to_bf16((i + m) & 1 ? -v : v);
                }
        }
        for (int i = 0; i < D; i++) w[i] = 1.0f + 0.5f * gt_rand_unit(&s);
        memcpy(ref, in, n * 2);
        di_rmsnorm(&x, M, in, ld, cs[t].weight ? w : NULL, D, 1e-6f, ref, ld);
        uint16_t *din = gt_to_dev(in, n * 2), *dout = cs[t].inplace ? din : gt_dev_poison(n * 2);
        float *dw = gt_to_dev(w, (size_t)D * 4);
        CHECK(din && dout && dw);
        if (!cs[t].inplace) CUDA_CHECK(cudaMemcpy(dout, in, n * 2, cudaMemcpyHostToDevice)); /* stride padding */
        if (!cs[t].inplace) { /* poison the row bodies */
            for (int m = 0; m < M; m++) CUDA_CHECK(cudaMemset(dout + (size_t)m * ld, 0xFF, (size_t)D * 2));
        }
        CUDA_SYNC_CHECK(dic_rmsnorm(&c, M, din, ld, cs[t].weight ? dw : NULL, D, 1e-6f, dout, ld));
        CUDA_CHECK(cudaMemcpy(got, dout, n * 2, cudaMemcpyDeviceToHost));
        CHECK_MSG(!diff_u16(got, ref, M, D, ld, msg, sizeof msg), "rmsnorm M=%d D=%d wide=%d w=%d inplace=%d: %s", M, D,
                  cs[t].wide, cs[t].weight, cs[t].inplace, msg);
        cudaFree(din);
        if (!cs[t].inplace) cudaFree(dout);
        cudaFree(dw);
        free(in); free(ref); free(got); free(w);
    }
}

TEST(gpu_head_rmsnorm_bitwise) {
    static const struct { int M, nh, hd, ld, wide; } cs[] = {
        {3, 64, 512, 64 * 512, 0}, {17, 64, 512, 64 * 512 + 24, 1}, {5, 4, 128, 600, 0}, {2, 3, 96, 300, 1}, {1, 1, 16, 16, 0},
    };
    dic_ctx c;
    CHECK(gt_ctx(&c, 0));
    di_exec x = cpu_exec();
    uint64_t s = 0xABCDEFull;
    char msg[256];
    for (size_t t = 0; t < sizeof cs / sizeof cs[0]; t++) {
        size_t n = (size_t)cs[t].M * cs[t].ld;
        uint16_t *v = malloc(n * 2), *got = malloc(n * 2);
        for (size_t i = 0; i < n; i++) v[i] = cs[t].wide ? wide_bf16(&s, -30, 8) : di_f32_to_bf16(3.0f * gt_rand_unit(&s));
        uint16_t *dv = gt_to_dev(v, n * 2);
        CHECK(dv);
        di_head_rmsnorm_bf16(&x, cs[t].M, v, cs[t].ld, cs[t].nh, cs[t].hd, 1e-6f);
        CUDA_SYNC_CHECK(dic_head_rmsnorm_bf16(&c, cs[t].M, dv, cs[t].ld, cs[t].nh, cs[t].hd, 1e-6f));
        CUDA_CHECK(cudaMemcpy(got, dv, n * 2, cudaMemcpyDeviceToHost));
        /* whole rows, padding included (must stay untouched) */
        CHECK_MSG(!diff_u16(got, v, cs[t].M, cs[t].ld, cs[t].ld, msg, sizeof msg), "head_rmsnorm M=%d nh=%d hd=%d: %s",
                  cs[t].M, cs[t].nh, cs[t].hd, msg);
        cudaFree(dv);
        free(v); free(got);
    }
}

/* Every angle of the released models' RoPE tables (rd 64; theta 10000 and
 * the compressor's 160000, YaRN factor 16 from 65536; also plain RoPE),
 * positions 0 .. 2^20 (max_position_embeddings), bit for bit. */
TEST(gpu_rope_table_all_positions) {
    enum { RD = 64, HALF = 32, CH = 1 << 16, NPOS = 1 << 20 };
    static const struct { double base; int orig; } fs[] = {{10000, 65536}, {160000, 65536}, {10000, 0}, {160000, 0}};
    dic_ctx c;
    CHECK(gt_ctx(&c, 0));
    int64_t *pos = malloc(CH * 8);
    float *cs = malloc((size_t)CH * HALF * 4), *sn = malloc((size_t)CH * HALF * 4);
    float *gcs = malloc((size_t)CH * HALF * 4), *gsn = malloc((size_t)CH * HALF * 4);
    int64_t *dpos = gt_dev_poison(CH * 8);
    float *dcs = gt_dev_poison((size_t)CH * HALF * 4), *dsn = gt_dev_poison((size_t)CH * HALF * 4), *dif = gt_dev_poison(HALF * 4);
    CHECK(dpos && dcs && dsn && dif);
    size_t bad = 0, maxulp = 0;
    char first[256] = "";
    for (size_t f = 0; f < sizeof fs / sizeof fs[0]; f++) {
        float inv[HALF];
        di_rope_inv_freq(RD, fs[f].base, fs[f].orig, 16.0, 32.0, 1.0, inv);
        CUDA_CHECK(cudaMemcpy(dif, inv, sizeof inv, cudaMemcpyHostToDevice));
        for (int p0 = 0; p0 < NPOS; p0 += CH) {
            for (int i = 0; i < CH; i++) pos[i] = p0 + i;
            CUDA_CHECK(cudaMemcpy(dpos, pos, CH * 8, cudaMemcpyHostToDevice));
            CUDA_SYNC_CHECK(dic_rope_table(&c, CH, dpos, dif, RD, dcs, dsn));
            CUDA_CHECK(cudaMemcpy(gcs, dcs, (size_t)CH * HALF * 4, cudaMemcpyDeviceToHost));
            CUDA_CHECK(cudaMemcpy(gsn, dsn, (size_t)CH * HALF * 4, cudaMemcpyDeviceToHost));
            di_rope_table(CH, pos, inv, RD, cs, sn);
            for (size_t i = 0; i < (size_t)CH * HALF; i++) {
                for (int w = 0; w < 2; w++) {
                    float a = w ? gsn[i] : gcs[i], b = w ? sn[i] : cs[i];
                    if (di_f32_bits(a) == di_f32_bits(b)) continue;
                    int64_t d = (int64_t)di_f32_bits(a) - (int64_t)di_f32_bits(b);
                    size_t u = (size_t)(d < 0 ? -d : d);
                    if (u > maxulp) maxulp = u;
                    if (!bad++)
                        snprintf(first, sizeof first, "base %g yarn %d pos %lld i %zu %s: gpu %a cpu %a", fs[f].base,
                                 fs[f].orig > 0, (long long)pos[i / HALF], i % HALF, w ? "sin" : "cos", (double)a,
                                 (double)b);
                }
            }
        }
    }
    CHECK_MSG(bad == 0, "%zu of %d table values differ (max %zu ulp); first: %s", bad, 4 * NPOS * HALF * 2, maxulp, first);
    cudaFree(dpos); cudaFree(dcs); cudaFree(dsn); cudaFree(dif);
    free(pos); free(cs); free(sn); free(gcs); free(gsn);
}

TEST(gpu_rope_tab_bitwise) {
    static const struct { int M, nh, hd, rd, ld; } cs[] = {{5, 64, 512, 64, 64 * 512}, {3, 1, 512, 64, 520}, {4, 4, 128, 64, 512},
                                                            {2, 3, 96, 32, 300}};
    dic_ctx c;
    CHECK(gt_ctx(&c, 0));
    di_exec x = cpu_exec();
    uint64_t s = 777;
    char msg[256];
    for (size_t t = 0; t < sizeof cs / sizeof cs[0]; t++)
        for (int inv = 0; inv < 2; inv++) {
            int M = cs[t].M, half = cs[t].rd / 2;
            size_t n = (size_t)M * cs[t].ld;
            uint16_t *v = malloc(n * 2), *got = malloc(n * 2);
            gt_fill_bf16(v, n, 4.0f, &s);
            int64_t pos[8];
            for (int m = 0; m < M; m++) pos[m] = (int64_t)(gt_rand_u64(&s) % 1000000);
            float invf[64], *tc = malloc((size_t)M * half * 4), *ts = malloc((size_t)M * half * 4);
            di_rope_inv_freq(cs[t].rd, 10000.0, 65536, 16.0, 32.0, 1.0, invf);
            di_rope_table(M, pos, invf, cs[t].rd, tc, ts);
            uint16_t *dv = gt_to_dev(v, n * 2);
            float *dc = gt_to_dev(tc, (size_t)M * half * 4), *ds = gt_to_dev(ts, (size_t)M * half * 4);
            CHECK(dv && dc && ds);
            di_rope_tab(&x, M, v, cs[t].ld, cs[t].nh, cs[t].hd, cs[t].rd, tc, ts, inv);
            CUDA_SYNC_CHECK(dic_rope_tab(&c, M, dv, cs[t].ld, cs[t].nh, cs[t].hd, cs[t].rd, dc, ds, inv));
            CUDA_CHECK(cudaMemcpy(got, dv, n * 2, cudaMemcpyDeviceToHost));
            CHECK_MSG(!diff_u16(got, v, M, cs[t].ld, cs[t].ld, msg, sizeof msg), "rope_tab nh=%d hd=%d rd=%d inverse=%d: %s",
                      cs[t].nh, cs[t].hd, cs[t].rd, inv, msg);
            cudaFree(dv); cudaFree(dc); cudaFree(ds);
            free(v); free(got); free(tc); free(ts);
        }
}

/* ------------------------------------------------------------------------- */

TEST(gpu_qsim_bitwise) {
    static const struct { int op, M, n, blk, ld; } cs[] = {
        {0, 7, 7168, 128, 7168}, {0, 3, 512, 64, 520}, {0, 5, 96, 32, 100}, {1, 6, 2048, 32, 2048}, {1, 3, 448, 64, 450},
        {2, 9, 512, 16, 512},    {2, 4, 512, 32, 512}, {2, 2, 48, 16, 50},  {0, 300, 512, 512, 512},
    };
    dic_ctx c;
    CHECK(gt_ctx(&c, 0));
    di_exec x = cpu_exec();
    uint64_t s = 99;
    char msg[256];
    for (size_t t = 0; t < sizeof cs / sizeof cs[0]; t++) {
        int M = cs[t].M;
        size_t n = (size_t)M * cs[t].ld;
        uint16_t *v = malloc(n * 2), *got = malloc(n * 2);
        for (size_t i = 0; i < n; i++) {
            size_t blkno = (i % cs[t].ld) / cs[t].blk;
            /* blocks of different scales, some tiny (the amax floor), some wide */
            int mode = (int)((blkno * 7 + i / cs[t].ld) % 5);
            v[i] = mode == 0 ? wide_bf16(&s, -30, 10)
                 : mode == 1 ? di_f32_to_bf16(1e-7f * gt_rand_unit(&s))
                 : mode == 2 ? di_f32_to_bf16(300.0f * gt_rand_unit(&s))
                             : di_f32_to_bf16(gt_rand_unit(&s));
        }
        uint16_t *dv = gt_to_dev(v, n * 2);
        CHECK(dv);
        if (cs[t].op == 0) {
            di_qat_fp8(&x, M, v, cs[t].ld, cs[t].n, cs[t].blk);
            CUDA_SYNC_CHECK(dic_qat_fp8(&c, M, dv, cs[t].ld, cs[t].n, cs[t].blk));
        } else if (cs[t].op == 1) {
            di_qat_fp4(&x, M, v, cs[t].ld, cs[t].n, cs[t].blk);
            CUDA_SYNC_CHECK(dic_qat_fp4(&c, M, dv, cs[t].ld, cs[t].n, cs[t].blk));
        } else {
            di_qat_fp4_e4m3(&x, M, v, cs[t].ld, cs[t].n, cs[t].blk);
            CUDA_SYNC_CHECK(dic_qat_fp4_e4m3(&c, M, dv, cs[t].ld, cs[t].n, cs[t].blk));
        }
        CUDA_CHECK(cudaMemcpy(got, dv, n * 2, cudaMemcpyDeviceToHost));
        CHECK_MSG(!diff_u16(got, v, M, cs[t].ld, cs[t].ld, msg, sizeof msg), "%s M=%d n=%d blk=%d: %s",
                  cs[t].op == 0 ? "qat_fp8" : cs[t].op == 1 ? "qat_fp4" : "qat_fp4_e4m3", M, cs[t].n, cs[t].blk, msg);
        cudaFree(dv);
        free(v); free(got);
    }
}

TEST(gpu_hadamard128_bitwise) {
    static const struct { int M, nvec, ld; } cs[] = {{1, 1, 128}, {7, 64, 64 * 128}, {33, 32, 32 * 128 + 8}, {500, 1, 136}};
    dic_ctx c;
    CHECK(gt_ctx(&c, 0));
    di_exec x = cpu_exec();
    uint64_t s = 4242;
    char msg[256];
    for (size_t t = 0; t < sizeof cs / sizeof cs[0]; t++) {
        size_t n = (size_t)cs[t].M * cs[t].ld;
        uint16_t *v = malloc(n * 2), *got = malloc(n * 2);
        for (size_t i = 0; i < n; i++) v[i] = i % 3 ? di_f32_to_bf16(2.0f * gt_rand_unit(&s)) : wide_bf16(&s, -20, 6);
        uint16_t *dv = gt_to_dev(v, n * 2);
        CHECK(dv);
        di_hadamard128(&x, cs[t].M, v, cs[t].ld, cs[t].nvec);
        CUDA_SYNC_CHECK(dic_hadamard128(&c, cs[t].M, dv, cs[t].ld, cs[t].nvec));
        CUDA_CHECK(cudaMemcpy(got, dv, n * 2, cudaMemcpyDeviceToHost));
        CHECK_MSG(!diff_u16(got, v, cs[t].M, cs[t].ld, cs[t].ld, msg, sizeof msg), "hadamard128 M=%d nvec=%d: %s", cs[t].M,
                  cs[t].nvec, msg);
        cudaFree(dv);
        free(v); free(got);
    }
}

/* ------------------------------------------------------------------------- */

/* A sparse-attention case: M rows attend to up to nmax entries drawn from a
 * pool of KV rows (window + selected rows), with NULL entries, rows of
 * n_idx = 0, blocks that are all NULL, misaligned rows (odd offsets). */
static void attn_case(int M, int nheads, int hd, int nmax, float qamp, int null_pct, int misalign, uint64_t seed,
                      int sms /* 0: the device's; else pretend (picks 1, 2, 4 or 8 heads per CTA) */) {
    dic_ctx c;
    /* sms == 0: the three-phase kernels (with scratch); else the fused fallback (no scratch) */
    CHECK(gt_ctx(&c, sms ? 0 : dic_sparse_attn_scratch(M, nheads, nmax)));
    if (sms) c.num_sms = sms;
    di_exec x = cpu_exec();
    uint64_t s = seed;
    char msg[256];
    int npool = 2048;
    size_t kst = (size_t)hd + (misalign ? 1 : 0); /* odd stride: every other row misaligned */
    size_t ldq = (size_t)nheads * hd + 8, ldo = (size_t)nheads * hd + 16;
    uint16_t *pool = malloc((size_t)npool * kst * 2 + 2);
    gt_fill_bf16(pool, (size_t)npool * kst + 1, 1.0f, &s);
    uint16_t *q = malloc((size_t)M * ldq * 2);
    gt_fill_bf16(q, (size_t)M * ldq, qamp, &s);
    float *sink = malloc((size_t)nheads * 4);
    gt_fill_f32(sink, nheads, 2.0f, &s);
    int *nidx = malloc((size_t)M * 4);
    const uint16_t **hk = malloc((size_t)M * nmax * sizeof *hk);
    const uint16_t **dk = malloc((size_t)M * nmax * sizeof *dk);
    uint16_t *dpool = gt_to_dev(pool, (size_t)npool * kst * 2 + 2);
    CHECK(dpool);
    for (int m = 0; m < M; m++) {
        nidx[m] = m % 5 == 3 ? 0 : m % 3 == 1 ? nmax : 1 + (int)(gt_rand_u64(&s) % (uint64_t)nmax);
        for (int i = 0; i < nmax; i++) {
            int r = (int)(gt_rand_u64(&s) % (uint64_t)npool);
            int isnull = (int)(gt_rand_u64(&s) % 100) < null_pct || (m % 4 == 2 && i < 64); /* first block all NULL */
            hk[(size_t)m * nmax + i] = isnull ? NULL : pool + (size_t)r * kst;
            dk[(size_t)m * nmax + i] = isnull ? NULL : dpool + (size_t)r * kst;
        }
    }
    uint16_t *ref = malloc((size_t)M * ldo * 2), *got = malloc((size_t)M * ldo * 2);
    memset(ref, 0xFF, (size_t)M * ldo * 2);
    float scale = 1.0f / sqrtf((float)hd);
    di_sparse_attn(&x, M, q, ldq, nheads, hd, hk, nmax, nidx, sink, scale, ref, ldo);
    uint16_t *dq = gt_to_dev(q, (size_t)M * ldq * 2), *dout = gt_dev_poison((size_t)M * ldo * 2);
    float *dsink = gt_to_dev(sink, (size_t)nheads * 4);
    int *dn = gt_to_dev(nidx, (size_t)M * 4);
    const uint16_t *const *dkv = gt_to_dev(dk, (size_t)M * nmax * sizeof *dk);
    CHECK(dq && dout && dsink && dn && dkv);
    CUDA_SYNC_CHECK(dic_sparse_attn(&c, M, dq, ldq, nheads, hd, dkv, nmax, dn, dsink, scale, dout, ldo));
    CUDA_CHECK(cudaMemcpy(got, dout, (size_t)M * ldo * 2, cudaMemcpyDeviceToHost));
    size_t bad = diff_u16(got, ref, M, nheads * hd, ldo, msg, sizeof msg);
    if (bad) { /* locate: row, head, column */
        for (int m = 0; m < M; m++)
            for (int i = 0; i < nheads * hd; i++)
                if (got[(size_t)m * ldo + i] != ref[(size_t)m * ldo + i]) {
                    di_test_fail(__FILE__, __LINE__, "sparse_attn M=%d nheads=%d hd=%d nmax=%d: %s (row %d n_idx %d head %d col %d)",
                                 M, nheads, hd, nmax, msg, m, nidx[m], i / hd, i % hd);
                    m = M;
                    break;
                }
    }
    cudaFree(dpool); cudaFree(dq); cudaFree(dout); cudaFree(dsink); cudaFree(dn); cudaFree((void *)dkv);
    if (c.scratch) cudaFree(c.scratch);
    free(pool); free(q); free(sink); free(nidx); free(hk); free(dk); free(ref); free(got);
}

TEST(gpu_sparse_attn_decode_sizes) { /* 64 heads x 512, window 128 + 512 selected: 640 entries */
    attn_case(3, 64, 512, 640, 1.0f, 5, 0, 11, 0);
    attn_case(40, 64, 512, 640, 4.0f, 3, 0, 12, 0); /* enough rows for 8 heads per CTA */
    attn_case(1, 64, 512, 640, 2.0f, 0, 0, 13, 0);  /* batch 1 */
    attn_case(70, 64, 512, 640, 2.0f, 2, 0, 14, 0); /* the large-batch tiles */
}
TEST(gpu_sparse_attn_odd_shapes) {
    attn_case(5, 4, 128, 200, 2.0f, 10, 0, 21, 0);  /* golden checkpoints' hd */
    attn_case(6, 7, 64, 130, 8.0f, 20, 1, 22, 0);   /* heads not a multiple of 8, misaligned rows */
    attn_case(2, 64, 512, 63, 1.0f, 0, 1, 23, 0);   /* one partial block, misaligned */
    attn_case(9, 13, 96, 257, 3.0f, 50, 0, 24, 0);  /* half NULL */
    attn_case(1, 64, 512, 1, 1.0f, 0, 0, 25, 0);
    attn_case(200, 13, 96, 130, 4.0f, 20, 1, 26, 0); /* large-batch tiles: partial heads, columns, blocks; misaligned */
    attn_case(3, 64, 512, 640, 1.0f, 5, 0, 27, 7);   /* the fused fallback (no scratch) at decode sizes */
}
TEST(gpu_sparse_attn_head_groups) { /* every heads-per-CTA choice, with a partial last group */
    attn_case(5, 64, 512, 640, 2.0f, 5, 0, 31, 60); /* 2 heads per CTA */
    attn_case(5, 64, 512, 300, 2.0f, 5, 0, 32, 30); /* 4 */
    attn_case(4, 13, 512, 200, 2.0f, 5, 1, 33, 1);  /* 8: groups of 8 + 5 */
    attn_case(4, 13, 128, 200, 2.0f, 5, 0, 34, 8);  /* 4 + tail of 1 */
    attn_case(3, 3, 64, 129, 2.0f, 5, 0, 35, 1);    /* 8 heads per CTA, only 3 heads */
}

/* ------------------------------------------------------------------------- */

static void index_case(int M, int nh, int nmaxkeys, int max_keys, size_t ldk, uint64_t seed) {
    dic_ctx c;
    CHECK(gt_ctx(&c, 0));
    uint64_t s = seed;
    char msg[256];
    size_t ldq = (size_t)nh * 128 + 8, lds = (size_t)max_keys + 3;
    int nkpool = nmaxkeys + 100;
    uint16_t *k = malloc((size_t)nkpool * ldk * 2), *q = malloc((size_t)M * ldq * 2);
    gt_fill_bf16(k, (size_t)nkpool * ldk, 1.0f, &s);
    gt_fill_bf16(q, (size_t)M * ldq, 1.0f, &s);
    float *w = malloc((size_t)M * nh * 4);
    for (int i = 0; i < M * nh; i++) w[i] = di_bf16_to_f32(di_f32_to_bf16(0.3f * gt_rand_unit(&s)));
    int64_t *key0 = malloc((size_t)M * 8);
    int *nk = malloc((size_t)M * 4);
    for (int m = 0; m < M; m++) {
        key0[m] = (int64_t)(gt_rand_u64(&s) % 100);
        nk[m] = m == 1 ? 0 : m == 0 ? nmaxkeys : 1 + (int)(gt_rand_u64(&s) % (uint64_t)nmaxkeys);
    }
    float *ref = malloc((size_t)M * lds * 4), *got = malloc((size_t)M * lds * 4);
    for (int m = 0; m < M; m++) {
        di_index_scores(q + (size_t)m * ldq, nh, w + (size_t)m * nh, k + (size_t)key0[m] * ldk, ldk, nk[m],
                        ref + (size_t)m * lds);
        for (int j = nk[m]; j < max_keys; j++) ref[(size_t)m * lds + j] = -INFINITY;
    }
    uint16_t *dk = gt_to_dev(k, (size_t)nkpool * ldk * 2), *dq = gt_to_dev(q, (size_t)M * ldq * 2);
    float *dw = gt_to_dev(w, (size_t)M * nh * 4), *ds = gt_dev_poison((size_t)M * lds * 4);
    int64_t *dk0 = gt_to_dev(key0, (size_t)M * 8);
    int *dnk = gt_to_dev(nk, (size_t)M * 4);
    CHECK(dk && dq && dw && ds && dk0 && dnk);
    CUDA_SYNC_CHECK(dic_index_scores(&c, M, dq, ldq, nh, dw, dk, ldk, dk0, dnk, max_keys, ds, lds));
    CUDA_CHECK(cudaMemcpy(got, ds, (size_t)M * lds * 4, cudaMemcpyDeviceToHost));
    CHECK_MSG(!diff_f32(got, ref, M, max_keys, lds, msg, sizeof msg), "index_scores M=%d nh=%d keys<=%d max_keys=%d: %s", M,
              nh, nmaxkeys, max_keys, msg);
    cudaFree(dk); cudaFree(dq); cudaFree(dw); cudaFree(ds); cudaFree(dk0); cudaFree(dnk);
    free(k); free(q); free(w); free(key0); free(nk); free(ref); free(got);
}

TEST(gpu_index_scores_bitwise) {
    index_case(3, 64, 8192, 8200, 136, 31); /* V4-Flash: 64 index heads */
    index_case(4, 32, 3000, 3001, 128, 32); /* V4.1-Flash: 32 */
    index_case(5, 4, 77, 130, 129, 33);     /* golden: 4; odd stride: unaligned key rows */
}

static void topk_case(int M, int nmax, int k, int kind, uint64_t seed) {
    dic_ctx c;
    CHECK(gt_ctx(&c, 0));
    uint64_t s = seed;
    size_t lds = (size_t)nmax + 5;
    float *sc = malloc((size_t)M * lds * 4);
    int *n = malloc((size_t)M * 4);
    for (int m = 0; m < M; m++) {
        n[m] = m == 1 ? 0 : m == 0 ? nmax : (int)(gt_rand_u64(&s) % (uint64_t)(nmax + 1));
        for (size_t j = 0; j < lds; j++) {
            float v;
            if (kind == 0) v = gt_rand_unit(&s) * 10.0f;
            else if (kind == 1) v = di_bf16_to_f32(di_f32_to_bf16((float)(int)(gt_rand_u64(&s) % 7) * 0.25f)); /* many ties */
            else { /* specials: -inf, +-0, NaN, huge, tiny */
                uint64_t r = gt_rand_u64(&s) % 10;
                v = r == 0 ? -INFINITY : r == 1 ? 0.0f : r == 2 ? -0.0f : r == 3 ? NAN : r == 4 ? 3e38f : r == 5 ? 1e-40f
                  : di_bf16_to_f32(di_f32_to_bf16(gt_rand_unit(&s)));
            }
            sc[(size_t)m * lds + j] = v;
        }
    }
    int *ref = malloc((size_t)M * k * 4), *got = malloc((size_t)M * k * 4), *cnt = malloc((size_t)M * 4);
    float *dsc = gt_to_dev(sc, (size_t)M * lds * 4);
    int *dn = gt_to_dev(n, (size_t)M * 4), *didx = gt_dev_poison((size_t)M * k * 4), *dcnt = gt_dev_poison((size_t)M * 4);
    CHECK(dsc && dn && didx && dcnt);
    CUDA_SYNC_CHECK(dic_topk_desc(&c, M, dsc, lds, dn, k, didx, dcnt));
    CUDA_CHECK(cudaMemcpy(got, didx, (size_t)M * k * 4, cudaMemcpyDeviceToHost));
    CUDA_CHECK(cudaMemcpy(cnt, dcnt, (size_t)M * 4, cudaMemcpyDeviceToHost));
    for (int m = 0; m < M; m++) {
        int rc = di_topk_desc(sc + (size_t)m * lds, n[m], k, ref + (size_t)m * k);
        CHECK_MSG(cnt[m] == rc, "topk M=%d n=%d k=%d kind=%d row %d: count gpu %d cpu %d", M, n[m], k, kind, m, cnt[m], rc);
        for (int i = 0; i < rc; i++)
            CHECK_MSG(got[(size_t)m * k + i] == ref[(size_t)m * k + i],
                      "topk n=%d k=%d kind=%d row %d rank %d: gpu idx %d cpu idx %d (scores %a / %a)", n[m], k, kind, m, i,
                      got[(size_t)m * k + i], ref[(size_t)m * k + i],
                      got[(size_t)m * k + i] >= 0 && got[(size_t)m * k + i] < n[m] ? (double)sc[(size_t)m * lds + got[(size_t)m * k + i]] : -1.0,
                      (double)sc[(size_t)m * lds + ref[(size_t)m * k + i]]);
        for (int i = rc; i < k; i++) CHECK_MSG(got[(size_t)m * k + i] == -1, "topk row %d slot %d past count: %d", m, i, got[(size_t)m * k + i]);
    }
    cudaFree(dsc); cudaFree(dn); cudaFree(didx); cudaFree(dcnt);
    free(sc); free(n); free(ref); free(got); free(cnt);
}

TEST(gpu_topk_desc_same_indices) {
    topk_case(4, 65536, 512, 0, 41); /* indexer top-512 of 64K */
    topk_case(5, 32768, 512, 1, 42); /* heavy ties: lower index first */
    topk_case(6, 8192, 512, 2, 43);  /* -inf, +-0, NaN, subnormals */
    topk_case(3, 300, 512, 0, 44);   /* n < k */
    topk_case(3, 1000, 1, 1, 45);
    topk_case(3, 5000, 4096, 2, 46);
    topk_case(3, 100, 16, 1, 47);    /* golden index_topk */
}

TEST(gpu_softmax_pool_bitwise) {
    static const struct { int G, S, D, ld; } cs[] = {{5, 4, 512, 512}, {3, 128, 448, 450}, {2, 256, 512, 512}, {7, 8, 37, 40},
                                                      {1, 1, 128, 128}};
    dic_ctx c;
    CHECK(gt_ctx(&c, 0));
    uint64_t s = 555;
    char msg[256];
    for (size_t t = 0; t < sizeof cs / sizeof cs[0]; t++) {
        int G = cs[t].G, S = cs[t].S, D = cs[t].D;
        size_t ld = (size_t)cs[t].ld, gs = (size_t)S * ld + 3, ldo = (size_t)D + 2, n = (size_t)G * gs;
        float *kv = malloc(n * 4), *sc = malloc(n * 4), *ref = malloc((size_t)G * ldo * 4), *got = malloc((size_t)G * ldo * 4);
        gt_fill_f32(kv, n, 2.0f, &s);
        for (size_t i = 0; i < n; i++) sc[i] = gt_rand_u64(&s) % 13 == 0 ? -INFINITY : 6.0f * gt_rand_unit(&s);
        for (int g = 0; g < G; g++) di_softmax_pool(kv + g * gs, sc + g * gs, ld, S, D, ref + g * ldo);
        float *dkv = gt_to_dev(kv, n * 4), *dsc = gt_to_dev(sc, n * 4), *dout = gt_dev_poison((size_t)G * ldo * 4);
        CHECK(dkv && dsc && dout);
        CUDA_SYNC_CHECK(dic_softmax_pool(&c, G, dkv, dsc, ld, gs, S, D, dout, ldo));
        CUDA_CHECK(cudaMemcpy(got, dout, (size_t)G * ldo * 4, cudaMemcpyDeviceToHost));
        CHECK_MSG(!diff_f32(got, ref, G, D, ldo, msg, sizeof msg), "softmax_pool G=%d S=%d D=%d: %s", G, S, D, msg);
        cudaFree(dkv); cudaFree(dsc); cudaFree(dout);
        free(kv); free(sc); free(ref); free(got);
    }
}
