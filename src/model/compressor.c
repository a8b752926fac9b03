/* compressor.c — the KV compressors (compressor.h). */
#include "model/compressor.h"

/* The step buffers of one compressor run. V4's index compressor has its own (ws->icproj_*, iemit*), so that
 * it can run beside the attention's compressor on another line of a recorded step (attention.c). */
typedef struct cmp_bufs {
    float *proj_kv, *proj_sc, *e32;
    uint16_t *e16;
} cmp_bufs;

static cmp_bufs bufs_of(const di_ws *ws, di_cmp_kind kind) {
    if (kind == DI_CMP_INDEX) return (cmp_bufs){ws->icproj_kv, ws->icproj_sc, ws->iemit32, ws->iemit16};
    return (cmp_bufs){ws->cproj_kv, ws->cproj_sc, ws->emit32, ws->emit16};
}

/* Gated compressor: feed every token to its sequence's state in position
 * order; completed groups are pooled into ws->emit16 (bf16, not yet
 * normalised). The emissions follow from the positions alone, so the host
 * lists them (host tables) and one op updates the states and pools.
 * Returns the number of emitted rows. */
static int run_gated(di_fwd *f, const di_compressor_w *cw, int layer, di_cmp_kind kind, const uint16_t *xn) {
    const di_model_config *c = f->cfg;
    di_ws *ws = f->ws;
    di_tabs *t = &ws->t;
    int d = (int)c->hidden_size, hd = cw->hd, r = cw->ratio, ov = cw->overlap;
    int width = (ov ? 2 : 1) * hd;
    /* fp32 projections (the reference promotes the BF16 weights and input) */
    const cmp_bufs B = bufs_of(ws, kind);
    di_gemm2(f->x, f->M, xn, (size_t)d, &cw->wkv, &cw->wgate, 0, B.proj_kv, NULL, B.proj_sc, NULL, (size_t)width);
    int ne = 0, groups = 1; /* blocks of r slots in the state (seq_state.h): the same for every sequence */
    for (int s = 0; s < f->nseg; s++) {
        const di_seg *sg = &f->segs[s];
        di_layer_state *ls = &sg->seq->layers[layer];
        di_cmp_state *st = kind == DI_CMP_INDEX ? &ls->icmp : &ls->cmp;
        t->skv[s] = st->kv;
        t->ssc[s] = st->score;
        groups = st->slots / r;
        for (int i = 0; i < sg->nrows; i++) {
            int64_t p = sg->pos0 + i;
            t->emit[sg->row0 + i] = (p + 1) % r ? -1 : ne;
            if ((p + 1) % r) continue;
            t->emit_pos[ne] = p + 1 - r; /* RoPE at the group's first position */
            t->emit_row[ne] = p / r;
            t->emit_seg[ne] = s;
            ne++;
        }
    }
    di_cmp_gated_rows(f->x, f->M, t->row_seg, t->emit, f->pos, t->skv, t->ssc, B.proj_kv, B.proj_sc, cw->ape, r, ov,
                      groups, hd, B.e32);
    return ne;
}

/* Recorded steps (di_exec_fixed_shapes: a CUDA graph) launch the emission
 * ops for every row, whatever the positions: the padded emissions are
 * computed like the others (rows are independent) and stored nowhere (NULL
 * destination: the backend's sink). Returns the launch count; the CPU
 * never pads. */
static int pad_emissions(di_fwd *f, int ne) {
    if (!di_exec_fixed_shapes(f->x)) return ne;
    di_tabs *t = &f->ws->t;
    for (int e = ne; e < f->M; e++) {
        t->emit_pos[e] = t->emit_row[e] = 0;
        t->emit_seg[e] = -1;
    }
    return f->M;
}

/* Ungated (V4.1 ratio 1): every token emits wkv.x (BF16 linear) as row t. */
static int run_plain(di_fwd *f, const di_compressor_w *cw, const uint16_t *xn) {
    const di_model_config *c = f->cfg;
    di_ws *ws = f->ws;
    di_tabs *t = &ws->t;
    di_gemm(f->x, f->M, xn, (size_t)c->hidden_size, &cw->wkv, 0, NULL, ws->emit16, (size_t)cw->hd);
    int ne = 0;
    for (int s = 0; s < f->nseg; s++)
        for (int i = 0; i < f->segs[s].nrows; i++, ne++) {
            t->emit_pos[ne] = t->emit_row[ne] = f->segs[s].pos0 + i;
            t->emit_seg[ne] = s;
        }
    return ne;
}

/* Emitted rows into the sequences' stores (destinations from the page tables). */
static void store_rows(di_fwd *f, int layer, int ne, const uint16_t *rows, int hd, int ikey) {
    di_tabs *t = &f->ws->t;
    for (int e = 0; e < ne; e++) {
        if (t->emit_seg[e] < 0) { /* padded (pad_emissions) */
            t->dst[e] = NULL;
            continue;
        }
        di_layer_state *ls = &f->segs[t->emit_seg[e]].seq->layers[layer];
        t->dst[e] = di_rowstore_row(ikey ? &ls->ikey : &ls->ckv, t->emit_row[e]);
    }
    di_scatter_rows(f->x, ne, NULL, rows, (size_t)hd, t->dst, hd);
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
        di_rope(f->x, ne, ws->emitk, (size_t)ihd, 1, ihd, rd, ws->t.emit_pos, inv, 0);
        di_qat_fp4(f->x, ne, ws->emitk, (size_t)ihd, ihd, 32);
        store_rows(f, layer, ne, ws->emitk, ihd, 1);
        for (int e = 0; e < ne; e++)
            if (ws->t.emit_seg[e] >= 0) f->segs[ws->t.emit_seg[e]].seq->ikey_pub = layer;
    }
    di_rope(f->x, ne, ws->emit16, (size_t)hd, 1, hd, rd, ws->t.emit_pos, inv, 0);
    di_qat_fp4_e4m3(f->x, ne, ws->emit16, (size_t)hd, hd, 16);
    store_rows(f, layer, ne, ws->emit16, hd, 0);
}

void di_compressor_run(di_fwd *f, const di_compressor_w *cw, const di_layer_cfg *L, int layer, di_cmp_kind kind,
                       const uint16_t *xn) {
    const di_model_config *c = f->cfg;
    di_ws *ws = f->ws;
    int hd = cw->hd, rd = (int)c->qk_rope_head_dim;
    const cmp_bufs B = bufs_of(ws, kind);
    int ne = cw->gated ? run_gated(f, cw, layer, kind, xn) : run_plain(f, cw, xn);
    ne = pad_emissions(f, ne);
    if (cw->gated) di_f32_to_bf16_x(f->x, B.e32, B.e16, (size_t)ne * hd);
    if (!ne) return;
    di_rmsnorm(f->x, ne, B.e16, (size_t)hd, cw->norm, hd, (float)c->rms_norm_eps, B.e16, (size_t)hd);
    if (kind == DI_CMP_LATENT) {
        latent_rows(f, cw, L, layer, ne);
        return;
    }
    di_rope(f->x, ne, B.e16, (size_t)hd, 1, hd, rd, ws->t.emit_pos, di_fwd_inv_freq(f, L), 0);
    if (kind == DI_CMP_MAIN) {
        di_qat_fp8(f->x, ne, B.e16, (size_t)hd, hd - rd, 64);
    } else {
        di_hadamard128(f->x, ne, B.e16, (size_t)hd, hd / 128);
        di_qat_fp4(f->x, ne, B.e16, (size_t)hd, hd, 32);
    }
    store_rows(f, layer, ne, B.e16, hd, kind == DI_CMP_INDEX);
}
