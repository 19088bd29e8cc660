/*
 * cpu_barrier.h - the barrier a graph's threads meet at between nodes: a
 * counter and a phase, spun on.
 *
 * A decode step of a small model meets a barrier every few microseconds,
 * hundreds of times. libgomp's barrier ends each one with a futex wake, a
 * system call whether or not anyone sleeps, which costs as much as the
 * work between barriers in a virtual machine. Here the last thread to
 * arrive only advances the phase. A waiter that spins long (more threads
 * than free cores) yields its core between looks.
 */
#ifndef LOOM_CPU_BARRIER_H
#define LOOM_CPU_BARRIER_H

#include <stdatomic.h>

typedef struct cpu_barrier {
	atomic_int arrived; /* threads at the barrier of the current phase */
	atomic_int phase;   /* barriers completed */
	int n_threads;
} cpu_barrier;

void cpu_barrier_init(cpu_barrier *b, int n_threads);

/* Returns once all n_threads have called it for this phase. Every write a
 * thread made before it is visible to every thread after it. */
void cpu_barrier_wait(cpu_barrier *b);

#endif
