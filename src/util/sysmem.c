/* sysmem.c — /proc readers (sysmem.h). */
#include "util/sysmem.h"

#include <stdio.h>
#include <string.h>

/* The "<key>: N kB" line of a /proc file, in bytes; 0 when absent. */
static uint64_t proc_kb(const char *path, const char *key) {
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    char line[256];
    size_t kl = strlen(key);
    unsigned long long kb = 0;
    while (fgets(line, sizeof line, f))
        if (!strncmp(line, key, kl) && line[kl] == ':' && sscanf(line + kl + 1, "%llu", &kb) == 1) break;
    fclose(f);
    return (uint64_t)kb * 1024;
}

uint64_t di_sys_mem_available(void) { return proc_kb("/proc/meminfo", "MemAvailable"); }
uint64_t di_proc_rss(void) { return proc_kb("/proc/self/status", "VmRSS"); }
uint64_t di_proc_peak_rss(void) { return proc_kb("/proc/self/status", "VmHWM"); }
