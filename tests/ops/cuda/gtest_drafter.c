/* gtest_drafter.c — the engine's drafter step (model.h di_model_draft_step) on the CUDA backend
 * against the CPU backend in the same process, on golden/v41-tiny-a and the demo model (V4.1
 * DSpark) and golden/v4-tiny-a (V4 MTP chain). Each run prefills the golden prompt, then STEPS
 * steps of a fixed token sequence (the prompt, then the golden's decode inputs): the target
 * processes the next token, the drafter is fed the new position (the first step: the whole
 * prompt) and drafts a full block from it, for two requests (A drafts, Z only feeds; in one call
 * on even steps, in two calls on odd ones: gathered and direct hidden rows).
 *  - greedy (pick NULL: the device argmax path): the GPU's drafts equal the CPU's, each block up
 *    to a draft where the CPU's top-2 margin is below TIE (there the backends may choose
 *    otherwise, and the rest of that block follows another input);
 *  - a pick forcing the CPU's drafts (the host-logits path): every GPU argmax equals the CPU's
 *    where the CPU's margin is >= TIE, and (DSpark) every confidence logit is within CONF_TOL = 0.1 of the CPU's
 *    (it moves σ by at most 0.025; confidences only decide which drafts are verified);
 *  - on the GPU, A's drafter rings equal Z's bit for bit after every step (MTP: the chain's
 *    slots restored on the device);
 *  - DSpark greedy steps that leave their drafts in backend memory without waiting (draft.h
 *    dev_ids, the engine's pipelined order), eager and recorded, draft the eager host-id steps'
 *    ids and confidences bit for bit.
 * TIE = 0.25: gtest_forward.c's bound on V4's max |logit diff| GPU vs CPU, for every case (the
 * counts of drafts that part at near ties are printed). */
#include <cuda_runtime_api.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "golden/golden_util.h"
#include "model/model.h"
#include "ops/backend.h"
#include "util/file.h"

#define STEPS 10
#define MAXB 16
#define TIE 0.25
#define CONF_TOL 0.1

typedef struct dcase {
    const char *model_dir;  /* checkpoint (test data relative) */
    const char *man_path;   /* manifest */
    const char *hash_dir;   /* V4.1 golden: the Engram hash from its manifest; NULL: the model's */
    const char *decode_key; /* the manifest's decode input tokens */
} dcase;

typedef struct drun {
    int block, V;
    int32_t ids[STEPS * MAXB];
    float conf[STEPS * MAXB];
    int32_t am[STEPS * MAXB];    /* the argmax each pick saw */
    float margin[STEPS * MAXB];  /* its top-1 minus top-2 logit */
    int rings_equal;             /* A's drafter rings == Z's after every step */
    int64_t replayed;            /* recorded runs: drafter steps that replayed a graph */
} drun;

typedef struct pick_ctx {
    drun *out;
    int step;
    const int32_t *force; /* [STEPS][block] or NULL: return the argmax */
} pick_ctx;

static int32_t pick_cb(void *p, int req, int i, const float *logits) {
    pick_ctx *c = p;
    int V = c->out->V;
    int32_t a = golden_argmax(logits, V);
    if (req == 0) {
        size_t o = (size_t)c->step * c->out->block + i;
        c->out->am[o] = a;
        c->out->margin[o] = (float)golden_margin(logits, V);
        if (c->force) return c->force[o];
    }
    return a;
}

static int read_manifest(const dcase *dc, di_json_doc **man) {
    char path[4096], *buf = NULL;
    size_t len = 0;
    snprintf(path, sizeof path, "%s", di_test_data(dc->man_path));
    int ok = !di_read_file(path, 0, &buf, &len, NULL) && !di_json_parse(buf, len, NULL, man, NULL);
    free(buf);
    return ok;
}

/* Host copy of a drafter ring (backend memory of either kind: unified addressing). */
static int ring_equal(const di_model_config *c, const di_seq_state *a, const di_seq_state *b) {
    size_t n = (size_t)c->sliding_window * c->head_dim * 2;
    uint16_t *x = malloc(n), *y = malloc(n);
    int eq = x && y;
    for (int l = c->n_layers; eq && l < c->n_layers + c->n_stages; l++) {
        eq = cudaMemcpy(x, a->layers[l].ring, n, cudaMemcpyDefault) == cudaSuccess &&
             cudaMemcpy(y, b->layers[l].ring, n, cudaMemcpyDefault) == cudaSuccess && !memcmp(x, y, n);
    }
    free(x), free(y);
    return eq;
}

/* One run on backend k: greedy (force NULL, argmax_pick 0), a pick returning the argmax
 * (argmax_pick 1), or a pick forcing `force`. record (CUDA, greedy): the model's exec gets a step
 * plan and the steps ask for recorded drafter steps (draft.h record), their hidden rows staged
 * into fixed rows (the recorded shape names the rows it reads) so that shapes repeat and replay;
 * out->replayed counts the replays. dev_out (CUDA, greedy, DSpark): the drafts and confidences are
 * left in a backend buffer (draft.h dev_ids) and read from there after the step. */
static int run_mode(const dcase *dc, di_backend_kind k, int argmax_pick, const int32_t *force, int record, int dev_out,
                    drun *out) {
    di_error err = {0};
    memset(out, 0, sizeof *out);
    if (di_backend_use(k, &err)) {
        di_test_fail(__FILE__, __LINE__, "backend %s: %s", di_backend_name(k), err.msg);
        return 0;
    }
    di_json_doc *man = NULL;
    int N = 0, nd = 0;
    int32_t *prompt = NULL, *in = NULL, *tok = NULL;
    di_model *m = NULL;
    di_seq_state *seq[2] = {0};
    uint16_t *hid[2] = {0}, *fix = NULL;
    int32_t *dev = NULL;
    deepinfer_status st = DEEPINFER_ERR_INVALID_ARGUMENT;
    if (!read_manifest(dc, &man)) goto done;
    prompt = golden_ints(man->root, "prompt_token_ids", NULL, &N);
    in = golden_ints(man->root, dc->decode_key, "input_tokens", &nd);
    if (!prompt || !in || nd < STEPS + 1) goto done;
    tok = malloc(sizeof(int32_t) * (size_t)(N + nd));
    memcpy(tok, prompt, sizeof(int32_t) * (size_t)N);
    memcpy(tok + N, in, sizeof(int32_t) * (size_t)nd);
    char hash[4096];
    if (dc->hash_dir) snprintf(hash, sizeof hash, "%s/expected/manifest.json", di_test_data(dc->hash_dir));
    di_model_options o = {.engram_hash = dc->hash_dir ? hash : NULL};
    if ((st = di_model_load(di_test_data(dc->model_dir), &o, &m, &err))) goto done;
    const di_model_config *c = di_model_cfg(m);
    out->block = di_model_draft_block(m);
    out->V = (int)c->vocab_size;
    size_t elems = di_model_draft_hidden_elems(m);
    int cap = N + STEPS + 1;
    st = DEEPINFER_ERR_INVALID_ARGUMENT;
    if (out->block < 1 || out->block > MAXB) goto done;
    for (int q = 0; q < 2; q++) {
        if ((st = di_seq_create(c, cap + MAXB, &seq[q], &err))) goto done;
        if (!(hid[q] = di_dev_alloc((size_t)cap * elems * 2))) {
            st = di_error_set(&err, DEEPINFER_ERR_OUT_OF_MEMORY, "hidden rows");
            goto done;
        }
    }
    if (record) {
        di_backend_plan_stats ps = {0};
        if ((st = di_backend_plan_enable(di_model_exec(m), cap + MAXB, 0, &err))) goto done;
        if (!(fix = di_dev_alloc((size_t)2 * cap * elems * 2))) {
            st = di_error_set(&err, DEEPINFER_ERR_OUT_OF_MEMORY, "staged hidden rows");
            goto done;
        }
        out->replayed = di_backend_plan_stats_get(di_model_exec(m), &ps) ? 0 : -ps.replayed;
    }
    if (dev_out && !(dev = di_dev_alloc(sizeof(int32_t) * 2 * MAXB))) {
        st = di_error_set(&err, DEEPINFER_ERR_OUT_OF_MEMORY, "draft output buffer");
        goto done;
    }
    out->rings_equal = 1;
    int64_t pos[1024];
    di_seq_state *rs[1024];
    int32_t ids[2 * MAXB];
    float conf[2 * MAXB];
    for (int s = 0; s < STEPS && !st; s++) {
        /* the target: the prompt, then one token a step */
        int n = s ? 1 : N;
        for (int q = 0; q < 2 && !st; q++) {
            int64_t p0 = seq[q]->n_tokens;
            for (int i = 0; i < n; i++) pos[i] = p0 + i, rs[i] = seq[q];
            di_model_batch b = {.n = n, .tokens = tok + p0, .pos = pos, .seq = rs};
            di_model_batch_set_draft_hidden(m, &b, hid[q] + (size_t)p0 * elems);
            st = di_model_forward(m, &b, &err);
        }
        if (st) break;
        int64_t q0 = seq[0]->mtp_tokens;
        int nf[2] = {n, n}, kk[2] = {out->block, 0};
        const uint16_t *h[2] = {hid[0] + (size_t)q0 * elems, hid[1] + (size_t)q0 * elems};
        if (record) /* A's rows at row 0 of `fix`, Z's at row cap: the same rows every step */
            for (int q = 0; q < 2; q++) {
                uint16_t *dst = fix + (size_t)q * cap * elems;
                di_copy_2d(di_model_exec(m), n, h[q], elems * 2, dst, elems * 2, elems * 2);
                h[q] = dst;
            }
        const int32_t *next[2] = {tok + q0 + 1, tok + q0 + 1};
        pick_ctx pc = {.out = out, .step = s, .force = force};
        int picked = argmax_pick || force;
        di_model_draft d = {.n = 2, .seq = seq, .n_feed = nf, .hidden = h, .next = next, .k = kk,
                            .pick = picked ? pick_cb : NULL, .pick_ctx = &pc, .ids = ids, .confidence = conf,
                            .record = record, .dev_ids = dev, .dev_conf = dev ? (float *)(void *)(dev + MAXB) : NULL};
        if (s % 2 == 0) {
            st = di_model_draft_step(m, &d, &err);
        } else { /* the requests one call each */
            di_model_draft da = d, dz = d;
            da.n = dz.n = 1;
            dz.seq = seq + 1, dz.n_feed = nf + 1, dz.hidden = h + 1, dz.next = next + 1, dz.k = kk + 1;
            dz.ids = ids + out->block, dz.confidence = conf + out->block;
            st = di_model_draft_step(m, &da, &err);
            if (!st) st = di_model_draft_step(m, &dz, &err);
        }
        if (!st && dev) { /* only A drafts: the first drafting request, row 0 of the buffer */
            if ((st = di_exec_sync(di_model_exec(m), &err))) break;
            if (cudaMemcpy(ids, dev, sizeof(int32_t) * (size_t)out->block, cudaMemcpyDeviceToHost) != cudaSuccess ||
                cudaMemcpy(conf, dev + MAXB, sizeof(float) * (size_t)out->block, cudaMemcpyDeviceToHost) != cudaSuccess) {
                st = di_error_set(&err, DEEPINFER_ERR_INTERNAL, "draft output copy");
                break;
            }
        }
        memcpy(out->ids + (size_t)s * out->block, ids, sizeof(int32_t) * (size_t)out->block);
        memcpy(out->conf + (size_t)s * out->block, conf, sizeof(float) * (size_t)out->block);
        if (!st && (seq[0]->mtp_tokens != seq[0]->n_tokens || seq[1]->mtp_tokens != seq[1]->n_tokens))
            st = di_error_set(&err, DEEPINFER_ERR_INVALID_ARGUMENT, "step %d: mtp_tokens does not follow n_tokens", s);
        if (!st && k == DI_BACKEND_CUDA && !ring_equal(c, seq[0], seq[1])) out->rings_equal = 0;
    }
    if (!st && record) {
        di_backend_plan_stats ps = {0};
        if (!di_backend_plan_stats_get(di_model_exec(m), &ps)) out->replayed += ps.replayed;
        di_backend_plan_disable(di_model_exec(m));
    }
done:
    di_dev_free(fix);
    di_dev_free(dev);
    for (int q = 0; q < 2; q++) {
        di_seq_destroy(seq[q]);
        di_dev_free(hid[q]);
    }
    di_model_free(m);
    di_backend_use(DI_BACKEND_CPU, NULL);
    free(prompt), free(in), free(tok);
    di_json_free(man);
    if (st) di_test_fail(__FILE__, __LINE__, "%s on %s: %s", dc->model_dir, di_backend_name(k), err.msg[0] ? err.msg : "setup");
    return !st;
}

static int run(const dcase *dc, di_backend_kind k, int argmax_pick, const int32_t *force, drun *out) {
    return run_mode(dc, k, argmax_pick, force, 0, 0, out);
}

/* Recorded greedy drafter steps (DSpark on the CUDA backend) against eager ones: the same draft
 * ids and confidences bit for bit, the same rings, and shapes that replayed. */
static void run_recorded(const dcase *dc) {
    static drun eager, rec;
    CHECK(run_mode(dc, DI_BACKEND_CUDA, 0, NULL, 0, 0, &eager));
    CHECK(run_mode(dc, DI_BACKEND_CUDA, 0, NULL, 1, 0, &rec));
    size_t total = (size_t)STEPS * (size_t)eager.block;
    int diff = -1;
    for (size_t o = 0; o < total && diff < 0; o++)
        if (eager.ids[o] != rec.ids[o] || memcmp(&eager.conf[o], &rec.conf[o], sizeof(float))) diff = (int)o;
    fprintf(stderr, "    %s: recorded drafter steps: %lld replays, drafts and confidences %s\n", dc->model_dir,
            (long long)rec.replayed, diff < 0 ? "identical to eager" : "DIFFERENT");
    if (diff >= 0)
        fprintf(stderr, "    first difference: step %d draft %d: recorded %d (%.6f), eager %d (%.6f)\n",
                diff / eager.block, diff % eager.block, rec.ids[diff], (double)rec.conf[diff], eager.ids[diff],
                (double)eager.conf[diff]);
    CHECK_MSG(diff < 0, "%s: recorded drafter steps draft otherwise than eager ones", dc->model_dir);
    CHECK_MSG(rec.rings_equal, "%s: recorded drafter steps changed the drafter rings", dc->model_dir);
    /* steps 1 .. STEPS-1 repeat three shapes (odd: A alone, Z alone; even: both), each captured once */
    CHECK_MSG(rec.replayed >= STEPS - 4, "%s: %lld replays of recorded drafter steps, at least %d expected",
              dc->model_dir, (long long)rec.replayed, STEPS - 4);
}

/* Greedy DSpark steps with their drafts left in backend memory (draft.h dev_ids), eager and recorded,
 * against eager steps that return host ids: the same drafts and confidences bit for bit. */
static void run_dev_out(const dcase *dc) {
    static drun host, dev, dev_rec;
    CHECK(run_mode(dc, DI_BACKEND_CUDA, 0, NULL, 0, 0, &host));
    CHECK(run_mode(dc, DI_BACKEND_CUDA, 0, NULL, 0, 1, &dev));
    CHECK(run_mode(dc, DI_BACKEND_CUDA, 0, NULL, 1, 1, &dev_rec));
    size_t total = (size_t)STEPS * (size_t)host.block;
    const drun *runs[2] = {&dev, &dev_rec};
    for (int r = 0; r < 2; r++) {
        int diff = -1;
        for (size_t o = 0; o < total && diff < 0; o++)
            if (host.ids[o] != runs[r]->ids[o] || memcmp(&host.conf[o], &runs[r]->conf[o], sizeof(float))) diff = (int)o;
        fprintf(stderr, "    %s: drafts left on the device (%s): %s\n", dc->model_dir, r ? "recorded" : "eager",
                diff < 0 ? "identical to host ids" : "DIFFERENT");
        CHECK_MSG(diff < 0, "%s: drafts left on the device (%s) differ at step %d draft %d", dc->model_dir,
                  r ? "recorded" : "eager", diff / host.block, diff % host.block);
        CHECK(runs[r]->rings_equal);
    }
    CHECK_MSG(dev_rec.replayed >= STEPS - 4, "%s: %lld replays of recorded drafter steps with device drafts",
              dc->model_dir, (long long)dev_rec.replayed);
}

static void run_case(const dcase *dc) {
    static drun cpu, cpu_pick, gpu, gpu_forced;
    CHECK(run(dc, DI_BACKEND_CPU, 0, NULL, &cpu));
    CHECK(run(dc, DI_BACKEND_CPU, 1, NULL, &cpu_pick));
    CHECK(run(dc, DI_BACKEND_CUDA, 0, NULL, &gpu));
    CHECK(run(dc, DI_BACKEND_CUDA, 0, cpu.ids, &gpu_forced));
    int B = cpu.block, total = STEPS * B;
    CHECK(gpu.block == B && gpu_forced.block == B);
    CHECK_MSG(!memcmp(cpu.ids, cpu_pick.ids, sizeof(int32_t) * (size_t)total), "CPU: the argmax pick differs from greedy");
    CHECK_MSG(!memcmp(cpu_pick.am, cpu.ids, sizeof(int32_t) * (size_t)total), "CPU: the pick saw other logits");
    /* greedy: each block equal up to a CPU near tie */
    int equal = 0, ties = 0, bad = 0, cbad = 0;
    double cmax = 0;
    for (int s = 0; s < STEPS; s++)
        for (int i = 0; i < B; i++) {
            size_t o = (size_t)s * B + i;
            if (gpu.ids[o] != cpu.ids[o]) {
                if (cpu_pick.margin[o] < TIE) ties++;
                else if (!bad++)
                    fprintf(stderr, "    step %d draft %d: GPU %d, CPU %d (CPU margin %.3f)\n", s, i, gpu.ids[o], cpu.ids[o],
                            cpu_pick.margin[o]);
                break; /* the rest of the block follows another Markov / chain input */
            }
            equal++;
            if (!isnan(cpu.conf[o])) cmax = fmax(cmax, fabs((double)gpu.conf[o] - cpu.conf[o]));
        }
    /* forced to the CPU's drafts: every argmax, every confidence */
    int fbad = 0, fties = 0;
    double fcmax = 0;
    for (int o = 0; o < total; o++) {
        if (gpu_forced.am[o] != cpu.ids[o]) {
            if (cpu_pick.margin[o] < TIE) fties++;
            else fbad++;
        }
        if (isnan(cpu.conf[o]) != isnan(gpu_forced.conf[o])) cbad++;
        else if (!isnan(cpu.conf[o])) fcmax = fmax(fcmax, fabs((double)gpu_forced.conf[o] - cpu.conf[o]));
    }
    fprintf(stderr,
            "    %s: %d steps x %d drafts; greedy: %d equal, %d blocks part at CPU near ties, %d elsewhere; "
            "confidence max |d| %.4f; forced: %d argmax differ at near ties, %d elsewhere, confidence max |d| %.4f; "
            "rings A == Z on the GPU: %s\n",
            dc->model_dir, STEPS, B, equal, ties, bad, cmax, fties, fbad, fcmax, gpu.rings_equal && gpu_forced.rings_equal ? "yes" : "NO");
    CHECK_MSG(bad == 0 && fbad == 0, "%s: GPU drafts differ where the CPU is firm", dc->model_dir);
    CHECK_MSG(cbad == 0 && cmax <= CONF_TOL && fcmax <= CONF_TOL, "%s: confidences differ (max %.4f / %.4f)", dc->model_dir,
              cmax, fcmax);
    CHECK_MSG(gpu.rings_equal && gpu_forced.rings_equal, "%s: drafting changed the drafter rings on the GPU", dc->model_dir);
}

TEST(gpu_drafter_dspark_golden_v41) {
    dcase dc = {"golden/v41-tiny-a", "golden/v41-tiny-a/expected/manifest.json", "golden/v41-tiny-a", "decode_fixed"};
    run_case(&dc);
}

TEST(gpu_drafter_dspark_demo) {
    dcase dc = {"../../models/deepinfer-demo-v41", "demo/manifest.json", NULL, "decode"};
    run_case(&dc);
}

TEST(gpu_drafter_dspark_recorded_golden_v41) {
    dcase dc = {"golden/v41-tiny-a", "golden/v41-tiny-a/expected/manifest.json", "golden/v41-tiny-a", "decode_fixed"};
    run_recorded(&dc);
}

TEST(gpu_drafter_dspark_recorded_demo) {
    dcase dc = {"../../models/deepinfer-demo-v41", "demo/manifest.json", NULL, "decode"};
    run_recorded(&dc);
}

TEST(gpu_drafter_mtp_v4) {
    dcase dc = {"golden/v4-tiny-a", "golden/v4-tiny-a/expected/manifest.json", NULL, "decode"};
    run_case(&dc);
}

TEST(gpu_drafter_dspark_dev_out_golden_v41) {
    dcase dc = {"golden/v41-tiny-a", "golden/v41-tiny-a/expected/manifest.json", "golden/v41-tiny-a", "decode_fixed"};
    run_dev_out(&dc);
}

TEST(gpu_drafter_dspark_dev_out_demo) {
    dcase dc = {"../../models/deepinfer-demo-v41", "demo/manifest.json", NULL, "decode"};
    run_dev_out(&dc);
}
