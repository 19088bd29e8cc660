/*
 * sampler.c - the cost of loom_sampler_sample per token, per mode and
 * vocabulary size:
 *
 *   loom-bench-sampler [-r DRAWS] [VOCAB...]     (default 32000 151936 262144)
 *
 * Each mode of sampler_logits.h samples DRAWS tokens from one row of random
 * logits (after a tenth as many to warm up); the line says the mean time of
 * a token. sampler_table.sh runs it beside llama.cpp's chain on the same
 * logits.
 */
#include "sampler_logits.h"

#include <loom.h>
#include <stdio.h>

int main(int argc, char **argv)
{
	int draws = 2000, n_sizes = 0;
	int32_t sizes[16];
	if (!bench_sampler_args(argc, argv, &draws, sizes, &n_sizes)) {
		fprintf(stderr, "usage: %s [-r DRAWS] [VOCAB...]\n", argv[0]);
		return 2;
	}
	for (int v = 0; v < n_sizes; v++) {
		float *logits = malloc((size_t)sizes[v] * sizeof(float));
		if (logits == NULL)
			return 1;
		bench_logits(logits, sizes[v], 1);
		for (size_t m = 0; m < SAMPLER_N_MODES; m++) {
			const sampler_mode *md = &SAMPLER_MODES[m];
			loom_sampler_params p = loom_sampler_default_params();
			p.temperature = md->temperature;
			p.top_k = md->top_k;
			p.top_p = md->top_p;
			p.min_p = md->min_p;
			p.seed = 42;
			loom_sampler *s = NULL;
			if (loom_sampler_create(&p, &s) != LOOM_OK) {
				fprintf(stderr, "%s\n", loom_last_error());
				return 1;
			}
			for (int i = 0; i < draws / 10 + 1; i++)
				loom_sampler_sample(s, logits, sizes[v]);
			double t0 = bench_now_ms();
			for (int i = 0; i < draws; i++)
				if (loom_sampler_sample(s, logits, sizes[v]) < 0) {
					fprintf(stderr, "%s\n", loom_last_error());
					return 1;
				}
			printf("loom\t%d\t%s\t%.4f\n", sizes[v], md->name, (bench_now_ms() - t0) / draws);
			fflush(stdout);
			loom_sampler_free(s);
		}
		free(logits);
	}
	return 0;
}
