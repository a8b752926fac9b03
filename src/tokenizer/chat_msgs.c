/*
 * chat_msgs.c — the preprocessing half of the DeepSeek chat encoders:
 * JSON → messages, request-level tools, merging tool messages into user
 * turns as <tool_result> blocks, ordering tool results like the preceding
 * tool calls, and dropping reasoning of earlier turns. Python semantics
 * (truthiness, `x or ""`, dict key order) are reproduced exactly.
 */
#include <stdlib.h>
#include <string.h>

#include "tokenizer/chat_internal.h"

#define IMAGE_PLACEHOLDER "<｜deepseek_image｜>"

int di_cstr_eq(cstr a, const char *b) { return a.s && a.n == strlen(b) && !memcmp(a.s, b, a.n); }

int di_chat_truthy(const di_json *v) {
    if (!v) return 0;
    switch (v->type) {
    case DI_JSON_NULL:
    case DI_JSON_FALSE: return 0;
    case DI_JSON_TRUE: return 1;
    case DI_JSON_NUMBER: return v->num != 0;
    case DI_JSON_STRING: return v->str_len > 0;
    default: return v->count > 0;
    }
}

static cstr from_json_str(const di_json *v) {
    if (v && v->type == DI_JSON_STRING) return (cstr){v->str, v->str_len};
    return (cstr){NULL, 0};
}

static chat_msg *push_msg(chat_ctx *c) {
    if (c->n == c->cap) {
        int nc = c->cap ? c->cap * 2 : 16;
        chat_msg *nm = di_arena_alloc(&c->arena, (size_t)nc * sizeof *nm);
        if (!nm) return NULL;
        if (c->n) memcpy(nm, c->msgs, (size_t)c->n * sizeof *nm);
        c->msgs = nm;
        c->cap = nc;
    }
    chat_msg *m = &c->msgs[c->n++];
    memset(m, 0, sizeof *m);
    return m;
}

static chat_block *push_block(chat_ctx *c, chat_msg *m) {
    if (m->nblocks == m->cap_blocks) {
        int nc = m->cap_blocks ? m->cap_blocks * 2 : 4;
        chat_block *nb = di_arena_alloc(&c->arena, (size_t)nc * sizeof *nb);
        if (!nb) return NULL;
        if (m->nblocks) memcpy(nb, m->blocks, (size_t)m->nblocks * sizeof *nb);
        m->blocks = nb;
        m->cap_blocks = nc;
    }
    chat_block *b = &m->blocks[m->nblocks++];
    memset(b, 0, sizeof *b);
    return b;
}

#define OOM() di_error_set(c->err, DEEPINFER_ERR_OUT_OF_MEMORY, "chat encoding: out of memory")

static int is_image_part(const char *t) {
    return !strcmp(t, "image_url") || !strcmp(t, "input_image") || !strcmp(t, "image_pil") || !strcmp(t, "image");
}

/* Flatten a content list of parts into text. */
static deepinfer_status flatten_parts(chat_ctx *c, int idx, const di_json *list, cstr *out) {
    di_sbuf b = {0};
    const char *sep = c->d->v41 ? "\n\n" : "\n";
    for (uint32_t i = 0; i < list->count; i++) {
        const di_json *p = &list->items[i];
        const di_json *t = di_json_get(p, "type");
        if (i) di_sbuf_puts(&b, sep);
        if (p->type == DI_JSON_STRING) { /* a bare string part */
            di_sbuf_put(&b, p->str, p->str_len);
        } else if (t && t->type == DI_JSON_STRING && !strcmp(t->str, "text")) {
            const di_json *tx = di_json_get(p, "text");
            if (tx && tx->type == DI_JSON_STRING) di_sbuf_put(&b, tx->str, tx->str_len);
            else if (tx && tx->type != DI_JSON_NULL) {
                di_sbuf_free(&b);
                return di_error_set(c->err, DEEPINFER_ERR_INVALID_ARGUMENT,
                                    "messages[%d].content[%u]: \"text\" must be a string", idx, i);
            }
        } else if (t && t->type == DI_JSON_STRING && is_image_part(t->str) && c->d->v41) {
            di_sbuf_puts(&b, IMAGE_PLACEHOLDER);
        } else {
            di_sbuf_free(&b);
            return di_error_set(c->err, DEEPINFER_ERR_INVALID_ARGUMENT,
                                "messages[%d].content[%u]: part type \"%s\" is not supported (%s)", idx, i,
                                t && t->type == DI_JSON_STRING ? t->str : "?",
                                c->d->v41 ? "V4.1 takes text and image parts" : "V4 takes text parts only");
        }
    }
    size_t n;
    char *s = di_sbuf_take(&b, &n);
    if (!s) return OOM();
    char *a = di_arena_strndup(&c->arena, s, n);
    free(s);
    if (!a) return OOM();
    *out = (cstr){a, n};
    return DEEPINFER_OK;
}

static deepinfer_status parse_blocks(chat_ctx *c, int idx, chat_msg *m, const di_json *list) {
    m->has_blocks = 1;
    for (uint32_t i = 0; i < list->count; i++) {
        const di_json *p = &list->items[i];
        chat_block *b = push_block(c, m);
        if (!b) return OOM();
        cstr t = from_json_str(di_json_get(p, "type"));
        if (di_cstr_eq(t, "text")) {
            b->type = BLOCK_TEXT;
            b->text = from_json_str(di_json_get(p, "text"));
        } else if (di_cstr_eq(t, "tool_result")) {
            b->type = BLOCK_TOOL_RESULT;
            b->content = di_json_get(p, "content");
            b->tool_use_id = from_json_str(di_json_get(p, "tool_use_id"));
        } else if (t.s && is_image_part(t.s)) {
            /* DeepSeek's V4.1 encoder turns image blocks into placeholder text. */
            b->type = BLOCK_TEXT;
            b->text = (cstr){IMAGE_PLACEHOLDER, strlen(IMAGE_PLACEHOLDER)};
        } else {
            b->type = BLOCK_OTHER;
            b->type_name = t;
        }
    }
    (void)idx;
    return DEEPINFER_OK;
}

#define BAD(...) return di_error_set(c->err, DEEPINFER_ERR_INVALID_ARGUMENT, __VA_ARGS__)

static deepinfer_status parse_msg(chat_ctx *c, int idx, const di_json *j, chat_msg *m) {
    if (j->type != DI_JSON_OBJECT) BAD("messages[%d] must be an object", idx);
    m->role = from_json_str(di_json_get(j, "role"));
    static const char *roles[] = {"system", "developer", "user", "assistant", "tool", "latest_reminder"};
    int ok = 0;
    for (int i = 0; i < 6; i++) ok |= di_cstr_eq(m->role, roles[i]);
    if (!ok) {
        const di_json *r = di_json_get(j, "role");
        BAD("messages[%d]: role \"%s\" is not supported (system, developer, user, assistant, tool, latest_reminder)",
            idx, r && r->type == DI_JSON_STRING ? r->str : "(missing)");
    }
    const di_json *ct = di_json_get(j, "content");
    if (ct && ct->type == DI_JSON_STRING) m->content = from_json_str(ct);
    else if (ct && ct->type == DI_JSON_ARRAY) {
        deepinfer_status s = flatten_parts(c, idx, ct, &m->content);
        if (s) return s;
    } else if (ct && ct->type != DI_JSON_NULL)
        BAD("messages[%d].content must be a string, null or a list of parts", idx);
    m->content_null = ct && ct->type == DI_JSON_NULL;

    const di_json *rc = di_json_get(j, "reasoning_content");
    if (c->d->v41 && di_json_get(j, "reasoning")) rc = di_json_get(j, "reasoning");
    if (rc && rc->type != DI_JSON_STRING && rc->type != DI_JSON_NULL)
        BAD("messages[%d].reasoning_content must be a string or null", idx);
    m->reasoning = from_json_str(rc);

    const di_json *task = di_json_get(j, "task");
    if (task && task->type != DI_JSON_NULL) {
        static const char *tasks[] = {"action", "query", "authority", "domain", "title", "read_url"};
        int tok = 0;
        m->task = from_json_str(task);
        for (int i = 0; i < 6; i++) tok |= di_cstr_eq(m->task, tasks[i]);
        if (!tok) BAD("messages[%d]: task must be one of action, query, authority, domain, title, read_url", idx);
    }
    m->wo_eos = di_chat_truthy(di_json_get(j, "wo_eos"));
    m->tools = di_json_get(j, "tools");
    if (m->tools && m->tools->type != DI_JSON_ARRAY && m->tools->type != DI_JSON_NULL)
        BAD("messages[%d].tools must be a list", idx);
    m->response_format = di_json_get(j, "response_format");
    m->tool_calls = di_json_get(j, "tool_calls");
    if (m->tool_calls && m->tool_calls->type != DI_JSON_ARRAY && m->tool_calls->type != DI_JSON_NULL)
        BAD("messages[%d].tool_calls must be a list", idx);
    const di_json *tci = di_json_get(j, "tool_call_id");
    m->tool_call_id = from_json_str(tci);
    const di_json *cb = di_json_get(j, "content_blocks");
    if (c->d->v41 && cb && cb->type != DI_JSON_NULL) {
        if (cb->type != DI_JSON_ARRAY) BAD("messages[%d].content_blocks must be a list", idx);
        return parse_blocks(c, idx, m, cb);
    }
    return DEEPINFER_OK;
}

/* The Python: merge_tool_messages(). */
static deepinfer_status merge_tools(chat_ctx *c) {
    chat_msg *src = c->msgs;
    int n = c->n;
    c->msgs = NULL;
    c->n = c->cap = 0;
    for (int i = 0; i < n; i++) {
        chat_msg *m = &src[i];
        chat_msg *last = c->n ? &c->msgs[c->n - 1] : NULL;
        int last_user_blocks = last && di_cstr_eq(last->role, "user") && last->has_blocks;
        if (di_cstr_eq(m->role, "tool")) {
            chat_msg *dst = last_user_blocks ? last : NULL;
            if (!dst) {
                if (!(dst = push_msg(c))) return OOM();
                dst->role = (cstr){"user", 4};
                dst->has_blocks = 1;
            }
            chat_block *b = push_block(c, dst);
            if (!b) return OOM();
            b->type = BLOCK_TOOL_RESULT;
            b->tool_use_id = m->tool_call_id.s ? m->tool_call_id : (cstr){"", 0};
            /* msg.get("content", ""): absent → "", null → None (rendered "None"). */
            b->content = NULL;
            b->text = m->content.s ? m->content : (cstr){"", 0};
            b->content_none = m->content_null;
        } else if (di_cstr_eq(m->role, "user")) {
            /* Blocks of this message: its own content_blocks (V4.1), else one text block. */
            chat_msg tmp = {0};
            if (m->has_blocks) {
                tmp.blocks = m->blocks;
                tmp.nblocks = m->nblocks;
            } else {
                chat_block *b = push_block(c, &tmp);
                if (!b) return OOM();
                b->type = BLOCK_TEXT;
                b->text = m->content.s ? m->content : (cstr){"", 0};
            }
            if (last_user_blocks && !last->task.s) {
                for (int k = 0; k < tmp.nblocks; k++) {
                    chat_block *b = push_block(c, last);
                    if (!b) return OOM();
                    *b = tmp.blocks[k];
                }
            } else {
                chat_msg *dst = push_msg(c);
                if (!dst) return OOM();
                if (c->d->v41) {
                    *dst = *m; /* V4.1 keeps every field */
                } else {       /* V4 keeps role, content, blocks, task, wo_eos (and mask) */
                    dst->role = m->role;
                    dst->content = m->content;
                    dst->task = m->task;
                    dst->wo_eos = m->wo_eos;
                }
                dst->blocks = tmp.blocks;
                dst->nblocks = dst->cap_blocks = tmp.nblocks;
                dst->has_blocks = 1;
            }
        } else {
            chat_msg *dst = push_msg(c);
            if (!dst) return OOM();
            *dst = *m;
        }
    }
    return DEEPINFER_OK;
}

static cstr tool_call_id(const di_json *tc) {
    cstr id = from_json_str(di_json_get(tc, "id"));
    if (id.s && id.n) return id;
    return from_json_str(di_json_get(di_json_get(tc, "function"), "id"));
}

/* The Python: sort_tool_results_by_call_order(). */
static deepinfer_status sort_tool_results(chat_ctx *c) {
    const di_json *order = NULL; /* tool_calls of the last assistant that had some */
    for (int i = 0; i < c->n; i++) {
        chat_msg *m = &c->msgs[i];
        if (di_cstr_eq(m->role, "assistant") && di_chat_truthy(m->tool_calls)) {
            order = m->tool_calls;
        } else if (di_cstr_eq(m->role, "user") && m->nblocks) {
            int ntool = 0;
            for (int k = 0; k < m->nblocks; k++) ntool += m->blocks[k].type == BLOCK_TOOL_RESULT;
            int have_order = 0;
            for (uint32_t k = 0; order && k < order->count; k++) have_order |= tool_call_id(&order->items[k]).n > 0;
            if (ntool < 2 || !have_order) continue;
            /* Rank of each tool block (dict semantics: the last call with an id wins). */
            int *rank = di_arena_alloc(&c->arena, (size_t)ntool * sizeof *rank);
            chat_block *tb = di_arena_alloc(&c->arena, (size_t)ntool * sizeof *tb);
            if (!rank || !tb) return OOM();
            int t = 0;
            for (int k = 0; k < m->nblocks; k++) {
                if (m->blocks[k].type != BLOCK_TOOL_RESULT) continue;
                cstr want = m->blocks[k].tool_use_id;
                int r = 0;
                for (uint32_t q = 0; q < order->count; q++) {
                    cstr id = tool_call_id(&order->items[q]);
                    if (id.n && want.s && id.n == want.n && !memcmp(id.s, want.s, id.n)) r = (int)q;
                }
                rank[t] = r;
                tb[t++] = m->blocks[k];
            }
            /* Stable insertion sort by rank (Python's sorted is stable). */
            for (int a = 1; a < ntool; a++) {
                int ra = rank[a];
                chat_block ba = tb[a];
                int b = a - 1;
                while (b >= 0 && rank[b] > ra) {
                    rank[b + 1] = rank[b];
                    tb[b + 1] = tb[b];
                    b--;
                }
                rank[b + 1] = ra;
                tb[b + 1] = ba;
            }
            t = 0;
            for (int k = 0; k < m->nblocks; k++)
                if (m->blocks[k].type == BLOCK_TOOL_RESULT) m->blocks[k] = tb[t++];
        }
    }
    return DEEPINFER_OK;
}

int di_chat_last_user(const chat_ctx *c, const chat_msg *m, int n) {
    for (int i = n - 1; i >= 0; i--) {
        if (di_cstr_eq(m[i].role, "user") || di_cstr_eq(m[i].role, "developer")) return i;
        if (c->d->v41 && i > 0 && di_cstr_eq(m[i].role, "system")) return i;
    }
    return -1;
}

/* The Python: _drop_thinking_messages(). */
static void drop_thinking(chat_ctx *c) {
    int last = di_chat_last_user(c, c->msgs, c->n);
    int k = 0;
    for (int i = 0; i < c->n; i++) {
        chat_msg m = c->msgs[i];
        int keep = di_cstr_eq(m.role, "user") || di_cstr_eq(m.role, "system") || di_cstr_eq(m.role, "tool") ||
                   di_cstr_eq(m.role, "latest_reminder") || i >= last;
        if (keep) {
            c->msgs[k++] = m;
        } else if (di_cstr_eq(m.role, "assistant")) {
            m.reasoning = (cstr){NULL, 0};
            c->msgs[k++] = m;
        } /* developer (and other roles) before the last user turn are dropped */
    }
    c->n = k;
}

deepinfer_status di_chat_prepare(chat_ctx *c, const di_json *input, int *drop) {
    const di_json *msgs = input, *tools = NULL;
    if (input && input->type == DI_JSON_OBJECT) {
        msgs = di_json_get(input, "messages");
        tools = di_json_get(input, "tools");
        if (tools && tools->type != DI_JSON_ARRAY && tools->type != DI_JSON_NULL) BAD("\"tools\" must be a list");
    }
    if (!msgs || msgs->type != DI_JSON_ARRAY)
        BAD("expected a JSON array of messages, or an object with a \"messages\" array");
    int has_tools = tools && tools->type == DI_JSON_ARRAY && tools->count > 0;
    /* Where request-level tools go (see chat.h). */
    int tools_at = -1, insert_system = 0;
    if (has_tools) {
        if (c->d->v41) {
            for (uint32_t i = 0; i < msgs->count && tools_at < 0; i++)
                if (di_cstr_eq(from_json_str(di_json_get(&msgs->items[i], "role")), "system")) tools_at = (int)i;
        } else if (msgs->count) {
            cstr r0 = from_json_str(di_json_get(&msgs->items[0], "role"));
            if (di_cstr_eq(r0, "system") || di_cstr_eq(r0, "developer")) tools_at = 0;
        }
        insert_system = tools_at < 0;
    }
    if (insert_system) {
        chat_msg *m = push_msg(c);
        if (!m) return OOM();
        m->role = (cstr){"system", 6};
        if (c->d->v41) m->content = (cstr){"", 0};
        m->tools = tools;
    }
    for (uint32_t i = 0; i < msgs->count; i++) {
        chat_msg *m = push_msg(c);
        if (!m) return OOM();
        deepinfer_status s = parse_msg(c, (int)i, &msgs->items[i], m);
        if (s) return s;
        if ((int)i == tools_at) m->tools = tools;
    }
    deepinfer_status s = merge_tools(c);
    if (s) return s;
    if ((s = sort_tool_results(c))) return s;
    int any_tools = 0;
    for (int i = 0; i < c->n; i++) any_tools |= di_chat_truthy(c->msgs[i].tools);
    *drop = !c->opt->keep_thinking && !any_tools;
    if (c->thinking && *drop) drop_thinking(c);
    return DEEPINFER_OK;
}
