/*
 * llama_reference.c - what llama.cpp computes on a model file, written as
 * a reference file the loom tests read (tests/reference/README.md).
 *
 *     llama_reference MODEL.gguf NAME OUT.ref ID...
 *
 * Runs the prompt (the token ids given) as one batch with an F32 KV cache
 * on one thread, records the logits at a few prompt positions, then
 * decodes GREEDY_STEPS greedy tokens one at a time, recording each
 * id, its logit and its lead over the runner-up. Built against llama.h by
 * make_references.sh; not part of loom's build.
 */
#include "llama.h"

#include <stdio.h>
#include <stdlib.h>

#define GREEDY_STEPS 12
#define MAX_PROMPT 256

static int argmax(const float *x, int n, float *gap)
{
	int best = 0, second = -1;
	for (int i = 1; i < n; i++) {
		if (x[i] > x[best]) {
			second = best;
			best = i;
		} else if (second < 0 || x[i] > x[second]) {
			second = i;
		}
	}
	*gap = second >= 0 ? x[best] - x[second] : 0.0f;
	return best;
}

/* The prompt positions whose logits are recorded: every fifth and the last. */
static int recorded(int p, int n)
{
	return p % 5 == 4 || p == 0 || p == n - 1;
}

int main(int argc, char **argv)
{
	if (argc < 5 || argc - 4 > MAX_PROMPT) {
		fprintf(stderr, "usage: %s MODEL.gguf NAME OUT.ref ID...\n", argv[0]);
		return 2;
	}
	int n = argc - 4;
	llama_token prompt[MAX_PROMPT];
	for (int i = 0; i < n; i++)
		prompt[i] = atoi(argv[4 + i]);

	llama_backend_init();
	struct llama_model_params mp = llama_model_default_params();
	struct llama_model *model = llama_model_load_from_file(argv[1], mp);
	if (model == NULL) {
		fprintf(stderr, "%s: llama.cpp cannot load it\n", argv[1]);
		return 1;
	}
	struct llama_context_params cp = llama_context_default_params();
	cp.n_ctx = 128;
	cp.n_batch = 128;
	cp.n_ubatch = 128;
	cp.n_threads = 1;
	cp.n_threads_batch = 1;
	cp.type_k = GGML_TYPE_F32;
	cp.type_v = GGML_TYPE_F32;
	struct llama_context *ctx = llama_init_from_model(model, cp);
	const int n_vocab = llama_vocab_n_tokens(llama_model_get_vocab(model));
	FILE *out = fopen(argv[3], "w");
	if (ctx == NULL || out == NULL) {
		fprintf(stderr, "cannot make a context or write %s\n", argv[3]);
		return 1;
	}

	struct llama_batch batch = llama_batch_init(MAX_PROMPT, 0, 1);
	for (int i = 0; i < n; i++) {
		batch.token[i] = prompt[i];
		batch.pos[i] = i;
		batch.n_seq_id[i] = 1;
		batch.seq_id[i][0] = 0;
		batch.logits[i] = 1;
	}
	batch.n_tokens = n;
	if (llama_decode(ctx, batch) != 0) {
		fprintf(stderr, "the prompt failed\n");
		return 1;
	}
	fprintf(out, "# %s: llama.cpp's logits and greedy continuation (tests/reference/llama_reference.c)\n",
		argv[2]);
	fprintf(out, "n_vocab %d\nprompt %d", n_vocab, n);
	for (int i = 0; i < n; i++)
		fprintf(out, " %d", prompt[i]);
	fprintf(out, "\n");
	for (int p = 0; p < n; p++) {
		if (!recorded(p, n))
			continue;
		const float *logits = llama_get_logits_ith(ctx, p);
		fprintf(out, "logits %d", p);
		for (int v = 0; v < n_vocab; v++)
			fprintf(out, " %.9g", logits[v]);
		fprintf(out, "\n");
	}
	float gap;
	int next = argmax(llama_get_logits_ith(ctx, n - 1), n_vocab, &gap);
	for (int step = 0; step < GREEDY_STEPS; step++) {
		const float *last = step == 0 ? llama_get_logits_ith(ctx, n - 1) : llama_get_logits_ith(ctx, 0);
		fprintf(out, "greedy %d %d %.9g %.9g\n", step, next, last[next], gap);
		batch.token[0] = next;
		batch.pos[0] = n + step;
		batch.n_seq_id[0] = 1;
		batch.seq_id[0][0] = 0;
		batch.logits[0] = 1;
		batch.n_tokens = 1;
		if (llama_decode(ctx, batch) != 0) {
			fprintf(stderr, "greedy step %d failed\n", step);
			return 1;
		}
		next = argmax(llama_get_logits_ith(ctx, 0), n_vocab, &gap);
	}
	fclose(out);
	llama_batch_free(batch);
	llama_free(ctx);
	llama_model_free(model);
	llama_backend_free();
	return 0;
}
