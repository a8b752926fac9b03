/*
 * cli_args.h — strict parsing of numeric command-line values and JSONL
 * fields, shared by every `deepinfer` subcommand.
 *
 * A value is accepted only when all of it is a number of the asked kind in
 * the asked range: no leading or trailing blanks, no trailing garbage
 * ("12x"), no overflow, no sign on an unsigned value ("-1" is not a seed),
 * no hex, inf or nan. Everything else is refused with a message that names
 * the flag and quotes the text, e.g.
 *   --max-tokens: '12x' is not an integer
 *   --max-num-seqs: must be in [1, 16384], got 0
 * The di_parse_* forms write that message (without the flag) into err; the
 * di_cli_parse_* forms print "error: FLAG: message" on stderr. All return
 * 0 on success (then *out is set) and -1 on a refusal (*out untouched).
 */
#ifndef DI_TOOLS_ARGS_CLI_ARGS_H
#define DI_TOOLS_ARGS_CLI_ARGS_H

#include <stddef.h>
#include <stdint.h>

int di_parse_i64(const char *text, int64_t min, int64_t max, int64_t *out, char *err, size_t errlen);
int di_parse_u64(const char *text, uint64_t max, uint64_t *out, char *err, size_t errlen);
/* A finite decimal number in [min, max]. */
int di_parse_f64(const char *text, double min, double max, double *out, char *err, size_t errlen);
/* BYTES with an optional K, M or G suffix (powers of 1024; "KiB", "MB" alike), at most `max` bytes. */
int di_parse_bytes(const char *text, uint64_t max, uint64_t *out, char *err, size_t errlen);
/* "A,B,C": 1..cap integers, each in [min, max]; *n is the count. */
int di_parse_i32_list(const char *text, int32_t min, int32_t max, int32_t *out, int cap, int *n, char *err,
                      size_t errlen);

int di_cli_parse_i64(const char *flag, const char *text, int64_t min, int64_t max, int64_t *out);
int di_cli_parse_int(const char *flag, const char *text, int min, int max, int *out);
int di_cli_parse_u64(const char *flag, const char *text, uint64_t max, uint64_t *out);
int di_cli_parse_f64(const char *flag, const char *text, double min, double max, double *out);
int di_cli_parse_float(const char *flag, const char *text, double min, double max, float *out);
int di_cli_parse_bytes(const char *flag, const char *text, uint64_t *out);
int di_cli_parse_int_list(const char *flag, const char *text, int min, int max, int *out, int cap, int *n);
int di_cli_parse_i32_list(const char *flag, const char *text, int32_t min, int32_t max, int32_t *out, int cap, int *n);

#endif
