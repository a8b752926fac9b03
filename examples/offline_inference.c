/*
 * offline_inference.c — the counterpart of DeepInfer's / vLLM's
 * examples/offline_inference.py: a few prompts, one sampling configuration,
 * one generate call, the completions printed.
 *
 *   build/examples/offline_inference [MODEL_DIR [TOKENIZER]]
 *
 * Without arguments it uses the engine's default model ($DEEPINFER_HF_MODEL_DIR,
 * else the embedded demo model). Only the public header is used. Exits 1
 * when the engine cannot run or any request fails.
 */
#include <stdio.h>

#include "deepinfer.h"

int main(int argc, char **argv) {
    const char *prompts_text[] = {
        "Hello, my name is",
        "The president of the United States is",
        "The capital of France is",
        "The future of AI is",
    };
    enum { N = sizeof prompts_text / sizeof prompts_text[0] };

    /* Sampling: temperature 0.8, nucleus 0.95, a fixed seed for reproducible runs. */
    deepinfer_sampling_params sp;
    deepinfer_sampling_params_init(&sp);
    sp.temperature = 0.8f;
    sp.top_p = 0.95f;
    sp.max_tokens = 32;
    sp.has_seed = 1;
    sp.seed = 0;

    /* Engine: the model, everything else at its defaults. */
    deepinfer_engine_config cfg;
    deepinfer_engine_config_init(&cfg);
    if (argc > 1) cfg.model = argv[1];
    if (argc > 2) cfg.tokenizer = argv[2];
    deepinfer_engine *engine = NULL;
    char err[2048];
    if (deepinfer_engine_open(&cfg, &engine, err, sizeof err) != DEEPINFER_OK) {
        fprintf(stderr, "cannot open the engine: %s\n", err);
        return 1;
    }

    deepinfer_prompt prompts[N];
    for (int i = 0; i < N; i++) prompts[i] = (deepinfer_prompt){.text = prompts_text[i]};
    deepinfer_request_output **outputs = NULL;
    if (deepinfer_generate(engine, prompts, N, &sp, 1, &outputs) != DEEPINFER_OK) {
        fprintf(stderr, "generate failed: %s\n", deepinfer_engine_last_error(engine));
        deepinfer_engine_close(engine);
        return 1;
    }
    printf("\nGenerated Outputs:\n------------------------------------------------------------\n");
    int failed = 0;
    for (int i = 0; i < N; i++) {
        const deepinfer_request_output *o = outputs[i];
        if (o->status != DEEPINFER_OK) {
            printf("Prompt:    \"%s\"\nError:     %s\n", prompts_text[i], o->error);
            failed++;
            continue;
        }
        printf("Prompt:    \"%s\"\nOutput:    \"%s\"\n", prompts_text[i], o->choices[0].text);
        printf("------------------------------------------------------------\n");
    }
    deepinfer_outputs_free(outputs, N);
    deepinfer_engine_close(engine);
    if (failed) fprintf(stderr, "%d of %d requests failed\n", failed, N);
    return failed ? 1 : 0;
}
