#include <stdlib.h>

#include "engine/stop_strings.h"
#include "test.h"

/* Feed `pieces`, collect released text, return the stop index. */
static int run(const char *const *stops, int ns, const char *const *pieces, int np, char *got, size_t cap) {
    di_stop_matcher m;
    di_stop_init(&m, stops, ns);
    size_t gl = 0;
    int which = -1;
    for (int i = 0; i < np && which < 0; i++) {
        const char *o;
        size_t ol;
        which = di_stop_push(&m, pieces[i], strlen(pieces[i]), &o, &ol, NULL);
        if (gl + ol < cap) memcpy(got + gl, o, ol), gl += ol;
    }
    const char *o;
    size_t ol;
    di_stop_finish(&m, &o, &ol);
    if (gl + ol < cap) memcpy(got + gl, o, ol), gl += ol;
    got[gl] = 0;
    di_stop_free(&m);
    return which;
}

TEST(stop_string_across_pieces_is_trimmed) {
    const char *stops[] = {"###", "\nUser:"};
    const char *pieces[] = {"Hello wor", "ld\nUs", "er: more"};
    char got[128];
    CHECK_EQ_INT(run(stops, 2, pieces, 3, got, sizeof got), 1);
    CHECK_STR_EQ(got, "Hello world");
    const char *p2[] = {"a#", "#", "#b"};
    CHECK_EQ_INT(run(stops, 2, p2, 3, got, sizeof got), 0);
    CHECK_STR_EQ(got, "a");
}

TEST(stop_holdback_releases_text_progressively) {
    const char *stops[] = {"STOP"};
    di_stop_matcher m;
    di_stop_init(&m, stops, 1);
    const char *o;
    size_t ol;
    CHECK_EQ_INT(di_stop_push(&m, "abcdef", 6, &o, &ol, NULL), -1);
    CHECK_EQ_INT(ol, 3); /* "abc" released; "def" could begin "STOP"? held back anyway */
    CHECK(memcmp(o, "abc", 3) == 0);
    CHECK_EQ_INT(di_stop_push(&m, "ST", 2, &o, &ol, NULL), -1);
    CHECK_EQ_INT(ol, 2);
    CHECK(memcmp(o, "de", 2) == 0);
    di_stop_finish(&m, &o, &ol);
    CHECK_EQ_INT(ol, 3);
    CHECK(memcmp(o, "fST", 3) == 0);
    di_stop_free(&m);
}

TEST(stop_never_releases_partial_utf8) {
    const char *stops[] = {"xy"};
    di_stop_matcher m;
    di_stop_init(&m, stops, 1);
    const char *o;
    size_t ol;
    /* "é" = C3 A9; holding back 1 byte would split it */
    CHECK_EQ_INT(di_stop_push(&m, "a\xc3\xa9", 3, &o, &ol, NULL), -1);
    CHECK_EQ_INT(ol, 1);
    CHECK(o[0] == 'a');
    CHECK_EQ_INT(di_stop_push(&m, "b", 1, &o, &ol, NULL), -1);
    CHECK_EQ_INT(ol, 2);
    CHECK(memcmp(o, "\xc3\xa9", 2) == 0);
    di_stop_free(&m);
}

TEST(stop_without_stop_strings_releases_everything) {
    di_stop_matcher m;
    di_stop_init(&m, NULL, 0);
    const char *o;
    size_t ol;
    CHECK_EQ_INT(di_stop_push(&m, "hello", 5, &o, &ol, NULL), -1);
    CHECK_EQ_INT(ol, 5);
    di_stop_free(&m);
}

TEST(stop_earliest_match_wins) {
    const char *stops[] = {"cd", "bc"};
    const char *pieces[] = {"abcde"};
    char got[32];
    CHECK_EQ_INT(run(stops, 2, pieces, 1, got, sizeof got), 1);
    CHECK_STR_EQ(got, "a");
}

TEST(stop_prime_catches_a_stop_that_straddles_the_primed_text) {
    const char *stops[] = {"END"};
    di_stop_matcher m;
    di_stop_init(&m, stops, 1);
    /* "abcEN" was released before matching started (e.g. before min_tokens) */
    CHECK(di_stop_prime(&m, "EN", 2) == 0);
    const char *o;
    size_t ol;
    CHECK_EQ_INT(di_stop_push(&m, "Dxyz", 4, &o, &ol, NULL), 0);
    CHECK_EQ_INT(m.len, 0); /* cut before "EN", inside the primed text */
    di_stop_free(&m);
    /* a stop wholly inside the primed text does not fire */
    di_stop_init(&m, stops, 1);
    CHECK(di_stop_prime(&m, "EN", 2) == 0);
    CHECK_EQ_INT(di_stop_push(&m, "x", 1, &o, &ol, NULL), -1);
    di_stop_free(&m);
}
