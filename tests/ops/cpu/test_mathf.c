/* di_expf (src/ops/cpu/mathf.h): accuracy against double exp over a sample
 * of every fp32 bit pattern plus the edges, and identical bits from the
 * scalar and AVX-512 versions. (The exhaustive run over all 2^32 inputs is
 * recorded in docs/cpu-backend.md §3.) */
#include <math.h>
#include <string.h>

#include "ops/cpu/mathf.h"
#include "test.h"
#include "util/cpu.h"

/* |got - exp(x)| in ulps of the exact result (subnormal ulp below 2^-126). */
static double ulp_err(float got, double ref) {
    if (ref > 0x1.fffffefffffffp+127) return isinf(got) ? 0 : 1e9; /* rounds to +inf */
    int e;
    frexp(ref, &e);
    double u = ldexp(1.0, e - 24);
    if (u < 0x1p-149) u = 0x1p-149;
    return fabs((double)got - ref) / u;
}

TEST(expf_accurate_and_isa_identical) {
    enum { N = 4096 };
    static float x[N], ys[N], yv[N];
    di_isa hw = di_cpu_isa_hw();
    double worst = 0;
    float worst_x = 0;
    uint32_t u = 0;
    for (int chunk = 0; chunk < 4096; chunk++) {
        for (int i = 0; i < N; i++) {
            memcpy(&x[i], &u, 4);
            u += 257; /* visits ~2^24 patterns spread over the whole range */
        }
        if (chunk == 0) { /* edges */
            float edge[] = {0.0f, -0.0f, INFINITY, -INFINITY, NAN, 1.0f, -1.0f, 88.72283935546875f, 88.7228394f,
                            88.72284f, 89.0f, 100.0f, 1e30f, -87.33654f, -100.0f, -103.2789f, -103.97208f, -104.0f,
                            -150.0f, -1e30f, 0x1p-149f, -0x1p-149f, 0x1p-30f};
            memcpy(x, edge, sizeof edge);
        }
        di_cpu_set_isa(DI_ISA_SCALAR);
        di_expf_n(x, ys, N);
        di_cpu_set_isa(hw);
        di_expf_n(x, yv, N);
        for (int i = 0; i < N; i++) {
            CHECK_MSG(!memcmp(&ys[i], &yv[i], 4), "x = %a: scalar %a, %s %a", (double)x[i], (double)ys[i],
                      di_isa_name(hw), (double)yv[i]);
            CHECK(!memcmp(&ys[i], &(float){di_expf(x[i])}, 4));
            if (x[i] != x[i]) {
                CHECK(ys[i] != ys[i]);
                continue;
            }
            double e = ulp_err(ys[i], exp((double)x[i]));
            if (e > worst) worst = e, worst_x = x[i];
        }
    }
    fprintf(stderr, "    di_expf: max error %.6f ulp (at %a) over 2^24 sampled inputs\n", worst, (double)worst_x);
    CHECK(worst <= 0.5 + 0x1p-12);
    CHECK(di_expf(0.0f) == 1.0f && di_expf(-INFINITY) == 0.0f && isinf(di_expf(INFINITY)));
    CHECK(isinf(di_expf(0x1.62e430p+6f)) && di_expf(0x1.62e42ep+6f) == 0x1.ffff08p+127f); /* last finite */
    if (hw == DI_ISA_SCALAR) SKIP("only the scalar path on this CPU: no vector path to compare with it"); /* accuracy checked; the "ISA identical" half cannot be */
}
