/* `deepinfer generate`: offline batch generation through the engine
 * (include/deepinfer.h), with a progress bar and a throughput summary. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "deepinfer.h"
#include "gen_io.h"

static const char USAGE[] =
    "usage: deepinfer generate [--model DIR|ORG/NAME] (--prompt TEXT ... | --prompt-ids 1,2,3 | --prompts FILE.jsonl)\n"
    "                          [sampling flags] [engine flags] [--output FILE.jsonl]\n"
    "\n"
    "Runs every prompt through the engine together (continuous batching) and prints\n"
    "the completions, or writes them as JSON lines with --output. Prints the memory\n"
    "plan first, a progress bar on a terminal, and a summary at the end (stderr).\n"
    "\n"
    "Model: --model DIR or ORG/NAME[@REV]; else $DEEPINFER_HF_MODEL_DIR; else the\n"
    "embedded demo model models/deepinfer-demo-v41 (next to the executable's tree,\n"
    "or the source tree it was built from).\n"
    "\n"
    "Prompts:\n"
    "  --prompt TEXT            a text prompt (repeatable); with --chat, a user message\n"
    "  --prompt-ids 1,2,3       a prompt of token ids (repeatable)\n"
    "  --prompts FILE.jsonl     one request per line: a JSON string, or {\"prompt\": ...} |\n"
    "                           {\"prompt_token_ids\": [...]} | {\"messages\": [...]}, with an\n"
    "                           optional \"sampling_params\": {...} overriding the flags\n"
    "  --chat                   render --prompt as [{\"role\": \"user\", ...}] with the model's chat encoding\n"
    "  --thinking               chat prompts in thinking mode\n"
    "  --no-bos                 text prompts: do not put the BOS token in front (added by default)\n"
    "\nStructured outputs (so_args; per request in JSONL: \"sampling_params\": {\"so_args\": {...}}):\n"
    "  --so-json SCHEMA         constrain to a JSON Schema (draft 2020-12 / 07), given as JSON text\n"
    "  --so-regex RE            constrain to a regular expression (full match)\n"
    "  --so-ebnf GRAMMAR        constrain to a GBNF grammar (root ::= ...)\n"
    "  --so-whitespace-max N    JSON: whitespace bytes allowed between tokens (default 20, 0 = compact)\n"
    "  --so-after-think         start constraining after </think> (thinking mode)\n"
    "  --reasoning-effort X     chat prompts: low | high | max | 1..100 (V4.1)\n"
    "\n"
    "Sampling (per request, like vLLM's SamplingParams):\n"
    "  --temperature T (1)  --top-k K (0 = off)  --top-p P (1)  --min-p P (0)\n"
    "  --repetition-penalty R (1)  --presence-penalty P (0)  --frequency-penalty F (0)\n"
    "  --max-tokens N (16)  --min-tokens N (0)  --n N (1)  --seed S  --ignore-eos\n"
    "  --logprobs K (top-K logprobs per token, 0..20)  --stop STR (repeatable)\n"
    "  --stop-token-ids 1,2  --keep-special-tokens (special tokens in the text)\n"
    "\n"
    "Engine:\n"
    "  --tokenizer PATH  --accelerator auto|cpu|cuda  --memory-budget BYTES[K|M|G]\n"
    "  --max-num-seqs N (64)  --max-num-batched-tokens N (2048)  --chunk-size N (512)\n"
    "  --max-model-len N  --page-rows N (64)  --num-pages N  --async-scheduling 0|1\n"
    "  --batch-invariant 0|1 (1; 0: the fastest CUDA kernels, a row's bits then depend on the batch)\n"
    "  --engram-hash FILE  V4.1 Engram hash constants (engram_hash.json or a golden manifest)\n"
    "Accelerator cuda: build/deepinfer-cuda (`make cuda`) on a GPU; auto picks it there, else the CPU.\n"
    "Environment: $DEEPINFER_ACCELERATOR, $DEEPINFER_BATCH_INVARIANT, $DEEPINFER_HF_MODEL_DIR,\n"
    "$DEEPINFER_THREADS.\n"
    "\n"
    "Output:\n"
    "  --output FILE.jsonl      one JSON line per request, in input order (text, token ids,\n"
    "                           logprobs, finish reason, metrics); '-' = standard output\n"
    "  --quiet                  no plan, progress or summary\n"
    "\n"
    "Summary: requests, prefill tok/s (prompt tokens / wall time), decode tok/s (output\n"
    "tokens / wall time), TTFT and TPOT p50/p99, preemptions. Exit status 0 when every\n"
    "request succeeded, 1 when some failed (each failure is reported), 2 on bad usage.\n";

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static int parse_ids(const char *s, int32_t *out, int max) {
    int n = 0;
    while (*s) {
        char *end;
        long v = strtol(s, &end, 10);
        if (end == s || n >= max) return -1;
        out[n++] = (int32_t)v;
        s = *end == ',' ? end + 1 : end;
        if (*end && *end != ',') return -1;
    }
    return n;
}

static int parse_bytes(const char *s, uint64_t *out) {
    char *end;
    double v = strtod(s, &end);
    double mul = 1;
    if (*end == 'K' || *end == 'k') mul = 1024.0, end++;
    else if (*end == 'M' || *end == 'm') mul = 1048576.0, end++;
    else if (*end == 'G' || *end == 'g') mul = 1073741824.0, end++;
    if (*end == 'i') end++;
    if (*end == 'B') end++;
    if (*end || !(v >= 0)) return -1;
    *out = (uint64_t)(v * mul);
    return 0;
}

typedef struct cli_state {
    deepinfer_engine_config cfg;
    deepinfer_sampling_params sp;
    gen_request *reqs;
    size_t n, cap;
    const char *prompts_file, *output;
    int chat, quiet;
    const char *effort;
    int thinking;
    int no_bos;
} cli_state;

static gen_request *push(cli_state *c) {
    if (c->n == c->cap) {
        size_t cap = c->cap ? c->cap * 2 : 8;
        gen_request *r = realloc(c->reqs, cap * sizeof *r);
        if (!r) return NULL;
        c->reqs = r;
        c->cap = cap;
    }
    gen_request *r = &c->reqs[c->n++];
    memset(r, 0, sizeof *r);
    return r;
}

/* One flag; returns 1 if consumed, 0 if unknown, -1 on a bad value. */
static int flag(cli_state *c, int argc, char **argv, int *i) {
    const char *v = NULL;
    deepinfer_sampling_params *p = &c->sp;
#define F(name) di_cli_flag_value(argc, argv, i, name, &v)
#define NEED                                                                                    \
    do {                                                                                        \
        if (!v) return -1;                                                                      \
    } while (0)
    if (F("--model")) { NEED; c->cfg.model = v; }
    else if (F("--tokenizer")) { NEED; c->cfg.tokenizer = v; }
    else if (F("--accelerator")) { NEED; c->cfg.accelerator = v; }
    else if (F("--memory-budget")) { NEED; if (parse_bytes(v, &c->cfg.memory_budget)) return -1; }
    else if (F("--max-num-seqs")) { NEED; c->cfg.max_num_seqs = atoi(v); }
    else if (F("--max-num-batched-tokens")) { NEED; c->cfg.max_num_batched_tokens = atoi(v); }
    else if (F("--chunk-size")) { NEED; c->cfg.chunk_size = atoi(v); }
    else if (F("--max-model-len")) { NEED; c->cfg.max_model_len = atoll(v); }
    else if (F("--page-rows")) { NEED; c->cfg.page_rows = atoi(v); }
    else if (F("--num-pages")) { NEED; c->cfg.num_pages = atoll(v); }
    else if (F("--engram-hash")) { NEED; c->cfg.engram_hash = v; }
    else if (F("--async-scheduling")) { NEED; c->cfg.async_scheduling = atoi(v); }
    else if (F("--batch-invariant")) { NEED; c->cfg.batch_invariant = atoi(v); }
    else if (F("--prompt")) {
        NEED;
        gen_request *r = push(c);
        if (!r) return -1;
        r->text = strdup(v);
        r->prompt.text = r->text;
    } else if (F("--prompt-ids")) {
        NEED;
        gen_request *r = push(c);
        size_t max = strlen(v) / 2 + 2;
        if (!r || !(r->ids = malloc(sizeof(int32_t) * max))) return -1;
        int n = parse_ids(v, r->ids, (int)max);
        if (n < 0) return -1;
        r->prompt.token_ids = r->ids;
        r->prompt.n_token_ids = (size_t)n;
    } else if (F("--prompts")) { NEED; c->prompts_file = v; }
    else if (F("--output")) { NEED; c->output = v; }
    else if (F("--reasoning-effort")) { NEED; c->effort = v; }
    else if (F("--temperature")) { NEED; p->temperature = (float)atof(v); }
    else if (F("--top-k")) { NEED; p->top_k = atoi(v); }
    else if (F("--top-p")) { NEED; p->top_p = (float)atof(v); }
    else if (F("--min-p")) { NEED; p->min_p = (float)atof(v); }
    else if (F("--repetition-penalty")) { NEED; p->repetition_penalty = (float)atof(v); }
    else if (F("--presence-penalty")) { NEED; p->presence_penalty = (float)atof(v); }
    else if (F("--frequency-penalty")) { NEED; p->frequency_penalty = (float)atof(v); }
    else if (F("--max-tokens")) { NEED; p->max_tokens = atoi(v); }
    else if (F("--min-tokens")) { NEED; p->min_tokens = atoi(v); }
    else if (F("--n")) { NEED; p->n = atoi(v); }
    else if (F("--seed")) { NEED; p->has_seed = 1, p->seed = strtoull(v, NULL, 10); }
    else if (F("--logprobs")) { NEED; p->logprobs = atoi(v); }
    else if (F("--stop")) {
        NEED;
        if (p->n_stop >= DEEPINFER_MAX_STOP_STRINGS) return -1;
        p->stop[p->n_stop++] = v;
    } else if (F("--stop-token-ids")) {
        NEED;
        int n = parse_ids(v, p->stop_ids, DEEPINFER_MAX_STOP_IDS);
        if (n < 0) return -1;
        p->n_stop_ids = n;
    } else if (F("--so-json") || F("--so-regex") || F("--so-ebnf")) {
        NEED; /* structured outputs: the schema / regex / grammar text (argv outlives the run) */
        p->so_schema_type = argv[*i - 1] + 5; /* "json", "regex" or "ebnf" */
        p->so_schema = v;
    } else if (F("--so-whitespace-max")) { NEED; p->so_whitespace_max = atoi(v); }
    else if (!strcmp(argv[*i], "--so-after-think")) p->so_after_think = 1;
    else if (!strcmp(argv[*i], "--ignore-eos")) p->ignore_eos = 1;
    else if (!strcmp(argv[*i], "--keep-special-tokens")) p->skip_special_tokens = 0;
    else if (!strcmp(argv[*i], "--chat")) c->chat = 1;
    else if (!strcmp(argv[*i], "--thinking")) c->thinking = 1;
    else if (!strcmp(argv[*i], "--no-bos")) c->no_bos = 1;
    else if (!strcmp(argv[*i], "--quiet")) c->quiet = 1;
    else return 0;
    return 1;
#undef F
#undef NEED
}

/* --chat: wrap each text prompt as one user message. */
static int make_chat(gen_request *r) {
    size_t n = strlen(r->text);
    char *m = malloc(n * 6 + 64), *w = m;
    if (!m) return -1;
    w += sprintf(w, "[{\"role\": \"user\", \"content\": \"");
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)r->text[i];
        if (ch == '"' || ch == '\\') *w++ = '\\', *w++ = (char)ch;
        else if (ch < 0x20) w += sprintf(w, "\\u%04x", ch);
        else *w++ = (char)ch;
    }
    strcpy(w, "\"}]");
    free(r->text);
    r->text = m;
    r->prompt.text = NULL;
    r->prompt.messages = m;
    return 0;
}

static int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double pct(double *v, size_t n, double p) {
    if (!n) return 0;
    size_t k = (size_t)ceil(p * (double)n);
    return v[k ? k - 1 : 0];
}

/* ETA: the output tokens still allowed (max_tokens x n of unfinished
 * requests, minus what they produced) at the rate so far — an upper bound. */
static void progress(size_t done, size_t total, long long tokens, long long budget, double t0, int final) {
    double el = now_s() - t0, tps = el > 0 ? (double)tokens / el : 0;
    double eta = tps > 0 ? (double)(budget - tokens) / tps : 0;
    int w = 30, fill = total ? (int)((double)done / (double)total * w) : w;
    fprintf(stderr, "\r[%.*s%*s] %zu/%zu requests | %.1f tok/s | %s %.0fs   ", fill, "##############################",
            w - fill, "", done, total, tps, final ? "elapsed" : "ETA", final ? el : eta);
    if (final) fputc('\n', stderr);
}

static void summary(deepinfer_request_output **outs, size_t n, size_t failed, double wall, const deepinfer_engine *e) {
    double *ttft = calloc(n + 1, sizeof *ttft), *tpot = calloc(n + 1, sizeof *tpot);
    size_t nt = 0, np = 0;
    long long in = 0, out = 0;
    for (size_t i = 0; i < n; i++) {
        if (!outs[i] || outs[i]->status) continue;
        in += (long long)outs[i]->metrics.prompt_tokens;
        out += (long long)outs[i]->metrics.output_tokens;
        if (ttft) ttft[nt++] = outs[i]->metrics.ttft_s;
        if (tpot && outs[i]->metrics.tpot_s > 0) tpot[np++] = outs[i]->metrics.tpot_s;
    }
    if (ttft) qsort(ttft, nt, sizeof *ttft, cmp_d);
    if (tpot) qsort(tpot, np, sizeof *tpot, cmp_d);
    deepinfer_engine_stats st;
    deepinfer_engine_get_stats(e, &st);
    fprintf(stderr,
            "requests     %zu (%zu failed) in %.2f s, %lld steps\n"
            "prefill      %lld prompt tokens, %.1f tok/s (%lld rows run incl. recompute)\n"
            "decode       %lld output tokens, %.1f tok/s\n"
            "TTFT         p50 %.1f ms, p99 %.1f ms\n"
            "TPOT         p50 %.2f ms, p99 %.2f ms\n"
            "state        %lld preemptions, peak %lld of %lld pages\n",
            n, failed, wall, (long long)st.steps, in, wall > 0 ? (double)in / wall : 0, (long long)st.prefill_rows, out,
            wall > 0 ? (double)out / wall : 0, ttft ? pct(ttft, nt, 0.5) * 1e3 : 0, ttft ? pct(ttft, nt, 0.99) * 1e3 : 0,
            tpot ? pct(tpot, np, 0.5) * 1e3 : 0, tpot ? pct(tpot, np, 0.99) * 1e3 : 0, (long long)st.preemptions,
            (long long)st.pages_peak, (long long)st.num_pages);
    free(ttft);
    free(tpot);
}

static void print_text(FILE *f, size_t i, size_t n, const deepinfer_request_output *o) {
    for (size_t j = 0; j < o->n_choices; j++) {
        const deepinfer_completion *c = &o->choices[j];
        if (n > 1 || o->n_choices > 1) fprintf(f, "--- request %zu, choice %zu (%s) ---\n", i, j, deepinfer_finish_reason_name(c->finish_reason));
        if (c->text_len || c->n_tokens == 0) fwrite(c->text, 1, c->text_len, f);
        else /* no tokenizer: the ids */
            for (size_t t = 0; t < c->n_tokens; t++) fprintf(f, "%s%d", t ? " " : "", c->token_ids[t]);
        fputc('\n', f);
    }
}

/* Add every request, step to the end, collect outputs in input order. */
static int run(cli_state *c, deepinfer_engine *e, deepinfer_request_output **outs, double *wall) {
    size_t n = c->n, done = 0, failed = 0;
    uint64_t *ids = calloc(n ? n : 1, sizeof *ids);
    size_t *by_id = calloc(n ? n : 1, sizeof *by_id), n_q = 0; /* queued inputs in id order */
    char *queued = calloc(n ? n : 1, 1);
    if (!ids || !queued || !by_id) return -1;
    int tty = !c->quiet && isatty(2);
    double t0 = now_s(), last = 0;
    for (size_t i = 0; i < n; i++) {
        gen_request *r = &c->reqs[i];
        if (r->error[0]) {
            fprintf(stderr, "request %zu: %s\n", i, r->error);
            failed++;
            continue;
        }
        if (deepinfer_add_request(e, &r->prompt, &r->params, &ids[i])) {
            snprintf(r->error, sizeof r->error, "%s", deepinfer_engine_last_error(e));
            fprintf(stderr, "request %zu: %s\n", i, r->error);
            failed++;
            continue;
        }
        by_id[n_q++] = i;
        queued[i] = 1;
    }
    done = failed;
    long long tokens = 0, budget = 0;
    for (size_t i = 0; i < n; i++)
        if (queued[i]) budget += (long long)c->reqs[i].params.max_tokens * c->reqs[i].params.n;
    while (deepinfer_has_unfinished(e)) {
        if (deepinfer_step(e, NULL)) {
            fprintf(stderr, "deepinfer generate: %s\n", deepinfer_engine_last_error(e));
            return -1;
        }
        const deepinfer_request_output *const *up;
        size_t nu;
        deepinfer_read_outputs(e, &up, &nu);
        for (size_t k = 0; k < nu; k++) {
            for (size_t j = 0; j < up[k]->n_choices; j++) {
                const deepinfer_completion *ch = &up[k]->choices[j];
                tokens += (long long)(ch->n_tokens - ch->n_prev_tokens);
            }
            if (up[k]->finished) { /* stopped early: its unused tokens leave the budget */
                size_t lo = 0, hi = n_q; /* request ids increase in input order: bisect */
                while (hi - lo > 1) {
                    size_t mid = (lo + hi) / 2;
                    if (ids[by_id[mid]] <= up[k]->request_id) lo = mid;
                    else hi = mid;
                }
                if (n_q && ids[by_id[lo]] == up[k]->request_id) {
                    const gen_request *g = &c->reqs[by_id[lo]];
                    budget -= (long long)g->params.max_tokens * g->params.n - up[k]->metrics.output_tokens;
                }
                done++;
            }
        }
        if (tty && now_s() - last > 0.1) progress(done, n, tokens, budget, t0, 0), last = now_s();
    }
    *wall = now_s() - t0;
    if (tty) progress(n, n, tokens, budget, t0, 1);
    for (size_t i = 0; i < n; i++) {
        if (!queued[i] || deepinfer_take_output(e, ids[i], &outs[i])) continue;
        if (outs[i]->status) fprintf(stderr, "request %zu: %s\n", i, outs[i]->error), failed++;
    }
    free(ids);
    free(by_id);
    free(queued);
    return (int)failed;
}

static int cmd_generate(int argc, char **argv) {
    if (di_cli_wants_help(argc, argv)) {
        fputs(USAGE, stdout);
        return 0;
    }
    cli_state c;
    memset(&c, 0, sizeof c);
    deepinfer_engine_config_init(&c.cfg);
    deepinfer_sampling_params_init(&c.sp);
    for (int i = 1; i < argc; i++) {
        int r = flag(&c, argc, argv, &i);
        if (r == 1) continue;
        fprintf(stderr, r ? "error: bad value for %s (see deepinfer generate --help)\n"
                          : "error: unknown option '%s' (see deepinfer generate --help)\n",
                argv[i]);
        gen_requests_free(c.reqs, c.n);
        return 2;
    }
    for (size_t i = 0; i < c.n; i++) {
        c.reqs[i].params = c.sp;
        if (c.chat && c.reqs[i].text && make_chat(&c.reqs[i])) return 2;
    }
    if (c.prompts_file) {
        gen_request *more = NULL;
        size_t nm = 0;
        char err[1024];
        if (gen_read_jsonl(c.prompts_file, &c.sp, &more, &nm, err, sizeof err)) {
            fprintf(stderr, "deepinfer generate: %s\n", err);
            return 2;
        }
        for (size_t i = 0; i < nm; i++) {
            gen_request *r = push(&c);
            if (!r) return 2;
            *r = more[i];
        }
        free(more);
    }
    if (!c.n) {
        fprintf(stderr, "error: no prompt (give --prompt, --prompt-ids or --prompts; see --help)\n");
        return 2;
    }
    for (size_t i = 0; i < c.n; i++) {
        c.reqs[i].prompt.thinking = c.thinking;
        c.reqs[i].prompt.no_bos = c.no_bos;
        c.reqs[i].prompt.reasoning_effort = c.effort;
    }
    char msg[2048];
    deepinfer_engine *e = NULL;
    if (deepinfer_engine_open(&c.cfg, &e, msg, sizeof msg)) {
        fprintf(stderr, "deepinfer generate: %s\n", msg);
        gen_requests_free(c.reqs, c.n);
        return 1;
    }
    if (!c.quiet) fputs(deepinfer_engine_plan_text(e), stderr);
    deepinfer_request_output **outs = calloc(c.n, sizeof *outs);
    double wall = 0;
    int failed = outs ? run(&c, e, outs, &wall) : -1;
    if (failed >= 0) {
        FILE *f = stdout;
        if (c.output && strcmp(c.output, "-") && !(f = fopen(c.output, "w"))) {
            fprintf(stderr, "deepinfer generate: cannot write %s\n", c.output);
            failed = -1;
        }
        for (size_t i = 0; f && failed >= 0 && i < c.n; i++) {
            deepinfer_request_output bad = {.request_id = (uint64_t)-1, .status = DEEPINFER_ERR_INVALID_ARGUMENT,
                                            .error = c.reqs[i].error, .finished = 1};
            const deepinfer_request_output *o = outs[i] ? outs[i] : &bad;
            if (c.output) gen_write_output(f, i, o);
            else if (!o->status) print_text(f, i, c.n, o);
        }
        if (f && f != stdout) fclose(f);
        if (failed >= 0 && !c.quiet) summary(outs, c.n, (size_t)failed, wall, e);
    }
    for (size_t i = 0; outs && i < c.n; i++) deepinfer_output_free(outs[i]);
    free(outs);
    deepinfer_engine_close(e);
    gen_requests_free(c.reqs, c.n);
    return failed < 0 ? 1 : failed > 0;
}

DI_CLI_COMMAND(generate, "generate completions for prompts through the engine (offline batch)", cmd_generate)
