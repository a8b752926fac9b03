/*
 * serve.h — `deepinfer serve`: the state shared by the HTTP threads
 * (http.c, libmicrohttpd, one thread per connection) and the one engine
 * thread (engine_loop.c) that owns the deepinfer_engine.
 *
 * HTTP threads never call the engine. A request is parsed on its HTTP
 * thread (oai_request.c), put on the server's incoming queue and the
 * engine thread woken; the engine thread adds it, steps while anything is
 * unfinished, and appends the request's response bytes (SSE chunks, or the
 * whole body at the end) to its buffer under the server lock, signalling the
 * request's condition variable. The HTTP thread sends what is there. A
 * client that disconnects sets `gone`; the engine thread then aborts the
 * request (deepinfer_abort) and frees its engine state.
 *
 * Lifetime: a request has two references, the HTTP side's (dropped when
 * libmicrohttpd reports the request completed) and the engine side's
 * (dropped when the engine is done with it); the last one frees it.
 */
#ifndef DI_SERVE_SERVE_H
#define DI_SERVE_SERVE_H

#include <pthread.h>
#include <stdint.h>

#include "deepinfer.h"
#include "serve/metrics.h"
#include "serve/oai_request.h"
#include "serve/oai_split.h"
#include "tokenizer/sbuf.h"
#include "tokenizer/tokenizer.h"

typedef enum srv_phase {
    SRV_QUEUED = 0,   /* on the incoming queue */
    SRV_ADDED,        /* in the engine */
    SRV_REJECTED,     /* the engine refused it: `out` holds the 400 error body */
    SRV_DONE          /* finished: `out` is complete */
} srv_phase;

typedef struct srv_req {
    oai_request req;
    char id[40];
    long long created;
    int endpoint;              /* EP_CHAT / EP_COMPLETIONS */
    /* under server.mu */
    pthread_cond_t cv;
    srv_phase phase;
    int http_status;           /* SRV_REJECTED: 400 (bad request) or 503 (shutting down) */
    di_sbuf out;               /* response bytes produced so far */
    size_t out_sent;           /* bytes of `out` handed to the connection */
    int gone;                  /* the client disconnected */
    int refs;
    struct srv_req *next;      /* incoming queue */
    /* engine thread only */
    uint64_t eid;
    int started;               /* some output seen (running, not waiting) */
    int *first;                /* per choice: the role chunk is still to be sent */
    size_t *tok_sent;          /* per choice: tokens already streamed */
    int *finished;             /* per choice: finish chunk sent */
    oai_split *split;          /* per choice */
} srv_req;

typedef struct server {
    /* configuration (read-only once running) */
    const char *model_name;
    const char *api_key;       /* NULL: no authentication */
    long max_queued;           /* requests in the server at once; more get 429 */
    size_t max_body;           /* request body bytes; more get 413 */
    double shutdown_timeout;   /* seconds in-flight requests may run after SIGTERM before they are aborted */
    deepinfer_engine *engine;
    di_tokenizer *tok;         /* token strings of logprobs (NULL without a tokenizer) */
    srv_metrics metrics;
    pthread_t thread;
    /* under mu */
    pthread_mutex_t mu;
    pthread_cond_t wake;       /* the engine thread waits here */
    pthread_cond_t idle;       /* signalled when live reaches 0 */
    srv_req *in_head, *in_tail;
    long live;                 /* requests accepted and not yet released by the engine thread */
    long open;                 /* requests allocated (either side still holds them) */
    int gone_pending;          /* some client disconnected: the engine thread looks for them */
    int draining;              /* shutting down: no new requests */
    int abort_all;             /* shutdown timeout passed: abort what still runs */
    int quit;                  /* engine thread: exit when idle */
    int engine_failed;         /* deepinfer_step failed: every request is answered with an error */
    srv_gauges gauges;         /* snapshot refreshed by the engine thread */
    int64_t n_waiting, n_running;
} server;

/* Start / stop the engine thread (server_stop waits until it exits). */
int server_start(server *s);
void server_stop(server *s);

/* Queue a parsed request (HTTP thread). Returns NULL with *status 429 when
 * the server is full or 503 when shutting down; the request then stays the
 * caller's (free with oai_request_free). On success the request belongs to
 * the returned srv_req. */
srv_req *server_submit(server *s, oai_request *r, int endpoint, int *status);

/* Drop the HTTP side's reference; marks the request gone when unfinished. */
void server_release(server *s, srv_req *q);

/* A request id ("chatcmpl-<hex>"). */
void server_new_id(srv_req *q);

/* Start a graceful shutdown: stop accepting, let in-flight requests finish
 * for shutdown_timeout seconds, then abort them. Returns when nothing is
 * live any more. */
void server_drain(server *s);

#endif
