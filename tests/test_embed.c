/* test_embed.c - loom_embed on a real model (stories260K): a unit vector,
 * the same whatever the batch size, the same twice and different for
 * another text, and no trace in the other sequences of the cache. */
#include "check_main.h"
#include "fixture.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define MODEL "stories260K-f32.gguf"

static size_t tokens_of(const loom_model *m, const char *text, loom_token *out, size_t cap)
{
	size_t n = 0;
	ck_assert(loom_tokenize(m, text, strlen(text), true, false, out, cap, &n) == LOOM_OK);
	return n;
}

static double dot(const float *a, const float *b, size_t n)
{
	double s = 0;
	for (size_t i = 0; i < n; i++)
		s += (double)a[i] * b[i];
	return s;
}

/* stories260K on cpu-generic; NULL (after SKIP, the runtime freed)
 * without the reference data. */
static loom_model *open_model(loom_runtime **rt)
{
	*rt = test_runtime("cpu-generic", 1);
	loom_model *m = test_model(*rt, MODEL);
	if (m == NULL)
		loom_runtime_free(*rt);
	return m;
}

START_TEST(embeddings_are_unit_vectors_of_the_text)
{
	loom_runtime *rt;
	loom_model *m = open_model(&rt);
	if (m == NULL)
		return;
	const size_t d = (size_t)loom_model_n_embd(m);
	loom_token toks[64], other[64];
	size_t n = tokens_of(m, "Once upon a time there was a little dog", toks, 64);
	size_t n_other = tokens_of(m, "The sun was hot and the girl was sad", other, 64);
	float *e = malloc(d * sizeof(float)), *again = malloc(d * sizeof(float)), *pieces = malloc(d * sizeof(float));
	float *e_other = malloc(d * sizeof(float));

	loom_context *ctx = test_context(m, 128, 512, LOOM_DTYPE_F32);
	ck_assert_msg(loom_embed(ctx, 0, toks, n, e, d) == LOOM_OK, "%s", loom_last_error());
	for (size_t i = 0; i < d; i++)
		ck_assert_msg(isfinite(e[i]), "dimension %zu is %g", i, e[i]);
	ck_assert_msg(fabs(dot(e, e, d) - 1.0) < 1e-5, "|e|^2 = %.8f", dot(e, e, d));
	ck_assert(loom_embed(ctx, 0, toks, n, again, d) == LOOM_OK);
	ck_assert(memcmp(e, again, d * sizeof(float)) == 0);
	ck_assert(loom_embed(ctx, 0, other, n_other, e_other, d) == LOOM_OK);
	ck_assert_msg(dot(e, e_other, d) < 0.9999, "two texts, cosine %.6f", dot(e, e_other, d));
	ck_assert_uint_eq(loom_kv_used(ctx), 0);
	loom_context_free(ctx);

	/* Causal attention: three tokens a step give what one step gives. */
	ctx = test_context(m, 128, 3, LOOM_DTYPE_F32);
	ck_assert(loom_embed(ctx, 0, toks, n, pieces, d) == LOOM_OK);
	ck_assert_msg(dot(e, pieces, d) > 1 - 1e-6, "in pieces of 3: cosine %.8f", dot(e, pieces, d));
	loom_context_free(ctx);

	free(e);
	free(again);
	free(pieces);
	free(e_other);
	loom_model_free(m);
	loom_runtime_free(rt);
}
END_TEST

/* Embedding as sequence 1 between two steps of sequence 0 changes nothing
 * that sequence 0 computes. */
START_TEST(other_sequences_are_left_alone)
{
	loom_runtime *rt;
	loom_model *m = open_model(&rt);
	if (m == NULL)
		return;
	const size_t d = (size_t)loom_model_n_embd(m);
	const int32_t n_vocab = loom_model_n_vocab(m);
	loom_token toks[64], next = 42;
	size_t n = tokens_of(m, "Once upon a time", toks, 64);
	float *e = malloc(d * sizeof(float)), *want = malloc((size_t)n_vocab * sizeof(float));
	loom_batch prompt = {.n_tokens = (int32_t)n, .tokens = toks}, step = {.n_tokens = 1, .tokens = &next};

	loom_context *ctx = test_context(m, 128, 512, LOOM_DTYPE_F32);
	ck_assert(loom_decode(ctx, &prompt) == LOOM_OK && loom_decode(ctx, &step) == LOOM_OK);
	memcpy(want, loom_get_logits(ctx, 0), (size_t)n_vocab * sizeof(float));
	loom_context_free(ctx);

	ctx = test_context(m, 128, 512, LOOM_DTYPE_F32);
	ck_assert(loom_decode(ctx, &prompt) == LOOM_OK);
	ck_assert(loom_embed(ctx, 1, toks, n, e, d) == LOOM_OK);
	ck_assert_uint_eq(loom_kv_used(ctx), n);
	ck_assert_ptr_null(loom_get_logits(ctx, 0));
	ck_assert(loom_decode(ctx, &step) == LOOM_OK);
	ck_assert(memcmp(want, loom_get_logits(ctx, 0), (size_t)n_vocab * sizeof(float)) == 0);
	loom_context_free(ctx);
	free(e);
	free(want);
	loom_model_free(m);
	loom_runtime_free(rt);
}
END_TEST

START_TEST(bad_arguments_are_refused)
{
	loom_runtime *rt;
	loom_model *m = open_model(&rt);
	if (m == NULL)
		return;
	const size_t d = (size_t)loom_model_n_embd(m);
	loom_token toks[200] = {1};
	float e[1024];
	loom_context *ctx = test_context(m, 128, 512, LOOM_DTYPE_F32);
	ck_assert_int_eq(loom_embed(ctx, 0, toks, 1, e, d + 1), LOOM_ERR_INVALID_ARGUMENT);
	ck_assert_msg(strstr(loom_last_error(), "dimensions") != NULL, "%s", loom_last_error());
	ck_assert_int_eq(loom_embed(ctx, 0, toks, 0, e, d), LOOM_ERR_INVALID_ARGUMENT);
	ck_assert_int_eq(loom_embed(ctx, -1, toks, 1, e, d), LOOM_ERR_INVALID_ARGUMENT);
	ck_assert_int_eq(loom_embed(NULL, 0, toks, 1, e, d), LOOM_ERR_INVALID_ARGUMENT);
	ck_assert_int_eq(loom_embed(ctx, 0, toks, 200, e, d), LOOM_ERR_CONTEXT_FULL);
	loom_context_free(ctx);
	loom_model_free(m);
	loom_runtime_free(rt);
}
END_TEST

static Suite *embed_suite(void)
{
	Suite *s = suite_create("embed");
	TCase *tc = tcase_create("embed");
	tcase_add_test(tc, embeddings_are_unit_vectors_of_the_text);
	tcase_add_test(tc, other_sequences_are_left_alone);
	tcase_add_test(tc, bad_arguments_are_refused);
	suite_add_tcase(s, tc);
	return s;
}

LOOM_TEST_MAIN(embed_suite)
