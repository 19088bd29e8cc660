/* cpu_barrier.c - the barrier of a graph's threads (cpu_barrier.h). */
#include "cpu_barrier.h"

#include <limits.h>
#include <linux/futex.h>
#include <stdlib.h>
#include <strings.h>
#include <sys/syscall.h>
#include <unistd.h>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define cpu_relax() _mm_pause()
#else
#define cpu_relax() ((void)0)
#endif

/* Unset: a few hundred microseconds (a pause is 40-140 cycles), far
 * longer than a decode's barriers are apart, so that a step's threads
 * never sleep; fewer made them sleep now and then, and a sleeper's wake-up
 * costs more than the spinning. active: tens of milliseconds. */
#define SPINS_DEFAULT (1u << 15)
#define SPINS_ACTIVE (1u << 20)

unsigned cpu_barrier_spins(void)
{
	const char *policy = getenv("OMP_WAIT_POLICY");

	if (policy != NULL && strcasecmp(policy, "passive") == 0)
		return 0;
	if (policy != NULL && strcasecmp(policy, "active") == 0)
		return SPINS_ACTIVE;
	return SPINS_DEFAULT;
}

void cpu_barrier_init(cpu_barrier *b, int n_threads, unsigned spins)
{
	atomic_init(&b->arrived, 0);
	atomic_init(&b->phase, 0);
	atomic_init(&b->sleepers, 0);
	b->n_threads = n_threads;
	b->spins = spins;
}

/* atomic_int is an int to the kernel. */
static void futex_wait(atomic_int *word, int expected)
{
	syscall(SYS_futex, (int *)word, FUTEX_WAIT_PRIVATE, expected, NULL, NULL, 0);
}

static void futex_wake_all(atomic_int *word)
{
	syscall(SYS_futex, (int *)word, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0);
}

void cpu_barrier_wait_fetching(cpu_barrier *b, cpu_fetch *f)
{
	int phase = atomic_load_explicit(&b->phase, memory_order_relaxed);

	if (b->n_threads == 1)
		return;
	/* acq_rel: the last arrival acquires every earlier arrival's writes
	 * through the counter, then releases them all with the phase. */
	if (atomic_fetch_add_explicit(&b->arrived, 1, memory_order_acq_rel) == b->n_threads - 1) {
		atomic_store_explicit(&b->arrived, 0, memory_order_relaxed);
		/* seq_cst with the waiters' count below: either this sees a
		 * sleeper, or the sleeper sees the new phase and never sleeps. */
		atomic_store_explicit(&b->phase, (int)((unsigned)phase + 1u), memory_order_seq_cst);
		if (atomic_load_explicit(&b->sleepers, memory_order_seq_cst) > 0)
			futex_wake_all(&b->phase);
		return;
	}
	for (unsigned i = 0; i < b->spins; i++) {
		if (atomic_load_explicit(&b->phase, memory_order_acquire) != phase)
			return;
		if (f != NULL && f->left > 0) {
			/* A few lines per look: requests, not waits. */
			for (int l = 0; l < 8 && f->left > 0; l++) {
				__builtin_prefetch(f->next, 0, 2);
				f->next += 64;
				f->left = f->left > 64 ? f->left - 64 : 0;
			}
			continue;
		}
		cpu_relax();
	}
	atomic_fetch_add_explicit(&b->sleepers, 1, memory_order_seq_cst);
	/* The kernel sleeps only while the phase is still the old one. */
	while (atomic_load_explicit(&b->phase, memory_order_seq_cst) == phase)
		futex_wait(&b->phase, phase);
	atomic_fetch_sub_explicit(&b->sleepers, 1, memory_order_relaxed);
}

void cpu_barrier_wait(cpu_barrier *b)
{
	cpu_barrier_wait_fetching(b, NULL);
}
