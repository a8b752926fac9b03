/*
 * ranks.h — the engine's parallel ranks (docs/DESIGN.md "Parallel"): --ep M expert parallelism
 * and --dp N attention data parallelism in one process.
 *
 * Layout: world = max(dp, ep) ranks; dp is 1 or equal to ep (DeepSeek's serving layout: DP
 * attention, EP across all ranks). Rank r holds the dense and attention weights, the router, the
 * shared expert and routed experts [r E/ep, (r+1) E/ep) (plus EPLB replicas), its own model
 * instance, and a state pool of the engine pool's geometry. Rank 0's model and pool are the
 * engine's; the engine's scheduler and runner plan every step exactly as on one rank, and the
 * device queue hands the step's forward to di_ranks_forward (devq.h di_devq_set_forward):
 *   dp = 1  every rank runs the whole batch (its own copy of every sequence's state, its page
 *           tables mirrored from the engine pool's); rank 0 produces the logits;
 *   dp > 1  each sequence belongs to one DP rank, given when its slot is reset (a new request,
 *           or one re-admitted after preemption): the rank whose sequences hold the fewest state
 *           pages, then the fewest slots, then the lowest rank (forks stay with their parent).
 *           Each rank runs only its sequences' rows, in passes of at most max_rows / dp rows per
 *           rank, so a pass's routing entries fit every rank's reserved EP scratch; a rank with
 *           no rows in a pass joins its MoE exchanges with zero rows. Logits come back to the
 *           step's logits array in row order.
 * Ranks 1.. are threads of this process, woken per step; rank 0 runs on the caller's thread;
 * they meet in the MoE collectives of their communicator (comm.h). Every row's bits are those of
 * one rank (moe_ep.h's combine order; rows are batch and chunk invariant).
 *
 * Devices (di_rank_placement): on the CPU every rank uses the host and the loopback communicator.
 * On CUDA rank r drives device r: its thread binds the device (ops/backend.h
 * di_backend_rank_bind; rank 0 keeps the process's device 0) and runs every job that touches the
 * rank's memory (load, pool, state operations, forwards, EPLB, free); the ranks meet over NCCL.
 * The tests place every rank on device 0 instead, with the device loopback communicator.
 *
 * EPLB (eplb_replicas > 0): every eplb_interval steps with rows, a replica map is planned from
 * rank 0's counters (identical on every rank: each counts the whole step) and applied on every
 * rank between steps (moe_ep.h di_eplb_plan / di_eplb_apply).
 */
#ifndef DI_ENGINE_RANKS_H
#define DI_ENGINE_RANKS_H

#include "engine/devq.h"
#include "engine/state_pool.h"
#include "model/model.h"
#include "ops/backend.h"

typedef struct di_ranks di_ranks;

/* Where the ranks run on a device backend (no effect on the CPU):
 *   DI_RANKS_PER_DEVICE  rank r on device r, NCCL (the engine; world <= visible GPUs);
 *   DI_RANKS_ONE_DEVICE  every rank on device 0, the device loopback communicator (tests only:
 *                        engine_internal.h di_engine_options.ranks_one_device);
 *   DI_RANKS_SHARED      every rank on the caller's thread and device (tools that run the ranks'
 *                        models themselves): one rank only on CUDA. */
typedef enum di_rank_placement { DI_RANKS_PER_DEVICE = 0, DI_RANKS_ONE_DEVICE, DI_RANKS_SHARED } di_rank_placement;

/* The layout rules, before anything is loaded: ep, dp >= 1; dp 1 or == ep; the routed experts
 * (and the drafter's) divisible by ep; eplb_replicas needs ep > 1; on a device backend one GPU
 * per rank (refused beyond the visible GPUs; DI_RANKS_SHARED: beyond one rank; DI_RANKS_ONE_DEVICE:
 * any number on device 0). *world = max(dp, ep). */
deepinfer_status di_ranks_check(const di_model_config *cfg, int ep, int dp, int eplb_replicas, di_backend_kind bk,
                                di_rank_placement place, int *world, di_error *err);

/* The group for a checked layout on backend bk (the active one): the rank threads, each bound to
 * its device, and their communicators. comm(0) goes into rank 0's load options (model.h
 * di_model_options.comm). */
deepinfer_status di_ranks_new(int ep, int dp, int eplb_replicas, int eplb_interval, di_backend_kind bk,
                              di_rank_placement place, di_ranks **out, di_error *err);
struct di_comm *di_ranks_comm(const di_ranks *R, int rank);
int di_ranks_world(const di_ranks *R);

/* Ranks 1.. : load their models (rank 0's options with their rank and communicator), each on its
 * thread, one after another, after the load plan of every rank was checked on its thread
 * (di_ranks_plan_all, before rank 0's load). */
deepinfer_status di_ranks_plan_all(di_ranks *R, const char *dir, const di_model_options *mo, di_error *err);
deepinfer_status di_ranks_load(di_ranks *R, const char *dir, const di_model_options *mo, di_error *err);

/* After the engine's pool is made: each rank's pool of its geometry, the DP switch of every
 * model, the worker threads, and the queue's forward hook. `model0` / `pool0`: rank 0's. */
deepinfer_status di_ranks_start(di_ranks *R, di_model *model0, di_state_pool *pool0, di_devq *dq, di_error *err);

/* The hook (devq.h di_devq_forward_fn; ctx = the group). */
deepinfer_status di_ranks_forward(void *ctx, const di_step *s, di_model_batch *b, di_error *err);

/* Context parallelism under attention DP (dp > 1; cp_prefill.h): a step's prefill segment of at
 * least min_tokens rows (and 2 x world) runs over every rank, zig-zag chunks, before the step's
 * other rows; the owner's state is copied to the other ranks' copies of the slot first, and every
 * rank ends holding the state after it. 0 = off. di_ranks_cp_prefills counts the segments run so. */
void di_ranks_set_cp(di_ranks *R, int min_tokens);
int di_ranks_cp_prefills(const di_ranks *R);
/* Entries routed to replicas over every rank and layer (EPLB at work), and rebalances done. */
int64_t di_ranks_replica_entries(di_ranks *R);
int di_ranks_rebalances(const di_ranks *R);
/* The DP rank of each running sequence's slot (-1: none), for tests: [n_slots]. */
const int *di_ranks_owners(const di_ranks *R);

/* One line for the plan text ("parallel ..."). */
void di_ranks_describe(const di_ranks *R, char *buf, size_t n);

/* Frees ranks 1..'s models and pools and every communicator (after the engine freed rank 0's
 * model), each on its rank's thread, then stops the threads. */
void di_ranks_free(di_ranks *R);

#endif
