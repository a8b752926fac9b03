/*
 * metrics.h — the server's Prometheus counters and histograms (/metrics):
 * requests by endpoint and HTTP status, prompt and generation tokens, TTFT
 * and TPOT histograms, aborted requests; gauges (running / waiting
 * requests, pool occupancy, preemptions) are passed in at render time.
 * Thread-safe: every call takes the metrics' own lock.
 */
#ifndef DI_SERVE_METRICS_H
#define DI_SERVE_METRICS_H

#include <pthread.h>
#include <stdint.h>

#include "deepinfer.h"
#include "tokenizer/sbuf.h"

enum { METRICS_ENDPOINTS = 6, METRICS_STATUSES = 9, METRICS_BUCKETS = 16 };

typedef struct srv_hist {
    const double *bounds;     /* upper bounds, n of them (+Inf implied) */
    int n;
    int64_t counts[METRICS_BUCKETS + 1];
    double sum;
    int64_t count;
} srv_hist;

typedef struct srv_metrics {
    pthread_mutex_t mu;
    int64_t requests[METRICS_ENDPOINTS][METRICS_STATUSES];
    int64_t prompt_tokens, generation_tokens, aborted, finished;
    srv_hist ttft, tpot, e2e;
} srv_metrics;

typedef struct srv_gauges {
    int64_t running, waiting;
    deepinfer_engine_stats stats;
} srv_gauges;

/* Endpoint indices for metrics_request. */
enum { EP_CHAT, EP_COMPLETIONS, EP_MODELS, EP_HEALTH, EP_METRICS, EP_OTHER };

void metrics_init(srv_metrics *m);
void metrics_destroy(srv_metrics *m);

/* One HTTP request answered with `status`. */
void metrics_request(srv_metrics *m, int endpoint, int status);

/* One engine request finished (aborted: a disconnected client or shutdown). */
void metrics_finished(srv_metrics *m, const deepinfer_request_metrics *rm, int aborted);

/* The whole exposition text. */
void metrics_render(srv_metrics *m, const srv_gauges *g, di_sbuf *b);

#endif
