/*
 * engine_gpu_util.h — opening an engine on a golden checkpoint for the GPU
 * engine tests (gtest_engine.c, gtest_engine_spec.c): the checkpoint, its
 * Engram hash manifest (V4.1), the accelerator and a 1024-token context;
 * the caller sets the rest of the config, and the opened engine's plan must
 * name the accelerator asked for.
 */
#ifndef DI_TESTS_ENGINE_GPU_UTIL_H
#define DI_TESTS_ENGINE_GPU_UTIL_H

#include <stdio.h>
#include <string.h>

#include "deepinfer.h"
#include "test.h"

typedef struct eng_gpu_config {
    deepinfer_engine_config c;
    char hash[4096];
} eng_gpu_config;

/* The base config of checkpoint `dir` (v41: with its Engram hash) on accelerator `acc`. */
static inline void eng_gpu_config_init(eng_gpu_config *g, const char *dir, int v41, const char *acc) {
    snprintf(g->hash, sizeof g->hash, "%s/expected/manifest.json", di_test_data(dir));
    deepinfer_engine_config_init(&g->c);
    g->c.model = di_test_data(dir);
    g->c.engram_hash = v41 ? g->hash : NULL;
    g->c.accelerator = acc;
    g->c.max_model_len = 1024;
}

/* Open g's engine (a test failure naming `name` when it does not open or runs elsewhere). */
static inline deepinfer_engine *eng_gpu_open(const eng_gpu_config *g, const char *name) {
    deepinfer_engine *e = NULL;
    char msg[2048];
    if (deepinfer_engine_open(&g->c, &e, msg, sizeof msg)) {
        di_test_fail(__FILE__, __LINE__, "%s engine on %s: %s", name, g->c.accelerator, msg);
        return NULL;
    }
    deepinfer_memory_plan p;
    deepinfer_engine_plan(e, &p);
    if (strcmp(p.accelerator, g->c.accelerator)) {
        di_test_fail(__FILE__, __LINE__, "asked for accelerator %s, the plan says %s", g->c.accelerator, p.accelerator);
        deepinfer_engine_close(e);
        return NULL;
    }
    return e;
}

#endif
