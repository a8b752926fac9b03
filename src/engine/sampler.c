#include "engine/sampler.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "engine/philox.h"

deepinfer_status di_sampler_scratch_init(di_sampler_scratch *s, int32_t vocab, di_error *err) {
    memset(s, 0, sizeof *s);
    if (vocab <= 0) return di_error_set(err, DEEPINFER_ERR_INVALID_ARGUMENT, "vocabulary size must be positive");
    s->vocab = vocab;
    s->z = malloc((size_t)vocab * sizeof *s->z);
    s->cand = malloc((size_t)vocab * sizeof *s->cand);
    s->heap = malloc((size_t)vocab * sizeof *s->heap);
    s->counts = calloc((size_t)vocab, sizeof *s->counts);
    s->seen = calloc((size_t)vocab, sizeof *s->seen);
    if (!s->z || !s->cand || !s->heap || !s->counts || !s->seen) {
        di_sampler_scratch_free(s);
        return di_error_set(err, DEEPINFER_ERR_OUT_OF_MEMORY, "cannot allocate sampler scratch for %d ids", vocab);
    }
    return DEEPINFER_OK;
}

void di_sampler_scratch_free(di_sampler_scratch *s) {
    free(s->z);
    free(s->cand);
    free(s->heap);
    free(s->counts);
    free(s->seen);
    memset(s, 0, sizeof *s);
}

/* "a ranks before b": larger value first, then smaller id. */
static inline int ranks_before(const float *v, int32_t a, int32_t b) {
    return v[a] > v[b] || (v[a] == v[b] && a < b);
}

/* Binary heap over ids keyed by v; `worst_on_top` selects a min-heap of the
 * ranking (for bounded top-k) or a max-heap (for popping best first). */
static void heap_sift_down(int32_t *h, size_t n, size_t i, const float *v, int worst_on_top) {
    for (;;) {
        size_t l = 2 * i + 1, r = l + 1, t = i;
        if (worst_on_top) {
            if (l < n && ranks_before(v, h[t], h[l])) t = l;
            if (r < n && ranks_before(v, h[t], h[r])) t = r;
        } else {
            if (l < n && ranks_before(v, h[l], h[t])) t = l;
            if (r < n && ranks_before(v, h[r], h[t])) t = r;
        }
        if (t == i) return;
        int32_t tmp = h[i];
        h[i] = h[t];
        h[t] = tmp;
        i = t;
    }
}

static void heapify(int32_t *h, size_t n, const float *v, int worst_on_top) {
    for (size_t i = n / 2; i-- > 0;) heap_sift_down(h, n, i, v, worst_on_top);
}

/* Keep the k best of cand[0..n) (by v desc, id asc), in ascending id order. */
static size_t keep_top_k(int32_t *cand, size_t n, size_t k, const float *v, int32_t *heap) {
    if (k >= n) return n;
    for (size_t i = 0; i < k; i++) heap[i] = cand[i];
    heapify(heap, k, v, 1);
    for (size_t i = k; i < n; i++)
        if (ranks_before(v, cand[i], heap[0])) {
            heap[0] = cand[i];
            heap_sift_down(heap, k, 0, v, 1);
        }
    /* restore ascending id order for deterministic downstream loops */
    memcpy(cand, heap, k * sizeof *cand);
    for (size_t i = 1; i < k; i++) { /* insertion sort by id: k is small or this is rare */
        int32_t x = cand[i];
        size_t j = i;
        while (j > 0 && cand[j - 1] > x) {
            cand[j] = cand[j - 1];
            j--;
        }
        cand[j] = x;
    }
    return k;
}

static int cmp_i32(const void *a, const void *b) {
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

/* Smallest prefix (by z desc, id asc) of the renormalised candidates whose
 * mass reaches top_p. */
static size_t keep_top_p(int32_t *cand, size_t n, double top_p, const float *z, int32_t *heap) {
    double zmax = -INFINITY;
    for (size_t i = 0; i < n; i++)
        if (z[cand[i]] > zmax) zmax = z[cand[i]];
    double total = 0.0;
    for (size_t i = 0; i < n; i++) total += exp((double)z[cand[i]] - zmax);
    memcpy(heap, cand, n * sizeof *heap);
    heapify(heap, n, z, 0);
    size_t hn = n, kept = 0;
    double mass = 0.0, target = top_p * total;
    while (hn > 0) {
        int32_t best = heap[0];
        cand[kept++] = best;
        mass += exp((double)z[best] - zmax);
        heap[0] = heap[--hn];
        heap_sift_down(heap, hn, 0, z, 0);
        if (mass >= target) break;
    }
    qsort(cand, kept, sizeof *cand, cmp_i32);
    return kept;
}

void di_raw_logprobs(const float *logits, int32_t V, int32_t token, int32_t k, float *logprob, int32_t *top_ids,
                     float *top_logprobs, int32_t *n_top) {
    double lmax = -INFINITY;
    for (int32_t v = 0; v < V; v++)
        if (logits[v] > lmax) lmax = logits[v];
    double sum = 0.0;
    for (int32_t v = 0; v < V; v++)
        if (!isnan(logits[v])) sum += exp((double)logits[v] - lmax);
    double lse = lmax + log(sum);
    *logprob = (float)((double)logits[token] - lse);
    *n_top = 0;
    if (k <= 0) return;
    /* insertion into a sorted list of at most DI_MAX_LOGPROBS (by logit desc, id asc) */
    size_t ns = 0;
    int32_t sel[DI_MAX_LOGPROBS];
    for (int32_t id = 0; id < V; id++) {
        if (isnan(logits[id])) continue;
        size_t j;
        if (ns < (size_t)k) j = ns++;
        else if (ranks_before(logits, id, sel[k - 1])) j = (size_t)k - 1;
        else continue;
        while (j > 0 && ranks_before(logits, id, sel[j - 1])) {
            sel[j] = sel[j - 1];
            j--;
        }
        sel[j] = id;
    }
    for (size_t i = 0; i < ns; i++) {
        top_ids[i] = sel[i];
        top_logprobs[i] = (float)((double)logits[sel[i]] - lse);
    }
    *n_top = (int32_t)ns;
}

static void fill_logprobs(const float *logits, int32_t V, const di_sampling_params *p, di_sample_result *out) {
    out->n_top = 0;
    if (p->logprobs < 0) return; /* not asked for: skip the pass over the vocabulary */
    di_raw_logprobs(logits, V, out->token, p->logprobs, &out->logprob, out->top_ids, out->top_logprobs, &out->n_top);
}

static int allowed(const uint32_t *mask, int32_t v) { return !mask || ((mask[v >> 5] >> (v & 31)) & 1u); }

deepinfer_status di_sample_row(const float *logits, const di_sampling_params *p, const di_sample_context *ctx,
                               di_sampler_scratch *s, di_sample_result *out, di_error *err) {
    const int32_t V = s->vocab;
    float *z = s->z;
    memset(out, 0, sizeof *out);

    /* 1. penalties on the raw logits */
    for (int32_t v = 0; v < V; v++) z[v] = isnan(logits[v]) ? -INFINITY : logits[v];
    int penal_rep = p->repetition_penalty != 1.0f;
    int penal_pf = p->presence_penalty != 0.0f || p->frequency_penalty != 0.0f;
    if (penal_rep || penal_pf) {
        for (size_t i = 0; i < ctx->n_output; i++) {
            int32_t t = ctx->output_ids[i];
            if (t < 0 || t >= V) continue;
            if (s->counts[t] < UINT16_MAX) s->counts[t]++;
            s->seen[t] = 1;
        }
        if (penal_rep)
            for (size_t i = 0; i < ctx->n_prompt; i++) {
                int32_t t = ctx->prompt_ids[i];
                if (t >= 0 && t < V) s->seen[t] = 1;
            }
        /* apply once per distinct id, then clear the marks */
        for (int pass = 0; pass < 2; pass++) {
            const int32_t *ids = pass ? ctx->prompt_ids : ctx->output_ids;
            size_t n = pass ? ctx->n_prompt : ctx->n_output;
            for (size_t i = 0; i < n; i++) {
                int32_t t = ids[i];
                if (t < 0 || t >= V || !s->seen[t]) continue;
                if (penal_rep) z[t] = z[t] > 0 ? z[t] / p->repetition_penalty : z[t] * p->repetition_penalty;
                if (penal_pf && s->counts[t])
                    z[t] -= p->frequency_penalty * (float)s->counts[t] + p->presence_penalty;
                s->seen[t] = 0;
                s->counts[t] = 0;
            }
        }
    }

    /* 2. candidates: allow mask, min_tokens */
    int block_stop = (size_t)p->min_tokens > ctx->n_output;
    size_t n = 0;
    for (int32_t v = 0; v < V; v++) {
        if (z[v] == -INFINITY || !allowed(ctx->allow_mask, v)) continue;
        if (block_stop) {
            if (v == ctx->eos_id) continue;
            int is_stop = 0;
            for (int i = 0; i < p->n_stop_ids; i++) is_stop |= p->stop_ids[i] == v;
            if (is_stop) continue;
        }
        s->cand[n++] = v;
    }
    if (n == 0)
        return di_error_set(err, DEEPINFER_ERR_INVALID_ARGUMENT,
                            "no token can be sampled: every allowed logit is -inf or NaN");

    if (p->temperature == 0.0f) {
        int32_t best = s->cand[0];
        for (size_t i = 1; i < n; i++)
            if (z[s->cand[i]] > z[best]) best = s->cand[i];
        out->token = best;
        fill_logprobs(logits, V, p, out);
        return DEEPINFER_OK;
    }

    /* 3. temperature, then filters on z */
    float zmax = -INFINITY;
    for (size_t i = 0; i < n; i++) {
        int32_t v = s->cand[i];
        z[v] = z[v] / p->temperature;
        if (z[v] > zmax) zmax = z[v];
    }
    if (p->min_p > 0.0f) {
        double cut = (double)zmax + log((double)p->min_p);
        size_t m = 0;
        for (size_t i = 0; i < n; i++)
            if ((double)z[s->cand[i]] >= cut) s->cand[m++] = s->cand[i];
        n = m;
    }
    if (p->top_k > 0) n = keep_top_k(s->cand, n, (size_t)p->top_k, z, s->heap);
    if (p->top_p < 1.0f) n = keep_top_p(s->cand, n, (double)p->top_p, z, s->heap);

    /* 4. Gumbel-max. Noise lies in [g_min, g_max] (24-bit uniforms), so ids
     * with z < zmax - (g_max - g_min) can never win: skipping them is exact. */
    const float g_min = di_gumbel_from_bits(0u), g_max = di_gumbel_from_bits(0xFFFFFFFFu);
    float cut = zmax - (g_max - g_min);
    int32_t best = -1;
    float best_score = -INFINITY;
    for (size_t i = 0; i < n; i++) {
        int32_t v = s->cand[i];
        if (z[v] < cut) continue;
        float score = z[v] + di_gumbel_at(ctx->seed, ctx->stream, ctx->position, ctx->purpose, (uint32_t)v);
        if (best < 0 || score > best_score) {
            best = v;
            best_score = score;
        }
    }
    out->token = best;
    fill_logprobs(logits, V, p, out);
    return DEEPINFER_OK;
}
