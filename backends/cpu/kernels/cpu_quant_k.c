/*
 * cpu_quant_k.c - the K-quants Q2_K, Q3_K, Q4_K, Q5_K and Q6_K: decoding
 * and dot products with Q8_K activations (their quantizers are in
 * cpu_quant_k_search.c).
 *
 * A super-block is first unpacked to its 256 integers q (element e at q[e])
 * and its sub-block scales (and mins) as small integers. The arithmetic
 * then follows ggml's: a sub-block's f32 scale is d * sc (exact, as d is
 * fp16 and sc has at most 8 bits), a weight is that times q, less dmin * m;
 * a dot product sums sc * q * q_x and m * (sums of q_x) exactly per
 * super-block and scales them by f32(d_x * d) and f32(d_x * dmin).
 */
#include "cpu_quant.h"

#include "cpu_half.h"

/* ---- unpacking ----
 * Q2_K and Q3_K: in each half of 128 elements, byte l of its 32 bytes of qs
 * holds bits 2j..2j+1 of element 32j + l; Q3_K's third bit, set for q >= 0
 * (clear subtracts 4), is bit 4 * half + j of hmask[l].
 * Q4_K and Q5_K: each 64 elements share 32 bytes of qs, the first 32 in the
 * low nibbles; Q5_K's bit 4 of element 32j + l is bit j of qh[l].
 * Q6_K: in each half of 128, elements l, l + 32, l + 64, l + 96 (l < 32)
 * take the low nibbles of ql[l] and ql[l + 32], then their high nibbles,
 * and bits 0-1, 2-3, 4-5, 6-7 of qh[l] on top; less 32. */

static void unpack_2bit(const uint8_t *qs, int8_t *q)
{
	for (int half = 0; half < 2; half++)
		for (int j = 0; j < 4; j++)
			for (int l = 0; l < 32; l++)
				q[128 * half + 32 * j + l] = (int8_t)((qs[32 * half + l] >> (2 * j)) & 3);
}

static void unpack_q2_k(const cpu_block_q2_k *b, cpu_k_block *k)
{
	unpack_2bit(b->qs, k->q);
	k->n_sub = 16;
	for (int j = 0; j < 16; j++) {
		k->sc[j] = b->scales[j] & 15;
		k->m[j] = b->scales[j] >> 4;
	}
	k->d = cpu_fp16_to_f32(b->d);
	k->dmin = cpu_fp16_to_f32(b->dmin);
}

/* Sixteen 6-bit scales: the low 4 bits in the nibbles of bytes 0..7 (low
 * nibbles first), the top 2 in bytes 8..11, two bits per scale. */
static int q3_k_scale(const uint8_t *s, int j)
{
	int lo = j < 8 ? s[j] & 15 : s[j - 8] >> 4;
	int hi = (s[8 + j % 4] >> (2 * (j / 4))) & 3;
	return (lo | hi << 4) - 32;
}

static void unpack_q3_k(const cpu_block_q3_k *b, cpu_k_block *k)
{
	unpack_2bit(b->qs, k->q);
	for (int bit = 0; bit < 8; bit++)
		for (int l = 0; l < 32; l++)
			k->q[32 * bit + l] -= (int8_t)(((b->hmask[l] >> bit) & 1) ? 0 : 4);
	k->n_sub = 16;
	for (int j = 0; j < 16; j++) {
		k->sc[j] = (int16_t)q3_k_scale(b->scales, j);
		k->m[j] = 0;
	}
	k->d = cpu_fp16_to_f32(b->d);
	k->dmin = 0.0f;
}

static void unpack_4bit(const uint8_t *qs, int8_t *q)
{
	for (int c = 0; c < 4; c++) {
		for (int l = 0; l < 32; l++) {
			q[64 * c + l] = (int8_t)(qs[32 * c + l] & 15);
			q[64 * c + 32 + l] = (int8_t)(qs[32 * c + l] >> 4);
		}
	}
}

static void unpack_scales_mins(const uint8_t *scales, cpu_k_block *k)
{
	k->n_sub = 8;
	for (int j = 0; j < 8; j++) {
		uint8_t sc, m;
		cpu_k_scale_min(scales, j, &sc, &m);
		k->sc[j] = sc;
		k->m[j] = m;
	}
}

static void unpack_q4_k(const cpu_block_q4_k *b, cpu_k_block *k)
{
	unpack_4bit(b->qs, k->q);
	unpack_scales_mins(b->scales, k);
	k->d = cpu_fp16_to_f32(b->d);
	k->dmin = cpu_fp16_to_f32(b->dmin);
}

static void unpack_q5_k(const cpu_block_q5_k *b, cpu_k_block *k)
{
	unpack_4bit(b->qs, k->q);
	for (int j = 0; j < 8; j++)
		for (int l = 0; l < 32; l++)
			k->q[32 * j + l] += (int8_t)(((b->qh[l] >> j) & 1) << 4);
	unpack_scales_mins(b->scales, k);
	k->d = cpu_fp16_to_f32(b->d);
	k->dmin = cpu_fp16_to_f32(b->dmin);
}

static void unpack_q6_k(const cpu_block_q6_k *b, cpu_k_block *k)
{
	for (int half = 0; half < 2; half++) {
		const uint8_t *ql = b->ql + 64 * half, *qh = b->qh + 32 * half;
		int8_t *q = k->q + 128 * half;
		for (int l = 0; l < 32; l++) {
			q[l] = (int8_t)(((ql[l] & 15) | (qh[l] & 3) << 4) - 32);
			q[l + 32] = (int8_t)(((ql[l + 32] & 15) | ((qh[l] >> 2) & 3) << 4) - 32);
			q[l + 64] = (int8_t)(((ql[l] >> 4) | ((qh[l] >> 4) & 3) << 4) - 32);
			q[l + 96] = (int8_t)(((ql[l + 32] >> 4) | ((qh[l] >> 6) & 3) << 4) - 32);
		}
	}
	k->n_sub = 16;
	for (int j = 0; j < 16; j++) {
		k->sc[j] = b->scales[j];
		k->m[j] = 0;
	}
	k->d = cpu_fp16_to_f32(b->d);
	k->dmin = 0.0f;
}

/* ---- decoding ---- */

static void dequantize_block(const cpu_k_block *k, float *y)
{
	int len = CPU_QK_K / k->n_sub;

	for (int j = 0; j < k->n_sub; j++) {
		float dl = k->d * (float)k->sc[j], ml = k->dmin * (float)k->m[j];
		for (int l = 0; l < len; l++)
			y[j * len + l] = dl * (float)k->q[j * len + l] - ml;
	}
}

typedef void (*unpack_fn)(const void *block, cpu_k_block *k);

static void dequantize_row(const void *blocks, size_t block_bytes, unpack_fn unpack, float *y,
			   int64_t n)
{
	cpu_k_block k;

	for (int64_t i = 0; i < n / CPU_QK_K; i++) {
		unpack((const char *)blocks + i * block_bytes, &k);
		dequantize_block(&k, y + i * CPU_QK_K);
	}
}

/* ---- dot products ----
 * In llama.cpp's order (cpu_quant.h): per super-block, lane l gets
 * f32(d_x * d) times the exact sum over every sub-block of sc * q * q_x for
 * the elements with e % 32 in 4l..4l+3. The min terms are scaled by
 * dmin' = f32(-d_x * dmin) and, pairing sub-blocks 2p and 2p + 1 as
 * m * (sum of q_x) + m * (sum of q_x), go
 *   Q2_K: into the main lanes (pair p into lane p), before the main term;
 *   Q4_K: into 4 lanes of their own, reduced and added at the end;
 *   Q5_K: into one running sum of each block's total, added at the end. */

enum min_order { MINS_NONE, MINS_IN_LANES, MINS_OWN_LANES, MINS_RUNNING };

/* A sub-block of 16 fills lanes 0..3 or 4..7, one of 32 all eight. */
static void add_main(float *acc, const cpu_k_block *k, const int8_t *qx, float d)
{
	int len = CPU_QK_K / k->n_sub;
	int32_t lane[CPU_LANES] = {0};

	for (int j = 0; j < k->n_sub; j++) {
		const int8_t *q = k->q + j * len, *x = qx + j * len;
		int32_t *out = lane + (j * len) % 32 / 4;
		for (int g = 0; g < len / 4; g++) {
			int32_t sum = 0;
			for (int i = 4 * g; i < 4 * g + 4; i++)
				sum += (int32_t)q[i] * (int32_t)x[i];
			out[g] += k->sc[j] * sum;
		}
	}
	for (int l = 0; l < CPU_LANES; l++)
		acc[l] = cpu_mul_add(d, (float)lane[l], acc[l]);
}

/* pair[p] = the min terms of sub-blocks 2p and 2p + 1, a sub-block of 32
 * taking two of Q8_K's 16-element sums; returns the number of pairs. */
static int min_pairs(const cpu_k_block *k, const cpu_block_q8_k *a, int32_t *pair)
{
	int per = CPU_QK_K / k->n_sub / 16;

	for (int p = 0; p < k->n_sub / 2; p++) {
		pair[p] = 0;
		for (int j = 2 * p; j < 2 * p + 2; j++)
			for (int s = j * per; s < (j + 1) * per; s++)
				pair[p] += k->m[j] * a->bsums[s];
	}
	return k->n_sub / 2;
}

static float dot_row(const void *w, size_t block_bytes, unpack_fn unpack, enum min_order order,
		     const void *x, int64_t n)
{
	const cpu_block_q8_k *a = x;
	float acc[CPU_LANES] = {0}, acc_m[4] = {0}, running = 0.0f;
	cpu_k_block k;

	for (int64_t i = 0; i < n / CPU_QK_K; i++) {
		int32_t pair[CPU_LANES], total = 0;

		unpack((const char *)w + i * block_bytes, &k);
		float d = a[i].d * k.d, dmin = -a[i].d * k.dmin;
		int n_pairs = order == MINS_NONE ? 0 : min_pairs(&k, &a[i], pair);
		for (int p = 0; p < n_pairs; p++) {
			if (order == MINS_IN_LANES)
				acc[p] = cpu_mul_add(dmin, (float)pair[p], acc[p]);
			else if (order == MINS_OWN_LANES)
				acc_m[p] = cpu_mul_add(dmin, (float)pair[p], acc_m[p]);
			total += pair[p];
		}
		if (order == MINS_RUNNING)
			running = cpu_mul_add(dmin, (float)total, running);
		add_main(acc, &k, a[i].qs, d);
	}
	return cpu_reduce_lanes(acc) + cpu_reduce_4(acc_m) + running;
}

/* Typed unpackers behind one signature, for the row loops. */
#define K_TYPE(name, order)                                                             \
	static void unpack_any_##name(const void *block, cpu_k_block *k)                    \
	{                                                                               \
		unpack_##name(block, k);                                                \
	}                                                                               \
	void cpu_dequantize_row_##name(const void *blocks, float *y, int64_t n)         \
	{                                                                               \
		dequantize_row(blocks, sizeof(cpu_block_##name), unpack_any_##name, y, n); \
	}                                                                               \
	float cpu_dot_##name(const void *w, const void *x, int64_t n)                   \
	{                                                                               \
		return dot_row(w, sizeof(cpu_block_##name), unpack_any_##name, order, x, n); \
	}

K_TYPE(q2_k, MINS_IN_LANES)
K_TYPE(q3_k, MINS_NONE)
K_TYPE(q4_k, MINS_OWN_LANES)
K_TYPE(q5_k, MINS_RUNNING)
K_TYPE(q6_k, MINS_NONE)

void cpu_k_unpack(loom_dtype type, const void *block, cpu_k_block *k)
{
	switch (type) {
	case LOOM_DTYPE_Q2_K: unpack_q2_k(block, k); break;
	case LOOM_DTYPE_Q3_K: unpack_q3_k(block, k); break;
	case LOOM_DTYPE_Q4_K: unpack_q4_k(block, k); break;
	case LOOM_DTYPE_Q5_K: unpack_q5_k(block, k); break;
	default: unpack_q6_k(block, k); break;
	}
}
