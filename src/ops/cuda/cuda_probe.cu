/*
 * cuda_probe.cu — device discovery for the backend selector (C ABI).
 * Safe on machines without a GPU or driver: it reports why and returns 0 devices.
 */
#include <cuda_runtime.h>
#include <stdio.h>
#include <string.h>

extern "C" int di_cuda_probe(int *count, char *name, size_t name_len, int *cc_major, int *cc_minor,
                             size_t *total_mem, char *why, size_t why_len) {
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    *count = 0;
    if (e != cudaSuccess) {
        snprintf(why, why_len, "%s", cudaGetErrorString(e));
        cudaGetLastError(); /* clear the sticky-free error state */
        return 0;
    }
    if (n == 0) {
        snprintf(why, why_len, "no CUDA device found");
        return 0;
    }
    cudaDeviceProp prop;
    e = cudaGetDeviceProperties(&prop, 0);
    if (e != cudaSuccess) {
        snprintf(why, why_len, "%s", cudaGetErrorString(e));
        return 0;
    }
    snprintf(name, name_len, "%s", prop.name);
    *cc_major = prop.major;
    *cc_minor = prop.minor;
    *total_mem = prop.totalGlobalMem;
    *count = n;
    return n;
}
