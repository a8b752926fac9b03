/* engram_hash_cases.h — random step streams for the ops' Engram hash (ops.h di_engram_hash_rows),
 * shared by the CPU test (tests/ops/cpu/test_engram_hash_rows.c) and the GPU test
 * (tests/ops/cuda/gtest_engram_hash.c). The reference is the host's di_engram_hash_ids
 * (src/model/engram_hash.c) run per sequence with its own history; the op under test sees only
 * the step's tokens, its row / segment tables and a class ring per sequence. Streams mix
 * prefill chunks longer than the ring, decode rows, several sequences per step in shuffled
 * order, and speculative-style steps that write k rows and keep j < k of them (the reference
 * truncates its history, the op's ring is left as it is: seq_state.h di_seq_engram_ring). */
#ifndef TESTS_OPS_ENGRAM_HASH_CASES_H
#define TESTS_OPS_ENGRAM_HASH_CASES_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "model/config.h"
#include "model/engram_hash.h"
#include "test.h"

#define EHC_SEQS 4
#define EHC_MAX_ROWS 96
#define EHC_NIDS 700

typedef struct ehc_env {
    di_model_config cfg;
    di_engram_hash h;
    int32_t map[EHC_NIDS];  /* token -> class */
    int64_t *consts;        /* the op's constants (ops.h layout), host */
    size_t n_consts;
    int ring_len, max_draft;
} ehc_env;

/* The hash under test for one step: fills ids [M][n_layers * n_cols]; seg_seq[s] names the
 * sequence (0..EHC_SEQS-1) whose ring segment s uses. */
typedef int (*ehc_step_fn)(void *ctx, const ehc_env *e, int M, const int32_t *tokens, const int64_t *pos,
                           const int *row_seg, const int64_t *seg_pos0, const int *seg_nrows, const int *seg_seq,
                           int nseg, int64_t *ids);

static uint64_t ehc_rand(uint64_t *s) {
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

/* The released V4.1 layout (built-in multipliers), a token map of EHC_NIDS ids spread over the
 * 99092 classes with repeats, pad class = map[2]. max_draft sizes the ring as the state does. */
static int ehc_env_init(ehc_env *e, int max_draft) {
    memset(e, 0, sizeof *e);
    di_error err;
    if (di_config_load(di_test_data("config/deepseek-v41-flash.json"), &e->cfg, &err)) return 0;
    uint64_t s = 0x9E3779B97F4A7C15ull;
    for (int t = 0; t < EHC_NIDS; t++)
        e->map[t] = t < 40 ? t : (int32_t)(ehc_rand(&s) % (uint64_t)e->cfg.engram_compressed_vocab_size);
    e->map[41] = e->map[7]; /* shared classes */
    e->map[500] = e->map[300];
    if (di_engram_hash_init(&e->h, &e->cfg, NULL, e->map[2], &err)) return 0;
    const int ng = e->h.max_ngram, nc = e->h.n_cols, per = ng + 2 * nc;
    e->n_consts = (size_t)e->h.n_layers * (size_t)per;
    e->consts = malloc(e->n_consts * sizeof *e->consts);
    if (!e->consts) return 0;
    for (int l = 0; l < e->h.n_layers; l++) {
        int64_t *r = e->consts + (size_t)l * (size_t)per;
        for (int g = 0; g < ng; g++) r[g] = e->h.multipliers[l][g];
        for (int c = 0; c < nc; c++) r[ng + c] = e->h.primes[l][c], r[ng + nc + c] = e->h.offsets[l][c];
    }
    e->max_draft = max_draft;
    e->cfg.max_draft = max_draft;
    e->ring_len = ng - 1 + max_draft + 1; /* seq_state.c di_seq_engram_ring */
    return 1;
}

static void ehc_env_free(ehc_env *e) { free(e->consts); }

/* Run `steps` random steps; returns the number of ids that differ from the reference (and
 * counts in *rows the rows compared). */
static long ehc_run(const ehc_env *e, uint64_t seed, int steps, ehc_step_fn fn, void *ctx, long *rows) {
    const int per = e->h.n_layers * e->h.n_cols;
    di_engram_seq ref[EHC_SEQS];
    int64_t len[EHC_SEQS];
    for (int q = 0; q < EHC_SEQS; q++) di_engram_seq_init(&ref[q]), len[q] = 0;
    int32_t tokens[EHC_MAX_ROWS], cls[EHC_MAX_ROWS];
    int64_t pos[EHC_MAX_ROWS], seg_pos0[EHC_SEQS];
    int row_seg[EHC_MAX_ROWS], seg_nrows[EHC_SEQS], seg_seq[EHC_SEQS], keep[EHC_SEQS];
    int64_t *ids = malloc((size_t)EHC_MAX_ROWS * per * sizeof *ids), *want = malloc((size_t)EHC_MAX_ROWS * per * sizeof *want);
    long bad = 0;
    uint64_t s = seed;
    di_error err;
    for (int st = 0; st < steps && ids && want; st++) {
        int order[EHC_SEQS] = {0, 1, 2, 3};
        for (int i = EHC_SEQS - 1; i > 0; i--) { /* shuffled sequence order */
            int j = (int)(ehc_rand(&s) % (uint64_t)(i + 1)), t = order[i];
            order[i] = order[j], order[j] = t;
        }
        int nseg = 1 + (int)(ehc_rand(&s) % EHC_SEQS), M = 0;
        for (int k = 0; k < nseg; k++) {
            int q = order[k], kind = (int)(ehc_rand(&s) % 4), n;
            if (kind == 0) n = 1 + (int)(ehc_rand(&s) % 20);                   /* prefill chunk, often > ring */
            else if (kind == 1) n = 1;                                          /* decode */
            else n = 1 + (int)(ehc_rand(&s) % (uint64_t)(e->max_draft + 1)); /* verify: 1 + drafts */
            seg_seq[k] = q, seg_pos0[k] = len[q], seg_nrows[k] = n;
            keep[k] = kind >= 2 ? 1 + (int)(ehc_rand(&s) % (uint64_t)n) : n; /* rows the step keeps */
            for (int i = 0; i < n; i++) {
                /* small ids often: repeated n-grams; a few tokens of shared classes */
                tokens[M] = (int32_t)(ehc_rand(&s) % 4 ? ehc_rand(&s) % 60 : ehc_rand(&s) % EHC_NIDS);
                pos[M] = len[q] + i, row_seg[M] = k;
                M++;
            }
        }
        memset(ids, 0xFF, (size_t)M * per * sizeof *ids);
        if (!fn(ctx, e, M, tokens, pos, row_seg, seg_pos0, seg_nrows, seg_seq, nseg, ids)) {
            free(ids), free(want);
            return -1;
        }
        for (int k = 0, r0 = 0; k < nseg; r0 += seg_nrows[k], k++) {
            int q = seg_seq[k], n = seg_nrows[k];
            for (int i = 0; i < n; i++) cls[i] = e->map[tokens[r0 + i]];
            if (di_engram_hash_ids(&e->h, &ref[q], len[q], cls, n, want + (size_t)r0 * per, &err)) {
                free(ids), free(want);
                return -1;
            }
            for (size_t i = 0; i < (size_t)n * per; i++) {
                if (ids[(size_t)r0 * per + i] == want[(size_t)r0 * per + i]) continue;
                if (bad < 5)
                    fprintf(stderr, "  step %d seq %d row %zu (pos %lld) col %zu: op %lld, host %lld\n", st, q,
                            i / per, (long long)(len[q] + (int64_t)(i / per)), i % per,
                            (long long)ids[(size_t)r0 * per + i], (long long)want[(size_t)r0 * per + i]);
                bad++;
            }
            *rows += n;
            len[q] += keep[k]; /* a rollback: the rejected rows are forgotten, the ring is not touched */
            if (keep[k] < n && di_engram_seq_truncate(&ref[q], len[q], e->h.max_ngram, &err)) {
                free(ids), free(want);
                return -1;
            }
        }
    }
    free(ids), free(want);
    return bad;
}

#endif
