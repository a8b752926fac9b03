/*
 * tensor_spec.h — the tensors a config implies, and checking a checkpoint
 * against them.
 *
 * di_spec_build turns a di_model_config into the full expected tensor list
 * of architecture.md §2.5 (V4, incl. MTP) / §2.6 (V4.1, incl. DSpark stages
 * and Engram tables): reference name, dtype, shape. di_spec_check compares a
 * checkpoint with it, reports *every* missing or inconsistent tensor (and
 * unexpected extra ones, as warnings), and binds each entry that matches to
 * its tensor. Model code then takes its weights from the spec:
 *
 *     di_spec_check(spec, st, &rep, &err);          // once, at load
 *     const di_tensor *w = di_spec_get(spec, "layers.%d.attn.wq_a.weight", l);
 *
 * so it only ever sees tensors whose dtype and shape were validated.
 *
 * Shapes (H = hidden_size, D = head_dim, B = FP8 weight block):
 *   FP8 linear  X.weight F8_E4M3 [out, in] + X.scale F8_E8M0 [ceil(out/B0), ceil(in/B1)]
 *   FP4 expert  X.weight I8 [out, in/2] (two e2m1 per byte) + X.scale F8_E8M0 [out, in/32]
 *   Engram      engram.embed.weight F8_E4M3 [rows, head_dim] + engram.embed.scale F8_E8M0 [rows, head_dim/32]
 * Not checked (ignored, counted): the V4.1 vision tower `vision.*`,
 * `aligner.*`, `image_start`, `image_end`, `image_newline`.
 * Optional: V4.1 `ffn.gate.bias_vl` (the text-only path never reads it) and
 * the V4-0731 DSpark head tensors, whose layout is third-party knowledge only
 * (architecture.md §2.6, marked DI_SPEC_UNVERIFIED).
 */
#ifndef DI_MODEL_TENSOR_SPEC_H
#define DI_MODEL_TENSOR_SPEC_H

#include <stddef.h>
#include <stdint.h>

#include "io/dtype.h"
#include "io/safetensors.h"
#include "model/config.h"
#include "util/error.h"

#define DI_SPEC_OPTIONAL 1u    /* absence is not an error */
#define DI_SPEC_UNVERIFIED 2u  /* layout from third-party sources only (implies optional) */

typedef enum di_tensor_kind {
    DI_TK_PLAIN = 0,       /* BF16 / F32 / I64 tensor used as is */
    DI_TK_FP8_WEIGHT,      /* F8_E4M3 [out, in] */
    DI_TK_FP8_SCALE,       /* F8_E8M0 block scales of the FP8 weight before it */
    DI_TK_FP4_WEIGHT,      /* I8 [out, in/2], e2m1 pairs, low nibble first */
    DI_TK_FP4_SCALE,       /* F8_E8M0 [out, in/32] */
    DI_TK_ENGRAM_TABLE,    /* F8_E4M3 [rows, engram_head_dim] */
    DI_TK_ENGRAM_SCALE     /* F8_E8M0 [rows, engram_head_dim/32] */
} di_tensor_kind;

typedef struct di_tensor_spec {
    const char *name;        /* reference name, e.g. "layers.3.attn.wq_a.weight" */
    di_dtype dtype;
    int alt_dtype;           /* a second accepted dtype (di_dtype), or -1 */
    int ndim;
    int64_t shape[2];
    di_tensor_kind kind;
    int layer;               /* backbone layer; n_layers + s for drafter stage s; -1 top level */
    int expert;              /* routed expert index, or -1 */
    unsigned flags;          /* DI_SPEC_OPTIONAL, DI_SPEC_UNVERIFIED */
    const di_tensor *tensor; /* set by di_spec_check when the checkpoint's tensor matches; else NULL */
} di_tensor_spec;

typedef struct di_weight_spec di_weight_spec;

/* Build the expected tensor list of `cfg` (a validated config). On success
 * *out is a new spec (caller frees with di_spec_free). Fails with
 * DEEPINFER_ERR_LIMIT if the config implies more than 8M tensors. */
deepinfer_status di_spec_build(const di_model_config *cfg, di_weight_spec **out, di_error *err);

void di_spec_free(di_weight_spec *spec);

/* Entries in build order (top level, then each layer, its experts, then
 * drafter stages); pointers owned by the spec. */
size_t di_spec_count(const di_weight_spec *spec);
const di_tensor_spec *di_spec_at(const di_weight_spec *spec, size_t i);

/* The entry for a reference name (a leading "model." is ignored), or NULL. */
const di_tensor_spec *di_spec_find(const di_weight_spec *spec, const char *name);

/* The validated tensor of an entry (NULL until di_spec_check bound it). */
const di_tensor *di_spec_tensor(const di_tensor_spec *entry);

/* di_spec_find + di_spec_tensor with a printf-style name: the validated
 * tensor, or NULL if the name is not in the spec or did not validate. */
const di_tensor *di_spec_get(const di_weight_spec *spec, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

typedef enum di_issue_kind {
    DI_ISSUE_MISSING = 0,      /* required tensor absent (error) */
    DI_ISSUE_MISMATCH,         /* present with another dtype or shape (error) */
    DI_ISSUE_EXTRA,            /* in the checkpoint, not in the spec (warning) */
    DI_ISSUE_OPTIONAL_MISSING  /* optional tensor absent (note) */
} di_issue_kind;

typedef struct di_spec_issue {
    di_issue_kind kind;
    const di_tensor_spec *spec; /* NULL for EXTRA */
    const di_tensor *found;     /* NULL for MISSING / OPTIONAL_MISSING */
} di_spec_issue;

typedef struct di_spec_report {
    size_t n_expected;          /* spec entries */
    size_t n_ok;                /* entries bound to a matching tensor */
    size_t n_missing, n_mismatch, n_extra, n_optional_missing;
    size_t n_ignored;           /* vision tower tensors skipped */
    di_spec_issue *issues;      /* every issue: spec order, then extras in checkpoint order */
    size_t n_issues;
} di_spec_report;

/* Check `st` against `spec` and bind matching entries (previous bindings are
 * cleared). Fills *rep (caller frees with di_spec_report_free; may be NULL
 * when only the status matters). Returns DEEPINFER_OK when nothing required
 * is missing or inconsistent (extras are only warnings); else
 * DEEPINFER_ERR_FORMAT with a message giving the counts and the first issue. */
deepinfer_status di_spec_check(di_weight_spec *spec, const di_safetensors *st, di_spec_report *rep,
                               di_error *err);

void di_spec_report_free(di_spec_report *rep);

/* One line per issue, e.g.
 *   "layers.3.attn.wq_a.weight: expected F8_E4M3 [1024,4096], found F8_E4M3 [1024,4095]" */
void di_spec_issue_format(const di_spec_issue *issue, char *buf, size_t n);

/* Expected "DTYPE [a,b]" of an entry ("BF16|F32 [4,5120]" with an alternative). */
void di_spec_format_expected(const di_tensor_spec *e, char *buf, size_t n);

#endif
