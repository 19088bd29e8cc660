/* host_memory.h - what Linux says about memory: the machine's available
 * memory and this process's resident set. */
#ifndef LOOM_HOST_MEMORY_H
#define LOOM_HOST_MEMORY_H

#include <stdbool.h>
#include <stdint.h>

/* MemAvailable of /proc/meminfo, in bytes: what can be allocated without
 * swapping; 0 where the system does not say. */
uint64_t loom_host_memory_available(void);

/* The process's resident memory in MiB, total and the part that is file
 * pages (a mapped model used in place); false where the system does not
 * say. */
bool loom_process_resident(double *total_mib, double *file_mib);

#endif
