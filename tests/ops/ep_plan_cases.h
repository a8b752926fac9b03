/* ep_plan_cases.h — routing tables and replica maps for the expert-parallel exchange plan
 * (ops.h di_ep_plan), shared by the CPU test (tests/ops/cpu/test_ep_plan.c: the op against a
 * direct host reference) and the GPU test (tests/ops/cuda/gtest_ep_plan.c: the CUDA op against
 * the CPU op, bitwise). A case: M rows of k distinct experts each (as a top-k; some with an
 * expert repeated, as a hash layer's table may), E experts owned E / S per rank, replicas on
 * random other ranks (up to min(S, EPC_MAXC) copies), and one rank's view of it (its resident
 * experts: owned plus replicas it holds). */
#ifndef TESTS_OPS_EP_PLAN_CASES_H
#define TESTS_OPS_EP_PLAN_CASES_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ops/ops.h"

#define EPC_MAXC 8

typedef struct epc_case {
    int M, k, E, S, rank, nloc;
    int *sel, *ncopies, *copies, *local; /* [M*k], [E], [E][EPC_MAXC], [E] */
} epc_case;

/* M, k, E, S, replicas (0: none), repeated experts in a row (hash-style) */
static const int epc_shapes[][6] = {
    {1, 6, 16, 2, 0, 0},  {7, 6, 16, 2, 1, 0},   {5, 4, 16, 4, 1, 0},  {3, 6, 32, 4, 1, 0}, /* M < S */
    {2, 2, 8, 8, 1, 0},   {37, 6, 64, 3, 1, 1},  {64, 8, 256, 8, 1, 0}, {300, 6, 384, 4, 1, 1},
    {1, 1, 4, 1, 0, 0},   {129, 6, 256, 2, 1, 0},
};
#define EPC_NSHAPES ((int)(sizeof epc_shapes / sizeof epc_shapes[0]))

static uint32_t epc_rand(uint64_t *s) {
    *s = *s * 6364136223846793005ull + 1442695040888963407ull;
    return (uint32_t)(*s >> 33);
}

static int epc_holds(const int *cp, int nc, int r) {
    for (int i = 0; i < nc; i++)
        if (cp[i] == r) return 1;
    return 0;
}

/* Shape `t`, the plan of rank `rank` (< S); free with epc_free. Routing and replicas depend on
 * t and seed only, so every rank of a shape sees the same table. */
static void epc_make(epc_case *c, int t, int rank, uint64_t seed) {
    const int *sh = epc_shapes[t];
    int M = sh[0], k = sh[1], E = sh[2], S = sh[3], reps = sh[4], dup = sh[5];
    uint64_t s = seed * 1000003u + (uint64_t)t;
    *c = (epc_case){.M = M, .k = k, .E = E, .S = S, .rank = rank};
    c->sel = malloc(sizeof(int) * (size_t)M * k);
    c->ncopies = malloc(sizeof(int) * (size_t)E);
    c->copies = calloc((size_t)E * EPC_MAXC, sizeof(int));
    c->local = malloc(sizeof(int) * (size_t)E);
    /* skewed routing: low ids hot, so that replicas take entries */
    for (int m = 0; m < M; m++)
        for (int j = 0; j < k; j++) {
            int e;
            for (;;) {
                uint32_t u = epc_rand(&s);
                e = (u & 1) ? (int)(u >> 1) % (E < 4 ? E : 4) : (int)(u >> 1) % E;
                int seen = 0;
                for (int q = 0; q < j; q++) seen |= c->sel[m * k + q] == e;
                if (!seen || (dup && (u & 6) == 0)) break;
            }
            c->sel[m * k + j] = e;
        }
    int per = E / S, maxc = S < EPC_MAXC ? S : EPC_MAXC;
    for (int e = 0; e < E; e++) {
        int *cp = c->copies + (size_t)e * EPC_MAXC, nc = 1;
        cp[0] = e / per;
        int want = reps ? (int)(epc_rand(&s) % (uint32_t)maxc) : 0;
        if (reps && e < 3 && maxc > 1) want = maxc - 1; /* the hot ones: every copy */
        for (int a = 0; a < 4 * S && nc < want + 1; a++) {
            int r = (int)(epc_rand(&s) % (uint32_t)S);
            if (!epc_holds(cp, nc, r)) cp[nc++] = r;
        }
        c->ncopies[e] = nc;
    }
    c->nloc = 0;
    for (int e = 0; e < E; e++)
        c->local[e] = epc_holds(c->copies + (size_t)e * EPC_MAXC, c->ncopies[e], rank) ? c->nloc++ : -1;
}

static void epc_free(epc_case *c) { free(c->sel), free(c->ncopies), free(c->copies), free(c->local); }

static int epc_lo(const epc_case *c, int r) { return (int)((int64_t)c->M * r / c->S); }

#endif
