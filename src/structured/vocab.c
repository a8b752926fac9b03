/*
 * vocab.c — token table, preorder byte trie, lexeme registry, mask cache.
 */
#include "structured/vocab.h"

#include <stdlib.h>
#include <string.h>

#include "structured/lexspec.h"

static uint64_t fnv(const void *p, size_t n) {
    const uint8_t *s = p;
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++) h = (h ^ s[i]) * 1099511628211ull;
    return h;
}

static const so_vocab *g_sort_vocab; /* qsort has no context argument in C11 */

static int cmp_tok(const void *a, const void *b) {
    const so_vocab *v = g_sort_vocab;
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    uint32_t lx = v->tok_len[x], ly = v->tok_len[y];
    int c = memcmp(v->blob + v->tok_off[x], v->blob + v->tok_off[y], lx < ly ? lx : ly);
    if (c) return c;
    if (lx != ly) return lx < ly ? -1 : 1;
    return x < y ? -1 : x > y;
}

static pthread_mutex_t g_sort_mu = PTHREAD_MUTEX_INITIALIZER;

static deepinfer_status build_trie(so_vocab *v, di_error *err) {
    int32_t n = v->n_vocab, m = 0;
    int32_t *ids = malloc((size_t)(n ? n : 1) * sizeof *ids);
    size_t maxnodes = 1;
    for (int32_t i = 0; i < n; i++) v->dup_next[i] = -1;
    if (!ids) return di_error_set(err, DEEPINFER_ERR_OUT_OF_MEMORY, "out of memory building the token trie");
    for (int32_t i = 0; i < n; i++)
        if (v->in_trie[i]) ids[m++] = i, maxnodes += v->tok_len[i];
    pthread_mutex_lock(&g_sort_mu);
    g_sort_vocab = v;
    qsort(ids, (size_t)m, sizeof *ids, cmp_tok);
    pthread_mutex_unlock(&g_sort_mu);
    if (maxnodes > UINT32_MAX / 2) {
        free(ids);
        return di_error_set(err, DEEPINFER_ERR_LIMIT, "vocabulary too large for the token trie");
    }
    v->nodes = malloc(maxnodes * sizeof *v->nodes);
    uint32_t *path = malloc(((size_t)v->max_token_len + 2) * sizeof *path);
    if (!v->nodes || !path) {
        free(ids), free(path);
        return di_error_set(err, DEEPINFER_ERR_OUT_OF_MEMORY, "out of memory building the token trie");
    }
    uint32_t nn = 1;
    v->nodes[0] = (so_trie_node){.end = 0, .parent = 0, .tok = -1, .byte = 0, .depth = 0};
    path[0] = 0;
    uint32_t depth = 0;
    int32_t prev = -1;
    for (int32_t k = 0; k < m; k++) {
        int32_t id = ids[k];
        const uint8_t *t = v->blob + v->tok_off[id];
        uint32_t len = v->tok_len[id], common = 0;
        if (prev >= 0) {
            const uint8_t *p = v->blob + v->tok_off[prev];
            uint32_t pl = v->tok_len[prev];
            while (common < len && common < pl && p[common] == t[common]) common++;
        }
        while (depth > common) v->nodes[path[depth]].end = nn, depth--;
        if (common == len && prev >= 0 && v->tok_len[prev] == len) { /* duplicate bytes */
            v->nodes[path[depth]].pad = 1;
            int32_t first = v->nodes[path[depth]].tok;
            while (v->dup_next[first] >= 0) first = v->dup_next[first];
            v->dup_next[first] = id;
            prev = id;
            continue;
        }
        for (uint32_t d = common; d < len; d++) {
            v->nodes[nn] = (so_trie_node){.end = 0, .parent = path[d], .tok = -1, .byte = t[d], .depth = (uint16_t)(d + 1)};
            path[d + 1] = nn++;
        }
        depth = len;
        v->nodes[path[depth]].tok = id;
        prev = id;
    }
    while (depth > 0) v->nodes[path[depth]].end = nn, depth--;
    v->nodes[0].end = nn;
    v->nnodes = nn;
    free(ids), free(path);
    return DEEPINFER_OK;
}

deepinfer_status so_vocab_new(int32_t n_vocab, int32_t n_tokens, const uint8_t *const *toks, const uint32_t *lens,
                              const uint8_t *special, const int32_t *eos, int n_eos, so_vocab **out,
                              di_error *err) {
    if (n_vocab <= 0 || n_tokens < 0 || n_tokens > n_vocab || n_eos < 0 || n_eos > 8)
        return di_error_set(err, DEEPINFER_ERR_INVALID_ARGUMENT, "so_vocab_new: bad sizes (vocab %d, tokens %d, eos %d)",
                            n_vocab, n_tokens, n_eos);
    so_vocab *v = calloc(1, sizeof *v);
    if (!v) return di_error_set(err, DEEPINFER_ERR_OUT_OF_MEMORY, "out of memory");
    pthread_mutex_init(&v->mu, NULL);
    v->n_vocab = n_vocab;
    v->n_words = ((uint32_t)n_vocab + 31) / 32;
    v->reg_limit = (size_t)512 << 20;
    v->cache_limit = (size_t)1 << 30;
    size_t total = 0;
    for (int32_t i = 0; i < n_tokens; i++) total += lens[i];
    v->blob = malloc(total + 1);
    v->tok_off = calloc((size_t)n_vocab, sizeof *v->tok_off);
    v->tok_len = calloc((size_t)n_vocab, sizeof *v->tok_len);
    v->in_trie = calloc((size_t)n_vocab, 1);
    v->dup_next = malloc((size_t)n_vocab * sizeof *v->dup_next);
    if (!v->blob || !v->tok_off || !v->tok_len || !v->in_trie || !v->dup_next) {
        so_vocab_free(v);
        return di_error_set(err, DEEPINFER_ERR_OUT_OF_MEMORY, "out of memory");
    }
    size_t off = 0;
    for (int32_t i = 0; i < n_tokens; i++) {
        if (lens[i]) memcpy(v->blob + off, toks[i], lens[i]);
        v->tok_off[i] = off, v->tok_len[i] = lens[i];
        off += lens[i];
        int is_eos = 0;
        for (int k = 0; k < n_eos; k++) is_eos |= eos[k] == i;
        v->in_trie[i] = lens[i] > 0 && !(special && special[i]) && !is_eos;
        if (v->in_trie[i] && (int)lens[i] > v->max_token_len) v->max_token_len = (int)lens[i];
    }
    for (int k = 0; k < n_eos; k++) {
        if (eos[k] < 0 || eos[k] >= n_vocab) {
            so_vocab_free(v);
            return di_error_set(err, DEEPINFER_ERR_INVALID_ARGUMENT, "EOS id %d outside the vocabulary", eos[k]);
        }
        v->eos[v->n_eos++] = eos[k];
    }
    if (v->max_token_len > 65535) {
        so_vocab_free(v);
        return di_error_set(err, DEEPINFER_ERR_LIMIT, "a token longer than 65535 bytes");
    }
    v->all_mask = calloc(v->n_words, sizeof *v->all_mask);
    if (!v->all_mask) {
        so_vocab_free(v);
        return di_error_set(err, DEEPINFER_ERR_OUT_OF_MEMORY, "out of memory");
    }
    for (int32_t i = 0; i < n_tokens; i++)
        if (lens[i]) v->all_mask[i >> 5] |= 1u << (i & 31);
    for (int k = 0; k < v->n_eos; k++) v->all_mask[v->eos[k] >> 5] |= 1u << (v->eos[k] & 31);
    deepinfer_status st = build_trie(v, err);
    if (st != DEEPINFER_OK) {
        so_vocab_free(v);
        return st;
    }
    *out = v;
    return DEEPINFER_OK;
}

void so_cache_entry_free(so_cache_entry *e) {
    if (!e) return;
    free(e->key), free(e->acc), free(e->dep), free(e->trim), free(e->layers), free(e->list), free(e);
}

void so_vocab_free(so_vocab *v) {
    if (!v) return;
    for (uint32_t i = 0; i < v->nreg; i++) {
        free(v->reg[i].spec);
        free(v->reg[i].err);
        so_dfa_free(v->reg[i].dfa);
    }
    free(v->reg), free(v->reg_hash);
    for (uint32_t i = 0; i < v->cache_cap; i++) {
        so_cache_entry *e = v->cache[i];
        while (e) {
            so_cache_entry *n = e->next;
            so_cache_entry_free(e);
            e = n;
        }
    }
    free(v->cache);
    free(v->blob), free(v->tok_off), free(v->tok_len), free(v->in_trie), free(v->dup_next), free(v->nodes), free(v->all_mask);
    pthread_mutex_destroy(&v->mu);
    free(v);
}

void so_vocab_set_limits(so_vocab *v, size_t reg_limit, size_t cache_limit) {
    pthread_mutex_lock(&v->mu);
    v->reg_limit = reg_limit;
    v->cache_limit = cache_limit;
    pthread_mutex_unlock(&v->mu);
}

static int reg_grow(so_vocab *v) {
    if (v->nreg + 1 > v->regcap) {
        uint32_t nc = v->regcap ? v->regcap * 2 : 64;
        so_reg_entry *nr = realloc(v->reg, nc * sizeof *nr);
        if (!nr) return 0;
        v->reg = nr, v->regcap = nc;
    }
    if ((v->nreg + 1) * 2 > v->reg_hcap) {
        uint32_t nc = v->reg_hcap ? v->reg_hcap * 2 : 128;
        uint32_t *nh = calloc(nc, sizeof *nh);
        if (!nh) return 0;
        for (uint32_t i = 0; i < v->nreg; i++) {
            uint32_t j = (uint32_t)v->reg[i].hash & (nc - 1);
            while (nh[j]) j = (j + 1) & (nc - 1);
            nh[j] = i + 1;
        }
        free(v->reg_hash);
        v->reg_hash = nh, v->reg_hcap = nc;
    }
    return 1;
}

deepinfer_status so_vocab_lexeme(so_vocab *v, const char *spec, size_t len, uint32_t *gid, so_dfa **dfa,
                                 int *owned, di_error *err) {
    uint64_t h = fnv(spec, len);
    *owned = 0;
    pthread_mutex_lock(&v->mu);
    if (v->reg_hcap) {
        uint32_t j = (uint32_t)h & (v->reg_hcap - 1);
        while (v->reg_hash[j]) {
            so_reg_entry *e = &v->reg[v->reg_hash[j] - 1];
            if (e->hash == h && e->spec_len == len && !memcmp(e->spec, spec, len)) {
                uint32_t id = v->reg_hash[j] - 1;
                deepinfer_status st = e->code;
                if (st != DEEPINFER_OK) di_error_set(err, st, "%s", e->err ? e->err : "lexeme failed");
                else *gid = id, *dfa = e->dfa;
                pthread_mutex_unlock(&v->mu);
                return st;
            }
            j = (j + 1) & (v->reg_hcap - 1);
        }
    }
    int over = v->reg_bytes > v->reg_limit;
    pthread_mutex_unlock(&v->mu);
    /* compile outside the lock */
    so_dfa *d = NULL;
    di_error e2 = {0};
    deepinfer_status st = so_lexspec_compile(spec, len, v->max_token_len > 0 ? v->max_token_len : 1, &d, &e2);
    if (over) {
        if (st != DEEPINFER_OK) return di_error_set(err, st, "%s", e2.msg);
        *gid = SO_GID_PRIVATE, *dfa = d, *owned = 1;
        return DEEPINFER_OK;
    }
    pthread_mutex_lock(&v->mu);
    /* another thread may have added it meanwhile: search again */
    if (v->reg_hcap) {
        uint32_t j = (uint32_t)h & (v->reg_hcap - 1);
        while (v->reg_hash[j]) {
            so_reg_entry *e = &v->reg[v->reg_hash[j] - 1];
            if (e->hash == h && e->spec_len == len && !memcmp(e->spec, spec, len)) {
                uint32_t id = v->reg_hash[j] - 1;
                deepinfer_status st2 = e->code;
                if (st2 != DEEPINFER_OK) di_error_set(err, st2, "%s", e->err ? e->err : "lexeme failed");
                else *gid = id, *dfa = e->dfa;
                pthread_mutex_unlock(&v->mu);
                so_dfa_free(d);
                return st2;
            }
            j = (j + 1) & (v->reg_hcap - 1);
        }
    }
    if (!reg_grow(v)) {
        pthread_mutex_unlock(&v->mu);
        so_dfa_free(d);
        return di_error_set(err, DEEPINFER_ERR_OUT_OF_MEMORY, "out of memory in the lexeme registry");
    }
    so_reg_entry *e = &v->reg[v->nreg];
    memset(e, 0, sizeof *e);
    e->spec = malloc(len + 1);
    if (!e->spec) {
        pthread_mutex_unlock(&v->mu);
        so_dfa_free(d);
        return di_error_set(err, DEEPINFER_ERR_OUT_OF_MEMORY, "out of memory in the lexeme registry");
    }
    memcpy(e->spec, spec, len);
    e->spec[len] = 0;
    e->spec_len = len, e->hash = h, e->code = st, e->dfa = d;
    /* failures are cached too (same spec fails the same way) */
    if (st != DEEPINFER_OK) e->err = strdup(e2.msg);
    uint32_t id = v->nreg++;
    uint32_t j = (uint32_t)h & (v->reg_hcap - 1);
    while (v->reg_hash[j]) j = (j + 1) & (v->reg_hcap - 1);
    v->reg_hash[j] = id + 1;
    v->reg_bytes += len + 64 + (d ? d->bytes : 0);
    pthread_mutex_unlock(&v->mu);
    if (st != DEEPINFER_OK) return di_error_set(err, st, "%s", e2.msg);
    *gid = id, *dfa = d;
    return DEEPINFER_OK;
}

so_cache_entry *so_cache_lookup(so_vocab *v, const uint32_t *key, uint32_t keylen, uint64_t hash) {
    pthread_mutex_lock(&v->mu);
    so_cache_entry *e = NULL;
    if (v->cache_cap) {
        e = v->cache[hash & (v->cache_cap - 1)];
        while (e && !(e->hash == hash && e->keylen == keylen && !memcmp(e->key, key, keylen * sizeof *key)))
            e = e->next;
    }
    if (e) v->cache_hits++;
    else v->cache_misses++;
    pthread_mutex_unlock(&v->mu);
    return e;
}

so_cache_entry *so_cache_insert(so_vocab *v, so_cache_entry *e) {
    size_t sz = sizeof *e + (size_t)e->keylen * 4 + (e->acc ? (size_t)v->n_words * 4 : (size_t)e->nlist * 4) + (size_t)e->ndep * 4 + (size_t)e->ntrim * 8 +
                (e->layers ? (size_t)16 * v->n_words * 4 : 0);
    pthread_mutex_lock(&v->mu);
    if (v->cache_bytes + sz > v->cache_limit) {
        pthread_mutex_unlock(&v->mu);
        return NULL;
    }
    if ((v->cache_n + 1) > v->cache_cap) {
        uint32_t nc = v->cache_cap ? v->cache_cap * 2 : 256;
        so_cache_entry **nt = calloc(nc, sizeof *nt);
        if (!nt) {
            pthread_mutex_unlock(&v->mu);
            return NULL;
        }
        for (uint32_t i = 0; i < v->cache_cap; i++) {
            so_cache_entry *x = v->cache[i];
            while (x) {
                so_cache_entry *n = x->next;
                x->next = nt[x->hash & (nc - 1)];
                nt[x->hash & (nc - 1)] = x;
                x = n;
            }
        }
        free(v->cache);
        v->cache = nt, v->cache_cap = nc;
    }
    so_cache_entry **b = &v->cache[e->hash & (v->cache_cap - 1)];
    for (so_cache_entry *x = *b; x; x = x->next)
        if (x->hash == e->hash && x->keylen == e->keylen && !memcmp(x->key, e->key, e->keylen * sizeof *e->key)) {
            pthread_mutex_unlock(&v->mu);
            so_cache_entry_free(e);
            return x;
        }
    e->next = *b;
    *b = e;
    v->cache_n++;
    v->cache_bytes += sz;
    pthread_mutex_unlock(&v->mu);
    return e;
}
