/*
 * dic_launch.cu — the launch switch of dic_common.cuh's DIC_LAUNCH:
 * programmatic dependent launch unless $DEEPINFER_CUDA_PDL=0 (read once).
 */
#include <stdlib.h>

#include "ops/cuda/dic_common.cuh"

extern "C" int dic_pdl_enabled(void) {
    static int on = -1;
    if (on < 0) {
        const char *e = getenv("DEEPINFER_CUDA_PDL");
        on = !(e && e[0] == '0' && !e[1]);
    }
    return on;
}
