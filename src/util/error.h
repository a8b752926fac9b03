/*
 * error.h — internal error reporting.
 *
 * Library functions that can fail take a `di_error *` (may be NULL) and
 * return a deepinfer_status. On failure they fill the message with what went
 * wrong and what the user should do about it, e.g.
 *   "tensor layers.3.attn.wq_a.weight: expected shape [1024,4096], found [1024,4095]".
 */
#ifndef DI_UTIL_ERROR_H
#define DI_UTIL_ERROR_H

#include "deepinfer.h"

#define DI_ERROR_MSG_MAX 1024

typedef struct di_error {
    deepinfer_status code;
    char msg[DI_ERROR_MSG_MAX];
} di_error;

/* Record an error (printf-style message) and return `code`, so callers can
 * write `return di_error_set(err, DEEPINFER_ERR_IO, "...", ...);`.
 * `err` may be NULL. */
deepinfer_status di_error_set(di_error *err, deepinfer_status code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Prefix the existing message with more context ("loading model X: <old>"). */
deepinfer_status di_error_prefix(di_error *err, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Clear to DEEPINFER_OK with an empty message. */
void di_error_clear(di_error *err);

#endif
