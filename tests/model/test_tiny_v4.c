/*
 * The tiny random V4 checkpoint tiny-v4-b (written into the build directory
 * by `make test` with tools/gen_tiny_checkpoint.py; a shape unlike the golden one: hidden 256,
 * 3 layers with ratios 0/4/128 + MTP, 4 heads, 4 output groups, 4 experts,
 * window 16, vocab 384) loads and runs: finite logits, prefill == chunked
 * prefill == token-by-token decode (bitwise), MTP finite. A copy with one
 * tensor's shape changed is rejected with an error that names the tensor.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/dsv4.h"
#include "test.h"
#include "util/cpu.h"
#include "util/file.h"

#define TDIR "tiny-v4-b"

static deepinfer_status run(di_v4_model *m, const int32_t *tok, int n, int chunk, float *out, uint16_t *hid) {
    di_error err = {0};
    di_seq_state *s = NULL;
    if (di_v4_seq_new(m, &s, &err)) return err.code;
    const di_model_config *c = di_v4_config(m);
    int64_t pos[512];
    int rows[512];
    di_seq_state *seq[512];
    deepinfer_status st = DEEPINFER_OK;
    for (int i0 = 0; i0 < n && !st; i0 += chunk) {
        int k = n - i0 < chunk ? n - i0 : chunk;
        for (int i = 0; i < k; i++) pos[i] = i0 + i, rows[i] = i, seq[i] = s;
        di_v4_batch b = {.n = k, .tokens = tok + i0, .pos = pos, .seq = seq, .n_logits = k, .logit_rows = rows,
                         .logits = out + (size_t)i0 * c->vocab_size,
                         .hidden = hid ? hid + (size_t)i0 * c->hc_mult * c->hidden_size : NULL};
        st = di_v4_forward(m, &b, &err);
    }
    di_seq_destroy(s);
    return st;
}

TEST(tiny_v4_loads_runs_and_is_chunk_invariant) {
    di_v4_model *m = NULL;
    di_error err = {0};
    CHECK_MSG(di_v4_load(di_test_gen_data(TDIR), NULL, &m, &err) == DEEPINFER_OK, "%s", err.msg);
    const di_model_config *c = di_v4_config(m);
    CHECK(c->hidden_size == 256 && c->n_layers == 3 && c->vocab_size == 384);
    int n = 300, V = (int)c->vocab_size; /* > 2 ratio-128 groups, > window, > indexer top-k */
    int32_t tok[300];
    for (int i = 0; i < n; i++) tok[i] = (int32_t)((i * 37 + 11) % V);
    size_t sz = sizeof(float) * (size_t)n * V;
    float *a = malloc(sz), *b = malloc(sz), *d = malloc(sz);
    size_t hcd = (size_t)(c->hc_mult * c->hidden_size);
    uint16_t *hid = malloc(2 * hcd * (size_t)n);
    CHECK(run(m, tok, n, n, a, hid) == DEEPINFER_OK);
    CHECK(run(m, tok, n, 13, b, NULL) == DEEPINFER_OK);
    CHECK(run(m, tok, n, 1, d, NULL) == DEEPINFER_OK);
    int finite = 1;
    double sum = 0;
    for (size_t i = 0; i < (size_t)n * V; i++) finite &= isfinite(a[i]), sum += fabs(a[i]);
    CHECK(finite);
    CHECK(sum / ((double)n * V) > 1e-3); /* not all zero */
    CHECK_MSG(!memcmp(a, b, sz), "chunk 13 differs from the whole prefill");
    CHECK_MSG(!memcmp(a, d, sz), "token-by-token differs from the whole prefill");
    /* the MTP block runs on the backbone's residuals */
    di_seq_state *s = NULL;
    CHECK(di_v4_seq_new(m, &s, &err) == DEEPINFER_OK);
    int64_t pos[300];
    di_seq_state *seq[300];
    for (int i = 0; i < n; i++) pos[i] = i, seq[i] = s;
    int last = n - 1;
    float *ml = malloc(sizeof(float) * (size_t)V);
    di_v4_batch bm = {.n = n, .tokens = tok, .pos = pos, .seq = seq, .n_logits = 1, .logit_rows = &last, .logits = ml};
    CHECK_MSG(di_v4_mtp_forward(m, &bm, hid, &err) == DEEPINFER_OK, "%s", err.msg);
    for (int i = 0; i < V; i++) CHECK(isfinite(ml[i]));
    di_seq_destroy(s);
    free(a), free(b), free(d), free(hid), free(ml);
    di_v4_free(m);
}

/* Copy the checkpoint to a temp dir, replacing `from` by `to` (same length)
 * in the first shard's header. */
static int corrupt_copy(char *dir, const char *from, const char *to) {
    if (!mkdtemp(dir)) return -1;
    const char *files[] = {"config.json", "model.safetensors.index.json", "model-00001-of-00002.safetensors",
                           "model-00002-of-00002.safetensors"};
    int patched = 0;
    for (int i = 0; i < 4; i++) {
        char src[512], dst[512], *data = NULL;
        size_t len = 0;
        snprintf(src, sizeof src, "%s/%s", di_test_gen_data(TDIR), files[i]);
        snprintf(dst, sizeof dst, "%s/%s", dir, files[i]);
        if (di_read_file(src, 0, &data, &len, NULL)) return -1;
        if (i >= 2) {
            uint64_t hl;
            memcpy(&hl, data, 8);
            char *h = data + 8, *p = NULL;
            for (size_t j = 0; j + strlen(from) <= hl && !p; j++)
                if (!memcmp(h + j, from, strlen(from))) p = h + j;
            if (p) {
                memcpy(p, to, strlen(to));
                patched++;
            }
        }
        FILE *f = fopen(dst, "wb");
        int ok = f && fwrite(data, 1, len, f) == len;
        if (f) fclose(f);
        free(data);
        if (!ok) return -1;
    }
    return patched == 1 ? 0 : -1;
}

TEST(tiny_v4_wrong_shape_is_rejected_naming_the_tensor) {
    /* layers.1.attn.wq_b.weight is F8_E4M3 [512,128]; claim [256,256] (same bytes) */
    char dir[] = "/tmp/di_tiny_XXXXXX";
    CHECK(corrupt_copy(dir, "\"layers.1.attn.wq_b.weight\":{\"dtype\":\"F8_E4M3\",\"shape\":[512,128]",
                       "\"layers.1.attn.wq_b.weight\":{\"dtype\":\"F8_E4M3\",\"shape\":[256,256]") == 0);
    di_v4_model *m = NULL;
    di_error err = {0};
    deepinfer_status st = di_v4_load(dir, NULL, &m, &err);
    fprintf(stderr, "    load error: %s\n", err.msg);
    CHECK(st == DEEPINFER_ERR_FORMAT);
    CHECK(m == NULL);
    CHECK(strstr(err.msg, "layers.1.attn.wq_b.weight") != NULL);
    CHECK(strstr(err.msg, "[512,128]") != NULL && strstr(err.msg, "[256,256]") != NULL);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    CHECK(system(cmd) == 0);
}

TEST(tiny_v4_logits_identical_on_every_isa_path) {
    /* scalar, AVX2 and AVX-512 kernels follow one operation order: the whole
     * model's logits agree bit for bit */
    di_v4_model *m = NULL;
    di_error err = {0};
    CHECK(di_v4_load(di_test_gen_data(TDIR), NULL, &m, &err) == DEEPINFER_OK);
    int n = 40, V = (int)di_v4_config(m)->vocab_size;
    int32_t tok[40];
    for (int i = 0; i < n; i++) tok[i] = (int32_t)((i * 53 + 7) % V);
    di_isa hw = di_cpu_isa_hw();
    if (hw == DI_ISA_SCALAR) {
        di_v4_free(m);
        SKIP("only the scalar path on this CPU: no vector path to compare with it");
    }
    float *ref = NULL;
    for (int isa = DI_ISA_SCALAR; isa <= (int)hw; isa++) {
        di_cpu_set_isa((di_isa)isa);
        float *out = malloc(sizeof(float) * (size_t)n * V);
        CHECK(run(m, tok, n, 9, out, NULL) == DEEPINFER_OK);
        if (!ref) {
            ref = out;
            continue;
        }
        CHECK_MSG(!memcmp(out, ref, sizeof(float) * (size_t)n * V), "ISA path %s differs from scalar", di_isa_name((di_isa)isa));
        free(out);
    }
    di_cpu_set_isa(hw);
    free(ref);
    di_v4_free(m);
}

TEST(tiny_v4_sub_batches_are_invisible) {
    /* a model whose workspace holds 7 rows runs a 300-row step as sub-batches:
     * same bits as the default workspace */
    di_v4_model *a = NULL, *b = NULL;
    di_error err = {0};
    di_v4_options small = {.max_rows = 7};
    CHECK(di_v4_load(di_test_gen_data(TDIR), NULL, &a, &err) == DEEPINFER_OK);
    CHECK(di_v4_load(di_test_gen_data(TDIR), &small, &b, &err) == DEEPINFER_OK);
    int n = 300, V = (int)di_v4_config(a)->vocab_size;
    int32_t tok[300];
    for (int i = 0; i < n; i++) tok[i] = (int32_t)((i * 29 + 3) % V);
    float *x = malloc(sizeof(float) * (size_t)n * V), *y = malloc(sizeof(float) * (size_t)n * V);
    CHECK(run(a, tok, n, n, x, NULL) == DEEPINFER_OK);
    CHECK(run(b, tok, n, n, y, NULL) == DEEPINFER_OK);
    CHECK(!memcmp(x, y, sizeof(float) * (size_t)n * V));
    free(x), free(y);
    di_v4_free(a);
    di_v4_free(b);
}
