/* cpu_ref.c - reference numerics for backend tests (see cpu_ref.h). */
#include "cpu_ref.h"

#include <math.h>
#include <pthread.h>
#include <stdbool.h>
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

/* The value of every fp16 bit pattern, as fp16_value computes it: a
 * suite decodes millions, each a call to ldexp. */
static float fp16_table[65536];
static pthread_once_t fp16_table_once = PTHREAD_ONCE_INIT;

static float fp16_value(uint16_t h);

static void fill_fp16_table(void)
{
	for (uint32_t h = 0; h < 65536; h++)
		fp16_table[h] = fp16_value((uint16_t)h);
}

float ref_fp16_to_f32(uint16_t h)
{
	pthread_once(&fp16_table_once, fill_fp16_table);
	return fp16_table[h];
}

static float fp16_value(uint16_t h)
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

/* ---- Block-quantized types ---- */

size_t ref_block_bytes(loom_dtype type)
{
	switch (type) {
	case LOOM_DTYPE_Q4_0: return 18;
	case LOOM_DTYPE_Q4_1: return 20;
	case LOOM_DTYPE_Q5_0: return 22;
	case LOOM_DTYPE_Q5_1: return 24;
	case LOOM_DTYPE_Q8_0: return 34;
	case LOOM_DTYPE_Q8_1: return 36;
	case LOOM_DTYPE_Q2_K: return 84;
	case LOOM_DTYPE_Q3_K: return 110;
	case LOOM_DTYPE_Q4_K: return 144;
	case LOOM_DTYPE_Q5_K: return 176;
	case LOOM_DTYPE_Q6_K: return 210;
	case LOOM_DTYPE_Q8_K: return 292;
	case LOOM_DTYPE_MXFP4: return 17;
	default: return 0;
	}
}

int ref_block_elems(loom_dtype type)
{
	size_t bytes = ref_block_bytes(type);
	return bytes == 0 ? 0 : bytes < 84 ? 32 : 256;
}

static float fp16_at(const uint8_t *p)
{
	uint16_t h;
	memcpy(&h, p, 2);
	return ref_fp16_to_f32(h);
}

static uint32_t u32_at(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static void legacy_block(ref_qblock *b, float d, bool add_min, float add)
{
	b->n = b->sub = 32;
	b->sc[0] = 1;
	b->m[0] = 0;
	b->d = d;
	b->dmin = 0.0f;
	b->add = add;
	b->has_min = false;
	b->has_add = add_min;
}

/* qs: 16 bytes, element j in the low nibble of byte j, j + 16 in the high
 * one; qh (or NULL): bit j is bit 4 of element j. */
static void decode_nibbles(const uint8_t *qs, const uint8_t *qh, int offset, int *q)
{
	uint32_t h = qh != NULL ? u32_at(qh) : 0;

	for (int j = 0; j < 16; j++) {
		q[j] = (int)((qs[j] & 15) | ((h >> j) & 1) << 4) - offset;
		q[j + 16] = (int)((qs[j] >> 4) | ((h >> (j + 16)) & 1) << 4) - offset;
	}
}

/* Q2_K/Q3_K low bits: in each half of 128, byte l of the 32 holds bits
 * 2j..2j+1 of element 32j + l. */
static void decode_2bit(const uint8_t *qs, int *q)
{
	for (int half = 0; half < 2; half++)
		for (int j = 0; j < 4; j++)
			for (int l = 0; l < 32; l++)
				q[128 * half + 32 * j + l] = (qs[32 * half + l] >> (2 * j)) & 3;
}

/* The 12-byte table of Q4_K/Q5_K: scales and mins of sub-blocks 0..3 in
 * the low 6 bits of bytes 0..3 and 4..7; of sub-blocks 4..7 the low 4 bits
 * in bytes 8..11 (scale low, min high nibble), the top 2 bits in the top
 * bits of bytes 0..3 (scales) and 4..7 (mins). */
static void decode_k4_scales(const uint8_t *s, int *sc, int *m)
{
	for (int j = 0; j < 4; j++) {
		sc[j] = s[j] & 63;
		m[j] = s[j + 4] & 63;
		sc[j + 4] = (s[j + 8] & 15) | (s[j] >> 6) << 4;
		m[j + 4] = (s[j + 8] >> 4) | (s[j + 4] >> 6) << 4;
	}
}

static void decode_k(ref_qblock *b, int sub, bool has_min, float d, float dmin)
{
	b->n = 256;
	b->sub = sub;
	b->d = d;
	b->dmin = dmin;
	b->add = 0.0f;
	b->has_min = has_min;
	b->has_add = false;
}

static void decode_q2_k(const uint8_t *blk, ref_qblock *b)
{
	decode_k(b, 16, true, fp16_at(blk + 80), fp16_at(blk + 82));
	decode_2bit(blk + 16, b->q);
	for (int j = 0; j < 16; j++) {
		b->sc[j] = blk[j] & 15;
		b->m[j] = blk[j] >> 4;
	}
}

/* hmask byte l, bit 4 * half + j, is set when element 128 * half + 32 * j
 * + l is >= 0; the scales are 6 bits less 32: low 4 bits in the nibbles of
 * bytes 0..7 (low nibbles for sub-blocks 0..7), top 2 in bytes 8..11. */
static void decode_q3_k(const uint8_t *blk, ref_qblock *b)
{
	const uint8_t *hm = blk, *s = blk + 96;

	decode_k(b, 16, false, fp16_at(blk + 108), 0.0f);
	decode_2bit(blk + 32, b->q);
	for (int e = 0; e < 256; e++) {
		int bit = 4 * (e / 128) + e % 128 / 32;
		if (!((hm[e % 32] >> bit) & 1))
			b->q[e] -= 4;
	}
	for (int j = 0; j < 16; j++) {
		int lo = (j < 8 ? s[j] : s[j - 8] >> 4) & 15;
		int hi = (s[8 + j % 4] >> (2 * (j / 4))) & 3;
		b->sc[j] = (lo | hi << 4) - 32;
		b->m[j] = 0;
	}
}

/* Q4_K/Q5_K: each 64 elements share 32 bytes, low nibbles first. */
static void decode_q45_k(const uint8_t *blk, const uint8_t *qh, const uint8_t *qs, ref_qblock *b)
{
	decode_k(b, 32, true, fp16_at(blk), fp16_at(blk + 2));
	decode_k4_scales(blk + 4, b->sc, b->m);
	for (int c = 0; c < 4; c++) {
		for (int l = 0; l < 32; l++) {
			b->q[64 * c + l] = qs[32 * c + l] & 15;
			b->q[64 * c + 32 + l] = qs[32 * c + l] >> 4;
			if (qh != NULL) {
				b->q[64 * c + l] += ((qh[l] >> (2 * c)) & 1) << 4;
				b->q[64 * c + 32 + l] += ((qh[l] >> (2 * c + 1)) & 1) << 4;
			}
		}
	}
}

/* Q6_K: per half, ql bytes l and l + 32 and qh byte l give elements l,
 * l + 32, l + 64, l + 96 (low nibbles, then high; qh bits 0-1, 2-3, 4-5,
 * 6-7), less 32. */
static void decode_q6_k(const uint8_t *blk, ref_qblock *b)
{
	decode_k(b, 16, false, fp16_at(blk + 208), 0.0f);
	for (int half = 0; half < 2; half++) {
		const uint8_t *ql = blk + 64 * half, *qh = blk + 128 + 32 * half;
		int *q = b->q + 128 * half;
		for (int l = 0; l < 32; l++) {
			q[l] = ((ql[l] & 15) | (qh[l] & 3) << 4) - 32;
			q[l + 32] = ((ql[l + 32] & 15) | ((qh[l] >> 2) & 3) << 4) - 32;
			q[l + 64] = ((ql[l] >> 4) | ((qh[l] >> 4) & 3) << 4) - 32;
			q[l + 96] = ((ql[l + 32] >> 4) | ((qh[l] >> 6) & 3) << 4) - 32;
		}
	}
	for (int j = 0; j < 16; j++) {
		b->sc[j] = (int8_t)blk[192 + j];
		b->m[j] = 0;
	}
}

/* MXFP4: byte 0 is E, the scale 2^(E - 127); then Q4_0's nibbles, each
 * indexing an E2M1 value (0, 0.5, 1, 1.5, 2, 3, 4, 6 and their
 * negatives), kept doubled as integers with the scale halved. */
static void decode_mxfp4(const uint8_t *blk, ref_qblock *b)
{
	static const int values[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};
	legacy_block(b, (float)ldexp(1.0, blk[0] - 128), false, 0.0f);
	for (int j = 0; j < 16; j++) {
		b->q[j] = values[blk[1 + j] & 15];
		b->q[j + 16] = values[blk[1 + j] >> 4];
	}
}

void ref_decode_block(loom_dtype type, const uint8_t *blk, ref_qblock *b)
{
	switch (type) {
	case LOOM_DTYPE_Q4_0:
		legacy_block(b, fp16_at(blk), false, 0.0f);
		decode_nibbles(blk + 2, NULL, 8, b->q);
		break;
	case LOOM_DTYPE_Q4_1:
		legacy_block(b, fp16_at(blk), true, fp16_at(blk + 2));
		decode_nibbles(blk + 4, NULL, 0, b->q);
		break;
	case LOOM_DTYPE_Q5_0:
		legacy_block(b, fp16_at(blk), false, 0.0f);
		decode_nibbles(blk + 6, blk + 2, 16, b->q);
		break;
	case LOOM_DTYPE_Q5_1:
		legacy_block(b, fp16_at(blk), true, fp16_at(blk + 2));
		decode_nibbles(blk + 8, blk + 4, 0, b->q);
		break;
	case LOOM_DTYPE_Q8_0:
		legacy_block(b, fp16_at(blk), false, 0.0f);
		for (int j = 0; j < 32; j++)
			b->q[j] = (int8_t)blk[2 + j];
		break;
	case LOOM_DTYPE_MXFP4:
		decode_mxfp4(blk, b);
		break;
	case LOOM_DTYPE_Q2_K:
		decode_q2_k(blk, b);
		break;
	case LOOM_DTYPE_Q3_K:
		decode_q3_k(blk, b);
		break;
	case LOOM_DTYPE_Q4_K:
		decode_q45_k(blk, NULL, blk + 16, b);
		break;
	case LOOM_DTYPE_Q5_K:
		decode_q45_k(blk, blk + 16, blk + 48, b);
		break;
	case LOOM_DTYPE_Q6_K:
		decode_q6_k(blk, b);
		break;
	default:
		memset(b, 0, sizeof(*b));
		break;
	}
}

/* One f32 rounding of an exact double. */
static float f32(double x)
{
	return (float)x;
}

/* Element e of a decoded block, with ggml's roundings. */
static float block_value(const ref_qblock *b, int e)
{
	int j = e / b->sub;
	float v = f32((double)f32((double)b->d * b->sc[j]) * b->q[e]);
	if (b->has_min)
		v = f32((double)v - f32((double)b->dmin * b->m[j]));
	if (b->has_add)
		v = f32((double)v + b->add);
	return v;
}

float ref_quant_value(loom_dtype type, const uint8_t *row, int64_t i)
{
	int per = ref_block_elems(type);
	ref_qblock b;

	ref_decode_block(type, row + (size_t)(i / per) * ref_block_bytes(type), &b);
	return block_value(&b, (int)(i % per));
}

void ref_quant_row(loom_dtype type, const uint8_t *row, int64_t n, float *out)
{
	int per = ref_block_elems(type);
	ref_qblock b;

	for (int64_t i0 = 0; i0 < n; i0 += per) {
		ref_decode_block(type, row + (size_t)(i0 / per) * ref_block_bytes(type), &b);
		for (int e = 0; e < per && i0 + e < n; e++)
			out[i0 + e] = block_value(&b, e);
	}
}

loom_dtype ref_act_type(loom_dtype weight_type)
{
	switch (weight_type) {
	case LOOM_DTYPE_Q4_1:
	case LOOM_DTYPE_Q5_1:
		return LOOM_DTYPE_Q8_1;
	case LOOM_DTYPE_Q2_K:
	case LOOM_DTYPE_Q3_K:
	case LOOM_DTYPE_Q4_K:
	case LOOM_DTYPE_Q5_K:
	case LOOM_DTYPE_Q6_K:
		return LOOM_DTYPE_Q8_K;
	default:
		return LOOM_DTYPE_Q8_0;
	}
}

static void quantize_q8_1(const float *x, uint8_t *blocks, int64_t n)
{
	uint8_t q8_0[REF_Q8_0_BLOCK_BYTES];

	for (int64_t b = 0; b < n / 32; b++) {
		uint8_t *out = blocks + 36 * b;
		float amax = 0.0f;
		int sum = 0;

		ref_quantize_q8_0(x + 32 * b, q8_0, 32);
		for (int j = 0; j < 32; j++) {
			amax = fabsf(x[32 * b + j]) > amax ? fabsf(x[32 * b + j]) : amax;
			sum += (int8_t)q8_0[2 + j];
		}
		uint16_t s = ref_f32_to_fp16(f32((double)f32(amax / 127.0) * sum));
		memcpy(out, q8_0, 2);
		memcpy(out + 2, &s, 2);
		memcpy(out + 4, q8_0 + 2, 32);
	}
}

static void quantize_q8_k(const float *x, uint8_t *blocks, int64_t n)
{
	for (int64_t b = 0; b < n / 256; b++) {
		const float *xb = x + 256 * b;
		uint8_t *out = blocks + 292 * b;
		float max = 0.0f, d = 0.0f;
		int8_t q[256] = {0};

		for (int j = 0; j < 256; j++)
			if (fabsf(xb[j]) > fabsf(max))
				max = xb[j];
		if (max != 0.0f) {
			float iscale = f32(-127.0 / max);
			for (int j = 0; j < 256; j++) {
				double r = nearbyint((double)f32((double)iscale * xb[j]));
				q[j] = (int8_t)(r < 127 ? r : 127);
			}
			d = f32(1.0 / iscale);
		}
		memcpy(out, &d, 4);
		memcpy(out + 4, q, 256);
		for (int g = 0; g < 16; g++) {
			int16_t sum = 0;
			for (int j = 0; j < 16; j++)
				sum = (int16_t)(sum + q[16 * g + j]);
			memcpy(out + 260 + 2 * g, &sum, 2);
		}
	}
}

void ref_quantize_act(loom_dtype act_type, const float *x, uint8_t *blocks, int64_t n)
{
	if (act_type == LOOM_DTYPE_Q8_1)
		quantize_q8_1(x, blocks, n);
	else if (act_type == LOOM_DTYPE_Q8_K)
		quantize_q8_k(x, blocks, n);
	else
		ref_quantize_q8_0(x, blocks, n);
}

/* One block of a 32-element type: its integer sum times f32(d * d_x), plus
 * f32(add * s) against Q8_1. */
static double legacy_block_dot(const ref_qblock *w, const uint8_t *xb, bool q8_1)
{
	const int8_t *qx = (const int8_t *)(xb + (q8_1 ? 4 : 2));
	int64_t isum = 0;

	for (int j = 0; j < 32; j++)
		isum += (int64_t)w->q[j] * qx[j];
	double sum = (double)f32((double)w->d * fp16_at(xb)) * (double)isum;
	if (q8_1)
		sum += f32((double)w->add * fp16_at(xb + 2));
	return sum;
}

static double k_block_dot(const ref_qblock *w, const uint8_t *xb)
{
	const int8_t *qx = (const int8_t *)(xb + 4);
	int64_t isum = 0, msum = 0;
	float dx;

	memcpy(&dx, xb, 4);
	for (int j = 0; j < 256 / w->sub; j++) {
		int64_t s = 0, sx = 0;
		for (int e = j * w->sub; e < (j + 1) * w->sub; e++) {
			s += (int64_t)w->q[e] * qx[e];
			sx += qx[e];
		}
		isum += w->sc[j] * s;
		msum += w->m[j] * sx;
	}
	return (double)f32((double)dx * w->d) * (double)isum -
	       (double)f32((double)dx * w->dmin) * (double)msum;
}

/* Block i's dot product with its activation block. */
static double block_dot(loom_dtype type, const ref_qblock *b, const uint8_t *xq, int64_t i)
{
	loom_dtype act = ref_act_type(type);
	const uint8_t *xb = xq + (size_t)i * ref_block_bytes(act);
	return ref_block_elems(type) == 256 ? k_block_dot(b, xb) : legacy_block_dot(b, xb, act == LOOM_DTYPE_Q8_1);
}

double ref_quant_dot(loom_dtype type, const uint8_t *w, const uint8_t *xq, int64_t n)
{
	double sum = 0.0;
	ref_qblock b;

	for (int64_t i = 0; i < n / ref_block_elems(type); i++) {
		ref_decode_block(type, w + (size_t)i * ref_block_bytes(type), &b);
		sum += block_dot(type, &b, xq, i);
	}
	return sum;
}

double ref_decoded_dot(loom_dtype type, const ref_qblock *w, const uint8_t *xq, int64_t n)
{
	double sum = 0.0;

	for (int64_t i = 0; i < n / ref_block_elems(type); i++)
		sum += block_dot(type, &w[i], xq, i);
	return sum;
}

/* Where a block holds its fp16 scales: offsets of d and of the min or
 * dmin (-1: none). The other bytes of a block may hold any value. */
static void fp16_fields(loom_dtype type, int *d, int *m)
{
	*m = -1;
	switch (type) {
	case LOOM_DTYPE_Q4_1:
	case LOOM_DTYPE_Q5_1:
	case LOOM_DTYPE_Q4_K:
	case LOOM_DTYPE_Q5_K:
		*d = 0;
		*m = 2;
		break;
	case LOOM_DTYPE_Q2_K:
		*d = 80;
		*m = 82;
		break;
	case LOOM_DTYPE_Q3_K:
		*d = 108;
		break;
	case LOOM_DTYPE_Q6_K:
		*d = 208;
		break;
	default:
		*d = 0;
		break;
	}
}

void ref_random_blocks(ref_rng *rng, loom_dtype type, uint8_t *b, size_t n_blocks)
{
	size_t bytes = ref_block_bytes(type);
	int d_at, m_at;

	fp16_fields(type, &d_at, &m_at);
	for (size_t k = 0; k < n_blocks; k++, b += bytes) {
		for (size_t j = 0; j < bytes; j++)
			b[j] = (unsigned char)ref_rng_below(rng, 256);
		if (type == LOOM_DTYPE_MXFP4) {
			/* A scale of 2^-9 to 2^-3: values up to 0.75. */
			b[0] = (uint8_t)(118 + ref_rng_below(rng, 7));
			continue;
		}
		uint16_t d = ref_f32_to_fp16((float)ref_rng_uniform(rng, 0.002, 0.02));
		memcpy(b + d_at, &d, 2);
		if (m_at >= 0) {
			bool k_quant = ref_block_elems(type) == 256;
			double m = k_quant ? ref_rng_uniform(rng, 0.001, 0.01) : ref_rng_uniform(rng, -0.1, 0.1);
			uint16_t h = ref_f32_to_fp16((float)m);
			memcpy(b + m_at, &h, 2);
		}
	}
}
