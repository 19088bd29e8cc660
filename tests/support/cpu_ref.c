/* cpu_ref.c - reference numerics for backend tests (see cpu_ref.h). */
#include "cpu_ref.h"

#include <math.h>
#include <string.h>

static uint32_t bits_of(float f)
{
	uint32_t u;
	memcpy(&u, &f, sizeof(u));
	return u;
}

static float float_of(uint32_t u)
{
	float f;
	memcpy(&f, &u, sizeof(f));
	return f;
}

float ref_fp16_to_f32(uint16_t h)
{
	int sign = h >> 15, exp = (h >> 10) & 0x1f, mant = h & 0x3ff;
	double v;

	if (exp == 31) {
		if (mant == 0)
			return sign ? -INFINITY : INFINITY;
		/* NaN: quiet, payload in the top mantissa bits. */
		return float_of((uint32_t)sign << 31 | 0x7fc00000u | (uint32_t)mant << 13);
	}
	v = exp == 0 ? ldexp(mant, -24) : ldexp(1024 + mant, exp - 25);
	return (float)(sign ? -v : v);
}

/* Rounds |x| to a multiple of ulp, ties to even, in double (exact here). */
static double round_to_multiple(double a, double ulp)
{
	return nearbyint(a / ulp) * ulp;
}

uint16_t ref_f32_to_fp16(float f)
{
	uint32_t u = bits_of(f);
	uint16_t sign = (uint16_t)((u >> 16) & 0x8000);
	double a = fabs((double)f);
	int e;

	if (isnan(f))
		return sign | 0x7e00 | (uint16_t)((u >> 13) & 0x3ff);
	if (a < ldexp(1, -14)) /* subnormal range: units of 2^-24 (1024 = smallest normal) */
		return sign | (uint16_t)nearbyint(ldexp(a, 24));
	e = ilogb(a);
	a = round_to_multiple(a, ldexp(1, e - 10));
	if (a >= 65536.0)
		return sign | 0x7c00;
	e = ilogb(a); /* rounding may have carried into the next binade */
	return sign | (uint16_t)((e + 15) << 10) | (uint16_t)(ldexp(a, 10 - e) - 1024);
}

float ref_bf16_to_f32(uint16_t h)
{
	return float_of((uint32_t)h << 16);
}

uint16_t ref_f32_to_bf16(float f)
{
	double a = fabs((double)f), r;
	int e;

	if (isnan(f))
		return (uint16_t)((bits_of(f) >> 16) | 0x40);
	if (isinf(f) || a == 0.0)
		return (uint16_t)(bits_of(f) >> 16);
	e = ilogb(a) < -126 ? -126 : ilogb(a);
	r = round_to_multiple(a, ldexp(1, e - 7));
	if (r >= ldexp(1, 128))
		r = INFINITY;
	return (uint16_t)(bits_of((float)(signbit(f) ? -r : r)) >> 16);
}

float ref_round_fp16(float x)
{
	return ref_fp16_to_f32(ref_f32_to_fp16(x));
}

float ref_round_bf16(float x)
{
	return ref_bf16_to_f32(ref_f32_to_bf16(x));
}

void ref_quantize_q8_0(const float *x, uint8_t *blocks, int64_t n)
{
	for (int64_t b = 0; b < n / 32; b++) {
		const float *xb = x + 32 * b;
		uint8_t *out = blocks + REF_Q8_0_BLOCK_BYTES * b;
		float amax = 0.0f;

		for (int j = 0; j < 32; j++)
			if (fabsf(xb[j]) > amax)
				amax = fabsf(xb[j]);
		float d = amax / 127.0f;
		float id = amax != 0.0f ? 127.0f / amax : 0.0f;
		uint16_t dh = ref_f32_to_fp16(d);
		memcpy(out, &dh, 2);
		for (int j = 0; j < 32; j++) {
			float p = xb[j] * id;
			out[2 + j] = (uint8_t)(int8_t)nearbyint((double)p);
		}
	}
}

float ref_q8_0_value(const uint8_t *blocks, int64_t i)
{
	const uint8_t *blk = blocks + REF_Q8_0_BLOCK_BYTES * (i / 32);
	uint16_t dh;

	memcpy(&dh, blk, 2);
	return (float)(int8_t)blk[2 + i % 32] * ref_fp16_to_f32(dh);
}

uint64_t ref_rng_next(ref_rng *r)
{
	uint64_t z = (r->state += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

double ref_rng_uniform(ref_rng *r, double lo, double hi)
{
	return lo + (hi - lo) * (double)(ref_rng_next(r) >> 11) * 0x1p-53;
}

double ref_rng_normal(ref_rng *r)
{
	double u1 = ref_rng_uniform(r, 0x1p-53, 1.0), u2 = ref_rng_uniform(r, 0.0, 1.0);
	return sqrt(-2.0 * log(u1)) * cos(2.0 * M_PI * u2);
}

int64_t ref_rng_below(ref_rng *r, int64_t n)
{
	return (int64_t)(ref_rng_next(r) % (uint64_t)n);
}

double ref_nmse(const double *ref, const float *got, size_t n)
{
	double err = 0.0, norm = 0.0;

	for (size_t i = 0; i < n; i++) {
		double d = (double)got[i] - ref[i];
		err += d * d;
		norm += ref[i] * ref[i];
	}
	return norm > 0.0 ? err / norm : err;
}

int64_t ref_first_nonfinite(const float *x, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (!isfinite(x[i]))
			return (int64_t)i;
	return -1;
}
