/*
 * cuda_vecdot.cuh - the dot product of one quantized weight block with the
 * Q8_1 activation blocks under it (one for the 32-element types, eight for
 * a K-quant super-block), for every quantized weight type.
 *
 * A block is cut into CUDA_VECDOT_PARTS(type) parts that threads take side
 * by side: part p gives the dot over its own elements, and the parts' sum is
 * the block's. Within a part the weight quants are unpacked four at a time
 * into int8 lanes and multiplied with the activation quants by __dp4a,
 * exactly, per Q8_1 block of 32; the f32 scales multiply those integer
 * sums, as the CPU's dot products do per block. The min terms of Q4_1 and
 * Q5_1 use the Q8_1 block's s = d * sum(q), added by part 0 (as the CPU
 * does); those of the K-quants use the exact sum of the part's activation
 * quants (the CPU's Q8_K bsums are exact too), also from __dp4a.
 *
 * MXFP4's nibbles index a table of E2M1 values kept doubled as int8s
 * (cuda_blocks.cuh), looked up four at a time by byte permutes; its
 * power-of-two scale, halved, times the Q8_1 block's d scales the exact
 * integer sum, as the CPU's dot with Q8_0 blocks of the same d and q does.
 *
 * Q2_K, Q4_K and Q5_K blocks are whole 4-byte words with their quants at
 * word offsets, so their rows (at 64-byte multiples of a buffer, a whole
 * number of blocks apart) are read a word a load (cuda_load_int_b4); the
 * other types' blocks are only 2-byte aligned (cuda_load_int_b2), MXFP4's
 * not at all (cuda_load_int_b1). Q8_1 blocks are 4-byte aligned wherever
 * they are (work memory, shared memory). cuda_matmul_weight_ok refuses a
 * weight whose rows are not so aligned.
 */
#ifndef LOOM_CUDA_VECDOT_CUH
#define LOOM_CUDA_VECDOT_CUH

#include "cuda_backend.cuh"
#include "cuda_blocks.cuh"

#include <cstddef>

#define VECDOT_LOW_NIBBLES 0x0f0f0f0f
#define VECDOT_ONES 0x01010101 /* a 1 in every byte: __dp4a with it sums bytes */

static constexpr bool cuda_vecdot_is_k(int type)
{
	return type >= LOOM_DTYPE_Q2_K && type <= LOOM_DTYPE_Q6_K;
}

/* Elements of a weight block. */
static constexpr int cuda_vecdot_block(int type)
{
	return cuda_vecdot_is_k(type) ? CUDA_QK_K : CUDA_QK;
}

/* Threads that share a block: 4 of 8 elements for the 32-element types, 16
 * of 16 elements for the K-quants. */
static constexpr int cuda_vecdot_parts(int type)
{
	return cuda_vecdot_is_k(type) ? 16 : 4;
}

/* Bytes of a weight block. */
static constexpr int cuda_vecdot_bytes(int type)
{
	switch (type) {
	case LOOM_DTYPE_Q4_0: return (int)sizeof(cuda_block_q4_0);
	case LOOM_DTYPE_Q4_1: return (int)sizeof(cuda_block_q4_1);
	case LOOM_DTYPE_Q5_0: return (int)sizeof(cuda_block_q5_0);
	case LOOM_DTYPE_Q5_1: return (int)sizeof(cuda_block_q5_1);
	case LOOM_DTYPE_Q8_0: return (int)sizeof(cuda_block_q8_0);
	case LOOM_DTYPE_Q2_K: return (int)sizeof(cuda_block_q2_k);
	case LOOM_DTYPE_Q3_K: return (int)sizeof(cuda_block_q3_k);
	case LOOM_DTYPE_Q4_K: return (int)sizeof(cuda_block_q4_k);
	case LOOM_DTYPE_Q5_K: return (int)sizeof(cuda_block_q5_k);
	case LOOM_DTYPE_Q6_K: return (int)sizeof(cuda_block_q6_k);
	case LOOM_DTYPE_MXFP4: return (int)sizeof(cuda_block_mxfp4);
	default: return 0;
	}
}

static_assert(offsetof(cuda_block_q2_k, qs) % 4 == 0 && sizeof(cuda_block_q2_k) % 4 == 0, "q2_k's words");
static_assert(offsetof(cuda_block_q4_k, scales) == 4 && offsetof(cuda_block_q4_k, qs) == 16 &&
		      sizeof(cuda_block_q4_k) % 4 == 0,
	      "q4_k's words");
static_assert(offsetof(cuda_block_q5_k, scales) == 4 && offsetof(cuda_block_q5_k, qh) == 16 &&
		      offsetof(cuda_block_q5_k, qs) % 4 == 0 && sizeof(cuda_block_q5_k) % 4 == 0,
	      "q5_k's words");

/* Bytes a weight load may assume its address a multiple of. */
static constexpr int cuda_vecdot_align(int type)
{
	return type == LOOM_DTYPE_MXFP4					   ? 1
	       : type == LOOM_DTYPE_Q2_K || type == LOOM_DTYPE_Q4_K || type == LOOM_DTYPE_Q5_K ? 4
											   : 2;
}

/* Part `part` of the dot of weight block w with the activations x under
 * it; each type's comes below. */
template <int type>
static __device__ __forceinline__ float cuda_vecdot(const char *w, const cuda_block_q8_1 *x, int part);

static __device__ __forceinline__ float vecdot_half(uint16_t bits)
{
	return __half2float(__ushort_as_half(bits));
}

/* Activation quants 4i..4i+3 of a Q8_1 block. */
static __device__ __forceinline__ int vecdot_x(const cuda_block_q8_1 *x, int i)
{
	return cuda_load_int_b4(x->qs, i);
}

/* Bits 0..3 of h moved to bit 4 of bytes 0..3: the fifth bit of four
 * 5-bit quants. */
static __device__ __forceinline__ int vecdot_bit4_of_bytes(uint32_t h)
{
	return (int)(((h & 1) << 4) | ((h & 2) << 11) | ((h & 4) << 18) | ((h & 8) << 25));
}

/* ---- the 32-element types ----
 * Byte j of qs holds element j in its low nibble and j + 16 in its high
 * one, so part p (qs bytes 4p..4p+3) covers elements 4p..4p+3 and
 * 4p+16..4p+19: activation ints p and p + 4. Q8_0's part p is elements
 * 8p..8p+7. */

template <>
__device__ __forceinline__ float cuda_vecdot<LOOM_DTYPE_Q4_0>(const char *w, const cuda_block_q8_1 *x, int part)
{
	const cuda_block_q4_0 *b = (const cuda_block_q4_0 *)w;
	int v = cuda_load_int_b2(b->qs, part);
	int lo = (int)__vsub4(v & VECDOT_LOW_NIBBLES, 0x08080808);
	int hi = (int)__vsub4((v >> 4) & VECDOT_LOW_NIBBLES, 0x08080808);
	int sumi = __dp4a(hi, vecdot_x(x, part + 4), __dp4a(lo, vecdot_x(x, part), 0));
	return vecdot_half(b->d) * vecdot_half(x->d) * (float)sumi;
}

template <>
__device__ __forceinline__ float cuda_vecdot<LOOM_DTYPE_Q4_1>(const char *w, const cuda_block_q8_1 *x, int part)
{
	const cuda_block_q4_1 *b = (const cuda_block_q4_1 *)w;
	int v = cuda_load_int_b2(b->qs, part);
	int lo = v & VECDOT_LOW_NIBBLES, hi = (v >> 4) & VECDOT_LOW_NIBBLES;
	int sumi = __dp4a(hi, vecdot_x(x, part + 4), __dp4a(lo, vecdot_x(x, part), 0));
	float dot = vecdot_half(b->d) * vecdot_half(x->d) * (float)sumi;
	return part == 0 ? dot + vecdot_half(b->m) * vecdot_half(x->s) : dot;
}

/* Q5_0/Q5_1: bit 4 of element j is bit j of qh. */
static __device__ __forceinline__ void vecdot_unpack_5bit(const uint8_t *qs, const uint8_t *qh, int part, int *lo,
							  int *hi)
{
	int v = cuda_load_int_b2(qs, part);
	uint32_t h = (uint32_t)cuda_load_int_b2(qh, 0);
	*lo = (v & VECDOT_LOW_NIBBLES) | vecdot_bit4_of_bytes(h >> (4 * part));
	*hi = ((v >> 4) & VECDOT_LOW_NIBBLES) | vecdot_bit4_of_bytes(h >> (4 * part + 16));
}

template <>
__device__ __forceinline__ float cuda_vecdot<LOOM_DTYPE_Q5_0>(const char *w, const cuda_block_q8_1 *x, int part)
{
	const cuda_block_q5_0 *b = (const cuda_block_q5_0 *)w;
	int lo, hi;
	vecdot_unpack_5bit(b->qs, b->qh, part, &lo, &hi);
	lo = (int)__vsub4(lo, 0x10101010);
	hi = (int)__vsub4(hi, 0x10101010);
	int sumi = __dp4a(hi, vecdot_x(x, part + 4), __dp4a(lo, vecdot_x(x, part), 0));
	return vecdot_half(b->d) * vecdot_half(x->d) * (float)sumi;
}

template <>
__device__ __forceinline__ float cuda_vecdot<LOOM_DTYPE_Q5_1>(const char *w, const cuda_block_q8_1 *x, int part)
{
	const cuda_block_q5_1 *b = (const cuda_block_q5_1 *)w;
	int lo, hi;
	vecdot_unpack_5bit(b->qs, b->qh, part, &lo, &hi);
	int sumi = __dp4a(hi, vecdot_x(x, part + 4), __dp4a(lo, vecdot_x(x, part), 0));
	float dot = vecdot_half(b->d) * vecdot_half(x->d) * (float)sumi;
	return part == 0 ? dot + vecdot_half(b->m) * vecdot_half(x->s) : dot;
}

template <>
__device__ __forceinline__ float cuda_vecdot<LOOM_DTYPE_Q8_0>(const char *w, const cuda_block_q8_1 *x, int part)
{
	const cuda_block_q8_0 *b = (const cuda_block_q8_0 *)w;
	int sumi = __dp4a(cuda_load_int_b2(b->qs, 2 * part), vecdot_x(x, 2 * part), 0);
	sumi = __dp4a(cuda_load_int_b2(b->qs, 2 * part + 1), vecdot_x(x, 2 * part + 1), sumi);
	return vecdot_half(b->d) * vecdot_half(x->d) * (float)sumi;
}

/* MXFP4: the doubled values of four indices, one in the low nibble of
 * each byte of q (its high nibbles clear). The indices' nibbles packed into
 * a selector pick each byte from the positive and the negative half of the
 * table (a selector's low 3 bits count, so an index's bit 3 does not), and
 * bit 3 then picks between the two. */
static __device__ __forceinline__ int vecdot_mxfp4_values(uint32_t q)
{
	uint32_t sel = __byte_perm(q | q >> 4, 0, 0x0020); /* index i in nibble i */
	uint32_t pos = __byte_perm(CUDA_MXFP4_VALUES_0, CUDA_MXFP4_VALUES_1, sel);
	uint32_t neg = __byte_perm(CUDA_MXFP4_VALUES_2, CUDA_MXFP4_VALUES_3, sel);
	return (int)__byte_perm(pos, neg, 0x3210 | (sel & 0x8888) >> 1);
}

template <>
__device__ __forceinline__ float cuda_vecdot<LOOM_DTYPE_MXFP4>(const char *w, const cuda_block_q8_1 *x, int part)
{
	const cuda_block_mxfp4 *b = (const cuda_block_mxfp4 *)w;
	uint32_t v = (uint32_t)cuda_load_int_b1(b->qs, part);
	int lo = vecdot_mxfp4_values(v & VECDOT_LOW_NIBBLES), hi = vecdot_mxfp4_values(v >> 4 & VECDOT_LOW_NIBBLES);
	int sumi = __dp4a(hi, vecdot_x(x, part + 4), __dp4a(lo, vecdot_x(x, part), 0));
	return cuda_mxfp4_half_scale(b->e) * vecdot_half(x->d) * (float)sumi;
}

/* ---- the K-quants ----
 * Q2_K, Q3_K and Q6_K: in each half of 128 elements, byte l < 32 of a
 * quant array carries element 32k + l for k = 0..3 in different bits.
 * Part p takes half p / 8 and bytes l = 4(p % 8)..+3: four runs of four
 * elements, run k in Q8_1 block 4 * half + k at activation int p % 8, in
 * sub-block (of 16) 8 * half + 2k + (p % 8) / 4.
 * Q4_K and Q5_K: each 64 elements c share 32 bytes of qs (low nibbles the
 * first 32). Part p takes c = p / 4 and bytes 8(p % 4)..+7: elements
 * 64c + 8(p % 4)..+7 in sub-block (of 32, one Q8_1 block) 2c and the same
 * 32 further in sub-block 2c + 1, activation ints 2(p % 4) and +1. */

/* Byte k of the 12 scale bytes of Q4_K/Q5_K, held as three words. The
 * word is chosen, not indexed: k is known only at run time, and an array
 * indexed by it would live in local memory. */
static __device__ __forceinline__ int vecdot_k_scale_byte(const uint32_t s[3], int k)
{
	uint32_t word = k < 4 ? s[0] : k < 8 ? s[1] : s[2];
	return (int)(word >> (8 * (k & 3)) & 0xff);
}

/* The 6-bit scale and min of sub-block j of Q4_K/Q5_K (cpu_k_scale_min). */
static __device__ __forceinline__ void vecdot_k_scale_min(const uint32_t s[3], int j, int *sc, int *m)
{
	if (j < 4) {
		*sc = vecdot_k_scale_byte(s, j) & 63;
		*m = vecdot_k_scale_byte(s, j + 4) & 63;
	} else {
		*sc = (vecdot_k_scale_byte(s, j + 4) & 15) | (vecdot_k_scale_byte(s, j - 4) >> 6) << 4;
		*m = (vecdot_k_scale_byte(s, j + 4) >> 4) | (vecdot_k_scale_byte(s, j) >> 6) << 4;
	}
}

/* Q3_K's signed 6-bit scale j: low 4 bits in the nibbles of bytes 0..7,
 * the top 2 in bytes 8..11. */
static __device__ __forceinline__ int vecdot_q3_k_scale(const uint8_t *s, int j)
{
	int lo = j < 8 ? s[j] & 15 : s[j - 8] >> 4;
	int hi = (s[8 + j % 4] >> (2 * (j / 4))) & 3;
	return (lo | hi << 4) - 32;
}

template <>
__device__ __forceinline__ float cuda_vecdot<LOOM_DTYPE_Q2_K>(const char *w, const cuda_block_q8_1 *x, int part)
{
	const cuda_block_q2_k *b = (const cuda_block_q2_k *)w;
	int half = part / 8, l4 = part % 8;
	int v = cuda_load_int_b4(b->qs, 8 * half + l4);
	float d = vecdot_half(b->d), dmin = vecdot_half(b->dmin), dot = 0.0f;
#pragma unroll
	for (int k = 0; k < 4; k++) {
		const cuda_block_q8_1 *xb = x + 4 * half + k;
		int xv = vecdot_x(xb, l4);
		int sumi = __dp4a((v >> (2 * k)) & 0x03030303, xv, 0);
		int sumx = __dp4a(VECDOT_ONES, xv, 0);
		int s = b->scales[8 * half + 2 * k + l4 / 4];
		dot += vecdot_half(xb->d) * (d * (float)(s & 15) * (float)sumi - dmin * (float)(s >> 4) * (float)sumx);
	}
	return dot;
}

template <>
__device__ __forceinline__ float cuda_vecdot<LOOM_DTYPE_Q3_K>(const char *w, const cuda_block_q8_1 *x, int part)
{
	const cuda_block_q3_k *b = (const cuda_block_q3_k *)w;
	int half = part / 8, l4 = part % 8;
	int v = cuda_load_int_b2(b->qs, 8 * half + l4);
	uint32_t hm = (uint32_t)cuda_load_int_b2(b->hmask, l4);
	float d = vecdot_half(b->d), dot = 0.0f;
#pragma unroll
	for (int k = 0; k < 4; k++) {
		const cuda_block_q8_1 *xb = x + 4 * half + k;
		/* A clear hmask bit subtracts 4. */
		uint32_t clear = ((hm >> (4 * half + k)) & VECDOT_ONES) ^ VECDOT_ONES;
		int q = (int)__vsub4((uint32_t)(v >> (2 * k)) & 0x03030303, clear << 2);
		int sumi = __dp4a(q, vecdot_x(xb, l4), 0);
		int sc = vecdot_q3_k_scale(b->scales, 8 * half + 2 * k + l4 / 4);
		dot += vecdot_half(xb->d) * (d * (float)sc * (float)sumi);
	}
	return dot;
}

/* Q4_K and Q5_K alike, from the four ints of quants (0..15 or 0..31) of
 * the part: lo0, lo1 in sub-block 2c, hi0, hi1 in 2c + 1. The block's
 * first 16 bytes (d, dmin, the scales) are read as four words. */
static __device__ __forceinline__ float vecdot_k_4bit(const char *w, const cuda_block_q8_1 *x, int part, int lo0,
						      int lo1, int hi0, int hi1)
{
	const uint32_t head = (uint32_t)cuda_load_int_b4(w, 0);
	const uint32_t scales[3] = {(uint32_t)cuda_load_int_b4(w, 1), (uint32_t)cuda_load_int_b4(w, 2),
				    (uint32_t)cuda_load_int_b4(w, 3)};
	int c = part / 4, i = 2 * (part % 4);
	const cuda_block_q8_1 *xa = x + 2 * c, *xb = x + 2 * c + 1;
	int a0 = vecdot_x(xa, i), a1 = vecdot_x(xa, i + 1), b0 = vecdot_x(xb, i), b1 = vecdot_x(xb, i + 1);
	int sumi_a = __dp4a(lo1, a1, __dp4a(lo0, a0, 0));
	int sumi_b = __dp4a(hi1, b1, __dp4a(hi0, b0, 0));
	int sumx_a = __dp4a(VECDOT_ONES, a1, __dp4a(VECDOT_ONES, a0, 0));
	int sumx_b = __dp4a(VECDOT_ONES, b1, __dp4a(VECDOT_ONES, b0, 0));
	int sc_a, m_a, sc_b, m_b;
	vecdot_k_scale_min(scales, 2 * c, &sc_a, &m_a);
	vecdot_k_scale_min(scales, 2 * c + 1, &sc_b, &m_b);
	float d = vecdot_half((uint16_t)(head & 0xffff)), dmin = vecdot_half((uint16_t)(head >> 16));
	float dot_a = d * (float)sc_a * (float)sumi_a - dmin * (float)m_a * (float)sumx_a;
	float dot_b = d * (float)sc_b * (float)sumi_b - dmin * (float)m_b * (float)sumx_b;
	return vecdot_half(xa->d) * dot_a + vecdot_half(xb->d) * dot_b;
}

template <>
__device__ __forceinline__ float cuda_vecdot<LOOM_DTYPE_Q4_K>(const char *w, const cuda_block_q8_1 *x, int part)
{
	const cuda_block_q4_k *b = (const cuda_block_q4_k *)w;
	int q = 8 * (part / 4) + 2 * (part % 4);
	int v0 = cuda_load_int_b4(b->qs, q), v1 = cuda_load_int_b4(b->qs, q + 1);
	return vecdot_k_4bit(w, x, part, v0 & VECDOT_LOW_NIBBLES, v1 & VECDOT_LOW_NIBBLES, (v0 >> 4) & VECDOT_LOW_NIBBLES,
			     (v1 >> 4) & VECDOT_LOW_NIBBLES);
}

/* Q5_K: bit 4 of element 32j + l is bit j of qh[l]. */
template <>
__device__ __forceinline__ float cuda_vecdot<LOOM_DTYPE_Q5_K>(const char *w, const cuda_block_q8_1 *x, int part)
{
	const cuda_block_q5_k *b = (const cuda_block_q5_k *)w;
	int c = part / 4, i = 2 * (part % 4);
	int v0 = cuda_load_int_b4(b->qs, 8 * c + i), v1 = cuda_load_int_b4(b->qs, 8 * c + i + 1);
	uint32_t h0 = (uint32_t)cuda_load_int_b4(b->qh, i), h1 = (uint32_t)cuda_load_int_b4(b->qh, i + 1);
	int lo0 = (v0 & VECDOT_LOW_NIBBLES) | (int)(((h0 >> (2 * c)) & VECDOT_ONES) << 4);
	int lo1 = (v1 & VECDOT_LOW_NIBBLES) | (int)(((h1 >> (2 * c)) & VECDOT_ONES) << 4);
	int hi0 = ((v0 >> 4) & VECDOT_LOW_NIBBLES) | (int)(((h0 >> (2 * c + 1)) & VECDOT_ONES) << 4);
	int hi1 = ((v1 >> 4) & VECDOT_LOW_NIBBLES) | (int)(((h1 >> (2 * c + 1)) & VECDOT_ONES) << 4);
	return vecdot_k_4bit(w, x, part, lo0, lo1, hi0, hi1);
}

/* Q6_K: elements l, l + 32, l + 64, l + 96 of a half take the low nibbles
 * of ql[l] and ql[l + 32], then their high nibbles, with bits 0-1, 2-3,
 * 4-5, 6-7 of qh[l] as bits 4-5; less 32. */
template <>
__device__ __forceinline__ float cuda_vecdot<LOOM_DTYPE_Q6_K>(const char *w, const cuda_block_q8_1 *x, int part)
{
	const cuda_block_q6_k *b = (const cuda_block_q6_k *)w;
	int half = part / 8, l4 = part % 8;
	uint32_t a = (uint32_t)cuda_load_int_b2(b->ql, 16 * half + l4);
	uint32_t c = (uint32_t)cuda_load_int_b2(b->ql, 16 * half + 8 + l4);
	uint32_t h = (uint32_t)cuda_load_int_b2(b->qh, 8 * half + l4);
	uint32_t q[4] = {
		(a & VECDOT_LOW_NIBBLES) | ((h << 4) & 0x30303030),
		(c & VECDOT_LOW_NIBBLES) | ((h << 2) & 0x30303030),
		((a >> 4) & VECDOT_LOW_NIBBLES) | (h & 0x30303030),
		((c >> 4) & VECDOT_LOW_NIBBLES) | ((h >> 2) & 0x30303030),
	};
	float d = vecdot_half(b->d), dot = 0.0f;
#pragma unroll
	for (int k = 0; k < 4; k++) {
		const cuda_block_q8_1 *xb = x + 4 * half + k;
		int sumi = __dp4a((int)__vsub4(q[k], 0x20202020), vecdot_x(xb, l4), 0);
		int sc = b->scales[8 * half + 2 * k + l4 / 4];
		dot += vecdot_half(xb->d) * (d * (float)sc * (float)sumi);
	}
	return dot;
}

#endif
