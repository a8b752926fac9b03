/*
 * dic_rows.cu — data movement ops of the device-shaped forward (ops.h
 * di_copy_2d, di_fill_f32, di_scatter_rows; src/ops/cpu/rows.c): strided
 * copies, fills and row scatters through device pointer tables.
 */
#include "ops/cuda/dic_common.cuh"
#include "ops/cuda/dic_model.h"

extern "C" cudaError_t dic_copy_2d(const dic_ctx *c, int M, const void *src, size_t lds_bytes, void *dst,
                                   size_t ldd_bytes, size_t row_bytes) {
    if (M <= 0 || row_bytes == 0) return cudaSuccess;
    if (lds_bytes == row_bytes && ldd_bytes == row_bytes)
        return dic_pdl_disarm(), cudaMemcpyAsync(dst, src, (size_t)M * row_bytes, cudaMemcpyDeviceToDevice, c->stream);
    dic_pdl_disarm();
    return cudaMemcpy2DAsync(dst, ldd_bytes, src, lds_bytes, row_bytes, (size_t)M, cudaMemcpyDeviceToDevice,
                             c->stream);
}

static __global__ void k_fill_f32(float *p, size_t n, float v) {
    DIC_PDL_ENTER();
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x, step = (size_t)gridDim.x * blockDim.x;
    for (; i < n; i += step) p[i] = v;
}

extern "C" cudaError_t dic_fill_f32(const dic_ctx *c, float *p, size_t n, float v) {
    if (n == 0) return cudaSuccess;
    size_t blocks = (n + 255) / 256;
    if (blocks > 65536) blocks = 65536;
    DIC_LAUNCH(k_fill_f32, (unsigned)blocks, 256, 0, c->stream, p, n, v);
    DIC_LAUNCH_CHECK();
}

/* One CTA row per entry (grid-stride over entries); 16-byte moves when the
 * source, the destination and the width allow, else 2-byte moves. */
static __global__ void k_scatter_rows(int n, const int *src_row, const uint16_t *src, size_t lds,
                                      uint16_t *const *dst, int width) {
    DIC_PDL_ENTER();
    for (int i = blockIdx.x; i < n; i += gridDim.x) {
        const uint16_t *s = src + (size_t)(src_row ? src_row[i] : i) * lds;
        uint16_t *d = dst[i];
        if (((uintptr_t)s & 15) == 0 && ((uintptr_t)d & 15) == 0 && width % 8 == 0) {
            const uint4 *s4 = (const uint4 *)s;
            uint4 *d4 = (uint4 *)d;
            for (int j = threadIdx.x; j < width / 8; j += blockDim.x) d4[j] = s4[j];
        } else {
            for (int j = threadIdx.x; j < width; j += blockDim.x) d[j] = s[j];
        }
    }
}

extern "C" cudaError_t dic_scatter_rows(const dic_ctx *c, int n, const int *src_row, const uint16_t *src, size_t lds,
                                        uint16_t *const *dst, int width) {
    if (n <= 0 || width <= 0) return cudaSuccess;
    int blocks = n < 65535 ? n : 65535;
    DIC_LAUNCH(k_scatter_rows, blocks, 128, 0, c->stream, n, src_row, src, lds, dst, width);
    DIC_LAUNCH_CHECK();
}
