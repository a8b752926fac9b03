/* rows.c — data movement ops (ops.h): embedding gather, strided copies,
 * row scatters into rings and row stores. Serial memcpy on the CPU. */
#include <math.h>
#include <string.h>

#include "ops/cpu/cpu_ops.h"
#include "ops/ops.h"

void di_cpu_embed(di_exec *x, int M, const int32_t *ids, const uint16_t *table, int width, uint16_t *out, size_t ldo) {
    (void)x;
    for (int m = 0; m < M; m++) memcpy(out + (size_t)m * ldo, table + (size_t)ids[m] * (size_t)width, (size_t)width * 2);
}

void di_cpu_embed_rep(di_exec *x, int M, const int32_t *ids, const uint16_t *table, int width, int copies,
                      uint16_t *out, size_t ldo) {
    for (int k = 0; k < copies; k++) di_embed(x, M, ids, table, width, out + (size_t)k * width, ldo);
}

void di_cpu_copy_2d(di_exec *x, int M, const void *src, size_t lds_bytes, void *dst, size_t ldd_bytes,
                    size_t row_bytes) {
    (void)x;
    if (lds_bytes == row_bytes && ldd_bytes == row_bytes) {
        memcpy(dst, src, (size_t)M * row_bytes);
        return;
    }
    for (int m = 0; m < M; m++)
        memcpy((unsigned char *)dst + (size_t)m * ldd_bytes, (const unsigned char *)src + (size_t)m * lds_bytes, row_bytes);
}

void di_cpu_fill_f32(di_exec *x, float *p, size_t n, float v) {
    (void)x;
    if (v == 0.0f && !signbit(v)) {
        memset(p, 0, n * sizeof *p);
        return;
    }
    for (size_t i = 0; i < n; i++) p[i] = v;
}

void di_cpu_scatter_rows(di_exec *x, int n, const int *src_row, const uint16_t *src, size_t lds, uint16_t *const *dst,
                         int width) {
    (void)x;
    for (int i = 0; i < n; i++)
        memcpy(dst[i], src + (size_t)(src_row ? src_row[i] : i) * lds, (size_t)width * 2);
}

void di_cpu_copy_h2d(di_exec *x, void *dst, const void *src, size_t bytes) {
    (void)x;
    if (bytes) memcpy(dst, src, bytes);
}

void di_cpu_copy_d2h(di_exec *x, void *dst, const void *src, size_t bytes) {
    (void)x;
    if (bytes) memcpy(dst, src, bytes);
}
