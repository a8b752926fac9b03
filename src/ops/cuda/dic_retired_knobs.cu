/*
 * dic_retired_knobs.cu — the retired variant switches of dic_retired_knobs.h: no effect, the product's
 * fixed choice returned. Only cu_skip.c's knob function calls them; both go together.
 */
#include "ops/cuda/dic_gemm_int.h"
#include "ops/cuda/dic_retired_knobs.h"

extern "C" void dic_gemm_dec_tune(int flags, int cps) { (void)flags, (void)cps; }
extern "C" int dic_gemm_dec_flags(void) { return DIC_DEC_QV2; }
extern "C" int dic_gemm_dec_cps(void) { return 0; }
extern "C" int dic_gemm_dec_qrule(int rule) { return (void)rule, 0; }
extern "C" int dic_hc_transition_variant(int v) { return (void)v, 7; }
extern "C" int dic_hc_head_cw(int cw) { return (void)cw, 64; }
extern "C" void dic_gemm_argmax_enable(int on) { (void)on; }
extern "C" void dic_gemv_stream_enable(int on) { (void)on; }
