/* cli_args.c — strict numeric parsing for the CLI (cli_args.h). */
#include "cli_args.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int refuse(char *err, size_t n, const char *fmt, const char *text) {
    if (err && n) snprintf(err, n, fmt, text);
    return -1;
}

/* Digits only, at least one; an optional leading '-' when `sign`. */
static int is_integer_text(const char *s, int sign) {
    if (sign && *s == '-') s++;
    if (!*s) return 0;
    for (; *s; s++)
        if (*s < '0' || *s > '9') return 0;
    return 1;
}

int di_parse_i64(const char *text, int64_t min, int64_t max, int64_t *out, char *err, size_t errlen) {
    if (!text || !*text) return refuse(err, errlen, "needs a value%s", "");
    if (!is_integer_text(text, 1)) return refuse(err, errlen, "'%.64s' is not an integer", text);
    errno = 0;
    long long v = strtoll(text, NULL, 10);
    if (errno == ERANGE || v < min || v > max) {
        if (err && errlen)
            snprintf(err, errlen, "must be in [%" PRId64 ", %" PRId64 "], got %.64s", min, max, text);
        return -1;
    }
    *out = (int64_t)v;
    return 0;
}

int di_parse_u64(const char *text, uint64_t max, uint64_t *out, char *err, size_t errlen) {
    if (!text || !*text) return refuse(err, errlen, "needs a value%s", "");
    if (*text == '-' && is_integer_text(text, 1))
        return refuse(err, errlen, "'%.64s' is negative (it must be a non-negative integer)", text);
    if (!is_integer_text(text, 0)) return refuse(err, errlen, "'%.64s' is not a non-negative integer", text);
    errno = 0;
    unsigned long long v = strtoull(text, NULL, 10);
    if (errno == ERANGE || v > max) {
        if (err && errlen) snprintf(err, errlen, "must be in [0, %" PRIu64 "], got %.64s", max, text);
        return -1;
    }
    *out = (uint64_t)v;
    return 0;
}

/* [-+]?(digits)?(.digits)?([eE][-+]?digits)? with at least one mantissa digit. */
static int is_decimal_text(const char *s) {
    int digits = 0;
    if (*s == '-' || *s == '+') s++;
    for (; *s >= '0' && *s <= '9'; s++) digits++;
    if (*s == '.')
        for (s++; *s >= '0' && *s <= '9'; s++) digits++;
    if (!digits) return 0;
    if (*s == 'e' || *s == 'E') {
        s++;
        if (*s == '-' || *s == '+') s++;
        if (*s < '0' || *s > '9') return 0;
        while (*s >= '0' && *s <= '9') s++;
    }
    return *s == '\0';
}

int di_parse_f64(const char *text, double min, double max, double *out, char *err, size_t errlen) {
    if (!text || !*text) return refuse(err, errlen, "needs a value%s", "");
    if (!is_decimal_text(text)) return refuse(err, errlen, "'%.64s' is not a number", text);
    double v = strtod(text, NULL);
    if (!isfinite(v) || !(v >= min && v <= max)) {
        if (err && errlen) snprintf(err, errlen, "must be in [%g, %g], got %.64s", min, max, text);
        return -1;
    }
    *out = v;
    return 0;
}

int di_parse_bytes(const char *text, uint64_t max, uint64_t *out, char *err, size_t errlen) {
    if (!text || !*text) return refuse(err, errlen, "needs a value%s", "");
    char num[64];
    size_t k = strspn(text, "0123456789.");
    const char *suf = text + k;
    double mul = 1;
    switch (*suf) {
    case 'K': case 'k': mul = 1024.0, suf++; break;
    case 'M': case 'm': mul = 1048576.0, suf++; break;
    case 'G': case 'g': mul = 1073741824.0, suf++; break;
    case 'T': case 't': mul = 1099511627776.0, suf++; break;
    default: break;
    }
    if (mul > 1 && *suf == 'i') suf++;
    if (*suf == 'B') suf++;
    if (!k || k >= sizeof num || *suf)
        return refuse(err, errlen, "'%.64s' is not a byte count (BYTES, or N with K, M, G or T)", text);
    memcpy(num, text, k);
    num[k] = '\0';
    double v;
    if (di_parse_f64(num, 0, 1e30, &v, NULL, 0) || !(v * mul <= (double)max)) {
        if (err && errlen) snprintf(err, errlen, "must be a byte count in [0, %" PRIu64 "], got %.64s", max, text);
        return -1;
    }
    *out = (uint64_t)(v * mul);
    return 0;
}

int di_parse_i32_list(const char *text, int32_t min, int32_t max, int32_t *out, int cap, int *n, char *err,
                      size_t errlen) {
    if (!text || !*text) return refuse(err, errlen, "needs a value%s", "");
    int count = 0;
    for (const char *p = text;;) {
        const char *comma = strchr(p, ',');
        size_t len = comma ? (size_t)(comma - p) : strlen(p);
        char item[32];
        if (!len || len >= sizeof item) return refuse(err, errlen, "'%.64s' is not a comma-separated list of integers", text);
        if (count >= cap) {
            if (err && errlen) snprintf(err, errlen, "at most %d values, got more in '%.64s'", cap, text);
            return -1;
        }
        memcpy(item, p, len);
        item[len] = '\0';
        int64_t v;
        char why[160];
        if (di_parse_i64(item, min, max, &v, why, sizeof why)) {
            if (err && errlen) snprintf(err, errlen, "item %d: %s", count + 1, why);
            return -1;
        }
        out[count++] = (int32_t)v;
        if (!comma) break;
        p = comma + 1;
    }
    *n = count;
    return 0;
}

/* ---- the CLI forms: the message on stderr, prefixed by the flag ---------------------- */

static int said(const char *flag, int rc, const char *why) {
    if (rc) fprintf(stderr, "error: %s: %s\n", flag, why);
    return rc;
}

int di_cli_parse_i64(const char *flag, const char *text, int64_t min, int64_t max, int64_t *out) {
    char why[256];
    return said(flag, di_parse_i64(text, min, max, out, why, sizeof why), why);
}

int di_cli_parse_int(const char *flag, const char *text, int min, int max, int *out) {
    int64_t v;
    if (di_cli_parse_i64(flag, text, min, max, &v)) return -1;
    *out = (int)v;
    return 0;
}

int di_cli_parse_u64(const char *flag, const char *text, uint64_t max, uint64_t *out) {
    char why[256];
    return said(flag, di_parse_u64(text, max, out, why, sizeof why), why);
}

int di_cli_parse_f64(const char *flag, const char *text, double min, double max, double *out) {
    char why[256];
    return said(flag, di_parse_f64(text, min, max, out, why, sizeof why), why);
}

int di_cli_parse_float(const char *flag, const char *text, double min, double max, float *out) {
    double v;
    if (di_cli_parse_f64(flag, text, min, max, &v)) return -1;
    *out = (float)v;
    return 0;
}

int di_cli_parse_bytes(const char *flag, const char *text, uint64_t *out) {
    char why[256];
    return said(flag, di_parse_bytes(text, UINT64_MAX, out, why, sizeof why), why);
}

int di_cli_parse_i32_list(const char *flag, const char *text, int32_t min, int32_t max, int32_t *out, int cap, int *n) {
    char why[256];
    return said(flag, di_parse_i32_list(text, min, max, out, cap, n, why, sizeof why), why);
}

int di_cli_parse_int_list(const char *flag, const char *text, int min, int max, int *out, int cap, int *n) {
    int32_t tmp[256];
    if (cap > 256) cap = 256;
    if (di_cli_parse_i32_list(flag, text, min, max, tmp, cap, n)) return -1;
    for (int i = 0; i < *n; i++) out[i] = tmp[i];
    return 0;
}
