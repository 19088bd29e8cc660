/*
 * cpu_quant_k_search.c - the K-quant weight quantizers: choosing sub-block
 * scales (and mins) that keep the squared error small.
 *
 * Each sub-block is fitted on its own. A range of candidate scales around
 * the obvious one (the sub-block's extremes at the ends of the integer
 * range) is tried; each candidate rounds the weights to integers, the
 * least-squares scale (and min) for those integers is solved in closed
 * form, and the candidate that leaves the smallest error wins. The errors
 * are weighted by rms + |x|, which favours the large weights of a sub-block
 * a little: they carry most of a dot product. The sub-block scales are then
 * quantized against one fp16 super-block scale, and the weights rounded
 * once more with the scales exactly as they will be decoded.
 */
#include "cpu_quant.h"

#include "cpu_half.h"

#include <math.h>
#include <string.h>

/* Candidate scales put the sub-block's extreme at the end of the range
 * +- SEARCH_STEPS * SEARCH_STEP integer steps. */
#define SEARCH_STEPS 20
#define SEARCH_STEP 0.05f

#define MAX_SUB 32 /* the longest sub-block */

/* Every caller clamps the result to a range far inside +-2^20. Weights
 * that are not finite (a hostile file quantized at load) make v NaN or
 * +-inf; bounded first, their conversion stays defined. */
static int nearest(float v)
{
	v = v > -0x1p20f ? v : -0x1p20f;
	return (int)rintf(v < 0x1p20f ? v : 0x1p20f);
}

static int clamp(int v, int lo, int hi)
{
	return v < lo ? lo : v > hi ? hi : v;
}

static void error_weights(const float *x, int n, float *w)
{
	float ss = 0.0f;

	for (int i = 0; i < n; i++)
		ss += x[i] * x[i];
	float rms = sqrtf(ss / (float)n);
	for (int i = 0; i < n; i++)
		w[i] = rms + fabsf(x[i]);
}

#define N_CANDIDATES (2 * SEARCH_STEPS + 1)

/* Each candidate is judged by its weighted squared error at the
 * least-squares scale (and min), which follows from a few sums over the
 * sub-block: those of w, w x and w x x are the same for every candidate;
 * those of w q, w q q and w q x are gathered for all candidates at once,
 * weight by weight, one candidate per vector lane. */
typedef struct fixed_sums {
	double w, wx, wxx;
} fixed_sums;

static fixed_sums sums_of(const float *x, const float *w, int n)
{
	fixed_sums f = {0, 0, 0};
	for (int i = 0; i < n; i++) {
		f.w += w[i];
		f.wx += (double)w[i] * x[i];
		f.wxx += (double)w[i] * x[i] * x[i];
	}
	return f;
}

/* v rounded to an integer in [lo, hi], as a float; NaN stays NaN (its
 * sums then lose every comparison), with no conversion to an integer. */
static inline float rounded(float v, float lo, float hi)
{
	float q = rintf(v);
	q = q < lo ? lo : q;
	return q > hi ? hi : q;
}

/* ---- sub-blocks with a min: x ~ scale * q - min, q in 0..nmax ---- */

/* The weighted least-squares scale and min for the integers whose sums
 * are given, the min kept >= 0 (the formats store it unsigned); returns
 * the error left, sum of w (s q + o - x)^2, expanded into the sums. */
static double solve_affine(const fixed_sums *f, double swq, double swqq, double swqx, float *scale, float *min)
{
	double s = 0, o = 0;
	double det = f->w * swqq - swq * swq;
	if (det > 0) {
		s = (f->w * swqx - swq * f->wx) / det;
		o = (swqq * f->wx - swq * swqx) / det;
	}
	if (det <= 0 || o > 0) {
		o = 0;
		s = swqq > 0 ? swqx / swqq : 0;
	}
	*scale = (float)s;
	*min = (float)-o;
	return s * s * swqq + 2 * s * o * swq + o * o * f->w - 2 * s * swqx - 2 * o * f->wx + f->wxx;
}

static void fit_affine(const float *x, const float *w, int n, int nmax, float *scale, float *min)
{
	float lo = 0.0f, hi = x[0];
	float iscale[N_CANDIDATES], swq[N_CANDIDATES], swqq[N_CANDIDATES], swqx[N_CANDIDATES];
	double best = INFINITY;

	for (int i = 0; i < n; i++) {
		lo = lo < x[i] ? lo : x[i];
		hi = hi > x[i] ? hi : x[i];
	}
	*scale = 0.0f;
	*min = -lo;
	if (!(hi > lo))
		return;
	for (int c = 0; c < N_CANDIDATES; c++) {
		iscale[c] = ((float)nmax + SEARCH_STEP * (float)(c - SEARCH_STEPS)) / (hi - lo);
		swq[c] = swqq[c] = swqx[c] = 0.0f;
	}
	for (int i = 0; i < n; i++) {
		const float d = x[i] - lo, wi = w[i], xi = x[i];
#pragma omp simd
		for (int c = 0; c < N_CANDIDATES; c++) {
			float q = rounded(iscale[c] * d, 0.0f, (float)nmax), wq = wi * q;
			swq[c] += wq;
			swqq[c] += wq * q;
			swqx[c] += wq * xi;
		}
	}
	const fixed_sums f = sums_of(x, w, n);
	for (int c = 0; c < N_CANDIDATES; c++) {
		float s, m;
		double err = solve_affine(&f, swq[c], swqq[c], swqx[c], &s, &m);
		if (s >= 0.0f && err < best) {
			best = err;
			*scale = s;
			*min = m;
		}
	}
}

/* ---- sub-blocks without: x ~ scale * q, q in -nlo..nhi ---- */

/* The range is lopsided (-4..3, -32..31), so the extreme element is tried
 * at either end; the scale may come out negative. The error at the
 * least-squares scale swqx / swqq is wxx - swqx^2 / swqq, so the best
 * candidate is the one with the largest swqx^2 / swqq. */
static float fit_symmetric(const float *x, const float *w, int n, int nlo, int nhi)
{
	float max = cpu_signed_max(x, n), scale = 0.0f;
	float iscale[2 * N_CANDIDATES], swqq[2 * N_CANDIDATES], swqx[2 * N_CANDIDATES];
	float best = -1.0f;

	if (max == 0.0f)
		return 0.0f;
	for (int c = 0; c < 2 * N_CANDIDATES; c++) {
		float target = c < N_CANDIDATES ? -(float)nlo : (float)nhi;
		float step = SEARCH_STEP * (float)(c % N_CANDIDATES - SEARCH_STEPS);
		iscale[c] = (target + copysignf(step, target)) / max;
		swqq[c] = swqx[c] = 0.0f;
	}
	for (int i = 0; i < n; i++) {
		const float wi = w[i], xi = x[i];
#pragma omp simd
		for (int c = 0; c < 2 * N_CANDIDATES; c++) {
			float q = rounded(iscale[c] * xi, -(float)nlo, (float)nhi), wq = wi * q;
			swqq[c] += wq * q;
			swqx[c] += wq * xi;
		}
	}
	for (int c = 0; c < 2 * N_CANDIDATES; c++) {
		float gain = swqq[c] > 0.0f ? swqx[c] * swqx[c] / swqq[c] : 0.0f;
		if (gain > best) {
			best = gain;
			scale = swqq[c] > 0.0f ? swqx[c] / swqq[c] : 0.0f;
		}
	}
	return scale;
}

/* ---- super-blocks ---- */

/* Non-negative sub-block values as integers 0..qmax of a step that is
 * returned (the step to store in fp16). */
static float quantize_unsigned(const float *v, int n, int qmax, uint8_t *out)
{
	float max = 0.0f;

	/* Not fmaxf: of +0 and -0 (the min of a sub-block with no negative
	 * weight) it may return either, and compilers swap its operands, so
	 * that the step's fp16 would be 0 or -0 by the build. */
	for (int j = 0; j < n; j++)
		max = v[j] > max ? v[j] : max;
	float step = max / (float)qmax;
	for (int j = 0; j < n; j++)
		out[j] = (uint8_t)(step > 0.0f ? clamp(nearest(v[j] / step), 0, qmax) : 0);
	return step;
}

/* Signed sub-block scales as integers -lo..lo-1, the largest in magnitude
 * at -lo; returns the step (negative when that scale is positive). */
static float quantize_signed(const float *v, int n, int lo, int *out)
{
	float max = cpu_signed_max(v, n);

	if (max == 0.0f) {
		memset(out, 0, sizeof(*out) * (size_t)n);
		return 0.0f;
	}
	float iscale = -(float)lo / max;
	for (int j = 0; j < n; j++)
		out[j] = clamp(nearest(iscale * v[j]), -lo, lo - 1);
	return 1.0f / iscale;
}

/* The weights of a sub-block rounded with its decoded scale and min. */
static void round_affine(const float *x, int n, float dl, float ml, int nmax, int *q)
{
	for (int i = 0; i < n; i++)
		q[i] = dl > 0.0f ? clamp(nearest((x[i] + ml) / dl), 0, nmax) : 0;
}

/* The best integer min, in steps of dm, for the weights rounded with the
 * decoded scale dl: the min fitted with the undecoded scale no longer fits
 * when quantizing the scales changed it much (down to 0 when the fp16 step
 * underflows), and would then do worse than no min at all. */
static int refit_min(const float *x, const float *w, const int *q, int n, float dl, float dm,
		     int mmax)
{
	double sw = 0, swr = 0;

	for (int i = 0; i < n; i++) {
		sw += w[i];
		swr += w[i] * ((double)dl * q[i] - x[i]);
	}
	return dm > 0.0f && sw > 0 ? clamp((int)nearbyint(swr / sw / dm), 0, mmax) : 0;
}

static void round_signed(const float *x, int n, float dl, int nlo, int nhi, int *q)
{
	for (int i = 0; i < n; i++)
		q[i] = dl != 0.0f ? clamp(nearest(x[i] / dl), -nlo, nhi) : 0;
}

/* The fp16 steps of a super-block's scales and mins. */
typedef struct k_steps {
	uint16_t d, dmin;
} k_steps;

/* Sub-blocks with mins (Q2_K, Q4_K, Q5_K): fits every sub-block, quantizes
 * the scales and mins to bits-bit integers, and rounds the weights again.
 * q gets the 256 integers. */
static k_steps quantize_with_mins(const float *x, int n_sub, int nmax, int bits, int *q,
				  uint8_t *sc, uint8_t *m)
{
	int len = CPU_QK_K / n_sub;
	float scales[16], mins[16], w[MAX_SUB];
	k_steps st;

	for (int j = 0; j < n_sub; j++) {
		error_weights(x + j * len, len, w);
		fit_affine(x + j * len, w, len, nmax, &scales[j], &mins[j]);
	}
	st.d = cpu_f32_to_fp16(quantize_unsigned(scales, n_sub, (1 << bits) - 1, sc));
	st.dmin = cpu_f32_to_fp16(quantize_unsigned(mins, n_sub, (1 << bits) - 1, m));
	for (int j = 0; j < n_sub; j++) {
		const float *xj = x + j * len;
		float dl = cpu_fp16_to_f32(st.d) * (float)sc[j], dm = cpu_fp16_to_f32(st.dmin);

		error_weights(xj, len, w);
		round_affine(xj, len, dl, dm * (float)m[j], nmax, q + j * len);
		m[j] = (uint8_t)refit_min(xj, w, q + j * len, len, dl, dm, (1 << bits) - 1);
		round_affine(xj, len, dl, dm * (float)m[j], nmax, q + j * len);
	}
	return st;
}

/* Sub-blocks of 16 without mins (Q3_K, Q6_K): as above with signed scales
 * of -sc_lo..sc_lo-1 and weights of -nlo..nhi. Returns the fp16 step. */
static uint16_t quantize_signed_scales(const float *x, int nlo, int nhi, int sc_lo, int *q,
				       int *sc)
{
	float scales[16], w[16];

	for (int j = 0; j < 16; j++) {
		error_weights(x + 16 * j, 16, w);
		scales[j] = fit_symmetric(x + 16 * j, w, 16, nlo, nhi);
	}
	uint16_t d = cpu_f32_to_fp16(quantize_signed(scales, 16, sc_lo, sc));
	for (int j = 0; j < 16; j++)
		round_signed(x + 16 * j, 16, cpu_fp16_to_f32(d) * (float)sc[j], nlo, nhi, q + 16 * j);
	return d;
}

/* ---- packing (the bit positions are described in cpu_quant_k.c) ---- */

static void pack_2bit(const int *u, uint8_t *qs)
{
	memset(qs, 0, CPU_QK_K / 4);
	for (int e = 0; e < CPU_QK_K; e++)
		qs[32 * (e / 128) + e % 32] |= (uint8_t)((u[e] & 3) << (2 * (e / 32 % 4)));
}

static void pack_4bit(const int *u, uint8_t *qs)
{
	memset(qs, 0, CPU_QK_K / 2);
	for (int e = 0; e < CPU_QK_K; e++)
		qs[32 * (e / 64) + e % 32] |= (uint8_t)((u[e] & 15) << (4 * (e / 32 % 2)));
}

/* Inverse of cpu_k_scale_min. */
static void pack_scales_mins(const uint8_t *sc, const uint8_t *m, uint8_t *s)
{
	for (int j = 0; j < 4; j++) {
		s[j] = (uint8_t)(sc[j] | (sc[j + 4] >> 4) << 6);
		s[j + 4] = (uint8_t)(m[j] | (m[j + 4] >> 4) << 6);
		s[j + 8] = (uint8_t)((sc[j + 4] & 15) | (m[j + 4] & 15) << 4);
	}
}

static void quantize_q2_k_block(const float *x, cpu_block_q2_k *b)
{
	int q[CPU_QK_K];
	uint8_t sc[16], m[16];

	k_steps st = quantize_with_mins(x, 16, 3, 4, q, sc, m);

	b->d = st.d;
	b->dmin = st.dmin;
	for (int j = 0; j < 16; j++)
		b->scales[j] = (uint8_t)(sc[j] | m[j] << 4);
	pack_2bit(q, b->qs);
}

static void quantize_q3_k_block(const float *x, cpu_block_q3_k *b)
{
	int q[CPU_QK_K], sc[16];

	b->d = quantize_signed_scales(x, 4, 3, 32, q, sc);
	memset(b->hmask, 0, sizeof(b->hmask));
	memset(b->scales, 0, sizeof(b->scales));
	for (int e = 0; e < CPU_QK_K; e++) {
		q[e] += 4;
		b->hmask[e % 32] |= (uint8_t)((q[e] >> 2) << (e / 32));
	}
	pack_2bit(q, b->qs);
	for (int j = 0; j < 16; j++) {
		int u = sc[j] + 32;
		b->scales[j % 8] |= (uint8_t)((u & 15) << (4 * (j / 8)));
		b->scales[8 + j % 4] |= (uint8_t)((u >> 4) << (2 * (j / 4)));
	}
}

static void quantize_q4_k_block(const float *x, cpu_block_q4_k *b)
{
	int q[CPU_QK_K];
	uint8_t sc[8], m[8];

	k_steps st = quantize_with_mins(x, 8, 15, 6, q, sc, m);

	b->d = st.d;
	b->dmin = st.dmin;
	pack_scales_mins(sc, m, b->scales);
	pack_4bit(q, b->qs);
}

static void quantize_q5_k_block(const float *x, cpu_block_q5_k *b)
{
	int q[CPU_QK_K];
	uint8_t sc[8], m[8];

	k_steps st = quantize_with_mins(x, 8, 31, 6, q, sc, m);

	b->d = st.d;
	b->dmin = st.dmin;
	pack_scales_mins(sc, m, b->scales);
	pack_4bit(q, b->qs);
	memset(b->qh, 0, sizeof(b->qh));
	for (int e = 0; e < CPU_QK_K; e++)
		b->qh[e % 32] |= (uint8_t)((q[e] >> 4) << (e / 32));
}

static void quantize_q6_k_block(const float *x, cpu_block_q6_k *b)
{
	int q[CPU_QK_K], sc[16];

	b->d = quantize_signed_scales(x, 32, 31, 128, q, sc);
	for (int j = 0; j < 16; j++)
		b->scales[j] = (int8_t)sc[j];
	memset(b->ql, 0, sizeof(b->ql));
	memset(b->qh, 0, sizeof(b->qh));
	for (int e = 0; e < CPU_QK_K; e++) {
		int half = e / 128, k = e % 128 / 32, l = e % 32, u = q[e] + 32;
		b->ql[64 * half + l + 32 * (k % 2)] |= (uint8_t)((u & 15) << (4 * (k / 2)));
		b->qh[32 * half + l] |= (uint8_t)((u >> 4) << (2 * k));
	}
}

#define K_QUANTIZE_ROW(name)                                                         \
	void cpu_quantize_row_##name(const float *x, void *blocks, int64_t n)        \
	{                                                                            \
		for (int64_t i = 0; i < n / CPU_QK_K; i++)                           \
			quantize_##name##_block(x + i * CPU_QK_K,                    \
						(cpu_block_##name *)blocks + i);     \
	}

K_QUANTIZE_ROW(q2_k)
K_QUANTIZE_ROW(q3_k)
K_QUANTIZE_ROW(q4_k)
K_QUANTIZE_ROW(q5_k)
K_QUANTIZE_ROW(q6_k)
