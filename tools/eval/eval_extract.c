/* eval_extract.c — answer extraction for generation tasks (eval_extract.h). */
#define PCRE2_CODE_UNIT_WIDTH 8
#include "eval/eval_extract.h"

#include <pcre2.h>
#include <stdio.h>
#include <string.h>

static const char NUMBER[] = "-?[0-9][0-9,]*(?:\\.[0-9]+)?";

int ev_extract(const char *text, size_t n, const char *regex, char *out, size_t cap) {
    int ec;
    PCRE2_SIZE off;
    out[0] = 0;
    pcre2_code *re = pcre2_compile((PCRE2_SPTR)(regex ? regex : NUMBER), PCRE2_ZERO_TERMINATED, PCRE2_UTF, &ec, &off, NULL);
    if (!re) {
        PCRE2_UCHAR msg[200];
        pcre2_get_error_message(ec, msg, sizeof msg);
        snprintf(out, cap, "regex does not compile at offset %zu: %s", (size_t)off, (const char *)msg);
        return -1;
    }
    uint32_t groups = 0;
    pcre2_pattern_info(re, PCRE2_INFO_CAPTURECOUNT, &groups);
    pcre2_match_data *md = pcre2_match_data_create_from_pattern(re, NULL);
    size_t s0 = 0, s1 = 0, at = 0;
    int found = 0;
    while (md && at <= n) {
        int rc = pcre2_match(re, (PCRE2_SPTR)text, n, at, 0, md, NULL);
        if (rc < 0) break;
        PCRE2_SIZE *ov = pcre2_get_ovector_pointer(md);
        int g = regex && groups >= 1 && ov[2] != PCRE2_UNSET ? 1 : 0;
        s0 = ov[2 * g], s1 = ov[2 * g + 1], found = 1;
        if (regex) break; /* a given regex: the first match */
        at = ov[1] > ov[0] ? ov[1] : ov[0] + 1;
    }
    pcre2_match_data_free(md);
    pcre2_code_free(re);
    if (!found) return 0;
    size_t k = s1 - s0 < cap - 1 ? s1 - s0 : cap - 1;
    memcpy(out, text + s0, k);
    out[k] = 0;
    return 1;
}

/* Trim blanks; with by_number also drop commas and trailing decimal zeros. */
static void norm(const char *s, int by_number, char *out, size_t cap) {
    size_t k = 0;
    while (*s == ' ' || *s == '\t' || *s == '\n' || *s == '\r') s++;
    for (; *s && k + 1 < cap; s++)
        if (!(by_number && *s == ',')) out[k++] = *s;
    while (k && (out[k - 1] == ' ' || out[k - 1] == '\t' || out[k - 1] == '\n' || out[k - 1] == '\r')) k--;
    out[k] = 0;
    if (by_number && strchr(out, '.')) {
        while (k && out[k - 1] == '0') out[--k] = 0;
        if (k && out[k - 1] == '.') out[--k] = 0;
    }
}

int ev_answer_matches(const char *extracted, const char *answer, int by_number) {
    char a[512], b[512];
    norm(extracted, by_number, a, sizeof a);
    norm(answer, by_number, b, sizeof b);
    return !strcmp(a, b);
}
