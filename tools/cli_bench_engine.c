/* `deepinfer bench-engine`: decode throughput through the engine (scheduler,
 * runner, sampler, outputs included) at several batch sizes, against the
 * memory-bandwidth floor measured in the same run. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"
#include "deepinfer.h"
#include "ops/backend.h"
#include "ops/cpu/threadpool.h"

static const char USAGE[] =
    "usage: deepinfer bench-engine --model DIR [--batches 1,8,32,64] [--prompt N] [--decode N] [--reps R]\n"
    "                              [--max-num-batched-tokens N] [--engram-hash FILE] [--accelerator auto|cpu|cuda]\n"
    "                              [--graphs 0|1]\n"
    "\n"
    "For each batch size B: B requests with different N-token prompts (default 64)\n"
    "run greedily for --decode tokens (default 64, EOS ignored) through the engine;\n"
    "the steps in which all B requests decode one token each are timed (whole\n"
    "deepinfer_step calls; best of --reps, default 3). Prints decode tokens/s,\n"
    "ms per step, the ratio to the first batch size, and the floor: weight bytes a decode step\n"
    "reads / read bandwidth (measured here, all threads), times B.\n"
    "--accelerator (default auto: CUDA in deepinfer-cuda when a GPU is usable, else the CPU):\n"
    "on cuda the bandwidth is the device's copy bandwidth (cudaMemcpy device to device).\n"
    "--max-num-batched-tokens sets the step budget (default: every prompt in one step,\n"
    "at most 8192). Threads: $DEEPINFER_THREADS.\n"
    "--graphs (cuda): 1 (default, or $DEEPINFER_CUDA_GRAPHS) runs the decode steps as recorded CUDA graphs\n"
    "(one per batch size, captured in the first rep), 0 runs them eager (host tables staged per op).\n";

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

/* Decode rate of B requests: tokens and seconds summed over the steps in
 * which all B requests decode one token each (pure decode steps of B rows).
 * Returns 0, or -1 on failure. */
static int run_batch(deepinfer_engine *e, int B, int prompt, int decode, int vocab, double *secs, long *tokens) {
    int32_t *ids = malloc(sizeof(int32_t) * (size_t)prompt);
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
    *secs = 0;
    *tokens = 0;
    while (deepinfer_has_unfinished(e)) {
        double t0 = now_s();
        if (deepinfer_step(e, NULL)) return -1;
        double dt = now_s() - t0;
        const deepinfer_request_output *const *up;
        size_t n;
        deepinfer_read_outputs(e, &up, &n);
        int decoding = 0;
        for (size_t k = 0; k < n; k++)
            decoding += up[k]->choices[0].n_prev_tokens >= 1 && up[k]->choices[0].n_tokens == up[k]->choices[0].n_prev_tokens + 1;
        if (decoding == B) *secs += dt, *tokens += B;
    }
    int ok = *tokens > 0;
    for (int b = 0; b < B; b++) {
        deepinfer_request_output *o = NULL;
        if (deepinfer_take_output(e, first + (uint64_t)b, &o) || o->choices[0].n_tokens != (size_t)decode + 1) ok = 0;
        deepinfer_output_free(o);
    }
    return ok ? 0 : -1;
}

static int cmd_bench_engine(int argc, char **argv) {
    if (di_cli_wants_help(argc, argv)) {
        fputs(USAGE, stdout);
        return 0;
    }
    const char *model = NULL, *batches = "1,8,32,64", *engram = NULL, *accel = NULL, *v;
    int prompt = 64, decode = 64, reps = 3, step_tokens = 0, graphs = -1;
    for (int i = 1; i < argc; i++) {
        if (di_cli_flag_value(argc, argv, &i, "--model", &model)) {
            if (!model) return 2;
        } else if (di_cli_flag_value(argc, argv, &i, "--engram-hash", &engram)) {
            if (!engram) return 2;
        } else if (di_cli_flag_value(argc, argv, &i, "--accelerator", &accel)) {
            if (!accel) return 2;
        } else if (di_cli_flag_value(argc, argv, &i, "--batches", &batches)) {
            if (!batches) return 2;
        } else if (di_cli_flag_value(argc, argv, &i, "--prompt", &v)) {
            if (!v || (prompt = atoi(v)) < 1) return fprintf(stderr, "error: --prompt needs N >= 1\n"), 2;
        } else if (di_cli_flag_value(argc, argv, &i, "--decode", &v)) {
            if (!v || (decode = atoi(v)) < 2) return fprintf(stderr, "error: --decode needs N >= 2\n"), 2;
        } else if (di_cli_flag_value(argc, argv, &i, "--max-num-batched-tokens", &v)) {
            if (!v || (step_tokens = atoi(v)) < 1) return fprintf(stderr, "error: --max-num-batched-tokens needs N >= 1\n"), 2;
        } else if (di_cli_flag_value(argc, argv, &i, "--graphs", &v)) {
            if (!v || (strcmp(v, "0") && strcmp(v, "1"))) return fprintf(stderr, "error: --graphs needs 0 or 1\n"), 2;
            graphs = atoi(v);
        } else if (di_cli_flag_value(argc, argv, &i, "--reps", &v)) {
            if (!v || (reps = atoi(v)) < 1) return fprintf(stderr, "error: --reps needs N >= 1\n"), 2;
        } else {
            fprintf(stderr, "error: unknown option '%s' (see deepinfer bench-engine --help)\n", argv[i]);
            return 2;
        }
    }
    int bs[32], nb = 0, maxb = 1;
    for (const char *s = batches; *s && nb < 32;) {
        char *end;
        long b = strtol(s, &end, 10);
        if (end == s || b < 1 || b > 4096) return fprintf(stderr, "error: --batches wants sizes like 1,8,32,64\n"), 2;
        bs[nb++] = (int)b;
        if (b > maxb) maxb = (int)b;
        s = *end == ',' ? end + 1 : end;
    }
    deepinfer_engine_config cfg;
    deepinfer_engine_config_init(&cfg);
    cfg.model = model;
    cfg.engram_hash = engram;
    cfg.accelerator = accel;
    cfg.max_num_seqs = maxb;
    cfg.max_model_len = prompt + decode + 16;
    cfg.max_num_batched_tokens = maxb * prompt > maxb ? maxb * prompt : maxb;
    if (cfg.max_num_batched_tokens > 8192) cfg.max_num_batched_tokens = 8192;
    if (step_tokens) cfg.max_num_batched_tokens = step_tokens;
    cfg.chunk_size = prompt;
    if (graphs >= 0) cfg.cuda_graphs = graphs;
    deepinfer_engine *e = NULL;
    char msg[2048];
    if (deepinfer_engine_open(&cfg, &e, msg, sizeof msg)) {
        fprintf(stderr, "deepinfer bench-engine: %s\n", msg);
        return 1;
    }
    deepinfer_memory_plan plan;
    deepinfer_engine_plan(e, &plan);
    int gpu = !strcmp(plan.accelerator, "cuda");
    double bw = gpu ? di_backend_copy_gbs((size_t)256 << 20) : read_bw();
    printf("model        %s (%s)\n", plan.model_dir, plan.arch);
    printf("accelerator  %s\n", plan.accelerator);
    printf("threads      %d\n", di_threadpool_size(di_threadpool_global()));
    if (gpu) printf("bandwidth    device copy %.1f GB/s (256 MiB, read + write, best of 5)\n", bw);
    else printf("bandwidth    read %.1f GB/s (256 MiB, all threads, best of 5)\n", bw);
    printf("decode step  %llu weight bytes -> floor %.0f tokens/s at batch 1\n",
           (unsigned long long)plan.decode_weight_bytes, bw * 1e9 / (double)plan.decode_weight_bytes);
    printf("%6s %12s %10s %9s %14s %9s\n", "batch", "tokens/s", "ms/step", "vs first", "floor tok/s", "of floor");
    double base = 0;
    for (int k = 0; k < nb; k++) {
        double tps = 0, step_ms = 0;
        for (int r = 0; r < reps; r++) {
            double t;
            long toks;
            if (run_batch(e, bs[k], prompt, decode, deepinfer_engine_vocab_size(e), &t, &toks)) {
                const char *why = deepinfer_engine_last_error(e);
                fprintf(stderr, "deepinfer bench-engine: %s\n", *why ? why : "no step decoded every request at once "
                                                                            "(raise --max-num-batched-tokens)");
                deepinfer_engine_close(e);
                return 1;
            }
            if (toks / t > tps) tps = toks / t, step_ms = t / (double)(toks / bs[k]) * 1e3;
        }
        double floor = bw * 1e9 / (double)plan.decode_weight_bytes * bs[k];
        if (k == 0) base = tps;
        printf("%6d %12.1f %10.3f %9.2f %14.0f %9.4f\n", bs[k], tps, step_ms, tps / base, floor, tps / floor);
    }
    deepinfer_engine_stats st;
    deepinfer_engine_get_stats(e, &st);
    if (gpu)
        printf("steps        %lld, of which %lld ran as CUDA graphs (%lld graphs captured)\n", (long long)st.steps,
               (long long)st.graph_steps, (long long)st.graphs);
    deepinfer_engine_close(e);
    return 0;
}

__attribute__((constructor)) static void register_bench_engine(void) {
    di_cli_register("bench-engine", "decode tokens/s through the engine at batch sizes 1, 8, 32, 64 vs the bandwidth floor",
                    cmd_bench_engine);
}
