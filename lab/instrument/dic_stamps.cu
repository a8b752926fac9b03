/*
 * dic_stamps.cu — a timeline of one replayed decode step, for builds with -DDIC_STAMPS only
 * (make ... NVCC_EXTRA=-DDIC_STAMPS; lab/instrument/README.md). Block 0 of every kernel that
 * runs DIC_PDL_ENTER records the global timer before and after its PDL wait (dic_common.cuh); with
 * $DEEPINFER_CUDA_STAMPS=FILE the stamps of the 8th replayed graph are written to FILE, one line per
 * kernel in the order the stamps were taken: enter and go times in µs from the first stamp, the wait
 * (go - enter), grid and block size, the stamp's source site (tools/stamps_timeline.py). A kernel's go time is when its predecessor on the same line
 * completed, so the gaps between consecutive go times on a line are the kernels' critical-path
 * costs. In the default build every function here does nothing.
 */
#include <stdio.h>
#include <stdlib.h>

#include "ops/cuda/dic_common.cuh"

#ifdef DIC_STAMPS
typedef void (*stamp_setter)(void *, void *);
static stamp_setter g_set[128];
static int g_nset, g_state; /* 0: not read, 1: off, 2: armed, 3: done */
static dic_stamp *g_buf;
static unsigned *g_cnt;
static const char *g_path;

extern "C" int dic_stamp_register(void (*set)(void *buf, void *cnt)) {
    if (g_nset < 128) g_set[g_nset++] = set;
    return g_nset;
}

static int stamps_ready(void) {
    if (!g_state) {
        g_path = getenv("DEEPINFER_CUDA_STAMPS");
        g_state = 1;
        if (g_path && *g_path && cudaMalloc(&g_buf, sizeof(dic_stamp) * DIC_STAMP_MAX) == cudaSuccess &&
            cudaMalloc(&g_cnt, sizeof *g_cnt) == cudaSuccess) {
            for (int i = 0; i < g_nset; i++) g_set[i](g_buf, g_cnt);
            g_state = 2;
        }
    }
    return g_state == 2;
}

extern "C" void dic_stamps_before(cudaStream_t st, int replay) {
    if (replay == 8 && stamps_ready()) (void)cudaMemsetAsync(g_cnt, 0, sizeof *g_cnt, st);
}

extern "C" void dic_stamps_after(cudaStream_t st, int replay) {
    if (replay != 8 || !stamps_ready()) return;
    g_state = 3;
    unsigned n = 0;
    static dic_stamp h[DIC_STAMP_MAX];
    if (cudaStreamSynchronize(st) != cudaSuccess || cudaMemcpy(&n, g_cnt, sizeof n, cudaMemcpyDeviceToHost) != cudaSuccess)
        return;
    if (n > DIC_STAMP_MAX) n = DIC_STAMP_MAX;
    if (cudaMemcpy(h, g_buf, sizeof(dic_stamp) * n, cudaMemcpyDeviceToHost) != cudaSuccess) return;
    FILE *f = fopen(g_path, "w");
    if (!f) return;
    unsigned long long t0 = n ? h[0].t_enter : 0;
    for (unsigned i = 0; i < n; i++)
        if (h[i].t_enter < t0) t0 = h[i].t_enter;
    fprintf(f, "# i enter_us go_us wait_us grid block site (DIC_STAMPS, replay %d; grid 0: a phase mark, block = its\n"
               "# tag; site: file-name hash:line, tools/stamps_timeline.py names the kernels)\n", replay);
    for (unsigned i = 0; i < n; i++)
        fprintf(f, "%u %.2f %.2f %.2f %u %u %04x:%u\n", i, (double)(h[i].t_enter - t0) / 1e3,
                (double)(h[i].t_go - t0) / 1e3, (double)(h[i].t_go - h[i].t_enter) / 1e3, h[i].grid, h[i].block,
                h[i].site >> 16, h[i].site & 0xFFFFu);
    fclose(f);
}
#else
extern "C" void dic_stamps_before(cudaStream_t st, int replay) { (void)st, (void)replay; }
extern "C" void dic_stamps_after(cudaStream_t st, int replay) { (void)st, (void)replay; }
#endif
