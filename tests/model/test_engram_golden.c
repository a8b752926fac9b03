/* Engram on the golden tiny V4.1 checkpoint (tests/data/golden/v41-tiny-a):
 * config, token map, the manifest's hash constants, the checkpoint's engram
 * tensors bound in place from the mmap'd shard — run over the golden prompt.
 * The golden has no intermediate Engram activations (the whole forward's
 * logits are checked in tests/golden/test_golden_v41.c), so this checks the
 * block alone: binding, shapes, and its gates per layer as measured; hash ids are checked exactly in
 * test_engram_hash.c. The safetensors header is read by a few lines here so
 * the test does not depend on the io module. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "io/json.h"
#include "io/numfmt.h"
#include "model/engram.h"
#include "model/engram_setup.h"
#include "test.h"
#include "util/file.h"

typedef struct shard {
    di_mapped_file f;
    di_json_doc *hdr;
    const uint8_t *data;
} shard;

static int shard_open(shard *s, const char *path) {
    di_error err;
    memset(s, 0, sizeof *s);
    if (di_map_file(path, &s->f, &err) || s->f.size < 8) return 0;
    uint64_t n;
    memcpy(&n, s->f.data, 8);
    if (n > s->f.size - 8 || di_json_parse((const char *)s->f.data + 8, n, NULL, &s->hdr, &err)) return 0;
    s->data = s->f.data + 8 + n;
    return 1;
}

static void shard_close(shard *s) {
    di_json_free(s->hdr);
    di_unmap_file(&s->f);
}

/* Tensor bytes, checking dtype and shape. */
static const void *tensor(const shard *s, const char *name, const char *dtype, int64_t d0, int64_t d1) {
    const di_json *t = di_json_get(s->hdr->root, name);
    const di_json *dt = di_json_get(t, "dtype"), *sh = di_json_get(t, "shape"), *off = di_json_get(t, "data_offsets");
    int64_t x0, x1, o0;
    if (!dt || strcmp(dt->str, dtype) || !sh || sh->count != 2 || !di_json_as_i64(&sh->items[0], &x0) ||
        !di_json_as_i64(&sh->items[1], &x1) || x0 != d0 || x1 != d1 || !off || off->count != 2 ||
        !di_json_as_i64(&off->items[0], &o0))
        return NULL;
    return s->data + o0;
}

TEST(engram_golden_checkpoint_smoke) {
    const char *dir = "golden/v41-tiny-a/";
    char path[512];
    di_error err;
    char *text;
    size_t len;
    di_json_doc *man_doc;

    snprintf(path, sizeof path, "%sconfig.json", dir);
    di_model_config cfg;
    CHECK(di_config_load(di_test_data(path), &cfg, &err) == DEEPINFER_OK);
    deepinfer_status st;
    int64_t dim = cfg.hidden_size, hc = cfg.hc_mult, vocab = cfg.vocab_size;
    CHECK(dim == 64 && hc == 4);

    /* token map from the model directory, constants from the manifest (the golden has no engram_hash.json) */
    snprintf(path, sizeof path, "%sexpected/manifest.json", dir);
    CHECK(di_read_file(di_test_data(path), 0, &text, &len, &err) == 0);
    CHECK(di_json_parse(text, len, NULL, &man_doc, &err) == 0);
    free(text);
    di_engram_tables tables;
    char man_path[512];
    snprintf(man_path, sizeof man_path, "%s", di_test_data(path));
    st = di_engram_setup(di_test_data(dir), &cfg, NULL, man_path, &tables, &err);
    const di_json *prompt = di_json_get(man_doc->root, "prompt_token_ids");
    int64_t n = prompt ? prompt->count : 0;
    int32_t *tokens = malloc(sizeof(int32_t) * n);
    for (int64_t i = 0; i < n; i++) {
        int64_t v = 0;
        di_json_as_i64(&prompt->items[i], &v);
        tokens[i] = (int32_t)v;
    }
    di_json_free(man_doc);
    const di_engram_hash h = tables.hash;
    int64_t *ids = malloc(sizeof(int64_t) * n * h.n_layers * h.n_cols);
    di_engram_seq seq;
    di_engram_seq_init(&seq);
    if (!st) st = di_engram_step_ids(&tables, &seq, 0, tokens, NULL, n, ids, &err);
    int32_t map_ids = tables.map.n_ids, head_dim = (int32_t)cfg.engram_head_dim;
    di_engram_tables_free(&tables);
    CHECK_MSG(st == DEEPINFER_OK && n == 261, "%s", err.msg);
    CHECK_EQ_INT(map_ids, vocab);

    shard s;
    snprintf(path, sizeof path, "%smodel-00002-of-00002.safetensors", dir);
    CHECK(shard_open(&s, di_test_data(path)));
    shard s1;
    snprintf(path, sizeof path, "%smodel-00001-of-00002.safetensors", dir);
    CHECK(shard_open(&s1, di_test_data(path)));
    const uint16_t *embed = tensor(&s1, "embed.weight", "BF16", vocab, dim);
    if (!embed) embed = tensor(&s, "embed.weight", "BF16", vocab, dim);
    CHECK(embed != NULL);

    const int k = h.n_cols * head_dim, nout = (int)((hc + 1) * dim);
    di_exec x;
    CHECK(di_exec_init(&x, 0, &err) == DEEPINFER_OK);
    uint16_t *R = malloc(sizeof(uint16_t) * n * hc * dim);
    float *gates = malloc(sizeof(float) * n * hc);
    int ok = 1;
    double gsum = 0, lmean[8] = {0}, lstd[8] = {0};
    CHECK(h.n_layers == 2);
    for (int li = 0; li < h.n_layers && ok; li++) {
        char name[6][96];
        const char *suffix[6] = {"embed.weight", "embed.scale", "wkv.weight", "wkv.scale", "q_weight", "k_weight"};
        for (int i = 0; i < 6; i++) snprintf(name[i], sizeof name[i], "layers.%d.engram.%s", h.layer_ids[li], suffix[i]);
        const shard *where = di_json_get(s.hdr->root, name[0]) ? &s : &s1;
        di_wmat wkv;
        const void *wkv_w = tensor(where, name[2], "F8_E4M3", nout, k), *wkv_s = tensor(where, name[3], "F8_E8M0", (nout + 31) / 32, k / 32);
        ok &= wkv_w && wkv_s && di_wmat_pack(&wkv, DI_WFMT_FP8, wkv_w, wkv_s, nout, k, 32, &err) == DEEPINFER_OK;
        if (!ok) break;
        di_engram_layer_desc d = {
            .dim = (int)dim, .hc = (int)hc, .n_cols = h.n_cols, .head_dim = head_dim, .rows = h.num_embeddings[li],
            .eps = 1e-20f, .act_block = 32,
            .table = tensor(where, name[0], "F8_E4M3", h.num_embeddings[li], head_dim),
            .table_scale = tensor(where, name[1], "F8_E8M0", h.num_embeddings[li], head_dim / 32),
            .wkv = &wkv,
            .q_weight = tensor(where, name[4], "BF16", hc, dim),
            .k_weight = tensor(where, name[5], "BF16", hc, dim),
            .qk_f32 = 0,
        };
        di_engram_layer l;
        di_engram_workspace ws;
        ok &= di_engram_layer_init(&l, &d, &err) == DEEPINFER_OK; /* NULL pointers = wrong dtype/shape */
        if (!ok) {
            di_wmat_free(&wkv);
            break;
        }
        ok &= di_engram_workspace_init(&ws, &l, 16, &err) == DEEPINFER_OK;
        for (int64_t t = 0; t < n; t++)
            for (int cc = 0; cc < hc; cc++) memcpy(R + (t * hc + cc) * dim, embed + tokens[t] * dim, sizeof(uint16_t) * dim);
        di_engram_prefetch(&l, ids + li * h.n_cols, (int64_t)h.n_layers * h.n_cols, n);
        ok &= di_engram_forward(&x, &l, &ws, R, n, ids + li * h.n_cols, (int64_t)h.n_layers * h.n_cols, NULL, gates,
                                &err) == DEEPINFER_OK;
        double lsum = 0, lsq = 0;
        for (int64_t i = 0; i < n * hc && ok; i++) {
            ok &= gates[i] > 0.0f && gates[i] < 1.0f;
            gsum += gates[i];
            lsum += gates[i], lsq += (double)gates[i] * gates[i];
        }
        lmean[li] = lsum / (double)(n * hc);
        lstd[li] = sqrt(fmax(lsq / (double)(n * hc) - lmean[li] * lmean[li], 0));
        for (int64_t i = 0; i < n * hc * dim && ok; i++) ok &= isfinite(di_bf16_to_f32(R[i]));
        di_engram_workspace_free(&ws);
        di_engram_layer_free(&l);
        di_wmat_free(&wkv);
    }
    di_exec_free(&x);
    shard_close(&s);
    shard_close(&s1);
    free(tokens), free(ids), free(R), free(gates);
    CHECK_MSG(ok, "%s", err.msg);
    gsum /= (double)(n * hc * h.n_layers);
    /* Per layer, the gates' mean and spread over the prompt's tokens x hc lanes, bounded at the
     * measured values (layer 1: mean 0.4887 std 0.2048; layer 2: mean 0.5198 std 0.1994) +- 0.02 for
     * the mean and within a factor 1.5 for the spread: the values are deterministic, the margins
     * only leave room for a reordered sum. */
    static const double want_mean[2] = {0.4887, 0.5198}, want_std[2] = {0.2048, 0.1994};
    for (int li = 0; li < h.n_layers; li++) {
        fprintf(stderr, "    engram layer %d: gate mean %.4f std %.4f\n", h.layer_ids[li], lmean[li], lstd[li]);
        CHECK_MSG(fabs(lmean[li] - want_mean[li]) <= 0.02, "layer %d: mean gate %.4f, measured %.4f", h.layer_ids[li],
                  lmean[li], want_mean[li]);
        CHECK_MSG(lstd[li] >= want_std[li] / 1.5 && lstd[li] <= want_std[li] * 1.5, "layer %d: gate std %.4f, measured %.4f",
                  h.layer_ids[li], lstd[li], want_std[li]);
    }
    (void)gsum;
}
