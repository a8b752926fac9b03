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
 * Floors: decode = bench_decode_bytes / copy bandwidth; prefill = (linear + attention + head
 * FLOPs) / FP8 rate (bench_floor.h). */
#include "bench_dummy.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bench_floor.h"
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

int bench_dummy_run(const bench_dummy_args *a) {
    t_start = now_s();
    di_error err = {0};
    di_backend_kind bk;
    if (di_backend_select(a->backend, &bk, &err) || di_backend_use(bk, &err)) {
        fprintf(stderr, "deepinfer bench: %s\n", err.msg);
        return 1;
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
    double pf_s[BENCH_MAX_SWEEP] = {0}, pfc_s[BENCH_MAX_SWEEP] = {0}, dec_s[BENCH_MAX_SWEEP][BENCH_MAX_SWEEP] = {{0}};
    /* recorded steps (CUDA), per context and batch */
    double gr_s[BENCH_MAX_SWEEP][BENCH_MAX_SWEEP] = {{0}}, gr_busy[BENCH_MAX_SWEEP][BENCH_MAX_SWEEP] = {{0}},
           gr_idle[BENCH_MAX_SWEEP][BENCH_MAX_SWEEP] = {{0}};
    static char gr_why[BENCH_MAX_SWEEP][BENCH_MAX_SWEEP][DI_ERROR_MSG_MAX];
    memset(gr_why, 0, sizeof gr_why);
    int gr_host_ids = c->n_engram_layer_ids > 0 || c->image_token_id >= 0;
    di_model *dm = NULL; /* the recorded-step loop's view of the model (di_model_borrow) */
    int rc = 1;
    if (!b.tok || !b.pos || !b.rowseq || !b.rows || !b.logits || !b.late || !seqs) {
        di_error_set(&err, DEEPINFER_ERR_OUT_OF_MEMORY, "out of memory");
        goto out;
    }
    for (int s = 0; s <= maxb; s++)
        if (m.sm.seq_new(m.sm.model, &seqs[s], &err)) goto out;
    di_seq_state *base = seqs[maxb];
    double t;
    if (prefill(&m, &b, base, 16, &t, &err)) goto out; /* warm-up */
    for (int i = 0; i < a->np; i++) {
        if (prefill(&m, &b, base, a->prefill[i], &pf_s[i], &err)) goto out;
        PROGRESS("prefill %d tokens: %.3f s (%.0f tokens/s)", a->prefill[i], pf_s[i], a->prefill[i] / pf_s[i]);
        if (!keep) continue;
        if (i == 0 && prefill_mode(&m, &b, base, 16, keep, &t, &err)) goto out; /* warm-up */
        if (prefill_mode(&m, &b, base, a->prefill[i], keep, &pfc_s[i], &err)) goto out;
        PROGRESS("prefill %d tokens, compact (keep %lld): %.3f s (%.0f tokens/s, %.2fx exact)", a->prefill[i],
                 (long long)keep, pfc_s[i], a->prefill[i] / pfc_s[i], pf_s[i] / pfc_s[i]);
    }
    for (int ci = 0; ci < a->nprompt; ci++) {
        const int P = a->prompts[ci];
        if (prefill(&m, &b, base, P, &t, &err)) goto out;
        PROGRESS("prompt of %d tokens prefilled (%.3f s)", P, t);
        for (int i = 0; i < a->nb; i++) {
            int B = a->batches[i];
            for (int s = 0; s < B; s++)
                if (di_seq_copy(seqs[s], base, c, &err)) goto out;
            if (di_dev_exec() && di_exec_sync(di_dev_exec(), &err)) goto out;
            double td = 0;
            for (int it = 0; it <= a->decode; it++) {
                for (int s = 0; s < B; s++) {
                    b.tok[s] = text_token(c, (int64_t)it * 31 + (int64_t)s * 104729 + 5);
                    b.pos[s] = P + it;
                    b.rowseq[s] = seqs[s];
                }
                double t1 = now_s();
                if (step(&m, &b, B, B, &err)) goto out;
                if (it) td += now_s() - t1; /* step 0 warms this shape */
            }
            dec_s[ci][i] = td / a->decode;
            PROGRESS("decode batch %d at context %d: %.2f ms/step (%.0f tokens/s)", B, P, dec_s[ci][i] * 1e3,
                     B / dec_s[ci][i]);
        }
        if (bk != DI_BACKEND_CUDA) continue;
        /* recorded steps (CUDA) through the model API */
        if (!dm) dm = di_model_borrow(m.v4, m.v41);
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
                snprintf(gr_why[ci][i], sizeof gr_why[ci][i], "%s", ge.msg[0] ? ge.msg : "failed");
                PROGRESS("decode batch %d (graph): not measured: %s; eager figure only", B, gr_why[ci][i]);
                continue;
            }
            double span = (double)start[S - 1] + busy[S - 1] - start[1], sb = 0; /* steps 1..S-1 */
            for (int tt = 1; tt < S; tt++) sb += busy[tt];
            gr_s[ci][i] = span / 1e3 / a->decode;
            gr_busy[ci][i] = sb / 1e3 / a->decode;
            gr_idle[ci][i] = span > 0 ? 100.0 * (span - sb) / span : 0;
            PROGRESS("decode batch %d at context %d (graph): %.2f ms/step (%.0f tokens/s), busy %.2f ms/step, GPU "
                     "idle %.1f%%, %d graph(s)%s", B, P, gr_s[ci][i] * 1e3, B / gr_s[ci][i], gr_busy[ci][i] * 1e3,
                     gr_idle[ci][i], L.ngraphs,
                     gr_host_ids ? ", ids read back every step (host Engram hash / image token)" : "");
        }
        free(busy), free(start), free(first);
    }

    /* the table */
    printf("# deepinfer bench --dummy %s --layers %d --backend %s (%s, hidden %lld, %lld experts, top-%lld)\n",
           a->config, a->layers, a->backend, di_arch_name(c->arch), (long long)c->hidden_size,
           (long long)c->n_routed_experts, (long long)c->num_experts_per_tok);
    if (bk == DI_BACKEND_CUDA)
        printf("# ceilings: copy %.0f GB/s (2 GiB cudaMemcpy D2D, read + written); FP8 %.1f TFLOP/s (dic_gemm 8192^3, "
               "batch-invariant kernels as in the forward; fastest path %.1f)\n", bw, rate, rate_fast);
    else
        printf("# ceilings: read bandwidth %.1f GB/s (3 x 128 MiB, all threads); no FP8 rate on the CPU\n", bw);
    printf("%-28s %14s %14s %14s %8s %9s\n", "figure", "measured", "floor", "work", "ratio", "GPU idle");
    for (int i = 0; i < a->np; i++) {
        int64_t L = a->prefill[i];
        double fl = (k.linear_flops * (double)L + bench_attn_flops(c, L) + k.head_flops);
        double floor_s = rate > 0 ? fl / (rate * 1e12) : -1;
        char fig[40], meas[32], flo[32], work[32];
        snprintf(fig, sizeof fig, "prefill %lld", (long long)L);
        snprintf(meas, sizeof meas, "%.0f tok/s", (double)L / pf_s[i]);
        if (floor_s > 0) snprintf(flo, sizeof flo, "%.0f tok/s", (double)L / floor_s);
        else snprintf(flo, sizeof flo, "n/a");
        snprintf(work, sizeof work, "%.2f TFLOP", fl / 1e12);
        char ratio[16] = "-";
        if (floor_s > 0) snprintf(ratio, sizeof ratio, "%.3f", floor_s / pf_s[i]);
        printf("%-28s %14s %14s %14s %8s %9s\n", fig, meas, flo, work, ratio, "-");
        if (!keep) continue;
        snprintf(fig, sizeof fig, "prefill %lld compact", (long long)L);
        snprintf(meas, sizeof meas, "%.0f tok/s", (double)L / pfc_s[i]);
        snprintf(ratio, sizeof ratio, "%.2fx", pf_s[i] / pfc_s[i]);
        printf("%-28s %14s %14s %14s %8s %9s\n", fig, meas, "-", "-", ratio, "-");
    }
    if (keep)
        printf("# compact: layers %d..%d on each prompt's last %lld tokens (--yoco-keep-tokens; architecture.md 6.5); "
               "its ratio = compact tokens/s over exact tokens/s, same run\n",
               di_v41_late_layer(c), (int)c->n_layers - 1, (long long)keep);
    for (int ci = 0; ci < a->nprompt; ci++) {
        const int P = a->prompts[ci];
        for (int i = 0; i < a->nb; i++) {
            int B = a->batches[i];
            double bytes = bench_decode_bytes(c, &k, B, P);
            double floor_s = bytes / (bw * 1e9);
            char fig[40], meas[32], flo[32], work[32];
            snprintf(fig, sizeof fig, "decode b%d ctx %d", B, P);
            snprintf(meas, sizeof meas, "%.2f ms %.0f t/s", dec_s[ci][i] * 1e3, B / dec_s[ci][i]);
            snprintf(flo, sizeof flo, "%.2f ms", floor_s * 1e3);
            snprintf(work, sizeof work, "%.2f GB", bytes / 1e9);
            printf("%-28s %14s %14s %14s %8.3f %9s\n", fig, meas, flo, work, floor_s / dec_s[ci][i], "-");
            if (bk != DI_BACKEND_CUDA) continue;
            snprintf(fig, sizeof fig, "decode b%d ctx %d (graph)", B, P);
            if (gr_why[ci][i][0]) {
                printf("%-28s not measured: %s\n", fig, gr_why[ci][i]);
                continue;
            }
            char idle[16];
            snprintf(meas, sizeof meas, "%.2f ms %.0f t/s", gr_s[ci][i] * 1e3, B / gr_s[ci][i]);
            snprintf(idle, sizeof idle, "%.1f%%", gr_idle[ci][i]);
            printf("%-28s %14s %14s %14s %8.3f %9s\n", fig, meas, flo, work, floor_s / gr_s[ci][i], idle);
        }
    }
    printf("# ratio = floor time / measured time (1 = at the ceiling). decode work = dense weights + head + expected "
           "distinct experts E(1-(1-k/E)^B) per layer + per-sequence state and rows; prefill work = linear + "
           "attention + head FLOPs\n");
    if (bk == DI_BACKEND_CUDA)
        printf("# (graph): di_greedy_loop_run, step plan + one CUDA graph per batch size, greedy tokens by the device "
               "argmax%s; ms/step = GPU time of %d replayed steps (capture step excluded) incl. gaps; GPU idle = "
               "share of that time between steps\n",
               gr_host_ids ? ", ids read back to the host every step (host Engram hash / image token)" : "",
               a->decode);
    fflush(stdout);
    PROGRESS("done");
    rc = 0;
out:
    if (rc) fprintf(stderr, "deepinfer bench: %s\n", err.msg);
    for (int s = 0; seqs && s <= maxb; s++) di_seq_destroy(seqs[s]);
    free(seqs);
    di_model_free(dm);
    free(b.tok), free(b.pos), free(b.rowseq), free(b.rows), free(b.logits), free(b.late);
    cli_model_free(&m);
    di_st_close(st);
    return rc;
}
