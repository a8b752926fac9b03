/* compressor.c — the V4 gated KV compressor (compressor.h). */
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

void di_compressor_run(di_fwd *f, const di_compressor_w *cw, const di_layer_cfg *L, int layer, di_cmp_kind kind,
                       const uint16_t *xn) {
    const di_model_config *c = f->cfg;
    di_ws *ws = f->ws;
    int d = (int)c->hidden_size, hd = cw->hd, r = cw->ratio, ov = cw->overlap;
    int width = (ov ? 2 : 1) * hd, rd = (int)c->qk_rope_head_dim;
    /* fp32 projections (the reference promotes the BF16 weights and input) */
    di_gemm(f->x, f->M, xn, (size_t)d, &cw->wkv, 0, ws->cproj_kv, NULL, (size_t)width);
    di_gemm(f->x, f->M, xn, (size_t)d, &cw->wgate, 0, ws->cproj_sc, NULL, (size_t)width);

    int ne = 0;
    for (int s = 0; s < f->nseg; s++) {
        const di_seg *sg = &f->segs[s];
        di_layer_state *ls = &sg->seq->layers[layer];
        di_cmp_state *st = kind == DI_CMP_MAIN ? &ls->cmp : &ls->icmp;
        for (int i = 0; i < sg->nrows; i++) {
            int row = sg->row0 + i;
            int64_t t = sg->pos0 + i;
            int o = (int)(t % r);
            int slot = ov ? r + o : o;
            const float *pk = ws->cproj_kv + (size_t)row * width, *ps = ws->cproj_sc + (size_t)row * width;
            float *sk = st->kv + (size_t)slot * width, *ss = st->score + (size_t)slot * width;
            const float *ape = cw->ape + (size_t)o * width;
            memcpy(sk, pk, (size_t)width * 4);
            di_add_f32(ss, ps, ape, (size_t)width);
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
    if (!ne) return;
    di_f32_to_bf16_n(ws->emit32, ws->emit16, (size_t)ne * hd);
    di_rmsnorm(f->x, ne, ws->emit16, (size_t)hd, cw->norm, hd, (float)c->rms_norm_eps, ws->emit16, (size_t)hd);
    di_rope(f->x, ne, ws->emit16, (size_t)hd, 1, hd, rd, ws->emit_pos, di_fwd_inv_freq(f, L), 0);
    if (kind == DI_CMP_MAIN) {
        di_qat_fp8(f->x, ne, ws->emit16, (size_t)hd, hd - rd, 64);
    } else {
        di_hadamard128(f->x, ne, ws->emit16, (size_t)hd, hd / 128);
        di_qat_fp4(f->x, ne, ws->emit16, (size_t)hd, hd, 32);
    }
    for (int e = 0; e < ne; e++) {
        di_layer_state *ls = &f->segs[ws->emit_seg[e]].seq->layers[layer];
        di_rowstore *store = kind == DI_CMP_MAIN ? &ls->ckv : &ls->ikey;
        memcpy(di_rowstore_row(store, ws->emit_row[e]), ws->emit16 + (size_t)e * hd, (size_t)hd * 2);
    }
}
