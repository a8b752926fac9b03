/*
 * eval_engine.h — the engine configuration an evaluation runs, and the
 * report's "engine" object that names it (eval/README.md "Evaluating any
 * configuration").
 *
 * Every `deepinfer eval` command that runs the engine takes the engine
 * flags of `deepinfer generate` (args/cli_engine_flags.h) into a
 * deepinfer_engine_config; the report then names what the engine ran —
 * deepinfer_engine_get_config's resolved configuration (defaults filled
 * in, environment overrides applied) — plus the speculation counters of
 * the run, so a report says whether drafts were verified at all.
 */
#ifndef DI_TOOLS_EVAL_ENGINE_H
#define DI_TOOLS_EVAL_ENGINE_H

#include <stdint.h>
#include <stdio.h>

#include "deepinfer.h"
#include "eval/eval_report.h"

/* The per-item / per-task error of a scoring task on an engine in compact mode. */
#define EV_NEEDS_PROMPT_LOGPROBS "needs_prompt_logprobs"
#define EV_NEEDS_PROMPT_LOGPROBS_MSG                                                                          \
    "scoring needs prompt logprobs, and this engine runs bounded replay (compact prefill: --yoco-compact or " \
    "$DEEPINFER_YOCO_PREFILL_TRUNCATION_MODE=compact), whose prompt positions have no logits; score in exact " \
    "mode, or measure compact mode on generation tasks (`deepinfer eval generate --compare-compact`)"

typedef struct ev_engine_info {
    int opened;                       /* 0: no engine ran (the report's "engine" is null) */
    deepinfer_engine_config cfg;      /* deepinfer_engine_get_config after open (strings copied below) */
    char accelerator[16], engram_hash[1024];
    int64_t spec_steps, spec_drafted, spec_accepted; /* deepinfer_engine_stats after the run */
} ev_engine_info;

/* The resolved configuration of an open engine (call after open), then again after the run for
 * its speculation counters. */
void ev_engine_info_read(deepinfer_engine *e, ev_engine_info *out);

/* "engine": {...} (or null when !opened). The single place every setting that changes a run is
 * named: backend, batch invariance, speculation, bounded replay, batching. */
void ev_engine_json(ev_buf *b, const ev_engine_info *in);

/* One table line naming the configuration (to f). */
void ev_engine_table(FILE *f, const ev_engine_info *in);

#endif
