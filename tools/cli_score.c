/* `deepinfer score`: prefill token ids, then greedy or teacher-forced decode
 * steps, writing raw float32 logits (docs/DESIGN.md §4; tools/score/score.h). */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "args/cli_args.h"
#include "cli.h"
#include "args/cli_parallel.h"
#include "cli_model.h"
#include "score_ranks.h"
#include "args/cli_model_dir.h"
#include "io/model_dir.h"
#include "ops/backend.h"
#include "score/compact_quality.h"
#include "util/env.h"

static const char USAGE[] =
    "usage: deepinfer score --model DIR --prompt-ids 1,2,3 [--all-positions]\n"
    "                       [--steps N | --force-ids 7,8,9] --logits-out F.bin [--ids-out F.txt]\n"
    "                       [--chunk K] [--batch-with M] [--backend cpu|cuda]\n"
    "                       [--released-index-k] [--engram-hash FILE]\n"
    "                       [--yoco-compact] [--yoco-keep-tokens N] [--ep M] [--dp N]\n"
    "       deepinfer score --model DIR --compact-quality [--prompts 8] [--prompt-len 512] [--steps 32]\n"
    "                       [--yoco-keep-tokens N]\n"
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
    "  --yoco-compact     V4.1 compact prefill (architecture.md 6.5; also\n"
    "                     $DEEPINFER_YOCO_PREFILL_TRUNCATION_MODE=compact): the layers after the last\n"
    "                     KV source run only on the prompt's tail; --all-positions is then refused\n"
    "  --yoco-keep-tokens N  that tail (default 140; also $DEEPINFER_YOCO_PREFILL_KEEP_TOKENS)\n"
    "  --compact-quality  print how far compact prefill moves the outputs from exact: --prompts\n"
    "                     pseudo-random prompts of --prompt-len.. +88 tokens, exact greedy --steps,\n"
    "                     compact teacher-forced on them; mean/max |d logit| of the first generated\n"
    "                     position, its argmax agreement and that over all steps\n"
    "\n"
    DI_CLI_PARALLEL_USAGE
    "Logits are bit-identical whatever --chunk, --batch-with, --ep and --dp are (and, without\n"
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

/* $DEEPINFER_YOCO_PREFILL_TRUNCATION_MODE / _KEEP_TOKENS over the flags (README "Environment"). */
static int yoco_from_env(int *yoco, int64_t *keep) {
    const char *mode = di_env(DI_ENV_YOCO_MODE), *k = di_env(DI_ENV_YOCO_KEEP);
    if (mode && !strcmp(mode, "compact")) *yoco = 1;
    else if (mode && !strcmp(mode, "exact")) *yoco = 0;
    else if (mode) {
        fprintf(stderr, "error: $%s must be \"exact\" or \"compact\", got \"%s\"\n", di_env_name(DI_ENV_YOCO_MODE), mode);
        return 1;
    }
    if (k && di_cli_parse_i64(di_env_name(DI_ENV_YOCO_KEEP), k, 1, INT64_MAX, keep)) return 1;
    return 0;
}

/* --compact-quality: compact_quality.h's figures, one line each. */
static int compact_quality(const char *model, const char *backend, const char *engram_hash, int n_prompts,
                           int prompt_len, int steps, int64_t keep) {
    di_error err = {0};
    di_backend_kind bk;
    if (di_backend_select(backend, &bk, &err) || di_backend_use(bk, &err)) {
        fprintf(stderr, "deepinfer score: %s\n", err.msg);
        return 1;
    }
    cli_model m;
    memset(&m, 0, sizeof m);
    di_model_location loc;
    di_v4_options opt = {.engram_hash = engram_hash};
    di_compact_quality q;
    int rc = 1;
    if (di_cli_locate_model(model, &loc, &err) || cli_model_load(loc.dir, &opt, &m, &err) ||
        di_compact_quality_run(&m.sm, n_prompts, prompt_len, steps, keep, &q, &err)) {
        fprintf(stderr, "deepinfer score: %s\n", err.msg);
    } else {
        printf("model                    %s\n", loc.dir);
        printf("prompts                  %d of %d..%d tokens, keep %lld, %d greedy steps\n", q.n_prompts,
               q.prompt_len_min, q.prompt_len_max, (long long)q.keep, q.steps);
        printf("first_mean_abs_diff      %.6g\n", q.first_mean_abs);
        printf("first_max_abs_diff       %.6g\n", q.first_max_abs);
        printf("first_logit_std          %.6g\n", q.first_logit_std);
        printf("first_mean_abs_over_std  %.6g\n", q.first_logit_std > 0 ? q.first_mean_abs / q.first_logit_std : 0);
        printf("first_argmax_agreement   %.6g\n", q.first_agree);
        printf("greedy_argmax_agreement  %.6g\n", q.greedy_agree);
        rc = 0;
    }
    cli_model_free(&m);
    return rc;
}

static int cmd_score(int argc, char **argv) {
    if (di_cli_wants_help(argc, argv)) {
        fputs(USAGE, stdout);
        return 0;
    }
    const char *model = NULL, *prompt_s = NULL, *force_s = NULL, *logits_out = NULL, *ids_out = NULL, *backend = "cpu";
    const char *engram_hash = NULL, *v;
    int all_positions = 0, steps = 0, chunk = 0, batch_with = 0, have_steps = 0, released = 0;
    int yoco = 0, quality = 0, n_prompts = 8, prompt_len = 512;
    int64_t yoco_keep = 0;
    struct {
        const char *flag;
        const char **dst;
    } sflags[] = {{"--model", &model},       {"--prompt-ids", &prompt_s}, {"--force-ids", &force_s},
                  {"--logits-out", &logits_out}, {"--ids-out", &ids_out},   {"--backend", &backend},
                  {"--engram-hash", &engram_hash}};
    deepinfer_engine_config par; /* --ep / --dp (cli_parallel.h; EPLB is the engine's) */
    memset(&par, 0, sizeof par);
    for (int i = 1; i < argc; i++) {
        int matched = di_cli_parallel_flag(argc, argv, &i, &par);
        if (matched < 0) return 2;
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
        } else if (!strcmp(argv[i], "--yoco-compact")) {
            yoco = 1;
        } else if (!strcmp(argv[i], "--compact-quality")) {
            quality = 1;
        } else if (di_cli_flag_value(argc, argv, &i, "--yoco-keep-tokens", &v)) {
            if (!v || di_cli_parse_i64("--yoco-keep-tokens", v, 1, INT64_MAX, &yoco_keep)) return 2;
        } else if (di_cli_flag_value(argc, argv, &i, "--prompts", &v)) {
            if (!v || di_cli_parse_int("--prompts", v, 1, 4096, &n_prompts)) return 2;
        } else if (di_cli_flag_value(argc, argv, &i, "--prompt-len", &v)) {
            if (!v || di_cli_parse_int("--prompt-len", v, 1, 1 << 24, &prompt_len)) return 2;
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
    if (yoco_from_env(&yoco, &yoco_keep)) return 2;
    if (par.eplb_replicas || par.eplb_interval || par.cp_min_tokens)
        return fprintf(stderr, "error: --eplb-replicas / --eplb-interval / --cp-min-tokens are engine settings (generate, bench-engine)\n"), 2;
    if (quality) return compact_quality(model, backend, engram_hash, n_prompts, prompt_len, have_steps ? steps : 32,
                                        yoco_keep ? yoco_keep : 140);
    if (yoco && all_positions) {
        fprintf(stderr, "deepinfer score: --all-positions is not available in compact prefill "
                        "(--yoco-compact or $DEEPINFER_YOCO_PREFILL_TRUNCATION_MODE=compact): the late layers run only "
                        "on the prompt's tail, so the earlier positions have no logits; score them in exact mode\n");
        return 2;
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
    di_score_ranks *ranks = NULL; /* --ep / --dp > 1 (score_ranks.h) */
    di_score_model sm;
    memset(&sm, 0, sizeof sm);
    di_score_result res = {0};
    di_model_location loc;
    di_v4_options opt = {.released_index_k = released, .engram_hash = engram_hash};
    if (di_cli_locate_model(model, &loc, &err) ||
        (par.ep > 1 || par.dp > 1 ? di_score_ranks_open(loc.dir, &opt, par.ep > 0 ? par.ep : 1, par.dp > 0 ? par.dp : 1,
                                                        &ranks, &sm, &err)
                                  : cli_model_load(loc.dir, &opt, &m, &err))) {
        fprintf(stderr, "deepinfer score: %s\n", err.msg);
        goto out;
    }
    if (!ranks) sm = m.sm;
    if (ranks) m.arch = sm.cfg->arch;
    if (released && m.arch != DI_ARCH_V41)
        fprintf(stderr, "deepinfer score: note: --released-index-k only changes DeepSeek-V4.1 models\n");
    di_score_req req = {.prompt = prompt, .n_prompt = np, .all_positions = all_positions, .steps = steps,
                        .force_ids = force, .n_force = nf, .chunk = chunk, .batch_with = batch_with,
                        .yoco_keep = yoco ? (yoco_keep ? yoco_keep : 140) : 0};
    if (di_score_run(&sm, &req, &res, &err)) {
        fprintf(stderr, "deepinfer score: %s\n", err.msg);
        goto out;
    }
    int V = (int)sm.cfg->vocab_size;
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
    di_score_ranks_free(ranks);
    free(prompt);
    free(force);
    return rc;
}

DI_CLI_COMMAND(score, "prefill + decode token ids and write raw float32 logits (golden tests)", cmd_score)
