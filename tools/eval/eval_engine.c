/* eval_engine.c — the configuration an evaluation runs and its report object (eval_engine.h). */
#include "eval/eval_engine.h"

#include <stdio.h>
#include <string.h>

void ev_engine_info_read(deepinfer_engine *e, ev_engine_info *out) {
    memset(out, 0, sizeof *out);
    if (!e) return;
    out->opened = 1;
    deepinfer_engine_get_config(e, &out->cfg);
    snprintf(out->accelerator, sizeof out->accelerator, "%s", out->cfg.accelerator ? out->cfg.accelerator : "");
    snprintf(out->engram_hash, sizeof out->engram_hash, "%s", out->cfg.engram_hash ? out->cfg.engram_hash : "");
    /* the strings point into the engine or the caller's argv: keep only the copies */
    out->cfg.model = out->cfg.tokenizer = out->cfg.accelerator = out->cfg.engram_hash = NULL;
    deepinfer_engine_stats st;
    deepinfer_engine_get_stats(e, &st);
    out->spec_steps = st.spec_steps, out->spec_drafted = st.spec_drafted, out->spec_accepted = st.spec_accepted;
}

static const char *speculation(const deepinfer_engine_config *c) {
    return !c->nextn_decode ? "off" : c->mtp_varlen ? "varlen" : "fixed";
}

static const char *tristate(int v) { return v < 0 ? "\"auto\"" : v ? "true" : "false"; }

void ev_engine_json(ev_buf *b, const ev_engine_info *in) {
    if (!in->opened) {
        ev_printf(b, "\"engine\": null");
        return;
    }
    const deepinfer_engine_config *c = &in->cfg;
    ev_printf(b, "\"engine\": {\"accelerator\": ");
    ev_json_str(b, in->accelerator, strlen(in->accelerator));
    ev_printf(b, ", \"batch_invariant\": %s", c->batch_invariant ? "true" : "false");
    /* speculative decoding (docs/speculative.md): off | fixed (drafts of nextn_decode) | varlen
     * (confidence-scheduled, at most nextn_decode); the counters say whether drafts were verified */
    ev_printf(b, ", \"speculation\": \"%s\", \"nextn_decode\": %d, \"mtp_varlen\": %s", speculation(c), c->nextn_decode,
              c->mtp_varlen ? "true" : "false");
    ev_printf(b, ", \"spec_verify_steps\": %lld, \"spec_drafted\": %lld, \"spec_accepted\": %lld", (long long)in->spec_steps,
              (long long)in->spec_drafted, (long long)in->spec_accepted);
    /* bounded replay (V4.1 compact prefill, architecture.md §6.5): exact | compact, and its tail */
    ev_printf(b, ", \"bounded_replay\": \"%s\", \"yoco_keep_tokens\": %lld", c->yoco_compact ? "compact" : "exact",
              (long long)c->yoco_keep_tokens);
    /* batching and memory (results do not depend on them: the engine is batch and chunk invariant) */
    ev_printf(b, ", \"max_num_seqs\": %d, \"max_num_batched_tokens\": %d, \"chunk_size\": %d, \"max_model_len\": %lld",
              c->max_num_seqs, c->max_num_batched_tokens, c->chunk_size, (long long)c->max_model_len);
    ev_printf(b, ", \"page_rows\": %d, \"num_pages\": %lld, \"memory_budget\": %llu, \"async_scheduling\": %s, "
                 "\"cuda_graphs\": %s, \"engram_hash\": ",
              c->page_rows, (long long)c->num_pages, (unsigned long long)c->memory_budget, tristate(c->async_scheduling),
              tristate(c->cuda_graphs));
    if (in->engram_hash[0]) ev_json_str(b, in->engram_hash, strlen(in->engram_hash));
    else ev_printf(b, "null");
    /* the parallel layout (docs/DESIGN.md §6): expert / data parallel ranks and EPLB */
    ev_printf(b, ", \"ep\": %d, \"dp\": %d, \"eplb_replicas\": %d, \"eplb_interval\": %d", c->ep, c->dp,
              c->eplb_replicas, c->eplb_interval);
    ev_printf(b, "}");
}

void ev_engine_table(FILE *f, const ev_engine_info *in) {
    if (!in->opened) return;
    const deepinfer_engine_config *c = &in->cfg;
    fprintf(f, "engine: %s, batch_invariant %d, speculation %s", in->accelerator, c->batch_invariant, speculation(c));
    if (c->nextn_decode) fprintf(f, " (N %d, %lld verify steps)", c->nextn_decode, (long long)in->spec_steps);
    fprintf(f, ", %s prefill", c->yoco_compact ? "compact" : "exact");
    if (c->yoco_compact) fprintf(f, " (keep %lld)", (long long)c->yoco_keep_tokens);
    fprintf(f, "\n");
}
