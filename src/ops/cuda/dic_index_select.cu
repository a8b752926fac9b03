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
 * At decode in fast mode both steps run in one launch (k_isel_dec); otherwise
 * k_isel_scores[_split] + k_isel_select (docs/kernels/index-select.md).
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

/* ---------------------------------------------------------------------------
 * Decode (M <= 16, no candidate output): one launch. CTA = (16 keys, row m),
 * 256 threads: the scores as k_isel_scores_split (same bits; lanes of a warp
 * share the head group so the query loads broadcast), written to scratch;
 * the last-arriving CTA of the row (self-resetting counter g_is_cnt: one
 * index_select at a time on the device, as the engine calls it) selects:
 *   keys of the row's n scores staged in shared memory (topk_key order);
 *   radix select from the top byte down, 256-bin histograms with
 *   warp-aggregated atomics (__match_any_sync), the bin found by a warp scan;
 *   stops as soon as the bin is taken whole, and after 2 passes when every
 *   score is a bf16 value (low 16 key bits implied by the high 16: the
 *   scores are bf16-rounded, 0 or -inf);
 *   one ordered compaction (block scan of the > / == counts): the selection
 *   in increasing index; dic_topk_desc's order by a bitonic sort of the cnt
 *   selected (key, ~index) pairs.
 * Exactly dic_topk_row's set and order (integer keys; ties to the lower
 * index), so the CPU's. */
#define ID_KEYS 16
#define ID_G 16
#define ID_T (ID_KEYS * ID_G)
#define ID_SELMAX 20480 /* keys staged in shared memory at most (iscore_stride) */
#define ID_MAXM 16

static __device__ unsigned int g_is_cnt[ID_MAXM];

static __host__ __device__ size_t id_p2(int k) {
    size_t P = 1;
    while ((int)P < k) P <<= 1;
    return P;
}
static size_t id_smem(int nh, size_t lds, int K) {
    size_t q = (size_t)nh * IHD * 4, sel = ((lds * 4 + 15) & ~(size_t)15) + id_p2(K) * 8;
    return q > sel ? q : sel;
}

/* The bitonic network of the shared-memory sort below (descending; the (key, ~index) pairs are
 * distinct, so every compare-exchange has one outcome and any schedule of the same network gives
 * the same order), with the steps whose partners lie in one warp done in registers: thread t holds
 * E = P / ID_T (at least 1) consecutive pairs, strides below E are exchanges in its registers,
 * strides below 32 E shuffles; only strides of 32 E and more go through shared memory. P = 512:
 * 15 barriers instead of 45. 64 <= P <= 4 ID_T. */
/* compare-exchange of positions lo < hi: descending where the block bit is clear */
static __device__ __forceinline__ void id_cx(unsigned long long &x, unsigned long long &y, int asc) {
    if ((x < y) == (asc == 0)) {
        const unsigned long long t = x;
        x = y, y = t;
    }
}

static __device__ void id_bitonic_desc(unsigned long long *buf, int P, int tid) {
    const int E = P >= ID_T ? P / ID_T : 1, nt = P / E; /* threads holding pairs (a multiple of 32) */
    unsigned long long r[4];
    #pragma unroll 1
    for (int size = 2; size <= P; size <<= 1) {
        int stride = size >> 1;
        #pragma unroll 1
        for (; stride >= 32 * E; stride >>= 1) { /* across warps: the shared-memory step */
            #pragma unroll 1
            for (int i = tid; i < P / 2; i += ID_T) {
                const int lo = 2 * i - (i & (stride - 1)), hi = lo + stride;
                const int desc = (lo & size) == 0;
                const unsigned long long x = buf[lo], y = buf[hi];
                if ((x < y) == desc) buf[lo] = y, buf[hi] = x;
            }
            __syncthreads();
        }
        if (tid < nt) {
#pragma unroll
            for (int e = 0; e < 4; e++)
                if (e < E) r[e] = buf[tid * E + e];
            #pragma unroll 1
            for (; stride >= E; stride >>= 1) { /* partner: the same register of lane ^ (stride / E) */
                const int lm = stride / E;
#pragma unroll
                for (int e = 0; e < 4; e++) {
                    if (e >= E) break;
                    const int i = tid * E + e;
                    const unsigned long long y = __shfl_xor_sync(0xFFFFFFFFu, r[e], lm);
                    const bool keep_max = ((i & stride) == 0) == ((i & size) == 0);
                    r[e] = keep_max ? (r[e] > y ? r[e] : y) : (r[e] < y ? r[e] : y);
                }
            }
            #pragma unroll 1
            for (; stride > 0; stride >>= 1) { /* partner in this thread's registers (E = 2 or 4) */
                if (stride == 2) id_cx(r[0], r[2], (tid * E) & size), id_cx(r[1], r[3], (tid * E + 1) & size);
                else {
                    id_cx(r[0], r[1], (tid * E) & size);
                    if (E == 4) id_cx(r[2], r[3], (tid * E + 2) & size);
                }
            }
#pragma unroll
            for (int e = 0; e < 4; e++)
                if (e < E) buf[tid * E + e] = r[e];
        }
        __syncthreads();
    }
}


/* The candidate source's first level where the host guarantees nb = ceil(n / bs) <= KB for every row
 * (ceil(lds / bs) <= KB, dic_index_select): every block kept, k_isel_select's nb <= KB branch. */
static __device__ __forceinline__ void id_cand_all(const di_index_select_args &a, int m, int n, int tid) {
    if (!a.cand_out) return;
    const int nb = (n + a.bs - 1) / a.bs;
    int *keep = a.cand_out + (size_t)m * a.KB;
    #pragma unroll 1
    for (int b = tid; b < a.KB; b += ID_T) keep[b] = b < nb ? b : -1;
    if (tid == 0) a.ncand_out[m] = nb;
}

static __global__ void __launch_bounds__(ID_T) k_isel_dec(const di_index_select_args a, float *score, size_t lds) {
    DIC_PDL_ENTER();
    extern __shared__ float4 qs4[]; /* [nh][128] fp32; then the select's keys and pairs */
    __shared__ __align__(16) float terms[ID_KEYS][ISS_MAXH + 1]; /* also the staging of unaligned keys (4 KB) */
    __shared__ int hist[256];
    __shared__ int wsum[ID_T / 32][2];
    __shared__ uint32_t pre_sh;
    __shared__ int kk_sh, cb_sh, last_sh;
    float *qs = (float *)qs4;
    const int m = blockIdx.y, tid = threadIdx.x, kl = tid % ID_KEYS, g = tid / ID_KEYS;
    const int lane = tid & 31, wid = tid >> 5;
    int64_t nvis = a.nvis[m];
    if (nvis > (int64_t)lds) nvis = (int64_t)lds;
    if (nvis < 0) nvis = 0;
    const int n = (int)nvis, K = a.K;
    int *out = a.topk + (size_t)m * K;
    if (n == 0) { /* nothing scored: CTA 0 writes the empty selection */
        if (blockIdx.x == 0) {
            #pragma unroll 1
            for (int i = tid; i < K; i += ID_T) out[i] = -1;
            if (tid == 0) a.ntopk[m] = 0;
            id_cand_all(a, m, 0, tid);
        }
        return;
    }
    const int64_t jb = (int64_t)blockIdx.x * ID_KEYS;
    if (jb >= n) return; /* past the row's keys: not counted */
    float *sc = score + (size_t)m * lds;
    {
        const int nh = a.nh;
        const uint16_t *qm = a.q + (size_t)m * nh * IHD;
        #pragma unroll 1
        for (int i = tid; i < nh * IHD; i += ID_T) qs[i] = dic_bf16_to_f32(qm[i]);
        const int64_t j = jb + kl;
        int what = 2; /* k_isel_scores_split's cases */
        if (j >= n) what = -1;
        else if (a.cand_in) {
            const int *cand = a.cand_in + (size_t)m * a.KB;
            const int nc = a.ncand_in[m];
            const int b = (int)j / a.bs; /* 0 <= j < n (an int): the same quotient in 32 bits */
            bool in = false;
            #pragma unroll 1
            for (int i = 0; i < nc; i++) in |= __ldg(cand + i) == b;
            if (!in) what = 0;
        }
        if (what == 2 && j >= a.kcap[m]) what = 1;
        const uint16_t *kj = NULL;
        if (what == 2) {
            const int jj = (int)j, pr = a.page_rows[m]; /* 0 <= j < n (an int): 32-bit division, the same quotient */
            kj = a.kpages[m][jj / pr] + (size_t)(jj % pr) * IHD;
        }
        /* qs visible; any key of the CTA not 16-byte aligned (never in the engine's pools): the CTA
         * stages its keys in terms (free until the heads' terms are written), the same 16-bit values */
        const int un = __syncthreads_or(kj != NULL && ((uintptr_t)kj & 15) != 0);
        if (un) {
            uint16_t *stg = (uint16_t *)&terms[0][0] + kl * IHD;
            if (kj) {
                #pragma unroll 1
                for (int i = g; i < IHD; i += ID_G) stg[i] = kj[i];
            }
            __syncthreads();
            if (kj) kj = stg;
        }
        float kv[128];
        if (what == 2) dic_idx_key_a16(kj, kv); /* k_isel_dec stages unaligned keys in shared memory first (code size: one loader) */
        if (un) __syncthreads(); /* staged keys read before terms are written */
        if (what == 2) {
            const float *w = a.w + (size_t)m * nh;
            for (int h = g; h < nh; h += ID_G) terms[kl][h] = dic_idx_head(qs4 + h * 32, kv, w[h]);
        }
        __syncthreads();
        if (g == 0 && what >= 0) {
            float v;
            if (what == 0) v = -INFINITY;
            else if (what == 1) v = 0.0f;
            else {
                float sum = 0.0f;
                #pragma unroll 1
                for (int h = 0; h < nh; h++) sum = __fadd_rn(sum, terms[kl][h]);
                v = dic_round_bf16(sum);
            }
            sc[j] = v;
        }
    }
    /* arrival: the last CTA of the row selects */
    __threadfence();
    __syncthreads();
    if (tid == 0) {
        const unsigned nct = (unsigned)((n + ID_KEYS - 1) / ID_KEYS);
        const unsigned prev = atomicAdd(&g_is_cnt[m], 1u);
        last_sh = prev == nct - 1;
        if (last_sh) g_is_cnt[m] = 0; /* ready for the next launch */
    }
    __syncthreads();
    if (!last_sh) return;
    __threadfence();
    id_cand_all(a, m, n, tid); /* (no CTA reads cand_in any more: every one has arrived) */
    uint32_t *ks = (uint32_t *)qs4;
    unsigned long long *buf = (unsigned long long *)((char *)qs4 + ((lds * 4 + 15) & ~(size_t)15));
    const int cnt = K < n ? K : n;
    int ok = 1;
    #pragma unroll 1
    for (int i = tid; i < n; i += ID_T) {
        uint32_t key = topk_key(__ldcg(sc + i)), lo = key & 0xFFFFu;
        ks[i] = key;
        ok &= lo == 0u || lo == 0xFFFFu;
    }
    const int all16 = __syncthreads_and(ok);
    /* radix select */
    uint32_t prefix = 0u;
    int kk = cnt, sh = 24;
    #pragma unroll 1
    for (;; sh -= 8) {
        hist[tid] = 0; /* ID_T == 256 */
        __syncthreads();
        const uint32_t hmask = sh == 24 ? 0u : (0xFFFFFFFFu << (sh + 8));
        #pragma unroll 1
        for (int i0 = 0; i0 < n; i0 += ID_T) {
            const int i = i0 + tid;
            uint32_t key = i < n ? ks[i] : 0u;
            const bool mt = i < n && (key & hmask) == prefix;
            const int b = mt ? (int)((key >> sh) & 255u) : 256;
            const unsigned peers = __match_any_sync(0xFFFFFFFFu, b);
            if (mt && lane == __ffs(peers) - 1) atomicAdd(&hist[b], __popc(peers));
        }
        __syncthreads();
        if (wid == 0) { /* lane l: bins 255 - 8l .. 248 - 8l, from the top */
            int v[8], loc = 0;
#pragma unroll
            for (int j = 0; j < 8; j++) {
                v[j] = hist[255 - 8 * lane - j];
                loc += v[j];
            }
            int inc = loc;
#pragma unroll
            for (int o = 1; o < 32; o <<= 1) {
                int y = __shfl_up_sync(0xFFFFFFFFu, inc, o);
                if (lane >= o) inc += y;
            }
            const int exc = inc - loc;
            if (exc < kk && kk <= inc) {
                int above = exc, j = 0;
                #pragma unroll 1
                for (; j < 7; j++) {
                    if (above + v[j] >= kk) break;
                    above += v[j];
                }
                pre_sh = prefix | ((uint32_t)(255 - 8 * lane - j) << sh);
                kk_sh = kk - above;
                cb_sh = v[j];
            }
        }
        __syncthreads();
        prefix = pre_sh;
        kk = kk_sh;
        if (cb_sh == kk || sh == 0 || (all16 && sh == 16)) break;
        __syncthreads(); /* hist reads done before the next clear */
    }
    const uint32_t T = prefix >> sh;
    /* ordered compaction: > T, and the first kk == T. Warp w walks keys
     * [w per, (w + 1) per) 32 at a time (consecutive lanes, ballots). */
    const int per = ((n + ID_T / 32 - 1) / (ID_T / 32) + 31) & ~31, ws0 = wid * per, ws1 = min(n, ws0 + per);
    const unsigned lt = (1u << lane) - 1u;
    int cg = 0, ce = 0;
    #pragma unroll 1
    for (int b = ws0; b < ws1; b += 32) {
        const int i = b + lane;
        const uint32_t hv = i < ws1 ? ks[i] >> sh : 0u;
        cg += __popc(__ballot_sync(0xFFFFFFFFu, i < ws1 && hv > T));
        ce += __popc(__ballot_sync(0xFFFFFFFFu, i < ws1 && hv == T));
    }
    if (lane == 0) wsum[wid][0] = cg, wsum[wid][1] = ce;
    __syncthreads();
    int gb = 0, eb = 0;
    #pragma unroll 1
    for (int w2 = 0; w2 < wid; w2++) gb += wsum[w2][0], eb += wsum[w2][1];
    #pragma unroll 1
    for (int b = ws0; b < ws1; b += 32) {
        const int i = b + lane;
        const uint32_t key = i < ws1 ? ks[i] : 0u, hv = key >> sh;
        const bool gt = i < ws1 && hv > T, eq = i < ws1 && hv == T;
        const unsigned bg = __ballot_sync(0xFFFFFFFFu, gt), be = __ballot_sync(0xFFFFFFFFu, eq);
        const int g0 = gb + __popc(bg & lt), e0 = eb + __popc(be & lt);
        const unsigned long long v = ((unsigned long long)key << 32) | (unsigned long long)(0xFFFFFFFFu - (uint32_t)i);
        if (gt) buf[g0 + min(e0, kk)] = v;
        else if (eq && e0 < kk) buf[g0 + e0] = v;
        gb += __popc(bg), eb += __popc(be);
    }
    __syncthreads();
    if (!a.sort_sel && (int)id_p2(cnt) >= 64 && (int)id_p2(cnt) <= 4 * ID_T) { /* the same sort, in registers */
        const int P = (int)id_p2(cnt);
        #pragma unroll 1
        for (int i = cnt + tid; i < P; i += ID_T) buf[i] = 0ull;
        __syncthreads();
        id_bitonic_desc(buf, P, tid);
    } else if (!a.sort_sel) { /* dic_topk_desc's order: bitonic sort, descending */
        const int P = (int)id_p2(cnt);
        #pragma unroll 1
        for (int i = cnt + tid; i < P; i += ID_T) buf[i] = 0ull;
        __syncthreads();
        #pragma unroll 1
        for (int size = 2; size <= P; size <<= 1)
            #pragma unroll 1
            for (int stride = size >> 1; stride > 0; stride >>= 1) {
                #pragma unroll 1
                for (int i = tid; i < P / 2; i += ID_T) {
                    int lo = 2 * i - (i & (stride - 1)), hi = lo + stride;
                    int desc = (lo & size) == 0;
                    unsigned long long x = buf[lo], y = buf[hi];
                    if ((x < y) == desc) {
                        buf[lo] = y;
                        buf[hi] = x;
                    }
                }
                __syncthreads();
            }
    }
    #pragma unroll 1
    for (int i = tid; i < K; i += ID_T) out[i] = i < cnt ? (int)(0xFFFFFFFFu - (uint32_t)(buf[i] & 0xFFFFFFFFull)) : -1;
    if (tid == 0) a.ntopk[m] = cnt;
}

static int g_one_off; /* dic_index_select_one_launch(0): tests / bench */
extern "C" void dic_index_select_one_launch(int on) { g_one_off = !on; }

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
    /* the candidate source too where every row keeps all its blocks (ceil(lds / bs) <= KB: contexts up to
     * KB * bs rows, e.g. 16384 tokens at ratio 1; docs/kernels/index-select.md §1). Both modes: both
     * paths give the CPU's bits (docs/determinism.md §7). */
    const int cand_ok = !a->cand_out || ((lds + (size_t)a->bs - 1) / (size_t)a->bs <= (size_t)a->KB);
    if (!g_one_off && a->M <= ID_MAXM && a->nh <= ISS_MAXH && cand_ok &&
        lds <= ID_SELMAX) { /* decode: one launch */
        const size_t sm1 = id_smem(a->nh, lds, a->K);
        if (sm1 > 48 * 1024 - sizeof(float) * ID_KEYS * (ISS_MAXH + 1) - 2048) {
            cudaError_t e = cudaFuncSetAttribute(k_isel_dec, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)sm1);
            if (e != cudaSuccess) return e;
        }
        dim3 grid((unsigned)((lds + ID_KEYS - 1) / ID_KEYS), (unsigned)a->M);
        DIC_LAUNCH(k_isel_dec, grid, ID_T, sm1, c->stream, *a, score, lds);
        DIC_LAUNCH_CHECK();
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
