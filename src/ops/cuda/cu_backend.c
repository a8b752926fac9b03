/* cu_backend.c — the CUDA backend's table (ops/backend.h di_device_backend),
 * registered before main by the constructor below: linking the CUDA glue
 * objects into a binary is what makes CUDA available to it; the CPU-only
 * library never refers to a CUDA symbol. */
#include "ops/backend.h"
#include "ops/cuda/cu_glue.h"
#include "ops/cuda/cu_step.h"

/* src/ops/cuda/cuda_probe.cu */
int di_cuda_probe(int *count, char *name, size_t name_len, int *cc_major, int *cc_minor, size_t *total_mem, char *why,
                  size_t why_len);

/* src/ops/cuda/cu_comm.c */
deepinfer_status di_cuda_comm_one(struct di_comm **out, di_error *err);
__typeof__(di_backend_comm_rank) di_cuda_comm_rank;
__typeof__(di_backend_comm_loopback_dev) di_cuda_comm_loopback_dev;

static int plan_stats(const di_exec *x, di_backend_plan_stats *out) {
    return di_cuda_plan_stats(x, &out->graphs, &out->recorded, &out->replayed, &out->last_bytes, &out->cap_bytes);
}

static const di_device_backend CUDA_BACKEND = {
    .name = "cuda",
    .probe = di_cuda_probe,
    .install = di_cuda_backend_install,
    .uninstall = di_cuda_backend_uninstall,
    .set_batch_invariant = di_cuda_set_batch_invariant,
    .set_batch_invariant_live = di_cuda_set_batch_invariant_live,
    .plan_enable = di_cuda_plan_enable,
    .plan_disable = di_cuda_plan_disable,
    .step_begin = di_cuda_step_begin,
    .step_end = di_cuda_step_end,
    .step_abort = di_cuda_step_abort,
    .plan_stats = plan_stats,
    .step_mark = di_cuda_mark,
    .step_times = di_cuda_step_times,
    .argmax_fuse = di_cuda_argmax_fuse,
    .argmax_rest = di_cuda_argmax_rest,
    .dq_new = di_cuda_dq_new,
    .dq_free = di_cuda_dq_free,
    .dq_begin = di_cuda_dq_begin,
    .dq_feed = di_cuda_dq_feed,
    .dq_sample = di_cuda_dq_sample,
    .dq_end = di_cuda_dq_end,
    .dq_finish = di_cuda_dq_finish,
    .copy_gbs = di_cuda_copy_gbs,
    .fp8_tflops = di_cuda_fp8_tflops,
    .mem_info = di_cuda_mem_info,
    .comm_one = di_cuda_comm_one,
    .rank_bind = di_cuda_rank_bind,
    .rank_unbind = di_cuda_rank_unbind,
    .comm_rank = di_cuda_comm_rank,
    .comm_loopback_dev = di_cuda_comm_loopback_dev,
};

__attribute__((constructor)) static void register_cuda(void) { di_backend_register(&CUDA_BACKEND); }
