/*
 * cpu_quant.h - the block-quantized weight types: rows decoded to f32,
 * rows of f32 encoded (weights, for a quantizer; activations, for a
 * matmul), and the dot product of a weight row with a quantized activation
 * row, all with llama.cpp's numerics.
 *
 * A matmul with quantized weights first quantizes its activations to the
 * weight type's activation type (Q8_0 for Q4_0/Q5_0/Q8_0, Q8_1 for
 * Q4_1/Q5_1, Q8_K for the K-quants), as llama.cpp's CPU backend does. The
 * dot product then sums integer products exactly within each block and
 * scales each block's sums by f32 products of the two sides' scales.
 * Element counts n are whole numbers of blocks throughout.
 */
#ifndef LOOM_CPU_QUANT_H
#define LOOM_CPU_QUANT_H

#include "cpu_blocks.h"
#include "loom/plugin_api.h"

#include <stdint.h>
#include <string.h>

#if defined(__AVX512F__)
#include <immintrin.h>
#endif

/* y[0..n) = the weights of the blocks. */
typedef void (*cpu_dequantize_fn)(const void *blocks, float *y, int64_t n);
/* The blocks for x[0..n). */
typedef void (*cpu_quantize_fn)(const float *x, void *blocks, int64_t n);
/* sum over n elements of weight * activation: w a row of weight blocks, x
 * the activation row quantized to the weight type's activation type. */
typedef float (*cpu_vec_dot_fn)(const void *w, const void *x, int64_t n);

typedef struct cpu_quant_type {
	loom_dtype act_type;          /* LOOM_DTYPE_Q8_0, _Q8_1 or _Q8_K */
	cpu_dequantize_fn dequantize;
	cpu_quantize_fn quantize;     /* weights: see "Weight quantizers" */
	cpu_vec_dot_fn dot;
} cpu_quant_type;

/* The table entry of a block-quantized weight type: Q4_0, Q4_1, Q5_0, Q5_1,
 * Q8_0, Q2_K, Q3_K, Q4_K, Q5_K or Q6_K; NULL for any other dtype. */
const cpu_quant_type *cpu_quant_type_of(loom_dtype type);

/* ---- Activation quantizers (cpu_quant_act.c) ----
 * As llama.cpp's x86 code quantizes activations, bit for bit in every
 * variant, so that the integer dot products downstream agree too.
 *
 * Q8_0, per 32: amax = max |x|, d = fp16(amax / 127), q = round-half-even(
 * x * (127 / amax)) in f32 (0 when amax is 0). 127 / amax and 1 / d can
 * differ in the last bit; llama.cpp's x86 code uses the former.
 * Q8_1: Q8_0 plus s = fp16(amax / 127 * sum(q)), the f32 scale unrounded.
 * Q8_K, per 256: m = the first element of largest |x|, iscale = -127 / m,
 * q = min(127, round-half-even(iscale * x)), d = 1 / iscale (f32), and the
 * sums of each 16 consecutive q (all zero when m is 0). */
void cpu_quantize_act_q8_0(const float *x, cpu_block_q8_0 *y, int64_t n);
void cpu_quantize_act_q8_1(const float *x, cpu_block_q8_1 *y, int64_t n);
void cpu_quantize_act_q8_k(const float *x, cpu_block_q8_k *y, int64_t n);

/* Any of the three, by dtype. */
void cpu_quantize_act(loom_dtype act_type, const float *x, void *blocks, int64_t n);

/* ---- The 32-element types (cpu_quant_legacy.c) ---- */
void cpu_dequantize_row_q4_0(const void *blocks, float *y, int64_t n);
void cpu_dequantize_row_q4_1(const void *blocks, float *y, int64_t n);
void cpu_dequantize_row_q5_0(const void *blocks, float *y, int64_t n);
void cpu_dequantize_row_q5_1(const void *blocks, float *y, int64_t n);
void cpu_dequantize_row_q8_0(const void *blocks, float *y, int64_t n);

/* Unpacks one block of Q4_0, Q4_1, Q5_0, Q5_1 or Q8_0: weight j is
 * d * q[j] + m (m 0 for the types without a min). */
void cpu_legacy_unpack(loom_dtype type, const void *block, int8_t q[CPU_QK], float *d, float *m);

/* ---- MXFP4 (cpu_quant_mxfp4.c) ---- */

/* E2M1's values, doubled to integers (ggml's kvalues_mxfp4), by index. */
static const int8_t cpu_mxfp4_values[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};

/* A block's scale 2^(e - 127), halved for the doubled values, as f32
 * bits (subnormal for e < 2), as ggml's e8m0_to_fp32_half. */
static inline float cpu_mxfp4_half_scale(uint8_t e)
{
	uint32_t bits = e < 2 ? 0x00200000u << e : (uint32_t)(e - 1) << 23;
	float f;
	memcpy(&f, &bits, sizeof(f));
	return f;
}

void cpu_dequantize_row_mxfp4(const void *blocks, float *y, int64_t n);
void cpu_quantize_row_mxfp4(const float *x, void *blocks, int64_t n);
float cpu_dot_mxfp4(const void *w, const void *x, int64_t n);

/* Weight quantizers: ggml's reference rounding, so the blocks come out as
 * llama-quantize writes them without an importance matrix. */
void cpu_quantize_row_q4_0(const float *x, void *blocks, int64_t n);
void cpu_quantize_row_q4_1(const float *x, void *blocks, int64_t n);
void cpu_quantize_row_q5_0(const float *x, void *blocks, int64_t n);
void cpu_quantize_row_q5_1(const float *x, void *blocks, int64_t n);
void cpu_quantize_row_q8_0(const float *x, void *blocks, int64_t n);

/* Q4_0/Q5_0/Q8_0 weights with Q8_0 activations; Q4_1/Q5_1 with Q8_1. */
float cpu_dot_q4_0(const void *w, const void *x, int64_t n);
float cpu_dot_q4_1(const void *w, const void *x, int64_t n);
float cpu_dot_q5_0(const void *w, const void *x, int64_t n);
float cpu_dot_q5_1(const void *w, const void *x, int64_t n);
float cpu_dot_q8_0(const void *w, const void *x, int64_t n);

/* ---- The K-quants (cpu_quant_k.c; quantizers in cpu_quant_k_search.c) ---- */
void cpu_dequantize_row_q2_k(const void *blocks, float *y, int64_t n);
void cpu_dequantize_row_q3_k(const void *blocks, float *y, int64_t n);
void cpu_dequantize_row_q4_k(const void *blocks, float *y, int64_t n);
void cpu_dequantize_row_q5_k(const void *blocks, float *y, int64_t n);
void cpu_dequantize_row_q6_k(const void *blocks, float *y, int64_t n);

/* Weight quantizers: a search for sub-block scales (and mins) that
 * minimizes a weighted squared error, then the sub-block scales quantized
 * against the super-block's and the weights rounded again with the scales
 * as stored. */
void cpu_quantize_row_q2_k(const float *x, void *blocks, int64_t n);
void cpu_quantize_row_q3_k(const float *x, void *blocks, int64_t n);
void cpu_quantize_row_q4_k(const float *x, void *blocks, int64_t n);
void cpu_quantize_row_q5_k(const float *x, void *blocks, int64_t n);
void cpu_quantize_row_q6_k(const float *x, void *blocks, int64_t n);

/* The unpacked form of any K-quant super-block: its 256 integers q
 * (element e at q[e]), its sub-block scales and mins as small integers. */
typedef struct cpu_k_block {
	int8_t q[CPU_QK_K];
	int n_sub;      /* sub-blocks: 8 of 32 or 16 of 16 */
	int16_t sc[16]; /* scale of each sub-block */
	int16_t m[16];  /* min of each sub-block (Q2_K, Q4_K, Q5_K), else 0 */
	float d;
	float dmin;     /* 0 for the types without mins */
} cpu_k_block;

/* Unpacks one super-block of a K-quant type: weight e is
 * d * sc[s] * q[e] - dmin * m[s], s the sub-block of e. */
void cpu_k_unpack(loom_dtype type, const void *block, cpu_k_block *k);

/* K-quant weights with Q8_K activations. */
float cpu_dot_q2_k(const void *w, const void *x, int64_t n);
float cpu_dot_q3_k(const void *w, const void *x, int64_t n);
float cpu_dot_q4_k(const void *w, const void *x, int64_t n);
float cpu_dot_q5_k(const void *w, const void *x, int64_t n);
float cpu_dot_q6_k(const void *w, const void *x, int64_t n);

/* The first element of largest magnitude, with its sign (0 if all are 0):
 * how ggml picks the element whose sign and size set a block's scale. */
static inline float cpu_signed_max(const float *x, int n)
{
	float amax = 0.0f, max = 0.0f;

#if defined(__AVX512F__)
	/* The largest magnitude (a NaN loses every max), then where it first
	 * is. */
	if (n % 16 == 0) {
		__m512 m = _mm512_setzero_ps();
		for (int i = 0; i < n; i += 16)
			m = _mm512_max_ps(_mm512_abs_ps(_mm512_loadu_ps(x + i)), m);
		__m512 top = _mm512_set1_ps(amax = _mm512_reduce_max_ps(m));
		for (int i = 0; amax > 0.0f && i < n; i += 16) {
			__mmask16 at = _mm512_cmp_ps_mask(_mm512_abs_ps(_mm512_loadu_ps(x + i)), top, _CMP_EQ_OQ);
			if (at != 0)
				return x[i + __builtin_ctz(at)];
		}
		return 0.0f;
	}
#endif
	for (int i = 0; i < n; i++) {
		float a = x[i] < 0.0f ? -x[i] : x[i];
		if (a > amax) {
			amax = a;
			max = x[i];
		}
	}
	return max;
}

/* ---- Summation order of the dot products ----
 * llama.cpp's x86 kernels sum a row's block products in CPU_LANES f32
 * lanes, lane l taking the products of elements 4l..4l+3 of every 32, and
 * reduce the lanes as (l, l + 4) pairs, then (0, 2) + (1, 3). The dot
 * products here keep that order, and fuse each multiply-add where the CPU
 * has FMA, so that the variants with FMA reproduce llama.cpp's sums bit
 * for bit (and cpu-generic comes within rounding of them). */
#define CPU_LANES 8

static inline float cpu_mul_add(float a, float b, float c)
{
#if defined(__FMA__)
	return __builtin_fmaf(a, b, c);
#else
	return a * b + c;
#endif
}

static inline float cpu_reduce_4(const float *v)
{
	return (v[0] + v[2]) + (v[1] + v[3]);
}

static inline float cpu_reduce_lanes(const float *acc)
{
	float r[CPU_LANES / 2];

	for (int l = 0; l < CPU_LANES / 2; l++)
		r[l] = acc[l] + acc[l + CPU_LANES / 2];
	return cpu_reduce_4(r);
}

/* The 6-bit scale and min of sub-block j of a Q4_K/Q5_K block. */
static inline void cpu_k_scale_min(const uint8_t *s, int j, uint8_t *sc, uint8_t *m)
{
	if (j < 4) {
		*sc = s[j] & 63;
		*m = s[j + 4] & 63;
	} else {
		*sc = (uint8_t)((s[j + 4] & 15) | ((s[j - 4] >> 6) << 4));
		*m = (uint8_t)((s[j + 4] >> 4) | ((s[j] >> 6) << 4));
	}
}

#endif
