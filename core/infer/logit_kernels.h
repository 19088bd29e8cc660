/* logit_kernels.h - the vector loops of logit_row.c, written once for a
 * vector of KW floats and included once per width: 4 for any target, 8
 * under AVX2, 16 under AVX-512F (KATTR names the target). Lane j of
 * LOGIT_LANES is lane j % KW of vector j / KW, so every width adds the same
 * numbers in the same order and a row's sums are the same bits on each.
 * GCC and clang lower each vector operation lane by lane, with IEEE
 * arithmetic and (this file is built with -ffp-contract=off) no fused
 * multiply-add. */
#ifndef KW
#error "logit_kernels.h is included by logit_row.c with KW and KATTR set"
#endif

#define KPASTE_(a, b) a##_w##b
#define KPASTE(a, b) KPASTE_(a, b)
#define K(name) KPASTE(name, KW)
#define KG (LOGIT_LANES / KW)
#define KINLINE KATTR static inline __attribute__((always_inline))

typedef float K(f32v) __attribute__((vector_size(4 * KW)));
typedef int32_t K(i32v) __attribute__((vector_size(4 * KW)));

KINLINE K(f32v) K(splat)(float x)
{
	return (K(f32v)){0} + x;
}

KINLINE K(i32v) K(splat_i)(int32_t x)
{
	return (K(i32v)){0} + x;
}

KINLINE K(f32v) K(load)(const float *x)
{
	K(f32v) v;
	memcpy(&v, x, sizeof(v));
	return v;
}

/* mask ? a : b, lane by lane (a mask lane is all ones or zero). */
KINLINE K(f32v) K(pick)(K(i32v) mask, K(f32v) a, K(f32v) b)
{
	return (K(f32v))(((K(i32v))a & mask) | ((K(i32v))b & ~mask));
}

/* exp(d) for d <= 0 (callers pass x - max): d = n ln2 + r with |r| <=
 * ln2 / 2 (ln2 split in two so that n times its first part is exact), e^r
 * as 1 + r + r^2 q(r), q of degree 4 fitted to e^r on that interval
 * (relative error 1e-8 before rounding), 2^n from the exponent bits. Below
 * -87, and for NaN, 0. */
KINLINE K(f32v) K(exp_neg)(K(f32v) d)
{
	const K(f32v) floor = K(splat)(-87.0f), shift = K(splat)(12582912.0f); /* 1.5 * 2^23: adding it rounds */
	K(i32v) live = d > floor;
	K(f32v) dc = K(pick)(live, d, floor);
	K(f32v) n = (dc * K(splat)(1.44269504088896341f) + shift) - shift;
	K(f32v) r = dc - n * K(splat)(0.693145751953125f) - n * K(splat)(1.42860682030941723212e-6f);
	K(f32v) p = K(splat)(0.0013933649752289057f);
	p = p * r + K(splat)(0.008363175205886364f);
	p = p * r + K(splat)(0.04166646674275398f);
	p = p * r + K(splat)(0.16666576266288757f);
	p = p * r + K(splat)(0.5f);
	p = p * r + K(splat)(1.0f);
	p = p * r + K(splat)(1.0f);
	K(i32v) e = (__builtin_convertvector(n, K(i32v)) + K(splat_i)(127)) << 23;
	return (K(f32v))((K(i32v))(p * (K(f32v))e) & live);
}

/* The largest of len logits (a whole number of lanes), NaN ignored. */
KATTR static float K(block_max)(const float *x, int32_t len)
{
	K(f32v) m[KG];
	for (int g = 0; g < KG; g++)
		m[g] = K(splat)(-__builtin_inff());
	for (int32_t i = 0; i < len; i += LOGIT_LANES)
		for (int g = 0; g < KG; g++) {
			K(f32v) v = K(load)(x + i + g * KW);
			m[g] = K(pick)(v > m[g], v, m[g]);
		}
	float best = -__builtin_inff();
	for (int g = 0; g < KG; g++)
		for (int c = 0; c < KW; c++)
			best = m[g][c] > best ? m[g][c] : best;
	return best;
}

/* Sum over the len logits (from token id0) that b keeps of
 * exp((x - max) * inv_t), in LOGIT_LANES lanes. */
KATTR static float K(block_weights)(const float *x, int32_t len, loom_token id0, float max, float inv_t,
				    const logit_bound *b)
{
	const K(f32v) lo = K(splat)(b->lo), hi = K(splat)(b->hi), vmax = K(splat)(max), vinv_t = K(splat)(inv_t);
	const K(i32v) hi_id = K(splat_i)(b->hi_id);
	K(f32v) acc[KG];
	K(i32v) id[KG];
	for (int g = 0; g < KG; g++) {
		acc[g] = K(splat)(0.0f);
		for (int c = 0; c < KW; c++)
			id[g][c] = id0 + g * KW + c;
	}
	for (int32_t i = 0; i < len; i += LOGIT_LANES)
		for (int g = 0; g < KG; g++) {
			K(f32v) v = K(load)(x + i + g * KW);
			K(i32v) keep = (v >= lo) & ((v > hi) | ((v == hi) & (id[g] < hi_id)));
			acc[g] += (K(f32v))((K(i32v))K(exp_neg)((v - vmax) * vinv_t) & keep);
			id[g] += LOGIT_LANES;
		}
	float lanes[LOGIT_LANES];
	memcpy(lanes, acc, sizeof(lanes));
	return lane_sum(lanes);
}

/* Whether any of the 4 * LOGIT_LANES logits at x is above t. */
KATTR static bool K(any_above)(const float *x, float t)
{
	K(f32v) m = K(load)(x);
	for (int c = 1; c < 4 * KG; c++) {
		K(f32v) v = K(load)(x + c * KW);
		m = K(pick)(v > m, v, m);
	}
	K(i32v) above = m > K(splat)(t);
	int32_t any = 0;
	for (int c = 0; c < KW; c++)
		any |= above[c];
	return any != 0;
}

static const logit_kernels K(kernels) = {
	.block_max = K(block_max),
	.block_weights = K(block_weights),
	.any_above = K(any_above),
};

#undef KPASTE_
#undef KPASTE
#undef K
#undef KG
#undef KINLINE
