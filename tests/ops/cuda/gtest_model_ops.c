/* gtest_model_ops.c — the device-shaped forward's ops (src/ops/cuda/
 * dic_model.h) on the GPU against their CPU ops (src/ops/cpu/{rows,
 * attn_list,cmp_state,index_select,moe_route,gemm_grouped,elem_model,
 * engram_gate}.c) on random inputs at realistic and odd sizes, outputs
 * poisoned with 0xFF bytes. Bitwise everywhere except: the grouped GEMMs
 * (bitwise vs dic_gemm on the same rows, within the GEMM tolerance of
 * di_gemm) and the libm expf / log1pf users (route_rows, hc_head_pre,
 * engram_gate: 1-ulp differences allowed in a small fraction, each printed).
 * Each test runs all its shapes, prints shape, element and both values of
 * the first mismatches, then fails. */
#include <stdio.h>
#include <string.h>

#include "ops/cuda/gpu_util.h"
#include "ops/cuda/dic_model.h"
#include "ops/ops.h"

static int urand(uint64_t *s, int n) { return (int)(gt_rand_u64(s) % (uint64_t)n); }

/* Mismatches of n words of `size` bytes (2, 4 or 8); prints the first 4 as
 * [row][col] with both values. */
static size_t mdiff(const char *what, const void *gpu, const void *cpu, size_t n, int size, size_t row) {
    size_t bad = 0;
    for (size_t i = 0; i < n; i++) {
        uint64_t a = 0, b = 0;
        memcpy(&a, (const char *)gpu + i * size, (size_t)size);
        memcpy(&b, (const char *)cpu + i * size, (size_t)size);
        if (a == b) continue;
        if (bad < 4) {
            size_t r = row ? i / row : 0, c = row ? i % row : i;
            if (size == 2)
                fprintf(stderr, "  %s [%zu][%zu]: gpu %04llx (%g) cpu %04llx (%g)\n", what, r, c, (unsigned long long)a,
                        di_bf16_to_f32((uint16_t)a), (unsigned long long)b, di_bf16_to_f32((uint16_t)b));
            else if (size == 4) {
                float fa, fb;
                memcpy(&fa, &a, 4), memcpy(&fb, &b, 4);
                fprintf(stderr, "  %s [%zu][%zu]: gpu %08llx (%g / %d) cpu %08llx (%g / %d)\n", what, r, c,
                        (unsigned long long)a, fa, (int)a, (unsigned long long)b, fb, (int)b);
            } else
                fprintf(stderr, "  %s [%zu][%zu]: gpu %016llx cpu %016llx\n", what, r, c, (unsigned long long)a,
                        (unsigned long long)b);
        }
        bad++;
    }
    return bad;
}
/* fp32 ulps between a and b (same sign assumed; large if not). */
static long long ulps32(float a, float b) {
    int32_t x, y;
    memcpy(&x, &a, 4), memcpy(&y, &b, 4);
    if ((x < 0) != (y < 0)) return (a == b) ? 0 : 1LL << 40;
    long long d = (long long)x - y;
    return d < 0 ? -d : d;
}

/* ------------------------------------------------------------ rows ---- */

TEST(gpu_model_rows) {
    static const int shapes[][4] = {/* M, row elems, src pad, dst pad */ {1, 4096, 0, 0}, {7, 7168, 16, 8},
                                    {33, 1, 3, 0}, {300, 513, 0, 5}};
    dic_ctx c;
    CHECK(gt_ctx(&c, 0));
    uint64_t s = 11;
    size_t bad = 0;
    for (size_t t = 0; t < sizeof shapes / sizeof *shapes; t++) {
        int M = shapes[t][0], w = shapes[t][1];
        size_t lds = (size_t)w + shapes[t][2], ldd = (size_t)w + shapes[t][3];
        /* copy_2d (bf16 rows) */
        uint16_t *src = malloc((size_t)M * lds * 2), *ref = malloc((size_t)M * ldd * 2);
        gt_fill_bf16(src, (size_t)M * lds, 3.0f, &s);
        memset(ref, 0xFF, (size_t)M * ldd * 2);
        di_copy_2d(NULL, M, src, lds * 2, ref, ldd * 2, (size_t)w * 2);
        uint16_t *dsrc = gt_to_dev(src, (size_t)M * lds * 2), *ddst = gt_dev_poison((size_t)M * ldd * 2);
        CHECK(dsrc && ddst);
        CUDA_SYNC_CHECK(dic_copy_2d(&c, M, dsrc, lds * 2, ddst, ldd * 2, (size_t)w * 2));
        uint16_t *got = gt_d2h(ddst, (size_t)M * ldd * 2);
        CHECK(got);
        size_t b = mdiff("copy_2d", got, ref, (size_t)M * ldd, 2, ldd);
        if (b) fprintf(stderr, "copy_2d M=%d w=%d lds=%zu ldd=%zu: %zu differ\n", M, w, lds, ldd, b);
        bad += b;
        /* scatter_rows: n rows to shuffled destinations, with and without src_row */
        for (int use_map = 0; use_map < 2; use_map++) {
            int n = use_map ? M + 3 : M;
            int *map = malloc((size_t)n * sizeof(int));
            for (int i = 0; i < n; i++) map[i] = urand(&s, M);
            size_t ndst = (size_t)n * ldd + 1; /* +1: odd element offsets */
            uint16_t *href = malloc(ndst * 2);
            memset(href, 0xFF, ndst * 2);
            uint16_t *dbuf = gt_dev_poison(ndst * 2);
            CHECK(dbuf);
            uint16_t **hp = malloc((size_t)n * sizeof *hp), **dp = malloc((size_t)n * sizeof *dp);
            /* destination row i at slot perm(i), a permutation (stride coprime with n), +1 element for
             * odd i when w is odd and the row pitch leaves room: destinations never overlap (ops.h) */
            int stride = n % 7 ? 7 : n % 5 ? 5 : n % 3 ? 3 : 1;
            for (int i = 0; i < n; i++) {
                size_t slot = (size_t)((i * stride + 3) % n) * ldd + (size_t)(i & 1 && w % 2 && ldd > (size_t)w);
                hp[i] = href + slot;
                dp[i] = dbuf + slot;
            }
            if (!use_map) n = n > M ? M : n;
            di_scatter_rows(NULL, n, use_map ? map : NULL, src, lds, hp, w);
            int *dmap = gt_to_dev(map, (size_t)n * sizeof(int));
            uint16_t **ddp = gt_to_dev(dp, (size_t)n * sizeof *dp);
            CHECK(dmap && ddp);
            CUDA_SYNC_CHECK(dic_scatter_rows(&c, n, use_map ? dmap : NULL, dsrc, lds, ddp, w));
            uint16_t *g2 = gt_d2h(dbuf, ndst * 2);
            CHECK(g2);
            b = mdiff("scatter_rows", g2, href, ndst, 2, ldd);
            if (b) fprintf(stderr, "scatter_rows n=%d w=%d map=%d: %zu differ\n", n, w, use_map, b);
            bad += b;
            cudaFree(dbuf), cudaFree(dmap), cudaFree(ddp);
            free(map), free(href), free(hp), free(dp), free(g2);
        }
        cudaFree(dsrc), cudaFree(ddst);
        free(src), free(ref), free(got);
    }
    /* fill_f32: +0 (memset on the CPU), -0, a value; odd counts */
    static const float vals[] = {0.0f, -0.0f, -1e30f, 3.25f};
    static const size_t ns[] = {1, 1000, 1 << 20, 12345};
    for (int i = 0; i < 4; i++) {
        size_t n = ns[i];
        float *ref = malloc(n * 4);
        di_fill_f32(NULL, ref, n, vals[i]);
        float *d = gt_dev_poison(n * 4);
        CHECK(d);
        CUDA_SYNC_CHECK(dic_fill_f32(&c, d, n, vals[i]));
        float *got = gt_d2h(d, n * 4);
        CHECK(got);
        size_t b = mdiff("fill_f32", got, ref, n, 4, 0);
        if (b) fprintf(stderr, "fill_f32 n=%zu v=%g: %zu differ\n", n, vals[i], b);
        bad += b;
        cudaFree(d), free(ref), free(got);
    }
    CHECK_MSG(bad == 0, "rows ops: %zu values differ from the CPU", bad);
}

/* ------------------------------------------------------ attn lists ---- */

/* A step of nseg segments (rows consecutive); positions continue a history. */
typedef struct seg_plan {
    int nseg, M;
    int *row_seg, *seg_row0, *seg_nrows;
    int64_t *pos, *seg_pos0;
} seg_plan;

static void plan_make(seg_plan *p, int nseg, int maxrows, int64_t maxpos, uint64_t *s) {
    p->nseg = nseg;
    p->seg_row0 = malloc((size_t)nseg * sizeof(int));
    p->seg_nrows = malloc((size_t)nseg * sizeof(int));
    p->seg_pos0 = malloc((size_t)nseg * sizeof(int64_t));
    int M = 0;
    for (int i = 0; i < nseg; i++) {
        p->seg_row0[i] = M;
        p->seg_nrows[i] = 1 + urand(s, maxrows);
        p->seg_pos0[i] = (int64_t)(gt_rand_u64(s) % (uint64_t)maxpos);
        if (i % 3 == 1) p->seg_pos0[i] = 0; /* prefill from the start */
        M += p->seg_nrows[i];
    }
    p->M = M;
    p->row_seg = malloc((size_t)M * sizeof(int));
    p->pos = malloc((size_t)M * sizeof(int64_t));
    for (int i = 0; i < nseg; i++)
        for (int r = 0; r < p->seg_nrows[i]; r++) {
            p->row_seg[p->seg_row0[i] + r] = i;
            p->pos[p->seg_row0[i] + r] = p->seg_pos0[i] + r;
        }
}
static void plan_free(seg_plan *p) {
    free(p->row_seg), free(p->seg_row0), free(p->seg_nrows), free(p->pos), free(p->seg_pos0);
}

/* The lists hold pointers only, so the CPU op runs on host tables of the
 * device pointer values and the two lists must be equal word for word. */
TEST(gpu_attn_list) {
    static const int cases[][6] = {/* nseg, maxrows, win, ratio, K (0: no topk), hd */
                                   {1, 1, 128, 4, 512, 512},   {8, 1, 128, 4, 512, 512},  {3, 40, 128, 128, 0, 512},
                                   {5, 7, 128, 0, 0, 512},     {2, 300, 128, 4, 512, 512}, {4, 3, 64, 4, 33, 128},
                                   {6, 9, 128, 128, 0, 576}};
    dic_ctx c;
    CHECK(gt_ctx(&c, 0));
    uint64_t s = 77;
    size_t bad = 0;
    for (size_t t = 0; t < sizeof cases / sizeof *cases; t++) {
        int nseg = cases[t][0], win = cases[t][2], ratio = cases[t][3], K = cases[t][4], hd = cases[t][5];
        seg_plan p;
        plan_make(&p, nseg, cases[t][1], 20000, &s);
        int M = p.M, page_rows = 64;
        /* fake device addresses are fine: nothing is dereferenced but the tables */
        uint16_t *kv = (uint16_t *)(uintptr_t)0x100000000ull;
        uint16_t **ring = malloc((size_t)nseg * sizeof *ring);
        uint16_t ***ckv = malloc((size_t)nseg * sizeof *ckv), ***dckv_h = malloc((size_t)nseg * sizeof *dckv_h);
        int *prs = malloc((size_t)nseg * sizeof(int));
        int npages = 20000 / page_rows + 400;
        for (int i = 0; i < nseg; i++) {
            ring[i] = (uint16_t *)(uintptr_t)(0x200000000ull + (uint64_t)i * 0x1000000ull);
            prs[i] = page_rows + 64 * (i & 1);
            ckv[i] = malloc((size_t)npages * sizeof **ckv);
            for (int g = 0; g < npages; g++)
                ckv[i][g] = (uint16_t *)(uintptr_t)(0x300000000ull + (uint64_t)(i * 7919 + g * 13) * 0x100000ull);
            dckv_h[i] = gt_to_dev(ckv[i], (size_t)npages * sizeof **ckv);
            CHECK(dckv_h[i]);
        }
        int *topk = NULL, *ntopk = NULL;
        if (K) {
            topk = malloc((size_t)M * K * sizeof(int));
            ntopk = malloc((size_t)M * sizeof(int));
            for (int m = 0; m < M; m++) {
                int vis = (int)((p.pos[m] + 1) / (ratio ? ratio : 1));
                ntopk[m] = vis < K ? vis : K;
                for (int i = 0; i < K; i++) topk[(size_t)m * K + i] = i < ntopk[m] ? urand(&s, vis) : -1;
            }
        }
        size_t stride = (size_t)win + (K ? K : 20000 / (ratio ? ratio : 1) + 1) + 3;
        const uint16_t **ref = malloc((size_t)M * stride * sizeof *ref);
        memset(ref, 0xFF, (size_t)M * stride * sizeof *ref);
        int *nref = malloc((size_t)M * sizeof(int));
        di_attn_list(NULL, M, p.pos, p.row_seg, p.seg_row0, p.seg_pos0, ring, win, kv, hd, ckv, prs, ratio, topk, K,
                     ntopk, ref, stride, nref);
        int64_t *dpos = gt_to_dev(p.pos, (size_t)M * 8), *dpos0 = gt_to_dev(p.seg_pos0, (size_t)nseg * 8);
        int *drs = gt_to_dev(p.row_seg, (size_t)M * 4), *dr0 = gt_to_dev(p.seg_row0, (size_t)nseg * 4);
        uint16_t **dring = gt_to_dev(ring, (size_t)nseg * sizeof *ring);
        uint16_t ***dckv = gt_to_dev(dckv_h, (size_t)nseg * sizeof *dckv_h);
        int *dprs = gt_to_dev(prs, (size_t)nseg * 4);
        int *dtopk = K ? gt_to_dev(topk, (size_t)M * K * 4) : NULL, *dnt = K ? gt_to_dev(ntopk, (size_t)M * 4) : NULL;
        const uint16_t **dlist = gt_dev_poison((size_t)M * stride * sizeof *dlist);
        int *dn = gt_dev_poison((size_t)M * 4);
        CHECK(dpos && dpos0 && drs && dr0 && dring && dckv && dprs && dlist && dn && (!K || (dtopk && dnt)));
        CUDA_SYNC_CHECK(dic_attn_list(&c, M, dpos, drs, dr0, dpos0, dring, win, kv, hd, (uint16_t **const *)dckv, dprs,
                                      ratio, dtopk, K, dnt, dlist, stride, dn));
        const uint16_t **got = gt_d2h(dlist, (size_t)M * stride * sizeof *got);
        int *gn = gt_d2h(dn, (size_t)M * 4);
        CHECK(got && gn);
        size_t b = mdiff("attn_list n_idx", gn, nref, (size_t)M, 4, 0);
        b += mdiff("attn_list entries", got, ref, (size_t)M * stride, 8, stride);
        if (b) fprintf(stderr, "attn_list nseg=%d M=%d win=%d ratio=%d K=%d hd=%d: %zu differ\n", nseg, M, win, ratio, K,
                       hd, b);
        bad += b;
        /* the block lists of the same segments: nctx ring slots, then the segment's rows */
        {
            int *nctx = malloc((size_t)nseg * 4);
            for (int i = 0; i < nseg; i++) nctx[i] = urand(&s, 40);
            size_t st2 = 40 + (size_t)cases[t][1] + 2;
            const uint16_t **r2 = malloc((size_t)M * st2 * sizeof *r2);
            memset(r2, 0xFF, (size_t)M * st2 * sizeof *r2);
            int *n2 = malloc((size_t)M * 4);
            di_attn_list_block(NULL, nseg, p.seg_row0, p.seg_nrows, nctx, ring, kv, hd, r2, st2, n2);
            int *dnr = gt_to_dev(p.seg_nrows, (size_t)nseg * 4), *dnc = gt_to_dev(nctx, (size_t)nseg * 4);
            const uint16_t **dl2 = gt_dev_poison((size_t)M * st2 * sizeof *dl2);
            int *dn2 = gt_dev_poison((size_t)M * 4);
            CHECK(dnr && dnc && dl2 && dn2);
            CUDA_SYNC_CHECK(dic_attn_list_block(&c, nseg, dr0, dnr, dnc, dring, kv, hd, dl2, st2, dn2));
            const uint16_t **g2 = gt_d2h(dl2, (size_t)M * st2 * sizeof *g2);
            int *gn2 = gt_d2h(dn2, (size_t)M * 4);
            CHECK(g2 && gn2);
            size_t b2 = mdiff("attn_list_block n_idx", gn2, n2, (size_t)M, 4, 0) +
                        mdiff("attn_list_block entries", g2, r2, (size_t)M * st2, 8, st2);
            if (b2) fprintf(stderr, "attn_list_block nseg=%d M=%d: %zu differ\n", nseg, M, b2);
            bad += b2;
            cudaFree(dnr), cudaFree(dnc), cudaFree(dl2), cudaFree(dn2);
            free(nctx), free(r2), free(n2), free(g2), free(gn2);
        }
        for (int i = 0; i < nseg; i++) cudaFree(dckv_h[i]), free(ckv[i]);
        cudaFree(dpos), cudaFree(dpos0), cudaFree(drs), cudaFree(dr0), cudaFree(dring), cudaFree(dckv), cudaFree(dprs);
        cudaFree(dtopk), cudaFree(dnt), cudaFree(dlist), cudaFree(dn);
        free(ring), free(ckv), free(dckv_h), free(prs), free(topk), free(ntopk), free(ref), free(nref), free(got), free(gn);
        plan_free(&p);
    }
    CHECK_MSG(bad == 0, "attention lists: %zu entries differ from the CPU", bad);
}

/* ------------------------------------------------ compressor state ---- */

TEST(gpu_cmp_gated_rows) {
    static const int cases[][6] = {/* nseg, maxrows, ratio, overlap, hd, ape */
                                   {1, 1, 4, 1, 512, 1},  {6, 1, 4, 1, 512, 1},   {3, 37, 4, 1, 512, 1},
                                   {2, 300, 128, 0, 512, 1}, {5, 9, 128, 0, 128, 0}, {4, 20, 4, 1, 72, 0},
                                   {3, 11, 8, 1, 128, 1}};
    dic_ctx c;
    CHECK(gt_ctx(&c, 0));
    uint64_t s = 5150;
    size_t bad = 0;
    for (size_t t = 0; t < sizeof cases / sizeof *cases; t++) {
        int nseg = cases[t][0], r = cases[t][2], ov = cases[t][3], hd = cases[t][4];
        seg_plan p;
        plan_make(&p, nseg, cases[t][1], 5000, &s);
        int M = p.M, width = (ov ? 2 : 1) * hd, slots = ov ? 2 * r : r;
        size_t ssz = (size_t)slots * width;
        int *emit = malloc((size_t)M * 4), nemit = 0;
        for (int m = 0; m < M; m++) emit[m] = (p.pos[m] + 1) % r == 0 ? nemit++ : -1;
        float *pk = malloc((size_t)M * width * 4), *ps = malloc((size_t)M * width * 4);
        float *ape = cases[t][5] ? malloc((size_t)r * width * 4) : NULL;
        for (size_t i = 0; i < (size_t)M * width; i++) pk[i] = gt_normal(&s), ps[i] = gt_normal(&s) * 4.0f;
        if (ape) gt_fill_f32(ape, (size_t)r * width, 2.0f, &s);
        float *st_k = malloc((size_t)nseg * ssz * 4), *st_s = malloc((size_t)nseg * ssz * 4);
        for (size_t i = 0; i < (size_t)nseg * ssz; i++) st_k[i] = gt_normal(&s), st_s[i] = gt_normal(&s) * 3.0f;
        float *dk = gt_to_dev(st_k, (size_t)nseg * ssz * 4), *ds = gt_to_dev(st_s, (size_t)nseg * ssz * 4);
        float **hk = malloc((size_t)nseg * sizeof *hk), **hs = malloc((size_t)nseg * sizeof *hs);
        float **dkp = malloc((size_t)nseg * sizeof *dkp), **dsp = malloc((size_t)nseg * sizeof *dsp);
        for (int i = 0; i < nseg; i++) {
            int j = nseg - 1 - i; /* state blocks in another order than the segments */
            hk[i] = st_k + (size_t)j * ssz, hs[i] = st_s + (size_t)j * ssz;
            dkp[i] = dk + (size_t)j * ssz, dsp[i] = ds + (size_t)j * ssz;
        }
        float *out = malloc((size_t)(nemit + 1) * hd * 4);
        memset(out, 0xFF, (size_t)(nemit + 1) * hd * 4);
        di_cmp_gated_rows(NULL, M, p.row_seg, emit, p.pos, hk, hs, pk, ps, ape, r, ov, hd, out);
        int *drs = gt_to_dev(p.row_seg, (size_t)M * 4), *dem = gt_to_dev(emit, (size_t)M * 4);
        int64_t *dpos = gt_to_dev(p.pos, (size_t)M * 8);
        float **ddk = gt_to_dev(dkp, (size_t)nseg * sizeof *dkp), **dds = gt_to_dev(dsp, (size_t)nseg * sizeof *dsp);
        float *dpk = gt_to_dev(pk, (size_t)M * width * 4), *dps = gt_to_dev(ps, (size_t)M * width * 4);
        float *dape = ape ? gt_to_dev(ape, (size_t)r * width * 4) : NULL;
        float *dout = gt_dev_poison((size_t)(nemit + 1) * hd * 4);
        CHECK(dk && ds && drs && dem && dpos && ddk && dds && dpk && dps && dout && (!ape || dape));
        CUDA_SYNC_CHECK(dic_cmp_gated_rows(&c, M, drs, dem, dpos, ddk, dds, dpk, dps, dape, r, ov, hd, dout));
        float *gout = gt_d2h(dout, (size_t)(nemit + 1) * hd * 4), *gk = gt_d2h(dk, (size_t)nseg * ssz * 4),
              *gs = gt_d2h(ds, (size_t)nseg * ssz * 4);
        CHECK(gout && gk && gs);
        size_t b = mdiff("cmp pooled", gout, out, (size_t)(nemit + 1) * hd, 4, (size_t)hd) +
                   mdiff("cmp state kv", gk, st_k, (size_t)nseg * ssz, 4, (size_t)width) +
                   mdiff("cmp state score", gs, st_s, (size_t)nseg * ssz, 4, (size_t)width);
        if (b)
            fprintf(stderr, "cmp_gated_rows nseg=%d M=%d ratio=%d overlap=%d hd=%d ape=%d (%d emissions): %zu differ\n",
                    nseg, M, r, ov, hd, ape != NULL, nemit, b);
        bad += b;
        cudaFree(dk), cudaFree(ds), cudaFree(drs), cudaFree(dem), cudaFree(dpos), cudaFree(ddk), cudaFree(dds);
        cudaFree(dpk), cudaFree(dps), cudaFree(dape), cudaFree(dout);
        free(emit), free(pk), free(ps), free(ape), free(st_k), free(st_s), free(hk), free(hs), free(dkp), free(dsp);
        free(out), free(gout), free(gk), free(gs);
        plan_free(&p);
    }
    CHECK_MSG(bad == 0, "cmp_gated_rows: %zu values differ from the CPU", bad);
}

/* ---------------------------------------------------- index select ---- */

/* mode: 0 every key (V4), 1 candidate source (cand_out), 2 restricted to
 * candidate blocks (cand_in), 3 both. g_is_koff: the pages start g_is_koff
 * bf16 values into their pool (1: keys 2 bytes off 16-byte alignment, the
 * kernels' unaligned-key path). g_is_bi: the context's batch-invariant mode (1: the two kernels at
 * every M). */
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

/* Decode shapes in both modes (batch-invariant: the two kernels; fast: one launch with the last CTA
 * selecting, where the shape allows): 4K context (1024 keys at ratio 4) and 32K (8192 keys), M = 1, 2,
 * 8, ties, sorted and restricted selections, fewer keys than K, a row without keys (row 1 of M >= 2). */
TEST(gpu_index_select_dec) {
    size_t bad = 0;
    for (int v = 0; v <= 1; v++) {
        g_is_bi = !v;
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
        /* V4.1's candidate source at ctx 4096 (ratio 1: 4097 keys, blocks of 8, 2048 blocks kept): in fast
         * mode one launch (every block kept), in batch-invariant mode the two kernels; a row without keys */
        bad += index_select_case(1, 32, 4097, 512, 8, 2048, 1, 1, 64, 0, &s);
        bad += index_select_case(2, 32, 4097, 512, 8, 2048, 1, 1, 64, 1, &s); /* row 1 without keys, ties */
        bad += index_select_case(8, 32, 2000, 512, 8, 2048, 1, 1, 96, 0, &s);
        bad += index_select_case(3, 32, 9000, 512, 8, 64, 1, 1, 64, 0, &s); /* > KB blocks: the two kernels */
        printf("  index_select_dec %s mode: %zu differ so far\n", v ? "fast" : "batch-invariant", bad);
    }
    g_is_bi = 0;
    CHECK_MSG(bad == 0, "index_select (decode, both modes): %zu values differ from the CPU", bad);
}

/* ------------------------------------------------------------- MoE ---- */

/* di_route_rows with the device's softplus (exp / log1p in double, rounded
 * once): the bitwise reference for dic_route_rows. */
static void route_rows_cr(int M, float *lg, int E, float temp, const float *bias, const int32_t *tid2eid,
                          const int32_t *tokens, int k, float rs, float neps, int normalize, int *sel0, float *w0) {
    if (temp != 1.0f)
        for (size_t i = 0; i < (size_t)M * E; i++) lg[i] /= temp;
    for (int m = 0; m < M; m++) {
        float sc[1024], b[1024];
        const float *l = lg + (size_t)m * E;
        int *sel = sel0 + (size_t)m * k;
        float *w = w0 + (size_t)m * k;
        for (int e = 0; e < E; e++) {
            float sp = l[e] > 20.0f ? l[e] : (float)log1p((double)(float)exp((double)l[e]));
            sc[e] = sqrtf(sp);
            b[e] = bias ? sc[e] + bias[e] : sc[e];
        }
        if (tid2eid) memcpy(sel, tid2eid + (size_t)tokens[m] * k, (size_t)k * 4);
        else di_topk_desc(b, E, k, sel);
        float sum = 0.0f;
        for (int i = 0; i < k; i++) sum += sc[sel[i]];
        sum += neps;
        for (int i = 0; i < k; i++) w[i] = normalize ? sc[sel[i]] / sum * rs : sc[sel[i]] * rs;
    }
}

TEST(gpu_route_rows) {
    static const int cases[][5] = {/* M, E, k, hash, normalize */ {1, 256, 6, 0, 1},  {37, 384, 6, 0, 0},
                                   {300, 256, 6, 1, 1}, {64, 384, 6, 1, 0}, {5, 128, 3, 0, 1}};
    static const float temps[] = {1.0f, 0.7f, 1.3f, 1.0f, 2.0f};
    dic_ctx c;
    CHECK(gt_ctx(&c, 0));
    uint64_t s = 8080;
    size_t bad = 0, libm_sel = 0, ntok = 0;
    double worst = 0;
    for (size_t t = 0; t < sizeof cases / sizeof *cases; t++) {
        int M = cases[t][0], E = cases[t][1], k = cases[t][2], hash = cases[t][3], norm = cases[t][4], V = 1000;
        float temp = temps[t];
        float *lg = malloc((size_t)M * E * 4), *lg_cr = malloc((size_t)M * E * 4), *lg_cpu = malloc((size_t)M * E * 4);
        float *bias = malloc((size_t)E * 4);
        for (size_t i = 0; i < (size_t)M * E; i++) lg[i] = gt_normal(&s) * 3.0f + (i % 997 == 3 ? 30.0f : 0.0f);
        gt_fill_f32(bias, (size_t)E, 0.1f, &s);
        int32_t *tid2eid = malloc((size_t)V * k * 4), *tokens = malloc((size_t)M * 4);
        for (size_t i = 0; i < (size_t)V * k; i++) tid2eid[i] = urand(&s, E);
        for (int m = 0; m < M; m++) tokens[m] = urand(&s, V);
        memcpy(lg_cr, lg, (size_t)M * E * 4), memcpy(lg_cpu, lg, (size_t)M * E * 4);
        int *sel = malloc((size_t)M * k * 4), *sel_cpu = malloc((size_t)M * k * 4);
        float *w = malloc((size_t)M * k * 4), *w_cpu = malloc((size_t)M * k * 4);
        route_rows_cr(M, lg_cr, E, temp, hash ? NULL : bias, hash ? tid2eid : NULL, tokens, k, 2.5f, 1e-20f, norm, sel, w);
        di_route_rows(NULL, M, lg_cpu, E, temp, hash ? NULL : bias, hash ? tid2eid : NULL, tokens, k, 2.5f, 1e-20f, norm,
                      sel_cpu, w_cpu);
        float *dlg = gt_to_dev(lg, (size_t)M * E * 4), *db = gt_to_dev(bias, (size_t)E * 4);
        int32_t *dt2e = gt_to_dev(tid2eid, (size_t)V * k * 4), *dtok = gt_to_dev(tokens, (size_t)M * 4);
        int *dsel = gt_dev_poison((size_t)M * k * 4);
        float *dw = gt_dev_poison((size_t)M * k * 4);
        CHECK(dlg && db && dt2e && dtok && dsel && dw);
        CUDA_SYNC_CHECK(dic_route_rows(&c, M, dlg, E, temp, hash ? NULL : db, hash ? dt2e : NULL, dtok, k, 2.5f, 1e-20f,
                                       norm, dsel, dw));
        float *glg = gt_d2h(dlg, (size_t)M * E * 4), *gw = gt_d2h(dw, (size_t)M * k * 4);
        int *gsel = gt_d2h(dsel, (size_t)M * k * 4);
        CHECK(glg && gw && gsel);
        size_t b = mdiff("route logits / temp", glg, lg_cpu, (size_t)M * E, 4, (size_t)E) +
                   mdiff("route sel", gsel, sel, (size_t)M * k, 4, (size_t)k) +
                   mdiff("route w", gw, w, (size_t)M * k, 4, (size_t)k);
        if (b) fprintf(stderr, "route_rows M=%d E=%d k=%d hash=%d normalize=%d temp=%g: %zu differ (vs the correctly "
                       "rounded softplus reference)\n", M, E, k, hash, norm, temp, b);
        bad += b;
        for (int m = 0; m < M; m++) { /* vs the CPU's libm: reported, bounded below */
            int same = !memcmp(gsel + (size_t)m * k, sel_cpu + (size_t)m * k, (size_t)k * 4);
            libm_sel += !same;
            for (int i = 0; same && i < k; i++) {
                double r = fabs((double)gw[m * k + i] - w_cpu[m * k + i]) / fabs((double)w_cpu[m * k + i]);
                if (r > worst) worst = r;
            }
        }
        ntok += M;
        cudaFree(dlg), cudaFree(db), cudaFree(dt2e), cudaFree(dtok), cudaFree(dsel), cudaFree(dw);
        free(lg), free(lg_cr), free(lg_cpu), free(bias), free(tid2eid), free(tokens), free(sel), free(sel_cpu);
        free(w), free(w_cpu), free(glg), free(gw), free(gsel);
    }
    fprintf(stderr, "route_rows vs CPU libm: %zu of %zu tokens select differently, worst weight rel. error %.3g\n",
            libm_sel, ntok, worst);
    CHECK_MSG(bad == 0, "route_rows: %zu values differ from the correctly rounded reference", bad);
    CHECK_MSG(worst < 1e-6 && libm_sel * 100 <= ntok, "route_rows vs CPU: %zu tokens differ, weights rel. %.3g",
              libm_sel, worst);
}

/* dispatch (off, rows, inv), gather, combine against di_moe_dispatch /
 * di_moe_gather / di_moe_combine on the same routing. */
TEST(gpu_moe_dispatch_gather_combine) {
    static const int cases[][4] = {/* M, k, E, d */ {1, 6, 256, 4096}, {7, 6, 384, 4096}, {513, 6, 256, 1000},
                                   {2048, 8, 64, 64}, {3, 1, 16, 7}};
    dic_ctx c;
    CHECK(gt_ctx(&c, 0));
    uint64_t s = 4711;
    size_t bad = 0;
    for (size_t t = 0; t < sizeof cases / sizeof *cases; t++) {
        int M = cases[t][0], k = cases[t][1], E = cases[t][2], d = cases[t][3], n = M * k;
        size_t ldx = (size_t)d + 8, lde = (size_t)d + 3;
        int *sel = malloc((size_t)n * 4);
        for (int i = 0; i < n; i++) sel[i] = urand(&s, E / 2 + 1) * 2 % E; /* some experts unused, skewed */
        int *off = malloc((size_t)(E + 1) * 4), *rows = malloc((size_t)n * 4), *inv = malloc((size_t)n * 4);
        di_moe_dispatch(NULL, M, k, sel, E, off, rows, inv);
        uint16_t *xn = malloc((size_t)M * ldx * 2), *xe = malloc((size_t)n * lde * 2);
        float *rw = malloc((size_t)n * 4), *erw = malloc((size_t)n * 4);
        gt_fill_bf16(xn, (size_t)M * ldx, 2.0f, &s);
        gt_fill_f32(rw, (size_t)n, 1.0f, &s);
        memset(xe, 0xFF, (size_t)n * lde * 2);
        di_moe_gather(NULL, n, off, E, rows, k, xn, ldx, d, rw, xe, lde, erw);
        uint16_t *eo = malloc((size_t)n * lde * 2);
        gt_fill_bf16(eo, (size_t)n * lde, 4.0f, &s);
        float *y = malloc((size_t)M * d * 4);
        di_moe_combine(NULL, M, k, inv, eo, lde, d, y);
        int *dsel = gt_to_dev(sel, (size_t)n * 4), *doff = gt_dev_poison((size_t)(E + 1) * 4);
        int *drows = gt_dev_poison((size_t)n * 4), *dinv = gt_dev_poison((size_t)n * 4);
        uint16_t *dxn = gt_to_dev(xn, (size_t)M * ldx * 2), *dxe = gt_dev_poison((size_t)n * lde * 2);
        float *drw = gt_to_dev(rw, (size_t)n * 4), *derw = gt_dev_poison((size_t)n * 4);
        uint16_t *deo = gt_to_dev(eo, (size_t)n * lde * 2);
        float *dy = gt_dev_poison((size_t)M * d * 4);
        CHECK(dsel && doff && drows && dinv && dxn && dxe && drw && derw && deo && dy);
        CUDA_SYNC_CHECK(dic_moe_dispatch_inv(&c, M, k, dsel, E, doff, drows, dinv));
        CUDA_SYNC_CHECK(dic_moe_gather(&c, n, doff, E, drows, k, dxn, ldx, d, drw, dxe, lde, derw));
        CUDA_SYNC_CHECK(dic_moe_combine_inv(&c, M, k, dinv, deo, lde, d, dy));
        int *goff = gt_d2h(doff, (size_t)(E + 1) * 4), *grows = gt_d2h(drows, (size_t)n * 4), *ginv = gt_d2h(dinv, (size_t)n * 4);
        uint16_t *gxe = gt_d2h(dxe, (size_t)n * lde * 2);
        float *gerw = gt_d2h(derw, (size_t)n * 4), *gy = gt_d2h(dy, (size_t)M * d * 4);
        CHECK(goff && grows && ginv && gxe && gerw && gy);
        size_t b = mdiff("dispatch off", goff, off, (size_t)E + 1, 4, 0) + mdiff("dispatch rows", grows, rows, (size_t)n, 4, 0) +
                   mdiff("dispatch inv", ginv, inv, (size_t)n, 4, (size_t)k) +
                   mdiff("gather xe", gxe, xe, (size_t)n * lde, 2, lde) + mdiff("gather erw", gerw, erw, (size_t)n, 4, 0) +
                   mdiff("combine y", gy, y, (size_t)M * d, 4, (size_t)d);
        if (b) fprintf(stderr, "moe M=%d k=%d E=%d d=%d: %zu differ\n", M, k, E, d, b);
        bad += b;
        cudaFree(dsel), cudaFree(doff), cudaFree(drows), cudaFree(dinv), cudaFree(dxn), cudaFree(dxe), cudaFree(drw);
        cudaFree(derw), cudaFree(deo), cudaFree(dy);
        free(sel), free(off), free(rows), free(inv), free(xn), free(xe), free(rw), free(erw), free(eo), free(y);
        free(goff), free(grows), free(ginv), free(gxe), free(gerw), free(gy);
    }
    CHECK_MSG(bad == 0, "MoE dispatch / gather / combine: %zu values differ from the CPU", bad);
}

TEST(gpu_swiglu_n) {
    static const int cases[][4] = {/* E, rows, max_rows, I */ {256, 6, 48, 2048}, {384, 300, 400, 3072},
                                   {8, 0, 16, 2048}, {4, 17, 17, 1000}};
    dic_ctx c;
    CHECK(gt_ctx(&c, 0));
    uint64_t s = 99;
    size_t bad = 0;
    for (size_t t = 0; t < sizeof cases / sizeof *cases; t++) {
        int E = cases[t][0], R = cases[t][1], maxr = cases[t][2], I = cases[t][3];
        size_t ld = (size_t)I + 8, ldo = (size_t)I + 2;
        int *off = calloc((size_t)E + 1, 4);
        for (int e = 1; e <= E; e++) off[e] = (int)((long long)R * e / E);
        uint16_t *g = malloc((size_t)maxr * ld * 2), *u = malloc((size_t)maxr * ld * 2), *o = malloc((size_t)maxr * ldo * 2);
        float *rw = malloc((size_t)maxr * 4);
        gt_fill_bf16(g, (size_t)maxr * ld, 12.0f, &s), gt_fill_bf16(u, (size_t)maxr * ld, 12.0f, &s);
        gt_fill_f32(rw, (size_t)maxr, 1.0f, &s);
        memset(o, 0xFF, (size_t)maxr * ldo * 2);
        di_exec x;
        CHECK(di_exec_init(&x, 0, NULL) == DEEPINFER_OK);
        di_swiglu_n(&x, off, E, g, u, ld, I, 10.0f, rw, o, ldo);
        di_exec_free(&x);
        int *doff = gt_to_dev(off, (size_t)(E + 1) * 4);
        uint16_t *dg = gt_to_dev(g, (size_t)maxr * ld * 2), *du = gt_to_dev(u, (size_t)maxr * ld * 2);
        float *drw = gt_to_dev(rw, (size_t)maxr * 4);
        uint16_t *dout = gt_dev_poison((size_t)maxr * ldo * 2);
        CHECK(doff && dg && du && drw && dout);
        CUDA_SYNC_CHECK(dic_swiglu_n(&c, doff, E, maxr, dg, du, ld, I, 10.0f, drw, dout, ldo));
        uint16_t *go = gt_d2h(dout, (size_t)maxr * ldo * 2);
        CHECK(go);
        size_t b = mdiff("swiglu_n", go, o, (size_t)maxr * ldo, 2, ldo); /* rows past off[E] stay poisoned */
        if (b) fprintf(stderr, "swiglu_n E=%d rows=%d max_rows=%d I=%d: %zu differ\n", E, R, maxr, I, b);
        bad += b;
        cudaFree(doff), cudaFree(dg), cudaFree(du), cudaFree(drw), cudaFree(dout);
        free(off), free(g), free(u), free(o), free(rw), free(go);
    }
    CHECK_MSG(bad == 0, "swiglu_n: %zu values differ from the CPU", bad);
}

/* ---------------------------------------------------- grouped GEMM ---- */

/* Random released-format weights (FP8: e4m3 + e8m0 per BxB block; FP4:
 * packed e2m1 + e8m0 per 32). */
static void gen_w(int fmt, int N, int K, int B, uint8_t **w, size_t *wb, uint8_t **sc, size_t *sb, uint64_t *s) {
    *wb = fmt == DI_WFMT_FP8 ? (size_t)N * K : (size_t)N * K / 2;
    *sb = fmt == DI_WFMT_FP8 ? (size_t)((N + B - 1) / B) * (K / B) : (size_t)N * (K / 32);
    *w = malloc(*wb), *sc = malloc(*sb);
    for (size_t i = 0; i < *wb; i++) {
        uint8_t b = (uint8_t)gt_rand_u64(s);
        if (fmt == DI_WFMT_FP8 && (b & 0x7F) == 0x7F) b ^= 1;
        (*w)[i] = b;
    }
    for (size_t i = 0; i < *sb; i++) (*sc)[i] = (uint8_t)(118 + gt_rand_u64(s) % 12);
}

/* dic_gemm_grouped_seg / dic_gemm2_grouped_seg: each expert's slice bitwise
 * equal to dic_gemm (batch-invariant) on the same rows, within the GEMM
 * tolerance of di_gemm2_grouped, rows past off[E] untouched. */
static void grouped_seg_case(int fmt, int E, int R, int N, int K, int B, int act, uint64_t seed) {
    uint64_t s = seed;
    const int max_rows = R + 7;
    size_t lda = (size_t)K + 16, ldc = (size_t)N + 5;
    uint16_t *A = malloc((size_t)max_rows * lda * 2);
    for (size_t i = 0; i < (size_t)max_rows * lda; i++)
        A[i] = di_f32_to_bf16(gt_rand_unit(&s) * ldexpf(1.0f, urand(&s, 11) - 6));
    int *off = calloc((size_t)E + 1, 4);
    for (int i = 0; i < R; i++) off[1 + (urand(&s, 3) ? urand(&s, E / 4 + 1) : urand(&s, E))]++; /* skewed, gaps */
    for (int e = 0; e < E; e++) off[e + 1] += off[e];
    uint8_t **w1 = malloc((size_t)E * sizeof *w1), **s1 = malloc((size_t)E * sizeof *s1);
    uint8_t **w2 = malloc((size_t)E * sizeof *w2), **s2 = malloc((size_t)E * sizeof *s2);
    dic_wmat *d1 = malloc((size_t)E * sizeof *d1), *d2 = malloc((size_t)E * sizeof *d2);
    di_wmat *p1 = calloc((size_t)E, sizeof *p1), *p2 = calloc((size_t)E, sizeof *p2);
    size_t wb, sb;
    int wblock = fmt == DI_WFMT_FP8 ? B : 32;
    for (int e = 0; e < E; e++) {
        gen_w(fmt, N, K, B, &w1[e], &wb, &s1[e], &sb, &s);
        gen_w(fmt, N, K, B, &w2[e], &wb, &s2[e], &sb, &s);
        d1[e] = (dic_wmat){fmt, N, K, wblock, gt_to_dev(w1[e], wb), gt_to_dev(s1[e], sb)};
        d2[e] = (dic_wmat){fmt, N, K, wblock, gt_to_dev(w2[e], wb), gt_to_dev(s2[e], sb)};
        CHECK(d1[e].w && d1[e].scale && d2[e].w && d2[e].scale);
        CHECK(di_wmat_pack(&p1[e], (di_wfmt)fmt, w1[e], s1[e], N, K, B, NULL) == DEEPINFER_OK);
        CHECK(di_wmat_pack(&p2[e], (di_wfmt)fmt, w2[e], s2[e], N, K, B, NULL) == DEEPINFER_OK);
    }
    /* CPU */
    uint16_t *c1 = malloc((size_t)max_rows * ldc * 2), *c2 = malloc((size_t)max_rows * ldc * 2),
             *c3 = malloc((size_t)max_rows * ldc * 2);
    di_exec x;
    CHECK(di_exec_init(&x, 0, NULL) == DEEPINFER_OK);
    di_gemm2_grouped(&x, E, p1, p2, off, A, lda, act, c1, c2, ldc);
    di_gemm_grouped(&x, E, p1, off, A, lda, act, c3, ldc);
    di_exec_free(&x);
    /* GPU */
    dic_ctx c;
    CHECK(gt_ctx(&c, dic_gemm_scratch(max_rows, N, K)));
    c.batch_invariant = 1; /* bitwise vs dic_gemm: the invariant kernels (gtest_gemm_f16.c tests the fast ones) */
    void *dA = gt_to_dev(A, (size_t)max_rows * lda * 2);
    int *doff = gt_to_dev(off, ((size_t)E + 1) * 4);
    size_t cb = (size_t)max_rows * ldc * 2;
    uint16_t *g1 = gt_dev_poison(cb), *g2 = gt_dev_poison(cb), *g3 = gt_dev_poison(cb);
    CHECK(dA && doff && g1 && g2 && g3);
    CUDA_SYNC_CHECK(dic_gemm2_grouped_seg(&c, E, d1, d2, doff, max_rows, dA, lda, act, g1, g2, ldc));
    CUDA_SYNC_CHECK(dic_gemm_grouped_seg(&c, E, d1, doff, max_rows, dA, lda, act, g3, ldc));
    uint16_t *h1 = gt_d2h(g1, cb), *h2 = gt_d2h(g2, cb), *h3 = gt_d2h(g3, cb);
    CHECK(h1 && h2 && h3);
    size_t bad_dense = 0, bad_tol = 0, bad_pad = 0;
    double num = 0, den = 0;
    for (int e = 0; e < E; e++) {
        int me = off[e + 1] - off[e];
        if (!me) continue;
        for (int which = 0; which < 2; which++) {
            const dic_wmat *dw = which ? &d2[e] : &d1[e];
            dic_ctx c1x;
            CHECK(gt_ctx(&c1x, dic_gemm_scratch(me, N, K)));
            c1x.batch_invariant = 1;
            uint16_t *dG = gt_dev_poison((size_t)me * N * 2);
            CHECK(dG);
            CUDA_SYNC_CHECK(dic_gemm(&c1x, me, (const uint16_t *)dA + (size_t)off[e] * lda, lda, dw, act, NULL, dG, (size_t)N));
            uint16_t *G = gt_d2h(dG, (size_t)me * N * 2);
            CHECK(G);
            const uint16_t *seg = which ? h2 : h1, *cpu = which ? c2 : c1;
            for (int i = 0; i < me; i++) {
                size_t r = (size_t)off[e] + i;
                float rmax = 0;
                for (int n = 0; n < N; n++) rmax = fmaxf(rmax, fabsf(di_bf16_to_f32(cpu[r * ldc + n])));
                for (int n = 0; n < N; n++) {
                    uint16_t gv = seg[r * ldc + n];
                    if (gv != G[(size_t)i * N + n] || (!which && h3[r * ldc + n] != gv)) {
                        if (bad_dense < 4)
                            fprintf(stderr, "  grouped_seg W%d expert %d row %zu col %d: seg %04x, gemm-only seg %04x, "
                                    "dense dic_gemm %04x\n", which + 1, e, r, n, gv, h3[r * ldc + n], G[(size_t)i * N + n]);
                        bad_dense++;
                    }
                    float a = di_bf16_to_f32(gv), b = di_bf16_to_f32(cpu[r * ldc + n]);
                    if (!(fabsf(a - b) <= 0x1p-7f * fabsf(b) + 1e-3f * rmax)) {
                        if (bad_tol < 4)
                            fprintf(stderr, "  grouped_seg W%d expert %d row %zu col %d: gpu %.7g cpu %.7g\n", which + 1,
                                    e, r, n, a, b);
                        bad_tol++;
                    }
                    num += ((double)a - b) * ((double)a - b), den += (double)b * b;
                }
            }
            cudaFree(dG), cudaFree(c1x.scratch), cudaStreamDestroy(c1x.stream), free(G);
        }
    }
    for (size_t r = 0; r < (size_t)max_rows; r++)
        for (size_t n = 0; n < ldc; n++) {
            int outside = r >= (size_t)off[E] || n >= (size_t)N;
            if (outside && (h1[r * ldc + n] != 0xFFFF || h2[r * ldc + n] != 0xFFFF || h3[r * ldc + n] != 0xFFFF)) {
                if (bad_pad < 4) fprintf(stderr, "  grouped_seg: row %zu col %zu outside the output written\n", r, n);
                bad_pad++;
            }
        }
    fprintf(stderr, "  grouped_seg fmt=%d E=%d R=%d N=%d K=%d: norm rel %.2e vs di_gemm2_grouped\n", fmt, E, R, N, K,
            den > 0 ? sqrt(num / den) : 0.0);
    CHECK_MSG(bad_dense == 0 && bad_tol == 0 && bad_pad == 0,
              "grouped_seg fmt=%d E=%d R=%d N=%d K=%d B=%d act=%d: %zu differ from dic_gemm, %zu outside the CPU "
              "tolerance, %zu padding values written", fmt, E, R, N, K, B, act, bad_dense, bad_tol, bad_pad);
    for (int e = 0; e < E; e++) {
        cudaFree((void *)d1[e].w), cudaFree((void *)d1[e].scale), cudaFree((void *)d2[e].w), cudaFree((void *)d2[e].scale);
        di_wmat_free(&p1[e]), di_wmat_free(&p2[e]);
        free(w1[e]), free(s1[e]), free(w2[e]), free(s2[e]);
    }
    cudaFree(dA), cudaFree(doff), cudaFree(g1), cudaFree(g2), cudaFree(g3), cudaFree(c.scratch);
    cudaStreamDestroy(c.stream);
    free(A), free(off), free(w1), free(s1), free(w2), free(s2), free(d1), free(d2), free(p1), free(p2);
    free(c1), free(c2), free(c3), free(h1), free(h2), free(h3);
}

TEST(gpu_gemm_grouped_seg) {
    grouped_seg_case(DI_WFMT_FP4, 256, 48, 256, 4096, 32, 128, 3001); /* V4 decode, 8 tokens x 6 */
    if (di_test_failed()) return;
    grouped_seg_case(DI_WFMT_FP4, 384, 18, 96, 5120, 32, 32, 3002); /* V4.1 decode */
    if (di_test_failed()) return;
    grouped_seg_case(DI_WFMT_FP8, 16, 1800, 256, 1024, 128, 128, 3003); /* prefill-sized: tiles */
    if (di_test_failed()) return;
    grouped_seg_case(DI_WFMT_FP4, 8, 70, 160, 2304, 32, 32, 3004); /* odd N */
}

/* ----------------------------------------------------- model helpers ---- */

TEST(gpu_model_elem) {
    dic_ctx c;
    CHECK(gt_ctx(&c, 0));
    uint64_t s = 1212;
    size_t bad = 0, near = 0, nvals = 0;
    static const int Ms[] = {1, 5, 64, 301};
    for (int t = 0; t < 4; t++) {
        int M = Ms[t], d = t == 3 ? 1000 : 4096, hc = 4;
        /* scale_bf16_f32 */
        size_t n = (size_t)M * 64 * 128 + (size_t)t;
        float *v = malloc(n * 4), *ref = malloc(n * 4);
        gt_fill_f32(v, n, 50.0f, &s);
        memcpy(ref, v, n * 4);
        di_scale_bf16_f32(NULL, ref, n, 0.0883883f);
        float *dv = gt_to_dev(v, n * 4);
        CHECK(dv);
        CUDA_SYNC_CHECK(dic_scale_bf16_f32(&c, dv, n, 0.0883883f));
        float *g = gt_d2h(dv, n * 4);
        CHECK(g);
        bad += mdiff("scale_bf16_f32", g, ref, n, 4, 0);
        cudaFree(dv), free(v), free(ref), free(g);
        /* hc_pre_onehot, hc_head_pre (pre stride 4) */
        float *pre = malloc((size_t)M * 16), *pre2 = malloc((size_t)M * 16), *mix = malloc((size_t)M * hc * 4), base[4];
        memset(pre, 0xFF, (size_t)M * 16);
        di_hc_pre_onehot(NULL, M, pre);
        float *dpre = gt_dev_poison((size_t)M * 16);
        CHECK(dpre);
        CUDA_SYNC_CHECK(dic_hc_pre_onehot(&c, M, dpre));
        g = gt_d2h(dpre, (size_t)M * 16);
        CHECK(g);
        bad += mdiff("hc_pre_onehot", g, pre, (size_t)M * 4, 4, 4);
        free(g);
        gt_fill_f32(mix, (size_t)M * hc, 6.0f, &s);
        gt_fill_f32(base, 4, 1.0f, &s);
        memset(pre2, 0xFF, (size_t)M * 16);
        di_hc_head_pre(NULL, M, mix, hc, 0.75f, base, 1e-6f, pre2);
        float *dmix = gt_to_dev(mix, (size_t)M * hc * 4), *dbase = gt_to_dev(base, 16);
        CUDA_CHECK(cudaMemset(dpre, 0xFF, (size_t)M * 16));
        CHECK(dmix && dbase);
        CUDA_SYNC_CHECK(dic_hc_head_pre(&c, M, dmix, hc, 0.75f, dbase, 1e-6f, dpre));
        g = gt_d2h(dpre, (size_t)M * 16);
        CHECK(g);
        for (int i = 0; i < M * 4; i++) { /* libm expf on the CPU: 1 ulp allowed, counted */
            if (!memcmp(&g[i], &pre2[i], 4)) continue;
            long long u = ulps32(g[i], pre2[i]);
            fprintf(stderr, "  hc_head_pre [%d][%d]: gpu %.9g cpu %.9g (%lld ulp)\n", i / 4, i % 4, g[i], pre2[i], u);
            if (u <= 1) near++;
            else bad++;
        }
        nvals += (size_t)M * 4;
        cudaFree(dpre), cudaFree(dmix), cudaFree(dbase), free(pre), free(pre2), free(mix), free(g);
        /* hc_mean, add_bcast_bf16 */
        size_t ldo = (size_t)d + 3;
        uint16_t *R = malloc((size_t)M * hc * d * 2), *o = malloc((size_t)M * ldo * 2), *e = malloc((size_t)M * d * 2);
        gt_fill_bf16(R, (size_t)M * hc * d, 8.0f, &s);
        gt_fill_bf16(e, (size_t)M * d, 8.0f, &s);
        memset(o, 0xFF, (size_t)M * ldo * 2);
        di_hc_mean(NULL, M, R, hc, d, o, ldo);
        uint16_t *dR = gt_to_dev(R, (size_t)M * hc * d * 2), *dO = gt_dev_poison((size_t)M * ldo * 2),
                 *dE = gt_to_dev(e, (size_t)M * d * 2);
        CHECK(dR && dO && dE);
        CUDA_SYNC_CHECK(dic_hc_mean(&c, M, dR, hc, d, dO, ldo));
        uint16_t *go = gt_d2h(dO, (size_t)M * ldo * 2);
        CHECK(go);
        bad += mdiff("hc_mean", go, o, (size_t)M * ldo, 2, ldo);
        di_add_bcast_bf16(NULL, M, e, hc, d, R);
        CUDA_SYNC_CHECK(dic_add_bcast_bf16(&c, M, dE, hc, d, dR));
        uint16_t *gR = gt_d2h(dR, (size_t)M * hc * d * 2);
        CHECK(gR);
        bad += mdiff("add_bcast_bf16", gR, R, (size_t)M * hc * d, 2, (size_t)d);
        cudaFree(dR), cudaFree(dO), cudaFree(dE), free(R), free(o), free(e), free(go), free(gR);
        /* engram_gather_rows: ids [M][stride], ncols columns of hd values */
        int ncols = t == 3 ? 3 : 8, hd = t == 3 ? 96 : 256, rows = 5000;
        int64_t ids_stride = ncols + 2;
        int64_t *ids = malloc((size_t)M * ids_stride * 8);
        for (size_t i = 0; i < (size_t)M * ids_stride; i++) ids[i] = urand(&s, rows);
        uint8_t *tab = malloc((size_t)rows * hd), *sc = malloc((size_t)rows * (hd / 32));
        for (size_t i = 0; i < (size_t)rows * hd; i++) {
            uint8_t b = (uint8_t)gt_rand_u64(&s);
            tab[i] = (b & 0x7F) == 0x7F ? b ^ 1 : b;
        }
        for (size_t i = 0; i < (size_t)rows * (hd / 32); i++) sc[i] = (uint8_t)(110 + urand(&s, 30));
        size_t on = (size_t)M * ncols * hd;
        uint16_t *out = malloc(on * 2);
        memset(out, 0xFF, on * 2);
        di_engram_gather_rows(NULL, M, ids, ids_stride, ncols, tab, sc, hd, out);
        int64_t *dids = gt_to_dev(ids, (size_t)M * ids_stride * 8);
        uint8_t *dtab = gt_to_dev(tab, (size_t)rows * hd), *dsc = gt_to_dev(sc, (size_t)rows * (hd / 32));
        uint16_t *dout = gt_dev_poison(on * 2);
        CHECK(dids && dtab && dsc && dout);
        CUDA_SYNC_CHECK(dic_engram_gather_rows(&c, M, dids, ids_stride, ncols, dtab, dsc, hd, dout));
        uint16_t *gout = gt_d2h(dout, on * 2);
        CHECK(gout);
        bad += mdiff("engram_gather_rows", gout, out, on, 2, (size_t)hd);
        cudaFree(dids), cudaFree(dtab), cudaFree(dsc), cudaFree(dout), free(ids), free(tab), free(sc), free(out), free(gout);
    }
    fprintf(stderr, "hc_head_pre: %zu of %zu values 1 ulp from the CPU's libm expf\n", near, nvals);
    CHECK_MSG(bad == 0 && near * 100 <= nvals, "model helpers: %zu values differ from the CPU (%zu 1-ulp head_pre "
              "differences of %zu)", bad, near, nvals);
}

/* Engram gate, one case: R and gates vs the CPU (the gate's libm expf may differ by 1 ulp, then R by at
 * most 1 bf16 ulp: counted in *near), and a second launch bitwise equal to the first. rmap_kind 0: none,
 * 1: distinct rows shuffled, 2: reversed. *bad += the values outside that. */
static void eg_case(dic_ctx *c, int M, int dim, int hc, int rmap_kind, uint64_t *s, size_t *near, size_t *bad) {
    const int T = M + 4;
    size_t ldkv = (size_t)(hc + 1) * dim + 8, nR = (size_t)T * hc * dim;
    int64_t *rmap = NULL;
    if (rmap_kind == 1) { /* distinct rows, shuffled */
        rmap = malloc((size_t)M * 8);
        for (int i = 0; i < M; i++) rmap[i] = (int64_t)((i * 7 + 2) % T);
        for (int i = 0; i < M; i++)
            for (int j = 0; j < i; j++)
                if (rmap[j] == rmap[i]) rmap[i] = T - 1 - (i % 4); /* keep distinct (tiny M cases) */
    } else if (rmap_kind == 2) {
        rmap = malloc((size_t)M * 8);
        for (int i = 0; i < M; i++) rmap[i] = (int64_t)(T - 1 - i);
    }
    uint16_t *kv = malloc((size_t)M * ldkv * 2), *R = malloc(nR * 2), *R0 = malloc(nR * 2);
    float *qk = malloc((size_t)hc * dim * 4), *gates = malloc((size_t)T * hc * 4);
    for (size_t i = 0; i < (size_t)M * ldkv; i++) kv[i] = di_f32_to_bf16(gt_normal(s));
    for (size_t i = 0; i < nR; i++) R[i] = di_f32_to_bf16(gt_normal(s) * 2.0f);
    for (size_t i = 0; i < (size_t)hc * dim; i++) qk[i] = 1.0f + 0.2f * gt_rand_unit(s);
    memcpy(R0, R, nR * 2);
    memset(gates, 0xFF, (size_t)T * hc * 4);
    uint16_t *dkv = gt_to_dev(kv, (size_t)M * ldkv * 2), *dR = gt_to_dev(R, nR * 2), *dR2 = gt_to_dev(R, nR * 2);
    float *dqk = gt_to_dev(qk, (size_t)hc * dim * 4), *dg = gt_dev_poison((size_t)T * hc * 4),
          *dg2 = gt_dev_poison((size_t)T * hc * 4);
    int64_t *drm = rmap ? gt_to_dev(rmap, (size_t)M * 8) : NULL;
    CHECK(dkv && dR && dR2 && dqk && dg && dg2 && (!rmap || drm));
    float *kvf = malloc(ldkv * 4), *h = malloc((size_t)dim * 4);
    di_engram_gate_rows(NULL, M, rmap, kv, ldkv, R, qk, dim, hc, 1e-6f, kvf, h, gates);
    CUDA_SYNC_CHECK(dic_engram_gate_rows(c, M, drm, dkv, ldkv, dR, dqk, dim, hc, 1e-6f, dg));
    CUDA_SYNC_CHECK(dic_engram_gate_rows(c, M, drm, dkv, ldkv, dR2, dqk, dim, hc, 1e-6f, dg2));
    uint16_t *gR = gt_d2h(dR, nR * 2), *gR2 = gt_d2h(dR2, nR * 2);
    float *gg = gt_d2h(dg, (size_t)T * hc * 4), *gg2 = gt_d2h(dg2, (size_t)T * hc * 4);
    CHECK(gR && gR2 && gg && gg2);
    size_t b = 0, moved = 0;
    for (size_t i = 0; i < (size_t)T * hc; i++) {
        if (memcmp(&gg[i], &gg2[i], 4)) b++; /* two launches: bitwise */
        if (!memcmp(&gg[i], &gates[i], 4)) continue;
        long long u = ulps32(gg[i], gates[i]);
        fprintf(stderr, "  engram gate M=%d dim=%d [%zu][%zu]: gpu %.9g cpu %.9g (%lld ulp)\n", M, dim, i / hc, i % hc,
                gg[i], gates[i], u);
        if (u <= 1) (*near)++;
        else b++;
    }
    for (size_t i = 0; i < nR; i++) {
        moved += R[i] != R0[i];
        b += gR[i] != gR2[i];
        if (gR[i] == R[i]) continue;
        int du = abs((int)gR[i] - (int)R[i]);
        size_t row = i / dim;
        int gate_near = !memcmp(&gg[row], &gates[row], 4) ? 0 : 1;
        if (!(gate_near && du <= 1)) { /* only a 1-ulp gate difference may move R, by 1 bf16 ulp */
            if (b < 8)
                fprintf(stderr, "  engram R M=%d dim=%d [%zu][%zu]: gpu %04x (%g) cpu %04x (%g)\n", M, dim, row, i % dim,
                        gR[i], di_bf16_to_f32(gR[i]), R[i], di_bf16_to_f32(R[i]));
            b++;
        }
    }
    if (!moved) fprintf(stderr, "engram gate M=%d dim=%d hc=%d: R unchanged (test inputs?)\n", M, dim, hc);
    b += moved == 0;
    if (b) fprintf(stderr, "engram_gate_rows M=%d dim=%d hc=%d rmap=%d: %zu differ\n", M, dim, hc, rmap_kind, b);
    cudaFree(dkv), cudaFree(dR), cudaFree(dR2), cudaFree(dqk), cudaFree(dg), cudaFree(dg2), cudaFree(drm);
    free(rmap), free(kv), free(R), free(R0), free(qk), free(gates), free(kvf), free(h), free(gR), free(gR2), free(gg),
        free(gg2);
    *bad += b;
}

/* Engram gate vs the CPU, both batch modes' kernel (dic_engram_gate.cu): M = 1 .. 300, dims 4096 / 5120 /
 * 1000, with and without a row map. */
TEST(gpu_engram_gate_rows) {
    static const int cases[][4] = {/* M, dim, hc, rmap */ {1, 4096, 4, 0}, {9, 4096, 4, 1}, {64, 5120, 4, 1},
                                   {5, 1000, 3, 0}, {300, 4096, 4, 1}};
    dic_ctx c;
    CHECK(gt_ctx(&c, 0));
    size_t bad = 0, near = 0, ngates = 0;
    uint64_t s = 2024;
    for (size_t t = 0; t < sizeof cases / sizeof *cases; t++) {
        eg_case(&c, cases[t][0], cases[t][1], cases[t][2], cases[t][3], &s, &near, &bad);
        ngates += (size_t)cases[t][0] * cases[t][2];
    }
    fprintf(stderr, "engram gate: %zu of %zu gates 1 ulp from the CPU's libm expf\n", near, ngates);
    CHECK_MSG(bad == 0 && near * 100 <= ngates, "engram_gate_rows: %zu values differ from the CPU (%zu 1-ulp gates "
              "of %zu)", bad, near, ngates);
}

/* The same check at the kernel's chunk edges: M = 1, 2, 8, 64, dims below / across / not a multiple of
 * its chunk (EGC_CH), odd hc (the shapes of the former variant comparison, now lab/engram_gate/'s bench). */
TEST(gpu_engram_gate_rows_shapes) {
    static const int cases[][4] = {/* M, dim, hc, rmap */ {1, 5120, 4, 0}, {2, 5120, 4, 2}, {8, 4096, 4, 2},
                                   {64, 5120, 4, 2}, {5, 1000, 3, 0}, {3, 517, 4, 2}, {1, 8, 4, 0}, {2, 1029, 1, 0}};
    dic_ctx c;
    CHECK(gt_ctx(&c, 0));
    uint64_t s = 4242;
    size_t bad = 0, near = 0, ngates = 0;
    for (size_t t = 0; t < sizeof cases / sizeof *cases; t++) {
        eg_case(&c, cases[t][0], cases[t][1], cases[t][2], cases[t][3], &s, &near, &bad);
        ngates += (size_t)cases[t][0] * cases[t][2];
    }
    fprintf(stderr, "engram gate shapes: %zu of %zu gates 1 ulp from the CPU's libm expf\n", near, ngates);
    CHECK_MSG(bad == 0 && near * 100 <= ngates + 99, "engram_gate_rows shapes: %zu values differ from the CPU (%zu "
              "1-ulp gates of %zu)", bad, near, ngates);
}
