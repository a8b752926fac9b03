/*
 * so_hfvocab.c — tokenizer.json vocabulary reader for the so-check tool.
 */
#include "so_hfvocab.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/json.h"
#include "structured/regex.h"
#include "util/file.h"

/* GPT-2 ByteLevel: byte b <-> code point */
static void byte_table(uint32_t cp_of[256]) {
    int n = 0;
    for (int b = 0; b < 256; b++) {
        int printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
        cp_of[b] = printable ? (uint32_t)b : (uint32_t)(256 + n++);
    }
}

static int decode_bytelevel(const char *s, size_t n, const int16_t *byte_of, uint8_t *out, uint32_t *olen) {
    size_t i = 0;
    uint32_t o = 0;
    while (i < n) {
        int32_t cp = so_utf8_decode((const uint8_t *)s, n, &i);
        if (cp < 0 || cp >= 512 || byte_of[cp] < 0) return 0;
        out[o++] = (uint8_t)byte_of[cp];
    }
    *olen = o;
    return 1;
}

deepinfer_status so_hfvocab_load(const char *path, so_hfvocab *h, di_error *err) {
    memset(h, 0, sizeof *h);
    h->eos = -1;
    char p[4096];
    if (di_is_dir(path)) di_path_join(p, sizeof p, path, "tokenizer.json");
    else snprintf(p, sizeof p, "%s", path);
    char *text = NULL;
    size_t len = 0;
    deepinfer_status st = di_read_file(p, 0, &text, &len, err);
    if (st != DEEPINFER_OK) return st;
    di_json_doc *doc = NULL;
    st = di_json_parse(text, len, NULL, &doc, err);
    free(text);
    if (st != DEEPINFER_OK) return di_error_prefix(err, "%s", p);
    const di_json *vocab = di_json_get(di_json_get(doc->root, "model"), "vocab");
    const di_json *added = di_json_get(doc->root, "added_tokens");
    if (!vocab || vocab->type != DI_JSON_OBJECT) {
        di_json_free(doc);
        return di_error_set(err, DEEPINFER_ERR_FORMAT, "%s: no model.vocab object", p);
    }
    int64_t maxid = -1, id;
    for (uint32_t i = 0; i < vocab->count; i++)
        if (di_json_as_i64(&vocab->items[i], &id) && id > maxid) maxid = id;
    for (uint32_t i = 0; added && i < added->count; i++)
        if (di_json_as_i64(di_json_get(&added->items[i], "id"), &id) && id > maxid) maxid = id;
    if (maxid < 0 || maxid > 10000000) {
        di_json_free(doc);
        return di_error_set(err, DEEPINFER_ERR_FORMAT, "%s: bad token ids", p);
    }
    h->n_tokens = (int32_t)maxid + 1;
    h->bytes = calloc((size_t)h->n_tokens, sizeof *h->bytes);
    h->lens = calloc((size_t)h->n_tokens, sizeof *h->lens);
    h->special = calloc((size_t)h->n_tokens, 1);
    if (!h->bytes || !h->lens || !h->special) {
        di_json_free(doc);
        so_hfvocab_free(h);
        return di_error_set(err, DEEPINFER_ERR_OUT_OF_MEMORY, "out of memory");
    }
    uint32_t cp_of[256];
    int16_t byte_of[512];
    byte_table(cp_of);
    for (int k = 0; k < 512; k++) byte_of[k] = -1;
    for (int b = 0; b < 256; b++) byte_of[cp_of[b]] = (int16_t)b;
    for (uint32_t i = 0; i < vocab->count; i++) {
        const di_json *m = &vocab->items[i];
        if (!di_json_as_i64(m, &id) || id < 0) continue;
        uint8_t *buf = malloc(m->key_len + 1);
        uint32_t bl = 0;
        if (!buf) continue;
        if (!decode_bytelevel(m->key, m->key_len, byte_of, buf, &bl)) {
            memcpy(buf, m->key, m->key_len); /* not ByteLevel: keep the text */
            bl = (uint32_t)m->key_len;
        }
        free(h->bytes[id]);
        h->bytes[id] = buf, h->lens[id] = bl;
    }
    for (uint32_t i = 0; added && i < added->count; i++) {
        const di_json *t = &added->items[i];
        const di_json *c = di_json_get(t, "content");
        int sp = 0;
        di_json_as_bool(di_json_get(t, "special"), &sp);
        if (!di_json_as_i64(di_json_get(t, "id"), &id) || !c || c->type != DI_JSON_STRING) continue;
        uint8_t *buf = malloc(c->str_len + 1);
        if (!buf) continue;
        memcpy(buf, c->str, c->str_len);
        free(h->bytes[id]);
        h->bytes[id] = buf, h->lens[id] = (uint32_t)c->str_len;
        h->special[id] = (uint8_t)sp;
        if (strstr(c->str, "end_of_sentence") || strstr(c->str, "end\xe2\x96\x81of\xe2\x96\x81sentence") ||
            !strcmp(c->str, "</s>") || !strcmp(c->str, "<|endoftext|>"))
            if (h->eos < 0) h->eos = (int32_t)id;
    }
    di_json_free(doc);
    return DEEPINFER_OK;
}

void so_hfvocab_free(so_hfvocab *h) {
    if (h->bytes)
        for (int32_t i = 0; i < h->n_tokens; i++) free(h->bytes[i]);
    free(h->bytes), free(h->lens), free(h->special);
    memset(h, 0, sizeof *h);
}

long so_greedy_tokenize(const so_vocab *v, const char *text, size_t len, int32_t *ids, size_t cap) {
    size_t i = 0, n = 0;
    while (i < len) {
        /* walk the trie as far as possible, remember the last token end */
        uint32_t node = 0;
        int32_t best = -1;
        size_t best_len = 0, d = 0;
        while (i + d < len) {
            uint8_t b = (uint8_t)text[i + d];
            uint32_t ch = node + 1, end = v->nodes[node].end, found = 0;
            while (ch < end) {
                if (v->nodes[ch].byte == b) {
                    found = ch;
                    break;
                }
                if (v->nodes[ch].byte > b) break;
                ch = v->nodes[ch].end;
            }
            if (!found) break;
            node = found, d++;
            if (v->nodes[node].tok >= 0) best = v->nodes[node].tok, best_len = d;
        }
        if (best < 0 || n >= cap) return -1;
        ids[n++] = best;
        i += best_len;
    }
    return (long)n;
}
