/*
 * compressor.h — the KV compressors of V4 (architecture.md §4.5) and the
 * V4.1 KV sources (§5.3), with their chunking semantics (§6.4).
 *
 * Gated (V4 every ratio; V4.1 ratio >= 2): per token a = wkv.x,
 * g = wgate.x (+ ape[t mod r] in V4), fp32; the tokens of group j
 * (positions jr..jr+r-1) pool per channel with a softmax over g; V4 ratio 4
 * overlaps (8 slots: the previous group's A halves [:hd], then the own
 * group's B halves [hd:]). A row is emitted at the token that completes its
 * group, cast to bf16 and RMS-normalised.
 * Ungated (V4.1 ratio 1): every token emits norm(wkv.x) with a BF16 linear.
 *
 * What an emitted row j becomes (RoPE always at position jr, the group's
 * first token):
 *   DI_CMP_MAIN   V4 compressed KV: FP8 simulation of the non-RoPE dims, blocks of 64
 *   DI_CMP_INDEX  V4 index keys: Hadamard + FP4 simulation, blocks of 32
 *   DI_CMP_LATENT V4.1 shared latent: the pre-RoPE row first gives the index
 *                 keys (owners: k_norm(wk.latent), RoPE, FP4 / E8M0 block 32),
 *                 then the compressed KV (RoPE, FP4 / E4M3 scales block 16);
 *                 a segment that emitted index keys makes this layer its
 *                 sequence's published key source (seq->ikey_pub).
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
    DI_CMP_MAIN = 0,
    DI_CMP_INDEX = 1,
    DI_CMP_LATENT = 2
} di_cmp_kind;

/* Run every row of the step through layer `layer`'s compressor of `kind`
 * (input xn: bf16 [M][dim]); emitted rows land in the sequences' stores. */
void di_compressor_run(di_fwd *f, const di_compressor_w *cw, const di_layer_cfg *L, int layer, di_cmp_kind kind,
                       const uint16_t *xn);

#endif
