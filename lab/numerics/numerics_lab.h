/*
 * numerics_lab.h — the numerics probe's kernel families (mma_bits.cu) as numerics_probe.c calls them.
 */
#ifndef DI_LAB_NUMERICS_LAB_H
#define DI_LAB_NUMERICS_LAB_H

#include <cuda_runtime_api.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

enum { NL_MMA_E4M3 = 0, NL_MMA_F16 = 1, NL_WG_F16 = 2, NL_WG_E4M3 = 3 };

/* Block partials of ntr trials (mma_bits.cu header): A [ntr][64][kb], W [ntr][256][kb] e4m3 bytes in
 * slot order (device), P [ntr][64][256] fp32 (device). N: the wgmma N (8..256; swap: <= 64), ignored by
 * the mma.sync families; swap: operand roles (MMA_F16, WG_*). cudaErrorNotSupported: wgmma off sm_90. */
cudaError_t nl_run(int fam, int N, int swap, int kb, int ntr, const uint8_t *A, const uint8_t *W, float *P);

#ifdef __cplusplus
}
#endif
#endif
