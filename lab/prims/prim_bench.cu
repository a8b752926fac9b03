/*
 * prim_bench.cu — the H200's costs of the primitives the decode kernels are built from, measured
 * the way a decode step sees them (a CUDA graph of dependent launches, programmatic dependent
 * launch on every edge). Standalone (no library code): `make lab` builds
 * $(BUILD)/lab/prims/prim_bench. Each row prints µs per unit (per launch, per barrier, per load).
 *
 *   pdl_empty G      a chain of launches that only wait (griddepcontrol.wait) and exit: the cost
 *                    of one kernel boundary on the critical path, G CTAs of 128 threads;
 *   nopdl_empty G    the same without the PDL attribute (full launch latency per kernel);
 *   pdl_dep G        every CTA reads one word the previous launch wrote, adds 1, writes it:
 *                    boundary + one dependent L2 round trip + a store;
 *   pdl_last G       every CTA writes a partial, threadfence, atomic on a counter; the last CTA
 *                    reads the G partials and writes their sum (the last-arriver handoff);
 *   flag_chain G     launches that do NOT use griddepcontrol.wait: CTA 0 of launch i spins
 *                    (ld.acquire) on a counter until launch i-1's G CTAs have each released it,
 *                    then releases the next (a flag handoff in place of grid completion);
 *   gridbar G        one persistent launch of G co-resident CTAs crossing N grid barriers
 *                    (one counter, arrive with a release atomic, spin with ld.acquire): µs per barrier;
 *   chase_l2 / chase_hbm  one thread's dependent loads (pointer chase) in a 4 MB / 2 GB buffer:
 *                    µs per load.
 */
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_ck.cuh"

#define NCHAIN 64 /* launches per graph */
#define NREP 30

static __device__ __forceinline__ void pdl_wait(void) { asm volatile("griddepcontrol.wait;" ::: "memory"); }
static __device__ __forceinline__ void pdl_go(void) { asm volatile("griddepcontrol.launch_dependents;" :::); }
static __device__ __forceinline__ unsigned ld_acquire(const unsigned *p) {
    unsigned v;
    asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
    return v;
}
static __device__ __forceinline__ void red_release(unsigned *p, unsigned v) {
    asm volatile("red.release.gpu.global.add.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}

static __global__ void k_empty(void) {
    pdl_wait();
    pdl_go();
}

static __global__ void k_dep(unsigned *w) {
    pdl_wait();
    pdl_go();
    if (threadIdx.x == 0) {
        unsigned v = *(volatile unsigned *)&w[blockIdx.x * 32];
        w[blockIdx.x * 32] = v + 1;
    }
}

static __global__ void k_last(float *part, unsigned *cnt, float *out) {
    pdl_wait();
    pdl_go();
    __shared__ int last;
    if (threadIdx.x == 0) {
        part[blockIdx.x] = (float)blockIdx.x;
        __threadfence();
        last = atomicAdd(cnt, 1u) == gridDim.x - 1;
    }
    __syncthreads();
    if (!last) return;
    __threadfence();
    float s = 0.0f;
    for (int i = threadIdx.x; i < (int)gridDim.x; i += blockDim.x) s += *(volatile float *)&part[i];
    for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xFFFFFFFFu, s, o);
    if (threadIdx.x == 0) {
        out[0] = s;
        *cnt = 0;
    }
}

/* launch i (of the graph's chain, i = 1..): wait until the counter reached i * G (launch i-1's CTAs
 * each added 1 after their work), then add 1. The counter is reset by a memset node at the graph start. */
static __global__ void k_flag(unsigned *cnt, unsigned target) {
    pdl_go();
    if (threadIdx.x == 0) {
        while (ld_acquire(cnt) < target) {
        }
        red_release(cnt, 1u);
    }
}

static __global__ void k_gridbar(unsigned *cnt, int nbar, unsigned long long *t) {
    unsigned long long t0 = 0, t1;
    if (blockIdx.x == 0 && threadIdx.x == 0) asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
    for (int b = 1; b <= nbar; b++) {
        __syncthreads();
        if (threadIdx.x == 0) {
            red_release(cnt, 1u);
            const unsigned target = (unsigned)b * gridDim.x;
            while (ld_acquire(cnt) < target) {
            }
        }
        __syncthreads();
    }
    if (blockIdx.x == 0 && threadIdx.x == 0) {
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t1));
        *t = t1 - t0;
    }
}

/* Code-size probe: a straight-line body of NF fused multiply-adds on 8 independent accumulators
 * (16 bytes of SASS each: NF = 2048 is ~32 KB of code), executed once per launch. */
#define BIG_BODY(NF)                                                                                   \
    pdl_wait();                                                                                        \
    pdl_go();                                                                                          \
    float a0 = threadIdx.x, a1 = a0 + 1, a2 = a0 + 2, a3 = a0 + 3, a4 = a0 + 4, a5 = a0 + 5, a6 = a0 + 6, \
          a7 = a0 + 7;                                                                                 \
    _Pragma("unroll") for (int i = 0; i < (NF) / 8; i++) {                                             \
        const float c = 1.0f + (float)i * 1e-7f;                                                       \
        a0 = fmaf(a0, c, 0.5f), a1 = fmaf(a1, c, 0.25f), a2 = fmaf(a2, c, 0.125f), a3 = fmaf(a3, c, 1.5f); \
        a4 = fmaf(a4, c, 0.75f), a5 = fmaf(a5, c, 2.5f), a6 = fmaf(a6, c, 3.5f), a7 = fmaf(a7, c, 4.5f);   \
    }                                                                                                  \
    if (a0 + a1 + a2 + a3 + a4 + a5 + a6 + a7 == 12345.0f) out[0] = 1.0f;
static __global__ void k_big2k(float *out) { BIG_BODY(2048) }
static __global__ void k_big8k(float *out) { BIG_BODY(8192) }

/* streams n float4 through L2 (default caching) and exits: evicts the previous kernel's code from L2 */
static __global__ void k_thrash(const float4 *p, size_t n, float *out) {
    pdl_wait();
    pdl_go();
    float acc = 0.0f;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        float4 v = p[i];
        acc += v.x + v.w;
    }
    if (acc == 12345.0f) out[0] = acc;
}

/* k_thrash with an L2 evict-first policy on every load (createpolicy + ld.global.L2::cache_hint): does a
 * weight stream that marks its lines evict-first leave the next kernel's code in L2? */
static __global__ void k_thrash_ef(const float4 *p, size_t n, float *out) {
    pdl_wait();
    pdl_go();
    unsigned long long pol;
    asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(pol));
    float acc = 0.0f;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        float4 v;
        asm volatile("ld.global.L2::cache_hint.v4.f32 {%0, %1, %2, %3}, [%4], %5;"
                     : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w)
                     : "l"(p + i), "l"(pol));
        acc += v.x + v.w;
    }
    if (acc == 12345.0f) out[0] = acc;
}

/* the policy descriptors createpolicy makes (0x12f0... / 0x16f0... / 0x14f0... on the H200, 2026-11-30) */
static __global__ void k_policies(unsigned long long *o) {
    unsigned long long a, b, c;
    asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(a));
    asm volatile("createpolicy.fractional.L2::evict_normal.b64 %0, 1.0;" : "=l"(b));
    asm volatile("createpolicy.fractional.L2::evict_last.b64 %0, 1.0;" : "=l"(c));
    o[0] = a, o[1] = b, o[2] = c;
}

/* k_thrash through cp.async with .L2::cache_hint, the policy from constant memory (cp_pol): in this small
 * kernel the hinted cp.async runs and keeps the next kernel's code in L2 (cp_ef+8k); in the decode kernels
 * ptxas 13.0 miscompiled it (illegal instruction in the FP4 / diagnostic k_gemm_dec instantiations and the
 * routed-expert kernels, docs/cuda-backend.md §7) */
static __constant__ unsigned long long cp_pol;
static __global__ void k_thrash_cp(const float4 *p, size_t n, float *out) {
    __shared__ float4 sb[128];
    pdl_wait();
    pdl_go();
    float acc = 0.0f;
    const uint32_t d = (uint32_t)__cvta_generic_to_shared(&sb[threadIdx.x]);
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        asm volatile("cp.async.cg.shared.global.L2::cache_hint [%0], [%1], 16, %2;\n" ::"r"(d), "l"(p + i), "l"(cp_pol));
        asm volatile("cp.async.wait_all;\n" ::: "memory");
        acc += sb[threadIdx.x].x + sb[threadIdx.x].w;
    }
    if (acc == 12345.0f) out[0] = acc;
}

/* a weight stream as the decode kernels read it: CTA b streams its own contiguous slice of [p, p + n)
 * through plain cp.async, then (demote) one thread re-marks the slice evict_first with a bulk L2 prefetch
 * carrying the policy. Measured: no effect (blk_dem+8k - blk_dem = blk_nodem+8k - blk_nodem = 37 us) */
static __global__ void k_thrash_blk(const float4 *p, size_t n, float *out, int demote) {
    __shared__ float4 sb[128];
    pdl_wait();
    pdl_go();
    const size_t per = n / gridDim.x, b0 = blockIdx.x * per;
    float acc = 0.0f;
    const uint32_t d = (uint32_t)__cvta_generic_to_shared(&sb[threadIdx.x]);
    for (size_t i = b0 + threadIdx.x; i < b0 + per; i += blockDim.x) {
        asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(d), "l"(p + i));
        asm volatile("cp.async.wait_all;\n" ::: "memory");
        acc += sb[threadIdx.x].x + sb[threadIdx.x].w;
    }
    __syncthreads();
    if (demote && threadIdx.x == 0)
        asm volatile("cp.async.bulk.prefetch.L2.global.L2::cache_hint [%0], %1, %2;\n" ::"l"(p + b0),
                     "r"((unsigned)(per * 16)), "l"(0x12F0000000000000ull) : "memory");
    if (acc == 12345.0f) out[0] = acc;
}

static __global__ void k_chase(const unsigned *buf, int n, unsigned *out, unsigned long long *t) {
    unsigned i = 0;
    unsigned long long t0, t1;
    for (int k = 0; k < 64; k++) i = buf[i]; /* warm the first lines of the chain */
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
    for (int k = 0; k < n; k++) i = buf[i];
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t1));
    *out = i;
    *t = t1 - t0;
}

/* median µs per launch of a graph holding NCHAIN launches made by mk(i) (after a memset node) */
typedef int (*mk_fn)(int i, int g, cudaStream_t st, void *ctx);

static int time_chain(const char *name, mk_fn mk, int g, void *ctx, unsigned *reset, cudaStream_t st) {
    cudaGraph_t gr;
    cudaGraphExec_t ge;
    CK(cudaStreamBeginCapture(st, cudaStreamCaptureModeGlobal));
    if (reset) CK(cudaMemsetAsync(reset, 0, 64, st));
    for (int i = 0; i < NCHAIN; i++)
        if (mk(i, g, st, ctx)) {
            fprintf(stderr, "%s: launch failed\n", name);
            cudaGraph_t dummy;
            cudaStreamEndCapture(st, &dummy);
            return 1;
        }
    CK(cudaStreamEndCapture(st, &gr));
    CK(cudaGraphInstantiate(&ge, gr, 0));
    cudaEvent_t a, b;
    CK(cudaEventCreate(&a));
    CK(cudaEventCreate(&b));
    float ms[NREP];
    for (int r = 0; r < NREP; r++) {
        CK(cudaEventRecord(a, st));
        CK(cudaGraphLaunch(ge, st));
        CK(cudaEventRecord(b, st));
        CK(cudaEventSynchronize(b));
        CK(cudaEventElapsedTime(&ms[r], a, b));
    }
    for (int i = 0; i < NREP; i++)
        for (int j = i + 1; j < NREP; j++)
            if (ms[j] < ms[i]) {
                float x = ms[i];
                ms[i] = ms[j], ms[j] = x;
            }
    printf("%-12s G=%-4d %7.2f us per launch (graph of %d, median of %d)\n", name, g, ms[NREP / 2] * 1e3f / NCHAIN,
           NCHAIN, NREP);
    CK(cudaGraphExecDestroy(ge));
    CK(cudaGraphDestroy(gr));
    return 0;
}

typedef struct {
    unsigned *w, *cnt;
    float *part, *out;
    const float4 *thr;
    size_t nthr;
    int mode; /* big probes: 0 big2k, 1 big8k, 2 thrash alone, 3 thrash + big2k, 4 thrash + big8k,
               * 5 evict-first thrash alone, 6 evict-first thrash + big8k, 7 / 8 cp.async thrash (evict_normal /
               * evict_first policy from constant memory) + big8k, 9 / 10 16 x 16 MB cp.async kernels (demoted /
               * not) + big8k, 11 / 12 the same without big8k */
} bctx;

static int launch_pdl(const void *kern, void **args, int g, int pdl, cudaStream_t st) {
    cudaLaunchConfig_t cf = {};
    cudaLaunchAttribute at[1];
    at[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    at[0].val.programmaticStreamSerializationAllowed = 1;
    cf.gridDim = dim3(g), cf.blockDim = dim3(128), cf.stream = st, cf.attrs = at, cf.numAttrs = pdl ? 1 : 0;
    return cudaLaunchKernelExC(&cf, kern, args) != cudaSuccess;
}

static int mk_empty(int i, int g, cudaStream_t st, void *c) { return (void)c, launch_pdl((const void *)k_empty, NULL, g, i > 0, st); }
static int mk_nopdl(int i, int g, cudaStream_t st, void *c) { return (void)i, (void)c, launch_pdl((const void *)k_empty, NULL, g, 0, st); }
/* the first launch of a graph follows its memset node: no programmatic edge */
static int mk_dep_pdl(int i, int g, cudaStream_t st, void *vc) {
    void *a[] = {&((bctx *)vc)->w};
    return launch_pdl((const void *)k_dep, a, g, i > 0, st);
}
static int mk_last(int i, int g, cudaStream_t st, void *vc) {
    bctx *c = (bctx *)vc;
    void *a[] = {&c->part, &c->cnt, &c->out};
    return launch_pdl((const void *)k_last, a, g, i > 0, st);
}
static int mk_flag(int i, int g, cudaStream_t st, void *vc) {
    unsigned target = (unsigned)(i * g);
    void *a[] = {&((bctx *)vc)->cnt, &target};
    return launch_pdl((const void *)k_flag, a, g, i > 0, st);
}

static int mk_big(int i, int g, cudaStream_t st, void *vc) {
    bctx *c = (bctx *)vc;
    void *a1[] = {&c->out};
    void *a3[] = {(void *)&c->thr, &c->nthr, &c->out};
    if (c->mode >= 2 && c->mode <= 4 && launch_pdl((const void *)k_thrash, a3, 2 * 132, i > 0, st)) return 1;
    if ((c->mode == 5 || c->mode == 6) && launch_pdl((const void *)k_thrash_ef, a3, 2 * 132, i > 0, st)) return 1;
    if ((c->mode == 7 || c->mode == 8) && launch_pdl((const void *)k_thrash_cp, a3, 2 * 132, i > 0, st)) return 1;
    if (c->mode >= 9) { /* 16 kernels of 16 MB each (demoted: modes 9 / 11) */
        for (int k = 0; k < 16; k++) {
            const float4 *q = c->thr + (size_t)k * (c->nthr / 16);
            size_t nq = c->nthr / 16;
            int dm = c->mode == 9 || c->mode == 11;
            void *a4[] = {(void *)&q, &nq, &c->out, &dm};
            if (launch_pdl((const void *)k_thrash_blk, a4, 2 * 132, i > 0 || k > 0, st)) return 1;
        }
        if (c->mode >= 11) return 0;
    }
    if (c->mode == 0 || c->mode == 3) return launch_pdl((const void *)k_big2k, a1, g, 1, st);
    if (c->mode == 1 || c->mode == 4 || (c->mode >= 6 && c->mode <= 10)) return launch_pdl((const void *)k_big8k, a1, g, 1, st);
    return 0;
}

int main(int argc, char **argv) {
    (void)argc, (void)argv;
    setvbuf(stdout, NULL, _IOLBF, 0); /* rows appear as they finish (a run cut by a time limit keeps them) */
    cudaStream_t st;
    CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
    int sms = 0;
    CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
    bctx c;
    CK(cudaMalloc(&c.w, 1 << 20));
    CK(cudaMalloc(&c.cnt, 256));
    CK(cudaMalloc(&c.part, 1 << 16));
    CK(cudaMalloc(&c.out, 256));
    CK(cudaMemset(c.w, 0, 1 << 20));
    CK(cudaMemset(c.cnt, 0, 256));
    CK(cudaDeviceSynchronize());
    const int gs[] = {1, 32, sms, 2 * sms, 6 * sms};
    printf("# prim_bench: %d SMs\n", sms);
    for (int k = 0; k < 5; k++) time_chain("pdl_empty", mk_empty, gs[k], &c, NULL, st);
    for (int k = 0; k < 3; k++) time_chain("nopdl_empty", mk_nopdl, gs[k], &c, NULL, st);
    for (int k = 0; k < 4; k++) time_chain("pdl_dep", mk_dep_pdl, gs[k], &c, NULL, st);
    for (int k = 0; k < 4; k++) time_chain("pdl_last", mk_last, gs[k], &c, NULL, st);
    for (int k = 0; k < 3; k++) time_chain("flag_chain", mk_flag, gs[k], &c, c.cnt, st);

    /* code fetch: a big kernel hot (the same code every launch) vs after a 256 MB stream through L2 */
    {
        float4 *thr;
        const size_t nb = (size_t)256 << 20;
        CK(cudaMalloc(&thr, nb));
        CK(cudaMemset(thr, 0, nb));
        c.thr = thr, c.nthr = nb / 16;
        const char *nm[] = {"big2k_hot", "big8k_hot", "thrash", "thrash+2k", "thrash+8k", "thrash_ef", "thrash_ef+8k"};
        for (int m = 0; m < 5; m++) {
            c.mode = m;
            time_chain(nm[m], mk_big, sms, &c, NULL, st);
        }
        CK(cudaFree(thr));
    }
    unsigned long long *dt, ht;
    CK(cudaMalloc(&dt, 8));
    const int gbs[] = {32, sms, 2 * sms};
    for (int k = 0; k < 3; k++) {
        const int nbar = 200;
        /* the counter reset on the same stream as the kernel (a legacy-stream memset is not ordered
         * with a non-blocking stream: a reset landing mid-run would leave the barrier waiting) */
        CK(cudaMemsetAsync(c.cnt, 0, 4, st));
        k_gridbar<<<gbs[k], 128, 0, st>>>(c.cnt, nbar, dt);
        CK(cudaMemsetAsync(c.cnt, 0, 4, st));
        k_gridbar<<<gbs[k], 128, 0, st>>>(c.cnt, nbar, dt);
        CK(cudaStreamSynchronize(st));
        CK(cudaMemcpy(&ht, dt, 8, cudaMemcpyDeviceToHost));
        printf("%-12s G=%-4d %7.2f us per barrier (%d barriers)\n", "gridbar", gbs[k], ht / 1e3 / nbar, nbar);
    }
    /* pointer chases: a random cycle over n words of stride 64 B */
    const size_t sizes[] = {4u << 20, (size_t)2 << 30};
    const char *nm[] = {"chase_l2", "chase_hbm"};
    for (int k = 0; k < 2; k++) {
        size_t nw = sizes[k] / 4, nl = sizes[k] / 64;
        unsigned *h = (unsigned *)malloc(nl * sizeof(unsigned)), *hb;
        for (size_t i = 0; i < nl; i++) h[i] = (unsigned)i;
        srand(7);
        for (size_t i = nl - 1; i > 0; i--) {
            size_t j = ((size_t)rand() * 2654435761u + (size_t)rand()) % (i + 1);
            unsigned x = h[i];
            h[i] = h[j], h[j] = x;
        }
        hb = (unsigned *)calloc(nw, sizeof(unsigned));
        for (size_t i = 0; i < nl; i++) hb[(size_t)h[i] * 16] = h[(i + 1) % nl] * 16;
        unsigned *db, *dout;
        CK(cudaMalloc(&db, nw * 4));
        CK(cudaMalloc(&dout, 4));
        CK(cudaMemcpy(db, hb, nw * 4, cudaMemcpyHostToDevice));
        const int n = 2000;
        k_chase<<<1, 1, 0, st>>>(db, n, dout, dt);
        k_chase<<<1, 1, 0, st>>>(db, n, dout, dt);
        CK(cudaStreamSynchronize(st));
        CK(cudaMemcpy(&ht, dt, 8, cudaMemcpyDeviceToHost));
        printf("%-12s %zu MB %7.3f us per dependent load\n", nm[k], sizes[k] >> 20, ht / 1e3 / n);
        CK(cudaFree(db));
        CK(cudaFree(dout));
        free(h);
        free(hb);
    }
    /* last: the evict-first stream (a cache-hinted cp.async faulted on this machine once: if this load
     * faults too, every row above is already printed) */
    {
        float4 *thr;
        const size_t nb = (size_t)256 << 20;
        CK(cudaMalloc(&thr, nb));
        CK(cudaMemset(thr, 0, nb));
        CK(cudaDeviceSynchronize());
        c.thr = thr, c.nthr = nb / 16;
        const char *nm[] = {"thrash_ef", "thrash_ef+8k", "cp_norm+8k", "cp_ef+8k", "blk_dem+8k", "blk_nodem+8k",
                            "blk_dem", "blk_nodem"};
        for (int m = 5; m < 7; m++) {
            c.mode = m;
            time_chain(nm[m - 5], mk_big, sms, &c, NULL, st);
        }
        unsigned long long *dp, hp[3];
        CK(cudaMalloc(&dp, sizeof hp));
        k_policies<<<1, 1, 0, st>>>(dp);
        CK(cudaMemcpy(hp, dp, sizeof hp, cudaMemcpyDeviceToHost));
        printf("createpolicy fractional 1.0: evict_first 0x%016llx evict_normal 0x%016llx evict_last 0x%016llx\n", hp[0],
               hp[1], hp[2]);
        CK(cudaFree(dp));
        const unsigned long long pols[2] = {0x16F0000000000000ull, 0x12F0000000000000ull}; /* normal, first */
        for (int m = 7; m < 9; m++) {
            CK(cudaMemcpyToSymbol(cp_pol, &pols[m - 7], sizeof pols[0]));
            c.mode = m;
            time_chain(nm[m - 5], mk_big, sms, &c, NULL, st);
        }
        for (int m = 9; m < 13; m++) {
            c.mode = m;
            time_chain(nm[m - 5], mk_big, sms, &c, NULL, st);
        }
        CK(cudaFree(thr));
    }
    printf("# done\n");
    return 0;
}
