/*
 * sysmem.h — host memory as the OS reports it (Linux /proc), for memory
 * plans that must refuse before allocating (docs/loading.md) and for the
 * peak-RSS figure of a load.
 */
#ifndef DI_UTIL_SYSMEM_H
#define DI_UTIL_SYSMEM_H

#include <stdint.h>

/* MemAvailable of /proc/meminfo in bytes (what can be allocated without
 * swapping, page cache included); 0 when unknown. */
uint64_t di_sys_mem_available(void);

/* This process's resident set now (VmRSS) and its peak (VmHWM) from
 * /proc/self/status, in bytes; 0 when unknown. */
uint64_t di_proc_rss(void);
uint64_t di_proc_peak_rss(void);

#endif
