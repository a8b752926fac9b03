/*
 * eval_gen.h — generation tasks through the public engine (deepinfer.h:
 * deepinfer_engine_open + deepinfer_generate, all items in one continuous
 * batch): exact match after answer extraction (eval_extract.h) and
 * JSON-schema validity (eval_schema.h). Greedy by default. A schema item
 * is generated unconstrained unless the item says "constrained": true or
 * opts.constrained is set; then the engine runs it under so_args
 * {"schema_type": "json"} and validity measures the engine's constrained
 * decoding (a length cut still makes it invalid).
 */
#ifndef DI_TOOLS_EVAL_GEN_H
#define DI_TOOLS_EVAL_GEN_H

#include <stdint.h>
#include <stdio.h>

#include "deepinfer.h"
#include "eval/eval_report.h"
#include "eval/eval_tasks.h"

typedef struct ev_gen_opts {
    const char *model;        /* model directory (resolved) */
    const char *accelerator;  /* NULL = the engine's rule */
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
} ev_gen_summary;

/* Run the generation items of t; writes per-item JSON objects into *items. */
deepinfer_status ev_generate_tasks(ev_tasks *t, const ev_gen_opts *o, ev_buf *items, ev_gen_summary *sum, di_error *err);

void ev_gen_summary_json(ev_buf *b, const ev_gen_summary *s);
void ev_gen_summary_table(FILE *f, const ev_gen_summary *s);

#endif
