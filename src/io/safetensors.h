/*
 * safetensors.h — read-only access to safetensors checkpoints.
 *
 * A checkpoint is one `.safetensors` file or a sharded set described by
 * `model.safetensors.index.json`. Every shard is memory-mapped read-only and
 * its header is validated before any tensor is exposed:
 *   - the u64 header length fits the file (no overflow), the header is at
 *     most 100 MiB and is a strict JSON object;
 *   - every tensor has a supported dtype (dtype.h), a shape of at most
 *     DI_ST_MAX_DIMS non-negative dims whose element count and byte size do
 *     not overflow, and `data_offsets` [begin, end] with begin ≤ end inside the
 *     data section and end − begin == numel × dtype size;
 *   - tensors do not overlap and cover the data section exactly (the same
 *     rule as the reference safetensors reader);
 *   - `__metadata__` is an object of strings;
 *   - no tensor name appears twice (in one shard or across shards);
 *   - with an index: every entry names an existing shard file that holds
 *     that tensor, and every tensor of every shard is listed.
 *
 * Tensor names. Released DeepSeek checkpoints use bare reference names
 * (`layers.3.attn.wq_a.weight`); some repackaged ones prefix `model.`. The
 * rule: a tensor's *reference name* is its stored name with one leading
 * "model." removed. Tensors are indexed by reference name, and lookups
 * remove one leading "model." from the query too, so either spelling finds
 * the tensor whichever way it is stored. A checkpoint holding both `X` and
 * `model.X` is rejected as ambiguous, and so is a name with the prefix twice
 * (`model.model.X`: its reference name would not find itself).
 *
 * Data pointers point into the mapping, so tensors are only byte-aligned in
 * general (safetensors does not align); use unaligned loads or copy.
 */
#ifndef DI_IO_SAFETENSORS_H
#define DI_IO_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

#include "io/dtype.h"
#include "util/error.h"

#define DI_ST_MAX_DIMS 8
#define DI_ST_MAX_HEADER ((uint64_t)100 << 20)

typedef struct di_tensor {
    const char *name;      /* as stored in the checkpoint (NUL-terminated) */
    const char *ref_name;  /* name without a leading "model." (points into name) */
    di_dtype dtype;
    int ndim;              /* 0 (a scalar) .. DI_ST_MAX_DIMS */
    int64_t shape[DI_ST_MAX_DIMS];
    uint64_t numel;        /* product of shape (1 for a scalar) */
    const void *data;      /* read-only, inside the shard mapping; NULL if nbytes == 0 */
    uint64_t nbytes;       /* numel × di_dtype_size(dtype) */
    uint64_t file_offset;  /* absolute offset of the data in the shard file */
    uint32_t shard;        /* index of the shard (di_st_shard) */
    const struct di_safetensors *owner; /* the checkpoint holding it (di_st_read) */
} di_tensor;

typedef struct di_st_shard_info {
    const char *path;               /* file path ("<memory>" label for buffers) */
    const unsigned char *data;      /* the whole file, mapped read-only */
    uint64_t size;                  /* file size in bytes */
    uint64_t header_len;            /* JSON header length */
    uint64_t data_start;            /* 8 + header_len: where tensor data begins */
    size_t tensor_count;
} di_st_shard_info;

typedef struct di_st_totals {
    uint64_t count[DI_DTYPE_COUNT];
    uint64_t bytes[DI_DTYPE_COUNT];
    uint64_t total_count;
    uint64_t total_bytes;
} di_st_totals;

typedef struct di_safetensors di_safetensors;

/* Open a checkpoint. `path` is one of:
 *   - a directory: uses model.safetensors.index.json if present, else
 *     model.safetensors, else every *.safetensors file in it (sorted by name);
 *   - an index file (*.index.json): the shards it lists, next to it;
 *   - a .safetensors file.
 * On success *out is a new handle (caller frees with di_st_close); every
 * tensor pointer it hands out stays valid until then. On failure *out is
 * NULL and `err` says which file and which tensor is wrong. */
deepinfer_status di_st_open(const char *path, di_safetensors **out, di_error *err);

/* Parse one safetensors file already in memory (borrowed: `data` must stay
 * alive and unchanged until di_st_close). `label` names it in messages.
 * Same validation as di_st_open; used by tests and the fuzzer. */
deepinfer_status di_st_open_buffer(const void *data, size_t size, const char *label,
                                   di_safetensors **out, di_error *err);

/* Adopt a safetensors image built in memory (header + data in one region
 * from mmap(MAP_PRIVATE | MAP_ANONYMOUS), e.g. tools/dummy/dummy.h): validated
 * exactly as a file (di_st_open_buffer's checks), then owned by the handle,
 * which munmaps it in di_st_close. The region is unmapped on failure too.
 * `label` names it in messages ("<memory>" when NULL). Model loaders take
 * such a handle through di_v4_options.weights instead of the directory's
 * files, so everything after the bytes (spec check, binding) is the same. */
deepinfer_status di_st_open_memory(void *image, size_t size, const char *label, di_safetensors **out,
                                   di_error *err);

/* A generated checkpoint: the tensors of a safetensors header (validated
 * like a file's, against a data section of `data_bytes`) whose bytes exist
 * only as a function: gen(ctx, t, off, dst, n, err) writes bytes
 * [off, off + n) of tensor t, for any range in any order (the same bytes
 * whatever the ranges). Nothing is mapped: t->data is NULL and readers go
 * through di_st_read, so a model of any size is produced in the loader's
 * staging buffers (tools/dummy/dummy.h). `header` (JSON, `header_len` bytes)
 * is copied; `ctx` is owned by the handle and released with ctx_free
 * (may be NULL) in di_st_close, on failure too. */
typedef deepinfer_status (*di_st_gen_fn)(void *ctx, const di_tensor *t, uint64_t off, void *dst, size_t n,
                                         di_error *err);
deepinfer_status di_st_open_generated(const char *header, size_t header_len, uint64_t data_bytes, di_st_gen_fn gen,
                                      void *ctx, void (*ctx_free)(void *), const char *label, di_safetensors **out,
                                      di_error *err);

/* Bytes [off, off + n) of tensor t into dst (any alignment). Files are read
 * with pread, so the loader's copies never fault the mapping into the
 * process; memory images are copied; generated images generate. A range
 * outside the tensor is an error. */
deepinfer_status di_st_read(const di_tensor *t, uint64_t off, void *dst, size_t n, di_error *err);

/* Hints for a loader streaming a file checkpoint (no-ops elsewhere):
 * di_st_prefetch starts the kernel's read-ahead of t's pages
 * (POSIX_FADV_WILLNEED); di_st_release drops them behind the reader
 * (POSIX_FADV_DONTNEED on the file range, MADV_DONTNEED on the mapping's
 * whole pages) so that a checkpoint larger than RAM streams through the
 * page cache. Data pointers stay valid: released pages read back from the
 * file. */
void di_st_prefetch(const di_tensor *t);
void di_st_release(const di_tensor *t);
/* di_st_release in parts: the mapping's pages of t; the file's page cache
 * of `len` bytes from t's offset (a run of adjacent tensors of one shard);
 * every shard's whole page cache (the end of a load). */
void di_st_release_map(const di_tensor *t);
void di_st_release_range(const di_tensor *t, uint64_t len);
void di_st_release_all(const di_safetensors *st);

/* Map t's pages into the process in one call (MADV_POPULATE_READ where the
 * kernel has it), before a reader walks the mapping; no-op elsewhere. */
void di_st_populate(const di_tensor *t);

/* 1 when t's bytes come from a file (di_st_open), 0 for memory and generated images. */
int di_st_is_file(const di_tensor *t);

/* 1 when t's bytes are addressable in memory (t->data: a mapped file or a
 * memory image), 0 for a generated image. */
int di_st_mapped(const di_tensor *t);

/* Unmap every shard and free the handle; NULL is a no-op. */
void di_st_close(di_safetensors *st);

/* Number of tensors, and tensor i (0 ≤ i < count) in shard order, then file
 * offset order. Pointers are owned by `st`. */
size_t di_st_count(const di_safetensors *st);
const di_tensor *di_st_at(const di_safetensors *st, size_t i);

/* Find a tensor by name (either spelling, see above); NULL if absent. */
const di_tensor *di_st_find(const di_safetensors *st, const char *name);

/* Like di_st_find with a printf-style name, e.g. ("layers.%d.attn.wq_a.weight", l).
 * Names longer than 511 bytes are never found. */
const di_tensor *di_st_findf(const di_safetensors *st, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Shards: count and per-shard information (owned by `st`). */
size_t di_st_shard_count(const di_safetensors *st);
const di_st_shard_info *di_st_shard(const di_safetensors *st, size_t i);

/* Tensor counts and bytes per dtype over the whole checkpoint (owned by `st`). */
const di_st_totals *di_st_get_totals(const di_safetensors *st);

/* The value of `key` in a shard's `__metadata__`, or NULL. */
const char *di_st_metadata(const di_safetensors *st, size_t shard, const char *key);

/* Index `metadata.total_size` as written by the index (-1 if absent or no index). */
int64_t di_st_index_total_size(const di_safetensors *st);

/* The path the checkpoint was opened from (index, file or directory). */
const char *di_st_path(const di_safetensors *st);

/* Format a shape as "[a,b,c]" into buf (always NUL-terminated). */
void di_shape_format(const int64_t *shape, int ndim, char *buf, size_t n);

#endif
