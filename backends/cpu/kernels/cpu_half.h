/*
 * cpu_half.h - IEEE half (fp16) and bfloat16 rows to and from f32.
 *
 * The scalar converters are exact (fp16/bf16 -> f32) or round to nearest,
 * ties to even (f32 -> fp16/bf16), handle subnormals, infinities and NaNs
 * (NaNs come out quiet, payload kept), and agree bit for bit with F16C's
 * vcvtph2ps/vcvtps2ph, which the AVX variants use for whole rows.
 */
#ifndef LOOM_CPU_HALF_H
#define LOOM_CPU_HALF_H

#include <stdint.h>
#include <string.h>

#if defined(__F16C__)
#include <immintrin.h>
#endif

static inline uint32_t cpu_f32_bits(float f)
{
	uint32_t u;
	memcpy(&u, &f, sizeof(u));
	return u;
}

static inline float cpu_bits_f32(uint32_t u)
{
	float f;
	memcpy(&f, &u, sizeof(f));
	return f;
}

static inline float cpu_fp16_to_f32_scalar(uint16_t h)
{
	uint32_t sign = (uint32_t)(h & 0x8000) << 16;
	uint32_t exp = (h >> 10) & 0x1f;
	uint32_t mant = h & 0x3ff;

	if (exp == 0) {
		/* Zero or subnormal: mant * 2^-24 is exact in f32. */
		float v = (float)mant * 0x1p-24f;
		return sign ? -v : v;
	}
	if (exp == 31)
		return cpu_bits_f32(sign | 0x7f800000 | (mant ? 0x400000 | (mant << 13) : 0));
	return cpu_bits_f32(sign | ((exp + 127 - 15) << 23) | (mant << 13));
}

/* An f32 below fp16's smallest normal, as an fp16 subnormal: the significand
 * shifted to units of 2^-24, rounded to nearest even. */
static inline uint16_t cpu_f32_to_fp16_subnormal(uint32_t u)
{
	uint32_t exp = u >> 23;
	uint32_t mant, shift, r, rem, half;

	if (exp < 127 - 25) /* below 2^-25: rounds to zero (2^-25 ties to 0) */
		return 0;
	mant = (u & 0x7fffff) | 0x800000;
	shift = 126 - exp; /* value / 2^-24 = mant * 2^(exp - 126) */
	r = mant >> shift;
	rem = mant & ((1u << shift) - 1);
	half = 1u << (shift - 1);
	if (rem > half || (rem == half && (r & 1)))
		r++; /* may carry into the smallest normal, which is right */
	return (uint16_t)r;
}

static inline uint16_t cpu_f32_to_fp16_scalar(float f)
{
	uint32_t u = cpu_f32_bits(f);
	uint16_t sign = (uint16_t)((u >> 16) & 0x8000);

	u &= 0x7fffffff;
	if (u > 0x7f800000) /* NaN: quiet, top payload bits kept */
		return sign | 0x7e00 | ((u >> 13) & 0x3ff);
	if (u >= 0x477ff000) /* at or past 65520 (max + half an ulp): inf */
		return sign | 0x7c00;
	if (u < 0x38800000) /* below 2^-14 */
		return sign | cpu_f32_to_fp16_subnormal(u);
	/* Rebias the exponent, then round the 13 dropped bits to even; a carry
	 * out of the mantissa correctly bumps the exponent. */
	u -= (uint32_t)(127 - 15) << 23;
	return sign | (uint16_t)((u + 0xfff + ((u >> 13) & 1)) >> 13);
}

#if defined(__F16C__)
static inline float cpu_fp16_to_f32(uint16_t h)
{
	return _cvtsh_ss(h);
}

static inline uint16_t cpu_f32_to_fp16(float f)
{
	return _cvtss_sh(f, _MM_FROUND_TO_NEAREST_INT);
}
#else
static inline float cpu_fp16_to_f32(uint16_t h)
{
	return cpu_fp16_to_f32_scalar(h);
}

static inline uint16_t cpu_f32_to_fp16(float f)
{
	return cpu_f32_to_fp16_scalar(f);
}
#endif

static inline float cpu_bf16_to_f32(uint16_t h)
{
	return cpu_bits_f32((uint32_t)h << 16);
}

static inline uint16_t cpu_f32_to_bf16(float f)
{
	uint32_t u = cpu_f32_bits(f);

	if ((u & 0x7fffffff) > 0x7f800000) /* NaN: keep it, make it quiet */
		return (uint16_t)((u >> 16) | 0x40);
	return (uint16_t)((u + 0x7fff + ((u >> 16) & 1)) >> 16);
}

/* Whole rows. */
void cpu_fp16_to_f32_row(const uint16_t *x, float *y, int64_t n);
void cpu_f32_to_fp16_row(const float *x, uint16_t *y, int64_t n);
void cpu_bf16_to_f32_row(const uint16_t *x, float *y, int64_t n);
void cpu_f32_to_bf16_row(const float *x, uint16_t *y, int64_t n);

/* y = x rounded to fp16 precision, kept as f32 (the queries of an
 * attention over an F16 cache, as llama.cpp rounds them). y may be x. */
void cpu_round_fp16_row(const float *x, float *y, int64_t n);

#endif
