/*
 * model_dir.h — find the directory of a model (config.json + safetensors).
 *
 * Order:
 *  1. `--model ARG` when given:
 *     - a directory with config.json: used as is;
 *     - a Hugging Face cache repo folder (models--ORG--NAME, with snapshots/):
 *       its snapshot (below);
 *     - a repo id `ORG/NAME` or `ORG/NAME@REV`: looked up in the HF cache.
 *  2. else $DEEPINFER_HF_MODEL_DIR: a directory with config.json, or a hub
 *     cache root (holding models--* folders) searched like the HF cache;
 *  3. else the HF hub cache: $HF_HUB_CACHE, else $HF_HOME/hub, else
 *     ~/.cache/huggingface/hub. Without a repo id it must hold exactly one
 *     models--deepseek-ai--DeepSeek-V4* entry (several: an error listing them).
 *
 * Snapshot of a cache repo folder: snapshots/<rev> with <rev> read from
 * refs/main (or refs/REV, or REV itself as a commit hash, for `@REV`). If
 * refs/main is missing or names no snapshot, the only snapshot, else the
 * lexicographically last one, is used and `how` says so. Errors list every
 * place that was looked at.
 */
#ifndef DI_IO_MODEL_DIR_H
#define DI_IO_MODEL_DIR_H

#include "util/error.h"

#define DI_PATH_MAX 4096

typedef struct di_model_location {
    char dir[DI_PATH_MAX];  /* directory holding config.json */
    char how[1024];         /* one line: where it came from, with any fallback stated */
    char repo_id[256];      /* "ORG/NAME" when resolved through the cache, else "" */
    char revision[128];     /* snapshot revision when resolved through the cache, else "" */
} di_model_location;

/* Resolve `model_arg` (may be NULL or "") as above into *loc (caller-owned). */
deepinfer_status di_model_locate(const char *model_arg, di_model_location *loc, di_error *err);

/* The product's one model rule (every CLI command, the engine, Python,
 * serve): `model_arg` when given, else $DEEPINFER_HF_MODEL_DIR (both through
 * di_model_locate), else the embedded demo model models/deepinfer-demo-v41
 * beside the executable's tree, else in the source tree it was built from;
 * loc->how says which. */
deepinfer_status di_model_resolve(const char *model_arg, di_model_location *loc, di_error *err);

/* The HF hub cache root from the environment ($HF_HUB_CACHE, $HF_HOME/hub,
 * ~/.cache/huggingface/hub) into out; *source names the variable used.
 * Returns 0, or -1 if none can be formed (no HOME) or it does not fit. */
int di_hf_cache_root(char *out, size_t n, const char **source);

/* 1 if `s` is a syntactically valid repo id "ORG/NAME" (optionally "@REV"). */
int di_is_repo_id(const char *s);

#endif
