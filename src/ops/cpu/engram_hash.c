/*
 * engram_hash.c — Engram hash ids of a step's rows from the tokens and each
 * sequence's class ring (ops.h di_engram_hash_rows; architecture.md §5.8).
 * The arithmetic is that of the host's di_engram_hash_ids
 * (src/model/engram_hash.c): the same products (wrapping int64), the same
 * xor chain, the same remainder with the divisor's sign. The CUDA twin is
 * src/ops/cuda/dic_engram_hash.cu.
 */
#include "ops/cpu/cpu_ops.h"
#include "ops/ops.h"

#define DEAD (-1)  /* the class of a token that takes no part in n-grams (engram_hash.h DI_ENGRAM_DEAD) */
#define MAX_NGRAM 16

static int32_t class_of(const int32_t *map, int32_t n_ids, int32_t t) {
    return t >= 0 && t < n_ids ? map[t] : DEAD;
}

/* Phase 1: every row's ids (reads the rings, writes nothing else). */
static void hash_row(int m, const int32_t *tokens, const int32_t *map, int32_t n_ids, const int64_t *consts,
                     int n_layers, int ng, int nh, int32_t pad, const int64_t *pos, const int *row_seg,
                     const int64_t *seg_pos0, int32_t *const *ring, int ring_len, int64_t *ids) {
    const int nc = (ng - 1) * nh, s = row_seg[m];
    const int64_t p = pos[m], p0 = seg_pos0[s];
    int32_t tok[MAX_NGRAM];
    int blocked = 0;
    for (int sh = 0; sh < ng; sh++) {
        int64_t q = p - sh < 0 ? 0 : p - sh;
        int32_t src = q >= p0 ? class_of(map, n_ids, tokens[m - (int)(p - q)]) : ring[s][q % ring_len];
        blocked |= (p < sh) | (src == DEAD);
        tok[sh] = blocked ? pad : src;
    }
    for (int l = 0; l < n_layers; l++) {
        const int64_t *mult = consts + (size_t)l * (size_t)(ng + 2 * nc), *prime = mult + ng, *off = prime + nc;
        int64_t *out = ids + ((size_t)m * (size_t)n_layers + (size_t)l) * (size_t)nc;
        uint64_t acc = (uint64_t)tok[0] * (uint64_t)mult[0];
        for (int g = 1; g < ng; g++) {
            acc ^= (uint64_t)tok[g] * (uint64_t)mult[g];
            const int64_t hv = (int64_t)acc;
            for (int k = 0; k < nh; k++) {
                const int c = (g - 1) * nh + k;
                int64_t r = hv % prime[c];
                if (r < 0) r += prime[c];
                out[c] = r + off[c];
            }
        }
    }
}

void di_cpu_engram_hash_rows(di_exec *x, int M, const int32_t *tokens, const int32_t *map, int32_t n_ids,
                             const int64_t *consts, int n_layers, int max_ngram, int n_heads, int32_t pad_class,
                             const int64_t *pos, const int *row_seg, const int64_t *seg_pos0, const int *seg_nrows,
                             int32_t *const *ring, int ring_len, int64_t *ids) {
    (void)x;
    if (M <= 0 || max_ngram < 2 || max_ngram > MAX_NGRAM || ring_len < 1) return;
    for (int m = 0; m < M; m++)
        hash_row(m, tokens, map, n_ids, consts, n_layers, max_ngram, n_heads, pad_class, pos, row_seg, seg_pos0, ring,
                 ring_len, ids);
    /* Phase 2: the rings, only after every row has read them (a long chunk's rows would alias
     * the slots of the positions before it); one writer per slot: the segment's last ring_len rows. */
    for (int m = 0; m < M; m++) {
        const int s = row_seg[m];
        if (pos[m] - seg_pos0[s] < (int64_t)seg_nrows[s] - ring_len) continue;
        ring[s][pos[m] % ring_len] = class_of(map, n_ids, tokens[m]);
    }
}
