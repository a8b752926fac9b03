/* `deepinfer serve`: an OpenAI-compatible HTTP server over the engine (tools/serve/). */
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "deepinfer.h"
#include "serve/http.h"
#include "serve/serve.h"

static const char USAGE[] =
    "usage: deepinfer serve [--model DIR|ORG/NAME] [--host ADDR] [--port N] [--api-key KEY] [options]\n"
    "\n"
    "An OpenAI-compatible HTTP server: POST /v1/chat/completions, POST /v1/completions,\n"
    "GET /v1/models, GET /health, GET /metrics (Prometheus). One engine thread runs every\n"
    "request (continuous batching); streaming is Server-Sent Events. SIGTERM or SIGINT stop\n"
    "accepting, let in-flight requests finish (--shutdown-timeout), then exit 0.\n"
    "\n"
    "Model: --model DIR or ORG/NAME[@REV]; else $DEEPINFER_HF_MODEL_DIR; else the embedded\n"
    "demo model models/deepinfer-demo-v41 (as `deepinfer generate`).\n"
    "\n"
    "Server:\n"
    "  --host ADDR              address to listen on (default 127.0.0.1: loopback only)\n"
    "  --port N                 TCP port (default 8000; 0 = any free port, printed at start)\n"
    "  --api-key KEY            require \"Authorization: Bearer KEY\" on /v1/*\n"
    "  --served-model-name NAME the model id of /v1/models and of responses (default: --model,\n"
    "                           else the model directory's name)\n"
    "  --max-queued N           requests in the server at once; more get 429 (default 1024)\n"
    "  --max-body BYTES         request body limit; larger gets 413 (default 8388608)\n"
    "  --shutdown-timeout S     seconds in-flight requests may still run after SIGTERM (default 30)\n"
    "\n"
    "Engine:\n"
    "  --tokenizer PATH  --accelerator auto|cpu|cuda  --max-num-seqs N (64)\n"
    "  --max-num-batched-tokens N (2048)  --chunk-size N (512)  --max-model-len N\n"
    "  --page-rows N (64)  --num-pages N  --seed N (base seed of requests without one)\n";

/* Strict integer: the whole text, within [lo, hi]. */
static int parse_int(const char *s, long long lo, long long hi, long long *out) {
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (end == s || *end || errno || v < lo || v > hi) return -1;
    *out = v;
    return 0;
}

static int parse_num(const char *s, double lo, double hi, double *out) {
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (end == s || *end || errno || !(v >= lo && v <= hi)) return -1;
    *out = v;
    return 0;
}

typedef struct serve_opts {
    deepinfer_engine_config cfg;
    const char *host, *api_key, *name;
    long long port, max_queued, max_body;
    double shutdown_timeout;
} serve_opts;

static int flag(serve_opts *o, int argc, char **argv, int *i) {
    const char *v = NULL;
    long long x;
#define F(name) di_cli_flag_value(argc, argv, i, name, &v)
#define INT(lo, hi, dst)                                                                                    \
    do {                                                                                                    \
        if (parse_int(v, lo, hi, &x)) return -1;                                                            \
        dst = x;                                                                                            \
    } while (0)
    if (F("--model")) o->cfg.model = v;
    else if (F("--tokenizer")) o->cfg.tokenizer = v;
    else if (F("--accelerator")) o->cfg.accelerator = v;
    else if (F("--host")) o->host = v;
    else if (F("--port")) INT(0, 65535, o->port);
    else if (F("--api-key")) o->api_key = v;
    else if (F("--served-model-name")) o->name = v;
    else if (F("--max-queued")) INT(1, 1000000, o->max_queued);
    else if (F("--max-body")) INT(1024, (long long)1 << 32, o->max_body);
    else if (F("--shutdown-timeout")) {
        if (parse_num(v, 0, 86400, &o->shutdown_timeout)) return -1;
    } else if (F("--max-num-seqs")) INT(1, 1 << 20, o->cfg.max_num_seqs);
    else if (F("--max-num-batched-tokens")) INT(1, INT_MAX, o->cfg.max_num_batched_tokens);
    else if (F("--chunk-size")) INT(1, INT_MAX, o->cfg.chunk_size);
    else if (F("--max-model-len")) INT(1, INT64_MAX, o->cfg.max_model_len);
    else if (F("--page-rows")) INT(1, INT_MAX, o->cfg.page_rows);
    else if (F("--num-pages")) INT(1, INT64_MAX, o->cfg.num_pages);
    else if (F("--seed")) {
        char *end;
        errno = 0;
        unsigned long long seed = strtoull(v, &end, 10);
        if (*v == '-' || end == v || *end || errno) return -1;
        o->cfg.seed = seed;
    } else return 0;
    return v ? 1 : -1;
#undef F
#undef INT
}

/* The last path component of `p` (trailing slashes ignored), in buf. */
static const char *base_name(const char *p, char *buf, size_t n) {
    snprintf(buf, n, "%s", p);
    size_t k = strlen(buf);
    while (k > 1 && buf[k - 1] == '/') buf[--k] = 0;
    const char *b = strrchr(buf, '/');
    return b && b[1] ? b + 1 : buf;
}

static int cmd_serve(int argc, char **argv) {
    if (di_cli_wants_help(argc, argv)) {
        fputs(USAGE, stdout);
        return 0;
    }
    serve_opts o = {.host = "127.0.0.1", .port = 8000, .max_queued = 1024, .max_body = 8 << 20, .shutdown_timeout = 30};
    deepinfer_engine_config_init(&o.cfg);
    for (int i = 1; i < argc; i++) {
        int r = flag(&o, argc, argv, &i);
        if (r == 1) continue;
        fprintf(stderr, r ? "error: bad value for %s (see deepinfer serve --help)\n"
                          : "error: unknown option '%s' (see deepinfer serve --help)\n",
                argv[i]);
        return 2;
    }
    /* SIGINT/SIGTERM are taken by sigwait below: blocked before any thread starts, so no thread gets them */
    sigset_t sigs;
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGINT);
    sigaddset(&sigs, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &sigs, NULL);
    signal(SIGPIPE, SIG_IGN);

    char msg[2048];
    server s;
    memset(&s, 0, sizeof s);
    if (deepinfer_engine_open(&o.cfg, &s.engine, msg, sizeof msg)) {
        fprintf(stderr, "deepinfer serve: %s\n", msg);
        return 1;
    }
    fputs(deepinfer_engine_plan_text(s.engine), stderr);
    deepinfer_memory_plan plan;
    deepinfer_engine_plan(s.engine, &plan);
    di_error terr = {0};
    if (di_tokenizer_load(o.cfg.tokenizer ? o.cfg.tokenizer : plan.model_dir, &s.tok, &terr))
        s.tok = NULL; /* token ids only: logprobs name tokens "token_id:N" */
    char name[sizeof plan.model_dir];
    s.model_name = o.name ? o.name : o.cfg.model ? o.cfg.model : base_name(plan.model_dir, name, sizeof name);
    s.api_key = o.api_key;
    s.max_queued = (long)o.max_queued;
    s.max_body = (size_t)o.max_body;
    s.shutdown_timeout = o.shutdown_timeout;
    if (server_start(&s)) {
        fprintf(stderr, "deepinfer serve: cannot start the engine thread\n");
        di_tokenizer_free(s.tok);
        deepinfer_engine_close(s.engine);
        return 1;
    }
    int port = 0;
    http_server *h = http_start(&s, o.host, (int)o.port, &port, msg, sizeof msg);
    if (!h) {
        fprintf(stderr, "deepinfer serve: %s\n", msg);
        server_stop(&s);
        di_tokenizer_free(s.tok);
        deepinfer_engine_close(s.engine);
        return 1;
    }
    fprintf(stderr, "deepinfer serve: listening on http://%s:%d (model %s)\n", o.host, port, s.model_name);
    fflush(stderr);
    int sig = 0;
    sigwait(&sigs, &sig);
    pthread_mutex_lock(&s.mu);
    long live = s.live;
    pthread_mutex_unlock(&s.mu);
    fprintf(stderr, "deepinfer serve: %s: shutting down, %ld request(s) in flight\n", sig == SIGINT ? "SIGINT" : "SIGTERM",
            live);
    http_quiesce(h);
    server_drain(&s);
    http_stop(h);
    server_stop(&s);
    deepinfer_engine_stats st;
    deepinfer_engine_get_stats(s.engine, &st);
    fprintf(stderr, "deepinfer serve: stopped (%lld requests finished)\n", (long long)st.requests_finished);
    di_tokenizer_free(s.tok);
    deepinfer_engine_close(s.engine);
    return 0;
}

DI_CLI_COMMAND(serve, "an OpenAI-compatible HTTP server (chat/completions, completions, models, metrics)", cmd_serve)
