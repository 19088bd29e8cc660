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

/* cpu_quant_k_search.c's nearest: bounded to +-2^20 first, so that a NaN
 * or infinite value converts to a defined integer (NaN to -2^20). */
static __device__ __forceinline__ int quant_nearest(float v)
{
	v = v > -1048576.0f ? v : -1048576.0f;
	return (int)rintf(v < 1048576.0f ? v : 1048576.0f);
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

/* v rounded to an integer in [lo, hi], as a float; NaN stays NaN. */
static __device__ __forceinline__ float quant_rounded(float v, float lo, float hi)
{
	float q = rintf(v);
	q = q < lo ? lo : q;
	return q > hi ? hi : q;
}

#define QUANT_CANDIDATES (2 * QUANT_SEARCH_STEPS + 1)

/* A candidate is judged by its weighted squared error at the least-squares
 * scale (and min), from sums over the sub-block: those of w, w x and w x x
 * (f64, the same for every candidate), and those of w q, w q q and w q x
 * (f32, per candidate), in the CPU's order. */
struct quant_fixed_sums {
	double w, wx, wxx;
};

static __device__ quant_fixed_sums quant_sums_of(const float *x, const float *w, int n)
{
	quant_fixed_sums f = {0, 0, 0};
	for (int i = 0; i < n; i++) {
		double wx = __dmul_rn((double)w[i], (double)x[i]);
		f.w += w[i];
		f.wx += wx;
		f.wxx += __dmul_rn(wx, (double)x[i]);
	}
	return f;
}

/* The least-squares scale and min (kept >= 0: the formats store it
 * unsigned) for the sums given; returns the error left, expanded into the
 * sums. */
static __device__ double quant_solve_affine(const quant_fixed_sums *f, double swq, double swqq, double swqx,
					    float *scale, float *min)
{
	double s = 0, o = 0;
	double det = __dmul_rn(f->w, swqq) - __dmul_rn(swq, swq);
	if (det > 0) {
		s = (__dmul_rn(f->w, swqx) - __dmul_rn(swq, f->wx)) / det;
		o = (__dmul_rn(swqq, f->wx) - __dmul_rn(swq, swqx)) / det;
	}
	if (det <= 0 || o > 0) {
		o = 0;
		s = swqq > 0 ? swqx / swqq : 0;
	}
	*scale = (float)s;
	*min = (float)-o;
	return __dmul_rn(__dmul_rn(s, s), swqq) + __dmul_rn(__dmul_rn(2 * s, o), swq) + __dmul_rn(__dmul_rn(o, o), f->w) -
	       __dmul_rn(2 * s, swqx) - __dmul_rn(2 * o, f->wx) + f->wxx;
}

/* x ~ scale * q - min, q in 0..nmax. */
static __device__ void quant_fit_affine(const float *x, const float *w, int n, int nmax, float *scale, float *min)
{
	float lo = 0.0f, hi = x[0];
	float iscale[QUANT_CANDIDATES], swq[QUANT_CANDIDATES], swqq[QUANT_CANDIDATES], swqx[QUANT_CANDIDATES];
	double best = INFINITY;

	for (int i = 0; i < n; i++) {
		lo = lo < x[i] ? lo : x[i];
		hi = hi > x[i] ? hi : x[i];
	}
	*scale = 0.0f;
	*min = -lo;
	if (!(hi > lo))
		return;
	for (int c = 0; c < QUANT_CANDIDATES; c++) {
		iscale[c] = ((float)nmax + __fmul_rn(QUANT_SEARCH_STEP, (float)(c - QUANT_SEARCH_STEPS))) / (hi - lo);
		swq[c] = swqq[c] = swqx[c] = 0.0f;
	}
	for (int i = 0; i < n; i++) {
		const float d = x[i] - lo, wi = w[i], xi = x[i];
		for (int c = 0; c < QUANT_CANDIDATES; c++) {
			float q = quant_rounded(__fmul_rn(iscale[c], d), 0.0f, (float)nmax), wq = __fmul_rn(wi, q);
			swq[c] += wq;
			swqq[c] += __fmul_rn(wq, q);
			swqx[c] += __fmul_rn(wq, xi);
		}
	}
	const quant_fixed_sums f = quant_sums_of(x, w, n);
	for (int c = 0; c < QUANT_CANDIDATES; c++) {
		float s, m;
		double err = quant_solve_affine(&f, swq[c], swqq[c], swqx[c], &s, &m);
		if (s >= 0.0f && err < best) {
			best = err;
			*scale = s;
			*min = m;
		}
	}
}

/* x ~ scale * q, q in -nlo..nhi: lopsided, so the extreme element is tried
 * at either end and the scale may come out negative. The error at the
 * least-squares scale swqx / swqq is wxx - swqx^2 / swqq: the candidate
 * with the largest swqx^2 / swqq wins. */
static __device__ float quant_fit_symmetric(const float *x, const float *w, int n, int nlo, int nhi)
{
	float max = quant_signed_max(x, n), scale = 0.0f, best = -1.0f;
	float iscale[2 * QUANT_CANDIDATES], swqq[2 * QUANT_CANDIDATES], swqx[2 * QUANT_CANDIDATES];

	if (max == 0.0f)
		return 0.0f;
	for (int c = 0; c < 2 * QUANT_CANDIDATES; c++) {
		float target = c < QUANT_CANDIDATES ? -(float)nlo : (float)nhi;
		float step = __fmul_rn(QUANT_SEARCH_STEP, (float)(c % QUANT_CANDIDATES - QUANT_SEARCH_STEPS));
		iscale[c] = (target + copysignf(step, target)) / max;
		swqq[c] = swqx[c] = 0.0f;
	}
	for (int i = 0; i < n; i++) {
		const float wi = w[i], xi = x[i];
		for (int c = 0; c < 2 * QUANT_CANDIDATES; c++) {
			float q = quant_rounded(__fmul_rn(iscale[c], xi), -(float)nlo, (float)nhi), wq = __fmul_rn(wi, q);
			swqq[c] += __fmul_rn(wq, q);
			swqx[c] += __fmul_rn(wq, xi);
		}
	}
	for (int c = 0; c < 2 * QUANT_CANDIDATES; c++) {
		float gain = swqq[c] > 0.0f ? __fmul_rn(swqx[c], swqx[c]) / swqq[c] : 0.0f;
		if (gain > best) {
			best = gain;
			scale = swqq[c] > 0.0f ? swqx[c] / swqq[c] : 0.0f;
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
		max = v[j] > max ? v[j] : max; /* never -0 (cpu_quant_k_search.c) */
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
	/* The exponent wraps to a byte as the CPU's conversion does. Its
	 * log2f is the correctly rounded one (the float nearest the exact
	 * value): just below a power of two it rounds up to the integer, so
	 * the floor is not the exponent's bits. The device's log2f may be an
	 * ulp off there; the double log2 rounded to float is not (it gives
	 * glibc's floor for every normal float). */
	b->e = amax > 0.0f ? (uint8_t)quant_to_int(floorf(__double2float_rn(log2((double)amax))) - 2 + 127) : 0;
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
