/*
 * lab/attn_decode/attn_dec_bench.c — the attention sub-layer's non-GEMM work at decode
 * (V4-Flash: 64 heads x 512, RoPE 64, window 128, top-512 of the ratio-4
 * rows at position 4095), M = 1, 2, 8 rows (one segment each), per layer:
 *   today: q (head_rmsnorm + rope), kv (rmsnorm + rope + qat_fp8 +
 *          scatter_rows into the ring), attention (attn_list + the
 *          three-phase sparse_attn + inverse rope of o): 10 launches;
 *   fused: dic_q_post, dic_attn_kv_post (ring write included), dic_attn_dec
 *          (the product: k_ad_p2 + k_ad_c2): 4 launches. "attn vM/P" rows: the
 *          attention alone per lab variant (lab_attn_dec, attn_decode_variants.cu;
 *          0: 2 launches; 1, 2: one launch; 3: the product's; 4: its one-launch fold)
 *          (mode M, P CTAs per row and 16 heads for 1 / 2, P column slices
 *          for 3 / 4); "a128 vM/P" rows (M = 1): layer 0's window-only
 *          attention, n = 128 entries.
 * First every lab variant against the product (dic_attn_dec) on the same
 * inputs: modes 0, 3, 4 bitwise (the same values in the same order), 1 and 2
 * per (row, head) within 2^-6 of the head's max |o| (their softmax runs
 * against the chunk's running max), and the product against the CPU op
 * (di_attn_dec: per (row, head) within 2^-6 of the head's max |o|, as
 * tests/ops/cuda/gtest_attn_dec.c). (index_select: lab/index_select/isel_bench.c.)
 * Times: the median of 10 replays of a CUDA graph of 20 repetitions, per
 * repetition (what a decode step's graph sees). Floor: the bytes each part
 * must move (KV rows read, q / o read and written) at the d2d copy ceiling
 * measured here.
 */
#include <cuda_runtime_api.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attn_decode/attn_decode_lab.h"
#include "bench_util.h"
#include "ops/cuda/dic.h"
#include "ops/cuda/dic_model.h"
#include "ops/cpu/threadpool.h"
#include "ops/ops.h"

#define H 64
#define HD 512
#define RD 64
#define WIN 128
#define RATIO 4
#define TOPK 512
#define PAGE 64
#define POS 4095
#define REPS 20

static cudaStream_t st;
static cudaEvent_t e0, e1;

static uint16_t *g_keep; /* dev_rand: the host copy of the last draw when set (the CPU reference) */

static void *dev_rand(size_t n16, uint64_t *s) { /* n16 bf16 values in [-1, 1) */
    uint16_t *h = malloc(n16 * 2);
    for (size_t i = 0; i < n16; i++) {
        *s ^= *s << 13, *s ^= *s >> 7, *s ^= *s << 17;
        float f = (float)((double)(*s >> 11) * 0x1.0p-52 - 1.0);
        uint32_t u;
        memcpy(&u, &f, 4);
        h[i] = (uint16_t)((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
    }
    void *d;
    CK(cudaMalloc(&d, n16 * 2));
    CK(cudaMemcpy(d, h, n16 * 2, cudaMemcpyHostToDevice));
    g_keep = h;
    return d;
}
static void *dev_copy(const void *h, size_t b) {
    void *d;
    CK(cudaMalloc(&d, b));
    CK(cudaMemcpy(d, h, b, cudaMemcpyHostToDevice));
    return d;
}

typedef struct dev_case {
    int M;
    size_t stride, ldq;
    int64_t *pos, *pos0;
    int *seg, *row0, *prs, *topk, *ntopk, *nidx;
    uint16_t *const *ring;
    uint16_t **const *ckv;
    uint16_t *kv, *q, *o, **ringrow;
    int *src;
    uint16_t *const *dst;
    const uint16_t **list;
    float *sink, *cs, *sn, *kvw;
    /* host twins for the CPU reference */
    int64_t hpos[8];
    int hseg[8], hrow0[8], hprs[8], htopk[8 * TOPK], hntopk[8];
    uint16_t *hring[8], **hckv[8], *hkv, *hq;
    float hsink[H], hcs[8 * RD / 2], hsn[8 * RD / 2];
} dev_case;

static void setup(dev_case *d, int M) {
    uint64_t s = 0x9E3779B97F4A7C15ull + (uint64_t)M;
    d->M = M;
    d->stride = WIN + TOPK + 16;
    d->ldq = (size_t)H * HD;
    int64_t pos[8];
    int seg[8], prs[8], topk[8 * TOPK], ntopk[8], src[8];
    uint16_t *ring[8], **ckv[8], *dst[8];
    int64_t vis = (POS + 1) / RATIO, np = (vis + PAGE - 1) / PAGE;
    for (int m = 0; m < M; m++) {
        pos[m] = POS + m;
        seg[m] = m;
        prs[m] = PAGE;
        src[m] = m;
        ring[m] = dev_rand((size_t)WIN * HD, &s);
        d->hring[m] = g_keep;
        uint16_t *pool = dev_rand((size_t)np * PAGE * HD, &s), **pt = malloc((size_t)np * sizeof *pt);
        uint16_t *hpool = g_keep;
        d->hckv[m] = malloc((size_t)np * sizeof *d->hckv[m]);
        for (int64_t i = 0; i < np; i++) pt[i] = pool + (size_t)i * PAGE * HD, d->hckv[m][i] = hpool + (size_t)i * PAGE * HD;
        ckv[m] = dev_copy(pt, (size_t)np * sizeof *pt);
        free(pt);
        ntopk[m] = TOPK;
        for (int i = 0; i < TOPK; i++) topk[m * TOPK + i] = (int)((uint64_t)(i * 2654435761u + m) % (uint64_t)vis);
        dst[m] = ring[m] + (size_t)(pos[m] % WIN) * HD;
    }
    int row0[8];
    for (int m = 0; m < M; m++) row0[m] = m;
    d->pos = dev_copy(pos, (size_t)M * 8);
    d->pos0 = dev_copy(pos, (size_t)M * 8);
    d->seg = dev_copy(seg, (size_t)M * 4);
    d->row0 = dev_copy(row0, (size_t)M * 4);
    d->prs = dev_copy(prs, (size_t)M * 4);
    d->topk = dev_copy(topk, (size_t)M * TOPK * 4);
    d->ntopk = dev_copy(ntopk, (size_t)M * 4);
    d->src = dev_copy(src, (size_t)M * 4);
    d->ring = dev_copy(ring, (size_t)M * sizeof ring[0]);
    d->ckv = dev_copy(ckv, (size_t)M * sizeof ckv[0]);
    d->dst = dev_copy(dst, (size_t)M * sizeof dst[0]);
    CK(cudaMalloc((void **)&d->nidx, (size_t)M * 4));
    CK(cudaMalloc((void **)&d->list, (size_t)M * d->stride * sizeof(void *)));
    d->kv = dev_rand((size_t)M * HD, &s);
    d->hkv = g_keep;
    d->q = dev_rand((size_t)M * d->ldq, &s);
    d->hq = g_keep;
    memcpy(d->hpos, pos, sizeof pos), memcpy(d->hseg, seg, sizeof seg), memcpy(d->hrow0, row0, sizeof row0);
    memcpy(d->hprs, prs, sizeof prs), memcpy(d->htopk, topk, sizeof topk), memcpy(d->hntopk, ntopk, sizeof ntopk);
    CK(cudaMalloc((void **)&d->o, (size_t)M * d->ldq * 2));
    float hs[H], hc[8 * RD / 2], hn[8 * RD / 2], hw[HD];
    for (int i = 0; i < H; i++) hs[i] = 0.5f + 0.01f * i;
    for (int i = 0; i < M * RD / 2; i++) hc[i] = cosf(0.1f * i), hn[i] = sinf(0.1f * i);
    for (int i = 0; i < HD; i++) hw[i] = 1.0f + 0.001f * i;
    d->sink = dev_copy(hs, sizeof hs);
    memcpy(d->hsink, hs, sizeof hs), memcpy(d->hcs, hc, sizeof hc), memcpy(d->hsn, hn, sizeof hn);
    d->cs = dev_copy(hc, (size_t)M * RD / 2 * 4);
    d->sn = dev_copy(hn, (size_t)M * RD / 2 * 4);
    d->kvw = dev_copy(hw, sizeof hw);
}

enum { P_Q, P_KV, P_ATTN, P_ALL };

static void today(const dic_ctx *c, const dev_case *d, int part) {
    int M = d->M;
    float eps = 1e-6f, scale = 1.0f / sqrtf((float)HD);
    if (part == P_Q || part == P_ALL) {
        CK(dic_head_rmsnorm_bf16(c, M, d->q, d->ldq, H, HD, eps));
        CK(dic_rope_tab(c, M, d->q, d->ldq, H, HD, RD, d->cs, d->sn, 0));
    }
    if (part == P_KV || part == P_ALL) {
        CK(dic_rmsnorm(c, M, d->kv, HD, d->kvw, HD, eps, d->kv, HD));
        CK(dic_rope_tab(c, M, d->kv, HD, 1, HD, RD, d->cs, d->sn, 0));
        CK(dic_qat_fp8(c, M, d->kv, HD, HD - RD, 64));
        CK(dic_scatter_rows(c, M, d->src, d->kv, HD, d->dst, HD));
    }
    if (part == P_ATTN || part == P_ALL) {
        CK(dic_attn_list(c, M, d->pos, d->seg, d->row0, d->pos0, d->ring, WIN, d->kv, HD, d->ckv, d->prs, RATIO,
                         d->topk, TOPK, d->ntopk, d->list, d->stride, d->nidx));
        CK(dic_sparse_attn(c, M, d->q, d->ldq, H, HD, d->list, d->stride, d->nidx, d->sink, scale, d->o, d->ldq));
        CK(dic_rope_tab(c, M, d->o, d->ldq, H, HD, RD, d->cs, d->sn, 1));
    }
}

static int g_win_only; /* attention rows of the window-only layer (n = 128) */
static int g_lab;      /* 1: the attention through lab_attn_dec (at lab_attn_dec_tune's mode) */

typedef cudaError_t (*attn_fn)(const dic_ctx *, int, const int64_t *, const int *, const int *, const int64_t *,
                               uint16_t *const *, int, const uint16_t *, int, uint16_t **const *, const int *, int,
                               const int *, int, const int *, size_t, int *, const uint16_t *, size_t, int,
                               const float *, float, int, const float *, const float *, uint16_t *, size_t);

static void fused(const dic_ctx *c, const dev_case *d, int part) {
    int M = d->M;
    float eps = 1e-6f, scale = 1.0f / sqrtf((float)HD);
    if (part == P_Q || part == P_ALL) CK(dic_q_post(c, M, d->q, d->ldq, H, HD, 1, eps, RD, d->cs, d->sn));
    if (part == P_KV || part == P_ALL)
        CK(dic_attn_kv_post(c, M, d->kv, HD, d->kvw, HD, eps, RD, d->cs, d->sn, HD - RD, 64, M, d->src, d->dst));
    const attn_fn ad = g_lab ? lab_attn_dec : dic_attn_dec;
    if ((part == P_ATTN || part == P_ALL) && g_win_only) /* layer 0: the 128 window entries only */
        CK(ad(c, M, d->pos, d->seg, d->row0, d->pos0, d->ring, WIN, d->kv, HD, NULL, d->prs, 0, NULL, 0, NULL,
                        d->stride, d->nidx, d->q, d->ldq, H, d->sink, scale, RD, d->cs, d->sn, d->o, d->ldq));
    else if (part == P_ATTN || part == P_ALL)
        CK(ad(c, M, d->pos, d->seg, d->row0, d->pos0, d->ring, WIN, d->kv, HD, d->ckv, d->prs, RATIO, d->topk,
                        TOPK, d->ntopk, d->stride, d->nidx, d->q, d->ldq, H, d->sink, scale, RD, d->cs, d->sn, d->o,
                        d->ldq));
}

static double graph_us(const dic_ctx *c, const dev_case *d, int part, int fuse) {
    cudaGraph_t gr;
    /* one eager call first (attributes, errors) */
    if (fuse) fused(c, d, part);
    else today(c, d, part);
    CK(cudaStreamSynchronize(st));
    CK(cudaStreamBeginCapture(st, cudaStreamCaptureModeGlobal));
    for (int r = 0; r < REPS; r++) {
        if (fuse) fused(c, d, part);
        else today(c, d, part);
    }
    CK(cudaStreamEndCapture(st, &gr));
    return graph_median_ms(st, gr, e0, e1) * 1e3 / REPS;
}

static const int avm[] = {0, 1, 1, 2, 3, 3, 3, 4, 4, 4, 4}, avc[] = {8, 8, 11, 8, 1, 4, 8, 1, 2, 4, 8};

static double graph_attn_variant(const dic_ctx *c, const dev_case *d, int v) {
    lab_attn_dec_tune(avm[v], avc[v]);
    g_lab = 1;
    double t = graph_us(c, d, P_ATTN, 1);
    g_lab = 0;
    lab_attn_dec_tune(-2, -2);
    return t;
}

/* the attention output of one eager call into h (lab: variant v, else the product) */
static void attn_once(const dic_ctx *c, const dev_case *d, int lab, int v, uint16_t *h) {
    if (lab) lab_attn_dec_tune(avm[v], avc[v]);
    g_lab = lab;
    CK(cudaMemset(d->o, 0xFF, (size_t)d->M * d->ldq * 2));
    fused(c, d, P_ATTN);
    CK(cudaStreamSynchronize(st));
    CK(cudaMemcpy(h, d->o, (size_t)d->M * d->ldq * 2, cudaMemcpyDeviceToHost));
    g_lab = 0;
    lab_attn_dec_tune(-2, -2);
}

static float bf16f(uint16_t v) {
    uint32_t u = (uint32_t)v << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* every lab variant against the product on d's inputs: modes 0, 3, 4 bitwise, 1 / 2 within 2^-6 of the
 * head's max |o|; returns the failures */
static int check_variants(const dic_ctx *c, const dev_case *d) {
    const size_t n = (size_t)d->M * d->ldq;
    uint16_t *hp = malloc(n * 2), *hv = malloc(n * 2);
    attn_once(c, d, 0, 0, hp);
    int bad = 0;
    { /* the product against the CPU op */
        di_exec x = {.tp = di_threadpool_global()};
        const uint16_t **list = malloc((size_t)d->M * d->stride * sizeof *list);
        int nidx[8];
        uint16_t *ref = malloc(n * 2);
        di_attn_dec(&x, d->M, d->hpos, d->hseg, d->hrow0, d->hpos, d->hring, WIN, d->hkv, HD,
                    g_win_only ? NULL : d->hckv, d->hprs, g_win_only ? 0 : RATIO, g_win_only ? NULL : d->htopk,
                    g_win_only ? 0 : TOPK, g_win_only ? NULL : d->hntopk, list, d->stride, nidx, NULL, d->hq, d->ldq, H,
                    d->hsink, 1.0f / sqrtf((float)HD), RD, d->hcs, d->hsn, ref, d->ldq);
        size_t badh = 0;
        double worst = 0;
        for (int m = 0; m < d->M; m++)
            for (int h = 0; h < H; h++) {
                double mx = 0, err = 0;
                for (int i = 0; i < HD; i++) {
                    const size_t k = (size_t)m * d->ldq + (size_t)h * HD + i;
                    const double r = bf16f(ref[k]), g = bf16f(hp[k]);
                    if (fabs(r) > mx) mx = fabs(r);
                    const double e = g == g ? fabs(g - r) : INFINITY;
                    if (e > err) err = e;
                }
                const double rel = mx > 0 ? err / mx : err;
                if (rel > worst) worst = rel;
                badh += rel > 0x1p-6;
            }
        printf("check M=%d%s the product vs the CPU: worst head err %.2e of max: %s\n", d->M,
               g_win_only ? " (window only)" : "", worst, badh ? "MISMATCH" : "ok");
        bad += badh != 0;
        free(list), free(ref);
    }
    for (int v = 0; v < (int)(sizeof avm / sizeof avm[0]); v++) {
        attn_once(c, d, 1, v, hv);
        size_t nd = 0, badh = 0;
        double worst = 0;
        for (int m = 0; m < d->M; m++)
            for (int h = 0; h < H; h++) {
                double mx = 0, err = 0;
                for (int i = 0; i < HD; i++) {
                    const size_t k = (size_t)m * d->ldq + (size_t)h * HD + i;
                    const double r = bf16f(hp[k]), g = bf16f(hv[k]);
                    nd += hp[k] != hv[k];
                    if (fabs(r) > mx) mx = fabs(r);
                    const double e = g == g ? fabs(g - r) : INFINITY;
                    if (e > err) err = e;
                }
                const double rel = mx > 0 ? err / mx : err;
                if (rel > worst) worst = rel;
                badh += rel > 0x1p-6;
            }
        const int bitwise = avm[v] == 0 || avm[v] >= 3, ok = bitwise ? nd == 0 : badh == 0;
        printf("check M=%d%s attn v%d/%d vs the product: %zu values differ, worst head err %.2e of max: %s\n", d->M,
               g_win_only ? " (window only)" : "", avm[v], avc[v], nd, worst, ok ? "ok" : "MISMATCH");
        bad += !ok;
    }
    free(hp), free(hv);
    return bad;
}

int main(void) {
    CK(cudaStreamCreate(&st));
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    double copy_gbs = copy_ceiling_gbs(st, e0, e1);
    dic_ctx c = {0};
    c.stream = st;
    int dev = 0;
    CK(cudaGetDevice(&dev));
    CK(cudaDeviceGetAttribute(&c.num_sms, cudaDevAttrMultiProcessorCount, dev));
    c.scratch_cap = (size_t)64 << 20;
    CK(cudaMalloc(&c.scratch, c.scratch_cap));
    c.batch_invariant = 0;
    static const char *pn[4] = {"q post", "kv post", "attention", "all"};
    printf("graph us per layer (median of 10 replays of %d reps); floor = bytes / copy ceiling\n", REPS);
    printf("%-3s %-10s %10s %10s %8s %10s %8s\n", "M", "part", "today", "fused", "speedup", "floor", "x floor");
    int Ms[3] = {1, 2, 8}, nbad = 0;
    for (int i = 0; i < 3; i++) {
        dev_case d;
        setup(&d, Ms[i]);
        int M = Ms[i];
        nbad += check_variants(&c, &d);
        if (M == 1) {
            g_win_only = 1;
            nbad += check_variants(&c, &d);
            g_win_only = 0;
        }
        double bq = (double)M * H * HD * 2 * 2, bkv = (double)M * HD * 2 * 3,
               ba = (double)M * ((double)(WIN + TOPK) * HD * 2 + 2.0 * H * HD * 2);
        double bytes[4] = {bq, bkv, ba, bq + bkv + ba};
        for (int p = 0; p < 4; p++) {
            double tt = graph_us(&c, &d, p, 0), tf = graph_us(&c, &d, p, 1);
            double fl = bytes[p] / (copy_gbs * 1e9) * 1e6;
            printf("%-3d %-10s %10.2f %10.2f %7.2fx %10.3f %7.1fx\n", M, pn[p], tt, tf, tt / tf, fl, tf / fl);
            if (p == P_ATTN)
                for (int v = 0; v < (int)(sizeof avm / sizeof avm[0]); v++) {
                    double tv = graph_attn_variant(&c, &d, v);
                    char nm[32];
                    snprintf(nm, sizeof nm, "attn v%d/%d", avm[v], avc[v]);
                    printf("%-3d %-10s %10.2f %10.2f %7.2fx %10.3f %7.1fx\n", M, nm, tt, tv, tt / tv, fl, tv / fl);
                }
        }
        if (M == 1) { /* layer 0's attention: n = 128 (2 blocks) */
            g_win_only = 1;
            double f0 = (double)((double)WIN * HD * 2 + 2.0 * H * HD * 2) / (copy_gbs * 1e9) * 1e6;
            for (int v = 0; v < (int)(sizeof avm / sizeof avm[0]); v++) {
                double tv = graph_attn_variant(&c, &d, v);
                char nm[32];
                snprintf(nm, sizeof nm, "a128 v%d/%d", avm[v], avc[v]);
                printf("%-3d %-10s %10s %10.2f %8s %10.3f %7.1fx\n", M, nm, "-", tv, "-", f0, tv / f0);
            }
            g_win_only = 0;
        }
        CK(cudaDeviceSynchronize());
    }
    CK(cudaGetLastError());
    if (nbad) printf("%d variant checks FAILED\n", nbad);
    return nbad != 0;
}
