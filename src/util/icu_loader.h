/*
 * icu_loader.h — ICU (libicuuc) loaded at run time with dlopen.
 *
 * Only the Engram token keys of DeepSeek-V4.1 models need ICU
 * (model/engram_token_key.c), and ICU puts its major version into every
 * symbol name (u_strToUTF8_72 on Debian 12, u_strToUTF8_74 on Ubuntu 24.04),
 * so a binary linked against one ICU cannot start where another is
 * installed. Instead nothing links ICU: the first di_icu_get() opens the
 * library, finds its version suffix and resolves the functions below.
 *
 * Where the library comes from, in order:
 *  1. $DEEPINFER_ICU_LIB (a path or soname), if set: only that;
 *  2. "libicuuc.so" (present with the -dev package);
 *  3. "libicuuc.so.N" for N = DI_ICU_VERSION_MAX down to DI_ICU_VERSION_MIN.
 * The version suffix is the N for which u_errorName_N resolves (or none when
 * the library exports the plain u_errorName, an ICU built without renaming).
 *
 * The ICU headers are not needed: the few types and constants used are
 * declared here with the same ABI (tests/util/test_icu_loader.c checks them
 * against <unicode/...> when those headers are installed).
 */
#ifndef DI_UTIL_ICU_LOADER_H
#define DI_UTIL_ICU_LOADER_H

#include <stdint.h>

#include "util/error.h"

#define DI_ICU_VERSION_MAX 90
#define DI_ICU_VERSION_MIN 50

/* ICU C types (unicode/umachine.h, utypes.h, uset.h, unorm2.h). */
typedef uint16_t di_uchar;        /* UChar: one UTF-16 code unit */
typedef int32_t di_uchar32;       /* UChar32 */
typedef int8_t di_ubool;          /* UBool */
typedef int di_uerror;            /* UErrorCode (an enum) */
typedef struct di_uset di_uset;   /* USet (opaque) */
typedef struct di_unorm2 di_unorm2; /* UNormalizer2 (opaque) */

/* UErrorCode values and tests (utypes.h). */
#define DI_U_ZERO_ERROR 0
#define DI_U_BUFFER_OVERFLOW_ERROR 15
#define DI_U_SUCCESS(e) ((e) <= DI_U_ZERO_ERROR)
#define DI_U_FAILURE(e) ((e) > DI_U_ZERO_ERROR)

/* UCharCategory values (uchar.h) for General_Category Mark. */
#define DI_U_NON_SPACING_MARK 6
#define DI_U_ENCLOSING_MARK 7
#define DI_U_COMBINING_SPACING_MARK 8

/* The ICU functions deepinfer calls. Each field is named after its ICU
 * function without the u_ / uset_ / unorm2_ prefix (so ICU's renaming macros
 * never touch it when the ICU headers happen to be included too):
 * errorName = u_errorName, set_contains = uset_contains, norm_normalize =
 * unorm2_normalize, ... */
typedef struct di_icu {
    const char *(*errorName)(di_uerror code);
    int8_t (*charType)(di_uchar32 c);
    di_ubool (*isUWhiteSpace)(di_uchar32 c);
    di_uchar *(*strFromUTF8)(di_uchar *dest, int32_t dest_cap, int32_t *dest_len, const char *src, int32_t src_len,
                             di_uerror *ec);
    char *(*strToUTF8)(char *dest, int32_t dest_cap, int32_t *dest_len, const di_uchar *src, int32_t src_len,
                       di_uerror *ec);
    int32_t (*strToLower)(di_uchar *dest, int32_t dest_cap, const di_uchar *src, int32_t src_len,
                          const char *locale, di_uerror *ec);
    di_uset *(*set_openPattern)(const di_uchar *pattern, int32_t pattern_len, di_uerror *ec);
    void (*set_freeze)(di_uset *set);
    di_ubool (*set_contains)(const di_uset *set, di_uchar32 c);
    void (*set_close)(di_uset *set);
    const di_unorm2 *(*norm_getNFKCInstance)(di_uerror *ec);
    const di_unorm2 *(*norm_getNFDInstance)(di_uerror *ec);
    di_unorm2 *(*norm_openFiltered)(const di_unorm2 *norm2, const di_uset *filter, di_uerror *ec);
    void (*norm_close)(di_unorm2 *norm2);
    int32_t (*norm_normalize)(const di_unorm2 *norm2, const di_uchar *src, int32_t len, di_uchar *dest,
                                int32_t cap, di_uerror *ec);

    void *handle;     /* from dlopen */
    int version;      /* ICU major version from the symbol suffix; 0 for unsuffixed symbols */
    char lib[256];    /* the name or path that was opened */
} di_icu;

/* The process-wide ICU table, loaded on first use (thread-safe, once per
 * process; a failure is remembered too). On failure *out is NULL and err
 * says how to install ICU or point DEEPINFER_ICU_LIB at it. */
deepinfer_status di_icu_get(const di_icu **out, di_error *err);

/* One uncached load attempt into *api (reads $DEEPINFER_ICU_LIB now); what
 * di_icu_get does once. For tests; release with di_icu_unload. */
deepinfer_status di_icu_load(di_icu *api, di_error *err);
void di_icu_unload(di_icu *api);

#endif
