/*
 * deepinfer.h — the public C API of deepinfer, an inference engine for
 * DeepSeek's V4 family (DeepSeek-V4-Flash, DeepSeek-V4.1-Flash).
 *
 * This is the only header applications include. Everything else under src/
 * is internal and may change.
 *
 * Conventions
 *  - Every call that can fail returns a deepinfer_status (0 = success) and,
 *    where a handle exists, leaves a human-readable message retrievable with
 *    the handle's *_last_error() call. Messages say what to fix.
 *  - The library never calls abort() or exit() on bad input.
 *  - Ownership is stated on each function: "caller frees" means with the
 *    matching *_free / *_close call.
 */
#ifndef DEEPINFER_H
#define DEEPINFER_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define DEEPINFER_VERSION_MAJOR 0
#define DEEPINFER_VERSION_MINOR 1
#define DEEPINFER_VERSION_PATCH 0

/* Status codes. Negative values are errors. */
typedef enum deepinfer_status {
    DEEPINFER_OK = 0,
    DEEPINFER_ERR_INVALID_ARGUMENT = -1, /* a parameter value is out of range or malformed */
    DEEPINFER_ERR_IO = -2,               /* a file could not be opened, read or mapped */
    DEEPINFER_ERR_FORMAT = -3,           /* a file's contents are malformed or inconsistent */
    DEEPINFER_ERR_UNSUPPORTED = -4,      /* valid input this build does not handle */
    DEEPINFER_ERR_OUT_OF_MEMORY = -5,    /* an allocation or a memory budget failed */
    DEEPINFER_ERR_NOT_FOUND = -6,        /* a model, tensor, key or file is missing */
    DEEPINFER_ERR_LIMIT = -7,            /* a size, depth or time limit was exceeded */
    DEEPINFER_ERR_INTERNAL = -8          /* a bug in deepinfer: please report it */
} deepinfer_status;

/* A short constant name for a status code ("invalid argument", ...). */
const char *deepinfer_status_name(deepinfer_status status);

/* The library version as "MAJOR.MINOR.PATCH". */
const char *deepinfer_version(void);

#ifdef __cplusplus
}
#endif

#endif /* DEEPINFER_H */
