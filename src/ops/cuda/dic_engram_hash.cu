/*
 * dic_engram_hash.cu — Engram hash ids of a step's rows on the device (ops.h
 * di_engram_hash_rows; architecture.md §5.8; the CPU op is
 * src/ops/cpu/engram_hash.c, the host reference src/model/engram_hash.c
 * di_engram_hash_ids). Integer arithmetic only: the same wrapping int64
 * products, xor chain and remainder with the divisor's sign, so the ids are
 * the CPU's bit for bit.
 *
 * Two kernels in stream order: k_engram_hash (one thread per row and Engram
 * layer) reads the class rings and writes the ids; k_engram_ring (one thread
 * per row) then writes each segment's last ring_len classes. The split keeps
 * a long prefill chunk's rows from overwriting the ring slots of the
 * positions before the chunk while other rows still read them.
 */
#include "ops/cuda/dic_common.cuh"
#include "ops/cuda/dic_model.h"

#define EH_DEAD (-1)
#define EH_MAX_NGRAM 16

static __device__ __forceinline__ int32_t eh_class(const int32_t *map, int32_t n_ids, int32_t t) {
    return t >= 0 && t < n_ids ? map[t] : EH_DEAD;
}

static __global__ void k_engram_hash(int M, const int32_t *tokens, const int32_t *map, int32_t n_ids,
                                     const int64_t *consts, int n_layers, int ng, int nh, int32_t pad,
                                     const int64_t *pos, const int *row_seg, const int64_t *seg_pos0,
                                     int32_t *const *ring, int ring_len, int64_t *ids) {
    DIC_PDL_ENTER();
    const int t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= M * n_layers) return;
    const int m = t / n_layers, l = t % n_layers, nc = (ng - 1) * nh, s = row_seg[m];
    const int64_t p = pos[m], p0 = seg_pos0[s];
    int32_t tok[EH_MAX_NGRAM];
    int blocked = 0;
    for (int sh = 0; sh < ng; sh++) {
        const int64_t q = p - sh < 0 ? 0 : p - sh;
        const int32_t src = q >= p0 ? eh_class(map, n_ids, tokens[m - (int)(p - q)]) : ring[s][q % ring_len];
        blocked |= (p < sh) | (src == EH_DEAD);
        tok[sh] = blocked ? pad : src;
    }
    const int64_t *mult = consts + (size_t)l * (size_t)(ng + 2 * nc), *prime = mult + ng, *off = prime + nc;
    int64_t *out = ids + ((size_t)m * (size_t)n_layers + (size_t)l) * (size_t)nc;
    unsigned long long acc = (unsigned long long)(long long)tok[0] * (unsigned long long)mult[0];
    for (int g = 1; g < ng; g++) {
        acc ^= (unsigned long long)(long long)tok[g] * (unsigned long long)mult[g];
        const long long hv = (long long)acc;
        for (int k = 0; k < nh; k++) {
            const int c = (g - 1) * nh + k;
            long long r = hv % (long long)prime[c];
            if (r < 0) r += prime[c];
            out[c] = r + off[c];
        }
    }
}

static __global__ void k_engram_ring(int M, const int32_t *tokens, const int32_t *map, int32_t n_ids,
                                     const int64_t *pos, const int *row_seg, const int64_t *seg_pos0,
                                     const int *seg_nrows, int32_t *const *ring, int ring_len) {
    DIC_PDL_ENTER();
    const int m = blockIdx.x * blockDim.x + threadIdx.x;
    if (m >= M) return;
    const int s = row_seg[m];
    if (pos[m] - seg_pos0[s] < (int64_t)seg_nrows[s] - ring_len) return; /* a later row owns the slot */
    ring[s][pos[m] % ring_len] = eh_class(map, n_ids, tokens[m]);
}

extern "C" cudaError_t dic_engram_hash_rows(const dic_ctx *c, int M, const int32_t *tokens, const int32_t *map,
                                            int32_t n_ids, const int64_t *consts, int n_layers, int max_ngram,
                                            int n_heads, int32_t pad_class, const int64_t *pos, const int *row_seg,
                                            const int64_t *seg_pos0, const int *seg_nrows, int32_t *const *ring,
                                            int ring_len, int64_t *ids) {
    if (M <= 0 || n_layers <= 0) return cudaSuccess;
    if (max_ngram < 2 || max_ngram > EH_MAX_NGRAM || ring_len < 1) return cudaErrorInvalidValue;
    const int n = M * n_layers, B = 128;
    DIC_LAUNCH(k_engram_hash, (n + B - 1) / B, B, 0, c->stream, M, tokens, map, n_ids, consts, n_layers, max_ngram,
               n_heads, pad_class, pos, row_seg, seg_pos0, ring, ring_len, ids);
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) return e;
    DIC_LAUNCH(k_engram_ring, (M + B - 1) / B, B, 0, c->stream, M, tokens, map, n_ids, pos, row_seg, seg_pos0,
               seg_nrows, ring, ring_len);
    DIC_LAUNCH_CHECK();
}
