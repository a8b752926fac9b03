/*
 * cpu.h — run-time CPU feature detection for kernel dispatch.
 *
 * Kernels exist in up to three versions (scalar C, AVX2+FMA, AVX-512 with
 * BW/VL/DQ); di_cpu_isa() names the best one this machine runs. The
 * environment variable DEEPINFER_CPU_ISA=scalar|avx2|avx512 lowers the choice
 * (never raises it above what the CPU has), so tests can exercise every path.
 */
#ifndef DI_UTIL_CPU_H
#define DI_UTIL_CPU_H

typedef enum di_isa { DI_ISA_SCALAR = 0, DI_ISA_AVX2 = 1, DI_ISA_AVX512 = 2 } di_isa;

/* Best ISA available and allowed by DEEPINFER_CPU_ISA (cached after first call). */
di_isa di_cpu_isa(void);

/* Best ISA the hardware supports, ignoring the environment. */
di_isa di_cpu_isa_hw(void);

/* 1 if the CPU has AVX512_BF16 (dot products of bf16 pairs). */
int di_cpu_has_avx512bf16(void);

/* 1 if the CPU has AVX512_VBMI (byte permutes across a 128-entry table). */
int di_cpu_has_avx512vbmi(void);

/* "scalar", "avx2" or "avx512". */
const char *di_isa_name(di_isa isa);

/* Force a specific ISA (clamped to hardware); used by tests. Returns the ISA set. */
di_isa di_cpu_set_isa(di_isa isa);

#endif
