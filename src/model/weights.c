/* weights.c — binding validated checkpoint tensors to packed weights (weights.h). */
#include "model/weights.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/numfmt.h"
#include "model/moe_ep.h"
#include "model/wload.h"

#define NAME_MAX_LEN 256

static const di_tensor *get_tensor(const di_weight_spec *spec, const char *name, di_error *err) {
    const di_tensor *t = di_spec_get(spec, "%s", name);
    if (!t) di_error_set(err, DEEPINFER_ERR_NOT_FOUND, "tensor %s: missing or not validated", name);
    return t;
}

/* Device backends keep weights in their checkpoint form only (no host
 * panels); the CPU packs from the mapping in place (wload.h). */
static int on_device(void) { return !di_allocator_is_host(); }

static deepinfer_status bind_vec_host(float **out, const di_weight_spec *spec, di_error *err, const char *name) {
    *out = NULL;
    const di_tensor *t = get_tensor(spec, name, err);
    if (!t) return err ? err->code : DEEPINFER_ERR_NOT_FOUND;
    size_t n = (size_t)t->numel;
    float *v = aligned_alloc(64, ((n ? n : 1) * 4 + 63) & ~(size_t)63);
    unsigned char *d = v ? di_wload_copy(t, err) : NULL;
    if (!d) {
        free(v);
        return v ? err->code : di_error_set(err, DEEPINFER_ERR_OUT_OF_MEMORY, "tensor %s: out of memory", name);
    }
    for (size_t i = 0; i < n; i++) {
        if (t->dtype == DI_DTYPE_BF16) {
            uint16_t h;
            memcpy(&h, d + 2 * i, 2);
            v[i] = di_bf16_to_f32(h);
        } else if (t->dtype == DI_DTYPE_F32) {
            memcpy(&v[i], d + 4 * i, 4);
        } else {
            free(v), free(d);
            return di_error_set(err, DEEPINFER_ERR_FORMAT, "tensor %s: expected BF16 or F32, found %s", name,
                                di_dtype_name(t->dtype));
        }
    }
    free(d);
    *out = v;
    return DEEPINFER_OK;
}

/* A host copy moved into backend memory (the host allocator keeps it). */
static deepinfer_status to_backend(void **p, size_t bytes, di_error *err, const char *name) {
    if (di_allocator_is_host() || !*p) return DEEPINFER_OK;
    void *d = di_dev_dup(*p, bytes ? bytes : 1);
    free(*p);
    *p = d;
    return d ? DEEPINFER_OK : di_error_set(err, DEEPINFER_ERR_OUT_OF_MEMORY, "tensor %s: out of backend memory", name);
}

deepinfer_status di_bind_vec_host(float **out, const di_weight_spec *spec, di_error *err, const char *fmt, ...) {
    char name[NAME_MAX_LEN];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(name, sizeof name, fmt, ap);
    va_end(ap);
    return bind_vec_host(out, spec, err, name);
}

deepinfer_status di_bind_vec(float **out, const di_weight_spec *spec, di_error *err, const char *fmt, ...) {
    char name[NAME_MAX_LEN];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(name, sizeof name, fmt, ap);
    va_end(ap);
    deepinfer_status st = bind_vec_host(out, spec, err, name);
    if (st) return st;
    const di_tensor *t = di_spec_get(spec, "%s", name);
    return to_backend((void **)out, (size_t)t->numel * sizeof(float), err, name);
}

deepinfer_status di_bind_bf16(uint16_t **out, const di_weight_spec *spec, di_error *err, const char *fmt, ...) {
    char name[NAME_MAX_LEN];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(name, sizeof name, fmt, ap);
    va_end(ap);
    *out = NULL;
    const di_tensor *t = get_tensor(spec, name, err);
    if (!t) return err ? err->code : DEEPINFER_ERR_NOT_FOUND;
    if (t->dtype != DI_DTYPE_BF16) return di_error_set(err, DEEPINFER_ERR_FORMAT, "tensor %s: expected BF16", name);
    size_t n = (size_t)t->nbytes;
    if (!(*out = di_dev_alloc(n ? n : 2)))
        return di_error_set(err, DEEPINFER_ERR_OUT_OF_MEMORY, "tensor %s: out of backend memory (%zu bytes)", name, n);
    deepinfer_status st = di_wload_to_dev(*out, t, 0, n, 0, err); /* host: read straight into the copy */
    di_wload_release(t);
    if (st) {
        di_dev_free(*out);
        *out = NULL;
    }
    return st;
}

/* Pack a linear `base` (base.weight [+ base.scale]) by its stored dtype. */
static deepinfer_status bind_linear_rows(di_wmat *out, const di_model_config *cfg, const di_weight_spec *spec,
                                         const char *base, int row0, int nrows, di_error *err) {
    char wn[NAME_MAX_LEN + 8], sn[NAME_MAX_LEN + 8];
    snprintf(wn, sizeof wn, "%.255s.weight", base);
    snprintf(sn, sizeof sn, "%.255s.scale", base);
    memset(out, 0, sizeof *out);
    const di_tensor *w = get_tensor(spec, wn, err);
    if (!w) return err ? err->code : DEEPINFER_ERR_NOT_FOUND;
    if (w->ndim != 2) return di_error_set(err, DEEPINFER_ERR_FORMAT, "tensor %s: expected 2 dims", wn);
    int n = (int)w->shape[0], k = (int)w->shape[1];
    if (nrows < 0) nrows = n;
    di_wfmt fmt;
    const di_tensor *s = NULL;
    switch (w->dtype) {
    case DI_DTYPE_F8_E4M3: fmt = DI_WFMT_FP8; break;
    case DI_DTYPE_I8: fmt = DI_WFMT_FP4; k *= 2; break;
    case DI_DTYPE_BF16: fmt = DI_WFMT_BF16; break;
    case DI_DTYPE_F32: fmt = DI_WFMT_F32; break;
    default:
        return di_error_set(err, DEEPINFER_ERR_FORMAT, "tensor %s: unsupported dtype %s for a linear", wn,
                            di_dtype_name(w->dtype));
    }
    if (fmt == DI_WFMT_FP8 || fmt == DI_WFMT_FP4) {
        s = get_tensor(spec, sn, err);
        if (!s) return err ? err->code : DEEPINFER_ERR_NOT_FOUND;
    }
    int block = cfg->fp8_block_in;
    if (fmt == DI_WFMT_FP8 && cfg->fp8_block_out != cfg->fp8_block_in)
        return di_error_set(err, DEEPINFER_ERR_UNSUPPORTED, "tensor %s: non-square FP8 blocks %dx%d", wn,
                            cfg->fp8_block_out, cfg->fp8_block_in);
    /* the checkpoint bytes of these rows (ops.h di_wmat_raw): weights, then scales */
    size_t rowb = fmt == DI_WFMT_FP4 ? (size_t)k / 2 : (size_t)k * (fmt == DI_WFMT_FP8 ? 1 : fmt == DI_WFMT_BF16 ? 2 : 4);
    size_t soff = 0, sb = 0;
    if (fmt == DI_WFMT_FP8) {
        soff = (size_t)(row0 / block) * (size_t)(k / block);
        sb = (size_t)((nrows + block - 1) / block) * (size_t)(k / block);
    } else if (fmt == DI_WFMT_FP4) {
        soff = (size_t)row0 * (size_t)(k / 32);
        sb = (size_t)nrows * (size_t)(k / 32);
    }
    deepinfer_status st;
    if (on_device()) { /* streamed file -> staging ring -> device, in the checkpoint form */
        st = di_wmat_alloc_raw(out, fmt, nrows, k, fmt == DI_WFMT_FP8 ? block : 0, (size_t)nrows * rowb, sb, err);
        if (!st) st = di_wload_to_dev((void *)out->raw_w, w, (uint64_t)row0 * rowb, (size_t)nrows * rowb, 0, err);
        if (!st && s) st = di_wload_to_dev((void *)out->raw_scale, s, soff, sb, 1, err);
        if (st) di_wmat_free(out);
    } else { /* packed from the mapping (or a copy of a generated tensor), file pages dropped behind */
        void *wo = NULL, *so = NULL;
        const uint8_t *wv = di_wload_view(w, &wo, err), *sv = NULL;
        st = wv ? DEEPINFER_OK : err->code;
        if (!st && s) {
            sv = di_wload_view(s, &so, err);
            st = sv ? di_wload_check_e8m0(s, sv, (size_t)s->nbytes, 0, err) : err->code;
        }
        if (!st) st = di_wmat_pack_rows(out, fmt, wv, sv, row0, nrows, k, block, err);
        if (!st && !wo && !so) /* borrowed from the mapping, which the model keeps open */
            st = di_wmat_set_raw(out, wv + (size_t)row0 * rowb, (size_t)nrows * rowb, sv ? sv + soff : NULL, sb, err);
        if (st) di_wmat_free(out);
        free(wo), free(so);
    }
    di_wload_release(w);
    if (s) di_wload_release(s);
    if (st) return di_error_prefix(err, "tensor %s", wn);
    return DEEPINFER_OK;
}

deepinfer_status di_bind_linear(di_wmat *out, const di_model_config *cfg, const di_weight_spec *spec, di_error *err,
                                const char *fmt, ...) {
    char base[NAME_MAX_LEN];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(base, sizeof base, fmt, ap);
    va_end(ap);
    return bind_linear_rows(out, cfg, spec, base, 0, -1, err);
}

void di_hc_free(di_hc_w *h) {
    di_wmat_free(&h->fn);
    di_dev_free(h->dbase);
    di_dev_free(h->dscale);
    h->dbase = h->dscale = NULL;
}

deepinfer_status di_bind_hc(di_hc_w *h, const di_weight_spec *spec, const char *prefix, const char *site, di_error *err) {
    memset(h, 0, sizeof *h);
    char name[NAME_MAX_LEN];
    snprintf(name, sizeof name, "%shc_%s_fn", prefix, site);
    const di_tensor *fn = get_tensor(spec, name, err);
    if (!fn) return err ? err->code : DEEPINFER_ERR_NOT_FOUND;
    h->nmix = (int)fn->shape[0];
    if (h->nmix > 24) return di_error_set(err, DEEPINFER_ERR_UNSUPPORTED, "tensor %s: %d mixes (at most 24)", name, h->nmix);
    deepinfer_status st;
    if (fn->dtype != DI_DTYPE_F32)
        return di_error_set(err, DEEPINFER_ERR_FORMAT, "tensor %s: expected F32, found %s", name, di_dtype_name(fn->dtype));
    if (on_device()) { /* the device GEMM reads the F32 rows */
        st = di_wmat_alloc_raw(&h->fn, DI_WFMT_F32, (int)fn->shape[0], (int)fn->shape[1], 0, (size_t)fn->nbytes, 0, err);
        if (!st) st = di_wload_to_dev((void *)h->fn.raw_w, fn, 0, (size_t)fn->nbytes, 0, err);
    } else {
        void *own = NULL;
        const void *v = di_wload_view(fn, &own, err);
        st = v ? di_wmat_pack(&h->fn, DI_WFMT_F32, v, NULL, (int)fn->shape[0], (int)fn->shape[1], 0, err) : err->code;
        free(own);
    }
    di_wload_release(fn);
    if (st) return di_error_prefix(err, "tensor %s", name);
    float *v = NULL;
    if ((st = di_bind_vec_host(&v, spec, err, "%shc_%s_base", prefix, site))) return st;
    memcpy(h->base, v, sizeof(float) * (size_t)h->nmix);
    free(v);
    if ((st = di_bind_vec_host(&v, spec, err, "%shc_%s_scale", prefix, site))) return st;
    memcpy(h->scale, v, sizeof(float) * (h->nmix == 24 ? 3 : 1));
    free(v);
    h->dbase = di_dev_dup(h->base, sizeof h->base);
    h->dscale = di_dev_dup(h->scale, sizeof h->scale);
    if (!h->dbase || !h->dscale) return di_error_set(err, DEEPINFER_ERR_OUT_OF_MEMORY, "%shc_%s: out of memory", prefix, site);
    return DEEPINFER_OK;
}

/* A compressor `pfx` (attn.compressor / attn.indexer.compressor) of layer L:
 * V4 wkv, wgate, ape, norm; V4.1 wkv, norm, wgate when gated, and the
 * owner's index-key projection attn.indexer.wk / k_norm. */
static deepinfer_status bind_compressor(di_compressor_w *c, const di_model_config *cfg, const di_layer_cfg *L,
                                        const di_weight_spec *spec, const char *p, const char *pfx, int hd,
                                        di_error *err) {
    deepinfer_status st;
    memset(c, 0, sizeof *c);
    c->ratio = L->ratio;
    c->overlap = L->compressor_overlap;
    c->hd = hd;
    c->gated = L->compressor_gated;
    if ((st = di_bind_linear(&c->wkv, cfg, spec, err, "%s%s.wkv", p, pfx))) return st;
    if (c->gated && (st = di_bind_linear(&c->wgate, cfg, spec, err, "%s%s.wgate", p, pfx))) return st;
    if ((st = di_bind_vec(&c->norm, spec, err, "%s%s.norm.weight", p, pfx))) return st;
    if (cfg->arch == DI_ARCH_V4) return di_bind_vec(&c->ape, spec, err, "%s%s.ape", p, pfx);
    if (L->has_index_keys) {
        c->has_keys = 1;
        if ((st = di_bind_linear(&c->wk, cfg, spec, err, "%sattn.indexer.wk", p))) return st;
        if ((st = di_bind_vec(&c->k_norm, spec, err, "%sattn.indexer.k_norm.weight", p))) return st;
    }
    return DEEPINFER_OK;
}

static void compressor_free(di_compressor_w *c) {
    di_wmat_free(&c->wkv);
    di_wmat_free(&c->wgate);
    di_wmat_free(&c->wk);
    di_dev_free(c->ape);
    di_dev_free(c->norm);
    di_dev_free(c->k_norm);
}

/* wo_a: dequantised to BF16 (exact) and split into its output groups. A device backend keeps
 * the FP8 bytes and scales of each group instead wherever the groups hold whole scale blocks
 * (V4 128, V4.1 32: R = 1024): FP8 storage, BF16 math (dic.h DIC_WFMT_FP8B), the same BF16
 * values at half the bytes, streamed without a host copy; the device GEMMs read them directly
 * (docs/kernels/gemm-float.md: dic_gemm_fp8w_gemv.cu at M <= 4, dic_gemm_fp8w_mma.cu above,
 * mode 1 dic_gemm_fp8w_bd_g). Other block geometries upload the BF16 rows (the same bits). */
static deepinfer_status bind_wo_a(di_attn_w *a, const di_model_config *cfg, const di_weight_spec *spec, const char *p,
                                  di_error *err) {
    char wn[NAME_MAX_LEN], sn[NAME_MAX_LEN];
    snprintf(wn, sizeof wn, "%sattn.wo_a.weight", p);
    snprintf(sn, sizeof sn, "%sattn.wo_a.scale", p);
    const di_tensor *w = get_tensor(spec, wn, err), *s = w ? get_tensor(spec, sn, err) : NULL;
    if (!w || !s) return err ? err->code : DEEPINFER_ERR_NOT_FOUND;
    int G = (int)cfg->o_groups, R = (int)cfg->o_lora_rank, K = (int)w->shape[1];
    const int B = (int)cfg->fp8_block_in;
    const int fp8 = cfg->fp8_block_out == B && B > 0 && B % 16 == 0 && R % B == 0 && K % B == 0;
    if (!(a->wo_a = calloc((size_t)G, sizeof *a->wo_a)))
        return di_error_set(err, DEEPINFER_ERR_OUT_OF_MEMORY, "tensor %s: out of memory", wn);
    a->groups = G;
    deepinfer_status st = DEEPINFER_OK;
    if (on_device() && fp8) { /* each group's e4m3 rows and scale rows, streamed */
        size_t sb = (size_t)(R / B) * (size_t)(K / B);
        for (int g = 0; g < G && !st; g++) {
            di_wmat *o = &a->wo_a[g];
            st = di_wmat_alloc_raw(o, DI_WFMT_BF16, R, K, 0, (size_t)R * K, sb, err);
            if (!st) o->raw_fp8_block = B;
            if (!st) st = di_wload_to_dev((void *)o->raw_w, w, (uint64_t)g * R * K, (size_t)R * K, 0, err);
            if (!st) st = di_wload_to_dev((void *)o->raw_scale, s, (uint64_t)g * sb, sb, 1, err);
        }
    } else {
        void *wo = NULL, *so = NULL;
        const uint8_t *wv = di_wload_view(w, &wo, err), *sv = wv ? di_wload_view(s, &so, err) : NULL;
        size_t nk = (size_t)w->shape[0] * (size_t)K;
        float *f = sv ? malloc(nk * 4) : NULL;
        uint16_t *h = f ? malloc(nk * 2) : NULL;
        st = !sv ? err->code : !h ? di_error_set(err, DEEPINFER_ERR_OUT_OF_MEMORY, "tensor %s: out of memory", wn)
                                  : di_wload_check_e8m0(s, sv, (size_t)s->nbytes, 0, err);
        if (!st) {
            di_dequant_fp8_block(wv, sv, (size_t)w->shape[0], (size_t)K, (size_t)B, f);
            for (size_t i = 0; i < nk; i++) h[i] = di_f32_to_bf16(f[i]);
        }
        for (int g = 0; g < G && !st; g++) {
            if (!on_device()) st = di_wmat_pack_rows(&a->wo_a[g], DI_WFMT_BF16, h, NULL, g * R, R, K, 0, err);
            else if (!(st = di_wmat_alloc_raw(&a->wo_a[g], DI_WFMT_BF16, R, K, 0, (size_t)R * K * 2, 0, err)))
                di_dev_upload((void *)a->wo_a[g].raw_w, h + (size_t)g * R * K, (size_t)R * K * 2);
        }
        free(f), free(h), free(wo), free(so);
    }
    di_wload_release(w);
    di_wload_release(s);
    if (st) return di_error_prefix(err, "tensor %s", wn);
    return DEEPINFER_OK;
}

static deepinfer_status bind_attn(di_attn_w *a, const di_model_config *cfg, const di_layer_cfg *L,
                                  const di_weight_spec *spec, const char *p, di_error *err) {
    deepinfer_status st;
    memset(a, 0, sizeof *a);
    if ((st = di_bind_linear(&a->wq_a, cfg, spec, err, "%sattn.wq_a", p))) return st;
    if ((st = di_bind_linear(&a->wq_b, cfg, spec, err, "%sattn.wq_b", p))) return st;
    if ((st = di_bind_linear(&a->wkv, cfg, spec, err, "%sattn.wkv", p))) return st;
    if ((st = di_bind_linear(&a->wo_b, cfg, spec, err, "%sattn.wo_b", p))) return st;
    if ((st = di_bind_vec(&a->q_norm, spec, err, "%sattn.q_norm.weight", p))) return st;
    if ((st = di_bind_vec(&a->kv_norm, spec, err, "%sattn.kv_norm.weight", p))) return st;
    if ((st = di_bind_vec(&a->sink, spec, err, "%sattn.attn_sink", p))) return st;
    if ((st = bind_wo_a(a, cfg, spec, p, err))) return st;
    if (L->has_compressor) {
        a->has_cmp = 1;
        if ((st = bind_compressor(&a->cmp, cfg, L, spec, p, "attn.compressor", (int)cfg->head_dim, err))) return st;
    }
    if (L->has_index_query) {
        a->has_idx = 1;
        if ((st = di_bind_linear(&a->idx.wq_b, cfg, spec, err, "%sattn.indexer.wq_b", p))) return st;
        if ((st = di_bind_linear(&a->idx.wproj, cfg, spec, err, "%sattn.indexer.weights_proj", p))) return st;
        if (cfg->arch == DI_ARCH_V4 &&
            (st = bind_compressor(&a->idx.cmp, cfg, L, spec, p, "attn.indexer.compressor", (int)cfg->index_head_dim,
                                  err)))
            return st;
    }
    return DEEPINFER_OK;
}

static void attn_free(di_attn_w *a) {
    di_wmat_free(&a->wq_a);
    di_wmat_free(&a->wq_b);
    di_wmat_free(&a->wkv);
    di_wmat_free(&a->wo_b);
    if (a->wo_a)
        for (int g = 0; g < a->groups; g++) di_wmat_free(&a->wo_a[g]);
    free(a->wo_a);
    di_dev_free(a->q_norm), di_dev_free(a->kv_norm), di_dev_free(a->sink);
    compressor_free(&a->cmp);
    di_wmat_free(&a->idx.wq_b);
    di_wmat_free(&a->idx.wproj);
    compressor_free(&a->idx.cmp);
}

static deepinfer_status bind_moe(di_moe_w *m, const di_model_config *cfg, const di_layer_cfg *L,
                                 const di_weight_spec *spec, const char *p, int E, di_ep_model *ep, di_error *err) {
    deepinfer_status st;
    memset(m, 0, sizeof *m);
    m->n_experts = E;
    if ((st = di_bind_linear(&m->gate, cfg, spec, err, "%sffn.gate", p))) return st;
    if (L->hash_routed) {
        char n[NAME_MAX_LEN];
        snprintf(n, sizeof n, "%sffn.gate.tid2eid", p);
        const di_tensor *t = get_tensor(spec, n, err);
        if (!t) return err ? err->code : DEEPINFER_ERR_NOT_FOUND;
        m->tid2eid = malloc((size_t)t->numel * sizeof(int32_t));
        if (!m->tid2eid) return di_error_set(err, DEEPINFER_ERR_OUT_OF_MEMORY, "tensor %s: out of memory", n);
        unsigned char *raw = di_wload_copy(t, err);
        if (!raw) return err->code;
        for (uint64_t i = 0; i < t->numel; i++) {
            int64_t v;
            memcpy(&v, raw + 8 * i, 8);
            if (v < 0 || v >= E) {
                free(raw);
                return di_error_set(err, DEEPINFER_ERR_FORMAT, "tensor %s: expert id %lld at %llu is out of [0,%d)", n,
                                    (long long)v, (unsigned long long)i, E);
            }
            m->tid2eid[i] = (int32_t)v;
        }
        free(raw);
        int K = (int)t->shape[1];
        for (uint64_t r = 0; r < t->numel / (uint64_t)K; r++)
            for (int a = 0; a < K; a++)
                for (int b2 = a + 1; b2 < K; b2++)
                    if (m->tid2eid[r * (uint64_t)K + (uint64_t)a] == m->tid2eid[r * (uint64_t)K + (uint64_t)b2])
                        return di_error_set(err, DEEPINFER_ERR_FORMAT, "tensor %s: token %llu routes to expert %d twice",
                                            n, (unsigned long long)r, m->tid2eid[r * (uint64_t)K + (uint64_t)a]);
        if ((st = to_backend((void **)&m->tid2eid, (size_t)t->numel * sizeof(int32_t), err, n))) return st;
    } else {
        if ((st = di_bind_vec(&m->bias, spec, err, "%sffn.gate.bias", p))) return st;
    }
    m->w1 = calloc((size_t)E, sizeof(di_wmat));
    m->w2 = calloc((size_t)E, sizeof(di_wmat));
    m->w3 = calloc((size_t)E, sizeof(di_wmat));
    if (!m->w1 || !m->w2 || !m->w3) return di_error_set(err, DEEPINFER_ERR_OUT_OF_MEMORY, "experts: out of memory");
    int lo, hi; /* this rank's experts (moe_ep.h); the others stay unbound: their bytes are never read */
    di_ep_owned(ep, E, &lo, &hi);
    for (int e = lo; e < hi; e++) {
        if ((st = di_bind_linear(&m->w1[e], cfg, spec, err, "%sffn.experts.%d.w1", p, e))) return st;
        if ((st = di_bind_linear(&m->w2[e], cfg, spec, err, "%sffn.experts.%d.w2", p, e))) return st;
        if ((st = di_bind_linear(&m->w3[e], cfg, spec, err, "%sffn.experts.%d.w3", p, e))) return st;
    }
    if (cfg->n_shared_experts > 0) {
        m->has_shared = 1;
        if ((st = di_bind_linear(&m->sw1, cfg, spec, err, "%sffn.shared_experts.w1", p))) return st;
        if ((st = di_bind_linear(&m->sw2, cfg, spec, err, "%sffn.shared_experts.w2", p))) return st;
        if ((st = di_bind_linear(&m->sw3, cfg, spec, err, "%sffn.shared_experts.w3", p))) return st;
    }
    return di_ep_attach(ep, m, p, err);
}

static void moe_free(di_moe_w *m) {
    di_wmat_free(&m->gate);
    di_dev_free(m->bias);
    di_dev_free(m->tid2eid);
    for (int e = 0; e < m->n_experts; e++) {
        if (m->w1) di_wmat_free(&m->w1[e]);
        if (m->w2) di_wmat_free(&m->w2[e]);
        if (m->w3) di_wmat_free(&m->w3[e]);
    }
    free(m->w1), free(m->w2), free(m->w3);
    di_wmat_free(&m->sw1);
    di_wmat_free(&m->sw2);
    di_wmat_free(&m->sw3);
}

deepinfer_status di_bind_block(di_block_w *b, const di_model_config *cfg, const di_layer_cfg *L,
                               const di_weight_spec *spec, const char *prefix, int n_experts, di_ep_model *ep,
                               di_error *err) {
    deepinfer_status st;
    memset(b, 0, sizeof *b);
    if ((st = di_bind_hc(&b->hc_attn, spec, prefix, "attn", err))) return st;
    if ((st = di_bind_hc(&b->hc_ffn, spec, prefix, "ffn", err))) return st;
    if ((st = di_bind_vec(&b->attn_norm, spec, err, "%sattn_norm.weight", prefix))) return st;
    if ((st = di_bind_vec(&b->ffn_norm, spec, err, "%sffn_norm.weight", prefix))) return st;
    if ((st = bind_attn(&b->attn, cfg, L, spec, prefix, err))) return st;
    if ((st = bind_moe(&b->moe, cfg, L, spec, prefix, n_experts, ep, err))) return st;
    return DEEPINFER_OK;
}

void di_block_free(di_block_w *b) {
    di_hc_free(&b->hc_attn);
    di_hc_free(&b->hc_ffn);
    di_dev_free(b->attn_norm), di_dev_free(b->ffn_norm);
    attn_free(&b->attn);
    moe_free(&b->moe);
}

static size_t wbytes(const di_wmat *w) { return w ? w->bytes : 0; }

size_t di_block_bytes(const di_block_w *b) {
    size_t s = wbytes(&b->attn.wq_a) + wbytes(&b->attn.wq_b) + wbytes(&b->attn.wkv) + wbytes(&b->attn.wo_b);
    for (int g = 0; g < b->attn.groups; g++) s += wbytes(&b->attn.wo_a[g]);
    s += wbytes(&b->attn.cmp.wkv) + wbytes(&b->attn.cmp.wgate) + wbytes(&b->attn.cmp.wk);
    s += wbytes(&b->attn.idx.wq_b) + wbytes(&b->attn.idx.wproj);
    s += wbytes(&b->attn.idx.cmp.wkv) + wbytes(&b->attn.idx.cmp.wgate) + wbytes(&b->moe.gate);
    for (int e = 0; e < b->moe.n_experts; e++) s += wbytes(&b->moe.w1[e]) + wbytes(&b->moe.w2[e]) + wbytes(&b->moe.w3[e]);
    return s + wbytes(&b->moe.sw1) + wbytes(&b->moe.sw2) + wbytes(&b->moe.sw3);
}

deepinfer_status di_v4_weights_bind(di_v4_weights *w, const di_model_config *cfg, const di_weight_spec *spec,
                                    di_error *err) {
    return di_v4_weights_bind_ep(w, cfg, spec, NULL, err);
}

deepinfer_status di_v4_weights_bind_ep(di_v4_weights *w, const di_model_config *cfg, const di_weight_spec *spec,
                                       di_ep_model *ep, di_error *err) {
    deepinfer_status st;
    memset(w, 0, sizeof *w);
    if ((st = di_bind_bf16(&w->embed, spec, err, "embed.weight"))) return st;
    if ((st = di_bind_linear(&w->head, cfg, spec, err, "head"))) goto fail;
    if ((st = di_bind_vec(&w->norm, spec, err, "norm.weight"))) goto fail;
    if ((st = di_bind_hc(&w->hc_head, spec, "", "head", err))) goto fail;
    w->n_layers = cfg->n_layers;
    w->layers = calloc((size_t)cfg->n_layers, sizeof *w->layers);
    w->n_mtp = cfg->drafter == DI_DRAFTER_MTP ? cfg->n_stages : 0;
    w->mtp = calloc((size_t)(w->n_mtp ? w->n_mtp : 1), sizeof *w->mtp);
    if (!w->layers || !w->mtp) {
        st = di_error_set(err, DEEPINFER_ERR_OUT_OF_MEMORY, "out of memory binding layers");
        goto fail;
    }
    di_wload_prefetch(spec, "layers.0.");
    for (int l = 0; l < cfg->n_layers; l++) {
        char p[32];
        snprintf(p, sizeof p, "layers.%d.", l + 1);
        di_wload_prefetch(spec, l + 1 < cfg->n_layers ? p : "mtp."); /* the next layer's pages while this one binds */
        snprintf(p, sizeof p, "layers.%d.", l);
        if ((st = di_bind_block(&w->layers[l], cfg, &cfg->layers[l], spec, p, (int)cfg->n_routed_experts, ep, err))) goto fail;
        w->bytes += di_block_bytes(&w->layers[l]);
    }
    di_wload_prefetch_wait(); /* the drafter's read-ahead done before it binds */
    for (int s = 0; s < w->n_mtp; s++) {
        char p[32];
        snprintf(p, sizeof p, "mtp.%d.", s);
        di_mtp_w *m = &w->mtp[s];
        const di_layer_cfg *L = &cfg->layers[cfg->n_layers + s];
        if ((st = di_bind_block(&m->blk, cfg, L, spec, p, (int)cfg->stage_n_routed_experts, ep, err))) goto fail;
        if ((st = di_bind_linear(&m->e_proj, cfg, spec, err, "%se_proj", p))) goto fail;
        if ((st = di_bind_linear(&m->h_proj, cfg, spec, err, "%sh_proj", p))) goto fail;
        if ((st = di_bind_vec(&m->enorm, spec, err, "%senorm.weight", p))) goto fail;
        if ((st = di_bind_vec(&m->hnorm, spec, err, "%shnorm.weight", p))) goto fail;
        if ((st = di_bind_vec(&m->norm, spec, err, "%snorm.weight", p))) goto fail;
        if ((st = di_bind_hc(&m->hc_head, spec, p, "head", err))) goto fail;
        w->bytes += di_block_bytes(&m->blk) + m->e_proj.bytes + m->h_proj.bytes;
    }
    w->bytes += w->head.bytes + (size_t)(cfg->vocab_size * cfg->hidden_size * 2);
    di_wload_finish();
    return DEEPINFER_OK;
fail:
    di_wload_finish();
    di_v4_weights_free(w);
    return st;
}

void di_v4_weights_free(di_v4_weights *w) {
    if (!w) return;
    di_dev_free(w->embed);
    di_wmat_free(&w->head);
    di_dev_free(w->norm);
    di_hc_free(&w->hc_head);
    if (w->layers)
        for (int l = 0; l < w->n_layers; l++) di_block_free(&w->layers[l]);
    free(w->layers);
    if (w->mtp)
        for (int s = 0; s < w->n_mtp; s++) {
            di_block_free(&w->mtp[s].blk);
            di_wmat_free(&w->mtp[s].e_proj);
            di_wmat_free(&w->mtp[s].h_proj);
            di_dev_free(w->mtp[s].enorm), di_dev_free(w->mtp[s].hnorm), di_dev_free(w->mtp[s].norm);
            di_hc_free(&w->mtp[s].hc_head);
        }
    free(w->mtp);
    memset(w, 0, sizeof *w);
}
