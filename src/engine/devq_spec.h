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
 *
 * Held drafts (the pipelined order, docs/speculative.md "One step"): with
 * `pipeline` on, a drafter step whose drafting requests all pick greedily
 * (temperature 0, no penalties, no allow mask, min_tokens reached, no
 * grammar, no logprobs) keeps its drafts here instead of in the spec items
 * (drafts_held, draft_src0), for the next step only. On a device backend
 * whose drafter can leave them in backend memory (model.h
 * di_model_draft_dev_out) the drafter is launched and not waited for: the
 * next step's draft rows read them on the device (devq.c), and they come to
 * the host after that step's samples (di_devq_spec_take), before anything
 * is accepted. On the CPU the drafter runs as before and its drafts are
 * copied here: the same order of host work, so the CPU tests prove it.
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
    /* held drafts */
    int pipeline;              /* di_devq_enable_spec's switch */
    int dev_out;               /* the drafter leaves greedy drafts in `dev` and the queue feeds them to the device */
    int32_t *dev;              /* backend memory, [2][max_seqs][block]: drafts [g][block], then confidences */
    int32_t *held;             /* host [max_seqs][block]: the held drafts once taken (CPU: at once) */
    float *held_conf;
    uint64_t held_seq;         /* the step whose drafter's drafts are held (0: none) */
    int held_n;                /* its drafting requests */
    int held_on_device;        /* still in `dev` only */
} di_devq_spec;

deepinfer_status di_devq_spec_init(di_devq_spec *s, di_model *m, int max_rows, int max_seqs, int spec_n, di_error *err);
void di_devq_spec_free(di_devq_spec *s);

/* Before the forward: snapshots, and the drafter input in the batch. */
void di_devq_spec_before(di_devq_spec *s, di_step *st, di_model_batch *b);

/* After the samples: acceptance, rollback, feed and drafts (results in st->spec, or held). */
deepinfer_status di_devq_spec_after(di_devq_spec *s, di_step *st, di_error *err);

/* Allocate what held drafts need (after init): pipeline as di_devq_enable_spec; dev_feed = the queue
 * can take a step's tokens on the device (devq.c). */
deepinfer_status di_devq_spec_hold_init(di_devq_spec *s, int pipeline, int dev_feed, di_error *err);

/* Step st's draft rows (st->dsrc): the drafts held from step st->seq_no - 1 to the host (waiting for
 * the drafter where they are still on the device), then into st: each draft row's token, the draft
 * each verify sample compares with (spec_next) and the history slot later samples read; n_dsrc = 0. */
deepinfer_status di_devq_spec_take(di_devq_spec *s, di_step *st, di_error *err);

#endif
