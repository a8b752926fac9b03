/*
 * MoE expert parallelism on the CUDA backend over the NCCL communicator
 * (src/model/moe_ep.h, src/parallel/nccl.c): each rank is a process of its
 * own with one GPU (CUDA_VISIBLE_DEVICES set to its device before CUDA
 * starts), loading v4-tiny-a / v41-tiny-a with only its routed experts. A
 * prefill of NTOK tokens (every row's logits) and DEC greedy decode steps:
 *  - one GPU: the EP path over an NCCL communicator of one rank (every
 *    expert resident, selections read back, the exchange through NCCL) gives
 *    bitwise the logits of the model without EP (batch-invariant mode, the
 *    default);
 *  - two GPUs and more (when visible): --ep 2 on two processes, every rank's
 *    logits bitwise those of the model without EP.
 * Needs libnccl.so.2 (SKIP otherwise, with the reason). The processes are
 * forked before this process starts CUDA (the test runs in its own forked
 * process, tests/runner.c); results come back through pipes.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cuda_runtime_api.h>
#include <sys/wait.h>
#include <unistd.h>

#include "model/dsv41_internal.h"
#include "model/dsv4_internal.h"
#include "ops/backend.h"
#include "parallel/comm.h"
#include "test.h"

#define NTOK 12
#define DEC 3
#define MAXR 8

typedef struct ep_case {
    int v41;
    const char *dir;
} ep_case;

static int sync_stream(void *ctx, void *stream) {
    (void)ctx;
    return cudaStreamSynchronize((cudaStream_t)stream) != cudaSuccess;
}

/* Write / read all of n bytes (pipes). */
static int put(int fd, const void *p, size_t n) {
    const char *c = p;
    while (n) {
        ssize_t k = write(fd, c, n);
        if (k <= 0) return 0;
        c += k, n -= (size_t)k;
    }
    return 1;
}
static int get(int fd, void *p, size_t n) {
    char *c = p;
    while (n) {
        ssize_t k = read(fd, c, n);
        if (k <= 0) return 0;
        c += k, n -= (size_t)k;
    }
    return 1;
}

/* The r-th visible device for a child about to start CUDA. */
static void pick_device(int r) {
    const char *v = getenv("CUDA_VISIBLE_DEVICES");
    char buf[64];
    if (v && *v) {
        const char *p = v;
        for (int i = 0; i < r && p; i++) p = strchr(p, ','), p = p ? p + 1 : NULL;
        size_t n = p ? strcspn(p, ",") : 0;
        snprintf(buf, sizeof buf, "%.*s", (int)n, p ? p : "");
    } else {
        snprintf(buf, sizeof buf, "%d", r);
    }
    setenv("CUDA_VISIBLE_DEVICES", buf, 1);
}

/* Load the case (rank `rank` of `size` over comm; comm NULL: no EP), prefill NTOK tokens with every
 * row's logits, then DEC greedy steps; out: (NTOK + DEC) * V logits. */
static deepinfer_status run_model(const ep_case *k, int rank, int size, di_comm *comm, float **out, size_t *nout,
                                  di_error *err) {
    char hash[4096];
    snprintf(hash, sizeof hash, "%s/expected/manifest.json", di_test_data(k->dir));
    di_v4_options o = {.engram_hash = k->v41 ? hash : NULL, .max_rows = 64, .max_context = 256, .ep_rank = rank,
                       .ep_size = size, .comm = comm};
    void *m = NULL;
    deepinfer_status st = k->v41 ? di_v41_load(di_test_data(k->dir), &o, (di_v41_model **)&m, err)
                                 : di_v4_load(di_test_data(k->dir), &o, (di_v4_model **)&m, err);
    if (st) return st;
    const di_model_config *c = k->v41 ? di_v41_config(m) : di_v4_config(m);
    size_t V = (size_t)c->vocab_size;
    di_seq_state *seq = NULL;
    st = k->v41 ? di_v41_seq_new(m, &seq, err) : di_v4_seq_new(m, &seq, err);
    float *lg = calloc((size_t)(NTOK + DEC) * V, sizeof(float));
    int32_t tok[NTOK];
    int64_t pos[NTOK];
    int rows[NTOK];
    di_seq_state *rs[NTOK];
    if (!st && !lg) st = di_error_set(err, DEEPINFER_ERR_OUT_OF_MEMORY, "out of memory");
    for (int i = 0; i < NTOK; i++)
        tok[i] = (int32_t)((i * 7919 + 13) % (int)(c->vocab_size - 8)) + 3, pos[i] = i, rows[i] = i, rs[i] = seq;
    for (int step = 0; !st && step <= DEC; step++) {
        int n = step ? 1 : NTOK;
        if (step) { /* greedy: the previous row's argmax */
            const float *p = lg + (size_t)(NTOK + step - 2) * V;
            int best = 0;
            for (size_t v = 1; v < V; v++)
                if (p[v] > p[best]) best = (int)v;
            tok[0] = best, pos[0] = NTOK + step - 1, rows[0] = 0;
        }
        di_v4_batch b = {.n = n, .tokens = tok, .pos = pos, .seq = rs, .n_logits = n, .logit_rows = rows,
                         .logits = lg + (size_t)(step ? NTOK + step - 1 : 0) * V};
        st = k->v41 ? di_v41_forward(m, &b, err) : di_v4_forward(m, &b, err);
    }
    di_seq_destroy(seq);
    if (k->v41) di_v41_free(m);
    else di_v4_free(m);
    if (st) {
        free(lg);
        return st;
    }
    *out = lg, *nout = (size_t)(NTOK + DEC) * V;
    return DEEPINFER_OK;
}

/* One rank's process: rank 0 makes the NCCL id and gives it to the others (idw[1..S-1]); every
 * rank sends back [status][message][count][logits], rank 0 first its reference run without EP. */
static void rank_main(const ep_case *k, int r, int S, int idr, const int *idw, int outfd) {
    pick_device(r);
    di_error err = {0};
    deepinfer_status st = DEEPINFER_OK;
    di_nccl_id id;
    memset(&id, 0, sizeof id);
    if (r == 0) {
        st = di_nccl_unique_id(&id, &err);
        for (int q = 1; q < S; q++) put(idw[q], &id, sizeof id);
    } else if (!get(idr, &id, sizeof id)) {
        st = di_error_set(&err, DEEPINFER_ERR_INTERNAL, "rank %d: no NCCL id from rank 0", r);
    }
    if (!st) st = di_backend_use(DI_BACKEND_CUDA, &err);
    float *ref = NULL, *got = NULL;
    size_t nref = 0, ngot = 0;
    if (!st && r == 0) st = run_model(k, 0, 1, NULL, &ref, &nref, &err); /* the model without EP */
    cudaStream_t stream = NULL;
    void *scratch = NULL;
    di_comm *comm = NULL;
    if (!st && (cudaStreamCreate(&stream) != cudaSuccess || cudaMalloc(&scratch, 4 * MAXR) != cudaSuccess))
        st = di_error_set(&err, DEEPINFER_ERR_INTERNAL, "rank %d: CUDA stream / scratch", r);
    di_nccl_params prm = {.rank = r, .size = S, .id = &id, .stream = stream, .sync = sync_stream, .scratch = scratch};
    if (!st) st = di_comm_nccl_create(&prm, &comm, &err);
    if (!st) st = run_model(k, r, S, comm, &got, &ngot, &err);
    di_comm_free(comm);
    int32_t s32 = (int32_t)st;
    put(outfd, &s32, sizeof s32);
    put(outfd, err.msg, sizeof err.msg);
    uint64_t n = st ? 0 : ngot;
    put(outfd, &n, sizeof n);
    if (r == 0) {
        uint64_t nr = st ? 0 : nref;
        put(outfd, &nr, sizeof nr);
        if (nr) put(outfd, ref, nr * sizeof(float));
    }
    if (n) put(outfd, got, n * sizeof(float));
    free(ref), free(got);
    _exit(0);
}

/* GPUs visible, counted in a child (this process must not start CUDA before forking ranks). */
static int count_gpus(void) {
    int p[2];
    if (pipe(p)) return 0;
    pid_t pid = fork();
    if (pid == 0) {
        int n = 0;
        if (cudaGetDeviceCount(&n) != cudaSuccess) n = 0;
        put(p[1], &n, sizeof n);
        _exit(0);
    }
    close(p[1]);
    int n = 0;
    if (pid < 0 || !get(p[0], &n, sizeof n)) n = 0;
    close(p[0]);
    if (pid > 0) waitpid(pid, NULL, 0);
    return n;
}

/* --ep S over NCCL on S processes against the model without EP, bitwise. */
static void check_nccl_ep(const ep_case *k, int S) {
    int idp[MAXR][2], outp[MAXR][2];
    pid_t pid[MAXR];
    for (int r = 0; r < S; r++)
        if (pipe(idp[r]) || pipe(outp[r])) {
            di_test_fail(__FILE__, __LINE__, "pipe");
            return;
        }
    for (int r = 0; r < S; r++) {
        int idw[MAXR] = {0};
        for (int q = 0; q < S; q++) idw[q] = idp[q][1];
        pid[r] = fork();
        if (pid[r] == 0) rank_main(k, r, S, idp[r][0], idw, outp[r][1]);
    }
    for (int r = 0; r < S; r++) close(idp[r][0]), close(idp[r][1]), close(outp[r][1]);
    float *ref = NULL;
    uint64_t nref = 0;
    for (int r = 0; r < S; r++) {
        int32_t s32 = -1;
        char msg[DI_ERROR_MSG_MAX] = "";
        uint64_t n = 0;
        int ok = get(outp[r][0], &s32, sizeof s32) && get(outp[r][0], msg, sizeof msg) && get(outp[r][0], &n, sizeof n);
        if (ok && r == 0 && get(outp[r][0], &nref, sizeof nref) && nref) {
            ref = malloc(nref * sizeof(float));
            ok = ref && get(outp[r][0], ref, nref * sizeof(float));
        }
        float *got = n ? malloc(n * sizeof(float)) : NULL;
        if (ok && n) ok = got && get(outp[r][0], got, n * sizeof(float));
        if (ok && s32 == DEEPINFER_ERR_NOT_FOUND && strstr(msg, "libnccl")) {
            free(got);
            SKIP("%s", msg);
        }
        CHECK_MSG(ok && s32 == 0, "%s --ep %d rank %d: %s", k->dir, S, r, ok ? msg : "the rank's process died");
        CHECK(n > 0 && n == nref && ref);
        if (ok && n && n == nref && ref)
            CHECK_MSG(!memcmp(ref, got, n * sizeof(float)), "%s --ep %d rank %d: logits differ from the model "
                      "without EP", k->dir, S, r);
        free(got);
    }
    for (int r = 0; r < S; r++) close(outp[r][0]), waitpid(pid[r], NULL, 0);
    free(ref);
}

static const ep_case V4 = {0, "golden/v4-tiny-a"}, V41 = {1, "golden/v41-tiny-a"};

TEST(ep_nccl_one_rank_equals_no_ep_bitwise_v4) { check_nccl_ep(&V4, 1); }
TEST(ep_nccl_one_rank_equals_no_ep_bitwise_v41) { check_nccl_ep(&V41, 1); }

TEST(ep_nccl_two_ranks_equal_no_ep_bitwise) {
    int n = count_gpus();
    if (n < 2) SKIP("needs 2 GPUs (found %d)", n);
    check_nccl_ep(&V4, 2);
    check_nccl_ep(&V41, 2);
}
