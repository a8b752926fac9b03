/*
 * dic_sample.cu — greedy argmax and the full sampler on the device, one CTA
 * of 1024 threads per row, matching src/engine/sampler.c di_sample_row's
 * token for the same inputs.
 *
 * Every per-id value (penalised logit, z / temperature, Gumbel noise, the
 * top-p masses) is computed with the CPU's fp32/fp64 operations, so the
 * only order-dependent steps are maxima and selections, which use total
 * orders (value, then lower id) and so do not depend on the reduction tree.
 * top_k: radix select of the k-th best 64-bit key (value order, ~id). top_p:
 * the best candidates come in sorted chunks of 1024 and thread 0 adds their
 * masses in the CPU's order (by z desc, id asc); only the total mass is a
 * tree sum (the CPU sums by ascending id), see dic.h.
 */
#include "ops/cuda/dic_common.cuh"

#define SP_T 1024

/* ---- block reductions (1024 threads) ---------------------------------- */

/* (value, id) with "a better than b": larger value, then smaller id. */
static __device__ __forceinline__ bool better(float x, int a, float y, int b) {
    return b < 0 || (a >= 0 && (x > y || (x == y && a < b)));
}

static __device__ void block_argmax(float *v, int *i, float *sv, int *si) {
    for (int o = 16; o > 0; o >>= 1) {
        float ov = __shfl_xor_sync(0xFFFFFFFFu, *v, o);
        int oi = __shfl_xor_sync(0xFFFFFFFFu, *i, o);
        if (better(ov, oi, *v, *i)) {
            *v = ov;
            *i = oi;
        }
    }
    __syncthreads();
    if ((threadIdx.x & 31) == 0) {
        sv[threadIdx.x >> 5] = *v;
        si[threadIdx.x >> 5] = *i;
    }
    __syncthreads();
    *v = sv[threadIdx.x & 31];
    *i = si[threadIdx.x & 31];
    for (int o = 16; o > 0; o >>= 1) {
        float ov = __shfl_xor_sync(0xFFFFFFFFu, *v, o);
        int oi = __shfl_xor_sync(0xFFFFFFFFu, *i, o);
        if (better(ov, oi, *v, *i)) {
            *v = ov;
            *i = oi;
        }
    }
}

static __device__ int block_sum_int(int x, int *sh) {
    for (int o = 16; o > 0; o >>= 1) x += __shfl_xor_sync(0xFFFFFFFFu, x, o);
    __syncthreads();
    if ((threadIdx.x & 31) == 0) sh[threadIdx.x >> 5] = x;
    __syncthreads();
    x = sh[threadIdx.x & 31];
    for (int o = 16; o > 0; o >>= 1) x += __shfl_xor_sync(0xFFFFFFFFu, x, o);
    return x;
}

/* A fixed tree: the same bits on every run. */
static __device__ double block_sum_double(double x, double *sh) {
    for (int o = 16; o > 0; o >>= 1) x = __dadd_rn(x, __shfl_xor_sync(0xFFFFFFFFu, x, o));
    __syncthreads();
    if ((threadIdx.x & 31) == 0) sh[threadIdx.x >> 5] = x;
    __syncthreads();
    x = sh[threadIdx.x & 31];
    for (int o = 16; o > 0; o >>= 1) x = __dadd_rn(x, __shfl_xor_sync(0xFFFFFFFFu, x, o));
    return x;
}

/* ---- a row's best candidate over several CTAs ------------------------- */

/* At small M one CTA per row leaves most SMs idle while it streams a 129k-id
 * row; the row is cut into SP_SPLIT slices of whole float4
 * groups, each CTA finds its slice's best (value, id) and candidate count,
 * and the last CTA of the row to arrive (integer atomic on a per-row counter
 * it resets for the next launch) combines them. "better" is a total order
 * and the count an integer sum, so the result is the one-CTA pass's bit for
 * bit whatever the arrival order. The counters and partials are one set per
 * device: launches of these kernels must not run concurrently with each
 * other (the model and the engine sample on one stream). */
#define SP_SPLIT_MAXM 32
#define SP_SPLIT_MAX 16
static __device__ unsigned g_sp_cnt[SP_SPLIT_MAXM];
static __device__ float g_sp_v[SP_SPLIT_MAXM * SP_SPLIT_MAX];
static __device__ int g_sp_i[SP_SPLIT_MAXM * SP_SPLIT_MAX];
static __device__ int g_sp_n[SP_SPLIT_MAXM * SP_SPLIT_MAX];

/* Slices per row at M rows: enough CTAs to cover the SMs at small M, 1 from 128 rows (or past the
 * partials' table). */
static int sp_slices(int M) {
    if (M > SP_SPLIT_MAXM) return 1;
    int s = 128 / M;
    return s < 1 ? 1 : s > SP_SPLIT_MAX ? SP_SPLIT_MAX : s;
}

/* [g0, g1): this slice's float4 groups of a row of nv groups (the tail past 4 * nv goes to the last
 * slice). */
static __device__ __forceinline__ void sp_slice(int nv, int slice, int ns, int *g0, int *g1) {
    const int per = (nv + ns - 1) / ns;
    *g0 = min(nv, slice * per);
    *g1 = min(nv, *g0 + per);
}

/* Called by every thread of the CTA after block_argmax / block_sum_int gave the slice's (bv, bi,
 * ncand) to all threads. Returns 1 in the row's last CTA, with (bv, bi, ncand) the whole row's. */
static __device__ int sp_combine(int m, int slice, int ns, float *bv, int *bi, int *ncand) {
    __shared__ int last;
    if (threadIdx.x == 0) {
        g_sp_v[m * SP_SPLIT_MAX + slice] = *bv;
        g_sp_i[m * SP_SPLIT_MAX + slice] = *bi;
        g_sp_n[m * SP_SPLIT_MAX + slice] = *ncand;
        __threadfence();
        const unsigned prev = atomicAdd(&g_sp_cnt[m], 1u);
        last = prev == (unsigned)(ns - 1);
        if (last) {
            g_sp_cnt[m] = 0;
            __threadfence();
        }
    }
    __syncthreads();
    if (!last) return 0;
    float v = -INFINITY;
    int i = -1, n = 0;
    for (int k = 0; k < ns; k++) { /* the slices in order; any order gives the same result */
        const float ov = __ldcg(&g_sp_v[m * SP_SPLIT_MAX + k]);
        const int oi = __ldcg(&g_sp_i[m * SP_SPLIT_MAX + k]);
        n += __ldcg(&g_sp_n[m * SP_SPLIT_MAX + k]);
        if (better(ov, oi, v, i)) v = ov, i = oi;
    }
    *bv = v, *bi = i, *ncand = n;
    return 1;
}

/* ---- greedy argmax ---------------------------------------------------- */

/* NaN counts as -inf (the sampler's rule); ties and an all -inf row go to
 * the lowest id. */
static __global__ void __launch_bounds__(SP_T) k_argmax(const float *logits, size_t ld, int V, int32_t *ids, int vec) {
    DIC_PDL_ENTER();
    __shared__ float sv[32];
    __shared__ int si[32];
    const int m = blockIdx.y, slice = blockIdx.x, ns = gridDim.x;
    const float *l = logits + (size_t)m * ld;
    float bv = -INFINITY;
    int bi = -1;
    if (vec) { /* each thread's ids ascend, so strict > keeps the lowest */
        int g0, g1;
        sp_slice(V / 4, slice, ns, &g0, &g1);
        /* 4 groups in flight per thread, then taken in ascending j (the one-group loop's order);
         * the outer loop rolled (small code) */
#pragma unroll 1
        for (int j0 = g0 + threadIdx.x; j0 < g1; j0 += 4 * SP_T) {
            float4 q[4];
#pragma unroll
            for (int u = 0; u < 4; u++)
                if (j0 + u * SP_T < g1) q[u] = ((const float4 *)l)[j0 + u * SP_T];
#pragma unroll
            for (int u = 0; u < 4; u++) {
                const int j = j0 + u * SP_T;
                if (j >= g1) break;
                const float a[4] = {q[u].x, q[u].y, q[u].z, q[u].w};
#pragma unroll
                for (int t = 0; t < 4; t++) {
                    float x = a[t] != a[t] ? -INFINITY : a[t];
                    if (bi < 0 || x > bv) {
                        bv = x;
                        bi = 4 * j + t;
                    }
                }
            }
        }
        if (slice == ns - 1)
#pragma unroll 1
            for (int j = V / 4 * 4 + threadIdx.x; j < V; j += SP_T) {
                float x = l[j] != l[j] ? -INFINITY : l[j];
                if (better(x, j, bv, bi)) {
                    bv = x;
                    bi = j;
                }
            }
    } else { /* unaligned rows: one slice */
#pragma unroll 1
        for (int j = threadIdx.x; j < V; j += SP_T) {
            float x = l[j] != l[j] ? -INFINITY : l[j];
            if (bi < 0 || x > bv) {
                bv = x;
                bi = j;
            }
        }
    }
    block_argmax(&bv, &bi, sv, si);
    int n = 0;
    if (ns > 1 && !sp_combine(m, slice, ns, &bv, &bi, &n)) return;
    if (threadIdx.x == 0) ids[m] = bi < 0 ? 0 : bi;
}

extern "C" cudaError_t dic_argmax(const dic_ctx *c, int M, const float *logits, size_t ld, int V, int32_t *ids) {
    if (M <= 0) return cudaSuccess;
    int vec = ld % 4 == 0 && ((uintptr_t)logits & 15) == 0;
    const dim3 grid((unsigned)(vec ? sp_slices(M) : 1), (unsigned)M);
    DIC_LAUNCH(k_argmax, grid, SP_T, 0, c->stream, logits, ld, V, ids, vec);
    DIC_LAUNCH_CHECK();
}

static __global__ void k_feed_tokens(int n, const int32_t *tok_src, const int32_t *prev, int32_t *out) {
    DIC_PDL_ENTER();
    const int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= n) return;
    const int s = tok_src[n + r];
    int v = tok_src[r];
    if (s >= 0) {
        v = prev[s];
        if (v < 0) v = 0; /* a row without a token: its request fails; feed a valid id */
    }
    out[r] = v;
}

extern "C" cudaError_t dic_feed_tokens(const dic_ctx *c, int n, const int32_t *tok_src, const int32_t *prev,
                                       int32_t *out) {
    if (n <= 0) return cudaSuccess;
    DIC_LAUNCH(k_feed_tokens, (n + 255) / 256, 256, 0, c->stream, n, tok_src, prev, out);
    DIC_LAUNCH_CHECK();
}

/* ---- full sampler ----------------------------------------------------- */

size_t dic_sample_rows_scratch(int M, int V) {
    size_t row = ((size_t)V * 8 + 255) & ~(size_t)255;
    return (size_t)(M > 0 ? M : 0) * row;
}

/* Ranking key: larger = ranks first (z desc, then id asc). -0 counts as +0. */
static __device__ __forceinline__ uint64_t rank_key(float z, int v) {
    if (z == 0.0f) z = 0.0f;
    uint32_t u = __float_as_uint(z);
    uint32_t o = (u & 0x80000000u) ? ~u : (u | 0x80000000u);
    return ((uint64_t)o << 32) | (uint32_t)(0xFFFFFFFFu - (uint32_t)v);
}

typedef struct sp_shared {
    uint32_t hist[256];
    float sv[32];
    int si[32];
    int sint[32];
    double sdbl[32];
    uint64_t key[SP_T];
    double mass[SP_T];
    uint64_t thr;
    int bin, need, stop, ngath;
} sp_shared;

/* The key thr with exactly `need` candidates in [thr, ub) (need >= 1 and at
 * most the candidates there; keys are distinct). 8-bit radix passes, top
 * byte first; stops as soon as a whole prefix bucket is wanted. */
static __device__ uint64_t select_thr(const float *z, const uint32_t *fl, int V, int need, uint64_t ub, sp_shared *sh) {
    uint64_t prefix = 0, mask = 0;
    for (int shift = 56; shift >= 0; shift -= 8) {
        for (int b = threadIdx.x; b < 256; b += SP_T) sh->hist[b] = 0;
        __syncthreads();
        for (int v = threadIdx.x; v < V; v += SP_T) {
            if (!fl[v]) continue;
            uint64_t k = rank_key(z[v], v);
            if (k < ub && (k & mask) == prefix) atomicAdd(&sh->hist[(k >> shift) & 255], 1u);
        }
        __syncthreads();
        if (threadIdx.x == 0) {
            int above = 0, b = 255;
            for (; b > 0; b--) {
                if (above + (int)sh->hist[b] >= need) break;
                above += (int)sh->hist[b];
            }
            sh->bin = b;
            sh->need = need - above;
            sh->stop = (int)sh->hist[b] == need - above;
        }
        __syncthreads();
        prefix |= (uint64_t)sh->bin << shift;
        mask |= (uint64_t)255 << shift;
        need = sh->need;
        int stop = sh->stop;
        __syncthreads();
        if (stop) break;
    }
    return prefix;
}

/* A candidate of the host sampler's step 2 (sampler.c): finite after NaN -> -inf, allowed by the mask,
 * and not EOS / a stop id while min_tokens blocks them. */
static __device__ __forceinline__ bool is_cand(float x, int v, const dic_sample_params &P, bool block_stop) {
    bool cand = x != -INFINITY && (!P.allow_mask || ((P.allow_mask[v >> 5] >> (v & 31)) & 1u));
    if (cand && block_stop) {
        if (v == P.eos_id) cand = false;
#pragma unroll 1 /* rare (min_tokens): keep each inlined copy small */
        for (int i = 0; i < P.n_stop_ids; i++) cand = cand && P.stop_ids[i] != v;
    }
    return cand;
}

/* Temperature 0 without penalties: the candidate with the largest logit, ties to the lowest id (the
 * host's strict > over ascending ids), -1 without candidates. The same candidates and order as the
 * general path below; 16-byte loads, 4 in flight per thread. Slice `slice` of `ns` of the row
 * (sp_slice); with ns > 1 the row's last CTA to finish writes the id (sp_combine).
 * LEAN (k_sample_greedy): the same (id, count) with less code (see the branch). */
template <int LEAN>
static __device__ __forceinline__ void greedy_row(const float *lg, int V, const dic_sample_params &P,
                                                  bool block_stop, int32_t *id, int *sint, float *sv, int *si, int m,
                                                  int slice, int ns) {
    const int t = threadIdx.x;
    float bv = -INFINITY;
    int bi = -1, ncand = 0;
    const bool vec = ((uintptr_t)lg & 15) == 0;
    const int nv = vec ? V / 4 : 0;
    const float4 *l4 = (const float4 *)lg;
    int g0 = 0, g1 = nv;
    if (ns > 1) sp_slice(nv, slice, ns, &g0, &g1);
    if constexpr (LEAN) {
    /* better() is a total order and ncand a count: any visiting order gives the same (bi, ncand).
     * Common rows (no allow_mask, no stop ids to block): the candidates are the ids whose logit is
     * not -inf (NaN counts as -inf), 4 groups in flight per thread; other rows: is_cand per id, one
     * group at a time (rare, kept small). */
    if (!P.allow_mask && !block_stop) {
#pragma unroll 1
        for (int j0 = g0 + t; j0 < g1; j0 += 4 * SP_T) {
            float4 q[4];
#pragma unroll
            for (int u = 0; u < 4; u++)
                if (j0 + u * SP_T < g1) q[u] = __ldg(l4 + j0 + u * SP_T);
#pragma unroll
            for (int u = 0; u < 4; u++) {
                const int j = j0 + u * SP_T;
                if (j >= g1) break;
                const float a[4] = {q[u].x, q[u].y, q[u].z, q[u].w};
#pragma unroll
                for (int k = 0; k < 4; k++) {
                    const float x = a[k] != a[k] ? -INFINITY : a[k];
                    const int v = 4 * j + k;
                    if (x != -INFINITY) {
                        ncand++;
                        if (better(x, v, bv, bi)) bv = x, bi = v;
                    }
                }
            }
        }
    } else {
#pragma unroll 1
        for (int j = g0 + t; j < g1; j += SP_T) {
            const float4 q = __ldg(l4 + j);
            const float a[4] = {q.x, q.y, q.z, q.w};
#pragma unroll
            for (int k = 0; k < 4; k++) {
                const float x = a[k] != a[k] ? -INFINITY : a[k];
                const int v = 4 * j + k;
                if (is_cand(x, v, P, block_stop)) {
                    ncand++;
                    if (better(x, v, bv, bi)) bv = x, bi = v;
                }
            }
        }
    }
    if (slice == ns - 1)
#pragma unroll 1
        for (int v = 4 * nv + t; v < V; v += SP_T) {
            const float x = lg[v] != lg[v] ? -INFINITY : lg[v];
            if (is_cand(x, v, P, block_stop)) {
                ncand++;
                if (better(x, v, bv, bi)) bv = x, bi = v;
            }
        }
    } else {
    for (int j0 = g0 + t; j0 < g1; j0 += 4 * SP_T) {
        float4 q[4];
#pragma unroll
        for (int u = 0; u < 4; u++)
            if (j0 + u * SP_T < g1) q[u] = __ldg(l4 + j0 + u * SP_T);
#pragma unroll
        for (int u = 0; u < 4; u++) {
            const int j = j0 + u * SP_T;
            if (j >= g1) break;
            const float a[4] = {q[u].x, q[u].y, q[u].z, q[u].w};
#pragma unroll
            for (int k = 0; k < 4; k++) {
                const float x = a[k] != a[k] ? -INFINITY : a[k];
                const int v = 4 * j + k;
                if (is_cand(x, v, P, block_stop)) {
                    ncand++;
                    if (better(x, v, bv, bi)) bv = x, bi = v;
                }
            }
        }
    }
    if (slice == ns - 1)
        for (int v = 4 * nv + t; v < V; v += SP_T) {
            const float x = lg[v] != lg[v] ? -INFINITY : lg[v];
            if (is_cand(x, v, P, block_stop)) {
                ncand++;
                if (better(x, v, bv, bi)) bv = x, bi = v;
            }
        }
    }
    ncand = block_sum_int(ncand, sint);
    block_argmax(&bv, &bi, sv, si);
    if (ns > 1 && !sp_combine(m, slice, ns, &bv, &bi, &ncand)) return;
    if (t == 0) *id = ncand == 0 ? -1 : bi;
}

static __global__ void __launch_bounds__(SP_T) k_sample(const float *logits, size_t ld, int V,
                                                       const dic_sample_params *params, int32_t *ids, char *scratch,
                                                       size_t row_bytes) {
    DIC_PDL_ENTER();
    __shared__ sp_shared sh;
    const int m = blockIdx.y, t = threadIdx.x, slice = blockIdx.x, ns = gridDim.x;
    const dic_sample_params P = params[m];
    const float *lg = logits + (size_t)m * ld;
    float *z = (float *)(scratch + (size_t)m * row_bytes);
    uint32_t *fl = (uint32_t *)(z + V);
    const bool rep = P.repetition_penalty != 1.0f;
    const bool pf = P.presence_penalty != 0.0f || P.frequency_penalty != 0.0f;
    const bool block_stop = P.min_tokens > P.n_output;
    const bool greedy = P.temperature == 0.0f;

    if (greedy && !rep && !pf) { /* the best candidate in one pass over the row, nothing stored */
        greedy_row<0>(lg, V, P, block_stop, ids + m, sh.sint, sh.sv, sh.si, m, slice, ns);
        return;
    }
    if (slice) return; /* the general path: one CTA per row */

    /* 1. penalties on the raw logits (each distinct id once) */
    for (int v = t; v < V; v += SP_T) {
        float x = lg[v];
        z[v] = x != x ? -INFINITY : x;
        fl[v] = 0;
    }
    __syncthreads();
    if (rep || pf) {
        for (int i = t; i < P.n_output; i += SP_T) {
            int id = P.output_ids[i];
            if (id >= 0 && id < V) atomicAdd(&fl[id], 1u);
        }
        if (rep)
            for (int i = t; i < P.n_prompt; i += SP_T) {
                int id = P.prompt_ids[i];
                if (id >= 0 && id < V) atomicOr(&fl[id], 0x80000000u);
            }
        __syncthreads();
    }
    /* 2. candidates (fl = 1), 3. temperature; greedy argmax / zmax */
    int ncand = 0;
    float bv = -INFINITY;
    int bi = -1;
    for (int v = t; v < V; v += SP_T) {
        float x = z[v];
        uint32_t f = fl[v];
        if (f) {
            uint32_t cnt = f & 0x7FFFFFFFu;
            if (cnt > 65535u) cnt = 65535u;
            if (rep) x = x > 0 ? x / P.repetition_penalty : x * P.repetition_penalty;
            if (pf && cnt) x -= P.frequency_penalty * (float)cnt + P.presence_penalty;
        }
        const bool cand = is_cand(x, v, P, block_stop);
        if (cand && !greedy) x = x / P.temperature;
        z[v] = x;
        fl[v] = cand;
        if (cand) {
            ncand++;
            if (better(x, v, bv, bi)) {
                bv = x;
                bi = v;
            }
        }
    }
    ncand = block_sum_int(ncand, sh.sint);
    block_argmax(&bv, &bi, sh.sv, sh.si);
    if (ncand == 0 || greedy) {
        if (t == 0) ids[m] = ncand == 0 ? -1 : bi;
        return;
    }
    const float zmax = bv; /* the max of z over the candidates */
    __syncthreads();

    /* min_p: keep z >= zmax + ln(min_p) (in double) */
    if (P.min_p > 0.0f) {
        const double cut = __dadd_rn((double)zmax, P.log_min_p);
        int n = 0;
        for (int v = t; v < V; v += SP_T)
            if (fl[v]) {
                if ((double)z[v] >= cut) n++;
                else fl[v] = 0;
            }
        ncand = block_sum_int(n, sh.sint);
    }
    /* top_k: keep the k best */
    if (P.top_k > 0 && P.top_k < ncand) {
        uint64_t thr = select_thr(z, fl, V, P.top_k, ~(uint64_t)0, &sh);
        for (int v = t; v < V; v += SP_T)
            if (fl[v] && rank_key(z[v], v) < thr) fl[v] = 0;
        ncand = P.top_k;
        __syncthreads();
    }
    /* top_p: smallest prefix (z desc, id asc) whose mass reaches top_p * total */
    if (P.top_p < 1.0f) {
        float zm = -INFINITY;
        for (int v = t; v < V; v += SP_T)
            if (fl[v] && z[v] > zm) zm = z[v];
        int dummy = 0;
        block_argmax(&zm, &dummy, sh.sv, sh.si);
        const double zmx = (double)zm;
        double tot = 0.0;
        for (int v = t; v < V; v += SP_T)
            if (fl[v]) tot = __dadd_rn(tot, exp(__dadd_rn((double)z[v], -zmx)));
        tot = block_sum_double(tot, sh.sdbl);
        const double target = __dmul_rn((double)P.top_p, tot);
        uint64_t ub = ~(uint64_t)0, keep_from = 0;
        int remaining = ncand;
        double mass = 0.0; /* thread 0's running sum */
        for (;;) {
            int cnum = remaining < SP_T ? remaining : SP_T;
            uint64_t thr = select_thr(z, fl, V, cnum, ub, &sh);
            if (t == 0) sh.ngath = 0;
            sh.key[t] = 0;
            __syncthreads();
            for (int v = t; v < V; v += SP_T) {
                if (!fl[v]) continue;
                uint64_t k = rank_key(z[v], v);
                if (k >= thr && k < ub) sh.key[atomicAdd(&sh.ngath, 1)] = k;
            }
            __syncthreads();
            /* bitonic sort, descending */
            for (int size = 2; size <= SP_T; size <<= 1)
                for (int stride = size >> 1; stride > 0; stride >>= 1) {
                    int p = t ^ stride;
                    if (p > t) {
                        uint64_t a = sh.key[t], b = sh.key[p];
                        bool desc = (t & size) == 0;
                        if (desc ? a < b : a > b) {
                            sh.key[t] = b;
                            sh.key[p] = a;
                        }
                    }
                    __syncthreads();
                }
            if (t < cnum) {
                int v = (int)(0xFFFFFFFFu - (uint32_t)sh.key[t]);
                sh.mass[t] = exp(__dadd_rn((double)z[v], -zmx));
            }
            __syncthreads();
            if (t == 0) {
                int found = 0;
                for (int i = 0; i < cnum; i++) {
                    mass = __dadd_rn(mass, sh.mass[i]);
                    if (mass >= target) {
                        sh.thr = sh.key[i];
                        found = 1;
                        break;
                    }
                }
                if (!found) sh.thr = remaining == cnum ? thr : 0;
                sh.stop = found || remaining == cnum;
            }
            __syncthreads();
            int stop = sh.stop;
            keep_from = sh.thr;
            __syncthreads();
            if (stop) break;
            ub = thr;
            remaining -= cnum;
        }
        for (int v = t; v < V; v += SP_T)
            if (fl[v] && rank_key(z[v], v) < keep_from) fl[v] = 0;
        __syncthreads();
    }
    /* Gumbel-max over the survivors; ids below zmax - (g_max - g_min) never win */
    const float gmin = dic_gumbel_from_bits(0u), gmax = dic_gumbel_from_bits(0xFFFFFFFFu);
    const float cut = zmax - (gmax - gmin);
    bv = -INFINITY;
    bi = -1;
    for (int v = t; v < V; v += SP_T) {
        if (!fl[v] || z[v] < cut) continue;
        float s = z[v] + dic_gumbel_at(P.seed, P.stream, P.position, P.purpose, (uint32_t)v);
        if (better(s, v, bv, bi)) {
            bv = s;
            bi = v;
        }
    }
    block_argmax(&bv, &bi, sh.sv, sh.si);
    if (t == 0) ids[m] = bi;
}

/* k_sample for launches whose rows are all greedy without penalties (the host knows the params:
 * dic_sample_rows_greedy): greedy_row alone, the code k_sample runs for such rows, so the same ids;
 * a small kernel (the step starts every kernel with a cold instruction cache). */
static __global__ void __launch_bounds__(SP_T) k_sample_greedy(const float *logits, size_t ld, int V,
                                                               const dic_sample_params *params, int32_t *ids) {
    DIC_PDL_ENTER();
    __shared__ float sv[32];
    __shared__ int si[32], sint[32];
    const int m = blockIdx.y, slice = blockIdx.x, ns = gridDim.x;
    const dic_sample_params P = params[m];
    greedy_row<1>(logits + (size_t)m * ld, V, P, P.min_tokens > P.n_output, ids + m, sint, sv, si, m, slice, ns);
}

extern "C" cudaError_t dic_sample_rows_greedy(const dic_ctx *c, int M, const float *logits, size_t ld, int V,
                                              const dic_sample_params *params, int32_t *ids) {
    if (M <= 0) return cudaSuccess;
    if (V <= 0) return cudaErrorInvalidValue;
    const dim3 grid((unsigned)sp_slices(M), (unsigned)M);
    DIC_LAUNCH(k_sample_greedy, grid, SP_T, 0, c->stream, logits, ld, V, params, ids);
    DIC_LAUNCH_CHECK();
}

extern "C" cudaError_t dic_sample_rows(const dic_ctx *c, int M, const float *logits, size_t ld, int V,
                                       const dic_sample_params *params, int32_t *ids) {
    if (M <= 0) return cudaSuccess;
    if (V <= 0 || !c->scratch || c->scratch_cap < dic_sample_rows_scratch(M, V)) return cudaErrorInvalidValue;
    size_t row = dic_sample_rows_scratch(1, V);
    const dim3 grid((unsigned)sp_slices(M), (unsigned)M); /* slices serve the greedy rows only */
    DIC_LAUNCH(k_sample, grid, SP_T, 0, c->stream, logits, ld, V, params, ids, (char *)c->scratch, row);
    DIC_LAUNCH_CHECK();
}
