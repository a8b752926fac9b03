/*
 * dtype.h — the tensor element types deepinfer reads from checkpoints.
 *
 * Names are the safetensors spellings ("BF16", "F8_E4M3", ...). Only the
 * types the DeepSeek V4 family uses are supported; every other safetensors
 * dtype is recognised by name so errors can say "unsupported" rather than
 * "unknown".
 */
#ifndef DI_IO_DTYPE_H
#define DI_IO_DTYPE_H

#include <stddef.h>

typedef enum di_dtype {
    DI_DTYPE_BF16 = 0,
    DI_DTYPE_F16,
    DI_DTYPE_F32,
    DI_DTYPE_I64,
    DI_DTYPE_I32,
    DI_DTYPE_I8,
    DI_DTYPE_U8,
    DI_DTYPE_F8_E4M3,  /* OCP float8_e4m3fn */
    DI_DTYPE_F8_E8M0,  /* float8_e8m0fnu (ue8m0 block scales) */
    DI_DTYPE_COUNT
} di_dtype;

/* The safetensors name of `t` ("BF16", ...); "?" when out of range. */
const char *di_dtype_name(di_dtype t);

/* Bytes per element (1, 2, 4 or 8); 0 when out of range. */
size_t di_dtype_size(di_dtype t);

/* Look a dtype name up (exact, case-sensitive; `n` bytes, not NUL-terminated).
 * Returns 1 and sets *out for a supported type; 0 for a name safetensors
 * defines but deepinfer does not support (F64, BOOL, F8_E5M2, ...); -1 for a
 * name that is no safetensors dtype at all. */
int di_dtype_parse(const char *s, size_t n, di_dtype *out);

/* "BF16, F16, F32, I64, I32, I8, U8, F8_E4M3, F8_E8M0" — for error messages. */
const char *di_dtype_supported_list(void);

#endif
