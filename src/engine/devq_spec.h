/*
 * devq_spec.h — the device queue's speculative-decoding stage (devq.h
 * di_spec_item; docs/speculative.md). Internal to devq.c.
 *
 * Around a step with spec items, in device order:
 *   before the forward   snapshot every verify group's sequence (the rows
 *                        its k + 1 appended tokens overwrite, seq_snapshot.h)
 *                        and point the forward's drafter input at the
 *                        queue's buffer (one row per batch row);
 *   the samples          devq.c samples a verify group in row order and stops
 *                        at the first sampled token that differs from the
 *                        draft after it (the rest are skipped);
 *   after the samples    per sequence: accepted = the drafts equal to the
 *                        target's own samples before it; state rolled back to
 *                        the kept positions; the drafter fed the kept rows and,
 *                        with draft_next, drafting from the last kept sample,
 *                        its picks made by the request's own sampler with the
 *                        target's noise at each draft's position (so a draft
 *                        is the token the target would draw if the drafter's
 *                        logits were the target's; where every pick is the
 *                        argmax, on a device backend, the drafter picks on the
 *                        device and only the ids come back);
 *                        under structured outputs the first draft the grammar
 *                        rejects ends the draft.
 */
#ifndef DI_ENGINE_DEVQ_SPEC_H
#define DI_ENGINE_DEVQ_SPEC_H

#include "engine/devq.h"
#include "engine/sampler.h"

typedef struct di_devq_spec {
    di_model *model;
    const di_model_config *cfg;
    int max_rows, max_seqs, spec_n, block;
    int record;                /* the model's exec has a step plan: greedy drafter steps may run recorded */
    size_t hid_elems;
    uint16_t *hid;             /* [max_rows][hid_elems] backend memory: the forward's drafter input */
    /* di_model_draft tables, [max_seqs] */
    di_seq_state **seq;
    int *n_feed, *k, *item, *last, *kcut;
    const uint16_t **hidden;
    const int32_t **next;
    int32_t *next_buf;         /* [max_rows] */
    int32_t *ids;              /* [max_seqs][block] */
    float *conf;
    di_sampler_scratch scratch;
} di_devq_spec;

deepinfer_status di_devq_spec_init(di_devq_spec *s, di_model *m, int max_rows, int max_seqs, int spec_n, di_error *err);
void di_devq_spec_free(di_devq_spec *s);

/* Before the forward: snapshots, and the drafter input in the batch. */
void di_devq_spec_before(di_devq_spec *s, di_step *st, di_model_batch *b);

/* After the samples: acceptance, rollback, feed and drafts (results in st->spec). */
deepinfer_status di_devq_spec_after(di_devq_spec *s, di_step *st, di_error *err);

#endif
