/* test_generator.c - the public token step (loom_generator) on a real
 * model: it is what loom_generate runs, token for token and byte for byte;
 * its log-probabilities are the logits' log-softmax and their best tokens;
 * it ends for the reason it should (length, the caller's last step, a stop
 * string, an end-of-generation token) and never samples one with
 * ignore_eos; it refuses what it cannot do. */
#include "check_main.h"

#include "fixture.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define MAX_TOKENS 256

typedef struct collected {
	loom_token tokens[MAX_TOKENS];
	int n;
	char text[4096];
	size_t len;
} collected;

static bool collect(void *user, loom_token token, const char *text, size_t len)
{
	collected *c = user;
	if (c->n < MAX_TOKENS)
		c->tokens[c->n++] = token;
	if (c->len + len < sizeof(c->text)) {
		memcpy(c->text + c->len, text, len);
		c->len += len;
	}
	return true;
}

typedef struct setup {
	loom_runtime *rt;
	loom_model *m;
	loom_context *ctx;
	loom_token prompt[32];
	size_t n_prompt;
} setup;

static bool open_model(setup *t)
{
	memset(t, 0, sizeof(*t));
	t->rt = test_runtime(NULL, 2);
	t->m = test_model(t->rt, "stories260K-f32.gguf");
	if (t->m == NULL) {
		loom_runtime_free(t->rt);
		return false;
	}
	t->ctx = test_context(t->m, 256, 64, LOOM_DTYPE_F32);
	ck_assert(loom_tokenize(t->m, "Once upon a time", 16, true, false, t->prompt, 32, &t->n_prompt) == LOOM_OK);
	return true;
}

static void close_model(setup *t)
{
	loom_context_free(t->ctx);
	loom_model_free(t->m);
	loom_runtime_free(t->rt);
}

/* The prompt evaluated afresh as sequence 0; its last token's logits. */
static const float *eval_prompt(setup *t)
{
	loom_kv_clear(t->ctx);
	loom_batch b = {.n_tokens = (int32_t)t->n_prompt, .tokens = t->prompt};
	ck_assert_msg(loom_decode(t->ctx, &b) == LOOM_OK, "%s", loom_last_error());
	return loom_get_logits(t->ctx, (int32_t)t->n_prompt - 1);
}

/* Steps g from the prompt until it is done (or max tokens), decoding each
 * token; every step's text goes into c. */
static loom_generated run(setup *t, loom_generator *g, int max, collected *c)
{
	const float *logits = eval_prompt(t);
	int32_t pos = (int32_t)t->n_prompt;
	loom_generated out = {0};
	for (int i = 0; i < max; i++) {
		ck_assert_msg(loom_generator_next(g, logits, false, &out) == LOOM_OK, "%s", loom_last_error());
		collect(c, out.token, out.text, out.len);
		if (out.done)
			break;
		loom_batch b = {.n_tokens = 1, .tokens = &out.token, .pos = &pos};
		ck_assert(loom_decode(t->ctx, &b) == LOOM_OK);
		pos++;
		logits = loom_get_logits(t->ctx, 0);
	}
	return out;
}

START_TEST(the_step_is_what_loom_generate_runs)
{
	setup t;
	if (!open_model(&t))
		return;
	const char *stop[] = {"zzz-never"};
	loom_sampler_params sp = loom_sampler_default_params();
	sp.seed = 1234;
	sp.repeat_penalty = 1.1f;
	loom_generate_params gp = loom_generate_default_params();
	gp.n_predict = 60;
	gp.sampling = &sp;
	gp.stop = stop;
	gp.n_stop = 1;
	collected want = {0}, got = {0};
	loom_generate_stats stats;
	ck_assert(loom_generate_tokens(t.ctx, t.prompt, t.n_prompt, &gp, collect, &want, &stats) == LOOM_OK);

	loom_generator_params p = loom_generator_default_params();
	p.sampling = gp.sampling;
	p.n_predict = gp.n_predict;
	p.stop = stop;
	p.n_stop = 1;
	loom_generator *g = NULL;
	ck_assert_msg(loom_generator_create(t.m, &p, &g) == LOOM_OK, "%s", loom_last_error());
	loom_generator_accept(g, t.prompt, t.n_prompt);
	loom_generated last = run(&t, g, MAX_TOKENS, &got);
	ck_assert_int_eq(got.n, want.n);
	ck_assert(memcmp(got.tokens, want.tokens, (size_t)want.n * sizeof(loom_token)) == 0);
	ck_assert(got.len == want.len && memcmp(got.text, want.text, want.len) == 0);
	ck_assert_int_eq(last.stop_reason, stats.stop_reason);
	ck_assert_int_eq(loom_generator_n_generated(g), want.n);
	/* Done: no more steps. */
	loom_generated more;
	ck_assert_int_eq(loom_generator_next(g, loom_get_logits(t.ctx, 0), false, &more), LOOM_ERR_INVALID_ARGUMENT);
	loom_generator_free(g);
	close_model(&t);
}
END_TEST

START_TEST(logprobs_are_the_log_softmax)
{
	setup t;
	if (!open_model(&t))
		return;
	const float *logits = eval_prompt(&t);
	const int32_t n = loom_model_n_vocab(t.m);
	double max = -INFINITY, z = 0;
	for (int32_t i = 0; i < n; i++)
		max = fmax(max, logits[i]);
	for (int32_t i = 0; i < n; i++)
		z += exp(logits[i] - max);
	for (int top = 0; top <= LOOM_MAX_TOP_LOGPROBS; top += 5) {
		loom_sampler_params sp = loom_sampler_default_params();
		sp.seed = 9;
		loom_generator_params p = loom_generator_default_params();
		p.sampling = &sp;
		p.n_logprobs = top;
		loom_generator *g = NULL;
		ck_assert(loom_generator_create(t.m, &p, &g) == LOOM_OK);
		loom_generated out;
		ck_assert(loom_generator_next(g, logits, false, &out) == LOOM_OK);
		double want = logits[out.token] - max - log(z);
		ck_assert_msg(fabs(out.logprob - want) < 1e-4, "logprob %g, expected %g", out.logprob, want);
		ck_assert_int_eq(out.n_top, top);
		for (int k = 0; k < out.n_top; k++) {
			/* Exactly k tokens rank above the k-th. */
			float v = logits[out.top[k]];
			int above = 0;
			for (int32_t i = 0; i < n; i++)
				above += logits[i] > v || (logits[i] == v && i < out.top[k]);
			ck_assert_msg(above == k, "top[%d] = %d has %d tokens above it", k, out.top[k], above);
			ck_assert(fabs(out.top_logprob[k] - (v - max - log(z))) < 1e-4);
		}
		loom_generator_free(g);
	}
	close_model(&t);
}
END_TEST

static loom_generator *make(setup *t, int32_t n_predict, const char *const *stop, size_t n_stop, bool ignore_eos)
{
	loom_sampler_params greedy = loom_sampler_default_params();
	greedy.temperature = 0;
	loom_generator_params p = loom_generator_default_params();
	p.sampling = &greedy;
	p.n_predict = n_predict;
	p.stop = stop;
	p.n_stop = n_stop;
	p.ignore_eos = ignore_eos;
	loom_generator *g = NULL;
	ck_assert_msg(loom_generator_create(t->m, &p, &g) == LOOM_OK, "%s", loom_last_error());
	return g;
}

START_TEST(the_step_says_why_it_ends)
{
	setup t;
	if (!open_model(&t))
		return;
	/* The length. */
	loom_generator *g = make(&t, 3, NULL, 0, false);
	collected c = {0};
	loom_generated out = run(&t, g, MAX_TOKENS, &c);
	ck_assert(out.done && out.stop_reason == LOOM_STOP_LENGTH && c.n == 3);
	loom_generator_free(g);

	/* The caller's last step: nothing held back. */
	g = make(&t, -1, NULL, 0, false);
	ck_assert(loom_generator_next(g, eval_prompt(&t), true, &out) == LOOM_OK);
	ck_assert(out.done && out.stop_reason == LOOM_STOP_CONTEXT);
	loom_generator_free(g);

	/* A stop string from the middle of the greedy text: the text before it
	 * and nothing of it. */
	g = make(&t, 40, NULL, 0, false);
	collected full = {0};
	run(&t, g, MAX_TOKENS, &full);
	loom_generator_free(g);
	ck_assert_uint_gt(full.len, 30);
	char stop[6];
	memcpy(stop, full.text + full.len / 2, 5);
	stop[5] = '\0';
	const char *cut = strstr(full.text, stop);
	const char *stops[] = {stop};
	g = make(&t, 40, stops, 1, false);
	collected got = {0};
	out = run(&t, g, MAX_TOKENS, &got);
	ck_assert_msg(out.done && out.stop_reason == LOOM_STOP_STRING, "reason %d", out.stop_reason);
	ck_assert_uint_eq(got.len, (size_t)(cut - full.text));
	ck_assert(memcmp(got.text, full.text, got.len) == 0);
	loom_generator_free(g);

	/* An end-of-generation token ends it; with ignore_eos it is never the
	 * token, however likely. */
	const int32_t n = loom_model_n_vocab(t.m);
	loom_token eos = loom_token_eos(t.m);
	ck_assert_int_ge(eos, 0);
	float *row = malloc((size_t)n * sizeof(float));
	for (int32_t i = 0; i < n; i++)
		row[i] = (float)(i % 13) * 0.1f;
	row[eos] = 30.0f;
	g = make(&t, -1, NULL, 0, false);
	ck_assert(loom_generator_next(g, row, false, &out) == LOOM_OK);
	ck_assert(out.token == eos && out.done && out.stop_reason == LOOM_STOP_EOG);
	loom_generator_free(g);
	loom_sampler_params hot = loom_sampler_default_params();
	hot.temperature = 5.0f;
	hot.top_k = 0;
	loom_generator_params p = loom_generator_default_params();
	p.sampling = &hot;
	p.ignore_eos = true;
	ck_assert(loom_generator_create(t.m, &p, &g) == LOOM_OK);
	for (int i = 0; i < 200; i++) {
		ck_assert(loom_generator_next(g, row, false, &out) == LOOM_OK);
		ck_assert_msg(!loom_token_is_eog(t.m, out.token), "ignore_eos drew %d", out.token);
	}
	loom_generator_free(g);

	/* A row with nothing to sample is an error that says so. */
	for (int32_t i = 0; i < n; i++)
		row[i] = -INFINITY;
	g = make(&t, -1, NULL, 0, false);
	ck_assert_int_eq(loom_generator_next(g, row, false, &out), LOOM_ERR_INVALID_ARGUMENT);
	ck_assert_msg(strstr(loom_last_error(), "nothing to sample") != NULL, "%s", loom_last_error());
	loom_generator_free(g);
	free(row);
	close_model(&t);
}
END_TEST

START_TEST(bad_parameters_are_refused)
{
	setup t;
	if (!open_model(&t))
		return;
	loom_generator *g = (loom_generator *)1;
	loom_generator_params p = loom_generator_default_params();
	p.n_logprobs = LOOM_MAX_TOP_LOGPROBS + 1;
	ck_assert_int_eq(loom_generator_create(t.m, &p, &g), LOOM_ERR_INVALID_ARGUMENT);
	ck_assert_ptr_null(g);
	ck_assert_msg(strstr(loom_last_error(), "n_logprobs") != NULL, "%s", loom_last_error());
	p = loom_generator_default_params();
	p.n_stop = 1;
	ck_assert_int_eq(loom_generator_create(t.m, &p, &g), LOOM_ERR_INVALID_ARGUMENT);
	loom_sampler_params bad = loom_sampler_default_params();
	bad.repeat_penalty = 0;
	p = loom_generator_default_params();
	p.sampling = &bad;
	ck_assert_int_eq(loom_generator_create(t.m, &p, &g), LOOM_ERR_INVALID_ARGUMENT);
	ck_assert_int_eq(loom_generator_create(NULL, NULL, &g), LOOM_ERR_INVALID_ARGUMENT);
	loom_generator_free(NULL);
	close_model(&t);
}
END_TEST

static Suite *generator_suite(void)
{
	Suite *s = suite_create("generator");
	TCase *tc = tcase_create("generator");
	tcase_add_test(tc, the_step_is_what_loom_generate_runs);
	tcase_add_test(tc, logprobs_are_the_log_softmax);
	tcase_add_test(tc, the_step_says_why_it_ends);
	tcase_add_test(tc, bad_parameters_are_refused);
	suite_add_tcase(s, tc);
	return s;
}

LOOM_TEST_MAIN(generator_suite)
