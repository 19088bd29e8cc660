/*
 * cpu_kv_rows.c - attention's work on cache rows, by cache type (see
 * cpu_kv_rows.h).
 *
 * A block is done one of two ways. Where each key is read by few query
 * rows (decode: the query heads of one kv head; a batched decode, whose
 * sequences each read their own cells) each key is dotted, and each value
 * added, straight from the cache. Where each is read by many (prefill) the
 * block's F32/F16 keys and every type's values are first widened to f32
 * once, and all rows then work on the widened copy. Either way a key's dot product is the same sum in the
 * same order. Quantized keys are always dotted in integers, in place.
 *
 * In the x86 variants sixteen keys' dot products are summed across lanes
 * together, and for the common head sizes (64, 128) the query and the
 * output row stay in registers while the keys' and values' rows are read
 * in order. Zen 4 runs masked fp16 loads slowly, so full rows are loaded
 * unmasked.
 */
#include "cpu_kv_rows.h"

#include "cpu_blocks.h"
#include "cpu_half.h"
#include "cpu_quant.h"
#include "cpu_simd.h"
#include "cpu_vec.h"

#include <math.h>
#include <stdbool.h>
#include <string.h>

/* Rows from which a block is widened before the rows work on it. */
#define WIDEN_ROWS 4
/* The longest row widened (a block is CPU_KV_BLOCK of them on the stack). */
#define WIDEN_MAX_D 256

/* ---- per type: the query, one key's dot product, one value ---- */

static size_t f32_query_bytes(int64_t d)
{
	return (size_t)d * sizeof(float);
}

static void f32_prepare(const float *q, void *out, int64_t d)
{
	memcpy(out, q, (size_t)d * sizeof(float));
}

static void f16_prepare(const float *q, void *out, int64_t d)
{
	cpu_round_fp16_row(q, out, d);
}

static size_t q8_query_bytes(int64_t d)
{
	return (size_t)(d / CPU_QK) * sizeof(cpu_block_q8_0);
}

static void q8_prepare(const float *q, void *out, int64_t d)
{
	cpu_quantize_act_q8_0(q, out, d);
}

/* A quantized value row added to o, where few rows and no fixed-size
 * kernel below take it (plain loops: the compiler vectorizes them for
 * each variant). */
static void q8_0_axpy(float *o, float p, const char *v, int64_t d)
{
	const cpu_block_q8_0 *b = (const cpu_block_q8_0 *)v;

	for (int64_t i = 0; i < d / CPU_QK; i++, o += CPU_QK) {
		float dd = cpu_fp16_to_f32(b[i].d);
		for (int e = 0; e < CPU_QK; e++)
			o[e] += p * (dd * (float)b[i].qs[e]);
	}
}

static void q4_0_axpy(float *o, float p, const char *v, int64_t d)
{
	const cpu_block_q4_0 *b = (const cpu_block_q4_0 *)v;

	for (int64_t i = 0; i < d / CPU_QK; i++, o += CPU_QK) {
		float dd = cpu_fp16_to_f32(b[i].d);
		for (int e = 0; e < CPU_QK / 2; e++) {
			o[e] += p * (dd * (float)((b[i].qs[e] & 15) - 8));
			o[e + CPU_QK / 2] += p * (dd * (float)((b[i].qs[e] >> 4) - 8));
		}
	}
}

static void f32_widen(const char *v, float *f, int64_t d)
{
	memcpy(f, v, (size_t)d * sizeof(float));
}

/* Rows of whole vectors converted here: a call of cpu_fp16_to_f32_row per
 * row of one head (32 a block) made decode attention 1.09x slower, and the
 * row function inlined, with its general tail, 1.09x slower too (32/8
 * heads of 128). */
static inline void f16_widen(const char *v, float *f, int64_t d)
{
#if defined(__AVX512F__)
	if (d % 16 == 0) {
		const uint16_t *h = (const uint16_t *)v;
		for (int64_t i = 0; i < d; i += 16)
			_mm512_storeu_ps(f + i, _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(h + i))));
		return;
	}
#endif
	cpu_fp16_to_f32_row((const uint16_t *)v, f, d);
}

static void q8_0_widen(const char *v, float *f, int64_t d)
{
	cpu_dequantize_row_q8_0(v, f, d);
}

static void q4_0_widen(const char *v, float *f, int64_t d)
{
	cpu_dequantize_row_q4_0(v, f, d);
}

/* ---- rows on a widened block ---- */

/* Bit j: row r uses key (or value) j of the block: its score is not
 * -INFINITY (s), or its weight not 0 (p, where s is NULL). */
static inline uint32_t row_keys(const float *s, const float *p, int r)
{
	return s != NULL ? cpu_differ_x16(s + r * CPU_KV_BLOCK, -INFINITY) : cpu_differ_x16(p + r * CPU_KV_BLOCK, 0.0f);
}

/* Widens the keys or values some row uses; the others are zeroed (their
 * cells may never have been written). used: s (scores), or p (weights,
 * where 0 means unused). */
static void widen_block(void (*widen)(const char *, float *, int64_t), const char *x, size_t stride, int n,
			int64_t d, const float *s, const float *p, int nr, float *f)
{
	uint32_t used = 0;

	for (int r = 0; r < nr; r++)
		used |= row_keys(s, p, r);
	for (int j = 0; j < n; j++) {
		if (used >> j & 1)
			widen(x + (size_t)j * stride, f + (size_t)j * d, d);
		else
			memset(f + (size_t)j * d, 0, (size_t)d * sizeof(float));
	}
}

/* Bits 0..n-1 (n <= CPU_KV_BLOCK). */
static inline uint32_t first_keys(int n)
{
	return (1u << n) - 1;
}

/* Bit j: key j is below n and s[j] is not -INFINITY. */
static inline uint32_t used_keys(const float *s, int n)
{
	return cpu_differ_x16(s, -INFINITY) & first_keys(n);
}

#if defined(__AVX2__)

/* Lane j of the result: the sum of h[j]'s eight lanes. */
static inline __m256 sum_across_x8(const __m256 *h)
{
	__m256 t0 = _mm256_hadd_ps(_mm256_hadd_ps(h[0], h[1]), _mm256_hadd_ps(h[2], h[3]));
	__m256 t1 = _mm256_hadd_ps(_mm256_hadd_ps(h[4], h[5]), _mm256_hadd_ps(h[6], h[7]));
	return _mm256_add_ps(_mm256_permute2f128_ps(t0, t1, 0x20), _mm256_permute2f128_ps(t0, t1, 0x31));
}

#endif

/* How a block of keys or values is read: f32 rows (an F32 cache, or rows
 * widened from any type), fp16 rows, or Q8_0 or Q4_0 blocks; rows are
 * `stride` bytes apart. */
enum { ROWS_F32, ROWS_F16, ROWS_Q8_0, ROWS_Q4_0 };

#if defined(__AVX512F__)

static inline __m512 load_row(const char *k, int kind, int64_t i, __mmask16 m)
{
	if (kind == ROWS_F16)
		return m == 0xffff ? _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)((const uint16_t *)k + i)))
				   : cpu_load_fp16_x16((const uint16_t *)k + i, m);
	return m == 0xffff ? _mm512_loadu_ps((const float *)k + i) : _mm512_maskz_loadu_ps(m, (const float *)k + i);
}

/* The sixteen accumulators' sums, scaled and added to s. */
static inline __attribute__((always_inline)) void add_sums(const __m512 *acc, float scale, float *s)
{
	__m256 half[CPU_KV_BLOCK];

	CPU_UNROLLED for (int j = 0; j < CPU_KV_BLOCK; j++)
		half[j] = _mm256_add_ps(_mm512_castps512_ps256(acc[j]), _mm512_extractf32x8_ps(acc[j], 1));
	__m256 lo = sum_across_x8(half), hi = sum_across_x8(half + 8), vs = _mm256_set1_ps(scale);
	_mm256_storeu_ps(s, _mm256_fmadd_ps(lo, vs, _mm256_loadu_ps(s)));
	_mm256_storeu_ps(s + 8, _mm256_fmadd_ps(hi, vs, _mm256_loadu_ps(s + 8)));
}

/* dot_keys for a row length D known when compiled (a multiple of 16, at
 * most 128): q stays in registers and each key's row is read in order. */
static inline __attribute__((always_inline)) void dot_keys_fixed(const float *q, const char *k, size_t stride,
								 int kind, uint32_t used, float scale, float *s,
								 const int D)
{
	__m512 acc[CPU_KV_BLOCK], vq[8];

	CPU_UNROLLED for (int c = 0; c < D / 16; c++)
		vq[c] = _mm512_loadu_ps(q + c * 16);
	CPU_UNROLLED for (int j = 0; j < CPU_KV_BLOCK; j++, k += stride) {
		acc[j] = _mm512_setzero_ps();
		if (used >> j & 1) {
			CPU_UNROLLED for (int c = 0; c < D / 16; c++)
				acc[j] = _mm512_fmadd_ps(vq[c], load_row(k, kind, c * 16, 0xffff), acc[j]);
		}
	}
	add_sums(acc, scale, s);
}

/* s[j] += scale * q . k_j for the sixteen keys of a block, where s[j] is
 * not -INFINITY (the others, and keys past n, are not read). The sixteen
 * sums are reduced across lanes together. */
static inline __attribute__((always_inline)) void dot_keys(const float *q, const char *k, size_t stride, int kind,
							   int n, int64_t d, float scale, float *s)
{
	uint32_t used = used_keys(s, n);
	__m512 acc[CPU_KV_BLOCK];

	if (d == 64) {
		dot_keys_fixed(q, k, stride, kind, used, scale, s, 64);
		return;
	}
	if (d == 128) {
		dot_keys_fixed(q, k, stride, kind, used, scale, s, 128);
		return;
	}
	for (int j = 0; j < CPU_KV_BLOCK; j++)
		acc[j] = _mm512_setzero_ps();
	for (int j = 0; j < n; j++) {
		const char *kj = k + (size_t)j * stride;
		if (!(used >> j & 1))
			continue;
		for (int64_t i = 0; i < d; i += 16) {
			__mmask16 m = d - i >= 16 ? 0xffff : cpu_tail_mask(d - i);
			acc[j] = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, q + i), load_row(kj, kind, i, m), acc[j]);
		}
	}
	add_sums(acc, scale, s);
}

/* Values h * 16 .. h * 16 + 15 of a value block, times its scale (exact). */
static inline __m512 value_half(const char *blk, int kind, int h)
{
	__m512i x;

	if (kind == ROWS_Q8_0) {
		x = _mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(((const cpu_block_q8_0 *)blk)->qs + 16 * h)));
	} else {
		__m128i b = _mm_loadu_si128((const __m128i *)((const cpu_block_q4_0 *)blk)->qs);
		b = _mm_and_si128(h ? _mm_srli_epi16(b, 4) : b, _mm_set1_epi8(15));
		x = _mm512_sub_epi32(_mm512_cvtepu8_epi32(b), _mm512_set1_epi32(8));
	}
	return _mm512_mul_ps(_mm512_cvtepi32_ps(x), _mm512_set1_ps(cpu_fp16_to_f32(*(const uint16_t *)blk)));
}

/* o += sum_j p[j] v_j for a row length D known when compiled: the output
 * row stays in registers and each value's row is read in order. Quantized
 * values (block_bytes apart) are widened exactly, times their scale. */
static inline __attribute__((always_inline)) void mix_values_fixed(float *o, const float *p, const char *v,
								   size_t stride, int kind, size_t block_bytes, int n,
								   const int D)
{
	__m512 acc[8];

	CPU_UNROLLED for (int c = 0; c < D / 16; c++)
		acc[c] = _mm512_loadu_ps(o + c * 16);
	for (int j = 0; j < n; j++, v += stride) {
		if (p[j] == 0.0f)
			continue;
		__m512 w = _mm512_set1_ps(p[j]);
		CPU_UNROLLED for (int c = 0; c < D / 16; c++) {
			__m512 x = kind >= ROWS_Q8_0 ? value_half(v + (size_t)(c / 2) * block_bytes, kind, c % 2)
						     : load_row(v, kind, c * 16, 0xffff);
			acc[c] = _mm512_fmadd_ps(w, x, acc[c]);
		}
	}
	CPU_UNROLLED for (int c = 0; c < D / 16; c++)
		_mm512_storeu_ps(o + c * 16, acc[c]);
}

/* o += sum_j p[j] v_j over the values of weight other than 0. */
static inline __attribute__((always_inline)) void mix_values(float *o, const float *p, const char *v, size_t stride,
							     int kind, int n, int64_t d)
{
	if (d == 64) {
		mix_values_fixed(o, p, v, stride, kind, 0, n, 64);
		return;
	}
	if (d == 128) {
		mix_values_fixed(o, p, v, stride, kind, 0, n, 128);
		return;
	}
	for (int64_t i = 0; i < d; i += 16) {
		__mmask16 m = d - i >= 16 ? 0xffff : cpu_tail_mask(d - i);
		__m512 acc = _mm512_maskz_loadu_ps(m, o + i);
		for (int j = 0; j < n; j++)
			if (p[j] != 0.0f)
				acc = _mm512_fmadd_ps(_mm512_set1_ps(p[j]), load_row(v + (size_t)j * stride, kind, i, m), acc);
		_mm512_mask_storeu_ps(o + i, m, acc);
	}
}

#elif defined(__AVX2__)

static inline __m256 load_row(const char *k, int kind, int64_t i)
{
	if (kind == ROWS_F16)
		return cpu_load_fp16_x8((const uint16_t *)k + i);
	return _mm256_loadu_ps((const float *)k + i);
}

static inline float row_value(const char *k, int kind, int64_t i)
{
	return kind == ROWS_F16 ? cpu_fp16_to_f32(((const uint16_t *)k)[i]) : ((const float *)k)[i];
}

static inline __attribute__((always_inline)) void dot_keys(const float *q, const char *k, size_t stride, int kind, int n, int64_t d,
			    float scale, float *s)
{
	for (int j8 = 0; j8 < CPU_KV_BLOCK; j8 += 8) {
		__m256 acc[8];
		float sum[8];
		int64_t i = 0;

		for (int j = 0; j < 8; j++)
			acc[j] = _mm256_setzero_ps();
		for (; i + 8 <= d; i += 8) {
			__m256 vq = _mm256_loadu_ps(q + i);
			for (int j = 0; j < 8 && j8 + j < n; j++)
				if (s[j8 + j] != -INFINITY)
					acc[j] = _mm256_fmadd_ps(vq, load_row(k + (size_t)(j8 + j) * stride, kind, i), acc[j]);
		}
		_mm256_storeu_ps(sum, sum_across_x8(acc));
		for (int j = 0; j < 8 && j8 + j < n; j++) {
			if (s[j8 + j] == -INFINITY)
				continue;
			for (int64_t e = i; e < d; e++)
				sum[j] += q[e] * row_value(k + (size_t)(j8 + j) * stride, kind, e);
			s[j8 + j] += scale * sum[j];
		}
	}
}

static inline __attribute__((always_inline)) void mix_values(float *o, const float *p, const char *v, size_t stride, int kind, int n, int64_t d)
{
	int64_t i = 0;

	for (; i + 8 <= d; i += 8) {
		__m256 acc = _mm256_loadu_ps(o + i);
		for (int j = 0; j < n; j++)
			if (p[j] != 0.0f)
				acc = _mm256_fmadd_ps(_mm256_set1_ps(p[j]), load_row(v + (size_t)j * stride, kind, i), acc);
		_mm256_storeu_ps(o + i, acc);
	}
	for (; i < d; i++)
		for (int j = 0; j < n; j++)
			if (p[j] != 0.0f)
				o[i] += p[j] * row_value(v + (size_t)j * stride, kind, i);
}

#else

static inline __attribute__((always_inline)) void dot_keys(const float *q, const char *k, size_t stride, int kind, int n, int64_t d,
			    float scale, float *s)
{
	for (int j = 0; j < n; j++) {
		const char *kj = k + (size_t)j * stride;
		if (s[j] != -INFINITY)
			s[j] += scale * (kind == ROWS_F16 ? cpu_dot_fp16((const uint16_t *)kj, q, d)
							  : cpu_dot_f32((const float *)kj, q, d));
	}
}

static inline __attribute__((always_inline)) void mix_values(float *o, const float *p, const char *v, size_t stride, int kind, int n, int64_t d)
{
	for (int j = 0; j < n; j++) {
		const char *vj = v + (size_t)j * stride;
		if (p[j] == 0.0f)
			continue;
		if (kind == ROWS_F16)
			cpu_axpy_fp16(o, p[j], (const uint16_t *)vj, d);
		else
			cpu_axpy_f32(o, p[j], (const float *)vj, d);
	}
}

#endif

/* ---- Q8_0 and Q4_0 keys against a Q8_0 query ---- */

#if defined(__AVX2__)

/* The 32 signed values of a key block: Q8_0's bytes, Q4_0's nibbles less 8. */
static inline __m256i key_block_values(const char *blk, int kind)
{
	if (kind == ROWS_Q8_0)
		return _mm256_loadu_si256((const __m256i *)((const cpu_block_q8_0 *)blk)->qs);
	__m128i x = _mm_loadu_si128((const __m128i *)((const cpu_block_q4_0 *)blk)->qs);
	__m256i nib = _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(x, 4), x), _mm256_set1_epi8(15));
	return _mm256_sub_epi8(nib, _mm256_set1_epi8(8));
}

/* Eight partial sums of the 32 products of a and b, exact, as f32. */
static inline __m256 dot_i8x32(__m256i a, __m256i b)
{
	__m256i ua = _mm256_sign_epi8(a, a), sb = _mm256_sign_epi8(b, a);
#if defined(__AVX512VNNI__)
	__m256i sum = _mm256_dpbusd_epi32(_mm256_setzero_si256(), ua, sb);
#else
	__m256i sum = _mm256_madd_epi16(_mm256_maddubs_epi16(ua, sb), _mm256_set1_epi16(1));
#endif
	return _mm256_cvtepi32_ps(sum);
}

/* s[j] += scale * q . k_j as llama.cpp's x86 Q8_0 dot product sums it: per
 * block the exact integer sums times the f32 product of the two scales,
 * accumulated in eight lanes; sixteen keys' lanes reduced together. */
static inline __attribute__((always_inline)) void quant_dot_keys(const char *q, const char *k, size_t stride,
								 int kind, size_t block_bytes, int n, int64_t d,
								 float scale, float *s)
{
	const cpu_block_q8_0 *qb = (const cpu_block_q8_0 *)q;
	uint32_t used = used_keys(s, n);
	__m256 acc[CPU_KV_BLOCK];

	for (int j = 0; j < CPU_KV_BLOCK; j++, k += stride) {
		acc[j] = _mm256_setzero_ps();
		if (!(used >> j & 1))
			continue;
		for (int64_t b = 0; b < d / CPU_QK; b++) {
			const char *kb = k + (size_t)b * block_bytes;
			__m256 dd = _mm256_set1_ps(cpu_fp16_to_f32(*(const uint16_t *)kb) * cpu_fp16_to_f32(qb[b].d));
			__m256 sum = dot_i8x32(key_block_values(kb, kind), _mm256_loadu_si256((const __m256i *)qb[b].qs));
			acc[j] = _mm256_fmadd_ps(dd, sum, acc[j]);
		}
	}
	__m256 lo = sum_across_x8(acc), hi = sum_across_x8(acc + 8), vs = _mm256_set1_ps(scale);
	_mm256_storeu_ps(s, _mm256_fmadd_ps(lo, vs, _mm256_loadu_ps(s)));
	_mm256_storeu_ps(s + 8, _mm256_fmadd_ps(hi, vs, _mm256_loadu_ps(s + 8)));
}

#else

static inline void quant_dot_keys(const char *q, const char *k, size_t stride, int kind, size_t block_bytes, int n,
				  int64_t d, float scale, float *s)
{
	(void)block_bytes;
	for (int j = 0; j < n; j++) {
		const char *kj = k + (size_t)j * stride;
		if (s[j] != -INFINITY)
			s[j] += scale * (kind == ROWS_Q8_0 ? cpu_dot_q8_0(kj, q, d) : cpu_dot_q4_0(kj, q, d));
	}
}

#endif

#if defined(__AVX512F__)

/* true when done here. */
static inline __attribute__((always_inline)) bool quant_mix_rows(float *o, int nr, const float *p, const char *v,
								 size_t stride, int kind, size_t block_bytes, int n,
								 int64_t d)
{
	if (d != 64 && d != 128)
		return false;
	for (int r = 0; r < nr; r++, o += d, p += CPU_KV_BLOCK) {
		if (d == 64)
			mix_values_fixed(o, p, v, stride, kind, block_bytes, n, 64);
		else
			mix_values_fixed(o, p, v, stride, kind, block_bytes, n, 128);
	}
	return true;
}

#else

static inline bool quant_mix_rows(float *o, int nr, const float *p, const char *v, size_t stride, int kind,
				  size_t block_bytes, int n, int64_t d)
{
	(void)o, (void)nr, (void)p, (void)v, (void)stride, (void)kind, (void)block_bytes, (void)n, (void)d;
	return false;
}

#endif

/* ---- the block functions, shared by the types ---- */

typedef void (*value_axpy_fn)(float *o, float p, const char *v, int64_t d);
typedef void (*widen_fn)(const char *x, float *f, int64_t d);

/* Whether the rows read each key (or value) of the block they use
 * WIDEN_ROWS times or more on average: only then does a widened copy pay
 * for itself. Rows of different sequences whose cells interleave (a
 * batched decode) each read their own few. used: as in widen_block. */
static bool worth_widening(const float *s, const float *p, int nr, int n, int64_t d)
{
	uint32_t any = 0;
	int reads = 0;

	if (nr < WIDEN_ROWS || d > WIDEN_MAX_D)
		return false;
	for (int r = 0; r < nr; r++) {
		uint32_t keys = row_keys(s, p, r) & first_keys(n);
		reads += __builtin_popcount(keys);
		any |= keys;
	}
	int used = __builtin_popcount(any);
	return used > 0 && reads >= WIDEN_ROWS * used;
}

/* Where the rows will read the block (*x, rows *stride apart, read as
 * *kind) often enough, widens it into f and points the three at the
 * copy. */
static inline __attribute__((always_inline)) void widen_for_rows(widen_fn widen, const char **x, size_t *stride,
								 int *kind, int n, int64_t d, const float *s,
								 const float *p, int nr, float *f)
{
	if (!worth_widening(s, p, nr, n, d))
		return;
	widen_block(widen, *x, *stride, n, d, s, p, nr, f);
	*x = (const char *)f;
	*stride = (size_t)d * sizeof(float);
	*kind = ROWS_F32;
}

/* F32 and F16 keys: read in place by few rows, widened once for many.
 * Either way each key's dot product is the same sum in the same order. */
static inline __attribute__((always_inline)) void scores_widened(int kind, widen_fn widen, const char *q,
								 size_t q_stride, int nr, const char *k,
								 size_t k_stride, int n, int64_t d, float scale,
								 float *s)
{
	float f[CPU_KV_BLOCK * WIDEN_MAX_D] __attribute__((aligned(64)));

	widen_for_rows(widen, &k, &k_stride, &kind, n, d, s, NULL, nr, f);
	for (int r = 0; r < nr; r++, q += q_stride, s += CPU_KV_BLOCK)
		dot_keys((const float *)q, k, k_stride, kind, n, d, scale, s);
}

/* F32 and F16 values: read in place by few rows, widened once for many. */
static inline __attribute__((always_inline)) void mix_direct(int kind, widen_fn widen, float *o, int nr,
							     const float *p, const char *v, size_t v_stride, int n,
							     int64_t d)
{
	float f[CPU_KV_BLOCK * WIDEN_MAX_D] __attribute__((aligned(64)));

	widen_for_rows(widen, &v, &v_stride, &kind, n, d, NULL, p, nr, f);
	for (int r = 0; r < nr; r++, o += d, p += CPU_KV_BLOCK)
		mix_values(o, p, v, v_stride, kind, n, d);
}

/* Quantized values: added in place by few rows, widened once for many;
 * either way each element adds p * (d * q). */
static inline __attribute__((always_inline)) void mix_quantized(value_axpy_fn axpy, widen_fn widen, int kind,
								size_t block_bytes, float *o, int nr, const float *p,
								const char *v, size_t v_stride, int n, int64_t d)
{
	float f[CPU_KV_BLOCK * WIDEN_MAX_D] __attribute__((aligned(64)));

	bool widen_it = worth_widening(NULL, p, nr, n, d);
	if (!widen_it && quant_mix_rows(o, nr, p, v, v_stride, kind, block_bytes, n, d))
		return;
	if (!widen_it) {
		for (int r = 0; r < nr; r++, o += d, p += CPU_KV_BLOCK)
			for (int j = 0; j < n; j++)
				if (p[j] != 0.0f)
					axpy(o, p[j], v + (size_t)j * v_stride, d);
		return;
	}
	widen_block(widen, v, v_stride, n, d, NULL, p, nr, f);
	for (int r = 0; r < nr; r++, o += d, p += CPU_KV_BLOCK)
		mix_values(o, p, (const char *)f, (size_t)d * sizeof(float), ROWS_F32, n, d);
}

#define KV_ROWS_SCORES_WIDENED(name, kind)                                                                 \
	static void name##_scores(const char *q, size_t q_stride, int nr, const char *k, size_t k_stride, int n, \
				  int64_t d, float scale, float *s)                                          \
	{                                                                                                  \
		scores_widened(kind, name##_widen, q, q_stride, nr, k, k_stride, n, d, scale, s);         \
	}
#define KV_ROWS_SCORES_QUANTIZED(name, kind, block)                                                        \
	static void name##_scores(const char *q, size_t q_stride, int nr, const char *k, size_t k_stride, int n, \
				  int64_t d, float scale, float *s)                                          \
	{                                                                                                  \
		for (int r = 0; r < nr; r++, q += q_stride, s += CPU_KV_BLOCK)                              \
			quant_dot_keys(q, k, k_stride, kind, sizeof(block), n, d, scale, s);              \
	}
#define KV_ROWS_MIX_DIRECT(name, kind)                                                                      \
	static void name##_mix(float *o, int nr, const float *p, const char *v, size_t v_stride, int n, int64_t d) \
	{                                                                                                   \
		mix_direct(kind, name##_widen, o, nr, p, v, v_stride, n, d);                              \
	}
#define KV_ROWS_MIX_QUANTIZED(name, kind, block)                                                            \
	static void name##_mix(float *o, int nr, const float *p, const char *v, size_t v_stride, int n, int64_t d) \
	{                                                                                                   \
		mix_quantized(name##_axpy, name##_widen, kind, sizeof(block), o, nr, p, v, v_stride, n, d); \
	}

KV_ROWS_SCORES_WIDENED(f32, ROWS_F32)
KV_ROWS_SCORES_WIDENED(f16, ROWS_F16)
KV_ROWS_SCORES_QUANTIZED(q8_0, ROWS_Q8_0, cpu_block_q8_0)
KV_ROWS_SCORES_QUANTIZED(q4_0, ROWS_Q4_0, cpu_block_q4_0)
KV_ROWS_MIX_DIRECT(f32, ROWS_F32)
KV_ROWS_MIX_DIRECT(f16, ROWS_F16)
KV_ROWS_MIX_QUANTIZED(q8_0, ROWS_Q8_0, cpu_block_q8_0)
KV_ROWS_MIX_QUANTIZED(q4_0, ROWS_Q4_0, cpu_block_q4_0)

static const cpu_kv_rows kv_f32 = {f32_query_bytes, f32_prepare, f32_scores, f32_mix};
static const cpu_kv_rows kv_f16 = {f32_query_bytes, f16_prepare, f16_scores, f16_mix};
static const cpu_kv_rows kv_q8_0 = {q8_query_bytes, q8_prepare, q8_0_scores, q8_0_mix};
static const cpu_kv_rows kv_q4_0 = {q8_query_bytes, q8_prepare, q4_0_scores, q4_0_mix};

const cpu_kv_rows *cpu_kv_rows_of(loom_dtype type)
{
	switch (type) {
	case LOOM_DTYPE_F32:
		return &kv_f32;
	case LOOM_DTYPE_F16:
		return &kv_f16;
	case LOOM_DTYPE_Q8_0:
		return &kv_q8_0;
	case LOOM_DTYPE_Q4_0:
		return &kv_q4_0;
	default:
		return NULL;
	}
}
