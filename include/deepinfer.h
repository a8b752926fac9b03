/*
 * deepinfer.h — the public C API of deepinfer, an inference engine for
 * DeepSeek's V4 family (DeepSeek-V4-Flash, DeepSeek-V4.1-Flash).
 *
 * This is the only header applications include. Everything else under src/
 * is internal and may change.
 *
 * Conventions
 *  - Every call that can fail returns a deepinfer_status (0 = success) and,
 *    where a handle exists, leaves a human-readable message retrievable with
 *    the handle's *_last_error() call. Messages say what to fix.
 *  - The library never calls abort() or exit() on bad input.
 *  - Ownership is stated on each function: "caller frees" means with the
 *    matching *_free / *_close call; "engine-owned" memory must not be freed
 *    and is valid only as long as stated.
 *  - An engine handle is not thread-safe: call it from one thread at a time.
 *
 * Two ways to run requests:
 *  - Offline batch (like DeepInfer's / vLLM's `LLM.generate`):
 *      deepinfer_engine_open → deepinfer_generate(prompts[], params[]) →
 *      deepinfer_outputs_free → deepinfer_engine_close
 *  - Request-level streaming (for servers):
 *      deepinfer_add_request ... then repeatedly deepinfer_step and
 *      deepinfer_read_outputs (new tokens/text of every request the step
 *      advanced); deepinfer_take_output hands a finished request to the
 *      caller; deepinfer_abort ends one early.
 *
 * Determinism: a request's tokens and logprobs are a function of its prompt,
 * its sampling parameters and its seed only — not of the other requests in
 * the engine, the step schedule, chunking or preemption (bitwise, on the
 * CPU backend and with DEEPINFER_BATCH_INVARIANT=1 on CUDA).
 */
#ifndef DEEPINFER_H
#define DEEPINFER_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* DEEPINFER_API marks what libdeepinfer.so exports: the library is built
 * with -fvisibility=hidden, so a program that links it sees these functions
 * and nothing else (README.md "Use it from your own C program"). */
#if defined(__GNUC__) || defined(__clang__)
#define DEEPINFER_API __attribute__((visibility("default")))
#else
#define DEEPINFER_API
#endif

#define DEEPINFER_VERSION_MAJOR 0
#define DEEPINFER_VERSION_MINOR 1
#define DEEPINFER_VERSION_PATCH 0

/* Status codes. Negative values are errors. */
typedef enum deepinfer_status {
    DEEPINFER_OK = 0,
    DEEPINFER_ERR_INVALID_ARGUMENT = -1, /* a parameter value is out of range or malformed */
    DEEPINFER_ERR_IO = -2,               /* a file could not be opened, read or mapped */
    DEEPINFER_ERR_FORMAT = -3,           /* a file's contents are malformed or inconsistent */
    DEEPINFER_ERR_UNSUPPORTED = -4,      /* valid input this build does not handle */
    DEEPINFER_ERR_OUT_OF_MEMORY = -5,    /* an allocation or a memory budget failed */
    DEEPINFER_ERR_NOT_FOUND = -6,        /* a model, tensor, key or file is missing */
    DEEPINFER_ERR_LIMIT = -7,            /* a size, depth or time limit was exceeded */
    DEEPINFER_ERR_INTERNAL = -8          /* a bug in deepinfer: please report it */
} deepinfer_status;

/* A short constant name for a status code ("invalid argument", ...). */
DEEPINFER_API const char *deepinfer_status_name(deepinfer_status status);

/* The library version as "MAJOR.MINOR.PATCH". */
DEEPINFER_API const char *deepinfer_version(void);

/* ---- sampling parameters ------------------------------------------------ */

#define DEEPINFER_MAX_STOP_STRINGS 16
#define DEEPINFER_MAX_STOP_IDS 64
#define DEEPINFER_MAX_LOGPROBS 20
#define DEEPINFER_MAX_DRAFT 8       /* the longest draft any drafter gives per step */

/*
 * Per-request sampling parameters (DeepInfer's / vLLM's SamplingParams).
 * Initialise with deepinfer_sampling_params_init, then set fields. Strings
 * are borrowed: deepinfer_add_request / deepinfer_generate copy what they
 * keep, so the caller may free them after the call returns.
 *
 * Order of application (deterministic, per row): repetition / presence /
 * frequency penalties on the raw logits → min_tokens masks EOS and stop ids →
 * structured-output mask → temperature → min_p → top_k → top_p → Gumbel-max
 * with noise Philox(seed, choice, absolute position), ties to the lowest id.
 * Invalid values make that request fail with a message naming the field.
 */
typedef struct deepinfer_sampling_params {
    float temperature;        /* 0 = greedy (argmax); default 1 */
    int32_t top_k;            /* 0 or -1 = disabled */
    float top_p;              /* (0, 1]; 1 = disabled */
    float min_p;              /* [0, 1]; 0 = disabled */
    float repetition_penalty; /* > 0; 1 = disabled (prompt + output tokens) */
    float presence_penalty;   /* [-2, 2]; 0 = disabled (output tokens) */
    float frequency_penalty;  /* [-2, 2]; 0 = disabled (output tokens) */
    int32_t max_tokens;       /* >= 1; default 16 */
    int32_t min_tokens;       /* 0 <= min_tokens <= max_tokens: EOS/stop ids masked before, stop strings not checked */
    int32_t n;                /* >= 1 independent samples (choices) of the same prompt */
    int ignore_eos;           /* do not stop at EOS */
    int has_seed;             /* `seed` below is set; else one is derived from the engine seed and the request id */
    uint64_t seed;            /* seq_seed */
    int32_t logprobs;         /* top logprobs returned per token, 0..DEEPINFER_MAX_LOGPROBS; -1 = no logprobs */
    const char *stop[DEEPINFER_MAX_STOP_STRINGS]; /* stop strings (borrowed) */
    int32_t n_stop;
    int32_t stop_ids[DEEPINFER_MAX_STOP_IDS];     /* stop token ids */
    int32_t n_stop_ids;
    int skip_special_tokens;  /* leave special tokens out of the text; default 1 */
    /* Structured outputs (so_args): schema_type "regex" | "json" | "ebnf" and
     * the schema text (borrowed); NULL = unconstrained. The output is a full
     * match; EOS is allowed exactly when the grammar accepts, and a choice
     * whose grammar can take no further token finishes ("stop"). A schema
     * that does not compile fails that request alone, naming the problem. */
    const char *so_schema_type;
    const char *so_schema;
    int so_after_think;       /* constrain only after </think> (thinking mode) */
    int32_t so_whitespace_max;/* json: whitespace bytes allowed between tokens; -1 = default (20), 0 = compact */
    int so_lenient;           /* json: ignore unsupported schema keywords instead of failing */
    /* Prompt logprobs (vLLM's prompt_logprobs): -1 = none (default); 0 = the raw log-probability of
     * each prompt token given the tokens before it (the output's prompt_logprobs); K in
     * 1..DEEPINFER_MAX_LOGPROBS = also the top K ids of each prompt position (prompt_top_ids). Raw =
     * log_softmax of the unprocessed logits, as `logprobs`. Computed once per request (n > 1 shares
     * them), bitwise the same whatever the batch, chunking, preemption or speculation. Refused (that
     * request fails) on an engine with yoco_compact = 1, where prompt positions have no logits. */
    int32_t prompt_logprobs;
} deepinfer_sampling_params;

/* Fill *p with the defaults (temperature 1, max_tokens 16, n 1, logprobs -1,
 * prompt_logprobs -1, skip_special_tokens 1, everything else disabled). */
DEEPINFER_API void deepinfer_sampling_params_init(deepinfer_sampling_params *p);

/* ---- engine configuration ------------------------------------------------ */

/*
 * Engine configuration. Initialise with deepinfer_engine_config_init; zero
 * (or -1 where stated) means "the default". Environment overrides, DeepInfer's
 * names: $DEEPINFER_ACCELERATOR overrides `accelerator`,
 * $DEEPINFER_BATCH_INVARIANT (0/1) overrides `batch_invariant` and
 * $DEEPINFER_CUDA_GRAPHS (0/1) overrides `cuda_graphs` when set.
 *
 * Model location: `model` (a directory with config.json, or ORG/NAME[@REV] in
 * the Hugging Face cache); when NULL, $DEEPINFER_HF_MODEL_DIR; when that is
 * unset too, the embedded demo model models/deepinfer-demo-v41, found as
 * <directory of the running executable>/../models/deepinfer-demo-v41, else
 * at the source tree path compiled into the library.
 */
typedef struct deepinfer_engine_config {
    const char *model;             /* see above */
    const char *tokenizer;         /* tokenizer.json file or directory; NULL = the model directory (optional there) */
    const char *accelerator;       /* "auto" | "cpu" | "cuda"; NULL = "auto": CUDA when the library has the CUDA
                                      backend (`make cuda`) and a GPU is usable, else the CPU. The backend is
                                      process-wide: engines on "cpu" and "cuda" cannot be open at once */
    uint64_t memory_budget;        /* bytes for weights + workspace + state pools; 0 = auto (see the plan) */
    int max_num_batched_tokens;    /* token rows per step (decode tokens + prefill chunks); 0 = 2048 */
    int max_num_seqs;              /* sequences running at once (state slots); 0 = 64 */
    int chunk_size;                /* longest prefill chunk of one sequence in one step; 0 = 512 */
    int batch_invariant;           /* -1 = default (1); CPU kernels are batch invariant always; on CUDA 0 picks
                                      the fastest kernel per shape (a row's bits then depend on the batch) */
    int64_t max_model_len;         /* longest prompt + output; 0 = the model's context (at most 65536) */
    int page_rows;                 /* compressed-KV rows per state page; 0 = 64 */
    int64_t num_pages;             /* exact page count instead of the budget's (tests, tuning); 0 = from the budget */
    int async_scheduling;          /* -1 = auto (on when the device queue is asynchronous), 0 = off, 1 = on */
    int max_draft_tokens;          /* snapshot room per sequence for draft tokens; 0 = none */
    uint64_t seed;                 /* base of the seeds of requests without one */
    const char *engram_hash;       /* V4.1: Engram hash constants (engram_hash.json, or a golden manifest); NULL =
                                      the model directory's engram_hash.json, else the released constants */
    int cuda_graphs;               /* -1 = default (1): on CUDA, decode steps run as recorded CUDA graphs (the same
                                      results); 0 = every step eager; no effect on the CPU */
    /* V4.1 bounded replay of the late layers in prefill (DeepInfer's YOCO_PREFILL_TRUNCATION_MODE;
     * docs/architecture.md §6.5), an approximation, off by default. $DEEPINFER_YOCO_PREFILL_TRUNCATION_MODE
     * (exact | compact) and $DEEPINFER_YOCO_PREFILL_KEEP_TOKENS override these two (README "Environment"). */
    int yoco_compact;              /* 0 = exact (default): every layer on every prompt token; 1 = compact: the
                                      layers after the last KV source run only on each request's last
                                      yoco_keep_tokens prompt tokens (and every decode token). Requests then get no
                                      prompt logits. V4.1 only (CPU and CUDA); refused at open on V4 */
    int64_t yoco_keep_tokens;      /* compact's tail length; 0 = 140 for V4.1. Must be >= sliding_window + the
                                      longest draft (max_draft_tokens, or the DSpark block size) */
    /* Speculative decoding (DeepInfer's names; docs/speculative.md): the checkpoint's drafter (V4.1 DSpark,
     * V4 MTP) proposes tokens that the model verifies in the same step; outputs are identical with it on or
     * off (tokens and logprobs: a draft is accepted only where it equals the token the sampler draws without
     * speculation). $DEEPINFER_ENABLE_MTP_VARLEN and $DEEPINFER_USE_NEXTN_DECODE override these two. */
    int mtp_varlen;                /* -1 = default (0); 1 = speculation with confidence-scheduled verification: each
                                      step verifies, per request, the drafts the drafter's confidence expects to
                                      pay for (at most nextn_decode); 0 = fixed-length drafts of nextn_decode */
    int nextn_decode;              /* -1 = default: the checkpoint's DSpark block size (V4: 1) when mtp_varlen is 1,
                                      else 0; 0 = no speculation; N = at most N drafts per request and step (at most
                                      the block size: an error otherwise) */
    /* Parallelism (docs/DESIGN.md "Parallel"; DeepSeek's serving layout: DP attention, EP across all
     * ranks). The engine runs world = max(dp, ep) ranks in one process, one thread each: over the
     * in-process loopback communicator on the CPU backend; on CUDA rank r drives GPU r and the ranks
     * meet over NCCL (libnccl.so.2; more ranks than visible GPUs are refused). Refused at open,
     * before any weight is uploaded, with a message naming the fix: ep not dividing the routed
     * experts, dp > 1 with ep != dp, the GPU rules above, a model that does not fit its ranks.
     * Outputs are bitwise those of one rank. Speculative decoding and compact prefill run on one
     * rank only (refused with ep or dp > 1). */
    int ep;                        /* expert-parallel ranks: routed experts sharded over them, tokens dispatched to
                                      their experts' ranks and combined back in the single-rank order; 0 = 1 */
    int dp;                        /* attention data-parallel ranks: each a full attention/dense replica with its own
                                      requests and state pool (new requests go to the least occupied rank); 0 = 1;
                                      dp > 1 needs ep == dp */
    int eplb_replicas;             /* EPLB: replica slots per rank for hot experts (0 = off; needs ep > 1): per-expert
                                      load counters, a rebalance plan applied between steps; outputs unchanged */
    int eplb_interval;             /* EPLB: engine steps between rebalances; 0 = 32 */
    int cp_min_tokens;             /* context parallelism (needs dp > 1): a step's prefill chunk of at least this many
                                      tokens of one prompt runs over every rank in zig-zag chunks (the attention
                                      split, the state gathered), outputs unchanged; 0 = off */
} deepinfer_engine_config;

DEEPINFER_API void deepinfer_engine_config_init(deepinfer_engine_config *cfg);

/* ---- engine ---------------------------------------------------------------- */

typedef struct deepinfer_engine deepinfer_engine;

/* Open an engine: locate and load the model, plan memory (weights, workspace,
 * state slots, state pages) from the budget and allocate it all; nothing is
 * allocated for model state afterwards. On failure *out is NULL and, when
 * errbuf is non-NULL, the message is written there (errbuf_len bytes, NUL
 * terminated). Caller closes the engine with deepinfer_engine_close. */
DEEPINFER_API deepinfer_status deepinfer_engine_open(const deepinfer_engine_config *cfg, deepinfer_engine **out,
                                                     char *errbuf, size_t errbuf_len);

/* Release everything the engine owns, including unfinished and untaken
 * requests. Safe on NULL. */
DEEPINFER_API void deepinfer_engine_close(deepinfer_engine *e);

/* The message of the last failed call on `e` (engine-owned, valid until the
 * next call); "" if none. */
DEEPINFER_API const char *deepinfer_engine_last_error(const deepinfer_engine *e);

/* The memory plan and the resolved configuration. */
typedef struct deepinfer_memory_plan {
    uint64_t budget;               /* the budget used (auto or given) */
    uint64_t weight_bytes;         /* packed model weights (memory-mapped) */
    uint64_t decode_weight_bytes;  /* weight bytes one decode step reads (the bandwidth floor's numerator) */
    uint64_t workspace_bytes;      /* step workspace, logits, sampler scratch, step buffers */
    uint64_t slot_bytes;           /* one sequence's fixed state (SWA rings, compressor partial state, page tables) */
    int num_slots;                 /* = max_num_seqs */
    uint64_t page_bytes;           /* one state page */
    int64_t num_pages;             /* pages in the pool (compressed KV + index keys) */
    int page_rows_kv, page_rows_index; /* rows of one page used as compressed-KV / index-key page */
    int64_t tokens_per_sequence_max; /* tokens one sequence can reach with the whole pool */
    int64_t max_model_len;
    int max_num_batched_tokens, chunk_size, batch_invariant, async_scheduling;
    char model_dir[4096];
    char arch[32];                 /* "deepseek_v4" | "deepseek_v41" */
    char accelerator[16];          /* "cpu" | "cuda" */
} deepinfer_memory_plan;

/* Copy the plan into *out (caller-owned). */
DEEPINFER_API void deepinfer_engine_plan(const deepinfer_engine *e, deepinfer_memory_plan *out);

/* The configuration the engine runs (what an evaluation report names): the deepinfer_engine_config it
 * was opened with, the defaults filled in and the environment's overrides applied; `accelerator` is
 * the backend in use ("cpu" | "cuda"), `model` the resolved directory, and `nextn_decode` the longest
 * draft it verifies (0 = no speculation, also when the checkpoint has no drafter). Strings are
 * engine-owned, valid until the engine is closed. */
DEEPINFER_API void deepinfer_engine_get_config(const deepinfer_engine *e, deepinfer_engine_config *out);

/* The plan as a few human-readable lines (what `deepinfer generate` prints):
 * engine-owned, valid until the engine is closed. */
DEEPINFER_API const char *deepinfer_engine_plan_text(const deepinfer_engine *e);

/* Vocabulary size of the model (token ids are in [0, vocab)). */
DEEPINFER_API int32_t deepinfer_engine_vocab_size(const deepinfer_engine *e);

/* ---- prompts and outputs -------------------------------------------------- */

/*
 * A prompt: exactly one of
 *  - text:      raw text; the model's BOS token is put in front (DeepSeek's
 *               documents and prompts start with it) unless the text already
 *               starts with it or no_bos is set;
 *  - token_ids: n_token_ids ids (borrowed; copied by the call);
 *  - messages:  chat messages as JSON (an array of {"role","content",...} or
 *               {"messages": [...], "tools": [...]}), rendered with the
 *               model's chat encoding (V4 or V4.1) then tokenized.
 */
typedef struct deepinfer_prompt {
    const char *text;
    const int32_t *token_ids;
    size_t n_token_ids;
    const char *messages;
    int thinking;                  /* messages: 1 = thinking mode (<think>) */
    const char *reasoning_effort;  /* messages: NULL = the model's default */
    int no_bos;                    /* text: do not add the BOS token */
} deepinfer_prompt;

typedef enum deepinfer_finish_reason {
    DEEPINFER_FINISH_NONE = 0,     /* still running */
    DEEPINFER_FINISH_STOP,         /* a stop string or a stop token id */
    DEEPINFER_FINISH_LENGTH,       /* max_tokens, or the model context, reached */
    DEEPINFER_FINISH_EOS,          /* the model's end-of-sequence token */
    DEEPINFER_FINISH_ABORT,        /* deepinfer_abort */
    DEEPINFER_FINISH_ERROR         /* the request failed (see the output's error) */
} deepinfer_finish_reason;

/* "stop", "length", "eos", "abort", "error" or "" (running). */
DEEPINFER_API const char *deepinfer_finish_reason_name(deepinfer_finish_reason r);

/* One choice (of n) of a request. Arrays are owned by the output. */
typedef struct deepinfer_completion {
    int index;                     /* choice 0..n-1 */
    const int32_t *token_ids;      /* generated ids (a stop id or EOS that ended it included) */
    size_t n_tokens;
    const char *text;              /* generated text, NUL-terminated valid UTF-8; "" without a tokenizer */
    size_t text_len;
    const float *logprobs;         /* [n_tokens] raw log-probability of each token; NULL when params.logprobs < 0 */
    int n_top;                     /* top entries per token (params.logprobs, 0 if none) */
    const int32_t *top_ids;        /* [n_tokens][n_top], by logprob desc, id asc */
    const float *top_logprobs;     /* [n_tokens][n_top] */
    deepinfer_finish_reason finish_reason;
    const char *stop_str;          /* the stop string that ended it, or NULL */
    int32_t stop_token;            /* the stop id / EOS that ended it, or -1 */
    size_t n_prev_tokens;          /* streaming: tokens already reported before the last read */
    size_t prev_text_len;          /* streaming: text bytes already reported before the last read */
    int num_preemptions;           /* times this choice was preempted and recomputed */
} deepinfer_completion;

/* Per-request metrics; times are seconds on the engine's monotonic clock. */
typedef struct deepinfer_request_metrics {
    double arrival_s, first_scheduled_s, first_token_s, finished_s;
    double ttft_s;                 /* first token - arrival */
    double tpot_s;                 /* mean time per output token after the first (0 if one token) */
    double e2e_s;                  /* finished - arrival */
    int64_t prompt_tokens, output_tokens; /* output summed over choices */
    int64_t computed_tokens;       /* rows run for this request (prefill, decode, recompute) */
    int num_preemptions;
    int64_t spec_drafted;          /* draft tokens verified for this request (speculative decoding) */
    int64_t spec_accepted;         /* of those, accepted (each saved one decode step) */
    int64_t spec_steps;            /* steps that verified drafts for it */
} deepinfer_request_metrics;

typedef struct deepinfer_request_output {
    uint64_t request_id;
    deepinfer_status status;       /* DEEPINFER_OK unless the request failed */
    const char *error;             /* why it failed, naming the field or limit; "" when OK */
    const int32_t *prompt_ids;     /* the tokenized prompt */
    size_t n_prompt;
    int finished;                  /* 1 when every choice has finished */
    size_t n_choices;
    const deepinfer_completion *choices;
    deepinfer_request_metrics metrics;
    /* params.prompt_logprobs >= 0 (else NULL / 0): prompt_logprobs[i] is the raw log-probability of
     * prompt_ids[i] given prompt_ids[0..i); entry 0 is NAN (the first token has no context; vLLM's
     * None). With K = params.prompt_logprobs > 0, prompt_top_ids / prompt_top_logprobs [n_prompt][K]
     * hold the top K ids of each position's distribution by logprob desc, id asc (row 0: ids -1,
     * logprobs NAN). Owned by the output; complete once the request has produced its first token. */
    const float *prompt_logprobs;
    const int32_t *prompt_top_ids;
    const float *prompt_top_logprobs;
    int32_t n_prompt_top;          /* K, or 0 */
} deepinfer_request_output;

/* Free one output obtained from deepinfer_take_output or deepinfer_generate.
 * Safe on NULL. */
DEEPINFER_API void deepinfer_output_free(deepinfer_request_output *out);

/* Free the array from deepinfer_generate and its n outputs. */
DEEPINFER_API void deepinfer_outputs_free(deepinfer_request_output **outs, size_t n);

/* ---- offline batch ---------------------------------------------------------- */

/*
 * Run n prompts to completion, all together (continuous batching), and return
 * one output per prompt, in prompt order. `params` has n_params entries:
 * 1 (shared by every prompt) or n; NULL = defaults. A request with a bad
 * prompt or bad parameters gets status != OK and an error naming the field;
 * the others still run. Returns non-OK only for engine-level failures (bad
 * arguments, out of memory, requests already queued through the streaming
 * API). Caller frees *outputs with deepinfer_outputs_free(*outputs, n).
 */
DEEPINFER_API deepinfer_status deepinfer_generate(deepinfer_engine *e, const deepinfer_prompt *prompts, size_t n,
                                                  const deepinfer_sampling_params *params, size_t n_params,
                                                  deepinfer_request_output ***outputs);

/* ---- request-level streaming -------------------------------------------------- */

/* Queue a request. Prompt and params are copied. On success *request_id
 * identifies it (ids increase from 0). Invalid input (empty or over-long
 * prompt, token ids outside the vocabulary, bad parameters, a prompt longer
 * than the model context or than the state pool can ever hold) returns an
 * error naming the problem and queues nothing. */
DEEPINFER_API deepinfer_status deepinfer_add_request(deepinfer_engine *e, const deepinfer_prompt *prompt,
                                                     const deepinfer_sampling_params *params, uint64_t *request_id);

/* Run one engine step: schedule, run the model on the step's token rows,
 * sample, detokenize, finish. *n_updated (may be NULL) receives the number of
 * requests whose output changed. Returns non-OK only for engine-level
 * failures; request failures are reported in their outputs. */
DEEPINFER_API deepinfer_status deepinfer_step(deepinfer_engine *e, size_t *n_updated);

/* 1 while any request is queued, running, or has a step in flight, or
 * while a step finished inside deepinfer_take_output (async scheduling) has
 * updates the next deepinfer_step reports. */
DEEPINFER_API int deepinfer_has_unfinished(const deepinfer_engine *e);

/* The requests the last deepinfer_step updated (new tokens, finished, failed;
 * deepinfer_abort's effect is visible through deepinfer_take_output). *outs points to an engine-owned array of *n engine-owned outputs,
 * valid until the next deepinfer_step / deepinfer_take_output /
 * deepinfer_abort / deepinfer_engine_close. Each choice's tokens and text are
 * cumulative; [n_prev_tokens, n_tokens) and [prev_text_len, text_len) are
 * what is new since the previous step. */
DEEPINFER_API void deepinfer_read_outputs(deepinfer_engine *e, const deepinfer_request_output *const **outs, size_t *n);

/* Hand a finished request over to the caller (it leaves the engine). Caller
 * frees *out with deepinfer_output_free. DEEPINFER_ERR_NOT_FOUND for an
 * unknown id, DEEPINFER_ERR_INVALID_ARGUMENT while it is still running. */
DEEPINFER_API deepinfer_status deepinfer_take_output(deepinfer_engine *e, uint64_t request_id,
                                                     deepinfer_request_output **out);

/* Finish a request now (reason abort): its state returns to the pools, its
 * output so far stays available to deepinfer_take_output. Aborting a finished
 * request is a no-op; an unknown id gives DEEPINFER_ERR_NOT_FOUND. */
DEEPINFER_API deepinfer_status deepinfer_abort(deepinfer_engine *e, uint64_t request_id);

/* Engine totals since open. */
typedef struct deepinfer_engine_stats {
    int64_t steps, requests_finished, prompt_tokens, output_tokens;
    int64_t prefill_rows, decode_rows;   /* rows run: prompt/recompute rows and decode rows */
    int64_t preemptions;
    int64_t pages_in_use, pages_peak, num_pages;
    double busy_s;                       /* time inside deepinfer_step */
    int64_t graph_steps;                 /* CUDA: steps whose forward ran as a recorded CUDA graph */
    int64_t graphs;                      /* CUDA: graphs captured (one per recorded step shape: decode and verify
                                          * steps, drafter steps) */
    /* CUDA, measured with events on the device's stream: busy = each step's device work (state ops,
     * forward, device sampling) from its first launch to its last; idle = the gaps between one step's end
     * and the next step's start. Over a window of consecutive steps, GPU idle = d(idle) / (d(idle) +
     * d(busy)). A gap includes whatever the host did before it submitted the step (0 on the CPU). */
    double device_busy_s, device_idle_s;
    int64_t device_sampled_steps;        /* CUDA: steps sampled on the device (ids, not logits, come back) */
    int64_t device_queued_steps;         /* CUDA: of those, steps queued while the previous step still ran (their
                                          * placeholder tokens taken on the device from its sampled ids) */
    /* Speculative decoding: sequence-steps that verified drafts, drafts verified (rows beyond the one
     * decode row each), drafts accepted, and accepted drafts by position in the draft (accepted_at[i]:
     * draft i + 1 accepted, over drafted_at[i] times verified). Mean accepted length tau = committed tokens
     * per verify = (spec_steps + spec_accepted) / spec_steps; wasted rows = spec_drafted - spec_accepted. */
    int64_t spec_steps, spec_drafted, spec_accepted;
    int64_t spec_drafted_at[DEEPINFER_MAX_DRAFT], spec_accepted_at[DEEPINFER_MAX_DRAFT];
} deepinfer_engine_stats;

DEEPINFER_API void deepinfer_engine_get_stats(const deepinfer_engine *e, deepinfer_engine_stats *out);

#ifdef __cplusplus
}
#endif

#endif /* DEEPINFER_H */
