/*
 * compressor.h — the V4 gated KV compressor (architecture.md §4.5, §6.2,
 * §6.4): per token a = wkv.x, g = wgate.x + ape[t mod r] (fp32); tokens of
 * group j (positions jr..jr+r-1) pool per channel with a softmax over g;
 * ratio 4 overlaps (8 slots: the previous group's A halves [:hd], then the
 * own group's B halves [hd:]). A row is emitted at the token that completes
 * its group, RMS-normalised (after the bf16 cast), RoPE'd at position jr and
 * quantisation-simulated, then appended to the layer's row store.
 *
 * Tokens enter the per-sequence state buffers in position order, one at a
 * time, so a row is the same whatever the chunking: prefill, chunked
 * prefill and decode compute the same function (bitwise).
 */
#ifndef DI_MODEL_COMPRESSOR_H
#define DI_MODEL_COMPRESSOR_H

#include "model/forward.h"
#include "model/weights.h"

typedef enum di_cmp_kind {
    DI_CMP_MAIN = 0,   /* compressed KV: FP8 sim of the non-RoPE dims, blocks of 64 */
    DI_CMP_INDEX = 1   /* index keys: Hadamard + FP4 sim, blocks of 32 */
} di_cmp_kind;

/* Run every row of the step through layer `layer`'s compressor of `kind`
 * (input xn: bf16 [M][dim]); emitted rows land in the sequences' stores. */
void di_compressor_run(di_fwd *f, const di_compressor_w *cw, const di_layer_cfg *L, int layer, di_cmp_kind kind,
                       const uint16_t *xn);

#endif
