/*
 * engram_hash.c — Engram hash layout, constants and per-position hash ids
 * (architecture.md §5.8; see engram_hash.h for the contract).
 */
#include "model/engram_hash.h"

#include <stdlib.h>
#include <string.h>

#include "util/file.h"

/* ---- built-in released constants (architecture.md §5.8) ----------------------------------- */

static const struct {
    int32_t layer_id;
    int64_t n_classes;
    int max_ngram;
    int64_t mult[4];
} k_builtin[] = {
    /* numpy default_rng(10007·layer).integers(0, (INT64_MAX // 99092) // 2, 4) · 2 + 1 */
    {1, 99092, 4, {76632096046245LL, 4839876093313LL, 35959672319349LL, 73987337458391LL}},
    {14, 99092, 4, {67716810739261LL, 51510806800915LL, 30921347202721LL, 82619226485591LL}},
};

int di_engram_builtin_multipliers(int32_t layer_id, int64_t n_classes, int max_ngram, int64_t *out) {
    for (size_t i = 0; i < sizeof k_builtin / sizeof k_builtin[0]; i++)
        if (k_builtin[i].layer_id == layer_id && k_builtin[i].n_classes == n_classes &&
            k_builtin[i].max_ngram == max_ngram) {
            memcpy(out, k_builtin[i].mult, (size_t)max_ngram * sizeof *out);
            return 1;
        }
    return 0;
}

/* ---- layout ---------------------------------------------------------------------------------- */

deepinfer_status di_engram_hash_init(di_engram_hash *h, const di_model_config *cfg, const int64_t *multipliers,
                                     int32_t pad_class, di_error *err) {
    memset(h, 0, sizeof *h);
    int nl = cfg->n_engram_layer_ids;
    if (nl < 0 || nl > DI_ENGRAM_MAX_LAYERS)
        return di_error_set(err, DEEPINFER_ERR_UNSUPPORTED, "engram: %d layers (at most %d supported)", nl,
                            DI_ENGRAM_MAX_LAYERS);
    if (nl == 0) return DEEPINFER_OK;
    int ng = (int)cfg->engram_max_ngram_size, nh = (int)cfg->engram_n_heads;
    if (ng < 2 || ng > DI_ENGRAM_MAX_NGRAM || nh < 1 || cfg->engram_cols != (ng - 1) * nh ||
        cfg->engram_cols > DI_ENGRAM_MAX_COLS)
        return di_error_set(err, DEEPINFER_ERR_UNSUPPORTED,
                            "engram: max n-gram %d x %d heads is outside the supported range (n-gram 2..%d, "
                            "(n-gram - 1) x heads <= %d)", ng, nh, DI_ENGRAM_MAX_NGRAM, DI_ENGRAM_MAX_COLS);
    if (cfg->engram_compressed_vocab_size < 1 || pad_class < 0 || pad_class >= cfg->engram_compressed_vocab_size)
        return di_error_set(err, DEEPINFER_ERR_FORMAT,
                            "engram: pad class %d is outside the compressed vocabulary [0, %lld)", pad_class,
                            (long long)cfg->engram_compressed_vocab_size);
    h->n_layers = nl;
    h->max_ngram = ng;
    h->n_heads = nh;
    h->n_cols = cfg->engram_cols;
    h->pad_class = pad_class;
    h->n_classes = cfg->engram_compressed_vocab_size;
    for (int l = 0; l < nl; l++) {
        h->layer_ids[l] = cfg->engram_layer_ids[l];
        h->num_embeddings[l] = cfg->engram_num_embeddings[l];
        for (int c = 0; c < h->n_cols; c++) {
            h->primes[l][c] = (int64_t)cfg->engram_primes[l][c];
            h->offsets[l][c] = (int64_t)cfg->engram_offsets[l][c];
        }
        if (multipliers) {
            for (int s = 0; s < ng; s++) h->multipliers[l][s] = multipliers[l * ng + s];
        } else if (!di_engram_builtin_multipliers(h->layer_ids[l], h->n_classes, ng, h->multipliers[l])) {
            return di_error_set(err, DEEPINFER_ERR_NOT_FOUND,
                                "engram layer %d: no built-in hash multipliers for a compressed vocabulary of "
                                "%lld classes and n-grams up to %d (only the released V4.1-Flash constants "
                                "are built in); ship them in engram_hash.json next to config.json",
                                h->layer_ids[l], (long long)h->n_classes, ng);
        }
    }
    return DEEPINFER_OK;
}

/* ---- sidecar ------------------------------------------------------------------------------- */

/* Compare a JSON array (nested `depth` levels: layer / [n-gram] / head) with
 * computed values; returns the index of the first mismatch or -1. */
static int check_nested(const di_json *v, const di_engram_hash *h, const int64_t (*vals)[DI_ENGRAM_MAX_COLS],
                        int nested) {
    if (!v || v->type != DI_JSON_ARRAY || (int)v->count != h->n_layers) return 0;
    for (int l = 0; l < h->n_layers; l++) {
        const di_json *row = &v->items[l];
        for (int c = 0; c < h->n_cols; c++) {
            const di_json *e = nested ? di_json_at(di_json_at(row, (size_t)(c / h->n_heads)), (size_t)(c % h->n_heads))
                                      : di_json_at(row, (size_t)c);
            int64_t x;
            if (!e || !di_json_as_i64(e, &x) || x != vals[l][c]) return l * DI_ENGRAM_MAX_COLS + c;
        }
        if (row->type != DI_JSON_ARRAY || row->count != (nested ? (uint32_t)(h->max_ngram - 1) : (uint32_t)h->n_cols))
            return l * DI_ENGRAM_MAX_COLS;
    }
    return -1;
}

deepinfer_status di_engram_hash_init_json(di_engram_hash *h, const di_model_config *cfg, const di_json *sidecar,
                                          int32_t pad_class, di_error *err) {
    const di_json *m = di_json_get(sidecar, "multipliers");
    int64_t mult[DI_ENGRAM_MAX_LAYERS * DI_ENGRAM_MAX_NGRAM];
    int nl = cfg->n_engram_layer_ids, ng = (int)cfg->engram_max_ngram_size;
    if (!m || m->type != DI_JSON_ARRAY || (int)m->count != nl)
        return di_error_set(err, DEEPINFER_ERR_FORMAT,
                            "engram sidecar: \"multipliers\" must be an array of %d rows (one per Engram layer)", nl);
    if (nl > DI_ENGRAM_MAX_LAYERS || ng < 2 || ng > DI_ENGRAM_MAX_NGRAM)
        return di_error_set(err, DEEPINFER_ERR_UNSUPPORTED, "engram: %d layers / max n-gram %d are not supported", nl,
                            ng);
    for (int l = 0; l < nl; l++) {
        const di_json *row = &m->items[l];
        if (row->type != DI_JSON_ARRAY || (int)row->count != ng)
            return di_error_set(err, DEEPINFER_ERR_FORMAT, "engram sidecar: multipliers[%d] must hold %d integers", l,
                                ng);
        for (int s = 0; s < ng; s++)
            if (!di_json_as_i64(&row->items[s], &mult[l * ng + s]))
                return di_error_set(err, DEEPINFER_ERR_FORMAT,
                                    "engram sidecar: multipliers[%d][%d] is not an int64 integer", l, s);
    }
    deepinfer_status st = di_engram_hash_init(h, cfg, mult, pad_class, err);
    if (st) return st;

    const di_json *v;
    int bad;
    if ((v = di_json_get(sidecar, "primes")) && (bad = check_nested(v, h, (const int64_t(*)[DI_ENGRAM_MAX_COLS])h->primes, 1)) >= 0)
        return di_error_set(err, DEEPINFER_ERR_FORMAT,
                            "engram sidecar: \"primes\" disagree with the layout computed from config.json "
                            "(layer %d, column %d)", bad / DI_ENGRAM_MAX_COLS, bad % DI_ENGRAM_MAX_COLS);
    if ((v = di_json_get(sidecar, "offsets")) && (bad = check_nested(v, h, (const int64_t(*)[DI_ENGRAM_MAX_COLS])h->offsets, 0)) >= 0)
        return di_error_set(err, DEEPINFER_ERR_FORMAT,
                            "engram sidecar: \"offsets\" disagree with the layout computed from config.json "
                            "(layer %d, column %d)", bad / DI_ENGRAM_MAX_COLS, bad % DI_ENGRAM_MAX_COLS);
    if ((v = di_json_get(sidecar, "num_embeddings"))) {
        for (int l = 0; l < h->n_layers; l++) {
            int64_t x;
            if (v->type != DI_JSON_ARRAY || (int)v->count != h->n_layers || !di_json_as_i64(&v->items[l], &x) ||
                x != h->num_embeddings[l])
                return di_error_set(err, DEEPINFER_ERR_FORMAT,
                                    "engram sidecar: \"num_embeddings\" disagree with config.json");
        }
    }
    int64_t pc;
    if ((v = di_json_get(sidecar, "pad_class")) && (!di_json_as_i64(v, &pc) || pc != pad_class))
        return di_error_set(err, DEEPINFER_ERR_FORMAT,
                            "engram sidecar: \"pad_class\" differs from the token map's class of token %lld (%d)",
                            (long long)cfg->engram_pad_token_id, pad_class);
    return DEEPINFER_OK;
}

deepinfer_status di_engram_hash_init_file(di_engram_hash *h, const di_model_config *cfg, const char *path,
                                          int32_t pad_class, di_error *err) {
    char *text = NULL;
    size_t len = 0;
    di_json_doc *doc = NULL;
    deepinfer_status st = di_read_file(path, 64u << 20, &text, &len, err);
    if (!st) st = di_json_parse(text, len, NULL, &doc, err);
    if (!st) {
        const di_json *root = doc->root, *inner = di_json_get(root, "engram");
        if (!di_json_get(root, "multipliers") && inner && inner->type == DI_JSON_OBJECT) root = inner;
        st = di_engram_hash_init_json(h, cfg, root, pad_class, err);
    }
    if (st) di_error_prefix(err, "%s: ", path);
    di_json_free(doc);
    free(text);
    return st;
}

/* ---- history and hash ids ------------------------------------------------------------------ */

void di_engram_seq_init(di_engram_seq *s) {
    s->len = 0;
    for (int i = 0; i < DI_ENGRAM_HIST; i++) s->cls[i] = DI_ENGRAM_DEAD;
}

deepinfer_status di_engram_seq_truncate(di_engram_seq *s, int64_t len, int max_ngram, di_error *err) {
    if (len < 0 || len > s->len || s->len - len > DI_ENGRAM_HIST - (max_ngram - 1))
        return di_error_set(err, DEEPINFER_ERR_INVALID_ARGUMENT,
                            "engram history: cannot roll back from %lld to %lld positions (at most %d back)",
                            (long long)s->len, (long long)len, DI_ENGRAM_HIST - (max_ngram - 1));
    s->len = len;
    return DEEPINFER_OK;
}

static deepinfer_status check_push(const di_engram_seq *s, int64_t start_pos, int64_t n, di_error *err) {
    if (start_pos != s->len || n < 0)
        return di_error_set(err, DEEPINFER_ERR_INVALID_ARGUMENT,
                            "engram history: positions must continue the sequence (next is %lld, got %lld)",
                            (long long)s->len, (long long)start_pos);
    return DEEPINFER_OK;
}

deepinfer_status di_engram_seq_push(di_engram_seq *s, int64_t start_pos, const int32_t *classes, int64_t n,
                                    di_error *err) {
    deepinfer_status st = check_push(s, start_pos, n, err);
    if (st) return st;
    for (int64_t i = 0; i < n; i++) s->cls[(start_pos + i) % DI_ENGRAM_HIST] = classes[i];
    s->len += n;
    return DEEPINFER_OK;
}

deepinfer_status di_engram_hash_ids(const di_engram_hash *h, di_engram_seq *s, int64_t start_pos,
                                    const int32_t *classes, int64_t n, int64_t *ids, di_error *err) {
    deepinfer_status st = check_push(s, start_pos, n, err);
    if (st) return st;
    for (int64_t i = 0; i < n; i++)
        if (classes[i] != DI_ENGRAM_DEAD && (classes[i] < 0 || classes[i] >= h->n_classes))
            return di_error_set(err, DEEPINFER_ERR_INVALID_ARGUMENT,
                                "engram: class %d at position %lld is outside [0, %lld)", classes[i],
                                (long long)(start_pos + i), (long long)h->n_classes);
    const int nl = h->n_layers, nc = h->n_cols, ng = h->max_ngram, nh = h->n_heads;
    for (int64_t i = 0; i < n; i++) {
        const int64_t p = start_pos + i;
        int32_t tok[DI_ENGRAM_MAX_NGRAM];
        int blocked = 0;
        for (int sh = 0; sh < ng; sh++) {
            int64_t q = p - sh < 0 ? 0 : p - sh;
            int32_t src = q >= start_pos ? classes[q - start_pos] : s->cls[q % DI_ENGRAM_HIST];
            blocked |= (p < sh) | (src == DI_ENGRAM_DEAD);
            tok[sh] = blocked ? h->pad_class : src;
        }
        for (int l = 0; l < nl; l++) {
            int64_t *out = ids + (i * nl + l) * nc;
            /* int64 products wrap as in torch (they cannot overflow with the reference's bounds) */
            uint64_t acc = (uint64_t)tok[0] * (uint64_t)h->multipliers[l][0];
            for (int g = 1; g < ng; g++) {
                acc ^= (uint64_t)tok[g] * (uint64_t)h->multipliers[l][g];
                const int64_t hv = (int64_t)acc;
                for (int k = 0; k < nh; k++) {
                    const int c = (g - 1) * nh + k;
                    int64_t r = hv % h->primes[l][c];
                    if (r < 0) r += h->primes[l][c]; /* torch's % takes the divisor's sign */
                    out[c] = r + h->offsets[l][c];
                }
            }
        }
    }
    for (int64_t i = 0; i < n; i++) s->cls[(start_pos + i) % DI_ENGRAM_HIST] = classes[i];
    s->len += n;
    return DEEPINFER_OK;
}
