/*
 * eval_gen.h — generation tasks through the public engine (deepinfer.h:
 * deepinfer_engine_open + deepinfer_generate, all items in one continuous
 * batch): exact match after answer extraction (eval_extract.h) and
 * JSON-schema validity (eval_schema.h). Greedy by default. A schema item
 * is generated unconstrained unless the item says "constrained": true or
 * opts.constrained is set; then the engine runs it under so_args
 * {"schema_type": "json"} and validity measures the engine's constrained
 * decoding (a length cut still makes it invalid).
 *
 * The engine runs opts.engine (any configuration: backend, batch
 * invariance, speculation, bounded replay, batching); the summary names
 * what it ran (eval_engine.h). ev_generate_compare runs the items twice,
 * exact and with bounded replay (compact prefill), and reports both and
 * their difference: per-task score deltas and the items whose output
 * changed.
 */
#ifndef DI_TOOLS_EVAL_GEN_H
#define DI_TOOLS_EVAL_GEN_H

#include <stdint.h>
#include <stdio.h>

#include "deepinfer.h"
#include "eval/eval_engine.h"
#include "eval/eval_report.h"
#include "eval/eval_tasks.h"

typedef struct ev_gen_opts {
    const char *model;        /* model directory (resolved) */
    const deepinfer_engine_config *engine; /* NULL = the defaults; its model is replaced by `model` */
    const char *accelerator;  /* non-NULL: replaces engine->accelerator */
    int max_tokens;           /* default 256 */
    float temperature, top_p; /* default 0 (greedy), 1 */
    int top_k;
    int has_seed;
    uint64_t seed;
    int constrained;          /* default for schema items */
} ev_gen_opts;

typedef struct ev_gen_summary {
    int n_match, match_correct;
    int n_schema, schema_valid, schema_parses;
    int n_errors;
    char accelerator[16];
    int batch_invariant;
    ev_engine_info engine;    /* what the engine ran (opened = 0 when there was no generation item) */
} ev_gen_summary;

/* Run the generation items of t; writes per-item JSON objects into *items. */
deepinfer_status ev_generate_tasks(ev_tasks *t, const ev_gen_opts *o, ev_buf *items, ev_gen_summary *sum, di_error *err);

/* Bounded replay against exact on the same items. */
typedef struct ev_gen_compare {
    int items;                /* generation items that ran in both modes */
    int changed;              /* of them, those whose output (text, or error) differs */
    double match_acc_delta;   /* compact - exact exact-match accuracy (NaN without such items) */
    double schema_validity_delta;
} ev_gen_compare;

/* Run the items with o->engine in exact mode (yoco_compact 0) and again in compact mode
 * (yoco_compact 1, its yoco_keep_tokens as given): *items gets the exact run's objects, each with a
 * "compact" member (the compact run's outcome and "output_changed"). Fails when the exact run
 * still runs compact ($DEEPINFER_YOCO_PREFILL_TRUNCATION_MODE=compact overrides the config). */
deepinfer_status ev_generate_compare(ev_tasks *t, const ev_gen_opts *o, ev_buf *items, ev_gen_summary *exact,
                                     ev_gen_summary *compact, ev_gen_compare *cmp, di_error *err);

/* "results": {...} of a summary; "compare": {...}; the tables. */
void ev_gen_summary_json(ev_buf *b, const ev_gen_summary *s);
void ev_gen_compare_json(ev_buf *b, const ev_gen_compare *c);
void ev_gen_summary_table(FILE *f, const ev_gen_summary *s);
void ev_gen_compare_table(FILE *f, const ev_gen_summary *exact, const ev_gen_summary *compact, const ev_gen_compare *c);

#endif
