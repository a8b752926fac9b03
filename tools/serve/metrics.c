/* metrics.c — Prometheus text exposition of the server's metrics (metrics.h). */
#include "serve/metrics.h"

#include <string.h>

static const double TTFT_BOUNDS[] = {0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60};
static const double TPOT_BOUNDS[] = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.5, 1, 2.5};
static const double E2E_BOUNDS[] = {0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 30, 60, 120, 300};

static const char *const EP_NAMES[METRICS_ENDPOINTS] = {"/v1/chat/completions", "/v1/completions", "/v1/models",
                                                        "/health", "/metrics", "other"};
static const int STATUSES[METRICS_STATUSES] = {200, 400, 401, 404, 405, 413, 429, 500, 503};

void metrics_init(srv_metrics *m) {
    memset(m, 0, sizeof *m);
    pthread_mutex_init(&m->mu, NULL);
    m->ttft = (srv_hist){.bounds = TTFT_BOUNDS, .n = sizeof TTFT_BOUNDS / sizeof TTFT_BOUNDS[0]};
    m->tpot = (srv_hist){.bounds = TPOT_BOUNDS, .n = sizeof TPOT_BOUNDS / sizeof TPOT_BOUNDS[0]};
    m->e2e = (srv_hist){.bounds = E2E_BOUNDS, .n = sizeof E2E_BOUNDS / sizeof E2E_BOUNDS[0]};
}

void metrics_destroy(srv_metrics *m) { pthread_mutex_destroy(&m->mu); }

void metrics_request(srv_metrics *m, int endpoint, int status) {
    int s = 0;
    while (s < METRICS_STATUSES && STATUSES[s] != status) s++;
    if (s == METRICS_STATUSES) s = status < 500 ? 1 : 7; /* not listed: counted as 400 or 500 */
    if (endpoint < 0 || endpoint >= METRICS_ENDPOINTS) endpoint = EP_OTHER;
    pthread_mutex_lock(&m->mu);
    m->requests[endpoint][s]++;
    pthread_mutex_unlock(&m->mu);
}

static void observe(srv_hist *h, double v) {
    int i = 0;
    while (i < h->n && v > h->bounds[i]) i++;
    h->counts[i]++;
    h->sum += v;
    h->count++;
}

void metrics_finished(srv_metrics *m, const deepinfer_request_metrics *rm, int aborted) {
    pthread_mutex_lock(&m->mu);
    m->finished++;
    m->aborted += aborted != 0;
    m->prompt_tokens += rm->prompt_tokens;
    m->generation_tokens += rm->output_tokens;
    if (rm->output_tokens > 0) observe(&m->ttft, rm->ttft_s);
    if (rm->output_tokens > 1) observe(&m->tpot, rm->tpot_s);
    observe(&m->e2e, rm->e2e_s);
    pthread_mutex_unlock(&m->mu);
}

static void hist(di_sbuf *b, const char *name, const char *help, const srv_hist *h) {
    di_sbuf_printf(b, "# HELP %s %s\n# TYPE %s histogram\n", name, help, name);
    int64_t cum = 0;
    for (int i = 0; i < h->n; i++) {
        cum += h->counts[i];
        di_sbuf_printf(b, "%s_bucket{le=\"%g\"} %lld\n", name, h->bounds[i], (long long)cum);
    }
    cum += h->counts[h->n];
    di_sbuf_printf(b, "%s_bucket{le=\"+Inf\"} %lld\n%s_sum %.9g\n%s_count %lld\n", name, (long long)cum, name, h->sum, name,
                   (long long)h->count);
}

static void gauge(di_sbuf *b, const char *name, const char *type, const char *help, long long v) {
    di_sbuf_printf(b, "# HELP %s %s\n# TYPE %s %s\n%s %lld\n", name, help, name, type, name, v);
}

void metrics_render(srv_metrics *m, const srv_gauges *g, di_sbuf *b) {
    pthread_mutex_lock(&m->mu);
    di_sbuf_puts(b, "# HELP deepinfer_http_requests_total HTTP requests answered, by endpoint and status.\n"
                    "# TYPE deepinfer_http_requests_total counter\n");
    for (int e = 0; e < METRICS_ENDPOINTS; e++)
        for (int s = 0; s < METRICS_STATUSES; s++)
            if (m->requests[e][s] || (e <= EP_COMPLETIONS && s == 0))
                di_sbuf_printf(b, "deepinfer_http_requests_total{endpoint=\"%s\",status=\"%d\"} %lld\n", EP_NAMES[e],
                               STATUSES[s], (long long)m->requests[e][s]);
    gauge(b, "deepinfer_requests_finished_total", "counter", "Engine requests finished (any reason).", m->finished);
    gauge(b, "deepinfer_requests_aborted_total", "counter", "Engine requests aborted (client gone or shutdown).", m->aborted);
    gauge(b, "deepinfer_prompt_tokens_total", "counter", "Prompt tokens of finished requests.", m->prompt_tokens);
    gauge(b, "deepinfer_generation_tokens_total", "counter", "Generated tokens of finished requests.", m->generation_tokens);
    hist(b, "deepinfer_time_to_first_token_seconds", "Time from arrival to the first token.", &m->ttft);
    hist(b, "deepinfer_time_per_output_token_seconds", "Mean time per output token after the first.", &m->tpot);
    hist(b, "deepinfer_e2e_request_latency_seconds", "Time from arrival to finish.", &m->e2e);
    pthread_mutex_unlock(&m->mu);
    gauge(b, "deepinfer_requests_running", "gauge", "Requests in the engine that have produced output.", g->running);
    gauge(b, "deepinfer_requests_waiting", "gauge", "Requests accepted and not yet producing output.", g->waiting);
    gauge(b, "deepinfer_pool_pages_in_use", "gauge", "State pool pages in use.", g->stats.pages_in_use);
    gauge(b, "deepinfer_pool_pages_peak", "gauge", "Most state pool pages in use at once.", g->stats.pages_peak);
    gauge(b, "deepinfer_pool_pages_total", "gauge", "State pool pages.", g->stats.num_pages);
    di_sbuf_printf(b, "# HELP deepinfer_pool_occupancy State pool pages in use / total.\n# TYPE deepinfer_pool_occupancy gauge\n"
                      "deepinfer_pool_occupancy %.6f\n",
                   g->stats.num_pages ? (double)g->stats.pages_in_use / (double)g->stats.num_pages : 0.0);
    gauge(b, "deepinfer_preemptions_total", "counter", "Sequences preempted (state recomputed later).", g->stats.preemptions);
    gauge(b, "deepinfer_engine_steps_total", "counter", "Engine steps run.", g->stats.steps);
}
