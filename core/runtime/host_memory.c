/* host_memory.c - the machine's available memory and the process's
 * resident set, read from /proc. */
#include "runtime/host_memory.h"

#include <stdio.h>

uint64_t loom_host_memory_available(void)
{
	FILE *f = fopen("/proc/meminfo", "r");
	char line[256];
	unsigned long long kb = 0;
	if (f == NULL)
		return 0;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "MemAvailable: %llu kB", &kb) == 1)
			break;
	fclose(f);
	return (uint64_t)kb * 1024;
}

bool loom_process_resident(double *total_mib, double *file_mib)
{
	FILE *f = fopen("/proc/self/status", "r");
	char line[256];
	long kb;
	int found = 0;
	if (f == NULL)
		return false;
	while (fgets(line, sizeof(line), f)) {
		if (sscanf(line, "VmRSS: %ld kB", &kb) == 1)
			*total_mib = kb / 1024.0, found++;
		else if (sscanf(line, "RssFile: %ld kB", &kb) == 1)
			*file_mib = kb / 1024.0, found++;
	}
	fclose(f);
	return found == 2;
}
