/*
 * cpu_ops.h — the CPU backend's ops: for every op of ops.h that the CPU
 * computes itself, di_cpu_<op> with exactly the type of di_<op> (the
 * dispatch in src/ops/dispatch.c calls it when the exec carries no device
 * backend). The ops that ops.h defines as a sequence of other ops are not
 * here: src/ops/sequences.c runs their sequence on every backend that does
 * not fuse them.
 */
#ifndef DI_OPS_CPU_CPU_OPS_H
#define DI_OPS_CPU_CPU_OPS_H

#include "ops/cpu/threadpool.h"
#include "ops/ops.h"

#define DI_CPU_OP(name) __typeof__(di_##name) di_cpu_##name

DI_CPU_OP(sparse_attn);
DI_CPU_OP(attn_list);
DI_CPU_OP(attn_list_block);
DI_CPU_OP(cmp_gated_rows);
DI_CPU_OP(scale_bf16_f32);
DI_CPU_OP(hc_pre_onehot);
DI_CPU_OP(hc_head_pre);
DI_CPU_OP(hc_mean);
DI_CPU_OP(add_bcast_bf16);
DI_CPU_OP(engram_gather_rows);
DI_CPU_OP(add_bf16_f32_x);
DI_CPU_OP(add_f32_x);
DI_CPU_OP(f32_to_bf16_x);
DI_CPU_OP(engram_gate_rows);
DI_CPU_OP(engram_hash_rows);
DI_CPU_OP(gemm);
DI_CPU_OP(gemm2);
DI_CPU_OP(gemm_grouped);
DI_CPU_OP(gemm2_grouped);
DI_CPU_OP(swiglu_n);
DI_CPU_OP(index_select);
DI_CPU_OP(hc_sinkhorn_rows);
DI_CPU_OP(hc_scale_mixes);
DI_CPU_OP(hc_collapse);
DI_CPU_OP(hc_expand);
DI_CPU_OP(route_rows);
DI_CPU_OP(moe_dispatch);
DI_CPU_OP(moe_gather);
DI_CPU_OP(moe_combine);
DI_CPU_OP(ep_plan);
DI_CPU_OP(gather_rows_bf16);
DI_CPU_OP(moe_routed);
DI_CPU_OP(rmsnorm);
DI_CPU_OP(head_rmsnorm_bf16);
DI_CPU_OP(qat_fp8);
DI_CPU_OP(qat_fp4);
DI_CPU_OP(qat_fp4_e4m3);
DI_CPU_OP(hadamard128);
DI_CPU_OP(rope);
DI_CPU_OP(rope_tab);
DI_CPU_OP(embed);
DI_CPU_OP(embed_rep);
DI_CPU_OP(copy_2d);
DI_CPU_OP(fill_f32);
DI_CPU_OP(scatter_rows);
DI_CPU_OP(copy_h2d);
DI_CPU_OP(copy_d2h);
DI_CPU_OP(swiglu);

#undef DI_CPU_OP

#endif
