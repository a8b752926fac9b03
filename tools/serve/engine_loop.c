/* engine_loop.c — the engine thread of `deepinfer serve` and the request queue (serve.h). */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "serve/oai_response.h"
#include "serve/serve.h"

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static void req_free(srv_req *q) {
    oai_request_free(&q->req);
    di_sbuf_free(&q->out);
    free(q->first);
    free(q->tok_sent);
    free(q->finished);
    free(q->split);
    pthread_cond_destroy(&q->cv);
    free(q);
}

/* Under s->mu. */
static void unref(server *s, srv_req *q) {
    if (--q->refs) return;
    req_free(q);
    if (--s->open == 0) pthread_cond_broadcast(&s->idle);
}

void server_new_id(srv_req *q) {
    static unsigned long long counter;
    unsigned long long n = __atomic_add_fetch(&counter, 1, __ATOMIC_RELAXED);
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    snprintf(q->id, sizeof q->id, "%s%llx%06llx", q->endpoint == EP_CHAT ? "chatcmpl-" : "cmpl-",
             (unsigned long long)t.tv_sec, n & 0xffffff);
}

srv_req *server_submit(server *s, oai_request *r, int endpoint, int *status) {
    srv_req *q = calloc(1, sizeof *q);
    if (!q) {
        *status = 503;
        return NULL;
    }
    pthread_mutex_lock(&s->mu);
    if (s->draining || s->engine_failed || s->live >= s->max_queued) {
        *status = s->draining || s->engine_failed ? 503 : 429;
        pthread_mutex_unlock(&s->mu);
        free(q);
        return NULL;
    }
    q->req = *r;
    memset(r, 0, sizeof *r);
    q->endpoint = endpoint;
    q->created = (long long)time(NULL);
    server_new_id(q);
    pthread_cond_init(&q->cv, NULL);
    q->refs = 2;
    if (s->in_tail) s->in_tail->next = q;
    else s->in_head = q;
    s->in_tail = q;
    s->live++;
    s->open++;
    pthread_cond_signal(&s->wake);
    pthread_mutex_unlock(&s->mu);
    *status = 200;
    return q;
}

void server_release(server *s, srv_req *q) {
    pthread_mutex_lock(&s->mu);
    if (q->phase != SRV_DONE && q->phase != SRV_REJECTED) {
        q->gone = 1;
        s->gone_pending = 1;
        pthread_cond_signal(&s->wake);
    }
    unref(s, q);
    pthread_mutex_unlock(&s->mu);
}

/* ---- engine thread ------------------------------------------------------------ */

typedef struct active_set {
    srv_req **v;
    size_t n, cap;
} active_set;

static void ctx_of(const server *s, const srv_req *q, oai_resp_ctx *c) {
    *c = (oai_resp_ctx){.id = q->id, .created = q->created, .model = s->model_name, .req = &q->req, .tok = s->tok};
}

/* Hand bytes (and optionally the end) to the HTTP side. Takes ownership of *b's contents. */
static void deliver(server *s, srv_req *q, di_sbuf *b, srv_phase phase) {
    pthread_mutex_lock(&s->mu);
    if (b->n) di_sbuf_put(&q->out, b->p, b->n);
    if (b->oom) q->out.oom = 1;
    if (phase != SRV_QUEUED) q->phase = phase;
    pthread_cond_broadcast(&q->cv);
    pthread_mutex_unlock(&s->mu);
    di_sbuf_free(b);
}

/* The engine is done with q: it leaves the live count and drops its reference. */
static void retire(server *s, srv_req *q) {
    pthread_mutex_lock(&s->mu);
    s->live--;
    if (s->live == 0) pthread_cond_broadcast(&s->idle);
    unref(s, q);
    pthread_mutex_unlock(&s->mu);
}

/* The field an engine message names: its leading identifier ("temperature must be ..."). */
static void guess_param(const char *msg, char *param, size_t n) {
    size_t k = 0;
    while (msg[k] && (islower((unsigned char)msg[k]) || msg[k] == '_')) k++;
    if (k == 0 || k >= n || msg[k] != ' ') k = 0;
    memcpy(param, msg, k);
    param[k] = 0;
}

static void reject(server *s, srv_req *q, int status, const char *msg, const char *type, const char *code) {
    char param[64];
    q->http_status = status;
    guess_param(msg, param, sizeof param);
    di_sbuf b = {0};
    oai_build_error(&b, msg, type, param, code);
    deliver(s, q, &b, SRV_REJECTED);
    retire(s, q);
}

static int admit(server *s, srv_req *q) {
    deepinfer_engine *e = s->engine;
    if (deepinfer_add_request(e, &q->req.prompt, &q->req.params, &q->eid)) {
        reject(s, q, 400, deepinfer_engine_last_error(e), "invalid_request_error", "invalid_parameter");
        return -1;
    }
    size_t n = (size_t)(q->req.params.n > 0 ? q->req.params.n : 1);
    q->first = malloc(n * sizeof *q->first);
    q->tok_sent = calloc(n, sizeof *q->tok_sent);
    q->finished = calloc(n, sizeof *q->finished);
    q->split = malloc(n * sizeof *q->split);
    if (!q->first || !q->tok_sent || !q->finished || !q->split) {
        deepinfer_abort(e, q->eid);
        deepinfer_request_output *o = NULL;
        deepinfer_take_output(e, q->eid, &o);
        deepinfer_output_free(o);
        reject(s, q, 503, "out of memory", "server_error", "out_of_memory");
        return -1;
    }
    for (size_t j = 0; j < n; j++) {
        q->first[j] = 1;
        oai_split_init(&q->split[j], q->req.thinking, q->req.has_tools);
    }
    di_sbuf none = {0};
    deliver(s, q, &none, SRV_ADDED);
    return 0;
}

/* SSE chunks for what is new in the choices of o (streaming requests). */
static void stream_update(server *s, srv_req *q, const deepinfer_request_output *o, di_sbuf *b) {
    oai_resp_ctx c;
    ctx_of(s, q, &c);
    for (size_t j = 0; j < o->n_choices; j++) {
        const deepinfer_completion *ch = &o->choices[j];
        size_t k = (size_t)ch->index;
        if (k >= (size_t)q->req.params.n || q->finished[k]) continue;
        int fin = ch->finish_reason != DEEPINFER_FINISH_NONE;
        oai_span rs, cs;
        dsml_call *calls = NULL;
        int nc = 0;
        oai_split_step(&q->split[k], ch->text, ch->text_len, fin, &rs, &cs, &calls, &nc);
        const char *fr = fin ? oai_finish_reason(ch->finish_reason, nc > 0) : NULL;
        oai_build_chunk(b, &c, ch, q->first[k], rs, cs, calls, nc, q->tok_sent[k], fr);
        dsml_free(calls, nc);
        q->first[k] = 0;
        q->tok_sent[k] = ch->n_tokens;
        q->finished[k] = fin;
    }
}

/* The request's end: the last chunks (stream) or the whole body. */
static void finish(server *s, srv_req *q, const deepinfer_request_output *o, int aborted) {
    oai_resp_ctx c;
    ctx_of(s, q, &c);
    di_sbuf b = {0};
    if (o->status != DEEPINFER_OK) {
        if (q->req.stream) di_sbuf_puts(&b, "data: ");
        oai_build_error(&b, o->error, "invalid_request_error", "", "request_failed");
        if (q->req.stream) di_sbuf_puts(&b, "\n\n" OAI_SSE_DONE);
    } else if (q->req.stream) {
        stream_update(s, q, o, &b);
        if (q->req.include_usage) {
            long long out = 0;
            for (size_t j = 0; j < o->n_choices; j++) out += (long long)o->choices[j].n_tokens;
            oai_build_usage_chunk(&b, &c, (long long)o->n_prompt, out);
        }
        di_sbuf_puts(&b, OAI_SSE_DONE);
    } else {
        oai_build_response(&b, &c, o);
    }
    metrics_finished(&s->metrics, &o->metrics, aborted);
    deliver(s, q, &b, SRV_DONE);
    retire(s, q);
}

static srv_req *find(active_set *a, uint64_t eid, size_t *at) {
    for (size_t i = 0; i < a->n; i++)
        if (a->v[i]->eid == eid) {
            *at = i;
            return a->v[i];
        }
    return NULL;
}

static void drop(active_set *a, size_t i) { a->v[i] = a->v[--a->n]; }

/* Abort q in the engine and free its engine state; `reply` sends the output so far (shutdown), else nothing (gone). */
static void abort_one(server *s, srv_req *q, int reply) {
    deepinfer_engine *e = s->engine;
    deepinfer_abort(e, q->eid);
    deepinfer_request_output *o = NULL;
    if (deepinfer_take_output(e, q->eid, &o) == DEEPINFER_OK && reply) {
        finish(s, q, o, 1);
    } else {
        if (o) metrics_finished(&s->metrics, &o->metrics, 1);
        di_sbuf none = {0};
        deliver(s, q, &none, SRV_DONE);
        retire(s, q);
    }
    deepinfer_output_free(o);
}

static void refresh_gauges(server *s, const active_set *a) {
    deepinfer_engine_stats st;
    deepinfer_engine_get_stats(s->engine, &st);
    int64_t running = 0;
    for (size_t i = 0; i < a->n; i++) running += a->v[i]->started;
    pthread_mutex_lock(&s->mu);
    s->gauges.stats = st;
    s->gauges.running = running;
    s->gauges.waiting = s->live - running;
    pthread_mutex_unlock(&s->mu);
}

/* One step and its outputs. */
static void step(server *s, active_set *a) {
    deepinfer_engine *e = s->engine;
    if (deepinfer_step(e, NULL)) {
        char msg[600];
        snprintf(msg, sizeof msg, "the engine failed: %s", deepinfer_engine_last_error(e));
        fprintf(stderr, "deepinfer serve: %s\n", msg);
        pthread_mutex_lock(&s->mu);
        s->engine_failed = 1;
        pthread_mutex_unlock(&s->mu);
        while (a->n) {
            abort_one(s, a->v[0], 1);
            drop(a, 0);
        }
        return;
    }
    const deepinfer_request_output *const *up;
    size_t nu;
    deepinfer_read_outputs(e, &up, &nu);
    uint64_t *done = nu ? malloc(nu * sizeof *done) : NULL;
    size_t nd = 0;
    for (size_t k = 0; k < nu; k++) {
        size_t at;
        srv_req *q = find(a, up[k]->request_id, &at);
        if (!q) continue;
        q->started = 1;
        if (up[k]->finished && done) {
            done[nd++] = q->eid; /* taken below: take_output invalidates `up` */
            continue;
        }
        if (q->req.stream && up[k]->status == DEEPINFER_OK) {
            di_sbuf b = {0};
            stream_update(s, q, up[k], &b);
            deliver(s, q, &b, SRV_QUEUED);
        }
    }
    for (size_t k = 0; k < nd; k++) {
        size_t at;
        srv_req *q = find(a, done[k], &at);
        deepinfer_request_output *o = NULL;
        if (!q || deepinfer_take_output(e, done[k], &o)) continue;
        drop(a, at);
        finish(s, q, o, o->n_choices && o->choices[0].finish_reason == DEEPINFER_FINISH_ABORT);
        deepinfer_output_free(o);
    }
    free(done);
}

static void *engine_main(void *arg) {
    server *s = arg;
    active_set a = {0};
    for (;;) {
        pthread_mutex_lock(&s->mu);
        while (!s->in_head && a.n == 0 && !s->quit && !s->gone_pending && !s->abort_all)
            pthread_cond_wait(&s->wake, &s->mu);
        srv_req *in = s->in_head;
        s->in_head = s->in_tail = NULL;
        int scan = s->gone_pending, abort_all = s->abort_all, quit = s->quit;
        s->gone_pending = 0;
        pthread_mutex_unlock(&s->mu);
        while (in) {
            srv_req *q = in;
            in = q->next;
            q->next = NULL;
            pthread_mutex_lock(&s->mu);
            int gone = q->gone, failed = s->engine_failed;
            pthread_mutex_unlock(&s->mu);
            if (gone || abort_all || failed) {
                if (gone) {
                    di_sbuf none = {0};
                    deliver(s, q, &none, SRV_DONE);
                    retire(s, q);
                } else {
                    reject(s, q, 503, failed ? "the engine failed; restart the server" : "the server is shutting down",
                           "server_error", "unavailable");
                }
                continue;
            }
            if (admit(s, q)) continue;
            if (a.n == a.cap) {
                size_t cap = a.cap ? a.cap * 2 : 64;
                srv_req **v = realloc(a.v, cap * sizeof *v);
                if (!v) {
                    abort_one(s, q, 1);
                    continue;
                }
                a.v = v, a.cap = cap;
            }
            a.v[a.n++] = q;
        }
        if (scan || abort_all)
            for (size_t i = 0; i < a.n;) {
                srv_req *q = a.v[i];
                pthread_mutex_lock(&s->mu);
                int gone = q->gone;
                pthread_mutex_unlock(&s->mu);
                if (gone || abort_all) {
                    drop(&a, i);
                    abort_one(s, q, !gone);
                } else {
                    i++;
                }
            }
        if (a.n) step(s, &a);
        refresh_gauges(s, &a);
        if (quit && a.n == 0) {
            pthread_mutex_lock(&s->mu);
            int more = s->in_head != NULL;
            pthread_mutex_unlock(&s->mu);
            if (!more) break;
        }
    }
    free(a.v);
    return NULL;
}

int server_start(server *s) {
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->wake, NULL);
    pthread_cond_init(&s->idle, NULL);
    metrics_init(&s->metrics);
    refresh_gauges(s, &(active_set){0});
    return pthread_create(&s->thread, NULL, engine_main, s) ? -1 : 0;
}

void server_stop(server *s) {
    pthread_mutex_lock(&s->mu);
    s->quit = 1;
    pthread_cond_signal(&s->wake);
    pthread_mutex_unlock(&s->mu);
    pthread_join(s->thread, NULL);
    metrics_destroy(&s->metrics);
    pthread_cond_destroy(&s->idle);
    pthread_cond_destroy(&s->wake);
    pthread_mutex_destroy(&s->mu);
}

void server_drain(server *s) {
    double deadline = now_s() + s->shutdown_timeout;
    pthread_mutex_lock(&s->mu);
    s->draining = 1;
    pthread_cond_signal(&s->wake);
    /* live: the engine's part; open: also the bytes still being sent to clients (5 s more at most) */
    while (s->live > 0 || (s->open > 0 && now_s() < deadline + 5)) {
        if (now_s() >= deadline && !s->abort_all) {
            s->abort_all = 1;
            pthread_cond_signal(&s->wake);
        }
        struct timespec t;
        clock_gettime(CLOCK_REALTIME, &t);
        t.tv_nsec += 50000000;
        if (t.tv_nsec >= 1000000000) t.tv_sec++, t.tv_nsec -= 1000000000;
        pthread_cond_timedwait(&s->idle, &s->mu, &t);
    }
    pthread_mutex_unlock(&s->mu);
}
