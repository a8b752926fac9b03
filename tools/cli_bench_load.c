/* cli_bench_load.c — `deepinfer bench --load DIR` (cli_bench_load.h).
 *
 * Order of work (progress on stderr, the table last on stdout):
 *  1. the backend (CUDA: context and device memory figure before the load);
 *  2. every shard's page cache dropped (posix_fadvise DONTNEED) and the
 *     cached fraction measured (mincore over a read-only mapping); "cold"
 *     when it is ~0 afterwards (a filesystem that ignores the hint, e.g.
 *     tmpfs, stays cached and is reported as such);
 *  3. the load through the product path (cli_model_load: di_v4_load /
 *     di_v41_load, the streaming loader), timed from the call to loaded;
 *     peak RSS (VmHWM), device memory delta, the cached fraction left behind;
 *  4. the first token: one forward of --prompt tokens with the last row's
 *     logits on the host; its time since main entry (tools/deepinfer.c
 *     di_cli_start_time), which includes steps 1..3 and nothing after;
 *  5. the storage read rate: the model freed (pages it maps cannot be
 *     dropped), the cache dropped again, then every shard read sequentially
 *     with pread in 64 MB blocks, timed; pages dropped behind.
 * The read is measured after the load so that the first-token figure is the
 * one a user sees (no probe before it); both run on a dropped cache. */
#include "cli_bench_load.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "cli_model.h"
#include "io/safetensors.h"
#include "model/wload.h"
#include "ops/backend.h"
#include "util/sysmem.h"

#define READ_BLOCK ((size_t)64 << 20)
#define MAX_SHARDS 4096

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

#define PROGRESS(...)                                                                                                  \
    (fprintf(stderr, "[%7.1fs] ", now_s() - di_cli_start_time()), fprintf(stderr, __VA_ARGS__), fputc('\n', stderr))

typedef struct shards {
    char *path[MAX_SHARDS];
    uint64_t size[MAX_SHARDS];
    size_t n;
    uint64_t file_bytes, tensor_bytes;
} shards;

static void shards_free(shards *s) {
    for (size_t i = 0; i < s->n; i++) free(s->path[i]);
    s->n = 0;
}

/* The checkpoint's shard files and sizes (headers validated by di_st_open). */
static deepinfer_status list_shards(const char *dir, shards *s, di_error *err) {
    di_safetensors *st = NULL;
    deepinfer_status rc = di_st_open(dir, &st, err);
    if (rc) return rc;
    memset(s, 0, sizeof *s);
    if (di_st_shard_count(st) > MAX_SHARDS)
        rc = di_error_set(err, DEEPINFER_ERR_LIMIT, "%s: %zu shards, at most %d", dir, di_st_shard_count(st),
                          MAX_SHARDS);
    for (size_t i = 0; !rc && i < di_st_shard_count(st); i++) {
        const di_st_shard_info *sh = di_st_shard(st, i);
        if (!(s->path[i] = strdup(sh->path))) rc = di_error_set(err, DEEPINFER_ERR_OUT_OF_MEMORY, "out of memory");
        s->size[i] = sh->size;
        s->file_bytes += sh->size;
        s->n = i + 1;
    }
    s->tensor_bytes = di_st_get_totals(st)->total_bytes;
    di_st_close(st);
    if (rc) shards_free(s);
    return rc;
}

/* Drop every shard's cached pages; 0 when the kernel took every hint. */
static int drop_cache(const shards *s) {
    int bad = 0;
    for (size_t i = 0; i < s->n; i++) {
        int fd = open(s->path[i], O_RDONLY);
        if (fd < 0 || posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED)) bad = 1;
        if (fd >= 0) close(fd);
    }
    return bad;
}

/* Fraction of the checkpoint's file pages in the page cache (mincore over 1 GB windows); -1 if unknown. */
static double cached_fraction(const shards *s) {
    long pg = sysconf(_SC_PAGESIZE);
    size_t win = (size_t)1 << 30;
    unsigned char *vec = malloc(win / (size_t)pg + 1);
    if (!vec || pg <= 0) return free(vec), -1;
    uint64_t in = 0, all = 0;
    for (size_t i = 0; i < s->n; i++) {
        int fd = open(s->path[i], O_RDONLY);
        if (fd < 0) continue;
        for (uint64_t off = 0; off < s->size[i]; off += win) {
            size_t len = s->size[i] - off < win ? (size_t)(s->size[i] - off) : win;
            void *p = mmap(NULL, len, PROT_READ, MAP_SHARED, fd, (off_t)off);
            if (p == MAP_FAILED) continue;
            size_t np = (len + (size_t)pg - 1) / (size_t)pg;
            if (!mincore(p, len, vec)) {
                for (size_t j = 0; j < np; j++) in += vec[j] & 1;
                all += np;
            }
            munmap(p, len);
        }
        close(fd);
    }
    free(vec);
    return all ? (double)in / (double)all : -1;
}

/* Every shard read sequentially in READ_BLOCK preads; seconds, and the pages dropped behind. */
static deepinfer_status read_all(const shards *s, double *sec, di_error *err) {
    unsigned char *buf = aligned_alloc(4096, READ_BLOCK);
    if (!buf) return di_error_set(err, DEEPINFER_ERR_OUT_OF_MEMORY, "out of memory (read buffer)");
    deepinfer_status rc = DEEPINFER_OK;
    double t0 = now_s();
    for (size_t i = 0; i < s->n && !rc; i++) {
        int fd = open(s->path[i], O_RDONLY);
        if (fd < 0) {
            rc = di_error_set(err, DEEPINFER_ERR_IO, "cannot open %s: %s", s->path[i], strerror(errno));
            break;
        }
        posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
        uint64_t at = 0, last = 0;
        while (at < s->size[i]) {
            ssize_t r = pread(fd, buf, READ_BLOCK, (off_t)at);
            if (r < 0 && errno == EINTR) continue;
            if (r <= 0) {
                rc = di_error_set(err, DEEPINFER_ERR_IO, "reading %s at byte %llu: %s", s->path[i],
                                  (unsigned long long)at, r < 0 ? strerror(errno) : "unexpected end of file");
                break;
            }
            at += (uint64_t)r;
            if (at - last >= ((uint64_t)1 << 30)) { /* drop behind the reader (a checkpoint larger than RAM) */
                posix_fadvise(fd, (off_t)last, (off_t)(at - last), POSIX_FADV_DONTNEED);
                last = at;
            }
        }
        posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
        close(fd);
    }
    *sec = now_s() - t0;
    free(buf);
    return rc;
}

static const char *cold_word(int drop_failed, double frac) {
    if (frac < 0) return drop_failed ? "cache state unknown (fadvise refused)" : "cache state unknown (mincore failed)";
    if (frac < 0.01) return "cold";
    return frac > 0.5 ? "WARM: the page cache could not be dropped" : "partly cached";
}

static int32_t text_token(const di_model_config *c, int64_t t) {
    int32_t v = (int32_t)(t % c->vocab_size);
    return v == c->image_token_id ? (int32_t)((v + 1) % c->vocab_size) : v;
}

int bench_load_run(const bench_load_args *a) {
    double t_cmd = now_s();
    di_error err = {0};
    di_backend_kind bk;
    if (di_backend_select(a->backend, &bk, &err) || di_backend_use(bk, &err)) {
        fprintf(stderr, "deepinfer bench: %s\n", err.msg);
        return 1;
    }
    shards s;
    if (list_shards(a->dir, &s, &err)) {
        fprintf(stderr, "deepinfer bench --load: %s\n", err.msg);
        return 1;
    }
    PROGRESS("%s: %zu shard file(s), %.2f GB (%.2f GB of tensors); backend %s", a->dir, s.n, s.file_bytes / 1e9,
             s.tensor_bytes / 1e9, di_backend_name(bk));
    size_t f0 = 0, tot = 0, f1 = 0;
    int dev = bk != DI_BACKEND_CPU && di_backend_mem_info(&f0, &tot) == 0;

    /* the load, on a dropped cache */
    int drop1 = drop_cache(&s);
    double cached_load = cached_fraction(&s);
    PROGRESS("page cache dropped%s: %.1f%% of the checkpoint cached before the load",
             drop1 ? " (some hints refused)" : "", 100 * cached_load);
    uint64_t b0 = di_wload_bytes();
    int P = a->prompt;
    di_v4_options opt = {.max_rows = P < 16 ? 16 : P, .max_context = P + 16};
    cli_model m;
    double tl0 = now_s();
    if (cli_model_load(a->dir, &opt, &m, &err)) {
        fprintf(stderr, "deepinfer bench --load: %s\n", err.msg);
        shards_free(&s);
        return 1;
    }
    double load_s = now_s() - tl0;
    uint64_t moved = di_wload_bytes() - b0, peak = di_proc_peak_rss();
    double dev_used = dev && di_backend_mem_info(&f1, &tot) == 0 ? (double)f0 - (double)f1 : -1;
    double cached_after = cached_fraction(&s);
    PROGRESS("loaded in %.2f s (%.2f GB/s); peak RSS %.2f GB; %.1f%% of the checkpoint left in the page cache",
             load_s, s.tensor_bytes / 1e9 / load_s, peak / 1e9, 100 * cached_after);

    /* the first token */
    di_model_config cfg = *m.sm.cfg;
    const di_model_config *c = &cfg;
    di_seq_state *seq = NULL;
    int32_t tok[64];
    int64_t pos[64];
    di_seq_state *rs[64];
    float *logits = malloc(sizeof(float) * (size_t)c->vocab_size);
    int last = P - 1, rc = 1;
    double fw0 = now_s(), ttft = 0, fw = 0;
    if (!logits) {
        di_error_set(&err, DEEPINFER_ERR_OUT_OF_MEMORY, "out of memory");
        goto out;
    }
    if (m.sm.seq_new(m.sm.model, &seq, &err)) goto out;
    for (int i = 0; i < P; i++) tok[i] = text_token(c, 1000 + (int64_t)i * 7919), pos[i] = i, rs[i] = seq;
    di_v4_batch b = {.n = P, .tokens = tok, .pos = pos, .seq = rs, .n_logits = 1, .logit_rows = &last,
                     .logits = logits};
    if (m.sm.forward(m.sm.model, &b, &err)) goto out;
    ttft = now_s() - di_cli_start_time(), fw = now_s() - fw0;
    int finite = 1;
    for (int64_t i = 0; i < c->vocab_size; i++) finite &= logits[i] == logits[i];
    PROGRESS("first token: %.2f s after process start (forward of %d tokens %.3f s)%s", ttft, P, fw,
             finite ? "" : "; WARNING: NaN logits");

    /* the storage read rate, on a dropped cache (the model freed first: pages it still maps cannot be dropped) */
    di_seq_destroy(seq);
    seq = NULL;
    cli_model_free(&m);
    int drop2 = drop_cache(&s);
    double cached_read = cached_fraction(&s), read_s = 0;
    PROGRESS("page cache dropped%s: %.1f%% cached before the read; reading %.2f GB in 64 MB preads",
             drop2 ? " (some hints refused)" : "", 100 * cached_read, s.file_bytes / 1e9);
    if (read_all(&s, &read_s, &err)) goto out;
    double read_gbs = s.file_bytes / 1e9 / read_s, load_gbs = s.tensor_bytes / 1e9 / load_s;

    printf("# deepinfer bench --load %s --backend %s (%s, %lld layers, %lld routed experts; %zu shard(s), %.2f GB of "
           "tensors in %.2f GB of files)\n", a->dir, di_backend_name(bk), di_arch_name(c->arch),
           (long long)c->n_layers, (long long)c->n_routed_experts, s.n, s.tensor_bytes / 1e9, s.file_bytes / 1e9);
    printf("%-22s %14s  %s\n", "figure", "measured", "detail");
    char v[32];
    snprintf(v, sizeof v, "%.2f GB/s", read_gbs);
    printf("%-22s %14s  %.2f GB of files in %.2f s, sequential 64 MB preads; %s (%.1f%% cached before)\n",
           "storage read", v, s.file_bytes / 1e9, read_s, cold_word(drop2, cached_read), 100 * cached_read);
    snprintf(v, sizeof v, "%.2f GB/s", load_gbs);
    printf("%-22s %14s  %.2f GB of tensors in %.2f s (cli_model_load, call to loaded; %.2f GB moved by the loader); "
           "%s (%.1f%% cached before)\n", "load", v, s.tensor_bytes / 1e9, load_s, moved / 1e9,
           cold_word(drop1, cached_load), 100 * cached_load);
    snprintf(v, sizeof v, "%.3f", load_gbs / read_gbs);
    printf("%-22s %14s  load rate / storage read rate\n", "load / read", v);
    snprintf(v, sizeof v, "%.1f%%", 100 * cached_after);
    printf("%-22s %14s  of the checkpoint's file pages cached right after the load\n", "page cache after load", v);
    snprintf(v, sizeof v, "%.2f GB", peak / 1e9);
    printf("%-22s %14s  VmHWM after the load (/proc/self/status)\n", "peak host RSS", v);
    if (dev_used >= 0) {
        snprintf(v, sizeof v, "%.2f GB", dev_used / 1e9);
        printf("%-22s %14s  free device memory before - after the load (%.1f GB total)\n", "device memory used", v,
               tot / 1e9);
    }
    snprintf(v, sizeof v, "%.2f s", ttft);
    printf("%-22s %14s  from main entry to the logits of a %d-token prompt (this command began %.2f s after it; "
           "forward %.3f s)\n", "first token", v, P, t_cmd - di_cli_start_time(), fw);
    fflush(stdout);
    rc = 0;
out:
    if (rc) fprintf(stderr, "deepinfer bench --load: %s\n", err.msg);
    di_seq_destroy(seq);
    free(logits);
    cli_model_free(&m);
    shards_free(&s);
    return rc;
}
