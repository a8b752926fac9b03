#include "io/dtype.h"

#include <string.h>

static const struct {
    const char *name;
    size_t size;
} g_dtypes[DI_DTYPE_COUNT] = {
    [DI_DTYPE_BF16] = {"BF16", 2},       [DI_DTYPE_F16] = {"F16", 2},
    [DI_DTYPE_F32] = {"F32", 4},         [DI_DTYPE_I64] = {"I64", 8},
    [DI_DTYPE_I32] = {"I32", 4},         [DI_DTYPE_I8] = {"I8", 1},
    [DI_DTYPE_U8] = {"U8", 1},           [DI_DTYPE_F8_E4M3] = {"F8_E4M3", 1},
    [DI_DTYPE_F8_E8M0] = {"F8_E8M0", 1},
};

/* Dtypes the safetensors format defines that deepinfer does not read. */
static const char *const g_unsupported[] = {
    "BOOL", "F64", "I16", "U16", "U32", "U64", "F8_E5M2", "F8_E4M3FNUZ", "F8_E5M2FNUZ",
    "F6_E2M3", "F6_E3M2", "F4", "C64",
};

const char *di_dtype_name(di_dtype t) {
    return ((unsigned)t < DI_DTYPE_COUNT) ? g_dtypes[t].name : "?";
}

size_t di_dtype_size(di_dtype t) { return ((unsigned)t < DI_DTYPE_COUNT) ? g_dtypes[t].size : 0; }

static int name_eq(const char *s, size_t n, const char *name) {
    return strlen(name) == n && memcmp(s, name, n) == 0;
}

int di_dtype_parse(const char *s, size_t n, di_dtype *out) {
    for (int i = 0; i < DI_DTYPE_COUNT; i++)
        if (name_eq(s, n, g_dtypes[i].name)) {
            *out = (di_dtype)i;
            return 1;
        }
    for (size_t i = 0; i < sizeof g_unsupported / sizeof g_unsupported[0]; i++)
        if (name_eq(s, n, g_unsupported[i])) return 0;
    return -1;
}

const char *di_dtype_supported_list(void) { return "BF16, F16, F32, I64, I32, I8, U8, F8_E4M3, F8_E8M0"; }
