/* clock.c - see clock.h. */
#include "runtime/clock.h"

#include <time.h>

double loom_now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}
