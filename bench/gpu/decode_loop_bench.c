/* decode_loop_bench.c — GPU idle time between decode steps, eager (the first
 * version: tables staged per op, logits copied back, host argmax) vs
 * recorded (step plan + one CUDA graph per shape, device argmax).
 *
 *   build/gpubench/decode_loop_bench MODEL_DIR [--v41 [--engram-hash F]] [--batch 1,64] [--steps 64] [--prompt 32]
 *
 * Each sequence is prefilled with a fixed pseudo-random prompt, then the
 * loop runs --steps greedy steps. Per step, cudaEvents give the GPU time
 * from the step's start to its end (busy: the plan copy + the graph, or the
 * eager step's first to last op) and the start of the next step; idle =
 * period - busy, printed as a share of the period (steps 2.. : the first
 * recorded step includes the capture). Issue #6 asks idle < 10% at batch 64. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/dsv4.h"
#include "model/dsv41.h"
#include "ops/backend.h"
#include "ops/cuda/cu_step.h"

static int run(const char *dir, int v41, const char *hash, int nseq, int plen, int steps, int graph) {
    di_error err = {0};
    di_v4_options opt = {.engram_hash = hash};
    void *m = NULL;
    deepinfer_status st = v41 ? di_v41_load(dir, &opt, (di_v41_model **)&m, &err)
                              : di_v4_load(dir, &opt, (di_v4_model **)&m, &err);
    if (st) {
        fprintf(stderr, "load %s: %s\n", dir, err.msg);
        return 1;
    }
    const di_model_config *c = v41 ? di_v41_config(m) : di_v4_config(m);
    int V = (int)c->vocab_size;
    di_seq_state **seq = calloc((size_t)nseq, sizeof *seq);
    int32_t *first = calloc((size_t)nseq, sizeof *first), tok[256];
    int64_t pos[256];
    float *busy = calloc((size_t)steps, sizeof *busy), *start = calloc((size_t)steps, sizeof *start);
    float *lg = malloc(sizeof(float) * (size_t)V);
    uint32_t r = 12345;
    for (int j = 0; j < nseq && !st; j++) { /* prefill one sequence at a time */
        st = v41 ? di_v41_seq_new(m, &seq[j], &err) : di_v4_seq_new(m, &seq[j], &err);
        di_seq_state *rs[256];
        for (int t = 0; t < plen; t++) {
            r = r * 1103515245u + 12345u;
            tok[t] = (int32_t)((r >> 8) % (uint32_t)V);
            if (tok[t] == c->image_token_id) tok[t] = (tok[t] + 1) % V;
            pos[t] = t;
            rs[t] = seq[j];
        }
        int last = plen - 1;
        di_v4_batch b = {.n = plen, .tokens = tok, .pos = pos, .seq = rs, .n_logits = 1, .logit_rows = &last, .logits = lg};
        if (!st) st = v41 ? di_v41_forward(m, &b, &err) : di_v4_forward(m, &b, &err);
        first[j] = tok[plen - 1];
    }
    di_cuda_loop L = {.v41 = v41, .model = m, .nseq = nseq, .seq = seq, .first = first, .steps = steps, .graph = graph,
                      .busy_ms = busy, .start_ms = start};
    if (!st) st = di_cuda_greedy_loop(&L, &err);
    if (st) {
        fprintf(stderr, "batch %d %s: %s\n", nseq, graph ? "graph" : "eager", err.msg);
    } else {
        double b = 0, p = 0;
        int k0 = 1, n = 0;
        for (int i = k0; i + 1 < steps; i++, n++) {
            b += busy[i];
            p += start[i + 1] - start[i];
        }
        printf("%-8s batch %3d  steps %d  busy %.3f ms/step  period %.3f ms/step  idle %.3f ms (%.1f%%)  graphs %d\n",
               graph ? "graph" : "eager", nseq, n, b / n, p / n, (p - b) / n, p > 0 ? 100.0 * (p - b) / p : 0.0, L.ngraphs);
    }
    for (int j = 0; j < nseq; j++) di_seq_destroy(seq[j]);
    if (v41) di_v41_free(m);
    else di_v4_free(m);
    free(seq), free(first), free(busy), free(start), free(lg);
    return st != 0;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s MODEL_DIR [--v41] [--engram-hash F] [--batch 1,64] [--steps 64] [--prompt 32]\n", argv[0]);
        return 2;
    }
    const char *dir = argv[1], *hash = NULL, *batches = "1,64";
    int v41 = 0, steps = 64, plen = 32;
    for (int i = 2; i < argc; i++) {
        if (!strcmp(argv[i], "--v41")) v41 = 1;
        else if (!strcmp(argv[i], "--engram-hash") && i + 1 < argc) hash = argv[++i];
        else if (!strcmp(argv[i], "--batch") && i + 1 < argc) batches = argv[++i];
        else if (!strcmp(argv[i], "--steps") && i + 1 < argc) steps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--prompt") && i + 1 < argc) plen = atoi(argv[++i]);
    }
    if (steps < 3 || plen < 1 || plen > 256) return fprintf(stderr, "--steps >= 3, --prompt 1..256\n"), 2;
    di_error err = {0};
    if (di_backend_use(DI_BACKEND_CUDA, &err)) return fprintf(stderr, "cuda: %s\n", err.msg), 1;
    int rc = 0;
    char *list = strdup(batches);
    for (char *t = strtok(list, ","); t; t = strtok(NULL, ",")) {
        int nb = atoi(t);
        rc |= run(dir, v41, hash, nb, plen, steps, 0);
        rc |= run(dir, v41, hash, nb, plen, steps, 1);
    }
    free(list);
    return rc;
}
