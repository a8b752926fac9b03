/*
 * dic_launch.cu — the launch state of dic_common.cuh's DIC_LAUNCH:
 * programmatic dependent launch on every forward kernel (docs/kernels/small-kernels.md),
 * except the first after a copy or memset.
 */
#include "ops/cuda/dic_common.cuh"

/* 0 after a copy or memset was enqueued: the next kernel launches without
 * the attribute (a programmatic edge relaxes the dependency on the previous
 * stream operation, which only a kernel's griddepcontrol.wait honours).
 * Per thread: each rank thread drives its own stream (cu_exec.c); a thread's
 * first kernel launches without it (the stream's last operation may be
 * another thread's copy). */
static thread_local int g_armed = 0;

extern "C" void dic_pdl_disarm(void) { g_armed = 0; }

extern "C" int dic_pdl_armed(void) { return g_armed; }
extern "C" void dic_pdl_set_armed(int a) { g_armed = a != 0; }

extern "C" int dic_pdl_take(void) {
    int a = g_armed;
    g_armed = 1;
    return a && dic_pdl_enabled();
}

static int g_shared; /* dic_pdl_set_shared; read by every launching thread */

extern "C" void dic_pdl_set_shared(int shared) { __atomic_store_n(&g_shared, shared != 0, __ATOMIC_RELAXED); }

extern "C" int dic_pdl_enabled(void) { return !__atomic_load_n(&g_shared, __ATOMIC_RELAXED); }
