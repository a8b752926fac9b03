/* engine_open.c — configuration, model location, the memory plan, and
 * opening / closing an engine (deepinfer.h). */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "engine/engine_internal.h"
#include "engine/ranks.h"
#include "parallel/comm.h"
#include "engine/spec_profile.h"
#include "model/dsv41_compact.h"
#include "ops/cpu/threadpool.h"
#include "util/env.h"
#include "util/sysmem.h"
#include "util/file.h"


void deepinfer_engine_config_init(deepinfer_engine_config *c) {
    memset(c, 0, sizeof *c);
    c->batch_invariant = -1;
    c->async_scheduling = -1;
    c->cuda_graphs = -1;
    c->mtp_varlen = -1;
    c->nextn_decode = -1;
}

double di_engine_now(const deepinfer_engine *e) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9 - (e ? e->t_open : 0.0);
}

deepinfer_status di_engine_fail(deepinfer_engine *e, const di_error *err) {
    snprintf(e->last_error, sizeof e->last_error, "%s", err->msg);
    return err->code ? err->code : DEEPINFER_ERR_INTERNAL;
}

const char *deepinfer_engine_last_error(const deepinfer_engine *e) { return e ? e->last_error : ""; }

/* ---- configuration ----------------------------------------------------------- */

/* Compact prefill's mode and tail length: the environment overrides the config (README
 * "Environment"); the model checks come at open (check_yoco). */
static deepinfer_status yoco_from_env(deepinfer_engine_config *c, di_error *err) {
    const deepinfer_status E = DEEPINFER_ERR_INVALID_ARGUMENT;
    const char *mode = di_env(DI_ENV_YOCO_MODE), *keep = di_env(DI_ENV_YOCO_KEEP);
    if (mode) {
        if (!strcmp(mode, "compact")) c->yoco_compact = 1;
        else if (!strcmp(mode, "exact")) c->yoco_compact = 0;
        else return di_error_set(err, E, "$%s must be \"exact\" or \"compact\", got \"%s\"", di_env_name(DI_ENV_YOCO_MODE), mode);
    }
    if (keep) {
        char *end = NULL;
        errno = 0;
        long long v = strtoll(keep, &end, 10);
        if (errno || end == keep || *end || v < 1)
            return di_error_set(err, E, "$%s must be a token count >= 1, got \"%s\"", di_env_name(DI_ENV_YOCO_KEEP), keep);
        c->yoco_keep_tokens = v;
    }
    if (c->yoco_compact < 0 || c->yoco_compact > 1)
        return di_error_set(err, E, "yoco_compact must be 0 (exact) or 1 (compact), got %d", c->yoco_compact);
    if (c->yoco_keep_tokens < 0)
        return di_error_set(err, E, "yoco_keep_tokens must be >= 0 (0 = 140), got %lld", (long long)c->yoco_keep_tokens);
    if (!c->yoco_keep_tokens) c->yoco_keep_tokens = 140; /* DeepInfer's V4.1 default */
    return DEEPINFER_OK;
}

/* Compact prefill against the model (§6.5's condition, the tail covering window + draft). */
static deepinfer_status check_yoco(const deepinfer_engine_config *c, const di_model_config *m, di_error *err) {
    if (!c->yoco_compact) return DEEPINFER_OK;
    int64_t draft = c->max_draft_tokens;
    if (m->drafter == DI_DRAFTER_DSPARK && m->dspark_block_size > draft) draft = m->dspark_block_size;
    return di_v41_compact_check(m, c->yoco_keep_tokens, draft, err);
}

/* Speculative decoding's two settings: the environment overrides the config (README
 * "Environment"); the drafter checks come at open (check_spec). */
static deepinfer_status spec_from_env(deepinfer_engine_config *c, di_error *err) {
    const deepinfer_status E = DEEPINFER_ERR_INVALID_ARGUMENT;
    if (di_env_flag(DI_ENV_MTP_VARLEN, &c->mtp_varlen, err)) return E;
    const char *n = di_env(DI_ENV_NEXTN_DECODE);
    if (n) {
        char *end = NULL;
        errno = 0;
        long v = strtol(n, &end, 10);
        if (errno || end == n || *end || v < 0 || v > INT_MAX)
            return di_error_set(err, E, "$%s must be a draft length >= 0 (0 = no speculation), got \"%s\"",
                                di_env_name(DI_ENV_NEXTN_DECODE), n);
        c->nextn_decode = (int)v;
    }
    if (c->mtp_varlen < -1 || c->mtp_varlen > 1)
        return di_error_set(err, E, "mtp_varlen must be -1, 0 or 1, got %d", c->mtp_varlen);
    if (c->nextn_decode < -1)
        return di_error_set(err, E, "nextn_decode must be >= 0 (0 = no speculation) or -1 (the default), got %d",
                            c->nextn_decode);
    if (c->mtp_varlen < 0) c->mtp_varlen = 0;
    return DEEPINFER_OK;
}

/* The draft length against the checkpoint's drafter: N above the drafter's block is an error; a
 * checkpoint without drafter tensors runs without speculation (the plan says so). Sets e->spec_n
 * and max_draft_tokens (the state's rollback room) to cover its verify steps. */
static deepinfer_status check_spec(deepinfer_engine *e, const di_model_config *m, di_error *err) {
    deepinfer_engine_config *c = &e->cfg;
    /* DSpark: its block; MTP chained: bounded by its ring (dsv4.h di_v4_mtp_block); the engine verifies
     * at most DEEPINFER_MAX_DRAFT either way */
    int64_t block = m->drafter == DI_DRAFTER_DSPARK ? m->dspark_block_size
                    : m->drafter == DI_DRAFTER_MTP  ? m->sliding_window
                                                    : 0;
    if (block > DEEPINFER_MAX_DRAFT) block = DEEPINFER_MAX_DRAFT;
    int want = c->nextn_decode >= 0 ? c->nextn_decode : c->mtp_varlen ? (m->drafter == DI_DRAFTER_MTP ? 1 : (int)block) : 0;
    e->spec_n = 0;
    e->spec_varlen = c->mtp_varlen;
    if (!c->nextn_decode || (c->nextn_decode < 0 && !c->mtp_varlen)) return DEEPINFER_OK; /* not asked for */
    if (m->drafter == DI_DRAFTER_NONE) {
        snprintf(e->spec_note, sizeof e->spec_note,
                 "off: this checkpoint has no drafter tensors (no DSpark or MTP stages), so it runs without speculation");
        return DEEPINFER_OK;
    }
    if (want > block)
        return di_error_set(err, DEEPINFER_ERR_INVALID_ARGUMENT,
                            "nextn_decode (%s) is %d, above the longest draft of %d tokens (the %s drafter's block, "
                            "at most %d); use 1..%d",
                            di_env(DI_ENV_NEXTN_DECODE) ? di_env_name(DI_ENV_NEXTN_DECODE) : "the draft length", want,
                            (int)block, di_drafter_name(m->drafter), DEEPINFER_MAX_DRAFT, (int)block);
    e->spec_n = want;
    /* a verify step appends the decode token and its drafts: want + 1 rows to roll back from */
    if (c->max_draft_tokens < want + 1) c->max_draft_tokens = want + 1;
    return DEEPINFER_OK;
}

static deepinfer_status resolve_config(deepinfer_engine *e, const deepinfer_engine_config *in, di_error *err) {
    deepinfer_engine_config c = *in;
    const deepinfer_status E = DEEPINFER_ERR_INVALID_ARGUMENT;
    deepinfer_status st_yoco;
    const char *acc = di_env(DI_ENV_ACCELERATOR); /* the environment overrides the config (README "Environment") */
    if (!acc) acc = c.accelerator && *c.accelerator ? c.accelerator : "auto";
    if (!strcmp(acc, "gpu")) acc = "cuda";
    if (strcmp(acc, "auto") && strcmp(acc, "cpu") && strcmp(acc, "cuda"))
        return di_error_set(err, E, "accelerator must be \"auto\", \"cpu\" or \"cuda\", got \"%s\"", acc);
    /* "auto" is decided when the backend is put in place (engine_backend.c): CUDA when this
     * binary has the CUDA backend and a GPU is usable, else the CPU */
    c.accelerator = !strcmp(acc, "auto") ? "auto" : !strcmp(acc, "cpu") ? "cpu" : "cuda";
    if (di_env_flag(DI_ENV_BATCH_INVARIANT, &c.batch_invariant, err)) return E;
    if (c.batch_invariant < 0) c.batch_invariant = 1;
    if (c.batch_invariant > 1) return di_error_set(err, E, "batch_invariant must be -1, 0 or 1, got %d", c.batch_invariant);
    if (di_env_flag(DI_ENV_CUDA_GRAPHS, &c.cuda_graphs, err)) return E;
    if (c.cuda_graphs < 0) c.cuda_graphs = 1;
    if (c.cuda_graphs > 1) return di_error_set(err, E, "cuda_graphs must be -1, 0 or 1, got %d", c.cuda_graphs);
    if (!c.max_num_batched_tokens) c.max_num_batched_tokens = 2048;
    if (!c.max_num_seqs) c.max_num_seqs = 64;
    if (!c.chunk_size) c.chunk_size = 512;
    if (c.max_num_batched_tokens < 1 || c.max_num_batched_tokens > (1 << 20))
        return di_error_set(err, E, "max_num_batched_tokens must be in [1, 1048576], got %d", c.max_num_batched_tokens);
    if (c.max_num_seqs < 1 || c.max_num_seqs > 16384)
        return di_error_set(err, E, "max_num_seqs must be in [1, 16384], got %d", c.max_num_seqs);
    if (c.chunk_size < 1) return di_error_set(err, E, "chunk_size must be >= 1, got %d", c.chunk_size);
    if (c.chunk_size > c.max_num_batched_tokens) c.chunk_size = c.max_num_batched_tokens;
    if (c.max_model_len < 0) return di_error_set(err, E, "max_model_len must be >= 0 (0 = the model's), got %lld",
                                                 (long long)c.max_model_len);
    if (c.num_pages < 0) return di_error_set(err, E, "num_pages must be >= 0, got %lld", (long long)c.num_pages);
    if ((st_yoco = yoco_from_env(&c, err))) return st_yoco;
    if ((st_yoco = spec_from_env(&c, err))) return st_yoco;
    if (c.ep < 0 || c.ep > 4096) return di_error_set(err, E, "ep must be in [1, 4096] (0 = 1), got %d", c.ep);
    if (c.dp < 0 || c.dp > 4096) return di_error_set(err, E, "dp must be in [1, 4096] (0 = 1), got %d", c.dp);
    if (!c.ep) c.ep = 1;
    if (!c.dp) c.dp = 1;
    if (c.eplb_replicas < 0) return di_error_set(err, E, "eplb_replicas must be >= 0 (0 = off), got %d", c.eplb_replicas);
    if (c.eplb_interval < 0) return di_error_set(err, E, "eplb_interval must be >= 0 (0 = 32), got %d", c.eplb_interval);
    if (!c.eplb_interval) c.eplb_interval = 32;
    if (c.cp_min_tokens < 0) return di_error_set(err, E, "cp_min_tokens must be >= 0 (0 = off), got %d", c.cp_min_tokens);
    if (c.cp_min_tokens > 0 && c.dp < 2)
        return di_error_set(err, E, "cp_min_tokens needs --dp 2 or more (context parallelism runs over the DP ranks)");
    if (c.async_scheduling < -1 || c.async_scheduling > 1)
        return di_error_set(err, E, "async_scheduling must be -1, 0 or 1, got %d", c.async_scheduling);
    e->cfg = c;
    return DEEPINFER_OK;
}

static deepinfer_status locate_model(deepinfer_engine *e, di_error *err) {
    di_model_location loc;
    deepinfer_status st = di_model_resolve(e->cfg.model, &loc, err); /* io/model_dir.h: the one rule */
    if (st) return st;
    snprintf(e->model_dir, sizeof e->model_dir, "%s", loc.dir);
    snprintf(e->model_how, sizeof e->model_how, "%s", loc.how);
    return DEEPINFER_OK;
}

static deepinfer_status load_tokenizer(deepinfer_engine *e, di_error *err) {
    char path[DI_PATH_MAX + 32];
    if (e->cfg.tokenizer && *e->cfg.tokenizer) {
        snprintf(path, sizeof path, "%s", e->cfg.tokenizer);
    } else {
        snprintf(path, sizeof path, "%s/tokenizer.json", e->model_dir);
        if (!di_is_file(path)) return DEEPINFER_OK; /* token ids only */
    }
    deepinfer_status st = di_tokenizer_load(path, &e->tok, err);
    if (st) return di_error_prefix(err, "tokenizer %s", path);
    size_t maxlen = 0;
    for (int32_t id = 0; id < di_tokenizer_vocab_size(e->tok); id++) {
        size_t l = 0;
        di_tokenizer_token_bytes(e->tok, id, &l);
        if (l > maxlen) maxlen = l;
    }
    e->out_ctx.piece_cap = 3 * (maxlen + 3) + 16;
    e->out_ctx.piece = malloc(e->out_ctx.piece_cap);
    if (!e->out_ctx.piece) return di_error_set(err, DEEPINFER_ERR_OUT_OF_MEMORY, "out of memory");
    e->out_ctx.tok = e->tok;
    return DEEPINFER_OK;
}

/* ---- the memory plan ----------------------------------------------------------- */

static int64_t max_tokens_for_pages(const di_model_config *cfg, const di_pool_geom *g, int64_t pages) {
    if (di_pool_geom_pages_for(cfg, g, g->max_tokens) <= pages) return g->max_tokens;
    int64_t lo = 0, hi = g->max_tokens;
    while (hi - lo > 1) {
        int64_t mid = lo + (hi - lo) / 2;
        if (di_pool_geom_pages_for(cfg, g, mid) <= pages) lo = mid;
        else hi = mid;
    }
    return lo;
}

/* Prompt-logprob logits rows per step (scheduler.h): the host logits buffer holds this many rows
 * beside the samples' — a bounded group (256 rows, or max_num_seqs if more, at most
 * max_num_batched_tokens), so prompt logprobs cost a bounded buffer whatever max_num_batched_tokens
 * is, while a scoring step still carries hundreds of prompt rows. */
static int prompt_lp_rows(const deepinfer_engine_config *c) {
    int rows = c->max_num_seqs > 256 ? c->max_num_seqs : 256;
    return rows < c->max_num_batched_tokens ? rows : c->max_num_batched_tokens;
}

/* The engine's own host buffers beside the model's workspace: logits (samples' and prompt
 * logprobs'), sampler scratch (one per thread), step rows, sample specs. */
static uint64_t engine_host_bytes(const deepinfer_engine_config *c, int64_t vocab) {
    size_t V = (size_t)vocab;
    di_threadpool *tp = di_threadpool_global();
    size_t threads = tp ? (size_t)di_threadpool_size(tp) : 1;
    /* logits rows: one per sequence, or with drafts (speculation) every verified row */
    size_t lrows = (size_t)c->max_num_seqs;
    if (c->max_draft_tokens > 0) {
        lrows = (size_t)c->max_num_seqs * (size_t)(1 + c->max_draft_tokens);
        if (lrows > (size_t)c->max_num_batched_tokens) lrows = (size_t)c->max_num_batched_tokens;
        if (lrows < (size_t)c->max_num_seqs) lrows = (size_t)c->max_num_seqs;
    }
    lrows += (size_t)prompt_lp_rows(c);
    return lrows * V * 4 + threads * V * 15 +
           2 * (size_t)c->max_num_batched_tokens * (4 + 8 + 8 + 4 + sizeof(di_plp_spec)) +
           2 * (size_t)(2 * c->max_num_seqs) * (sizeof(di_sample_spec) + 64);
}

/* Speculative decoding's buffers beside engine_host_bytes (devq_spec.c, runner.c): the drafter
 * input of every batch row (backend memory), the runner's verify-group sample specs and spec items
 * (both step buffers), the draft tables and the draft picks' sampler scratch. 0 when off. */
static uint64_t engine_spec_bytes(const deepinfer_engine_config *c, const di_model_config *cfg, int spec_n) {
    if (spec_n <= 0) return 0;
    size_t hid = cfg->drafter == DI_DRAFTER_DSPARK ? (size_t)cfg->n_dspark_target_layer_ids * (size_t)cfg->hidden_size
                 : cfg->drafter == DI_DRAFTER_MTP ? (size_t)cfg->hc_mult * (size_t)cfg->hidden_size
                                                   : 0;
    size_t items = 2 * (size_t)c->max_num_seqs, rows = (size_t)c->max_num_batched_tokens;
    size_t block = cfg->drafter == DI_DRAFTER_DSPARK ? (size_t)cfg->dspark_block_size : DEEPINFER_MAX_DRAFT;
    return (uint64_t)(rows * hid * 2 + 2 * items * (size_t)spec_n * sizeof(di_sample_spec) +
                      2 * items * sizeof(di_spec_item) + items * (8 * sizeof(void *) + block * 8) + rows * 4 +
                      (size_t)cfg->vocab_size * 15);
}

/* What the engine allocates after the model load, declared to the load's plan (load_plan.h) so
 * that an engine which cannot hold its slots and one sequence at max_model_len (or the num_pages
 * asked for) is refused before the weights are allocated: slots and pages in backend memory
 * (state_pool.c), the slots' headers and page tables and the engine's buffers on the host; with a
 * memory_budget, the plan's total must stay within it. */
static deepinfer_status declare_states(const deepinfer_engine *e, const di_model_config *cfg, di_model_options *mo,
                                       di_error *err) {
    const deepinfer_engine_config *c = &e->cfg;
    di_pool_geom g;
    deepinfer_status st = di_pool_geom_compute(cfg, c->page_rows, c->max_model_len, c->max_draft_tokens, &g, err);
    if (st) return st;
    int64_t pages = c->num_pages ? c->num_pages : di_pool_geom_pages_for(cfg, &g, g.max_tokens);
    mo->reserve_device = (uint64_t)c->max_num_seqs * g.dev_slot_bytes + (uint64_t)pages * g.page_bytes +
                         engine_spec_bytes(c, cfg, e->spec_n);
    mo->reserve_host = (uint64_t)c->max_num_seqs * g.host_slot_bytes + engine_host_bytes(c, cfg->vocab_size);
    mo->budget = c->num_pages ? 0 : c->memory_budget;
    return DEEPINFER_OK;
}

static deepinfer_status plan_memory(deepinfer_engine *e, const di_pool_geom *g, int64_t *n_pages, di_error *err) {
    const deepinfer_engine_config *c = &e->cfg;
    deepinfer_memory_plan *p = &e->plan;
    p->weight_bytes = di_model_weight_bytes(e->model);
    p->decode_weight_bytes = di_model_decode_weight_bytes(e->model);
    p->workspace_bytes = di_model_workspace_bytes(e->model) + engine_host_bytes(c, e->mcfg->vocab_size) +
                         engine_spec_bytes(c, e->mcfg, e->spec_n);
    p->slot_bytes = g->slot_bytes;
    p->num_slots = c->max_num_seqs;
    p->page_bytes = g->page_bytes;
    uint64_t fixed = p->weight_bytes + p->workspace_bytes + (uint64_t)c->max_num_seqs * g->slot_bytes;
    int64_t per_seq = di_pool_geom_pages_for(e->mcfg, g, g->max_tokens);
    if (c->num_pages) {
        *n_pages = c->num_pages;
    } else if (c->memory_budget) {
        if (c->memory_budget <= fixed)
            return di_error_set(err, DEEPINFER_ERR_OUT_OF_MEMORY,
                                "memory_budget %llu bytes is below what the engine needs before any state page: weights "
                                "%llu + workspace %llu + %d slots x %zu = %llu bytes",
                                (unsigned long long)c->memory_budget, (unsigned long long)p->weight_bytes,
                                (unsigned long long)p->workspace_bytes, c->max_num_seqs, g->slot_bytes,
                                (unsigned long long)fixed);
        *n_pages = (int64_t)((c->memory_budget - fixed) / g->page_bytes);
    } else if (e->backend == DI_BACKEND_CUDA) {
        /* auto on the GPU: every slot at max_model_len, within 80% of the device memory still free
         * after the model's load (weights and workspace are already allocated; the slots are not) */
        int64_t full = per_seq * c->max_num_seqs;
        size_t free_b = 0, total_b = 0;
        uint64_t avail = di_backend_mem_info(&free_b, &total_b) ? 0 : (uint64_t)free_b / 5 * 4;
        uint64_t slots = (uint64_t)c->max_num_seqs * g->slot_bytes;
        int64_t fit = avail > slots ? (int64_t)((avail - slots) / g->page_bytes) : 0;
        *n_pages = full < fit ? full : fit;
        if (*n_pages < per_seq) *n_pages = per_seq;
    } else { /* auto: every slot at max_model_len, within half of the available memory */
        int64_t full = per_seq * c->max_num_seqs;
        uint64_t avail = di_sys_mem_available() / 2;
        int64_t fit = avail > fixed ? (int64_t)((avail - fixed) / g->page_bytes) : 0;
        *n_pages = full < fit ? full : fit;
        if (*n_pages < per_seq) *n_pages = per_seq;
    }
    p->budget = c->memory_budget ? c->memory_budget : fixed + (uint64_t)*n_pages * g->page_bytes;
    p->num_pages = *n_pages;
    p->page_rows_kv = g->rows_kv;
    p->page_rows_index = g->rows_ikey;
    p->tokens_per_sequence_max = max_tokens_for_pages(e->mcfg, g, *n_pages);
    p->max_model_len = g->max_tokens;
    p->max_num_batched_tokens = c->max_num_batched_tokens;
    p->chunk_size = c->chunk_size;
    p->batch_invariant = c->batch_invariant;
    p->async_scheduling = e->async;
    snprintf(p->model_dir, sizeof p->model_dir, "%s", e->model_dir);
    snprintf(p->arch, sizeof p->arch, "%s", e->mcfg->arch == DI_ARCH_V41 ? "deepseek_v41" : "deepseek_v4");
    snprintf(p->accelerator, sizeof p->accelerator, "%s", c->accelerator);
    return DEEPINFER_OK;
}

static void human(char *b, size_t n, double v) {
    const char *u[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    int i = 0;
    while (v >= 1024 && i < 4) v /= 1024, i++;
    snprintf(b, n, i ? "%.1f %s" : "%.0f %s", v, u[i]);
}

/* The plan's accelerator line: where the model runs and in which mode. */
static void accel_text(const deepinfer_engine *e, char *b, size_t n) {
    const deepinfer_memory_plan *p = &e->plan;
    if (e->backend != DI_BACKEND_CUDA) {
        snprintf(b, n, "cpu; batch invariant: %s; async scheduling: %s",
                 p->batch_invariant ? "yes" : "requested off (CPU kernels are invariant anyway)",
                 p->async_scheduling ? "on" : "off (the CPU queue is synchronous)");
        return;
    }
    di_cuda_info ci;
    di_backend_cuda_info(&ci);
    snprintf(b, n,
             "cuda (%s, sm_%d%d): weights, workspace and state in device memory; %s; decode steps %s\n"
             "             batch invariant: %s; async scheduling: %s",
             ci.name, ci.cc_major, ci.cc_minor,
             e->dq->asynchronous ? "sampling on the device (on the host with logprobs or structured outputs)"
                                 : "logits and sampling on the host (synchronous queue)",
             e->cfg.cuda_graphs ? "as CUDA graphs" : "eager (CUDA graphs off)",
             p->batch_invariant ? "yes (rows' bits do not depend on the batch)"
                                : "off (the fastest CUDA kernel per shape: rows depend on the batch within rounding)",
             p->async_scheduling ? (e->dq->asynchronous ? "on (step N+1 is queued while step N runs)"
                                                        : "on (the queue itself is synchronous)")
                                 : "off (every step is waited for before the next is planned)");
}

static void plan_text(deepinfer_engine *e) {
    const deepinfer_memory_plan *p = &e->plan;
    char acc[512];
    accel_text(e, acc, sizeof acc);
    char bud[32], w[32], ws[32], sl[32], slt[32], pg[32], pgt[32];
    human(bud, sizeof bud, (double)p->budget);
    human(w, sizeof w, (double)p->weight_bytes);
    human(ws, sizeof ws, (double)p->workspace_bytes);
    human(sl, sizeof sl, (double)p->slot_bytes);
    human(slt, sizeof slt, (double)p->slot_bytes * p->num_slots);
    human(pg, sizeof pg, (double)p->page_bytes);
    human(pgt, sizeof pgt, (double)p->page_bytes * (double)p->num_pages);
    snprintf(e->plan_text, sizeof e->plan_text,
             "model        %s (%s, %d layers, vocab %lld, tokenizer: %s)\n"
             "             from %s\n"
             "accelerator  %s\n"
             "memory       budget %s%s = weights %s + workspace %s + slots %d x %s = %s + pages %lld x %s = %s\n"
             "pages        %d compressed-KV rows or %d index-key rows each; one sequence can reach %lld of "
             "max_model_len %lld tokens\n"
             "steps        up to %d token rows, %d sequences, prefill chunks of %d\n",
             p->model_dir, p->arch, e->mcfg->n_layers, (long long)e->mcfg->vocab_size, e->tok ? "yes" : "none (token ids only)",
             e->model_how, acc, bud,
             e->cfg.memory_budget ? "" : (e->cfg.num_pages ? " (num_pages given)" : " (auto)"), w, ws, p->num_slots, sl, slt,
             (long long)p->num_pages, pg, pgt, p->page_rows_kv, p->page_rows_index, (long long)p->tokens_per_sequence_max,
             (long long)p->max_model_len, p->max_num_batched_tokens, e->cfg.max_num_seqs, p->chunk_size);
    size_t used = strlen(e->plan_text);
    if (used + 1 < sizeof e->plan_text && (e->spec_n || e->spec_note[0])) {
        int k = e->spec_n ? snprintf(e->plan_text + used, sizeof e->plan_text - used,
                                     "speculation  %s drafter, drafts of up to %d tokens per sequence, %s\n",
                                     di_drafter_name(e->mcfg->drafter), e->spec_n,
                                     e->spec_varlen ? "confidence-scheduled lengths" : "fixed length")
                          : snprintf(e->plan_text + used, sizeof e->plan_text - used, "speculation  %s\n", e->spec_note);
        if (k > 0) used += (size_t)k;
        if (e->spec_n && e->spec_varlen && used + 1 < sizeof e->plan_text) {
            di_spec_cost_format(&e->spec_cost, e->plan_text + used, sizeof e->plan_text - used);
            used = strlen(e->plan_text);
        }
    }
    if (used + 1 < sizeof e->plan_text && e->ranks) {
        char par[512];
        di_ranks_describe(e->ranks, par, sizeof par);
        int k = snprintf(e->plan_text + used, sizeof e->plan_text - used, "parallel     %s\n", par);
        if (k > 0) used += (size_t)k;
        if (used >= sizeof e->plan_text) used = sizeof e->plan_text - 1;
    }
    if (used + 1 < sizeof e->plan_text) { /* the load's plan, made before the weights were allocated */
        int k = snprintf(e->plan_text + used, sizeof e->plan_text - used, "load plan (before the load, states reserved: "
                         "%d slots + %s):\n", e->cfg.max_num_seqs,
                         e->cfg.num_pages ? "num_pages" : "one sequence at max_model_len");
        if (k > 0 && used + (size_t)k < sizeof e->plan_text)
            di_load_plan_format(&e->load_plan, "  ", e->plan_text + used + k, sizeof e->plan_text - used - (size_t)k);
    }
}

void deepinfer_engine_plan(const deepinfer_engine *e, deepinfer_memory_plan *out) { *out = e->plan; }
const char *deepinfer_engine_plan_text(const deepinfer_engine *e) { return e->plan_text; }
void deepinfer_engine_get_config(const deepinfer_engine *e, deepinfer_engine_config *out) {
    *out = e->cfg;
    out->model = e->model_dir;
    out->accelerator = e->plan.accelerator;
    out->nextn_decode = e->spec_n;
}
int32_t deepinfer_engine_vocab_size(const deepinfer_engine *e) { return (int32_t)e->mcfg->vocab_size; }

/* ---- open / close ----------------------------------------------------------------- */

/* --ep / --dp (ranks.h): the layout rules on the backend in place, and what runs on one rank
 * only; then the group whose rank 0 the engine's model is. Before any weight is loaded. */
static deepinfer_status open_ranks(deepinfer_engine *e, const di_model_config *m, di_backend_kind bk, int one_device,
                                   di_error *err) {
    const deepinfer_engine_config *c = &e->cfg;
    int world = 1;
    const di_rank_placement place = one_device ? DI_RANKS_ONE_DEVICE : DI_RANKS_PER_DEVICE;
    deepinfer_status st = di_ranks_check(m, c->ep, c->dp, c->eplb_replicas, bk, place, &world, err);
    if (st) return st;
    if (world == 1) return DEEPINFER_OK;
    if (e->spec_n > 0)
        return di_error_set(err, DEEPINFER_ERR_UNSUPPORTED,
                            "speculative decoding runs on one rank (the drafter's MoE stages are not expert-parallel): "
                            "leave --ep / --dp at 1, or turn speculation off (nextn_decode 0)");
    if (c->yoco_compact)
        return di_error_set(err, DEEPINFER_ERR_UNSUPPORTED,
                            "compact prefill (yoco_compact) runs on one rank: leave --ep / --dp at 1, or use exact "
                            "prefill");
    st = di_ranks_new(c->ep, c->dp, c->eplb_replicas, c->eplb_interval, bk, place, &e->ranks, err);
    if (!st) di_ranks_set_cp(e->ranks, c->cp_min_tokens);
    return st;
}

static deepinfer_status open_engine(deepinfer_engine *e, const deepinfer_engine_config *cfg,
                                    const di_engine_options *opt, di_error *err) {
    deepinfer_status st;
    if ((st = resolve_config(e, cfg, err)) || (st = locate_model(e, err))) return st;
    di_model_config peek;
    if ((st = di_config_load(e->model_dir, &peek, err))) return st;
    if ((st = check_spec(e, &peek, err))) return st;
    if ((st = check_yoco(&e->cfg, &peek, err))) return st;
    if ((st = di_seq_set_max_draft(&peek, e->cfg.max_draft_tokens, err))) return st; /* as the load will (seq_state.h) */
    int64_t ctx = e->cfg.max_model_len ? e->cfg.max_model_len : 65536;
    if (ctx > peek.max_position_embeddings) {
        if (e->cfg.max_model_len)
            return di_error_set(err, DEEPINFER_ERR_INVALID_ARGUMENT,
                                "max_model_len %lld exceeds the model's max_position_embeddings %lld",
                                (long long)ctx, (long long)peek.max_position_embeddings);
        ctx = peek.max_position_embeddings;
    }
    e->cfg.max_model_len = ctx;
    /* rows per model sub-batch: larger steps run as consecutive sub-batches (bitwise the same) */
    int rows = e->cfg.max_num_batched_tokens < 256 ? e->cfg.max_num_batched_tokens : 256;
    di_model_options mo = {.max_rows = rows, .max_context = ctx, .max_draft = e->cfg.max_draft_tokens,
                           .engram_hash = e->cfg.engram_hash, .weights = e->weights, .plan_out = &e->load_plan};
    if ((st = declare_states(e, &peek, &mo, err))) return st;
    /* the backend before the model: on CUDA the allocator and ops table put weights, workspace and
     * (below) the state pools in device memory (ops/backend.h di_backend_use) */
    di_backend_kind bk;
    if ((st = di_engine_backend_acquire(e->cfg.accelerator, e->cfg.batch_invariant, &bk, err))) return st;
    e->backend = bk;
    e->cfg.accelerator = di_backend_name(bk);
    if ((st = open_ranks(e, &peek, bk, opt->ranks_one_device, err))) return st;
    if (e->ranks) { /* every rank's plan checked before any load */
        mo.ep_rank = 0, mo.ep_size = e->cfg.ep, mo.comm = di_ranks_comm(e->ranks, 0);
        if ((st = di_ranks_plan_all(e->ranks, e->model_dir, &mo, err))) return st;
    } else if (opt->nccl_one_rank) { /* the EP path on one rank, through NCCL */
        if ((st = di_backend_comm_one(&e->comm1, err))) return st;
        mo.ep_rank = 0, mo.ep_size = 1, mo.comm = e->comm1;
    }
    st = di_model_load(e->model_dir, &mo, &e->model, err);
    if (!st && e->ranks) st = di_ranks_load(e->ranks, e->model_dir, &mo, err);
    di_engine_backend_loaded(bk);
    if (st) return st;
    if (opt->lanes_max) di_model_set_lanes(e->model, opt->lanes_max);
    e->mcfg = di_model_cfg(e->model);
    e->chat_arch = e->mcfg->arch == DI_ARCH_V41 ? DI_CHAT_V41 : DI_CHAT_V4;
    if ((st = load_tokenizer(e, err))) return st;
    e->out_ctx.max_model_len = ctx;
    di_constrain_init(&e->so, e->tok, (int32_t)e->mcfg->vocab_size, (int32_t)e->mcfg->eos_token_id);
    di_pool_geom g;
    int64_t n_pages = 0;
    if ((st = di_pool_geom_compute(e->mcfg, e->cfg.page_rows, ctx, e->cfg.max_draft_tokens, &g, err))) return st;
    int min_rows = g.rows_ikey > 0 && g.rows_ikey < g.rows_kv ? g.rows_ikey : g.rows_kv;
    int dev_sampling = !opt->host_sampler && !e->ranks; /* ranks: every step's logits on the host */
    /* EP steps run eagerly: the dp = 1 exchange has no host read or sync on NCCL (moe_ep.h), but the
     * step plan does not record collectives yet, and the DP layout reads its routing table back */
    if (e->ranks || e->comm1) e->cfg.cuda_graphs = 0;
    if ((st = di_devq_new(e->model, &e->pool, e->cfg.max_num_seqs, e->cfg.cuda_graphs, min_rows, dev_sampling,
                              &e->dq, err)))
        return st;
    e->async = e->cfg.async_scheduling < 0 ? e->dq->asynchronous : e->cfg.async_scheduling;
    if (e->spec_n > 0) { /* a step with drafts runs synchronously and the next is planned after it (engine.c) */
        int samples = e->cfg.max_num_seqs * (2 + e->spec_n); /* verify groups, and chunks that end a prompt */
        if (samples > e->cfg.max_num_batched_tokens) samples = e->cfg.max_num_batched_tokens;
        /* held drafts (the pipelined order) need the next step's draft count before its drafts: fixed lengths */
        int pipeline = !e->spec_varlen && !opt->spec_sync;
        if ((st = di_devq_enable_spec(e->dq, e->cfg.max_num_batched_tokens, 2 * e->cfg.max_num_seqs, samples,
                                      e->spec_n, pipeline, err)))
            return st;
    }
    if ((st = di_devq_enable_prompt_lp(e->dq, prompt_lp_rows(&e->cfg), err))) return st;
    if ((st = plan_memory(e, &g, &n_pages, err))) return st;
    if ((st = di_pool_init(&e->pool, e->mcfg, &g, e->cfg.max_num_seqs, n_pages, err))) return st;
    if (e->ranks && (st = di_ranks_start(e->ranks, e->model, &e->pool, e->dq, err))) return st;
    if (e->spec_n > 0 && e->spec_varlen) {
        int rows = e->cfg.max_num_seqs * (1 + e->spec_n);
        if (rows > e->cfg.max_num_batched_tokens) rows = e->cfg.max_num_batched_tokens;
        if (opt->spec_cost) e->spec_cost = *opt->spec_cost;
        else if ((st = di_spec_profile(e->model, &e->pool, rows, e->spec_n, &e->spec_cost, err))) return st;
    }
    di_sched_config sc = {.max_num_batched_tokens = e->cfg.max_num_batched_tokens,
                          .max_num_seqs = e->cfg.max_num_seqs,
                          .chunk_size = e->cfg.chunk_size,
                          .max_model_len = ctx,
                          .watermark_pages = n_pages / 100,
                          .spec_n = e->spec_n,
                          .spec_cost = e->spec_n > 0 && e->spec_varlen ? &e->spec_cost : NULL,
                          .spec_accepted_at = e->stats.spec_accepted_at,
                          .spec_drafted_at = e->stats.spec_drafted_at,
                          .prompt_lp_rows = prompt_lp_rows(&e->cfg)};
    if ((st = di_sched_init(&e->sched, &sc, &e->pool, err))) return st;
    if ((st = di_runner_init(&e->runner, &e->pool, e->cfg.max_num_batched_tokens, 2 * e->cfg.max_num_seqs, err)))
        return st;
    if (e->cfg.yoco_compact) e->runner.yoco_keep = e->cfg.yoco_keep_tokens;
    if (e->spec_n > 0 && (st = di_runner_enable_spec(&e->runner, e->spec_n, err))) return st;
    int64_t img = e->mcfg->image_token_id, V = e->mcfg->vocab_size;
    if (img >= 0 && img < V) { /* text only: the image token is never sampled (the forward refuses it) */
        size_t words = (size_t)(V + 31) / 32;
        if (!(e->text_mask = malloc(words * 4))) return di_error_set(err, DEEPINFER_ERR_OUT_OF_MEMORY, "out of memory");
        memset(e->text_mask, 0xFF, words * 4);
        e->text_mask[img / 32] &= ~(1u << (img % 32));
        e->runner.base_mask = e->text_mask;
    }
    e->stats.num_pages = n_pages;
    plan_text(e);
    return DEEPINFER_OK;
}

deepinfer_status di_engine_open_opts(const deepinfer_engine_config *cfg, const di_engine_options *opt,
                                     deepinfer_engine **out, di_error *err) {
    *out = NULL;
    deepinfer_engine_config defaults;
    if (!cfg) {
        deepinfer_engine_config_init(&defaults);
        cfg = &defaults;
    }
    const di_engine_options none = {0};
    if (!opt) opt = &none;
    deepinfer_engine *e = calloc(1, sizeof *e);
    if (!e) {
        di_st_close(opt->weights);
        return di_error_set(err, DEEPINFER_ERR_OUT_OF_MEMORY, "out of memory");
    }
    e->weights = opt->weights;
    e->t_open = di_engine_now(NULL);
    deepinfer_status st = open_engine(e, cfg, opt, err);
    if (st) {
        deepinfer_engine_close(e);
        return st;
    }
    *out = e;
    return DEEPINFER_OK;
}

deepinfer_status deepinfer_engine_open(const deepinfer_engine_config *cfg, deepinfer_engine **out, char *errbuf,
                                       size_t errbuf_len) {
    di_error err = {0};
    deepinfer_status st = di_engine_open_opts(cfg, NULL, out, &err);
    if (errbuf && errbuf_len) snprintf(errbuf, errbuf_len, "%s", st ? err.msg : "");
    return st;
}

deepinfer_status di_engine_open_weights(const deepinfer_engine_config *cfg, di_safetensors *weights,
                                        deepinfer_engine **out, di_error *err) {
    if (!weights) {
        *out = NULL;
        return di_error_set(err, DEEPINFER_ERR_INVALID_ARGUMENT, "di_engine_open_weights: no weights");
    }
    const di_engine_options opt = {.weights = weights};
    return di_engine_open_opts(cfg, &opt, out, err);
}

void deepinfer_engine_close(deepinfer_engine *e) {
    if (!e) return;
    for (size_t i = 0; i < e->reqs.cap; i++)
        if (e->reqs.vals && e->reqs.vals[i]) di_request_free(e->reqs.vals[i]);
    di_reqmap_free(&e->reqs);
    di_devq_destroy(e->dq);
    di_runner_free(&e->runner);
    di_sched_free(&e->sched);
    di_pool_free(&e->pool);
    di_constrain_free(&e->so);
    di_tokenizer_free(e->tok);
    free(e->out_ctx.piece);
    free(e->updated);
    free(e->updated_pub);
    free(e->text_mask);
    di_model_free(e->model);
    di_ranks_free(e->ranks); /* ranks 1.. and then the communicators, after rank 0's model */
    di_comm_free(e->comm1);
    di_st_close(e->weights); /* after the models, which read it */
    di_engine_backend_release(e->backend); /* after every device buffer of this engine was freed */
    free(e);
}
