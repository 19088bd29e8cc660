/* cpu_simd.h - small SIMD helpers shared by the kernel files. */
#ifndef LOOM_CPU_SIMD_H
#define LOOM_CPU_SIMD_H

#include <stdint.h>

#if defined(__AVX2__) || defined(__AVX512F__)
#include <immintrin.h>

static inline float cpu_hsum_x8(__m256 v)
{
	__m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
	s = _mm_add_ps(s, _mm_movehl_ps(s, s));
	s = _mm_add_ss(s, _mm_movehdup_ps(s));
	return _mm_cvtss_f32(s);
}

/* Eight fp16 values, widened. */
static inline __m256 cpu_load_fp16_x8(const uint16_t *p)
{
	return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p));
}

/* Eight bf16 values, widened. */
static inline __m256 cpu_load_bf16_x8(const uint16_t *p)
{
	__m256i h = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)p));
	return _mm256_castsi256_ps(_mm256_slli_epi32(h, 16));
}
#endif

#if defined(__AVX512F__)
/* Lanes [0, n) set, for the tail of a row (n < 16). */
static inline __mmask16 cpu_tail_mask(int64_t n)
{
	return (__mmask16)((1u << n) - 1);
}

static inline __m512 cpu_load_fp16_x16(const uint16_t *p, __mmask16 m)
{
	return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, p));
}

static inline __m512 cpu_load_bf16_x16(const uint16_t *p, __mmask16 m)
{
	__m512i h = _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m, p));
	return _mm512_castsi512_ps(_mm512_slli_epi32(h, 16));
}
#endif

#endif
