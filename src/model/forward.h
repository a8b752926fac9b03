/*
 * forward.h — what the blocks of a forward step share (internal to
 * src/model): the rows in flight, their sequences, and the workspace.
 *
 * A step is a flat batch of token rows. Rows of one sequence form one
 * contiguous segment at consecutive absolute positions that continue the
 * sequence's state; a segment can be a prefill chunk, one decode token or a
 * multi-token block. Every block computes per row (or per segment, in
 * position order, for the compressor state), so a row's result depends only
 * on its sequence — never on the other segments in the batch.
 *
 * The workspace is sized once for `max_rows` rows; larger batches are run
 * as consecutive sub-batches (exactly like chunked prefill).
 */
#ifndef DI_MODEL_FORWARD_H
#define DI_MODEL_FORWARD_H

#include <stddef.h>
#include <stdint.h>

#include "model/config.h"
#include "model/seq_state.h"
#include "ops/ops.h"

typedef struct di_seg {
    di_seq_state *seq;
    int row0, nrows;   /* rows [row0, row0 + nrows) of the step */
    int64_t pos0;      /* position of row0 */
} di_seg;

/* Host tables of a step: small arrays the host fills from what it knows
 * before the step (segments, positions, state addresses, page tables) and
 * ops read. On the CPU they are plain host memory; an asynchronous device
 * queue copies them when the step is submitted (docs/cuda-backend.md §1, §6).
 * Per-segment arrays are indexed by segment, per-row arrays by row. */
typedef struct di_tabs {
    int *row_seg;               /* [M] the row's segment */
    int *seg_row0, *seg_nrows;  /* [M] per segment */
    int64_t *seg_pos0;          /* [M] per segment */
    uint16_t **ring;            /* [M] per segment: the layer's SWA ring */
    uint16_t ***ckv;            /* [M] per segment: the compressed-KV page table */
    int *page_rows;             /* [M] per segment (attention) or per row (indexer): rows per page */
    float **skv, **ssc;         /* [M] per segment: compressor state buffers */
    int *nctx;                  /* [M] per segment: DSpark context slots */
    int *emit;                  /* [M] per row: compressor emission index, or -1 */
    int64_t *emit_pos, *emit_row; /* [M] per emission: RoPE position, store row */
    int *emit_seg;              /* [M] per emission: segment */
    int64_t *nvis, *kcap;       /* [M] per row: indexer keys visible / present */
    uint16_t ***kpages;         /* [M] per row: the index-key page table scored */
    uint16_t **dst;             /* [M] scatter destinations (ring slots, store rows) */
    int *src_row;               /* [M] scatter sources */
    int64_t *eng_ids;           /* V4.1 Engram hash ids [M][engram layers][cols] (the host hash path) */
    int32_t **eng_ring;         /* [M] per segment: the sequence's Engram class ring (the ops' hash) */
    float *rope;                /* [2][2][M][rd/2] RoPE tables built on the host (device backends) */
    void *mem;
} di_tabs;

/* Scratch buffers for one step of at most max_rows rows (activations: in
 * the backend's memory, di_dev_alloc). */
typedef struct di_ws {
    int max_rows;
    /* bf16 */
    uint16_t *x, *xn, *qr, *qrn, *q, *kv, *o, *z, *sub, *qi, *xe, *g, *u, *h, *eo, *emit16;
    uint16_t *sg, *su, *sh, *seo; /* the shared expert: gate, up, hidden [M][I], output [M][dim] */
    uint16_t *emitk;            /* V4.1 index keys of emitted latents [M][index_head_dim] */
    uint16_t *iemit16;          /* V4 index compressor's own emit16 [M][index_head_dim] (it runs beside the main one) */
    uint16_t *eng_e, *eng_kv;   /* V4.1 Engram: gathered rows [M][cols*head_dim], wkv out [M][(hc+1)*dim] */
    uint16_t *mainx;            /* V4.1 DSpark main_x [M][dim] */
    int64_t *eng_dids;          /* V4.1 Engram hash ids of the ops' hash [M][engram layers][cols] */
    /* fp32 */
    float *rope_cs[2], *rope_sn[2]; /* per-row cos/sin of the step: [0] main RoPE, [1] compress RoPE */
    float *mixes, *pre, *post, *comb, *cproj_kv, *cproj_sc, *iw, *logits_gate, *rw, *erw, *y, *emit32, *iscore;
    float *pre_in;              /* V4.1 single-pass mHC: the pre carried to the next site [M][4] */
    float *icproj_kv, *icproj_sc, *iemit32; /* V4 index compressor's own projections [M][2 ihd], emit32 [M][ihd] */
    /* int / pointers */
    int *sel, *topk, *ntopk, *nidx;
    int32_t *tok;               /* [M] the step's tokens in backend memory (device backends) */
    int *moe_off, *moe_rows, *moe_inv; /* MoE dispatch: [E+1], [M*k], [M*k] */
    int *cand, *ncand;          /* V4.1 candidate blocks kept per row [M][candidate_topk_blocks], count [M] */
    const uint16_t **kvptr;
    size_t kvptr_stride;  /* pointer slots per row: window + max compressed rows */
    size_t iscore_stride; /* floats per thread for indexer scores */
    float *bscore;        /* V4.1 candidate block scores, per thread */
    size_t bscore_stride;
    int nthreads;
    di_tabs t;            /* host tables */
    void *mem;
    size_t bytes;         /* size of mem */
} di_ws;

/* One step in flight. */
typedef struct di_fwd {
    di_exec *x;
    const di_model_config *cfg;
    di_ws *ws;
    int M;
    const int32_t *tokens;  /* [M] host */
    const int32_t *dtok;    /* [M] the same in backend memory (ops that read tokens: embed, hash routing) */
    const int64_t *pos;     /* [M] */
    di_seg *segs;
    int nseg;
    int mtp;                /* 1 while running a drafter stage (its own positions) */
    int released_index_k;   /* V4.1: single-token decode rows score stale index keys (§5.4) */
    int hc_primed;          /* di_block: the next block's attention-site pre is done (block.h) */
    int hc_defer_post;      /* di_block with next == NULL: leave the post to the head (block.h) */
    int hc_post_pending;    /* that post is still to run (di_mhc_head_final / di_mhc_post_pending) */
    struct cp_ctx *cp;      /* a context-parallel prefill's pass (cp_prefill.c), else NULL */
    const int64_t *win_lo;  /* V4.1 compact prefill, late layers: [nseg] no window position below it; NULL = none */
    const float *inv_freq_main, *inv_freq_cmp; /* [rope_head_dim / 2] */
    const struct di_moe_opts *moe;             /* router / SwiGLU settings of the model */
    void (*index_obs)(void *ctx, int layer, int64_t pos, const int *rows, int n); /* optional */
    void *index_obs_ctx;
} di_fwd;

/* Size and lay out a workspace for max_rows rows and contexts up to
 * max_context positions. */
deepinfer_status di_ws_alloc(di_ws *ws, const di_model_config *cfg, int max_rows, int64_t max_context, int nthreads,
                             di_error *err);
void di_ws_free(di_ws *ws);
/* What di_ws_alloc allocates for these arguments, without allocating (the
 * load plan, load_plan.h): the backend-memory buffers and the host tables. */
void di_ws_sizes(const di_model_config *cfg, int max_rows, int64_t max_context, int nthreads, size_t *dev_bytes,
                 size_t *host_bytes);

static inline const float *di_fwd_inv_freq(const di_fwd *f, const di_layer_cfg *L) {
    return L->rope_compress ? f->inv_freq_cmp : f->inv_freq_main;
}

/* The step's RoPE table (cos, sin [M][rd/2]) for a layer's RoPE choice. */
static inline const float *di_fwd_rope_cs(const di_fwd *f, const di_layer_cfg *L) {
    return f->ws->rope_cs[L->rope_compress ? 1 : 0];
}
static inline const float *di_fwd_rope_sn(const di_fwd *f, const di_layer_cfg *L) {
    return f->ws->rope_sn[L->rope_compress ? 1 : 0];
}

#endif
