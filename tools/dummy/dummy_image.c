/* dummy_image.c — the random checkpoint of a dummy model (dummy.h step 2):
 * the tensor list from tensor_spec.c laid out as one safetensors image in an
 * anonymous mapping, filled in parallel, opened with di_st_open_memory. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "dummy/dummy.h"
#include "model/tensor_spec.h"
#include "ops/cpu/threadpool.h"

#define CHUNK_BYTES ((uint64_t)32 << 20)

typedef enum fill_kind { F_E4M3, F_BYTE, F_RANDOM, F_BF16, F_F32, F_EIDS } fill_kind;

typedef struct item {
    const di_tensor_spec *e;
    size_t order;    /* spec index (stable sort) */
    int esize;
    uint64_t off, nbytes, numel;
    fill_kind fk;
    float a;         /* F_BF16 / F_F32: uniform half-width, or the constant when c */
    int c;           /* 1: constant a */
    uint8_t byte;    /* F_BYTE */
    int64_t topk, E; /* F_EIDS */
} item;

typedef struct chunk {
    uint32_t item;
    uint64_t b, e; /* elements */
} chunk;

typedef struct filler {
    unsigned char *data;
    item *items;
    chunk *chunks;
    uint64_t seed;
} filler;

static uint64_t splitmix(uint64_t x) {
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

static inline uint64_t xorshift(uint64_t *s) {
    uint64_t x = *s;
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    return *s = x;
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
static void classify(item *it, const di_weight_spec *spec, const di_model_config *c) {
    const di_tensor_spec *e = it->e;
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
    const item *a = pa, *b = pb;
    if (a->esize != b->esize) return b->esize - a->esize;
    return a->order < b->order ? -1 : a->order > b->order;
}

static uint16_t bf16_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return (uint16_t)(u >> 16);
}

static void fill_chunk(void *p, int t, int n) {
    (void)n;
    const filler *f = p;
    const chunk *ch = &f->chunks[t];
    const item *it = &f->items[ch->item];
    unsigned char *dst = f->data + it->off + ch->b * (uint64_t)it->esize;
    uint64_t cnt = ch->e - ch->b, s = splitmix(f->seed ^ splitmix(((uint64_t)ch->item << 32) ^ ch->b)) | 1;
    switch (it->fk) {
    case F_E4M3: /* sign, exponent field 6 or 7, any mantissa: |w| in [0.5, 2), never NaN */
    case F_RANDOM:
        for (uint64_t i = 0; i < cnt; i += 8) {
            uint64_t w = xorshift(&s);
            if (it->fk == F_E4M3) w = (w & 0x8F8F8F8F8F8F8F8Full) | 0x3030303030303030ull;
            memcpy(dst + i, &w, cnt - i < 8 ? cnt - i : 8);
        }
        break;
    case F_BYTE: memset(dst, it->byte, cnt); break;
    case F_BF16:
    case F_F32:
        for (uint64_t i = 0; i < cnt; i++) {
            float v = it->c ? it->a : (float)((double)(xorshift(&s) >> 40) * (2.0 / 16777216.0) - 1.0) * it->a;
            if (it->fk == F_F32) {
                memcpy(dst + 4 * i, &v, 4);
            } else {
                uint16_t h = bf16_bits(v);
                memcpy(dst + 2 * i, &h, 2);
            }
        }
        break;
    case F_EIDS: { /* num_experts_per_tok distinct experts per token, spread evenly */
        int64_t stride = it->E / it->topk > 0 ? it->E / it->topk : 1;
        for (uint64_t i = 0; i < cnt; i++) {
            uint64_t idx = ch->b + i, row = idx / (uint64_t)it->topk, j = idx % (uint64_t)it->topk;
            int64_t v = (int64_t)((splitmix(f->seed ^ (row * 0x2545F4914F6CDD1Dull)) % (uint64_t)it->E +
                                   j * (uint64_t)stride) %
                                  (uint64_t)it->E);
            memcpy(dst + 8 * i, &v, 8);
        }
        break;
    }
    }
}

/* The header JSON (names, dtypes, shapes, offsets), padded with spaces so the
 * data starts 64-byte aligned. */
static char *header(const item *items, size_t n, size_t *len) {
    size_t cap = 256 + n * 256, at = 0;
    char *h = malloc(cap + 64);
    if (!h) return NULL;
    at += (size_t)snprintf(h, cap, "{\"__metadata__\":{\"format\":\"pt\",\"source\":\"deepinfer dummy\"}");
    for (size_t i = 0; i < n; i++) {
        const di_tensor_spec *e = items[i].e;
        char shape[64];
        if (e->ndim == 2) snprintf(shape, sizeof shape, "[%lld,%lld]", (long long)e->shape[0], (long long)e->shape[1]);
        else snprintf(shape, sizeof shape, "[%lld]", (long long)e->shape[0]);
        int w = snprintf(h + at, cap - at, ",\"%s\":{\"dtype\":\"%s\",\"shape\":%s,\"data_offsets\":[%llu,%llu]}",
                         e->name, di_dtype_name(e->dtype), shape, (unsigned long long)items[i].off,
                         (unsigned long long)(items[i].off + items[i].nbytes));
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
    size_t ns = di_spec_count(spec), n = 0, nch = 0;
    item *items = calloc(ns ? ns : 1, sizeof *items);
    chunk *chunks = NULL;
    char *hdr = NULL;
    if (!items) goto oom;
    for (size_t i = 0; i < ns; i++) {
        const di_tensor_spec *e = di_spec_at(spec, i);
        if (e->flags & (DI_SPEC_OPTIONAL | DI_SPEC_UNVERIFIED)) continue; /* never read by the forward */
        item *it = &items[n++];
        it->e = e, it->order = i, it->esize = (int)di_dtype_size(e->dtype);
        it->numel = (uint64_t)e->shape[0] * (uint64_t)(e->ndim == 2 ? e->shape[1] : 1);
        it->nbytes = it->numel * (uint64_t)it->esize;
        classify(it, spec, cfg);
    }
    qsort(items, n, sizeof *items, by_size);
    uint64_t data = 0;
    for (size_t i = 0; i < n; i++) {
        items[i].off = data;
        data += items[i].nbytes;
        uint64_t per = CHUNK_BYTES / (uint64_t)items[i].esize;
        nch += (size_t)((items[i].numel + per - 1) / per);
    }
    chunks = malloc((nch ? nch : 1) * sizeof *chunks);
    size_t hlen = 0;
    hdr = chunks ? header(items, n, &hlen) : NULL;
    if (!hdr) goto oom;
    nch = 0;
    for (size_t i = 0; i < n; i++) {
        uint64_t per = CHUNK_BYTES / (uint64_t)items[i].esize;
        for (uint64_t b = 0; b < items[i].numel; b += per)
            chunks[nch++] = (chunk){(uint32_t)i, b, b + per < items[i].numel ? b + per : items[i].numel};
    }
    size_t size = 8 + hlen + (size_t)data;
    unsigned char *img = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (img == MAP_FAILED) {
        st = di_error_set(err, DEEPINFER_ERR_OUT_OF_MEMORY, "cannot map %.1f GB for the dummy checkpoint",
                          (double)size / 1e9);
        goto done;
    }
#ifdef MADV_HUGEPAGE
    madvise(img, size, MADV_HUGEPAGE);
#endif
    uint64_t hl = hlen;
    for (int b = 0; b < 8; b++) img[b] = (unsigned char)(hl >> (8 * b));
    memcpy(img + 8, hdr, hlen);
    filler f = {.data = img + 8 + hlen, .items = items, .chunks = chunks, .seed = splitmix(seed)};
    if (nch) di_threadpool_run_n(di_threadpool_global(), (int)nch, fill_chunk, &f);
    st = di_st_open_memory(img, size, "<dummy checkpoint>", out, err);
    goto done;
oom:
    st = di_error_set(err, DEEPINFER_ERR_OUT_OF_MEMORY, "out of memory building the dummy checkpoint");
done:
    free(hdr);
    free(chunks);
    free(items);
    di_spec_free(spec);
    return st;
}
