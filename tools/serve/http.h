/*
 * http.h — the HTTP side of `deepinfer serve` on libmicrohttpd: one thread
 * per connection (a streaming response's reader blocks on its request's
 * condition variable, never on the engine), routes
 *   POST /v1/chat/completions, POST /v1/completions, GET /v1/models,
 *   GET /health, GET /metrics
 * bearer-token authentication of the /v1 paths when an API key is set, a body size
 * limit (413) and OpenAI-shaped errors.
 */
#ifndef DI_SERVE_HTTP_H
#define DI_SERVE_HTTP_H

#include <stddef.h>

#include "serve/serve.h"

typedef struct http_server http_server;

/* Listen on host:port (port 0: any free port; *bound_port receives it).
 * Returns NULL with a message in err when the address cannot be used. */
http_server *http_start(server *s, const char *host, int port, int *bound_port, char *err, size_t errlen);

/* Stop accepting connections (shutdown starts); requests in progress go on. */
void http_quiesce(http_server *h);

/* Close every connection and stop the threads. Safe on NULL. */
void http_stop(http_server *h);

#endif
