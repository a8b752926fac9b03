/*
 * `deepinfer serve` end to end on the demo model over loopback: the official
 * openai npm client (tests/openai/e2e.mjs: chat, streamed reasoning + usage,
 * json_schema checked by ajv, a tool call, seeds, a 400 error), raw HTTP
 * errors (401 with --api-key, 404, 405, 413, bad JSON, engine rejections)
 * through node's fetch, /metrics, and a graceful SIGTERM (exit 0).
 */
#include <sys/stat.h>

#include "serve/serve_proc.h"

static int have_client(void) {
    return access("tests/openai/node_modules/openai/package.json", R_OK) == 0 &&
           access("tests/ajv/node_modules/ajv/package.json", R_OK) == 0;
}

TEST(serve_openai_client_end_to_end) {
    CHECK_MSG(have_client(), "the openai client is not installed: run `make test` (npm ci in tests/openai, tests/ajv)");
    serve_proc p;
    CHECK_MSG(serve_start(&p, NULL) == 0, "the server did not start: %s", serve_log(&p));
    char cmd[1024], out[320];
    snprintf(out, sizeof out, "%s.client", p.log);
    snprintf(cmd, sizeof cmd, "node tests/openai/e2e.mjs http://127.0.0.1:%d/v1 models/deepinfer-demo-v41 >%s 2>&1", p.port,
             out);
    int rc = serve_sh(cmd);
    int stop = serve_stop(&p);
    CHECK_MSG(rc == 0, "openai client checks failed:\n%s", file_text(out));
    CHECK_MSG(strstr(file_text(out), "all checks passed"), "%s", file_text(out));
    CHECK_MSG(stop == 0, "the server did not exit 0 on SIGTERM:\n%s", serve_log(&p));
    CHECK(strstr(serve_log(&p), "shutting down") && strstr(serve_log(&p), "stopped"));
    unlink(out);
    unlink(p.log);
}

/* Raw requests (node fetch): status and error shape of each. */
static const char *RAW_JS =
    "const [base] = process.argv.slice(2); let bad = 0;\n"
    "async function t(what, path, init, status, code) {\n"
    "  const r = await fetch(base + path, init); const text = await r.text(); let j = null;\n"
    "  try { j = JSON.parse(text); } catch (e) {}\n"
    "  const ok = r.status === status && (!code || (j && j.error && j.error.code === code && 'param' in j.error &&\n"
    "    'type' in j.error && typeof j.error.message === 'string'));\n"
    "  console.log((ok ? 'ok   ' : 'FAIL ') + what + ' ' + r.status + ' ' + text.slice(0, 300)); if (!ok) bad++;\n"
    "}\n"
    "const key = { authorization: 'Bearer sekret', 'content-type': 'application/json' };\n"
    "const chat = JSON.stringify({ messages: [{ role: 'user', content: 'hi' }], max_tokens: 2 });\n"
    "await t('no key', '/v1/chat/completions', { method: 'POST', body: chat }, 401, 'invalid_api_key');\n"
    "await t('wrong key', '/v1/models', { headers: { authorization: 'Bearer nope' } }, 401, 'invalid_api_key');\n"
    "await t('key', '/v1/chat/completions', { method: 'POST', body: chat, headers: key }, 200, null);\n"
    "await t('health needs no key', '/health', {}, 200, null);\n"
    "await t('bad json', '/v1/chat/completions', { method: 'POST', body: '{\"messages\": [', headers: key }, 400, 'invalid_json');\n"
    "await t('unknown path', '/v1/nothing', { headers: key }, 404, 'unknown_url');\n"
    "await t('wrong method', '/v1/chat/completions', { headers: key }, 405, 'method_not_allowed');\n"
    "await t('too large', '/v1/completions', { method: 'POST', body: 'x'.repeat(70000), headers: key }, 413, 'request_too_large');\n"
    "await t('engine rejects', '/v1/completions', { method: 'POST', headers: key,\n"
    "  body: JSON.stringify({ prompt: 'a', structured_outputs: { regex: '(' } }) }, 400, 'invalid_parameter');\n"
    "await t('stream rejected before it starts', '/v1/completions', { method: 'POST', headers: key,\n"
    "  body: JSON.stringify({ prompt: 'a', stream: true, top_p: 5 }) }, 400, 'invalid_parameter');\n"
    "const m = await (await fetch(base + '/metrics')).text();\n"
    "const need = ['deepinfer_http_requests_total{endpoint=\"/v1/chat/completions\",status=\"401\"} 1',\n"
    "  'deepinfer_time_to_first_token_seconds_bucket', 'deepinfer_time_per_output_token_seconds_count',\n"
    "  'deepinfer_pool_pages_in_use 0', 'deepinfer_preemptions_total', 'deepinfer_requests_running 0'];\n"
    "for (const n of need) if (!m.includes(n)) { console.log('FAIL metrics lack ' + n); bad++; }\n"
    "process.exit(bad ? 1 : 0);\n";

TEST(serve_http_errors_auth_and_metrics) {
    serve_proc p;
    static const char *const extra[] = {"--api-key", "sekret", "--max-body", "65536", NULL};
    CHECK_MSG(serve_start(&p, extra) == 0, "the server did not start: %s", serve_log(&p));
    char js[320], out[320], cmd[1024];
    snprintf(js, sizeof js, "%s.mjs", p.log);
    snprintf(out, sizeof out, "%s.out", p.log);
    FILE *f = fopen(js, "w");
    CHECK(f);
    fputs(RAW_JS, f);
    fclose(f);
    snprintf(cmd, sizeof cmd, "node %s http://127.0.0.1:%d >%s 2>&1", js, p.port, out);
    int rc = serve_sh(cmd);
    int stop = serve_stop(&p);
    CHECK_MSG(rc == 0, "raw HTTP checks failed:\n%s", file_text(out));
    CHECK_EQ_INT(stop, 0);
    unlink(js);
    unlink(out);
    unlink(p.log);
}

TEST(serve_refuses_bad_flags) {
    char exe[PATH_MAX + 64], cmd[PATH_MAX + 256];
    CHECK(di_test_sibling("deepinfer", exe, sizeof exe));
    static const char *const bad[] = {"--port 70000", "--port 80x", "--max-queued 0", "--shutdown-timeout -1", "--nope"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        snprintf(cmd, sizeof cmd, "'%s' serve %s >/dev/null 2>&1", exe, bad[i]);
        CHECK_MSG(serve_sh(cmd) == 2, "%s accepted", bad[i]);
    }
    snprintf(cmd, sizeof cmd, "'%s' serve --help | grep -q -- --api-key", exe);
    CHECK_EQ_INT(serve_sh(cmd), 0);
}
