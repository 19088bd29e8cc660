/*
 * sampler_llamacpp.c - bench/sampler.c's measurement made with llama.cpp's
 * sampler chain (llama_sampler_*), on the same logits and modes
 * (sampler_logits.h): each token fills a llama_token_data array from the
 * logits and applies the chain, as llama_sampler_sample does. Built
 * against the reference llama.cpp by sampler_table.sh, not by CMake.
 *
 *   sampler-llamacpp [-r DRAWS] [VOCAB...]
 */
#include "sampler_logits.h"

#include <llama.h>
#include <stdio.h>

/* llama.cpp's chain for a mode, in the order of its common sampler
 * (top-k, top-p, min-p, temperature, then the draw). */
static struct llama_sampler *make_chain(const sampler_mode *m)
{
	struct llama_sampler *c = llama_sampler_chain_init(llama_sampler_chain_default_params());
	if (m->temperature <= 0) {
		llama_sampler_chain_add(c, llama_sampler_init_greedy());
		return c;
	}
	if (m->top_k > 0)
		llama_sampler_chain_add(c, llama_sampler_init_top_k(m->top_k));
	if (m->top_p < 1)
		llama_sampler_chain_add(c, llama_sampler_init_top_p(m->top_p, 1));
	if (m->min_p > 0)
		llama_sampler_chain_add(c, llama_sampler_init_min_p(m->min_p, 1));
	llama_sampler_chain_add(c, llama_sampler_init_temp(m->temperature));
	llama_sampler_chain_add(c, llama_sampler_init_dist(42));
	return c;
}

static llama_token sample(struct llama_sampler *chain, const float *logits, llama_token_data *cur, int32_t n)
{
	for (int32_t i = 0; i < n; i++)
		cur[i] = (llama_token_data){i, logits[i], 0.0f};
	llama_token_data_array arr = {cur, (size_t)n, -1, false};
	llama_sampler_apply(chain, &arr);
	llama_token t = arr.data[arr.selected].id;
	llama_sampler_accept(chain, t);
	return t;
}

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
		llama_token_data *cur = malloc((size_t)sizes[v] * sizeof(llama_token_data));
		if (logits == NULL || cur == NULL)
			return 1;
		bench_logits(logits, sizes[v], 1);
		for (size_t m = 0; m < SAMPLER_N_MODES; m++) {
			struct llama_sampler *chain = make_chain(&SAMPLER_MODES[m]);
			for (int i = 0; i < draws / 10 + 1; i++)
				sample(chain, logits, cur, sizes[v]);
			double t0 = bench_now_ms();
			for (int i = 0; i < draws; i++)
				sample(chain, logits, cur, sizes[v]);
			printf("llama.cpp\t%d\t%s\t%.4f\n", sizes[v], SAMPLER_MODES[m].name, (bench_now_ms() - t0) / draws);
			fflush(stdout);
			llama_sampler_free(chain);
		}
		free(logits);
		free(cur);
	}
	return 0;
}
