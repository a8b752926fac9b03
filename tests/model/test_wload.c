/*
 * The streaming loader (src/model/wload.h, docs/loading.md) binds every
 * weight bitwise as the checkpoint says:
 *  - device path: a fake device backend (host memory behind a non-host
 *    allocator, so the binder takes the device path) whose staging ring is
 *    three buffers of 1000 bytes (chunks cut mid-row and mid-block) and
 *    whose copies run late — each only when its buffer is asked for again or
 *    at the end of the load, as an asynchronous copy engine would. Every
 *    weight's device bytes (weights and scales), every fp32 vector, the
 *    embedding and the Engram tables equal the checkpoint's bytes;
 *  - CPU path: packing from the mapping in place gives the same panels as
 *    packing an aligned whole-tensor copy (the loader before streaming).
 * On the V4 and V4.1 golden checkpoints and the tiny V4 one.
 */
#include <stdlib.h>
#include <string.h>

#include "io/numfmt.h"
#include "io/safetensors.h"
#include "model/config.h"
#include "model/tensor_spec.h"
#include "model/weights.h"
#include "model/weights_v41.h"
#include "ops/ops.h"
#include "test.h"

/* ---- the fake device: host memory, a tiny ring, late copies ---- */

#define RING 3
#define RING_CAP 1000

typedef struct fake_dev {
    unsigned char buf[RING][RING_CAP];
    void *dst[RING];
    size_t n[RING];
    int next, chunks;
    size_t max_chunk;
} fake_dev;

static void *fk_alloc(void *c, size_t b) {
    (void)c;
    return aligned_alloc(64, ((b ? b : 1) + 63) & ~(size_t)63);
}
static void fk_free(void *c, void *p) { (void)c, free(p); }
static void fk_zero(void *c, void *p, size_t b) { (void)c, memset(p, 0, b); }
static void fk_upload(void *c, void *d, const void *s, size_t b) { (void)c, memcpy(d, s, b); }

static void fk_land(fake_dev *f, int i) {
    if (f->dst[i]) memcpy(f->dst[i], f->buf[i], f->n[i]);
    f->dst[i] = NULL;
}

static void *fk_stage_get(void *c, size_t *cap) {
    fake_dev *f = c;
    fk_land(f, f->next); /* the copy that used this buffer lands only now */
    memset(f->buf[f->next], 0xA5, RING_CAP);
    *cap = RING_CAP;
    return f->buf[f->next];
}

static void fk_stage_put(void *c, void *buf, void *dst, size_t n) {
    fake_dev *f = c;
    int i = f->next;
    if (buf != f->buf[i]) abort(); /* the loader must hand back the buffer it was given */
    f->dst[i] = dst, f->n[i] = n;
    f->chunks++;
    if (n > f->max_chunk) f->max_chunk = n;
    f->next = (i + 1) % RING;
}

static void fk_stage_finish(void *c) {
    fake_dev *f = c;
    for (int i = 0; i < RING; i++) fk_land(f, i);
}

/* ---- walking the bound weights ---- */

typedef struct cmp_ctx {
    const di_model_config *cfg;
    const di_weight_spec *spec;
    int device;
    int checked, bad;
    char first_bad[320];
} cmp_ctx;

static void fail(cmp_ctx *c, const char *what) {
    if (!c->bad++) snprintf(c->first_bad, sizeof c->first_bad, "%.300s", what);
}

static size_t row_bytes(di_wfmt f, int k) {
    return f == DI_WFMT_FP4 ? (size_t)k / 2 : (size_t)k * (f == DI_WFMT_FP8 ? 1 : f == DI_WFMT_BF16 ? 2 : 4);
}

/* Packed data and scale bytes of a CPU weight (src/ops/cpu/wmat.c alloc_wmat). */
static void packed_sizes(const di_wmat *w, size_t *db, size_t *sb) {
    size_t rows = (size_t)w->npanels * 16, k = (size_t)w->k;
    *sb = 0;
    switch (w->fmt) {
    case DI_WFMT_BF16: *db = rows * k * 2; break;
    case DI_WFMT_F32: *db = rows * k * 4; break;
    case DI_WFMT_FP8:
        *db = rows * k;
        *sb = (size_t)((w->n + w->wblock - 1) / w->wblock) * (k / (size_t)w->wblock) * 4; /* + a row never written */
        break;
    case DI_WFMT_FP4:
        *db = rows * k / 2;
        *sb = rows * (k / 32) * 4;
        break;
    }
}

static void *copy_of(const di_tensor *t) {
    void *p = malloc(t->nbytes ? t->nbytes : 1);
    if (p && t->nbytes) memcpy(p, t->data, t->nbytes);
    return p;
}

/* A linear `base` (base.weight [+ base.scale]) bound as w. */
static void check_linear(cmp_ctx *c, const char *base, const di_wmat *w) {
    char wn[300], sn[300];
    snprintf(wn, sizeof wn, "%s.weight", base);
    snprintf(sn, sizeof sn, "%s.scale", base);
    const di_tensor *t = di_spec_get(c->spec, "%s", wn), *s = di_spec_get(c->spec, "%s", sn);
    if (!t) t = di_spec_get(c->spec, "%s", base), s = NULL; /* hc_*_fn: the name is the tensor */
    if (!t) return fail(c, base);
    c->checked++;
    if (c->device) {
        size_t wb = (size_t)w->n * row_bytes(w->fmt, w->k);
        if (w->data || !w->raw_w || !w->raw_owned || wb != t->nbytes || memcmp(w->raw_w, t->data, wb)) return fail(c, wn);
        if (s && (!w->raw_scale || memcmp(w->raw_scale, s->data, s->nbytes))) return fail(c, sn);
        return;
    }
    void *wc = copy_of(t), *sc = s ? copy_of(s) : NULL;
    di_wmat ref;
    di_error err = {0};
    int k = w->fmt == DI_WFMT_FP4 ? (int)t->shape[1] * 2 : (int)t->shape[1];
    if (di_wmat_pack_rows(&ref, w->fmt, wc, sc, 0, (int)t->shape[0], k, w->wblock ? w->wblock : 0, &err)) {
        free(wc), free(sc);
        return fail(c, wn);
    }
    size_t db, sb;
    packed_sizes(&ref, &db, &sb);
    if (ref.bytes != w->bytes || memcmp(ref.data, w->data, db) || (sb && memcmp(ref.scale, w->scale, sb))) fail(c, wn);
    di_wmat_free(&ref);
    free(wc), free(sc);
}

static void check_vec(cmp_ctx *c, const float *v, const char *fmt, const char *prefix) {
    char n[300];
    snprintf(n, sizeof n, fmt, prefix);
    const di_tensor *t = di_spec_get(c->spec, "%s", n);
    if (!t || !v) return fail(c, n);
    c->checked++;
    for (uint64_t i = 0; i < t->numel; i++) {
        float r;
        if (t->dtype == DI_DTYPE_BF16) {
            uint16_t h;
            memcpy(&h, (const unsigned char *)t->data + 2 * i, 2);
            r = di_bf16_to_f32(h);
        } else {
            memcpy(&r, (const unsigned char *)t->data + 4 * i, 4);
        }
        if (memcmp(&r, &v[i], 4)) return fail(c, n);
    }
}

static void check_wo_a(cmp_ctx *c, const char *p, const di_attn_w *a) {
    char wn[300], sn[300];
    snprintf(wn, sizeof wn, "%sattn.wo_a.weight", p);
    snprintf(sn, sizeof sn, "%sattn.wo_a.scale", p);
    const di_tensor *w = di_spec_get(c->spec, "%s", wn), *s = di_spec_get(c->spec, "%s", sn);
    if (!w || !s) return fail(c, wn);
    int R = (int)c->cfg->o_lora_rank, K = (int)w->shape[1], B = (int)c->cfg->fp8_block_in;
    size_t nk = (size_t)w->shape[0] * (size_t)K;
    float *f = malloc(nk * 4);
    uint16_t *h = malloc(nk * 2);
    di_dequant_fp8_block(w->data, s->data, (size_t)w->shape[0], (size_t)K, (size_t)B, f);
    for (size_t i = 0; i < nk; i++) h[i] = di_f32_to_bf16(f[i]);
    for (int g = 0; g < a->groups; g++) {
        const di_wmat *o = &a->wo_a[g];
        c->checked++;
        if (c->device && o->raw_fp8_block) {
            size_t sb = (size_t)(R / B) * (size_t)(K / B);
            if (memcmp(o->raw_w, (const uint8_t *)w->data + (size_t)g * R * K, (size_t)R * K) ||
                memcmp(o->raw_scale, (const uint8_t *)s->data + (size_t)g * sb, sb))
                fail(c, wn);
        } else if (c->device) {
            if (memcmp(o->raw_w, h + (size_t)g * R * K, (size_t)R * K * 2)) fail(c, wn);
        } else {
            di_wmat ref;
            di_error err = {0};
            if (di_wmat_pack_rows(&ref, DI_WFMT_BF16, h, NULL, g * R, R, K, 0, &err)) {
                fail(c, wn);
                continue;
            }
            size_t db, sb;
            packed_sizes(&ref, &db, &sb);
            if (memcmp(ref.data, o->data, db)) fail(c, wn);
            di_wmat_free(&ref);
        }
    }
    free(f), free(h);
}

static void check_block(cmp_ctx *c, const char *p, const di_block_w *b, const di_layer_cfg *L) {
    char n[300];
#define LIN(field, name) (snprintf(n, sizeof n, "%s" name, p), check_linear(c, n, &(field)))
    LIN(b->hc_attn.fn, "hc_attn_fn");
    LIN(b->hc_ffn.fn, "hc_ffn_fn");
    check_vec(c, b->attn_norm, "%sattn_norm.weight", p);
    check_vec(c, b->ffn_norm, "%sffn_norm.weight", p);
    const di_attn_w *a = &b->attn;
    LIN(a->wq_a, "attn.wq_a");
    LIN(a->wq_b, "attn.wq_b");
    LIN(a->wkv, "attn.wkv");
    LIN(a->wo_b, "attn.wo_b");
    check_vec(c, a->q_norm, "%sattn.q_norm.weight", p);
    check_vec(c, a->kv_norm, "%sattn.kv_norm.weight", p);
    check_vec(c, a->sink, "%sattn.attn_sink", p);
    check_wo_a(c, p, a);
    if (a->has_cmp) {
        LIN(a->cmp.wkv, "attn.compressor.wkv");
        if (a->cmp.gated) LIN(a->cmp.wgate, "attn.compressor.wgate");
        check_vec(c, a->cmp.norm, "%sattn.compressor.norm.weight", p);
        if (a->cmp.has_keys) LIN(a->cmp.wk, "attn.indexer.wk");
    }
    if (a->has_idx) {
        LIN(a->idx.wq_b, "attn.indexer.wq_b");
        LIN(a->idx.wproj, "attn.indexer.weights_proj");
        if (a->idx.cmp.ratio) LIN(a->idx.cmp.wkv, "attn.indexer.compressor.wkv");
    }
    LIN(b->moe.gate, "ffn.gate");
    if (!L->hash_routed) check_vec(c, b->moe.bias, "%sffn.gate.bias", p);
    for (int e = 0; e < b->moe.n_experts; e++) {
        char q[300];
        snprintf(q, sizeof q, "%sffn.experts.%d.w1", p, e), check_linear(c, q, &b->moe.w1[e]);
        snprintf(q, sizeof q, "%sffn.experts.%d.w2", p, e), check_linear(c, q, &b->moe.w2[e]);
        snprintf(q, sizeof q, "%sffn.experts.%d.w3", p, e), check_linear(c, q, &b->moe.w3[e]);
    }
    if (b->moe.has_shared) {
        LIN(b->moe.sw1, "ffn.shared_experts.w1");
        LIN(b->moe.sw2, "ffn.shared_experts.w2");
        LIN(b->moe.sw3, "ffn.shared_experts.w3");
    }
#undef LIN
}

static void check_bytes(cmp_ctx *c, const void *p, const char *name) {
    const di_tensor *t = di_spec_get(c->spec, "%s", name);
    c->checked++;
    if (!t || !p || memcmp(p, t->data, t->nbytes)) fail(c, name);
}

/* Bind `rel`'s checkpoint (device: through the fake backend) and compare. */
static void bind_and_compare(const char *dir, int device) {
    di_error err = {0};
    di_model_config cfg;
    di_safetensors *st = NULL;
    di_weight_spec *spec = NULL;
    CHECK_MSG(di_config_load(dir, &cfg, &err) == DEEPINFER_OK, "%s", err.msg);
    CHECK_MSG(di_st_open(dir, &st, &err) == DEEPINFER_OK, "%s", err.msg);
    CHECK(di_spec_build(&cfg, &spec, &err) == DEEPINFER_OK);
    CHECK_MSG(di_spec_check(spec, st, NULL, &err) == DEEPINFER_OK, "%s", err.msg);
    fake_dev *f = calloc(1, sizeof *f);
    if (device) {
        di_allocator a = {fk_alloc, fk_free, fk_zero, fk_upload, f, fk_stage_get, fk_stage_put, fk_stage_finish};
        di_set_allocator(&a);
        CHECK(!di_allocator_is_host());
    }
    cmp_ctx c = {.cfg = &cfg, .spec = spec, .device = device};
    di_v4_weights w4;
    di_v41_weights w41;
    deepinfer_status rc = cfg.arch == DI_ARCH_V41 ? di_v41_weights_bind(&w41, &cfg, spec, &err)
                                                  : di_v4_weights_bind(&w4, &cfg, spec, &err);
    CHECK_MSG(rc == DEEPINFER_OK, "%s", err.msg);
    if (rc == DEEPINFER_OK) {
        const di_block_w *layers = cfg.arch == DI_ARCH_V41 ? w41.layers : w4.layers;
        check_bytes(&c, cfg.arch == DI_ARCH_V41 ? w41.embed : w4.embed, "embed.weight");
        check_linear(&c, "head", cfg.arch == DI_ARCH_V41 ? &w41.head : &w4.head);
        check_vec(&c, cfg.arch == DI_ARCH_V41 ? w41.norm : w4.norm, "%snorm.weight", "");
        for (int l = 0; l < cfg.n_layers; l++) {
            char p[32];
            snprintf(p, sizeof p, "layers.%d.", l);
            check_block(&c, p, &layers[l], &cfg.layers[l]);
        }
        if (cfg.arch == DI_ARCH_V41) {
            for (int i = 0; i < w41.n_engram; i++) {
                char n[96];
                int l = cfg.engram_layer_ids[i];
                snprintf(n, sizeof n, "layers.%d.engram.wkv", l), check_linear(&c, n, &w41.engram_wkv[i]);
                snprintf(n, sizeof n, "layers.%d.engram.embed.weight", l), check_bytes(&c, w41.engram[i].d.table, n);
                snprintf(n, sizeof n, "layers.%d.engram.embed.scale", l), check_bytes(&c, w41.engram[i].d.table_scale, n);
            }
            for (int s = 0; s < w41.n_stages; s++) {
                char p[32];
                snprintf(p, sizeof p, "mtp.%d.", s);
                check_block(&c, p, &w41.stages[s].blk, &cfg.layers[cfg.n_layers + s]);
            }
            di_v41_weights_free(&w41);
        } else {
            for (int s = 0; s < w4.n_mtp; s++) {
                char p[32], n[64];
                snprintf(p, sizeof p, "mtp.%d.", s);
                check_block(&c, p, &w4.mtp[s].blk, &cfg.layers[cfg.n_layers + s]);
                snprintf(n, sizeof n, "%se_proj", p), check_linear(&c, n, &w4.mtp[s].e_proj);
                snprintf(n, sizeof n, "%sh_proj", p), check_linear(&c, n, &w4.mtp[s].h_proj);
            }
            di_v4_weights_free(&w4);
        }
    }
    if (device) {
        di_set_allocator(NULL);
        CHECK(f->chunks > c.checked);      /* weights went through the ring in pieces */
        CHECK(f->max_chunk <= RING_CAP);
    }
    printf("    %s (%s path): %d bound weights and vectors compared, %d chunks through the ring\n", dir,
           device ? "device" : "CPU", c.checked, f->chunks);
    CHECK(c.checked > 20);
    CHECK_MSG(c.bad == 0, "%d mismatches, first %s", c.bad, c.first_bad);
    free(f);
    di_spec_free(spec);
    di_st_close(st);
}

TEST(wload_device_path_streams_every_weight_bitwise_v4) { bind_and_compare(di_test_data("golden/v4-tiny-a"), 1); }
TEST(wload_device_path_streams_every_weight_bitwise_v41) { bind_and_compare(di_test_data("golden/v41-tiny-a"), 1); }
TEST(wload_device_path_streams_every_weight_bitwise_tiny_v4) { bind_and_compare(di_test_gen_data("tiny-v4-b"), 1); }
TEST(wload_cpu_packs_in_place_as_from_a_copy_v4) { bind_and_compare(di_test_data("golden/v4-tiny-a"), 0); }
TEST(wload_cpu_packs_in_place_as_from_a_copy_v41) { bind_and_compare(di_test_data("golden/v41-tiny-a"), 0); }

/* Packing large matrices runs in chunks of panels on the pool: every element of a 2100-row
 * matrix (three chunks, a ragged last panel) reads back exactly, in each format. */
TEST(wload_parallel_packing_is_exact_in_every_format) {
    const int n = 2100, k = 256, B = 128;
    size_t nk = (size_t)n * k;
    uint8_t *bytes = malloc(nk * 4), *sc = malloc(nk);
    uint64_t x = 88172645463325252ull;
    for (size_t i = 0; i < nk * 4; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        bytes[i] = (uint8_t)(x >> 24);
    }
    for (size_t i = 0; i < nk; i++) sc[i] = (uint8_t)(120 + i % 10); /* e8m0 2^-7 .. 2^2 */
    for (size_t i = 0; i < nk; i++) /* e4m3: no NaN (S.1111.111) */
        if ((bytes[i] & 0x7F) == 0x7F) bytes[i] &= 0xFE;
    uint16_t *bf = malloc(nk * 2);
    float *f32 = malloc(nk * 4);
    for (size_t i = 0; i < nk; i++) {
        f32[i] = (float)((int)(bytes[i] % 200) - 100) / 16.0f;
        bf[i] = di_f32_to_bf16(f32[i]);
    }
    di_error err = {0};
    di_wfmt fmts[4] = {DI_WFMT_BF16, DI_WFMT_F32, DI_WFMT_FP8, DI_WFMT_FP4};
    for (int fi = 0; fi < 4; fi++) {
        di_wmat w;
        const void *src = fmts[fi] == DI_WFMT_BF16 ? (const void *)bf : fmts[fi] == DI_WFMT_F32 ? (const void *)f32 : bytes;
        CHECK(di_wmat_pack(&w, fmts[fi], src, sc, n, k, fmts[fi] == DI_WFMT_FP8 ? B : 0, &err) == DEEPINFER_OK);
        long bad = 0;
        for (int r = 0; r < n; r++)
            for (int c = 0; c < k; c++) {
                double ref;
                size_t i = (size_t)r * k + c;
                switch (fmts[fi]) {
                case DI_WFMT_BF16: ref = di_bf16_to_f32(bf[i]); break;
                case DI_WFMT_F32: ref = f32[i]; break;
                case DI_WFMT_FP8:
                    ref = (double)di_e4m3_to_f32(bytes[i]) * di_e8m0_to_f32(sc[(size_t)(r / B) * (k / B) + c / B]);
                    break;
                default: {
                    uint8_t b = bytes[(size_t)r * (k / 2) + c / 2];
                    ref = (double)di_e2m1_to_f32((uint8_t)(c % 2 ? b >> 4 : b & 15)) *
                          di_e8m0_to_f32(sc[(size_t)r * (k / 32) + c / 32]);
                }
                }
                bad += (double)di_wmat_get(&w, r, c) != ref;
            }
        CHECK_MSG(bad == 0, "format %d: %ld elements differ", (int)fmts[fi], bad);
        di_wmat_free(&w);
    }
    free(bytes), free(sc), free(bf), free(f32);
}
