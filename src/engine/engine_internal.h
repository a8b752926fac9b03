/*
 * engine_internal.h — the engine object behind deepinfer.h's
 * deepinfer_engine, shared by engine_open.c (configuration, memory plan),
 * engine.c (requests, the step loop) and generate.c (the offline batch
 * call). Internal to src/engine.
 */
#ifndef DI_ENGINE_ENGINE_INTERNAL_H
#define DI_ENGINE_ENGINE_INTERNAL_H

#include "deepinfer.h"
#include "engine/constrain.h"
#include "engine/devq.h"
#include "engine/outputs.h"
#include "engine/reqmap.h"
#include "engine/request.h"
#include "engine/runner.h"
#include "engine/scheduler.h"
#include "engine/spec_cost.h"
#include "engine/state_pool.h"
#include "io/model_dir.h"
#include "io/safetensors.h"
#include "model/load_plan.h"
#include "model/model.h"
#include "ops/backend.h"
#include "tokenizer/chat.h"
#include "tokenizer/tokenizer.h"

struct deepinfer_engine {
    deepinfer_engine_config cfg;      /* resolved: no zeros left, env applied */
    char model_dir[DI_PATH_MAX];
    char model_how[1024];             /* where the model came from */
    di_backend_kind backend;          /* where the model runs (DI_BACKEND_CPU until acquired) */
    di_model *model;
    di_safetensors *weights;          /* owned, or NULL: the checkpoint given to di_engine_open_weights (the model
                                         reads it while it lives; closed after the model is freed) */
    const di_model_config *mcfg;
    di_tokenizer *tok;                /* NULL: token ids only */
    di_constrain so;                  /* structured outputs (vocabulary built on first use) */
    di_chat_arch chat_arch;
    di_output_ctx out_ctx;
    di_state_pool pool;
    di_scheduler sched;
    di_runner runner;
    di_devq *dq;
    struct di_ranks *ranks;           /* --ep / --dp > 1: ranks 1.. and the group (ranks.h); NULL: one rank */
    struct di_comm *comm1;            /* di_engine_options.nccl_one_rank: the one rank's NCCL communicator */
    uint32_t *text_mask;              /* every id but the image token (V4.1 runs text only); NULL if none */
    int async;                        /* schedule step N+1 before waiting for step N */
    int spec_n;                       /* speculative decoding: the longest draft (0 = off) */
    int spec_varlen;                  /* 1: confidence-scheduled draft lengths; 0: always spec_n */
    char spec_note[256];              /* why speculation is off though asked for ("" otherwise) */
    di_spec_cost spec_cost;           /* confidence scheduling's step-cost table (measured at open) */
    int spec_cost_graphs;             /* graphs captured when the table last observed a step */
    di_step_buf *inflight;            /* submitted, not yet waited */
    int keep_updates;                 /* the next step keeps the updated list (a step was drained) */
    di_reqmap reqs;                   /* every request not yet taken */
    uint64_t next_id;
    int64_t n_active;                 /* requests not finished */
    di_request **updated;             /* requests the last step changed */
    const deepinfer_request_output **updated_pub;
    size_t n_updated, cap_updated;
    deepinfer_memory_plan plan;
    di_load_plan load_plan;           /* the model load's plan (computed before the weights were allocated) */
    char plan_text[8192];
    deepinfer_engine_stats stats;
    char last_error[DI_ERROR_MSG_MAX];
    double t_open;
};

/* The backend for accelerator `want` ("auto", "cpu" or "cuda"), in place
 * for the model's load: CUDA is installed (once for all engines of the
 * process) and given `batch_invariant` for the execs the model creates
 * (engine_backend.c). After the model loaded, call
 * di_engine_backend_loaded; after it was freed, di_engine_backend_release. */
deepinfer_status di_engine_backend_acquire(const char *want, int batch_invariant, di_backend_kind *out, di_error *err);
void di_engine_backend_loaded(di_backend_kind k);
void di_engine_backend_release(di_backend_kind k);

/* What an engine takes beyond deepinfer_engine_config, for tests and
 * benches only (never user-facing; README "Environment" says why): zeros are
 * the defaults of deepinfer_engine_open.
 *   weights       the checkpoint already open, as di_engine_open_weights below
 *                 (owned from here on in every case), or NULL: cfg->model's files
 *   host_sampler  1: every step's logits come back and are sampled on the
 *                 host, and the device queue is synchronous (the GPU tests'
 *                 A/B of the device sampler, tests/ops/cuda/gtest_engine.c)
 *   lanes_max     CPU steps split into at most this many lanes (model.h
 *                 di_model_set_lanes; 1: op-parallel only); 0: the default
 *   nccl_one_rank see the field (tests/ops/cuda/gtest_engine_nccl.c)
 *   ranks_one_device see the field (tests/ops/cuda/gtest_engine_multidev.c)
 *   spec_cost     confidence-scheduled speculation: this step-cost table
 *                 (spec_cost.h) instead of the one measured at open, so that
 *                 a test's draft lengths do not depend on the machine's timing
 *   spec_sync     1: every step with drafts in the synchronous order (the
 *                 drafts back on the host before the next step is planned;
 *                 docs/speculative.md): the tests' A/B of the pipelined order */
typedef struct di_engine_options {
    di_safetensors *weights;
    int host_sampler;
    int lanes_max;
    const di_spec_cost *spec_cost;
    int spec_sync;
    int nccl_one_rank;           /* CUDA, one rank: the model's EP path over an NCCL communicator of one rank
                                    (ops/backend.h di_backend_comm_one; every expert resident, the exchange
                                    through NCCL), eager steps: the GPU test of the NCCL path against none */
    int ranks_one_device;        /* CUDA, --ep / --dp > 1: every rank on device 0 with the device loopback
                                    communicator (ranks.h DI_RANKS_ONE_DEVICE): the multi-rank device path
                                    (per-rank contexts, models, pools, exchanges of device buffers) proven
                                    on one GPU; tests only */
} di_engine_options;

/* deepinfer_engine_open with di_engine_options (NULL: all defaults). */
deepinfer_status di_engine_open_opts(const deepinfer_engine_config *cfg, const di_engine_options *opt,
                                     deepinfer_engine **out, di_error *err);

/* deepinfer_engine_open with the checkpoint already open: `weights` (e.g.
 * the in-memory image of tools/dummy/dummy.h's di_dummy_weights) instead of the
 * safetensors files of cfg->model, which must still be a directory holding
 * the config.json (and V4.1 sidecars) that `weights` was built for. The
 * engine takes ownership of `weights` in every case (closed on failure, or
 * at deepinfer_engine_close after the model). For `deepinfer bench-engine
 * --dummy` (tools/cli_bench_engine.c). */
deepinfer_status di_engine_open_weights(const deepinfer_engine_config *cfg, di_safetensors *weights,
                                        deepinfer_engine **out, di_error *err);

/* Seconds on the engine clock (monotonic, since the engine opened). */
double di_engine_now(const deepinfer_engine *e);

/* Record a failed call's message on the engine and return its status. */
deepinfer_status di_engine_fail(deepinfer_engine *e, const di_error *err);

/* Validate and queue a request; on failure nothing is queued, *out_req is
 * NULL and err says why. *id receives the id given to the request (also
 * on failure, so a failed output can carry it). */
deepinfer_status di_engine_add(deepinfer_engine *e, const deepinfer_prompt *prompt,
                               const deepinfer_sampling_params *params, uint64_t *id, di_error *err);

#endif
