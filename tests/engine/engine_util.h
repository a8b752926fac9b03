/*
 * engine_util.h — helpers shared by the engine tests: opening an engine on a
 * test checkpoint, the V4.1 golden checkpoint as a model directory, a
 * deterministic mixed workload, and bitwise comparison of outputs. Included
 * by tests/engine/ files only.
 */
#ifndef DI_TESTS_ENGINE_UTIL_H
#define DI_TESTS_ENGINE_UTIL_H

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "deepinfer.h"
#include "test.h"

#define ENGINE_GOLDEN "golden/v4-tiny-a"
#define ENGINE_GOLDEN_V41 "golden/v41-tiny-a"

/* The V4.1 golden checkpoint with its reference Engram hash constants as the model directory's
 * engram_hash.json: a fresh /tmp directory of symbolic links (remove it with eng_rm_dir). */
static inline int eng_golden_v41_dir(char *out, size_t n) {
    char src[PATH_MAX];
    if (!realpath(di_test_data(ENGINE_GOLDEN_V41), src)) return 0;
    snprintf(out, n, "/tmp/di_v41_XXXXXX");
    if (!mkdtemp(out)) return 0;
    const char *files[] = {"config.json", "engram_token_map.json", "model-00001-of-00002.safetensors",
                           "model-00002-of-00002.safetensors", "model.safetensors.index.json"};
    char a[PATH_MAX + 64], b[PATH_MAX + 64];
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        snprintf(a, sizeof a, "%s/%s", src, files[i]);
        snprintf(b, sizeof b, "%s/%s", out, files[i]);
        if (symlink(a, b)) return 0;
    }
    snprintf(a, sizeof a, "%s/expected/manifest.json", src);
    snprintf(b, sizeof b, "%s/engram_hash.json", out);
    return symlink(a, b) == 0;
}

static inline void eng_rm_dir(const char *d) {
    char cmd[PATH_MAX + 32];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", d);
    if (system(cmd)) fprintf(stderr, "    could not remove %s\n", d);
}

typedef struct eng_opts {
    int chunk, max_seqs, max_tokens_step, page_rows, async;
    int64_t pages, max_model_len;
    const char *tokenizer;
} eng_opts;

static inline deepinfer_engine *eng_open(const eng_opts *o) {
    deepinfer_engine_config c;
    deepinfer_engine_config_init(&c);
    c.model = di_test_data(ENGINE_GOLDEN);
    c.max_model_len = o->max_model_len ? o->max_model_len : 1024;
    c.chunk_size = o->chunk;
    c.max_num_seqs = o->max_seqs ? o->max_seqs : 16;
    c.max_num_batched_tokens = o->max_tokens_step;
    c.page_rows = o->page_rows;
    c.num_pages = o->pages;
    c.async_scheduling = o->async;
    c.tokenizer = o->tokenizer;
    deepinfer_engine *e = NULL;
    char msg[1024];
    if (deepinfer_engine_open(&c, &e, msg, sizeof msg)) fprintf(stderr, "    open: %s\n", msg);
    return e;
}

/* A deterministic workload of n requests: mixed prompt lengths (1 .. ~300
 * tokens, crossing the window, the indexer's top-k and page boundaries) and
 * mixed sampling parameters. Prompt ids live in `ids` (n * 320 entries) and
 * never equal `avoid` (a text-only model's image token; -1 = none). */
static inline void eng_workload_avoid(int n, int vocab, int32_t avoid, int32_t *ids, deepinfer_prompt *prompts,
                                      deepinfer_sampling_params *sp) {
    static const int lens[] = {1, 2, 7, 31, 32, 33, 63, 64, 65, 100, 127, 128, 129, 200, 255, 300};
    uint32_t x = 12345;
    for (int i = 0; i < n; i++) {
        int len = lens[(i * 7) % 16] + (i / 16) % 3;
        int32_t *p = ids + (size_t)i * 320;
        for (int t = 0; t < len; t++) {
            x = x * 1664525u + 1013904223u;
            p[t] = (int32_t)((x >> 10) % (uint32_t)vocab);
            if (p[t] == avoid) p[t] = (p[t] + 1) % vocab;
        }
        prompts[i] = (deepinfer_prompt){.token_ids = p, .n_token_ids = (size_t)len};
        deepinfer_sampling_params *s = &sp[i];
        deepinfer_sampling_params_init(s);
        s->max_tokens = 1 + (i * 5) % 20;
        s->has_seed = 1;
        s->seed = 1000 + (uint64_t)i;
        s->logprobs = (i % 4 == 0) ? 5 : (i % 4 == 1 ? 0 : -1);
        s->ignore_eos = i % 3 != 0;
        switch (i % 8) {
        case 0: s->temperature = 0; break;
        case 1: s->temperature = 0.8f, s->top_k = 20; break;
        case 2: s->temperature = 1.0f, s->top_p = 0.9f; break;
        case 3: s->temperature = 0.7f, s->min_p = 0.05f, s->n = 3; break;
        case 4: s->temperature = 1.2f, s->repetition_penalty = 1.3f, s->presence_penalty = 0.5f; break;
        case 5: s->temperature = 0.9f, s->frequency_penalty = 0.7f, s->n = 2, s->top_k = 50, s->top_p = 0.95f; break;
        case 6: s->temperature = 1.0f, s->stop_ids[0] = 5, s->stop_ids[1] = 17, s->n_stop_ids = 2, s->min_tokens = 2; break;
        case 7: s->temperature = 0; s->repetition_penalty = 1.1f; break;
        }
    }
}

static inline void eng_workload(int n, int vocab, int32_t *ids, deepinfer_prompt *prompts, deepinfer_sampling_params *sp) {
    eng_workload_avoid(n, vocab, -1, ids, prompts, sp);
}

/* 1 if the two outputs are bitwise identical (tokens, logprobs, top
 * logprobs, text, finish reasons); reports the first difference. */
static inline int eng_same_output(const deepinfer_request_output *a, const deepinfer_request_output *b, int req) {
    if (a->status != b->status || a->n_choices != b->n_choices) {
        fprintf(stderr, "    request %d: status %d/%d choices %zu/%zu: %s%s\n", req, a->status, b->status, a->n_choices,
                b->n_choices, a->error, b->error);
        return 0;
    }
    for (size_t j = 0; j < a->n_choices; j++) {
        const deepinfer_completion *x = &a->choices[j], *y = &b->choices[j];
        int ok = x->n_tokens == y->n_tokens && x->finish_reason == y->finish_reason && x->n_top == y->n_top &&
                 x->text_len == y->text_len && !memcmp(x->token_ids, y->token_ids, sizeof(int32_t) * x->n_tokens) &&
                 !memcmp(x->text, y->text, x->text_len) && x->stop_token == y->stop_token &&
                 (!x->logprobs) == (!y->logprobs) &&
                 (!x->logprobs || !memcmp(x->logprobs, y->logprobs, sizeof(float) * x->n_tokens)) &&
                 (!x->n_top || (!memcmp(x->top_ids, y->top_ids, sizeof(int32_t) * x->n_tokens * (size_t)x->n_top) &&
                                !memcmp(x->top_logprobs, y->top_logprobs, sizeof(float) * x->n_tokens * (size_t)x->n_top)));
        if (!ok) {
            fprintf(stderr, "    request %d choice %zu differs: %zu vs %zu tokens, finish %s vs %s\n", req, j, x->n_tokens,
                    y->n_tokens, deepinfer_finish_reason_name(x->finish_reason),
                    deepinfer_finish_reason_name(y->finish_reason));
            for (size_t t = 0; t < x->n_tokens && t < y->n_tokens; t++)
                if (x->token_ids[t] != y->token_ids[t] || (x->logprobs && x->logprobs[t] != y->logprobs[t])) {
                    fprintf(stderr, "      first difference at token %zu: %d vs %d\n", t, x->token_ids[t], y->token_ids[t]);
                    break;
                }
            return 0;
        }
    }
    return 1;
}

#endif
