/*
 * `deepinfer so-check`: structured-output conformance and speed.
 *
 *   --maskbench FILE.jsonl.gz (repeatable): MaskBench semantics — compile each
 *     schema, serialise every test instance as Python's json.dumps does,
 *     tokenize, and per token time fill_mask + accept; a valid instance must
 *     be accepted through its last token, an invalid one rejected at some
 *     token. Prints one JSON line.
 *   --jsts DIR: JSON-Schema-Test-Suite (DIR/tests/draft2020-12 and its
 *     optional/ and optional/format/), compared with llguidance's expected
 *     categories when --expected is given.
 */
#include <dirent.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <zlib.h>

#include "args/cli_args.h"
#include "cli.h"
#include "io/json.h"
#include "tokenizer/tokenizer.h"
#include "structured/json_write.h"
#include "structured/matcher.h"
#include "structured/so_args.h"
#include "util/file.h"

static double now_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

static int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double pct(double *v, size_t n, double p) {
    if (!n) return 0;
    size_t i = (size_t)(p * (double)(n - 1) + 0.5);
    return v[i];
}

typedef struct dvec {
    double *v;
    size_t n, cap;
} dvec;

static void dpush(dvec *d, double x) {
    if (d->n == d->cap) {
        d->cap = d->cap ? d->cap * 2 : 4096;
        double *nv = realloc(d->v, d->cap * sizeof *nv);
        if (!nv) {
            fprintf(stderr, "so-check: out of memory\n");
            exit(1);
        }
        d->v = nv;
    }
    d->v[d->n++] = x;
}

static char *gunzip_file(const char *path, size_t *len) {
    gzFile f = gzopen(path, "rb");
    if (!f) return NULL;
    size_t cap = 1 << 20, n = 0;
    char *buf = malloc(cap + 1);
    for (;;) {
        if (!buf) break;
        if (n == cap) {
            cap *= 2;
            char *nb = realloc(buf, cap + 1);
            if (!nb) {
                free(buf);
                buf = NULL;
                break;
            }
            buf = nb;
        }
        int r = gzread(f, buf + n, (unsigned)(cap - n));
        if (r < 0) {
            free(buf);
            buf = NULL;
            break;
        }
        if (r == 0) break;
        n += (size_t)r;
    }
    gzclose(f);
    if (buf) buf[n] = 0, *len = n;
    return buf;
}

typedef struct errcount {
    char msg[80];
    int n;
} errcount;

static void count_error(errcount *ec, int *nec, const char *msg) {
    char key[80];
    size_t l = strlen(msg);
    if (l > sizeof key - 1) l = sizeof key - 1;
    memcpy(key, msg, l);
    key[l] = 0;
    for (int i = 0; i < *nec; i++)
        if (!strcmp(ec[i].msg, key)) {
            ec[i].n++;
            return;
        }
    if (*nec < 512) {
        memcpy(ec[*nec].msg, key, sizeof key);
        ec[(*nec)++].n = 1;
    }
}

static int cmp_ec(const void *a, const void *b) { return ((const errcount *)b)->n - ((const errcount *)a)->n; }

static so_vocab *load_vocab(const char *tok_path, int32_t vocab_size, di_tokenizer **tok_out) {
    di_error err = {0};
    di_tokenizer *tok = NULL;
    if (di_tokenizer_load(tok_path, &tok, &err) != DEEPINFER_OK) {
        fprintf(stderr, "so-check: %s\n", err.msg);
        return NULL;
    }
    int32_t eos = so_tokenizer_default_eos(tok);
    so_vocab *v = NULL;
    if (so_vocab_from_tokenizer(tok, vocab_size, &eos, eos >= 0, &v, &err) != DEEPINFER_OK) {
        fprintf(stderr, "so-check: %s\n", err.msg);
        di_tokenizer_free(tok);
        return NULL;
    }
    *tok_out = tok;
    return v;
}

static int run_maskbench(so_vocab *v, const di_tokenizer *tok, const char **files, int nfiles, const char *expected, int limit, int ws,
                         int verbose, double slow_us) {
    di_json_doc *exp = NULL;
    di_error err = {0};
    if (expected) {
        char *t;
        size_t l;
        if (di_read_file(expected, 0, &t, &l, &err) != DEEPINFER_OK ||
            di_json_parse(t, l, NULL, &exp, &err) != DEEPINFER_OK) {
            fprintf(stderr, "so-check: %s: %s\n", expected, err.msg);
            return 1;
        }
        free(t);
    }
    long schemas = 0, compiled = 0, valid_total = 0, valid_acc = 0, valid_complete = 0, inval_total = 0,
         inval_rej = 0, inval_rej_eos = 0, false_acc = 0, tokens = 0;
    long llg_compiled = 0, llg_valid_acc = 0, both_valid_total = 0, schemas_pass = 0, llg_pass = 0;
    dvec mask = {0}, comp = {0};
    errcount ec[512];
    int nec = 0;
    size_t idcap = 0;
    int32_t *ids = NULL;
    uint32_t *bits = calloc(v->n_words, sizeof *bits);
    for (int fi = 0; fi < nfiles; fi++) {
        size_t len;
        char *text = gunzip_file(files[fi], &len);
        if (!text) {
            fprintf(stderr, "so-check: cannot read %s\n", files[fi]);
            return 1;
        }
        char *line = text;
        while (line < text + len && (limit <= 0 || schemas < limit)) {
            char *nl = memchr(line, '\n', (size_t)(text + len - line));
            size_t ll = nl ? (size_t)(nl - line) : (size_t)(text + len - line);
            di_json_doc *d = NULL;
            if (ll && di_json_parse(line, ll, NULL, &d, &err) == DEEPINFER_OK) {
                const di_json *id = di_json_get(d->root, "id");
                const di_json *schema = di_json_get(d->root, "schema");
                const di_json *tests = di_json_get(d->root, "tests");
                schemas++;
                /* llguidance baseline */
                const di_json *le = NULL;
                int llg_ok = 0;
                if (exp && id) {
                    char key[600];
                    snprintf(key, sizeof key, "%s.json", id->str);
                    le = di_json_get(exp->root, key);
                    if (le && !di_json_get(le, "json_error")) llg_compiled++, llg_ok = 1;
                    if (le && le->count == 0) llg_pass++;
                }
                so_buf sb = {0};
                so_json_write(&sb, schema, SO_JSON_COMPACT);
                so_args a = {.type = SO_SCHEMA_JSON, .schema = sb.p, .schema_len = sb.n, .whitespace_max = ws};
                so_grammar *g = NULL;
                double t0 = now_us();
                deepinfer_status st = so_compile(v, &a, &g, &err);
                double t1 = now_us();
                free(sb.p);
                long nvalid = 0;
                for (uint32_t k = 0; tests && k < tests->count; k++) {
                    const di_json *tv = di_json_get(&tests->items[k], "valid");
                    if (tv && tv->type == DI_JSON_TRUE) nvalid++;
                    else inval_total++;
                }
                valid_total += nvalid;
                if (llg_ok) {
                    llg_valid_acc += nvalid;
                    const di_json *ve = le ? di_json_get(le, "validation_error") : NULL;
                    if (ve && strstr(ve->str, "should accept")) llg_valid_acc--;
                }
                if (st != DEEPINFER_OK) {
                    count_error(ec, &nec, err.msg);
                    if (verbose) fprintf(stderr, "%s: compile: %s\n", id ? id->str : "?", err.msg);
                } else {
                    compiled++;
                    dpush(&comp, (t1 - t0) / 1000.0);
                    if (llg_ok) both_valid_total += nvalid;
                    so_matcher *m = NULL;
                    so_matcher_new(g, NULL, &m, &err);
                    int all_ok = 1;
                    for (uint32_t k = 0; tests && k < tests->count; k++) {
                        const di_json *tc = &tests->items[k];
                        const di_json *tv = di_json_get(tc, "valid");
                        int valid = tv && tv->type == DI_JSON_TRUE;
                        so_buf ib = {0};
                        so_json_write(&ib, di_json_get(tc, "data"), SO_JSON_PYTHON);
                        size_t nids = 0;
                        long nt = di_tokenizer_encode(tok, ib.p, ib.n, &ids, &nids, &idcap, &err) == DEEPINFER_OK
                                      ? (long)nids : -1;
                        so_matcher_reset(m);
                        int ok = nt >= 0;
                        for (long t = 0; t < nt && ok; t++) {
                            so_mask_stats before = m->stats;
                            uint32_t nthreads = m->p.fr_hi - m->p.fr_lo;
                            double s0 = now_us();
                            if (so_matcher_fill_mask(m, bits, &err) != DEEPINFER_OK) ok = 0;
                            int allowed = (bits[ids[t] >> 5] >> (ids[t] & 31)) & 1;
                            if (ok && allowed) ok = so_matcher_accept_token(m, ids[t], &err) == DEEPINFER_OK;
                            else ok = 0;
                            double dt = now_us() - s0;
                            dpush(&mask, dt);
                            tokens++;
                            if (slow_us > 0 && dt > slow_us)
                                fprintf(stderr, "slow mask %.0f us: %s test %u token %ld: %s, %u threads, %llu dep roots, %llu parser pushes, at \"%.40s\"\n",
                                        dt, id ? id->str : "?", k, t, m->stats.misses > before.misses ? "miss" : "hit", nthreads,
                                        (unsigned long long)(m->stats.dep_roots - before.dep_roots),
                                        (unsigned long long)(m->stats.nodes - before.nodes), ib.p + (t > 0 ? 0 : 0));
                        }
                        int complete = ok && so_matcher_is_accepting(m);
                        if (valid) {
                            if (ok) valid_acc++;
                            if (complete) valid_complete++;
                            if (!ok || !complete) all_ok = 0;
                            if (!ok && verbose)
                                fprintf(stderr, "%s: valid #%u rejected: %.200s\n", id ? id->str : "?", k, ib.p);
                        } else {
                            if (!ok) inval_rej++;
                            else if (!complete) inval_rej_eos++;
                            else {
                                false_acc++;
                                all_ok = 0;
                                fprintf(stderr, "%s: FALSE ACCEPT of invalid #%u: %.300s\n", id ? id->str : "?", k, ib.p);
                            }
                        }
                        free(ib.p);
                    }
                    if (all_ok) schemas_pass++;
                    so_matcher_free(m);
                    so_grammar_free(g);
                }
                di_json_free(d);
            } else if (ll) {
                fprintf(stderr, "so-check: %s: bad line: %s\n", files[fi], err.msg);
            }
            if (!nl) break;
            line = nl + 1;
        }
        free(text);
    }
    qsort(mask.v, mask.n, sizeof *mask.v, cmp_d);
    qsort(comp.v, comp.n, sizeof *comp.v, cmp_d);
    qsort(ec, (size_t)nec, sizeof *ec, cmp_ec);
    for (int i = 0; i < nec && i < 25; i++) fprintf(stderr, "compile error x%d: %s\n", ec[i].n, ec[i].msg);
    printf("{\"schemas\": %ld, \"compiled\": %ld, \"valid_total\": %ld, \"valid_accepted\": %ld, "
           "\"invalid_total\": %ld, \"invalid_rejected\": %ld, \"false_accepts\": %ld, "
           "\"mask_us_p50\": %.1f, \"mask_us_p99\": %.1f, \"compile_ms_p50\": %.3f, "
           "\"valid_complete\": %ld, \"invalid_rejected_at_eos\": %ld, \"schemas_all_tests_pass\": %ld, "
           "\"tokens\": %ld, \"mask_us_p90\": %.1f, \"mask_us_p999\": %.1f, \"mask_us_max\": %.1f, "
           "\"compile_ms_p90\": %.3f, \"compile_ms_p99\": %.3f",
           schemas, compiled, valid_total, valid_acc, inval_total, inval_rej, false_acc, pct(mask.v, mask.n, 0.5),
           pct(mask.v, mask.n, 0.99), pct(comp.v, comp.n, 0.5), valid_complete, inval_rej_eos, schemas_pass, tokens,
           pct(mask.v, mask.n, 0.9), pct(mask.v, mask.n, 0.999), mask.n ? mask.v[mask.n - 1] : 0,
           pct(comp.v, comp.n, 0.9), pct(comp.v, comp.n, 0.99));
    printf(", \"cache_entries\": %u, \"cache_mb\": %.1f, \"cache_hits\": %llu, \"cache_misses\": %llu, \"lexeme_dfas\": %u",
           v->cache_n, v->cache_bytes / 1048576.0, (unsigned long long)v->cache_hits, (unsigned long long)v->cache_misses,
           v->nreg);
    if (exp)
        printf(", \"llg_compiled\": %ld, \"llg_valid_accepted\": %ld, \"llg_schemas_pass\": %ld, "
               "\"valid_total_where_both_compiled\": %ld",
               llg_compiled, llg_valid_acc, llg_pass, both_valid_total);
    printf("}\n");
    free(mask.v), free(comp.v), free(ids), free(bits);
    if (exp) di_json_free(exp);
    return 0;
}

/* ---- JSON-Schema-Test-Suite -------------------------------------------- */

typedef struct jsts_counts {
    long pass, false_negative, false_positive, skip_compile, compile_error_valid, compile_error_all_invalid;
} jsts_counts;

static const char *llg_category(const di_json *exp, const char *group, const char *desc, const char *test) {
    const di_json *g = di_json_get(di_json_get(exp, "draft2020-12"), group);
    const di_json *c = di_json_get(di_json_get(g, desc), test);
    return c && c->type == DI_JSON_STRING ? c->str : NULL;
}

static void run_jsts_file(so_vocab *v, const char *path, const char *group, const di_json *exp, jsts_counts *us,
                          jsts_counts *them, long *both_fp, int verbose) {
    char *t;
    size_t l;
    di_error err = {0};
    di_json_doc *d = NULL;
    if (di_read_file(path, 0, &t, &l, &err) != DEEPINFER_OK) return;
    if (di_json_parse(t, l, NULL, &d, &err) != DEEPINFER_OK) {
        free(t);
        return;
    }
    free(t);
    for (uint32_t ci = 0; ci < d->root->count; ci++) {
        const di_json *cs = &d->root->items[ci];
        const di_json *desc = di_json_get(cs, "description"), *schema = di_json_get(cs, "schema"),
                      *tests = di_json_get(cs, "tests");
        so_buf sb = {0};
        so_json_write(&sb, schema, SO_JSON_COMPACT);
        so_args a = {.type = SO_SCHEMA_JSON, .schema = sb.p, .schema_len = sb.n, .whitespace_max = -1};
        so_grammar *g = NULL;
        deepinfer_status st = so_compile(v, &a, &g, &err);
        free(sb.p);
        int any_valid = 0;
        for (uint32_t k = 0; tests && k < tests->count; k++) {
            const di_json *tv = di_json_get(&tests->items[k], "valid");
            any_valid |= tv && tv->type == DI_JSON_TRUE;
        }
        so_matcher *m = NULL;
        if (st == DEEPINFER_OK) so_matcher_new(g, NULL, &m, &err);
        else if (verbose) fprintf(stderr, "%s / %s: compile: %s\n", group, desc ? desc->str : "?", err.msg);
        for (uint32_t k = 0; tests && k < tests->count; k++) {
            const di_json *tc = &tests->items[k];
            const di_json *tv = di_json_get(tc, "valid"), *td = di_json_get(tc, "description");
            int valid = tv && tv->type == DI_JSON_TRUE;
            const char *cat;
            if (st != DEEPINFER_OK) {
                cat = st == DEEPINFER_ERR_UNSUPPORTED ? "skip_compile" : any_valid ? "compile_error_valid" : "compile_error_all_invalid";
            } else {
                so_buf ib = {0};
                so_json_write(&ib, di_json_get(tc, "data"), SO_JSON_COMPACT);
                so_matcher_reset(m);
                int ok = so_matcher_accept_bytes(m, (const uint8_t *)ib.p, ib.n, &err) == DEEPINFER_OK &&
                         so_matcher_is_accepting(m);
                if (ib.n == 0) ok = so_matcher_is_accepting(m);
                cat = ok == valid ? "pass" : valid ? "false_negative" : "false_positive";
                if (verbose && ok != valid)
                    fprintf(stderr, "%s / %s / %s: %s: %.200s\n", group, desc ? desc->str : "?", td ? td->str : "?",
                            cat, ib.p);
                free(ib.p);
            }
            long *f = !strcmp(cat, "pass") ? &us->pass : !strcmp(cat, "false_negative") ? &us->false_negative
                    : !strcmp(cat, "false_positive") ? &us->false_positive : !strcmp(cat, "skip_compile") ? &us->skip_compile
                    : !strcmp(cat, "compile_error_valid") ? &us->compile_error_valid : &us->compile_error_all_invalid;
            (*f)++;
            const char *lc = exp ? llg_category(exp, group, desc ? desc->str : "", td ? td->str : "") : NULL;
            if (lc) {
                long *h = !strcmp(lc, "pass") ? &them->pass : !strcmp(lc, "false_negative") ? &them->false_negative
                        : !strcmp(lc, "false_positive") ? &them->false_positive : !strcmp(lc, "skip_compile") ? &them->skip_compile
                        : !strcmp(lc, "compile_error_valid") ? &them->compile_error_valid : &them->compile_error_all_invalid;
                (*h)++;
                if (!strcmp(lc, "false_positive") && !strcmp(cat, "false_positive")) (*both_fp)++;
            }
        }
        so_matcher_free(m);
        so_grammar_free(g);
    }
    di_json_free(d);
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

static void run_jsts_dir(so_vocab *v, const char *dir, const char *prefix, const di_json *exp, jsts_counts *us,
                         jsts_counts *them, long *both_fp, int verbose) {
    DIR *dd = opendir(dir);
    if (!dd) return;
    char *names[512];
    int n = 0;
    struct dirent *e;
    while ((e = readdir(dd)) && n < 512) {
        size_t l = strlen(e->d_name);
        if (l > 5 && !strcmp(e->d_name + l - 5, ".json")) names[n++] = strdup(e->d_name);
    }
    closedir(dd);
    qsort(names, (size_t)n, sizeof *names, cmp_str);
    for (int i = 0; i < n; i++) {
        char path[4096], group[512];
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        snprintf(group, sizeof group, "%s%.*s", prefix, (int)(strlen(names[i]) - 5), names[i]);
        run_jsts_file(v, path, group, exp, us, them, both_fp, verbose);
        free(names[i]);
    }
}

static int run_jsts(so_vocab *v, const char *root, const char *expected, int verbose) {
    di_json_doc *exp = NULL;
    di_error err = {0};
    if (expected) {
        char *t;
        size_t l;
        if (di_read_file(expected, 0, &t, &l, &err) != DEEPINFER_OK ||
            di_json_parse(t, l, NULL, &exp, &err) != DEEPINFER_OK) {
            fprintf(stderr, "so-check: %s: %s\n", expected, err.msg);
            return 1;
        }
        free(t);
    }
    jsts_counts us = {0}, them = {0};
    long both_fp = 0;
    char d[4096];
    snprintf(d, sizeof d, "%s/tests/draft2020-12", root);
    run_jsts_dir(v, d, "", exp ? exp->root : NULL, &us, &them, &both_fp, verbose);
    snprintf(d, sizeof d, "%s/tests/draft2020-12/optional", root);
    run_jsts_dir(v, d, "optional/", exp ? exp->root : NULL, &us, &them, &both_fp, verbose);
    snprintf(d, sizeof d, "%s/tests/draft2020-12/optional/format", root);
    run_jsts_dir(v, d, "optional/format/", exp ? exp->root : NULL, &us, &them, &both_fp, verbose);
    printf("{\"draft\": \"2020-12\", \"pass\": %ld, \"false_negative\": %ld, \"false_positive\": %ld, "
           "\"skip_compile\": %ld, \"compile_error_valid\": %ld, \"compile_error_all_invalid\": %ld",
           us.pass, us.false_negative, us.false_positive, us.skip_compile, us.compile_error_valid,
           us.compile_error_all_invalid);
    if (exp)
        printf(", \"llg_pass\": %ld, \"llg_false_negative\": %ld, \"llg_false_positive\": %ld, \"llg_skip_compile\": %ld, "
               "\"llg_compile_error_valid\": %ld, \"llg_compile_error_all_invalid\": %ld, \"false_positive_both\": %ld",
               them.pass, them.false_negative, them.false_positive, them.skip_compile, them.compile_error_valid,
               them.compile_error_all_invalid, both_fp);
    printf("}\n");
    if (exp) di_json_free(exp);
    return 0;
}

static int cmd_so_check(int argc, char **argv) {
    if (di_cli_wants_help(argc, argv) || argc < 2) {
        printf("usage: deepinfer so-check --tokenizer PATH [--vocab-size N] (--maskbench FILE.jsonl.gz ... | --jsts DIR)\n"
               "                          [--expected FILE] [--limit N] [--whitespace-max N] [--verbose]\n\n"
               "Structured-output conformance and speed.\n"
               "  --tokenizer PATH      tokenizer.json (or its directory): the vocabulary masks cover\n"
               "  --vocab-size N        padded vocabulary (mask length); default max(tokenizer ids, 129280)\n"
               "  --maskbench FILE      MaskBench split(s), gzip'd JSON lines; prints one JSON line:\n"
               "                        schemas, compiled, valid_total, valid_accepted, invalid_total,\n"
               "                        invalid_rejected, false_accepts, mask_us_p50/p99, compile_ms_p50, ...\n"
               "                        (instances tokenized with the tokenizer, as MaskBench does)\n"
               "  --jsts DIR            JSON-Schema-Test-Suite root; runs draft2020-12 (+ optional, format)\n"
               "  --expected FILE       llguidance's expected_maskbench.json / expected_json_schema_test_suite.json\n"
               "  --limit N             stop after N schemas\n"
               "  --whitespace-max N    whitespace bytes allowed between JSON tokens (default 20)\n"
               "  --verbose             list every compile error and wrong verdict on stderr\n"
               "  --slow-us N           report every mask slower than N microseconds on stderr\n");
        return argc < 2 ? 2 : 0;
    }
    const char *tok = NULL, *jsts = NULL, *expected = NULL, *val;
    const char *files[64];
    int nfiles = 0, limit = 0, ws = -1, verbose = 0;
    double slow_us = 0;
    int vs = 129280;
    for (int i = 1; i < argc; i++) {
        if (di_cli_flag_value(argc, argv, &i, "--tokenizer", &tok)) continue;
        if (di_cli_flag_value(argc, argv, &i, "--jsts", &jsts)) continue;
        if (di_cli_flag_value(argc, argv, &i, "--expected", &expected)) continue;
        if (di_cli_flag_value(argc, argv, &i, "--maskbench", &val)) {
            if (val && nfiles < 64) files[nfiles++] = val;
            /* more split files may follow (a shell glob): every argument up to the next flag */
            while (i + 1 < argc && strncmp(argv[i + 1], "--", 2) != 0) {
                if (nfiles >= 64) {
                    fprintf(stderr, "so-check: at most 64 MaskBench files\n");
                    return 2;
                }
                files[nfiles++] = argv[++i];
            }
            continue;
        }
        if (di_cli_flag_value(argc, argv, &i, "--limit", &val)) {
            if (!val || di_cli_parse_int("--limit", val, 1, INT_MAX, &limit)) return 2;
            continue;
        }
        if (di_cli_flag_value(argc, argv, &i, "--whitespace-max", &val)) {
            if (!val || di_cli_parse_int("--whitespace-max", val, 0, INT_MAX, &ws)) return 2;
            continue;
        }
        if (di_cli_flag_value(argc, argv, &i, "--vocab-size", &val)) {
            if (!val || di_cli_parse_int("--vocab-size", val, 1, INT32_MAX, &vs)) return 2;
            continue;
        }
        if (di_cli_flag_value(argc, argv, &i, "--slow-us", &val)) {
            if (!val || di_cli_parse_f64("--slow-us", val, 0, 1e12, &slow_us)) return 2;
            continue;
        }
        if (!strcmp(argv[i], "--verbose")) {
            verbose = 1;
            continue;
        }
        fprintf(stderr, "so-check: unknown argument '%s' (see --help)\n", argv[i]);
        return 2;
    }
    if (!tok || (!nfiles && !jsts)) {
        fprintf(stderr, "so-check: need --tokenizer and --maskbench or --jsts\n");
        return 2;
    }
    di_tokenizer *tk = NULL;
    so_vocab *v = load_vocab(tok, vs, &tk);
    if (!v) return 1;
    int rc = nfiles ? run_maskbench(v, tk, files, nfiles, expected, limit, ws, verbose, slow_us)
                    : run_jsts(v, jsts, expected, verbose);
    so_vocab_free(v);
    di_tokenizer_free(tk);
    return rc;
}

/* registered by hand: the command name has a dash */
__attribute__((constructor)) static void di_cli_reg_so_check(void) {
    di_cli_register("so-check", "structured outputs: MaskBench / JSON-Schema-Test-Suite conformance and mask speed",
                    cmd_so_check);
}
