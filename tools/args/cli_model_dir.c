/* cli_model_dir.c — the CLI's model-resolution rule (cli_model_dir.h). */
#include "cli_model_dir.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util/env.h"
#include "util/file.h"

#define DEMO_MODEL "models/deepinfer-demo-v41"
#ifndef DEEPINFER_SOURCE_DIR
#define DEEPINFER_SOURCE_DIR "."
#endif

/* The embedded demo model where deepinfer_engine_open looks for it
 * (src/engine/engine_open.c): beside the executable's tree, else the source tree. */
static int demo_model_dir(char *out, size_t n) {
    char exe[DI_PATH_MAX];
    ssize_t len = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (len > 0) {
        exe[len] = '\0';
        char *slash = strrchr(exe, '/');
        if (slash) {
            *slash = '\0';
            char cand[DI_PATH_MAX + 64];
            snprintf(cand, sizeof cand, "%s/../%s", exe, DEMO_MODEL);
            if (di_is_dir(cand) && realpath(cand, out) && strlen(out) < n) return 1;
        }
    }
    snprintf(out, n, "%s/%s", DEEPINFER_SOURCE_DIR, DEMO_MODEL);
    return di_is_dir(out);
}

deepinfer_status di_cli_locate_model(const char *model_arg, di_model_location *loc, di_error *err) {
    if ((model_arg && *model_arg) || di_env(DI_ENV_HF_MODEL_DIR)) return di_model_locate(model_arg, loc, err);
    memset(loc, 0, sizeof *loc);
    if (!demo_model_dir(loc->dir, sizeof loc->dir))
        return di_error_set(err, DEEPINFER_ERR_NOT_FOUND,
                            "no model given (--model, $DEEPINFER_HF_MODEL_DIR) and the embedded demo model is not at "
                            "<executable dir>/../%s nor %s/%s",
                            DEMO_MODEL, DEEPINFER_SOURCE_DIR, DEMO_MODEL);
    snprintf(loc->how, sizeof loc->how, "the embedded demo model (no --model, no $DEEPINFER_HF_MODEL_DIR)");
    return DEEPINFER_OK;
}
