/*
 * cpu_quant.h - the Q8_0 block and the quantization of activations to it.
 *
 * Q8_0 (GGUF type 8): blocks of 32 weights, an fp16 scale d and 32 signed
 * bytes; weight j = d * qs[j]. The layout is byte-exact with GGUF files.
 */
#ifndef LOOM_CPU_QUANT_H
#define LOOM_CPU_QUANT_H

#include <stdint.h>

#define CPU_QK8_0 32

/* Packed: rows of a weight file start at any even offset and activation
 * blocks at any offset, so no alignment is assumed. */
typedef struct __attribute__((packed)) cpu_block_q8_0 {
	uint16_t d; /* fp16 */
	int8_t qs[CPU_QK8_0];
} cpu_block_q8_0;

_Static_assert(sizeof(cpu_block_q8_0) == 34, "Q8_0 block must be 34 bytes");

/* Quantizes n floats (a multiple of 32) the way llama.cpp quantizes the
 * activations of a Q8_0 matmul on x86: per block amax = max |x|,
 * d = amax / 127 (stored as fp16), q = round-to-nearest-even(x * 127 / amax)
 * (0 when amax is 0). The result is the same bit for bit in every variant,
 * so the integer dot products downstream are too. */
void cpu_quantize_row_q8_0(const float *x, cpu_block_q8_0 *y, int64_t n);

void cpu_dequantize_row_q8_0(const cpu_block_q8_0 *x, float *y, int64_t n);

#endif
