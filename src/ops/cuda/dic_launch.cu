/*
 * dic_launch.cu — the launch switch of dic_common.cuh's DIC_LAUNCH:
 * programmatic dependent launch unless $DEEPINFER_CUDA_PDL=0 (read once).
 */
#include <stdlib.h>

#include "ops/cuda/dic_common.cuh"

/* 0 after a copy or memset was enqueued: the next kernel launches without
 * the attribute (a programmatic edge relaxes the dependency on the previous
 * stream operation, which only a kernel's griddepcontrol.wait honours). */
static int g_armed = 1;

extern "C" void dic_pdl_disarm(void) { g_armed = 0; }

/* The lean (code-size) instantiations of the decode kernels (docs/DEVICE-FORWARD.md §7 sixth round): on by
 * default; off selects the full instantiations of the same kernels (the same bits), the per-process A/B of
 * what the smaller code is worth in a step (cu_skip's lean=0|1 knob). */
static int g_lean_off;
extern "C" void dic_lean_set(int on) { g_lean_off = !on; }
extern "C" int dic_lean_off(void) { return g_lean_off; }
extern "C" int dic_pdl_armed(void) { return g_armed; }
extern "C" void dic_pdl_set_armed(int a) { g_armed = a != 0; }

extern "C" int dic_pdl_take(void) {
    int a = g_armed;
    g_armed = 1;
    return a && dic_pdl_enabled();
}

extern "C" int dic_pdl_enabled(void) {
    static int on = -1;
    if (on < 0) {
        const char *e = getenv("DEEPINFER_CUDA_PDL");
        on = !(e && e[0] == '0' && !e[1]);
    }
    return on;
}
