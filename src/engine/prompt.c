/* prompt.c — prompts to token ids (prompt.h). */
#include "engine/prompt.h"

#include <stdlib.h>
#include <string.h>

#include "io/json.h"

static deepinfer_status encode_text(const di_tokenizer *tok, const char *text, size_t len, int32_t **ids, size_t *n,
                                    di_error *err) {
    size_t cap = 0;
    return di_tokenizer_encode(tok, text, len, ids, n, &cap, err);
}

static deepinfer_status render_messages(const deepinfer_prompt *p, di_chat_arch arch, char **text, size_t *len,
                                        di_error *err) {
    di_json_doc *doc = NULL;
    deepinfer_status st = di_json_parse(p->messages, strlen(p->messages), NULL, &doc, err);
    if (st) return di_error_prefix(err, "messages");
    di_chat_options o = {.arch = arch, .thinking = p->thinking, .reasoning_effort = p->reasoning_effort};
    st = di_chat_encode(doc->root, &o, text, len, err);
    di_json_free(doc);
    if (st) di_error_prefix(err, "messages");
    return st;
}

/* Put `bos` in front of ids[0..n) unless it is already there. */
static deepinfer_status prepend_bos(int32_t bos, int32_t **ids, size_t *n, di_error *err) {
    if (*n && (*ids)[0] == bos) return DEEPINFER_OK;
    int32_t *t = realloc(*ids, sizeof(int32_t) * (*n + 1));
    if (!t) return di_error_set(err, DEEPINFER_ERR_OUT_OF_MEMORY, "out of memory");
    memmove(t + 1, t, sizeof(int32_t) * *n);
    t[0] = bos;
    *ids = t;
    (*n)++;
    return DEEPINFER_OK;
}

deepinfer_status di_prompt_tokens(const deepinfer_prompt *p, const di_tokenizer *tok, di_chat_arch arch, int32_t vocab,
                                  int32_t image_id, int32_t bos_id, int32_t **ids, size_t *n, di_error *err) {
    const deepinfer_status E = DEEPINFER_ERR_INVALID_ARGUMENT;
    *ids = NULL;
    *n = 0;
    if (!p) return di_error_set(err, E, "prompt: missing");
    int sources = (p->text != NULL) + (p->token_ids != NULL || p->n_token_ids > 0) + (p->messages != NULL);
    if (sources != 1)
        return di_error_set(err, E, "prompt: give exactly one of text, token_ids or messages (got %d)", sources);
    if (p->text && !p->text[0]) return di_error_set(err, E, "prompt is empty (text \"\")");
    if ((p->text || p->messages) && !tok)
        return di_error_set(err, E,
                            "prompt: %s needs a tokenizer, and this model has none (no tokenizer.json in its "
                            "directory); pass token_ids or set the engine's tokenizer",
                            p->text ? "text" : "messages");
    deepinfer_status st = DEEPINFER_OK;
    if (p->token_ids || p->n_token_ids) {
        if (!p->token_ids) return di_error_set(err, E, "prompt: n_token_ids is %zu but token_ids is NULL", p->n_token_ids);
        if (!p->n_token_ids) return di_error_set(err, E, "prompt is empty (0 token ids)");
        for (size_t i = 0; i < p->n_token_ids; i++) {
            if (p->token_ids[i] < 0 || p->token_ids[i] >= vocab)
                return di_error_set(err, E, "prompt: token_ids[%zu] = %d is outside the vocabulary [0, %d)", i,
                                    p->token_ids[i], vocab);
            if (p->token_ids[i] == image_id)
                return di_error_set(err, E, "prompt: token_ids[%zu] = %d is the image token; the engine runs text only",
                                    i, image_id);
        }
        *ids = malloc(sizeof(int32_t) * p->n_token_ids);
        if (!*ids) return di_error_set(err, DEEPINFER_ERR_OUT_OF_MEMORY, "out of memory");
        memcpy(*ids, p->token_ids, sizeof(int32_t) * p->n_token_ids);
        *n = p->n_token_ids;
        return DEEPINFER_OK;
    }
    if (p->text) {
        st = encode_text(tok, p->text, strlen(p->text), ids, n, err);
        if (!st && *n && bos_id >= 0 && !p->no_bos) st = prepend_bos(bos_id, ids, n, err);
    } else {
        char *text = NULL;
        size_t len = 0;
        st = render_messages(p, arch, &text, &len, err);
        if (!st) st = encode_text(tok, text, len, ids, n, err);
        free(text);
    }
    if (!st && !*n) st = di_error_set(err, E, "prompt is empty (it encodes to no tokens)");
    for (size_t i = 0; !st && i < *n; i++) { /* a tokenizer larger than the model's vocabulary; image parts */
        if ((*ids)[i] >= vocab)
            st = di_error_set(err, E, "prompt: token %d (at %zu) is outside the model's vocabulary [0, %d)", (*ids)[i], i,
                              vocab);
        else if ((*ids)[i] == image_id)
            st = di_error_set(err, E, "prompt: token %zu is the image token; the engine runs text only", i);
    }
    if (st) {
        free(*ids);
        *ids = NULL;
        *n = 0;
    }
    return st;
}
