/*
 * test_cuda_dequant.cpp - the cuda backend's decoding of table elements
 * (cuda_dequant.cuh: GET_ROWS of quantized and 16-bit tables, CONVERT's
 * sources, the float matmuls' weights) run on the host against the test
 * suites' reference decoding (tests/support/cpu_ref.c, written from the
 * GGUF format's description, one f32 rounding per step as ggml computes).
 *
 * The header promises the CPU's values bit for bit, so that is what is
 * asked: every element of 3,000 random blocks of each quantized type
 * (every quant bit random, scales sane), each decoded alone as a thread
 * decodes it; every bf16 pattern; and bf16 encoding of finite values and
 * of NaNs (which stay NaNs). No GPU is needed (cuda_on_host.h).
 */
#include "check_main.h"

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>

#include "cuda_on_host.h"

#include "cuda_dequant.cuh"

#define N_BLOCKS 3000

static void same_elements(loom_dtype type, const char *name)
{
	const size_t bytes = ref_block_bytes(type);
	const int n = ref_block_elems(type);
	ref_rng rng = {0xdec0de00u + (uint64_t)type};
	uint8_t *blocks = new uint8_t[bytes * N_BLOCKS];
	float *want = new float[(size_t)n * N_BLOCKS];
	int64_t differ = 0, first = -1;

	ref_random_blocks(&rng, type, blocks, N_BLOCKS);
	ref_quant_row(type, blocks, (int64_t)n * N_BLOCKS, want);
	for (int64_t i = 0; i < (int64_t)n * N_BLOCKS; i++) {
		float got = cuda_dequant(type, blocks, i);
		if (__float_as_uint(got) != __float_as_uint(want[i])) {
			differ++;
			first = first < 0 ? i : first;
		}
	}
	delete[] blocks;
	delete[] want;
	ck_assert_msg(differ == 0, "%s: %lld of %d elements differ from the reference (the first: element %lld)", name,
		      (long long)differ, n * N_BLOCKS, (long long)first);
}

START_TEST(quantized_types)
{
	static const struct {
		loom_dtype type;
		const char *name;
	} types[] = {
		{LOOM_DTYPE_Q4_0, "Q4_0"}, {LOOM_DTYPE_Q4_1, "Q4_1"}, {LOOM_DTYPE_Q5_0, "Q5_0"},
		{LOOM_DTYPE_Q5_1, "Q5_1"}, {LOOM_DTYPE_Q8_0, "Q8_0"}, {LOOM_DTYPE_Q2_K, "Q2_K"},
		{LOOM_DTYPE_Q3_K, "Q3_K"}, {LOOM_DTYPE_Q4_K, "Q4_K"}, {LOOM_DTYPE_Q5_K, "Q5_K"},
		{LOOM_DTYPE_Q6_K, "Q6_K"}, {LOOM_DTYPE_MXFP4, "MXFP4"},
	};
	for (const auto &t : types)
		same_elements(t.type, t.name);
}
END_TEST

START_TEST(bf16)
{
	/* Counted, and asserted once: an assertion per value costs Check a
	 * write to its pipe each. */
	int bad_decodes = 0, bad_encodes = 0, bad_nans = 0;
	uint32_t first_bad = 0;
	for (uint32_t h = 0; h < 65536; h++) {
		uint16_t bits = (uint16_t)h;
		float got = cuda_dequant(LOOM_DTYPE_BF16, &bits, 0), want = ref_bf16_to_f32(bits);
		if (__float_as_uint(got) != __float_as_uint(want) && bad_decodes++ == 0)
			first_bad = h;
	}
	ck_assert_msg(bad_decodes == 0, "%d bf16 patterns decode wrongly (the first: %04x)", bad_decodes, first_bad);
	ref_rng rng = {0xbf16};
	for (int k = 0; k < 1000000; k++) {
		uint32_t u = (uint32_t)ref_rng_next(&rng);
		float f = __uint_as_float(u);
		uint16_t got = cuda_bf16_encode(f);
		if (std::isnan(f)) {
			if (!(std::isnan(ref_bf16_to_f32(got)) && (got >> 15) == (u >> 31)))
				bad_nans++;
		} else if (got != ref_f32_to_bf16(f) && bad_encodes++ == 0) {
			first_bad = u;
		}
	}
	ck_assert_msg(bad_nans == 0, "%d NaNs encode to bf16 other than NaNs of their sign", bad_nans);
	ck_assert_msg(bad_encodes == 0, "%d of a million f32 encode to other bf16 (the first: %08x)", bad_encodes,
		      first_bad);
}
END_TEST

static Suite *cuda_dequant_suite(void)
{
	Suite *s = suite_create("cuda_dequant");
	TCase *tc = tcase_create("the format's values");
	tcase_add_test(tc, quantized_types);
	tcase_add_test(tc, bf16);
	suite_add_tcase(s, tc);
	return s;
}

LOOM_TEST_MAIN(cuda_dequant_suite)
