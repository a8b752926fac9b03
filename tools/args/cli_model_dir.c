/* cli_model_dir.c — the CLI's model-resolution rule (cli_model_dir.h). */
#include "cli_model_dir.h"


deepinfer_status di_cli_locate_model(const char *model_arg, di_model_location *loc, di_error *err) {
    return di_model_resolve(model_arg, loc, err); /* the library's rule, so every front door agrees */
}
