/* `deepinfer bench-engine`: decode throughput through the engine (scheduler,
 * runner, sampler, outputs included) at several batch sizes, against the
 * memory-bandwidth floor measured in the same run, with the GPU's idle share
 * of the timed steps (deepinfer_engine_stats.device_idle_s / device_busy_s).
 *
 * --model DIR runs a checkpoint; --dummy CONFIG a random-weight model at the
 * config's real dimensions with --layers N layers (tools/dummy/dummy.h, as
 * `deepinfer bench --dummy`): the reduced config goes to a temp directory,
 * the checkpoint is built in memory and handed to the engine
 * (di_engine_open_weights), and the floor is tools/bench_floor.c's decode
 * floor (dense weights + head + the expected distinct experts + per-sequence
 * state, over the copy bandwidth), the one `bench --dummy` prints. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bench_dummy.h"
#include "bench_floor.h"
#include "bench_verify.h"
#include "spec_report.h"
#include "args/cli_args.h"
#include "args/cli_model_dir.h"
#include "args/cli_parallel.h"
#include "cli.h"
#include "deepinfer.h"
#include "engine/engine_internal.h"
#include "dummy/dummy.h"
#include "util/sysmem.h"
#include "ops/backend.h"
#include "ops/cpu/threadpool.h"

static const char USAGE[] =
    "usage: deepinfer bench-engine --model DIR [--batches 1,8,32,64] [--prompt N] [--decode N] [--reps R]\n"
    "       [--yoco-compact] [--yoco-keep-tokens N]   V4.1 compact prefill (architecture.md 6.5)\n"
    "                              [--max-num-batched-tokens N] [--engram-hash FILE] [--accelerator auto|cpu|cuda]\n"
    "                              [--graphs 0|1] [--lanes L] [--mtp-varlen 0|1] [--nextn-decode N]\n"
    "                              [--verify-cost] [--ep M] [--dp N] [--eplb-replicas R] [--eplb-interval S]\n"
    "       deepinfer bench-engine --dummy CONFIG.json [--layers N] [--seed S] [the options above but --model,\n"
    "                              --engram-hash]\n"
    "\n" DI_CLI_MODEL_RULE "\n"
    "For each batch size B: B requests with different N-token prompts (default 64)\n"
    "run greedily for --decode tokens (default 64, EOS ignored) through the engine;\n"
    "the steps in which all B requests decode one token each are timed (whole\n"
    "deepinfer_step calls; the first such step of each run, which may capture a CUDA\n"
    "graph, is not; best of --reps, default 3). Prints decode tokens/s, ms per step,\n"
    "the ratio to the first batch size, the floor and the share of it reached, and the\n"
    "GPU idle share of the timed steps: d(idle) / (d(idle) + d(busy)) of\n"
    "deepinfer_engine_stats.device_idle_s / device_busy_s (n/a on the CPU), with how\n"
    "many of the timed steps ran as CUDA graphs and were sampled on the device.\n"
    "--model: the floor is the weight bytes a decode step reads / read bandwidth\n"
    "(measured here, all threads; on cuda the device's copy bandwidth), times B.\n"
    "--dummy: random weights at CONFIG's real dimensions (bench/configs/v4-flash.json,\n"
    "v41-flash.json; any full config.json, e.g. tests/data/golden/v4-tiny-a/config.json)\n"
    "with --layers N layers (default 4, layer roles kept; tools/dummy/dummy.h), built in\n"
    "memory (--seed, default 1) and run by the engine (token ids only, no tokenizer).\n"
    "Its floor is `deepinfer bench --dummy`'s (tools/bench_floor.c): dense weights + head +\n"
    "the expected distinct routed experts E(1-(1-k/E)^B) per layer + per-sequence state\n"
    "and rows at context N, over the copy bandwidth (cuda: 2 GiB cudaMemcpy D2D; cpu: the\n"
    "read probe of `deepinfer bench`). The V4-Flash dummy is ~20 GB at 4 layers; the\n"
    "weights and states are checked against the free device (or host) memory first.\n"
    "--accelerator (default auto: CUDA in deepinfer-cuda when a GPU is usable, else the CPU).\n"
    "--max-num-batched-tokens sets the step budget (default: every prompt in one step;\n"
    "--model: at most 8192). Threads: $DEEPINFER_THREADS.\n"
    "--graphs (cuda): 1 (default, or $DEEPINFER_CUDA_GRAPHS) runs the decode steps as recorded CUDA graphs\n"
    "(one per batch size, captured in the first rep), 0 runs them eager (host tables staged per op).\n"
    "--lanes L (cpu): a step splits into at most L lanes of whole sequences (1: every op parallel on\n"
    "its own; default: the thread count for models whose step weights fit the cache; src/model/lanes.h).\n"
    "--mtp-varlen / --nextn-decode: speculative decoding (the engine config's mtp_varlen / nextn_decode);\n"
    "tokens/s then counts every token committed in the timed steps (a verify step commits 1 + accepted per\n"
    "request), and each batch prints tau (committed tokens per verify) and the acceptance by draft position.\n"
    "--verify-cost: instead, the cost of verify steps: for each batch size B, B sequences prefilled with\n"
    "--prompt tokens, then one forward of B x (1 + k) rows (each sequence's decode row and k drafts, every\n"
    "row's logits) for k = 0 .. --nextn-decode (default 5), best of --reps, with its ratio to k = 0 —\n"
    "the speed-up at these dimensions is then tau / ratio(k) (random weights accept nothing themselves).\n"
    "Parallel layout (the engine's; ranks are threads of this process on the CPU):\n" DI_CLI_PARALLEL_USAGE;

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

typedef struct bw_job {
    const float *a;
    size_t n;
    double sink[256];
} bw_job;

static void bw_task(void *p, int t, int nt) {
    bw_job *j = p;
    size_t b, e;
    di_split_range(j->n, t, nt, &b, &e);
    float s[16] = {0};
    for (size_t i = b; i + 16 <= e; i += 16)
        for (int k = 0; k < 16; k++) s[k] += j->a[i + k];
    double tot = 0;
    for (int k = 0; k < 16; k++) tot += s[k];
    j->sink[t & 255] = tot;
}

/* Read bandwidth in GB/s: best of 5 passes over 256 MiB. */
static double read_bw(void) {
    size_t n = (size_t)64 << 20;
    float *a = malloc(n * 4);
    if (!a) return 0;
    for (size_t i = 0; i < n; i++) a[i] = (float)(i & 7);
    bw_job j = {.a = a, .n = n};
    double best = 0;
    for (int r = 0; r < 5; r++) {
        double t0 = now_s();
        di_threadpool_run(di_threadpool_global(), bw_task, &j);
        double gbs = (double)n * 4 / (now_s() - t0) / 1e9;
        if (gbs > best) best = gbs;
    }
    free(a);
    return best;
}

/* What one run of a batch size measured over its timed steps. */
typedef struct run_result {
    double secs;         /* wall time of the timed steps */
    long tokens;         /* tokens they decoded */
    int steps;           /* timed steps */
    double busy, idle;   /* d(device_busy_s), d(device_idle_s) over them */
    int64_t graph_steps; /* of them, ran as CUDA graphs */
    int64_t dev_sampled; /* of them, sampled on the device */
} run_result;

/* Decode rate of B requests: tokens and seconds summed over the steps in
 * which all B requests decode one token each (pure decode steps of B rows),
 * but the first (it warms the shape: a CUDA graph capture). Returns 0, or -1
 * on failure. */
static int run_batch(deepinfer_engine *e, int B, int prompt, int decode, int vocab, run_result *r) {
    int32_t *ids = malloc(sizeof(int32_t) * (size_t)prompt);
    if (!ids) return -1;
    deepinfer_sampling_params sp;
    deepinfer_sampling_params_init(&sp);
    sp.temperature = 0;
    sp.max_tokens = decode + 1;
    sp.ignore_eos = 1;
    uint64_t first = 0;
    for (int b = 0; b < B; b++) {
        /* ordinary ids: the lower three quarters of the vocabulary (special and image tokens sit at the top) */
        for (int i = 0; i < prompt; i++) ids[i] = (int32_t)((i * 7919 + b * 104729 + 13) % (vocab * 3 / 4));
        deepinfer_prompt p = {.token_ids = ids, .n_token_ids = (size_t)prompt};
        uint64_t id;
        if (deepinfer_add_request(e, &p, &sp, &id)) return free(ids), -1;
        if (!b) first = id;
    }
    free(ids);
    memset(r, 0, sizeof *r);
    int warm = 0;
    while (deepinfer_has_unfinished(e)) {
        deepinfer_engine_stats s0, s1;
        deepinfer_engine_get_stats(e, &s0);
        double t0 = now_s();
        if (deepinfer_step(e, NULL)) return -1;
        double dt = now_s() - t0;
        deepinfer_engine_get_stats(e, &s1);
        const deepinfer_request_output *const *up;
        size_t n;
        deepinfer_read_outputs(e, &up, &n);
        int decoding = 0;
        long made = 0; /* tokens committed: one per request, or with speculation 1 + accepted drafts */
        for (size_t k = 0; k < n; k++) {
            const deepinfer_completion *c = &up[k]->choices[0];
            int dec = c->n_prev_tokens >= 1 && c->n_tokens > c->n_prev_tokens;
            decoding += dec;
            if (dec) made += (long)(c->n_tokens - c->n_prev_tokens);
        }
        if (decoding != B) continue;
        if (!warm++) continue;
        r->secs += dt, r->tokens += made, r->steps++;
        r->busy += s1.device_busy_s - s0.device_busy_s;
        r->idle += s1.device_idle_s - s0.device_idle_s;
        r->graph_steps += s1.graph_steps - s0.graph_steps;
        r->dev_sampled += s1.device_sampled_steps - s0.device_sampled_steps;
    }
    int ok = r->tokens > 0;
    for (int b = 0; b < B; b++) {
        deepinfer_request_output *o = NULL;
        if (deepinfer_take_output(e, first + (uint64_t)b, &o) || o->choices[0].n_tokens != (size_t)decode + 1) ok = 0;
        deepinfer_output_free(o);
    }
    return ok ? 0 : -1;
}

/* ---- --dummy ------------------------------------------------------------------------ */

static void rm_dummy_dir(const char *dir) {
    const char *files[] = {"config.json", "engram_token_map.json", "engram_hash.json"};
    char p[4200];
    for (int i = 0; i < 3; i++) snprintf(p, sizeof p, "%s/%s", dir, files[i]), unlink(p);
    rmdir(dir);
}

static double gb(double b) { return b / 1e9; }

/* The dummy model of `config` with `layers` layers: the reduced config in a
 * temp dir (dir, removed by the caller), its config and floor costs, the
 * sizes and free memory printed (the engine's load plan decides the fit),
 * then the generated random checkpoint (*st). Returns 0, or 1 after a message. */
static int dummy_prepare(const char *config, int layers, uint64_t seed, const char *accel, int maxb, int64_t ctx,
                         char *dir, di_model_config *cfg, bench_costs *k, di_safetensors **st) {
    di_error err = {0};
    di_dummy_info info;
    if (!mkdtemp(dir)) return fprintf(stderr, "deepinfer bench-engine: cannot create a temp directory\n"), 1;
    if (di_dummy_write_dir(config, layers, dir, &info, &err) || di_config_load(dir, cfg, &err) ||
        bench_costs_compute(cfg, k, &err))
        return rm_dummy_dir(dir), fprintf(stderr, "deepinfer bench-engine: --dummy %s: %s\n", config, err.msg), 1;
    double weights = k->image_bytes, states = bench_state_bytes(cfg, ctx) * maxb;
    size_t fb = 0, tb = 0;
    int dev = (!accel || strcmp(accel, "cpu")) && di_backend_mem_info(&fb, &tb) == 0;
    double host_free = (double)di_sys_mem_available(); /* what the load plan checks against */
    fprintf(stderr, "dummy %s (%s): %d layers kept (original", config, di_arch_name(cfg->arch), info.n_layers);
    for (int i = 0; i < info.n_layers && i < 64; i++) fprintf(stderr, " %d", info.kept[i]);
    fprintf(stderr, "); weights %.2f GB, states %d x %lld tokens %.3f GB; free: host %.1f GB", gb(weights), maxb,
            (long long)ctx, gb(states), gb(host_free));
    if (dev) fprintf(stderr, ", device %.1f of %.1f GB", gb((double)fb), gb((double)tb));
    fputc('\n', stderr);
    /* the fit is the engine's: its load plan (src/model/load_plan.h) refuses before allocating */
    fprintf(stderr, "generating the %.1f GB random checkpoint into the loader (seed %llu)\n", gb(weights),
            (unsigned long long)seed);
    if (di_dummy_weights(cfg, seed, st, &err))
        return rm_dummy_dir(dir), fprintf(stderr, "deepinfer bench-engine: %s\n", err.msg), 1;
    return 0;
}

static int cmd_bench_engine(int argc, char **argv) {
    if (di_cli_wants_help(argc, argv)) {
        fputs(USAGE, stdout);
        return 0;
    }
    const char *model = NULL, *dummy = NULL, *batches = "1,8,32,64", *engram = NULL, *accel = NULL, *v;
    int prompt = 64, decode = 64, reps = 3, step_tokens = 0, graphs = -1, layers = 4, lanes = 0, yoco = 0;
    int varlen = -1, nextn = -1, verify_cost = 0;
    int64_t yoco_keep = 0;
    uint64_t seed = 1;
    deepinfer_engine_config par; /* --ep / --dp / EPLB (cli_parallel.h) */
    deepinfer_engine_config_init(&par);
    for (int i = 1; i < argc; i++) {
        int pf = di_cli_parallel_flag(argc, argv, &i, &par);
        if (pf < 0) return 2;
        if (pf) continue;
        if (di_cli_flag_value(argc, argv, &i, "--model", &model)) {
            if (!model) return 2;
        } else if (di_cli_flag_value(argc, argv, &i, "--dummy", &dummy)) {
            if (!dummy) return 2;
        } else if (di_cli_flag_value(argc, argv, &i, "--layers", &v)) {
            if (!v || di_cli_parse_int("--layers", v, 1, INT_MAX, &layers)) return 2;
        } else if (di_cli_flag_value(argc, argv, &i, "--seed", &v)) {
            if (!v || di_cli_parse_u64("--seed", v, UINT64_MAX, &seed)) return 2;
        } else if (di_cli_flag_value(argc, argv, &i, "--engram-hash", &engram)) {
            if (!engram) return 2;
        } else if (di_cli_flag_value(argc, argv, &i, "--accelerator", &accel)) {
            if (!accel) return 2;
        } else if (di_cli_flag_value(argc, argv, &i, "--batches", &batches)) {
            if (!batches) return 2;
        } else if (di_cli_flag_value(argc, argv, &i, "--prompt", &v)) {
            if (!v || di_cli_parse_int("--prompt", v, 1, 1 << 20, &prompt)) return 2;
        } else if (di_cli_flag_value(argc, argv, &i, "--decode", &v)) {
            if (!v || di_cli_parse_int("--decode", v, 2, INT_MAX, &decode)) return 2;
        } else if (di_cli_flag_value(argc, argv, &i, "--max-num-batched-tokens", &v)) {
            if (!v || di_cli_parse_int("--max-num-batched-tokens", v, 1, INT_MAX, &step_tokens)) return 2;
        } else if (di_cli_flag_value(argc, argv, &i, "--lanes", &v)) {
            if (!v || di_cli_parse_int("--lanes", v, 1, INT_MAX, &lanes)) return 2;
        } else if (di_cli_flag_value(argc, argv, &i, "--graphs", &v)) {
            if (!v || di_cli_parse_int("--graphs", v, 0, 1, &graphs)) return 2;
        } else if (!strcmp(argv[i], "--yoco-compact")) {
            yoco = 1;
        } else if (di_cli_flag_value(argc, argv, &i, "--yoco-keep-tokens", &v)) {
            if (!v || di_cli_parse_i64("--yoco-keep-tokens", v, 1, INT64_MAX, &yoco_keep)) return 2;
        } else if (di_cli_flag_value(argc, argv, &i, "--mtp-varlen", &v)) {
            if (!v || di_cli_parse_int("--mtp-varlen", v, 0, 1, &varlen)) return 2;
        } else if (di_cli_flag_value(argc, argv, &i, "--nextn-decode", &v)) {
            if (!v || di_cli_parse_int("--nextn-decode", v, 0, DEEPINFER_MAX_DRAFT, &nextn)) return 2;
        } else if (!strcmp(argv[i], "--verify-cost")) {
            verify_cost = 1;
        } else if (di_cli_flag_value(argc, argv, &i, "--reps", &v)) {
            if (!v || di_cli_parse_int("--reps", v, 1, INT_MAX, &reps)) return 2;
        } else {
            fprintf(stderr, "error: unknown option '%s' (see deepinfer bench-engine --help)\n", argv[i]);
            return 2;
        }
    }
    if (dummy && model) return fprintf(stderr, "error: give --model or --dummy, not both\n"), 2;
    if (dummy && engram)
        return fprintf(stderr, "error: --engram-hash is for --model (a --dummy V4.1 model writes its own)\n"), 2;
    int bs[32], nb = 0, maxb = 1;
    if (di_cli_parse_int_list("--batches", batches, 1, 4096, bs, 32, &nb)) return 2;
    for (int k = 0; k < nb; k++)
        if (bs[k] > maxb) maxb = bs[k];
    if (!dummy) { /* the one model rule of every command (cli_model_dir.h), checked before anything runs */
        di_model_location loc;
        di_error merr = {0};
        if (di_cli_locate_model(model, &loc, &merr)) return fprintf(stderr, "deepinfer bench-engine: %s\n", merr.msg), 1;
    }
    deepinfer_engine_config cfg;
    deepinfer_engine_config_init(&cfg);
    cfg.model = model;
    cfg.engram_hash = engram;
    cfg.accelerator = accel;
    cfg.max_num_seqs = maxb;
    cfg.max_model_len = prompt + decode + 16;
    cfg.ep = par.ep, cfg.dp = par.dp, cfg.eplb_replicas = par.eplb_replicas, cfg.eplb_interval = par.eplb_interval;
    /* every prompt in one step, so that all B requests decode together from the next step on */
    int64_t all = (int64_t)maxb * prompt, cap = dummy ? (1 << 20) : 8192;
    cfg.max_num_batched_tokens = (int)(all < cap ? all : cap);
    if (step_tokens) cfg.max_num_batched_tokens = step_tokens;
    cfg.chunk_size = prompt;
    if (graphs >= 0) cfg.cuda_graphs = graphs;
    cfg.yoco_compact = yoco;
    cfg.yoco_keep_tokens = yoco_keep;
    if (verify_cost) cfg.max_draft_tokens = (nextn >= 0 ? nextn : 5) + 1; /* snapshot room for the verify rows */
    else cfg.mtp_varlen = varlen, cfg.nextn_decode = nextn;
    deepinfer_engine *e = NULL;
    /* --dummy: the reduced config's directory, its config and floor costs, the in-memory checkpoint */
    char ddir[] = "/tmp/deepinfer-bench-engine-XXXXXX";
    di_model_config dcfg;
    bench_costs costs;
    memset(&dcfg, 0, sizeof dcfg);
    memset(&costs, 0, sizeof costs);
    if (dummy) {
        di_safetensors *st = NULL;
        double t0 = now_s();
        if (dummy_prepare(dummy, layers, seed, accel, maxb, cfg.max_model_len, ddir, &dcfg, &costs, &st)) return 1;
        /* state pages: every sequence at max_model_len, plus the scheduler's watermark (1% of the pages,
         * kept spare while sequences run: scheduler.c admit) and one sequence more, so that all B prompts
         * are admitted in the first step and the B requests decode together */
        di_pool_geom g;
        di_error ge = {0};
        if (di_pool_geom_compute(&dcfg, 0, cfg.max_model_len, 0, &g, &ge) == DEEPINFER_OK) {
            int64_t per = di_pool_geom_pages_for(&dcfg, &g, cfg.max_model_len), need = per * maxb;
            cfg.num_pages = need + need / 99 + per + 1;
        }
        fprintf(stderr, "opening the engine on it (spec check, packing, upload)\n");
        cfg.model = ddir;
        di_error err = {0};
        di_engine_options opt = {.weights = st, .lanes_max = lanes};
        deepinfer_status os = di_engine_open_opts(&cfg, &opt, &e, &err); /* owns st from here */
        rm_dummy_dir(ddir);
        if (os) {
            fprintf(stderr, "deepinfer bench-engine: %s\n", err.msg);
            return 1;
        }
        fprintf(stderr, "engine open after %.1f s\n", now_s() - t0);
    } else {
        di_error err = {0};
        di_engine_options opt = {.lanes_max = lanes};
        if (di_engine_open_opts(&cfg, &opt, &e, &err)) {
            fprintf(stderr, "deepinfer bench-engine: %s\n", err.msg);
            return 1;
        }
    }
    deepinfer_memory_plan plan;
    deepinfer_engine_plan(e, &plan);
    fputs(deepinfer_engine_plan_text(e), stderr);
    int gpu = !strcmp(plan.accelerator, "cuda");
    double bw;
    if (dummy && gpu) bw = di_backend_copy_gbs((size_t)2 << 30);
    else if (gpu) bw = di_backend_copy_gbs((size_t)256 << 20);
    else if (dummy) {
        double triad;
        bench_measure_bw(&bw, &triad);
    } else bw = read_bw();
    if (dummy)
        printf("model        dummy %s (%s, %lld layers, hidden %lld, %lld experts, top-%lld; random weights, seed %llu)\n",
               dummy, plan.arch, (long long)dcfg.n_layers, (long long)dcfg.hidden_size,
               (long long)dcfg.n_routed_experts, (long long)dcfg.num_experts_per_tok, (unsigned long long)seed);
    else printf("model        %s (%s)\n", plan.model_dir, plan.arch);
    printf("accelerator  %s (batch invariant: %s; CUDA graphs: %s)\n", plan.accelerator,
           plan.batch_invariant ? "yes" : "no", !gpu ? "n/a" : e->cfg.cuda_graphs ? "on" : "off");
    printf("threads      %d\n", di_threadpool_size(di_threadpool_global()));
    if (dummy && gpu) printf("bandwidth    device copy %.1f GB/s (2 GiB cudaMemcpy D2D, read + written, best of 5)\n", bw);
    else if (gpu) printf("bandwidth    device copy %.1f GB/s (256 MiB, read + write, best of 5)\n", bw);
    else if (dummy) printf("bandwidth    read %.1f GB/s (3 x 128 MiB, all threads, best of 5)\n", bw);
    else printf("bandwidth    read %.1f GB/s (256 MiB, all threads, best of 5)\n", bw);
    if (dummy)
        printf("decode step  floor = (dense %.3f GB + head %.3f GB + expected distinct experts x %.3f MB/layer + "
               "state and rows per sequence at context %d) / bandwidth\n",
               gb(costs.dense_bytes), gb(costs.head_bytes), costs.expert_bytes[dcfg.n_layers - 1] / 1e6, prompt);
    else
        printf("decode step  %llu weight bytes -> floor %.0f tokens/s at batch 1\n",
               (unsigned long long)plan.decode_weight_bytes, bw * 1e9 / (double)plan.decode_weight_bytes);
    if (verify_cost) {
        int rc = bench_verify_cost(e, bs, nb, prompt, nextn >= 0 ? nextn : 5, reps);
        deepinfer_engine_close(e);
        return rc;
    }
    printf("%6s %12s %10s %9s %10s %12s %9s %9s %11s %11s\n", "batch", "tokens/s", "ms/step", "vs first", "floor ms",
           "floor tok/s", "of floor", "GPU idle", "graph", "dev-sampled");
    double base = 0;
    for (int k = 0; k < nb; k++) {
        double tps = 0;
        run_result best = {0};
        deepinfer_engine_stats sp0, sp1;
        deepinfer_engine_get_stats(e, &sp0);
        for (int r = 0; r < reps; r++) {
            run_result rr;
            double t_run = now_s();
            if (run_batch(e, bs[k], prompt, decode, deepinfer_engine_vocab_size(e), &rr)) {
                const char *why = deepinfer_engine_last_error(e);
                fprintf(stderr, "deepinfer bench-engine: %s\n", *why ? why : "no step decoded every request at once "
                                                                            "(raise --max-num-batched-tokens)");
                deepinfer_engine_close(e);
                return 1;
            }
            fprintf(stderr, "batch %d rep %d: %d timed steps, %.3f ms/step (run %.1f s)\n", bs[k], r + 1, rr.steps,
                    rr.secs / rr.steps * 1e3, now_s() - t_run);
            if (rr.tokens / rr.secs > tps) tps = rr.tokens / rr.secs, best = rr;
        }
        double step_s = best.secs / best.steps;
        /* floor time of one step of B rows */
        double floor_s = dummy ? bench_decode_bytes(&dcfg, &costs, bs[k], prompt) / (bw * 1e9)
                               : (double)plan.decode_weight_bytes / (bw * 1e9);
        double floor_tps = bs[k] / floor_s; /* --model: B x the batch-1 rate */
        if (k == 0) base = tps;
        char idle[16], gs[24], ds[24];
        if (best.busy > 0) snprintf(idle, sizeof idle, "%.1f%%", 100.0 * best.idle / (best.idle + best.busy));
        else snprintf(idle, sizeof idle, "n/a");
        snprintf(gs, sizeof gs, "%lld/%d", (long long)best.graph_steps, best.steps);
        snprintf(ds, sizeof ds, "%lld/%d", (long long)best.dev_sampled, best.steps);
        printf("%6d %12.1f %10.3f %9.2f %10.3f %12.0f %9.4f %9s %11s %11s\n", bs[k], tps, step_s * 1e3, tps / base,
               floor_s * 1e3, floor_tps, tps / floor_tps, idle, gs, ds);
        deepinfer_engine_get_stats(e, &sp1);
        sp1.spec_steps -= sp0.spec_steps, sp1.spec_drafted -= sp0.spec_drafted, sp1.spec_accepted -= sp0.spec_accepted;
        for (int j = 0; j < DEEPINFER_MAX_DRAFT; j++)
            sp1.spec_drafted_at[j] -= sp0.spec_drafted_at[j], sp1.spec_accepted_at[j] -= sp0.spec_accepted_at[j];
        di_specdec_report(stdout, "       ", &sp1);
    }
    deepinfer_engine_stats st;
    deepinfer_engine_get_stats(e, &st);
    printf("steps        %lld, of which %lld ran as CUDA graphs (%lld graphs captured), %lld sampled on the device; "
           "device busy %.3f s, idle %.3f s\n",
           (long long)st.steps, (long long)st.graph_steps, (long long)st.graphs, (long long)st.device_sampled_steps,
           st.device_busy_s, st.device_idle_s);
    printf("# timed: the steps where all B requests decode, but the first (best of %d reps); GPU idle = d(idle) / "
           "(d(idle) + d(busy)) over them (deepinfer_engine_stats; n/a when no device time was recorded); graph, "
           "dev-sampled: of the timed steps, those run as a CUDA graph / sampled on the device; of floor = floor "
           "time / measured time%s\n",
           reps, dummy ? "; floor: tools/bench_floor.c bench_decode_bytes / bandwidth" : "; floor: decode weight "
                                                                                         "bytes x B / bandwidth");
    deepinfer_engine_close(e);
    return 0;
}

__attribute__((constructor)) static void register_bench_engine(void) {
    di_cli_register("bench-engine", "decode tokens/s and GPU idle through the engine at batch sizes 1, 8, 32, 64 vs the "
                    "bandwidth floor (a checkpoint, or --dummy at real dims)",
                    cmd_bench_engine);
}
