/* `deepinfer tokenize`: text ↔ ids with a tokenizer.json, one line each. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "args/cli_args.h"
#include "cli.h"
#include "io/json.h"
#include "tokenizer/pyjson.h"
#include "tokenizer/tokenizer.h"
#include "util/file.h"

static void usage(void) {
    printf("usage: deepinfer tokenize --tokenizer PATH [--decode [--skip-special]]\n"
           "       deepinfer tokenize --tokenizer PATH --bench FILE [--repeat N] [--chunk BYTES]\n"
           "\n"
           "Encode: reads standard input one line at a time; each line is a JSON string\n"
           "(e.g. \"Hello\\nworld\"). Prints one line per input: the token ids, separated\n"
           "by single spaces (an empty line for the empty string). Added tokens written in\n"
           "the text (e.g. <｜User｜>) are matched atomically, as Hugging Face does; no BOS\n"
           "is added. Invalid UTF-8 (possible through JSON only as U+FFFD) is encoded as its\n"
           "U+FFFD replacement.\n"
           "\n"
           "  --tokenizer PATH   tokenizer.json, or a directory holding it (required)\n"
           "  --decode           the reverse: each input line holds space-separated ids;\n"
           "                     prints the decoded text as a JSON string per line\n"
           "  --skip-special     with --decode, drop added tokens marked special:true\n"
           "  --bench FILE       encode FILE (raw bytes) as one text and report MB/s on\n"
           "                     one core; --repeat N runs it N times (default 5) and\n"
           "                     reports the best run; --chunk BYTES encodes FILE as\n"
           "                     pieces of about BYTES bytes cut after a newline,\n"
           "                     one call each (bench/tokenizer_bench.sh uses this)\n"
           "\n"
           "Exit status: 0 on success; 1 on a bad line (the message names the line) or a\n"
           "tokenizer that cannot be loaded.\n");
}

/* Byte offsets that cut text into pieces of about `chunk` bytes ending at a
 * newline (the same cut as tests/oracle/bench_peer.js). */
static size_t next_cut(const char *text, size_t len, size_t a, size_t chunk) {
    if (!chunk) return len;
    size_t b = a + chunk < len ? a + chunk : len;
    const char *nl = b ? memchr(text + b - 1, '\n', len - (b - 1)) : NULL;
    return nl ? (size_t)(nl - text) + 1 : len;
}

static int bench(const di_tokenizer *tok, const char *file, int repeat, size_t chunk) {
    char *text = NULL;
    size_t len = 0;
    di_error err = {0};
    if (di_read_file(file, 0, &text, &len, &err)) {
        fprintf(stderr, "tokenize: %s\n", err.msg);
        return 1;
    }
    double best = 1e30;
    size_t nids = 0;
    for (int r = 0; r < repeat; r++) {
        int32_t *ids = NULL;
        size_t n = 0, cap = 0;
        struct timespec a, b;
        deepinfer_status s = DEEPINFER_OK;
        clock_gettime(CLOCK_MONOTONIC, &a);
        for (size_t p = 0; p < len && s == DEEPINFER_OK;) {
            size_t q = next_cut(text, len, p, chunk);
            s = di_tokenizer_encode(tok, text + p, q - p, &ids, &n, &cap, &err);
            p = q;
        }
        clock_gettime(CLOCK_MONOTONIC, &b);
        free(ids);
        if (s) {
            fprintf(stderr, "tokenize: %s\n", err.msg);
            free(text);
            return 1;
        }
        double t = (double)(b.tv_sec - a.tv_sec) + 1e-9 * (double)(b.tv_nsec - a.tv_nsec);
        if (t < best) best = t;
        nids = n;
    }
    printf("deepinfer bytes %zu ids %zu best_seconds %.4f MB_per_s %.2f (best of %d, one thread, chunk %zu)\n", len,
           nids, best, (double)len / best / 1e6, repeat, chunk);
    free(text);
    return 0;
}

static char *read_line(FILE *f, size_t *len) {
    char *line = NULL;
    size_t cap = 0;
    ssize_t n = getline(&line, &cap, f);
    if (n < 0) {
        free(line);
        return NULL;
    }
    while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == '\r')) line[--n] = 0;
    *len = (size_t)n;
    return line;
}

static int encode_lines(const di_tokenizer *tok) {
    size_t len, lineno = 0;
    char *line;
    int32_t *ids = NULL;
    size_t cap = 0;
    int rc = 0;
    while ((line = read_line(stdin, &len))) {
        lineno++;
        di_json_doc *doc = NULL;
        di_error err = {0};
        if (di_json_parse(line, len, NULL, &doc, &err) || doc->root->type != DI_JSON_STRING) {
            fprintf(stderr, "tokenize: line %zu: expected a JSON string%s%s\n", lineno, err.msg[0] ? ": " : "",
                    err.msg);
            di_json_free(doc);
            free(line);
            rc = 1;
            break;
        }
        size_t n = 0;
        if (di_tokenizer_encode(tok, doc->root->str, doc->root->str_len, &ids, &n, &cap, &err)) {
            fprintf(stderr, "tokenize: line %zu: %s\n", lineno, err.msg);
            di_json_free(doc);
            free(line);
            rc = 1;
            break;
        }
        for (size_t i = 0; i < n; i++) printf(i ? " %d" : "%d", ids[i]);
        putchar('\n');
        di_json_free(doc);
        free(line);
    }
    free(ids);
    return rc;
}

static int decode_lines(const di_tokenizer *tok, int skip_special) {
    size_t len, lineno = 0;
    char *line;
    int rc = 0;
    int32_t *ids = NULL;
    size_t cap = 0;
    while (rc == 0 && (line = read_line(stdin, &len))) {
        lineno++;
        size_t n = 0;
        char *p = line;
        for (;;) {
            while (*p == ' ' || *p == '\t' || *p == ',') p++;
            if (!*p) break;
            size_t w = strcspn(p, " \t,");
            char item[32], why[160];
            int64_t v = -1;
            if (w < sizeof item) memcpy(item, p, w), item[w] = '\0';
            else snprintf(item, sizeof item, "%.*s", (int)(sizeof item - 1), p);
            if (w >= sizeof item || di_parse_i64(item, 0, di_tokenizer_vocab_size(tok) - 1, &v, why, sizeof why)) {
                fprintf(stderr, "tokenize: line %zu: \"%.20s\" is not an id in [0, %d)\n", lineno, item,
                        di_tokenizer_vocab_size(tok));
                rc = 1;
                break;
            }
            char *end = p + w;
            if (n == cap) {
                cap = cap ? cap * 2 : 256;
                int32_t *np = realloc(ids, cap * sizeof *ids);
                if (!np) {
                    fprintf(stderr, "tokenize: out of memory\n");
                    rc = 1;
                    break;
                }
                ids = np;
            }
            ids[n++] = (int32_t)v;
            p = end;
        }
        if (rc == 0) {
            char *text = NULL;
            size_t tl = 0;
            di_error err = {0};
            if (di_tokenizer_decode(tok, ids, n, skip_special, &text, &tl, &err)) {
                fprintf(stderr, "tokenize: line %zu: %s\n", lineno, err.msg);
                rc = 1;
            } else {
                di_sbuf b = {0};
                di_pyjson_string(&b, text, tl);
                fwrite(b.p, 1, b.n, stdout);
                putchar('\n');
                di_sbuf_free(&b);
                free(text);
            }
        }
        free(line);
    }
    free(ids);
    return rc;
}

static int cmd_tokenize(int argc, char **argv) {
    if (di_cli_wants_help(argc, argv)) {
        usage();
        return 0;
    }
    const char *path = NULL, *bench_file = NULL, *repeat_s = NULL, *chunk_s = NULL;
    int decode = 0, skip_special = 0;
    for (int i = 1; i < argc; i++) {
        if (di_cli_flag_value(argc, argv, &i, "--tokenizer", &path)) {
            if (!path) return 1;
        } else if (di_cli_flag_value(argc, argv, &i, "--bench", &bench_file)) {
            if (!bench_file) return 1;
        } else if (di_cli_flag_value(argc, argv, &i, "--repeat", &repeat_s)) {
            if (!repeat_s) return 1;
        } else if (di_cli_flag_value(argc, argv, &i, "--chunk", &chunk_s)) {
            if (!chunk_s) return 1;
        } else if (!strcmp(argv[i], "--decode")) {
            decode = 1;
        } else if (!strcmp(argv[i], "--skip-special")) {
            skip_special = 1;
        } else {
            fprintf(stderr, "tokenize: unknown option '%s' (see deepinfer tokenize --help)\n", argv[i]);
            return 1;
        }
    }
    if (!path) {
        fprintf(stderr, "tokenize: --tokenizer PATH is required (see deepinfer tokenize --help)\n");
        return 1;
    }
    di_tokenizer *tok = NULL;
    di_error err = {0};
    if (di_tokenizer_load(path, &tok, &err)) {
        fprintf(stderr, "tokenize: %s\n", err.msg);
        return 1;
    }
    int rc;
    if (bench_file) {
        int repeat = 5;
        int64_t chunk = 0;
        if ((repeat_s && di_cli_parse_int("--repeat", repeat_s, 1, INT_MAX, &repeat)) ||
            (chunk_s && di_cli_parse_i64("--chunk", chunk_s, 1, INT64_MAX, &chunk))) {
            di_tokenizer_free(tok);
            return 2;
        }
        rc = bench(tok, bench_file, repeat, (size_t)chunk);
    } else {
        rc = decode ? decode_lines(tok, skip_special) : encode_lines(tok);
    }
    di_tokenizer_free(tok);
    return rc;
}

DI_CLI_COMMAND(tokenize, "text to token ids and back with a tokenizer.json", cmd_tokenize)
