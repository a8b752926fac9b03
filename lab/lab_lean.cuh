/* lab_lean.cuh — the lab's lean / full switch for the variant launchers copied from the product: the
 * product launches only its lean (code-size) decode instantiations; a lab run may select the full
 * instantiations of the same kernels (the same bits) with lab_lean_set(0). */
#ifndef LAB_LEAN_CUH
#define LAB_LEAN_CUH
static int g_lab_lean_off;
static inline void lab_lean_set(int on) { g_lab_lean_off = !on; }
static inline int dic_lean_off(void) { return g_lab_lean_off; }
#endif
