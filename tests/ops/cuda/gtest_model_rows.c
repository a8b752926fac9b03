/* gtest_model_rows.c — the device-shaped forward's small ops (src/ops/cuda/dic_model.h: rows,
 * attention lists, compressor state, model element-wise helpers) on the GPU against their CPU ops
 * (src/ops/cpu/{rows,attn_list,cmp_state,elem_model}.c) on random inputs at realistic and odd sizes,
 * bitwise except hc_head_pre's libm expf (1-ulp differences allowed in a small fraction, printed).
 * Outputs poisoned with 0xFF bytes; each test runs all its shapes, prints shape, element and both
 * values of the first mismatches, then fails (split from gtest_model_ops.c by family). */
#include <stdio.h>
#include <string.h>

#include "ops/cuda/gpu_util.h"
#include "ops/cuda/model_ops_util.h"
#include "ops/cuda/dic_model.h"
#include "ops/ops.h"

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
    /* groups: blocks of ratio slots (model/seq_state.h); 1 / 2 (overlap) is the layout without drafts */
    static const int cases[][7] = {/* nseg, maxrows, ratio, overlap, hd, ape, groups */
                                   {1, 1, 4, 1, 512, 1, 2},    {6, 1, 4, 1, 512, 1, 2},  {3, 37, 4, 1, 512, 1, 2},
                                   {2, 300, 128, 0, 512, 1, 1}, {5, 9, 128, 0, 128, 0, 1}, {4, 20, 4, 1, 72, 0, 2},
                                   {3, 11, 8, 1, 128, 1, 2},    {6, 1, 4, 1, 512, 1, 3},  {4, 6, 4, 1, 128, 1, 6},
                                   {3, 37, 4, 1, 256, 1, 5},    {2, 300, 128, 0, 512, 1, 2}, {5, 7, 2, 0, 512, 0, 9},
                                   {4, 29, 2, 0, 512, 0, 4},    {3, 11, 8, 1, 128, 1, 4}};
    dic_ctx c;
    CHECK(gt_ctx(&c, 0));
    uint64_t s = 5150;
    size_t bad = 0;
    for (size_t t = 0; t < sizeof cases / sizeof *cases; t++) {
        int nseg = cases[t][0], r = cases[t][2], ov = cases[t][3], hd = cases[t][4], G = cases[t][6];
        seg_plan p;
        plan_make(&p, nseg, cases[t][1], 5000, &s);
        int M = p.M, width = (ov ? 2 : 1) * hd, slots = G * r;
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
        di_cmp_gated_rows(NULL, M, p.row_seg, emit, p.pos, hk, hs, pk, ps, ape, r, ov, G, hd, out);
        int *drs = gt_to_dev(p.row_seg, (size_t)M * 4), *dem = gt_to_dev(emit, (size_t)M * 4);
        int64_t *dpos = gt_to_dev(p.pos, (size_t)M * 8);
        float **ddk = gt_to_dev(dkp, (size_t)nseg * sizeof *dkp), **dds = gt_to_dev(dsp, (size_t)nseg * sizeof *dsp);
        float *dpk = gt_to_dev(pk, (size_t)M * width * 4), *dps = gt_to_dev(ps, (size_t)M * width * 4);
        float *dape = ape ? gt_to_dev(ape, (size_t)r * width * 4) : NULL;
        float *dout = gt_dev_poison((size_t)(nemit + 1) * hd * 4);
        CHECK(dk && ds && drs && dem && dpos && ddk && dds && dpk && dps && dout && (!ape || dape));
        CUDA_SYNC_CHECK(dic_cmp_gated_rows(&c, M, drs, dem, dpos, ddk, dds, dpk, dps, dape, r, ov, G, hd, dout));
        float *gout = gt_d2h(dout, (size_t)(nemit + 1) * hd * 4), *gk = gt_d2h(dk, (size_t)nseg * ssz * 4),
              *gs = gt_d2h(ds, (size_t)nseg * ssz * 4);
        CHECK(gout && gk && gs);
        size_t b = mdiff("cmp pooled", gout, out, (size_t)(nemit + 1) * hd, 4, (size_t)hd) +
                   mdiff("cmp state kv", gk, st_k, (size_t)nseg * ssz, 4, (size_t)width) +
                   mdiff("cmp state score", gs, st_s, (size_t)nseg * ssz, 4, (size_t)width);
        if (b)
            fprintf(stderr,
                    "cmp_gated_rows nseg=%d M=%d ratio=%d overlap=%d groups=%d hd=%d ape=%d (%d emissions): %zu differ\n",
                    nseg, M, r, ov, G, hd, ape != NULL, nemit, b);
        bad += b;
        cudaFree(dk), cudaFree(ds), cudaFree(drs), cudaFree(dem), cudaFree(dpos), cudaFree(ddk), cudaFree(dds);
        cudaFree(dpk), cudaFree(dps), cudaFree(dape), cudaFree(dout);
        free(emit), free(pk), free(ps), free(ape), free(st_k), free(st_s), free(hk), free(hs), free(dkp), free(dsp);
        free(out), free(gout), free(gk), free(gs);
        plan_free(&p);
    }
    CHECK_MSG(bad == 0, "cmp_gated_rows: %zu values differ from the CPU", bad);
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
