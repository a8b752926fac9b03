/* http.c — libmicrohttpd handlers of `deepinfer serve` (http.h). */
#include "serve/http.h"

#include <errno.h>
#include <microhttpd.h>
#include <netdb.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "serve/oai_response.h"

struct http_server {
    struct MHD_Daemon *d;
    server *s;
    int listen_fd;
    long long started;
};

/* Per HTTP request (libmicrohttpd's con_cls). */
typedef struct http_ctx {
    http_server *h;
    di_sbuf body;
    int too_big;
    int fd;
    srv_req *q;
} http_ctx;

static enum MHD_Result send_body(struct MHD_Connection *conn, int status, const char *type, di_sbuf *b) {
    if (b->oom) {
        di_sbuf_free(b);
        di_sbuf_puts(b, "{\"error\": {\"message\": \"out of memory\", \"type\": \"server_error\", \"param\": null, \"code\": null}}");
        status = 500;
    }
    size_t n = 0;
    char *p = di_sbuf_take(b, &n);
    struct MHD_Response *r = MHD_create_response_from_buffer(n, p ? p : (char *)"", p ? MHD_RESPMEM_MUST_FREE : MHD_RESPMEM_PERSISTENT);
    if (!r) {
        free(p);
        return MHD_NO;
    }
    MHD_add_response_header(r, "Content-Type", type);
    enum MHD_Result ret = MHD_queue_response(conn, (unsigned)status, r);
    MHD_destroy_response(r);
    return ret;
}

static enum MHD_Result send_error(http_ctx *c, struct MHD_Connection *conn, int endpoint, int status, const char *msg,
                                  const char *type, const char *param, const char *code) {
    di_sbuf b = {0};
    oai_build_error(&b, msg, type, param, code);
    metrics_request(&c->h->s->metrics, endpoint, status);
    return send_body(conn, status, "application/json", &b);
}

/* 1 when the peer has closed its end (checked while a response waits for the engine). */
static int peer_gone(int fd) {
    if (fd < 0) return 0;
    struct pollfd p = {.fd = fd, .events = POLLRDHUP};
    return poll(&p, 1, 0) > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR));
}

/* Under s->mu: wait until ready(q), re-checking the client every 50 ms. 0, or -1 when it is gone. */
static int wait_for(server *s, srv_req *q, int fd, int (*ready)(const srv_req *)) {
    while (!ready(q)) {
        struct timespec t;
        clock_gettime(CLOCK_REALTIME, &t);
        t.tv_nsec += 50000000;
        if (t.tv_nsec >= 1000000000) t.tv_sec++, t.tv_nsec -= 1000000000;
        if (pthread_cond_timedwait(&q->cv, &s->mu, &t) == ETIMEDOUT && peer_gone(fd)) return -1;
    }
    return 0;
}

static int is_admitted(const srv_req *q) { return q->phase != SRV_QUEUED; }
static int is_done(const srv_req *q) { return q->phase == SRV_DONE || q->phase == SRV_REJECTED; }
static int has_bytes(const srv_req *q) { return q->out.n > q->out_sent || is_done(q); }

/* The SSE body: what the engine thread appended, as it comes. */
static ssize_t stream_reader(void *cls, uint64_t pos, char *buf, size_t max) {
    (void)pos;
    http_ctx *c = cls;
    server *s = c->h->s;
    srv_req *q = c->q;
    pthread_mutex_lock(&s->mu);
    if (wait_for(s, q, c->fd, has_bytes)) {
        pthread_mutex_unlock(&s->mu);
        return MHD_CONTENT_READER_END_WITH_ERROR; /* the completed callback marks it gone */
    }
    size_t avail = q->out.n - q->out_sent;
    if (!avail) {
        pthread_mutex_unlock(&s->mu);
        return MHD_CONTENT_READER_END_OF_STREAM;
    }
    size_t k = avail < max ? avail : max;
    memcpy(buf, q->out.p + q->out_sent, k);
    q->out_sent += k;
    if (q->out_sent == q->out.n) q->out.n = q->out_sent = 0; /* sent: reuse the buffer */
    pthread_mutex_unlock(&s->mu);
    return (ssize_t)k;
}

static enum MHD_Result completions(http_ctx *c, struct MHD_Connection *conn, int endpoint) {
    server *s = c->h->s;
    if (c->too_big) {
        char msg[128];
        snprintf(msg, sizeof msg, "the request body is larger than %zu bytes", s->max_body);
        return send_error(c, conn, endpoint, 413, msg, "invalid_request_error", "", "request_too_large");
    }
    oai_request r;
    char err[1024], param[128];
    if (oai_request_parse(c->body.p ? c->body.p : "", c->body.n, endpoint == EP_CHAT, &r, err, sizeof err, param,
                          sizeof param)) {
        oai_request_free(&r);
        return send_error(c, conn, endpoint, 400, err, "invalid_request_error", param,
                          param[0] ? "invalid_parameter" : "invalid_json");
    }
    if (r.model && strcmp(r.model, s->model_name)) {
        snprintf(err, sizeof err, "The model `%s` does not exist (this server serves `%s`)", r.model, s->model_name);
        oai_request_free(&r);
        return send_error(c, conn, endpoint, 404, err, "invalid_request_error", "model", "model_not_found");
    }
    int status = 0;
    srv_req *q = server_submit(s, &r, endpoint, &status);
    if (!q) {
        oai_request_free(&r);
        return status == 429 ? send_error(c, conn, endpoint, 429, "the server's request queue is full; retry later",
                                          "rate_limit_error", "", "queue_full")
                             : send_error(c, conn, endpoint, 503, "the server is shutting down or unavailable",
                                          "server_error", "", "unavailable");
    }
    c->q = q;
    pthread_mutex_lock(&s->mu);
    int stream = q->req.stream;
    /* a stream starts once the engine has taken the request, so a rejection is still a 400 */
    if (wait_for(s, q, c->fd, stream ? is_admitted : is_done)) {
        pthread_mutex_unlock(&s->mu);
        return MHD_NO;
    }
    if (q->phase == SRV_REJECTED || !stream) {
        int code = q->phase == SRV_REJECTED ? q->http_status : 200;
        di_sbuf b = q->out;
        memset(&q->out, 0, sizeof q->out);
        pthread_mutex_unlock(&s->mu);
        metrics_request(&s->metrics, endpoint, code);
        return send_body(conn, code, "application/json", &b);
    }
    pthread_mutex_unlock(&s->mu);
    struct MHD_Response *resp = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 16384, stream_reader, c, NULL);
    if (!resp) return MHD_NO;
    MHD_add_response_header(resp, "Content-Type", "text/event-stream");
    MHD_add_response_header(resp, "Cache-Control", "no-cache");
    metrics_request(&s->metrics, endpoint, 200);
    enum MHD_Result ret = MHD_queue_response(conn, MHD_HTTP_OK, resp);
    MHD_destroy_response(resp);
    return ret;
}

static enum MHD_Result models(http_ctx *c, struct MHD_Connection *conn) {
    server *s = c->h->s;
    deepinfer_memory_plan plan;
    deepinfer_engine_plan(s->engine, &plan); /* fixed at open: safe to read from any thread */
    di_sbuf b = {0};
    di_sbuf_puts(&b, "{\"object\": \"list\", \"data\": [{\"id\": ");
    oai_json_string(&b, s->model_name, strlen(s->model_name));
    di_sbuf_printf(&b, ", \"object\": \"model\", \"created\": %lld, \"owned_by\": \"deepinfer\", \"max_model_len\": %lld}]}",
                   c->h->started, (long long)plan.max_model_len);
    metrics_request(&s->metrics, EP_MODELS, 200);
    return send_body(conn, 200, "application/json", &b);
}

static enum MHD_Result health(http_ctx *c, struct MHD_Connection *conn) {
    server *s = c->h->s;
    pthread_mutex_lock(&s->mu);
    int ok = !s->draining && !s->engine_failed;
    pthread_mutex_unlock(&s->mu);
    di_sbuf b = {0};
    di_sbuf_puts(&b, ok ? "{\"status\": \"ok\"}" : "{\"status\": \"unavailable\"}");
    metrics_request(&s->metrics, EP_HEALTH, ok ? 200 : 503);
    return send_body(conn, ok ? 200 : 503, "application/json", &b);
}

static enum MHD_Result metrics(http_ctx *c, struct MHD_Connection *conn) {
    server *s = c->h->s;
    srv_gauges g;
    pthread_mutex_lock(&s->mu);
    g = s->gauges;
    pthread_mutex_unlock(&s->mu);
    metrics_request(&s->metrics, EP_METRICS, 200);
    di_sbuf b = {0};
    metrics_render(&s->metrics, &g, &b);
    return send_body(conn, 200, "text/plain; version=0.0.4", &b);
}

static int authorized(const server *s, struct MHD_Connection *conn) {
    if (!s->api_key) return 1;
    const char *h = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION);
    if (!h || strncmp(h, "Bearer ", 7)) return 0;
    const char *k = h + 7, *want = s->api_key;
    size_t n = strlen(k), m = strlen(want);
    unsigned diff = n != m;
    for (size_t i = 0; i < n && i < m; i++) diff |= (unsigned)(k[i] ^ want[i]);
    return diff == 0;
}

static enum MHD_Result handler(void *cls, struct MHD_Connection *conn, const char *url, const char *method,
                               const char *version, const char *upload, size_t *upload_size, void **con_cls) {
    (void)version;
    http_server *h = cls;
    http_ctx *c = *con_cls;
    if (!c) { /* headers read: the body (if any) comes in the next calls */
        if (!(c = calloc(1, sizeof *c))) return MHD_NO;
        c->h = h;
        const union MHD_ConnectionInfo *ci = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
        c->fd = ci ? ci->connect_fd : -1;
        *con_cls = c;
        return MHD_YES;
    }
    if (*upload_size) {
        if (c->body.n + *upload_size > h->s->max_body) c->too_big = 1;
        else di_sbuf_put(&c->body, upload, *upload_size);
        if (c->body.oom) c->too_big = 1;
        *upload_size = 0;
        return MHD_YES;
    }
    int chat = !strcmp(url, "/v1/chat/completions"), compl = !strcmp(url, "/v1/completions");
    int endpoint = chat ? EP_CHAT : compl ? EP_COMPLETIONS : !strcmp(url, "/v1/models") ? EP_MODELS
                 : !strcmp(url, "/health") ? EP_HEALTH : !strcmp(url, "/metrics") ? EP_METRICS : EP_OTHER;
    if (!strncmp(url, "/v1/", 4) && !authorized(h->s, conn))
        return send_error(c, conn, endpoint, 401, "Incorrect API key provided (Authorization: Bearer KEY)",
                          "authentication_error", "", "invalid_api_key");
    int post = !strcmp(method, "POST"), get = !strcmp(method, "GET");
    if (endpoint == EP_OTHER) {
        char msg[600];
        snprintf(msg, sizeof msg, "Unknown request URL: %s %.500s", method, url);
        return send_error(c, conn, endpoint, 404, msg, "invalid_request_error", "", "unknown_url");
    }
    if ((endpoint <= EP_COMPLETIONS && !post) || (endpoint > EP_COMPLETIONS && !get)) {
        char msg[128];
        snprintf(msg, sizeof msg, "%s is not allowed here (use %s)", method, endpoint <= EP_COMPLETIONS ? "POST" : "GET");
        return send_error(c, conn, endpoint, 405, msg, "invalid_request_error", "", "method_not_allowed");
    }
    switch (endpoint) {
    case EP_MODELS: return models(c, conn);
    case EP_HEALTH: return health(c, conn);
    case EP_METRICS: return metrics(c, conn);
    default: return completions(c, conn, endpoint);
    }
}

static void completed(void *cls, struct MHD_Connection *conn, void **con_cls, enum MHD_RequestTerminationCode toe) {
    (void)conn, (void)toe;
    http_server *h = cls;
    http_ctx *c = *con_cls;
    if (!c) return;
    if (c->q) server_release(h->s, c->q);
    di_sbuf_free(&c->body);
    free(c);
    *con_cls = NULL;
}

http_server *http_start(server *s, const char *host, int port, int *bound_port, char *err, size_t errlen) {
    char ports[16];
    snprintf(ports, sizeof ports, "%d", port);
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE}, *ai = NULL;
    int rc = getaddrinfo(host, ports, &hints, &ai);
    if (rc) {
        snprintf(err, errlen, "cannot resolve --host %s: %s", host, gai_strerror(rc));
        return NULL;
    }
    http_server *h = calloc(1, sizeof *h);
    if (!h) {
        freeaddrinfo(ai);
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    h->s = s;
    h->started = (long long)time(NULL);
    unsigned flags = MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_POLL | MHD_USE_ITC | MHD_USE_ERROR_LOG;
    if (ai->ai_family == AF_INET6) flags |= MHD_USE_IPv6;
    h->d = MHD_start_daemon(flags, (uint16_t)port, NULL, NULL, handler, h, MHD_OPTION_SOCK_ADDR, ai->ai_addr,
                            MHD_OPTION_NOTIFY_COMPLETED, completed, h, MHD_OPTION_CONNECTION_LIMIT, (unsigned)8192,
                            MHD_OPTION_LISTEN_BACKLOG_SIZE, (unsigned)4096, MHD_OPTION_THREAD_STACK_SIZE,
                            (size_t)(512 * 1024), MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)600, MHD_OPTION_END);
    freeaddrinfo(ai);
    if (!h->d) {
        snprintf(err, errlen, "cannot listen on %s:%d (%s)", host, port, errno ? strerror(errno) : "libmicrohttpd failed");
        free(h);
        return NULL;
    }
    const union MHD_DaemonInfo *di = MHD_get_daemon_info(h->d, MHD_DAEMON_INFO_BIND_PORT);
    *bound_port = di ? (int)di->port : port;
    h->listen_fd = -1;
    return h;
}

void http_quiesce(http_server *h) {
    if (h && h->listen_fd < 0) h->listen_fd = (int)MHD_quiesce_daemon(h->d);
}

void http_stop(http_server *h) {
    if (!h) return;
    MHD_stop_daemon(h->d);
    if (h->listen_fd >= 0) close(h->listen_fd);
    free(h);
}
