/*
 * dic_wgmma_ptx.cuh — the Hopper PTX wrappers the wgmma GEMM kernels share
 * (dic_gemm_wgmma.cu, dic_gemm_wgmma3.cu): shared-memory addresses,
 * mbarriers, TMA 2-D loads, the 128-byte-swizzle smem descriptor and the
 * wgmma fence / commit / wait. Include inside the sm_90a feature guard.
 */
#ifndef DI_OPS_CUDA_DIC_WGMMA_PTX_CUH
#define DI_OPS_CUDA_DIC_WGMMA_PTX_CUH

#include <cuda.h>
#include <stdint.h>

static __device__ __forceinline__ uint32_t smem_u32(const void *p) { return (uint32_t)__cvta_generic_to_shared(p); }

static __device__ __forceinline__ void mbar_init(uint32_t b, uint32_t cnt) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(b), "r"(cnt) : "memory");
}
static __device__ __forceinline__ void mbar_expect_tx(uint32_t b, uint32_t bytes) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(b), "r"(bytes) : "memory");
}
static __device__ __forceinline__ void mbar_arrive(uint32_t b) {
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(b) : "memory");
}
static __device__ __forceinline__ void mbar_wait(uint32_t b, uint32_t parity) {
    asm volatile("{\n"
                 ".reg .pred P1;\n"
                 "WAIT_LOOP:\n"
                 "mbarrier.try_wait.parity.shared::cta.b64 P1, [%0], %1;\n"
                 "@!P1 bra WAIT_LOOP;\n"
                 "}\n" ::"r"(b),
                 "r"(parity)
                 : "memory");
}
static __device__ __forceinline__ void tma_load_2d(uint32_t dst, const CUtensorMap *map, int c0, int c1, uint32_t bar) {
    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];\n"
                 ::"r"(dst), "l"((uint64_t)map), "r"(c0), "r"(c1), "r"(bar)
                 : "memory");
}

/* Shared-memory matrix descriptor: K-major, 128-byte swizzle, 8-row groups
 * 1024 bytes apart (SBO); LBO unused for this layout (1). */
static __device__ __forceinline__ uint64_t desc_sw128(uint32_t saddr) {
    return (uint64_t)((saddr & 0x3FFFFu) >> 4) | ((uint64_t)1 << 16) | ((uint64_t)(1024 >> 4) << 32) |
           ((uint64_t)1 << 62);
}

static __device__ __forceinline__ void wg_fence(void) { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
static __device__ __forceinline__ void wg_commit(void) { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
static __device__ __forceinline__ void wg_wait0(void) { asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory"); }
static __device__ __forceinline__ void wg_wait1(void) { asm volatile("wgmma.wait_group.sync.aligned 1;\n" ::: "memory"); }

#endif
