#include "util/file.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

deepinfer_status di_read_file(const char *path, size_t max_bytes, char **out, size_t *len,
                              di_error *err) {
    *out = NULL;
    if (len) *len = 0;
    if (!max_bytes) max_bytes = (size_t)1 << 30;
    FILE *f = fopen(path, "rb");
    if (!f) return di_error_set(err, DEEPINFER_ERR_IO, "cannot open %s: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fileno(f), &st) != 0 || !S_ISREG(st.st_mode)) {
        fclose(f);
        return di_error_set(err, DEEPINFER_ERR_IO, "%s is not a regular file", path);
    }
    if ((unsigned long long)st.st_size > max_bytes) {
        fclose(f);
        return di_error_set(err, DEEPINFER_ERR_LIMIT, "%s is %lld bytes, more than the %zu allowed",
                            path, (long long)st.st_size, max_bytes);
    }
    size_t n = (size_t)st.st_size;
    char *buf = malloc(n + 1);
    if (!buf) {
        fclose(f);
        return di_error_set(err, DEEPINFER_ERR_OUT_OF_MEMORY, "cannot allocate %zu bytes for %s", n, path);
    }
    size_t got = n ? fread(buf, 1, n, f) : 0;
    fclose(f);
    if (got != n) {
        free(buf);
        return di_error_set(err, DEEPINFER_ERR_IO, "short read on %s (%zu of %zu bytes)", path, got, n);
    }
    buf[n] = '\0';
    *out = buf;
    if (len) *len = n;
    return DEEPINFER_OK;
}

deepinfer_status di_map_file(const char *path, di_mapped_file *out, di_error *err) {
    out->data = NULL;
    out->size = 0;
    out->fd = -1;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return di_error_set(err, DEEPINFER_ERR_IO, "cannot open %s: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return di_error_set(err, DEEPINFER_ERR_IO, "%s is not a regular file", path);
    }
    out->fd = fd;
    out->size = (size_t)st.st_size;
    if (out->size == 0) return DEEPINFER_OK;
    void *p = mmap(NULL, out->size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
        close(fd);
        out->fd = -1;
        out->size = 0;
        return di_error_set(err, DEEPINFER_ERR_IO, "cannot mmap %s: %s", path, strerror(errno));
    }
    out->data = p;
    return DEEPINFER_OK;
}

void di_unmap_file(di_mapped_file *f) {
    if (f->data && f->size) munmap((void *)f->data, f->size);
    if (f->fd >= 0) close(f->fd);
    f->data = NULL;
    f->size = 0;
    f->fd = -1;
}

int di_is_file(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

int di_is_dir(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

int di_path_join(char *out, size_t n, const char *a, const char *b) {
    size_t la = strlen(a);
    int r;
    if (la && a[la - 1] == '/') r = snprintf(out, n, "%s%s", a, b);
    else r = snprintf(out, n, "%s/%s", a, b);
    return (r < 0 || (size_t)r >= n) ? -1 : 0;
}
