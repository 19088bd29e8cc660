/*
 * cuda_unpack_int8.cuh - a quantized weight block's 32-element sub-blocks
 * as int8 quants with float scales and offsets, the form the tensor-core
 * tiles multiply (cuda_mma_tile.cuh): element e of a sub-block is
 *
 *     scale[e / 16] * q[e] + offset[e / 16],
 *
 * each q an int8. The types whose scales change every 16 elements (Q2_K,
 * Q3_K, Q6_K) give two halves of their own; the others give the same scale
 * and offset twice. Offsets are the mins of Q4_1/Q5_1 (added) and of
 * Q2_K/Q4_K/Q5_K (subtracted); the other types have none.
 *
 * The quants are those the dot products of cuda_vecdot.cuh unpack, taken a
 * sub-block at a time instead of a part of every sub-block. The sub-block
 * is known only at run time, so the K-quants' scales are read a byte at a
 * time (cuda_dequant.cuh): an array indexed by it would live in local
 * memory.
 */
#ifndef LOOM_CUDA_UNPACK_INT8_CUH
#define LOOM_CUDA_UNPACK_INT8_CUH

#include "cuda_dequant.cuh"
#include "cuda_vecdot.cuh"

struct cuda_int8_sub {
	int q[8]; /* quants 4i..4i+3 in the bytes of q[i] */
	float scale[2], offset[2];
};

/* Whether the type's scales change every 16 elements. */
static constexpr bool cuda_unpack_halves(int type)
{
	return type == LOOM_DTYPE_Q2_K || type == LOOM_DTYPE_Q3_K || type == LOOM_DTYPE_Q6_K;
}

/* Whether the type has offsets. */
static constexpr bool cuda_unpack_has_offset(int type)
{
	return type == LOOM_DTYPE_Q4_1 || type == LOOM_DTYPE_Q5_1 || type == LOOM_DTYPE_Q2_K || type == LOOM_DTYPE_Q4_K ||
	       type == LOOM_DTYPE_Q5_K;
}

/* Sub-block `sub` (0 for the 32-element types, 0..7 of a super-block) of
 * weight block w. */
template <int type> static __device__ __forceinline__ void cuda_unpack_int8(const char *w, int sub, cuda_int8_sub *u);

static __device__ __forceinline__ void unpack_same_halves(cuda_int8_sub *u, float scale, float offset)
{
	u->scale[0] = u->scale[1] = scale;
	u->offset[0] = u->offset[1] = offset;
}

/* Q4_0/Q5_0: the unsigned quants less the type's offset in each byte, as
 * signed bytes. */
static __device__ __forceinline__ void unpack_recenter(int *q, unsigned offset_bytes)
{
#pragma unroll
	for (int i = 0; i < 8; i++)
		q[i] = (int)__vsub4((unsigned)q[i], offset_bytes);
}

/* Q4_0/Q4_1: byte j of qs holds element j (low nibble) and j + 16. */
static __device__ __forceinline__ void unpack_nibbles(const uint8_t *qs, int *q)
{
#pragma unroll
	for (int i = 0; i < 4; i++) {
		int v = cuda_load_int_b2(qs, i);
		q[i] = v & VECDOT_LOW_NIBBLES;
		q[i + 4] = (v >> 4) & VECDOT_LOW_NIBBLES;
	}
}

/* Q5_0/Q5_1: the nibbles, and bit j of qh as bit 4 of element j. */
static __device__ __forceinline__ void unpack_5bit(const uint8_t *qs, const uint8_t *qh, int *q)
{
	uint32_t h = (uint32_t)cuda_load_int_b2(qh, 0);
	unpack_nibbles(qs, q);
#pragma unroll
	for (int i = 0; i < 4; i++) {
		q[i] |= vecdot_bit4_of_bytes(h >> (4 * i));
		q[i + 4] |= vecdot_bit4_of_bytes(h >> (4 * i + 16));
	}
}

template <>
__device__ __forceinline__ void cuda_unpack_int8<LOOM_DTYPE_Q4_0>(const char *w, int, cuda_int8_sub *u)
{
	const cuda_block_q4_0 *b = (const cuda_block_q4_0 *)w;
	unpack_nibbles(b->qs, u->q);
	unpack_recenter(u->q, 0x08080808);
	unpack_same_halves(u, vecdot_half(b->d), 0.0f);
}

template <>
__device__ __forceinline__ void cuda_unpack_int8<LOOM_DTYPE_Q4_1>(const char *w, int, cuda_int8_sub *u)
{
	const cuda_block_q4_1 *b = (const cuda_block_q4_1 *)w;
	unpack_nibbles(b->qs, u->q);
	unpack_same_halves(u, vecdot_half(b->d), vecdot_half(b->m));
}

template <>
__device__ __forceinline__ void cuda_unpack_int8<LOOM_DTYPE_Q5_0>(const char *w, int, cuda_int8_sub *u)
{
	const cuda_block_q5_0 *b = (const cuda_block_q5_0 *)w;
	unpack_5bit(b->qs, b->qh, u->q);
	unpack_recenter(u->q, 0x10101010);
	unpack_same_halves(u, vecdot_half(b->d), 0.0f);
}

template <>
__device__ __forceinline__ void cuda_unpack_int8<LOOM_DTYPE_Q5_1>(const char *w, int, cuda_int8_sub *u)
{
	const cuda_block_q5_1 *b = (const cuda_block_q5_1 *)w;
	unpack_5bit(b->qs, b->qh, u->q);
	unpack_same_halves(u, vecdot_half(b->d), vecdot_half(b->m));
}

template <>
__device__ __forceinline__ void cuda_unpack_int8<LOOM_DTYPE_Q8_0>(const char *w, int, cuda_int8_sub *u)
{
	const cuda_block_q8_0 *b = (const cuda_block_q8_0 *)w;
#pragma unroll
	for (int i = 0; i < 8; i++)
		u->q[i] = cuda_load_int_b2(b->qs, i);
	unpack_same_halves(u, vecdot_half(b->d), 0.0f);
}

/* MXFP4: the doubled E2M1 values, with the halved scale. */
template <>
__device__ __forceinline__ void cuda_unpack_int8<LOOM_DTYPE_MXFP4>(const char *w, int, cuda_int8_sub *u)
{
	const cuda_block_mxfp4 *b = (const cuda_block_mxfp4 *)w;
#pragma unroll
	for (int i = 0; i < 4; i++) {
		uint32_t v = (uint32_t)cuda_load_int_b1(b->qs, i);
		u->q[i] = vecdot_mxfp4_values(v & VECDOT_LOW_NIBBLES);
		u->q[i + 4] = vecdot_mxfp4_values(v >> 4 & VECDOT_LOW_NIBBLES);
	}
	unpack_same_halves(u, cuda_mxfp4_half_scale(b->e), 0.0f);
}

/* Q2_K: sub-block s is run k = s % 4 of half s / 4: bits 2k of qs bytes
 * 32 (s / 4)..+31; its 16-element halves have scales 2s and 2s + 1 (a
 * 4-bit scale under a 4-bit min). */
template <>
__device__ __forceinline__ void cuda_unpack_int8<LOOM_DTYPE_Q2_K>(const char *w, int sub, cuda_int8_sub *u)
{
	const cuda_block_q2_k *b = (const cuda_block_q2_k *)w;
	int half = sub / 4, k = sub % 4;
#pragma unroll
	for (int i = 0; i < 8; i++)
		u->q[i] = (cuda_load_int_b4(b->qs, 8 * half + i) >> (2 * k)) & 0x03030303;
	float d = vecdot_half(b->d), dmin = vecdot_half(b->dmin);
#pragma unroll
	for (int h = 0; h < 2; h++) {
		int s = b->scales[2 * sub + h];
		u->scale[h] = d * (float)(s & 15);
		u->offset[h] = -dmin * (float)(s >> 4);
	}
}

/* Q3_K: as Q2_K's bits, less 4 where bit 4 (s / 4) + k of hmask byte l is
 * clear; signed 6-bit scales. */
template <>
__device__ __forceinline__ void cuda_unpack_int8<LOOM_DTYPE_Q3_K>(const char *w, int sub, cuda_int8_sub *u)
{
	const cuda_block_q3_k *b = (const cuda_block_q3_k *)w;
	int half = sub / 4, k = sub % 4;
#pragma unroll
	for (int i = 0; i < 8; i++) {
		uint32_t hm = (uint32_t)cuda_load_int_b2(b->hmask, i);
		uint32_t clear = ((hm >> sub) & VECDOT_ONES) ^ VECDOT_ONES;
		uint32_t v = (uint32_t)(cuda_load_int_b2(b->qs, 8 * half + i) >> (2 * k)) & 0x03030303;
		u->q[i] = (int)__vsub4(v, clear << 2);
	}
	float d = vecdot_half(b->d);
#pragma unroll
	for (int h = 0; h < 2; h++) {
		u->scale[h] = d * (float)vecdot_q3_k_scale(b->scales, 2 * sub + h);
		u->offset[h] = 0.0f;
	}
}

/* Q4_K: sub-block s is the low (s even) or high nibbles of qs bytes
 * 32 (s / 2)..+31. */
template <>
__device__ __forceinline__ void cuda_unpack_int8<LOOM_DTYPE_Q4_K>(const char *w, int sub, cuda_int8_sub *u)
{
	const cuda_block_q4_k *b = (const cuda_block_q4_k *)w;
	int c = sub / 2, shift = 4 * (sub % 2);
#pragma unroll
	for (int i = 0; i < 8; i++)
		u->q[i] = (cuda_load_int_b4(b->qs, 8 * c + i) >> shift) & VECDOT_LOW_NIBBLES;
	unpack_same_halves(u, vecdot_half(b->d) * (float)cuda_dequant_k_scale(b->scales, sub, false),
			   -vecdot_half(b->dmin) * (float)cuda_dequant_k_scale(b->scales, sub, true));
}

/* Q5_K: Q4_K's nibbles, with bit s of qh byte l as bit 4 of element l. */
template <>
__device__ __forceinline__ void cuda_unpack_int8<LOOM_DTYPE_Q5_K>(const char *w, int sub, cuda_int8_sub *u)
{
	const cuda_block_q5_k *b = (const cuda_block_q5_k *)w;
	int c = sub / 2, shift = 4 * (sub % 2);
#pragma unroll
	for (int i = 0; i < 8; i++) {
		int h = (int)(((uint32_t)cuda_load_int_b4(b->qh, i) >> sub) & VECDOT_ONES) << 4;
		u->q[i] = ((cuda_load_int_b4(b->qs, 8 * c + i) >> shift) & VECDOT_LOW_NIBBLES) | h;
	}
	unpack_same_halves(u, vecdot_half(b->d) * (float)cuda_dequant_k_scale(b->scales, sub, false),
			   -vecdot_half(b->dmin) * (float)cuda_dequant_k_scale(b->scales, sub, true));
}

/* Q6_K: sub-block s is run k = s % 4 of half s / 4: the low (k < 2) or
 * high nibbles of ql bytes 64 (s / 4) + 32 (k % 2)..+31, with bits 2k..2k+1
 * of qh bytes 32 (s / 4)..+31 as bits 4-5; less 32. */
template <>
__device__ __forceinline__ void cuda_unpack_int8<LOOM_DTYPE_Q6_K>(const char *w, int sub, cuda_int8_sub *u)
{
	const cuda_block_q6_k *b = (const cuda_block_q6_k *)w;
	int half = sub / 4, k = sub % 4;
	int nibble_shift = 4 * (k / 2);
#pragma unroll
	for (int i = 0; i < 8; i++) {
		uint32_t l = (uint32_t)cuda_load_int_b2(b->ql, 16 * half + 8 * (k % 2) + i);
		uint32_t h = (uint32_t)cuda_load_int_b2(b->qh, 8 * half + i);
		uint32_t q = ((l >> nibble_shift) & VECDOT_LOW_NIBBLES) | (((h >> (2 * k)) & 0x03030303) << 4);
		u->q[i] = (int)__vsub4(q, 0x20202020);
	}
	float d = vecdot_half(b->d);
#pragma unroll
	for (int h = 0; h < 2; h++) {
		u->scale[h] = d * (float)b->scales[2 * sub + h];
		u->offset[h] = 0.0f;
	}
}

#endif
