/* cpu_simd.h - small SIMD helpers shared by the kernel files. */
#ifndef LOOM_CPU_SIMD_H
#define LOOM_CPU_SIMD_H

#include <stdint.h>

#define CPU_INLINE static inline __attribute__((always_inline))

/* Before a loop over a tile's rows or tokens: unrolled from the start, so
 * that an array of accumulators becomes registers. Left to its own
 * heuristics, gcc 12 at -O3 peels such loops in the float tiles instead
 * and then stores every accumulator to the stack on each step. Builds
 * instrumented by the sanitizers or the fuzzer leave unrolling to the
 * compiler: the same code, whose speed nobody measures there, compiled in
 * a third of the time (unrolled, every load takes its own checks). */
#if defined(LOOM_INSTRUMENTED)
#define CPU_UNROLLED
#else
#define CPU_UNROLLED _Pragma("GCC unroll 16")
#endif

#if defined(__AVX2__) || defined(__AVX512F__)
#include <immintrin.h>

static inline float cpu_hsum_x8(__m256 v)
{
	__m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
	s = _mm_add_ps(s, _mm_movehl_ps(s, s));
	s = _mm_add_ss(s, _mm_movehdup_ps(s));
	return _mm_cvtss_f32(s);
}

/* e^x eight lanes at once, as ggml's SIMD path computes it: x = n ln 2 + r
 * with |r| <= ln 2 / 2, e^r by Cephes' degree-7 polynomial, then 2^n put
 * into the exponent. Within 2 ulp of expf's where it matters: e^x past
 * 2^127 saturates, and below 2^-126 it flushes to 0 (x is clamped to
 * [-87, 88], so callers that need an exact 0 for -inf select it). */
static inline __m256 cpu_exp_x8(__m256 x)
{
	const __m256 log2e = _mm256_set1_ps(1.44269504088896341f);
	const __m256 ln2_hi = _mm256_set1_ps(0.693359375f), ln2_lo = _mm256_set1_ps(-2.12194440e-4f);

	x = _mm256_max_ps(_mm256_min_ps(x, _mm256_set1_ps(88.0f)), _mm256_set1_ps(-87.0f));
	__m256 n = _mm256_round_ps(_mm256_mul_ps(x, log2e), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
	__m256 r = _mm256_fnmadd_ps(n, ln2_hi, x);
	r = _mm256_fnmadd_ps(n, ln2_lo, r);
	__m256 p = _mm256_set1_ps(1.9875691500e-4f);
	p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507e-3f));
	p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073e-3f));
	p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
	p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
	p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
	p = _mm256_fmadd_ps(p, _mm256_mul_ps(r, r), _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
	__m256i e = _mm256_slli_epi32(_mm256_cvtps_epi32(n), 23);
	return _mm256_castsi256_ps(_mm256_add_epi32(_mm256_castps_si256(p), e));
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

/* Lanes 0..n-1 of 16, all of them from n = 16 on: the rows of a 16-row
 * group that n rows are left for. */
static inline __mmask16 cpu_rows_mask(int64_t n)
{
	return n >= 16 ? (__mmask16)0xffff : cpu_tail_mask(n);
}

static inline __m512 cpu_load_fp16_x16(const uint16_t *p, __mmask16 m)
{
	return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, p));
}

/* 16 bf16 values as f32: the bits are an f32's upper half. */
static inline __m512 cpu_bf16_x16_to_f32(__m256i h)
{
	return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}

static inline __m512 cpu_load_bf16_x16(const uint16_t *p, __mmask16 m)
{
	return cpu_bf16_x16_to_f32(_mm256_maskz_loadu_epi16(m, p));
}
#endif

/* Bit j: x[j] != v, for the 16 floats at x (a NaN differs from all): which
 * keys of a block a row of attention scores or weights has. */
static inline uint32_t cpu_differ_x16(const float *x, float v)
{
#if defined(__AVX512F__)
	return _mm512_cmp_ps_mask(_mm512_loadu_ps(x), _mm512_set1_ps(v), _CMP_NEQ_UQ);
#elif defined(__AVX2__)
	__m256 vv = _mm256_set1_ps(v);
	uint32_t lo = (uint32_t)_mm256_movemask_ps(_mm256_cmp_ps(_mm256_loadu_ps(x), vv, _CMP_NEQ_UQ));
	uint32_t hi = (uint32_t)_mm256_movemask_ps(_mm256_cmp_ps(_mm256_loadu_ps(x + 8), vv, _CMP_NEQ_UQ));
	return lo | hi << 8;
#else
	uint32_t m = 0;
	for (int j = 0; j < 16; j++)
		m |= (uint32_t)(x[j] != v) << j;
	return m;
#endif
}

#endif
