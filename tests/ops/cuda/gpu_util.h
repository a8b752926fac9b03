/*
 * gpu_util.h — helpers for the GPU tests (tests/ops/cuda/gtest_*.c): checked CUDA
 * calls, device buffers, random inputs and comparisons against the CPU ops.
 * The GPU tests run only where a GPU is present (tests/ops/cuda/run.sh); each
 * test runs in its own forked process (tests/runner.c), which initialises
 * CUDA itself.
 */
#ifndef DI_TESTS_GPU_UTIL_H
#define DI_TESTS_GPU_UTIL_H

#include <cuda_runtime_api.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/numfmt.h"
#include "ops/cuda/dic.h"
#include "test.h"

/* A failed CUDA call fails the test with the runtime's message. */
#define CUDA_CHECK(call)                                                                    \
    do {                                                                                    \
        cudaError_t e_ = (call);                                                            \
        if (e_ != cudaSuccess) {                                                            \
            di_test_fail(__FILE__, __LINE__, "%s: %s", #call, cudaGetErrorString(e_));       \
            return;                                                                         \
        }                                                                                   \
    } while (0)

/* Synchronise and check both the launch and the execution. */
#define CUDA_SYNC_CHECK(launch)                                                             \
    do {                                                                                    \
        CUDA_CHECK(launch);                                                                 \
        CUDA_CHECK(cudaDeviceSynchronize());                                                \
    } while (0)

/* Deterministic xorshift generator for test inputs (fresh seed per check). */
static inline uint64_t gt_rand_u64(uint64_t *s) {
    uint64_t x = *s;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return *s = x;
}
static inline float gt_rand_unit(uint64_t *s) { /* [-1, 1) */
    return (float)((double)(gt_rand_u64(s) >> 11) * 0x1.0p-52 - 1.0);
}
static inline void gt_fill_bf16(uint16_t *v, size_t n, float amp, uint64_t *s) {
    for (size_t i = 0; i < n; i++) v[i] = di_f32_to_bf16(amp * gt_rand_unit(s));
}
static inline void gt_fill_f32(float *v, size_t n, float amp, uint64_t *s) {
    for (size_t i = 0; i < n; i++) v[i] = amp * gt_rand_unit(s);
}

/* Device copies (host -> new device buffer; device -> host). NULL on failure. */
static inline void *gt_to_dev(const void *h, size_t bytes) {
    void *d = NULL;
    if (cudaMalloc(&d, bytes ? bytes : 1) != cudaSuccess) return NULL;
    if (bytes && cudaMemcpy(d, h, bytes, cudaMemcpyHostToDevice) != cudaSuccess) {
        cudaFree(d);
        return NULL;
    }
    return d;
}
/* A new host copy of `bytes` device bytes (NULL on failure; free() it). */
static inline void *gt_d2h(const void *d, size_t bytes) {
    void *h = malloc(bytes ? bytes : 1);
    if (cudaMemcpy(h, d, bytes, cudaMemcpyDeviceToHost) != cudaSuccess) {
        free(h);
        return NULL;
    }
    return h;
}
/* Rough standard normal (sum of 4 uniforms) for realistic activations. */
static inline float gt_normal(uint64_t *s) {
    float a = 0;
    for (int i = 0; i < 4; i++) a += gt_rand_unit(s);
    return a * 0.866f;
}
/* A device buffer filled with 0xFF bytes (NaN / -1 poison: unwritten outputs show). */
static inline void *gt_dev_poison(size_t bytes) {
    void *d = NULL;
    if (cudaMalloc(&d, bytes ? bytes : 1) != cudaSuccess) return NULL;
    cudaMemset(d, 0xFF, bytes);
    return d;
}

/* A ready context on a fresh stream with `scratch` bytes. */
static inline int gt_ctx(dic_ctx *c, size_t scratch) {
    memset(c, 0, sizeof *c);
    c->stream = 0;
    c->scratch = NULL;
    c->scratch_cap = scratch;
    c->batch_invariant = 0; /* tests that need invariance set it */
    if (cudaStreamCreate(&c->stream) != cudaSuccess) return 0;
    if (scratch && cudaMalloc(&c->scratch, scratch) != cudaSuccess) return 0;
    int dev = 0;
    cudaGetDevice(&dev);
    cudaDeviceGetAttribute(&c->num_sms, cudaDevAttrMultiProcessorCount, dev);
    return 1;
}

/* Number of differing bf16 values (bit patterns). */
static inline size_t gt_count_diff_u16(const uint16_t *a, const uint16_t *b, size_t n) {
    size_t d = 0;
    for (size_t i = 0; i < n; i++) d += a[i] != b[i];
    return d;
}
static inline size_t gt_count_diff_u32(const void *a, const void *b, size_t n) {
    const uint32_t *x = (const uint32_t *)a, *y = (const uint32_t *)b;
    size_t d = 0;
    for (size_t i = 0; i < n; i++) d += x[i] != y[i];
    return d;
}

/* ||x - y|| / ||y|| over n fp32 values (NaN in x gives +inf). */
static inline double gt_rel_err(const float *x, const float *y, size_t n) {
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) {
        if (x[i] != x[i]) return INFINITY;
        double d = (double)x[i] - y[i];
        num += d * d;
        den += (double)y[i] * y[i];
    }
    return den > 0 ? sqrt(num / den) : sqrt(num);
}

/* Bitwise compare of two rows-of-words arrays (the first `cols` of each row,
 * words of sz = 2 (bf16) or 4 (fp32) bytes); prints the first 3 differences,
 * returns how many differ. */
static inline size_t gt_bits(const char *what, const void *a, const void *b, size_t rows, size_t ld, size_t cols, int sz) {
    size_t bad = 0;
    for (size_t r = 0; r < rows; r++)
        for (size_t i = 0; i < cols; i++) {
            const char *pa = (const char *)a + (r * ld + i) * sz, *pb = (const char *)b + (r * ld + i) * sz;
            if (!memcmp(pa, pb, (size_t)sz)) continue;
            if (bad < 3) {
                double va = sz == 2 ? di_bf16_to_f32(*(const uint16_t *)pa) : *(const float *)pa;
                double vb = sz == 2 ? di_bf16_to_f32(*(const uint16_t *)pb) : *(const float *)pb;
                fprintf(stderr, "    %s [%zu][%zu]: %.9g vs %.9g\n", what, r, i, va, vb);
            }
            bad++;
        }
    return bad;
}

/* Norm-wise relative error of bf16 rows a against b (first `cols` of each row, stride ld); NaN in a: inf. */
static inline double gt_rel_bf16_2d(const uint16_t *a, const uint16_t *b, size_t rows, size_t ld, size_t cols) {
    double num = 0, den = 0;
    for (size_t r = 0; r < rows; r++)
        for (size_t i = 0; i < cols; i++) {
            double x = di_bf16_to_f32(a[r * ld + i]), y = di_bf16_to_f32(b[r * ld + i]);
            if (x != x) return INFINITY;
            num += (x - y) * (x - y), den += y * y;
        }
    return den > 0 ? sqrt(num / den) : sqrt(num);
}

/* A random FP8B weight matrix (block-scaled e4m3, dic.h DIC_WFMT_FP8B) of R x K: e4m3 codes without the
 * NaN codes, then one e8m0 scale byte per B x B block in [slo, shi], drawn in that order from s; the codes
 * and scales copied to the device (*dw, *ds; W describes them) and, where hbf is not NULL, the dequantised
 * values as BF16 bits in hbf[R * K] (exact: an e4m3 value times a power of two). 1 on success. */
static inline int gt_fp8b_make(int R, int K, int B, int slo, int shi, uint64_t *s, uint16_t *hbf, void **dw,
                               void **ds, dic_wmat *W) {
    const size_t nk = (size_t)R * K, ns = (size_t)((R + B - 1) / B) * (size_t)(K / B);
    uint8_t *w = malloc(nk), *sc = malloc(ns);
    float *f = hbf ? malloc(nk * 4) : NULL;
    int ok = w && sc && (f || !hbf);
    if (ok) {
        for (size_t i = 0; i < nk; i++) {
            uint8_t b;
            do b = (uint8_t)gt_rand_u64(s); while ((b & 0x7F) == 0x7F);
            w[i] = b;
        }
        for (size_t i = 0; i < ns; i++) sc[i] = (uint8_t)(slo + (int)(gt_rand_u64(s) % (uint64_t)(shi - slo + 1)));
        if (hbf) {
            di_dequant_fp8_block(w, sc, (size_t)R, (size_t)K, (size_t)B, f);
            for (size_t i = 0; i < nk; i++) hbf[i] = di_f32_to_bf16(f[i]);
        }
        *dw = gt_to_dev(w, nk), *ds = gt_to_dev(sc, ns);
        ok = *dw && *ds;
        *W = (dic_wmat){DIC_WFMT_FP8B, R, K, B, *dw, (const uint8_t *)*ds};
    }
    free(w), free(sc), free(f);
    return ok;
}

#endif
