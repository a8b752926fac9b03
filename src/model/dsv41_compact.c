/* dsv41_compact.c — compact prefill of the late layers (dsv41_compact.h). */
#include "model/dsv41_compact.h"

#include <stdlib.h>
#include <string.h>

int di_v41_late_layer(const di_model_config *c) {
    int last = -1;
    for (int i = 0; i < c->n_kv_source_layer_ids; i++)
        if (c->kv_source_layer_ids[i] > last) last = c->kv_source_layer_ids[i];
    return last < 0 ? (int)c->n_layers : last + 1;
}

deepinfer_status di_v41_compact_check(const di_model_config *c, int64_t keep, int64_t draft, di_error *err) {
    const deepinfer_status E = DEEPINFER_ERR_INVALID_ARGUMENT;
    if (c->arch != DI_ARCH_V41)
        return di_error_set(err, E,
                            "compact prefill (YOCO_PREFILL_TRUNCATION_MODE=compact) needs a deepseek_v41 model; "
                            "this is %s (its layers all own global KV)",
                            di_arch_name(c->arch));
    int late = di_v41_late_layer(c);
    if (late >= c->n_layers)
        return di_error_set(err, E, "compact prefill: the model has no layer after its last KV source");
    for (int l = late; l < c->n_layers; l++) {
        const di_layer_cfg *L = &c->layers[l];
        if (L->engram >= 0 || L->has_compressor || L->has_index_keys)
            return di_error_set(err, E,
                                "compact prefill: layer %d (after the last KV source, layer %d) has %s; bounded "
                                "replay is valid only when none sits there (architecture.md §6.5)",
                                l, late - 1, L->engram >= 0 ? "Engram" : L->has_compressor ? "a compressor" : "index keys");
    }
    if (keep < c->sliding_window + draft)
        return di_error_set(err, E,
                            "YOCO_PREFILL_KEEP_TOKENS %lld is below sliding_window %lld + the longest draft %lld = %lld",
                            (long long)keep, (long long)c->sliding_window, (long long)draft,
                            (long long)(c->sliding_window + draft));
    return DEEPINFER_OK;
}

static deepinfer_status ensure_buffers(di_core *core, di_error *err) {
    if (core->keep) return DEEPINFER_OK;
    size_t n = (size_t)core->max_rows;
    core->keep = malloc(n * sizeof *core->keep);
    core->ktok = malloc(n * sizeof *core->ktok);
    core->kpos = malloc(n * sizeof *core->kpos);
    core->klo = malloc(n * sizeof *core->klo);
    if (!core->keep || !core->ktok || !core->kpos || !core->klo)
        return di_error_set(err, DEEPINFER_ERR_OUT_OF_MEMORY, "out of memory for the compact prefill tables");
    return DEEPINFER_OK;
}

/* Rows keep[j] -> j of a [M][row_bytes] buffer in backend memory (keep increasing, keep[j] >= j:
 * in place). Runs of consecutive rows move in one copy each, in pieces no longer than the run's
 * shift, so that no copy's source and destination overlap; the copies run in order (stream order
 * on a device). */
static void gather(di_exec *x, void *buf, size_t row_bytes, const int *keep, int n) {
    char *p = buf;
    for (int j = 0; j < n;) {
        if (keep[j] == j) {
            j++;
            continue;
        }
        int r = 1;
        while (j + r < n && keep[j + r] == keep[j] + r) r++;
        int shift = keep[j] - j;
        for (int o = 0; o < r;) {
            int k = r - o < shift ? r - o : shift;
            size_t bytes = (size_t)k * row_bytes;
            di_copy_2d(x, 1, p + (size_t)(keep[j] + o) * row_bytes, bytes, p + (size_t)(j + o) * row_bytes, bytes,
                       bytes);
            o += k;
        }
        j += r;
    }
}

int di_v41_compact_identity(const di_fwd *f, const di_v4_batch *b, int r0) {
    int64_t win = f->cfg->sliding_window;
    for (int m = 0; m < f->M; m++) {
        int64_t lo = b->late_from[r0 + m], p = f->pos[m];
        if (lo > 0 && (p < lo || p - win + 1 < lo)) return 0;
    }
    return 1;
}

deepinfer_status di_v41_compact_rows(di_core *core, di_fwd *f, const di_v4_batch *b, int r0, di_error *err) {
    deepinfer_status st = ensure_buffers(core, err);
    if (st) return st;
    const di_model_config *c = f->cfg;
    di_ws *ws = f->ws;
    di_tabs *t = &ws->t;
    int n = 0, ns = 0;
    for (int s = 0; s < f->nseg; s++) {
        di_seg sg = f->segs[s]; /* a copy: segs[ns <= s] is rewritten below */
        int64_t lo = b->late_from[r0 + sg.row0];
        int first = sg.nrows;
        for (int i = 0; i < sg.nrows; i++) {
            if (b->late_from[r0 + sg.row0 + i] != lo)
                return di_error_set(err, DEEPINFER_ERR_INVALID_ARGUMENT,
                                    "batch row %d: late_from %lld differs from its sequence's %lld", r0 + sg.row0 + i,
                                    (long long)b->late_from[r0 + sg.row0 + i], (long long)lo);
            if (first == sg.nrows && sg.pos0 + i >= lo) first = i;
        }
        if (first == sg.nrows) continue; /* the whole segment is before its tail */
        for (int i = first; i < sg.nrows; i++, n++) {
            core->keep[n] = sg.row0 + i;
            core->ktok[n] = f->tokens[sg.row0 + i];
            core->kpos[n] = f->pos[sg.row0 + i];
            t->row_seg[n] = ns;
        }
        int cnt = sg.nrows - first;
        f->segs[ns] = (di_seg){.seq = sg.seq, .row0 = n - cnt, .nrows = cnt, .pos0 = sg.pos0 + first};
        t->seg_row0[ns] = n - cnt;
        t->seg_nrows[ns] = cnt;
        t->seg_pos0[ns] = sg.pos0 + first;
        core->klo[ns] = lo;
        ns++;
    }
    /* what crosses layers per row: the residual, the carried pre, the latest top-k and candidate blocks */
    size_t hcd = (size_t)(c->hc_mult * c->hidden_size);
    gather(f->x, core->R, hcd * 2, core->keep, n);
    gather(f->x, ws->pre_in, 4 * sizeof(float), core->keep, n);
    gather(f->x, ws->topk, (size_t)c->index_topk * sizeof(int), core->keep, n);
    gather(f->x, ws->ntopk, sizeof(int), core->keep, n);
    if (ws->cand) {
        gather(f->x, ws->cand, (size_t)c->candidate_topk_blocks * sizeof(int), core->keep, n);
        gather(f->x, ws->ncand, sizeof(int), core->keep, n);
    }
    f->M = n;
    f->nseg = ns;
    f->tokens = f->dtok = core->ktok;
    f->pos = core->kpos;
    f->win_lo = core->klo;
    int rd = (int)c->qk_rope_head_dim; /* the tables are per position: the same bits as the full pass's rows */
    if (di_exec_on_device(f->x)) { /* built on the host, then copied (di_core_fwd_init's way) */
        gather(f->x, ws->tok, sizeof *ws->tok, core->keep, n); /* it holds the pass's tokens (device-sampled too) */
        f->dtok = ws->tok;
        size_t h = (size_t)n * (size_t)(rd / 2);
        float *tb = ws->t.rope;
        di_rope_table(n, core->kpos, core->inv_main, rd, tb, tb + h);
        di_rope_table(n, core->kpos, core->inv_cmp, rd, tb + 2 * h, tb + 3 * h);
        di_copy_h2d(f->x, ws->rope_cs[0], tb, h * sizeof *tb);
        di_copy_h2d(f->x, ws->rope_sn[0], tb + h, h * sizeof *tb);
        di_copy_h2d(f->x, ws->rope_cs[1], tb + 2 * h, h * sizeof *tb);
        di_copy_h2d(f->x, ws->rope_sn[1], tb + 3 * h, h * sizeof *tb);
    } else {
        di_rope_table(n, core->kpos, core->inv_main, rd, ws->rope_cs[0], ws->rope_sn[0]);
        di_rope_table(n, core->kpos, core->inv_cmp, rd, ws->rope_cs[1], ws->rope_sn[1]);
    }
    return DEEPINFER_OK;
}

deepinfer_status di_v41_compact_logits(di_core *core, di_fwd *f, const di_v4_batch *b, int r0, int k,
                                       const di_wmat *head, di_error *err) {
    const di_model_config *c = f->cfg;
    int d = (int)c->hidden_size, V = (int)c->vocab_size;
    int j = 0;
    for (int i = 0; i < b->n_logits;) {
        int row = b->logit_rows[i] - r0;
        if (row < 0) {
            i++;
            continue;
        }
        if (row >= k) break;
        while (j < f->M && core->keep[j] < row) j++;
        if (j >= f->M || core->keep[j] != row)
            return di_error_set(err, DEEPINFER_ERR_INVALID_ARGUMENT,
                                "batch row %d: logits asked of a prompt row before the compact prefill tail "
                                "(position %lld < %lld; YOCO_PREFILL_TRUNCATION_MODE=compact gives no prompt logits)",
                                r0 + row, (long long)b->pos[r0 + row], (long long)b->late_from[r0 + row]);
        int n = 1; /* a run consecutive in both the logit rows and the compacted rows: one GEMM */
        while (i + n < b->n_logits && b->logit_rows[i + n] - r0 < k && j + n < f->M &&
               b->logit_rows[i + n] == b->logit_rows[i] + n && core->keep[j + n] == row + n)
            n++;
        /* di_core_logits' destinations: device logits stay there (logits_on_device) or come back */
        int dev_keep = core->dlogits && b->logits_on_device;
        float *out = dev_keep ? core->dlogits + (size_t)i * V : core->dlogits ? core->dlogits : b->logits + (size_t)i * V;
        di_gemm(f->x, n, f->ws->xn + (size_t)j * d, (size_t)d, head, 0, out, NULL, (size_t)V);
        if (core->dlogits && !dev_keep) di_copy_d2h(f->x, b->logits + (size_t)i * V, out, sizeof(float) * (size_t)n * V);
        i += n;
        j += n;
    }
    return DEEPINFER_OK;
}
