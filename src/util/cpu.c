#include "util/cpu.h"

#include <stdlib.h>
#include <string.h>

#include "util/env.h"

static int g_isa = -1;

di_isa di_cpu_isa_hw(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
        __builtin_cpu_supports("fma"))
        return DI_ISA_AVX512;
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return DI_ISA_AVX2;
#endif
    return DI_ISA_SCALAR;
}

int di_cpu_has_avx512bf16(void) {
    static int cached = -1;
    if (cached >= 0) return cached;
#if (defined(__x86_64__) || defined(__i386__)) && defined(__GNUC__) && __GNUC__ >= 12
    __builtin_cpu_init();
    cached = __builtin_cpu_supports("avx512bf16") ? 1 : 0;
#else
    cached = 0;
#endif
    return cached;
}

int di_cpu_has_avx512vbmi(void) {
    static int cached = -1;
    if (cached >= 0) return cached;
#if defined(__x86_64__) || defined(__i386__)
    __builtin_cpu_init();
    cached = __builtin_cpu_supports("avx512vbmi") ? 1 : 0;
#else
    cached = 0;
#endif
    return cached;
}

di_isa di_cpu_set_isa(di_isa isa) {
    di_isa hw = di_cpu_isa_hw();
    g_isa = (int)(isa < hw ? isa : hw);
    return (di_isa)g_isa;
}

di_isa di_cpu_isa(void) {
    if (g_isa >= 0) return (di_isa)g_isa;
    di_isa want = DI_ISA_AVX512;
    const char *env = di_env(DI_ENV_CPU_ISA);
    if (env) {
        if (!strcmp(env, "scalar")) want = DI_ISA_SCALAR;
        else if (!strcmp(env, "avx2")) want = DI_ISA_AVX2;
    }
    return di_cpu_set_isa(want);
}

const char *di_isa_name(di_isa isa) {
    switch (isa) {
    case DI_ISA_SCALAR: return "scalar";
    case DI_ISA_AVX2: return "avx2";
    case DI_ISA_AVX512: return "avx512";
    }
    return "?";
}
