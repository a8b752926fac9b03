#include "util/error.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

deepinfer_status di_error_set(di_error *err, deepinfer_status code, const char *fmt, ...) {
    if (err) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err->msg, sizeof err->msg, fmt, ap);
        va_end(ap);
        err->code = code;
    }
    return code;
}

deepinfer_status di_error_prefix(di_error *err, const char *fmt, ...) {
    if (!err) return DEEPINFER_ERR_INTERNAL;
    char prefix[DI_ERROR_MSG_MAX];
    char old[DI_ERROR_MSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(prefix, sizeof prefix, fmt, ap);
    va_end(ap);
    memcpy(old, err->msg, sizeof old);
    size_t pl = strnlen(prefix, sizeof prefix - 1);
    size_t cap = sizeof err->msg;
    memcpy(err->msg, prefix, pl);
    size_t at = pl;
    if (at + 2 < cap) {
        err->msg[at++] = ':';
        err->msg[at++] = ' ';
    }
    size_t ol = strnlen(old, sizeof old - 1);
    if (ol > cap - 1 - at) ol = cap - 1 - at;
    memcpy(err->msg + at, old, ol);
    err->msg[at + ol] = '\0';
    return err->code;
}

void di_error_clear(di_error *err) {
    if (!err) return;
    err->code = DEEPINFER_OK;
    err->msg[0] = '\0';
}

const char *deepinfer_status_name(deepinfer_status status) {
    switch (status) {
    case DEEPINFER_OK: return "ok";
    case DEEPINFER_ERR_INVALID_ARGUMENT: return "invalid argument";
    case DEEPINFER_ERR_IO: return "i/o error";
    case DEEPINFER_ERR_FORMAT: return "format error";
    case DEEPINFER_ERR_UNSUPPORTED: return "unsupported";
    case DEEPINFER_ERR_OUT_OF_MEMORY: return "out of memory";
    case DEEPINFER_ERR_NOT_FOUND: return "not found";
    case DEEPINFER_ERR_LIMIT: return "limit exceeded";
    case DEEPINFER_ERR_INTERNAL: return "internal error";
    }
    return "unknown status";
}

const char *deepinfer_version(void) {
#define DI_STR2(x) #x
#define DI_STR(x) DI_STR2(x)
    return DI_STR(DEEPINFER_VERSION_MAJOR) "." DI_STR(DEEPINFER_VERSION_MINOR) "." DI_STR(
        DEEPINFER_VERSION_PATCH);
}
