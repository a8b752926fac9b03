/* The expert-parallel exchange plan (ops.h di_ep_plan, src/ops/cpu/ep_plan.c) against a direct
 * host reference: executing ranks (the j-th entry of an expert on copy j % ncopies), the rank's
 * dispatch (off / rows / inv), the combine exchange's send rows, slice positions and sources,
 * and the accumulated counters; replicas, uneven slices (M not divisible by the ranks, M < ranks)
 * and rows with a repeated expert (tests/ops/ep_plan_cases.h). And the row gather with holes. */
#include <stdlib.h>
#include <string.h>

#include "ops/ep_plan_cases.h"
#include "ops/ops.h"
#include "test.h"

typedef struct plan_out {
    int *exec, *sel_loc, *off, *rows, *inv, *pack, *cinv, *unpack;
    int64_t *load, replica;
} plan_out;

static void out_alloc(plan_out *o, const epc_case *c) {
    size_t n = (size_t)c->M * c->k + 1;
    o->exec = malloc(n * 4), o->sel_loc = malloc(n * 4), o->off = malloc(((size_t)c->nloc + 2) * 4);
    o->rows = malloc(n * 4), o->inv = malloc(n * 4), o->pack = malloc(n * 4), o->cinv = malloc(n * 4);
    o->unpack = malloc(n * 4), o->load = calloc((size_t)c->E, 8), o->replica = 0;
}

static void out_free(plan_out *o) {
    free(o->exec), free(o->sel_loc), free(o->off), free(o->rows), free(o->inv), free(o->pack), free(o->cinv);
    free(o->unpack), free(o->load);
}

/* The plan written out from its definition, one quantity at a time. */
static void reference(const epc_case *c, plan_out *o) {
    int M = c->M, k = c->k, n = M * k, me = c->rank;
    for (int i = 0; i < n; i++) {
        int e = c->sel[i], j = 0;
        for (int t = 0; t < i; t++) j += c->sel[t] == e;
        int cp = j % c->ncopies[e];
        o->exec[i] = c->copies[(size_t)e * EPC_MAXC + cp];
        o->sel_loc[i] = o->exec[i] == me ? c->local[e] : c->nloc;
        o->load[e]++;
        o->replica += o->exec[i] == me && cp != 0;
    }
    int at = 0; /* groups in increasing id, entries in increasing (row, slot) */
    for (int g = 0; g <= c->nloc; g++) {
        o->off[g] = at;
        for (int i = 0; i < n; i++)
            if (o->sel_loc[i] == g) o->rows[at] = i, o->inv[i] = at++;
    }
    o->off[c->nloc + 1] = at;
    int lo = epc_lo(c, me), hi = epc_lo(c, me + 1), msk = (hi - lo) * k;
    for (int m = 0; m < M; m++) {
        int order[64]; /* the row's slots sorted by (expert, slot): a selection sort */
        for (int s = 0; s < k; s++) order[s] = s;
        for (int a = 0; a < k; a++)
            for (int b = a + 1; b < k; b++) {
                int ea = c->sel[m * k + order[a]], eb = c->sel[m * k + order[b]];
                if (eb < ea || (eb == ea && order[b] < order[a])) {
                    int t = order[a];
                    order[a] = order[b], order[b] = t;
                }
            }
        for (int q = 0; q < k; q++) {
            int i = m * k + order[q];
            o->pack[m * k + q] = o->exec[i] == me ? o->inv[i] : -1;
            if (m < lo || m >= hi) continue;
            int p = (m - lo) * k + q;
            o->cinv[(m - lo) * k + order[q]] = p;
            o->unpack[p] = o->exec[i] * msk + p;
        }
    }
}

static int same(const int *a, const int *b, int n) { return n <= 0 || memcmp(a, b, sizeof(int) * (size_t)n) == 0; }

TEST(ep_plan_equals_host_reference) {
    int cases = 0, rep_entries = 0;
    for (int t = 0; t < EPC_NSHAPES; t++)
        for (int r = 0; r < epc_shapes[t][3]; r++) {
            epc_case c;
            epc_make(&c, t, r, 7);
            plan_out got, ref;
            out_alloc(&got, &c), out_alloc(&ref, &c);
            for (int e = 0; e < c.E; e++) got.load[e] = ref.load[e] = 1000 + e; /* accumulated, not set */
            got.replica = ref.replica = 5;
            reference(&c, &ref);
            di_ep_plan_args a = {.M = c.M, .k = c.k, .E = c.E, .sel = c.sel, .ncopies = c.ncopies,
                                 .copies = c.copies, .maxc = EPC_MAXC, .local = c.local, .nloc = c.nloc,
                                 .rank = r, .size = c.S, .exec = got.exec, .sel_loc = got.sel_loc, .off = got.off,
                                 .rows = got.rows, .inv = got.inv, .pack = got.pack, .cinv = got.cinv,
                                 .unpack = got.unpack, .load = got.load, .replica = &got.replica};
            di_ep_plan(NULL, &a);
            int n = c.M * c.k, msk = (epc_lo(&c, r + 1) - epc_lo(&c, r)) * c.k;
            CHECK_MSG(same(got.exec, ref.exec, n), "shape %d rank %d: executing ranks", t, r);
            CHECK_MSG(same(got.sel_loc, ref.sel_loc, n), "shape %d rank %d: local experts", t, r);
            CHECK_MSG(same(got.off, ref.off, c.nloc + 2), "shape %d rank %d: offsets", t, r);
            CHECK_MSG(same(got.rows, ref.rows, n) && same(got.inv, ref.inv, n), "shape %d rank %d: dispatch", t, r);
            CHECK_MSG(same(got.pack, ref.pack, n), "shape %d rank %d: send rows", t, r);
            CHECK_MSG(same(got.cinv, ref.cinv, msk), "shape %d rank %d: combine positions", t, r);
            CHECK_MSG(same(got.unpack, ref.unpack, msk), "shape %d rank %d: received rows", t, r);
            CHECK_MSG(memcmp(got.load, ref.load, 8 * (size_t)c.E) == 0, "shape %d rank %d: load counters", t, r);
            CHECK_MSG(got.replica == ref.replica, "shape %d rank %d: replica entries %lld, want %lld", t, r,
                      (long long)got.replica, (long long)ref.replica);
            rep_entries += (int)(ref.replica - 5);
            out_free(&got), out_free(&ref);
            epc_free(&c);
            cases++;
        }
    CHECK(cases > 20);
    CHECK_MSG(rep_entries > 0, "no entry ran on a replica: the cases do not exercise them");
}

/* Every rank's plan together: each entry is sent by exactly its executing rank, at a send row
 * that lands, in the receiver's buffer from that rank, at the row the receiver takes for it. */
TEST(ep_plan_ranks_agree_on_the_exchange) {
    for (int t = 0; t < EPC_NSHAPES; t++) {
        int S = epc_shapes[t][3];
        epc_case c[8];
        plan_out o[8];
        for (int r = 0; r < S; r++) {
            epc_make(&c[r], t, r, 11);
            out_alloc(&o[r], &c[r]);
            di_ep_plan_args a = {.M = c[r].M, .k = c[r].k, .E = c[r].E, .sel = c[r].sel, .ncopies = c[r].ncopies,
                                 .copies = c[r].copies, .maxc = EPC_MAXC, .local = c[r].local,
                                 .nloc = c[r].nloc, .rank = r, .size = S, .exec = o[r].exec,
                                 .sel_loc = o[r].sel_loc, .off = o[r].off, .rows = o[r].rows, .inv = o[r].inv,
                                 .pack = o[r].pack, .cinv = o[r].cinv, .unpack = o[r].unpack,
                                 .load = o[r].load, .replica = &o[r].replica};
            di_ep_plan(NULL, &a);
        }
        int M = c[0].M, k = c[0].k;
        for (int r = 0; r < S; r++) {
            CHECK(same(o[r].exec, o[0].exec, M * k));
            int lo = epc_lo(&c[0], r), hi = epc_lo(&c[0], r + 1), msk = (hi - lo) * k;
            for (int p = 0; p < msk; p++) { /* receiver r's row p comes from rank src's send row lo*k + p */
                int src = o[r].unpack[p] / (msk ? msk : 1), row = lo * k + p;
                CHECK(src >= 0 && src < S && o[r].unpack[p] % msk == p);
                CHECK_MSG(o[src].pack[row] >= 0, "shape %d: rank %d takes row %d from rank %d, which sent none", t, r,
                          row, src);
                for (int q = 0; q < S; q++) /* no other rank sends that entry */
                    CHECK(q == src || o[q].pack[row] < 0);
                /* the sent row is the executing rank's dispatch row of that entry */
                int ent = o[src].rows[o[src].pack[row]];
                CHECK(ent / k == row / k && o[src].exec[ent] == src);
            }
        }
        for (int r = 0; r < S; r++) out_free(&o[r]), epc_free(&c[r]);
    }
}

TEST(gather_rows_bf16_leaves_holes_untouched) {
    enum { N = 9, D = 13, R = 5 };
    uint16_t src[R * D], dst[N * 16];
    int idx[N] = {4, -1, 0, 2, -1, -1, 1, 3, 4};
    for (int i = 0; i < R * D; i++) src[i] = (uint16_t)(i * 37 + 1);
    for (int i = 0; i < N * 16; i++) dst[i] = 0xBEEF;
    di_gather_rows_bf16(NULL, N, idx, src, D, D, dst, 16);
    for (int j = 0; j < N; j++)
        for (int c = 0; c < 16; c++) {
            uint16_t want = idx[j] >= 0 && c < D ? src[idx[j] * D + c] : 0xBEEF;
            CHECK_MSG(dst[j * 16 + c] == want, "row %d col %d", j, c);
        }
}
