/*
 * grammar.c — grammar builder and compilation (productive / nullable
 * analysis, flattening, lexeme DFAs).
 */
#include "structured/grammar.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "structured/lexspec.h"
#include "structured/regex.h"

static void gb_fail(so_gb *b, deepinfer_status code, const char *msg) {
    if (!b->failed) {
        b->failed = 1;
        b->fail_code = code;
        snprintf(b->fail_msg, sizeof b->fail_msg, "%s", msg);
    }
}

void so_gb_init(so_gb *b, const so_limits *lim) {
    memset(b, 0, sizeof *b);
    b->max_rules = lim && lim->max_rules ? lim->max_rules : 200000;
    b->max_lexemes = lim && lim->max_lexemes ? lim->max_lexemes : 20000;
}

void so_gb_free(so_gb *b) {
    free(b->syms), free(b->prod_lhs), free(b->prod_off), free(b->prod_len);
    for (uint32_t i = 0; i < b->nlex; i++) free(b->lex[i].spec);
    free(b->lex), free(b->lex_hash);
    memset(b, 0, sizeof *b);
}

int32_t so_gb_nt(so_gb *b) {
    if (b->nnt >= b->max_rules) {
        gb_fail(b, DEEPINFER_ERR_LIMIT, "grammar too large (rule limit)");
        return 0;
    }
    return (int32_t)b->nnt++;
}

static uint64_t hash_lex(const char *s, size_t n, int32_t a, int32_t c) {
    uint64_t h = 1469598103934665603ull ^ (uint64_t)(uint32_t)a * 31 ^ (uint64_t)(uint32_t)c << 20;
    for (size_t i = 0; i < n; i++) h = (h ^ (uint8_t)s[i]) * 1099511628211ull;
    return h;
}

int32_t so_gb_lex(so_gb *b, const char *spec, size_t len, int32_t cmin, int32_t cmax) {
    if (b->failed) return SO_T(0);
    uint64_t h = hash_lex(spec, len, cmin, cmax);
    if ((b->nlex + 1) * 2 > b->lex_hcap) {
        uint32_t nc = b->lex_hcap ? b->lex_hcap * 2 : 64;
        uint32_t *nh = calloc(nc, sizeof *nh);
        if (!nh) return gb_fail(b, DEEPINFER_ERR_OUT_OF_MEMORY, "out of memory"), SO_T(0);
        for (uint32_t i = 0; i < b->nlex; i++) {
            uint64_t hh = hash_lex(b->lex[i].spec, b->lex[i].spec_len, b->lex[i].cmin, b->lex[i].cmax);
            uint32_t j = (uint32_t)hh & (nc - 1);
            while (nh[j]) j = (j + 1) & (nc - 1);
            nh[j] = i + 1;
        }
        free(b->lex_hash);
        b->lex_hash = nh, b->lex_hcap = nc;
    }
    uint32_t j = (uint32_t)h & (b->lex_hcap - 1);
    while (b->lex_hash[j]) {
        so_gb_lexdef *l = &b->lex[b->lex_hash[j] - 1];
        if (l->spec_len == len && l->cmin == cmin && l->cmax == cmax && !memcmp(l->spec, spec, len))
            return SO_T(b->lex_hash[j] - 1);
        j = (j + 1) & (b->lex_hcap - 1);
    }
    if (b->nlex >= b->max_lexemes) return gb_fail(b, DEEPINFER_ERR_LIMIT, "grammar too large (lexeme limit)"), SO_T(0);
    if (b->nlex == b->lexcap) {
        uint32_t nc = b->lexcap ? b->lexcap * 2 : 32;
        so_gb_lexdef *nl = realloc(b->lex, nc * sizeof *nl);
        if (!nl) return gb_fail(b, DEEPINFER_ERR_OUT_OF_MEMORY, "out of memory"), SO_T(0);
        b->lex = nl, b->lexcap = nc;
    }
    char *copy = malloc(len + 1);
    if (!copy) return gb_fail(b, DEEPINFER_ERR_OUT_OF_MEMORY, "out of memory"), SO_T(0);
    memcpy(copy, spec, len);
    copy[len] = 0;
    b->lex[b->nlex] = (so_gb_lexdef){copy, len, cmin, cmax};
    b->lex_hash[j] = b->nlex + 1;
    return SO_T(b->nlex++);
}

int32_t so_gb_regex(so_gb *b, const char *regex) {
    size_t n = strlen(regex);
    char *s = malloc(n + 24);
    if (!s) return gb_fail(b, DEEPINFER_ERR_OUT_OF_MEMORY, "out of memory"), SO_T(0);
    int h = snprintf(s, 24, "R%zu:", n);
    memcpy(s + h, regex, n);
    int32_t r = so_gb_lex(b, s, (size_t)h + n, 0, -1);
    free(s);
    return r;
}

int32_t so_gb_literal(so_gb *b, const char *str, size_t len) {
    size_t cap = len * 4 + 32;
    char *esc = malloc(cap);
    if (!esc) return gb_fail(b, DEEPINFER_ERR_OUT_OF_MEMORY, "out of memory"), SO_T(0);
    long n = so_rx_escape(str, len, esc, cap);
    int32_t r = n < 0 ? (gb_fail(b, DEEPINFER_ERR_INTERNAL, "escape overflow"), SO_T(0)) : so_gb_regex(b, esc);
    free(esc);
    return r;
}

void so_gb_prod(so_gb *b, int32_t lhs, const int32_t *syms, uint32_t n) {
    if (b->failed) return;
    if (b->nprods >= b->max_rules) return gb_fail(b, DEEPINFER_ERR_LIMIT, "grammar too large (rule limit)");
    if (b->nprods == b->prodcap) {
        uint32_t nc = b->prodcap ? b->prodcap * 2 : 64;
        uint32_t *a = realloc(b->prod_lhs, nc * sizeof *a);
        if (a) b->prod_lhs = a;
        uint32_t *o = realloc(b->prod_off, nc * sizeof *o);
        if (o) b->prod_off = o;
        uint32_t *l = realloc(b->prod_len, nc * sizeof *l);
        if (l) b->prod_len = l;
        if (!a || !o || !l) return gb_fail(b, DEEPINFER_ERR_OUT_OF_MEMORY, "out of memory");
        b->prodcap = nc;
    }
    if (b->nsyms + n > b->symcap) {
        size_t nc = b->symcap ? b->symcap * 2 : 256;
        while (nc < b->nsyms + n) nc *= 2;
        int32_t *s = realloc(b->syms, nc * sizeof *s);
        if (!s) return gb_fail(b, DEEPINFER_ERR_OUT_OF_MEMORY, "out of memory");
        b->syms = s, b->symcap = nc;
    }
    if (n) memcpy(b->syms + b->nsyms, syms, n * sizeof *syms);
    b->prod_lhs[b->nprods] = (uint32_t)lhs;
    b->prod_off[b->nprods] = (uint32_t)b->nsyms;
    b->prod_len[b->nprods] = n;
    b->nprods++;
    b->nsyms += n;
}

int32_t so_gb_repeat(so_gb *b, int32_t sym, int32_t min, int32_t max, int32_t sep) {
    /* tail(k) = items k.. : the part after the first item */
    int has_sep = sep != SO_NOSEP;
    int32_t r = so_gb_nt(b);
    if (max == 0) {
        so_gb_prod(b, r, NULL, 0);
        return r;
    }
    /* one_plus = sym (sep sym){min1-1, max-1} */
    int32_t min1 = min < 1 ? 1 : min;
    int32_t rest; /* (sep sym){min1-1, max-1} */
    if (max < 0) {
        /* fixed prefix of min1-1 required (sep sym), then left-recursive star */
        int32_t star = so_gb_nt(b);
        so_gb_prod(b, star, NULL, 0);
        int32_t rec[3] = {star, has_sep ? sep : sym, sym};
        so_gb_prod(b, star, rec, has_sep ? 3 : 2);
        rest = star;
        for (int32_t k = 0; k < min1 - 1; k++) {
            int32_t nt = so_gb_nt(b);
            int32_t s3[3] = {has_sep ? sep : sym, sym, rest};
            if (has_sep) so_gb_prod(b, nt, s3, 3);
            else {
                int32_t s2[2] = {sym, rest};
                so_gb_prod(b, nt, s2, 2);
            }
            rest = nt;
        }
    } else {
        /* optional chain for max-min1 items, then min1-1 required */
        int32_t opt = so_gb_nt(b);
        so_gb_prod(b, opt, NULL, 0);
        for (int32_t k = 0; k < max - min1 && !b->failed; k++) {
            int32_t nt = so_gb_nt(b);
            so_gb_prod(b, nt, NULL, 0);
            int32_t s3[3] = {has_sep ? sep : sym, sym, opt};
            if (has_sep) so_gb_prod(b, nt, s3, 3);
            else {
                int32_t s2[2] = {sym, opt};
                so_gb_prod(b, nt, s2, 2);
            }
            opt = nt;
        }
        rest = opt;
        for (int32_t k = 0; k < min1 - 1 && !b->failed; k++) {
            int32_t nt = so_gb_nt(b);
            int32_t s3[3] = {has_sep ? sep : sym, sym, rest};
            if (has_sep) so_gb_prod(b, nt, s3, 3);
            else {
                int32_t s2[2] = {sym, rest};
                so_gb_prod(b, nt, s2, 2);
            }
            rest = nt;
        }
    }
    int32_t s2[2] = {sym, rest};
    so_gb_prod(b, r, s2, 2);
    if (min == 0) so_gb_prod(b, r, NULL, 0);
    return r;
}

/* ---- compile ------------------------------------------------------------- */

void so_grammar_free(so_grammar *g) {
    if (!g) return;
    for (uint32_t i = 0; i < g->nlex; i++)
        if (g->lex[i].owned) so_dfa_free(g->lex[i].dfa);
    free(g->lex), free(g->seq), free(g->nt_off), free(g->nt_prods), free(g->nullable);
    free(g);
}

deepinfer_status so_grammar_compile(so_gb *b, int32_t root, so_vocab *v, const so_limits *lim, so_grammar **out,
                                    di_error *err) {
    if (b->failed) return di_error_set(err, b->fail_code, "%s", b->fail_msg);
    if (root < 0 || (uint32_t)root >= b->nnt) return di_error_set(err, DEEPINFER_ERR_INTERNAL, "bad grammar root");
    so_grammar *g = calloc(1, sizeof *g);
    if (!g) return di_error_set(err, DEEPINFER_ERR_OUT_OF_MEMORY, "out of memory");
    if (lim) g->lim = *lim;
    if (!g->lim.max_items) g->lim.max_items = 4000000;
    g->vocab = v;
    deepinfer_status st = DEEPINFER_OK;
    uint32_t nnt = b->nnt + 1; /* + augmented start */
    uint8_t *prod_ok = NULL, *productive = NULL;
    uint32_t *cnt = NULL;
    g->nlex = b->nlex;
    g->lex = calloc(b->nlex + 1, sizeof *g->lex);
    productive = calloc(nnt, 1);
    prod_ok = calloc(b->nprods + 1, 1);
    g->nullable = calloc(nnt, 1);
    if (!g->lex || !productive || !prod_ok || !g->nullable) goto oom;
    uint32_t ms = g->lim.max_compile_ms ? g->lim.max_compile_ms : 10000;
    clock_t deadline = clock() + (clock_t)((double)ms * CLOCKS_PER_SEC / 1000.0);
    for (uint32_t i = 0; i < b->nlex; i++) {
        so_lexeme *l = &g->lex[i];
        if (clock() > deadline) {
            st = di_error_set(err, DEEPINFER_ERR_LIMIT, "grammar compile time limit (%u ms) exceeded building %u lexemes", ms, b->nlex);
            goto fail;
        }
        st = so_vocab_lexeme(v, b->lex[i].spec, b->lex[i].spec_len, &l->gid, &l->dfa, &l->owned, err);
        if (st != DEEPINFER_OK) goto fail;
        l->cmin = b->lex[i].cmin, l->cmax = b->lex[i].cmax;
        l->cdfa = l->dfa, l->cgid = l->gid;
        if (b->lex[i].spec[0] == '~' && l->dfa->proj && l->cmax < 0 && l->gid != SO_GID_PRIVATE) {
            size_t al = so_lexspec_operand_len(b->lex[i].spec + 1, b->lex[i].spec_len - 1);
            so_dfa *ad = NULL;
            uint32_t agid;
            int aowned = 0;
            st = so_vocab_lexeme(v, b->lex[i].spec + 1, al, &agid, &ad, &aowned, err);
            if (st != DEEPINFER_OK) goto fail;
            if (aowned) so_dfa_free(ad);
            else l->cdfa = ad, l->cgid = agid, l->sensitive = 1;
        }
        l->nullable = (l->dfa->flags[1] & SO_DFA_ACCEPT) && l->cmin <= 0;
    }
    /* productive: fixpoint over productions */
    for (int changed = 1; changed;) {
        changed = 0;
        for (uint32_t p = 0; p < b->nprods; p++) {
            if (prod_ok[p]) continue;
            int ok = 1;
            for (uint32_t k = 0; k < b->prod_len[p] && ok; k++) {
                int32_t s = b->syms[b->prod_off[p] + k];
                if (SO_IS_T(s)) ok = !so_dfa_empty(g->lex[SO_T_IDX(s)].dfa);
                else ok = productive[s];
            }
            if (ok) {
                prod_ok[p] = 1;
                if (!productive[b->prod_lhs[p]]) productive[b->prod_lhs[p]] = 1, changed = 1;
            }
        }
    }
    if (!productive[root]) {
        st = di_error_set(err, DEEPINFER_ERR_INVALID_ARGUMENT, "the grammar matches no string at all (unsatisfiable)");
        goto fail;
    }
    /* nullable */
    for (int changed = 1; changed;) {
        changed = 0;
        for (uint32_t p = 0; p < b->nprods; p++) {
            if (!prod_ok[p] || g->nullable[b->prod_lhs[p]]) continue;
            int nul = 1;
            for (uint32_t k = 0; k < b->prod_len[p] && nul; k++) {
                int32_t s = b->syms[b->prod_off[p] + k];
                nul = SO_IS_T(s) ? g->lex[SO_T_IDX(s)].nullable : g->nullable[s];
            }
            if (nul) g->nullable[b->prod_lhs[p]] = 1, changed = 1;
        }
    }
    g->start_nt = nnt - 1;
    g->nullable[g->start_nt] = g->nullable[root];
    /* flatten */
    size_t total = 2;
    uint32_t nok = 1;
    for (uint32_t p = 0; p < b->nprods; p++)
        if (prod_ok[p]) total += b->prod_len[p] + 1, nok++;
    if (total > INT32_MAX / 2) {
        st = di_error_set(err, DEEPINFER_ERR_LIMIT, "grammar too large");
        goto fail;
    }
    g->seq = malloc(total * sizeof *g->seq);
    g->nt_off = calloc((size_t)nnt + 1, sizeof *g->nt_off);
    g->nt_prods = malloc((size_t)nok * sizeof *g->nt_prods);
    cnt = calloc((size_t)nnt + 1, sizeof *cnt);
    if (!g->seq || !g->nt_off || !g->nt_prods || !cnt) goto oom;
    uint32_t w = 0;
    g->start_dot = 0;
    g->seq[w++] = root;
    g->seq[w++] = SO_END(g->start_nt);
    g->nt_off[g->start_nt + 1]++;
    for (uint32_t p = 0; p < b->nprods; p++)
        if (prod_ok[p]) g->nt_off[b->prod_lhs[p] + 1]++;
    for (uint32_t n = 0; n < nnt; n++) g->nt_off[n + 1] += g->nt_off[n];
    g->nt_prods[g->nt_off[g->start_nt] + cnt[g->start_nt]++] = 0;
    for (uint32_t p = 0; p < b->nprods; p++) {
        if (!prod_ok[p]) continue;
        uint32_t lhs = b->prod_lhs[p];
        g->nt_prods[g->nt_off[lhs] + cnt[lhs]++] = w;
        if (b->prod_len[p]) memcpy(g->seq + w, b->syms + b->prod_off[p], b->prod_len[p] * sizeof *g->seq);
        w += b->prod_len[p];
        g->seq[w++] = SO_END(lhs);
    }
    g->nseq = w;
    g->nnt = nnt;
    free(prod_ok), free(productive), free(cnt);
    *out = g;
    return DEEPINFER_OK;
oom:
    st = di_error_set(err, DEEPINFER_ERR_OUT_OF_MEMORY, "out of memory compiling the grammar");
fail:
    free(prod_ok), free(productive), free(cnt);
    so_grammar_free(g);
    return st;
}
