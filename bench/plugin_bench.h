/*
 * plugin_bench.h - what the single-op benchmarks share: loading one backend
 * plugin through its ABI (as the core does), host callbacks that print to
 * stderr, tensors over plain memory, and timing.
 */
#ifndef LOOM_BENCH_PLUGIN_BENCH_H
#define LOOM_BENCH_PLUGIN_BENCH_H

#include "loom/plugin_api.h"

#include <stdint.h>

typedef struct bench_backend {
	const loom_backend_vtable *vt;
	void *be;
} bench_backend;

/* Opens the backend plugin at path with n_threads; 0, or 1 after printing
 * why not. */
int bench_open_backend(const char *path, int n_threads, bench_backend *out);

/* A contiguous {ne0, ne1, ne2} tensor of type over data. */
void bench_tensor(loom_tensor *t, loom_dtype type, int64_t ne0, int64_t ne1, int64_t ne2, void *data);

/* The dtype called name ("q8_0"), or LOOM_DTYPE_COUNT. */
loom_dtype bench_dtype_named(const char *name);

/* A standard normal value from seed s. */
float bench_rand_normal(unsigned *s);

double bench_now_s(void);

/* Sorts the n times and returns their median (times[0] is then the best). */
double bench_sort_times(double *times, int n);

#endif
