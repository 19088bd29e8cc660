/*
 * cuda_dequant.cuh - elements of every table dtype decoded to f32 on the
 * device, bit for bit as the CPU backend decodes them (cpu_half.h,
 * cpu_quant_legacy.c, cpu_quant_k.c, cpu_quant_mxfp4.c), and fp16/bf16
 * encoded from f32.
 *
 * Decoding works one element at a time: element i of a row is element
 * i % block of block i / block, so any thread can decode any element
 * without the rest of its block. The quantized types compute
 * f32(d * sc) * q (+ m or - dmin * m): every product there is exact (an
 * fp16 significand times integers of at most 8 bits fits in an f32 one),
 * so whether nvcc fuses the last addition into an FMA changes nothing;
 * the one rounding is the addition's, as on the CPU.
 */
#ifndef LOOM_CUDA_DEQUANT_CUH
#define LOOM_CUDA_DEQUANT_CUH

#include "cuda_backend.cuh"
#include "cuda_blocks.cuh"

/* ---- fp16 and bf16 ----
 * The hardware conversions round as the CPU's do (to nearest, ties to
 * even, subnormals kept) but make every NaN canonical; the CPU keeps the
 * sign and top payload bits and sets the quiet bit, and so do these. */

static __device__ __forceinline__ float cuda_f16_decode(uint16_t h)
{
	if ((h & 0x7fff) > 0x7c00)
		return __uint_as_float((uint32_t)(h & 0x8000) << 16 | 0x7fc00000u | (uint32_t)(h & 0x3ff) << 13);
	return __half2float(__ushort_as_half(h));
}

static __device__ __forceinline__ uint16_t cuda_f16_encode(float f)
{
	uint32_t u = __float_as_uint(f);
	if ((u & 0x7fffffff) > 0x7f800000)
		return (uint16_t)((u >> 16 & 0x8000) | 0x7e00 | (u >> 13 & 0x3ff));
	return __half_as_ushort(__float2half_rn(f));
}

static __device__ __forceinline__ float cuda_bf16_decode(uint16_t h)
{
	return __uint_as_float((uint32_t)h << 16);
}

static __device__ __forceinline__ uint16_t cuda_bf16_encode(float f)
{
	uint32_t u = __float_as_uint(f);
	if ((u & 0x7fffffff) > 0x7f800000)
		return (uint16_t)(u >> 16 | 0x40);
	return (uint16_t)((u + 0x7fff + (u >> 16 & 1)) >> 16);
}

/* ---- one block's elements (the bit positions are cpu_blocks.h's) ---- */

/* The nibble of element i of a 32-element block: elements 0..15 in the low
 * nibbles of qs, 16..31 in the high ones. */
static __device__ __forceinline__ int cuda_dequant_nibble(const uint8_t *qs, int i)
{
	return qs[i % 16] >> (4 * (i / 16)) & 15;
}

/* Bit 4 of element i of a Q5_0/Q5_1 block: bit i of the little-endian qh. */
static __device__ __forceinline__ int cuda_dequant_bit4(const uint8_t *qh, int i)
{
	return (qh[i / 8] >> (i % 8) & 1) << 4;
}

static __device__ __forceinline__ float cuda_dequant_q4_0(const cuda_block_q4_0 *b, int i)
{
	return (float)(cuda_dequant_nibble(b->qs, i) - 8) * cuda_f16_decode(b->d);
}

static __device__ __forceinline__ float cuda_dequant_q4_1(const cuda_block_q4_1 *b, int i)
{
	return (float)cuda_dequant_nibble(b->qs, i) * cuda_f16_decode(b->d) + cuda_f16_decode(b->m);
}

static __device__ __forceinline__ float cuda_dequant_q5_0(const cuda_block_q5_0 *b, int i)
{
	int q = cuda_dequant_nibble(b->qs, i) | cuda_dequant_bit4(b->qh, i);
	return (float)(q - 16) * cuda_f16_decode(b->d);
}

static __device__ __forceinline__ float cuda_dequant_q5_1(const cuda_block_q5_1 *b, int i)
{
	int q = cuda_dequant_nibble(b->qs, i) | cuda_dequant_bit4(b->qh, i);
	return (float)q * cuda_f16_decode(b->d) + cuda_f16_decode(b->m);
}

static __device__ __forceinline__ float cuda_dequant_q8_0(const cuda_block_q8_0 *b, int i)
{
	return (float)b->qs[i] * cuda_f16_decode(b->d);
}

/* The two bits of element i of a Q2_K/Q3_K super-block: in each half of
 * 128, byte l of its 32 bytes holds bits 2j..2j+1 of element 32j + l. */
static __device__ __forceinline__ int cuda_dequant_2bit(const uint8_t *qs, int i)
{
	return qs[32 * (i / 128) + i % 32] >> (2 * (i / 32 % 4)) & 3;
}

/* The 4-bit part of element i of a Q4_K/Q5_K super-block: each 64 share 32
 * bytes, the first 32 in the low nibbles. */
static __device__ __forceinline__ int cuda_dequant_4bit(const uint8_t *qs, int i)
{
	return qs[32 * (i / 64) + i % 32] >> (4 * (i / 32 % 2)) & 15;
}

/* The 6-bit scale (min = false) or min of sub-block j of a Q4_K/Q5_K
 * super-block, as cpu_k_scale_min unpacks them. */
static __device__ __forceinline__ int cuda_dequant_k_scale(const uint8_t *s, int j, bool min)
{
	int k = min ? 4 : 0;
	if (j < 4)
		return s[j + k] & 63;
	return (min ? s[j + 4] >> 4 : s[j + 4] & 15) | (s[j - 4 + k] >> 6) << 4;
}

static __device__ __forceinline__ float cuda_dequant_q2_k(const cuda_block_q2_k *b, int i)
{
	int s = b->scales[i / 16];
	float dl = cuda_f16_decode(b->d) * (float)(s & 15), ml = cuda_f16_decode(b->dmin) * (float)(s >> 4);
	return dl * (float)cuda_dequant_2bit(b->qs, i) - ml;
}

/* Q3_K's sixteen 6-bit scales: the low 4 bits in the nibbles of bytes
 * 0..7 (low nibbles first), the top 2 in bytes 8..11; less 32. Its third
 * quant bit, clear for q < 0, is bit i / 32 of hmask[i % 32]. */
static __device__ __forceinline__ float cuda_dequant_q3_k(const cuda_block_q3_k *b, int i)
{
	int j = i / 16;
	int lo = b->scales[j % 8] >> (4 * (j / 8)) & 15;
	int hi = b->scales[8 + j % 4] >> (2 * (j / 4)) & 3;
	int q = cuda_dequant_2bit(b->qs, i) - (b->hmask[i % 32] >> (i / 32) & 1 ? 0 : 4);
	float dl = cuda_f16_decode(b->d) * (float)((lo | hi << 4) - 32);
	return dl * (float)q;
}

static __device__ __forceinline__ float cuda_dequant_q4_k(const cuda_block_q4_k *b, int i)
{
	float dl = cuda_f16_decode(b->d) * (float)cuda_dequant_k_scale(b->scales, i / 32, false);
	float ml = cuda_f16_decode(b->dmin) * (float)cuda_dequant_k_scale(b->scales, i / 32, true);
	return dl * (float)cuda_dequant_4bit(b->qs, i) - ml;
}

/* Q5_K: bit 4 of element 32j + l is bit j of qh[l]. */
static __device__ __forceinline__ float cuda_dequant_q5_k(const cuda_block_q5_k *b, int i)
{
	int q = cuda_dequant_4bit(b->qs, i) | (b->qh[i % 32] >> (i / 32) & 1) << 4;
	float dl = cuda_f16_decode(b->d) * (float)cuda_dequant_k_scale(b->scales, i / 32, false);
	float ml = cuda_f16_decode(b->dmin) * (float)cuda_dequant_k_scale(b->scales, i / 32, true);
	return dl * (float)q - ml;
}

/* Q6_K: in each half of 128, element 32k + l (k < 4, l < 32) takes nibble
 * k / 2 of ql[l + 32 (k % 2)] and bits 2k..2k+1 of qh[l]; less 32. */
static __device__ __forceinline__ float cuda_dequant_q6_k(const cuda_block_q6_k *b, int i)
{
	int half = i / 128, k = i % 128 / 32, l = i % 32;
	int lo = b->ql[64 * half + 32 * (k % 2) + l] >> (4 * (k / 2)) & 15;
	int hi = b->qh[32 * half + l] >> (2 * k) & 3;
	float dl = cuda_f16_decode(b->d) * (float)b->scales[i / 16];
	return dl * (float)((lo | hi << 4) - 32);
}

/* MXFP4's doubled value of index q (0..15): byte q % 8 of the positive or
 * the negative half of the table. */
static __device__ __forceinline__ int cuda_mxfp4_value(int q)
{
	uint32_t lo = q < 8 ? CUDA_MXFP4_VALUES_0 : CUDA_MXFP4_VALUES_2;
	uint32_t hi = q < 8 ? CUDA_MXFP4_VALUES_1 : CUDA_MXFP4_VALUES_3;
	return (int)(int8_t)(__byte_perm(lo, hi, (uint32_t)q) & 0xff);
}

/* The doubled value times the halved scale: exact, as on the CPU. */
static __device__ __forceinline__ float cuda_dequant_mxfp4(const cuda_block_mxfp4 *b, int i)
{
	return (float)cuda_mxfp4_value(cuda_dequant_nibble(b->qs, i)) * cuda_mxfp4_half_scale(b->e);
}

/* ---- rows ---- */

/* Elements per block of a table dtype: 1, 32 or 256. */
static constexpr __host__ __device__ int cuda_dequant_block_len(loom_dtype type)
{
	switch (type) {
	case LOOM_DTYPE_Q4_0: case LOOM_DTYPE_Q4_1: case LOOM_DTYPE_Q5_0: case LOOM_DTYPE_Q5_1: case LOOM_DTYPE_Q8_0:
	case LOOM_DTYPE_MXFP4:
		return CUDA_QK;
	case LOOM_DTYPE_Q2_K: case LOOM_DTYPE_Q3_K: case LOOM_DTYPE_Q4_K: case LOOM_DTYPE_Q5_K: case LOOM_DTYPE_Q6_K:
		return CUDA_QK_K;
	default:
		return 1;
	}
}

/* Every dtype decoded here, as X(dtype) for each: the cases of a switch
 * that picks a kernel instantiated for the dtype. */
#define CUDA_DEQUANT_DTYPES(X)                                                                              \
	X(LOOM_DTYPE_F32) X(LOOM_DTYPE_F16) X(LOOM_DTYPE_BF16) X(LOOM_DTYPE_Q4_0) X(LOOM_DTYPE_Q4_1)          \
	X(LOOM_DTYPE_Q5_0) X(LOOM_DTYPE_Q5_1) X(LOOM_DTYPE_Q8_0) X(LOOM_DTYPE_Q2_K) X(LOOM_DTYPE_Q3_K)        \
	X(LOOM_DTYPE_Q4_K) X(LOOM_DTYPE_Q5_K) X(LOOM_DTYPE_Q6_K) X(LOOM_DTYPE_MXFP4)

/* For supports(). */
static inline bool cuda_dequant_supports(loom_dtype type)
{
#define CUDA_DEQUANT_CASE(t) case t:
	switch (type) {
	CUDA_DEQUANT_DTYPES(CUDA_DEQUANT_CASE)
		return true;
	default:
		return false;
	}
#undef CUDA_DEQUANT_CASE
}

/* Element i of a row of type (one that cuda_dequant_supports; 0 for any
 * other). Called with a compile-time type, as from a kernel templated on
 * it, the switch folds away. */
static __device__ __forceinline__ float cuda_dequant(loom_dtype type, const void *row, int64_t i)
{
#define CUDA_DEQUANT_BLOCK_CASE(t, name)                                                                   \
	case t:                                                                                            \
		return cuda_dequant_##name((const cuda_block_##name *)row + i / cuda_dequant_block_len(t), \
					   (int)(i % cuda_dequant_block_len(t)));
	switch (type) {
	case LOOM_DTYPE_F32:
		return ((const float *)row)[i];
	case LOOM_DTYPE_F16:
		return cuda_f16_decode(((const uint16_t *)row)[i]);
	case LOOM_DTYPE_BF16:
		return cuda_bf16_decode(((const uint16_t *)row)[i]);
	CUDA_DEQUANT_BLOCK_CASE(LOOM_DTYPE_Q4_0, q4_0)
	CUDA_DEQUANT_BLOCK_CASE(LOOM_DTYPE_Q4_1, q4_1)
	CUDA_DEQUANT_BLOCK_CASE(LOOM_DTYPE_Q5_0, q5_0)
	CUDA_DEQUANT_BLOCK_CASE(LOOM_DTYPE_Q5_1, q5_1)
	CUDA_DEQUANT_BLOCK_CASE(LOOM_DTYPE_Q8_0, q8_0)
	CUDA_DEQUANT_BLOCK_CASE(LOOM_DTYPE_Q2_K, q2_k)
	CUDA_DEQUANT_BLOCK_CASE(LOOM_DTYPE_Q3_K, q3_k)
	CUDA_DEQUANT_BLOCK_CASE(LOOM_DTYPE_Q4_K, q4_k)
	CUDA_DEQUANT_BLOCK_CASE(LOOM_DTYPE_Q5_K, q5_k)
	CUDA_DEQUANT_BLOCK_CASE(LOOM_DTYPE_Q6_K, q6_k)
	CUDA_DEQUANT_BLOCK_CASE(LOOM_DTYPE_MXFP4, mxfp4)
	default:
		return 0.0f;
	}
#undef CUDA_DEQUANT_BLOCK_CASE
}

/* y[i] = element i of a row of type, for i = first, first + step, ... < n:
 * with first = threadIdx.x and step = blockDim.x the threads of a block
 * decode a row together (into shared memory, say), each element once. */
static __device__ __forceinline__ void cuda_dequantize_row(loom_dtype type, const void *row, float *y, int64_t n,
							   int64_t first, int64_t step)
{
	for (int64_t i = first; i < n; i += step)
		y[i] = cuda_dequant(type, row, i);
}

#endif
