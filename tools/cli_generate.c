/* `deepinfer generate`: offline batch generation through the engine
 * (include/deepinfer.h), with a progress bar and a throughput summary. */
#include <float.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "args/cli_args.h"
#include "args/cli_model_dir.h"
#include "args/cli_parallel.h"
#include "cli.h"
#include "deepinfer.h"
#include "gen_io.h"
#include "spec_report.h"
#include "gen_sink.h"

static const char USAGE[] =
    "usage: deepinfer generate [--model DIR|ORG/NAME] (--prompt TEXT ... | --prompt-ids 1,2,3 | --prompts FILE.jsonl)\n"
    "                          [sampling flags] [engine flags] [--output FILE.jsonl]\n"
    "\n"
    "Runs every prompt through the engine together (continuous batching) and prints\n"
    "the completions, or writes them as JSON lines with --output. Prints the memory\n"
    "plan first, a progress bar on a terminal, and a summary at the end (stderr).\n"
    "\n"
    DI_CLI_MODEL_RULE
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
    "  --yoco-compact  V4.1: the layers after the last KV source prefill only each prompt's tail\n"
    "  --yoco-keep-tokens N (140)  that tail (>= sliding window + longest draft)\n"
    "  --mtp-varlen 0|1  speculative decoding with confidence-scheduled draft lengths (the drafter:\n"
    "                    V4.1 DSpark, V4 MTP; outputs are identical with it on or off)\n"
    "  --nextn-decode N  the longest draft (default: the DSpark block with --mtp-varlen 1; 0 = off;\n"
    "                    N alone: fixed-length drafts of N)\n"
    "  --max-model-len N  --page-rows N (64)  --num-pages N  --async-scheduling 0|1\n"
    "  --batch-invariant 0|1 (1; 0: the fastest CUDA kernels, a row's bits then depend on the batch)\n"
    "  --engram-hash FILE  V4.1 Engram hash constants (engram_hash.json or a golden manifest)\n"
    DI_CLI_PARALLEL_USAGE
    "Accelerator cuda: build/deepinfer-cuda (`make cuda`) on a GPU; auto picks it there, else the CPU.\n"
    "Environment: $DEEPINFER_ACCELERATOR, $DEEPINFER_BATCH_INVARIANT, $DEEPINFER_HF_MODEL_DIR,\n"
    "$DEEPINFER_THREADS, $DEEPINFER_ENABLE_MTP_VARLEN, $DEEPINFER_USE_NEXTN_DECODE.\n"
    "\n"
    "Output (each request is written and flushed the moment it finishes, so the order is the\n"
    "order of finishing, not of the input; every record names its input position):\n"
    "  --output FILE.jsonl      one JSON line per request, with \"index\" = its 0-based position\n"
    "                           among the prompts (--prompt / --prompt-ids in order, then the\n"
    "                           --prompts lines), text, token ids, logprobs, finish reason,\n"
    "                           metrics; '-' = standard output. Opened (created or truncated)\n"
    "                           before the model loads: a path that cannot be written fails first\n"
    "  (no --output)            the completion text on standard output; with several requests\n"
    "                           or choices each is headed \"--- request I, choice J (reason) ---\"\n"
    "  --quiet                  no plan, progress or summary\n"
    "\n"
    "Numbers are checked strictly: a value that is not wholly a number in the flag's range\n"
    "(\"12x\", \"-1\" for --seed, 0 for --max-num-seqs, an overflow) is refused, naming the flag.\n"
    "A text prompt holding a NUL character (\\u0000 in JSONL) is refused (naming the line);\n"
    "other control characters are kept; \"messages\" keep NULs too.\n"
    "\n"
    "Summary: requests, prefill tok/s (prompt tokens / wall time), decode tok/s (output\n"
    "tokens / wall time), TTFT and TPOT p50/p99, preemptions.\n"
    "\n"
    "SIGINT / SIGTERM: the run stops after the current step; every request that finished\n"
    "is already written, the ones in flight are aborted and not written, and a line on\n"
    "stderr says how many were left unfinished (a second signal ends the process at once).\n"
    "\n"
    "Exit status: 0 every request succeeded; 1 some failed (each failure is reported and\n"
    "has its JSONL line), or the model could not be loaded, or writing the output failed\n"
    "(the message names the file and the reason); 2 bad usage; 130 stopped by SIGINT,\n"
    "143 by SIGTERM.\n";

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
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

/* One flag; returns 1 if consumed, 0 if unknown, -1 on a bad value (the
 * message, naming the flag, is printed by the cli_args.h helpers). Numeric
 * values are strict: the whole text in range, else refused. Ranges are the
 * engine's where it has one; settings whose 0 means "the default" in
 * deepinfer_engine_config start at 1 (leave the flag out for the default). */
static int flag(cli_state *c, int argc, char **argv, int *i) {
    const char *v = NULL;
    deepinfer_sampling_params *p = &c->sp;
    const char *name = argv[*i];
#define F(f) di_cli_flag_value(argc, argv, i, f, &v)
#define NEED                                                                                    \
    do {                                                                                        \
        if (!v) return -1;                                                                      \
    } while (0)
#define INT(dst, lo, hi) return di_cli_parse_int(name, v, lo, hi, &(dst)) ? -1 : 1
#define I64(dst, lo, hi) return di_cli_parse_i64(name, v, lo, hi, &(dst)) ? -1 : 1
#define FLT(dst, lo, hi) return di_cli_parse_float(name, v, lo, hi, &(dst)) ? -1 : 1
    int par = di_cli_parallel_flag(argc, argv, i, &c->cfg);
    if (par) return par;
    if (F("--model")) { NEED; c->cfg.model = v; }
    else if (F("--tokenizer")) { NEED; c->cfg.tokenizer = v; }
    else if (F("--accelerator")) { NEED; c->cfg.accelerator = v; }
    else if (F("--memory-budget")) { NEED; return di_cli_parse_bytes(name, v, &c->cfg.memory_budget) ? -1 : 1; }
    else if (F("--max-num-seqs")) { NEED; INT(c->cfg.max_num_seqs, 1, 16384); }
    else if (F("--max-num-batched-tokens")) { NEED; INT(c->cfg.max_num_batched_tokens, 1, 1 << 20); }
    else if (F("--chunk-size")) { NEED; INT(c->cfg.chunk_size, 1, 1 << 20); }
    else if (!strcmp(name, "--yoco-compact")) { c->cfg.yoco_compact = 1; return 1; }
    else if (F("--yoco-keep-tokens")) { NEED; I64(c->cfg.yoco_keep_tokens, 1, INT64_MAX); }
    else if (F("--mtp-varlen")) { NEED; INT(c->cfg.mtp_varlen, 0, 1); }
    else if (F("--nextn-decode")) { NEED; INT(c->cfg.nextn_decode, 0, DEEPINFER_MAX_DRAFT); }
    else if (F("--max-model-len")) { NEED; I64(c->cfg.max_model_len, 1, INT64_MAX); }
    else if (F("--page-rows")) { NEED; INT(c->cfg.page_rows, 1, 65536); }
    else if (F("--num-pages")) { NEED; I64(c->cfg.num_pages, 1, INT64_MAX); }
    else if (F("--engram-hash")) { NEED; c->cfg.engram_hash = v; }
    else if (F("--async-scheduling")) { NEED; INT(c->cfg.async_scheduling, 0, 1); }
    else if (F("--batch-invariant")) { NEED; INT(c->cfg.batch_invariant, 0, 1); }
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
        int n = 0;
        if (di_cli_parse_i32_list(name, v, 0, INT32_MAX, r->ids, (int)max, &n)) return -1;
        r->prompt.token_ids = r->ids;
        r->prompt.n_token_ids = (size_t)n;
    } else if (F("--prompts")) { NEED; c->prompts_file = v; }
    else if (F("--output")) { NEED; c->output = v; }
    else if (F("--reasoning-effort")) { NEED; c->effort = v; }
    else if (F("--temperature")) { NEED; FLT(p->temperature, 0, FLT_MAX); }
    else if (F("--top-k")) { NEED; INT(p->top_k, -1, INT32_MAX); }
    else if (F("--top-p")) { NEED; FLT(p->top_p, FLT_MIN, 1); }
    else if (F("--min-p")) { NEED; FLT(p->min_p, 0, 1); }
    else if (F("--repetition-penalty")) { NEED; FLT(p->repetition_penalty, FLT_MIN, FLT_MAX); }
    else if (F("--presence-penalty")) { NEED; FLT(p->presence_penalty, -2, 2); }
    else if (F("--frequency-penalty")) { NEED; FLT(p->frequency_penalty, -2, 2); }
    else if (F("--max-tokens")) { NEED; INT(p->max_tokens, 1, INT32_MAX); }
    else if (F("--min-tokens")) { NEED; INT(p->min_tokens, 0, INT32_MAX); }
    else if (F("--n")) { NEED; INT(p->n, 1, 1024); }
    else if (F("--seed")) {
        NEED;
        if (di_cli_parse_u64(name, v, UINT64_MAX, &p->seed)) return -1;
        p->has_seed = 1;
    } else if (F("--logprobs")) { NEED; INT(p->logprobs, 0, 20); }
    else if (F("--stop")) {
        NEED;
        if (p->n_stop >= DEEPINFER_MAX_STOP_STRINGS) {
            fprintf(stderr, "error: --stop: at most %d stop strings\n", DEEPINFER_MAX_STOP_STRINGS);
            return -1;
        }
        p->stop[p->n_stop++] = v;
    } else if (F("--stop-token-ids")) {
        NEED;
        int n = 0;
        if (di_cli_parse_i32_list(name, v, 0, INT32_MAX, p->stop_ids, DEEPINFER_MAX_STOP_IDS, &n)) return -1;
        p->n_stop_ids = n;
    } else if (F("--so-json") || F("--so-regex") || F("--so-ebnf")) {
        NEED; /* structured outputs: the schema / regex / grammar text (argv outlives the run) */
        p->so_schema_type = argv[*i - 1] + 5; /* "json", "regex" or "ebnf" */
        p->so_schema = v;
    } else if (F("--so-whitespace-max")) { NEED; INT(p->so_whitespace_max, 0, INT32_MAX); }
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
#undef INT
#undef I64
#undef FLT
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

/* The figures of one finished request the summary needs (the outputs
 * themselves are written and freed as they finish). */
typedef struct req_metrics {
    int ok;
    deepinfer_request_metrics m;
} req_metrics;

static void summary(const req_metrics *rm, size_t n, size_t failed, double wall, const deepinfer_engine *e) {
    double *ttft = calloc(n + 1, sizeof *ttft), *tpot = calloc(n + 1, sizeof *tpot);
    size_t nt = 0, np = 0;
    long long in = 0, out = 0;
    for (size_t i = 0; i < n; i++) {
        if (!rm[i].ok) continue;
        in += (long long)rm[i].m.prompt_tokens;
        out += (long long)rm[i].m.output_tokens;
        if (ttft) ttft[nt++] = rm[i].m.ttft_s;
        if (tpot && rm[i].m.tpot_s > 0) tpot[np++] = rm[i].m.tpot_s;
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
    di_specdec_report(stderr, "", &st);
    free(ttft);
    free(tpot);
}

/* SIGINT / SIGTERM: the handler only records the signal; the run loop looks
 * at it between steps, aborts what is in flight and keeps what finished.
 * SA_RESETHAND: a second signal ends the process at once. SA_RESTART: a
 * write to a pipe or terminal the signal interrupts resumes (no EINTR). */
static volatile sig_atomic_t g_signal;

static void on_signal(int sig) { g_signal = sig; }

static void catch_signals(void) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sa.sa_flags = SA_RESETHAND | SA_RESTART;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
}

/* Request ids increase in input order: the input index of `id` by bisection
 * over the queued inputs (by_id), or -1. */
static long index_of(const uint64_t *ids, const size_t *by_id, size_t n_q, uint64_t id) {
    size_t lo = 0, hi = n_q;
    while (hi - lo > 1) {
        size_t mid = (lo + hi) / 2;
        if (ids[by_id[mid]] <= id) lo = mid;
        else hi = mid;
    }
    return n_q && ids[by_id[lo]] == id ? (long)by_id[lo] : -1;
}

typedef struct run_result {
    size_t finished, failed, unfinished; /* unfinished: aborted by a signal or a failed write */
    double wall;
    int engine_failed;                   /* a step failed: the run stopped */
} run_result;

/* Hand request `i` (id) over, write it, note its figures. Returns 0, or -1
 * when the write failed. `only_done`: skip (and count as unfinished) an
 * output a signal aborted. */
static int deliver(deepinfer_engine *e, gen_sink *sink, size_t i, uint64_t id, req_metrics *rm,
                   run_result *rr, int only_done) {
    deepinfer_request_output *o = NULL;
    if (deepinfer_take_output(e, id, &o)) return 0;
    int aborted = 0;
    for (size_t j = 0; j < o->n_choices; j++) aborted |= o->choices[j].finish_reason == DEEPINFER_FINISH_ABORT;
    int rc = 0;
    if (only_done && (aborted || sink->failed)) {
        rr->unfinished++;
    } else {
        if (o->status) fprintf(stderr, "request %zu: %s\n", i, o->error), rr->failed++;
        else rr->finished++;
        rm[i].ok = !o->status;
        rm[i].m = o->metrics;
        rc = sink->failed ? -1 : gen_sink_write(sink, i, o);
    }
    deepinfer_output_free(o);
    return rc;
}

/* Add every request, step until all finished (or a signal, or a failed
 * write), writing each request the moment it finishes. */
static int run(cli_state *c, deepinfer_engine *e, gen_sink *sink, req_metrics *rm, run_result *rr) {
    size_t n = c->n, done = 0;
    uint64_t *ids = calloc(n ? n : 1, sizeof *ids);
    size_t *by_id = calloc(n ? n : 1, sizeof *by_id), n_q = 0; /* queued inputs in id order */
    char *queued = calloc(n ? n : 1, 1);
    uint64_t *fin = calloc(n ? n : 1, sizeof *fin);
    if (!ids || !queued || !by_id || !fin) {
        free(ids), free(by_id), free(queued), free(fin);
        fprintf(stderr, "deepinfer generate: out of memory\n");
        return -1;
    }
    int tty = !c->quiet && isatty(2);
    double t0 = now_s(), last = 0;
    for (size_t i = 0; i < n; i++) {
        gen_request *r = &c->reqs[i];
        if (!r->error[0] && deepinfer_add_request(e, &r->prompt, &r->params, &ids[i]))
            snprintf(r->error, sizeof r->error, "%s", deepinfer_engine_last_error(e));
        if (!r->error[0]) {
            by_id[n_q++] = i;
            queued[i] = 1;
            continue;
        }
        /* refused before it ran: its line (an error) is written now, like any finished request */
        fprintf(stderr, "request %zu: %s\n", i, r->error);
        rr->failed++;
        deepinfer_request_output bad = {.request_id = UINT64_MAX, .status = DEEPINFER_ERR_INVALID_ARGUMENT,
                                        .error = r->error, .finished = 1};
        gen_sink_write(sink, i, &bad);
    }
    done = rr->failed;
    long long tokens = 0, budget = 0;
    for (size_t i = 0; i < n; i++)
        if (queued[i]) budget += (long long)c->reqs[i].params.max_tokens * c->reqs[i].params.n;
    while (!sink->failed && !g_signal && deepinfer_has_unfinished(e)) {
        if (deepinfer_step(e, NULL)) {
            fprintf(stderr, "deepinfer generate: %s\n", deepinfer_engine_last_error(e));
            rr->engine_failed = 1;
            break;
        }
        const deepinfer_request_output *const *up;
        size_t nu, nf = 0;
        deepinfer_read_outputs(e, &up, &nu);
        for (size_t k = 0; k < nu; k++) {
            for (size_t j = 0; j < up[k]->n_choices; j++) {
                const deepinfer_completion *ch = &up[k]->choices[j];
                tokens += (long long)(ch->n_tokens - ch->n_prev_tokens);
            }
            if (!up[k]->finished) continue;
            long i = index_of(ids, by_id, n_q, up[k]->request_id);
            if (i >= 0) { /* stopped early: its unused tokens leave the budget */
                const gen_request *g = &c->reqs[i];
                budget -= (long long)g->params.max_tokens * g->params.n - up[k]->metrics.output_tokens;
            }
            if (nf < n) fin[nf++] = up[k]->request_id;
        }
        /* take_output invalidates `up`: the finished ids were copied out first */
        for (size_t k = 0; k < nf && !sink->failed; k++) {
            long i = index_of(ids, by_id, n_q, fin[k]);
            if (i < 0 || !queued[i]) continue;
            queued[i] = 0;
            done++;
            deliver(e, sink, (size_t)i, fin[k], rm, rr, 0);
        }
        if (tty && now_s() - last > 0.1) progress(done, n, tokens, budget, t0, 0), last = now_s();
    }
    rr->wall = now_s() - t0;
    if (tty) progress(done, n, tokens, budget, t0, 1);
    /* stopped early (a signal, a failed write or step): abort what is left; a request that did
     * finish (async scheduling reports it a step late) is still written */
    for (size_t k = 0; k < n_q; k++) {
        size_t i = by_id[k];
        if (!queued[i]) continue;
        deepinfer_abort(e, ids[i]);
        deliver(e, sink, i, ids[i], rm, rr, 1);
    }
    size_t accounted = rr->finished + rr->failed + rr->unfinished;
    if (accounted < n) rr->unfinished += n - accounted; /* never handed over */
    free(ids);
    free(by_id);
    free(queued);
    free(fin);
    return 0;
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
        if (r == 0) fprintf(stderr, "error: unknown option '%s' (see deepinfer generate --help)\n", argv[i]);
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
    /* the model by the one rule of every command (cli_model_dir.h; the engine applies the same
     * rule to cfg.model, so the embedded demo model is left for it to name in the plan) */
    di_model_location loc;
    di_error merr = {0};
    if (di_cli_locate_model(c.cfg.model, &loc, &merr)) {
        fprintf(stderr, "deepinfer generate: %s\n", merr.msg);
        gen_requests_free(c.reqs, c.n);
        return 1;
    }
    /* the destination next: a path that cannot be written fails before the model loads */
    gen_sink sink;
    if (gen_sink_open(&sink, c.output, c.n)) {
        gen_requests_free(c.reqs, c.n);
        return 1;
    }
    char msg[2048];
    deepinfer_engine *e = NULL;
    if (deepinfer_engine_open(&c.cfg, &e, msg, sizeof msg)) {
        fprintf(stderr, "deepinfer generate: %s\n", msg);
        gen_sink_close(&sink);
        gen_requests_free(c.reqs, c.n);
        return 1;
    }
    if (!c.quiet) fputs(deepinfer_engine_plan_text(e), stderr);
    req_metrics *rm = calloc(c.n, sizeof *rm);
    run_result rr = {0};
    catch_signals();
    int bad = !rm || run(&c, e, &sink, rm, &rr);
    int write_failed = gen_sink_close(&sink) != 0;
    int sig = g_signal;
    if (sig)
        fprintf(stderr,
                "deepinfer generate: interrupted by %s: %zu of %zu requests finished and were written to %s, %zu left "
                "unfinished (aborted, not written)\n",
                sig == SIGINT ? "SIGINT" : "SIGTERM", rr.finished + rr.failed, c.n, sink.name, rr.unfinished);
    else if (write_failed && rr.unfinished)
        fprintf(stderr, "deepinfer generate: stopped: %zu requests left unfinished\n", rr.unfinished);
    if (!bad && !c.quiet) summary(rm, c.n, rr.failed, rr.wall, e);
    free(rm);
    deepinfer_engine_close(e);
    gen_requests_free(c.reqs, c.n);
    if (sig) return 128 + sig;
    return bad || write_failed || rr.engine_failed ? 1 : rr.failed > 0;
}

DI_CLI_COMMAND(generate, "generate completions for prompts through the engine (offline batch)", cmd_generate)
