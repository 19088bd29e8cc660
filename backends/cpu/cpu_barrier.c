/* cpu_barrier.c - the spinning barrier of a graph's threads (cpu_barrier.h). */
#include "cpu_barrier.h"

#include <sched.h>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define cpu_relax() _mm_pause()
#else
#define cpu_relax() ((void)0)
#endif

/* Looks at the phase before a waiter starts yielding its core: some tens
 * of microseconds, longer than the gap between barriers of a decode. */
#define SPINS_BEFORE_YIELD (1 << 14)

void cpu_barrier_init(cpu_barrier *b, int n_threads)
{
	atomic_init(&b->arrived, 0);
	atomic_init(&b->phase, 0);
	b->n_threads = n_threads;
}

void cpu_barrier_wait(cpu_barrier *b)
{
	int phase = atomic_load_explicit(&b->phase, memory_order_relaxed);

	if (b->n_threads == 1)
		return;
	/* acq_rel: the last arrival acquires every earlier arrival's writes
	 * through the counter, then releases them all with the phase. */
	if (atomic_fetch_add_explicit(&b->arrived, 1, memory_order_acq_rel) == b->n_threads - 1) {
		atomic_store_explicit(&b->arrived, 0, memory_order_relaxed);
		atomic_store_explicit(&b->phase, phase + 1, memory_order_release);
		return;
	}
	for (unsigned spins = 0; atomic_load_explicit(&b->phase, memory_order_acquire) == phase; spins++) {
		if (spins < SPINS_BEFORE_YIELD)
			cpu_relax();
		else
			sched_yield();
	}
}
