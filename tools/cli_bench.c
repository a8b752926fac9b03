/* `deepinfer bench`: prefill and decode throughput of a V4 or V4.1
 * checkpoint on the CPU, measured in the same run as the machine's memory
 * bandwidth, with the bytes-per-decode-token floor (weights touched per
 * token / bandwidth). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"
#include "cli_model.h"
#include "io/model_dir.h"
#include "ops/cpu/threadpool.h"

static const char USAGE[] =
    "usage: deepinfer bench --model DIR [--prompt N] [--decode N] [--batch B] [--reps R]\n"
    "                       [--engram-hash FILE]\n"
    "\n"
    "Measures, in one run: memory bandwidth (STREAM-style read and triad over\n"
    "3 x 128 MiB, all threads), prefill tokens/s (one N-token prompt per step),\n"
    "decode tokens/s (B sequences, one token each per step), and the decode\n"
    "floor: bytes of weights a decode token reads / read bandwidth.\n"
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

static void measure_bw(double *read_gbs, double *triad_gbs) {
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

static int cmd_bench(int argc, char **argv) {
    if (di_cli_wants_help(argc, argv)) {
        fputs(USAGE, stdout);
        return 0;
    }
    const char *model = NULL, *engram_hash = NULL, *v;
    int prompt = 512, decode = 64, batch = 1, reps = 3;
    for (int i = 1; i < argc; i++) {
        if (di_cli_flag_value(argc, argv, &i, "--model", &model)) {
            if (!model) return 2;
        } else if (di_cli_flag_value(argc, argv, &i, "--engram-hash", &engram_hash)) {
            if (!engram_hash) return 2;
        } else if (di_cli_flag_value(argc, argv, &i, "--prompt", &v)) {
            if (!v || (prompt = atoi(v)) < 1) return fprintf(stderr, "error: --prompt needs N >= 1\n"), 2;
        } else if (di_cli_flag_value(argc, argv, &i, "--decode", &v)) {
            if (!v || (decode = atoi(v)) < 1) return fprintf(stderr, "error: --decode needs N >= 1\n"), 2;
        } else if (di_cli_flag_value(argc, argv, &i, "--batch", &v)) {
            if (!v || (batch = atoi(v)) < 1 || batch > 1024) return fprintf(stderr, "error: --batch needs 1..1024\n"), 2;
        } else if (di_cli_flag_value(argc, argv, &i, "--reps", &v)) {
            if (!v || (reps = atoi(v)) < 1) return fprintf(stderr, "error: --reps needs N >= 1\n"), 2;
        } else {
            fprintf(stderr, "error: unknown option '%s' (see deepinfer bench --help)\n", argv[i]);
            return 2;
        }
    }
    di_error err = {0};
    di_model_location loc;
    cli_model m;
    di_v4_options opt = {.max_rows = prompt > batch ? prompt : batch, .max_context = prompt + decode + 16,
                         .engram_hash = engram_hash};
    if (di_model_locate(model, &loc, &err) || cli_model_load(loc.dir, &opt, &m, &err)) {
        fprintf(stderr, "deepinfer bench: %s\n", err.msg);
        return 1;
    }
    const di_model_config *c = m.sm.cfg;
    int V = (int)c->vocab_size, nthreads = di_threadpool_size(di_threadpool_global());
    double rbw, tbw;
    measure_bw(&rbw, &tbw);

    int nseq = batch;
    di_seq_state **seqs = calloc((size_t)nseq, sizeof *seqs);
    int32_t *tok = malloc(sizeof(int32_t) * (size_t)(prompt > batch ? prompt : batch));
    int64_t *pos = malloc(sizeof(int64_t) * (size_t)(prompt > batch ? prompt : batch));
    di_seq_state **rowseq = malloc(sizeof(*rowseq) * (size_t)(prompt > batch ? prompt : batch));
    int *rows = malloc(sizeof(int) * (size_t)batch);
    float *logits = malloc(sizeof(float) * (size_t)V * (size_t)batch);
    int rc = 1;
    for (int s = 0; s < nseq; s++)
        if (m.sm.seq_new(m.sm.model, &seqs[s], &err)) goto out;
    double best_pf = 1e30, best_dec = 1e30;
    for (int r = 0; r < reps; r++) {
        /* prefill every sequence (one step each), timing the prompt steps */
        double tpf = 0;
        for (int s = 0; s < nseq; s++) {
            di_seq_reset(seqs[s], c);
            for (int i = 0; i < prompt; i++)
                tok[i] = text_token(c, (i * 7919 + s * 104729 + 13) % V), pos[i] = i, rowseq[i] = seqs[s];
            int last = prompt - 1;
            di_v4_batch b = {.n = prompt, .tokens = tok, .pos = pos, .seq = rowseq, .n_logits = 1, .logit_rows = &last,
                             .logits = logits};
            double t0 = now_s();
            if (m.sm.forward(m.sm.model, &b, &err)) goto out;
            tpf += now_s() - t0;
        }
        if (tpf / nseq < best_pf) best_pf = tpf / nseq;
        /* decode: every sequence advances one token per step */
        double t0 = now_s();
        for (int step = 0; step < decode; step++) {
            for (int s = 0; s < nseq; s++) {
                tok[s] = text_token(c, (step * 31 + s) % V);
                pos[s] = prompt + step;
                rowseq[s] = seqs[s];
                rows[s] = s;
            }
            di_v4_batch b = {.n = nseq, .tokens = tok, .pos = pos, .seq = rowseq, .n_logits = nseq, .logit_rows = rows,
                             .logits = logits};
            if (m.sm.forward(m.sm.model, &b, &err)) goto out;
        }
        double td = now_s() - t0;
        if (td < best_dec) best_dec = td;
    }
    double pf_tps = prompt / best_pf, dec_tps = (double)decode * nseq / best_dec;
    double bytes = (double)m.decode_bytes, floor_tps = rbw * 1e9 / bytes * nseq;
    printf("model        %s (%s, %lld layers, hidden %lld)\n", loc.dir, di_arch_name(c->arch), (long long)c->n_layers,
           (long long)c->hidden_size);
    printf("threads      %d\n", nthreads);
    printf("bandwidth    read %.1f GB/s, triad %.1f GB/s (3 x 128 MiB, best of 5)\n", rbw, tbw);
    printf("prefill      %d-token prompt: %.1f tokens/s (best of %d)\n", prompt, pf_tps, reps);
    printf("decode       batch %d, %d steps after the prompt: %.1f tokens/s (%.3f ms/step)\n", nseq, decode, dec_tps,
           best_dec / decode * 1e3);
    printf("floor        %.0f weight bytes per decode step -> %.0f tokens/s at the read bandwidth (batch %d); "
           "decode reaches %.4f of it\n",
           bytes, floor_tps, nseq, dec_tps / floor_tps);
    rc = 0;
out:
    if (rc) fprintf(stderr, "deepinfer bench: %s\n", err.msg);
    for (int s = 0; s < nseq; s++) di_seq_destroy(seqs[s]);
    free(seqs), free(tok), free(pos), free(rowseq), free(rows), free(logits);
    cli_model_free(&m);
    return rc;
}

DI_CLI_COMMAND(bench, "prefill / decode throughput of a V4 / V4.1 checkpoint vs the measured memory bandwidth", cmd_bench)
