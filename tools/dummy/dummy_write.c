/* dummy_write.c — a checkpoint handle written out as sharded safetensors
 * files plus model.safetensors.index.json (dummy.h step 3). One thread
 * generates (di_st_read: the dummy generator, parallel on the pool) into one
 * of two buffers while a writer thread writes the other, starts its
 * writeback and drops the pages behind, so neither RSS nor the page cache
 * grows with the model. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "dummy/dummy.h"
#include "tokenizer/sbuf.h"
#include "util/file.h"

#define BLOCK ((size_t)32 << 20)

/* ---- the shard header: JSON text in a di_sbuf (tokenizer/sbuf.h) ------------------------------ */

static void sb_name(di_sbuf *b, const char *s) {
    di_sbuf_put(b, "\"", 1);
    for (; *s; s++) {
        if (*s == '"' || *s == '\\') di_sbuf_put(b, "\\", 1);
        di_sbuf_put(b, s, 1);
    }
    di_sbuf_put(b, "\"", 1);
}

/* ---- the writer thread -------------------------------------------------------------------- */

typedef struct block {
    unsigned char *p;
    size_t n;
    int fd;
    uint64_t pos;
    int last; /* the shard's final block: fsync and close fd after it */
    const char *path;
    int full;
} block;

typedef struct writer {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    block b[2];
    int stop;
    int failed;
    di_error err;
    uint64_t prev_pos, prev_n; /* the block before, same file: waited for and dropped */
    int prev_fd;
} writer;

static int write_all(int fd, const unsigned char *p, size_t n, uint64_t pos) {
    while (n) {
        ssize_t w = pwrite(fd, p, n, (off_t)pos);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return -1;
        p += w, n -= (size_t)w, pos += (uint64_t)w;
    }
    return 0;
}

static void write_block(writer *w, block *b) {
    if (w->failed) goto close;
    if (write_all(b->fd, b->p, b->n, b->pos)) {
        w->failed = 1;
        di_error_set(&w->err, DEEPINFER_ERR_IO, "writing %s at byte %llu: %s", b->path, (unsigned long long)b->pos,
                     strerror(errno));
        goto close;
    }
    /* bounded dirty / cached pages: start this block's writeback, wait for the previous one's and drop it */
    sync_file_range(b->fd, (off_t)b->pos, (off_t)b->n, SYNC_FILE_RANGE_WRITE);
    if (w->prev_fd == b->fd && w->prev_n) {
        sync_file_range(b->fd, (off_t)w->prev_pos, (off_t)w->prev_n,
                        SYNC_FILE_RANGE_WAIT_BEFORE | SYNC_FILE_RANGE_WRITE | SYNC_FILE_RANGE_WAIT_AFTER);
        posix_fadvise(b->fd, (off_t)w->prev_pos, (off_t)w->prev_n, POSIX_FADV_DONTNEED);
    }
    w->prev_fd = b->fd, w->prev_pos = b->pos, w->prev_n = b->n;
close:
    if (!b->last) return;
    if (!w->failed && fsync(b->fd)) {
        w->failed = 1;
        di_error_set(&w->err, DEEPINFER_ERR_IO, "fsync %s: %s", b->path, strerror(errno));
    }
    posix_fadvise(b->fd, 0, 0, POSIX_FADV_DONTNEED);
    if (close(b->fd) && !w->failed) {
        w->failed = 1;
        di_error_set(&w->err, DEEPINFER_ERR_IO, "closing %s: %s", b->path, strerror(errno));
    }
    w->prev_fd = -1, w->prev_n = 0;
}

static void *writer_main(void *p) {
    writer *w = p;
    for (int cur = 0;; cur ^= 1) {
        pthread_mutex_lock(&w->mu);
        while (!w->b[cur].full && !w->stop) pthread_cond_wait(&w->cv, &w->mu);
        if (!w->b[cur].full) {
            pthread_mutex_unlock(&w->mu);
            return NULL;
        }
        pthread_mutex_unlock(&w->mu);
        write_block(w, &w->b[cur]);
        pthread_mutex_lock(&w->mu);
        w->b[cur].full = 0;
        pthread_cond_broadcast(&w->cv);
        pthread_mutex_unlock(&w->mu);
    }
}

/* The producer's side: bytes go into b[cur] until it is full, then to the writer. */
typedef struct stream {
    writer *w;
    int cur;
    int fd;
    uint64_t pos;
    const char *path;
} stream;

static block *cur_block(stream *s) {
    writer *w = s->w;
    block *b = &w->b[s->cur];
    pthread_mutex_lock(&w->mu);
    while (b->full) pthread_cond_wait(&w->cv, &w->mu);
    pthread_mutex_unlock(&w->mu);
    return b;
}

static void submit(stream *s, int last) {
    writer *w = s->w;
    block *b = &w->b[s->cur];
    if (!b->n && !last) return;
    b->fd = s->fd, b->pos = s->pos, b->last = last, b->path = s->path;
    s->pos += b->n;
    pthread_mutex_lock(&w->mu);
    b->full = 1;
    pthread_cond_broadcast(&w->cv);
    pthread_mutex_unlock(&w->mu);
    s->cur ^= 1;
    block *nb = cur_block(s);
    nb->n = 0;
}

static void put_bytes(stream *s, const void *src, size_t n) {
    const unsigned char *p = src;
    while (n) {
        block *b = cur_block(s);
        size_t k = BLOCK - b->n < n ? BLOCK - b->n : n;
        memcpy(b->p + b->n, p, k);
        b->n += k, p += k, n -= k;
        if (b->n == BLOCK) submit(s, 0);
    }
}

static deepinfer_status put_tensor(stream *s, const di_tensor *t, di_error *err) {
    for (uint64_t off = 0; off < t->nbytes;) {
        block *b = cur_block(s);
        size_t k = BLOCK - b->n;
        if (k > t->nbytes - off) k = (size_t)(t->nbytes - off);
        deepinfer_status st = di_st_read(t, off, b->p + b->n, k, err);
        if (st) return st;
        b->n += k, off += k;
        if (b->n == BLOCK) submit(s, 0);
    }
    return DEEPINFER_OK;
}

/* ---- shards and index ---------------------------------------------------------------------- */

/* Shard j holds tensors [first[j], first[j + 1]). */
static size_t plan_shards(const di_safetensors *st, uint64_t shard_bytes, size_t *first) {
    size_t n = di_st_count(st), ns = 0;
    uint64_t in = 0;
    for (size_t i = 0; i < n; i++) {
        uint64_t b = di_st_at(st, i)->nbytes;
        if (i == 0 || (in > 0 && in + b > shard_bytes)) first[ns++] = i, in = 0;
        in += b;
    }
    first[ns] = n;
    return ns;
}

/* The header of tensors [a, b) (offsets from the shard's data start), padded to 64-byte data alignment. */
static void shard_header(const di_safetensors *st, size_t a, size_t b, di_sbuf *h) {
    di_sbuf_put(h, "{\"__metadata__\":{\"format\":\"pt\",\"source\":\"deepinfer dummy\"}", 58);
    uint64_t off = 0;
    for (size_t i = a; i < b; i++) {
        const di_tensor *t = di_st_at(st, i);
        di_sbuf_put(h, ",", 1);
        sb_name(h, t->name);
        di_sbuf_put(h, ":{\"dtype\":\"", 11);
        di_sbuf_put(h, di_dtype_name(t->dtype), strlen(di_dtype_name(t->dtype)));
        di_sbuf_put(h, "\",\"shape\":[", 11);
        for (int d = 0; d < t->ndim; d++) di_sbuf_printf(h, d ? ",%llu" : "%llu", (unsigned long long)t->shape[d]);
        di_sbuf_printf(h, "],\"data_offsets\":[%llu,", (unsigned long long)off);
        off += t->nbytes;
        di_sbuf_printf(h, "%llu]}", (unsigned long long)off);
    }
    di_sbuf_put(h, "}", 1);
    while ((8 + h->n) % 64) di_sbuf_put(h, " ", 1);
}

static deepinfer_status write_index(const di_safetensors *st, const char *dir, const size_t *first, size_t ns,
                                    di_error *err) {
    di_sbuf x = {0};
    di_sbuf_printf(&x, "{\n  \"metadata\": {\"total_size\": %llu},", (unsigned long long)di_st_get_totals(st)->total_bytes);
    di_sbuf_put(&x, "\n  \"weight_map\": {", 18);
    char shard[64];
    for (size_t j = 0; j < ns; j++) {
        snprintf(shard, sizeof shard, "model-%05zu-of-%05zu.safetensors", j + 1, ns);
        for (size_t i = first[j]; i < first[j + 1]; i++) {
            di_sbuf_put(&x, i ? ",\n    " : "\n    ", 6 - !i);
            sb_name(&x, di_st_at(st, i)->name);
            di_sbuf_put(&x, ": \"", 3);
            di_sbuf_put(&x, shard, strlen(shard));
            di_sbuf_put(&x, "\"", 1);
        }
    }
    di_sbuf_put(&x, "\n  }\n}\n", 7);
    char path[4096];
    deepinfer_status rc = DEEPINFER_OK;
    if (x.oom) rc = di_error_set(err, DEEPINFER_ERR_OUT_OF_MEMORY, "out of memory writing the index");
    else if (di_path_join(path, sizeof path, dir, "model.safetensors.index.json"))
        rc = di_error_set(err, DEEPINFER_ERR_INVALID_ARGUMENT, "%s: path too long", dir);
    if (!rc) {
        int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fd < 0 || write_all(fd, (const unsigned char *)x.p, x.n, 0) || fsync(fd))
            rc = di_error_set(err, DEEPINFER_ERR_IO, "cannot write %s: %s", path, strerror(errno));
        if (fd >= 0) close(fd);
    }
    free(x.p);
    return rc;
}

deepinfer_status di_dummy_save(const di_safetensors *st, const char *dir, uint64_t shard_bytes,
                               void (*progress)(void *ctx, size_t shard, size_t n_shards, uint64_t done,
                                                uint64_t total),
                               void *progress_ctx, di_error *err) {
    size_t n = di_st_count(st);
    uint64_t total = di_st_get_totals(st)->total_bytes;
    if (!shard_bytes) shard_bytes = 1;
    struct statvfs vfs;
    if (statvfs(dir, &vfs))
        return di_error_set(err, DEEPINFER_ERR_IO, "%s: %s (the output directory must exist)", dir, strerror(errno));
    double avail = (double)vfs.f_bavail * (double)vfs.f_frsize;
    if ((double)total > avail)
        return di_error_set(err, DEEPINFER_ERR_LIMIT, "%s: the checkpoint needs %.2f GB, %.2f GB free there", dir,
                            (double)total / 1e9, avail / 1e9);
    size_t *first = malloc((n + 2) * sizeof *first);
    writer *w = calloc(1, sizeof *w);
    if (!first || !w) {
        free(first), free(w);
        return di_error_set(err, DEEPINFER_ERR_OUT_OF_MEMORY, "out of memory writing a checkpoint");
    }
    size_t ns = plan_shards(st, shard_bytes, first);
    deepinfer_status rc = DEEPINFER_OK;
    pthread_t th;
    int started = 0;
    pthread_mutex_init(&w->mu, NULL);
    pthread_cond_init(&w->cv, NULL);
    w->prev_fd = -1;
    w->b[0].p = malloc(BLOCK), w->b[1].p = malloc(BLOCK);
    if (!w->b[0].p || !w->b[1].p) rc = di_error_set(err, DEEPINFER_ERR_OUT_OF_MEMORY, "out of memory (write buffers)");
    else if (pthread_create(&th, NULL, writer_main, w))
        rc = di_error_set(err, DEEPINFER_ERR_INTERNAL, "cannot start the writer thread");
    else started = 1;
    stream s = {.w = w};
    char path[2][4096];
    uint64_t done = 0;
    for (size_t j = 0; j < ns && !rc; j++) {
        char name[64];
        snprintf(name, sizeof name, "model-%05zu-of-%05zu.safetensors", j + 1, ns);
        char *pth = path[j & 1]; /* the writer may still hold the previous shard's name */
        if (di_path_join(pth, 4096, dir, name)) {
            rc = di_error_set(err, DEEPINFER_ERR_INVALID_ARGUMENT, "%s: path too long", dir);
            break;
        }
        di_sbuf h = {0};
        shard_header(st, first[j], first[j + 1], &h);
        if (h.oom) {
            free(h.p);
            rc = di_error_set(err, DEEPINFER_ERR_OUT_OF_MEMORY, "out of memory (shard header)");
            break;
        }
        int fd = open(pth, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fd < 0) {
            free(h.p);
            rc = di_error_set(err, DEEPINFER_ERR_IO, "cannot create %s: %s", pth, strerror(errno));
            break;
        }
        s.fd = fd, s.pos = 0, s.path = pth;
        unsigned char len8[8];
        for (int b = 0; b < 8; b++) len8[b] = (unsigned char)((uint64_t)h.n >> (8 * b));
        put_bytes(&s, len8, 8);
        put_bytes(&s, h.p, h.n);
        free(h.p);
        for (size_t i = first[j]; i < first[j + 1] && !rc; i++) {
            rc = put_tensor(&s, di_st_at(st, i), err);
            done += di_st_at(st, i)->nbytes;
        }
        submit(&s, 1); /* the shard's last block closes fd (also after an error) */
        if (!rc && progress) progress(progress_ctx, j, ns, done, total);
    }
    if (started) {
        pthread_mutex_lock(&w->mu);
        w->stop = 1;
        pthread_cond_broadcast(&w->cv);
        pthread_mutex_unlock(&w->mu);
        pthread_join(th, NULL);
    }
    if (!rc && w->failed) rc = di_error_set(err, w->err.code, "%s", w->err.msg);
    if (!rc) rc = write_index(st, dir, first, ns, err);
    pthread_mutex_destroy(&w->mu);
    pthread_cond_destroy(&w->cv);
    free(w->b[0].p), free(w->b[1].p);
    free(w);
    free(first);
    return rc;
}

deepinfer_status di_dummy_write_checkpoint(const di_model_config *cfg, uint64_t seed, const char *dir,
                                           uint64_t shard_bytes, di_error *err) {
    di_safetensors *st = NULL;
    deepinfer_status rc = di_dummy_weights(cfg, seed, &st, err);
    if (!rc) rc = di_dummy_save(st, dir, shard_bytes, NULL, NULL, err);
    di_st_close(st);
    return rc;
}
