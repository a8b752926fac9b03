/* `deepinfer score`: prefill token ids, then greedy or teacher-forced decode
 * steps, writing raw float32 logits (docs/DESIGN.md §4; tools/score/score.h). */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "args/cli_args.h"
#include "cli.h"
#include "cli_model.h"
#include "args/cli_model_dir.h"
#include "io/model_dir.h"
#include "ops/backend.h"

static const char USAGE[] =
    "usage: deepinfer score --model DIR --prompt-ids 1,2,3 [--all-positions]\n"
    "                       [--steps N | --force-ids 7,8,9] --logits-out F.bin [--ids-out F.txt]\n"
    "                       [--chunk K] [--batch-with M] [--backend cpu|cuda]\n"
    "                       [--released-index-k] [--engram-hash FILE]\n"
    "\n"
    "Prefill the prompt, then single-token decode steps, and write the logits.\n"
    "\n"
    "  --model DIR        model directory or HF cache repo id; without it $DEEPINFER_HF_MODEL_DIR,\n"
    "                     else the embedded demo model (the rule of every command: deepinfer --help)\n"
    "  --prompt-ids LIST  comma-separated token ids of the prompt\n"
    "  --all-positions    write a logits row for every prompt position (else only the last)\n"
    "  --steps N          decode N tokens greedily (each step feeds the previous row's argmax)\n"
    "  --force-ids LIST   decode by feeding these tokens instead (teacher forcing)\n"
    "  --logits-out F     raw little-endian float32 rows [rows][vocab]: prompt rows, then one per step\n"
    "  --ids-out F        the argmax of every row, one per line\n"
    "  --chunk K          prefill in chunks of K tokens (default: the whole prompt at once)\n"
    "  --batch-with M     run alongside M unrelated requests in the same steps\n"
    "  --backend B        cpu (default) or cuda (binaries built with `make cuda`: build/deepinfer-cuda)\n"
    "  --released-index-k V4.1: reproduce the released reference's stale-index-key decode\n"
    "                     (single-token decode steps then differ from prefill, as DeepSeek's code does)\n"
    "  --engram-hash FILE V4.1: Engram hash constants (engram_hash.json, or a golden manifest);\n"
    "                     default: the model directory's engram_hash.json, else the released ones\n"
    "\n"
    "Logits are bit-identical whatever --chunk and --batch-with are (and, without\n"
    "--released-index-k, whether a position is prefilled or decoded).\n";

/* Parse "1,2,3" (token ids) into a new array; returns the count, or -1 after naming the flag. */
static int parse_ids(const char *flag, const char *s, int32_t **out) {
    int cap = (int)(strlen(s) / 2 + 2), n = 0;
    int32_t *v = malloc(sizeof(int32_t) * (size_t)cap);
    if (!v || di_cli_parse_i32_list(flag, s, 0, INT32_MAX, v, cap, &n)) {
        free(v);
        return -1;
    }
    *out = v;
    return n;
}

static int cmd_score(int argc, char **argv) {
    if (di_cli_wants_help(argc, argv)) {
        fputs(USAGE, stdout);
        return 0;
    }
    const char *model = NULL, *prompt_s = NULL, *force_s = NULL, *logits_out = NULL, *ids_out = NULL, *backend = "cpu";
    const char *engram_hash = NULL, *v;
    int all_positions = 0, steps = 0, chunk = 0, batch_with = 0, have_steps = 0, released = 0;
    struct {
        const char *flag;
        const char **dst;
    } sflags[] = {{"--model", &model},       {"--prompt-ids", &prompt_s}, {"--force-ids", &force_s},
                  {"--logits-out", &logits_out}, {"--ids-out", &ids_out},   {"--backend", &backend},
                  {"--engram-hash", &engram_hash}};
    for (int i = 1; i < argc; i++) {
        int matched = 0;
        for (size_t f = 0; f < sizeof sflags / sizeof sflags[0] && !matched; f++)
            if (di_cli_flag_value(argc, argv, &i, sflags[f].flag, sflags[f].dst)) {
                if (!*sflags[f].dst) return 2;
                matched = 1;
            }
        if (matched) continue;
        if (!strcmp(argv[i], "--all-positions")) {
            all_positions = 1;
        } else if (!strcmp(argv[i], "--released-index-k")) {
            released = 1;
        } else if (di_cli_flag_value(argc, argv, &i, "--steps", &v)) {
            if (!v || di_cli_parse_int("--steps", v, 0, 1 << 24, &steps)) return 2;
            have_steps = 1;
        } else if (di_cli_flag_value(argc, argv, &i, "--chunk", &v)) {
            if (!v || di_cli_parse_int("--chunk", v, 1, 1 << 24, &chunk)) return 2;
        } else if (di_cli_flag_value(argc, argv, &i, "--batch-with", &v)) {
            if (!v || di_cli_parse_int("--batch-with", v, 0, 256, &batch_with)) return 2;
        } else {
            fprintf(stderr, "error: unknown option '%s' (see deepinfer score --help)\n", argv[i]);
            return 2;
        }
    }
    if (!prompt_s || !logits_out) {
        fprintf(stderr, "error: --prompt-ids and --logits-out are required (see deepinfer score --help)\n");
        return 2;
    }
    if (have_steps && force_s) {
        fprintf(stderr, "error: give either --steps or --force-ids, not both\n");
        return 2;
    }
    di_error err = {0};
    di_backend_kind bk;
    if (di_backend_select(backend, &bk, &err) != DEEPINFER_OK) {
        fprintf(stderr, "deepinfer score: %s\n", err.msg);
        return 1;
    }
    if (di_backend_use(bk, &err) != DEEPINFER_OK) { /* CUDA: device allocator and ops from here on */
        fprintf(stderr, "deepinfer score: %s\n", err.msg);
        return 1;
    }
    int32_t *prompt = NULL, *force = NULL;
    int np = parse_ids("--prompt-ids", prompt_s, &prompt), nf = 0;
    if (np < 1) return 2;
    if (force_s && (nf = parse_ids("--force-ids", force_s, &force)) < 0) {
        free(prompt);
        return 2;
    }
    int rc = 1;
    cli_model m;
    memset(&m, 0, sizeof m);
    di_score_result res = {0};
    di_model_location loc;
    di_v4_options opt = {.released_index_k = released, .engram_hash = engram_hash};
    if (di_cli_locate_model(model, &loc, &err) || cli_model_load(loc.dir, &opt, &m, &err)) {
        fprintf(stderr, "deepinfer score: %s\n", err.msg);
        goto out;
    }
    if (released && m.arch != DI_ARCH_V41)
        fprintf(stderr, "deepinfer score: note: --released-index-k only changes DeepSeek-V4.1 models\n");
    di_score_req req = {.prompt = prompt, .n_prompt = np, .all_positions = all_positions, .steps = steps,
                        .force_ids = force, .n_force = nf, .chunk = chunk, .batch_with = batch_with};
    if (di_score_run(&m.sm, &req, &res, &err)) {
        fprintf(stderr, "deepinfer score: %s\n", err.msg);
        goto out;
    }
    int V = (int)m.sm.cfg->vocab_size;
    FILE *f = fopen(logits_out, "wb");
    if (!f || fwrite(res.logits, sizeof(float) * (size_t)V, (size_t)res.n_rows, f) != (size_t)res.n_rows || fclose(f)) {
        fprintf(stderr, "deepinfer score: cannot write %s: %s\n", logits_out, strerror(errno));
        goto out;
    }
    if (ids_out) {
        FILE *g = fopen(ids_out, "w");
        int ok = g != NULL;
        for (int i = 0; ok && i < res.n_rows; i++) ok = fprintf(g, "%d\n", res.argmax[i]) > 0;
        if (!g || fclose(g) || !ok) {
            fprintf(stderr, "deepinfer score: cannot write %s: %s\n", ids_out, strerror(errno));
            goto out;
        }
    }
    rc = 0;
out:
    di_score_result_free(&res);
    cli_model_free(&m);
    free(prompt);
    free(force);
    return rc;
}

DI_CLI_COMMAND(score, "prefill + decode token ids and write raw float32 logits (golden tests)", cmd_score)
