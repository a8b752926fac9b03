/*
 * eval_model.h — the model `deepinfer eval` scores with, and the one batched
 * call every scoring task (perplexity, loglikelihood, multiple choice,
 * loglikelihood_rolling) is built on.
 *
 * Two paths (`--path`, eval/README.md "Scoring paths"):
 *  - engine (the default): every sequence is a request to the public
 *    engine (deepinfer_generate, max_tokens 1) with prompt_logprobs = 1,
 *    so scoring runs the engine's batching, chunking and configuration as
 *    users run it; lp is the engine's float logprob (sampler.h: the raw
 *    log_softmax in double, rounded to float);
 *  - model-forward: the model's forward (the path `deepinfer score
 *    --all-positions` uses, tools/score/score.h: di_score_model's seq_new
 *    and forward) with logits asked for the scored rows, many sequences
 *    per forward step, lp in double.
 * Both compute the same rows (the CPU kernels are batch invariant), so the
 * two give the same scores up to the engine's float rounding of each lp.
 * Generation tasks use the public engine (eval_gen.h).
 */
#ifndef DI_TOOLS_EVAL_MODEL_H
#define DI_TOOLS_EVAL_MODEL_H

#include <stdint.h>

#include "deepinfer.h"
#include "eval/eval_engine.h"
#include "score/score.h"
#include "tokenizer/tokenizer.h"

typedef struct ev_model {
    di_model_config cfg;
    di_tokenizer *tok;
    di_v4_model *v4;          /* loaded by ev_model_load (one of the two) */
    di_v41_model *v41;
    di_score_model sm;        /* its score view: seq_new, forward, max_context */
    int loaded;
    int64_t context;          /* the model's context: min(max_position_embeddings, 65536), the engine's rule */
    int32_t vocab, bos;
    char dir[4096];
    const char *accelerator;  /* "cpu" | "cuda" (resolved) */
    int batch_invariant;      /* 1 on the CPU always; on CUDA from $DEEPINFER_BATCH_INVARIANT (default 1) */
    int rows_per_step;        /* token rows per forward step */
    int use_engine;           /* 1: score through the engine (set before ev_model_load) */
    deepinfer_engine_config engine_cfg; /* the engine path's configuration (ev_model_use_engine) */
    deepinfer_engine *engine; /* loaded by ev_model_load when use_engine */
    ev_engine_info info;      /* what the open engine runs (eval_engine.h) */
} ev_model;

/* Locate the model (the CLI rule, args/cli_model_dir.h), read its config and
 * tokenizer, pick the backend (`accelerator`: auto | cpu | cuda, NULL =
 * $DEEPINFER_ACCELERATOR else auto) and, on CUDA, batch invariance
 * (`batch_invariant` 0 | 1, -1 = the default 1; $DEEPINFER_BATCH_INVARIANT
 * overrides either). The weights are loaded by ev_model_load. */
deepinfer_status ev_model_open(const char *model_arg, const char *accelerator, int batch_invariant, ev_model *m,
                               di_error *err);

/* Score through the engine (before ev_model_load), opened with `cfg` (NULL = the defaults; its
 * model, accelerator and max_model_len are eval's): sets use_engine, and the context sequences may
 * use becomes one less than the model's (a request's prompt leaves room for its one output token). */
void ev_model_use_engine(ev_model *m, const deepinfer_engine_config *cfg);

/* 1 when the open engine runs compact prefill: scoring is refused (EV_NEEDS_PROMPT_LOGPROBS). */
int ev_model_compact(const ev_model *m);

/* Load the weights (or, with use_engine, open the engine) with room for sequences of max_len
 * positions (<= context). */
deepinfer_status ev_model_load(ev_model *m, int64_t max_len, di_error *err);
void ev_model_close(ev_model *m);

/* Text -> token ids (no BOS). *ids malloc'd (caller frees), *n set. */
deepinfer_status ev_encode(const ev_model *m, const char *text, size_t len, int32_t **ids, int *n, di_error *err);

/* One sequence to score: lp[i] = log p(ids[i] | ids[0..i-1]) and greedy[i]
 * = (ids[i] is the argmax, lowest id on ties) for i in [score_from, n). */
typedef struct ev_seq {
    const int32_t *ids;
    int n;
    int score_from;           /* >= 1 */
    double *lp;               /* [n], caller memory */
    uint8_t *greedy;          /* [n], caller memory */
} ev_seq;

/* Score n sequences, packing several into every forward step. */
deepinfer_status ev_score(ev_model *m, ev_seq *seqs, int n, di_error *err);

#endif
