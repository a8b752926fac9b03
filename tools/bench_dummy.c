/* bench_dummy.c — `deepinfer bench --dummy` (bench_dummy.h).
 *
 * Order of work (progress on stderr, the table last on stdout):
 *  1. reduced config in a temp dir, the random checkpoint's handle (tools/dummy/dummy.h), the
 *     library's load plan (di_model_plan: weights by format, workspace, backend contexts, the
 *     sequences' states as a reserve) printed, refused before the load when it does not fit;
 *  2. normal load (config + checkpoint), temp dir removed; device memory in use after it vs the
 *     plan, and the peak host RSS (VmHWM);
 *  3. probes: copy bandwidth (CUDA: 2 GiB cudaMemcpy D2D, read + written; CPU: the read probe)
 *     and FP8 GEMM rate (CUDA: dic_gemm 8192^3, batch-invariant kernels = the forward's path,
 *     and the fastest path for reference);
 *  4. prefill: each --prefill length as one sequence's prompt, one forward call (split into
 *     --rows sub-batches by the forward), one logits row; with --yoco-compact the same prompt
 *     again in compact prefill (batch.late_from = L - keep on every row, model/batch.h); the
 *     --prompt prefill is kept (exact);
 *  5. decode, for each --prompt context (a list: one load serves several contexts): the base
 *     sequence prefilled to it, then for each batch size B, B sequences forked (di_seq_copy)
 *     from it, one untimed step, then --decode timed steps of B rows (one token per sequence);
 *  6. CUDA: decode again through the recorded-step loop (src/engine/greedy_loop.h: step plan +
 *     one CUDA graph per shape, device argmax; docs/cuda-backend.md §6), after every eager
 *     figure (a failed capture leaves the exec's error set): B sequences forked again, --decode + 1
 *     greedy steps, the first (the capture) untimed; ms/step = GPU time from step 1's start to
 *     the last step's end / --decode (cudaEvents, so the host's gaps count), idle = that span
 *     minus the steps' busy time. A case the loop refuses prints its reason and keeps the eager
 *     row only.
 * --modes (CUDA): steps 4-6 twice on the same loaded model, the first pass in the batch-invariant
 *   mode, the second in the fast mode (di_backend_set_batch_invariant_live switches every exec and
 *   drops recorded graphs), each pass's table, then every figure's invariant / fast time ratio
 *   (bench_table.h); the CPU backend has one mode, so --modes is refused there.
 * Floors: decode = bench_decode_bytes / copy bandwidth; prefill = (linear + attention + head
 * FLOPs) / FP8 rate (bench_floor.h). */
#include "bench_dummy.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bench_floor.h"
#include "bench_table.h"
#include "cli_model.h"
#include "engine/greedy_loop.h"
#include "engine/seq_snapshot.h"
#include "io/safetensors.h"
#include "model/load_plan.h"
#include "model/dsv41_compact.h"
#include "model/model.h"
#include "dummy/dummy.h"
#include "ops/backend.h"
#include "ops/ops.h"
#include "util/sysmem.h"

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static double t_start;
#define PROGRESS(...) (fprintf(stderr, "[%7.1fs] ", now_s() - t_start), fprintf(stderr, __VA_ARGS__), fputc('\n', stderr))

static int32_t text_token(const di_model_config *c, int64_t t) {
    int32_t v = (int32_t)(t % c->vocab_size);
    return v == c->image_token_id ? (int32_t)((v + 1) % c->vocab_size) : v;
}

static void rm_dir(const char *dir) {
    const char *files[] = {"config.json", "engram_token_map.json", "engram_hash.json"};
    char p[4200];
    for (int i = 0; i < 3; i++) snprintf(p, sizeof p, "%s/%s", dir, files[i]), unlink(p);
    rmdir(dir);
}

typedef struct bufs {
    int32_t *tok;
    int64_t *pos;
    di_seq_state **rowseq;
    int *rows;
    float *logits;
    int64_t *late; /* compact prefill's late_from per row */
} bufs;

/* One forward: rows [0, n) of sequences rowseq, logits for `nl` rows (the last nl); late: compact
 * prefill's late_from per row, or NULL (exact). */
static deepinfer_status step_late(cli_model *m, bufs *k, int n, int nl, const int64_t *late, di_error *err) {
    for (int i = 0; i < nl; i++) k->rows[i] = n - nl + i;
    di_v4_batch b = {.n = n, .tokens = k->tok, .pos = k->pos, .seq = k->rowseq, .n_logits = nl,
                     .logit_rows = k->rows, .logits = k->logits, .late_from = late};
    return m->sm.forward(m->sm.model, &b, err);
}

static deepinfer_status step(cli_model *m, bufs *k, int n, int nl, di_error *err) {
    return step_late(m, k, n, nl, NULL, err);
}

/* Prefill `seq` (reset) with L tokens; seconds. keep > 0: compact prefill with that tail. */
static deepinfer_status prefill_mode(cli_model *m, bufs *k, di_seq_state *seq, int L, int64_t keep, double *sec,
                                     di_error *err) {
    const di_model_config *c = m->sm.cfg;
    di_seq_reset(seq, c);
    for (int i = 0; i < L; i++) {
        k->tok[i] = text_token(c, (int64_t)i * 7919 + 13), k->pos[i] = i, k->rowseq[i] = seq;
        if (keep > 0) k->late[i] = L > keep ? L - keep : 0;
    }
    double t0 = now_s();
    deepinfer_status st = step_late(m, k, L, 1, keep > 0 ? k->late : NULL, err);
    if (di_dev_exec() && !st) st = di_exec_sync(di_dev_exec(), err);
    *sec = now_s() - t0;
    return st;
}

static deepinfer_status prefill(cli_model *m, bufs *k, di_seq_state *seq, int L, double *sec, di_error *err) {
    return prefill_mode(m, k, seq, L, 0, sec, err);
}

static double gb(double b) { return b / 1e9; }

/* What one pass needs besides the arguments: the model, the buffers, the sequences (maxb + 1, the last
 * the prefill / base sequence), the recorded-step loop's view of the model (made on first use). */
typedef struct pass {
    cli_model *m;
    bufs *b;
    di_seq_state **seqs;
    int maxb, cuda, gr_host_ids;
    int64_t keep;
    di_model **dm;
    const char *tag; /* "" or " [invariant]" / " [fast]" in the progress lines */
} pass;

/* Steps 4-6 of the header: prefill, eager decode, recorded decode, into f. */
static deepinfer_status measure(const bench_dummy_args *a, const pass *ps, bench_figs *f, di_error *err) {
    cli_model *m = ps->m;
    bufs *bp = ps->b;
    bufs b = *bp;
    di_seq_state **seqs = ps->seqs;
    const di_model_config *c = m->sm.cfg;
    const int maxb = ps->maxb;
    const int64_t keep = ps->keep;
    const char *tag = ps->tag;
    deepinfer_status st;
    di_seq_state *base = seqs[maxb];
    double t;
    if ((st = prefill(m, &b, base, 16, &t, err))) return st; /* warm-up */
    for (int i = 0; i < a->np; i++) {
        if ((st = prefill(m, &b, base, a->prefill[i], &f->pf_s[i], err))) return st;
        PROGRESS("prefill %d tokens%s: %.3f s (%.0f tokens/s)", a->prefill[i], tag, f->pf_s[i],
                 a->prefill[i] / f->pf_s[i]);
        if (!keep) continue;
        if (i == 0 && (st = prefill_mode(m, &b, base, 16, keep, &t, err))) return st; /* warm-up */
        if ((st = prefill_mode(m, &b, base, a->prefill[i], keep, &f->pfc_s[i], err))) return st;
        PROGRESS("prefill %d tokens, compact (keep %lld)%s: %.3f s (%.0f tokens/s, %.2fx exact)", a->prefill[i],
                 (long long)keep, tag, f->pfc_s[i], a->prefill[i] / f->pfc_s[i], f->pf_s[i] / f->pfc_s[i]);
    }
    for (int ci = 0; ci < a->nprompt; ci++) {
        const int P = a->prompts[ci];
        if ((st = prefill(m, &b, base, P, &t, err))) return st;
        PROGRESS("prompt of %d tokens prefilled (%.3f s)", P, t);
        for (int i = 0; i < a->nb; i++) {
            int B = a->batches[i];
            for (int s = 0; s < B; s++)
                if ((st = di_seq_copy(seqs[s], base, c, err))) return st;
            if (di_dev_exec() && (st = di_exec_sync(di_dev_exec(), err))) return st;
            double td = 0;
            for (int it = 0; it <= a->decode; it++) {
                for (int s = 0; s < B; s++) {
                    b.tok[s] = text_token(c, (int64_t)it * 31 + (int64_t)s * 104729 + 5);
                    b.pos[s] = P + it;
                    b.rowseq[s] = seqs[s];
                }
                double t1 = now_s();
                if ((st = step(m, &b, B, B, err))) return st;
                if (it) td += now_s() - t1; /* step 0 warms this shape */
            }
            f->dec_s[ci][i] = td / a->decode;
            PROGRESS("decode batch %d at context %d%s: %.2f ms/step (%.0f tokens/s)", B, P, tag, f->dec_s[ci][i] * 1e3,
                     B / f->dec_s[ci][i]);
        }
        if (!ps->cuda) continue;
        /* recorded steps (CUDA) through the model API */
        if (!*ps->dm) *ps->dm = di_model_borrow(m->v4, m->v41);
        di_model *dm = *ps->dm;
        int S = a->decode + 1;
        float *busy = calloc((size_t)S, sizeof *busy), *start = calloc((size_t)S, sizeof *start);
        int32_t *first = calloc((size_t)maxb, sizeof *first);
        for (int i = 0; i < a->nb; i++) {
            int B = a->batches[i];
            di_error ge = {0};
            deepinfer_status gs = DEEPINFER_OK;
            if (!dm || !busy || !start || !first)
                gs = di_error_set(&ge, DEEPINFER_ERR_OUT_OF_MEMORY, "out of memory");
            for (int s = 0; s < B && !gs; s++) {
                gs = di_seq_copy(seqs[s], base, c, &ge);
                first[s] = text_token(c, (int64_t)s * 104729 + 5); /* distinct rows, as in the eager steps */
            }
            if (!gs && di_dev_exec()) gs = di_exec_sync(di_dev_exec(), &ge);
            di_greedy_loop L = {.model = dm, .nseq = B, .seq = seqs, .first = first, .steps = S, .graph = 1,
                                .busy_ms = busy, .start_ms = start};
            if (!gs) gs = di_greedy_loop_run(&L, &ge);
            if (gs) {
                snprintf(f->gr_why[ci][i], sizeof f->gr_why[ci][i], "%s", ge.msg[0] ? ge.msg : "failed");
                PROGRESS("decode batch %d (graph)%s: not measured: %s; eager figure only", B, tag, f->gr_why[ci][i]);
                continue;
            }
            double span = (double)start[S - 1] + busy[S - 1] - start[1], sb = 0; /* steps 1..S-1 */
            for (int tt = 1; tt < S; tt++) sb += busy[tt];
            f->gr_s[ci][i] = span / 1e3 / a->decode;
            f->gr_busy[ci][i] = sb / 1e3 / a->decode;
            f->gr_idle[ci][i] = span > 0 ? 100.0 * (span - sb) / span : 0;
            PROGRESS("decode batch %d at context %d (graph)%s: %.2f ms/step (%.0f tokens/s), busy %.2f ms/step, GPU "
                     "idle %.1f%%, %d graph(s)%s", B, P, tag, f->gr_s[ci][i] * 1e3, B / f->gr_s[ci][i],
                     f->gr_busy[ci][i] * 1e3, f->gr_idle[ci][i], L.ngraphs,
                     ps->gr_host_ids ? ", ids read back every step (host Engram hash / image token)" : "");
        }
        free(busy), free(start), free(first);
    }
    return DEEPINFER_OK;
}

int bench_dummy_run(const bench_dummy_args *a) {
    t_start = now_s();
    di_error err = {0};
    di_backend_kind bk;
    if (di_backend_select(a->backend, &bk, &err) || di_backend_use(bk, &err)) {
        fprintf(stderr, "deepinfer bench: %s\n", err.msg);
        return 1;
    }
    if (a->modes && bk != DI_BACKEND_CUDA) {
        fprintf(stderr, "error: --modes compares the CUDA backend's batch-invariant and fast modes; the %s backend has "
                "one mode (every kernel batch-invariant, docs/determinism.md §0): run with --backend cuda, or "
                "without --modes\n", di_backend_name(bk));
        return 2;
    }
    int maxb = 1, maxl = a->prompt;
    for (int i = 0; i < a->nb; i++) maxb = a->batches[i] > maxb ? a->batches[i] : maxb;
    for (int i = 0; i < a->np; i++) maxl = a->prefill[i] > maxl ? a->prefill[i] : maxl;
    int64_t ctx = (int64_t)(a->prompt + a->decode + 8 > maxl ? a->prompt + a->decode + 8 : maxl);
    int rows = a->rows > maxb ? a->rows : maxb;

    char dir[] = "/tmp/deepinfer-dummy-XXXXXX";
    if (!mkdtemp(dir)) return fprintf(stderr, "deepinfer bench: cannot create a temp directory\n"), 1;
    di_dummy_info info;
    di_model_config cfg;
    bench_costs k;
    int64_t keep = a->yoco_compact ? (a->yoco_keep > 0 ? a->yoco_keep : 140) : 0;
    if (di_dummy_write_dir_ex(a->config, a->layers, a->experts, dir, &info, &err) || di_config_load(dir, &cfg, &err) ||
        bench_costs_compute(&cfg, &k, &err) ||
        (keep && di_v41_compact_check(&cfg, keep, cfg.drafter == DI_DRAFTER_DSPARK ? cfg.dspark_block_size : 0, &err))) {
        rm_dir(dir);
        fprintf(stderr, "deepinfer bench: %s\n", err.msg);
        return 1;
    }
    if (keep)
        fprintf(stderr, "compact prefill: layers %d..%d (after the last KV source) on each prompt's last %lld tokens\n",
                di_v41_late_layer(&cfg), (int)cfg.n_layers - 1, (long long)keep);
    fprintf(stderr, "dummy %s (%s): %d layers kept, original indices", a->config, di_arch_name(cfg.arch),
            info.n_layers);
    for (int i = 0; i < info.n_layers && i < 64; i++) fprintf(stderr, " %d", info.kept[i]);
    fprintf(stderr, "; compress_ratios");
    for (int i = 0; i < cfg.n_layers + cfg.n_stages; i++) fprintf(stderr, " %d", cfg.layers[i].ratio);
    fprintf(stderr, " (%d drafter stage(s), not run); hash layers %lld", cfg.n_stages, (long long)cfg.num_hash_layers);
    if (info.engram_vocab)
        fprintf(stderr, "; Engram at %d layer(s), engram_vocab_size %lld (tables %lld rows)", cfg.n_engram_layer_ids,
                (long long)info.engram_vocab, (long long)cfg.engram_num_embeddings[0]);
    fputc('\n', stderr);
    /* the library's load plan (model/load_plan.h), computed from the config and the checkpoint's
     * tensor list before anything large is allocated; the states of the benchmark's sequences are
     * declared as the caller's reserve (backend memory) */
    double state_seq = bench_state_bytes(&cfg, ctx), states = state_seq * (maxb + 1);
    di_safetensors *st = NULL;
    if (di_dummy_weights(&cfg, a->seed, &st, &err)) {
        rm_dir(dir);
        fprintf(stderr, "deepinfer bench: %s\n", err.msg);
        return 1;
    }
    di_load_plan lp;
    memset(&lp, 0, sizeof lp);
    di_model_options po = {.max_rows = rows, .max_context = ctx, .reserve_device = (uint64_t)states};
    deepinfer_status pst = di_model_plan(dir, &po, st, &lp, &err);
    char ptxt[2048] = "";
    di_load_plan_format(&lp, "  ", ptxt, sizeof ptxt);
    fprintf(stderr, "memory plan (%s), before the load:\n%s", a->backend, ptxt);
    fprintf(stderr, "  states: %d decode sequences + 1 prefill at %lld tokens: %.3f GB each, %.2f GB (reserved)\n",
            maxb, (long long)ctx, gb(state_seq), gb(states));
    if (pst || a->plan_only) {
        rm_dir(dir);
        di_st_close(st);
        if (pst) fprintf(stderr, "deepinfer bench: %s\n", err.msg);
        return pst ? 1 : 0;
    }

    PROGRESS("loading through the normal chain (spec check, plan, streamed upload)");
    size_t f0 = 0, t0b = 0, f1 = 0;
    int dev = bk == DI_BACKEND_CUDA && di_backend_mem_info(&f0, &t0b) == 0;
    di_v4_options opt = {.max_rows = rows, .max_context = ctx, .weights = st, .reserve_device = (uint64_t)states};
    cli_model m;
    deepinfer_status lst = cli_model_load(dir, &opt, &m, &err);
    rm_dir(dir);
    if (lst) {
        di_st_close(st);
        fprintf(stderr, "deepinfer bench: %s\n", err.msg);
        return 1;
    }
    size_t ws = m.v4 ? di_v4_workspace_bytes(m.v4) : di_v41_workspace_bytes(m.v41);
    double planned = (double)(lp.device_need - lp.reserve_device); /* the states are not allocated yet */
    if (dev && di_backend_mem_info(&f1, &t0b) == 0)
        PROGRESS("loaded: device memory in use after the load %.2f GB vs plan %.2f GB (%.3f); workspace %.2f GB, "
                 "%.1f GB free; peak host RSS %.2f GB (VmHWM)", gb((double)(f0 - f1)), gb(planned),
                 planned > 0 ? (double)(f0 - f1) / planned : 0.0, gb((double)ws), gb((double)f1),
                 gb((double)di_proc_peak_rss()));
    else
        PROGRESS("loaded (workspace %.2f GB; host plan %.2f GB); peak host RSS %.2f GB (VmHWM)", gb((double)ws),
                 gb((double)lp.host_need), gb((double)di_proc_peak_rss()));
    if (dev && states > 0.95 * (double)f1) {
        fprintf(stderr, "deepinfer bench: does not fit: the states need %.1f GB (%d sequences x %.3f GB at %lld "
                "tokens), %.1f GB free after the load; use a smaller --batch or --prompt\n", gb(states), maxb + 1,
                gb(state_seq), (long long)ctx, gb((double)f1));
        cli_model_free(&m);
        di_st_close(st);
        return 1;
    }
    const di_model_config *c = m.sm.cfg;

    /* probes */
    double bw, rate = -1, rate_fast = -1, triad;
    if (bk == DI_BACKEND_CUDA) {
        bw = di_backend_copy_gbs((size_t)2 << 30);
        rate = di_backend_fp8_tflops(8192, 1);
        rate_fast = di_backend_fp8_tflops(8192, 0);
    } else {
        bench_measure_bw(&bw, &triad);
    }
    PROGRESS("probes: copy bandwidth %.0f GB/s, FP8 GEMM %.0f TFLOP/s (forward's kernels), %.0f (fastest)", bw, rate,
             rate_fast);

    bufs b = {0};
    int nrow = maxl > maxb ? maxl : maxb;
    b.tok = malloc(sizeof(int32_t) * (size_t)nrow);
    b.pos = malloc(sizeof(int64_t) * (size_t)nrow);
    b.rowseq = malloc(sizeof(*b.rowseq) * (size_t)nrow);
    b.rows = malloc(sizeof(int) * (size_t)nrow);
    b.logits = malloc(sizeof(float) * (size_t)c->vocab_size * (size_t)maxb);
    b.late = malloc(sizeof(int64_t) * (size_t)nrow);
    di_seq_state **seqs = calloc((size_t)maxb + 1, sizeof *seqs);
    const int nmode = a->modes ? 2 : 1;
    bench_figs *F = calloc((size_t)nmode, sizeof *F);
    int gr_host_ids = c->n_engram_layer_ids > 0 || c->image_token_id >= 0;
    di_model *dm = NULL; /* the recorded-step loop's view of the model (di_model_borrow) */
    int rc = 1;
    if (!b.tok || !b.pos || !b.rowseq || !b.rows || !b.logits || !b.late || !seqs || !F) {
        di_error_set(&err, DEEPINFER_ERR_OUT_OF_MEMORY, "out of memory");
        goto out;
    }
    for (int s = 0; s <= maxb; s++)
        if (m.sm.seq_new(m.sm.model, &seqs[s], &err)) goto out;
    for (int md = 0; md < nmode; md++) { /* --modes: pass 0 batch-invariant, pass 1 fast, on the same model */
        static const char *const TAG[2] = {" [invariant]", " [fast]"};
        if (a->modes) {
            int n = di_backend_set_batch_invariant_live(md == 0);
            PROGRESS("mode %s: %d exec(s) switched, recorded graphs dropped", md == 0 ? "batch-invariant" : "fast", n);
        }
        pass ps = {.m = &m, .b = &b, .seqs = seqs, .maxb = maxb, .cuda = bk == DI_BACKEND_CUDA,
                   .gr_host_ids = gr_host_ids, .keep = keep, .dm = &dm, .tag = a->modes ? TAG[md] : ""};
        if (measure(a, &ps, &F[md], &err)) goto out;
    }
    if (a->modes) di_backend_set_batch_invariant_live(-1);

    for (int md = 0; md < nmode; md++)
        bench_print_table(a, c, &k, bw, rate, rate_fast, keep, bk == DI_BACKEND_CUDA, gr_host_ids, &F[md],
                          a->modes ? (md ? "fast" : "batch-invariant") : NULL);
    if (a->modes) bench_print_modes(a, keep, bk == DI_BACKEND_CUDA, F);
    fflush(stdout);
    PROGRESS("done");
    rc = 0;
out:
    if (rc) fprintf(stderr, "deepinfer bench: %s\n", err.msg);
    for (int s = 0; seqs && s <= maxb; s++) di_seq_destroy(seqs[s]);
    free(seqs);
    free(F);
    di_model_free(dm);
    free(b.tok), free(b.pos), free(b.rowseq), free(b.rows), free(b.logits), free(b.late);
    cli_model_free(&m);
    di_st_close(st);
    return rc;
}
