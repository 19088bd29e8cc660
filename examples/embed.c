/* embed.c - a host program that embeds loom through loom.h alone: load a
 * model, tokenize, evaluate, read logits, sample, then generate with a
 * per-token callback. Usage: embed MODEL.gguf [PROMPT] */
#include <loom.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static bool on_token(void *user, loom_token token, const char *text, size_t len)
{
	int *count = user;
	(void)token;
	fwrite(text, 1, len, stdout);
	return ++*count < 1000;
}

static int fail(const char *what, loom_status st)
{
	fprintf(stderr, "embed: %s: %s (%s)\n", what, loom_last_error(), loom_strerror(st));
	return 1;
}

int main(int argc, char **argv)
{
	loom_runtime *rt = NULL;
	loom_model *model = NULL;
	loom_context *ctx = NULL;
	loom_sampler *sampler = NULL;
	const char *prompt = argc > 2 ? argv[2] : "Once upon a time";
	loom_status st;
	int rc = 1;

	if (argc < 2) {
		fprintf(stderr, "usage: embed MODEL.gguf [PROMPT]\n");
		return 1;
	}
	if ((st = loom_runtime_create(NULL, &rt)) != LOOM_OK)
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

	/* By hand: tokenize, evaluate the prompt, pick the most likely next token. */
	loom_token toks[256];
	size_t n = 0;
	if ((st = loom_tokenize(model, prompt, strlen(prompt), true, false, toks, 256, &n)) != LOOM_OK) {
		rc = fail("tokenize", st);
		goto out;
	}
	loom_batch batch = {.n_tokens = (int32_t)n, .tokens = toks};
	if ((st = loom_decode(ctx, &batch)) != LOOM_OK) {
		rc = fail("decode", st);
		goto out;
	}
	loom_sampler_params sp = loom_sampler_default_params();
	sp.temperature = 0;
	if ((st = loom_sampler_create(&sp, &sampler)) != LOOM_OK) {
		rc = fail("sampler", st);
		goto out;
	}
	loom_token next = loom_sampler_sample(sampler, loom_get_logits(ctx, (int32_t)n - 1), loom_model_n_vocab(model));
	char piece[64];
	size_t len = 0;
	loom_token_to_piece(model, next, false, piece, sizeof(piece), &len);
	printf("prompt tokens: %zu, next token: %d \"%.*s\"\n", n, next, (int)len, piece);

	/* The same through the generation loop, greedy, 24 tokens. */
	loom_generate_params gp = loom_generate_default_params();
	gp.n_predict = 24;
	gp.sampling = &sp; /* greedy, as above */
	int count = 0;
	loom_generate_stats stats;
	printf("%s", prompt);
	if ((st = loom_generate(ctx, prompt, &gp, on_token, &count, &stats)) != LOOM_OK) {
		rc = fail("generate", st);
		goto out;
	}
	printf("\ngenerated %d tokens\n", stats.n_generated);
	rc = 0;
out:
	loom_sampler_free(sampler);
	loom_context_free(ctx);
	loom_model_free(model);
	loom_runtime_free(rt);
	return rc;
}
