/* devmem.c — the backend allocator hook (ops.h di_set_allocator): host
 * memory, 64-byte aligned, unless a backend installs its own. */
#include <stdlib.h>
#include <string.h>

#include "ops/ops.h"

static void *host_alloc(void *ctx, size_t bytes) {
    (void)ctx;
    if (!bytes) bytes = 64;
    return aligned_alloc(64, (bytes + 63) & ~(size_t)63);
}

static void host_free(void *ctx, void *p) {
    (void)ctx;
    free(p);
}

static void host_zero(void *ctx, void *p, size_t bytes) {
    (void)ctx;
    memset(p, 0, bytes);
}

static void host_upload(void *ctx, void *dst, const void *src, size_t bytes) {
    (void)ctx;
    memcpy(dst, src, bytes);
}

static di_allocator g_alloc = {host_alloc, host_free, host_zero, host_upload, NULL};

void di_set_allocator(const di_allocator *a) {
    if (a) g_alloc = *a;
    else g_alloc = (di_allocator){host_alloc, host_free, host_zero, host_upload, NULL};
}

void di_dev_zero(void *p, size_t bytes) {
    if (p && bytes) g_alloc.zero(g_alloc.ctx, p, bytes);
}

void di_dev_upload(void *dst, const void *src, size_t bytes) {
    if (bytes) g_alloc.upload(g_alloc.ctx, dst, src, bytes);
}

void *di_dev_alloc(size_t bytes) { return g_alloc.alloc(g_alloc.ctx, bytes); }

void di_dev_free(void *p) {
    if (p) g_alloc.free(g_alloc.ctx, p);
}
