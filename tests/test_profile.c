/* test_profile.c - a context's profile (loom_context_profile): it counts
 * the steps made while it is on and only those, the CPU backend times
 * every node so each kind of work shows, the output head is the head's
 * alone (one row asked about costs a prompt step what a decode step pays),
 * and the kinds and the host's share add up to the steps' wall time. */
#include "check_main.h"

#include "fixture.h"

#include <string.h>

START_TEST(the_profile_adds_up)
{
	loom_runtime *rt = test_runtime(NULL, 2);
	loom_model *m = test_model(rt, "stories-llama-d256-q8_0.gguf");
	if (m == NULL) {
		loom_runtime_free(rt);
		return;
	}
	loom_context *ctx = test_context(m, 128, 64, LOOM_DTYPE_F16);
	loom_token prompt[32];
	for (int i = 0; i < 32; i++)
		prompt[i] = (loom_token)(1 + i * 7 % 500);
	loom_profile p;
	loom_batch b = {.n_tokens = 8, .tokens = prompt};
	ck_assert(loom_decode(ctx, &b) == LOOM_OK);
	loom_context_profile(ctx, &p);
	ck_assert_int_eq(p.n_steps, 0); /* off until turned on */

	loom_context_set_profiling(ctx, true);
	b = (loom_batch){.n_tokens = 16, .tokens = prompt + 8};
	ck_assert(loom_decode(ctx, &b) == LOOM_OK);
	for (int i = 0; i < 5; i++) {
		b = (loom_batch){.n_tokens = 1, .tokens = prompt + 24 + i};
		ck_assert(loom_decode(ctx, &b) == LOOM_OK);
	}
	loom_context_profile(ctx, &p);
	ck_assert_int_eq(p.n_steps, 6);
	ck_assert_msg(p.by_node, "%s does not time its nodes", loom_runtime_backend_name(rt));
	ck_assert(p.matmul_ms > 0 && p.head_ms > 0 && p.attention_ms > 0 && p.other_ms > 0 && p.host_ms >= 0);
	double nodes = p.matmul_ms + p.head_ms + p.attention_ms + p.other_ms;
	ck_assert_msg(nodes <= p.total_ms && nodes + p.host_ms > 0.999 * p.total_ms,
		      "nodes %.3f ms + host %.3f ms against %.3f ms", nodes, p.host_ms, p.total_ms);
	/* The head multiplies one row per step here, the other matrices 16
	 * rows in the prompt step: they cost more than it. */
	ck_assert_msg(p.head_ms < p.matmul_ms, "head %.3f ms, other matmuls %.3f ms", p.head_ms, p.matmul_ms);

	loom_context_set_profiling(ctx, false);
	b = (loom_batch){.n_tokens = 1, .tokens = prompt + 30};
	ck_assert(loom_decode(ctx, &b) == LOOM_OK);
	loom_profile after;
	loom_context_profile(ctx, &after);
	ck_assert_int_eq(after.n_steps, 0); /* turning it off clears it */
	loom_context_set_profiling(ctx, true);
	loom_context_profile(ctx, &after);
	ck_assert(after.n_steps == 0 && after.total_ms == 0);
	loom_context_free(ctx);
	loom_model_free(m);
	loom_runtime_free(rt);
}
END_TEST

static Suite *profile_suite(void)
{
	Suite *s = suite_create("profile");
	TCase *tc = tcase_create("profile");
	tcase_add_test(tc, the_profile_adds_up);
	suite_add_tcase(s, tc);
	return s;
}

LOOM_TEST_MAIN(profile_suite)
