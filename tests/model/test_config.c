/* Tests for src/model/config: golden and released configs, derived layer
 * roles, reference key synonyms, and an error naming the key for every kind
 * of inconsistency. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/config.h"
#include "model/mem_estimate.h"
#include "test.h"

/* DeepSeek-V4-Flash config.json values (architecture.md §1.1). */
static const char *V4_FLASH =
    "{\"architectures\":[\"DeepseekV4ForCausalLM\"],\"model_type\":\"deepseek_v4\",\"vocab_size\":129280,"
    "\"hidden_size\":4096,\"num_hidden_layers\":43,\"num_attention_heads\":64,\"num_key_value_heads\":1,"
    "\"head_dim\":512,\"qk_rope_head_dim\":64,\"q_lora_rank\":1024,\"o_lora_rank\":1024,\"o_groups\":8,"
    "\"n_routed_experts\":256,\"n_shared_experts\":1,\"num_experts_per_tok\":6,\"moe_intermediate_size\":2048,"
    "\"scoring_func\":\"sqrtsoftplus\",\"topk_method\":\"noaux_tc\",\"norm_topk_prob\":true,"
    "\"routed_scaling_factor\":1.5,\"num_hash_layers\":3,\"swiglu_limit\":10.0,\"sliding_window\":128,"
    "\"compress_ratios\":[0,0,4,128,4,128,4,128,4,128,4,128,4,128,4,128,4,128,4,128,4,128,4,128,4,128,4,128,4,"
    "128,4,128,4,128,4,128,4,128,4,128,4,128,4,0],"
    "\"compress_rope_theta\":160000,\"rope_theta\":10000,\"rope_scaling\":{\"type\":\"yarn\",\"factor\":16,"
    "\"beta_fast\":32,\"beta_slow\":1,\"original_max_position_embeddings\":65536},"
    "\"max_position_embeddings\":1048576,\"index_n_heads\":64,\"index_head_dim\":128,\"index_topk\":512,"
    "\"hc_mult\":4,\"hc_sinkhorn_iters\":20,\"hc_eps\":1e-06,\"rms_norm_eps\":1e-06,"
    "\"num_nextn_predict_layers\":1,\"bos_token_id\":0,\"eos_token_id\":1,\"tie_word_embeddings\":false,"
    "\"torch_dtype\":\"bfloat16\",\"quantization_config\":{\"quant_method\":\"fp8\",\"fmt\":\"e4m3\","
    "\"activation_scheme\":\"dynamic\",\"scale_fmt\":\"ue8m0\",\"weight_block_size\":[128,128]}}";

/* DeepSeek-V4.1-Flash config.json (composite; architecture.md §1.1). */
static const char *V41_FLASH =
    "{\"architectures\":[\"DeepseekV41ForCausalLM\"],\"model_type\":\"deepseek_v41\",\"dtype\":\"bfloat16\","
    "\"bos_token_id\":0,\"eos_token_id\":1,\"pad_token_id\":2,\"image_token_id\":129264,"
    "\"quantization_config\":{\"quant_method\":\"fp8\",\"activation_scheme\":\"dynamic\","
    "\"weight_block_size\":[32,32],\"scale_fmt\":\"ue8m0\",\"expert_dtype\":\"fp4\"},"
    "\"vision_config\":{\"num_hidden_layers\":32,\"hidden_size\":1024},"
    "\"text_config\":{\"vocab_size\":129280,\"hidden_size\":5120,\"num_hidden_layers\":40,"
    "\"num_attention_heads\":64,\"num_key_value_heads\":1,\"head_dim\":512,\"qk_rope_head_dim\":64,"
    "\"q_lora_rank\":1280,\"o_lora_rank\":1024,\"o_groups\":8,\"n_routed_experts\":384,\"n_shared_experts\":1,"
    "\"num_experts_per_tok\":6,\"moe_intermediate_size\":2304,\"scoring_func\":\"sqrtsoftplus\","
    "\"topk_method\":\"noaux_tc\",\"norm_topk_prob\":true,\"routed_scaling_factor\":1.5,\"gate_temp\":1.0,"
    "\"swiglu_limit\":10.0,\"sliding_window\":128,"
    "\"compress_ratios\":[0,0,2,2,2,2,2,2,2,2,2,2,2,2,2,2,2,2,2,2,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,0,0,0],"
    "\"compress_rope_theta\":160000,\"rope_theta\":10000,\"rope_scaling\":{\"rope_type\":\"yarn\",\"factor\":16,"
    "\"beta_fast\":32,\"beta_slow\":1,\"original_max_position_embeddings\":65536},"
    "\"max_position_embeddings\":1048576,\"index_n_heads\":32,\"index_head_dim\":128,\"index_topk\":512,"
    "\"hc_mult\":4,\"hc_sinkhorn_iters\":20,\"hc_eps\":1e-06,\"rms_norm_eps\":1e-20,"
    "\"num_nextn_predict_layers\":3,\"kv_source_layer_ids\":[2,8,14,20],"
    "\"index_source_layer_ids\":[2,8,14,20,24,28,32,36],\"candidate_source_layer_id\":20,"
    "\"candidate_topk_blocks\":2048,\"candidate_block_size\":8,\"engram_layer_ids\":[1,14],"
    "\"engram_num_embeddings\":[384006168,384016682],\"engram_max_ngram_size\":4,"
    "\"engram_vocab_size\":16000000,\"engram_n_heads\":8,\"engram_head_dim\":256,\"engram_pad_token_id\":2,"
    "\"engram_compressed_vocab_size\":99092,\"dspark_block_size\":5,\"dspark_noise_token_id\":128799,"
    "\"dspark_target_layer_ids\":[37,38,39],\"dspark_markov_rank\":256,\"dspark_n_routed_experts\":128,"
    "\"dspark_num_experts_per_tok\":3,\"bos_token_id\":0,\"eos_token_id\":1,\"pad_token_id\":2,"
    "\"tie_word_embeddings\":false}}";

/* The reference inference/config.json of V4-Flash (reference key names, no model_type). */
static const char *V4_REF =
    "{\"vocab_size\":129280,\"dim\":4096,\"moe_inter_dim\":2048,\"n_layers\":43,\"n_hash_layers\":3,"
    "\"n_heads\":64,\"n_routed_experts\":256,\"n_routed_experts_score\":128,\"n_shared_experts\":1,"
    "\"n_activated_experts\":6,\"score_func\":\"sqrtsoftplus\",\"route_scale\":1.5,\"swiglu_limit\":10.0,"
    "\"q_lora_rank\":1024,\"head_dim\":512,\"rope_head_dim\":64,\"o_groups\":8,\"o_lora_rank\":1024,"
    "\"window_size\":128,\"original_seq_len\":65536,\"rope_theta\":10000,\"rope_factor\":16,\"beta_fast\":32,"
    "\"beta_slow\":1,\"index_n_heads\":64,\"index_head_dim\":128,\"index_topk\":512,\"hc_mult\":4,"
    "\"hc_sinkhorn_iters\":20,\"dtype\":\"fp8\",\"scale_fmt\":\"ue8m0\",\"expert_dtype\":\"fp4\","
    "\"compress_rope_theta\":160000,\"compress_ratios\":[0,0,4,128,4,128,4,128,4,128,4,128,4,128,4,128,4,128,"
    "4,128,4,128,4,128,4,128,4,128,4,128,4,128,4,128,4,128,4,128,4,128,4,128,4,0]}";

/* Replace the first occurrence of `from` in `s` by `to` (caller frees). */
static char *edit(const char *s, const char *from, const char *to) {
    const char *at = strstr(s, from);
    if (!at) {
        fprintf(stderr, "    test bug: '%s' not in the config\n", from);
        return NULL;
    }
    size_t a = (size_t)(at - s), fl = strlen(from), tl = strlen(to), n = strlen(s);
    char *r = malloc(n - fl + tl + 1);
    if (!r) return NULL;
    memcpy(r, s, a);
    memcpy(r + a, to, tl);
    memcpy(r + a + tl, at + fl, n - a - fl + 1);
    return r;
}

static di_model_config g_cfg;

static deepinfer_status parse(const char *text, char *msg, size_t n) {
    di_error e = {0};
    if (!text) return DEEPINFER_ERR_INTERNAL;
    deepinfer_status rc = di_config_parse(text, strlen(text), "config.json", &g_cfg, &e);
    snprintf(msg, n, "%s", e.msg);
    return rc;
}

/* Parse `base` with one edit; expect failure whose message contains `needle`. */
#define EXPECT_EDIT_ERR(base, from, to, needle)                                                    \
    do {                                                                                           \
        char *t_ = edit(base, from, to);                                                           \
        char m_[DI_ERROR_MSG_MAX];                                                                 \
        deepinfer_status rc_ = parse(t_, m_, sizeof m_);                                           \
        free(t_);                                                                                  \
        CHECK_MSG(rc_ != DEEPINFER_OK, "accepted an edit of '%s' to '%s'", from, to);              \
        CHECK_MSG(strstr(m_, needle) != NULL, "message \"%s\" lacks \"%s\"", m_, needle);          \
    } while (0)

TEST(cfg_golden_v4) {
    di_error e = {0};
    CHECK_MSG(di_config_load(di_test_data("golden/v4-tiny-a"), &g_cfg, &e) == DEEPINFER_OK, "%s", e.msg);
    di_model_config *c = &g_cfg;
    CHECK(c->arch == DI_ARCH_V4 && c->n_layers == 5 && c->n_stages == 1 && c->drafter == DI_DRAFTER_MTP);
    CHECK(c->hidden_size == 128 && c->head_dim == 128 && c->o_lora_rank == 64 && c->num_hash_layers == 3);
    CHECK(c->fp8_block_out == 128 && c->act_block == 128 && c->expert_fp4);
    CHECK(di_config_defaulted(c, "expert_dtype"));
    const int roles[] = {DI_ROLE_SWA, DI_ROLE_SWA, DI_ROLE_CSA, DI_ROLE_HCA, DI_ROLE_CSA, DI_ROLE_SWA};
    for (int l = 0; l < 6; l++) CHECK_EQ_INT(c->layers[l].role, roles[l]);
    CHECK(c->layers[2].hash_routed && !c->layers[3].hash_routed && !c->layers[5].hash_routed);
    CHECK(!c->layers[1].rope_compress && c->layers[3].rope_compress && !c->layers[5].rope_compress);
    CHECK(c->layers[2].compressor_overlap && c->layers[2].has_index_query && !c->layers[3].has_index_query);
    CHECK(c->rope_scaling.factor == 16 && c->rope_scaling.original_max_position_embeddings == 65536);
    CHECK(!strcmp(c->rope_scaling.type, "yarn"));
}

TEST(cfg_golden_v41) {
    di_error e = {0};
    CHECK_MSG(di_config_load(di_test_data("golden/v41-tiny-a/config.json"), &g_cfg, &e) == DEEPINFER_OK, "%s",
              e.msg);
    di_model_config *c = &g_cfg;
    CHECK(c->arch == DI_ARCH_V41 && c->n_layers == 8 && c->n_stages == 3 && c->drafter == DI_DRAFTER_DSPARK);
    CHECK(c->fp8_block_out == 32 && c->fp8_block_in == 32 && c->act_block == 32 && c->expert_fp4);
    CHECK(c->image_token_id == 1008 && c->pad_token_id == 2 && c->rms_norm_eps == 1e-20);
    CHECK(c->stage_n_routed_experts == 4 && c->stage_num_experts_per_tok == 2);
    const int roles[] = {DI_ROLE_SWA,  DI_ROLE_SWA,   DI_ROLE_FULL,    DI_ROLE_REUSE,
                         DI_ROLE_FULL, DI_ROLE_REUSE, DI_ROLE_REINDEX, DI_ROLE_REUSE};
    for (int l = 0; l < 8; l++) CHECK_EQ_INT(c->layers[l].role, roles[l]);
    CHECK(c->layers[2].compressor_gated && !c->layers[4].compressor_gated && c->layers[4].is_candidate_source);
    CHECK(c->layers[6].kv_layer == 4 && c->layers[6].index_key_layer == 4 && c->layers[6].candidate_layer == 4);
    CHECK(c->layers[7].topk_layer == 6 && c->layers[3].topk_layer == 2 && c->layers[5].topk_layer == 4);
    CHECK(c->layers[1].engram == 0 && c->layers[2].engram == 1 && c->layers[3].engram == -1);
    CHECK(c->engram_cols == 6 && c->engram_primes[0][0] == 53 && c->engram_primes[1][5] == 103);
    CHECK(c->engram_offsets[1][1] == 79);
}

TEST(cfg_released_v4_flash) {
    char m[DI_ERROR_MSG_MAX];
    CHECK_MSG(parse(V4_FLASH, m, sizeof m) == DEEPINFER_OK, "%s", m);
    di_model_config *c = &g_cfg;
    CHECK(c->n_layers == 43 && c->n_stages == 1 && c->drafter == DI_DRAFTER_MTP && c->n_defaulted == 1);
    CHECK(c->layers[42].ratio == 4 && c->layers[42].role == DI_ROLE_CSA); /* pitfall 7 */
    CHECK(c->layers[41].role == DI_ROLE_HCA && c->layers[43].role == DI_ROLE_SWA && !c->layers[43].rope_compress);
    int csa = 0, hca = 0;
    for (int l = 0; l < 43; l++) csa += c->layers[l].role == DI_ROLE_CSA, hca += c->layers[l].role == DI_ROLE_HCA;
    CHECK(csa == 21 && hca == 20);
    /* V4-Flash-0731: DSpark stages with num_nextn_predict_layers still 1. */
    char *t = edit(V4_FLASH, "4,0],", "4,0,0,0],\"dspark_block_size\":5,\"dspark_noise_token_id\":128799,"
                                      "\"dspark_target_layer_ids\":[40,41,42],\"dspark_markov_rank\":256,"
                                      "\"expert_dtype\":\"fp4\",");
    deepinfer_status rc = parse(t, m, sizeof m);
    free(t);
    CHECK_MSG(rc == DEEPINFER_OK, "%s", m);
    CHECK(c->n_stages == 3 && c->drafter == DI_DRAFTER_DSPARK && c->stage_n_routed_experts == 256);
    CHECK(strstr(c->note, "V4-Flash-0731") && !di_config_defaulted(c, "expert_dtype"));
}

TEST(cfg_released_v41_flash_roles) {
    char m[DI_ERROR_MSG_MAX];
    CHECK_MSG(parse(V41_FLASH, m, sizeof m) == DEEPINFER_OK, "%s", m);
    di_model_config *c = &g_cfg;
    CHECK(c->n_layers == 40 && c->n_stages == 3 && c->has_vision_config && c->hidden_size == 5120);
    for (int l = 0; l < 40; l++) {
        di_layer_role want = l < 2                                    ? DI_ROLE_SWA
                             : (l == 2 || l == 8 || l == 14 || l == 20) ? DI_ROLE_FULL
                             : (l >= 24 && l % 4 == 0)                ? DI_ROLE_REINDEX
                                                                      : DI_ROLE_REUSE;
        CHECK_MSG(c->layers[l].role == want, "layer %d: role %s", l, di_role_name(c->layers[l].role));
        CHECK(c->layers[l].rope_compress == (l >= 2));
    }
    CHECK(c->layers[13].kv_layer == 8 && c->layers[19].kv_layer == 14 && c->layers[39].kv_layer == 20);
    CHECK(c->layers[20].is_candidate_source && c->layers[20].candidate_layer == -1);
    CHECK(c->layers[24].candidate_layer == 20 && c->layers[27].topk_layer == 24 && c->layers[39].topk_layer == 36);
    CHECK(c->layers[14].compressor_gated && !c->layers[20].compressor_gated);
    CHECK(c->layers[1].engram == 0 && c->layers[14].engram == 1);
    CHECK(c->engram_cols == 24 && c->engram_primes[0][0] == 16000057 && c->engram_primes[0][23] == 16000463);
    CHECK(c->engram_primes[1][0] == 16000477 && c->engram_primes[1][23] == 16000889);
    CHECK(c->stage_n_routed_experts == 128 && c->stage_num_experts_per_tok == 3);
    CHECK(c->n_defaulted == 1 && di_config_defaulted(c, "fmt"));
}

TEST(cfg_reference_names) {
    char m[DI_ERROR_MSG_MAX];
    CHECK_MSG(parse(V4_REF, m, sizeof m) == DEEPINFER_OK, "%s", m);
    di_model_config *c = &g_cfg;
    CHECK(c->arch == DI_ARCH_V4 && c->hidden_size == 4096 && c->moe_intermediate_size == 2048);
    CHECK(c->rope_scaling.factor == 16 && c->rope_scaling.original_max_position_embeddings == 65536);
    CHECK(c->fp8_block_in == 128 && c->drafter == DI_DRAFTER_MTP && strstr(c->note, "recognised"));
    CHECK(di_config_defaulted(c, "rms_norm_eps") && c->rms_norm_eps == 1e-6);
    /* A synonym that agrees is fine; one that disagrees names both spellings. */
    char *t = edit(V4_FLASH, "\"hidden_size\":4096", "\"hidden_size\":4096,\"dim\":4096");
    CHECK(parse(t, m, sizeof m) == DEEPINFER_OK);
    free(t);
    EXPECT_EDIT_ERR(V4_FLASH, "\"hidden_size\":4096", "\"hidden_size\":4096,\"dim\":5120", "'dim'");
    EXPECT_EDIT_ERR(V4_FLASH, "\"factor\":16", "\"factor\":16},\"rope_factor\":4,\"x\":{\"a\":1", "rope_factor");
    /* type and rope_type both accepted. */
    t = edit(V4_FLASH, "\"type\":\"yarn\"", "\"rope_type\":\"yarn\"");
    CHECK(parse(t, m, sizeof m) == DEEPINFER_OK);
    free(t);
}

TEST(cfg_unknown_types) {
    EXPECT_EDIT_ERR(V4_FLASH, "\"model_type\":\"deepseek_v4\"", "\"model_type\":\"llama\"",
                    "model_type 'llama' is not supported (supported: deepseek_v4");
    char *t = edit(V4_FLASH, "\"model_type\":\"deepseek_v4\",", ""); /* architectures alone suffice */
    char mm[DI_ERROR_MSG_MAX];
    deepinfer_status rc = parse(t, mm, sizeof mm);
    free(t);
    CHECK(rc == DEEPINFER_OK && g_cfg.arch == DI_ARCH_V4 && strstr(g_cfg.note, "architectures"));
    EXPECT_EDIT_ERR(V4_FLASH, "\"architectures\":[\"DeepseekV4ForCausalLM\"],\"model_type\":\"deepseek_v4\",",
                    "\"architectures\":[\"MistralForCausalLM\"],", "architecture 'MistralForCausalLM'");
    char m[DI_ERROR_MSG_MAX];
    CHECK(parse("{\"foo\":1}", m, sizeof m) == DEEPINFER_ERR_UNSUPPORTED && strstr(m, "supported"));
    CHECK(parse("[1]", m, sizeof m) == DEEPINFER_ERR_FORMAT && strstr(m, "JSON object"));
    CHECK(parse("{\"model_type\":\"deepseek_v4\",", m, sizeof m) == DEEPINFER_ERR_FORMAT && strstr(m, "line 1"));
}

TEST(cfg_errors_name_the_key) {
    EXPECT_EDIT_ERR(V4_FLASH, "\"hidden_size\":4096", "\"hidden_size\":\"4096\"", "'hidden_size' (line 1, column");
    EXPECT_EDIT_ERR(V4_FLASH, "\"hidden_size\":4096,", "", "'hidden_size': required key is missing");
    EXPECT_EDIT_ERR(V4_FLASH, "\"head_dim\":512", "\"head_dim\":32", "head_dim = 32 is smaller than qk_rope_head_dim");
    EXPECT_EDIT_ERR(V4_FLASH, "\"index_head_dim\":128", "\"index_head_dim\":32", "index_head_dim = 32");
    EXPECT_EDIT_ERR(V4_FLASH, "\"o_groups\":8", "\"o_groups\":7", "o_groups");
    EXPECT_EDIT_ERR(V4_FLASH, "\"num_experts_per_tok\":6", "\"num_experts_per_tok\":300", "num_experts_per_tok");
    EXPECT_EDIT_ERR(V4_FLASH, "\"num_key_value_heads\":1", "\"num_key_value_heads\":8", "num_key_value_heads");
    EXPECT_EDIT_ERR(V4_FLASH, "\"num_hash_layers\":3", "\"num_hash_layers\":50", "num_hash_layers");
    EXPECT_EDIT_ERR(V4_FLASH, "\"compress_ratios\":[0,0,", "\"compress_ratios\":[", "compress_ratios has 42 entries");
    EXPECT_EDIT_ERR(V4_FLASH, "4,0],", "4,1],", "compress_ratios[43] = 1");
    EXPECT_EDIT_ERR(V4_FLASH, "[0,0,4,", "[0,1,4,", "compress_ratios[1] = 1");
    EXPECT_EDIT_ERR(V4_FLASH, "\"num_nextn_predict_layers\":1", "\"num_nextn_predict_layers\":2",
                    "num_nextn_predict_layers = 2");
    EXPECT_EDIT_ERR(V4_FLASH, "\"quant_method\":\"fp8\"", "\"quant_method\":\"awq\"", "'awq' is not supported");
    EXPECT_EDIT_ERR(V4_FLASH, "\"weight_block_size\":[128,128]", "\"weight_block_size\":[128]", "weight_block_size");
    EXPECT_EDIT_ERR(V4_FLASH, "\"scale_fmt\":\"ue8m0\"", "\"scale_fmt\":\"fp32\"", "scale_fmt");
    EXPECT_EDIT_ERR(V4_FLASH, "\"type\":\"yarn\"", "\"type\":\"linear\"", "'linear' is not supported");
    EXPECT_EDIT_ERR(V4_FLASH, "\"factor\":16,", "", "rope_scaling.factor");
    EXPECT_EDIT_ERR(V4_FLASH, "\"tie_word_embeddings\":false", "\"tie_word_embeddings\":true", "tie_word_embeddings");
    EXPECT_EDIT_ERR(V4_FLASH, "\"eos_token_id\":1", "\"eos_token_id\":129280", "eos_token_id = 129280");
    EXPECT_EDIT_ERR(V4_FLASH, "\"scoring_func\":\"sqrtsoftplus\"", "\"scoring_func\":\"softmax\"", "scoring_func");
    EXPECT_EDIT_ERR(V4_FLASH, ",\"quantization_config\":{\"quant_method\":\"fp8\",\"fmt\":\"e4m3\","
                              "\"activation_scheme\":\"dynamic\",\"scale_fmt\":\"ue8m0\",\"weight_block_size\":[128,128]}",
                    "", "no quantization_config");
    EXPECT_EDIT_ERR(V4_FLASH, "\"num_hash_layers\":3", "\"num_hash_layers\":3,\"kv_source_layer_ids\":[2]",
                    "kv_source_layer_ids' (line 1, column");
    EXPECT_EDIT_ERR(V4_FLASH, "\"num_hash_layers\":3", "\"num_hash_layers\":3,\"gate_temp\":2", "gate_temp");
    EXPECT_EDIT_ERR(V4_FLASH, "\"moe_intermediate_size\":2048", "\"moe_intermediate_size\":2040", "multiples of 32");
}

TEST(cfg_v41_consistency_errors) {
    EXPECT_EDIT_ERR(V41_FLASH, "[2,8,14,20]", "[2,8,14,40]", "'text_config.kv_source_layer_ids'");
    EXPECT_EDIT_ERR(V41_FLASH, "[2,8,14,20]", "[2,8,8,20]", "kv_source_layer_ids lists layer 8 twice");
    EXPECT_EDIT_ERR(V41_FLASH, "[2,8,14,20]", "[1,8,14,20]", "layer 1 is in kv_source_layer_ids but compress_ratios[1] = 0");
    EXPECT_EDIT_ERR(V41_FLASH, "[2,8,14,20]", "[8,14,20]", "compress_ratios[2] = 2 but no layer of kv_source_layer_ids");
    EXPECT_EDIT_ERR(V41_FLASH, "[2,8,14,20]", "[2,8,14,21]", "compress_ratios[20] = 1 but the KV source it reads");
    EXPECT_EDIT_ERR(V41_FLASH, "[2,8,14,20,24,28,32,36]", "[8,14,20,24,28,32,36]",
                    "no layer of index_source_layer_ids");
    EXPECT_EDIT_ERR(V41_FLASH, "[2,8,14,20,24,28,32,36]", "[2,8,14,24,28,32,36]",
                    "candidate_source_layer_id = 20 is not in index_source_layer_ids");
    EXPECT_EDIT_ERR(V41_FLASH, "\"candidate_source_layer_id\":20", "\"candidate_source_layer_id\":99",
                    "'text_config.candidate_source_layer_id'");
    EXPECT_EDIT_ERR(V41_FLASH, "384016682", "384016683", "engram_num_embeddings[1] = 384016683");
    EXPECT_EDIT_ERR(V41_FLASH, "\"engram_layer_ids\":[1,14]", "\"engram_layer_ids\":[1]",
                    "engram_num_embeddings");
    EXPECT_EDIT_ERR(V41_FLASH, "\"engram_head_dim\":256", "\"engram_head_dim\":250", "engram_head_dim");
    EXPECT_EDIT_ERR(V41_FLASH, "1,0,0,0]", "1,0,0,0,0]", "num_nextn_predict_layers = 3");
    EXPECT_EDIT_ERR(V41_FLASH, "1,0,0,0]", "1,0,0,4]", "compress_ratios[42] = 4");
    EXPECT_EDIT_ERR(V41_FLASH, "\"dspark_block_size\":5,", "", "dspark_block_size is missing");
    EXPECT_EDIT_ERR(V41_FLASH, "[37,38,39]", "[37,38,40]", "'text_config.dspark_target_layer_ids'");
    EXPECT_EDIT_ERR(V41_FLASH, "\"dspark_num_experts_per_tok\":3", "\"dspark_num_experts_per_tok\":200",
                    "dspark_num_experts_per_tok");
    EXPECT_EDIT_ERR(V41_FLASH, "\"image_token_id\":129264", "\"image_token_id\":-5", "image_token_id");
    EXPECT_EDIT_ERR(V41_FLASH, "\"text_config\":{", "\"text_config\":7,\"x\":{", "text_config");
    EXPECT_EDIT_ERR(V41_FLASH, "\"expert_dtype\":\"fp4\"", "\"expert_dtype\":\"int4\"", "expert_dtype");
    EXPECT_EDIT_ERR(V41_FLASH, "\"rms_norm_eps\":1e-20", "\"rms_norm_eps\":1e-20,\"norm_eps\":1e-6", "'norm_eps'");
}

TEST(cfg_v41_expert_dtype_top_level) {
    /* expert_dtype may sit at the top level (0731 style) instead of in quantization_config. */
    char *t = edit(V41_FLASH, ",\"expert_dtype\":\"fp4\"}", "},\"expert_dtype\":\"fp8\"");
    char m[DI_ERROR_MSG_MAX];
    deepinfer_status rc = parse(t, m, sizeof m);
    free(t);
    CHECK_MSG(rc == DEEPINFER_OK, "%s", m);
    CHECK(!g_cfg.expert_fp4 && !strcmp(g_cfg.expert_dtype, "fp8"));
    t = edit(V41_FLASH, "\"dtype\":\"bfloat16\"", "\"expert_dtype\":\"fp8\"");
    rc = parse(t, m, sizeof m);
    free(t);
    CHECK(rc != DEEPINFER_OK && strstr(m, "conflicts"));
}


TEST(cfg_state_estimate_matches_published_figures) {
    char m[DI_ERROR_MSG_MAX];
    di_state_estimate e;
    CHECK_MSG(parse(V41_FLASH, m, sizeof m) == DEEPINFER_OK, "%s", m);
    di_state_estimate_compute(&g_cfg, &e);
    CHECK(e.kv_row_bytes == 288 && e.index_row_bytes == 68);
    CHECK_NEAR(e.kv_bytes_per_token + e.index_bytes_per_token, 890.0, 1e-9); /* DeepSeek's figure */
    CHECK_EQ_INT(e.swa_ring_bytes, 43ull * 128 * 512 * 2);
    CHECK_EQ_INT(di_state_bytes_at(&g_cfg, 1000), e.fixed_bytes + 3 * 500 * 356 + 1000 * 356 + 4000);
    CHECK_MSG(parse(V4_FLASH, m, sizeof m) == DEEPINFER_OK, "%s", m);
    di_state_estimate_compute(&g_cfg, &e);
    CHECK(e.kv_row_bytes == 583 && e.index_row_bytes == 68);
    CHECK_NEAR(e.bytes_per_token, 21.0 * 651 / 4 + 20.0 * 583 / 128, 1e-9); /* ≈ 3.5 KB */
}

TEST(cfg_v41_text_config_alone) {
    /* A text-only config saved flat, with the text model type. */
    char *t = edit(V41_FLASH, "\"model_type\":\"deepseek_v41\"", "\"model_type\":\"deepseek_v41_text\"");
    char m[DI_ERROR_MSG_MAX];
    deepinfer_status rc = parse(t, m, sizeof m);
    free(t);
    CHECK_MSG(rc == DEEPINFER_OK, "%s", m);
    CHECK(g_cfg.arch == DI_ARCH_V41 && g_cfg.n_layers == 40);
}
