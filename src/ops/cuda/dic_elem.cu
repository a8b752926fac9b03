/*
 * dic_elem.cu — element-wise helpers (ops.h di_add_bf16_f32, di_add_f32,
 * di_f32_to_bf16_n: one IEEE operation per element, so bit-identical) and
 * the embedding gather. Grid-stride loops over 16-byte vectors when the
 * pointers allow it, scalar elements otherwise and for the tail.
 */
#include "ops/cuda/dic_common.cuh"

#define EL_THREADS 256

static int el_blocks(const dic_ctx *c, size_t nvec) {
    size_t b = (nvec + EL_THREADS - 1) / EL_THREADS;
    size_t cap = (size_t)(c->num_sms > 0 ? c->num_sms : 132) * 8;
    if (b > cap) b = cap;
    return b ? (int)b : 1;
}

/* y[i] += fp32(v[i]): 8 per step (two float4 + one uint4). */
static __global__ void k_add_bf16_f32(float *y, const uint16_t *v, size_t n, int vec) {
    DIC_PDL_ENTER();
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x, st = (size_t)gridDim.x * blockDim.x;
    size_t nv = vec ? n / 8 : 0;
    for (size_t j = i; j < nv; j += st) {
        uint4 q = ((const uint4 *)v)[j];
        float4 a = ((float4 *)y)[2 * j], b = ((float4 *)y)[2 * j + 1];
        a.x += dic_bf16_to_f32((uint16_t)(q.x & 0xFFFFu));
        a.y += dic_bf16_to_f32((uint16_t)(q.x >> 16));
        a.z += dic_bf16_to_f32((uint16_t)(q.y & 0xFFFFu));
        a.w += dic_bf16_to_f32((uint16_t)(q.y >> 16));
        b.x += dic_bf16_to_f32((uint16_t)(q.z & 0xFFFFu));
        b.y += dic_bf16_to_f32((uint16_t)(q.z >> 16));
        b.z += dic_bf16_to_f32((uint16_t)(q.w & 0xFFFFu));
        b.w += dic_bf16_to_f32((uint16_t)(q.w >> 16));
        ((float4 *)y)[2 * j] = a;
        ((float4 *)y)[2 * j + 1] = b;
    }
    for (size_t j = nv * 8 + i; j < n; j += st) y[j] += dic_bf16_to_f32(v[j]);
}

extern "C" cudaError_t dic_add_bf16_f32(const dic_ctx *c, float *y, const uint16_t *v, size_t n) {
    if (!n) return cudaSuccess;
    int vec = (((uintptr_t)y | (uintptr_t)v) & 15) == 0;
    DIC_LAUNCH(k_add_bf16_f32, el_blocks(c, (n + 7) / 8), EL_THREADS, 0, c->stream, y, v, n, vec);
    DIC_LAUNCH_CHECK();
}

static __global__ void k_add_f32(float *out, const float *a, const float *b, size_t n, int vec) {
    DIC_PDL_ENTER();
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x, st = (size_t)gridDim.x * blockDim.x;
    size_t nv = vec ? n / 4 : 0;
    for (size_t j = i; j < nv; j += st) {
        float4 x = ((const float4 *)a)[j], z = ((const float4 *)b)[j];
        ((float4 *)out)[j] = make_float4(x.x + z.x, x.y + z.y, x.z + z.z, x.w + z.w);
    }
    for (size_t j = nv * 4 + i; j < n; j += st) out[j] = a[j] + b[j];
}

extern "C" cudaError_t dic_add_f32(const dic_ctx *c, float *out, const float *a, const float *b, size_t n) {
    if (!n) return cudaSuccess;
    int vec = (((uintptr_t)out | (uintptr_t)a | (uintptr_t)b) & 15) == 0;
    DIC_LAUNCH(k_add_f32, el_blocks(c, (n + 3) / 4), EL_THREADS, 0, c->stream, out, a, b, n, vec);
    DIC_LAUNCH_CHECK();
}

static __global__ void k_f32_to_bf16(const float *x, uint16_t *y, size_t n, int vec) {
    DIC_PDL_ENTER();
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x, st = (size_t)gridDim.x * blockDim.x;
    size_t nv = vec ? n / 8 : 0;
    for (size_t j = i; j < nv; j += st) {
        float4 a = ((const float4 *)x)[2 * j], b = ((const float4 *)x)[2 * j + 1];
        uint4 q;
        q.x = (uint32_t)dic_f32_to_bf16(a.x) | ((uint32_t)dic_f32_to_bf16(a.y) << 16);
        q.y = (uint32_t)dic_f32_to_bf16(a.z) | ((uint32_t)dic_f32_to_bf16(a.w) << 16);
        q.z = (uint32_t)dic_f32_to_bf16(b.x) | ((uint32_t)dic_f32_to_bf16(b.y) << 16);
        q.w = (uint32_t)dic_f32_to_bf16(b.z) | ((uint32_t)dic_f32_to_bf16(b.w) << 16);
        ((uint4 *)y)[j] = q;
    }
    for (size_t j = nv * 8 + i; j < n; j += st) y[j] = dic_f32_to_bf16(x[j]);
}

extern "C" cudaError_t dic_f32_to_bf16_n(const dic_ctx *c, const float *x, uint16_t *y, size_t n) {
    if (!n) return cudaSuccess;
    int vec = (((uintptr_t)x | (uintptr_t)y) & 15) == 0;
    DIC_LAUNCH(k_f32_to_bf16, el_blocks(c, (n + 7) / 8), EL_THREADS, 0, c->stream, x, y, n, vec);
    DIC_LAUNCH_CHECK();
}

/* out[m] + z * width = table[ids[m]] for copy z = blockIdx.z: one CTA row per
 * (token, copy), 16-byte copies. */
static __global__ void k_embed(const int32_t *ids, const uint16_t *table, int width, uint16_t *out, size_t ldo,
                               int vec) {
    DIC_PDL_ENTER();
    const int m = blockIdx.y;
    const uint16_t *src = table + (size_t)ids[m] * width;
    uint16_t *dst = out + (size_t)m * ldo + (size_t)blockIdx.z * width;
    int i = blockIdx.x * blockDim.x + threadIdx.x, st = gridDim.x * blockDim.x;
    if (vec) {
        for (int j = i; j < width / 8; j += st) ((uint4 *)dst)[j] = ((const uint4 *)src)[j];
    } else {
        for (int j = i; j < width; j += st) dst[j] = src[j];
    }
}

extern "C" cudaError_t dic_embed_rep(const dic_ctx *c, int M, const int32_t *ids, const uint16_t *table, int width,
                                     int copies, uint16_t *out, size_t ldo) {
    if (M <= 0 || width <= 0 || copies <= 0) return cudaSuccess;
    int vec = width % 8 == 0 && ldo % 8 == 0 && ((uintptr_t)table & 15) == 0 && ((uintptr_t)out & 15) == 0;
    int per = vec ? width / 8 : width;
    dim3 grid((unsigned)((per + 127) / 128 < 8 ? (per + 127) / 128 : 8), (unsigned)M, (unsigned)copies);
    DIC_LAUNCH(k_embed, grid, 128, 0, c->stream, ids, table, width, out, ldo, vec);
    DIC_LAUNCH_CHECK();
}

extern "C" cudaError_t dic_embed(const dic_ctx *c, int M, const int32_t *ids, const uint16_t *table, int width,
                                 uint16_t *out, size_t ldo) {
    return dic_embed_rep(c, M, ids, table, width, 1, out, ldo);
}
