/*
 * End to end: generations constrained by JSON schemas on a golden checkpoint
 * (v4-tiny-a with the 1024-id test tokenizer) validate against their schema
 * according to an independent validator, ajv (tests/ajv, installed by
 * `make test` with npm ci). Random weights make the model pick arbitrary
 * tokens, so the grammar alone decides what is valid: this checks the whole
 * path so_args -> compile -> masks / sample-first -> EOS when accepting.
 * Only outputs that ended (grammar complete or EOS) are complete JSON texts;
 * outputs cut by max_tokens are prefixes and are counted, not validated.
 */
#include <limits.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "engine/engine_util.h"

static const char *const k_schemas[] = {
    /* object with bounded string, bounded integer, enum array, no extras */
    "{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\",\"maxLength\":12},"
    "\"age\":{\"type\":\"integer\",\"minimum\":0,\"maximum\":150},"
    "\"tags\":{\"type\":\"array\",\"items\":{\"enum\":[\"a\",\"b\",\"c\"]},\"maxItems\":3}},"
    "\"required\":[\"name\",\"age\"],\"additionalProperties\":false}",
    /* array of bounded integers */
    "{\"type\":\"array\",\"items\":{\"type\":\"integer\",\"minimum\":-50,\"maximum\":50},\"minItems\":1,\"maxItems\":5}",
    /* anyOf over scalars with an exclusive bound */
    "{\"anyOf\":[{\"type\":\"boolean\"},{\"type\":\"null\"},{\"type\":\"number\",\"exclusiveMinimum\":0,\"maximum\":10}]}",
    /* recursion through $defs/$ref */
    "{\"$defs\":{\"node\":{\"type\":\"object\",\"properties\":{\"v\":{\"type\":\"integer\",\"minimum\":0,\"maximum\":9},"
    "\"next\":{\"anyOf\":[{\"type\":\"null\"},{\"$ref\":\"#/$defs/node\"}]}},\"required\":[\"v\",\"next\"],"
    "\"additionalProperties\":false}},\"$ref\":\"#/$defs/node\"}",
    /* formats */
    "{\"type\":\"object\",\"properties\":{\"id\":{\"type\":\"string\",\"format\":\"uuid\"},"
    "\"day\":{\"type\":\"string\",\"format\":\"date\"}},\"required\":[\"id\",\"day\"],\"additionalProperties\":false}",
    /* pattern */
    "{\"type\":\"string\",\"pattern\":\"^[a-z]{2,5}-[0-9]{1,3}$\"}",
    /* exact oneOf: multiples of 3 or of 5 but not of both */
    "{\"oneOf\":[{\"type\":\"integer\",\"multipleOf\":3,\"minimum\":-1000,\"maximum\":1000},"
    "{\"type\":\"integer\",\"multipleOf\":5,\"minimum\":-1000,\"maximum\":1000}]}",
    /* const, nested object, optional properties */
    "{\"type\":\"object\",\"properties\":{\"kind\":{\"const\":\"point\"},\"at\":{\"type\":\"object\",\"properties\":"
    "{\"x\":{\"type\":\"integer\",\"maximum\":99,\"minimum\":-99},\"y\":{\"type\":\"integer\",\"maximum\":99,\"minimum\":-99}},"
    "\"required\":[\"x\"],\"additionalProperties\":false},\"label\":{\"type\":\"string\",\"minLength\":1,\"maxLength\":6}},"
    "\"required\":[\"kind\",\"at\"],\"additionalProperties\":false}",
};

enum { N_SCHEMAS = sizeof k_schemas / sizeof k_schemas[0], PER_SCHEMA = 6 };

static int write_file(const char *path, const char *text, size_t n) {
    FILE *f = fopen(path, "wb");
    if (!f) return -1;
    int ok = fwrite(text, 1, n, f) == n;
    return (fclose(f) == 0 && ok) ? 0 : -1;
}

TEST(structured_json_outputs_validate_with_ajv) {
    CHECK_MSG(access("tests/ajv/node_modules/ajv/package.json", R_OK) == 0,
              "the ajv oracle is not installed: run `make test` (it runs npm ci in tests/ajv) or ./build.sh test");
    eng_opts o = {.chunk = 64, .max_seqs = 32, .tokenizer = di_test_data("engine/tokenizer.json")};
    deepinfer_engine *e = eng_open(&o);
    CHECK(e);
    enum { N = N_SCHEMAS * PER_SCHEMA };
    deepinfer_prompt pr[N];
    deepinfer_sampling_params sp[N];
    static const char *const prompts[] = {"{", "Answer in JSON:", "the world", "x"};
    for (int i = 0; i < N; i++) {
        pr[i] = (deepinfer_prompt){.text = prompts[i % 4]};
        deepinfer_sampling_params_init(&sp[i]);
        sp[i].max_tokens = 160;
        sp[i].has_seed = 1;
        sp[i].seed = 7000 + (uint64_t)i;
        sp[i].temperature = (i % PER_SCHEMA == 0) ? 0.0f : 1.0f;
        sp[i].so_schema_type = "json";
        sp[i].so_schema = k_schemas[i / PER_SCHEMA];
        sp[i].so_whitespace_max = (i % 2) ? 2 : -1; /* compact-ish and the default policy */
        if (i % PER_SCHEMA == 3) sp[i].top_p = 0.9f; /* full-mask path */
    }
    deepinfer_request_output **out = NULL;
    CHECK(deepinfer_generate(e, pr, N, sp, N, &out) == DEEPINFER_OK);
    char dir[] = "/tmp/di_ajv_XXXXXX";
    CHECK(mkdtemp(dir));
    int complete = 0, cut = 0, failures = 0;
    for (int s = 0; s < N_SCHEMAS; s++) {
        char schema_path[PATH_MAX], cmd[16384];
        snprintf(schema_path, sizeof schema_path, "%s/schema%d.json", dir, s);
        CHECK(write_file(schema_path, k_schemas[s], strlen(k_schemas[s])) == 0);
        int len = snprintf(cmd, sizeof cmd, "node tests/ajv/validate.js %s", schema_path);
        int n_inst = 0;
        for (int k = 0; k < PER_SCHEMA; k++) {
            const deepinfer_request_output *r = out[s * PER_SCHEMA + k];
            CHECK_MSG(r->status == DEEPINFER_OK, "schema %d request %d: %s", s, k, r->error);
            const deepinfer_completion *c = &r->choices[0];
            if (c->finish_reason == DEEPINFER_FINISH_LENGTH) {
                cut++;
                continue;
            }
            CHECK(c->finish_reason == DEEPINFER_FINISH_STOP || c->finish_reason == DEEPINFER_FINISH_EOS);
            char path[PATH_MAX];
            snprintf(path, sizeof path, "%s/s%d_%d.json", dir, s, k);
            CHECK(write_file(path, c->text, c->text_len) == 0);
            len += snprintf(cmd + len, sizeof cmd - (size_t)len, " %s", path);
            n_inst++;
        }
        if (!n_inst) continue;
        complete += n_inst;
        snprintf(cmd + len, sizeof cmd - (size_t)len, " >%s/ajv%d.log 2>&1", dir, s);
        int rc = system(cmd);
        if (rc != 0) {
            failures++;
            char show[PATH_MAX + 32];
            snprintf(show, sizeof show, "cat %s/ajv%d.log >&2", dir, s);
            if (system(show)) fprintf(stderr, "    (log unavailable)\n");
            di_test_fail(__FILE__, __LINE__, "schema %d: ajv rejected an output (exit status %d)", s,
                         WIFEXITED(rc) ? WEXITSTATUS(rc) : -1);
        }
    }
    fprintf(stderr, "    %d complete outputs validated by ajv over %d schemas (%d cut by max_tokens)\n", complete,
            N_SCHEMAS, cut);
    CHECK_EQ_INT(failures, 0);
    CHECK_MSG(complete >= N * 2 / 3, "only %d of %d outputs completed", complete, N);
    char rm[64];
    snprintf(rm, sizeof rm, "rm -rf %s", dir);
    if (getenv("DI_KEEP_AJV")) fprintf(stderr, "    kept %s\n", dir);
    else if (system(rm)) fprintf(stderr, "    could not remove %s\n", dir);
    deepinfer_outputs_free(out, N);
    deepinfer_engine_close(e);
}
