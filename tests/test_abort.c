/* test_abort.c - a context's abort hook: asked before every step, it
 * cancels a decode, a long prompt between its pieces, and a generation
 * between tokens, each with LOOM_ERR_CANCELLED and the cache holding what
 * the finished steps wrote. A random-weight model; no reference data. */
#include "check_main.h"
#include "fixture.h"
#include "synth_model.h"
#include "testdata.h"

#include <stdio.h>
#include <string.h>

typedef struct abort_state {
	int calls;
	int abort_at; /* the call that answers true (1-based); 0: never */
} abort_state;

static bool abort_on_call(void *user)
{
	abort_state *a = user;
	return ++a->calls == a->abort_at;
}

typedef struct fixture {
	loom_runtime *rt;
	loom_model *m;
	loom_context *ctx;
} fixture;

/* A context of 64 cells taking 4 tokens a step. */
static void open_fixture(fixture *f)
{
	char path[4200];
	const char *dir = test_tmp_dir("abort");
	snprintf(path, sizeof(path), "%s/model.gguf", dir);
	synth_config c = synth_default_config();
	synth_model *sm = synth_model_build(&c, NULL);
	ck_assert(synth_model_write(sm, path));
	synth_model_free(sm);
	f->rt = test_runtime("cpu-generic", 1);
	loom_model_params mp = loom_model_default_params();
	ck_assert_msg(loom_model_load(f->rt, path, &mp, &f->m) == LOOM_OK, "%s", loom_last_error());
	loom_context_params cp = loom_context_default_params();
	cp.n_ctx = 64;
	cp.n_batch = 4;
	ck_assert_msg(loom_context_create(f->m, &cp, &f->ctx) == LOOM_OK, "%s", loom_last_error());
}

static void close_fixture(fixture *f)
{
	loom_context_free(f->ctx);
	loom_model_free(f->m);
	loom_runtime_free(f->rt);
}

START_TEST(a_decode_is_cancelled_before_it_runs)
{
	fixture f;
	open_fixture(&f);
	abort_state a = {.abort_at = 1};
	loom_context_set_abort(f.ctx, abort_on_call, &a);
	loom_token toks[3] = {1, 5, 6};
	loom_batch b = {.n_tokens = 3, .tokens = toks};
	ck_assert_int_eq(loom_decode(f.ctx, &b), LOOM_ERR_CANCELLED);
	ck_assert_msg(strstr(loom_last_error(), "abort hook") != NULL, "%s", loom_last_error());
	ck_assert_uint_eq(loom_kv_used(f.ctx), 0);
	/* Without the hook the same batch runs. */
	loom_context_set_abort(f.ctx, NULL, NULL);
	ck_assert_int_eq(loom_decode(f.ctx, &b), LOOM_OK);
	ck_assert_uint_eq(loom_kv_used(f.ctx), 3);
	close_fixture(&f);
}
END_TEST

/* A prompt of 10 tokens runs in pieces of 4: cancelled at the third piece,
 * the first two are in the cache. */
START_TEST(a_long_prompt_is_cancelled_between_pieces)
{
	fixture f;
	open_fixture(&f);
	abort_state a = {.abort_at = 3};
	loom_context_set_abort(f.ctx, abort_on_call, &a);
	loom_sampler_params greedy = loom_sampler_default_params();
	greedy.temperature = 0;
	loom_generate_params gp = loom_generate_default_params();
	gp.add_special = false;
	gp.sampling = &greedy;
	const char *prompt = "abcdefghij"; /* a byte-level vocabulary: one token each */
	loom_generate_stats stats;
	ck_assert_int_eq(loom_generate(f.ctx, prompt, &gp, NULL, NULL, &stats), LOOM_ERR_CANCELLED);
	ck_assert_int_eq(stats.n_prompt, 10);
	ck_assert_int_eq(a.calls, 3);
	ck_assert_uint_eq(loom_kv_used(f.ctx), 8);
	close_fixture(&f);
}
END_TEST

/* After the prompt (one piece), each token is one step: cancelled at the
 * fourth step, three tokens were generated and two of them decoded. */
START_TEST(a_generation_is_cancelled_between_tokens)
{
	fixture f;
	open_fixture(&f);
	abort_state a = {.abort_at = 4};
	loom_context_set_abort(f.ctx, abort_on_call, &a);
	loom_sampler_params greedy = loom_sampler_default_params();
	greedy.temperature = 0;
	loom_generate_params gp = loom_generate_default_params();
	gp.add_special = false;
	gp.sampling = &greedy;
	gp.n_predict = 20;
	loom_generate_stats stats;
	ck_assert_int_eq(loom_generate(f.ctx, "abc", &gp, NULL, NULL, &stats), LOOM_ERR_CANCELLED);
	ck_assert_int_eq(stats.n_generated, 3);
	ck_assert_uint_eq(loom_kv_used(f.ctx), 3 + 2);
	close_fixture(&f);
}
END_TEST

static Suite *abort_suite(void)
{
	Suite *s = suite_create("abort");
	TCase *tc = tcase_create("abort");
	tcase_add_test(tc, a_decode_is_cancelled_before_it_runs);
	tcase_add_test(tc, a_long_prompt_is_cancelled_between_pieces);
	tcase_add_test(tc, a_generation_is_cancelled_between_tokens);
	suite_add_tcase(s, tc);
	return s;
}

LOOM_TEST_MAIN(abort_suite)
