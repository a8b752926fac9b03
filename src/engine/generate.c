/* generate.c — the offline batch call, DeepInfer's / vLLM's LLM.generate
 * (deepinfer.h): add every prompt, step until all are done, hand the
 * outputs back in prompt order. */
#include <stdio.h>
#include <stdlib.h>

#include "engine/engine_internal.h"

void deepinfer_outputs_free(deepinfer_request_output **outs, size_t n) {
    if (!outs) return;
    for (size_t i = 0; i < n; i++) deepinfer_output_free(outs[i]);
    free(outs);
}

deepinfer_status deepinfer_generate(deepinfer_engine *e, const deepinfer_prompt *prompts, size_t n,
                                    const deepinfer_sampling_params *params, size_t n_params,
                                    deepinfer_request_output ***outputs) {
    di_error err = {0};
    *outputs = NULL;
    if (n && !prompts) {
        di_error_set(&err, DEEPINFER_ERR_INVALID_ARGUMENT, "generate: %zu prompts but no prompt array", n);
        return di_engine_fail(e, &err);
    }
    if (params && n_params != 1 && n_params != n) {
        di_error_set(&err, DEEPINFER_ERR_INVALID_ARGUMENT,
                     "generate: %zu sampling params for %zu prompts (give 1 for all, or one per prompt)", n_params, n);
        return di_engine_fail(e, &err);
    }
    if (deepinfer_has_unfinished(e)) {
        di_error_set(&err, DEEPINFER_ERR_INVALID_ARGUMENT,
                     "generate: requests added with deepinfer_add_request are still running; finish them first");
        return di_engine_fail(e, &err);
    }
    deepinfer_request_output **outs = calloc(n ? n : 1, sizeof *outs);
    uint64_t *ids = calloc(n ? n : 1, sizeof *ids);
    char *ok = calloc(n ? n : 1, 1);
    deepinfer_status st = outs && ids && ok ? DEEPINFER_OK
                                            : di_error_set(&err, DEEPINFER_ERR_OUT_OF_MEMORY, "generate: out of memory");
    for (size_t i = 0; i < n && !st; i++) {
        const deepinfer_sampling_params *p = params ? &params[n_params == 1 ? 0 : i] : NULL;
        di_error rerr = {0};
        if (!di_engine_add(e, &prompts[i], p, &ids[i], &rerr)) {
            ok[i] = 1;
            continue;
        }
        di_request *r = di_request_new_failed(ids[i], rerr.code, rerr.msg); /* this request fails, the others run */
        if (!r) st = di_error_set(&err, DEEPINFER_ERR_OUT_OF_MEMORY, "generate: out of memory");
        else outs[i] = &r->out;
    }
    while (!st && deepinfer_has_unfinished(e)) {
        st = deepinfer_step(e, NULL);
        if (st) snprintf(err.msg, sizeof err.msg, "%s", e->last_error), err.code = st;
    }
    for (size_t i = 0; i < n && ok && ids; i++) {
        if (!ok[i]) continue;
        if (st) deepinfer_abort(e, ids[i]);
        deepinfer_take_output(e, ids[i], &outs[i]);
    }
    free(ids);
    free(ok);
    if (st) {
        if (outs) deepinfer_outputs_free(outs, n);
        return di_engine_fail(e, &err);
    }
    *outputs = outs;
    return DEEPINFER_OK;
}
