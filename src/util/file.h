/*
 * file.h — whole-file reads and read-only memory maps.
 */
#ifndef DI_UTIL_FILE_H
#define DI_UTIL_FILE_H

#include <stddef.h>

#include "util/error.h"

/* Read a whole file into a malloc'd buffer with a NUL appended (not counted
 * in *len). Files larger than `max_bytes` (0 = 1 GiB) are refused with
 * DEEPINFER_ERR_LIMIT. Caller frees *out with free(). */
deepinfer_status di_read_file(const char *path, size_t max_bytes, char **out, size_t *len,
                              di_error *err);

/* A read-only private mapping of a whole file. */
typedef struct di_mapped_file {
    const unsigned char *data;
    size_t size;
    int fd;
} di_mapped_file;

/* Map `path` read-only. An empty file maps to data == NULL, size == 0. */
deepinfer_status di_map_file(const char *path, di_mapped_file *out, di_error *err);

/* Unmap and close; safe on a zeroed struct. */
void di_unmap_file(di_mapped_file *f);

/* 1 if `path` exists and is a regular file / a directory, else 0. */
int di_is_file(const char *path);
int di_is_dir(const char *path);

/* Join two path parts with one '/' into `out` (size `n`). Returns 0 on
 * success, -1 if truncated. */
int di_path_join(char *out, size_t n, const char *a, const char *b);

#endif
