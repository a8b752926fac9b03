/* bench_table.c — the tables of `deepinfer bench --dummy` (bench_table.h). */
#include "bench_table.h"

#include <stdio.h>

#include "model/dsv41_compact.h"

void bench_print_table(const bench_dummy_args *a, const di_model_config *c, const bench_costs *k, double bw,
                       double rate, double rate_fast, int64_t keep, int cuda, int gr_host_ids, const bench_figs *f,
                       const char *mode) {
    if (mode) printf("# mode: %s (--modes: both modes measured in this process on the same model)\n", mode);
    printf("# deepinfer bench --dummy %s --layers %d --backend %s (%s, hidden %lld, %lld experts, top-%lld)\n",
           a->config, a->layers, a->backend, di_arch_name(c->arch), (long long)c->hidden_size,
           (long long)c->n_routed_experts, (long long)c->num_experts_per_tok);
    if (cuda)
        printf("# ceilings: copy %.0f GB/s (2 GiB cudaMemcpy D2D, read + written); FP8 %.1f TFLOP/s (dic_gemm 8192^3, "
               "batch-invariant kernels as in the forward; fastest path %.1f)\n", bw, rate, rate_fast);
    else
        printf("# ceilings: read bandwidth %.1f GB/s (3 x 128 MiB, all threads); no FP8 rate on the CPU\n", bw);
    printf("%-28s %14s %14s %14s %8s %9s\n", "figure", "measured", "floor", "work", "ratio", "GPU idle");
    for (int i = 0; i < a->np; i++) {
        int64_t L = a->prefill[i];
        double fl = (k->linear_flops * (double)L + bench_attn_flops(c, L) + k->head_flops);
        double floor_s = rate > 0 ? fl / (rate * 1e12) : -1;
        char fig[40], meas[32], flo[32], work[32];
        snprintf(fig, sizeof fig, "prefill %lld", (long long)L);
        snprintf(meas, sizeof meas, "%.0f tok/s", (double)L / f->pf_s[i]);
        if (floor_s > 0) snprintf(flo, sizeof flo, "%.0f tok/s", (double)L / floor_s);
        else snprintf(flo, sizeof flo, "n/a");
        snprintf(work, sizeof work, "%.2f TFLOP", fl / 1e12);
        char ratio[16] = "-";
        if (floor_s > 0) snprintf(ratio, sizeof ratio, "%.3f", floor_s / f->pf_s[i]);
        printf("%-28s %14s %14s %14s %8s %9s\n", fig, meas, flo, work, ratio, "-");
        if (!keep) continue;
        snprintf(fig, sizeof fig, "prefill %lld compact", (long long)L);
        snprintf(meas, sizeof meas, "%.0f tok/s", (double)L / f->pfc_s[i]);
        snprintf(ratio, sizeof ratio, "%.2fx", f->pf_s[i] / f->pfc_s[i]);
        printf("%-28s %14s %14s %14s %8s %9s\n", fig, meas, "-", "-", ratio, "-");
    }
    if (keep)
        printf("# compact: layers %d..%d on each prompt's last %lld tokens (--yoco-keep-tokens; architecture.md 6.5); "
               "its ratio = compact tokens/s over exact tokens/s, same run\n",
               di_v41_late_layer(c), (int)c->n_layers - 1, (long long)keep);
    for (int ci = 0; ci < a->nprompt; ci++) {
        const int P = a->prompts[ci];
        for (int i = 0; i < a->nb; i++) {
            int B = a->batches[i];
            double bytes = bench_decode_bytes(c, k, B, P);
            double floor_s = bytes / (bw * 1e9);
            char fig[40], meas[32], flo[32], work[32];
            snprintf(fig, sizeof fig, "decode b%d ctx %d", B, P);
            snprintf(meas, sizeof meas, "%.2f ms %.0f t/s", f->dec_s[ci][i] * 1e3, B / f->dec_s[ci][i]);
            snprintf(flo, sizeof flo, "%.2f ms", floor_s * 1e3);
            snprintf(work, sizeof work, "%.2f GB", bytes / 1e9);
            printf("%-28s %14s %14s %14s %8.3f %9s\n", fig, meas, flo, work, floor_s / f->dec_s[ci][i], "-");
            if (!cuda) continue;
            snprintf(fig, sizeof fig, "decode b%d ctx %d (graph)", B, P);
            if (f->gr_why[ci][i][0]) {
                printf("%-28s not measured: %s\n", fig, f->gr_why[ci][i]);
                continue;
            }
            char idle[16];
            snprintf(meas, sizeof meas, "%.2f ms %.0f t/s", f->gr_s[ci][i] * 1e3, B / f->gr_s[ci][i]);
            snprintf(idle, sizeof idle, "%.1f%%", f->gr_idle[ci][i]);
            printf("%-28s %14s %14s %14s %8.3f %9s\n", fig, meas, flo, work, floor_s / f->gr_s[ci][i], idle);
        }
    }
    printf("# ratio = floor time / measured time (1 = at the ceiling). decode work = dense weights + head + expected "
           "distinct experts E(1-(1-k/E)^B) per layer + per-sequence state and rows; prefill work = linear + "
           "attention + head FLOPs\n");
    if (cuda)
        printf("# (graph): di_greedy_loop_run, step plan + one CUDA graph per batch size, greedy tokens by the device "
               "argmax%s; ms/step = GPU time of %d replayed steps (capture step excluded) incl. gaps; GPU idle = "
               "share of that time between steps\n",
               gr_host_ids ? ", ids read back to the host every step (host Engram hash / image token)" : "",
               a->decode);
}

/* one --modes row: both times (ms for decode, tok/s for prefill) and their ratio */
static void mode_row(const char *fig, double inv_s, double fast_s, int prefill_len) {
    char ai[32], af[32];
    if (prefill_len) {
        snprintf(ai, sizeof ai, "%.0f tok/s", prefill_len / inv_s);
        snprintf(af, sizeof af, "%.0f tok/s", prefill_len / fast_s);
    } else {
        snprintf(ai, sizeof ai, "%.2f ms", inv_s * 1e3);
        snprintf(af, sizeof af, "%.2f ms", fast_s * 1e3);
    }
    printf("%-28s %14s %14s %10.2f\n", fig, ai, af, inv_s / fast_s);
}

void bench_print_modes(const bench_dummy_args *a, int64_t keep, int cuda, const bench_figs f[2]) {
    printf("# --modes: batch-invariant (default) vs fast (DEEPINFER_BATCH_INVARIANT=0) on the same loaded model, "
           "same process; ratio = invariant time / fast time\n");
    printf("%-28s %14s %14s %10s\n", "figure", "invariant", "fast", "inv/fast");
    char fig[48];
    for (int i = 0; i < a->np; i++) {
        snprintf(fig, sizeof fig, "prefill %d", a->prefill[i]);
        mode_row(fig, f[0].pf_s[i], f[1].pf_s[i], a->prefill[i]);
        if (!keep) continue;
        snprintf(fig, sizeof fig, "prefill %d compact", a->prefill[i]);
        mode_row(fig, f[0].pfc_s[i], f[1].pfc_s[i], a->prefill[i]);
    }
    for (int ci = 0; ci < a->nprompt; ci++)
        for (int i = 0; i < a->nb; i++) {
            snprintf(fig, sizeof fig, "decode b%d ctx %d", a->batches[i], a->prompts[ci]);
            mode_row(fig, f[0].dec_s[ci][i], f[1].dec_s[ci][i], 0);
            if (!cuda) continue;
            snprintf(fig, sizeof fig, "decode b%d ctx %d (graph)", a->batches[i], a->prompts[ci]);
            if (f[0].gr_why[ci][i][0] || f[1].gr_why[ci][i][0])
                printf("%-28s not measured in %s mode\n", fig, f[0].gr_why[ci][i][0] ? "batch-invariant" : "fast");
            else
                mode_row(fig, f[0].gr_s[ci][i], f[1].gr_s[ci][i], 0);
        }
}
