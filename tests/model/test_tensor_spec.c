/* Tests for src/model/tensor_spec: the golden checkpoints validate clean,
 * released configs imply the released tensor counts, and every kind of
 * weight-set defect is reported by name with expected and found. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "model/tensor_spec.h"
#include "test.h"

static di_model_config g_cfg;

static int load_cfg(const char *golden) {
    di_error e = {0};
    if (di_config_load(di_test_data(golden), &g_cfg, &e) != DEEPINFER_OK) {
        fprintf(stderr, "    %s\n", e.msg);
        return -1;
    }
    return 0;
}

static void check_golden(const char *name) {
    CHECK(load_cfg(name) == 0);
    di_weight_spec *spec = NULL;
    di_safetensors *st = NULL;
    di_error e = {0};
    CHECK_MSG(di_spec_build(&g_cfg, &spec, &e) == DEEPINFER_OK, "%s", e.msg);
    CHECK_MSG(di_st_open(di_test_data(name), &st, &e) == DEEPINFER_OK, "%s", e.msg);
    di_spec_report r;
    CHECK_MSG(di_spec_check(spec, st, &r, &e) == DEEPINFER_OK, "%s", e.msg);
    CHECK_EQ_INT(r.n_issues, 0);
    CHECK_EQ_INT(r.n_ok, di_st_count(st));
    CHECK_EQ_INT(r.n_expected, di_st_count(st));
    for (size_t i = 0; i < di_spec_count(spec); i++) {
        const di_tensor_spec *s = di_spec_at(spec, i);
        CHECK(s->tensor && s->tensor == di_st_find(st, s->name) && di_spec_find(spec, s->name) == s);
    }
    di_spec_report_free(&r);
    di_st_close(st);
    di_spec_free(spec);
}

TEST(spec_golden_v4_validates) {
    check_golden("golden/v4-tiny-a");
    if (di_test_failed()) return;
    CHECK(load_cfg("golden/v4-tiny-a") == 0);
    di_weight_spec *spec = NULL;
    di_safetensors *st = NULL;
    CHECK(di_spec_build(&g_cfg, &spec, NULL) == DEEPINFER_OK);
    CHECK(di_st_open(di_test_data("golden/v4-tiny-a"), &st, NULL) == DEEPINFER_OK);
    CHECK(di_spec_get(spec, "layers.%d.attn.wq_a.weight", 3) == NULL); /* not bound before the check */
    CHECK(di_spec_check(spec, st, NULL, NULL) == DEEPINFER_OK);
    const di_tensor *t = di_spec_get(spec, "layers.%d.attn.wq_a.weight", 3);
    CHECK(t && t == di_st_find(st, "layers.3.attn.wq_a.weight"));
    CHECK(di_spec_get(spec, "model.layers.0.ffn.gate.tid2eid") == di_st_find(st, "layers.0.ffn.gate.tid2eid"));
    const di_tensor_spec *e = di_spec_find(spec, "layers.4.ffn.experts.5.w2.scale");
    CHECK(e && e->kind == DI_TK_FP4_SCALE && e->layer == 4 && e->expert == 5);
    CHECK(di_spec_find(spec, "mtp.0.e_proj.scale")->layer == 5);
    CHECK(di_spec_find(spec, "layers.3.attn.indexer.wq_b.weight") == NULL); /* ratio-128 layer */
    di_st_close(st);
    di_spec_free(spec);
}

TEST(spec_golden_v41_validates) {
    check_golden("golden/v41-tiny-a");
    if (di_test_failed()) return;
    di_weight_spec *spec = NULL;
    CHECK(di_spec_build(&g_cfg, &spec, NULL) == DEEPINFER_OK);
    const di_tensor_spec *e = di_spec_find(spec, "layers.2.engram.embed.scale");
    CHECK(e && e->kind == DI_TK_ENGRAM_SCALE && e->shape[0] == 552 && e->shape[1] == 1);
    CHECK(di_spec_find(spec, "layers.4.attn.compressor.wgate.weight") == NULL); /* ratio-1 source: no gate */
    CHECK(di_spec_find(spec, "layers.6.attn.indexer.wk.weight") == NULL);        /* reindex: no keys */
    CHECK(di_spec_find(spec, "layers.0.ffn.gate.bias_vl")->flags & DI_SPEC_OPTIONAL);
    CHECK(di_spec_find(spec, "mtp.1.ffn.experts.3.w1.weight") && !di_spec_find(spec, "mtp.1.ffn.experts.4.w1.weight"));
    CHECK(di_spec_find(spec, "mtp.2.confidence_head.proj.weight")->shape[1] == 96);
    di_spec_free(spec);
}

/* Released configs (architecture.md §1.1, as in test_config.c) imply the
 * released tensor counts: V4-Flash 69,187 (its inventory); V4.1-Flash 96,085
 * minus the 266 vision/aligner/image tensors the spec ignores. */
TEST(spec_released_counts) {
    CHECK(load_cfg("golden/v4-tiny-a") == 0);
    /* Scale the tiny config up to V4-Flash in code, then re-derive. */
    di_model_config *c = &g_cfg;
    c->vocab_size = 129280, c->hidden_size = 4096, c->num_hidden_layers = 43, c->num_attention_heads = 64;
    c->head_dim = 512, c->q_lora_rank = 1024, c->o_lora_rank = 1024, c->o_groups = 8, c->n_routed_experts = 256;
    c->num_experts_per_tok = 6, c->moe_intermediate_size = 2048, c->index_n_heads = 64, c->num_hash_layers = 3;
    c->n_compress_ratios = 44;
    c->compress_ratios[0] = c->compress_ratios[1] = c->compress_ratios[43] = 0;
    for (int l = 2; l < 43; l++) c->compress_ratios[l] = (l % 2 == 0) ? 4 : 128;
    c->n_defaulted = 0;
    c->num_nextn_predict_layers = 1;
    di_error e = {0};
    CHECK_MSG(di_config_derive(c, "v4", &e) == DEEPINFER_OK, "%s", e.msg);
    di_weight_spec *spec = NULL;
    CHECK(di_spec_build(c, &spec, &e) == DEEPINFER_OK);
    CHECK_EQ_INT(di_spec_count(spec), 69187);
    const di_tensor_spec *s = di_spec_find(spec, "layers.3.attn.wo_a.scale");
    CHECK(s && s->shape[0] == 64 && s->shape[1] == 32);
    s = di_spec_find(spec, "layers.42.attn.indexer.compressor.ape");
    CHECK(s && s->shape[0] == 4 && s->shape[1] == 256);
    s = di_spec_find(spec, "layers.41.attn.compressor.ape");
    CHECK(s && s->shape[0] == 128 && s->shape[1] == 512);
    s = di_spec_find(spec, "layers.7.ffn.experts.255.w2.weight");
    CHECK(s && s->dtype == DI_DTYPE_I8 && s->shape[0] == 4096 && s->shape[1] == 1024);
    CHECK(di_spec_find(spec, "layers.2.ffn.gate.tid2eid")->shape[1] == 6);
    CHECK(di_spec_find(spec, "mtp.0.hc_head_fn")->shape[1] == 16384);
    di_spec_free(spec);

    CHECK(load_cfg("golden/v41-tiny-a") == 0);
    c->vocab_size = 129280, c->hidden_size = 5120, c->num_hidden_layers = 40, c->num_attention_heads = 64;
    c->head_dim = 512, c->q_lora_rank = 1280, c->o_lora_rank = 1024, c->o_groups = 8, c->n_routed_experts = 384;
    c->num_experts_per_tok = 6, c->moe_intermediate_size = 2304, c->index_n_heads = 32;
    c->n_compress_ratios = 43;
    for (int l = 0; l < 43; l++) c->compress_ratios[l] = l < 2 || l >= 40 ? 0 : l < 20 ? 2 : 1;
    int kv[] = {2, 8, 14, 20}, ix[] = {2, 8, 14, 20, 24, 28, 32, 36};
    c->n_kv_source_layer_ids = 4, c->n_index_source_layer_ids = 8;
    memcpy(c->kv_source_layer_ids, kv, sizeof kv);
    memcpy(c->index_source_layer_ids, ix, sizeof ix);
    c->candidate_source_layer_id = 20, c->engram_layer_ids[0] = 1, c->engram_layer_ids[1] = 14;
    c->engram_num_embeddings[0] = 384006168, c->engram_num_embeddings[1] = 384016682;
    c->engram_vocab_size = 16000000, c->engram_n_heads = 8, c->engram_head_dim = 256;
    c->engram_compressed_vocab_size = 99092, c->dspark_noise_token_id = 128799, c->image_token_id = 129264;
    c->dspark_markov_rank = 256, c->dspark_n_routed_experts = 128, c->dspark_num_experts_per_tok = 3;
    c->dspark_target_layer_ids[0] = 37, c->dspark_target_layer_ids[1] = 38, c->dspark_target_layer_ids[2] = 39;
    CHECK_MSG(di_config_derive(c, "v41", &e) == DEEPINFER_OK, "%s", e.msg);
    CHECK(di_spec_build(c, &spec, &e) == DEEPINFER_OK);
    CHECK_EQ_INT(di_spec_count(spec), 96085 - 266);
    s = di_spec_find(spec, "layers.14.engram.wkv.scale");
    CHECK(s && s->shape[0] == 800 && s->shape[1] == 192);
    s = di_spec_find(spec, "layers.1.engram.embed.scale");
    CHECK(s && s->shape[0] == 384006168 && s->shape[1] == 8);
    s = di_spec_find(spec, "layers.5.attn.wq_b.scale");
    CHECK(s && s->shape[0] == 1024 && s->shape[1] == 40);
    s = di_spec_find(spec, "layers.30.ffn.experts.383.w1.scale");
    CHECK(s && s->shape[0] == 2304 && s->shape[1] == 160);
    CHECK(di_spec_find(spec, "mtp.0.main_proj.weight")->shape[1] == 15360);
    CHECK(di_spec_find(spec, "mtp.2.confidence_head.proj.weight")->shape[1] == 5376);
    di_spec_free(spec);
}

/* ---- synthetic checkpoints built from a spec, then damaged ---- */

typedef struct fake {
    const char *skip;     /* leave this tensor out */
    const char *reshape;  /* give this tensor its last dim − 1 */
    const char *retype;   /* store this tensor as F32 of the same element count */
    const char *extra;    /* add this U8 [1] tensor */
    const char *prefix;   /* stored name prefix ("" or "model.") */
} fake;

static size_t dsize(int dt) { return di_dtype_size((di_dtype)dt); }

/* Write one safetensors file holding every spec entry (zeros), damaged as `f` says. */
static int write_fake(const char *path, const di_weight_spec *spec, const fake *f) {
    size_t n = di_spec_count(spec), cap = 256 + n * 160, at = 0;
    char *h = malloc(cap);
    if (!h) return -1;
    uint64_t off = 0;
    at += (size_t)snprintf(h + at, cap - at, "{\"__metadata__\":{\"format\":\"pt\"}");
    for (size_t i = 0; i < n; i++) {
        const di_tensor_spec *e = di_spec_at(spec, i);
        if (f->skip && !strcmp(e->name, f->skip)) continue;
        int64_t s0 = e->shape[0], s1 = e->shape[1];
        int dt = e->dtype;
        if (f->reshape && !strcmp(e->name, f->reshape)) {
            if (e->ndim == 2) s1--;
            else s0--;
        }
        uint64_t numel = (uint64_t)s0 * (uint64_t)(e->ndim == 2 ? s1 : 1);
        if (f->retype && !strcmp(e->name, f->retype)) dt = DI_DTYPE_F32;
        uint64_t nb = numel * dsize(dt);
        if (e->ndim == 2)
            at += (size_t)snprintf(h + at, cap - at, ",\"%s%s\":{\"dtype\":\"%s\",\"shape\":[%lld,%lld],"
                                   "\"data_offsets\":[%llu,%llu]}", f->prefix, e->name, di_dtype_name((di_dtype)dt),
                                   (long long)s0, (long long)s1, (unsigned long long)off, (unsigned long long)(off + nb));
        else
            at += (size_t)snprintf(h + at, cap - at, ",\"%s%s\":{\"dtype\":\"%s\",\"shape\":[%lld],"
                                   "\"data_offsets\":[%llu,%llu]}", f->prefix, e->name, di_dtype_name((di_dtype)dt),
                                   (long long)s0, (unsigned long long)off, (unsigned long long)(off + nb));
        off += nb;
    }
    if (f->extra) {
        at += (size_t)snprintf(h + at, cap - at, ",\"%s\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[%llu,%llu]}",
                               f->extra, (unsigned long long)off, (unsigned long long)(off + 1));
        off += 1;
    }
    at += (size_t)snprintf(h + at, cap - at, "}");
    FILE *fp = fopen(path, "wb");
    if (!fp || at >= cap) {
        if (fp) fclose(fp);
        free(h);
        return -1;
    }
    unsigned char len[8];
    for (int i = 0; i < 8; i++) len[i] = (unsigned char)((uint64_t)at >> (8 * i));
    int ok = fwrite(len, 1, 8, fp) == 8 && fwrite(h, 1, at, fp) == at;
    free(h);
    static const unsigned char zeros[65536];
    while (ok && off) {
        size_t k = off < sizeof zeros ? (size_t)off : sizeof zeros;
        ok = fwrite(zeros, 1, k, fp) == k;
        off -= k;
    }
    return (fclose(fp) == 0 && ok) ? 0 : -1;
}

/* Every issue of the last check_fake, formatted, one per line. */
static char g_issues[65536];

/* Build, damage, check; returns the status and fills the report's counts
 * (its issues are formatted into g_issues, then freed). */
static deepinfer_status check_fake(const char *golden, const fake *f, di_spec_report *r, char *msg, size_t msgn) {
    if (load_cfg(golden) != 0) return DEEPINFER_ERR_INTERNAL;
    di_weight_spec *spec = NULL;
    di_safetensors *st = NULL;
    di_error e = {0};
    deepinfer_status rc = di_spec_build(&g_cfg, &spec, &e);
    char dir[] = "/tmp/di_spec_XXXXXX", path[64];
    if (rc == DEEPINFER_OK && !mkdtemp(dir)) rc = DEEPINFER_ERR_IO;
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    if (rc == DEEPINFER_OK && write_fake(path, spec, f) != 0) rc = DEEPINFER_ERR_IO;
    if (rc == DEEPINFER_OK) rc = di_st_open(dir, &st, &e);
    memset(r, 0, sizeof *r);
    g_issues[0] = '\0';
    if (rc == DEEPINFER_OK) rc = di_spec_check(spec, st, r, &e);
    for (size_t i = 0, at = 0; i < r->n_issues && at < sizeof g_issues; i++) {
        char b[400];
        di_spec_issue_format(&r->issues[i], b, sizeof b);
        at += (size_t)snprintf(g_issues + at, sizeof g_issues - at, "%s\n", b);
    }
    di_spec_report_free(r);
    snprintf(msg, msgn, "%s", e.msg);
    unlink(path);
    rmdir(dir);
    di_st_close(st);
    di_spec_free(spec);
    return rc;
}

static int has_issue(const di_spec_report *r, const char *line) {
    (void)r;
    char want[420];
    snprintf(want, sizeof want, "%s\n", line);
    return strstr(g_issues, want) != NULL;
}

TEST(spec_fake_clean_with_model_prefix) {
    di_spec_report r;
    char m[DI_ERROR_MSG_MAX];
    fake f = {.prefix = "model."};
    CHECK_MSG(check_fake("golden/v41-tiny-a", &f, &r, m, sizeof m) == DEEPINFER_OK, "%s", m);
    CHECK(g_issues[0] == '\0' && r.n_ok == r.n_expected);
}

TEST(spec_reports_every_defect) {
    di_spec_report r;
    char m[DI_ERROR_MSG_MAX];
    fake f = {.prefix = "", .skip = "layers.2.attn.indexer.wq_b.scale", .reshape = "layers.3.attn.wq_a.weight",
              .retype = "layers.0.ffn.gate.tid2eid", .extra = "mtp.0.emb.weight"};
    deepinfer_status rc = check_fake("golden/v4-tiny-a", &f, &r, m, sizeof m);
    CHECK(rc == DEEPINFER_ERR_FORMAT);
    CHECK_MSG(strstr(m, "1 missing and 2 inconsistent") != NULL, "%s", m);
    CHECK(r.n_missing == 1 && r.n_mismatch == 2 && r.n_extra == 1 && r.n_ok == r.n_expected - 3);
    CHECK(has_issue(&r, "layers.2.attn.indexer.wq_b.scale: expected F8_E8M0 [4,1], missing"));
    CHECK(has_issue(&r, "layers.3.attn.wq_a.weight: expected F8_E4M3 [128,128], found F8_E4M3 [128,127]"));
    CHECK(has_issue(&r, "layers.0.ffn.gate.tid2eid: expected I64 [1024,2], found F32 [1024,2]"));
    CHECK(has_issue(&r, "mtp.0.emb.weight: unexpected tensor (U8 [1])"));
}

TEST(spec_optional_and_ignored) {
    di_spec_report r;
    char m[DI_ERROR_MSG_MAX];
    fake f = {.prefix = "", .skip = "layers.5.ffn.gate.bias_vl", .extra = "vision.blocks.0.attn.wqkv.weight"};
    CHECK_MSG(check_fake("golden/v41-tiny-a", &f, &r, m, sizeof m) == DEEPINFER_OK, "%s", m);
    CHECK(r.n_optional_missing == 1 && r.n_ignored == 1 && r.n_extra == 0);
    CHECK(has_issue(&r, "layers.5.ffn.gate.bias_vl: optional, absent (would be F32 [8])"));
    /* A wrong shape of an optional tensor is still an error. */
    fake g = {.prefix = "", .reshape = "layers.5.ffn.gate.bias_vl"};
    CHECK(check_fake("golden/v41-tiny-a", &g, &r, m, sizeof m) == DEEPINFER_ERR_FORMAT);
    CHECK(has_issue(&r, "layers.5.ffn.gate.bias_vl: expected F32 [8], found F32 [7]"));
}

TEST(spec_hints_at_transformers_names) {
    di_spec_report r;
    char m[DI_ERROR_MSG_MAX];
    fake f = {.prefix = "", .skip = "layers.0.attn.wq_a.weight", .extra = "model.layers.0.self_attn.q_a_proj.weight"};
    CHECK(check_fake("golden/v4-tiny-a", &f, &r, m, sizeof m) == DEEPINFER_ERR_FORMAT);
    CHECK_MSG(strstr(m, "transformers conversion") != NULL, "%s", m);
}

/* The embedded default model (models/, issue 8) ships a valid checkpoint:
 * text-only, so its config has no image token. */
TEST(spec_demo_model_validates) {
    check_golden("../../models/deepinfer-demo-v41");
    if (di_test_failed()) return;
    CHECK(load_cfg("../../models/deepinfer-demo-v41") == 0);
    CHECK_EQ_INT(g_cfg.image_token_id, -1);
}
