/*
 * `deepinfer serve` under load, bounded (loopback, well under a minute on 2
 * cores): 1,000 concurrent streaming chat requests, each completed or refused
 * with 429/503, none lost or truncated, every text equal to `deepinfer
 * generate` of the same request (the non-HTTP path, same seeds); then 100
 * clients that disconnect mid-stream, after which /metrics shows the pools
 * empty and the aborts counted (tests/openai/load.mjs). A second run with
 * --max-queued 50 checks that the overflow is refused with 429, not lost.
 */
#include "serve/serve_proc.h"

enum { N_COMBOS = 20, N_DISCONNECTS = 100 };
/* Sanitizer builds (several times slower, two tests at a time) run 400 streams: with 1,000 the last ones
 * wait in the queue past node fetch's 300 s header / body timeouts and the client drops them. */
#if defined(__SANITIZE_ADDRESS__)
#define DI_LOAD_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define DI_LOAD_SANITIZED 1
#endif
#endif
#ifdef DI_LOAD_SANITIZED
enum { N_STREAMS = 400 };
#else
enum { N_STREAMS = 1000 };
#endif

static int write_requests(const char *path) {
    static const char *const prompts[] = {"Tell me about the sea", "What is a cat?", "Write a poem", "Hello",
                                          "Explain rain"};
    FILE *f = fopen(path, "w");
    if (!f) return -1;
    for (int k = 0; k < N_COMBOS; k++)
        fprintf(f,
                "{\"messages\": [{\"role\": \"user\", \"content\": \"%s\"}], \"sampling_params\": {\"temperature\": "
                "0.8, \"max_tokens\": %d, \"seed\": %d}}\n",
                prompts[k % 5], 4 + k % 5, 100 + k);
    return fclose(f);
}

static void run_load(const char *const *extra, int n, int d, int min_refused, int max_refused) {
    serve_proc p;
    char req[320], exp[320], out[320], cmd[PATH_MAX + 1200];
    snprintf(req, sizeof req, "/tmp/di_load_%d.req.jsonl", (int)getpid());
    snprintf(exp, sizeof exp, "/tmp/di_load_%d.exp.jsonl", (int)getpid());
    snprintf(out, sizeof out, "/tmp/di_load_%d.out", (int)getpid());
    CHECK(write_requests(req) == 0);
    char exe[PATH_MAX + 64];
    CHECK(di_test_sibling("deepinfer", exe, sizeof exe));
    snprintf(cmd, sizeof cmd, "'%s' generate --model models/deepinfer-demo-v41 --prompts %s --output %s --quiet", exe, req, exp);
    CHECK_EQ_INT(serve_sh(cmd), 0);
    CHECK_MSG(serve_start(&p, extra) == 0, "the server did not start: %s", serve_log(&p));
    snprintf(cmd, sizeof cmd, "node tests/openai/load.mjs http://127.0.0.1:%d models/deepinfer-demo-v41 %s %s %d %d >%s 2>&1",
             p.port, req, exp, n, d, out);
    int rc = serve_sh(cmd);
    int stop = serve_stop(&p);
    CHECK_MSG(rc == 0, "load test failed:\n%s", file_text(out));
    const char *at = strstr(file_text(out), "equal to generate, ");
    CHECK_MSG(at, "%s", file_text(out));
    int refused = atoi(at + strlen("equal to generate, "));
    CHECK_MSG(refused >= min_refused && refused <= max_refused, "%d refused, want %d..%d:\n%s", refused, min_refused,
              max_refused, file_text(out));
    fprintf(stderr, "%s", file_text(out));
    CHECK_MSG(stop == 0, "the server did not exit 0 on SIGTERM:\n%s", serve_log(&p));
    unlink(req);
    unlink(exp);
    unlink(out);
    unlink(p.log);
}

TEST(serve_load_1000_streams_equal_generate_and_disconnects_free_the_pools) {
    CHECK_MSG(access("tests/openai/node_modules/openai/package.json", R_OK) == 0,
              "the npm test packages are not installed: run `make test`");
    run_load(NULL, N_STREAMS, N_DISCONNECTS, 0, 0); /* the default --max-queued (1024) holds them all */
}

TEST(serve_load_overflow_is_refused_with_429) {
    static const char *const extra[] = {"--max-queued", "50", NULL};
    run_load(extra, 400, 20, 1, 399);
}
