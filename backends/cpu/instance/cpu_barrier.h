/*
 * cpu_barrier.h - the barrier a graph's threads meet at between nodes: a
 * counter and a phase, spun on for a while, then slept on.
 *
 * A decode step of a small model meets a barrier every few microseconds,
 * hundreds of times. libgomp's barrier ends each one with a futex wake, a
 * system call whether or not anyone sleeps, which costs as much as the
 * work between barriers in a virtual machine. Here the last thread to
 * arrive advances the phase and calls the kernel only if a waiter went to
 * sleep. How long a waiter spins first follows OMP_WAIT_POLICY, as
 * libgomp's own waits do: passive sleeps at once (more threads than free
 * cores, as when tests run side by side), active spins long.
 */
#ifndef LOOM_CPU_BARRIER_H
#define LOOM_CPU_BARRIER_H

#include <stdatomic.h>
#include <stddef.h>

typedef struct cpu_barrier {
	atomic_int arrived;  /* threads at the barrier of the current phase */
	atomic_int phase;    /* barriers completed (wrapping) */
	atomic_int sleepers; /* waiters in the kernel, or about to be */
	int n_threads;
	unsigned spins; /* looks at the phase before a waiter sleeps */
} cpu_barrier;

/* The spins for this process's OMP_WAIT_POLICY. */
unsigned cpu_barrier_spins(void);

void cpu_barrier_init(cpu_barrier *b, int n_threads, unsigned spins);

/* Returns once all n_threads have called it for this phase. Every write a
 * thread made before it is visible to every thread after it. */
void cpu_barrier_wait(cpu_barrier *b);

/* Bytes a thread asks the memory for while it waits. */
typedef struct cpu_fetch {
	const char *next;
	size_t left;
} cpu_fetch;

/* cpu_barrier_wait, spent asking for the lines of *f (advanced past those
 * asked for) rather than idle while any are left: a decode's next matmul
 * finds them in this core's cache instead of waiting on the memory. */
void cpu_barrier_wait_fetching(cpu_barrier *b, cpu_fetch *f);

#endif
