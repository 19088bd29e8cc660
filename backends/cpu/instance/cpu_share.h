/* cpu_share.h - how work and memory are cut among the threads: scratch
 * regions on whole cache lines, and each thread's share of n items. */
#ifndef LOOM_CPU_SHARE_H
#define LOOM_CPU_SHARE_H

#include <stddef.h>
#include <stdint.h>

/* Scratch regions start on cache lines so threads do not share one. */
#define CPU_ALIGN 64

static inline size_t cpu_align_up(size_t n)
{
	return (n + CPU_ALIGN - 1) & ~(size_t)(CPU_ALIGN - 1);
}

/* [*lo, *hi): the share of n items that thread ith of nth works on. */
static inline void cpu_split(int64_t n, int ith, int nth, int64_t *lo, int64_t *hi)
{
	int64_t per = (n + nth - 1) / nth;
	*lo = per * ith < n ? per * ith : n;
	*hi = *lo + per < n ? *lo + per : n;
}

#endif
