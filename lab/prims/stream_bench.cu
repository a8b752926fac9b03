/*
 * stream_bench.cu — how fast the H200 streams a read-only weight matrix, the way the decode lm_head
 * reads its 1.06 GB (V4-Flash: 129280 x 4096 BF16), against the d2d copy ceiling every bench ratio
 * uses. Standalone (no library code): `make lab` builds $(BUILD)/lab/prims/stream_bench.
 *
 *   copy              cudaMemcpyAsync d2d of 1 GiB: (read + write bytes) / time = the copy ceiling;
 *   ld U=u B=b        a read-only stream of the lm_head bytes: b CTAs of 256 threads per SM, each
 *                     thread u independent 16-byte ld.global.nc per round, grid-stride rounds;
 *   slice U=u B=b     the same loads, but every CTA walks its own contiguous slice (the GEMV's pattern:
 *                     a CTA owns whole weight rows);
 *   bulk S=s KB       one CTA per SM streams its slice through shared memory with cp.async.bulk
 *                     (TMA bulk copies, mbarrier completion), s stages of 32 KB in flight;
 *   l2keep X MB       the first X MB of the matrix prefetched into L2 with an evict_last policy, then a
 *                     200 MB stream of other bytes at the normal priority (a decode layer's weights),
 *                     then the X MB read again: its time vs the same read without the prefetch says
 *                     whether evict_last lines survive a layer's stream (lm_head rows kept in L2).
 * Every row: median µs of NREP runs (CUDA events around one launch), GB/s of bytes read, and the ratio
 * to the copy ceiling.
 */
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_ck.cuh"

#define NREP 21
#define NT 256

static __device__ __forceinline__ uint4 ld_nc(const uint4 *p) {
    uint4 v;
    asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                 : "l"(p));
    return v;
}

/* grid-stride rounds of U loads per thread */
template <int U>
static __global__ void __launch_bounds__(NT) k_ld(const uint4 *p, size_t n, unsigned *out) {
    unsigned acc = 0;
    const size_t T = (size_t)gridDim.x * NT;
    size_t i = blockIdx.x * (size_t)NT + threadIdx.x;
    for (; i + (U - 1) * T < n; i += U * T) {
        uint4 v[U];
#pragma unroll
        for (int u = 0; u < U; u++) v[u] = ld_nc(p + i + u * T);
#pragma unroll
        for (int u = 0; u < U; u++) acc ^= v[u].x ^ v[u].w;
    }
    for (; i < n; i += T) acc ^= ld_nc(p + i).y;
    if (acc == 0x9E3779B9u) out[0] = acc;
}

/* every CTA its own contiguous slice, U loads per thread per round */
template <int U>
static __global__ void __launch_bounds__(NT) k_slice(const uint4 *p, size_t n, unsigned *out) {
    unsigned acc = 0;
    const size_t per = (n + gridDim.x - 1) / gridDim.x, b0 = blockIdx.x * per;
    const size_t b1 = b0 + per < n ? b0 + per : n;
    size_t i = b0 + threadIdx.x;
    for (; i + (U - 1) * NT < b1; i += U * NT) {
        uint4 v[U];
#pragma unroll
        for (int u = 0; u < U; u++) v[u] = ld_nc(p + i + u * NT);
#pragma unroll
        for (int u = 0; u < U; u++) acc ^= v[u].x ^ v[u].w;
    }
    for (; i < b1; i += NT) acc ^= ld_nc(p + i).y;
    if (acc == 0x9E3779B9u) out[0] = acc;
}

/* TMA bulk copies into a ring of S stages of SB bytes; thread 0 issues, all threads read the stage */
#define SB 32768
static __device__ __forceinline__ uint32_t su32(const void *p) { return (uint32_t)__cvta_generic_to_shared(p); }
static __global__ void __launch_bounds__(NT) k_bulk(const char *p, size_t bytes, int S, unsigned *out) {
    extern __shared__ __align__(128) char ring[];
    __shared__ __align__(8) unsigned long long bar[8];
    const size_t per = ((bytes / gridDim.x) + SB - 1) / SB * SB, b0 = blockIdx.x * per;
    const size_t b1 = b0 + per < bytes ? b0 + per : bytes;
    const int nst = b1 > b0 ? (int)((b1 - b0 + SB - 1) / SB) : 0;
    if (threadIdx.x == 0)
        for (int s = 0; s < S; s++) asm volatile("mbarrier.init.shared.b64 [%0], 1;" ::"r"(su32(&bar[s])));
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    __syncthreads();
    auto issue = [&](int t) {
        const int s = t % S;
        const size_t o = b0 + (size_t)t * SB;
        const unsigned nb = (unsigned)(b1 - o < SB ? b1 - o : SB);
        asm volatile("mbarrier.arrive.expect_tx.shared.b64 _, [%0], %1;" ::"r"(su32(&bar[s])), "r"(nb) : "memory");
        asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(
                         su32(ring + (size_t)s * SB)),
                     "l"(p + o), "r"(nb), "r"(su32(&bar[s]))
                     : "memory");
    };
    if (threadIdx.x == 0)
        for (int t = 0; t < S && t < nst; t++) issue(t);
    unsigned acc = 0;
    for (int t = 0; t < nst; t++) {
        const int s = t % S;
        const unsigned ph = (unsigned)(t / S) & 1u;
        unsigned done = 0;
        while (!done)
            asm volatile("{ .reg .pred q; mbarrier.try_wait.parity.shared.b64 q, [%1], %2; selp.u32 %0, 1, 0, q; }"
                         : "=r"(done)
                         : "r"(su32(&bar[s])), "r"(ph)
                         : "memory");
        const uint4 *r = (const uint4 *)(ring + (size_t)s * SB);
        for (int i = threadIdx.x; i < SB / 16; i += NT) acc ^= r[i].x ^ r[i].w;
        __syncthreads();
        if (threadIdx.x == 0 && t + S < nst) issue(t + S);
    }
    if (acc == 0x9E3779B9u) out[0] = acc;
}

/* [p, p + bytes) into L2 with the evict_last policy (bulk L2 prefetch in 64 KB pieces over the grid) */
static __global__ void k_keep(const char *p, size_t bytes) {
    unsigned long long pol;
    asm volatile("createpolicy.fractional.L2::evict_last.b64 %0, 1.0;" : "=l"(pol));
    const size_t piece = 65536;
    for (size_t o = (blockIdx.x * (size_t)blockDim.x + threadIdx.x) * piece; o < bytes;
         o += (size_t)gridDim.x * blockDim.x * piece) {
        const unsigned nb = (unsigned)(bytes - o < piece ? bytes - o : piece);
        asm volatile("cp.async.bulk.prefetch.L2.global.L2::cache_hint [%0], %1, %2;" ::"l"(p + o), "r"(nb), "l"(pol)
                     : "memory");
    }
}

typedef int (*launch_fn)(void *ctx);

static float median(float *v, int n) {
    for (int i = 1; i < n; i++)
        for (int j = i; j > 0 && v[j] < v[j - 1]; j--) {
            float t = v[j];
            v[j] = v[j - 1], v[j - 1] = t;
        }
    return v[n / 2];
}

int main(void) {
    int dev = 0, sms = 0;
    CK(cudaSetDevice(dev));
    CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
    const size_t lm = (size_t)129280 * 4096 * 2, big = (size_t)1 << 30, other = (size_t)200 << 20;
    char *a, *b, *o;
    unsigned *out;
    CK(cudaMalloc(&a, big + lm));
    CK(cudaMalloc(&b, big));
    CK(cudaMalloc(&o, other));
    CK(cudaMalloc(&out, 64));
    CK(cudaMemset(a, 1, big + lm));
    CK(cudaMemset(b, 2, big));
    CK(cudaMemset(o, 3, other));
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    float t[NREP];
    printf("# stream_bench: %d SMs; lm_head bytes %.3f GB\n", sms, lm / 1e9);

    for (int r = 0; r < NREP; r++) {
        CK(cudaEventRecord(e0));
        CK(cudaMemcpyAsync(b, a, big, cudaMemcpyDeviceToDevice));
        CK(cudaEventRecord(e1));
        CK(cudaEventSynchronize(e1));
        CK(cudaEventElapsedTime(&t[r], e0, e1));
    }
    const float cms = median(t, NREP);
    const double ceil_gbs = 2.0 * big / (cms * 1e-3) / 1e9;
    printf("copy 1 GiB          %8.2f us  %7.0f GB/s (read + write: the ceiling)\n", cms * 1e3, ceil_gbs);

    const uint4 *p4 = (const uint4 *)(a + big); /* the lm_head-sized matrix, after the copy's source */
    const size_t n4 = lm / 16;
#define ROW(label, launch)                                                                                   \
    do {                                                                                                     \
        for (int r = 0; r < NREP; r++) {                                                                     \
            CK(cudaMemset(o, r, other)); /* L2 cold for the matrix */                                        \
            CK(cudaEventRecord(e0));                                                                         \
            launch;                                                                                          \
            CK(cudaGetLastError());                                                                          \
            CK(cudaEventRecord(e1));                                                                         \
            CK(cudaEventSynchronize(e1));                                                                    \
            CK(cudaEventElapsedTime(&t[r], e0, e1));                                                         \
        }                                                                                                    \
        const float ms = median(t, NREP);                                                                    \
        const double gbs = lm / (ms * 1e-3) / 1e9;                                                           \
        printf("%-20s%8.2f us  %7.0f GB/s  %.3f of the copy ceiling\n", label, ms * 1e3, gbs, gbs / ceil_gbs); \
    } while (0)
    char lab[64];
    const int bs[3] = {1, 2, 4};
    for (int k = 0; k < 3; k++) {
        const int g = sms * bs[k];
        snprintf(lab, sizeof lab, "ld U=4 B=%d", bs[k]);
        ROW(lab, (k_ld<4><<<g, NT>>>(p4, n4, out)));
        snprintf(lab, sizeof lab, "ld U=8 B=%d", bs[k]);
        ROW(lab, (k_ld<8><<<g, NT>>>(p4, n4, out)));
        snprintf(lab, sizeof lab, "ld U=16 B=%d", bs[k]);
        ROW(lab, (k_ld<16><<<g, NT>>>(p4, n4, out)));
        snprintf(lab, sizeof lab, "slice U=8 B=%d", bs[k]);
        ROW(lab, (k_slice<8><<<g, NT>>>(p4, n4, out)));
    }
    /* the GEMV's grid: 4040 CTAs of 256 threads, 256 KB each, 8 loads in flight per thread */
    ROW("slice U=8 G=4040", (k_slice<8><<<4040, NT>>>(p4, n4, out)));
    const int stages[3] = {3, 5, 6};
    for (int k = 0; k < 3; k++) {
        const int S = stages[k];
        CK(cudaFuncSetAttribute(k_bulk, cudaFuncAttributeMaxDynamicSharedMemorySize, S * SB));
        snprintf(lab, sizeof lab, "bulk S=%d x 32 KB", S);
        ROW(lab, (k_bulk<<<sms, NT, S * SB>>>(a + big, lm, S, out)));
    }

    /* L2 residency: X MB kept with evict_last, a 200 MB normal stream, then the X MB again */
    const int xs[3] = {16, 32, 48};
    for (int k = 0; k < 3; k++) {
        const size_t X = (size_t)xs[k] << 20, nx = X / 16;
        for (int keep = 0; keep < 2; keep++) {
            for (int r = 0; r < NREP; r++) {
                CK(cudaMemset(b, r, (size_t)256 << 20)); /* L2 cold */
                if (keep) k_keep<<<sms, 32>>>(a + big, X);
                k_ld<8><<<sms * 2, NT>>>((const uint4 *)o, other / 16, out);
                CK(cudaEventRecord(e0));
                k_ld<8><<<sms * 2, NT>>>(p4, nx, out);
                CK(cudaEventRecord(e1));
                CK(cudaEventSynchronize(e1));
                CK(cudaEventElapsedTime(&t[r], e0, e1));
            }
            const float ms = median(t, NREP);
            printf("l2keep %2d MB %-5s %8.2f us  %7.0f GB/s\n", xs[k], keep ? "kept" : "cold", ms * 1e3,
                   X / (ms * 1e-3) / 1e9);
        }
    }
    /* the same without the 200 MB stream in between (upper bound: the X MB hot in L2) */
    for (int r = 0; r < NREP; r++) {
        k_ld<8><<<sms * 2, NT>>>(p4, ((size_t)32 << 20) / 16, out);
        CK(cudaEventRecord(e0));
        k_ld<8><<<sms * 2, NT>>>(p4, ((size_t)32 << 20) / 16, out);
        CK(cudaEventRecord(e1));
        CK(cudaEventSynchronize(e1));
        CK(cudaEventElapsedTime(&t[r], e0, e1));
    }
    printf("l2hot 32 MB         %8.2f us\n", median(t, NREP) * 1e3);
    CK(cudaDeviceSynchronize());
    printf("# done\n");
    return 0;
}
