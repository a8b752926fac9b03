/* spec_profile.c — the step-cost table of confidence-scheduled speculation, measured at engine
 * start (spec_cost.h; docs/speculative.md): one forward of R rows (every row's logits, as a
 * verify step samples every row) for a few R, and one drafter call for a few request counts,
 * on scratch slots of the state pool before any request runs. The best of two runs counts. */
#include "engine/spec_profile.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static const int k_rows[] = {1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512, 768, 1024};
static const int k_reqs[] = {1, 2, 4, 8};
#define PROFILE_FEED 16 /* rows each drafter slot is fed before drafting */

typedef struct prof {
    di_model *m;
    di_state_pool *pool;
    int32_t *tok;
    int64_t *pos;
    di_seq_state **seq;
    int *lrows;
    float *logits;
    uint16_t *hid;
    size_t hid_elems;
} prof;

static deepinfer_status forward_rows(prof *p, di_seq_state *s, int rows, int with_hidden, di_error *err) {
    di_seq_reset(s, di_model_cfg(p->m));
    for (int i = 0; i < rows; i++) {
        p->tok[i] = 1 + i % 7;
        p->pos[i] = i;
        p->seq[i] = s;
        p->lrows[i] = i;
    }
    di_model_batch b = {.n = rows, .tokens = p->tok, .pos = p->pos, .seq = p->seq, .n_logits = rows,
                        .logit_rows = p->lrows, .logits = p->logits};
    if (with_hidden) di_model_batch_set_draft_hidden(p->m, &b, p->hid);
    return di_model_forward(p->m, &b, err);
}

deepinfer_status di_spec_profile(di_model *m, di_state_pool *pool, int max_rows, int spec_n, di_spec_cost *out,
                                 di_error *err) {
    memset(out, 0, sizeof *out);
    const di_model_config *cfg = di_model_cfg(m);
    int cap = max_rows > PROFILE_FEED ? max_rows : PROFILE_FEED;
    prof p = {.m = m, .pool = pool, .hid_elems = di_model_draft_hidden_elems(m)};
    p.tok = malloc(sizeof(int32_t) * (size_t)cap);
    p.pos = malloc(sizeof(int64_t) * (size_t)cap);
    p.seq = malloc(sizeof(di_seq_state *) * (size_t)cap);
    p.lrows = malloc(sizeof(int) * (size_t)cap);
    p.logits = malloc(sizeof(float) * (size_t)cap * (size_t)cfg->vocab_size);
    p.hid = di_dev_alloc((size_t)cap * p.hid_elems * 2 + 2);
    /* the drafter writes [n][block] ids and confidences (draft.h), block up to the checkpoint's */
    size_t block = (size_t)(di_model_draft_block(m) > 0 ? di_model_draft_block(m) : 1);
    int32_t *ids = malloc(sizeof(int32_t) * 8 * block);
    float *conf = malloc(sizeof(float) * 8 * block);
    int slots[8], ns = 0;
    deepinfer_status st = DEEPINFER_OK;
    if (!p.tok || !p.pos || !p.seq || !p.lrows || !p.logits || !p.hid || !ids || !conf) {
        st = di_error_set(err, DEEPINFER_ERR_OUT_OF_MEMORY, "out of memory profiling the verify cost");
        goto done;
    }
    int s0 = di_pool_slot_acquire(pool);
    if (s0 < 0) goto done;
    slots[ns++] = s0;
    di_seq_state *s = di_pool_seq(pool, s0);
    if (di_pool_grow(pool, s0, 1) || (st = forward_rows(&p, s, 1, 0, err))) goto done; /* warm caches and clocks */
    for (size_t i = 0; i < sizeof k_rows / sizeof *k_rows && k_rows[i] <= max_rows; i++) {
        int r = k_rows[i];
        if (di_pool_grow(pool, s0, r)) break; /* the pool cannot hold it: the last slope goes on */
        double best = 0;
        for (int rep = 0; rep < 2 && !st; rep++) {
            double t0 = now_s();
            st = forward_rows(&p, s, r, 0, err);
            double t = now_s() - t0;
            if (!rep || t < best) best = t;
        }
        if (st) goto done;
        out->rows[out->n] = r;
        out->sec[out->n++] = best;
    }
    /* the drafter: slots fed PROFILE_FEED rows each, then one draft call over n of them */
    int32_t next[PROFILE_FEED];
    for (int i = 0; i < PROFILE_FEED; i++) next[i] = 2 + i % 5;
    for (size_t i = 0; i < sizeof k_reqs / sizeof *k_reqs; i++) {
        int n = k_reqs[i];
        while (ns < n) {
            int sl = di_pool_slot_acquire(pool);
            if (sl < 0) break;
            slots[ns++] = sl;
        }
        if (ns < n) break;
        di_seq_state *seqs[8];
        int n_feed[8], k[8];
        const uint16_t *hidden[8];
        const int32_t *nx[8];
        double best = 0;
        for (int rep = 0; rep < 2 && !st; rep++) {
            for (int q = 0; q < n && !st; q++) {
                if (di_pool_grow(pool, slots[q], PROFILE_FEED)) goto done;
                seqs[q] = di_pool_seq(pool, slots[q]);
                st = forward_rows(&p, seqs[q], PROFILE_FEED - 1, 1, err);
                /* the first PROFILE_FEED - 2 rows feed now, the last one with the draft below */
                di_model_draft pre = {.n = 1, .seq = &seqs[q], .n_feed = (int[]){PROFILE_FEED - 2},
                                      .hidden = (const uint16_t *[]){p.hid}, .next = (const int32_t *[]){next},
                                      .k = (int[]){0}, .ids = ids, .confidence = conf};
                if (!st) st = di_model_draft_step(m, &pre, err);
                n_feed[q] = 1;
                hidden[q] = p.hid + (size_t)(PROFILE_FEED - 2) * p.hid_elems;
                nx[q] = next + PROFILE_FEED - 2;
                k[q] = spec_n;
            }
            if (st) goto done;
            di_model_draft d = {.n = n, .seq = seqs, .n_feed = n_feed, .hidden = hidden, .next = nx, .k = k,
                                .ids = ids, .confidence = conf};
            double t0 = now_s();
            st = di_model_draft_step(m, &d, err);
            double t = now_s() - t0;
            if (!rep || t < best) best = t;
        }
        if (st) goto done;
        out->reqs[out->nd] = n;
        out->dsec[out->nd++] = best;
    }
done:
    /* more rows or more requests never cost less (spec_cost.h interpolates and extrapolates the
     * table); a measurement below an earlier point's is noise and takes the earlier's time */
    for (int i = 1; i < out->n; i++)
        if (out->sec[i] < out->sec[i - 1]) out->sec[i] = out->sec[i - 1];
    for (int i = 1; i < out->nd; i++)
        if (out->dsec[i] < out->dsec[i - 1]) out->dsec[i] = out->dsec[i - 1];
    for (int i = 0; i < ns; i++) di_pool_slot_release(pool, slots[i]);
    free(p.tok), free(p.pos), free(p.seq), free(p.lrows), free(p.logits);
    di_dev_free(p.hid);
    free(ids), free(conf);
    return st;
}
