/*
 * icu_loader.c — dlopen libicuuc and resolve its version-suffixed symbols
 * (see icu_loader.h).
 */
#include "util/icu_loader.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/env.h"

#define NEED_ICU                                                                                         \
    "DeepSeek-V4.1 Engram token keys need ICU (libicuuc): install libicu72 or set "                    \
    "DEEPINFER_ICU_LIB=/path/to/libicuuc.so.N"

static const struct {
    const char *name; /* ICU's name, before the version suffix */
    size_t off;       /* of the function pointer in di_icu */
} k_syms[] = {
    {"u_errorName", offsetof(di_icu, errorName)},
    {"u_charType", offsetof(di_icu, charType)},
    {"u_isUWhiteSpace", offsetof(di_icu, isUWhiteSpace)},
    {"u_strFromUTF8", offsetof(di_icu, strFromUTF8)},
    {"u_strToUTF8", offsetof(di_icu, strToUTF8)},
    {"u_strToLower", offsetof(di_icu, strToLower)},
    {"uset_openPattern", offsetof(di_icu, set_openPattern)},
    {"uset_freeze", offsetof(di_icu, set_freeze)},
    {"uset_contains", offsetof(di_icu, set_contains)},
    {"uset_close", offsetof(di_icu, set_close)},
    {"unorm2_getNFKCInstance", offsetof(di_icu, norm_getNFKCInstance)},
    {"unorm2_getNFDInstance", offsetof(di_icu, norm_getNFDInstance)},
    {"unorm2_openFiltered", offsetof(di_icu, norm_openFiltered)},
    {"unorm2_close", offsetof(di_icu, norm_close)},
    {"unorm2_normalize", offsetof(di_icu, norm_normalize)},
};

/* dlsym of `base` with the suffix of `version` ("_72"; none for 0). */
static void *sym(void *h, const char *base, int version) {
    char name[64];
    if (version) snprintf(name, sizeof name, "%s_%d", base, version);
    else snprintf(name, sizeof name, "%s", base);
    return dlsym(h, name);
}

/* ICU major version of the symbols in `h` (0: unsuffixed), or -1. `hint`
 * (the N of libicuuc.so.N, or 0) is tried first. */
static int find_version(void *h, int hint) {
    if (hint && sym(h, "u_errorName", hint)) return hint;
    if (sym(h, "u_errorName", 0)) return 0;
    for (int v = DI_ICU_VERSION_MAX; v >= DI_ICU_VERSION_MIN; v--)
        if (sym(h, "u_errorName", v)) return v;
    return -1;
}

/* Resolve every function of `api` from the opened library `h`. */
static deepinfer_status resolve(di_icu *api, void *h, const char *lib, int hint, di_error *err) {
    int v = find_version(h, hint);
    if (v < 0)
        return di_error_set(err, DEEPINFER_ERR_UNSUPPORTED,
                            NEED_ICU " (%s is not libicuuc: it has no u_errorName_N for N in %d..%d)", lib,
                            DI_ICU_VERSION_MIN, DI_ICU_VERSION_MAX);
    for (size_t i = 0; i < sizeof k_syms / sizeof k_syms[0]; i++) {
        void *p = sym(h, k_syms[i].name, v);
        if (!p) {
            char name[64];
            if (v) snprintf(name, sizeof name, "%s_%d", k_syms[i].name, v);
            else snprintf(name, sizeof name, "%s", k_syms[i].name);
            return di_error_set(err, DEEPINFER_ERR_UNSUPPORTED, NEED_ICU " (%s lacks %s)", lib, name);
        }
        /* POSIX guarantees void * and function pointers convert; copy the bits. */
        memcpy((char *)api + k_syms[i].off, &p, sizeof p);
    }
    api->handle = h;
    api->version = v;
    snprintf(api->lib, sizeof api->lib, "%s", lib);
    return DEEPINFER_OK;
}

/* Open `lib` and resolve; closes it again on failure. *opened tells a
 * library that loaded but is unusable from one that is not there. */
static deepinfer_status try_lib(di_icu *api, const char *lib, int hint, int *opened, di_error *err) {
    *opened = 0;
    void *h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        const char *why = dlerror();
        return di_error_set(err, DEEPINFER_ERR_UNSUPPORTED, NEED_ICU " (%s)", why ? why : lib);
    }
    *opened = 1;
    deepinfer_status st = resolve(api, h, lib, hint, err);
    if (st) dlclose(h);
    return st;
}

deepinfer_status di_icu_load(di_icu *api, di_error *err) {
    memset(api, 0, sizeof *api);
    int opened;
    const char *env = di_env(DI_ENV_ICU_LIB);
    if (env) {
        deepinfer_status st = try_lib(api, env, 0, &opened, err);
        if (st) di_error_prefix(err, "DEEPINFER_ICU_LIB=%s", env);
        return st;
    }
    /* Unversioned name first, then libicuuc.so.N from the newest down. The
     * first library that opened but did not resolve is the one to report. */
    di_error first = {0}, e;
    for (int v = DI_ICU_VERSION_MAX + 1; v >= DI_ICU_VERSION_MIN; v--) {
        char lib[32];
        if (v > DI_ICU_VERSION_MAX) snprintf(lib, sizeof lib, "libicuuc.so");
        else snprintf(lib, sizeof lib, "libicuuc.so.%d", v);
        if (!try_lib(api, lib, v > DI_ICU_VERSION_MAX ? 0 : v, &opened, &e)) return DEEPINFER_OK;
        if (opened && !first.code) first = e;
    }
    if (first.code) return di_error_set(err, first.code, "%s", first.msg);
    return di_error_set(err, DEEPINFER_ERR_UNSUPPORTED, NEED_ICU " (found no libicuuc.so or libicuuc.so.%d..%d)",
                        DI_ICU_VERSION_MAX, DI_ICU_VERSION_MIN);
}

void di_icu_unload(di_icu *api) {
    if (api->handle) dlclose(api->handle);
    memset(api, 0, sizeof *api);
}

static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static di_icu g_icu;
static di_error g_err;
static deepinfer_status g_st;

static void load_once(void) { g_st = di_icu_load(&g_icu, &g_err); }

deepinfer_status di_icu_get(const di_icu **out, di_error *err) {
    pthread_once(&g_once, load_once);
    if (g_st) {
        *out = NULL;
        return di_error_set(err, g_st, "%s", g_err.msg);
    }
    *out = &g_icu;
    return DEEPINFER_OK;
}
