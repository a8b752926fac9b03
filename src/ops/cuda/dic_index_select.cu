/*
 * dic_index_select.cu — the lightning indexer's selection for a whole step
 * over paged key stores (ops.h di_index_select; src/ops/cpu/index_select.c),
 * bit-identical to the CPU:
 *   1. scores: row m, key j < nvis[m]: kpages[m][j / page_rows[m]] row
 *      j % page_rows[m]; keys j >= kcap[m] score 0; with cand_in, keys
 *      outside the row's candidate blocks score -inf (the CPU's order of
 *      writes gives exactly these values). dic_idx_score: dic_index_scores'
 *      per-key arithmetic.
 *   2. per row (one CTA): with cand_out, the candidate blocks (block maxima,
 *      the newest block forced to +inf, top-KB, increasing block id; all
 *      blocks when there are at most KB); then the top-K of the scores
 *      (dic_topk_desc's order, or increasing index with sort_sel).
 * Outputs past a row's count are -1 (the CPU leaves them unwritten).
 */
#include "ops/cuda/dic_index_int.cuh"
#include "ops/cuda/dic_model.h"

#define IS_THREADS 64
#define IHD 128

extern "C" size_t dic_index_select_scratch(int M, size_t iscore_stride, size_t bscore_stride) {
    if (M <= 0) return 0;
    return (((size_t)M * iscore_stride * 4 + 255) & ~(size_t)255) + (((size_t)M * bscore_stride * 4 + 255) & ~(size_t)255);
}

static __global__ void __launch_bounds__(IS_THREADS) k_isel_scores(const di_index_select_args a, float *score,
                                                                   size_t lds) {
    DIC_PDL_ENTER();
    extern __shared__ float4 qs4[]; /* [nh][128] fp32 */
    float *qs = (float *)qs4;
    const int m = blockIdx.y;
    const int64_t j = (int64_t)blockIdx.x * IS_THREADS + threadIdx.x;
    int64_t nvis = a.nvis[m];
    if (nvis > (int64_t)lds) nvis = (int64_t)lds;
    float *out = score + (size_t)m * lds;
    if ((int64_t)blockIdx.x * IS_THREADS >= nvis) { /* whole tile past the row's keys */
        if (j < (int64_t)lds) out[j] = -INFINITY;
        return;
    }
    const int nh = a.nh;
    const uint16_t *qm = a.q + (size_t)m * nh * IHD;
    for (int i = threadIdx.x; i < nh * IHD; i += IS_THREADS) qs[i] = dic_bf16_to_f32(qm[i]);
    __syncthreads();
    if (j >= (int64_t)lds) return;
    if (j >= nvis) {
        out[j] = -INFINITY;
        return;
    }
    if (a.cand_in) { /* only rows of the kept candidate blocks */
        const int *cand = a.cand_in + (size_t)m * a.KB;
        const int nc = a.ncand_in[m];
        const int64_t b = j / a.bs;
        bool in = false;
        for (int i = 0; i < nc; i++) in |= (int64_t)__ldg(cand + i) == b;
        if (!in) {
            out[j] = -INFINITY;
            return;
        }
    }
    if (j >= a.kcap[m]) {
        out[j] = 0.0f;
        return;
    }
    const int64_t pr = a.page_rows[m];
    const uint16_t *kj = a.kpages[m][j / pr] + (size_t)(j % pr) * IHD;
    out[j] = dic_idx_score(qs4, nh, a.w + (size_t)m * nh, kj);
}

/* The same scores with the heads of a key split over ISS_G threads (decode
 * steps: few rows, so one thread per key leaves the GPU nearly idle with
 * nh x 128 serial FMAs per thread). Each thread computes its heads' terms
 * exactly as dic_idx_score does; one thread per key then adds the terms in
 * head order: the same bits. */
#define ISS_KEYS 16
#define ISS_G 16
#define ISS_MAXH 64

static __global__ void __launch_bounds__(ISS_KEYS *ISS_G)
    k_isel_scores_split(const di_index_select_args a, float *score, size_t lds) {
    DIC_PDL_ENTER();
    extern __shared__ float4 qs4[]; /* [nh][128] fp32 */
    __shared__ float terms[ISS_KEYS][ISS_MAXH + 1];
    float *qs = (float *)qs4;
    const int m = blockIdx.y, kl = threadIdx.x / ISS_G, g = threadIdx.x % ISS_G;
    const int64_t j = (int64_t)blockIdx.x * ISS_KEYS + kl;
    int64_t nvis = a.nvis[m];
    if (nvis > (int64_t)lds) nvis = (int64_t)lds;
    float *out = score + (size_t)m * lds;
    if ((int64_t)blockIdx.x * ISS_KEYS >= nvis) { /* whole tile past the row's keys */
        if (g == 0 && j < (int64_t)lds) out[j] = -INFINITY;
        return;
    }
    const int nh = a.nh;
    const uint16_t *qm = a.q + (size_t)m * nh * IHD;
    for (int i = threadIdx.x; i < nh * IHD; i += ISS_KEYS * ISS_G) qs[i] = dic_bf16_to_f32(qm[i]);
    __syncthreads();
    /* 0: write -inf, 1: write 0, 2: score the key (the k_isel_scores cases, in its order) */
    int what = 2;
    if (j >= (int64_t)lds) what = -1;
    else if (j >= nvis) what = 0;
    else if (a.cand_in) {
        const int *cand = a.cand_in + (size_t)m * a.KB;
        const int nc = a.ncand_in[m];
        const int64_t b = j / a.bs;
        bool in = false;
        for (int i = 0; i < nc; i++) in |= (int64_t)__ldg(cand + i) == b;
        if (!in) what = 0;
    }
    if (what == 2 && j >= a.kcap[m]) what = 1;
    if (what == 2) {
        const int64_t pr = a.page_rows[m];
        float kv[128];
        dic_idx_key(a.kpages[m][j / pr] + (size_t)(j % pr) * IHD, kv);
        const float *w = a.w + (size_t)m * nh;
        for (int h = g; h < nh; h += ISS_G) terms[kl][h] = dic_idx_head(qs4 + h * 32, kv, w[h]);
    }
    __syncthreads();
    if (g != 0 || what < 0) return;
    if (what == 0) {
        out[j] = -INFINITY;
    } else if (what == 1) {
        out[j] = 0.0f;
    } else {
        float sum = 0.0f;
        for (int h = 0; h < nh; h++) sum = __fadd_rn(sum, terms[kl][h]);
        out[j] = dic_round_bf16(sum);
    }
}

static __global__ void __launch_bounds__(TOPK_THREADS) k_isel_select(const di_index_select_args a, const float *score,
                                                                    size_t lds, float *bscore, size_t ldb) {
    DIC_PDL_ENTER();
    const int m = blockIdx.x;
    int64_t nv = a.nvis[m];
    if (nv > (int64_t)lds) nv = (int64_t)lds;
    if (nv < 0) nv = 0;
    const int n = (int)nv;
    const float *sc = score + (size_t)m * lds;
    if (a.cand_out) { /* the candidate source's first level */
        const int bs = a.bs, KB = a.KB;
        int *keep = a.cand_out + (size_t)m * KB;
        const int nb = (int)((nv + bs - 1) / bs);
        if (nb <= KB) {
            for (int b = threadIdx.x; b < KB; b += TOPK_THREADS) keep[b] = b < nb ? b : -1;
            if (threadIdx.x == 0) a.ncand_out[m] = nb;
        } else {
            float *bsc = bscore + (size_t)m * ldb;
            for (int b = threadIdx.x; b < nb; b += TOPK_THREADS) {
                float mx = -INFINITY;
                for (int64_t j = (int64_t)b * bs; j < (int64_t)(b + 1) * bs && j < nv; j++) mx = fmaxf(mx, sc[j]);
                bsc[b] = (int64_t)b == (nv - 1) / bs ? INFINITY : mx; /* the newest visible row's block is kept */
            }
            __syncthreads();
            dic_topk_row(bsc, nb, KB, keep, a.ncand_out + m, 1);
        }
    }
    dic_topk_row(sc, n, a.K, a.topk + (size_t)m * a.K, a.ntopk + m, a.sort_sel);
}

extern "C" cudaError_t dic_index_select(const dic_ctx *c, const di_index_select_args *a) {
    if (a->M <= 0) return cudaSuccess;
    const size_t lds = a->iscore_stride, ldb = a->cand_out ? a->bscore_stride : 0;
    if (lds == 0 || a->nh <= 0 || a->K <= 0 || a->K > TOPK_MAX) return cudaErrorInvalidValue;
    if ((a->cand_in || a->cand_out) && (a->bs <= 0 || a->KB <= 0 || a->KB > TOPK_MAX)) return cudaErrorInvalidValue;
    if (a->cand_out && ldb * (size_t)a->bs < lds) return cudaErrorInvalidValue; /* block maxima of every row */
    if (!c->scratch || c->scratch_cap < dic_index_select_scratch(a->M, lds, ldb)) return cudaErrorInvalidValue;
    if (lds / IS_THREADS >= 0x7FFFFFFF || a->M > 65535) return cudaErrorInvalidValue;
    float *score = (float *)c->scratch;
    float *bscore = (float *)((char *)c->scratch + (((size_t)a->M * lds * 4 + 255) & ~(size_t)255));
    const size_t smem = (size_t)a->nh * IHD * sizeof(float);
    if (smem > 48 * 1024) {
        cudaError_t e = cudaFuncSetAttribute(k_isel_scores, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
        if (e != cudaSuccess) return e;
    }
    if (a->M <= 16 && a->nh <= ISS_MAXH) { /* decode: heads split over threads */
        if (smem > 48 * 1024 - sizeof(float) * ISS_KEYS * (ISS_MAXH + 1)) {
            cudaError_t e = cudaFuncSetAttribute(k_isel_scores_split, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                                 (int)smem);
            if (e != cudaSuccess) return e;
        }
        dim3 grid((unsigned)((lds + ISS_KEYS - 1) / ISS_KEYS), (unsigned)a->M);
        DIC_LAUNCH(k_isel_scores_split, grid, ISS_KEYS * ISS_G, smem, c->stream, *a, score, lds);
    } else {
        dim3 grid((unsigned)((lds + IS_THREADS - 1) / IS_THREADS), (unsigned)a->M);
        DIC_LAUNCH(k_isel_scores, grid, IS_THREADS, smem, c->stream, *a, score, lds);
    }
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) return e;
    DIC_LAUNCH(k_isel_select, a->M, TOPK_THREADS, 0, c->stream, *a, score, lds, bscore, ldb);
    DIC_LAUNCH_CHECK();
}
