/* Tests for src/io/safetensors: golden checkpoints load, every malformed
 * input gives a clear error (never a crash), both name spellings resolve. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "io/safetensors.h"
#include "test.h"
#include "util/file.h"

/* A safetensors image: 8-byte length + header + `data_len` bytes (byte i = i & 255). */
static unsigned char *make_st(const char *header, size_t data_len, size_t *size) {
    size_t hl = strlen(header);
    *size = 8 + hl + data_len;
    unsigned char *b = malloc(*size);
    if (!b) return NULL;
    for (int i = 0; i < 8; i++) b[i] = (unsigned char)((uint64_t)hl >> (8 * i));
    memcpy(b + 8, header, hl);
    for (size_t i = 0; i < data_len; i++) b[8 + hl + i] = (unsigned char)i;
    return b;
}

/* Parse a buffer; return the status and copy the message into msg. */
static deepinfer_status parse_buf(const unsigned char *b, size_t n, char *msg, size_t msgn) {
    di_safetensors *st = NULL;
    di_error e = {0};
    deepinfer_status rc = di_st_open_buffer(b, n, "t.safetensors", &st, &e);
    snprintf(msg, msgn, "%s", e.msg);
    di_st_close(st);
    return rc;
}

static deepinfer_status parse_hdr(const char *header, size_t data_len, char *msg, size_t msgn) {
    size_t n;
    unsigned char *b = make_st(header, data_len, &n);
    if (!b) return DEEPINFER_ERR_OUT_OF_MEMORY;
    deepinfer_status rc = parse_buf(b, n, msg, msgn);
    free(b);
    return rc;
}

#define EXPECT_ERR(hdr, len, code, needle)                                                      \
    do {                                                                                        \
        char m_[DI_ERROR_MSG_MAX];                                                              \
        deepinfer_status rc_ = parse_hdr(hdr, len, m_, sizeof m_);                              \
        CHECK_MSG(rc_ == (code), "status %d, expected %d (%s)", rc_, code, m_);                 \
        CHECK_MSG(strstr(m_, needle) != NULL, "message \"%s\" lacks \"%s\"", m_, needle);       \
    } while (0)

static char g_dir[256];

static const char *tmpdir(void) {
    snprintf(g_dir, sizeof g_dir, "/tmp/di_st_XXXXXX");
    return mkdtemp(g_dir);
}

static int write_file(const char *dir, const char *name, const void *data, size_t n) {
    char p[512];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    FILE *f = fopen(p, "wb");
    if (!f) return -1;
    size_t w = fwrite(data, 1, n, f);
    fclose(f);
    return w == n ? 0 : -1;
}

static int write_st(const char *dir, const char *name, const char *header, size_t data_len) {
    size_t n;
    unsigned char *b = make_st(header, data_len, &n);
    if (!b) return -1;
    int r = write_file(dir, name, b, n);
    free(b);
    return r;
}

static void rm_dir(const char *dir) {
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) fprintf(stderr, "    (could not remove %s)\n", dir);
}

TEST(st_golden_v4_loads) {
    di_safetensors *st = NULL;
    di_error e = {0};
    CHECK_MSG(di_st_open(di_test_data("golden/v4-tiny-a"), &st, &e) == DEEPINFER_OK, "%s", e.msg);
    CHECK_EQ_INT(di_st_shard_count(st), 2);
    CHECK_EQ_INT(di_st_count(st), 432);
    const di_tensor *t = di_st_find(st, "layers.0.attn.wq_a.weight");
    CHECK(t && t->dtype == DI_DTYPE_F8_E4M3 && t->ndim == 2 && t->shape[0] == 128 && t->shape[1] == 128);
    CHECK(t->nbytes == 128 * 128 && t->data != NULL);
    CHECK(di_st_find(st, "model.layers.0.attn.wq_a.weight") == t);
    CHECK(di_st_findf(st, "layers.%d.ffn.gate.tid2eid", 2)->dtype == DI_DTYPE_I64);
    CHECK(di_st_find(st, "layers.3.ffn.gate.tid2eid") == NULL);
    const di_st_totals *tot = di_st_get_totals(st);
    CHECK_EQ_INT(tot->total_count, 432);
    CHECK_EQ_INT((int64_t)tot->total_bytes, di_st_index_total_size(st));
    CHECK_STR_EQ(di_st_metadata(st, 0, "format"), "pt");
    /* Iteration covers every tensor once and data lies inside its shard. */
    uint64_t sum = 0;
    for (size_t i = 0; i < di_st_count(st); i++) {
        const di_tensor *x = di_st_at(st, i);
        const di_st_shard_info *sh = di_st_shard(st, x->shard);
        CHECK(x->file_offset + x->nbytes <= sh->size);
        CHECK(di_st_find(st, x->name) == x);
        sum += x->nbytes;
    }
    CHECK(sum == tot->total_bytes);
    di_st_close(st);
}

TEST(st_golden_v41_loads_each_way) {
    di_safetensors *st = NULL;
    di_error e = {0};
    CHECK_MSG(di_st_open(di_test_data("golden/v41-tiny-a/model.safetensors.index.json"), &st, &e) == DEEPINFER_OK,
              "%s", e.msg);
    CHECK_EQ_INT(di_st_count(st), 826);
    const di_tensor *t = di_st_find(st, "layers.1.engram.embed.scale");
    CHECK(t && t->dtype == DI_DTYPE_F8_E8M0 && t->shape[0] == 384 && t->shape[1] == 1);
    di_st_close(st);
    /* One shard on its own. */
    CHECK_MSG(di_st_open(di_test_data("golden/v41-tiny-a/model-00002-of-00002.safetensors"), &st, &e) ==
                  DEEPINFER_OK,
              "%s", e.msg);
    CHECK_EQ_INT(di_st_count(st), 474);
    CHECK(di_st_find(st, "embed.weight") == NULL);
    di_st_close(st);
}

TEST(st_buffer_values_and_scalar) {
    const char *h = "{\"__metadata__\":{\"format\":\"pt\"},"
                    "\"b\":{\"dtype\":\"F32\",\"shape\":[],\"data_offsets\":[6,10]},"
                    "\"a\":{\"dtype\":\"BF16\",\"shape\":[3],\"data_offsets\":[0,6]},"
                    "\"z\":{\"dtype\":\"I64\",\"shape\":[0,4],\"data_offsets\":[10,10]}}";
    size_t n;
    unsigned char *b = make_st(h, 10, &n);
    CHECK(b);
    di_safetensors *st = NULL;
    di_error e = {0};
    CHECK_MSG(di_st_open_buffer(b, n, "mem", &st, &e) == DEEPINFER_OK, "%s", e.msg);
    const di_tensor *a = di_st_find(st, "a"), *s = di_st_find(st, "b"), *z = di_st_find(st, "z");
    CHECK(a && s && z);
    CHECK(a->numel == 3 && a->nbytes == 6 && ((const unsigned char *)a->data)[5] == 5);
    CHECK(s->ndim == 0 && s->numel == 1 && ((const unsigned char *)s->data)[0] == 6);
    CHECK(z->numel == 0 && z->data == NULL);
    CHECK(di_st_at(st, 0) == a); /* offset order */
    CHECK_EQ_INT(di_st_get_totals(st)->bytes[DI_DTYPE_BF16], 6);
    di_st_close(st);
    free(b);
}

TEST(st_rejects_short_and_overflowing_lengths) {
    char m[DI_ERROR_MSG_MAX];
    unsigned char tiny[5] = {1, 2, 3, 4, 5};
    CHECK(parse_buf(tiny, sizeof tiny, m, sizeof m) == DEEPINFER_ERR_FORMAT && strstr(m, "8-byte header"));
    unsigned char big[16] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, '{', '}'};
    CHECK(parse_buf(big, sizeof big, m, sizeof m) == DEEPINFER_ERR_FORMAT && strstr(m, "exceeds"));
    unsigned char over[16] = {9, 0, 0, 0, 0, 0, 0, 0, '{', '}'};
    CHECK(parse_buf(over, sizeof over, m, sizeof m) == DEEPINFER_ERR_FORMAT && strstr(m, "truncated"));
    /* 200 MiB header length in a small file: "exceeds" (file) before the limit. */
    unsigned char lim[16] = {0, 0, 0, 0x0c, 0, 0, 0, 0, '{', '}'};
    CHECK(parse_buf(lim, sizeof lim, m, sizeof m) == DEEPINFER_ERR_FORMAT);
    unsigned char one[9] = {1, 0, 0, 0, 0, 0, 0, 0, '{'};
    CHECK(parse_buf(one, sizeof one, m, sizeof m) == DEEPINFER_ERR_FORMAT && strstr(m, "too short"));
}

TEST(st_rejects_bad_json_and_structure) {
    EXPECT_ERR("{\"a\":{\"dtype\":\"F32\",,}}", 0, DEEPINFER_ERR_FORMAT, "line 1, column");
    EXPECT_ERR("[1,2]", 0, DEEPINFER_ERR_FORMAT, "expected an object");
    EXPECT_ERR("{\"a\":[1]}", 0, DEEPINFER_ERR_FORMAT, "expected an object");
    EXPECT_ERR("{\"a\":{\"dtype\":\"F32\",\"shape\":[1]}}", 4, DEEPINFER_ERR_FORMAT, "missing 'data_offsets'");
    EXPECT_ERR("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4],\"x\":1}}", 4,
               DEEPINFER_ERR_FORMAT, "unexpected key 'x'");
    EXPECT_ERR("{\"a\":{\"dtype\":7,\"shape\":[1],\"data_offsets\":[0,4]}}", 4, DEEPINFER_ERR_FORMAT,
               "expected a string");
    EXPECT_ERR("{\"a\":{\"dtype\":\"F32\",\"shape\":[-1],\"data_offsets\":[0,4]}}", 4, DEEPINFER_ERR_FORMAT,
               "shape[0]");
    EXPECT_ERR("{\"a\":{\"dtype\":\"F32\",\"shape\":[1.5],\"data_offsets\":[0,4]}}", 4, DEEPINFER_ERR_FORMAT,
               "shape[0]");
    EXPECT_ERR("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0]}}", 4, DEEPINFER_ERR_FORMAT,
               "[begin, end]");
    EXPECT_ERR("{\"__metadata__\":{\"k\":1}}", 0, DEEPINFER_ERR_FORMAT, "__metadata__ value of 'k'");
    EXPECT_ERR("{\"__metadata__\":[]}", 0, DEEPINFER_ERR_FORMAT, "__metadata__ is a JSON array");
    EXPECT_ERR("{\"\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4, DEEPINFER_ERR_FORMAT,
               "empty");
    EXPECT_ERR("{\"a\":{\"dtype\":\"F32\",\"shape\":[1,1,1,1,1,1,1,1,1],\"data_offsets\":[0,4]}}", 4,
               DEEPINFER_ERR_UNSUPPORTED, "9 dimensions");
}

TEST(st_rejects_dtypes) {
    EXPECT_ERR("{\"w\":{\"dtype\":\"F64\",\"shape\":[1],\"data_offsets\":[0,8]}}", 8, DEEPINFER_ERR_UNSUPPORTED,
               "unsupported dtype 'F64'");
    EXPECT_ERR("{\"w\":{\"dtype\":\"F8_E5M2\",\"shape\":[1],\"data_offsets\":[0,1]}}", 1, DEEPINFER_ERR_UNSUPPORTED,
               "F8_E4M3, F8_E8M0");
    EXPECT_ERR("{\"w\":{\"dtype\":\"Q4_K\",\"shape\":[1],\"data_offsets\":[0,1]}}", 1, DEEPINFER_ERR_UNSUPPORTED,
               "unknown dtype 'Q4_K'");
    EXPECT_ERR("{\"w\":{\"dtype\":\"bf16\",\"shape\":[1],\"data_offsets\":[0,2]}}", 2, DEEPINFER_ERR_UNSUPPORTED,
               "unknown dtype 'bf16'");
}

TEST(st_rejects_bad_offsets) {
    EXPECT_ERR("{\"w\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 4, DEEPINFER_ERR_FORMAT,
               "past the data section");
    EXPECT_ERR("{\"w\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[4,0]}}", 4, DEEPINFER_ERR_FORMAT,
               "begin 4 > end 0");
    EXPECT_ERR("{\"w\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,4]}}", 8, DEEPINFER_ERR_FORMAT,
               "needs 8");
    EXPECT_ERR("{\"w\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[0,4]},"
               "\"v\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[2,6]}}",
               6, DEEPINFER_ERR_FORMAT, "overlap");
    EXPECT_ERR("{\"w\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[2,6]}}", 6, DEEPINFER_ERR_FORMAT,
               "belong to no tensor");
    EXPECT_ERR("{\"w\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[0,4]}}", 6, DEEPINFER_ERR_FORMAT,
               "2 trailing data bytes");
    EXPECT_ERR("{\"w\":{\"dtype\":\"U8\",\"shape\":[4294967296,4294967296],\"data_offsets\":[0,4]}}", 4,
               DEEPINFER_ERR_FORMAT, "element count overflows");
    EXPECT_ERR("{\"w\":{\"dtype\":\"I64\",\"shape\":[4611686018427387904],\"data_offsets\":[0,4]}}", 4,
               DEEPINFER_ERR_FORMAT, "byte size overflows");
    EXPECT_ERR("{\"w\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,18446744073709551615]}}", 1,
               DEEPINFER_ERR_FORMAT, "[begin, end]");
}

TEST(st_rejects_duplicate_names) {
    EXPECT_ERR("{\"w\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]},"
               "\"w\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[1,2]}}",
               2, DEEPINFER_ERR_FORMAT, "appears twice");
    EXPECT_ERR("{\"w\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]},"
               "\"model.w\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[1,2]}}",
               2, DEEPINFER_ERR_FORMAT, "same reference name");
    /* a doubled prefix: its reference name "model.w" would look up "w" (a fuzzer finding) */
    EXPECT_ERR("{\"model.model.w\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]}}", 1,
               DEEPINFER_ERR_FORMAT, "doubled 'model.' prefix");
}

/* A header of metadata only holds no tensors (and no tensor array): valid, empty. */
TEST(st_metadata_only_header_is_an_empty_checkpoint) {
    size_t n = 0;
    unsigned char *b = make_st("{\"__metadata__\":{\"format\":\"pt\"}}", 0, &n);
    di_safetensors *st = NULL;
    di_error e = {0};
    CHECK_MSG(di_st_open_buffer(b, n, "t.safetensors", &st, &e) == DEEPINFER_OK, "%s", e.msg);
    CHECK(di_st_count(st) == 0);
    di_st_close(st);
    free(b);
}

TEST(st_truncated_golden_shard) {
    const char *src = di_test_data("golden/v4-tiny-a/model-00001-of-00002.safetensors");
    char *data = NULL;
    size_t len = 0;
    di_error e = {0};
    CHECK(di_read_file(src, 0, &data, &len, &e) == DEEPINFER_OK);
    char m[DI_ERROR_MSG_MAX];
    /* Cut inside the data, inside the header, and inside the length. */
    size_t cuts[] = {len - 1, len / 2, 8 + 100, 6};
    for (size_t i = 0; i < sizeof cuts / sizeof cuts[0]; i++) {
        deepinfer_status rc = parse_buf((const unsigned char *)data, cuts[i], m, sizeof m);
        CHECK_MSG(rc == DEEPINFER_ERR_FORMAT, "cut %zu: status %d (%s)", cuts[i], rc, m);
    }
    /* Flip the header length high byte: overflow against the file size. */
    data[7] = (char)0x80;
    CHECK(parse_buf((const unsigned char *)data, len, m, sizeof m) == DEEPINFER_ERR_FORMAT);
    free(data);
}

static const char *SH1 = "{\"model.a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
                         "\"model.b\":{\"dtype\":\"U8\",\"shape\":[2],\"data_offsets\":[8,10]}}";
static const char *SH2 = "{\"model.c\":{\"dtype\":\"I32\",\"shape\":[1,1],\"data_offsets\":[0,4]}}";

static deepinfer_status open_dir(const char *d, char *msg, size_t n) {
    di_safetensors *st = NULL;
    di_error e = {0};
    deepinfer_status rc = di_st_open(d, &st, &e);
    snprintf(msg, n, "%s", e.msg);
    di_st_close(st);
    return rc;
}

static int write_index(const char *d, const char *map) {
    char buf[1024];
    snprintf(buf, sizeof buf, "{\"metadata\":{\"total_size\":14},\"weight_map\":{%s}}", map);
    return write_file(d, "model.safetensors.index.json", buf, strlen(buf));
}

TEST(st_sharded_index_checks) {
    const char *d = tmpdir();
    CHECK(d);
    char m[DI_ERROR_MSG_MAX];
    CHECK(write_st(d, "s1.safetensors", SH1, 10) == 0 && write_st(d, "s2.safetensors", SH2, 4) == 0);
    const char *good = "\"model.a\":\"s1.safetensors\",\"model.b\":\"s1.safetensors\",\"model.c\":\"s2.safetensors\"";
    CHECK(write_index(d, good) == 0);
    di_safetensors *st = NULL;
    di_error e = {0};
    CHECK_MSG(di_st_open(d, &st, &e) == DEEPINFER_OK, "%s", e.msg);
    CHECK(di_st_count(st) == 3 && di_st_index_total_size(st) == 14);
    const di_tensor *c = di_st_find(st, "c");
    CHECK(c && c->shard == 1 && !strcmp(c->name, "model.c") && !strcmp(c->ref_name, "c"));
    CHECK(di_st_find(st, "model.c") == c);
    di_st_close(st);

    /* Entry naming a tensor its shard lacks. */
    CHECK(write_index(d, "\"model.a\":\"s1.safetensors\",\"model.b\":\"s1.safetensors\",\"model.c\":\"s2.safetensors\","
                         "\"model.q\":\"s2.safetensors\"") == 0);
    CHECK(open_dir(d, m, sizeof m) == DEEPINFER_ERR_FORMAT && strstr(m, "not in their shard: model.q"));
    /* Shard tensor missing from the index. */
    CHECK(write_index(d, "\"model.a\":\"s1.safetensors\",\"model.c\":\"s2.safetensors\"") == 0);
    CHECK(open_dir(d, m, sizeof m) == DEEPINFER_ERR_FORMAT && strstr(m, "missing from the index: model.b"));
    /* Wrong shard in the index. */
    CHECK(write_index(d, "\"model.a\":\"s1.safetensors\",\"model.b\":\"s1.safetensors\",\"model.c\":\"s1.safetensors\","
                         "\"model.x\":\"s2.safetensors\"") == 0);
    CHECK(open_dir(d, m, sizeof m) == DEEPINFER_ERR_FORMAT && strstr(m, "stored in s2.safetensors"));
    /* Missing shard file. */
    CHECK(write_index(d, "\"model.a\":\"s1.safetensors\",\"model.c\":\"s3.safetensors\"") == 0);
    CHECK(open_dir(d, m, sizeof m) == DEEPINFER_ERR_NOT_FOUND && strstr(m, "s3.safetensors") &&
          strstr(m, "does not exist"));
    /* Path escape and non-string shard names. */
    CHECK(write_index(d, "\"model.a\":\"../s1.safetensors\"") == 0);
    CHECK(open_dir(d, m, sizeof m) == DEEPINFER_ERR_FORMAT && strstr(m, "shard file name"));
    CHECK(write_index(d, "\"model.a\":3") == 0);
    CHECK(open_dir(d, m, sizeof m) == DEEPINFER_ERR_FORMAT);
    /* Both spellings listed. */
    CHECK(write_index(d, "\"model.a\":\"s1.safetensors\",\"a\":\"s1.safetensors\"") == 0);
    CHECK(open_dir(d, m, sizeof m) == DEEPINFER_ERR_FORMAT && strstr(m, "listed twice"));
    /* Malformed index JSON and a missing weight_map. */
    CHECK(write_file(d, "model.safetensors.index.json", "{\"weight_map\":{", 14) == 0);
    CHECK(open_dir(d, m, sizeof m) == DEEPINFER_ERR_FORMAT && strstr(m, "not valid JSON"));
    CHECK(write_file(d, "model.safetensors.index.json", "{}", 2) == 0);
    CHECK(open_dir(d, m, sizeof m) == DEEPINFER_ERR_FORMAT && strstr(m, "weight_map"));
    /* Duplicate across shards (no index: every *.safetensors is a shard). */
    char p[512];
    snprintf(p, sizeof p, "%s/model.safetensors.index.json", d);
    CHECK(unlink(p) == 0);
    CHECK(write_st(d, "s3.safetensors", "{\"c\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]}}", 1) == 0);
    CHECK(open_dir(d, m, sizeof m) == DEEPINFER_ERR_FORMAT && strstr(m, "in both s2.safetensors and s3.safetensors"));
    rm_dir(d);
}

TEST(st_open_missing_paths) {
    char m[DI_ERROR_MSG_MAX];
    CHECK(open_dir("/nonexistent/deepinfer/x", m, sizeof m) == DEEPINFER_ERR_NOT_FOUND && strstr(m, "does not exist"));
    const char *d = tmpdir();
    CHECK(d);
    CHECK(open_dir(d, m, sizeof m) == DEEPINFER_ERR_NOT_FOUND && strstr(m, "no model.safetensors.index.json"));
    CHECK(write_file(d, "model.safetensors", "", 0) == 0);
    CHECK(open_dir(d, m, sizeof m) == DEEPINFER_ERR_FORMAT && strstr(m, "8-byte header"));
    rm_dir(d);
}
