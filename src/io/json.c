#include "io/json.h"

#include <stdlib.h>
#include <string.h>

/* Parser state. Children of the containers being parsed accumulate on a
 * shared scratch stack; when a container closes, its children are copied
 * into the arena as one contiguous array. */
typedef struct parser {
    const unsigned char *s;
    size_t len;
    size_t pos;
    int depth;
    int max_depth;
    di_arena *arena;
    di_json *stack;
    size_t stack_len;
    size_t stack_cap;
    di_error *err;
    deepinfer_status status;
    unsigned char *buf; /* scratch for string unescaping */
    size_t buf_cap;
} parser;

void di_json_line_col(const char *text, size_t len, size_t offset, int *line, int *col) {
    int l = 1, c = 1;
    if (offset > len) offset = len;
    for (size_t i = 0; i < offset; i++) {
        if (text[i] == '\n') {
            l++;
            c = 1;
        } else if (((unsigned char)text[i] & 0xC0) != 0x80) {
            c++;
        }
    }
    *line = l;
    *col = c;
}

static int fail(parser *p, deepinfer_status code, const char *what) {
    if (p->status == DEEPINFER_OK) {
        int line, col;
        di_json_line_col((const char *)p->s, p->len, p->pos, &line, &col);
        p->status = di_error_set(p->err, code, "line %d, column %d: %s", line, col, what);
    }
    return -1;
}

static void skip_ws(parser *p) {
    while (p->pos < p->len) {
        unsigned char c = p->s[p->pos];
        if (c == ' ' || c == '\t' || c == '\n' || c == '\r') p->pos++;
        else break;
    }
}

static int push(parser *p, const di_json *v) {
    if (p->stack_len == p->stack_cap) {
        size_t cap = p->stack_cap ? p->stack_cap * 2 : 64;
        di_json *ns = realloc(p->stack, cap * sizeof *ns);
        if (!ns) return fail(p, DEEPINFER_ERR_OUT_OF_MEMORY, "out of memory");
        p->stack = ns;
        p->stack_cap = cap;
    }
    p->stack[p->stack_len++] = *v;
    return 0;
}

static int ensure_buf(parser *p, size_t n) {
    if (n <= p->buf_cap) return 0;
    size_t cap = p->buf_cap ? p->buf_cap : 256;
    while (cap < n) cap *= 2;
    unsigned char *nb = realloc(p->buf, cap);
    if (!nb) return fail(p, DEEPINFER_ERR_OUT_OF_MEMORY, "out of memory");
    p->buf = nb;
    p->buf_cap = cap;
    return 0;
}

/* Length of a valid UTF-8 sequence starting at s[0] (n bytes available), or 0. */
static size_t utf8_valid_len(const unsigned char *s, size_t n) {
    unsigned char c = s[0];
    if (c < 0x80) return 1;
    if (c >= 0xC2 && c <= 0xDF) return (n >= 2 && (s[1] & 0xC0) == 0x80) ? 2 : 0;
    if (c >= 0xE0 && c <= 0xEF) {
        if (n < 3 || (s[1] & 0xC0) != 0x80 || (s[2] & 0xC0) != 0x80) return 0;
        if (c == 0xE0 && s[1] < 0xA0) return 0;  /* overlong */
        if (c == 0xED && s[1] >= 0xA0) return 0; /* surrogate */
        return 3;
    }
    if (c >= 0xF0 && c <= 0xF4) {
        if (n < 4 || (s[1] & 0xC0) != 0x80 || (s[2] & 0xC0) != 0x80 || (s[3] & 0xC0) != 0x80) return 0;
        if (c == 0xF0 && s[1] < 0x90) return 0; /* overlong */
        if (c == 0xF4 && s[1] >= 0x90) return 0; /* > U+10FFFF */
        return 4;
    }
    return 0;
}

static int hex4(parser *p, size_t at, unsigned *out) {
    if (at + 4 > p->len) return -1;
    unsigned v = 0;
    for (int i = 0; i < 4; i++) {
        unsigned char c = p->s[at + i];
        v <<= 4;
        if (c >= '0' && c <= '9') v |= (unsigned)(c - '0');
        else if (c >= 'a' && c <= 'f') v |= (unsigned)(c - 'a' + 10);
        else if (c >= 'A' && c <= 'F') v |= (unsigned)(c - 'A' + 10);
        else return -1;
    }
    *out = v;
    return 0;
}

static size_t put_utf8(unsigned char *o, unsigned cp) {
    if (cp < 0x80) {
        o[0] = (unsigned char)cp;
        return 1;
    }
    if (cp < 0x800) {
        o[0] = (unsigned char)(0xC0 | (cp >> 6));
        o[1] = (unsigned char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        o[0] = (unsigned char)(0xE0 | (cp >> 12));
        o[1] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
        o[2] = (unsigned char)(0x80 | (cp & 0x3F));
        return 3;
    }
    o[0] = (unsigned char)(0xF0 | (cp >> 18));
    o[1] = (unsigned char)(0x80 | ((cp >> 12) & 0x3F));
    o[2] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
    o[3] = (unsigned char)(0x80 | (cp & 0x3F));
    return 4;
}

/* Parse a string at p->pos (which is '"'); returns arena copy. */
static int parse_string(parser *p, const char **out, size_t *out_len) {
    size_t i = p->pos + 1;
    /* Fast path: no escapes. */
    size_t start = i;
    while (i < p->len) {
        unsigned char c = p->s[i];
        if (c == '"' || c == '\\' || c < 0x20 || c >= 0x80) break;
        i++;
    }
    if (i < p->len && p->s[i] == '"') {
        char *s = di_arena_strndup(p->arena, (const char *)p->s + start, i - start);
        if (!s) return fail(p, DEEPINFER_ERR_OUT_OF_MEMORY, "out of memory (JSON tree limit)");
        *out = s;
        *out_len = i - start;
        p->pos = i + 1;
        return 0;
    }
    /* Slow path: unescape into the scratch buffer. Output is never longer
     * than the input span. */
    size_t o = 0;
    i = start;
    if (ensure_buf(p, 64)) return -1;
    for (;;) {
        if (i >= p->len) {
            p->pos = i;
            return fail(p, DEEPINFER_ERR_FORMAT, "unterminated string");
        }
        if (ensure_buf(p, o + 8)) return -1;
        unsigned char c = p->s[i];
        if (c == '"') break;
        if (c < 0x20) {
            p->pos = i;
            return fail(p, DEEPINFER_ERR_FORMAT, "control character in string (escape it as \\u00XX)");
        }
        if (c == '\\') {
            if (i + 1 >= p->len) {
                p->pos = i;
                return fail(p, DEEPINFER_ERR_FORMAT, "unterminated escape in string");
            }
            unsigned char e = p->s[i + 1];
            unsigned char r = 0;
            switch (e) {
            case '"': r = '"'; break;
            case '\\': r = '\\'; break;
            case '/': r = '/'; break;
            case 'b': r = '\b'; break;
            case 'f': r = '\f'; break;
            case 'n': r = '\n'; break;
            case 'r': r = '\r'; break;
            case 't': r = '\t'; break;
            case 'u': {
                unsigned cp;
                if (hex4(p, i + 2, &cp)) {
                    p->pos = i;
                    return fail(p, DEEPINFER_ERR_FORMAT, "invalid \\u escape (need 4 hex digits)");
                }
                size_t adv = 6;
                if (cp >= 0xD800 && cp <= 0xDBFF) {
                    unsigned lo;
                    if (i + 7 < p->len && p->s[i + 6] == '\\' && p->s[i + 7] == 'u' &&
                        hex4(p, i + 8, &lo) == 0 && lo >= 0xDC00 && lo <= 0xDFFF) {
                        cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
                        adv = 12;
                    } else {
                        p->pos = i;
                        return fail(p, DEEPINFER_ERR_FORMAT,
                                    "unpaired UTF-16 surrogate in \\u escape (high surrogate without low)");
                    }
                } else if (cp >= 0xDC00 && cp <= 0xDFFF) {
                    p->pos = i;
                    return fail(p, DEEPINFER_ERR_FORMAT,
                                "unpaired UTF-16 surrogate in \\u escape (low surrogate first)");
                }
                o += put_utf8(p->buf + o, cp);
                i += adv;
                continue;
            }
            default:
                p->pos = i;
                return fail(p, DEEPINFER_ERR_FORMAT, "invalid escape sequence in string");
            }
            p->buf[o++] = r;
            i += 2;
            continue;
        }
        if (c >= 0x80) {
            size_t n = utf8_valid_len(p->s + i, p->len - i);
            if (!n) {
                p->pos = i;
                return fail(p, DEEPINFER_ERR_FORMAT, "invalid UTF-8 in string");
            }
            memcpy(p->buf + o, p->s + i, n);
            o += n;
            i += n;
            continue;
        }
        p->buf[o++] = c;
        i++;
    }
    char *s = di_arena_strndup(p->arena, (const char *)p->buf, o);
    if (!s) return fail(p, DEEPINFER_ERR_OUT_OF_MEMORY, "out of memory (JSON tree limit)");
    *out = s;
    *out_len = o;
    p->pos = i + 1;
    return 0;
}

static int is_digit(unsigned char c) { return c >= '0' && c <= '9'; }

static int parse_number(parser *p, di_json *v) {
    size_t i = p->pos;
    size_t start = i;
    int integral = 1;
    if (i < p->len && p->s[i] == '-') i++;
    if (i >= p->len || !is_digit(p->s[i])) {
        p->pos = i;
        return fail(p, DEEPINFER_ERR_FORMAT, "invalid number");
    }
    if (p->s[i] == '0') i++;
    else
        while (i < p->len && is_digit(p->s[i])) i++;
    if (i < p->len && p->s[i] == '.') {
        integral = 0;
        i++;
        if (i >= p->len || !is_digit(p->s[i])) {
            p->pos = i;
            return fail(p, DEEPINFER_ERR_FORMAT, "invalid number: digit expected after '.'");
        }
        while (i < p->len && is_digit(p->s[i])) i++;
    }
    if (i < p->len && (p->s[i] == 'e' || p->s[i] == 'E')) {
        integral = 0;
        i++;
        if (i < p->len && (p->s[i] == '+' || p->s[i] == '-')) i++;
        if (i >= p->len || !is_digit(p->s[i])) {
            p->pos = i;
            return fail(p, DEEPINFER_ERR_FORMAT, "invalid number: digit expected in exponent");
        }
        while (i < p->len && is_digit(p->s[i])) i++;
    }
    char *txt = di_arena_strndup(p->arena, (const char *)p->s + start, i - start);
    if (!txt) return fail(p, DEEPINFER_ERR_OUT_OF_MEMORY, "out of memory (JSON tree limit)");
    v->type = DI_JSON_NUMBER;
    v->str = txt;
    v->str_len = i - start;
    v->num = strtod(txt, NULL);
    v->is_int = 0;
    if (integral) {
        const char *q = txt;
        int neg = 0;
        if (*q == '-') {
            neg = 1;
            q++;
        }
        uint64_t acc = 0;
        int ok = 1;
        for (; *q; q++) {
            unsigned d = (unsigned)(*q - '0');
            if (acc > (UINT64_MAX - d) / 10) {
                ok = 0;
                break;
            }
            acc = acc * 10 + d;
        }
        if (ok) {
            if (!neg && acc <= (uint64_t)INT64_MAX) {
                v->i64 = (int64_t)acc;
                v->is_int = 1;
            } else if (neg && acc <= (uint64_t)INT64_MAX + 1) {
                v->i64 = acc == (uint64_t)INT64_MAX + 1 ? INT64_MIN : -(int64_t)acc;
                v->is_int = 1;
            }
        }
    }
    p->pos = i;
    return 0;
}

static int match_lit(parser *p, const char *lit) {
    size_t n = strlen(lit);
    if (p->pos + n > p->len || memcmp(p->s + p->pos, lit, n) != 0)
        return fail(p, DEEPINFER_ERR_FORMAT, "invalid literal (expected true, false or null)");
    p->pos += n;
    return 0;
}

static int parse_value(parser *p, di_json *v);

static int finish_container(parser *p, di_json *v, size_t first) {
    size_t n = p->stack_len - first;
    if (n > UINT32_MAX) return fail(p, DEEPINFER_ERR_LIMIT, "too many elements in one container");
    v->count = (uint32_t)n;
    v->items = NULL;
    if (n) {
        v->items = di_arena_alloc(p->arena, n * sizeof(di_json));
        if (!v->items) return fail(p, DEEPINFER_ERR_OUT_OF_MEMORY, "out of memory (JSON tree limit)");
        memcpy(v->items, p->stack + first, n * sizeof(di_json));
    }
    p->stack_len = first;
    return 0;
}

static int parse_array(parser *p, di_json *v) {
    size_t first = p->stack_len;
    v->type = DI_JSON_ARRAY;
    p->pos++; /* '[' */
    skip_ws(p);
    if (p->pos < p->len && p->s[p->pos] == ']') {
        p->pos++;
        return finish_container(p, v, first);
    }
    for (;;) {
        di_json child;
        memset(&child, 0, sizeof child);
        skip_ws(p);
        if (parse_value(p, &child)) return -1;
        if (push(p, &child)) return -1;
        skip_ws(p);
        if (p->pos >= p->len) return fail(p, DEEPINFER_ERR_FORMAT, "unterminated array (expected ',' or ']')");
        unsigned char c = p->s[p->pos];
        if (c == ',') {
            p->pos++;
            continue;
        }
        if (c == ']') {
            p->pos++;
            break;
        }
        return fail(p, DEEPINFER_ERR_FORMAT, "expected ',' or ']' in array");
    }
    return finish_container(p, v, first);
}

static int parse_object(parser *p, di_json *v) {
    size_t first = p->stack_len;
    v->type = DI_JSON_OBJECT;
    p->pos++; /* '{' */
    skip_ws(p);
    if (p->pos < p->len && p->s[p->pos] == '}') {
        p->pos++;
        return finish_container(p, v, first);
    }
    for (;;) {
        skip_ws(p);
        if (p->pos >= p->len || p->s[p->pos] != '"')
            return fail(p, DEEPINFER_ERR_FORMAT, "expected a string key in object");
        const char *key;
        size_t key_len;
        if (parse_string(p, &key, &key_len)) return -1;
        skip_ws(p);
        if (p->pos >= p->len || p->s[p->pos] != ':')
            return fail(p, DEEPINFER_ERR_FORMAT, "expected ':' after object key");
        p->pos++;
        skip_ws(p);
        di_json child;
        memset(&child, 0, sizeof child);
        if (parse_value(p, &child)) return -1;
        child.key = key;
        child.key_len = key_len;
        if (push(p, &child)) return -1;
        skip_ws(p);
        if (p->pos >= p->len) return fail(p, DEEPINFER_ERR_FORMAT, "unterminated object (expected ',' or '}')");
        unsigned char c = p->s[p->pos];
        if (c == ',') {
            p->pos++;
            continue;
        }
        if (c == '}') {
            p->pos++;
            break;
        }
        return fail(p, DEEPINFER_ERR_FORMAT, "expected ',' or '}' in object");
    }
    return finish_container(p, v, first);
}

static int parse_value(parser *p, di_json *v) {
    if (p->pos >= p->len) return fail(p, DEEPINFER_ERR_FORMAT, "unexpected end of input, expected a value");
    v->offset = p->pos;
    unsigned char c = p->s[p->pos];
    switch (c) {
    case '{':
    case '[': {
        if (++p->depth > p->max_depth) return fail(p, DEEPINFER_ERR_LIMIT, "nesting too deep");
        int r = c == '{' ? parse_object(p, v) : parse_array(p, v);
        p->depth--;
        return r;
    }
    case '"':
        v->type = DI_JSON_STRING;
        return parse_string(p, &v->str, &v->str_len);
    case 't':
        v->type = DI_JSON_TRUE;
        return match_lit(p, "true");
    case 'f':
        v->type = DI_JSON_FALSE;
        return match_lit(p, "false");
    case 'n':
        v->type = DI_JSON_NULL;
        return match_lit(p, "null");
    default:
        if (c == '-' || is_digit(c)) return parse_number(p, v);
        return fail(p, DEEPINFER_ERR_FORMAT, "unexpected character, expected a value");
    }
}

deepinfer_status di_json_parse(const char *text, size_t len, const di_json_options *opt,
                               di_json_doc **doc, di_error *err) {
    *doc = NULL;
    if (!text && len) return di_error_set(err, DEEPINFER_ERR_INVALID_ARGUMENT, "NULL JSON text");
    di_json_doc *d = calloc(1, sizeof *d);
    if (!d) return di_error_set(err, DEEPINFER_ERR_OUT_OF_MEMORY, "out of memory");
    di_arena_init(&d->arena, 0);
    if (opt && opt->max_bytes) d->arena.limit = opt->max_bytes;
    parser p;
    memset(&p, 0, sizeof p);
    p.s = (const unsigned char *)text;
    p.len = len;
    p.max_depth = (opt && opt->max_depth > 0) ? opt->max_depth : 256;
    p.arena = &d->arena;
    p.err = err;
    p.status = DEEPINFER_OK;
    if (len >= 3 && p.s[0] == 0xEF && p.s[1] == 0xBB && p.s[2] == 0xBF) p.pos = 3; /* BOM */
    di_json *root = di_arena_calloc(&d->arena, 1, sizeof *root);
    int rc = root ? 0 : fail(&p, DEEPINFER_ERR_OUT_OF_MEMORY, "out of memory");
    if (!rc) {
        skip_ws(&p);
        rc = parse_value(&p, root);
    }
    if (!rc) {
        skip_ws(&p);
        if (p.pos != p.len) rc = fail(&p, DEEPINFER_ERR_FORMAT, "unexpected data after the JSON value");
    }
    free(p.stack);
    free(p.buf);
    if (rc) {
        di_arena_free(&d->arena);
        free(d);
        return p.status ? p.status : DEEPINFER_ERR_FORMAT;
    }
    d->root = root;
    *doc = d;
    return DEEPINFER_OK;
}

void di_json_free(di_json_doc *doc) {
    if (!doc) return;
    di_arena_free(&doc->arena);
    free(doc);
}

const di_json *di_json_get(const di_json *obj, const char *key) {
    if (!obj || obj->type != DI_JSON_OBJECT) return NULL;
    size_t kl = strlen(key);
    for (uint32_t i = obj->count; i-- > 0;) {
        const di_json *m = &obj->items[i];
        if (m->key_len == kl && memcmp(m->key, key, kl) == 0) return m;
    }
    return NULL;
}

const di_json *di_json_at(const di_json *arr, size_t i) {
    if (!arr || arr->type != DI_JSON_ARRAY || i >= arr->count) return NULL;
    return &arr->items[i];
}

int di_json_as_i64(const di_json *v, int64_t *out) {
    if (!v || v->type != DI_JSON_NUMBER || !v->is_int) return 0;
    *out = v->i64;
    return 1;
}

int di_json_as_f64(const di_json *v, double *out) {
    if (!v || v->type != DI_JSON_NUMBER) return 0;
    *out = v->num;
    return 1;
}

int di_json_as_bool(const di_json *v, int *out) {
    if (!v || (v->type != DI_JSON_TRUE && v->type != DI_JSON_FALSE)) return 0;
    *out = v->type == DI_JSON_TRUE;
    return 1;
}

int di_json_is_string(const di_json *v) { return v && v->type == DI_JSON_STRING; }

const char *di_json_type_name(di_json_type t) {
    switch (t) {
    case DI_JSON_NULL: return "null";
    case DI_JSON_FALSE:
    case DI_JSON_TRUE: return "boolean";
    case DI_JSON_NUMBER: return "number";
    case DI_JSON_STRING: return "string";
    case DI_JSON_ARRAY: return "array";
    case DI_JSON_OBJECT: return "object";
    }
    return "?";
}
