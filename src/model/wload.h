/*
 * wload.h — moving checkpoint tensors into the model's memory at load
 * (docs/loading.md). Every byte of a weight goes through here, so that a
 * device backend streams it from the file (pread) through its staging ring
 * (ops.h di_dev_fill) and the host never holds more than the ring, and the
 * CPU backend packs from the mapping in place and drops the file pages
 * behind itself (the packed copy replaces them). The read-ahead thread and
 * the deferred releases are process-wide: one load runs at a time (as the
 * backend's staging ring is one).
 */
#ifndef DI_MODEL_WLOAD_H
#define DI_MODEL_WLOAD_H

#include <stddef.h>
#include <stdint.h>

#include "io/safetensors.h"
#include "model/tensor_spec.h"
#include "util/error.h"

/* Bytes [off, off + n) of t into backend memory at dst (di_dev_fill). With
 * check_e8m0 every byte is checked not to be the NaN scale 0xFF. */
deepinfer_status di_wload_to_dev(void *dst, const di_tensor *t, uint64_t off, size_t n, int check_e8m0,
                                 di_error *err);

/* The whole of t readable on the host: the mapping when t is mapped
 * (*owned = NULL: nothing copied), else a malloc'd copy (*owned = it, free
 * it). NULL on failure. */
const void *di_wload_view(const di_tensor *t, void **owned, di_error *err);

/* A malloc'd copy of t's bytes (small tensors: norms, biases, tables the
 * host converts). NULL on failure. */
void *di_wload_copy(const di_tensor *t, di_error *err);

/* e8m0 scale bytes: an error naming t at the first NaN code (0xFF). */
deepinfer_status di_wload_check_e8m0(const di_tensor *t, const uint8_t *b, size_t n, uint64_t off, di_error *err);

/* Layer boundaries of a load. di_wload_prefetch starts reading ahead every
 * spec tensor whose name starts with `prefix` (the next layer while this
 * one binds) on a background thread, after di_wload_prefetch_wait: which
 * joins the previous read-ahead (binding must not overtake it) and drops
 * the page cache of the tensors released since (merged ranges).
 * di_wload_release marks a bound tensor's file pages as no longer needed
 * (its mapping's pages go at once). di_wload_finish ends a load: joins,
 * waits for every upload (di_dev_fill_finish) and drops the checkpoint's
 * remaining page cache. */
void di_wload_prefetch(const di_weight_spec *spec, const char *prefix);
void di_wload_prefetch_wait(void);
void di_wload_release(const di_tensor *t);
void di_wload_finish(void);

/* Bytes moved by this process's loads so far (file, memory or generated
 * sources), for the load-rate report. */
uint64_t di_wload_bytes(void);

#endif
