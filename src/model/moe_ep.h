/*
 * moe_ep.h — MoE expert parallelism (EP) and expert-parallel load balancing
 * (EPLB) on a group of ranks (docs/DESIGN.md "Parallel"; architecture.md
 * §4.7, §5.6; anchors.md §3, §6).
 *
 * Layout (dp = 1): every rank holds the dense and attention weights, the
 * router and the shared expert, runs the same batch through them (the same
 * bits on every rank) and holds only its routed experts: expert e is owned
 * by rank e / (E / ep_size). An MoE sub-layer on rank r, all on the device
 * with no host read (the router is replicated: every rank has the same
 * selections and weights, so each plans the whole exchange itself):
 *   1-2. ops.h di_ep_plan: each (row, slot) entry's executing rank (the
 *      j-th entry of expert e, in increasing (row, slot), runs on copy
 *      j % copies(e) of e: copy 0 = the owner, then the replicas in the
 *      order of the plan), this rank's dispatch, each entry's combine
 *      position, the combine exchange's send and receive rows, and the EPLB
 *      counters, accumulated on the device (di_ep_pull_counters);
 *   3. runs the entries it executes through its resident experts (grouped
 *      GEMMs over exactly those rows: a row's bits never depend on which
 *      other rows share its expert, moe.h; the groups' row counts are read
 *      on the device);
 *   4. combine, fixed sizes: the rows are split in contiguous slices, slice
 *      s combined by rank s; entry (m, slot) has the fixed send row m*k + q
 *      (q: its place in the single-rank order, increasing expert id, then
 *      slot: ops.h di_moe_combine), written by the rank that executed it;
 *      an all-to-all sends rows [a_s*k, b_s*k) to rank s (byte counts from M
 *      alone); the receiver takes each entry's row from the buffer of its
 *      executing rank, sums a row's k outputs in that order, adds the shared
 *      expert and rounds to bf16;
 *   5. an all-gather-v of the bf16 slices gives every rank every row.
 * No sum ever depends on where an expert ran, so every rank's outputs are
 * bitwise those of one rank with every expert.
 *
 * EPLB: di_eplb_plan makes a replica map from the counters (identical on
 * every rank under dp = 1: each routes every row), di_eplb_apply binds the
 * new replicas from the checkpoint (the rank's own open copy: only their
 * byte ranges are read) and drops the old ones, between steps. Replicas hold
 * the owner's exact weights, so they compute the same bits.
 *
 * One code path for every backend: activations move only through ops on
 * buffers in backend memory sized at load. On NCCL the collectives are
 * stream-ordered (comm.h di_comm_alltoallv_async: on the exec's stream, no
 * host sync inside the sub-layer); the loopback communicators are blocking,
 * so the exec is synced before each of their exchanges. An EP step is still
 * run eagerly (engine_open.c): the step plan does not record collectives
 * yet, and the DP layout below reads its routing table back. The
 * communicator's buffers are backend memory: host memory for the loopback
 * communicator (the CPU backend), device memory for NCCL (the CUDA
 * backend: one GPU per rank, more ranks than visible GPUs are refused). A
 * communicator of one rank (ep_size 1 with a comm) runs the same path, so
 * one GPU checks the NCCL path against the model without EP. Calls on
 * one rank are not thread-safe; ranks run concurrently, each on its own
 * model instance. di_eplb_apply loads weights: one load at a time per
 * process (wload.h), so the ranks' applies run one after another.
 */
#ifndef DI_MODEL_MOE_EP_H
#define DI_MODEL_MOE_EP_H

#include <stdint.h>

#include "model/forward.h"
#include "model/moe.h"
#include "model/tensor_spec.h"
#include "model/weights.h"
#include "parallel/comm.h"

enum { DI_EP_MAX_COPIES = 8 }; /* copies of one expert (owner + replicas) */

typedef struct di_ep_model di_ep_model;

/* One MoE sub-layer's EP state (di_moe_w.ep). */
typedef struct di_ep_layer {
    di_ep_model *ep;
    di_moe_w *mw;                 /* the weights it serves (resident experts bound) */
    char prefix[32];              /* "layers.3." / "mtp.0.": the experts' tensor names */
    int E, per_rank;              /* experts, owned per rank */
    int *ncopies;                 /* [E] */
    int *copies;                  /* [E][DI_EP_MAX_COPIES] ranks; [e][0] = owner */
    int64_t *load;                /* [E] routing entries since the last plan (host: pulled, di_ep_pull_counters) */
    int64_t replica_entries;      /* entries this rank ran on replicas (all time; host: pulled) */
    int *local;                   /* [E] slot in W1/W3/W2, or -1: not resident */
    int nloc;
    di_wmat *W1, *W3, *W2;        /* [nloc] the resident experts (views of mw's), increasing id */
    int *seen, *off;              /* [E], [E+2] step scratch */
    /* backend memory: the replica table (uploaded when it changes) and the counters the dp = 1 plan
     * accumulates on the device (ops.h di_ep_plan), read by the host between steps only */
    int *d_ncopies, *d_copies, *d_local; /* [E], [E][DI_EP_MAX_COPIES], [E] */
    int64_t *d_load, *d_replica;  /* [E], [1] */
    int64_t *pulled;              /* host [E + 1]: the counters' copy */
    di_exec *x;                   /* the exec of its last step (the pulls' copies) */
} di_ep_layer;

struct di_ep_model {
    di_comm *comm;                /* borrowed */
    int rank, size;
    const di_model_config *cfg;
    di_weight_spec *spec;         /* owned: binds replicas */
    di_ep_layer **layers;
    int nlayers, caplayers;
    deepinfer_status status;      /* the first failure of a step (moe blocks return nothing) */
    di_error err;
    /* step scratch shared by the layers (they run one after another), reserved at load with a
     * fixed size (max_rows * k entries): host tables, and buffers in backend memory */
    int cap;                      /* entries (rows * k) */
    int *exec, *sel_h, *sel_loc, *inv_h, *inv2, *pack, *unpack; /* host [cap] */
    int *d_sel_loc, *d_inv2, *d_pack, *d_unpack, *d_exec;      /* backend [cap] */
    int *d_off, *d_off1;          /* backend [E+2] (the dispatch's groups), [4] (two one-group lists) */
    float *d_rw, *d_erw;          /* backend [cap]: the row gathers' unused weights */
    uint16_t *sendbuf, *recvbuf;  /* backend [cap][dim], [cap + size * 64][dim] (the fixed combine exchange) */
    size_t *sb, *so, *rb, *ro;    /* [size] */
    int dp;                       /* 1: attention DP layout (below), every rank its own rows */
    struct di_ep_dp *dps;         /* its step scratch (moe_ep_dp.c), reserved by di_ep_set_dp */
};

/* The EP settings of a load: ep_size 0 is 1; an error names what to fix
 * ("N experts are not divisible by --ep M", ep_size < 1, rank out of range,
 * a communicator of another size, more ranks than visible GPUs on a device
 * backend). *out = NULL when ep_size == 1 and comm == NULL (no EP); with a
 * communicator of one rank, the EP path with every expert resident. */
deepinfer_status di_ep_model_create(const di_model_config *cfg, int ep_rank, int ep_size, di_comm *comm,
                                    di_ep_model **out, di_error *err);
void di_ep_model_free(di_ep_model *ep);
/* Expert range [*lo, *hi) of this rank for a layer of E experts (all of
 * them when ep == NULL). */
void di_ep_owned(const di_ep_model *ep, int E, int *lo, int *hi);
/* After the layer's experts [lo, hi) were bound: its EP state (mw->ep). */
deepinfer_status di_ep_attach(di_ep_model *ep, di_moe_w *mw, const char *prefix, di_error *err);
/* The step scratch for `entries` (rows * k) routing entries, reserved after
 * the load so that a step allocates nothing (a rank that failed inside a
 * step would leave the others waiting in a collective). */
deepinfer_status di_ep_reserve(di_ep_model *ep, int entries, di_error *err);
/* Keep the spec for replica binding (the model frees it with ep). */
void di_ep_keep_spec(di_ep_model *ep, di_weight_spec *spec);
/* The step's first EP failure (then cleared), else OK. */
deepinfer_status di_ep_take_status(di_ep_model *ep, di_error *err);

/* Add the device counters (entries per expert, entries run on replicas) to
 * the host's (load, replica_entries) and clear them: between steps, on the
 * rank's thread (di_eplb_plan calls it). */
void di_ep_pull_counters(di_ep_model *ep);

/* The routed experts and the tail of the MoE sub-layer under EP: the same
 * result as ops.h di_moe_routed with every expert (shared: bf16 rows that
 * may alias out; out stride dim). */
void di_ep_moe_routed(di_fwd *f, di_ep_layer *L, const di_moe_opts *o, const int *sel, const float *rw,
                      const uint16_t *xn, const uint16_t *shared, uint16_t *out);

/* ---- attention data parallelism (dp = ep_size; moe_ep_dp.c) ----
 * Every rank runs its own rows (its own requests) through attention and the
 * dense layers; an MoE sub-layer on rank r:
 *   1. routes its own rows; an all-gather of the entry counts, then of every
 *      rank's (expert, weight) entries, gives every rank the whole step's
 *      routing table in the global order (rank, row, slot);
 *   2. the executing rank of every entry, as under dp = 1 (the j-th entry of
 *      expert e in the global order runs on copy j % copies(e)); the
 *      counters count the whole table, so EPLB plans agree on every rank;
 *   3. dispatch: an all-to-all-v sends each entry's input row to its
 *      executing rank (in the global order);
 *   4. the received entries run through the resident experts as rows of
 *      one slot each (grouped GEMMs over exactly those rows);
 *   5. an all-to-all-v returns each output to its row's rank, which sums a
 *      row's k outputs in the single-rank order (increasing expert id, then
 *      slot), adds the shared expert and rounds to bf16 (no all-gather).
 * The whole step's entries must fit the reserved scratch (rows * k of one
 * pass): the engine gives each rank at most max_rows / ranks rows a pass.
 * A rank with no rows in a pass still joins every MoE sub-layer's
 * collectives (di_ep_join_empty); it may execute other ranks' entries. */
deepinfer_status di_ep_set_dp(di_ep_model *ep, int on, di_error *err);
/* A pass without rows on this rank: join the exchanges of every backbone MoE
 * sub-layer ("layers." prefix, the forward's order) with zero rows; x / ws /
 * o: the model's exec, workspace and backbone routing options. */
deepinfer_status di_ep_join_empty(di_ep_model *ep, di_exec *x, di_ws *ws, const di_moe_opts *o, di_error *err);

/* ---- EPLB ---- */
typedef struct di_eplb_map {
    int nlayers, E;               /* E: the largest layer's experts */
    int *ncopies;                 /* [nlayers][E] */
    int *copies;                  /* [nlayers][E][DI_EP_MAX_COPIES] */
} di_eplb_map;

/* A replica map from the counters: per layer, the expert with the most
 * entries per copy gets one more copy, on the least loaded rank that does
 * not hold it and holds fewer than `capacity` replicas, until no expert can
 * gain (ties: lower expert id, lower rank). capacity 0: no replicas (every
 * expert back on its owner only). Deterministic: identical counters give an
 * identical map on every rank. */
deepinfer_status di_eplb_plan(di_ep_model *ep, int capacity, di_eplb_map *out, di_error *err);
/* Make `map` the dispatch of every layer between steps: bind this rank's
 * new replicas, drop those it no longer holds, reset the counters. */
deepinfer_status di_eplb_apply(di_ep_model *ep, const di_eplb_map *map, di_error *err);
void di_eplb_map_free(di_eplb_map *map);

#endif
