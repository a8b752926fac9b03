/*
 * dic_common.cuh — device helpers shared by the CUDA kernels: the number
 * formats of src/io/numfmt.h and the fp32 exponential of src/ops/cpu/mathf.h,
 * bit for bit, so that element-wise CUDA ops return the CPU ops' bits.
 */
#ifndef DI_OPS_CUDA_DIC_COMMON_CUH
#define DI_OPS_CUDA_DIC_COMMON_CUH

#include <cuda_runtime.h>
#include <stdint.h>

#include "ops/cuda/dic.h"

#define DIC_LAUNCH_CHECK() return cudaGetLastError()

/* Programmatic dependent launch (PDL, sm_90+): every forward kernel is
 * launched with programmatic stream serialisation (DIC_LAUNCH) and starts
 * with DIC_PDL_ENTER: it lets the next kernel in the stream launch at once
 * (its CTAs become resident as this grid's CTAs finish) and then waits until
 * the previous grid has completed and its writes are visible. A kernel thus
 * never reads a predecessor's output early; what overlaps is the launch
 * latency and CTA start-up of consecutive small kernels (decode launches
 * ~270 of them per step). In CUDA graphs the edges become programmatic.
 * $DEEPINFER_CUDA_PDL=0 launches without the attribute (the wait is then a
 * no-op), for A/B measurements. */
#if defined(DIC_STAMPS)
/* Timeline builds only (make ... NVCC_EXTRA=-DDIC_STAMPS; never the default build): block 0 of every
 * kernel records the global timer before and after its PDL wait, its grid size and block size, in
 * launch-completion order, and where in the sources the stamp sits (file and line: lab/tools/stamps_timeline.py
 * names the kernels) (dic_stamps.cu; $DEEPINFER_CUDA_STAMPS=FILE dumps one replayed step). The
 * buffer pointer is a __constant__ per translation unit (no relocatable device code), set through a
 * host-side registration each unit makes at load time. */
typedef struct dic_stamp {
    unsigned long long t_enter, t_go;
    unsigned grid, block;
    unsigned site; /* DIC_STAMP_SITE: the stamp's source file (hash of its base name) and line */
} dic_stamp;
/* 32-bit FNV-1a of the base name of a path (the hash restarts after each '/'), at compile time; the
 * stamp keeps its low 16 bits beside the line (lab/tools/stamps_timeline.py hashes the sources' names alike) */
static __host__ __device__ constexpr unsigned dic_fnv_base(const char *s, unsigned h) {
    return *s ? dic_fnv_base(s + 1, *s == '/' ? 2166136261u : (h ^ (unsigned char)*s) * 16777619u) : h;
}
#define DIC_STAMP_SITE ((dic_fnv_base(__FILE__, 2166136261u) & 0xFFFFu) << 16 | ((unsigned)__LINE__ & 0xFFFFu))
static __constant__ dic_stamp *dic_stamp_buf_;
static __constant__ unsigned *dic_stamp_cnt_;
#define DIC_STAMP_MAX 4096
extern "C" int dic_stamp_register(void (*set)(void *buf, void *cnt));
static void dic_stamp_set_(void *buf, void *cnt) {
    (void)cudaMemcpyToSymbol(dic_stamp_buf_, &buf, sizeof buf);
    (void)cudaMemcpyToSymbol(dic_stamp_cnt_, &cnt, sizeof cnt);
}
static int dic_stamp_reg_ __attribute__((unused)) = dic_stamp_register(dic_stamp_set_);
static __device__ __forceinline__ unsigned long long dic_gtime(void) {
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}
#endif

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900 && defined(DIC_STAMPS)
#define DIC_PDL_ENTER()                                                                                   \
    do {                                                                                                  \
        const unsigned long long dic_t0_ = dic_gtime();                                                   \
        asm volatile("griddepcontrol.wait;" ::: "memory");                                                \
        asm volatile("griddepcontrol.launch_dependents;" :::);                                            \
        if (dic_stamp_buf_ && threadIdx.x == 0 && threadIdx.y == 0 && blockIdx.x == 0 && blockIdx.y == 0 && \
            blockIdx.z == 0) {                                                                            \
            const unsigned dic_s_ = atomicAdd(dic_stamp_cnt_, 1u);                                        \
            if (dic_s_ < DIC_STAMP_MAX) {                                                                 \
                dic_stamp_buf_[dic_s_].t_enter = dic_t0_;                                                 \
                dic_stamp_buf_[dic_s_].t_go = dic_gtime();                                                \
                dic_stamp_buf_[dic_s_].grid = gridDim.x * gridDim.y * gridDim.z;                          \
                dic_stamp_buf_[dic_s_].block = blockDim.x * blockDim.y * blockDim.z;                      \
                constexpr unsigned dic_site_ = DIC_STAMP_SITE;                                            \
                dic_stamp_buf_[dic_s_].site = dic_site_;                                                  \
            }                                                                                             \
        }                                                                                                 \
    } while (0)
/* A phase mark inside a kernel (timeline builds only): thread 0 of block 0 records the global timer as
 * a stamp with grid 0 and block = tag, so the dump shows where block 0's time goes between its go and
 * its exit. Use after the work of a phase is issued AND consumed (a value read, a barrier passed).
 * DIC_STAMP_MARK(tag) records the same stamp from whichever thread calls it (the caller picks one
 * thread of one CTA, e.g. thread 0 of a last-arriving CTA, so its phases show too). */
#define DIC_STAMP_MARK(tag)                                                                               \
    do {                                                                                                  \
        if (dic_stamp_buf_) {                                                                             \
            const unsigned dic_s_ = atomicAdd(dic_stamp_cnt_, 1u);                                        \
            if (dic_s_ < DIC_STAMP_MAX) {                                                                 \
                const unsigned long long dic_t_ = dic_gtime();                                            \
                dic_stamp_buf_[dic_s_].t_enter = dic_t_;                                                  \
                dic_stamp_buf_[dic_s_].t_go = dic_t_;                                                     \
                dic_stamp_buf_[dic_s_].grid = 0u;                                                         \
                dic_stamp_buf_[dic_s_].block = (unsigned)(tag);                                           \
                constexpr unsigned dic_site_ = DIC_STAMP_SITE;                                            \
                dic_stamp_buf_[dic_s_].site = dic_site_;                                                  \
            }                                                                                             \
        }                                                                                                 \
    } while (0)
#define DIC_STAMP_PHASE(tag)                                                                              \
    do {                                                                                                  \
        if (threadIdx.x == 0 && threadIdx.y == 0 && blockIdx.x == 0 && blockIdx.y == 0 && blockIdx.z == 0) \
            DIC_STAMP_MARK(tag);                                                                          \
    } while (0)
/* The same mark from the calling thread, whatever its block (another name of DIC_STAMP_MARK). */
#define DIC_STAMP_PHASE_ANY(tag) DIC_STAMP_MARK(tag)
#elif defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
#define DIC_PDL_ENTER()                                         \
    do {                                                        \
        asm volatile("griddepcontrol.wait;" ::: "memory");      \
        asm volatile("griddepcontrol.launch_dependents;" :::);  \
    } while (0)
#else
#define DIC_PDL_ENTER() \
    do {                \
    } while (0)
#endif
#ifndef DIC_STAMP_PHASE
#define DIC_STAMP_PHASE(tag) \
    do {                     \
    } while (0)
#define DIC_STAMP_MARK(tag) \
    do {                    \
    } while (0)
#endif
#ifndef DIC_STAMP_PHASE_ANY
#define DIC_STAMP_PHASE_ANY(tag) \
    do {                         \
    } while (0)
#endif

extern "C" int dic_pdl_enabled(void);
extern "C" int dic_pdl_take(void); /* this launch may use PDL (and re-arm) */

#define DIC_LAUNCH(kern, grid, block, smem, st, ...)                                         \
    do {                                                                                   \
        cudaLaunchConfig_t dic_cfg_ = {};                                                  \
        cudaLaunchAttribute dic_at_[1];                                                    \
        dic_at_[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;                \
        dic_at_[0].val.programmaticStreamSerializationAllowed = 1;                         \
        dic_cfg_.gridDim = dim3(grid);                                                     \
        dic_cfg_.blockDim = dim3(block);                                                   \
        dic_cfg_.dynamicSmemBytes = (size_t)(smem);                                        \
        dic_cfg_.stream = (st);                                                            \
        dic_cfg_.attrs = dic_at_;                                                          \
        dic_cfg_.numAttrs = dic_pdl_take() ? 1 : 0;                                        \
        (void)cudaLaunchKernelEx(&dic_cfg_, kern, __VA_ARGS__);                            \
    } while (0)

/* DIC_LAUNCH's configuration for launches that also take a cluster shape (cudaLaunchKernelEx): clusters of
 * `cluster` CTAs where that is more than one, programmatic dependent launch where dic_pdl_take() allows it.
 * `at` (two entries) holds the attributes and must live until the launch. */
static inline cudaLaunchConfig_t dic_launch_cfg(dim3 grid, dim3 block, size_t smem, cudaStream_t st, dim3 cluster,
                                                cudaLaunchAttribute *at) {
    cudaLaunchConfig_t cfg = {};
    unsigned na = 0;
    if (cluster.x * cluster.y * cluster.z > 1) {
        at[na].id = cudaLaunchAttributeClusterDimension;
        at[na].val.clusterDim.x = cluster.x, at[na].val.clusterDim.y = cluster.y, at[na].val.clusterDim.z = cluster.z;
        na++;
    }
    if (dic_pdl_take()) {
        at[na].id = cudaLaunchAttributeProgrammaticStreamSerialization;
        at[na].val.programmaticStreamSerializationAllowed = 1;
        na++;
    }
    cfg.gridDim = grid, cfg.blockDim = block, cfg.dynamicSmemBytes = smem, cfg.stream = st;
    cfg.attrs = at, cfg.numAttrs = na;
    return cfg;
}

static __device__ __forceinline__ float dic_bf16_to_f32(uint16_t h) { return __uint_as_float((uint32_t)h << 16); }

/* Round-to-nearest-even; NaN stays a quiet NaN (numfmt.h di_f32_to_bf16). */
static __device__ __forceinline__ uint16_t dic_f32_to_bf16(float f) {
    uint32_t u = __float_as_uint(f);
    if ((u & 0x7FFFFFFFu) > 0x7F800000u) return (uint16_t)((u >> 16) | 0x0040u);
    u += 0x7FFFu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

static __device__ __forceinline__ float dic_round_bf16(float f) { return dic_bf16_to_f32(dic_f32_to_bf16(f)); }

/* RMSNorm's scale 1 / sqrt(mean(x^2) + eps) for a bf16 row x of D values, from
 * `s`, the fp64 sum of the squares in any order: when the fp32 rounding of the
 * mean could differ from the CPU's sequential-order sum (norm.c), the row is
 * summed again in that order, so the result is the CPU's bit for bit. */
/* Out-of-line copies of the IEEE divisions and the square root (code size, docs/kernels/small-kernels.md: each inline
 * div.rn / sqrt.rn carries its own fast path and slow-path subroutine, ~0.5-1.7 KB of SASS; a kernel with
 * several call sites keeps one copy). The same operation: a call only moves where the instructions live. */
static __device__ __noinline__ double dic_ddiv_ool(double x, double y) { return __ddiv_rn(x, y); }
static __device__ __noinline__ float dic_fdiv_ool(float x, float y) { return __fdiv_rn(x, y); }
static __device__ __noinline__ float dic_fsqrt_ool(float x) { return __fsqrt_rn(x); }

/* The rare ambiguous case out of line (code size: the hot path stays short and contiguous). OOL: its
 * division through dic_ddiv_ool (shared with the caller's). */
template <int OOL = 0> static inline __device__ __noinline__ float dic_rms_seq_mean(const uint16_t *x, int D) {
    double s = 0.0;
#pragma unroll 1
    for (int i = 0; i < D; i++) {
        const double v = (double)dic_bf16_to_f32(x[i]);
        s = __dadd_rn(s, __dmul_rn(v, v));
    }
    return __double2float_rn(OOL ? dic_ddiv_ool(s, (double)D) : __ddiv_rn(s, (double)D));
}
/* OOL = 1: the division, square root and reciprocal through the out-of-line copies above (kernels with
 * other call sites of them: one copy each in the kernel's code); the same operations in the same order. */
template <int OOL = 0>
static __device__ __forceinline__ float dic_rms_scale(double s, const uint16_t *x, int D, float eps) {
    const double qd = OOL ? dic_ddiv_ool(s, (double)D) : __ddiv_rn(s, (double)D);
    const double del = __dadd_rn(__dmul_rn((double)(2 * D), 0x1p-53), 0x1p-51);
    float f = __double2float_rn(qd);
    const float lo = __double2float_rn(__dmul_rn(qd, 1.0 - del)), hi = __double2float_rn(__dmul_rn(qd, 1.0 + del));
    if (!(f == lo && f == hi)) f = dic_rms_seq_mean<OOL>(x, D); /* ambiguous (or NaN): the CPU's sequential order */
    if (OOL) return dic_fdiv_ool(1.0f, dic_fsqrt_ool(__fadd_rn(f, eps)));
    return __fdiv_rn(1.0f, __fsqrt_rn(__fadd_rn(f, eps)));
}

/* e4m3 byte -> fp32 (exact; 0x7F / 0xFF are NaN). */
static __device__ __forceinline__ float dic_e4m3_to_f32(uint8_t b) {
    int s = b >> 7, e = (b >> 3) & 15, m = b & 7;
    float v;
    if (e == 15 && m == 7) v = __int_as_float(0x7FC00000);
    else if (e == 0) v = (float)m * 0.001953125f; /* m * 2^-9 */
    else v = __int_as_float(((e - 7 + 127) << 23) | (m << 20));
    return s ? -v : v;
}

/* e2m1 nibble -> fp32: 0, 0.5, 1, 1.5, 2, 3, 4, 6 with a sign bit. */
static __device__ __forceinline__ float dic_e2m1_to_f32(uint32_t nib) {
    const float mag[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};
    float v = mag[nib & 7];
    return (nib & 8) ? -v : v;
}

/* 2^(b-127) (b = 0xFF: NaN). b = 0 gives 2^-127, a subnormal. */
static __device__ __forceinline__ float dic_e8m0_to_f32(uint8_t b) {
    if (b == 0xFF) return __int_as_float(0x7FC00000);
    if (b == 0) return __int_as_float(0x00400000);
    return __int_as_float((uint32_t)b << 23);
}

/* fp32 -> e4m3, RNE, saturating to ±448; NaN -> 0x7F (numfmt.c). */
static __device__ __forceinline__ uint8_t dic_f32_to_e4m3(float f) {
    if (f != f) return 0x7F;
    uint8_t sign = (__float_as_uint(f) >> 31) ? 0x80 : 0;
    float a = fabsf(f);
    if (a >= 464.0f) return sign | 0x7E;
    if (a < 0.015625f) return sign | (uint8_t)__float2int_rn(a * 512.0f);
    uint32_t u = __float_as_uint(a);
    int e = (int)(u >> 23) - 127;                  /* a = 1.f * 2^e */
    float frac = __uint_as_float((u & 0x7FFFFFu) | 0x3F800000u); /* [1, 2) */
    int m = __float2int_rn((frac - 1.0f) * 8.0f);
    if (m == 8) {
        m = 0;
        e += 1;
    }
    int ef = e + 7;
    if (ef > 15 || (ef == 15 && m == 7)) return sign | 0x7E;
    return sign | (uint8_t)((ef << 3) | m);
}

/* fp32 -> e2m1 nibble, RNE ties to the even code, saturating; NaN -> 0. */
static __device__ __forceinline__ uint8_t dic_f32_to_e2m1(float f) {
    if (f != f) return 0;
    uint8_t sign = (__float_as_uint(f) >> 31) ? 8 : 0;
    float a = fabsf(f);
    uint8_t c;
    if (a <= 0.25f) c = 0;
    else if (a < 0.75f) c = 1;
    else if (a <= 1.25f) c = 2;
    else if (a < 1.75f) c = 3;
    else if (a <= 2.5f) c = 4;
    else if (a < 3.5f) c = 5;
    else if (a <= 5.0f) c = 6;
    else c = 7;
    return sign | c;
}

/* 2^ceil(log2 t) from the fp32 bits, t > 0 (numfmt.c di_pow2_ceil). */
static __device__ __forceinline__ float dic_pow2_ceil(float t) {
    uint32_t u = __float_as_uint(t);
    int be = (int)((u >> 23) & 0xFF);
    if (be == 0) return __int_as_float(0x00800000); /* 2^-126 */
    int e = be - 127 + ((u & 0x7FFFFFu) != 0);
    /* e in [-126, 128]; 2^128 is inf as in ldexpf */
    if (e > 127) return __int_as_float(0x7F800000);
    return __int_as_float((e + 127) << 23);
}

/* The CPU backend's expf (mathf.c), same bits: evaluated in double. */
__device__ static const double dic_expf_tab[32] = {
    0x1.0000000000000p+0, 0x1.059b0d3158574p+0, 0x1.0b5586cf9890fp+0, 0x1.11301d0125b51p+0,
    0x1.172b83c7d517bp+0, 0x1.1d4873168b9aap+0, 0x1.2387a6e756238p+0, 0x1.29e9df51fdee1p+0,
    0x1.306fe0a31b715p+0, 0x1.371a7373aa9cbp+0, 0x1.3dea64c123422p+0, 0x1.44e086061892dp+0,
    0x1.4bfdad5362a27p+0, 0x1.5342b569d4f82p+0, 0x1.5ab07dd485429p+0, 0x1.6247eb03a5585p+0,
    0x1.6a09e667f3bcdp+0, 0x1.71f75e8ec5f74p+0, 0x1.7a11473eb0187p+0, 0x1.82589994cce13p+0,
    0x1.8ace5422aa0dbp+0, 0x1.93737b0cdc5e5p+0, 0x1.9c49182a3f090p+0, 0x1.a5503b23e255dp+0,
    0x1.ae89f995ad3adp+0, 0x1.b7f76f2fb5e47p+0, 0x1.c199bdd85529cp+0, 0x1.cb720dcef9069p+0,
    0x1.d5818dcfba487p+0, 0x1.dfc97337b9b5fp+0, 0x1.ea4afa2a490dap+0, 0x1.f50765b6e4540p+0,
};

static __device__ __forceinline__ float dic_expf(float x) {
    if (x != x) return x;
    double xd = x < -150.0f ? -150.0 : x > 100.0f ? 100.0 : (double)x;
    double z = __dmul_rn(xd, 0x1.71547652b82fep+5);
    double kd = __dadd_rn(__dadd_rn(z, 0x1.8p52), -0x1.8p52);
    double r = __dadd_rn(z, -kd);
    long long k = (long long)kd;
    double p = fma(0x1.5d87fe78a6731p-35, r, 0x1.3b2ab6fba4e77p-27);
    p = fma(p, r, 0x1.c6b08d704a0c0p-20);
    p = fma(p, r, 0x1.ebfbdff82c58fp-13);
    p = fma(p, r, 0x1.62e42fefa39efp-6);
    p = fma(p, r, 1.0);
    unsigned long long tb = (unsigned long long)__double_as_longlong(dic_expf_tab[k & 31]);
    tb += (unsigned long long)((k - (k & 31)) / 32) << 52;
    return __double2float_rn(__dmul_rn(__longlong_as_double((long long)tb), p));
}

/* Correctly rounded fp32 ops that nvcc may not contract into FMAs. */
static __device__ __forceinline__ float dic_mul(float a, float b) { return __fmul_rn(a, b); }
static __device__ __forceinline__ float dic_add(float a, float b) { return __fadd_rn(a, b); }

/* ---- Philox4x32-10 and Gumbel noise (src/engine/philox.c, same bits) ---- */

static __device__ __forceinline__ void dic_philox4x32_10(const uint32_t ctr[4], const uint32_t key[2], uint32_t out[4]) {
    uint32_t c0 = ctr[0], c1 = ctr[1], c2 = ctr[2], c3 = ctr[3], k0 = key[0], k1 = key[1];
#pragma unroll
    for (int r = 0; r < 10; r++) {
        uint32_t hi0 = __umulhi(0xD2511F53u, c0), lo0 = 0xD2511F53u * c0;
        uint32_t hi1 = __umulhi(0xCD9E8D57u, c2), lo1 = 0xCD9E8D57u * c2;
        uint32_t n0 = hi1 ^ c1 ^ k0, n2 = hi0 ^ c3 ^ k1;
        c0 = n0;
        c1 = lo1;
        c2 = n2;
        c3 = lo0;
        k0 += 0x9E3779B9u;
        k1 += 0xBB67AE85u;
    }
    out[0] = c0;
    out[1] = c1;
    out[2] = c2;
    out[3] = c3;
}

/* philox.c di_log_det: fp32 only, explicit fmaf where the CPU has fmaf. */
static __device__ __forceinline__ float dic_log_det(float x) {
    uint32_t u = __float_as_uint(x);
    int e = (int)((u >> 23) & 0xFF) - 127;
    float m = __uint_as_float((u & 0x007FFFFFu) | 0x3F800000u);
    if (m > 1.41421356f) {
        m = __fmul_rn(m, 0.5f);
        e += 1;
    }
    float s = __fdiv_rn(__fsub_rn(m, 1.0f), __fadd_rn(m, 1.0f));
    float s2 = __fmul_rn(s, s);
    float p = fmaf(s2, 0.0769230769f, 0.0909090909f);
    p = fmaf(s2, p, 0.111111111f);
    p = fmaf(s2, p, 0.142857143f);
    p = fmaf(s2, p, 0.2f);
    p = fmaf(s2, p, 0.333333333f);
    p = fmaf(s2, p, 1.0f);
    float logm = __fmul_rn(__fmul_rn(2.0f, s), p);
    float fe = (float)e;
    return fmaf(fe, 0.693145752f, fmaf(fe, 1.42860677e-06f, logm));
}

static __device__ __forceinline__ float dic_gumbel_from_bits(uint32_t x) {
    float u = __fmul_rn(__fadd_rn((float)(x >> 8), 0.5f), 1.0f / 16777216.0f);
    float l = dic_log_det(u);
    return -dic_log_det(-l);
}

/* philox.c di_gumbel_at: counter (id / 4, position lo, hi, purpose), key
 * (seed lo ^ stream * golden, seed hi ^ stream * 0x85EBCA6B), lane id % 4. */
static __device__ __forceinline__ float dic_gumbel_at(uint64_t seed, uint32_t stream, uint64_t position,
                                                      uint32_t purpose, uint32_t id) {
    uint32_t key[2] = {(uint32_t)seed ^ (stream * 0x9E3779B9u), (uint32_t)(seed >> 32) ^ (stream * 0x85EBCA6Bu)};
    uint32_t ctr[4] = {id / 4, (uint32_t)position, (uint32_t)(position >> 32), purpose}, r[4];
    dic_philox4x32_10(ctr, key, r);
    uint32_t l = id % 4;
    return dic_gumbel_from_bits(l == 0 ? r[0] : l == 1 ? r[1] : l == 2 ? r[2] : r[3]);
}

#endif
