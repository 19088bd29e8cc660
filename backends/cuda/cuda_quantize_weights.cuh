/*
 * cuda_quantize_weights.cuh - the reference weight quantizers on the
 * device: one thread encodes one block, with the CPU backend's algorithms
 * (cpu_quant_legacy.c, cpu_quant_k_search.c, cpu_quant_mxfp4.c) and the
 * same bytes out.
 *
 * The CPU reference is built without FMA, so every f32 or f64 product
 * there is rounded before anything is added to it. nvcc (and ptxas, from
 * a plain mul and add) would fuse such a product and addition into one
 * FMA, whose single rounding now and then moves a weight to another
 * integer or a scale by an ulp: every product here is therefore written
 * __fmul_rn/__dmul_rn, which are never fused. Divisions and square roots
 * are IEEE here as there (the build must not use --use_fast_math).
 */
#ifndef LOOM_CUDA_QUANTIZE_WEIGHTS_CUH
#define LOOM_CUDA_QUANTIZE_WEIGHTS_CUH

#include "cuda_dequant.cuh"

#include <cfloat>
#include <climits>
#include <cmath>

/* ---- the CPU's scalar helpers ---- */

/* (int)v as x86-64 computes it (cvttss2si): truncated, and INT_MIN for NaN
 * or a value out of range, where CUDA's conversion saturates. Scales of
 * subnormal blocks can make such values. */
static __device__ __forceinline__ int quant_to_int(float v)
{
	return v >= -2147483648.0f && v < 2147483648.0f ? (int)v : INT_MIN;
}

static __device__ __forceinline__ int quant_to_int(double v)
{
	return v > -2147483649.0 && v < 2147483648.0 ? (int)v : INT_MIN;
}

static __device__ __forceinline__ int quant_nearest(float v)
{
	return quant_to_int(rintf(v));
}

static __device__ __forceinline__ int quant_clamp(int v, int lo, int hi)
{
	return v < lo ? lo : v > hi ? hi : v;
}

static __device__ __forceinline__ float quant_inverse(float d)
{
	return d != 0.0f ? 1.0f / d : 0.0f;
}

/* cpu_signed_max: the first element of largest magnitude, with its sign. */
static __device__ float quant_signed_max(const float *x, int n)
{
	float amax = 0.0f, max = 0.0f;
	for (int i = 0; i < n; i++) {
		float a = x[i] < 0.0f ? -x[i] : x[i];
		if (a > amax) {
			amax = a;
			max = x[i];
		}
	}
	return max;
}

/* ---- the 32-element types ----
 * The symmetric types put the element of largest magnitude at -8 (-16),
 * the types with a min span [min, max]; each weight is truncated after
 * adding the offset and one half. q gets the 32 unsigned integers. */

/* q = trunc((x - sub) * id + bias), at most qmax. */
static __device__ void quant_round_block(const float *x, float sub, float id, float bias, int qmax, uint8_t *q)
{
	for (int j = 0; j < CUDA_QK; j++) {
		int v = quant_to_int(__fmul_rn(x[j] - sub, id) + bias);
		q[j] = (uint8_t)(v < qmax ? v : qmax);
	}
}

/* Returns d. */
static __device__ float quant_symmetric(const float *x, int bits, uint8_t *q)
{
	float half = (float)(1 << (bits - 1));
	float d = quant_signed_max(x, CUDA_QK) / -half;
	quant_round_block(x, 0.0f, quant_inverse(d), half + 0.5f, (1 << bits) - 1, q);
	return d;
}

/* Returns d; *m gets the min. NaNs are skipped as the CPU's compares skip
 * them. */
static __device__ float quant_with_min(const float *x, int bits, uint8_t *q, float *m)
{
	int qmax = (1 << bits) - 1;
	float min = FLT_MAX, max = -FLT_MAX;
	for (int j = 0; j < CUDA_QK; j++) {
		min = x[j] < min ? x[j] : min;
		max = x[j] > max ? x[j] : max;
	}
	float d = (max - min) / (float)qmax;
	quant_round_block(x, min, quant_inverse(d), 0.5f, qmax, q);
	*m = min;
	return d;
}

static __device__ void quant_pack_nibbles(const uint8_t *q, uint8_t *qs)
{
	for (int j = 0; j < CUDA_QK / 2; j++)
		qs[j] = (uint8_t)((q[j] & 15) | (q[j + CUDA_QK / 2] & 15) << 4);
}

static __device__ void quant_pack_5bit(const uint8_t *q, uint8_t *qs, uint8_t *qh)
{
	uint32_t h = 0;
	quant_pack_nibbles(q, qs);
	for (int j = 0; j < CUDA_QK; j++)
		h |= (uint32_t)(q[j] >> 4 & 1) << j;
	for (int k = 0; k < 4; k++)
		qh[k] = (uint8_t)(h >> (8 * k));
}

static __device__ void quant_block_q4_0(const float *x, cuda_block_q4_0 *b)
{
	uint8_t q[CUDA_QK];
	b->d = cuda_f16_encode(quant_symmetric(x, 4, q));
	quant_pack_nibbles(q, b->qs);
}

static __device__ void quant_block_q4_1(const float *x, cuda_block_q4_1 *b)
{
	uint8_t q[CUDA_QK];
	float m;
	b->d = cuda_f16_encode(quant_with_min(x, 4, q, &m));
	b->m = cuda_f16_encode(m);
	quant_pack_nibbles(q, b->qs);
}

static __device__ void quant_block_q5_0(const float *x, cuda_block_q5_0 *b)
{
	uint8_t q[CUDA_QK];
	b->d = cuda_f16_encode(quant_symmetric(x, 5, q));
	quant_pack_5bit(q, b->qs, b->qh);
}

static __device__ void quant_block_q5_1(const float *x, cuda_block_q5_1 *b)
{
	uint8_t q[CUDA_QK];
	float m;
	b->d = cuda_f16_encode(quant_with_min(x, 5, q, &m));
	b->m = cuda_f16_encode(m);
	quant_pack_5bit(q, b->qs, b->qh);
}

/* With 1 / d, rounding halves away from zero. */
static __device__ void quant_block_q8_0(const float *x, cuda_block_q8_0 *b)
{
	float amax = fabsf(quant_signed_max(x, CUDA_QK));
	float d = amax / 127.0f, id = quant_inverse(d);
	b->d = cuda_f16_encode(d);
	for (int j = 0; j < CUDA_QK; j++)
		b->qs[j] = (int8_t)quant_to_int(roundf(__fmul_rn(x[j], id)));
}

/* ---- the K-quants: searching sub-block scales ----
 * Each sub-block is fitted on its own: candidate scales around the one
 * that puts its extremes at the ends of the integer range round the
 * weights, the least-squares scale (and min) for those integers is solved,
 * and the smallest error weighted by rms + |x| wins. The sub-block scales
 * are then quantized against an fp16 super-block scale and the weights
 * rounded again with the scales as decoded. */

#define QUANT_SEARCH_STEPS 20
#define QUANT_SEARCH_STEP 0.05f
#define QUANT_MAX_SUB 32 /* the longest sub-block */

static __device__ void quant_error_weights(const float *x, int n, float *w)
{
	float ss = 0.0f;
	for (int i = 0; i < n; i++)
		ss += __fmul_rn(x[i], x[i]);
	float rms = sqrtf(ss / (float)n);
	for (int i = 0; i < n; i++)
		w[i] = rms + fabsf(x[i]);
}

/* The weighted sums of the CPU's normal equations take f32 products
 * (w * q * x is f32 there: the int converts to float) into f64 sums. */
static __device__ double quant_solve_affine(const float *x, const float *w, const int *q, int n, float *scale,
					    float *min)
{
	double sw = 0, swq = 0, swqq = 0, swx = 0, swqx = 0, err = 0, s = 0, o = 0;
	for (int i = 0; i < n; i++) {
		float wq = __fmul_rn(w[i], (float)q[i]);
		sw += w[i];
		swq += wq;
		swqq += __fmul_rn(wq, (float)q[i]);
		swx += __fmul_rn(w[i], x[i]);
		swqx += __fmul_rn(wq, x[i]);
	}
	double det = __dmul_rn(sw, swqq) - __dmul_rn(swq, swq);
	if (det > 0) {
		s = (__dmul_rn(sw, swqx) - __dmul_rn(swq, swx)) / det;
		o = (__dmul_rn(swqq, swx) - __dmul_rn(swq, swqx)) / det;
	}
	/* The formats store the min unsigned: no positive offset. */
	if (det <= 0 || o > 0) {
		o = 0;
		s = swqq > 0 ? swqx / swqq : 0;
	}
	for (int i = 0; i < n; i++) {
		double e = __dmul_rn(s, (double)q[i]) + o - x[i];
		err += __dmul_rn(__dmul_rn(w[i], e), e);
	}
	*scale = (float)s;
	*min = (float)-o;
	return err;
}

/* x ~ scale * q - min, q in 0..nmax. */
static __device__ void quant_fit_affine(const float *x, const float *w, int n, int nmax, float *scale, float *min)
{
	float lo = 0.0f, hi = x[0];
	double best = INFINITY;
	int q[QUANT_MAX_SUB];

	for (int i = 0; i < n; i++) {
		lo = fminf(lo, x[i]);
		hi = fmaxf(hi, x[i]);
	}
	*scale = 0.0f;
	*min = -lo;
	if (hi <= lo)
		return;
	for (int k = -QUANT_SEARCH_STEPS; k <= QUANT_SEARCH_STEPS; k++) {
		float iscale = ((float)nmax + __fmul_rn(QUANT_SEARCH_STEP, (float)k)) / (hi - lo);
		float s, m;
		for (int i = 0; i < n; i++)
			q[i] = quant_clamp(quant_nearest(__fmul_rn(iscale, x[i] - lo)), 0, nmax);
		double err = quant_solve_affine(x, w, q, n, &s, &m);
		if (s >= 0.0f && err < best) {
			best = err;
			*scale = s;
			*min = m;
		}
	}
}

static __device__ double quant_solve_scale(const float *x, const float *w, const int *q, int n, float *scale)
{
	double swqq = 0, swqx = 0, err = 0;
	for (int i = 0; i < n; i++) {
		float wq = __fmul_rn(w[i], (float)q[i]);
		swqq += __fmul_rn(wq, (float)q[i]);
		swqx += __fmul_rn(wq, x[i]);
	}
	double s = swqq > 0 ? swqx / swqq : 0;
	for (int i = 0; i < n; i++) {
		double e = __dmul_rn(s, (double)q[i]) - x[i];
		err += __dmul_rn(__dmul_rn(w[i], e), e);
	}
	*scale = (float)s;
	return err;
}

/* x ~ scale * q, q in -nlo..nhi: lopsided, so the extreme element is tried
 * at either end and the scale may come out negative. */
static __device__ float quant_fit_symmetric(const float *x, const float *w, int n, int nlo, int nhi)
{
	float max = quant_signed_max(x, n), scale = 0.0f;
	double best = INFINITY;
	int q[QUANT_MAX_SUB];

	if (max == 0.0f)
		return 0.0f;
	for (int end = 0; end < 2; end++) {
		float target = end == 0 ? -(float)nlo : (float)nhi;
		for (int k = -QUANT_SEARCH_STEPS; k <= QUANT_SEARCH_STEPS; k++) {
			float iscale = (target + copysignf(__fmul_rn(QUANT_SEARCH_STEP, (float)k), target)) / max;
			float s;
			for (int i = 0; i < n; i++)
				q[i] = quant_clamp(quant_nearest(__fmul_rn(iscale, x[i])), -nlo, nhi);
			double err = quant_solve_scale(x, w, q, n, &s);
			if (err < best) {
				best = err;
				scale = s;
			}
		}
	}
	return scale;
}

/* ---- the K-quants: super-blocks ---- */

/* Non-negative sub-block values as integers 0..qmax of the returned step. */
static __device__ float quant_unsigned_steps(const float *v, int n, int qmax, uint8_t *out)
{
	float max = 0.0f;
	for (int j = 0; j < n; j++)
		max = fmaxf(max, v[j]);
	float step = max / (float)qmax;
	for (int j = 0; j < n; j++)
		out[j] = (uint8_t)(step > 0.0f ? quant_clamp(quant_nearest(v[j] / step), 0, qmax) : 0);
	return step;
}

/* Signed sub-block scales as integers -lo..lo-1, the largest in magnitude
 * at -lo; returns the step. */
static __device__ float quant_signed_steps(const float *v, int n, int lo, int *out)
{
	float max = quant_signed_max(v, n);
	if (max == 0.0f) {
		for (int j = 0; j < n; j++)
			out[j] = 0;
		return 0.0f;
	}
	float iscale = -(float)lo / max;
	for (int j = 0; j < n; j++)
		out[j] = quant_clamp(quant_nearest(__fmul_rn(iscale, v[j])), -lo, lo - 1);
	return 1.0f / iscale;
}

static __device__ void quant_round_affine(const float *x, int n, float dl, float ml, int nmax, int *q)
{
	for (int i = 0; i < n; i++)
		q[i] = dl > 0.0f ? quant_clamp(quant_nearest((x[i] + ml) / dl), 0, nmax) : 0;
}

/* The best integer min, in steps of dm, for the weights rounded with the
 * decoded scale dl (the fitted min no longer fits when quantizing the
 * scale moved it much). */
static __device__ int quant_refit_min(const float *x, const float *w, const int *q, int n, float dl, float dm,
				      int mmax)
{
	double sw = 0, swr = 0;
	for (int i = 0; i < n; i++) {
		sw += w[i];
		swr += __dmul_rn(w[i], __dmul_rn(dl, (double)q[i]) - x[i]);
	}
	return dm > 0.0f && sw > 0 ? quant_clamp(quant_to_int(nearbyint(swr / sw / dm)), 0, mmax) : 0;
}

static __device__ void quant_round_signed(const float *x, int n, float dl, int nlo, int nhi, int *q)
{
	for (int i = 0; i < n; i++)
		q[i] = dl != 0.0f ? quant_clamp(quant_nearest(x[i] / dl), -nlo, nhi) : 0;
}

/* Sub-blocks with mins (Q2_K, Q4_K, Q5_K): fits each, quantizes scales and
 * mins to bits-bit integers, rounds the weights again into q (256).
 * *d and *dmin get the fp16 steps. */
static __device__ void quant_with_mins(const float *x, int n_sub, int nmax, int bits, int *q, uint8_t *sc,
				       uint8_t *m, uint16_t *d, uint16_t *dmin)
{
	int len = CUDA_QK_K / n_sub, mmax = (1 << bits) - 1;
	float scales[16], mins[16], w[QUANT_MAX_SUB];

	for (int j = 0; j < n_sub; j++) {
		quant_error_weights(x + j * len, len, w);
		quant_fit_affine(x + j * len, w, len, nmax, &scales[j], &mins[j]);
	}
	*d = cuda_f16_encode(quant_unsigned_steps(scales, n_sub, mmax, sc));
	*dmin = cuda_f16_encode(quant_unsigned_steps(mins, n_sub, mmax, m));
	for (int j = 0; j < n_sub; j++) {
		const float *xj = x + j * len;
		float dl = __fmul_rn(cuda_f16_decode(*d), (float)sc[j]), dm = cuda_f16_decode(*dmin);

		quant_error_weights(xj, len, w);
		quant_round_affine(xj, len, dl, __fmul_rn(dm, (float)m[j]), nmax, q + j * len);
		m[j] = (uint8_t)quant_refit_min(xj, w, q + j * len, len, dl, dm, mmax);
		quant_round_affine(xj, len, dl, __fmul_rn(dm, (float)m[j]), nmax, q + j * len);
	}
}

/* Sub-blocks of 16 without mins (Q3_K, Q6_K): signed scales of
 * -sc_lo..sc_lo-1 and weights of -nlo..nhi. Returns the fp16 step. */
static __device__ uint16_t quant_signed_scales(const float *x, int nlo, int nhi, int sc_lo, int *q, int *sc)
{
	float scales[16], w[16];

	for (int j = 0; j < 16; j++) {
		quant_error_weights(x + 16 * j, 16, w);
		scales[j] = quant_fit_symmetric(x + 16 * j, w, 16, nlo, nhi);
	}
	uint16_t d = cuda_f16_encode(quant_signed_steps(scales, 16, sc_lo, sc));
	for (int j = 0; j < 16; j++)
		quant_round_signed(x + 16 * j, 16, __fmul_rn(cuda_f16_decode(d), (float)sc[j]), nlo, nhi, q + 16 * j);
	return d;
}

/* ---- the K-quants: packing (bit positions as cuda_dequant.cuh reads them) ---- */

static __device__ void quant_pack_2bit(const int *u, uint8_t *qs)
{
	for (int b = 0; b < CUDA_QK_K / 4; b++)
		qs[b] = 0;
	for (int e = 0; e < CUDA_QK_K; e++)
		qs[32 * (e / 128) + e % 32] |= (uint8_t)((u[e] & 3) << (2 * (e / 32 % 4)));
}

static __device__ void quant_pack_4bit(const int *u, uint8_t *qs)
{
	for (int b = 0; b < CUDA_QK_K / 2; b++)
		qs[b] = 0;
	for (int e = 0; e < CUDA_QK_K; e++)
		qs[32 * (e / 64) + e % 32] |= (uint8_t)((u[e] & 15) << (4 * (e / 32 % 2)));
}

/* Eight 6-bit scales and mins in 12 bytes (cuda_dequant_k_scale). */
static __device__ void quant_pack_scales_mins(const uint8_t *sc, const uint8_t *m, uint8_t *s)
{
	for (int j = 0; j < 4; j++) {
		s[j] = (uint8_t)(sc[j] | (sc[j + 4] >> 4) << 6);
		s[j + 4] = (uint8_t)(m[j] | (m[j + 4] >> 4) << 6);
		s[j + 8] = (uint8_t)((sc[j + 4] & 15) | (m[j + 4] & 15) << 4);
	}
}

static __device__ void quant_block_q2_k(const float *x, cuda_block_q2_k *b)
{
	int q[CUDA_QK_K];
	uint8_t sc[16], m[16];

	quant_with_mins(x, 16, 3, 4, q, sc, m, &b->d, &b->dmin);
	for (int j = 0; j < 16; j++)
		b->scales[j] = (uint8_t)(sc[j] | m[j] << 4);
	quant_pack_2bit(q, b->qs);
}

static __device__ void quant_block_q3_k(const float *x, cuda_block_q3_k *b)
{
	int q[CUDA_QK_K], sc[16];

	b->d = quant_signed_scales(x, 4, 3, 32, q, sc);
	for (int l = 0; l < CUDA_QK_K / 8; l++)
		b->hmask[l] = 0;
	for (int k = 0; k < CUDA_K_SCALE_BYTES; k++)
		b->scales[k] = 0;
	for (int e = 0; e < CUDA_QK_K; e++) {
		q[e] += 4;
		b->hmask[e % 32] |= (uint8_t)((q[e] >> 2) << (e / 32));
	}
	quant_pack_2bit(q, b->qs);
	for (int j = 0; j < 16; j++) {
		int u = sc[j] + 32;
		b->scales[j % 8] |= (uint8_t)((u & 15) << (4 * (j / 8)));
		b->scales[8 + j % 4] |= (uint8_t)((u >> 4) << (2 * (j / 4)));
	}
}

/* What Q4_K and Q5_K (B) share: q (256) gets the weights, 0..nmax; b its
 * steps, its eight 6-bit scales and mins, and the low 4 bits of each weight. */
template <typename B> static __device__ void quant_k_with_mins(const float *x, int nmax, int *q, B *b)
{
	uint8_t sc[8], m[8];

	quant_with_mins(x, 8, nmax, 6, q, sc, m, &b->d, &b->dmin);
	quant_pack_scales_mins(sc, m, b->scales);
	quant_pack_4bit(q, b->qs);
}

static __device__ void quant_block_q4_k(const float *x, cuda_block_q4_k *b)
{
	int q[CUDA_QK_K];

	quant_k_with_mins(x, 15, q, b);
}

static __device__ void quant_block_q5_k(const float *x, cuda_block_q5_k *b)
{
	int q[CUDA_QK_K];

	quant_k_with_mins(x, 31, q, b);
	for (int l = 0; l < CUDA_QK_K / 8; l++)
		b->qh[l] = 0;
	for (int e = 0; e < CUDA_QK_K; e++)
		b->qh[e % 32] |= (uint8_t)((q[e] >> 4) << (e / 32));
}

static __device__ void quant_block_q6_k(const float *x, cuda_block_q6_k *b)
{
	int q[CUDA_QK_K], sc[16];

	b->d = quant_signed_scales(x, 32, 31, 128, q, sc);
	for (int j = 0; j < 16; j++)
		b->scales[j] = (int8_t)sc[j];
	for (int l = 0; l < CUDA_QK_K / 2; l++)
		b->ql[l] = 0;
	for (int l = 0; l < CUDA_QK_K / 4; l++)
		b->qh[l] = 0;
	for (int e = 0; e < CUDA_QK_K; e++) {
		int half = e / 128, k = e % 128 / 32, l = e % 32, u = q[e] + 32;
		b->ql[64 * half + 32 * (k % 2) + l] |= (uint8_t)((u & 15) << (4 * (k / 2)));
		b->qh[32 * half + l] |= (uint8_t)((u >> 4) << (2 * k));
	}
}

/* ---- MXFP4 ----
 * ggml's reference: e puts the block's largest magnitude in [4, 8) of the
 * doubled values' units, and each weight takes the nearest value, the
 * first of the table on a tie. */

static __device__ uint8_t quant_nearest_mxfp4(float x, float d)
{
	int best = 0;
	float best_err = fabsf(__fmul_rn((float)cuda_mxfp4_value(0), d) - x);
	for (int i = 1; i < 16; i++) {
		float err = fabsf(__fmul_rn((float)cuda_mxfp4_value(i), d) - x);
		if (err < best_err) {
			best = i;
			best_err = err;
		}
	}
	return (uint8_t)best;
}

static __device__ void quant_block_mxfp4(const float *x, cuda_block_mxfp4 *b)
{
	float amax = 0.0f;
	for (int j = 0; j < CUDA_QK; j++)
		amax = fmaxf(amax, fabsf(x[j]));
	/* The exponent wraps to a byte as the CPU's conversion does. */
	b->e = amax > 0.0f ? (uint8_t)quant_to_int(floorf(log2f(amax)) - 2 + 127) : 0;
	const float d = cuda_mxfp4_half_scale(b->e);
	for (int j = 0; j < CUDA_QK / 2; j++)
		b->qs[j] = (uint8_t)(quant_nearest_mxfp4(x[j], d) | quant_nearest_mxfp4(x[j + CUDA_QK / 2], d) << 4);
}

/* ---- any type ---- */

/* Every dtype encoded by a block quantizer here, as X(dtype) for each. */
#define CUDA_QUANTIZE_DTYPES(X)                                                                          \
	X(LOOM_DTYPE_Q4_0) X(LOOM_DTYPE_Q4_1) X(LOOM_DTYPE_Q5_0) X(LOOM_DTYPE_Q5_1) X(LOOM_DTYPE_Q8_0)     \
	X(LOOM_DTYPE_Q2_K) X(LOOM_DTYPE_Q3_K) X(LOOM_DTYPE_Q4_K) X(LOOM_DTYPE_Q5_K) X(LOOM_DTYPE_Q6_K)     \
	X(LOOM_DTYPE_MXFP4)

/* Block b of a row of type, for x[0 .. cuda_dequant_block_len(type)):
 * built in local memory and stored in one piece. With a compile-time type
 * the switch folds away. */
static __device__ __forceinline__ void cuda_quantize_block(loom_dtype type, const float *x, void *row, int64_t b)
{
#define CUDA_QUANTIZE_CASE(t, name)                         \
	case t: {                                           \
		cuda_block_##name block;                    \
		quant_block_##name(x, &block);              \
		((cuda_block_##name *)row)[b] = block;      \
		break;                                      \
	}
	switch (type) {
	CUDA_QUANTIZE_CASE(LOOM_DTYPE_Q4_0, q4_0)
	CUDA_QUANTIZE_CASE(LOOM_DTYPE_Q4_1, q4_1)
	CUDA_QUANTIZE_CASE(LOOM_DTYPE_Q5_0, q5_0)
	CUDA_QUANTIZE_CASE(LOOM_DTYPE_Q5_1, q5_1)
	CUDA_QUANTIZE_CASE(LOOM_DTYPE_Q8_0, q8_0)
	CUDA_QUANTIZE_CASE(LOOM_DTYPE_Q2_K, q2_k)
	CUDA_QUANTIZE_CASE(LOOM_DTYPE_Q3_K, q3_k)
	CUDA_QUANTIZE_CASE(LOOM_DTYPE_Q4_K, q4_k)
	CUDA_QUANTIZE_CASE(LOOM_DTYPE_Q5_K, q5_k)
	CUDA_QUANTIZE_CASE(LOOM_DTYPE_Q6_K, q6_k)
	CUDA_QUANTIZE_CASE(LOOM_DTYPE_MXFP4, mxfp4)
	default:
		break;
	}
#undef CUDA_QUANTIZE_CASE
}

#endif
