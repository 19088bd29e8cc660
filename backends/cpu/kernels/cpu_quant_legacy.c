/*
 * cpu_quant_legacy.c - the 32-element types Q4_0, Q4_1, Q5_0, Q5_1 and
 * Q8_0: decoding, the reference quantizers, and dot products with Q8_0 or
 * Q8_1 activations.
 *
 * Every block is first unpacked to its 32 integers q, element j at q[j];
 * decoding and dot products then work on those. The arithmetic follows
 * ggml's: dequantized weights are f32(q * d) (+ m, a second rounding), and a
 * dot product sums q * q_x exactly per block before scaling by the f32
 * product of the two scales.
 */
#include "cpu_quant.h"

#include "cpu_half.h"

#include <float.h>
#include <math.h>
#include <string.h>

#if defined(__AVX512F__)
#include <immintrin.h>
#endif

/* ---- unpacking ---- */

/* The low nibbles hold elements 0..15, the high nibbles 16..31. */
static void unpack_nibbles(const uint8_t *qs, int8_t *q, int offset)
{
	for (int j = 0; j < CPU_QK / 2; j++) {
		q[j] = (int8_t)((qs[j] & 15) - offset);
		q[j + CPU_QK / 2] = (int8_t)((qs[j] >> 4) - offset);
	}
}

/* Bit 4 of element j is bit j of qh, a little-endian 32-bit word. */
static void unpack_5bit(const uint8_t *qs, const uint8_t *qh, int8_t *q, int offset)
{
	uint32_t h = (uint32_t)qh[0] | (uint32_t)qh[1] << 8 | (uint32_t)qh[2] << 16 |
		     (uint32_t)qh[3] << 24;

	for (int j = 0; j < CPU_QK / 2; j++) {
		int lo = (qs[j] & 15) | (int)((h >> j) & 1) << 4;
		int hi = (qs[j] >> 4) | (int)((h >> (j + 16)) & 1) << 4;
		q[j] = (int8_t)(lo - offset);
		q[j + CPU_QK / 2] = (int8_t)(hi - offset);
	}
}

void cpu_legacy_unpack(loom_dtype type, const void *block, int8_t q[CPU_QK], float *d, float *m)
{
	*m = 0.0f;
	switch (type) {
	case LOOM_DTYPE_Q4_0: {
		const cpu_block_q4_0 *b = block;
		unpack_nibbles(b->qs, q, 8);
		*d = cpu_fp16_to_f32(b->d);
		break;
	}
	case LOOM_DTYPE_Q4_1: {
		const cpu_block_q4_1 *b = block;
		unpack_nibbles(b->qs, q, 0);
		*d = cpu_fp16_to_f32(b->d), *m = cpu_fp16_to_f32(b->m);
		break;
	}
	case LOOM_DTYPE_Q5_0: {
		const cpu_block_q5_0 *b = block;
		unpack_5bit(b->qs, b->qh, q, 16);
		*d = cpu_fp16_to_f32(b->d);
		break;
	}
	case LOOM_DTYPE_Q5_1: {
		const cpu_block_q5_1 *b = block;
		unpack_5bit(b->qs, b->qh, q, 0);
		*d = cpu_fp16_to_f32(b->d), *m = cpu_fp16_to_f32(b->m);
		break;
	}
	default: {
		const cpu_block_q8_0 *b = block;
		memcpy(q, b->qs, CPU_QK);
		*d = cpu_fp16_to_f32(b->d);
		break;
	}
	}
}

static void pack_nibbles(const uint8_t *q, uint8_t *qs)
{
	for (int j = 0; j < CPU_QK / 2; j++)
		qs[j] = (uint8_t)((q[j] & 15) | (q[j + CPU_QK / 2] & 15) << 4);
}

static void pack_5bit(const uint8_t *q, uint8_t *qs, uint8_t *qh)
{
	uint32_t h = 0;

	pack_nibbles(q, qs);
	for (int j = 0; j < CPU_QK; j++)
		h |= (uint32_t)((q[j] >> 4) & 1) << j;
	for (int k = 0; k < 4; k++)
		qh[k] = (uint8_t)(h >> (8 * k));
}

/* ---- decoding ---- */

static void scale_block(const int8_t *q, float d, float *y)
{
	for (int j = 0; j < CPU_QK; j++)
		y[j] = (float)q[j] * d;
}

static void scale_block_min(const int8_t *q, float d, float m, float *y)
{
	for (int j = 0; j < CPU_QK; j++)
		y[j] = (float)q[j] * d + m;
}

void cpu_dequantize_row_q4_0(const void *blocks, float *y, int64_t n)
{
	const cpu_block_q4_0 *b = blocks;
	int8_t q[CPU_QK];

	for (int64_t i = 0; i < n / CPU_QK; i++) {
		unpack_nibbles(b[i].qs, q, 8);
		scale_block(q, cpu_fp16_to_f32(b[i].d), y + i * CPU_QK);
	}
}

void cpu_dequantize_row_q4_1(const void *blocks, float *y, int64_t n)
{
	const cpu_block_q4_1 *b = blocks;
	int8_t q[CPU_QK];

	for (int64_t i = 0; i < n / CPU_QK; i++) {
		unpack_nibbles(b[i].qs, q, 0);
		scale_block_min(q, cpu_fp16_to_f32(b[i].d), cpu_fp16_to_f32(b[i].m), y + i * CPU_QK);
	}
}

void cpu_dequantize_row_q5_0(const void *blocks, float *y, int64_t n)
{
	const cpu_block_q5_0 *b = blocks;
	int8_t q[CPU_QK];

	for (int64_t i = 0; i < n / CPU_QK; i++) {
		unpack_5bit(b[i].qs, b[i].qh, q, 16);
		scale_block(q, cpu_fp16_to_f32(b[i].d), y + i * CPU_QK);
	}
}

void cpu_dequantize_row_q5_1(const void *blocks, float *y, int64_t n)
{
	const cpu_block_q5_1 *b = blocks;
	int8_t q[CPU_QK];

	for (int64_t i = 0; i < n / CPU_QK; i++) {
		unpack_5bit(b[i].qs, b[i].qh, q, 0);
		scale_block_min(q, cpu_fp16_to_f32(b[i].d), cpu_fp16_to_f32(b[i].m), y + i * CPU_QK);
	}
}

void cpu_dequantize_row_q8_0(const void *blocks, float *y, int64_t n)
{
	const cpu_block_q8_0 *b = blocks;

	for (int64_t i = 0; i < n / CPU_QK; i++)
		scale_block(b[i].qs, cpu_fp16_to_f32(b[i].d), y + i * CPU_QK);
}

/* ---- weight quantizers ----
 * ggml's reference rounding: the symmetric types put the element of largest
 * magnitude at the end of the range that has room for it (-8 or -16), the
 * types with a min span [min, max]; each weight is then truncated after
 * adding the offset and one half, with the unrounded f32 scale. */

static void min_max(const float *x, float *min, float *max)
{
	*min = FLT_MAX;
	*max = -FLT_MAX;
	for (int j = 0; j < CPU_QK; j++) {
		*min = x[j] < *min ? x[j] : *min;
		*max = x[j] > *max ? x[j] : *max;
	}
}

static float inverse(float d)
{
	return d != 0.0f ? 1.0f / d : 0.0f;
}

#if defined(__AVX512F__)
/* Sixteen of a Q8_0 block's weights as the plain loop below makes them:
 * roundf(x * id) (x - trunc(x) is exact, so rounding the halves away from
 * zero by hand is roundf), then clamped to -127..127 - max_ps gives its
 * second operand for a NaN, -127 as the plain loop does. */
static void round_q8_0_x16(const float *x, float id, int8_t *q)
{
	const __m512 v = _mm512_mul_ps(_mm512_loadu_ps(x), _mm512_set1_ps(id));
	const __m512 t = _mm512_roundscale_ps(v, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
	const __m512 f = _mm512_sub_ps(v, t), one = _mm512_set1_ps(1.0f);
	__m512 r = _mm512_mask_add_ps(t, _mm512_cmp_ps_mask(f, _mm512_set1_ps(0.5f), _CMP_GE_OQ), t, one);
	r = _mm512_mask_sub_ps(r, _mm512_cmp_ps_mask(f, _mm512_set1_ps(-0.5f), _CMP_LE_OQ), r, one);
	r = _mm512_min_ps(_mm512_max_ps(r, _mm512_set1_ps(-127.0f)), _mm512_set1_ps(127.0f));
	_mm_storeu_si128((__m128i *)q, _mm512_cvtsepi32_epi8(_mm512_cvttps_epi32(r)));
}

/* The largest |x| of a block, NaNs passed over as cpu_signed_max does:
 * max_ps gives its second operand, the running maximum, for a NaN. */
static float abs_max_32(const float *x)
{
	__m512 m = _mm512_max_ps(_mm512_abs_ps(_mm512_loadu_ps(x)), _mm512_setzero_ps());
	m = _mm512_max_ps(_mm512_abs_ps(_mm512_loadu_ps(x + 16)), m);
	return _mm512_reduce_max_ps(m);
}
#endif

/* q = trunc((x - sub) * id + bias), in 0..qmax. Finite x never falls
 * below 0; activations that overflowed (a Q4_0 KV cache stores them) give
 * NaN or +-inf, which must not reach the conversion to int. */
#if defined(__AVX512F__)
/* Sixteen at a time: the multiply with an explicit rounding mode is a
 * builtin the compiler does not fuse with the add (as product() keeps the
 * plain loop from doing), and max_ps gives its second operand, 0, for a
 * NaN. */
static void round_block(const float *x, float sub, float id, float bias, int qmax, uint8_t *q)
{
	for (int j = 0; j < CPU_QK; j += 16) {
		__m512 d = _mm512_sub_ps(_mm512_loadu_ps(x + j), _mm512_set1_ps(sub));
		__m512 p = _mm512_mul_round_ps(d, _mm512_set1_ps(id), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
		__m512 v = _mm512_add_ps(p, _mm512_set1_ps(bias));
		v = _mm512_min_ps(_mm512_max_ps(v, _mm512_setzero_ps()), _mm512_set1_ps((float)qmax));
		_mm_storeu_si128((__m128i *)(q + j), _mm512_cvtusepi32_epi8(_mm512_cvttps_epi32(v)));
	}
}
#else
/* The f32 product a * b, rounded before anything is added to it: stored
 * through a volatile, it cannot be fused with a following addition into an
 * FMA (which the variants built with -mfma would otherwise do), whose
 * single rounding now and then truncates to another integer than ggml's
 * reference does. */
static float product(float a, float b)
{
	volatile float p = a * b;
	return p;
}

static void round_block(const float *x, float sub, float id, float bias, int qmax, uint8_t *q)
{
	for (int j = 0; j < CPU_QK; j++) {
		float v = product(x[j] - sub, id) + bias;
		q[j] = (uint8_t)(v >= 0.0f ? (v < (float)qmax ? (int)v : qmax) : 0);
	}
}
#endif

/* Symmetric 4- or 5-bit blocks: d = max / -8 or max / -16, which puts the
 * extreme element at q = 0. Returns d. */
static float quantize_symmetric(const float *x, int bits, uint8_t *q)
{
	float half = (float)(1 << (bits - 1));
	float d = cpu_signed_max(x, CPU_QK) / -half;

	round_block(x, 0.0f, inverse(d), half + 0.5f, (1 << bits) - 1, q);
	return d;
}

/* Blocks with a min: d = (max - min) / qmax. Returns d; *m gets min. */
static float quantize_with_min(const float *x, int bits, uint8_t *q, float *m)
{
	int qmax = (1 << bits) - 1;
	float min, max;

	min_max(x, &min, &max);
	float d = (max - min) / (float)qmax;
	round_block(x, min, inverse(d), 0.5f, qmax, q);
	*m = min;
	return d;
}

void cpu_quantize_row_q4_0(const float *x, void *blocks, int64_t n)
{
	cpu_block_q4_0 *b = blocks;
	uint8_t q[CPU_QK];

	for (int64_t i = 0; i < n / CPU_QK; i++) {
		b[i].d = cpu_f32_to_fp16(quantize_symmetric(x + i * CPU_QK, 4, q));
		pack_nibbles(q, b[i].qs);
	}
}

void cpu_quantize_row_q4_1(const float *x, void *blocks, int64_t n)
{
	cpu_block_q4_1 *b = blocks;
	uint8_t q[CPU_QK];
	float m;

	for (int64_t i = 0; i < n / CPU_QK; i++) {
		b[i].d = cpu_f32_to_fp16(quantize_with_min(x + i * CPU_QK, 4, q, &m));
		b[i].m = cpu_f32_to_fp16(m);
		pack_nibbles(q, b[i].qs);
	}
}

void cpu_quantize_row_q5_0(const float *x, void *blocks, int64_t n)
{
	cpu_block_q5_0 *b = blocks;
	uint8_t q[CPU_QK];

	for (int64_t i = 0; i < n / CPU_QK; i++) {
		b[i].d = cpu_f32_to_fp16(quantize_symmetric(x + i * CPU_QK, 5, q));
		pack_5bit(q, b[i].qs, b[i].qh);
	}
}

void cpu_quantize_row_q5_1(const float *x, void *blocks, int64_t n)
{
	cpu_block_q5_1 *b = blocks;
	uint8_t q[CPU_QK];
	float m;

	for (int64_t i = 0; i < n / CPU_QK; i++) {
		b[i].d = cpu_f32_to_fp16(quantize_with_min(x + i * CPU_QK, 5, q, &m));
		b[i].m = cpu_f32_to_fp16(m);
		pack_5bit(q, b[i].qs, b[i].qh);
	}
}

/* Unlike the activation quantizer, the reference uses 1 / d and rounds
 * halves away from zero. */
void cpu_quantize_row_q8_0(const float *x, void *blocks, int64_t n)
{
	cpu_block_q8_0 *b = blocks;

	for (int64_t i = 0; i < n / CPU_QK; i++) {
		const float *xb = x + i * CPU_QK;
#if defined(__AVX512F__)
		float amax = abs_max_32(xb);
#else
		float amax = fabsf(cpu_signed_max(xb, CPU_QK));
#endif
		float d = amax / 127.0f, id = inverse(d);

		b[i].d = cpu_f32_to_fp16(d);
#if defined(__AVX512F__)
		round_q8_0_x16(xb, id, b[i].qs);
		round_q8_0_x16(xb + 16, id, b[i].qs + 16);
#else
		/* Clamped only for non-finite weights (amax inf gives id 0 and
		 * inf * 0 = NaN): finite ones lie in -127..127. */
		for (int j = 0; j < CPU_QK; j++) {
			float q = roundf(xb[j] * id);
			q = q > -127.0f ? q : -127.0f;
			b[i].qs[j] = (int8_t)(q < 127.0f ? q : 127.0f);
		}
#endif
	}
}

/* ---- dot products ----
 * In llama.cpp's order (cpu_quant.h), except Q4_0: llama.cpp repacks Q4_0
 * weights into groups of 8 interleaved rows, whose kernels keep one f32 sum
 * per row and add each block's product to it in turn. */

static void accumulate(float *acc, const int8_t *q, const int8_t *qx, float scale)
{
	int32_t p[CPU_QK];

	for (int e = 0; e < CPU_QK; e++)
		p[e] = (int32_t)q[e] * (int32_t)qx[e];
	for (int l = 0; l < CPU_LANES; l++) {
		int32_t sum = (p[4 * l] + p[4 * l + 1]) + (p[4 * l + 2] + p[4 * l + 3]);
		acc[l] = cpu_mul_add(scale, (float)sum, acc[l]);
	}
}

static int32_t dot_32(const int8_t *a, const int8_t *b)
{
	int32_t sum = 0;

	for (int j = 0; j < CPU_QK; j++)
		sum += (int32_t)a[j] * (int32_t)b[j];
	return sum;
}

/* Exact: two fp16 significands fit in an f32 one. */
static float scale_product(uint16_t dw, uint16_t dx)
{
	return cpu_fp16_to_f32(dw) * cpu_fp16_to_f32(dx);
}

float cpu_dot_q4_0(const void *w, const void *x, int64_t n)
{
	const cpu_block_q4_0 *b = w;
	const cpu_block_q8_0 *a = x;
	float sum = 0.0f;
	int8_t q[CPU_QK];

	for (int64_t i = 0; i < n / CPU_QK; i++) {
		unpack_nibbles(b[i].qs, q, 8);
		sum = cpu_mul_add((float)dot_32(q, a[i].qs), scale_product(b[i].d, a[i].d), sum);
	}
	return sum;
}

float cpu_dot_q5_0(const void *w, const void *x, int64_t n)
{
	const cpu_block_q5_0 *b = w;
	const cpu_block_q8_0 *a = x;
	float acc[CPU_LANES] = {0};
	int8_t q[CPU_QK];

	for (int64_t i = 0; i < n / CPU_QK; i++) {
		unpack_5bit(b[i].qs, b[i].qh, q, 16);
		accumulate(acc, q, a[i].qs, scale_product(b[i].d, a[i].d));
	}
	return cpu_reduce_lanes(acc);
}

float cpu_dot_q8_0(const void *w, const void *x, int64_t n)
{
	const cpu_block_q8_0 *b = w;
	const cpu_block_q8_0 *a = x;
	float acc[CPU_LANES] = {0};

	for (int64_t i = 0; i < n / CPU_QK; i++)
		accumulate(acc, b[i].qs, a[i].qs, scale_product(b[i].d, a[i].d));
	return cpu_reduce_lanes(acc);
}

/* With a min, weight * x = d q x + m x, and the second term summed over a
 * block is m * s: those f32 products are summed in order on their own and
 * added last. */
float cpu_dot_q4_1(const void *w, const void *x, int64_t n)
{
	const cpu_block_q4_1 *b = w;
	const cpu_block_q8_1 *a = x;
	float acc[CPU_LANES] = {0}, mins = 0.0f;
	int8_t q[CPU_QK];

	for (int64_t i = 0; i < n / CPU_QK; i++) {
		unpack_nibbles(b[i].qs, q, 0);
		accumulate(acc, q, a[i].qs, scale_product(b[i].d, a[i].d));
		mins += scale_product(b[i].m, a[i].s);
	}
	return cpu_reduce_lanes(acc) + mins;
}

float cpu_dot_q5_1(const void *w, const void *x, int64_t n)
{
	const cpu_block_q5_1 *b = w;
	const cpu_block_q8_1 *a = x;
	float acc[CPU_LANES] = {0}, mins = 0.0f;
	int8_t q[CPU_QK];

	for (int64_t i = 0; i < n / CPU_QK; i++) {
		unpack_5bit(b[i].qs, b[i].qh, q, 0);
		accumulate(acc, q, a[i].qs, scale_product(b[i].d, a[i].d));
		mins += scale_product(b[i].m, a[i].s);
	}
	return cpu_reduce_lanes(acc) + mins;
}
