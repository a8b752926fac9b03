/* `deepinfer info`: version, CPU kernel path, CUDA availability. */
#include <stdio.h>

#include "cli.h"
#include "deepinfer.h"
#include "ops/backend.h"
#include "util/cpu.h"

static int cmd_info(int argc, char **argv) {
    if (di_cli_wants_help(argc, argv)) {
        printf("usage: deepinfer info\n\nPrints the version, the CPU kernel path chosen at run time\n"
               "(override with DEEPINFER_CPU_ISA=scalar|avx2|avx512) and whether CUDA is usable.\n");
        return 0;
    }
    printf("deepinfer %s\n", deepinfer_version());
    printf("cpu kernels: %s (hardware: %s%s)\n", di_isa_name(di_cpu_isa()), di_isa_name(di_cpu_isa_hw()),
           di_cpu_has_avx512bf16() ? ", avx512_bf16" : "");
    di_cuda_info ci;
    di_backend_cuda_info(&ci);
    if (!ci.compiled) printf("cuda: not built in (%s)\n", ci.why);
    else if (ci.device_count == 0) printf("cuda: built in, no usable device (%s); using the CPU\n", ci.why);
    else
        printf("cuda: %d device(s); device 0: %s, compute capability %d.%d, %.1f GiB\n", ci.device_count, ci.name,
               ci.cc_major, ci.cc_minor, (double)ci.total_mem / (1024.0 * 1024.0 * 1024.0));
    di_backend_kind k;
    di_error err = {0};
    if (di_backend_select(NULL, &k, &err) == DEEPINFER_OK) printf("backend: %s\n", di_backend_name(k));
    else printf("backend: error: %s\n", err.msg);
    return 0;
}

DI_CLI_COMMAND(info, "show version, CPU kernel path and CUDA availability", cmd_info)
