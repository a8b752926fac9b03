/* Engram hash layout and ids (architecture.md §5.8) against the constants of
 * the spec (primes; multipliers derived from the spec's numpy formula by
 * numpy_rng.h, itself checked against the golden manifest) and fixtures from
 * tools/reference/engram_hash_fixtures.py. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/engram_hash.h"
#include "model/engram_token_map.h"
#include "model/numpy_rng.h"
#include "test.h"
#include "util/file.h"

/* architecture.md §5.8, layer 1 then layer 14, n = 2, 3, 4 × 8 heads. */
static const int64_t k_primes[2][24] = {
    {16000057, 16000079, 16000081, 16000097, 16000121, 16000129, 16000133, 16000183,
     16000189, 16000207, 16000211, 16000253, 16000277, 16000289, 16000307, 16000321,
     16000339, 16000381, 16000393, 16000399, 16000403, 16000409, 16000447, 16000463},
    {16000477, 16000487, 16000499, 16000507, 16000511, 16000573, 16000609, 16000627,
     16000667, 16000669, 16000693, 16000697, 16000711, 16000729, 16000759, 16000769,
     16000781, 16000799, 16000813, 16000819, 16000841, 16000877, 16000879, 16000889},
};

/* The released DeepSeek-V4.1-Flash config (architecture.md §1.1); the
 * layout's primes are derived by the config (config_derive.c). */
static di_model_config released_config(void) {
    static di_model_config c;
    di_error err;
    if (di_config_load(di_test_data("config/deepseek-v41-flash.json"), &c, &err)) {
        fprintf(stderr, "%s\n", err.msg);
        abort();
    }
    return c;
}

/* Fixture file, parsed once per test. */
typedef struct fixture {
    char *text;
    di_json_doc *doc;
} fixture;

static int load_fixture(fixture *f) {
    size_t len;
    di_error err;
    memset(f, 0, sizeof *f);
    if (di_read_file(di_test_data("engram/hash_fixtures.json"), 0, &f->text, &len, &err)) return 0;
    if (di_json_parse(f->text, len, NULL, &f->doc, &err)) return 0;
    return 1;
}

static void free_fixture(fixture *f) {
    di_json_free(f->doc);
    free(f->text);
}

/* Copy an int array (or an array of arrays of arrays, flattened). */
static int64_t flatten(const di_json *v, int64_t *out, int64_t cap) {
    if (!v) return 0;
    if (v->type != DI_JSON_ARRAY) {
        int64_t x = 0;
        di_json_as_i64(v, &x);
        if (cap > 0) *out = x;
        return 1;
    }
    int64_t n = 0;
    for (uint32_t i = 0; i < v->count; i++) n += flatten(&v->items[i], out + n, cap - n);
    return n;
}

TEST(engram_released_layout) {
    di_model_config c = released_config();
    di_engram_hash h;
    di_error err;
    CHECK_MSG(di_engram_hash_init(&h, &c, NULL, 2, &err) == DEEPINFER_OK, "%s", err.msg);
    CHECK_EQ_INT(h.n_cols, 24);
    for (int l = 0; l < 2; l++) {
        int64_t sum = 0;
        for (int col = 0; col < 24; col++) {
            CHECK_EQ_INT(h.primes[l][col], k_primes[l][col]);
            CHECK_EQ_INT(h.offsets[l][col], sum);
            sum += h.primes[l][col];
        }
        CHECK_EQ_INT(sum, c.engram_num_embeddings[l]);
    }
    /* The multipliers from the spec's formula (numpy_rng.h, checked against the golden manifest's
     * constants in engram_multiplier_formula_matches_golden), not from the source's table. */
    static const int32_t layer[2] = {1, 14};
    for (int l = 0; l < 2; l++) {
        int64_t want[4];
        np_engram_multipliers(layer[l], 99092, 4, want);
        for (int s = 0; s < 4; s++)
            CHECK_MSG(h.multipliers[l][s] == want[s], "layer %d shift %d: %lld, the formula gives %lld", layer[l], s,
                      (long long)h.multipliers[l][s], (long long)want[s]);
    }
    /* The multipliers are odd and small enough that class × multiplier fits int64. */
    for (int l = 0; l < 2; l++)
        for (int s = 0; s < 4; s++) {
            CHECK(h.multipliers[l][s] & 1);
            CHECK(h.multipliers[l][s] <= INT64_MAX / 99092);
        }
}

/* The formula's re-implementation against independent data: the golden tiny V4.1's manifest
 * holds the multipliers DeepSeek's reference computed with numpy (layers 1 and 2, 768 classes). */
TEST(engram_multiplier_formula_matches_golden) {
    char *text = NULL;
    size_t len = 0;
    di_error err = {0};
    di_json_doc *doc = NULL;
    CHECK(di_read_file(di_test_data("golden/v41-tiny-a/expected/manifest.json"), 0, &text, &len, &err) == 0);
    CHECK(di_json_parse(text, len, NULL, &doc, &err) == 0);
    free(text);
    const di_json *e = di_json_get(doc->root, "engram"), *m = di_json_get(e, "multipliers");
    CHECK(m && m->count == 2);
    static const int32_t layer[2] = {1, 2}; /* the tiny config's engram layers */
    for (uint32_t l = 0; l < 2; l++) {
        int64_t want[4];
        np_engram_multipliers(layer[l], 768, 4, want);
        const di_json *row = di_json_at(m, l);
        CHECK(row && row->count == 4);
        for (uint32_t s = 0; s < 4; s++) {
            int64_t v = 0;
            CHECK(di_json_as_i64(di_json_at(row, s), &v));
            CHECK_MSG(v == want[s], "layer %d shift %u: manifest %lld, formula %lld", layer[l], s, (long long)v,
                      (long long)want[s]);
        }
    }
    di_json_free(doc);
}

TEST(engram_layout_errors) {
    /* (a table size that disagrees with the primes is refused by the config: test_config.c) */
    di_model_config c = released_config();
    di_engram_hash h;
    di_error err;
    c.engram_compressed_vocab_size = 99093; /* not the released map: no built-in multipliers */
    CHECK(di_engram_hash_init(&h, &c, NULL, 2, &err) == DEEPINFER_ERR_NOT_FOUND);
    CHECK(strstr(err.msg, "engram_hash.json") != NULL);
    c = released_config();
    CHECK(di_engram_hash_init(&h, &c, NULL, 99092, &err) == DEEPINFER_ERR_FORMAT); /* pad class */
    c.engram_max_ngram_size = 40; /* beyond DI_ENGRAM_MAX_NGRAM */
    CHECK(di_engram_hash_init(&h, &c, NULL, 2, &err) == DEEPINFER_ERR_UNSUPPORTED);
}

/* Hash positions [0, n) in chunks given by `cuts` (ascending, ending at n). */
static deepinfer_status hash_chunked(const di_engram_hash *h, const int32_t *cls, int64_t n, const int64_t *cuts,
                                     int ncuts, int64_t *ids, di_error *err) {
    di_engram_seq s;
    di_engram_seq_init(&s);
    int64_t at = 0;
    for (int i = 0; i < ncuts; i++) {
        deepinfer_status st =
            di_engram_hash_ids(h, &s, at, cls + at, cuts[i] - at, ids + at * h->n_layers * h->n_cols, err);
        if (st) return st;
        at = cuts[i];
    }
    return at == n ? DEEPINFER_OK : DEEPINFER_ERR_INTERNAL;
}

TEST(engram_released_ids_match_fixture) {
    fixture f;
    CHECK(load_fixture(&f));
    const di_json *r = di_json_get(f.doc->root, "released");
    int64_t cls64[256], want[256 * 48], got[256 * 48];
    int32_t cls[256];
    int64_t n = flatten(di_json_get(r, "classes"), cls64, 256);
    int64_t nid = flatten(di_json_get(r, "ids"), want, 256 * 48);
    free_fixture(&f);
    CHECK_EQ_INT(n, 64);
    CHECK_EQ_INT(nid, n * 48);
    for (int64_t i = 0; i < n; i++) cls[i] = (int32_t)cls64[i];

    di_model_config c = released_config();
    di_engram_hash h;
    di_error err;
    CHECK(di_engram_hash_init(&h, &c, NULL, 2, &err) == DEEPINFER_OK);
    int64_t whole[] = {64};
    CHECK(hash_chunked(&h, cls, n, whole, 1, got, &err) == DEEPINFER_OK);
    for (int64_t i = 0; i < nid; i++) CHECK_MSG(got[i] == want[i], "id %lld: %lld vs %lld", (long long)i, (long long)got[i], (long long)want[i]);

    /* Chunk boundaries (prefill chunks, single-token decode) change nothing. */
    int64_t cuts1[] = {1, 2, 3, 4, 5, 21, 22, 23, 40, 63, 64};
    int64_t cuts2[] = {3, 7, 31, 32, 64};
    int64_t *cuts[] = {cuts1, cuts2};
    int ncuts[] = {11, 5};
    for (int t = 0; t < 2; t++) {
        memset(got, 0, sizeof got);
        CHECK(hash_chunked(&h, cls, n, cuts[t], ncuts[t], got, &err) == DEEPINFER_OK);
        CHECK(!memcmp(got, want, (size_t)nid * sizeof(int64_t)));
    }
    int64_t ones[64];
    for (int i = 0; i < 64; i++) ones[i] = i + 1;
    CHECK(hash_chunked(&h, cls, n, ones, 64, got, &err) == DEEPINFER_OK);
    CHECK(!memcmp(got, want, (size_t)nid * sizeof(int64_t)));
}

TEST(engram_dead_and_pad_semantics) {
    di_model_config c = released_config();
    di_engram_hash h;
    di_error err;
    CHECK(di_engram_hash_init(&h, &c, NULL, 2, &err) == DEEPINFER_OK);
    const int32_t D = DI_ENGRAM_DEAD;
    int32_t cls[6] = {D, 5, 7, 9, D, 11};
    int64_t ids[6 * 48];
    di_engram_seq s;
    di_engram_seq_init(&s);
    CHECK(di_engram_hash_ids(&h, &s, 0, cls, 6, ids, &err) == DEEPINFER_OK);
    const int64_t *m = h.multipliers[0];
    const uint64_t pad = 2;
    /* position 1: tok = [5, pad (c[0] DEAD), pad (p < 2), pad] */
    uint64_t h2 = (5 * (uint64_t)m[0]) ^ (pad * (uint64_t)m[1]);
    CHECK_EQ_INT(ids[1 * 48 + 0], (int64_t)(h2 % 16000057));
    uint64_t h4 = h2 ^ (pad * (uint64_t)m[2]) ^ (pad * (uint64_t)m[3]);
    CHECK_EQ_INT(ids[1 * 48 + 16 + 7], (int64_t)(h4 % 16000463) + h.offsets[0][23]);
    /* position 3: tok = [9, 7, 5, pad (c[0] DEAD)] */
    h4 = (9 * (uint64_t)m[0]) ^ (7 * (uint64_t)m[1]) ^ (5 * (uint64_t)m[2]) ^ (pad * (uint64_t)m[3]);
    CHECK_EQ_INT(ids[3 * 48 + 16], (int64_t)(h4 % 16000339) + h.offsets[0][16]);
    /* position 4 is DEAD itself: every slot is pad; position 5 stops at it: [11, pad, pad, pad] */
    uint64_t all_pad = (pad * (uint64_t)m[0]) ^ (pad * (uint64_t)m[1]);
    CHECK_EQ_INT(ids[4 * 48 + 1], (int64_t)(all_pad % 16000079) + h.offsets[0][1]);
    h2 = (11 * (uint64_t)m[0]) ^ (pad * (uint64_t)m[1]);
    CHECK_EQ_INT(ids[5 * 48 + 0], (int64_t)(h2 % 16000057));
    /* layer 14 uses its own multipliers and primes */
    const int64_t *m14 = h.multipliers[1];
    h2 = (11 * (uint64_t)m14[0]) ^ (pad * (uint64_t)m14[1]);
    CHECK_EQ_INT(ids[5 * 48 + 24 + 0], (int64_t)(h2 % 16000477));
    /* class checks happen before anything is recorded */
    int32_t bad = 99092;
    CHECK(di_engram_hash_ids(&h, &s, 6, &bad, 1, ids, &err) == DEEPINFER_ERR_INVALID_ARGUMENT);
    CHECK_EQ_INT(s.len, 6);
    CHECK(di_engram_hash_ids(&h, &s, 7, cls, 1, ids, &err) == DEEPINFER_ERR_INVALID_ARGUMENT); /* gap */
}

TEST(engram_rollback_and_restore) {
    fixture f;
    CHECK(load_fixture(&f));
    int64_t cls64[64], want[64 * 48];
    flatten(di_json_get(di_json_get(f.doc->root, "released"), "classes"), cls64, 64);
    flatten(di_json_get(di_json_get(f.doc->root, "released"), "ids"), want, 64 * 48);
    free_fixture(&f);
    int32_t cls[64];
    for (int i = 0; i < 64; i++) cls[i] = (int32_t)cls64[i];
    di_model_config c = released_config();
    di_engram_hash h;
    di_error err;
    CHECK(di_engram_hash_init(&h, &c, NULL, 2, &err) == DEEPINFER_OK);
    int64_t ids[64 * 48];
    di_engram_seq s;
    di_engram_seq_init(&s);
    CHECK(di_engram_hash_ids(&h, &s, 0, cls, 30, ids, &err) == DEEPINFER_OK);
    /* draft 6 wrong tokens, reject them, continue with the real ones */
    int32_t junk[6] = {1, 2, 3, 4, 5, 6};
    CHECK(di_engram_hash_ids(&h, &s, 30, junk, 6, ids, &err) == DEEPINFER_OK);
    CHECK(di_engram_seq_truncate(&s, 30, h.max_ngram, &err) == DEEPINFER_OK);
    CHECK(di_engram_hash_ids(&h, &s, 30, cls + 30, 34, ids, &err) == DEEPINFER_OK);
    CHECK(!memcmp(ids, want + 30 * 48, 34 * 48 * sizeof(int64_t)));
    /* too far back for the ring */
    CHECK(di_engram_seq_truncate(&s, 64 - 14, h.max_ngram, &err) == DEEPINFER_ERR_INVALID_ARGUMENT);
    CHECK(di_engram_seq_truncate(&s, 64 - 13, h.max_ngram, &err) == DEEPINFER_OK);
    /* restoring a prefix without hashing it */
    di_engram_seq r;
    di_engram_seq_init(&r);
    CHECK(di_engram_seq_push(&r, 0, cls, 40, &err) == DEEPINFER_OK);
    CHECK(di_engram_hash_ids(&h, &r, 40, cls + 40, 24, ids, &err) == DEEPINFER_OK);
    CHECK(!memcmp(ids, want + 40 * 48, 24 * 48 * sizeof(int64_t)));
}

/* The golden tiny V4.1 model: config.json + the manifest's constants + its token map,
 * prompt prefilled in one chunk, then the teacher-forced decode tokens one at a time. */
TEST(engram_golden_ids_match_fixture) {
    char *text = NULL;
    size_t len;
    di_error err;
    di_json_doc *man_doc = NULL;
    CHECK(di_read_file(di_test_data("golden/v41-tiny-a/config.json"), 0, &text, &len, &err) == DEEPINFER_OK);
    di_model_config c;
    deepinfer_status st = di_config_parse(text, len, "config.json", &c, &err);
    free(text);
    CHECK_MSG(st == DEEPINFER_OK, "%s", err.msg);
    CHECK_EQ_INT(c.n_engram_layer_ids, 2);
    CHECK_EQ_INT(c.engram_layer_ids[1], 2);
    CHECK_EQ_INT(c.engram_head_dim, 32);

    di_engram_token_map map;
    CHECK(di_engram_token_map_load(di_test_data("golden/v41-tiny-a/engram_token_map.json"), &map, &err) == 0);
    int32_t pad = map.cls[c.engram_pad_token_id];
    CHECK(di_read_file(di_test_data("golden/v41-tiny-a/expected/manifest.json"), 0, &text, &len, &err) == 0);
    st = di_json_parse(text, len, NULL, &man_doc, &err);
    free(text);
    di_engram_hash h;
    if (!st) st = di_engram_hash_init_json(&h, &c, di_json_get(man_doc->root, "engram"), pad, &err);
    /* a sidecar whose primes disagree is refused */
    deepinfer_status st_bad = DEEPINFER_OK;
    if (!st) {
        di_json *p = (di_json *)di_json_get(di_json_get(man_doc->root, "engram"), "primes");
        p->items[1].items[0].items[1].i64 += 2;
        di_engram_hash tmp;
        st_bad = di_engram_hash_init_json(&tmp, &c, di_json_get(man_doc->root, "engram"), pad, &err);
    }
    di_json_free(man_doc);
    if (st) di_engram_token_map_free(&map);
    CHECK_MSG(st == DEEPINFER_OK, "%s", err.msg);
    CHECK(st_bad == DEEPINFER_ERR_FORMAT);
    di_engram_hash none;
    CHECK(di_engram_hash_init(&none, &c, NULL, pad, &err) == DEEPINFER_ERR_NOT_FOUND);

    fixture f;
    int ok = load_fixture(&f);
    int64_t tok64[512], want[512 * 12];
    const di_json *g = ok ? di_json_get(f.doc->root, "golden") : NULL;
    int64_t n = flatten(di_json_get(g, "tokens"), tok64, 512);
    int64_t nid = flatten(di_json_get(g, "ids"), want, 512 * 12);
    if (ok) free_fixture(&f);
    int32_t tokens[512], cls[512];
    for (int64_t i = 0; i < n; i++) tokens[i] = (int32_t)tok64[i];
    st = di_engram_token_classes(&map, tokens, NULL, n, cls, &err);
    di_engram_token_map_free(&map);
    CHECK(ok && st == DEEPINFER_OK);
    CHECK_EQ_INT(n, 285);
    CHECK_EQ_INT(nid, n * 12);
    int64_t cuts[512];
    int ncuts = 0;
    cuts[ncuts++] = 261; /* prompt */
    for (int64_t p = 262; p <= n; p++) cuts[ncuts++] = p;
    int64_t got[512 * 12];
    CHECK(hash_chunked(&h, cls, n, cuts, ncuts, got, &err) == DEEPINFER_OK);
    for (int64_t i = 0; i < nid; i++)
        CHECK_MSG(got[i] == want[i], "id %lld: %lld vs %lld", (long long)i, (long long)got[i], (long long)want[i]);
    for (int64_t i = 0; i < nid; i++) CHECK(got[i] >= 0 && got[i] < h.num_embeddings[(i / 6) % 2]);
}
