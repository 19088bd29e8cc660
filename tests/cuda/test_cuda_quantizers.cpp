/*
 * test_cuda_quantizers.cpp - the cuda backend's weight quantizers
 * (cuda_quantize_weights.cuh, CONVERT's and quantize-at-load's encoders)
 * run on the host against the CPU backend's scalar ones (quantizers_ref.c):
 * the same bytes, block by block, for every type they encode.
 *
 * No GPU is needed. The .cuh is C++ but for its qualifiers and a few
 * intrinsics, which this file gives host meanings: __fmul_rn and __dmul_rn
 * a product rounded on its own (the device's promise: never fused into an
 * add), fp16 through the CPU's conversion (the device's matches it for
 * every finite value, cuda_dequant.cuh). So the algorithms are held
 * together wherever the cuda backend is built; test_backend_ops checks what
 * the device computes from them, on a GPU.
 */
#include "check_main.h"

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>

extern "C" {
uint16_t ref_f32_to_fp16(float f);
float ref_fp16_to_f32(uint16_t h);
void cpu_quantize_row_q4_0(const float *x, void *blocks, int64_t n);
void cpu_quantize_row_q4_1(const float *x, void *blocks, int64_t n);
void cpu_quantize_row_q5_0(const float *x, void *blocks, int64_t n);
void cpu_quantize_row_q5_1(const float *x, void *blocks, int64_t n);
void cpu_quantize_row_q8_0(const float *x, void *blocks, int64_t n);
void cpu_quantize_row_q2_k(const float *x, void *blocks, int64_t n);
void cpu_quantize_row_q3_k(const float *x, void *blocks, int64_t n);
void cpu_quantize_row_q4_k(const float *x, void *blocks, int64_t n);
void cpu_quantize_row_q5_k(const float *x, void *blocks, int64_t n);
void cpu_quantize_row_q6_k(const float *x, void *blocks, int64_t n);
void cpu_quantize_row_mxfp4(const float *x, void *blocks, int64_t n);
}

/* ---- the device's names, on the host ---- */

#define __device__
#define __host__
#define __forceinline__ inline
/* cuda_quantize_weights.cuh reads fp16 and MXFP4 through cuda_dequant.cuh,
 * which needs the CUDA headers: what it uses is defined here instead. */
#define LOOM_CUDA_DEQUANT_CUH

static inline float __uint_as_float(uint32_t u)
{
	float f;
	memcpy(&f, &u, sizeof(f));
	return f;
}

static inline float __fmul_rn(float a, float b)
{
	volatile float p = a * b;
	return p;
}

static inline double __dmul_rn(double a, double b)
{
	volatile double p = a * b;
	return p;
}

static inline float __double2float_rn(double d)
{
	return (float)d;
}

#include "cuda_blocks.cuh"

static inline float cuda_f16_decode(uint16_t h)
{
	return ref_fp16_to_f32(h);
}

static inline uint16_t cuda_f16_encode(float f)
{
	return ref_f32_to_fp16(f);
}

/* MXFP4's values doubled (cpu_quant_mxfp4.c's table). */
static inline int cuda_mxfp4_value(int q)
{
	static const int8_t doubled[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};
	return doubled[q & 15];
}

typedef enum {
	LOOM_DTYPE_Q4_0,
	LOOM_DTYPE_Q4_1,
	LOOM_DTYPE_Q5_0,
	LOOM_DTYPE_Q5_1,
	LOOM_DTYPE_Q8_0,
	LOOM_DTYPE_Q2_K,
	LOOM_DTYPE_Q3_K,
	LOOM_DTYPE_Q4_K,
	LOOM_DTYPE_Q5_K,
	LOOM_DTYPE_Q6_K,
	LOOM_DTYPE_MXFP4,
} loom_dtype;

#include "cuda_quantize_weights.cuh"

/* ---- the blocks ---- */

#define N_BLOCKS 4000

static uint32_t rng_state;

static float uniform(void)
{
	rng_state = rng_state * 1664525u + 1013904223u;
	return (float)((rng_state >> 8) + 1) / 16777217.0f;
}

static float normal(void)
{
	return sqrtf(-2.0f * logf(uniform())) * cosf(6.2831853f * uniform());
}

/* Block b's n weights: normal at scales from fp16's subnormals to large,
 * some with outliers twenty times the rest, some all of one sign, one in
 * 97 constant. */
static void fill_block(int b, float *x, int n)
{
	static const float scales[] = {1.0f, 1e-3f, 40.0f, 3e-6f, 0.02f};
	float s = scales[b % 5];
	for (int i = 0; i < n; i++)
		x[i] = s * normal() * (b % 7 == 0 && i % 13 == 0 ? 20.0f : 1.0f);
	if (b % 11 == 0)
		for (int i = 0; i < n; i++)
			x[i] = fabsf(x[i]);
	if (b % 97 == 0)
		for (int i = 0; i < n; i++)
			x[i] = s;
}

template <typename B>
static void same_blocks(const char *name, void (*cpu)(const float *, void *, int64_t),
			void (*cuda)(const float *, B *), int n)
{
	float x[CUDA_QK_K];
	int differ = 0, first = -1;

	rng_state = 7;
	for (int b = 0; b < N_BLOCKS; b++) {
		B want, got;
		fill_block(b, x, n);
		memset(&want, 0, sizeof(want));
		memset(&got, 0, sizeof(got));
		cpu(x, &want, n);
		cuda(x, &got);
		if (memcmp(&want, &got, sizeof(B)) != 0) {
			differ++;
			first = first < 0 ? b : first;
		}
	}
	ck_assert_msg(differ == 0, "%s: %d of %d blocks differ from the CPU's (the first: block %d)", name, differ,
		      N_BLOCKS, first);
}

START_TEST(legacy_types)
{
	same_blocks<cuda_block_q4_0>("Q4_0", cpu_quantize_row_q4_0, quant_block_q4_0, CUDA_QK);
	same_blocks<cuda_block_q4_1>("Q4_1", cpu_quantize_row_q4_1, quant_block_q4_1, CUDA_QK);
	same_blocks<cuda_block_q5_0>("Q5_0", cpu_quantize_row_q5_0, quant_block_q5_0, CUDA_QK);
	same_blocks<cuda_block_q5_1>("Q5_1", cpu_quantize_row_q5_1, quant_block_q5_1, CUDA_QK);
	same_blocks<cuda_block_q8_0>("Q8_0", cpu_quantize_row_q8_0, quant_block_q8_0, CUDA_QK);
}
END_TEST

START_TEST(k_quants)
{
	same_blocks<cuda_block_q2_k>("Q2_K", cpu_quantize_row_q2_k, quant_block_q2_k, CUDA_QK_K);
	same_blocks<cuda_block_q3_k>("Q3_K", cpu_quantize_row_q3_k, quant_block_q3_k, CUDA_QK_K);
	same_blocks<cuda_block_q4_k>("Q4_K", cpu_quantize_row_q4_k, quant_block_q4_k, CUDA_QK_K);
	same_blocks<cuda_block_q5_k>("Q5_K", cpu_quantize_row_q5_k, quant_block_q5_k, CUDA_QK_K);
	same_blocks<cuda_block_q6_k>("Q6_K", cpu_quantize_row_q6_k, quant_block_q6_k, CUDA_QK_K);
}
END_TEST

START_TEST(mxfp4)
{
	same_blocks<cuda_block_mxfp4>("MXFP4", cpu_quantize_row_mxfp4, quant_block_mxfp4, CUDA_QK);
}
END_TEST

/* A block's largest magnitude just below a power of two: the CPU takes
 * the exponent as floorf(log2f(amax)), which there rounds up to the power
 * (the exponent one above the float's own) wherever the float nearest the
 * logarithm is the integer, as just below 16. The cuda encoder gives the
 * same bytes at every power from 2^-30 to 2^30. */
START_TEST(mxfp4_just_below_powers_of_two)
{
	float x[CUDA_QK];
	int rounded_up = 0;
	rng_state = 11;
	for (int k = -30; k <= 30; k++) {
		const float amax = nextafterf(ldexpf(1.0f, k), 0.0f);
		for (int i = 0; i < CUDA_QK; i++)
			x[i] = amax * (uniform() - 0.5f);
		x[(k + 30) % CUDA_QK] = k % 2 == 0 ? amax : -amax;
		cuda_block_mxfp4 want, got;
		memset(&want, 0, sizeof(want));
		memset(&got, 0, sizeof(got));
		cpu_quantize_row_mxfp4(x, &want, CUDA_QK);
		quant_block_mxfp4(x, &got);
		ck_assert_msg(memcmp(&want, &got, sizeof(want)) == 0, "amax 2^%d less an ulp: e %d against the CPU's %d", k,
			      got.e, want.e);
		rounded_up += want.e == k - 2 + 127;
	}
	/* 16 less an ulp: log2f gives 4.0, one above its exponent's 3. */
	x[0] = nextafterf(16.0f, 0.0f);
	for (int i = 1; i < CUDA_QK; i++)
		x[i] = 0.5f;
	cuda_block_mxfp4 b;
	quant_block_mxfp4(x, &b);
	ck_assert_int_eq(b.e, 4 - 2 + 127);
	ck_assert_msg(rounded_up > 0 && rounded_up < 61, "%d of 61 powers rounded up: the case is not covered", rounded_up);
}
END_TEST

static Suite *cuda_quantizers_suite(void)
{
	Suite *s = suite_create("cuda_quantizers");
	TCase *tc = tcase_create("same_bytes");
	tcase_add_test(tc, legacy_types);
	tcase_add_test(tc, k_quants);
	tcase_add_test(tc, mxfp4);
	tcase_add_test(tc, mxfp4_just_below_powers_of_two);
	suite_add_tcase(s, tc);
	return s;
}

LOOM_TEST_MAIN(cuda_quantizers_suite)
