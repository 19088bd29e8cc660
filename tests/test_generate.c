/* test_generate.c - the generation loop's choices beyond sampling: a
 * context shift when the context fills (as llama.cpp makes it: the first
 * n_keep tokens stay, the older half of the rest goes), room made for a
 * prompt that continues a full cache, and end-of-generation tokens kept
 * out with ignore_eos. */
#include "check_main.h"

#include "fixture.h"
#include "synth_model.h"
#include "testdata.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_TOKENS 512

typedef struct collected {
	loom_token tokens[MAX_TOKENS];
	int n;
} collected;

static bool collect(void *user, loom_token token, const char *text, size_t len)
{
	collected *c = user;
	(void)text;
	(void)len;
	if (c->n < MAX_TOKENS)
		c->tokens[c->n++] = token;
	return true;
}

/* A fresh evaluation of `tokens` at positions 0.. and the logits of the
 * last. */
static const float *evaluate(loom_context *ctx, const loom_token *tokens, int n)
{
	int32_t pos[MAX_TOKENS];
	int8_t want[MAX_TOKENS] = {0};
	for (int i = 0; i < n; i++)
		pos[i] = i;
	want[n - 1] = 1;
	loom_kv_clear(ctx);
	loom_batch b = {.n_tokens = n, .tokens = tokens, .pos = pos, .logits = want};
	ck_assert_msg(loom_decode(ctx, &b) == LOOM_OK, "%s", loom_last_error());
	return loom_get_logits(ctx, n - 1);
}

/* Greedy generation through 3+ shifts of a 32-token context. The loop is
 * replayed here: which tokens the cache holds when each token is sampled,
 * by llama.cpp's rule. Every token sampled right after a shift must be the
 * best next token of those tokens evaluated afresh at positions 0.. (the
 * shifted keys were turned, not recomputed: a near tie may differ in the
 * last bits, so the chosen token may trail the best by 1e-3). */
START_TEST(a_full_context_shifts_and_goes_on)
{
	loom_runtime *rt = test_runtime(NULL, 2);
	loom_model *m = test_model(rt, "stories260K-f32.gguf");
	if (m == NULL) {
		loom_runtime_free(rt);
		return;
	}
	const int n_ctx = 32, n_keep = 3, n_predict = 100;
	const int32_t n_vocab = loom_model_n_vocab(m);
	loom_token prompt[16];
	size_t n_prompt;
	ck_assert(loom_tokenize(m, "Once upon a time", 16, true, false, prompt, 16, &n_prompt) == LOOM_OK);

	loom_context *ctx = test_context(m, (uint32_t)n_ctx, 32, LOOM_DTYPE_F32);
	loom_sampler_params greedy = loom_sampler_default_params();
	greedy.temperature = 0;
	loom_generate_params gp = loom_generate_default_params();
	gp.n_predict = n_predict;
	gp.sampling = &greedy;
	gp.context_shift = true;
	gp.n_keep = n_keep;
	collected out = {0};
	loom_generate_stats stats;
	ck_assert_msg(loom_generate_tokens(ctx, prompt, n_prompt, &gp, collect, &out, &stats) == LOOM_OK, "%s",
		      loom_last_error());
	ck_assert_int_eq(out.n, n_predict);
	ck_assert_int_eq(stats.stop_reason, LOOM_STOP_LENGTH);

	/* The replay: held is what the cache holds when token i is sampled. */
	loom_token held[MAX_TOKENS];
	int n_held = (int)n_prompt, shifts = 0, discarded = 0, checked = 0;
	memcpy(held, prompt, n_prompt * sizeof(loom_token));
	loom_context *fresh = test_context(m, (uint32_t)n_ctx, 32, LOOM_DTYPE_F32);
	bool after_shift = false;
	for (int i = 0; i < out.n; i++) {
		if (after_shift) {
			const float *logits = evaluate(fresh, held, n_held);
			float best = logits[test_argmax(logits, n_vocab)];
			ck_assert_msg(logits[out.tokens[i]] >= best - 1e-3f,
				      "token %d after shift %d: %d (logit %g), afresh the best is %g", i, shifts,
				      out.tokens[i], logits[out.tokens[i]], best);
			checked++;
			after_shift = false;
		}
		if (i + 1 == out.n)
			break; /* the last token is sampled, never evaluated */
		if (n_held + 1 > n_ctx) {
			int d = (n_held - n_keep) / 2;
			memmove(held + n_keep, held + n_keep + d, (size_t)(n_held - n_keep - d) * sizeof(loom_token));
			n_held -= d;
			shifts++;
			discarded += d;
			after_shift = true;
		}
		held[n_held++] = out.tokens[i];
	}
	ck_assert_msg(shifts >= 3, "only %d shifts", shifts);
	ck_assert_int_eq(stats.n_shifts, shifts);
	ck_assert_int_eq(stats.n_discarded, discarded);
	ck_assert_int_eq(checked, shifts);
	ck_assert_int_eq(loom_kv_seq_pos_max(ctx, 0), n_held - 1);

	/* Without the shift the same run stops at the full context, having
	 * generated the same tokens up to there. */
	collected plain = {0};
	gp.context_shift = false;
	ck_assert(loom_generate_tokens(ctx, prompt, n_prompt, &gp, collect, &plain, &stats) == LOOM_OK);
	ck_assert_int_eq(stats.stop_reason, LOOM_STOP_CONTEXT);
	ck_assert_int_eq(stats.n_shifts, 0);
	ck_assert_int_eq(plain.n, n_ctx - (int)n_prompt + 1);
	ck_assert_msg(memcmp(plain.tokens, out.tokens, (size_t)plain.n * sizeof(loom_token)) == 0,
		      "the runs part before the first shift");

	loom_context_free(fresh);
	loom_context_free(ctx);
	loom_model_free(m);
	loom_runtime_free(rt);
}
END_TEST

/* A prompt that continues a sequence (keep_cache) and would not fit after
 * it: with context_shift, what the cache keeps is shifted until it fits;
 * without, the call fails with LOOM_ERR_CONTEXT_FULL. A model whose
 * positions are learned cannot shift, and says so. */
START_TEST(a_continued_prompt_makes_room)
{
	loom_runtime *rt = test_runtime(NULL, 2);
	loom_model *m = test_model(rt, "stories260K-f32.gguf");
	if (m == NULL) {
		loom_runtime_free(rt);
		return;
	}
	const char *text = "Once upon a time there was a little girl named Lily who loved to play";
	loom_token prompt[64];
	size_t n;
	ck_assert(loom_tokenize(m, text, strlen(text), true, false, prompt, 64, &n) == LOOM_OK);
	loom_context *ctx = test_context(m, 32, 32, LOOM_DTYPE_F32);
	loom_sampler_params greedy = loom_sampler_default_params();
	greedy.temperature = 0;
	loom_generate_params gp = loom_generate_default_params();
	gp.n_predict = 6;
	gp.sampling = &greedy;
	loom_generate_stats stats;
	ck_assert(loom_generate_tokens(ctx, prompt, n, &gp, NULL, NULL, &stats) == LOOM_OK);
	const int32_t held = loom_kv_seq_pos_max(ctx, 0) + 1;
	ck_assert_int_eq(held, (int32_t)n + 5);
	ck_assert_msg(held + (int32_t)n - 1 >= 32, "the second prompt (%zu tokens) would fit after %d", n - 1, held);

	gp.keep_cache = true;
	gp.n_predict = 4;
	ck_assert_int_eq(loom_generate_tokens(ctx, prompt + 1, n - 1, &gp, NULL, NULL, &stats), LOOM_ERR_CONTEXT_FULL);
	gp.context_shift = true;
	gp.n_keep = 1;
	ck_assert_msg(loom_generate_tokens(ctx, prompt + 1, n - 1, &gp, NULL, NULL, &stats) == LOOM_OK, "%s",
		      loom_last_error());
	/* (held - 1) / 2 goes first; a second halving if that is not room enough. */
	int32_t start = held, discarded = 0;
	while (start + (int32_t)(n - 1) >= 32) {
		int32_t d = (start - 1) / 2;
		start -= d;
		discarded += d;
	}
	ck_assert_int_eq(stats.n_discarded, discarded);
	ck_assert_int_eq(loom_kv_seq_pos_max(ctx, 0) + 1, start + (int32_t)(n - 1) + 3);
	loom_context_free(ctx);
	loom_model_free(m);

	m = test_model(rt, "stories-gpt2-d128-f16.gguf");
	ctx = test_context(m, 16, 16, LOOM_DTYPE_F32);
	gp = loom_generate_default_params();
	gp.n_predict = 40;
	gp.context_shift = true;
	ck_assert_int_eq(loom_generate(ctx, "Once upon a time", &gp, NULL, NULL, &stats), LOOM_ERR_UNSUPPORTED);
	ck_assert_msg(strstr(loom_last_error(), "not rotary") != NULL, "%s", loom_last_error());
	loom_context_free(ctx);
	loom_model_free(m);
	loom_runtime_free(rt);
}
END_TEST

/* A random model over 260 tokens samples its end-of-sequence token (2)
 * within a few hundred tokens at temperature 2; with ignore_eos the same
 * seed never does, and generation runs to n_predict. */
START_TEST(ignore_eos_never_samples_the_end)
{
	char path[4096];
	snprintf(path, sizeof(path), "%s/random.gguf", test_tmp_dir("generate_ignore_eos"));
	synth_config c = synth_default_config();
	c.n_ctx = 4096;
	synth_model *sm = synth_model_build(&c, NULL);
	ck_assert(synth_model_write(sm, path));
	synth_model_free(sm);
	loom_runtime *rt = test_runtime(NULL, 2);
	loom_model *m = NULL;
	ck_assert_msg(loom_model_load(rt, path, NULL, &m) == LOOM_OK, "%s", loom_last_error());
	ck_assert(loom_token_is_eog(m, SYNTH_TOKEN_EOS));
	loom_context *ctx = test_context(m, 4096, 64, LOOM_DTYPE_F16);

	loom_sampler_params hot = loom_sampler_default_params();
	hot.temperature = 2;
	hot.top_k = 0;
	hot.top_p = 1;
	hot.min_p = 0;
	loom_generate_params gp = loom_generate_default_params();
	gp.n_predict = MAX_TOKENS - 12;
	gp.sampling = &hot;
	loom_generate_stats stats;
	int stopped_by_eog = 0;
	for (uint64_t seed = 1; seed <= 4; seed++) {
		collected out = {0};
		hot.seed = seed;
		gp.ignore_eos = false;
		ck_assert(loom_generate(ctx, "hi", &gp, collect, &out, &stats) == LOOM_OK);
		stopped_by_eog += stats.stop_reason == LOOM_STOP_EOG;

		collected ignoring = {0};
		gp.ignore_eos = true;
		ck_assert(loom_generate(ctx, "hi", &gp, collect, &ignoring, &stats) == LOOM_OK);
		ck_assert_int_eq(stats.stop_reason, LOOM_STOP_LENGTH);
		ck_assert_int_eq(ignoring.n, gp.n_predict);
		for (int i = 0; i < ignoring.n; i++)
			ck_assert_msg(!loom_token_is_eog(m, ignoring.tokens[i]), "seed %d: token %d is %d", (int)seed, i,
				      ignoring.tokens[i]);
	}
	ck_assert_msg(stopped_by_eog >= 1, "no seed met the end token: the test proves nothing");
	loom_context_free(ctx);
	loom_model_free(m);
	loom_runtime_free(rt);
}
END_TEST

static Suite *generate_suite(void)
{
	Suite *s = suite_create("generate");
	TCase *tc = tcase_create("generate");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, a_full_context_shifts_and_goes_on);
	tcase_add_test(tc, a_continued_prompt_makes_room);
	tcase_add_test(tc, ignore_eos_never_samples_the_end);
	suite_add_tcase(s, tc);
	return s;
}

LOOM_TEST_MAIN(generate_suite)
