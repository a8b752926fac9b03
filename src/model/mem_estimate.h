/*
 * mem_estimate.h — inference state size implied by a config (architecture.md
 * §6.2 / §6.3), for `deepinfer inspect` and memory planning.
 *
 * Global (grows with context) state, per layer that owns a compressed cache,
 * in the deployed cache formats the architecture document derives:
 *   V4   compressed KV row = (D − rope) FP8 + rope BF16 + one E8M0 scale per 64
 *        FP8 values = 583 B for D 512; index-key row = index_head_dim FP4 + one
 *        E8M0 per 32 = 68 B; a ratio-r layer adds (rows)/r per token.
 *   V4.1 compressed KV row = D FP4 + one E4M3 scale per 16 = 288 B; index keys
 *        68 B; only KV sources own rows; plus the Engram class-id history
 *        (4 B per token) when the model has Engram layers.
 * Released V4-Flash: 21·(583+68)/4 + 20·583/128 ≈ 3509 B/token; V4.1-Flash:
 * 3·(288+68)/2 + (288+68) = 890 B/token (the figure DeepSeek reports).
 * Fixed per sequence: SWA rings of every layer and drafter stage (window ×
 * head_dim BF16 rows, as the reference stores them) and the compressors'
 * fp32 partial-group state (kv + score buffers).
 */
#ifndef DI_MODEL_MEM_ESTIMATE_H
#define DI_MODEL_MEM_ESTIMATE_H

#include <stdint.h>

#include "model/config.h"

typedef struct di_state_estimate {
    double kv_bytes_per_token;      /* compressed KV rows, averaged over ratios */
    double index_bytes_per_token;   /* index-key rows */
    double history_bytes_per_token; /* V4.1 Engram class-id history */
    double bytes_per_token;         /* sum of the three */
    uint64_t kv_row_bytes, index_row_bytes;
    uint64_t swa_ring_bytes;        /* all rings (layers + drafter stages), one sequence */
    uint64_t compressor_state_bytes;/* partial-group buffers, one sequence */
    uint64_t fixed_bytes;           /* swa + compressor state */
} di_state_estimate;

/* Fill *e for `cfg` (a validated config). */
void di_state_estimate_compute(const di_model_config *cfg, di_state_estimate *e);

/* Exact bytes of state of one sequence at `context` tokens (rows are
 * floor(context / ratio) per owning layer). */
uint64_t di_state_bytes_at(const di_model_config *cfg, uint64_t context);

#endif
