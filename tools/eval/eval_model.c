/* eval_model.c — load the model for scoring and score sequences in batches (eval_model.h). */
#include "eval/eval_model.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "args/cli_model_dir.h"
#include "ops/backend.h"
#include "util/env.h"

deepinfer_status ev_model_open(const char *model_arg, const char *accelerator, int batch_invariant, ev_model *m,
                               di_error *err) {
    memset(m, 0, sizeof *m);
    di_model_location loc;
    deepinfer_status st = di_cli_locate_model(model_arg, &loc, err);
    if (st) return st;
    snprintf(m->dir, sizeof m->dir, "%s", loc.dir);
    if ((st = di_config_load(m->dir, &m->cfg, err))) return st;
    if ((st = di_tokenizer_load(m->dir, &m->tok, err))) return st;
    m->vocab = (int32_t)m->cfg.vocab_size;
    m->bos = m->cfg.bos_token_id >= 0 ? (int32_t)m->cfg.bos_token_id : 0;
    m->context = m->cfg.max_position_embeddings > 0 && m->cfg.max_position_embeddings < 65536
                     ? m->cfg.max_position_embeddings : 65536;
    m->rows_per_step = 1024;
    di_backend_kind bk;
    if ((st = di_backend_select(accelerator, &bk, err))) return st;
    m->accelerator = di_backend_name(bk);
    m->batch_invariant = 1; /* the CPU kernels are batch invariant always */
    deepinfer_engine_config_init(&m->engine_cfg);
    if (bk == DI_BACKEND_CUDA) {
        m->batch_invariant = batch_invariant < 0 ? 1 : batch_invariant;
        if ((st = di_env_flag(DI_ENV_BATCH_INVARIANT, &m->batch_invariant, err))) return st;
        di_backend_set_batch_invariant(m->batch_invariant); /* read by the execs the model creates at load */
        if ((st = di_backend_use(bk, err))) return st;
    }
    return DEEPINFER_OK;
}

void ev_model_use_engine(ev_model *m, const deepinfer_engine_config *cfg) {
    if (cfg) m->engine_cfg = *cfg;
    else deepinfer_engine_config_init(&m->engine_cfg);
    if (m->use_engine) return;
    m->use_engine = 1;
    m->context -= 1;
}

int ev_model_compact(const ev_model *m) { return m->use_engine && m->info.opened && m->info.cfg.yoco_compact; }

/* The engine for scoring: the model directory, the resolved accelerator, a context one above the
 * longest sequence (a prompt must leave room for its one output token; m->context is already one
 * below the model's). */
static deepinfer_status open_engine(ev_model *m, int64_t max_len, di_error *err) {
    deepinfer_engine_close(m->engine);
    m->engine = NULL;
    memset(&m->info, 0, sizeof m->info);
    deepinfer_engine_config c = m->engine_cfg;
    c.model = m->dir;
    c.accelerator = m->accelerator;
    c.max_model_len = max_len + 1 < m->context + 1 ? max_len + 1 : m->context + 1;
    char msg[DI_ERROR_MSG_MAX];
    deepinfer_status st = deepinfer_engine_open(&c, &m->engine, msg, sizeof msg);
    if (st) return di_error_set(err, st, "eval: opening the engine: %s", msg);
    ev_engine_info_read(m->engine, &m->info);
    m->loaded = 1;
    return DEEPINFER_OK;
}

deepinfer_status ev_model_load(ev_model *m, int64_t max_len, di_error *err) {
    di_v4_free(m->v4), di_v41_free(m->v41);
    m->v4 = NULL, m->v41 = NULL, m->loaded = 0;
    if (max_len < 2) max_len = 2;
    if (m->use_engine) return open_engine(m, max_len, err);
    di_v4_options opt = {.max_context = max_len};
    deepinfer_status st;
    if (m->cfg.arch == DI_ARCH_V41) {
        if (!(st = di_v41_load(m->dir, &opt, &m->v41, err))) m->sm = di_score_model_v41(m->v41);
    } else {
        if (!(st = di_v4_load(m->dir, &opt, &m->v4, err))) m->sm = di_score_model_v4(m->v4);
    }
    if (!st) m->loaded = 1;
    return st;
}

void ev_model_close(ev_model *m) {
    di_v4_free(m->v4), di_v41_free(m->v41);
    deepinfer_engine_close(m->engine);
    di_tokenizer_free(m->tok);
    memset(m, 0, sizeof *m);
}

deepinfer_status ev_encode(const ev_model *m, const char *text, size_t len, int32_t **ids, int *n, di_error *err) {
    int32_t *v = NULL;
    size_t nn = 0, cap = 0;
    deepinfer_status st = di_tokenizer_encode(m->tok, text, len, &v, &nn, &cap, err);
    if (st) {
        free(v);
        return st;
    }
    if (nn > (size_t)1 << 30) {
        free(v);
        return di_error_set(err, DEEPINFER_ERR_LIMIT, "text of %zu tokens is too long", nn);
    }
    *ids = v;
    *n = (int)nn;
    return DEEPINFER_OK;
}

/* log p(tok) from a logits row (log-sum-exp in double) and whether tok is the argmax. */
static void score_row(const float *row, int V, int32_t tok, double *lp, uint8_t *greedy) {
    int best = 0;
    for (int i = 1; i < V; i++)
        if (row[i] > row[best]) best = i;
    double mx = row[best], s = 0;
    for (int i = 0; i < V; i++) s += exp((double)row[i] - mx);
    *lp = (double)row[tok] - mx - log(s);
    *greedy = best == tok;
}

typedef struct live {
    di_seq_state *s;
    int fed;          /* rows fed so far */
    int row0, k;      /* this step's rows */
} live;

/* The engine path: one request per sequence, all in one deepinfer_generate (continuous batching),
 * max_tokens 1, prompt_logprobs 1 (the top-1 id says whether the token is the argmax, lowest id on
 * ties, as score_row). */
static deepinfer_status score_engine(ev_model *m, ev_seq *seqs, int n, di_error *err) {
    deepinfer_prompt *p = calloc((size_t)n, sizeof *p);
    if (!p) return di_error_set(err, DEEPINFER_ERR_OUT_OF_MEMORY, "eval: out of memory");
    for (int i = 0; i < n; i++) p[i] = (deepinfer_prompt){.token_ids = seqs[i].ids, .n_token_ids = (size_t)seqs[i].n};
    deepinfer_sampling_params sp;
    deepinfer_sampling_params_init(&sp);
    sp.temperature = 0;
    sp.max_tokens = 1;
    sp.prompt_logprobs = 1;
    deepinfer_request_output **out = NULL;
    deepinfer_status st = deepinfer_generate(m->engine, p, (size_t)n, &sp, 1, &out);
    if (st) st = di_error_set(err, st, "eval: %s", deepinfer_engine_last_error(m->engine));
    for (int i = 0; !st && i < n; i++) {
        const deepinfer_request_output *o = out[i];
        if (o->status) {
            st = di_error_set(err, o->status, "eval: sequence %d: %s", i, o->error);
            break;
        }
        for (int t = seqs[i].score_from; t < seqs[i].n; t++) {
            seqs[i].lp[t] = o->prompt_logprobs[t];
            seqs[i].greedy[t] = o->prompt_top_ids[t] == seqs[i].ids[t];
        }
    }
    if (out) deepinfer_outputs_free(out, (size_t)n);
    free(p);
    return st;
}

deepinfer_status ev_score(ev_model *m, ev_seq *seqs, int n, di_error *err) {
    const di_score_model *sm = &m->sm;
    int V = m->vocab, R = m->rows_per_step;
    for (int i = 0; i < n; i++) {
        if (seqs[i].n < 2 || seqs[i].score_from < 1 || seqs[i].score_from > seqs[i].n)
            return di_error_set(err, DEEPINFER_ERR_INVALID_ARGUMENT, "eval: sequence %d has nothing to score", i);
        if (m->use_engine) continue;
        if (seqs[i].n > sm->max_context)
            return di_error_set(err, DEEPINFER_ERR_LIMIT, "eval: sequence of %d tokens exceeds the loaded context %lld",
                                seqs[i].n, (long long)sm->max_context);
    }
    if (m->use_engine) return m->engine ? score_engine(m, seqs, n, err)
                                        : di_error_set(err, DEEPINFER_ERR_INTERNAL, "eval: the engine is not open");
    live *lv = calloc((size_t)(n ? n : 1), sizeof *lv);
    int32_t *tok = malloc(sizeof(int32_t) * (size_t)R);
    int64_t *pos = malloc(sizeof(int64_t) * (size_t)R);
    di_seq_state **seq = malloc(sizeof(di_seq_state *) * (size_t)R);
    int *lrows = malloc(sizeof(int) * (size_t)R);
    int *lseq = malloc(sizeof(int) * (size_t)R); /* which sequence a logits row belongs to */
    float *logits = malloc(sizeof(float) * (size_t)R * (size_t)V);
    deepinfer_status st = lv && tok && pos && seq && lrows && lseq && logits
                              ? DEEPINFER_OK : di_error_set(err, DEEPINFER_ERR_OUT_OF_MEMORY, "eval: out of memory");
    int first = 0; /* sequences before it are done */
    while (!st && first < n) {
        int rows = 0, nl = 0;
        for (int i = first; i < n && rows < R && !st; i++) {
            ev_seq *q = &seqs[i];
            live *l = &lv[i];
            l->k = 0;
            if (l->fed >= q->n) continue;
            if (!l->s && (st = sm->seq_new(sm->model, &l->s, err))) break;
            int k = q->n - l->fed < R - rows ? q->n - l->fed : R - rows;
            for (int t = 0; t < k; t++) {
                int p = l->fed + t;
                tok[rows + t] = q->ids[p];
                pos[rows + t] = p;
                seq[rows + t] = l->s;
                if (p >= q->score_from - 1 && p <= q->n - 2) {
                    lrows[nl] = rows + t;
                    lseq[nl++] = i;
                }
            }
            l->row0 = rows;
            l->k = k;
            rows += k;
        }
        if (st) break;
        di_v4_batch b = {.n = rows, .tokens = tok, .pos = pos, .seq = seq, .n_logits = nl, .logit_rows = lrows,
                         .logits = logits};
        if ((st = sm->forward(sm->model, &b, err))) break;
        for (int j = 0; j < nl; j++) {
            ev_seq *q = &seqs[lseq[j]];
            live *l = &lv[lseq[j]];
            int p = l->fed + (lrows[j] - l->row0); /* the row's position; it predicts ids[p + 1] */
            score_row(logits + (size_t)j * V, V, q->ids[p + 1], &q->lp[p + 1], &q->greedy[p + 1]);
        }
        for (int i = first; i < n; i++) {
            lv[i].fed += lv[i].k;
            if (lv[i].fed >= seqs[i].n && lv[i].s) {
                di_seq_destroy(lv[i].s);
                lv[i].s = NULL;
            }
            if (i == first && lv[i].fed >= seqs[i].n) first++;
        }
    }
    for (int i = 0; lv && i < n; i++) di_seq_destroy(lv[i].s);
    free(lv), free(tok), free(pos), free(seq), free(lrows), free(lseq), free(logits);
    return st;
}
