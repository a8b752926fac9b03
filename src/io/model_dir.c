/*
 * model_dir.c — locate a model directory (see model_dir.h).
 */
#include "io/model_dir.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util/env.h"
#include "util/file.h"

static int set_dir(di_model_location *loc, const char *dir) {
    return snprintf(loc->dir, sizeof loc->dir, "%s", dir) < (int)sizeof loc->dir ? 0 : -1;
}

static int has_config(const char *dir) {
    char p[DI_PATH_MAX];
    return di_path_join(p, sizeof p, dir, "config.json") == 0 && di_is_file(p);
}

static int is_cache_repo_folder(const char *dir) {
    char p[DI_PATH_MAX];
    return di_path_join(p, sizeof p, dir, "snapshots") == 0 && di_is_dir(p);
}

int di_hf_cache_root(char *out, size_t n, const char **source) {
    const char *v = di_env(DI_ENV_HF_HUB_CACHE);
    int r;
    if (v) {
        *source = "$HF_HUB_CACHE";
        r = snprintf(out, n, "%s", v);
    } else if ((v = di_env(DI_ENV_HF_HOME))) {
        *source = "$HF_HOME/hub";
        r = snprintf(out, n, "%s/hub", v);
    } else if ((v = di_env(DI_ENV_HOME))) {
        *source = "~/.cache/huggingface/hub";
        r = snprintf(out, n, "%s/.cache/huggingface/hub", v);
    } else {
        *source = "(no HF_HUB_CACHE, HF_HOME or HOME)";
        return -1;
    }
    return (r < 0 || (size_t)r >= n) ? -1 : 0;
}

static int name_char(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_' ||
           c == '.';
}

/* One part of a repo id: [A-Za-z0-9._-]+, not "." or "..", at most 96 chars. */
static int valid_part(const char *s, size_t n) {
    if (n == 0 || n > 96) return 0;
    if ((n == 1 && s[0] == '.') || (n == 2 && s[0] == '.' && s[1] == '.')) return 0;
    for (size_t i = 0; i < n; i++)
        if (!name_char(s[i])) return 0;
    return 1;
}

int di_is_repo_id(const char *s) {
    const char *slash = strchr(s, '/');
    if (!slash) return 0;
    const char *at = strchr(slash, '@');
    size_t name_len = at ? (size_t)(at - slash - 1) : strlen(slash + 1);
    if (!valid_part(s, (size_t)(slash - s)) || !valid_part(slash + 1, name_len)) return 0;
    if (at && !valid_part(at + 1, strlen(at + 1))) return 0;
    return 1;
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* Sorted subdirectory names of `dir` matching `prefix` (caller frees each and the array). */
static char **list_dirs(const char *dir, const char *prefix, size_t *count) {
    *count = 0;
    DIR *d = opendir(dir);
    if (!d) return NULL;
    char **v = NULL;
    size_t n = 0, cap = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.' || strncmp(e->d_name, prefix, strlen(prefix)) != 0) continue;
        char p[DI_PATH_MAX];
        if (di_path_join(p, sizeof p, dir, e->d_name) != 0 || !di_is_dir(p)) continue;
        if (n == cap) {
            cap = cap ? cap * 2 : 8;
            char **nv = realloc(v, cap * sizeof *nv);
            if (!nv) break;
            v = nv;
        }
        if (!(v[n] = strdup(e->d_name))) break;
        n++;
    }
    closedir(d);
    if (n) qsort(v, n, sizeof *v, cmp_str);
    *count = n;
    return v;
}

static void free_list(char **v, size_t n) {
    for (size_t i = 0; i < n; i++) free(v[i]);
    free(v);
}

/* Read a ref file (a commit hash) into out; 0 on success. */
static int read_ref(const char *path, char *out, size_t n) {
    char *text = NULL;
    size_t len = 0;
    if (!di_is_file(path) || di_read_file(path, 4096, &text, &len, NULL) != DEEPINFER_OK) return -1;
    while (len && (text[len - 1] == '\n' || text[len - 1] == '\r' || text[len - 1] == ' ')) text[--len] = '\0';
    int ok = valid_part(text, len) && len < n;
    if (ok) memcpy(out, text, len + 1);
    free(text);
    return ok ? 0 : -1;
}

/* Resolve the snapshot of cache repo folder `repo_dir`; `rev` NULL = main. */
static deepinfer_status resolve_snapshot(const char *repo_dir, const char *rev, di_model_location *loc,
                                         const char *what, di_error *err) {
    char snaps[DI_PATH_MAX], refp[DI_PATH_MAX], p[DI_PATH_MAX], hash[128];
    if (di_path_join(snaps, sizeof snaps, repo_dir, "snapshots") != 0)
        return di_error_set(err, DEEPINFER_ERR_LIMIT, "path too long: %s", repo_dir);
    const char *ref = rev ? rev : "main";
    snprintf(refp, sizeof refp, "%s/refs/%s", repo_dir, ref);
    int have_ref = read_ref(refp, hash, sizeof hash) == 0;
    if (!have_ref && rev && valid_part(rev, strlen(rev)) && strlen(rev) < sizeof hash) {
        snprintf(hash, sizeof hash, "%s", rev); /* @REV given as a commit hash */
        have_ref = 1;
    }
    if (have_ref && di_path_join(p, sizeof p, snaps, hash) == 0 && has_config(p)) {
        set_dir(loc, p);
        snprintf(loc->revision, sizeof loc->revision, "%s", hash);
        snprintf(loc->how, sizeof loc->how, "%s, snapshot %s (%s)", what, hash,
                 rev && strcmp(hash, rev) == 0 ? "revision given" : ref);
        return DEEPINFER_OK;
    }
    if (rev)
        return di_error_set(err, DEEPINFER_ERR_NOT_FOUND,
                            "%s: revision '%s' not found (looked for %s and %s/%s with a config.json)", what, rev,
                            refp, snaps, have_ref ? hash : rev);
    size_t n = 0;
    char **v = list_dirs(snaps, "", &n);
    /* Newest-looking first: lexicographically last snapshot that has a config.json. */
    for (size_t i = n; i-- > 0;) {
        if (di_path_join(p, sizeof p, snaps, v[i]) == 0 && has_config(p)) {
            set_dir(loc, p);
            snprintf(loc->revision, sizeof loc->revision, "%s", v[i]);
            snprintf(loc->how, sizeof loc->how, "%s, snapshot %s (%s; %s)", what, v[i],
                     have_ref ? "refs/main names no snapshot with config.json" : "no refs/main",
                     n == 1 ? "the only snapshot" : "the lexicographically last of several snapshots");
            free_list(v, n);
            return DEEPINFER_OK;
        }
    }
    free_list(v, n);
    return di_error_set(err, DEEPINFER_ERR_NOT_FOUND,
                        "%s: no usable snapshot (looked at %s%s and %zu folder(s) in %s; none has a config.json)",
                        what, refp, have_ref ? "" : " (missing)", n, snaps);
}

/* Repo id (with optional @rev) in the cache root `root`. */
static deepinfer_status resolve_repo(const char *root, const char *root_src, const char *id, di_model_location *loc,
                                     di_error *err) {
    char org[128], name[128], rev[128] = "";
    const char *slash = strchr(id, '/'), *at = strchr(id, '@');
    snprintf(org, sizeof org, "%.*s", (int)(slash - id), id);
    snprintf(name, sizeof name, "%.*s", (int)(at ? at - slash - 1 : (long)strlen(slash + 1)), slash + 1);
    if (at) snprintf(rev, sizeof rev, "%s", at + 1);
    char folder[DI_PATH_MAX], what[512];
    if (snprintf(folder, sizeof folder, "%s/models--%s--%s", root, org, name) >= (int)sizeof folder)
        return di_error_set(err, DEEPINFER_ERR_LIMIT, "path too long under %s", root);
    snprintf(loc->repo_id, sizeof loc->repo_id, "%s/%s", org, name);
    snprintf(what, sizeof what, "%s in the HF cache %s (%s)", loc->repo_id, root, root_src);
    if (!di_is_dir(folder))
        return di_error_set(err, DEEPINFER_ERR_NOT_FOUND,
                            "model %s not found: %s does not exist (download it with `huggingface-cli download "
                            "%s`, or pass --model DIR)",
                            loc->repo_id, folder, loc->repo_id);
    return resolve_snapshot(folder, rev[0] ? rev : NULL, loc, what, err);
}

/* No repo id: exactly one models--deepseek-ai--DeepSeek-V4* folder in `root`. */
static deepinfer_status resolve_default(const char *root, const char *root_src, di_model_location *loc,
                                        di_error *err) {
    const char *prefix = "models--deepseek-ai--DeepSeek-V4";
    size_t n = 0;
    char **v = list_dirs(root, prefix, &n);
    if (n == 0) {
        free_list(v, n);
        return di_error_set(err, DEEPINFER_ERR_NOT_FOUND,
                            "no model given and none found: pass --model DIR or --model ORG/NAME, or set "
                            "DEEPINFER_HF_MODEL_DIR (looked in the HF cache %s (%s) for %s*)",
                            root, root_src, prefix);
    }
    if (n > 1) {
        char list[768] = "";
        size_t at = 0;
        for (size_t i = 0; i < n && at < sizeof list; i++)
            at += (size_t)snprintf(list + at, sizeof list - at, "%s%s", i ? ", " : "", v[i] + 8);
        free_list(v, n);
        return di_error_set(err, DEEPINFER_ERR_INVALID_ARGUMENT,
                            "several models in the HF cache %s: %s; choose one with --model ORG/NAME", root, list);
    }
    char folder[DI_PATH_MAX], what[512];
    di_path_join(folder, sizeof folder, root, v[0]);
    /* models--ORG--NAME → ORG/NAME (ORG has no "--"). */
    const char *on = v[0] + 8, *sep = strstr(on, "--");
    snprintf(loc->repo_id, sizeof loc->repo_id, "%.*s/%s", (int)(sep - on), on, sep + 2);
    snprintf(what, sizeof what, "%s, the only DeepSeek-V4 model in the HF cache %s (%s)", loc->repo_id, root,
             root_src);
    free_list(v, n);
    return resolve_snapshot(folder, NULL, loc, what, err);
}

static int is_cache_root(const char *dir) {
    size_t n = 0;
    char **v = list_dirs(dir, "models--", &n);
    free_list(v, n);
    return n > 0;
}

deepinfer_status di_model_locate(const char *arg, di_model_location *loc, di_error *err) {
    memset(loc, 0, sizeof *loc);
    char root[DI_PATH_MAX];
    const char *root_src = NULL;
    int have_root = di_hf_cache_root(root, sizeof root, &root_src) == 0;
    const char *env = di_env(DI_ENV_HF_MODEL_DIR);

    if (arg && *arg) {
        if (di_is_dir(arg)) {
            if (has_config(arg)) {
                set_dir(loc, arg);
                snprintf(loc->how, sizeof loc->how, "--model %s", arg);
                return DEEPINFER_OK;
            }
            if (is_cache_repo_folder(arg)) {
                char what[DI_PATH_MAX + 32];
                snprintf(what, sizeof what, "HF cache folder %s", arg);
                return resolve_snapshot(arg, NULL, loc, what, err);
            }
            return di_error_set(err, DEEPINFER_ERR_NOT_FOUND,
                                "--model %s: the directory has no config.json (and no snapshots/ of an HF cache "
                                "folder)",
                                arg);
        }
        if (di_is_file(arg))
            return di_error_set(err, DEEPINFER_ERR_INVALID_ARGUMENT,
                                "--model %s is a file; pass the directory holding config.json", arg);
        if (!di_is_repo_id(arg))
            return di_error_set(err, DEEPINFER_ERR_NOT_FOUND,
                                "--model %s: no such directory, and not a repo id like deepseek-ai/DeepSeek-V4.1-Flash",
                                arg);
        /* A repo id: DEEPINFER_HF_MODEL_DIR first when it is a cache root, then the HF cache. */
        deepinfer_status rc = DEEPINFER_ERR_NOT_FOUND;
        char first[DI_ERROR_MSG_MAX] = "";
        if (env && di_is_dir(env) && !has_config(env)) {
            rc = resolve_repo(env, "$DEEPINFER_HF_MODEL_DIR", arg, loc, err);
            if (rc == DEEPINFER_OK) return rc;
            if (err) snprintf(first, sizeof first, "%s", err->msg);
        }
        if (!have_root)
            return di_error_set(err, DEEPINFER_ERR_NOT_FOUND, "model %s: no HF cache to look in %s%s%s", arg,
                                root_src, first[0] ? "; " : "", first);
        rc = resolve_repo(root, root_src, arg, loc, err);
        if (rc != DEEPINFER_OK && first[0]) di_error_prefix(err, "%s; and", first);
        return rc;
    }
    if (env) {
        if (has_config(env)) {
            set_dir(loc, env);
            snprintf(loc->how, sizeof loc->how, "$DEEPINFER_HF_MODEL_DIR = %s", env);
            return DEEPINFER_OK;
        }
        if (di_is_dir(env) && is_cache_repo_folder(env))
            return resolve_snapshot(env, NULL, loc, "$DEEPINFER_HF_MODEL_DIR (an HF cache folder)", err);
        if (di_is_dir(env) && is_cache_root(env)) return resolve_default(env, "$DEEPINFER_HF_MODEL_DIR", loc, err);
        return di_error_set(err, DEEPINFER_ERR_NOT_FOUND,
                            "DEEPINFER_HF_MODEL_DIR=%s is not a directory with config.json, an HF cache folder or "
                            "an HF cache root",
                            env);
    }
    if (!have_root)
        return di_error_set(err, DEEPINFER_ERR_NOT_FOUND,
                            "no model given: pass --model DIR or --model ORG/NAME, or set DEEPINFER_HF_MODEL_DIR "
                            "(no HF cache either: %s)",
                            root_src);
    return resolve_default(root, root_src, loc, err);
}

/* ---- the one rule: explicit, environment, the embedded demo model ---- */

#define DEMO_MODEL "models/deepinfer-demo-v41"
#ifndef DEEPINFER_SOURCE_DIR
#define DEEPINFER_SOURCE_DIR "."
#endif

/* The embedded demo model: next to the executable's tree, else the source tree. */
static int demo_model_dir(char *out, size_t n) {
    char exe[DI_PATH_MAX];
    ssize_t len = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (len > 0) {
        exe[len] = '\0';
        char *slash = strrchr(exe, '/');
        if (slash) {
            *slash = '\0';
            char cand[DI_PATH_MAX + 64];
            snprintf(cand, sizeof cand, "%s/../%s", exe, DEMO_MODEL);
            if (di_is_dir(cand) && realpath(cand, out) && strlen(out) < n) return 1;
        }
    }
    snprintf(out, n, "%s/%s", DEEPINFER_SOURCE_DIR, DEMO_MODEL);
    return di_is_dir(out);
}

deepinfer_status di_model_resolve(const char *model_arg, di_model_location *loc, di_error *err) {
    if ((model_arg && *model_arg) || di_env(DI_ENV_HF_MODEL_DIR)) return di_model_locate(model_arg, loc, err);
    memset(loc, 0, sizeof *loc);
    if (!demo_model_dir(loc->dir, sizeof loc->dir))
        return di_error_set(err, DEEPINFER_ERR_NOT_FOUND,
                            "no model given (--model, $DEEPINFER_HF_MODEL_DIR) and the embedded demo model is not at "
                            "<executable dir>/../%s nor %s/%s",
                            DEMO_MODEL, DEEPINFER_SOURCE_DIR, DEMO_MODEL);
    snprintf(loc->how, sizeof loc->how, "the embedded demo model (no --model, no $DEEPINFER_HF_MODEL_DIR)");
    return DEEPINFER_OK;
}
