/*
 * cli_model.h — the CLI's view of a loaded model: a V4 or V4.1 checkpoint,
 * picked from its config.json, behind the score driver's two calls
 * (tools/score/score.h). Shared by `score` and `bench`.
 */
#ifndef DI_TOOLS_CLI_MODEL_H
#define DI_TOOLS_CLI_MODEL_H

#include "score/score.h"

typedef struct cli_model {
    di_arch arch;
    di_v4_model *v4;
    di_v41_model *v41;
    di_score_model sm;       /* model, config, max_context, seq_new, forward */
    size_t decode_bytes;     /* weight bytes one decode step reads */
} cli_model;

/* Load `dir` with the loader its config.json names. */
deepinfer_status cli_model_load(const char *dir, const di_v4_options *opt, cli_model *m, di_error *err);
void cli_model_free(cli_model *m);

#endif
