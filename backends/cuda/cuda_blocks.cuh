/*
 * cuda_blocks.cuh - the GGUF block layouts of the quantized types, byte-exact
 * with the files (backends/cpu/cpu_blocks.h describes where each element's
 * bits live).
 *
 * Every scale named d, m, s or dmin is an fp16 bit pattern (Q8_K's d is
 * f32). The structs need no packing: each has 2-byte alignment (4 for Q8_K)
 * and no padding, and weight rows start at even offsets. Their quants are
 * therefore only 2-byte aligned: 32-bit loads of qs go through two 16-bit
 * loads (cuda_load_int_b2). MXFP4's blocks are 17 bytes, so its rows may
 * start at any byte: its loads go a byte at a time (cuda_load_int_b1).
 */
#ifndef LOOM_CUDA_BLOCKS_CUH
#define LOOM_CUDA_BLOCKS_CUH

#include <cstdint>

#define CUDA_QK 32    /* elements per block of Q4_0 .. Q8_1 */
#define CUDA_QK_K 256 /* elements per super-block of the K-quants */
#define CUDA_K_SCALE_BYTES 12

struct cuda_block_q4_0 {
	uint16_t d;
	uint8_t qs[CUDA_QK / 2];
};
struct cuda_block_q4_1 {
	uint16_t d, m;
	uint8_t qs[CUDA_QK / 2];
};
struct cuda_block_q5_0 {
	uint16_t d;
	uint8_t qh[4];
	uint8_t qs[CUDA_QK / 2];
};
struct cuda_block_q5_1 {
	uint16_t d, m;
	uint8_t qh[4];
	uint8_t qs[CUDA_QK / 2];
};
struct cuda_block_q8_0 {
	uint16_t d;
	int8_t qs[CUDA_QK];
};
/* Q8_0 plus s = d * sum(q). The activations of every quantized MATMUL. */
struct cuda_block_q8_1 {
	uint16_t d, s;
	int8_t qs[CUDA_QK];
};
struct cuda_block_q2_k {
	uint8_t scales[CUDA_QK_K / 16];
	uint8_t qs[CUDA_QK_K / 4];
	uint16_t d, dmin;
};
struct cuda_block_q3_k {
	uint8_t hmask[CUDA_QK_K / 8];
	uint8_t qs[CUDA_QK_K / 4];
	uint8_t scales[CUDA_K_SCALE_BYTES];
	uint16_t d;
};
struct cuda_block_q4_k {
	uint16_t d, dmin;
	uint8_t scales[CUDA_K_SCALE_BYTES];
	uint8_t qs[CUDA_QK_K / 2];
};
struct cuda_block_q5_k {
	uint16_t d, dmin;
	uint8_t scales[CUDA_K_SCALE_BYTES];
	uint8_t qh[CUDA_QK_K / 8];
	uint8_t qs[CUDA_QK_K / 2];
};
struct cuda_block_q6_k {
	uint8_t ql[CUDA_QK_K / 2];
	uint8_t qh[CUDA_QK_K / 4];
	int8_t scales[CUDA_QK_K / 16];
	uint16_t d;
};
/* MXFP4: w = v[q] * 2^(e - 127), e an E8M0 power of two and q the index of
 * an E2M1 value (0, 0.5, 1, 1.5, 2, 3, 4, 6 and their negatives); nibbles
 * as Q4_0's. */
struct cuda_block_mxfp4 {
	uint8_t e;
	uint8_t qs[CUDA_QK / 2];
};

/* The E2M1 values doubled, so that they are integers (as the CPU keeps
 * them, with the scale halved: cuda_mxfp4_half_scale), as int8s four to a
 * word: index q is byte q % 4 of word q / 4. */
#define CUDA_MXFP4_VALUES_0 0x03020100u /* 0, 1, 2, 3 */
#define CUDA_MXFP4_VALUES_1 0x0c080604u /* 4, 6, 8, 12 */
#define CUDA_MXFP4_VALUES_2 0xfdfeff00u /* 0, -1, -2, -3 */
#define CUDA_MXFP4_VALUES_3 0xf4f8fafcu /* -4, -6, -8, -12 */

static_assert(sizeof(cuda_block_q4_0) == 18, "q4_0 block");
static_assert(sizeof(cuda_block_q4_1) == 20, "q4_1 block");
static_assert(sizeof(cuda_block_q5_0) == 22, "q5_0 block");
static_assert(sizeof(cuda_block_q5_1) == 24, "q5_1 block");
static_assert(sizeof(cuda_block_q8_0) == 34, "q8_0 block");
static_assert(sizeof(cuda_block_q8_1) == 36, "q8_1 block");
static_assert(sizeof(cuda_block_q2_k) == 84, "q2_k block");
static_assert(sizeof(cuda_block_q3_k) == 110, "q3_k block");
static_assert(sizeof(cuda_block_q4_k) == 144, "q4_k block");
static_assert(sizeof(cuda_block_q5_k) == 176, "q5_k block");
static_assert(sizeof(cuda_block_q6_k) == 210, "q6_k block");
static_assert(sizeof(cuda_block_mxfp4) == 17, "mxfp4 block");

/* 32 bits of quants at a 2-byte aligned address. */
static __device__ __forceinline__ int cuda_load_int_b2(const void *p, int i)
{
	const uint16_t *h = (const uint16_t *)p + 2 * i;
	return (int)(h[0] | ((uint32_t)h[1] << 16));
}

/* 32 bits of quants at any address. */
static __device__ __forceinline__ int cuda_load_int_b1(const void *p, int i)
{
	const uint8_t *b = (const uint8_t *)p + 4 * i;
	return (int)(b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24);
}

/* MXFP4's scale 2^(e - 127), halved for the doubled values, as f32 bits
 * (subnormal for e < 2): the CPU's cpu_mxfp4_half_scale. */
static __device__ __forceinline__ float cuda_mxfp4_half_scale(uint8_t e)
{
	return __uint_as_float(e < 2 ? 0x00200000u << e : (uint32_t)(e - 1) << 23);
}

/* 32 bits of quants at a 4-byte aligned address. */
static __device__ __forceinline__ int cuda_load_int_b4(const void *p, int i)
{
	return ((const int *)p)[i];
}

#endif
