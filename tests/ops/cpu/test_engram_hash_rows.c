/* The ops' Engram hash (ops.h di_engram_hash_rows, src/ops/cpu/engram_hash.c) against the host's
 * di_engram_hash_ids, bitwise, on random step streams (tests/ops/engram_hash_cases.h): chunked
 * prefill longer than the class ring, several sequences per step, speculative rollbacks. */
#include <stdio.h>

#include "ops/engram_hash_cases.h"
#include "ops/ops.h"

typedef struct cpu_rings {
    int32_t ring[EHC_SEQS][64];
} cpu_rings;

static int cpu_step(void *ctx, const ehc_env *e, int M, const int32_t *tokens, const int64_t *pos, const int *row_seg,
                    const int64_t *seg_pos0, const int *seg_nrows, const int *seg_seq, int nseg, int64_t *ids) {
    cpu_rings *r = ctx;
    int32_t *ring[EHC_SEQS];
    for (int s = 0; s < nseg; s++) ring[s] = r->ring[seg_seq[s]];
    di_engram_hash_rows(NULL, M, tokens, e->map, EHC_NIDS, e->consts, e->h.n_layers, e->h.max_ngram, e->h.n_heads,
                        e->h.pad_class, pos, row_seg, seg_pos0, seg_nrows, ring, e->ring_len, ids);
    return 1;
}

TEST(engram_hash_rows_cpu_matches_host) {
    ehc_env e;
    CHECK(ehc_env_init(&e, 5));
    cpu_rings r;
    memset(&r, 0x5A, sizeof r); /* never-written slots are never read */
    long rows = 0, bad = ehc_run(&e, 12345, 300, cpu_step, &r, &rows);
    CHECK_MSG(bad == 0, "%ld of the ids of %ld rows differ from di_engram_hash_ids", bad, rows);
    CHECK(rows > 1000);
    ehc_env_free(&e);
}

/* The same streams with a ring of only max_ngram - 1 slots: the rejected rows of a rollback
 * overwrite classes a later step reads, so ids must differ (the ring rule is what the test checks). */
TEST(engram_hash_rows_short_ring_fails) {
    ehc_env e;
    CHECK(ehc_env_init(&e, 5));
    e.ring_len = e.h.max_ngram - 1;
    cpu_rings r;
    memset(&r, 0, sizeof r);
    long rows = 0, bad = ehc_run(&e, 12345, 300, cpu_step, &r, &rows);
    CHECK_MSG(bad > 0, "a %d-slot ring gave the host's ids through %ld rows with rollbacks", e.ring_len, rows);
    ehc_env_free(&e);
}
