/* test_cuda_matmul_split.c - when the cuda backend's quantized products
 * cut their rows' length into parts, and the work memory a product
 * reserves for that (backends/cuda/cuda_matmul_split.c), on the host:
 * the parts of the 7B shape's few-sequence steps and of the steps that
 * need none, and, for every step of 1 .. n tokens of many shapes, that
 * the work a product of n tokens reserves covers that step's Q8_1 rows
 * and part sums, and is no more than the largest of them. No GPU is
 * needed. */
#include "check_main.h"
#include "cuda_matmul_split.h"

#include <stdio.h>

/* What a step of t tokens needs, as the kernels lay it out. */
static size_t step_need(int n_out, int t, int n_in)
{
	int parts = cuda_matmul_splits(n_out, t, n_in);
	if (parts == 1)
		return cuda_matmul_q8_1_bytes(t, n_in);
	return cuda_matmul_split_offset(t, n_in) + (size_t)parts * (size_t)t * (size_t)n_out * sizeof(float);
}

START_TEST(parts_of_few_sequence_steps)
{
	/* Llama-2-7B: 4096-row matrices at 16 sequences are 32 tiles, 4
	 * parts fill 128 blocks; 11008 rows are 86 tiles, 2 parts. */
	ck_assert_int_eq(cuda_matmul_splits(4096, 16, 4096), 4);
	ck_assert_int_eq(cuda_matmul_splits(11008, 16, 4096), 2);
	ck_assert_int_eq(cuda_matmul_splits(4096, 16, 11008), 4);
	/* 192 tokens: 3 token tiles, 96 blocks, 2 parts. */
	ck_assert_int_eq(cuda_matmul_splits(4096, 192, 4096), 2);
	/* A prefill of 512: 256 tiles; the vocabulary's 32000 rows: 250. */
	ck_assert_int_eq(cuda_matmul_splits(4096, 512, 4096), 1);
	ck_assert_int_eq(cuda_matmul_splits(32000, 16, 4096), 1);
	/* Matrix-vector steps, and rows too short for two parts of 4 steps. */
	ck_assert_int_eq(cuda_matmul_splits(4096, 8, 4096), 1);
	ck_assert_int_eq(cuda_matmul_splits(64, 64, 256), 1);
	ck_assert_int_eq(cuda_matmul_splits(64, 64, 1024), 2);
	/* At most 8 parts, however few the tiles. */
	ck_assert_int_eq(cuda_matmul_splits(64, 9, 1 << 16), 8);
}
END_TEST

START_TEST(reserved_work_covers_every_smaller_step)
{
	static const int outs[] = {7, 64, 130, 2048, 4096, 11008, 32000};
	static const int ins[] = {32, 256, 1024, 4096, 11008};
	static const int batches[] = {1, 8, 9, 64, 65, 100, 192, 512, 2048};
	int checked = 0, split = 0;
	for (size_t o = 0; o < sizeof(outs) / sizeof(outs[0]); o++)
		for (size_t i = 0; i < sizeof(ins) / sizeof(ins[0]); i++)
			for (size_t b = 0; b < sizeof(batches) / sizeof(batches[0]); b++) {
				int n_out = outs[o], n_in = ins[i], n = batches[b];
				size_t work = cuda_matmul_quant_work(n_out, n, n_in), most = 0;
				for (int t = 1; t <= n; t++) {
					size_t need = step_need(n_out, t, n_in);
					ck_assert_msg(need <= work,
						      "%d x %d, batch %d: the %d-token step needs %zu bytes, %zu reserved",
						      n_out, n_in, n, t, need, work);
					most = need > most ? need : most;
					split += cuda_matmul_splits(n_out, t, n_in) > 1;
					checked++;
				}
				ck_assert_msg(work == most, "%d x %d, batch %d: %zu reserved, %zu the most a step needs",
					      n_out, n_in, n, work, most);
			}
	ck_assert_int_gt(split, 0);
	printf("%d steps checked, %d of them split\n", checked, split);
	/* The 7B shape with batches of 512: the 192-token step splits where the
	 * full batch does not, and needs more than the full batch's Q8_1. */
	ck_assert_uint_gt(step_need(4096, 192, 4096), cuda_matmul_q8_1_bytes(512, 4096));
	ck_assert_uint_ge(cuda_matmul_quant_work(4096, 512, 4096), step_need(4096, 192, 4096));
}
END_TEST

static Suite *cuda_matmul_split_suite(void)
{
	Suite *s = suite_create("cuda_matmul_split");
	TCase *tc = tcase_create("split");
	tcase_add_test(tc, parts_of_few_sequence_steps);
	tcase_add_test(tc, reserved_work_covers_every_smaller_step);
	suite_add_tcase(s, tc);
	return s;
}

LOOM_TEST_MAIN(cuda_matmul_split_suite)
