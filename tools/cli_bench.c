/* `deepinfer bench`: prefill and decode throughput of a V4 or V4.1
 * checkpoint on the CPU, measured in the same run as the machine's memory
 * bandwidth, with the bytes-per-decode-token floor (weights touched per
 * token / bandwidth). */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_dummy.h"
#include "args/cli_args.h"
#include "args/cli_parallel.h"
#include "cli.h"
#include "cli_bench_load.h"
#include "cli_model.h"
#include "args/cli_model_dir.h"
#include "io/model_dir.h"
#include "model/dsv41_compact.h"
#include "model/dsv41_internal.h"
#include "model/dsv4_internal.h"
#include "ops/cpu/threadpool.h"

static const char USAGE[] =
    "usage: deepinfer bench --model DIR [--prompt N] [--decode N] [--batch B[,B...]] [--reps R]\n"
    "                       [--engram-hash FILE] [--lanes L] [--pool-stats] [--yoco-compact [--yoco-keep-tokens N]]\n"
    "       deepinfer bench --dummy CONFIG.json [--layers N] [--experts E] [--backend cpu|cuda] [--batch B[,B...]]\n"
    "                       [--prompt N[,N...]] [--prefill L[,L...]] [--decode N] [--rows R] [--seed S] [--plan]\n"
    "                       [--ep N [--engram-host] [--device-gb G]]\n"
    "                       [--yoco-compact [--yoco-keep-tokens N]] [--modes]\n"
    "       deepinfer bench --load DIR [--backend cpu|cuda] [--prompt N]\n"
    "\n" DI_CLI_MODEL_RULE "\n"
    "--dummy: random weights at CONFIG's real dimensions (bench/configs/v4-flash.json,\n"
    "v41-flash.json) with N layers (default 4; layer roles kept, tools/dummy/dummy.h)\n"
    "and E routed experts (--experts; default the config's count, at least the top-k:\n"
    "prefill FLOPs per token do not depend on it), generated on demand into the\n"
    "loader's staging buffers through the normal chain on the backend (default cpu).\n"
    "Prefill tokens/s for each --prefill length (default 1024,4096) vs FLOPs / the\n"
    "FP8 GEMM rate; decode ms/step and tokens/s for each --batch size (default 1) of\n"
    "sequences forked from one --prompt-token prefill (default 4096; a list measures\n"
    "each context after one load, e.g. --prompt 4096,32768), --decode timed\n"
    "steps (default 8), vs bytes read per step / the copy bandwidth, all measured in\n"
    "the same run. On --backend cuda each decode size is also timed through the\n"
    "recorded-step loop (step plan + one CUDA graph per size, device argmax): a\n"
    "'(graph)' row with its GPU idle share, or the reason it could not run.\n"
    "--yoco-compact (V4.1): each --prefill length (--model: the --prompt prefill)\n"
    "again in compact prefill (the layers after the last KV source on the prompt's\n"
    "last --yoco-keep-tokens, default 140; architecture.md 6.5), same process: a\n"
    "'compact' row each, its ratio = compact tokens/s over exact.\n"
    "--modes (--backend cuda): every figure in the batch-invariant (default) and the\n"
    "fast mode (DEEPINFER_BATCH_INVARIANT=0) on the same loaded model in this process,\n"
    "each mode's table, then invariant / fast per figure (a time ratio; the CPU has\n"
    "one mode).\n"
    "--rows: forward sub-batch rows (default 1024). --plan: print the\n"
    "memory plan only; with --ep N (and --engram-host, --device-gb G) the plan of\n"
    "each of N expert-parallel ranks of the full model (every layer unless --layers)\n"
    "on devices of G GB (default: the visible GPU on --backend cuda, else 141 GB),\n"
    "whether it fits and the smallest layout that does (no GPU needed).\n"
    "Progress on stderr, the table on stdout.\n"
    "\n"
    "--load DIR: load-speed figures of a model directory (e.g. one written by\n"
    "`deepinfer dummy`): the load through the normal path on a dropped page cache\n"
    "(posix_fadvise DONTNEED; the cached fraction before it measured with mincore,\n"
    "\"cold\" when ~0), timed from the call to loaded, in GB/s of tensor bytes; the\n"
    "storage read rate of the same files (cache dropped again, sequential 64 MB\n"
    "preads) and load / read; peak host RSS (VmHWM); device memory the load took\n"
    "(cuda); time to first token: main entry to the logits of an N-token prompt\n"
    "(--prompt, 1..64, default 8).\n"
    "\n"
    "Measures, in one run: memory bandwidth (STREAM-style read and triad over\n"
    "3 x 128 MiB, all threads), prefill tokens/s (one N-token prompt per step),\n"
    "decode tokens/s (B independent sequences, each after its own N-token\n"
    "prompt, one token each per step), and the decode floor: bytes of weights a\n"
    "decode step reads / read bandwidth. A list of batch sizes (e.g. --batch\n"
    "1,8,32,64) is a sweep: one decode figure per size, and each size's\n"
    "tokens/s over the first size's.\n"
    "--lanes L: a step splits into at most L lanes of whole sequences (1: every op\n"
    "parallel on its own; default: the thread count for models whose step weights fit\n"
    "the cache; src/model/lanes.h); the bits do not depend on it. --pool-stats: per\n"
    "decode run, where the wall time went (pool regions, one-thread regions, host\n"
    "code outside regions; src/ops/cpu/threadpool.h).\n"
    "Defaults: --prompt 512 --decode 64 --batch 1 --reps 3. Threads: $DEEPINFER_THREADS.\n";

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* ---- memory bandwidth ------------------------------------------------------ */

typedef struct bw_ctx {
    float *a, *b, *c;
    size_t n;
    int op; /* 0 read (sum), 1 triad */
    double sink[256];
} bw_ctx;

static void bw_task(void *p, int t, int nt) {
    bw_ctx *c = p;
    size_t b, e;
    di_split_range(c->n, t, nt, &b, &e);
    if (c->op == 0) {
        float s[16] = {0};
        for (size_t i = b; i + 16 <= e; i += 16)
            for (int j = 0; j < 16; j++) s[j] += c->a[i + j];
        double tot = 0;
        for (int j = 0; j < 16; j++) tot += s[j];
        c->sink[t & 255] = tot;
    } else {
        for (size_t i = b; i < e; i++) c->a[i] = c->b[i] + 1.5f * c->c[i];
    }
}

void bench_measure_bw(double *read_gbs, double *triad_gbs) {
    size_t n = (size_t)32 << 20; /* 128 MiB per array */
    bw_ctx c = {.n = n};
    c.a = malloc(n * 4), c.b = malloc(n * 4), c.c = malloc(n * 4);
    *read_gbs = *triad_gbs = 0;
    if (!c.a || !c.b || !c.c) goto out;
    for (size_t i = 0; i < n; i++) c.a[i] = c.b[i] = c.c[i] = (float)(i & 7);
    di_threadpool *tp = di_threadpool_global();
    for (int rep = 0; rep < 5; rep++) {
        c.op = 0;
        double t0 = now_s();
        di_threadpool_run(tp, bw_task, &c);
        double r = (double)n * 4 / (now_s() - t0) / 1e9;
        c.op = 1;
        t0 = now_s();
        di_threadpool_run(tp, bw_task, &c);
        double tr = (double)n * 12 / (now_s() - t0) / 1e9;
        if (r > *read_gbs) *read_gbs = r;
        if (tr > *triad_gbs) *triad_gbs = tr;
    }
out:
    free(c.a), free(c.b), free(c.c);
}

/* A pseudo-random token that is text (V4.1 runs text-only). */
static int32_t text_token(const di_model_config *c, int t) {
    return t == c->image_token_id ? (int32_t)((t + 1) % c->vocab_size) : (int32_t)t;
}

#define MAX_SWEEP BENCH_MAX_SWEEP

typedef struct bench_buf {
    di_seq_state **seqs, **rowseq;
    int32_t *tok;
    int64_t *pos;
    int *rows;
    float *logits;
    int64_t *late; /* --yoco-compact: late_from of the prefill rows */
} bench_buf;

/* --pool-stats: where a decode run's wall time went, per step:
 * regions on the pool, regions run on one thread, and host code outside
 * regions (threadpool.h). Serial = single-thread regions + outside. */
static void print_pool_stats(const di_pool_stats *a, double secs, int steps, int batch) {
    di_pool_stats b;
    di_pool_stats_get(&b);
    double us = secs * 1e6 / steps, s1 = (b.ns[0] - a->ns[0]) / 1e3 / steps, p1 = (b.ns[1] - a->ns[1]) / 1e3 / steps;
    double out = us - s1 - p1;
    printf("regions      batch %d, per step %.1f us: %.1f pool regions (%.1f chunks) %.1f us; %.1f one-thread regions "
           "%.1f us; outside regions %.1f us; serial fraction %.3f\n",
           batch, us, (double)(b.regions[1] - a->regions[1]) / steps, (double)(b.chunks[1] - a->chunks[1]) / steps, p1,
           (double)(b.regions[0] - a->regions[0]) / steps, s1, out, (s1 + out) / us);
}

/* Best-of-reps prefill (one prompt, one step) and decode (B sequences, one
 * token each per step, after each sequence's own prompt) seconds. */
static deepinfer_status run_batch(cli_model *m, bench_buf *k, int batch, int prompt, int decode, int reps, double *pf,
                                  int64_t keep, double *pfc, double *dec, di_error *err) {
    const di_model_config *c = m->sm.cfg;
    int V = (int)c->vocab_size;
    deepinfer_status st;
    for (int r = 0; r < reps; r++) {
        /* sequence 0's prompt alone is the timed prefill step; the others follow in one untimed step */
        for (int s = 0; s < batch; s++) di_seq_reset(k->seqs[s], c);
        for (int part = 0; part < 2; part++) {
            int s0 = part ? 1 : 0, s1 = part ? batch : 1, n = 0;
            for (int s = s0; s < s1; s++)
                for (int i = 0; i < prompt; i++, n++) {
                    k->tok[n] = text_token(c, (i * 7919 + s * 104729 + 13) % V);
                    k->pos[n] = i;
                    k->rowseq[n] = k->seqs[s];
                }
            if (!n) continue;
            int last = n - 1;
            di_v4_batch b = {.n = n, .tokens = k->tok, .pos = k->pos, .seq = k->rowseq, .n_logits = 1,
                             .logit_rows = &last, .logits = k->logits};
            double t0 = now_s();
            if ((st = m->sm.forward(m->sm.model, &b, err))) return st;
            if (!part && now_s() - t0 < *pf) *pf = now_s() - t0;
            if (part || keep <= 0) continue;
            /* the same prompt again in compact prefill (batch.late_from on every row, model/batch.h) */
            for (int i = 0; i < n; i++) k->late[i] = prompt > keep ? prompt - keep : 0;
            di_seq_reset(k->seqs[0], c);
            b.late_from = k->late;
            t0 = now_s();
            if ((st = m->sm.forward(m->sm.model, &b, err))) return st;
            if (now_s() - t0 < *pfc) *pfc = now_s() - t0;
        }
        di_pool_stats ps0;
        di_pool_stats_get(&ps0);
        double t0 = now_s();
        for (int step = 0; step < decode; step++) {
            for (int s = 0; s < batch; s++) {
                k->tok[s] = text_token(c, (step * 31 + s) % V);
                k->pos[s] = prompt + step;
                k->rowseq[s] = k->seqs[s];
                k->rows[s] = s;
            }
            di_v4_batch b = {.n = batch, .tokens = k->tok, .pos = k->pos, .seq = k->rowseq, .n_logits = batch,
                             .logit_rows = k->rows, .logits = k->logits};
            if ((st = m->sm.forward(m->sm.model, &b, err))) return st;
        }
        double td = now_s() - t0;
        if (td < *dec) *dec = td;
        if (di_pool_stats_enabled()) print_pool_stats(&ps0, td, decode, batch);
    }
    return DEEPINFER_OK;
}

static int cmd_bench(int argc, char **argv) {
    if (di_cli_wants_help(argc, argv)) {
        fputs(USAGE, stdout);
        return 0;
    }
    const char *model = NULL, *engram_hash = NULL, *v;
    int prompt = 512, decode = 64, reps = 3, batches[MAX_SWEEP] = {1}, nb = 1, maxb = 1, lanes = 0, pool_stats = 0;
    int set_prompt = 0, set_decode = 0;
    const char *load = NULL;
    bench_dummy_args da = {.backend = "cpu", .layers = 4, .rows = 1024, .seed = 1, .np = 2, .prefill = {1024, 4096}};
    deepinfer_engine_config par; /* --ep / --dp: 0 = not asked */
    memset(&par, 0, sizeof par);
    int pf = 0;
    for (int i = 1; i < argc; i++) {
        if (di_cli_flag_value(argc, argv, &i, "--dummy", &da.config)) {
            if (!da.config) return 2;
        } else if (di_cli_flag_value(argc, argv, &i, "--load", &load)) {
            if (!load) return 2;
        } else if (di_cli_flag_value(argc, argv, &i, "--experts", &v)) {
            if (!v || di_cli_parse_int("--experts", v, 1, INT_MAX, &da.experts)) return 2;
        } else if (di_cli_flag_value(argc, argv, &i, "--backend", &da.backend)) {
            if (!da.backend) return 2;
        } else if (di_cli_flag_value(argc, argv, &i, "--layers", &v)) {
            if (!v || di_cli_parse_int("--layers", v, 1, INT_MAX, &da.layers)) return 2;
            da.layers_set = 1;
        } else if (di_cli_flag_value(argc, argv, &i, "--rows", &v)) {
            if (!v || di_cli_parse_int("--rows", v, 1, INT_MAX, &da.rows)) return 2;
        } else if (di_cli_flag_value(argc, argv, &i, "--seed", &v)) {
            if (!v || di_cli_parse_u64("--seed", v, UINT64_MAX, &da.seed)) return 2;
        } else if (di_cli_flag_value(argc, argv, &i, "--prefill", &v)) {
            if (!v || di_cli_parse_int_list("--prefill", v, 1, 1 << 20, da.prefill, MAX_SWEEP, &da.np)) return 2;
        } else if (!strcmp(argv[i], "--plan")) {
            da.plan_only = 1;
        } else if ((pf = di_cli_parallel_flag(argc, argv, &i, &par))) { /* --ep / --dp (cli_parallel.h) */
            if (pf < 0) return 2;
        } else if (!strcmp(argv[i], "--engram-host")) {
            da.engram_host = 1;
        } else if (di_cli_flag_value(argc, argv, &i, "--device-gb", &v)) {
            if (!v || di_cli_parse_f64("--device-gb", v, 1, 1e6, &da.device_gb)) return 2;
        } else if (!strcmp(argv[i], "--yoco-compact")) {
            da.yoco_compact = 1;
        } else if (!strcmp(argv[i], "--modes")) {
            da.modes = 1;
        } else if (di_cli_flag_value(argc, argv, &i, "--yoco-keep-tokens", &v)) {
            if (!v || di_cli_parse_i64("--yoco-keep-tokens", v, 1, INT64_MAX, &da.yoco_keep)) return 2;
        } else if (di_cli_flag_value(argc, argv, &i, "--model", &model)) {
            if (!model) return 2;
        } else if (di_cli_flag_value(argc, argv, &i, "--engram-hash", &engram_hash)) {
            if (!engram_hash) return 2;
        } else if (di_cli_flag_value(argc, argv, &i, "--prompt", &v)) {
            /* --dummy takes a list of decode contexts (one load); --model one prompt length */
            if (!v || di_cli_parse_int_list("--prompt", v, 1, 1 << 20, da.prompts, MAX_SWEEP, &da.nprompt)) return 2;
            prompt = da.prompts[0];
            set_prompt = 1;
        } else if (di_cli_flag_value(argc, argv, &i, "--decode", &v)) {
            if (!v || di_cli_parse_int("--decode", v, 1, INT_MAX, &decode)) return 2;
            set_decode = 1;
        } else if (di_cli_flag_value(argc, argv, &i, "--batch", &v)) {
            if (!v || di_cli_parse_int_list("--batch", v, 1, 1024, batches, MAX_SWEEP, &nb)) return 2;
        } else if (di_cli_flag_value(argc, argv, &i, "--reps", &v)) {
            if (!v || di_cli_parse_int("--reps", v, 1, INT_MAX, &reps)) return 2;
        } else if (di_cli_flag_value(argc, argv, &i, "--lanes", &v)) {
            if (!v || di_cli_parse_int("--lanes", v, 1, INT_MAX, &lanes)) return 2;
        } else if (!strcmp(argv[i], "--pool-stats")) {
            pool_stats = 1;
        } else {
            fprintf(stderr, "error: unknown option '%s' (see deepinfer bench --help)\n", argv[i]);
            return 2;
        }
    }
    if (da.modes && (!da.config || da.plan_only)) return fprintf(stderr, "error: --modes is for --dummy (not --plan)\n"), 2;
    da.ep = par.ep, da.dp = par.dp;
    if (par.eplb_replicas || par.eplb_interval || par.cp_min_tokens)
        return fprintf(stderr, "error: --eplb-replicas / --eplb-interval / --cp-min-tokens are engine settings (bench-engine, generate)\n"), 2;
    if (load) {
        if (da.config || model) return fprintf(stderr, "error: give one of --load, --dummy, --model\n"), 2;
        if (set_prompt && (da.nprompt != 1 || prompt > 64))
            return fprintf(stderr, "error: --load takes one --prompt length of 1..64\n"), 2;
        bench_load_args la = {.dir = load, .backend = da.backend, .prompt = set_prompt ? prompt : 8};
        return bench_load_run(&la);
    }
    if (da.experts && !da.config) return fprintf(stderr, "error: --experts is for --dummy\n"), 2;
    if (da.yoco_keep && !da.yoco_compact) return fprintf(stderr, "error: --yoco-keep-tokens needs --yoco-compact\n"), 2;
    if (da.config && (lanes || pool_stats))
        return fprintf(stderr, "error: --lanes and --pool-stats are for --model\n"), 2;
    di_pool_stats_enable(pool_stats);
    if (da.config) {
        if (model) return fprintf(stderr, "error: give --model or --dummy, not both\n"), 2;
        if (!set_prompt) da.prompts[0] = 4096, da.nprompt = 1;
        da.prompt = 0; /* the largest context */
        for (int j = 0; j < da.nprompt; j++) da.prompt = da.prompts[j] > da.prompt ? da.prompts[j] : da.prompt;
        da.decode = set_decode ? decode : 8;
        da.nb = nb;
        memcpy(da.batches, batches, sizeof da.batches);
        if (da.ep || da.dp || da.engram_host || da.device_gb > 0) {
            if (!da.plan_only)
                return fprintf(stderr, "error: --ep, --dp, --engram-host and --device-gb are for --plan (a run of "
                                       "several ranks: bench-engine --ep M --dp N)\n"), 2;
            return bench_plan_run(&da);
        }
        return bench_dummy_run(&da);
    }
    if (da.nprompt > 1) return fprintf(stderr, "error: --model takes one --prompt length (lists are for --dummy)\n"), 2;
    if (da.ep > 1 || da.dp > 1)
        return fprintf(stderr, "error: bench --model runs one rank; run several with bench-engine --ep M --dp N\n"), 2;
    for (int i = 0; i < nb; i++)
        if (batches[i] > maxb) maxb = batches[i];
    di_error err = {0};
    di_model_location loc;
    cli_model m;
    /* rows of the largest step: the other sequences' prompts together, or a decode step */
    int rows_max = prompt * (maxb > 1 ? maxb - 1 : 1);
    if (rows_max < maxb) rows_max = maxb;
    di_v4_options opt = {.max_rows = prompt > maxb ? prompt : maxb, .max_context = prompt + decode + 16,
                         .engram_hash = engram_hash};
    int64_t keep = da.yoco_compact ? (da.yoco_keep ? da.yoco_keep : 140) : 0;
    if (di_cli_locate_model(model, &loc, &err) || cli_model_load(loc.dir, &opt, &m, &err)) {
        fprintf(stderr, "deepinfer bench: %s\n", err.msg);
        return 1;
    }
    if (keep && di_v41_compact_check(m.sm.cfg, keep, 0, &err)) {
        fprintf(stderr, "deepinfer bench: %s\n", err.msg);
        cli_model_free(&m);
        return 1;
    }
    if (lanes && m.v4) di_v4_set_lanes(m.v4, lanes);
    if (lanes && m.v41) di_v41_set_lanes(m.v41, lanes);
    const di_model_config *c = m.sm.cfg;
    int V = (int)c->vocab_size, nthreads = di_threadpool_size(di_threadpool_global());
    double rbw, tbw;
    bench_measure_bw(&rbw, &tbw);

    bench_buf k = {0};
    k.seqs = calloc((size_t)maxb, sizeof *k.seqs);
    k.tok = malloc(sizeof(int32_t) * (size_t)rows_max);
    k.pos = malloc(sizeof(int64_t) * (size_t)rows_max);
    k.rowseq = malloc(sizeof(*k.rowseq) * (size_t)rows_max);
    k.rows = malloc(sizeof(int) * (size_t)maxb);
    k.logits = malloc(sizeof(float) * (size_t)V * (size_t)maxb);
    k.late = malloc(sizeof(int64_t) * (size_t)prompt);
    double best_pf = 1e30, best_pfc = 1e30, best_dec[MAX_SWEEP];
    int rc = 1;
    if (!k.seqs || !k.tok || !k.pos || !k.rowseq || !k.rows || !k.logits || !k.late) {
        err = (di_error){0};
        di_error_set(&err, DEEPINFER_ERR_OUT_OF_MEMORY, "out of memory for %d sequences", maxb);
        goto out;
    }
    for (int s = 0; s < maxb; s++)
        if (m.sm.seq_new(m.sm.model, &k.seqs[s], &err)) goto out;
    for (int i = 0; i < nb; i++) {
        best_dec[i] = 1e30;
        if (run_batch(&m, &k, batches[i], prompt, decode, reps, &best_pf, keep, &best_pfc, &best_dec[i], &err)) goto out;
    }
    double bytes = (double)m.decode_bytes;
    printf("model        %s (%s, %lld layers, hidden %lld)\n", loc.dir, di_arch_name(c->arch), (long long)c->n_layers,
           (long long)c->hidden_size);
    printf("threads      %d\n", nthreads);
    printf("bandwidth    read %.1f GB/s, triad %.1f GB/s (3 x 128 MiB, best of 5)\n", rbw, tbw);
    printf("prefill      %d-token prompt: %.1f tokens/s (best of %d)\n", prompt, prompt / best_pf, reps * nb);
    if (keep)
        printf("compact      %d-token prompt, layers %d..%lld on its last %lld tokens: %.1f tokens/s (best of %d), "
               "%.2fx exact\n",
               prompt, di_v41_late_layer(c), (long long)c->n_layers - 1, (long long)keep, prompt / best_pfc, reps * nb,
               best_pf / best_pfc);
    for (int i = 0; i < nb; i++) {
        int B = batches[i];
        double dec_tps = (double)decode * B / best_dec[i], floor_tps = rbw * 1e9 / bytes * B;
        printf("decode       batch %d, %d steps after the prompt: %.1f tokens/s (%.3f ms/step)\n", B, decode, dec_tps,
               best_dec[i] / decode * 1e3);
        printf("floor        %.0f weight bytes per decode step -> %.0f tokens/s at the read bandwidth (batch %d); "
               "decode reaches %.4f of it\n",
               bytes, floor_tps, B, dec_tps / floor_tps);
    }
    if (nb > 1) {
        double base = (double)decode * batches[0] / best_dec[0];
        printf("scaling      tokens/s over batch %d:", batches[0]);
        for (int i = 1; i < nb; i++) printf(" batch %d %.2fx%s", batches[i], (double)decode * batches[i] / best_dec[i] / base,
                                            i + 1 < nb ? "," : "\n");
    }
    rc = 0;
out:
    if (rc) fprintf(stderr, "deepinfer bench: %s\n", err.msg);
    for (int s = 0; s < maxb && k.seqs; s++) di_seq_destroy(k.seqs[s]);
    free(k.seqs), free(k.tok), free(k.pos), free(k.rowseq), free(k.rows), free(k.logits), free(k.late);
    cli_model_free(&m);
    return rc;
}

DI_CLI_COMMAND(bench, "prefill / decode throughput of a V4 / V4.1 checkpoint vs the measured memory bandwidth", cmd_bench)
