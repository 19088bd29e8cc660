/* c_reference.c - what the C API computes, for the Python binding's tests
 * to compare with: a prompt's greedy continuation by loom_generate (its
 * token ids, stopping at an end-of-generation token) and the prompt's
 * embedding by loom_embed, on a runtime of n_threads. A host of loom.h
 * alone, as any C program would be.
 *
 *     c_reference MODEL PROMPT N_PREDICT N_THREADS
 *
 * prints "greedy ID ID ..." and "embedding X X ..." (floats to 9
 * significant digits: float32 read back exactly). */
#include <loom.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static bool print_token(void *user, loom_token token, const char *text, size_t len)
{
	(void)user;
	(void)text;
	(void)len;
	printf(" %d", token);
	return true;
}

static int fail(const char *what, loom_status st)
{
	fprintf(stderr, "c_reference: %s: %s (%s)\n", what, loom_last_error(), loom_strerror(st));
	return 1;
}

int main(int argc, char **argv)
{
	if (argc != 5) {
		fprintf(stderr, "usage: c_reference MODEL PROMPT N_PREDICT N_THREADS\n");
		return 2;
	}
	loom_runtime *rt = NULL;
	loom_model *model = NULL;
	loom_context *ctx = NULL;
	float *embedding = NULL;
	int rc = 1;
	loom_status st;

	loom_runtime_params rp = loom_runtime_default_params();
	rp.n_threads = atoi(argv[4]);
	if ((st = loom_runtime_create(&rp, &rt)) != LOOM_OK)
		return fail("runtime", st);
	if ((st = loom_model_load(rt, argv[1], NULL, &model)) != LOOM_OK) {
		rc = fail("load", st);
		goto out;
	}
	loom_context_params cp = loom_context_default_params();
	cp.n_ctx = 256;
	if ((st = loom_context_create(model, &cp, &ctx)) != LOOM_OK) {
		rc = fail("context", st);
		goto out;
	}
	loom_sampler_params greedy = loom_sampler_default_params();
	greedy.temperature = 0;
	loom_generate_params gp = loom_generate_default_params();
	gp.n_predict = atoi(argv[3]);
	gp.sampling = &greedy;
	printf("greedy");
	if ((st = loom_generate(ctx, argv[2], &gp, print_token, NULL, NULL)) != LOOM_OK) {
		rc = fail("generate", st);
		goto out;
	}
	printf("\n");

	loom_token tokens[256];
	size_t n = 0;
	const size_t n_embd = (size_t)loom_model_n_embd(model);
	if ((embedding = malloc(n_embd * sizeof(float))) == NULL) {
		rc = fail("embedding", LOOM_ERR_NO_MEMORY);
		goto out;
	}
	if ((st = loom_tokenize(model, argv[2], strlen(argv[2]), true, false, tokens, 256, &n)) != LOOM_OK ||
	    (st = loom_embed(ctx, 0, tokens, n, embedding, n_embd)) != LOOM_OK) {
		rc = fail("embed", st);
		goto out;
	}
	printf("embedding");
	for (size_t i = 0; i < n_embd; i++)
		printf(" %.9g", embedding[i]);
	printf("\n");
	rc = 0;
out:
	free(embedding);
	loom_context_free(ctx);
	loom_model_free(model);
	loom_runtime_free(rt);
	return rc;
}
