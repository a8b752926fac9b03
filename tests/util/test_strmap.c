/* Tests for src/util/strmap: insert, duplicate detection, growth, misses. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test.h"
#include "util/strmap.h"

TEST(strmap_insert_find_grow) {
    di_strmap m;
    CHECK(di_strmap_init(&m, 4) == 0);
    enum { N = 20000 };
    char(*keys)[24] = malloc(sizeof(*keys) * N);
    CHECK(keys);
    for (int i = 0; i < N; i++) {
        snprintf(keys[i], sizeof keys[i], "layers.%d.w", i);
        CHECK(di_strmap_put(&m, keys[i], strlen(keys[i]), (uint32_t)i, NULL) == 1);
    }
    CHECK(m.count == N && m.cap >= 2 * N);
    for (int i = 0; i < N; i++) {
        uint32_t v = 0;
        CHECK(di_strmap_get(&m, keys[i], strlen(keys[i]), &v) && v == (uint32_t)i);
    }
    uint32_t old = 0, v;
    CHECK(di_strmap_put(&m, "layers.7.w", 10, 99, &old) == 0 && old == 7);
    CHECK(di_strmap_get(&m, "layers.7.w", 10, &v) && v == 7);
    CHECK(!di_strmap_get(&m, "layers.7.", 9, &v));     /* prefix is not a match */
    CHECK(!di_strmap_get(&m, "layers.7.wx", 11, &v));
    CHECK(di_strmap_put(&m, "", 0, 5, NULL) == 1);     /* the empty key is a key */
    CHECK(di_strmap_get(&m, "", 0, &v) && v == 5);
    di_strmap_free(&m);
    free(keys);
    di_strmap z = {0};
    CHECK(!di_strmap_get(&z, "a", 1, &v));             /* a zeroed map is empty */
    CHECK(di_strmap_put(&z, "a", 1, 1, NULL) == -1);
}
