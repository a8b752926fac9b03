/* bench_verify.h — `deepinfer bench-engine --verify-cost`: what a speculative verify step of
 * 1 + k rows per sequence costs against a decode step of one row (tools/bench_verify.c). */
#ifndef DI_TOOLS_BENCH_VERIFY_H
#define DI_TOOLS_BENCH_VERIFY_H

#include "deepinfer.h"

/* For each batch size bs[i]: that many sequences prefilled with `prompt` tokens on the engine's
 * model and state pool, then for k = 0..kmax one forward of B x (1 + k) rows at positions
 * prompt .. prompt + k with every row's logits (and the rollback snapshot a verify takes), best
 * of `reps`; prints one line per (B, k) with its time and ratio to k = 0. Returns 0, or 1 (message
 * printed) on failure. */
int bench_verify_cost(deepinfer_engine *e, const int *bs, int nb, int prompt, int kmax, int reps);

#endif
