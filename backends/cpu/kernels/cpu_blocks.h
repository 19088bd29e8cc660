/*
 * cpu_blocks.h - the GGUF block layouts of the quantized types, byte-exact
 * with the files (and with ggml, which defined them).
 *
 * Every struct is packed: rows of a weight file start at any even offset and
 * activation rows at any offset, so no alignment is assumed. Scales named d,
 * m, s and dmin are IEEE fp16 bit patterns except in Q8_K, whose d is f32.
 *
 * The legacy types hold 32 weights per block. The K-quants hold 256 in a
 * super-block of 8 or 16 sub-blocks, each with its own small integer scale
 * (and min) relative to the fp16 super-block scale (and dmin). Where each
 * element's bits live is spelled out in cpu_quant_legacy.c and
 * cpu_quant_k.c, next to the code that decodes them.
 */
#ifndef LOOM_CPU_BLOCKS_H
#define LOOM_CPU_BLOCKS_H

#include <stdint.h>

#define CPU_QK 32    /* elements per block of Q4_0 .. Q8_1 */
#define CPU_QK_K 256 /* elements per super-block of the K-quants */
#define CPU_K_SCALE_BYTES 12 /* eight 6-bit scales and eight 6-bit mins */

/* w = d * (q - 8), q in 0..15; element j < 16 in the low nibble of qs[j],
 * element j + 16 in its high nibble. */
typedef struct __attribute__((packed)) cpu_block_q4_0 {
	uint16_t d;
	uint8_t qs[CPU_QK / 2];
} cpu_block_q4_0;

/* w = d * q + m, q in 0..15; nibbles as Q4_0. */
typedef struct __attribute__((packed)) cpu_block_q4_1 {
	uint16_t d;
	uint16_t m;
	uint8_t qs[CPU_QK / 2];
} cpu_block_q4_1;

/* w = d * (q - 16), q in 0..31: the low four bits as Q4_0, bit 4 of element
 * j in bit j of qh (a little-endian 32-bit word). */
typedef struct __attribute__((packed)) cpu_block_q5_0 {
	uint16_t d;
	uint8_t qh[4];
	uint8_t qs[CPU_QK / 2];
} cpu_block_q5_0;

/* w = d * q + m, q in 0..31; bits as Q5_0. */
typedef struct __attribute__((packed)) cpu_block_q5_1 {
	uint16_t d;
	uint16_t m;
	uint8_t qh[4];
	uint8_t qs[CPU_QK / 2];
} cpu_block_q5_1;

/* w = d * q. */
typedef struct __attribute__((packed)) cpu_block_q8_0 {
	uint16_t d;
	int8_t qs[CPU_QK];
} cpu_block_q8_0;

/* Q8_0 plus s = d * sum(q): the activations of Q4_1 and Q5_1 weights, whose
 * min term needs the block's sum. */
typedef struct __attribute__((packed)) cpu_block_q8_1 {
	uint16_t d;
	uint16_t s;
	int8_t qs[CPU_QK];
} cpu_block_q8_1;

/* 16 sub-blocks of 16: w = d * (scales[j] & 15) * q - dmin * (scales[j] >> 4),
 * q in 0..3 (2 bits of qs). */
typedef struct __attribute__((packed)) cpu_block_q2_k {
	uint8_t scales[CPU_QK_K / 16];
	uint8_t qs[CPU_QK_K / 4];
	uint16_t d;
	uint16_t dmin;
} cpu_block_q2_k;

/* 16 sub-blocks of 16: w = d * (sc_j - 32) * q, q in -4..3 (2 bits of qs,
 * the third, inverted, in hmask), sc_j a 6-bit value packed in scales. */
typedef struct __attribute__((packed)) cpu_block_q3_k {
	uint8_t hmask[CPU_QK_K / 8];
	uint8_t qs[CPU_QK_K / 4];
	uint8_t scales[CPU_K_SCALE_BYTES];
	uint16_t d;
} cpu_block_q3_k;

/* 8 sub-blocks of 32: w = d * sc_j * q - dmin * m_j, q in 0..15, sc_j and
 * m_j 6-bit values packed in scales. */
typedef struct __attribute__((packed)) cpu_block_q4_k {
	uint16_t d;
	uint16_t dmin;
	uint8_t scales[CPU_K_SCALE_BYTES];
	uint8_t qs[CPU_QK_K / 2];
} cpu_block_q4_k;

/* As Q4_K with q in 0..31, bit 4 in qh. */
typedef struct __attribute__((packed)) cpu_block_q5_k {
	uint16_t d;
	uint16_t dmin;
	uint8_t scales[CPU_K_SCALE_BYTES];
	uint8_t qh[CPU_QK_K / 8];
	uint8_t qs[CPU_QK_K / 2];
} cpu_block_q5_k;

/* 16 sub-blocks of 16: w = d * scales[j] * (q - 32), q in 0..63 (4 bits in
 * ql, 2 in qh). */
typedef struct __attribute__((packed)) cpu_block_q6_k {
	uint8_t ql[CPU_QK_K / 2];
	uint8_t qh[CPU_QK_K / 4];
	int8_t scales[CPU_QK_K / 16];
	uint16_t d;
} cpu_block_q6_k;

/* The activations of K-quant weights: w = d * q with an f32 d, plus the
 * sums of each 16 q, which the min terms of Q2_K/Q4_K/Q5_K need. */
typedef struct __attribute__((packed)) cpu_block_q8_k {
	float d;
	int8_t qs[CPU_QK_K];
	int16_t bsums[CPU_QK_K / 16];
} cpu_block_q8_k;

/* MXFP4: w = e2m1[q] * 2^(e - 127), q in 0..15 the index of an E2M1 value
 * (kept doubled as integers, cpu_quant.h, so the scale is halved); nibbles
 * as Q4_0. */
typedef struct __attribute__((packed)) cpu_block_mxfp4 {
	uint8_t e;
	uint8_t qs[CPU_QK / 2];
} cpu_block_mxfp4;

_Static_assert(sizeof(cpu_block_mxfp4) == 17, "MXFP4 block must be 17 bytes");
_Static_assert(sizeof(cpu_block_q4_0) == 18, "Q4_0 block must be 18 bytes");
_Static_assert(sizeof(cpu_block_q4_1) == 20, "Q4_1 block must be 20 bytes");
_Static_assert(sizeof(cpu_block_q5_0) == 22, "Q5_0 block must be 22 bytes");
_Static_assert(sizeof(cpu_block_q5_1) == 24, "Q5_1 block must be 24 bytes");
_Static_assert(sizeof(cpu_block_q8_0) == 34, "Q8_0 block must be 34 bytes");
_Static_assert(sizeof(cpu_block_q8_1) == 36, "Q8_1 block must be 36 bytes");
_Static_assert(sizeof(cpu_block_q2_k) == 84, "Q2_K block must be 84 bytes");
_Static_assert(sizeof(cpu_block_q3_k) == 110, "Q3_K block must be 110 bytes");
_Static_assert(sizeof(cpu_block_q4_k) == 144, "Q4_K block must be 144 bytes");
_Static_assert(sizeof(cpu_block_q5_k) == 176, "Q5_K block must be 176 bytes");
_Static_assert(sizeof(cpu_block_q6_k) == 210, "Q6_K block must be 210 bytes");
_Static_assert(sizeof(cpu_block_q8_k) == 292, "Q8_K block must be 292 bytes");

#endif
