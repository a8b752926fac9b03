/* ep_plan.c — the expert-parallel exchange plan and the row gather with holes
 * (ops.h di_ep_plan, di_gather_rows_bf16). */
#include <string.h>

#include "ops/cpu/cpu_ops.h"
#include "ops/ops.h"

/* q(i) of ops.h di_ep_plan: the slot's place in its row's combine order. */
static int combine_place(const int *row_sel, int k, int s) {
    int q = 0, es = row_sel[s];
    for (int t = 0; t < k; t++) q += row_sel[t] < es || (row_sel[t] == es && t < s);
    return q;
}

void di_cpu_ep_plan(di_exec *x, const di_ep_plan_args *a) {
    const int M = a->M, k = a->k, n = M > 0 ? M * k : 0;
    if (n <= 0) return;
    /* executing ranks in increasing (row, slot): the j-th entry of e runs on copy j % ncopies(e) */
    enum { EMAX = 1024 };
    int cnt[EMAX];
    const int E = a->E < EMAX ? a->E : EMAX;
    int64_t rep = 0;
    memset(cnt, 0, sizeof(int) * (size_t)E);
    for (int i = 0; i < n; i++) {
        int e = a->sel[i];
        if (e < 0 || e >= E) { /* outside the contract (the router writes ids < E): runs nowhere */
            a->exec[i] = -1, a->sel_loc[i] = a->nloc;
            continue;
        }
        int j = cnt[e]++, c = j % a->ncopies[e], r = a->copies[(size_t)e * a->maxc + c];
        a->exec[i] = r;
        a->sel_loc[i] = r == a->rank && a->local[e] >= 0 ? a->local[e] : a->nloc;
        rep += r == a->rank && c != 0;
    }
    for (int e = 0; e < E; e++) a->load[e] += cnt[e];
    a->replica[0] += rep;
    /* this rank's grouped GEMMs: the counting sort of di_moe_dispatch over nloc + 1 groups */
    di_cpu_moe_dispatch(x, M, k, a->sel_loc, a->nloc + 1, a->off, a->rows, a->inv);
    /* the combine exchange: send rows at their combine positions, the slice's positions and sources */
    const int lo = (int)((int64_t)M * a->rank / a->size), hi = (int)((int64_t)M * (a->rank + 1) / a->size);
    const int ms_k = (hi - lo) * k;
    for (int m = 0; m < M; m++)
        for (int s = 0; s < k; s++) {
            int i = m * k + s, q = combine_place(a->sel + (size_t)m * k, k, s);
            int here = a->exec[i] == a->rank && a->sel_loc[i] < a->nloc;
            a->pack[m * k + q] = here ? a->inv[i] : -1;
            if (m < lo || m >= hi) continue;
            int p = (m - lo) * k + q;
            a->cinv[(m - lo) * k + s] = p;
            a->unpack[p] = a->exec[i] >= 0 ? a->exec[i] * ms_k + p : p;
        }
}

void di_cpu_gather_rows_bf16(di_exec *x, int n, const int *idx, const uint16_t *src, size_t lds, int d, uint16_t *dst,
                             size_t ldd) {
    (void)x;
    for (int j = 0; j < n; j++)
        if (idx[j] >= 0) memcpy(dst + (size_t)j * ldd, src + (size_t)idx[j] * lds, (size_t)d * 2);
}
