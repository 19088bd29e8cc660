/* sampler_logits.h - the logits both sampler benchmarks draw from
 * (sampler.c for loom, sampler_llamacpp.c for llama.cpp), made the same way
 * by each: N(0, SIGMA^2) from a fixed xorshift stream, which keeps a long
 * flat tail as a model's logits do and makes top-p's nucleus wide (the
 * hard case for a sampler that does not sort), and the sampling modes
 * they time. */
#ifndef LOOM_BENCH_SAMPLER_LOGITS_H
#define LOOM_BENCH_SAMPLER_LOGITS_H

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define SAMPLER_SIGMA 2.0

static inline double bench_uniform(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return ((double)(*s >> 11) + 0.5) * 0x1.0p-53;
}

static inline void bench_logits(float *x, int32_t n, uint64_t seed)
{
	uint64_t s = seed * 0x9e3779b97f4a7c15ull + 1;
	for (int32_t i = 0; i < n; i += 2) {
		double r = sqrt(-2 * log(bench_uniform(&s))), a = 6.283185307179586 * bench_uniform(&s);
		x[i] = (float)(SAMPLER_SIGMA * r * cos(a));
		if (i + 1 < n)
			x[i + 1] = (float)(SAMPLER_SIGMA * r * sin(a));
	}
}

/* A sampling mode: the knobs both samplers are given (0 / 1 = off). */
typedef struct sampler_mode {
	const char *name;
	float temperature;
	int32_t top_k;
	float top_p, min_p;
} sampler_mode;

static const sampler_mode SAMPLER_MODES[] = {
	{"greedy", 0.0f, 0, 1.0f, 0.0f},
	{"temp 1", 1.0f, 0, 1.0f, 0.0f},
	{"top-k 40", 1.0f, 40, 1.0f, 0.0f},
	{"top-p 0.95", 1.0f, 0, 0.95f, 0.0f},
	{"min-p 0.05", 1.0f, 0, 1.0f, 0.05f},
	/* loom run's and llama-server's defaults */
	{"temp 0.8 top-k 40 top-p 0.95 min-p 0.05", 0.8f, 40, 0.95f, 0.05f},
};
#define SAMPLER_N_MODES (sizeof(SAMPLER_MODES) / sizeof(SAMPLER_MODES[0]))

/* [-r DRAWS] [VOCAB...] into *draws and sizes (at most 16; default
 * 32000, 151936 and 262144); false on anything else. */
static inline int bench_sampler_args(int argc, char **argv, int *draws, int32_t *sizes, int *n_sizes)
{
	*n_sizes = 0;
	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "-r") == 0 && i + 1 < argc && atoi(argv[i + 1]) > 0)
			*draws = atoi(argv[++i]);
		else if (*n_sizes < 16 && atoi(argv[i]) > 0)
			sizes[(*n_sizes)++] = atoi(argv[i]);
		else
			return 0;
	}
	if (*n_sizes == 0) {
		sizes[(*n_sizes)++] = 32000;
		sizes[(*n_sizes)++] = 151936;
		sizes[(*n_sizes)++] = 262144;
	}
	return 1;
}

static inline double bench_now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

#endif
