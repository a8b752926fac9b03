/*
 * gen_sink.h — where `deepinfer generate` puts each finished request: a
 * JSONL file (--output FILE, or '-' for standard output; one line per
 * request, gen_io.h) or the completion text on standard output.
 *
 * The destination is opened before the model is loaded, so a path that
 * cannot be written is reported before any work is done. Every request is
 * written and flushed the moment it finishes; a failed write, flush or
 * close is reported with the destination's name and the system's reason
 * (errno), and the sink stays failed: the caller stops the run.
 */
#ifndef DI_TOOLS_GEN_SINK_H
#define DI_TOOLS_GEN_SINK_H

#include <stdio.h>

#include "deepinfer.h"

typedef struct gen_sink {
    FILE *f;
    char name[1024];  /* the path, or "standard output" */
    int jsonl;        /* 1: JSON lines (--output); 0: completion text */
    int own;          /* 1: f was opened here and is closed by gen_sink_close */
    int failed;       /* a write failed (reported once) */
    size_t n_total;   /* requests in the run: text mode names the request when > 1 */
} gen_sink;

/* path NULL: text on standard output; "-": JSONL on standard output; else
 * JSONL into the file `path` (created or truncated). Returns 0, or -1 after
 * printing "deepinfer generate: cannot open --output PATH: REASON". */
int gen_sink_open(gen_sink *s, const char *path, size_t n_total);

/* Write request `index`'s output and flush. Text mode writes nothing for a
 * failed request (its error goes to stderr from the caller). Returns 0, or
 * -1 after printing the reason (also for every later call). */
int gen_sink_write(gen_sink *s, size_t index, const deepinfer_request_output *o);

/* Flush and close (an owned file). Returns 0, or -1 after printing the reason. */
int gen_sink_close(gen_sink *s);

#endif
