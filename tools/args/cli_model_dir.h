/*
 * cli_model_dir.h — the one rule by which every `deepinfer` command finds
 * its model when it is given no --model, the same rule deepinfer_engine_open
 * applies (and so the Python API and `serve` too):
 *
 *   1. --model ARG: a directory with config.json, a Hugging Face cache repo
 *      folder, or a repo id ORG/NAME[@REV] looked up in the HF cache
 *      ($HF_HUB_CACHE, else $HF_HOME/hub, else ~/.cache/huggingface/hub);
 *   2. else $DEEPINFER_HF_MODEL_DIR: a model directory, or a hub cache root;
 *   3. else the embedded demo model models/deepinfer-demo-v41, next to the
 *      executable's tree (<exe dir>/../models/...), else in the source tree
 *      the executable was built from.
 *
 * The HF cache is searched only when asked for (1 or 2): a cached checkpoint
 * is never picked up silently by a command run without a model.
 */
#ifndef DI_TOOLS_ARGS_CLI_MODEL_DIR_H
#define DI_TOOLS_ARGS_CLI_MODEL_DIR_H

#include "io/model_dir.h"

/* One line for --help texts. */
#define DI_CLI_MODEL_RULE                                                                                   \
    "Model: --model DIR or ORG/NAME[@REV] (the HF cache); else $DEEPINFER_HF_MODEL_DIR; else the embedded\n" \
    "demo model models/deepinfer-demo-v41 (the same rule for every command; deepinfer --help).\n"

/* Resolve as above into *loc; loc->how says which step chose it. */
deepinfer_status di_cli_locate_model(const char *model_arg, di_model_location *loc, di_error *err);

#endif
