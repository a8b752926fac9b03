/* compressor.c — the KV compressors (compressor.h). */
#include "model/compressor.h"

#include <string.h>

#include "io/numfmt.h"

#define MAX_OVERLAP_SLOTS 16
#define MAX_HD 1024

/* Pool the completed group in `st` into out[hd] (fp32). */
static void pool_group(const di_cmp_state *st, int ratio, int overlap, int hd, float *out) {
    if (!overlap) {
        di_softmax_pool(st->kv, st->score, (size_t)st->width, ratio, hd, out);
        return;
    }
    /* the 2r overlap slots gathered contiguously (runs on the calling thread) */
    static _Thread_local float tkv[MAX_OVERLAP_SLOTS * MAX_HD], tsc[MAX_OVERLAP_SLOTS * MAX_HD];
    int S = 2 * ratio;
    for (int s = 0; s < S; s++) {
        /* slots 0..r-1: previous group, A half [:hd]; r..2r-1: own group, B half [hd:] */
        size_t off = (size_t)s * (size_t)st->width + (s < ratio ? 0 : (size_t)hd);
        memcpy(tkv + (size_t)s * hd, st->kv + off, (size_t)hd * 4);
        memcpy(tsc + (size_t)s * hd, st->score + off, (size_t)hd * 4);
    }
    di_softmax_pool(tkv, tsc, (size_t)hd, S, hd, out);
}

/* Gated compressor: feed every token to its sequence's state in position
 * order; completed groups are pooled into ws->emit16 (bf16, not yet
 * normalised). Returns the number of emitted rows. */
static int run_gated(di_fwd *f, const di_compressor_w *cw, int layer, di_cmp_kind kind, const uint16_t *xn) {
    const di_model_config *c = f->cfg;
    di_ws *ws = f->ws;
    int d = (int)c->hidden_size, hd = cw->hd, r = cw->ratio, ov = cw->overlap;
    int width = (ov ? 2 : 1) * hd;
    /* fp32 projections (the reference promotes the BF16 weights and input) */
    di_gemm2(f->x, f->M, xn, (size_t)d, &cw->wkv, &cw->wgate, 0, ws->cproj_kv, NULL, ws->cproj_sc, NULL, (size_t)width);
    int ne = 0;
    for (int s = 0; s < f->nseg; s++) {
        const di_seg *sg = &f->segs[s];
        di_layer_state *ls = &sg->seq->layers[layer];
        di_cmp_state *st = kind == DI_CMP_INDEX ? &ls->icmp : &ls->cmp;
        for (int i = 0; i < sg->nrows; i++) {
            int row = sg->row0 + i;
            int64_t t = sg->pos0 + i;
            int o = (int)(t % r);
            int slot = ov ? r + o : o;
            const float *pk = ws->cproj_kv + (size_t)row * width, *ps = ws->cproj_sc + (size_t)row * width;
            float *sk = st->kv + (size_t)slot * width, *ss = st->score + (size_t)slot * width;
            memcpy(sk, pk, (size_t)width * 4);
            if (cw->ape) di_add_f32(ss, ps, cw->ape + (size_t)o * width, (size_t)width);
            else memcpy(ss, ps, (size_t)width * 4);
            if ((t + 1) % r) continue;
            pool_group(st, r, ov, hd, ws->emit32 + (size_t)ne * hd);
            ws->emit_pos[ne] = t + 1 - r; /* RoPE at the group's first position */
            ws->emit_row[ne] = t / r;
            ws->emit_seg[ne] = s;
            ne++;
            if (ov) { /* the completed group becomes the previous one */
                memcpy(st->kv, st->kv + (size_t)r * width, (size_t)r * width * 4);
                memcpy(st->score, st->score + (size_t)r * width, (size_t)r * width * 4);
            }
        }
    }
    di_f32_to_bf16_n(ws->emit32, ws->emit16, (size_t)ne * hd);
    return ne;
}

/* Ungated (V4.1 ratio 1): every token emits wkv.x (BF16 linear) as row t. */
static int run_plain(di_fwd *f, const di_compressor_w *cw, const uint16_t *xn) {
    const di_model_config *c = f->cfg;
    di_ws *ws = f->ws;
    di_gemm(f->x, f->M, xn, (size_t)c->hidden_size, &cw->wkv, 0, NULL, ws->emit16, (size_t)cw->hd);
    int ne = 0;
    for (int s = 0; s < f->nseg; s++)
        for (int i = 0; i < f->segs[s].nrows; i++, ne++) {
            ws->emit_pos[ne] = ws->emit_row[ne] = f->segs[s].pos0 + i;
            ws->emit_seg[ne] = s;
        }
    return ne;
}

static void store_rows(di_fwd *f, int layer, int ne, const uint16_t *rows, int hd, int ikey) {
    for (int e = 0; e < ne; e++) {
        di_layer_state *ls = &f->segs[f->ws->emit_seg[e]].seq->layers[layer];
        di_rowstore *store = ikey ? &ls->ikey : &ls->ckv;
        memcpy(di_rowstore_row(store, f->ws->emit_row[e]), rows + (size_t)e * hd, (size_t)hd * 2);
    }
}

/* V4.1: index keys (owners) and the compressed KV from the normalised latents in ws->emit16. */
static void latent_rows(di_fwd *f, const di_compressor_w *cw, const di_layer_cfg *L, int layer, int ne) {
    const di_model_config *c = f->cfg;
    di_ws *ws = f->ws;
    int hd = cw->hd, rd = (int)c->qk_rope_head_dim, ihd = (int)c->index_head_dim;
    const float *inv = di_fwd_inv_freq(f, L);
    float eps = (float)c->rms_norm_eps;
    if (cw->has_keys) { /* from the pre-RoPE latent */
        di_gemm(f->x, ne, ws->emit16, (size_t)hd, &cw->wk, 0, NULL, ws->emitk, (size_t)ihd);
        di_rmsnorm(f->x, ne, ws->emitk, (size_t)ihd, cw->k_norm, ihd, eps, ws->emitk, (size_t)ihd);
        di_rope(f->x, ne, ws->emitk, (size_t)ihd, 1, ihd, rd, ws->emit_pos, inv, 0);
        di_qat_fp4(f->x, ne, ws->emitk, (size_t)ihd, ihd, 32);
        store_rows(f, layer, ne, ws->emitk, ihd, 1);
        for (int e = 0; e < ne; e++) f->segs[ws->emit_seg[e]].seq->ikey_pub = layer;
    }
    di_rope(f->x, ne, ws->emit16, (size_t)hd, 1, hd, rd, ws->emit_pos, inv, 0);
    di_qat_fp4_e4m3(f->x, ne, ws->emit16, (size_t)hd, hd, 16);
    store_rows(f, layer, ne, ws->emit16, hd, 0);
}

void di_compressor_run(di_fwd *f, const di_compressor_w *cw, const di_layer_cfg *L, int layer, di_cmp_kind kind,
                       const uint16_t *xn) {
    const di_model_config *c = f->cfg;
    di_ws *ws = f->ws;
    int hd = cw->hd, rd = (int)c->qk_rope_head_dim;
    int ne = cw->gated ? run_gated(f, cw, layer, kind, xn) : run_plain(f, cw, xn);
    if (!ne) return;
    di_rmsnorm(f->x, ne, ws->emit16, (size_t)hd, cw->norm, hd, (float)c->rms_norm_eps, ws->emit16, (size_t)hd);
    if (kind == DI_CMP_LATENT) {
        latent_rows(f, cw, L, layer, ne);
        return;
    }
    di_rope(f->x, ne, ws->emit16, (size_t)hd, 1, hd, rd, ws->emit_pos, di_fwd_inv_freq(f, L), 0);
    if (kind == DI_CMP_MAIN) {
        di_qat_fp8(f->x, ne, ws->emit16, (size_t)hd, hd - rd, 64);
    } else {
        di_hadamard128(f->x, ne, ws->emit16, (size_t)hd, hd / 128);
        di_qat_fp4(f->x, ne, ws->emit16, (size_t)hd, hd, 32);
    }
    store_rows(f, layer, ne, ws->emit16, hd, kind == DI_CMP_INDEX);
}
