/*
 * `deepinfer inspect`: summarise a model directory — type, key config
 * values, layer schedule, drafter stages, tensors per dtype, validation of
 * the weights against the config, and a memory estimate. `--json` prints the
 * same as one JSON object.
 */
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "args/cli_args.h"
#include "cli.h"
#include "args/cli_model_dir.h"
#include "io/model_dir.h"
#include "io/safetensors.h"
#include "model/config.h"
#include "model/mem_estimate.h"
#include "model/tensor_spec.h"

static const char *USAGE =
    "usage: deepinfer inspect [--model DIR|ORG/NAME[@REV]] [--json] [--context N] [--all-issues]\n"
    "                         [--config-only]\n"
    "\n"
    "Summarises a DeepSeek-V4-Flash / V4.1-Flash model: model type, key config values, the\n"
    "layer schedule (one line per layer: compress ratio, role, RoPE, hash routing / Engram,\n"
    "which earlier layers it reads), drafter stages, tensor count and bytes per dtype, the\n"
    "validation of every tensor against what config.json implies, and a memory estimate.\n"
    "\n"
    "options:\n"
    "  --model X      a directory with config.json and safetensors; or a Hugging Face repo id\n"
    "                 (ORG/NAME, optionally @REV) looked up in the HF cache ($HF_HUB_CACHE,\n"
    "                 else $HF_HOME/hub, else ~/.cache/huggingface/hub). Without --model:\n"
    "                 $DEEPINFER_HF_MODEL_DIR, else the embedded demo model (the rule of\n"
    "                 every command: deepinfer --help)\n"
    "  --json         print one JSON object instead of text\n"
    "  --context N    tokens of context for the per-sequence state total (default:\n"
    "                 max_position_embeddings)\n"
    "  --all-issues   list every validation issue (default: the first 20 of each kind)\n"
    "  --config-only  read config.json only (no safetensors needed)\n"
    "  -h, --help     this text\n"
    "\n"
    "Memory estimate: weights = the bytes of the checkpoint's tensors as stored (FP8/FP4 stay\n"
    "packed), split into dense, routed experts, Engram tables, drafter and ignored vision\n"
    "tensors. State per token of context = compressed KV rows + index-key rows of the layers\n"
    "that own them, divided by their compress ratio, in the deployed cache formats of\n"
    "architecture.md §6.2/§6.3 (V4: 583 B KV row = 448 FP8 + 64 BF16 RoPE dims + 7 E8M0\n"
    "scales, 68 B index row = 128 FP4 + 4 E8M0; V4.1: 288 B KV row = 512 FP4 + 32 E4M3\n"
    "scales, 68 B index row), plus 4 B/token of Engram history for V4.1. Fixed per sequence:\n"
    "SWA rings (window x head_dim BF16 per layer and drafter stage) and compressor\n"
    "partial-group buffers (fp32).\n"
    "\n"
    "exit status: 0 valid, 1 a load or validation error (message says what to fix),\n"
    "2 bad usage.\n";

typedef struct opts {
    const char *model;
    int json, all_issues, config_only;
    uint64_t context;
} opts;

typedef struct weight_groups {
    uint64_t dense, experts, engram, drafter, ignored;
} weight_groups;

/* ---- small output helpers --------------------------------------------------------------- */

static void json_str(FILE *f, const char *s) {
    fputc('"', f);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') fprintf(f, "\\%c", c);
        else if (c < 0x20) fprintf(f, "\\u%04x", c);
        else fputc(c, f);
    }
    fputc('"', f);
}

static const char *human(double b, char *buf, size_t n) {
    const char *u[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    int i = 0;
    while (b >= 1024 && i < 4) b /= 1024, i++;
    snprintf(buf, n, i ? "%.2f %s" : "%.0f %s", b, u[i]);
    return buf;
}

static void rope_desc(const di_model_config *c, const di_layer_cfg *L, char *buf, size_t n) {
    if (L->rope_compress)
        snprintf(buf, n, "%g+yarn x%g", c->compress_rope_theta, c->rope_scaling.factor);
    else
        snprintf(buf, n, "%g", c->rope_theta);
}

/* What a layer owns and reads, e.g. "compressor(gated) index-keys index-query kv<-2". */
static void layer_notes(const di_model_config *c, int l, char *buf, size_t n) {
    const di_layer_cfg *L = &c->layers[l];
    size_t at = 0;
    buf[0] = '\0';
#define APP(...)                                                                                    \
    do {                                                                                            \
        if (at < n) at += (size_t)snprintf(buf + at, n - at, __VA_ARGS__);                          \
    } while (0)
    if (L->has_compressor)
        APP("compressor(%s%s) ", L->compressor_gated ? "gated" : "ungated", L->compressor_overlap ? ",overlap" : "");
    if (L->has_index_keys) APP("index-keys ");
    if (L->has_index_query) APP("indexer ");
    if (L->is_candidate_source) APP("candidate-source ");
    if (L->kv_layer >= 0 && L->kv_layer != l) APP("kv<-%d ", L->kv_layer);
    if (L->index_key_layer >= 0 && L->index_key_layer != l) APP("keys<-%d ", L->index_key_layer);
    if (L->topk_layer >= 0 && L->topk_layer != l) APP("topk<-%d ", L->topk_layer);
    if (L->candidate_layer >= 0) APP("candidates<-%d ", L->candidate_layer);
    if (c->arch == DI_ARCH_V4 && L->role == DI_ROLE_HCA) APP("all-rows ");
#undef APP
    if (at && at <= n && buf[at - 1] == ' ') buf[at - 1] = '\0';
}

static void routing_desc(const di_model_config *c, const di_layer_cfg *L, char *buf, size_t n) {
    if (L->engram >= 0) snprintf(buf, n, "engram#%d", L->engram);
    else if (L->hash_routed) snprintf(buf, n, "hash");
    else snprintf(buf, n, "%s", c->arch == DI_ARCH_V4 ? "learned" : "-");
}

static void classify(const di_model_config *c, const di_safetensors *st, weight_groups *g) {
    memset(g, 0, sizeof *g);
    for (size_t i = 0; i < di_st_count(st); i++) {
        const di_tensor *t = di_st_at(st, i);
        const char *nm = t->ref_name;
        if (!strncmp(nm, "vision.", 7) || !strncmp(nm, "aligner.", 8) || !strncmp(nm, "image_", 6))
            g->ignored += t->nbytes;
        else if (strstr(nm, ".engram.embed."))
            g->engram += t->nbytes;
        else if (strstr(nm, ".experts."))
            g->experts += t->nbytes;
        else if (!strncmp(nm, "mtp.", 4))
            g->drafter += t->nbytes;
        else
            g->dense += t->nbytes;
    }
    (void)c;
}

/* ---- text output -------------------------------------------------------------------------- */

static void print_config_text(const di_model_config *c) {
    printf("type       %s%s%s%s\n", c->model_type, c->architecture[0] ? " (" : "", c->architecture,
           c->architecture[0] ? ")" : "");
    if (c->note[0]) printf("note       %s\n", c->note);
    printf("config     vocab %" PRId64 ", hidden %" PRId64 ", layers %d, heads %" PRId64 " x %" PRId64
           " (rope %" PRId64 "), q_lora %" PRId64 ", o_groups %" PRId64 " x o_lora %" PRId64 "\n",
           c->vocab_size, c->hidden_size, c->n_layers, c->num_attention_heads, c->head_dim, c->qk_rope_head_dim,
           c->q_lora_rank, c->o_groups, c->o_lora_rank);
    printf("           moe %" PRId64 " routed (top %" PRId64 ") + %" PRId64 " shared, inter %" PRId64
           ", %s, route scale %g, swiglu limit %g%s",
           c->n_routed_experts, c->num_experts_per_tok, c->n_shared_experts, c->moe_intermediate_size,
           c->scoring_func, c->routed_scaling_factor, c->swiglu_limit, c->arch == DI_ARCH_V41 ? ", gate temp " : "");
    if (c->arch == DI_ARCH_V41) printf("%g", c->gate_temp);
    printf("\n");
    printf("           window %" PRId64 ", indexer %" PRId64 " heads x %" PRId64 " top %" PRId64 ", hc %" PRId64
           " (sinkhorn %" PRId64 "), rms eps %g, hc eps %g\n",
           c->sliding_window, c->index_n_heads, c->index_head_dim, c->index_topk, c->hc_mult, c->hc_sinkhorn_iters,
           c->rms_norm_eps, c->hc_eps);
    printf("           rope theta %g, compress %g + %s x%g over %" PRId64 " (beta %g/%g), max positions %" PRId64 "\n",
           c->rope_theta, c->compress_rope_theta, c->rope_scaling.type, c->rope_scaling.factor,
           c->rope_scaling.original_max_position_embeddings, c->rope_scaling.beta_fast, c->rope_scaling.beta_slow,
           c->max_position_embeddings);
    printf("           %s %s weights in %dx%d blocks, %s scales, activation blocks %d, routed experts %s\n",
           c->quant_method, c->quant_fmt, c->fp8_block_out, c->fp8_block_in, c->scale_fmt, c->act_block,
           c->expert_fp4 ? "fp4 (e2m1 in I8, e8m0 per 32)" : "fp8");
    if (c->arch == DI_ARCH_V41) {
        printf("           csa2: kv sources [");
        for (int i = 0; i < c->n_kv_source_layer_ids; i++) printf("%s%d", i ? "," : "", c->kv_source_layer_ids[i]);
        printf("], index sources [");
        for (int i = 0; i < c->n_index_source_layer_ids; i++)
            printf("%s%d", i ? "," : "", c->index_source_layer_ids[i]);
        printf("], candidate source %" PRId64 " (%" PRId64 " blocks of %" PRId64 ")\n", c->candidate_source_layer_id,
               c->candidate_topk_blocks, c->candidate_block_size);
        if (c->n_engram_layer_ids) {
            printf("           engram layers [");
            for (int i = 0; i < c->n_engram_layer_ids; i++)
                printf("%s%d:%" PRId64 " rows", i ? ", " : "", c->engram_layer_ids[i], c->engram_num_embeddings[i]);
            printf("], n-gram <= %" PRId64 ", %" PRId64 " heads x %" PRId64 ", %" PRId64 " token classes\n",
                   c->engram_max_ngram_size, c->engram_n_heads, c->engram_head_dim, c->engram_compressed_vocab_size);
        }
        if (c->image_token_id >= 0 || c->has_vision_config)
            printf("           image token %" PRId64 "%s\n", c->image_token_id,
                   c->has_vision_config ? ", vision tower present (ignored: text-only)" : "");
    }
    if (c->n_defaulted) {
        printf("defaulted ");
        for (int i = 0; i < c->n_defaulted; i++) printf(" %s", c->defaulted[i]);
        printf("  (absent from config.json; released values used)\n");
    }
}

static void print_layers_text(const di_model_config *c) {
    printf("layers     %-7s %5s  %-9s %-18s %-9s %s\n", "layer", "ratio", "role", "rope", "routing", "owns / reads");
    for (int l = 0; l < c->n_layers + c->n_stages; l++) {
        const di_layer_cfg *L = &c->layers[l];
        char name[16], rope[48], rt[24], notes[160];
        if (l < c->n_layers) snprintf(name, sizeof name, "%d", l);
        else snprintf(name, sizeof name, "mtp.%d", l - c->n_layers);
        rope_desc(c, L, rope, sizeof rope);
        if (l < c->n_layers) routing_desc(c, L, rt, sizeof rt);
        else snprintf(rt, sizeof rt, "%s", c->drafter == DI_DRAFTER_MTP ? "learned" : "-");
        layer_notes(c, l, notes, sizeof notes);
        if (l >= c->n_layers)
            snprintf(notes, sizeof notes, "%s stage %d", di_drafter_name(c->drafter), l - c->n_layers);
        char line[320];
        snprintf(line, sizeof line, "           %-7s %5d  %-9s %-18s %-9s %s", name, L->ratio, di_role_name(L->role),
                 rope, rt, notes);
        size_t n = strlen(line);
        while (n && line[n - 1] == ' ') line[--n] = '\0';
        printf("%s\n", line);
    }
    if (c->drafter == DI_DRAFTER_NONE) {
        printf("drafter    none\n");
    } else if (c->drafter == DI_DRAFTER_MTP) {
        printf("drafter    mtp: %d stage(s) (mtp.*), %" PRId64 " experts top %" PRId64 ", sharing embed and head\n",
               c->n_stages, c->stage_n_routed_experts, c->stage_num_experts_per_tok);
    } else {
        printf("drafter    dspark: %d stage(s) (mtp.*), block %" PRId64 ", noise token %" PRId64 ", targets [",
               c->n_stages, c->dspark_block_size, c->dspark_noise_token_id);
        for (int i = 0; i < c->n_dspark_target_layer_ids; i++)
            printf("%s%d", i ? "," : "", c->dspark_target_layer_ids[i]);
        printf("], markov rank %" PRId64 ", %" PRId64 " experts top %" PRId64 "\n", c->dspark_markov_rank,
               c->stage_n_routed_experts, c->stage_num_experts_per_tok);
    }
}

static void print_state_text(const di_model_config *c, uint64_t ctx) {
    di_state_estimate e;
    di_state_estimate_compute(c, &e);
    char a[32], b[32], d[32];
    printf("state      %.1f B per token of context: compressed KV %.1f (row %" PRIu64 " B) + index keys %.1f (row %" PRIu64
           " B)%s\n",
           e.bytes_per_token, e.kv_bytes_per_token, e.kv_row_bytes, e.index_bytes_per_token, e.index_row_bytes,
           e.history_bytes_per_token > 0 ? " + engram history 4" : "");
    printf("           fixed per sequence %s: SWA rings %s, compressor buffers %s\n", human((double)e.fixed_bytes, a, sizeof a),
           human((double)e.swa_ring_bytes, b, sizeof b), human((double)e.compressor_state_bytes, d, sizeof d));
    printf("           one sequence at %" PRIu64 " tokens: %s\n", ctx,
           human((double)di_state_bytes_at(c, ctx), a, sizeof a));
}

static void print_tensors_text(const di_model_config *c, const di_safetensors *st) {
    const di_st_totals *t = di_st_get_totals(st);
    char h[32];
    printf("tensors    %" PRIu64 " in %zu shard(s), %" PRIu64 " bytes (%s)\n", t->total_count, di_st_shard_count(st),
           t->total_bytes, human((double)t->total_bytes, h, sizeof h));
    for (int d = 0; d < DI_DTYPE_COUNT; d++)
        if (t->count[d])
            printf("           %-8s %8" PRIu64 " tensors %18" PRIu64 " bytes (%s)\n", di_dtype_name((di_dtype)d),
                   t->count[d], t->bytes[d], human((double)t->bytes[d], h, sizeof h));
    weight_groups g;
    classify(c, st, &g);
    char a[32], b[32], e[32], f[32], i[32];
    printf("weights    dense %s, routed experts %s, engram tables %s, drafter %s, ignored (vision) %s\n",
           human((double)g.dense, a, sizeof a), human((double)g.experts, b, sizeof b),
           human((double)g.engram, e, sizeof e), human((double)g.drafter, f, sizeof f),
           human((double)g.ignored, i, sizeof i));
}

static void print_report_text(const di_spec_report *r, int all, deepinfer_status rc) {
    if (rc == DEEPINFER_OK)
        printf("validation OK: %zu/%zu expected tensors match config.json", r->n_ok, r->n_expected);
    else
        printf("validation FAILED: %zu missing, %zu inconsistent of %zu expected tensors", r->n_missing,
               r->n_mismatch, r->n_expected);
    printf(" (%zu unexpected, %zu optional absent, %zu vision ignored)\n", r->n_extra, r->n_optional_missing,
           r->n_ignored);
    static const char *const label[] = {"error", "error", "warning", "note"};
    size_t shown[4] = {0}, hidden[4] = {0};
    for (size_t i = 0; i < r->n_issues; i++) {
        di_issue_kind k = r->issues[i].kind;
        if (!all && shown[k] >= 20) {
            hidden[k]++;
            continue;
        }
        shown[k]++;
        char line[512];
        di_spec_issue_format(&r->issues[i], line, sizeof line);
        printf("  %s: %s\n", label[k], line);
    }
    size_t more = hidden[0] + hidden[1] + hidden[2] + hidden[3];
    if (more) printf("  ... %zu more (use --all-issues)\n", more);
}

/* ---- JSON output -------------------------------------------------------------------------- */

static void print_json(const di_model_location *loc, const di_model_config *c, const di_safetensors *st,
                       const di_spec_report *r, deepinfer_status vrc, const char *vmsg, uint64_t ctx) {
    FILE *f = stdout;
    fprintf(f, "{\"model_dir\":");
    json_str(f, loc->dir);
    fprintf(f, ",\"located_by\":");
    json_str(f, loc->how);
    fprintf(f, ",\"model_type\":");
    json_str(f, c->model_type);
    fprintf(f, ",\"architecture\":");
    json_str(f, c->architecture);
    fprintf(f, ",\"note\":");
    json_str(f, c->note);
    fprintf(f, ",\"config\":{\"vocab_size\":%" PRId64 ",\"hidden_size\":%" PRId64 ",\"num_hidden_layers\":%d,"
               "\"num_attention_heads\":%" PRId64 ",\"head_dim\":%" PRId64 ",\"qk_rope_head_dim\":%" PRId64
               ",\"q_lora_rank\":%" PRId64 ",\"o_lora_rank\":%" PRId64 ",\"o_groups\":%" PRId64
               ",\"n_routed_experts\":%" PRId64 ",\"num_experts_per_tok\":%" PRId64 ",\"n_shared_experts\":%" PRId64
               ",\"moe_intermediate_size\":%" PRId64 ",\"sliding_window\":%" PRId64 ",\"index_n_heads\":%" PRId64
               ",\"index_head_dim\":%" PRId64 ",\"index_topk\":%" PRId64 ",\"hc_mult\":%" PRId64
               ",\"rms_norm_eps\":%g,\"hc_eps\":%g,\"rope_theta\":%g,\"compress_rope_theta\":%g,"
               "\"rope_factor\":%g,\"original_max_position_embeddings\":%" PRId64
               ",\"max_position_embeddings\":%" PRId64 ",\"weight_block_size\":[%d,%d],\"activation_block\":%d,"
               "\"expert_dtype\":\"%s\",\"num_hash_layers\":%" PRId64 "}",
            c->vocab_size, c->hidden_size, c->n_layers, c->num_attention_heads, c->head_dim, c->qk_rope_head_dim,
            c->q_lora_rank, c->o_lora_rank, c->o_groups, c->n_routed_experts, c->num_experts_per_tok,
            c->n_shared_experts, c->moe_intermediate_size, c->sliding_window, c->index_n_heads, c->index_head_dim,
            c->index_topk, c->hc_mult, c->rms_norm_eps, c->hc_eps, c->rope_theta, c->compress_rope_theta,
            c->rope_scaling.factor, c->rope_scaling.original_max_position_embeddings, c->max_position_embeddings,
            c->fp8_block_out, c->fp8_block_in, c->act_block, c->expert_fp4 ? "fp4" : "fp8", c->num_hash_layers);
    fprintf(f, ",\"defaulted\":[");
    for (int i = 0; i < c->n_defaulted; i++) {
        if (i) fputc(',', f);
        json_str(f, c->defaulted[i]);
    }
    fprintf(f, "],\"layers\":[");
    for (int l = 0; l < c->n_layers + c->n_stages; l++) {
        const di_layer_cfg *L = &c->layers[l];
        fprintf(f, "%s{\"layer\":%d,\"stage\":%d,\"ratio\":%d,\"role\":\"%s\",\"rope\":\"%s\",\"hash\":%s,"
                   "\"engram\":%d,\"compressor\":%s,\"gated\":%s,\"overlap\":%s,\"index_keys\":%s,\"indexer\":%s,"
                   "\"kv_layer\":%d,\"topk_layer\":%d,\"index_key_layer\":%d,\"candidate_layer\":%d,"
                   "\"candidate_source\":%s}",
                l ? "," : "", l, l < c->n_layers ? -1 : l - c->n_layers, L->ratio, di_role_name(L->role),
                L->rope_compress ? "compress+yarn" : "base", L->hash_routed ? "true" : "false", L->engram,
                L->has_compressor ? "true" : "false", L->compressor_gated ? "true" : "false",
                L->compressor_overlap ? "true" : "false", L->has_index_keys ? "true" : "false",
                L->has_index_query ? "true" : "false", L->kv_layer, L->topk_layer, L->index_key_layer,
                L->candidate_layer, L->is_candidate_source ? "true" : "false");
    }
    fprintf(f, "],\"drafter\":{\"kind\":\"%s\",\"stages\":%d,\"n_routed_experts\":%" PRId64
               ",\"num_experts_per_tok\":%" PRId64 "}",
            di_drafter_name(c->drafter), c->n_stages, c->stage_n_routed_experts, c->stage_num_experts_per_tok);
    di_state_estimate e;
    di_state_estimate_compute(c, &e);
    fprintf(f, ",\"state\":{\"bytes_per_token\":%.3f,\"kv_bytes_per_token\":%.3f,\"index_bytes_per_token\":%.3f,"
               "\"history_bytes_per_token\":%.3f,\"kv_row_bytes\":%" PRIu64 ",\"index_row_bytes\":%" PRIu64
               ",\"swa_ring_bytes\":%" PRIu64 ",\"compressor_state_bytes\":%" PRIu64 ",\"context\":%" PRIu64
               ",\"bytes_at_context\":%" PRIu64 "}",
            e.bytes_per_token, e.kv_bytes_per_token, e.index_bytes_per_token, e.history_bytes_per_token,
            e.kv_row_bytes, e.index_row_bytes, e.swa_ring_bytes, e.compressor_state_bytes, ctx,
            di_state_bytes_at(c, ctx));
    if (st) {
        const di_st_totals *t = di_st_get_totals(st);
        fprintf(f, ",\"tensors\":{\"count\":%" PRIu64 ",\"bytes\":%" PRIu64 ",\"shards\":%zu,\"by_dtype\":{",
                t->total_count, t->total_bytes, di_st_shard_count(st));
        int first = 1;
        for (int d = 0; d < DI_DTYPE_COUNT; d++)
            if (t->count[d]) {
                fprintf(f, "%s\"%s\":{\"count\":%" PRIu64 ",\"bytes\":%" PRIu64 "}", first ? "" : ",",
                        di_dtype_name((di_dtype)d), t->count[d], t->bytes[d]);
                first = 0;
            }
        weight_groups g;
        classify(c, st, &g);
        fprintf(f, "}},\"weights\":{\"dense\":%" PRIu64 ",\"routed_experts\":%" PRIu64 ",\"engram_tables\":%" PRIu64
                   ",\"drafter\":%" PRIu64 ",\"ignored\":%" PRIu64 "}",
                g.dense, g.experts, g.engram, g.drafter, g.ignored);
    }
    if (r) {
        fprintf(f, ",\"validation\":{\"ok\":%s,\"message\":", vrc == DEEPINFER_OK ? "true" : "false");
        json_str(f, vmsg);
        fprintf(f, ",\"expected\":%zu,\"matched\":%zu,\"missing\":%zu,\"inconsistent\":%zu,\"unexpected\":%zu,"
                   "\"optional_absent\":%zu,\"ignored\":%zu,\"issues\":[",
                r->n_expected, r->n_ok, r->n_missing, r->n_mismatch, r->n_extra, r->n_optional_missing, r->n_ignored);
        static const char *const kind[] = {"missing", "inconsistent", "unexpected", "optional_absent"};
        for (size_t i = 0; i < r->n_issues; i++) {
            char line[512];
            di_spec_issue_format(&r->issues[i], line, sizeof line);
            fprintf(f, "%s{\"kind\":\"%s\",\"text\":", i ? "," : "", kind[r->issues[i].kind]);
            json_str(f, line);
            fputc('}', f);
        }
        fprintf(f, "]}");
    }
    fprintf(f, "}\n");
}

/* ---- main ----------------------------------------------------------------------------------- */

static int parse_args(int argc, char **argv, opts *o) {
    memset(o, 0, sizeof *o);
    for (int i = 1; i < argc; i++) {
        const char *v = NULL;
        if (di_cli_flag_value(argc, argv, &i, "--model", &v)) {
            if (!v) return -1;
            o->model = v;
        } else if (di_cli_flag_value(argc, argv, &i, "--context", &v)) {
            if (!v || di_cli_parse_u64("--context", v, UINT64_MAX, &o->context)) return -1;
            if (!o->context) return fprintf(stderr, "error: --context: must be >= 1, got 0\n"), -1;
        } else if (!strcmp(argv[i], "--json")) {
            o->json = 1;
        } else if (!strcmp(argv[i], "--all-issues")) {
            o->all_issues = 1;
        } else if (!strcmp(argv[i], "--config-only")) {
            o->config_only = 1;
        } else {
            fprintf(stderr, "error: unknown option '%s' (see deepinfer inspect --help)\n", argv[i]);
            return -1;
        }
    }
    return 0;
}

static int cmd_inspect(int argc, char **argv) {
    if (di_cli_wants_help(argc, argv)) {
        fputs(USAGE, stdout);
        return 0;
    }
    opts o;
    if (parse_args(argc, argv, &o) != 0) return 2;
    di_error err = {0};
    di_model_location loc;
    if (di_cli_locate_model(o.model, &loc, &err) != DEEPINFER_OK) {
        fprintf(stderr, "deepinfer inspect: %s\n", err.msg);
        return 1;
    }
    di_model_config *cfg = calloc(1, sizeof *cfg);
    if (!cfg) {
        fprintf(stderr, "deepinfer inspect: out of memory\n");
        return 1;
    }
    int rc = 1;
    di_safetensors *st = NULL;
    di_weight_spec *spec = NULL;
    di_spec_report rep;
    memset(&rep, 0, sizeof rep);
    deepinfer_status vrc = DEEPINFER_OK;
    char vmsg[DI_ERROR_MSG_MAX] = "";
    if (di_config_load(loc.dir, cfg, &err) != DEEPINFER_OK) {
        fprintf(stderr, "deepinfer inspect: %s\n", err.msg);
        goto out;
    }
    uint64_t ctx = o.context ? o.context : (uint64_t)cfg->max_position_embeddings;
    if (!o.config_only) {
        if (di_st_open(loc.dir, &st, &err) != DEEPINFER_OK) {
            fprintf(stderr, "deepinfer inspect: %s\n", err.msg);
            goto out;
        }
        if (di_spec_build(cfg, &spec, &err) != DEEPINFER_OK) {
            fprintf(stderr, "deepinfer inspect: %s\n", err.msg);
            goto out;
        }
        vrc = di_spec_check(spec, st, &rep, &err);
        if (vrc != DEEPINFER_OK) snprintf(vmsg, sizeof vmsg, "%s", err.msg);
        if (vrc == DEEPINFER_ERR_OUT_OF_MEMORY) {
            fprintf(stderr, "deepinfer inspect: %s\n", err.msg);
            goto out;
        }
    }
    if (o.json) {
        print_json(&loc, cfg, st, st ? &rep : NULL, vrc, vmsg, ctx);
    } else {
        printf("model      %s  (%s)\n", loc.dir, loc.how);
        print_config_text(cfg);
        print_layers_text(cfg);
        if (st) {
            print_tensors_text(cfg, st);
            print_report_text(&rep, o.all_issues, vrc);
        }
        print_state_text(cfg, ctx);
    }
    if (vrc != DEEPINFER_OK) fprintf(stderr, "deepinfer inspect: %s\n", vmsg);
    rc = vrc == DEEPINFER_OK ? 0 : 1;
out:
    di_spec_report_free(&rep);
    di_spec_free(spec);
    di_st_close(st);
    free(cfg);
    return rc;
}

DI_CLI_COMMAND(inspect, "summarise a model: config, layer schedule, tensors, validation, memory", cmd_inspect)
