/* cpu_half.c - fp16 and bf16 rows to and from f32. */
#include "cpu_half.h"

#if defined(__AVX2__) || defined(__AVX512F__)
#include <immintrin.h>
#endif

void cpu_fp16_to_f32_row(const uint16_t *x, float *y, int64_t n)
{
	int64_t i = 0;
#if defined(__AVX512F__)
	for (; i + 16 <= n; i += 16)
		_mm512_storeu_ps(y + i, _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(x + i))));
#elif defined(__F16C__)
	for (; i + 8 <= n; i += 8)
		_mm256_storeu_ps(y + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(x + i))));
#endif
	for (; i < n; i++)
		y[i] = cpu_fp16_to_f32(x[i]);
}

void cpu_f32_to_fp16_row(const float *x, uint16_t *y, int64_t n)
{
	int64_t i = 0;
#if defined(__AVX512F__)
	for (; i + 16 <= n; i += 16)
		_mm256_storeu_si256((__m256i *)(y + i),
				    _mm512_cvtps_ph(_mm512_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT));
#elif defined(__F16C__)
	for (; i + 8 <= n; i += 8)
		_mm_storeu_si128((__m128i *)(y + i),
				 _mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT));
#endif
	for (; i < n; i++)
		y[i] = cpu_f32_to_fp16(x[i]);
}

void cpu_bf16_to_f32_row(const uint16_t *x, float *y, int64_t n)
{
	int64_t i = 0;
#if defined(__AVX512F__)
	for (; i + 16 <= n; i += 16) {
		__m512i h = _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)(x + i)));
		_mm512_storeu_ps(y + i, _mm512_castsi512_ps(_mm512_slli_epi32(h, 16)));
	}
#elif defined(__AVX2__)
	for (; i + 8 <= n; i += 8) {
		__m256i h = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(x + i)));
		_mm256_storeu_ps(y + i, _mm256_castsi256_ps(_mm256_slli_epi32(h, 16)));
	}
#endif
	for (; i < n; i++)
		y[i] = cpu_bf16_to_f32(x[i]);
}

void cpu_round_fp16_row(const float *x, float *y, int64_t n)
{
	int64_t i = 0;
#if defined(__AVX512F__)
	for (; i + 16 <= n; i += 16) {
		__m256i h = _mm512_cvtps_ph(_mm512_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT);
		_mm512_storeu_ps(y + i, _mm512_cvtph_ps(h));
	}
#elif defined(__F16C__)
	for (; i + 8 <= n; i += 8) {
		__m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT);
		_mm256_storeu_ps(y + i, _mm256_cvtph_ps(h));
	}
#endif
	for (; i < n; i++)
		y[i] = cpu_fp16_to_f32(cpu_f32_to_fp16(x[i]));
}

#if defined(__AVX512F__)
/* cpu_f32_to_bf16 on 16 lanes, result left in the high half of each lane. */
static __m512i round_bf16_x16(__m512i u)
{
	const __m512i abs_mask = _mm512_set1_epi32(0x7fffffff);
	__m512i lsb = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
	__m512i rounded = _mm512_add_epi32(u, _mm512_add_epi32(lsb, _mm512_set1_epi32(0x7fff)));
	__mmask16 nan = _mm512_cmpgt_epu32_mask(_mm512_and_si512(u, abs_mask),
						_mm512_set1_epi32(0x7f800000));
	__m512i quiet = _mm512_or_si512(u, _mm512_set1_epi32(0x400000));
	__m512i r = _mm512_mask_mov_epi32(rounded, nan, quiet);
	return _mm512_and_si512(r, _mm512_set1_epi32((int)0xffff0000u));
}
#elif defined(__AVX2__)
static __m256i round_bf16_x8(__m256i u)
{
	const __m256i abs_mask = _mm256_set1_epi32(0x7fffffff);
	__m256i lsb = _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1));
	__m256i rounded = _mm256_add_epi32(u, _mm256_add_epi32(lsb, _mm256_set1_epi32(0x7fff)));
	/* Signed compare is right here: both sides are non-negative. */
	__m256i nan = _mm256_cmpgt_epi32(_mm256_and_si256(u, abs_mask),
					 _mm256_set1_epi32(0x7f800000));
	__m256i quiet = _mm256_or_si256(u, _mm256_set1_epi32(0x400000));
	__m256i r = _mm256_blendv_epi8(rounded, quiet, nan);
	return _mm256_and_si256(r, _mm256_set1_epi32((int)0xffff0000u));
}
#endif

void cpu_f32_to_bf16_row(const float *x, uint16_t *y, int64_t n)
{
	int64_t i = 0;
#if defined(__AVX512F__)
	for (; i + 16 <= n; i += 16) {
		__m512i r = round_bf16_x16(_mm512_castps_si512(_mm512_loadu_ps(x + i)));
		_mm256_storeu_si256((__m256i *)(y + i), _mm512_cvtepi32_epi16(_mm512_srli_epi32(r, 16)));
	}
#elif defined(__AVX2__)
	for (; i + 8 <= n; i += 8) {
		__m256i r = _mm256_srli_epi32(round_bf16_x8(_mm256_castps_si256(_mm256_loadu_ps(x + i))), 16);
		/* packus pairs the 128-bit halves; the permute puts the four
		 * 64-bit results back in order. */
		__m256i packed = _mm256_permute4x64_epi64(_mm256_packus_epi32(r, r), 0x08);
		_mm_storeu_si128((__m128i *)(y + i), _mm256_castsi256_si128(packed));
	}
#endif
	for (; i < n; i++)
		y[i] = cpu_f32_to_bf16(x[i]);
}
