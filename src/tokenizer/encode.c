/*
 * encode.c — text → ids: lossy UTF-8 repair, added tokens, pre-tokenizer,
 * BPE with a per-thread piece cache.
 *
 * Invalid UTF-8: HF's Rust API only accepts valid strings, and the JS
 * bindings see strings that were lossily decoded. We encode the lossy
 * decoding: every maximal invalid subpart becomes U+FFFD (utf8.c), then
 * the repaired text is encoded like any other. So encode(bytes) ==
 * HF.encode(new TextDecoder().decode(bytes)).
 *
 * Thread safety: the tokenizer is read-only. Each thread keeps its own
 * matching scratch and piece cache (a pthread key, freed when the thread
 * exits), tagged with the tokenizer's serial so a cache is never reused
 * across tokenizers.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "tokenizer/tok_internal.h"

/* ---- piece cache ---- */
#define CACHE_SLOTS (1u << 16)
#define CACHE_MAX_PIECE 64
#define CACHE_KEY_POOL (1u << 21)
#define CACHE_ID_POOL (1u << 19)

typedef struct cache_slot {
    uint32_t hash;
    uint32_t key_off;
    uint32_t ids_off;
    uint8_t key_len; /* 0 = empty */
    uint8_t nids;
} cache_slot;

typedef struct tls_state {
    uint64_t serial;
    di_match_scratch ms;
    di_bpe_work work;
    di_idvec tmp;
    cache_slot *slots;
    uint8_t *keys;
    int32_t *ids;
    size_t nslots_used, keys_used, ids_used;
} tls_state;

static pthread_key_t g_key;
static pthread_once_t g_key_once = PTHREAD_ONCE_INIT;

static void tls_destroy(void *p) {
    tls_state *t = p;
    if (!t) return;
    di_match_scratch_free(&t->ms);
    di_bpe_work_free(&t->work);
    free(t->tmp.ids);
    free(t->slots);
    free(t->keys);
    free(t->ids);
    free(t);
}

static void make_key(void) { pthread_key_create(&g_key, tls_destroy); }

static void cache_clear(tls_state *t) {
    memset(t->slots, 0, CACHE_SLOTS * sizeof *t->slots);
    t->nslots_used = t->keys_used = t->ids_used = 0;
}

static tls_state *tls_get(const di_tokenizer *tok) {
    pthread_once(&g_key_once, make_key);
    tls_state *t = pthread_getspecific(g_key);
    if (!t) {
        t = calloc(1, sizeof *t);
        if (!t) return NULL;
        t->slots = calloc(CACHE_SLOTS, sizeof *t->slots);
        t->keys = malloc(CACHE_KEY_POOL);
        t->ids = malloc(CACHE_ID_POOL * sizeof *t->ids);
        if (!t->slots || !t->keys || !t->ids || di_match_scratch_init(&t->ms) != DEEPINFER_OK) {
            tls_destroy(t);
            return NULL;
        }
        if (pthread_setspecific(g_key, t) != 0) {
            tls_destroy(t);
            return NULL;
        }
    }
    if (t->serial != tok->serial) {
        cache_clear(t);
        t->serial = tok->serial;
    }
    return t;
}

/* Look a piece up; on a hit append its ids and return 1. */
static int cache_get(tls_state *t, const uint8_t *p, size_t n, uint32_t h, di_idvec *out) {
    uint32_t j = h & (CACHE_SLOTS - 1);
    for (;;) {
        cache_slot *s = &t->slots[j];
        if (!s->key_len) return 0;
        if (s->hash == h && s->key_len == n && memcmp(t->keys + s->key_off, p, n) == 0) {
            for (uint32_t i = 0; i < s->nids; i++)
                if (di_idvec_push(out, t->ids[s->ids_off + i])) return -1;
            return 1;
        }
        j = (j + 1) & (CACHE_SLOTS - 1);
    }
}

static void cache_put(tls_state *t, const uint8_t *p, size_t n, uint32_t h, const int32_t *ids, size_t nids) {
    if (nids > 255) return;
    if (t->nslots_used * 2 >= CACHE_SLOTS || t->keys_used + n > CACHE_KEY_POOL || t->ids_used + nids > CACHE_ID_POOL)
        cache_clear(t);
    uint32_t j = h & (CACHE_SLOTS - 1);
    while (t->slots[j].key_len) j = (j + 1) & (CACHE_SLOTS - 1);
    memcpy(t->keys + t->keys_used, p, n);
    memcpy(t->ids + t->ids_used, ids, nids * sizeof *ids);
    t->slots[j] = (cache_slot){h, (uint32_t)t->keys_used, (uint32_t)t->ids_used, (uint8_t)n, (uint8_t)nids};
    t->keys_used += n;
    t->ids_used += nids;
    t->nslots_used++;
}

/* ---- the pipeline ---- */
typedef struct enc_ctx {
    const di_tokenizer *tok;
    tls_state *t;
    di_idvec out;
} enc_ctx;

static int on_piece(void *vctx, const uint8_t *p, size_t n) {
    enc_ctx *c = vctx;
    if (n > CACHE_MAX_PIECE) return di_bpe_piece(c->tok, p, n, &c->t->work, &c->out) ? -1 : 0;
    uint32_t h = (uint32_t)di_strmap_hash((const char *)p, n);
    int hit = cache_get(c->t, p, n, h, &c->out);
    if (hit) return hit < 0 ? -1 : 0;
    size_t before = c->out.n;
    if (di_bpe_piece(c->tok, p, n, &c->t->work, &c->out)) return -1;
    cache_put(c->t, p, n, h, c->out.ids + before, c->out.n - before);
    return 0;
}

static int on_segment(void *vctx, const uint8_t *s, size_t n, int32_t id) {
    enc_ctx *c = vctx;
    if (id >= 0) return di_idvec_push(&c->out, id) ? -1 : 0;
    return di_pretok_run(&c->tok->pretok, &c->t->ms, s, n, on_piece, c) ? -1 : 0;
}

deepinfer_status di_tokenizer_encode(const di_tokenizer *tok, const char *text, size_t len, int32_t **ids, size_t *n,
                                     size_t *cap, di_error *err) {
    if (!tok || !ids || !n || !cap || (!text && len))
        return di_error_set(err, DEEPINFER_ERR_INVALID_ARGUMENT, "di_tokenizer_encode: NULL argument");
    tls_state *t = tls_get(tok);
    if (!t) return di_error_set(err, DEEPINFER_ERR_OUT_OF_MEMORY, "out of memory setting up the encoder");
    const uint8_t *s = (const uint8_t *)text;
    uint8_t *repaired = NULL;
    if (!di_utf8_valid(s, len)) {
        repaired = di_utf8_repair(s, len, &len);
        if (!repaired) return di_error_set(err, DEEPINFER_ERR_OUT_OF_MEMORY, "out of memory repairing invalid UTF-8");
        s = repaired;
    }
    enc_ctx c = {tok, t, {*ids, *n, *cap}};
    int r = len ? di_added_split(tok, s, len, on_segment, &c) : 0;
    free(repaired);
    *ids = c.out.ids;
    *n = c.out.n;
    *cap = c.out.cap;
    if (r) {
        cache_clear(t);
        return di_error_set(err, DEEPINFER_ERR_OUT_OF_MEMORY,
                            "encoding failed: out of memory, or the regex engine hit its limits on this input");
    }
    return DEEPINFER_OK;
}
