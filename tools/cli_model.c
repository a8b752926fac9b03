/* cli_model.c — load a V4 or V4.1 checkpoint for the CLI (cli_model.h). */
#include "cli_model.h"

#include <string.h>

deepinfer_status cli_model_load(const char *dir, const di_v4_options *opt, cli_model *m, di_error *err) {
    memset(m, 0, sizeof *m);
    di_model_config cfg;
    deepinfer_status st = di_config_load(dir, &cfg, err);
    if (st) return st;
    m->arch = cfg.arch;
    if (cfg.arch == DI_ARCH_V41) {
        if ((st = di_v41_load(dir, opt, &m->v41, err))) return st;
        m->sm = di_score_model_v41(m->v41);
        m->decode_bytes = di_v41_decode_weight_bytes(m->v41);
    } else {
        if ((st = di_v4_load(dir, opt, &m->v4, err))) return st;
        m->sm = di_score_model_v4(m->v4);
        m->decode_bytes = di_v4_decode_weight_bytes(m->v4);
    }
    return DEEPINFER_OK;
}

void cli_model_free(cli_model *m) {
    di_v4_free(m->v4);
    di_v41_free(m->v41);
    memset(m, 0, sizeof *m);
}
