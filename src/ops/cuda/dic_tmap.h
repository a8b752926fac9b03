/*
 * dic_tmap.h — the driver's cuTensorMapEncodeTiled, looked up once through the
 * runtime (no link against libcuda), for the TMA kernels that build tensor maps
 * (dic_gemm_wgmma.cu, dic_gemm_wgmma3.cu, and the lab's wgmma variants).
 */
#ifndef DI_OPS_CUDA_DIC_TMAP_H
#define DI_OPS_CUDA_DIC_TMAP_H

#include <cuda.h>

typedef CUresult (*dic_tmap_encode_fn)(CUtensorMap *, CUtensorMapDataType, cuuint32_t, void *, const cuuint64_t *,
                                       const cuuint64_t *, const cuuint32_t *, const cuuint32_t *,
                                       CUtensorMapInterleave, CUtensorMapSwizzle, CUtensorMapL2promotion,
                                       CUtensorMapFloatOOBfill);

/* The encoder, or NULL when the driver has none (defined in dic_gemm_wgmma.cu). */
extern "C" dic_tmap_encode_fn dic_tmap_encoder(void);

#endif
