/* devq_spec.c — the device queue's speculative-decoding stage (devq_spec.h). */
#include "engine/devq_spec.h"

#include <stdlib.h>
#include <string.h>

#include "engine/seq_snapshot.h"
#include "ops/ops.h"

deepinfer_status di_devq_spec_init(di_devq_spec *s, di_model *m, int max_rows, int max_seqs, int spec_n, di_error *err) {
    memset(s, 0, sizeof *s);
    s->model = m;
    s->cfg = di_model_cfg(m);
    s->max_rows = max_rows;
    s->max_seqs = max_seqs;
    s->spec_n = spec_n;
    s->block = di_model_draft_block(m);
    s->hid_elems = di_model_draft_hidden_elems(m);
    if (s->block < spec_n || !s->hid_elems)
        return di_error_set(err, DEEPINFER_ERR_INVALID_ARGUMENT, "the drafter gives %d drafts per step, %d asked for",
                            s->block, spec_n);
    s->hid = di_dev_alloc((size_t)max_rows * s->hid_elems * 2);
    s->seq = malloc(sizeof *s->seq * (size_t)max_seqs);
    s->n_feed = malloc(sizeof(int) * (size_t)max_seqs);
    s->k = malloc(sizeof(int) * (size_t)max_seqs);
    s->item = malloc(sizeof(int) * (size_t)max_seqs);
    s->last = malloc(sizeof(int) * (size_t)max_seqs);
    s->kcut = malloc(sizeof(int) * (size_t)max_seqs);
    s->hidden = malloc(sizeof *s->hidden * (size_t)max_seqs);
    s->next = malloc(sizeof *s->next * (size_t)max_seqs);
    s->next_buf = malloc(sizeof(int32_t) * (size_t)max_rows);
    s->ids = malloc(sizeof(int32_t) * (size_t)max_seqs * (size_t)s->block);
    s->conf = malloc(sizeof(float) * (size_t)max_seqs * (size_t)s->block);
    if (!s->hid || !s->seq || !s->n_feed || !s->k || !s->item || !s->last || !s->kcut || !s->hidden || !s->next || !s->next_buf || !s->ids ||
        !s->conf) {
        di_devq_spec_free(s);
        return di_error_set(err, DEEPINFER_ERR_OUT_OF_MEMORY, "out of memory for the drafter's step buffers");
    }
    deepinfer_status st = di_sampler_scratch_init(&s->scratch, (int32_t)s->cfg->vocab_size, err);
    if (st) di_devq_spec_free(s);
    return st;
}

deepinfer_status di_devq_spec_hold_init(di_devq_spec *s, int pipeline, int dev_feed, di_error *err) {
    s->pipeline = pipeline;
    if (!pipeline) return DEEPINFER_OK;
    size_t n = (size_t)s->max_seqs * (size_t)s->block;
    s->held = malloc(sizeof(int32_t) * 2 * n);
    if (!s->held) return di_error_set(err, DEEPINFER_ERR_OUT_OF_MEMORY, "out of memory for held drafts");
    s->held_conf = (float *)(void *)(s->held + n);
    s->dev_out = dev_feed && di_model_draft_dev_out(s->model);
    if (s->dev_out && !(s->dev = di_dev_alloc(sizeof(int32_t) * 2 * n)))
        return di_error_set(err, DEEPINFER_ERR_OUT_OF_MEMORY, "out of device memory for held drafts");
    return DEEPINFER_OK;
}

void di_devq_spec_free(di_devq_spec *s) {
    di_dev_free(s->hid);
    di_dev_free(s->dev);
    free(s->held);
    free(s->seq), free(s->n_feed), free(s->k), free(s->item), free(s->last), free(s->kcut), free(s->hidden), free(s->next), free(s->next_buf);
    free(s->ids), free(s->conf);
    di_sampler_scratch_free(&s->scratch);
    memset(s, 0, sizeof *s);
}

void di_devq_spec_before(di_devq_spec *s, di_step *st, di_model_batch *b) {
    for (int i = 0; i < st->n_spec; i++) {
        di_spec_item *it = &st->spec[i];
        if (it->active && it->draft > 0) di_seq_snapshot_take(it->seq, s->cfg, it->draft + 1, it->room);
    }
    di_model_batch_set_draft_hidden(s->model, b, s->hid);
}

/* ---- drafting ----------------------------------------------------------------------------- */

typedef struct pick_ctx {
    di_devq_spec *s;
    di_step *st;
} pick_ctx;

/* Draft i of draft request `req`: the request's sampler at the draft's position, its history the
 * kept outputs and the drafts before (written after them in the output array, room checked when
 * k was set); drafts past k are never used and cost no sampling. */
static int32_t pick(void *vctx, int req, int i, const float *logits) {
    pick_ctx *pc = vctx;
    di_devq_spec *s = pc->s;
    if (i >= s->k[req] || i >= s->kcut[req]) return 0;
    const di_sample_spec *sp = &pc->st->samples[s->last[req]];
    di_sample_context ctx = {.prompt_ids = sp->prompt,
                             .n_prompt = (size_t)sp->n_prompt,
                             .output_ids = sp->out,
                             .n_output = (size_t)sp->n_out + 1 + (size_t)i,
                             .seed = sp->seed,
                             .stream = sp->stream,
                             .position = (uint64_t)sp->position + 1 + (uint64_t)i,
                             .purpose = DI_NOISE_TARGET,
                             .allow_mask = sp->allow_mask,
                             .eos_id = sp->eos_id};
    di_sample_result r;
    di_error e = {0};
    if (di_sample_row(logits, sp->params, &ctx, &s->scratch, &r, &e)) { /* no token: the draft ends before i */
        s->kcut[req] = i;
        return 0;
    }
    sp->w_token[1 + i] = r.token;
    return r.token;
}

/* 1 if the pick of every draft of the request sampled by sp is the argmax of the drafter's logits
 * (greedy, nothing masked or penalised: di_sample_row's temperature-0 token). */
static int greedy_pick(const di_sample_spec *sp) {
    const di_sampling_params *p = sp->params;
    return p->temperature == 0.0f && p->repetition_penalty == 1.0f && p->presence_penalty == 0.0f &&
           p->frequency_penalty == 0.0f && !sp->allow_mask && (int64_t)p->min_tokens <= (int64_t)sp->n_out + 1;
}

/* 1 if the drafts of the request sampled by sp may be held for the next step (devq_spec.h): greedy
 * picks, and nothing (a grammar, logprobs) that keeps its next step's samples on the host. */
static int holdable(const di_sample_spec *sp) { return greedy_pick(sp) && !sp->matcher && sp->params->logprobs < 0; }

/* The accepted drafts of a verify group and the sample kept after them (-1: none is valid). */
static int accept(const di_step *st, const di_spec_item *it, int *kept) {
    int m = 0;
    *kept = -1;
    for (int j = 0; j <= it->draft; j++) {
        const di_sample_spec *sp = &st->samples[it->sample0 + j];
        if (sp->skipped || sp->status) break;
        *kept = it->sample0 + j;
        if (j == it->draft || sp->token != sp->spec_next) break;
        m++;
    }
    return m;
}

/* Under structured outputs: keep the drafts the grammar takes in order, then rewind the matcher. */
static int grammar_prefix(so_matcher *mt, const int32_t *ids, int n) {
    int ok = 0;
    di_error e = {0};
    while (ok < n && ids[ok] >= 0 && so_matcher_try_token(mt, ids[ok]) && !so_matcher_accept_token(mt, ids[ok], &e)) ok++;
    if (ok) so_matcher_rollback(mt, (uint32_t)ok, &e);
    return ok;
}

deepinfer_status di_devq_spec_after(di_devq_spec *s, di_step *st, di_error *err) {
    const int32_t *tokens = st->batch.tokens;
    int *last = s->last, n = 0, used = 0;
    for (int i = 0; i < st->n_spec; i++) {
        di_spec_item *it = &st->spec[i];
        it->accepted = 0;
        it->n_draft = 0;
        it->drafts_held = 0;
        if (!it->active) continue;
        int kept_rows = it->nrows, kept = -1;
        if (it->sample0 >= 0) {
            it->accepted = accept(st, it, &kept);
            if (kept < 0) continue; /* its sample failed: the request fails, nothing to feed */
            kept_rows = it->nrows - it->draft + it->accepted;
            if (it->draft > it->accepted) {
                int64_t p0 = st->batch.pos[it->row0];
                deepinfer_status e = di_seq_snapshot_restore_to(it->seq, s->cfg, it->room, p0 + kept_rows, err);
                if (e) return e;
            }
        }
        int32_t after = kept >= 0 ? st->samples[kept].token : it->next_token;
        if (after < 0) continue;
        /* the token after each kept row: the next row's, then the one after the last */
        int32_t *nx = s->next_buf + used;
        for (int r = 1; r < kept_rows; r++) nx[r - 1] = tokens[it->row0 + r];
        nx[kept_rows - 1] = after;
        used += kept_rows;
        int k = 0;
        if (it->draft_next && kept >= 0) {
            const di_sample_spec *sp = &st->samples[kept];
            int64_t room = (int64_t)sp->params->max_tokens - sp->n_out - 1;
            k = s->spec_n < room ? s->spec_n : (int)(room > 0 ? room : 0);
        }
        /* positions of plain steps were not fed: the drafter's window skips them (its ring keeps older
         * rows there until they are overwritten, which only costs acceptance, never output bits) */
        if (it->seq->mtp_tokens < st->batch.pos[it->row0]) it->seq->mtp_tokens = st->batch.pos[it->row0];
        s->seq[n] = it->seq;
        s->n_feed[n] = kept_rows;
        s->hidden[n] = s->hid + (size_t)it->row0 * s->hid_elems;
        s->next[n] = nx;
        s->k[n] = k;
        s->item[n] = i;
        s->kcut[n] = k;
        last[n] = kept;
        n++;
    }
    if (!n) return DEEPINFER_OK;
    pick_ctx pc = {s, st};
    /* on a device backend, when every pick is the argmax the drafter picks on the device: no logits
     * come to the host (draft.h pick = NULL); the drafts only decide what is verified, never an output */
    int on_dev = di_exec_on_device(di_model_exec(s->model));
    int device_greedy = on_dev, hold = s->pipeline, G = 0;
    for (int q = 0; q < n; q++) {
        if (s->k[q] <= 0) continue;
        G++;
        if (!greedy_pick(&st->samples[last[q]])) device_greedy = 0;
        if (!holdable(&st->samples[last[q]])) hold = 0;
    }
    /* held drafts: on the device only where the drafter leaves them there (else the step is waited for,
     * and holding them would only delay them); the CPU holds them after its synchronous drafter */
    hold = hold && G > 0 && (on_dev ? device_greedy && s->dev_out : 1);
    int dev_hold = hold && on_dev;
    s->held_seq = 0; /* the drafter overwrites what an earlier step held */
    di_model_draft d = {.n = n,
                        .seq = s->seq,
                        .n_feed = s->n_feed,
                        .hidden = s->hidden,
                        .next = s->next,
                        .k = s->k,
                        .pick = device_greedy ? NULL : pick,
                        .pick_ctx = &pc,
                        .ids = s->ids,
                        .confidence = s->conf,
                        .record = s->record && device_greedy,
                        .dev_ids = dev_hold ? s->dev : NULL,
                        .dev_conf = dev_hold ? (float *)(void *)(s->dev + (size_t)G * s->block) : NULL};
    deepinfer_status e = di_model_draft_step(s->model, &d, err);
    if (e) return e;
    if (hold) { /* the drafts stay here (device: not waited for) until the next step takes them */
        s->held_seq = st->seq_no;
        s->held_n = G;
        s->held_on_device = dev_hold;
        for (int q = 0, g = 0; q < n; q++) {
            di_spec_item *it = &st->spec[s->item[q]];
            if (s->k[q] <= 0) continue;
            it->n_draft = dev_hold ? s->k[q] : s->kcut[q]; /* device picks are argmaxes: none ends a draft */
            it->drafts_held = 1;
            it->draft_src0 = g * s->block;
            if (!dev_hold) {
                memcpy(s->held + it->draft_src0, s->ids + (size_t)q * s->block, sizeof(int32_t) * (size_t)it->n_draft);
                memcpy(s->held_conf + it->draft_src0, s->conf + (size_t)q * s->block, sizeof(float) * (size_t)it->n_draft);
            }
            g++;
        }
        return DEEPINFER_OK;
    }
    for (int q = 0; q < n; q++) {
        di_spec_item *it = &st->spec[s->item[q]];
        const int32_t *ids = s->ids + (size_t)q * s->block;
        int k = s->kcut[q]; /* a failed pick ended the draft there */
        so_matcher *mt = last[q] >= 0 ? st->samples[last[q]].matcher : NULL;
        if (mt && k) k = grammar_prefix(mt, ids, k);
        it->n_draft = k;
        memcpy(it->drafts, ids, sizeof(int32_t) * (size_t)k);
        memcpy(it->conf, s->conf + (size_t)q * s->block, sizeof(float) * (size_t)k);
    }
    return DEEPINFER_OK;
}

/* ---- held drafts into the next step ------------------------------------------------------------ */

deepinfer_status di_devq_spec_take(di_devq_spec *s, di_step *st, di_error *err) {
    if (!st->n_dsrc) return DEEPINFER_OK;
    if (!s->held_seq || s->held_seq + 1 != st->seq_no)
        return di_error_set(err, DEEPINFER_ERR_INTERNAL, "step %llu has draft rows held from step %llu; the queue holds %s",
                            (unsigned long long)st->seq_no, (unsigned long long)st->seq_no - 1,
                            s->held_seq ? "another step's" : "none");
    size_t n = (size_t)s->held_n * (size_t)s->block;
    if (s->held_on_device) { /* drafts, then confidences: one copy (waits for the drafter, or the step after it) */
        di_exec *x = di_model_exec(s->model);
        di_copy_d2h(x, s->held, s->dev, sizeof(int32_t) * 2 * n);
        deepinfer_status e = di_exec_sync(x, err);
        if (e) return e;
        memmove(s->held_conf, s->held + n, sizeof(float) * n);
        s->held_on_device = 0;
    }
    int32_t *tokens = (int32_t *)st->batch.tokens; /* the runner's own array */
    for (int r = 0; r < st->batch.n; r++) {
        if (st->dsrc[r] < 0) continue;
        if ((size_t)st->dsrc[r] >= n)
            return di_error_set(err, DEEPINFER_ERR_INTERNAL, "draft row %d: held draft %d of %zu", r, st->dsrc[r], n);
        tokens[r] = s->held[st->dsrc[r]];
    }
    /* a verify sample's row is followed by the draft it is compared with; that draft is also the
     * output slot the group's later samples read as history (runner.c writes it there for host drafts) */
    for (int i = 0; i < st->n_samples; i++) {
        di_sample_spec *sp = &st->samples[i];
        int row = sp->logit_row + 1;
        if (sp->spec_rest <= 0 || row >= st->batch.n || st->dsrc[row] < 0) continue;
        sp->spec_next = tokens[row];
        *sp->w_token = tokens[row];
    }
    st->n_dsrc = 0;
    return DEEPINFER_OK;
}
