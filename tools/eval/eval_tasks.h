/*
 * eval_tasks.h — the task file of `deepinfer eval loglikelihood|generate`:
 * JSONL, one item per line, its kind told by its members:
 *
 *   {"context": s, "continuation": s}            loglikelihood
 *   {"context": s, "choices": [s, ...], "answer": i}  multiple choice
 *   {"text": s}                                  loglikelihood_rolling
 *   {"prompt": s, "answer": s, "regex"?: s, "stop"?: [s]}   generation, exact match
 *   {"prompt": s, "schema": {..} | s, "constrained"?: bool}  generation, JSON-schema validity
 *
 * A line that is not a JSON object of one of these shapes becomes an item
 * with a named error (malformed_json, bad_item, empty_continuation) and the
 * other lines are still read. Blank lines are skipped. Members not listed
 * (e.g. "id") are ignored.
 */
#ifndef DI_TOOLS_EVAL_TASKS_H
#define DI_TOOLS_EVAL_TASKS_H

#include <stddef.h>

#include "util/error.h"

typedef enum ev_kind {
    EV_ERROR = 0,
    EV_LL,
    EV_MC,
    EV_ROLLING,
    EV_GEN_MATCH,
    EV_GEN_SCHEMA
} ev_kind;

typedef struct ev_str {
    char *p; /* NUL-terminated (may hold NULs; n is the length) */
    size_t n;
} ev_str;

#define EV_MAX_STOP 16

typedef struct ev_item {
    int line;               /* 1-based line number */
    ev_kind kind;
    const char *error;      /* EV_ERROR: the error's name */
    char message[512];      /* EV_ERROR: what is wrong */
    ev_str context, continuation, text, prompt, answer, regex, schema;
    ev_str *choices;
    int n_choices, answer_index;
    ev_str stop[EV_MAX_STOP];
    int n_stop;
    int constrained;        /* -1 = not given */
} ev_item;

typedef struct ev_tasks {
    ev_item *items;
    int n;
} ev_tasks;

/* Read the file (at most 1 GiB). Fails only when the file cannot be read. */
deepinfer_status ev_tasks_read(const char *path, ev_tasks *out, di_error *err);
/* Parse a buffer of JSONL. */
deepinfer_status ev_tasks_parse(const char *text, size_t len, ev_tasks *out, di_error *err);
void ev_tasks_free(ev_tasks *t);

/* Mark an item failed with a named error. */
void ev_item_fail(ev_item *it, const char *name, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

const char *ev_kind_name(ev_kind k);

#endif
