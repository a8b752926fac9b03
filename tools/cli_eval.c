/* `deepinfer eval`: perplexity, loglikelihood scoring and generation tasks
 * over the model (tools/eval/, eval/README.md). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "args/cli_args.h"
#include "args/cli_engine_flags.h"
#include "args/cli_model_dir.h"
#include "cli.h"
#include "eval/eval_gen.h"
#include "eval/eval_ll.h"
#include "eval/eval_model.h"
#include "eval/eval_ppl.h"
#include "util/file.h"

static const char USAGE[] =
    "usage: deepinfer eval perplexity    --text FILE [--window N] [--stride S] [--path P] [common]\n"
    "       deepinfer eval loglikelihood --tasks FILE.jsonl [--window N] [--stride S] [--path P] [common]\n"
    "       deepinfer eval generate      --tasks FILE.jsonl [--max-tokens N] [--temperature T] [--top-p P]\n"
    "                                    [--top-k K] [--seed S] [--constrained] [--compare-compact] [common]\n"
    "common: [--model DIR] [--output FILE] [engine flags]\n"
    "\n"
    "perplexity     exp(mean NLL) of FILE's tokens after a BOS, and bits per byte; one window when\n"
    "               the text fits the context (or --window), else windows of N positions every S\n"
    "               tokens (default N/2), each scoring only its new tokens\n"
    "loglikelihood  JSONL items {context, continuation} (logprob, is_greedy), {context, choices,\n"
    "               answer} (acc, acc_norm), {text} (loglikelihood_rolling, windows as perplexity)\n"
    "generate       JSONL items {prompt, answer, regex?, stop?} (exact match of the regex's first match\n"
    "               or else the last number) and {prompt, schema, constrained?} (JSON-schema validity);\n"
    "               greedy (temperature 0) and --max-tokens 256 by default; --constrained runs schema\n"
    "               items under the schema (structured outputs)\n"
    "--compare-compact  generate: run the items exact and again with bounded replay (compact prefill,\n"
    "               --yoco-keep-tokens N as its tail) and report both, the score deltas and the\n"
    "               fraction of items whose output changed\n"
    "\n"
    "Engine flags (those of `deepinfer generate`; the report's \"engine\" object names what ran):\n"
    DI_CLI_ENGINE_FLAGS_HELP
    "Scoring needs prompt logprobs, which compact prefill (--yoco-compact) does not give: in compact\n"
    "mode perplexity is refused and every scoring item gets the error \"needs_prompt_logprobs\".\n"
    "Scoring sets the engine's max_model_len from its sequences (no --max-model-len).\n"
    "\n"
    "The report is one JSON object on stdout (or --output FILE) naming the configuration; a table\n"
    "goes to stderr. Malformed lines, empty continuations and items longer than the model's context\n"
    "are reported per item (\"error\": name) and the rest is scored. --path engine (default) scores\n"
    "through the engine with prompt logprobs (its batching and chunking as users run it);\n"
    "--path model-forward runs the model's forward with all-position logits (no engine: only\n"
    "--accelerator and --batch-invariant apply). Generation runs the engine. The environment\n"
    "overrides the flags as for every engine ($DEEPINFER_ACCELERATOR, $DEEPINFER_BATCH_INVARIANT,\n"
    "$DEEPINFER_USE_NEXTN_DECODE, ...). See eval/README.md.\n"
    "\n" DI_CLI_MODEL_RULE;

typedef struct eargs {
    const char *model, *output, *text, *tasks, *path;
    const char *engine_flag;  /* an engine flag given that --path model-forward cannot apply */
    deepinfer_engine_config ecfg;
    int window, stride, max_tokens, top_k, constrained, has_seed, compare_compact;
    double temperature, top_p;
    uint64_t seed;
} eargs;

static int parse(int argc, char **argv, const char *cmd, eargs *a) {
    const char *v;
    int gen = !strcmp(cmd, "generate"), score = !gen;
    deepinfer_engine_config_init(&a->ecfg);
    for (int i = 2; i < argc; i++) {
        const char *name = argv[i];
        int e = di_cli_engine_flag(&a->ecfg, argc, argv, &i); /* args/cli_engine_flags.h */
        if (e < 0) return 2;
        if (e) {
            if (strcmp(name, "--accelerator") && strcmp(name, "--batch-invariant") && !a->engine_flag) a->engine_flag = name;
            if (score && !strcmp(name, "--max-model-len")) {
                fprintf(stderr, "error: --max-model-len: eval %s sets the engine's max_model_len from its sequences\n", cmd);
                return 2;
            }
        } else if (di_cli_flag_value(argc, argv, &i, "--model", &v)) a->model = v;
        else if (di_cli_flag_value(argc, argv, &i, "--output", &v)) a->output = v;
        else if (!strcmp(cmd, "perplexity") && di_cli_flag_value(argc, argv, &i, "--text", &v)) a->text = v;
        else if (score && di_cli_flag_value(argc, argv, &i, "--path", &v)) {
            if (!v || (strcmp(v, "engine") && strcmp(v, "model-forward"))) {
                fprintf(stderr, "error: --path must be engine or model-forward, got '%s'\n", v ? v : "");
                return 2;
            }
            a->path = v;
        }
        else if (strcmp(cmd, "perplexity") && di_cli_flag_value(argc, argv, &i, "--tasks", &v)) a->tasks = v;
        else if (score && di_cli_flag_value(argc, argv, &i, "--window", &v)) {
            if (di_cli_parse_int("--window", v, 2, 1 << 30, &a->window)) return 2;
        } else if (score && di_cli_flag_value(argc, argv, &i, "--stride", &v)) {
            if (di_cli_parse_int("--stride", v, 1, 1 << 30, &a->stride)) return 2;
        } else if (gen && di_cli_flag_value(argc, argv, &i, "--max-tokens", &v)) {
            if (di_cli_parse_int("--max-tokens", v, 1, 1 << 20, &a->max_tokens)) return 2;
        } else if (gen && di_cli_flag_value(argc, argv, &i, "--temperature", &v)) {
            if (di_cli_parse_f64("--temperature", v, 0, 100, &a->temperature)) return 2;
        } else if (gen && di_cli_flag_value(argc, argv, &i, "--top-p", &v)) {
            if (di_cli_parse_f64("--top-p", v, 1e-9, 1, &a->top_p)) return 2;
        } else if (gen && di_cli_flag_value(argc, argv, &i, "--top-k", &v)) {
            if (di_cli_parse_int("--top-k", v, 0, 1 << 30, &a->top_k)) return 2;
        } else if (gen && di_cli_flag_value(argc, argv, &i, "--seed", &v)) {
            if (di_cli_parse_u64("--seed", v, UINT64_MAX, &a->seed)) return 2;
            a->has_seed = 1;
        } else if (gen && !strcmp(argv[i], "--constrained")) a->constrained = 1;
        else if (gen && !strcmp(argv[i], "--compare-compact")) a->compare_compact = 1;
        else {
            fprintf(stderr, "error: unknown or incomplete option '%s' for eval %s (see deepinfer eval --help)\n", argv[i], cmd);
            return 2;
        }
    }
    if (!strcmp(cmd, "perplexity") ? !a->text : !a->tasks) {
        fprintf(stderr, "error: eval %s needs %s (see deepinfer eval --help)\n", cmd,
                !strcmp(cmd, "perplexity") ? "--text FILE" : "--tasks FILE.jsonl");
        return 2;
    }
    if (a->path && !strcmp(a->path, "model-forward") && a->engine_flag) {
        fprintf(stderr, "error: %s configures the engine, and --path model-forward runs the model without it "
                        "(use --path engine)\n", a->engine_flag);
        return 2;
    }
    return 0;
}

/* Opening of the report: {"task": ..., "config": {...}, "engine": {...}, "<input_key>": input */
static void head(ev_buf *b, const char *task, const char *accel, int bi, const char *dir, const char *path,
                 const char *extra, const ev_engine_info *engine, const char *input_key, const char *input) {
    ev_printf(b, "{\"task\": \"%s\", ", task);
    ev_config c = {.accelerator = accel, .batch_invariant = bi, .model_dir = dir, .path = path, .extra = extra};
    ev_json_config(b, &c);
    ev_printf(b, ", ");
    ev_engine_json(b, engine);
    ev_printf(b, ", \"%s\": ", input_key);
    ev_json_str(b, input, strlen(input));
}

static int run_scoring(const char *cmd, const eargs *a) {
    ev_model m;
    di_error err = {0};
    ev_buf b = {0}, items = {0};
    int rc = 1;
    if (ev_model_open(a->model, a->ecfg.accelerator, a->ecfg.batch_invariant, &m, &err)) {
        fprintf(stderr, "deepinfer eval %s: %s\n", cmd, err.msg);
        ev_model_close(&m);
        return 1;
    }
    const char *path = a->path ? a->path : "engine";
    if (!strcmp(path, "engine")) ev_model_use_engine(&m, &a->ecfg);
    /* the engine path names what the engine ran; model-forward the model's backend */
#define HEAD(task, key, input)                                                                                \
    head(&b, task, m.accelerator, m.info.opened ? m.info.cfg.batch_invariant : m.batch_invariant, m.dir, path, \
         NULL, &m.info, key, input)
    if (!strcmp(cmd, "perplexity")) {
        char *text = NULL;
        size_t n = 0;
        ev_ppl_result r;
        if (di_read_file(a->text, 0, &text, &n, &err)) {
            fprintf(stderr, "deepinfer eval perplexity: %s\n", err.msg);
        } else if (ev_perplexity(&m, text, n, a->window, a->stride, &r, &err)) {
            fprintf(stderr, "deepinfer eval perplexity: %s\n", err.msg);
            if (ev_model_compact(&m)) { /* a named refusal: the report says so */
                HEAD("perplexity", "text", a->text);
                ev_printf(&b, ", \"error\": \"%s\", \"message\": ", EV_NEEDS_PROMPT_LOGPROBS);
                ev_json_str(&b, EV_NEEDS_PROMPT_LOGPROBS_MSG, strlen(EV_NEEDS_PROMPT_LOGPROBS_MSG));
                ev_printf(&b, "}");
                ev_write_json(&b, a->output);
            }
        } else {
            HEAD("perplexity", "text", a->text);
            ev_printf(&b, ", ");
            ev_ppl_json(&b, &r);
            ev_printf(&b, "}");
            ev_engine_table(stderr, &m.info);
            ev_ppl_table(stderr, &r);
            rc = ev_write_json(&b, a->output) ? 1 : 0;
        }
        free(text);
    } else {
        ev_tasks t;
        ev_ll_summary s;
        if (ev_tasks_read(a->tasks, &t, &err) || ev_score_tasks(&m, &t, a->window, a->stride, &items, &s, &err)) {
            fprintf(stderr, "deepinfer eval loglikelihood: %s\n", err.msg);
        } else {
            HEAD("loglikelihood", "tasks", a->tasks);
            ev_printf(&b, ", ");
            ev_ll_summary_json(&b, &s);
            ev_printf(&b, ", \"items\": [\n  %s]}", items.p ? items.p : "");
            ev_engine_table(stderr, &m.info);
            ev_ll_summary_table(stderr, &s);
            rc = ev_write_json(&b, a->output) ? 1 : 0;
        }
        ev_tasks_free(&t);
    }
#undef HEAD
    ev_buf_free(&b), ev_buf_free(&items);
    ev_model_close(&m);
    return rc;
}

static int run_generate(const eargs *a) {
    di_error err = {0};
    di_model_location loc;
    if (di_cli_locate_model(a->model, &loc, &err)) {
        fprintf(stderr, "deepinfer eval generate: %s\n", err.msg);
        return 1;
    }
    ev_tasks t;
    ev_gen_summary s, sc;
    ev_gen_compare cmp;
    ev_buf b = {0}, items = {0};
    ev_gen_opts o = {.model = loc.dir, .engine = &a->ecfg, .max_tokens = a->max_tokens ? a->max_tokens : 256,
                     .temperature = (float)a->temperature, .top_p = a->top_p > 0 ? (float)a->top_p : 1.0f,
                     .top_k = a->top_k, .has_seed = a->has_seed, .seed = a->seed, .constrained = a->constrained};
    int rc = 1;
    if (ev_tasks_read(a->tasks, &t, &err) ||
        (a->compare_compact ? ev_generate_compare(&t, &o, &items, &s, &sc, &cmp, &err)
                            : ev_generate_tasks(&t, &o, &items, &s, &err))) {
        fprintf(stderr, "deepinfer eval generate: %s\n", err.msg);
    } else {
        char extra[192];
        snprintf(extra, sizeof extra, "\"temperature\": %g, \"max_tokens\": %d, \"constrained\": %s, \"compare_compact\": %s",
                 o.temperature, o.max_tokens, o.constrained ? "true" : "false", a->compare_compact ? "true" : "false");
        head(&b, "generate", s.accelerator[0] ? s.accelerator : "none (no generation items)", s.batch_invariant, loc.dir,
             "engine", extra, &s.engine, "tasks", a->tasks);
        ev_printf(&b, ", ");
        ev_gen_summary_json(&b, &s);
        if (a->compare_compact) {
            ev_printf(&b, ", \"compact\": {");
            ev_engine_json(&b, &sc.engine);
            ev_printf(&b, ", ");
            ev_gen_summary_json(&b, &sc);
            ev_printf(&b, "}, ");
            ev_gen_compare_json(&b, &cmp);
        }
        ev_printf(&b, ", \"items\": [\n  %s]}", items.p ? items.p : "");
        if (a->compare_compact) {
            fprintf(stderr, "exact   ");
            ev_engine_table(stderr, &s.engine);
            fprintf(stderr, "compact ");
            ev_engine_table(stderr, &sc.engine);
            ev_gen_compare_table(stderr, &s, &sc, &cmp);
        } else {
            ev_gen_summary_table(stderr, &s);
        }
        rc = ev_write_json(&b, a->output) ? 1 : 0;
    }
    ev_tasks_free(&t);
    ev_buf_free(&b), ev_buf_free(&items);
    return rc;
}

static int cmd_eval(int argc, char **argv) {
    if (argc < 2 || di_cli_wants_help(argc, argv)) {
        fputs(USAGE, argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    const char *cmd = argv[1];
    if (strcmp(cmd, "perplexity") && strcmp(cmd, "loglikelihood") && strcmp(cmd, "generate")) {
        fprintf(stderr, "error: unknown eval task '%s': perplexity, loglikelihood or generate (see deepinfer eval --help)\n", cmd);
        return 2;
    }
    eargs a = {0};
    int rc = parse(argc, argv, cmd, &a);
    if (rc) return rc;
    return !strcmp(cmd, "generate") ? run_generate(&a) : run_scoring(cmd, &a);
}

DI_CLI_COMMAND(eval, "evaluate a model: perplexity, loglikelihood / multiple choice, generation tasks (eval/README.md)",
               cmd_eval)
