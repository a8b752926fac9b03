/* dummy_image.c — the random checkpoint of a dummy model (dummy.h step 2):
 * the tensor list from tensor_spec.c laid out as one safetensors header, and
 * a counter-based generator that produces any byte range of any tensor on
 * demand (di_st_open_generated), in parallel for large ranges. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dummy/dummy.h"
#include "model/tensor_spec.h"
#include "ops/cpu/threadpool.h"

/* Ranges of at least PAR_MIN bytes are filled on the pool in PAR_CHUNK pieces. */
#define PAR_MIN ((size_t)1 << 20)
#define PAR_CHUNK ((size_t)256 << 10)
#define PAR_MAX_CHUNKS ((size_t)1 << 16)

typedef enum fill_kind { F_E4M3, F_BYTE, F_RANDOM, F_BF16, F_F32, F_EIDS } fill_kind;

/* One tensor of the layout; what the generator needs of it. */
typedef struct item {
    uint64_t off, nbytes;
    uint64_t key;    /* splitmix state of word 0: hash(seed, name) */
    fill_kind fk;
    float a;         /* F_BF16 / F_F32: uniform half-width, or the constant when c */
    int c;           /* 1: constant a */
    uint8_t byte;    /* F_BYTE */
    int64_t topk, E; /* F_EIDS */
} item;

/* Build-time view of an item (the spec entry it came from). */
typedef struct entry {
    const di_tensor_spec *e;
    size_t order; /* spec index (stable sort) */
    int esize;
    item it;
} entry;

typedef struct gen_ctx {
    item *items; /* by offset */
    size_t n;
    uint64_t data_start; /* 8 + header length: file_offset of data byte 0 */
} gen_ctx;

#define GOLDEN 0x9E3779B97F4A7C15ull

static inline uint64_t mix(uint64_t x) {
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

static uint64_t splitmix(uint64_t x) { return mix(x + GOLDEN); }

static uint64_t fnv1a(const char *s) {
    uint64_t h = 0xCBF29CE484222325ull;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 0x100000001B3ull;
    return h;
}

/* In-dim of the weight that `scale_name` (X.scale) scales. */
static int64_t weight_k(const di_weight_spec *spec, const char *scale_name) {
    char w[200];
    size_t n = strlen(scale_name);
    if (n < 6 || n + 2 > sizeof w) return 1;
    memcpy(w, scale_name, n - 6);
    memcpy(w + n - 6, ".weight", 8);
    const di_tensor_spec *e = di_spec_find(spec, w);
    if (!e) return 1;
    return e->kind == DI_TK_FP4_WEIGHT ? e->shape[1] * 2 : e->shape[1];
}

static int ends(const char *s, const char *suf) {
    size_t a = strlen(s), b = strlen(suf);
    return a >= b && !memcmp(s + a - b, suf, b);
}

static uint8_t e8m0_of(double scale) { return (uint8_t)(127 + lround(log2(scale))); }

/* How an entry is filled (dummy.h lists the rules). */
static void classify(item *it, const di_tensor_spec *e, const di_weight_spec *spec, const di_model_config *c) {
    const char *nm = e->name;
    int64_t K = e->ndim == 2 ? e->shape[1] : 1;
    switch (e->kind) {
    case DI_TK_FP8_WEIGHT:
    case DI_TK_ENGRAM_TABLE: it->fk = F_E4M3; return;
    case DI_TK_FP4_WEIGHT: it->fk = F_RANDOM; return;
    case DI_TK_FP8_SCALE: it->fk = F_BYTE, it->byte = e8m0_of(1.0 / sqrt((double)weight_k(spec, nm))); return;
    case DI_TK_FP4_SCALE: it->fk = F_BYTE, it->byte = e8m0_of(1.0 / (2.93 * sqrt((double)weight_k(spec, nm)))); return;
    case DI_TK_ENGRAM_SCALE: it->fk = F_BYTE, it->byte = 127; return;
    case DI_TK_PLAIN: break;
    }
    if (e->dtype == DI_DTYPE_I64) {
        it->fk = F_EIDS;
        it->topk = e->shape[1] > 0 ? e->shape[1] : 1;
        it->E = e->layer < c->n_layers ? c->n_routed_experts : c->stage_n_routed_experts;
        return;
    }
    it->fk = e->dtype == DI_DTYPE_F32 ? F_F32 : F_BF16;
    if (e->ndim == 1) { /* norms and hc scales 1; biases, hc bases, sinks 0 */
        it->c = 1, it->a = ends(nm, ".weight") || ends(nm, "_scale") ? 1.0f : 0.0f;
    } else if (ends(nm, ".ape")) {
        it->c = 1, it->a = 0.0f;
    } else if (ends(nm, "q_weight") || ends(nm, "k_weight")) {
        it->c = 1, it->a = 1.0f;
    } else if (!strcmp(nm, "embed.weight") || ends(nm, "markov_head.embed.weight")) {
        it->a = sqrtf(3.0f); /* looked-up rows: RMS 1 */
    } else {
        it->a = (float)sqrt(3.0 / (double)K); /* a linear: RMS 1/sqrt(K) */
    }
}

static int by_size(const void *pa, const void *pb) {
    const entry *a = pa, *b = pb;
    if (a->esize != b->esize) return b->esize - a->esize;
    return a->order < b->order ? -1 : a->order > b->order;
}

static uint16_t bf16_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return (uint16_t)(u >> 16);
}

static uint32_t f32_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

/* ---- the generator: 8-byte word w of a tensor is a function of (key, w) ------------------- */

#define RAND(w) mix(it->key + ((w) + 1) * GOLDEN)

/* Word w of tensor `it` (bytes 8w .. 8w+7 of the tensor, little-endian). */
static inline uint64_t word(const item *it, uint64_t w) {
    switch (it->fk) {
    case F_E4M3: /* sign, exponent field 6 or 7, any mantissa: |w| in [0.5, 2), never NaN */
        return (RAND(w) & 0x8F8F8F8F8F8F8F8Full) | 0x3030303030303030ull;
    case F_RANDOM: return RAND(w);
    case F_BYTE: return 0x0101010101010101ull * it->byte;
    case F_BF16: {
        if (it->c) return 0x0001000100010001ull * bf16_bits(it->a);
        uint64_t r = RAND(w), v = 0;
        float s = it->a * (1.0f / 32768.0f); /* (lane - 32767.5) / 32768 in (-1, 1), exact in float */
        for (int i = 0; i < 4; i++)
            v |= (uint64_t)bf16_bits(((float)(int)((r >> (16 * i)) & 0xFFFF) - 32767.5f) * s) << (16 * i);
        return v;
    }
    case F_F32: {
        if (it->c) return 0x0000000100000001ull * f32_bits(it->a);
        uint64_t r = RAND(w), v = 0;
        for (int i = 0; i < 2; i++) {
            double u = ((double)((r >> (32 * i + 8)) & 0xFFFFFF) + 0.5) * (2.0 / 16777216.0) - 1.0;
            v |= (uint64_t)f32_bits((float)u * it->a) << (32 * i);
        }
        return v;
    }
    case F_EIDS: { /* num_experts_per_tok distinct experts per token, spread evenly */
        uint64_t row = w / (uint64_t)it->topk, j = w % (uint64_t)it->topk;
        uint64_t stride = it->E / it->topk > 0 ? (uint64_t)(it->E / it->topk) : 1;
        return (splitmix(it->key ^ (row * 0x2545F4914F6CDD1Dull)) % (uint64_t)it->E + j * stride) % (uint64_t)it->E;
    }
    }
    return 0;
}

/* The words of [w0, w0 + nw) into dst, one loop per kind (the switch hoisted). */
static void words(const item *it, uint64_t w0, uint64_t nw, unsigned char *dst) {
#define LOOP(EXPR)                                                                                                     \
    for (uint64_t w = w0; w < w0 + nw; w++, dst += 8) {                                                                \
        uint64_t v = (EXPR);                                                                                           \
        memcpy(dst, &v, 8);                                                                                            \
    }                                                                                                                  \
    break
    switch (it->fk) {
    case F_E4M3: LOOP((RAND(w) & 0x8F8F8F8F8F8F8F8Full) | 0x3030303030303030ull);
    case F_RANDOM: LOOP(RAND(w));
    default: LOOP(word(it, w));
    }
#undef LOOP
}

/* Bytes [off, off + n) of tensor `it`. */
static void fill_range(const item *it, uint64_t off, unsigned char *dst, size_t n) {
    if (it->fk == F_BYTE) {
        memset(dst, it->byte, n);
        return;
    }
    uint64_t w = off >> 3;
    unsigned head = (unsigned)(off & 7);
    if (head) {
        uint64_t v = word(it, w++);
        size_t k = 8 - head < n ? 8 - head : n;
        memcpy(dst, (const unsigned char *)&v + head, k);
        dst += k, n -= k;
    }
    words(it, w, n / 8, dst);
    w += n / 8, dst += n & ~(size_t)7, n &= 7;
    if (n) {
        uint64_t v = word(it, w);
        memcpy(dst, &v, n);
    }
}

typedef struct par_fill {
    const item *it;
    uint64_t off;
    unsigned char *dst;
    size_t n, chunk;
} par_fill;

static void par_task(void *p, int t, int nt) {
    (void)nt;
    const par_fill *f = p;
    size_t b = (size_t)t * f->chunk, e = b + f->chunk < f->n ? b + f->chunk : f->n;
    if (b < e) fill_range(f->it, f->off + b, f->dst + b, e - b);
}

static deepinfer_status generate(void *ctx, const di_tensor *t, uint64_t off, void *dst, size_t n, di_error *err) {
    const gen_ctx *g = ctx;
    uint64_t rel = t->file_offset - g->data_start;
    size_t lo = 0, hi = g->n;
    while (lo < hi) { /* the item starting at rel */
        size_t mid = lo + (hi - lo) / 2;
        if (g->items[mid].off < rel) lo = mid + 1;
        else hi = mid;
    }
    if (t->file_offset < g->data_start || lo == g->n || g->items[lo].off != rel || g->items[lo].nbytes != t->nbytes)
        return di_error_set(err, DEEPINFER_ERR_INTERNAL, "dummy checkpoint: tensor %s is not one of its own", t->name);
    const item *it = &g->items[lo];
    if (off > it->nbytes || n > it->nbytes - off)
        return di_error_set(err, DEEPINFER_ERR_INVALID_ARGUMENT, "dummy checkpoint: bytes %llu..%llu of %s (%llu)",
                            (unsigned long long)off, (unsigned long long)(off + n), t->name,
                            (unsigned long long)it->nbytes);
    if (n >= PAR_MIN && it->fk != F_BYTE) {
        size_t nch = (n + PAR_CHUNK - 1) / PAR_CHUNK;
        if (nch > PAR_MAX_CHUNKS) nch = PAR_MAX_CHUNKS;
        par_fill f = {it, off, dst, n, ((n + nch - 1) / nch + 7) & ~(size_t)7};
        di_threadpool_run_n(di_threadpool_global(), (int)nch, par_task, &f);
    } else {
        fill_range(it, off, dst, n);
    }
    return DEEPINFER_OK;
}

static void gen_free(void *ctx) {
    gen_ctx *g = ctx;
    if (g) free(g->items);
    free(g);
}

/* The header JSON (names, dtypes, shapes, offsets), padded with spaces so the
 * data starts 64-byte aligned. */
static char *header(const entry *ents, size_t n, size_t *len) {
    size_t cap = 256 + n * 256, at = 0;
    char *h = malloc(cap + 64);
    if (!h) return NULL;
    at += (size_t)snprintf(h, cap, "{\"__metadata__\":{\"format\":\"pt\",\"source\":\"deepinfer dummy\"}");
    for (size_t i = 0; i < n; i++) {
        const di_tensor_spec *e = ents[i].e;
        char shape[64];
        if (e->ndim == 2) snprintf(shape, sizeof shape, "[%lld,%lld]", (long long)e->shape[0], (long long)e->shape[1]);
        else snprintf(shape, sizeof shape, "[%lld]", (long long)e->shape[0]);
        int w = snprintf(h + at, cap - at, ",\"%s\":{\"dtype\":\"%s\",\"shape\":%s,\"data_offsets\":[%llu,%llu]}",
                         e->name, di_dtype_name(e->dtype), shape, (unsigned long long)ents[i].it.off,
                         (unsigned long long)(ents[i].it.off + ents[i].it.nbytes));
        if (w < 0 || (size_t)w >= cap - at) {
            free(h);
            return NULL;
        }
        at += (size_t)w;
    }
    h[at++] = '}';
    while ((8 + at) % 64) h[at++] = ' ';
    *len = at;
    return h;
}

deepinfer_status di_dummy_weights(const di_model_config *cfg, uint64_t seed, di_safetensors **out, di_error *err) {
    *out = NULL;
    di_weight_spec *spec = NULL;
    deepinfer_status st = di_spec_build(cfg, &spec, err);
    if (st) return st;
    size_t ns = di_spec_count(spec), n = 0;
    entry *ents = calloc(ns ? ns : 1, sizeof *ents);
    gen_ctx *g = calloc(1, sizeof *g);
    char *hdr = NULL;
    if (!ents || !g || !(g->items = calloc(ns ? ns : 1, sizeof *g->items))) goto oom;
    uint64_t s0 = splitmix(seed);
    for (size_t i = 0; i < ns; i++) {
        const di_tensor_spec *e = di_spec_at(spec, i);
        if (e->flags & (DI_SPEC_OPTIONAL | DI_SPEC_UNVERIFIED)) continue; /* never read by the forward */
        entry *en = &ents[n++];
        en->e = e, en->order = i, en->esize = (int)di_dtype_size(e->dtype);
        en->it.nbytes = (uint64_t)e->shape[0] * (uint64_t)(e->ndim == 2 ? e->shape[1] : 1) * (uint64_t)en->esize;
        en->it.key = splitmix(s0 ^ fnv1a(e->name));
        classify(&en->it, e, spec, cfg);
    }
    qsort(ents, n, sizeof *ents, by_size);
    uint64_t data = 0;
    for (size_t i = 0; i < n; i++) {
        ents[i].it.off = data;
        data += ents[i].it.nbytes;
        g->items[i] = ents[i].it;
    }
    g->n = n;
    size_t hlen = 0;
    if (!(hdr = header(ents, n, &hlen))) goto oom;
    g->data_start = 8 + hlen;
    st = di_st_open_generated(hdr, hlen, data, generate, g, gen_free, "<dummy checkpoint>", out, err);
    g = NULL; /* owned by the handle (freed on failure too) */
    goto done;
oom:
    st = di_error_set(err, DEEPINFER_ERR_OUT_OF_MEMORY, "out of memory building the dummy checkpoint");
done:
    gen_free(g);
    free(hdr);
    free(ents);
    di_spec_free(spec);
    return st;
}
