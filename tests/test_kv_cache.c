/* test_kv_cache.c - the cache's cell bookkeeping: claiming cells, the
 * attention mask across sequences, removal and rollback. */
#include "check_main.h"

#include "infer/kv_cache.h"

#include <math.h>
#include <stdlib.h>

/* A cache without backend memory: only the cells are exercised here. */
static loom_kv_cache make_cells(uint32_t n)
{
	loom_kv_cache kv = {.n_cells = n};
	kv.cells = malloc(n * sizeof(loom_kv_cell));
	for (uint32_t i = 0; i < n; i++)
		kv.cells[i] = (loom_kv_cell){.pos = -1, .seq = -1};
	return kv;
}

START_TEST(claims_lowest_free_cells)
{
	loom_kv_cache kv = make_cells(8);
	int32_t pos[3] = {0, 1, 2}, seq[3] = {0, 0, 0}, cells[3];
	ck_assert_int_eq(loom_kv_claim(&kv, 3, pos, seq, cells), LOOM_OK);
	ck_assert(cells[0] == 0 && cells[1] == 1 && cells[2] == 2);
	ck_assert_uint_eq(kv.used, 3);
	ck_assert_uint_eq(loom_kv_span(&kv), 3);
	loom_kv_remove(&kv, 0, 1, 2); /* frees the cell of position 1 */
	ck_assert_uint_eq(kv.used, 2);
	int32_t p2[1] = {7}, s2[1] = {1}, c2[1];
	ck_assert_int_eq(loom_kv_claim(&kv, 1, p2, s2, c2), LOOM_OK);
	ck_assert_int_eq(c2[0], 1);
	ck_assert_int_eq(loom_kv_pos_max(&kv, 0), 2);
	ck_assert_int_eq(loom_kv_pos_max(&kv, 1), 7);
	ck_assert_int_eq(loom_kv_pos_max(&kv, 5), -1);
	free(kv.cells);
}
END_TEST

START_TEST(full_cache_claims_nothing)
{
	loom_kv_cache kv = make_cells(4);
	int32_t pos[5] = {0, 1, 2, 3, 4}, seq[5] = {0}, cells[5];
	ck_assert_int_eq(loom_kv_claim(&kv, 3, pos, seq, cells), LOOM_OK);
	ck_assert_int_eq(loom_kv_claim(&kv, 2, pos + 3, seq, cells), LOOM_ERR_CONTEXT_FULL);
	ck_assert_uint_eq(kv.used, 3);
	ck_assert_int_eq(kv.cells[3].pos, -1);
	loom_kv_unclaim(&kv, 3, (int32_t[]){0, 1, 2});
	ck_assert_uint_eq(kv.used, 0);
	ck_assert_uint_eq(loom_kv_span(&kv), 0);
	free(kv.cells);
}
END_TEST

/* Two sequences interleaved in one batch: each token sees its own
 * sequence's cells up to its own position, nothing else. */
START_TEST(mask_is_causal_per_sequence)
{
	loom_kv_cache kv = make_cells(6);
	int32_t pos[4] = {0, 0, 1, 1}, seq[4] = {0, 1, 0, 1}, cells[4];
	float mask[4 * 4];
	ck_assert_int_eq(loom_kv_claim(&kv, 4, pos, seq, cells), LOOM_OK);
	loom_kv_build_mask(&kv, 4, 4, pos, seq, mask);
	/* cells: 0 = (s0,p0), 1 = (s1,p0), 2 = (s0,p1), 3 = (s1,p1) */
	const int allowed[4][4] = {{1, 0, 0, 0}, {0, 1, 0, 0}, {1, 0, 1, 0}, {0, 1, 0, 1}};
	for (int t = 0; t < 4; t++)
		for (int j = 0; j < 4; j++)
			ck_assert_msg((mask[t * 4 + j] == 0.0f) == (allowed[t][j] == 1) &&
					      (allowed[t][j] || isinf(mask[t * 4 + j])),
				      "token %d cell %d: mask %g", t, j, mask[t * 4 + j]);
	loom_kv_remove(&kv, -1, 0, -1);
	ck_assert_uint_eq(kv.used, 0);
	free(kv.cells);
}
END_TEST

/* A step attends to whole windows of LOOM_KV_WINDOW_STEP cells, so its
 * shapes stay put from one token to the next; cells past the span are
 * masked; a cache smaller than one window is attended whole. */
START_TEST(window_grows_in_steps_and_masks_the_rest)
{
	const uint32_t step = LOOM_KV_WINDOW_STEP;
	loom_kv_cache kv = make_cells(3 * step);
	int32_t pos[1] = {0}, seq[1] = {0}, cells[1];
	ck_assert_int_eq(loom_kv_claim(&kv, 1, pos, seq, cells), LOOM_OK);
	ck_assert_uint_eq(loom_kv_window(&kv), step);
	float *mask = malloc(step * sizeof(float));
	loom_kv_build_mask(&kv, step, 1, pos, seq, mask);
	ck_assert(mask[0] == 0.0f);
	for (uint32_t j = 1; j < step; j++)
		ck_assert_msg(isinf(mask[j]) && mask[j] < 0, "cell %u past the span: mask %g", j, mask[j]);
	free(mask);
	for (int32_t p = 1; p < (int32_t)step; p++) {
		pos[0] = p;
		ck_assert_int_eq(loom_kv_claim(&kv, 1, pos, seq, cells), LOOM_OK);
		ck_assert_uint_eq(loom_kv_window(&kv), step);
	}
	pos[0] = (int32_t)step;
	ck_assert_int_eq(loom_kv_claim(&kv, 1, pos, seq, cells), LOOM_OK);
	ck_assert_uint_eq(loom_kv_window(&kv), 2 * step);
	free(kv.cells);

	kv = make_cells(step / 2 + 3);
	ck_assert_int_eq(loom_kv_claim(&kv, 1, pos, seq, cells), LOOM_OK);
	ck_assert_uint_eq(loom_kv_window(&kv), step / 2 + 3);
	free(kv.cells);
}
END_TEST

static Suite *kv_suite(void)
{
	Suite *s = suite_create("kv_cache");
	TCase *tc = tcase_create("cells");
	tcase_add_test(tc, claims_lowest_free_cells);
	tcase_add_test(tc, full_cache_claims_nothing);
	tcase_add_test(tc, mask_is_causal_per_sequence);
	tcase_add_test(tc, window_grows_in_steps_and_masks_the_rest);
	suite_add_tcase(s, tc);
	return s;
}

LOOM_TEST_MAIN(kv_suite)
