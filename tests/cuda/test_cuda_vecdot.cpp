/*
 * test_cuda_vecdot.cpp - the cuda backend's dot products of a quantized
 * weight block with Q8_1 activations (cuda_vecdot.cuh, which every
 * quantized MATMUL and MATMUL_ID kernel sums) run on the host, part by
 * part as a warp's lanes take them, against the test suites' reference
 * decoding of the blocks (tests/support/cpu_ref.c, written from the GGUF
 * format's description).
 *
 * No GPU is needed: cuda_on_host.h gives the header's qualifiers and
 * intrinsics their documented meanings on the host. A quant
 * bit read from the wrong place, a scale from the wrong sub-block or an
 * element counted twice moves a dot by about its own size; float rounding
 * moves it by parts in a million. So the unpacking of every type is held
 * to the format wherever the cuda backend is built; test_backend_ops
 * checks what a device computes, on a GPU.
 */
#include "check_main.h"

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>

#include "cuda_on_host.h"

#include "cuda_vecdot.cuh"
#include "random_q8_1.h"

/* ---- the dots ---- */

#define N_BLOCKS 3000

/* How far the device's float arithmetic may move a block's dot: parts in a
 * million of the sum of |w x| and of |offset x| (the mins the K-quants and
 * Q4_1/Q5_1 subtract or add), and for Q4_1/Q5_1, whose min meets the
 * activations through their fp16 sum s, that rounding too. */
static double tolerance(const ref_qblock *q, const float *w, const float *x, double s_rounding)
{
	double size = 0.0;
	for (int i = 0; i < q->n; i++) {
		double offset = q->has_min ? (double)q->dmin * q->m[i / q->sub] : q->has_add ? q->add : 0.0;
		size += std::fabs((double)w[i] * x[i]) + std::fabs(offset * x[i]);
	}
	return 4e-6 * size + s_rounding;
}

template <int type>
static void same_dots(const char *name)
{
	constexpr int n = cuda_vecdot_block(type), bytes = cuda_vecdot_bytes(type), parts = cuda_vecdot_parts(type);
	constexpr int x_blocks = n / CUDA_QK;
	ref_rng rng = {0x5eed0000u + (uint64_t)type};
	uint8_t block[bytes];
	cuda_block_q8_1 x[x_blocks];
	float w[n], xv[n];
	int wrong = 0, first = -1;
	double worst = 0.0;

	for (int k = 0; k < N_BLOCKS; k++) {
		ref_random_blocks(&rng, (loom_dtype)type, block, 1);
		random_q8_1(&rng, x, x_blocks);
		ref_quant_row((loom_dtype)type, block, n, w);
		ref_qblock q;
		ref_decode_block((loom_dtype)type, block, &q);

		double want = 0.0, s_rounding = 0.0;
		for (int i = 0; i < n; i++) {
			xv[i] = ref_fp16_to_f32(x[i / CUDA_QK].d) * (float)x[i / CUDA_QK].qs[i % CUDA_QK];
			want += (double)w[i] * xv[i];
		}
		if (q.has_add)
			for (int b = 0; b < x_blocks; b++) {
				double exact = 0.0;
				for (int i = 0; i < CUDA_QK; i++)
					exact += xv[b * CUDA_QK + i];
				s_rounding += std::fabs(q.add * (ref_fp16_to_f32(x[b].s) - exact));
			}
		double got = 0.0;
		for (int p = 0; p < parts; p++)
			got += cuda_vecdot<type>((const char *)block, x, p);
		double err = std::fabs(got - want), allowed = tolerance(&q, w, xv, 2 * s_rounding);
		if (!(err <= allowed)) {
			wrong++;
			first = first < 0 ? k : first;
		}
		worst = allowed > 0 && err / allowed > worst ? err / allowed : worst;
	}
	printf("%s: %d blocks, the largest difference %.3g of its band\n", name, N_BLOCKS, worst);
	ck_assert_msg(wrong == 0,
		      "%s: %d of %d blocks' dots outside the rounding band (the first: block %d; worst at %.3g of "
		      "the band)",
		      name, wrong, N_BLOCKS, first, worst);
}

START_TEST(legacy_types)
{
	same_dots<LOOM_DTYPE_Q4_0>("Q4_0");
	same_dots<LOOM_DTYPE_Q4_1>("Q4_1");
	same_dots<LOOM_DTYPE_Q5_0>("Q5_0");
	same_dots<LOOM_DTYPE_Q5_1>("Q5_1");
	same_dots<LOOM_DTYPE_Q8_0>("Q8_0");
}
END_TEST

START_TEST(k_quants)
{
	same_dots<LOOM_DTYPE_Q2_K>("Q2_K");
	same_dots<LOOM_DTYPE_Q3_K>("Q3_K");
	same_dots<LOOM_DTYPE_Q4_K>("Q4_K");
	same_dots<LOOM_DTYPE_Q5_K>("Q5_K");
	same_dots<LOOM_DTYPE_Q6_K>("Q6_K");
}
END_TEST

START_TEST(mxfp4)
{
	same_dots<LOOM_DTYPE_MXFP4>("MXFP4");
}
END_TEST

static Suite *cuda_vecdot_suite(void)
{
	Suite *s = suite_create("cuda_vecdot");
	TCase *tc = tcase_create("the format's dots");
	tcase_add_test(tc, legacy_types);
	tcase_add_test(tc, k_quants);
	tcase_add_test(tc, mxfp4);
	suite_add_tcase(s, tc);
	return s;
}

LOOM_TEST_MAIN(cuda_vecdot_suite)
