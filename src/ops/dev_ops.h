/*
 * dev_ops.h — the backend vtable (DESIGN.md §1): a device backend (CUDA)
 * registers one table of twins of the ops.h ops; an op called with an exec
 * that carries a table runs the twin (on the exec's stream, device
 * pointers) instead of the CPU backend's (src/ops/cpu/cpu_ops.h). The
 * dispatch (src/ops/dispatch.c, sequences.c: DI_DEV_CALL at the top of each
 * op) costs the CPU path one predictable branch per op call.
 *
 * Every member has exactly the type of its ops.h function (__typeof__), so
 * a signature change in ops.h that is not mirrored here fails to compile.
 */
#ifndef DI_OPS_DEV_OPS_H
#define DI_OPS_DEV_OPS_H

#include "ops/ops.h"

#define DI_DEV_OP(name) __typeof__(di_##name) *name

typedef struct di_dev_ops {
    const char *name;
    /* per-exec device context (stream, scratch, table staging) */
    void *(*ctx_new)(size_t scratch_bytes);
    void (*ctx_free)(void *ctx);
    /* wait for the exec's stream; the first failed op's message, if any */
    deepinfer_status (*sync)(di_exec *x, di_error *err);
    /* 1 while the exec records steps for replay (di_exec_fixed_shapes) */
    int (*fixed_shapes)(const di_exec *x);
    /* concurrent lines of a recorded step (ops.h di_exec_branch / di_exec_join); NULL: none */
    void (*branch)(di_exec *x, int b);
    void (*join)(di_exec *x);
    DI_DEV_OP(gemm);
    DI_DEV_OP(gemm2);
    DI_DEV_OP(gemm_blockdiag);
    DI_DEV_OP(gemm_multi);
    DI_DEV_OP(rmsnorm);
    DI_DEV_OP(head_rmsnorm_bf16);
    DI_DEV_OP(rope);
    DI_DEV_OP(rope_tab);
    DI_DEV_OP(qat_fp8);
    DI_DEV_OP(qat_fp4);
    DI_DEV_OP(qat_fp4_e4m3);
    DI_DEV_OP(hadamard128);
    DI_DEV_OP(sparse_attn);
    DI_DEV_OP(hc_sinkhorn_rows);
    DI_DEV_OP(hc_scale_mixes);
    DI_DEV_OP(hc_collapse);
    DI_DEV_OP(hc_expand);
    DI_DEV_OP(hc_transition);
    DI_DEV_OP(hc_head_final);
    DI_DEV_OP(swiglu);
    DI_DEV_OP(embed);
    DI_DEV_OP(embed_rep);
    DI_DEV_OP(copy_2d);
    DI_DEV_OP(copy_h2d);
    DI_DEV_OP(copy_d2h);
    DI_DEV_OP(fill_f32);
    DI_DEV_OP(scatter_rows);
    DI_DEV_OP(attn_list);
    DI_DEV_OP(attn_list_block);
    DI_DEV_OP(cmp_gated_rows);
    DI_DEV_OP(index_select);
    DI_DEV_OP(route_rows);
    DI_DEV_OP(route_gate);
    DI_DEV_OP(moe_dispatch);
    DI_DEV_OP(moe_gather);
    DI_DEV_OP(gemm_grouped);
    DI_DEV_OP(gemm2_grouped);
    DI_DEV_OP(swiglu_n);
    DI_DEV_OP(moe_combine);
    DI_DEV_OP(moe_routed);
    DI_DEV_OP(ep_plan);
    DI_DEV_OP(gather_rows_bf16);
    DI_DEV_OP(scale_bf16_f32);
    DI_DEV_OP(hc_pre_onehot);
    DI_DEV_OP(hc_head_pre);
    DI_DEV_OP(hc_mean);
    DI_DEV_OP(add_bcast_bf16);
    DI_DEV_OP(engram_gather_rows);
    DI_DEV_OP(engram_gate_rows);
    DI_DEV_OP(engram_hash_rows);
    DI_DEV_OP(add_bf16_f32_x);
    DI_DEV_OP(add_f32_x);
    DI_DEV_OP(f32_to_bf16_x);
    DI_DEV_OP(attn_dec);
    DI_DEV_OP(q_post);
    DI_DEV_OP(q_proj);
    DI_DEV_OP(attn_kv_post);
} di_dev_ops;

/* Run the device twin and return when the exec carries a backend table. */
#define DI_DEV_CALL(x, op, ...)                                  \
    do {                                                         \
        if (__builtin_expect((x) != NULL && (x)->dev != NULL, 0)) { \
            (x)->dev->op((x), __VA_ARGS__);                      \
            return;                                              \
        }                                                        \
    } while (0)

/* The backend new execs get (src/ops/exec.c di_exec_init) and the exec that owns state
 * memory operations outside a step (sequence reset / fork: the ops called
 * with a NULL exec before). NULL / NULL on the CPU. Installed by
 * di_backend_use (backend.h). */
void di_set_dev_ops(const di_dev_ops *ops, di_exec *state_exec);
const di_dev_ops *di_get_dev_ops(void);
/* The calling thread's own state exec (a rank thread on its device, backend.h
 * di_backend_rank_bind): di_dev_exec returns it on that thread instead of the
 * process's; NULL goes back to the process's. */
void di_set_thread_dev_exec(di_exec *state_exec);

#endif
