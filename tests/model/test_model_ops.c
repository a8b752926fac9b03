/* Tests of the device-shaped model ops (docs/cuda-backend.md §1-§2) against
 * direct host loops: MoE dispatch / combine order, grouped GEMMs equal to
 * per-expert GEMMs, attention entry lists, row scatters, the allocator. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "io/numfmt.h"
#include "ops/ops.h"
#include "test.h"

static uint32_t g_rng = 4242;
static uint32_t urand(void) {
    g_rng = g_rng * 1664525u + 1013904223u;
    return g_rng >> 8;
}
static float frand(void) { return (float)urand() / (float)(1u << 24) * 2.0f - 1.0f; }

TEST(moe_dispatch_is_a_stable_counting_sort) {
    enum { M = 37, K = 3, E = 11 };
    int sel[M * K], off[E + 1], rows[M * K], inv[M * K];
    for (int i = 0; i < M * K; i++) sel[i] = (int)(urand() % E);
    di_moe_dispatch(NULL, M, K, sel, E, off, rows, inv);
    CHECK_EQ_INT(off[0], 0);
    CHECK_EQ_INT(off[E], M * K);
    int at = 0;
    for (int e = 0; e < E; e++) { /* the old host scan: for e, for m, for k */
        CHECK_EQ_INT(off[e], at);
        for (int i = 0; i < M * K; i++)
            if (sel[i] == e) {
                CHECK_EQ_INT(rows[at], i);
                CHECK_EQ_INT(inv[i], at);
                at++;
            }
    }
}

TEST(moe_combine_adds_in_expert_order) {
    enum { M = 9, K = 4, E = 6, D = 40 };
    int sel[M * K], off[E + 1], rows[M * K], inv[M * K];
    for (int m = 0; m < M; m++) /* distinct experts per token (like a top-k), not in id order */
        for (int k = 0; k < K; k++) sel[m * K + k] = (m * 7 + k * 5) % E;
    di_moe_dispatch(NULL, M, K, sel, E, off, rows, inv);
    uint16_t *eo = malloc(sizeof(uint16_t) * M * K * D);
    for (int i = 0; i < M * K * D; i++) eo[i] = di_f32_to_bf16(frand() * 1000.0f);
    float *y = malloc(sizeof(float) * M * D), *ref = calloc((size_t)M * D, sizeof(float));
    di_moe_combine(NULL, M, K, inv, eo, D, D, y);
    for (int e = 0; e < E; e++) /* the old per-expert loop */
        for (int i = off[e]; i < off[e + 1]; i++)
            for (int j = 0; j < D; j++) ref[(rows[i] / K) * D + j] += di_bf16_to_f32(eo[(size_t)i * D + j]);
    CHECK(memcmp(y, ref, sizeof(float) * M * D) == 0);
    free(eo), free(y), free(ref);
}

TEST(grouped_gemm_equals_per_expert_gemm) {
    di_exec x;
    di_error err = {0};
    CHECK(di_exec_init(&x, 0, &err) == DEEPINFER_OK);
    enum { E = 3, N = 32, Kd = 64, R = 10 };
    di_wmat W[E];
    uint16_t *w = malloc(sizeof(uint16_t) * N * Kd);
    for (int e = 0; e < E; e++) {
        for (int i = 0; i < N * Kd; i++) w[i] = di_f32_to_bf16(frand());
        CHECK(di_wmat_pack(&W[e], DI_WFMT_BF16, w, NULL, N, Kd, 0, &err) == DEEPINFER_OK);
    }
    int off[E + 1] = {0, 4, 4, R};
    uint16_t *A = malloc(sizeof(uint16_t) * R * Kd), *C = malloc(sizeof(uint16_t) * R * N),
             *Cr = malloc(sizeof(uint16_t) * R * N);
    for (int i = 0; i < R * Kd; i++) A[i] = di_f32_to_bf16(frand());
    di_gemm_grouped(&x, E, W, off, A, Kd, 0, C, N);
    for (int e = 0; e < E; e++)
        if (off[e + 1] > off[e])
            di_gemm(&x, off[e + 1] - off[e], A + (size_t)off[e] * Kd, Kd, &W[e], 0, NULL, Cr + (size_t)off[e] * N, N);
    CHECK(memcmp(C, Cr, sizeof(uint16_t) * R * N) == 0);
    for (int e = 0; e < E; e++) di_wmat_free(&W[e]);
    free(w), free(A), free(C), free(Cr);
    di_exec_free(&x);
}

TEST(attn_list_window_ring_and_pages) {
    enum { WIN = 4, HD = 8, PR = 2 };
    uint16_t ring[WIN * HD] = {0}, kv[3 * HD] = {0}, p0[PR * HD] = {0}, p1[PR * HD] = {0}, p2[PR * HD] = {0};
    uint16_t *pages[3] = {p0, p1, p2};
    uint16_t *rings[1] = {ring};
    uint16_t **ckv[1] = {pages};
    int page_rows[1] = {PR};
    /* one segment: rows 0..2 at positions 5..7, ratio 2 (all visible rows) */
    int64_t pos[3] = {5, 6, 7}, seg_pos0[1] = {5};
    int row_seg[3] = {0, 0, 0}, seg_row0[1] = {0}, n[3];
    const uint16_t *list[3 * 16];
    di_attn_list(NULL, 3, pos, row_seg, seg_row0, seg_pos0, rings, WIN, kv, HD, ckv, page_rows, 2, NULL, 0, NULL, list,
                 16, n);
    /* row 2 (p = 7): window 4..7 = ring slot 0, kv rows 0, 1, 2; then rows 0..3 */
    CHECK_EQ_INT(n[2], WIN + 4);
    CHECK(list[2 * 16 + 0] == ring + 0 * HD);
    CHECK(list[2 * 16 + 1] == kv + 0 * HD);
    CHECK(list[2 * 16 + 3] == kv + 2 * HD);
    CHECK(list[2 * 16 + 4] == p0);
    CHECK(list[2 * 16 + 6] == p1);
    CHECK(list[2 * 16 + 7] == p1 + HD);
    /* with a top-k selection */
    int topk[3 * 2] = {0, 0, 0, 0, 3, 1}, ntopk[3] = {0, 0, 2};
    di_attn_list(NULL, 3, pos, row_seg, seg_row0, seg_pos0, rings, WIN, kv, HD, ckv, page_rows, 2, topk, 2, ntopk, list,
                 16, n);
    CHECK_EQ_INT(n[0], WIN);
    CHECK_EQ_INT(n[2], WIN + 2);
    CHECK(list[2 * 16 + 4] == p1 + HD);
    CHECK(list[2 * 16 + 5] == p0 + HD);
    /* position 1: window padded with NULL */
    int64_t pos1[1] = {1}, pos01[1] = {1};
    di_attn_list(NULL, 1, pos1, row_seg, seg_row0, pos01, rings, WIN, kv, HD, ckv, page_rows, 0, NULL, 0, NULL, list, 16,
                 n);
    CHECK_EQ_INT(n[0], WIN);
    CHECK(list[0] == ring + 0 * HD);
    CHECK(list[1] == kv);
    CHECK(list[2] == NULL && list[3] == NULL);
}

TEST(scatter_rows_and_allocator) {
    enum { W = 6 };
    uint16_t *src = di_dev_alloc(sizeof(uint16_t) * 3 * W), d0[W], d1[W];
    CHECK(src != NULL);
    for (int i = 0; i < 3 * W; i++) src[i] = (uint16_t)i;
    uint16_t *dst[2] = {d0, d1};
    int src_row[2] = {2, 0};
    di_scatter_rows(NULL, 2, src_row, src, W, dst, W);
    CHECK(d0[0] == 2 * W && d0[W - 1] == 3 * W - 1);
    CHECK(d1[0] == 0 && d1[W - 1] == W - 1);
    float f[5];
    di_fill_f32(NULL, f, 5, -INFINITY);
    CHECK(isinf(f[4]) && f[4] < 0);
    di_dev_free(src);
    CHECK(di_allocator_is_host());
}
