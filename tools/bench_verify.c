/* bench_verify.c — the verify-cost table (bench_verify.h). Runs on the engine's own model and
 * state pool, before any request, as the engine's steps would (engine_internal.h). */
#include "bench_verify.h"

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "engine/engine_internal.h"
#include "engine/seq_snapshot.h"

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

typedef struct vbuf {
    int32_t *tok;
    int64_t *pos;
    di_seq_state **seq;
    int *lrows;
    float *logits;
} vbuf;

static int fail(deepinfer_engine *e, const char *what, const di_error *err) {
    (void)e;
    fprintf(stderr, "deepinfer bench-engine --verify-cost: %s%s%s\n", what, err && err->msg[0] ? ": " : "",
            err ? err->msg : "");
    return 1;
}

/* Rows [off, off + n) of sequence s at positions p0.. into the buffers (token ids spread over the
 * lower vocabulary). */
static int fill(vbuf *v, int at, di_seq_state *s, int64_t p0, int n, int vocab) {
    for (int i = 0; i < n; i++) {
        v->tok[at + i] = (int32_t)((p0 + i) * 7919 % (vocab * 3 / 4)) + 1;
        v->pos[at + i] = p0 + i;
        v->seq[at + i] = s;
    }
    return at + n;
}

int bench_verify_cost(deepinfer_engine *e, const int *bs, int nb, int prompt, int kmax, int reps) {
    int maxb = 1;
    for (int i = 0; i < nb; i++)
        if (bs[i] > maxb) maxb = bs[i];
    int vocab = (int)e->mcfg->vocab_size, rows_max = maxb * (1 + kmax);
    if (rows_max < prompt) rows_max = prompt;
    vbuf v = {malloc(sizeof(int32_t) * (size_t)rows_max), malloc(sizeof(int64_t) * (size_t)rows_max),
              malloc(sizeof(di_seq_state *) * (size_t)rows_max), malloc(sizeof(int) * (size_t)rows_max),
              malloc(sizeof(float) * (size_t)maxb * (size_t)(1 + kmax) * (size_t)vocab)};
    int *slots = malloc(sizeof(int) * (size_t)maxb);
    int rc = 0;
    if (!v.tok || !v.pos || !v.seq || !v.lrows || !v.logits || !slots) {
        rc = fail(e, "out of memory", NULL);
        goto out;
    }
    printf("verify cost  one forward of B x (1 + k) rows at context %d, every row's logits to the host (the host "
           "sampler's path), with the rollback snapshot; best of %d\n", prompt, reps);
    printf("%6s %4s %7s %12s %11s %11s\n", "batch", "k", "rows", "ms/step", "vs k=0", "ms/row");
    for (int bi = 0; bi < nb; bi++) {
        int B = bs[bi], got = 0;
        di_error err = {0};
        for (; got < B; got++) {
            slots[got] = di_pool_slot_acquire(&e->pool);
            if (slots[got] < 0 || di_pool_grow(&e->pool, slots[got], prompt + kmax + 1)) {
                if (slots[got] >= 0) got++;
                rc = fail(e, "the state pool cannot hold the sequences (lower --prompt or the batch)", NULL);
                goto release;
            }
            di_seq_state *s = di_pool_seq(&e->pool, slots[got]);
            di_seq_reset(s, e->mcfg);
            int n = fill(&v, 0, s, 0, prompt, vocab);
            di_model_batch b = {.n = n, .tokens = v.tok, .pos = v.pos, .seq = v.seq};
            if (di_model_forward(e->model, &b, &err)) {
                got++;
                rc = fail(e, "prefill", &err);
                goto release;
            }
        }
        double base = 0;
        for (int k = 0; k <= kmax; k++) {
            int n = 0;
            for (int q = 0; q < B; q++) n = fill(&v, n, di_pool_seq(&e->pool, slots[q]), prompt, 1 + k, vocab);
            for (int i = 0; i < n; i++) v.lrows[i] = i;
            double best = 0;
            for (int r = 0; r < reps; r++) {
                double t0 = now_s();
                for (int q = 0; q < B; q++)
                    di_seq_snapshot_take(di_pool_seq(&e->pool, slots[q]), e->mcfg, 1 + k,
                                         di_pool_snapshot_room(&e->pool, slots[q]));
                di_model_batch b = {.n = n, .tokens = v.tok, .pos = v.pos, .seq = v.seq, .n_logits = n,
                                    .logit_rows = v.lrows, .logits = v.logits};
                if (di_model_forward(e->model, &b, &err)) {
                    rc = fail(e, "verify forward", &err);
                    goto release;
                }
                double t = now_s() - t0;
                for (int q = 0; q < B && !rc; q++)
                    if (di_seq_snapshot_restore(di_pool_seq(&e->pool, slots[q]), e->mcfg,
                                                di_pool_snapshot_room(&e->pool, slots[q]), &err))
                        rc = fail(e, "rollback", &err);
                if (rc) goto release;
                if (!r || t < best) best = t;
            }
            if (!k) base = best;
            printf("%6d %4d %7d %12.3f %11.3f %11.4f\n", B, k, n, best * 1e3, best / base, best * 1e3 / n);
        }
    release:
        for (int q = 0; q < got; q++)
            if (slots[q] >= 0) di_pool_slot_release(&e->pool, slots[q]);
        if (rc) break;
    }
    if (!rc)
        printf("# per-request speed-up with speculation at mean accepted length tau (committed tokens per verify) "
               "and k drafts per step = tau / (vs k=0) of that row, before the drafter's own time\n");
out:
    free(v.tok), free(v.pos), free(v.seq), free(v.lrows), free(v.logits), free(slots);
    return rc;
}
