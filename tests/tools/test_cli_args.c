/* tools/args/cli_args.h: strict numbers — whole text, range, overflow, sign, named messages. */
#include <stdint.h>

#include <string.h>

#include "args/cli_args.h"
#include "test.h"

TEST(cli_args_integers_are_whole_and_in_range) {
    int64_t v = 7;
    char err[256];
    CHECK(di_parse_i64("12", 0, 100, &v, err, sizeof err) == 0 && v == 12);
    CHECK(di_parse_i64("-3", -5, 5, &v, err, sizeof err) == 0 && v == -3);
    const char *bad[] = {"", "12x", " 12", "12 ", "+1", "0x10", "1.0", "1e3", "--1", "-", "9223372036854775808"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        v = 7;
        CHECK_MSG(di_parse_i64(bad[i], INT64_MIN, INT64_MAX, &v, err, sizeof err) == -1 && v == 7, "'%s' accepted", bad[i]);
    }
    CHECK(di_parse_i64("12x", 0, 100, &v, err, sizeof err) == -1 && !strcmp(err, "'12x' is not an integer"));
    CHECK(di_parse_i64("0", 1, 16384, &v, err, sizeof err) == -1 && !strcmp(err, "must be in [1, 16384], got 0"));
    uint64_t u = 0;
    CHECK(di_parse_u64("18446744073709551615", UINT64_MAX, &u, err, sizeof err) == 0 && u == UINT64_MAX);
    CHECK(di_parse_u64("18446744073709551616", UINT64_MAX, &u, err, sizeof err) == -1);
    CHECK(di_parse_u64("-1", UINT64_MAX, &u, err, sizeof err) == -1 && strstr(err, "negative"));
    int32_t ids[4];
    int n = 0;
    CHECK(di_parse_i32_list("1,2,3", 0, 10, ids, 4, &n, err, sizeof err) == 0 && n == 3 && ids[2] == 3);
    CHECK(di_parse_i32_list("1,2,", 0, 10, ids, 4, &n, err, sizeof err) == -1);
    CHECK(di_parse_i32_list("1,2,3,4,5", 0, 10, ids, 4, &n, err, sizeof err) == -1 && strstr(err, "at most 4"));
    CHECK(di_parse_i32_list("1,11", 0, 10, ids, 4, &n, err, sizeof err) == -1 && strstr(err, "item 2"));
}

TEST(cli_args_decimals_and_byte_counts_are_whole_and_finite) {
    double d = 0;
    char err[256];
    CHECK(di_parse_f64("0.5", 0, 1, &d, err, sizeof err) == 0 && d == 0.5);
    CHECK(di_parse_f64("-2", -2, 2, &d, err, sizeof err) == 0 && d == -2);
    CHECK(di_parse_f64("1e-3", 0, 1, &d, err, sizeof err) == 0 && d == 1e-3);
    CHECK(di_parse_f64(".5", 0, 1, &d, err, sizeof err) == 0 && d == 0.5);
    const char *bad[] = {"", "0.5abc", "inf", "nan", "0x1p3", " 1", "1e", "e5", ".", "1e999", "1.5.2"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        CHECK_MSG(di_parse_f64(bad[i], -1e308, 1e308, &d, err, sizeof err) == -1, "'%s' accepted", bad[i]);
    CHECK(di_parse_f64("0.5abc", 0, 1, &d, err, sizeof err) == -1 && !strcmp(err, "'0.5abc' is not a number"));
    CHECK(di_parse_f64("1.5", 0, 1, &d, err, sizeof err) == -1 && strstr(err, "must be in [0, 1]"));
    uint64_t b = 0;
    CHECK(di_parse_bytes("2G", UINT64_MAX, &b, err, sizeof err) == 0 && b == 2ull << 30);
    CHECK(di_parse_bytes("512MiB", UINT64_MAX, &b, err, sizeof err) == 0 && b == 512ull << 20);
    CHECK(di_parse_bytes("1000", UINT64_MAX, &b, err, sizeof err) == 0 && b == 1000);
    CHECK(di_parse_bytes("3Q", UINT64_MAX, &b, err, sizeof err) == -1);
    CHECK(di_parse_bytes("G", UINT64_MAX, &b, err, sizeof err) == -1);
    CHECK(di_parse_bytes("99999999999T", UINT64_MAX, &b, err, sizeof err) == -1);
}
