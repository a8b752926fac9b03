/* gtest_engram_hash.c — the Engram hash on the device (dic_engram_hash.cu, ops.h
 * di_engram_hash_rows; architecture.md §5.8):
 *   - the kernel's ids equal the host's di_engram_hash_ids bitwise on the random step streams of
 *     tests/ops/engram_hash_cases.h (chunked prefill longer than the class ring, several
 *     sequences per step, speculative rollbacks that write k rows and keep j < k), with the rings
 *     and every table in device memory;
 *   - through the engine on the golden v41-tiny-a with CUDA graphs on: greedy outputs equal the
 *     CPU engine's, and decode steps were queued behind the running one (the V4.1 forward reads
 *     its tokens on the device, model.h di_model_device_tokens);
 *   - speculative decoding on the demo model (fixed drafts of 5, and confidence-scheduled drafts)
 *     gives the outputs of speculation off. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/engine_util.h"
#include "engine_gpu_util.h"
#include "ops/cuda/dic_model.h"
#include "ops/cuda/gpu_util.h"
#include "ops/engram_hash_cases.h"

typedef struct gpu_rings {
    dic_ctx c;
    int32_t *ring[EHC_SEQS]; /* device */
    int32_t *dmap;
    int64_t *dconsts;
} gpu_rings;

static int gpu_step(void *ctx, const ehc_env *e, int M, const int32_t *tokens, const int64_t *pos, const int *row_seg,
                    const int64_t *seg_pos0, const int *seg_nrows, const int *seg_seq, int nseg, int64_t *ids) {
    gpu_rings *g = ctx;
    int32_t *ring[EHC_SEQS];
    for (int s = 0; s < nseg; s++) ring[s] = g->ring[seg_seq[s]];
    size_t per = (size_t)e->h.n_layers * (size_t)e->h.n_cols;
    int32_t *dtok = gt_to_dev(tokens, (size_t)M * 4);
    int64_t *dpos = gt_to_dev(pos, (size_t)M * 8), *dp0 = gt_to_dev(seg_pos0, (size_t)nseg * 8);
    int *dseg = gt_to_dev(row_seg, (size_t)M * 4), *dnr = gt_to_dev(seg_nrows, (size_t)nseg * 4);
    int32_t **dring = gt_to_dev(ring, (size_t)nseg * sizeof *ring);
    int64_t *dids = gt_dev_poison((size_t)M * per * 8);
    int ok = dtok && dpos && dp0 && dseg && dnr && dring && dids;
    if (ok)
        ok = dic_engram_hash_rows(&g->c, M, dtok, g->dmap, EHC_NIDS, g->dconsts, e->h.n_layers, e->h.max_ngram,
                                  e->h.n_heads, e->h.pad_class, dpos, dseg, dp0, dnr, dring, e->ring_len,
                                  dids) == cudaSuccess &&
             cudaStreamSynchronize(g->c.stream) == cudaSuccess;
    int64_t *h = ok ? gt_d2h(dids, (size_t)M * per * 8) : NULL;
    if (h) memcpy(ids, h, (size_t)M * per * 8);
    free(h);
    cudaFree(dtok), cudaFree(dpos), cudaFree(dp0), cudaFree(dseg), cudaFree(dnr), cudaFree(dring), cudaFree(dids);
    return h != NULL;
}

static void kernel_case(int max_draft, uint64_t seed) {
    ehc_env e;
    CHECK(ehc_env_init(&e, max_draft));
    gpu_rings g;
    memset(&g, 0, sizeof g);
    CHECK(gt_ctx(&g.c, 0));
    for (int q = 0; q < EHC_SEQS; q++) CHECK((g.ring[q] = gt_dev_poison((size_t)e.ring_len * 4)) != NULL);
    g.dmap = gt_to_dev(e.map, sizeof e.map);
    g.dconsts = gt_to_dev(e.consts, e.n_consts * 8);
    CHECK(g.dmap && g.dconsts);
    long rows = 0, bad = ehc_run(&e, seed, 400, gpu_step, &g, &rows);
    fprintf(stderr, "    engram hash kernel, max_draft %d: %ld rows, %ld ids differ from di_engram_hash_ids\n", max_draft,
            rows, bad);
    CHECK_MSG(bad == 0, "%ld ids of %ld rows differ from the host's", bad, rows);
    CHECK(rows > 1000);
    for (int q = 0; q < EHC_SEQS; q++) cudaFree(g.ring[q]);
    cudaFree(g.dmap), cudaFree(g.dconsts);
    cudaStreamDestroy(g.c.stream);
    ehc_env_free(&e);
}

TEST(gpu_engram_hash_kernel_equals_host) { kernel_case(5, 777); }
TEST(gpu_engram_hash_kernel_equals_host_draft13) { kernel_case(13, 4242); }

/* ---- through the engine ---- */

enum { NREQ = 6, MAXT = 40 };

static deepinfer_request_output **engine_run(const char *dir, int v41_hash, const char *acc, int nextn, int varlen,
                                             const deepinfer_prompt *pr, const deepinfer_sampling_params *sp,
                                             deepinfer_engine_stats *st) {
    eng_gpu_config g;
    eng_gpu_config_init(&g, dir, v41_hash, acc);
    g.c.max_num_seqs = NREQ;
    g.c.cuda_graphs = 1;
    g.c.nextn_decode = nextn;
    g.c.mtp_varlen = varlen;
    deepinfer_engine *e = eng_gpu_open(&g, dir);
    if (!e) return NULL;
    deepinfer_request_output **out = NULL;
    if (deepinfer_generate(e, pr, NREQ, sp, NREQ, &out)) {
        di_test_fail(__FILE__, __LINE__, "%s on %s: %s", dir, acc, deepinfer_engine_last_error(e));
        out = NULL;
    }
    deepinfer_engine_get_stats(e, st);
    deepinfer_engine_close(e);
    return out;
}

static void greedy_params(deepinfer_sampling_params *sp) {
    for (int i = 0; i < NREQ; i++) {
        deepinfer_sampling_params_init(&sp[i]);
        sp[i].max_tokens = MAXT;
        sp[i].ignore_eos = 1;
        sp[i].temperature = 0.0f;
    }
}

TEST(gpu_engram_hash_engine_v41_greedy_equals_cpu) {
    unsetenv("DEEPINFER_ACCELERATOR");
    unsetenv("DEEPINFER_BATCH_INVARIANT");
    static int32_t ids[NREQ * 64];
    deepinfer_prompt pr[NREQ];
    deepinfer_sampling_params sp[NREQ];
    uint32_t x = 99;
    for (int i = 0; i < NREQ; i++) {
        int len = 3 + 11 * i;
        for (int t = 0; t < len; t++) {
            x = x * 1664525u + 1013904223u;
            ids[i * 64 + t] = (int32_t)((x >> 10) % 1000u); /* below the golden V4.1's image token (1008) */
        }
        pr[i] = (deepinfer_prompt){.token_ids = ids + i * 64, .n_token_ids = (size_t)len};
    }
    greedy_params(sp);
    deepinfer_engine_stats sc, sg;
    deepinfer_request_output **cpu = engine_run("golden/v41-tiny-a", 1, "cpu", 0, 0, pr, sp, &sc); /* before CUDA */
    deepinfer_request_output **gpu = cpu ? engine_run("golden/v41-tiny-a", 1, "cuda", 0, 0, pr, sp, &sg) : NULL;
    if (!gpu) {
        if (cpu) deepinfer_outputs_free(cpu, NREQ);
        return;
    }
    int same = 1;
    for (int i = 0; i < NREQ; i++) same &= eng_same_output(cpu[i], gpu[i], i);
    fprintf(stderr, "    V4.1 greedy, graphs: %s the CPU engine; %lld steps, %lld recorded, %lld queued\n",
            same ? "equal to" : "DIFFERENT FROM", (long long)sg.steps, (long long)sg.graph_steps,
            (long long)sg.device_queued_steps);
    CHECK_MSG(same, "V4.1 on CUDA (device Engram hash) differs from the CPU engine");
    CHECK_MSG(sg.graph_steps > 0, "no step ran recorded");
    CHECK_MSG(sg.device_queued_steps > 0, "no V4.1 step was queued behind a running one (host tokens still needed?)");
    deepinfer_outputs_free(cpu, NREQ);
    deepinfer_outputs_free(gpu, NREQ);
}

TEST(gpu_engram_hash_engine_demo_spec_equals_off) {
    unsetenv("DEEPINFER_ACCELERATOR");
    unsetenv("DEEPINFER_BATCH_INVARIANT");
    static const char *texts[NREQ] = {"In the beginning God created", "And Jesus said unto them,",
                                      "The LORD is my shepherd;",     "And it came to pass",
                                      "Blessed are the meek:",        "For God so loved the world,"};
    deepinfer_prompt pr[NREQ];
    deepinfer_sampling_params sp[NREQ];
    for (int i = 0; i < NREQ; i++) pr[i] = (deepinfer_prompt){.text = texts[i]};
    greedy_params(sp);
    const char *demo = "../../models/deepinfer-demo-v41";
    deepinfer_engine_stats s0, s1, s2;
    deepinfer_request_output **off = engine_run(demo, 0, "cuda", 0, 0, pr, sp, &s0);
    deepinfer_request_output **fixed = off ? engine_run(demo, 0, "cuda", 5, 0, pr, sp, &s1) : NULL;
    deepinfer_request_output **var = fixed ? engine_run(demo, 0, "cuda", -1, 1, pr, sp, &s2) : NULL;
    if (var) {
        int same1 = 1, same2 = 1;
        for (int i = 0; i < NREQ; i++) same1 &= eng_same_output(off[i], fixed[i], i), same2 &= eng_same_output(off[i], var[i], i);
        fprintf(stderr, "    demo greedy: nextn 5 %s, varlen %s speculation off; %lld / %lld verify groups\n",
                same1 ? "==" : "!=", same2 ? "==" : "!=", (long long)s1.spec_steps, (long long)s2.spec_steps);
        CHECK_MSG(same1 && same2, "speculation changed the demo model's outputs");
        CHECK_MSG(s1.spec_steps > 0, "no draft was verified with nextn 5");
        CHECK_MSG(s0.device_queued_steps > 0, "demo: no step was queued behind a running one");
    }
    if (off) deepinfer_outputs_free(off, NREQ);
    if (fixed) deepinfer_outputs_free(fixed, NREQ);
    if (var) deepinfer_outputs_free(var, NREQ);
}
