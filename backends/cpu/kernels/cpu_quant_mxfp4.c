/*
 * cpu_quant_mxfp4.c - MXFP4 weights (gpt-oss's experts) row by row:
 * decoded, encoded with ggml's reference rounding, dotted with Q8_0
 * activations (cpu_quant.h; the matmuls' tile kernel is
 * cpu_gemm_mxfp4.c).
 *
 * A block is a power of two E (E8M0: 2^(E - 127)) and 32 E2M1 values,
 * 0, 0.5, 1, 1.5, 2, 3, 4, 6 and their negatives. As in ggml they are kept
 * doubled, as the integers of cpu_mxfp4_values, and the scale halved, so a
 * block's products with the activation's Q8_0 integers are exact integer
 * sums, scaled by f32(half(E) * d_x) once a block.
 */
#include "cpu_quant.h"

#include "cpu_half.h"

#include <math.h>

void cpu_dequantize_row_mxfp4(const void *blocks, float *y, int64_t n)
{
	const cpu_block_mxfp4 *b = blocks;
	for (int64_t i = 0; i < n / CPU_QK; i++, y += CPU_QK) {
		const float d = cpu_mxfp4_half_scale(b[i].e);
		for (int j = 0; j < CPU_QK / 2; j++) {
			y[j] = cpu_mxfp4_values[b[i].qs[j] & 15] * d;
			y[j + CPU_QK / 2] = cpu_mxfp4_values[b[i].qs[j] >> 4] * d;
		}
	}
}

/* The doubled value nearest x / d, the first on a tie. */
static uint8_t nearest_mxfp4(float x, float d)
{
	int best = 0;
	float best_err = fabsf(cpu_mxfp4_values[0] * d - x);
	for (int i = 1; i < 16; i++) {
		float err = fabsf(cpu_mxfp4_values[i] * d - x);
		if (err < best_err) {
			best = i;
			best_err = err;
		}
	}
	return (uint8_t)best;
}

/* ggml's reference: E puts the block's largest magnitude in [4, 8) of the
 * doubled values' units, each value the nearest. */
void cpu_quantize_row_mxfp4(const float *x, void *blocks, int64_t n)
{
	cpu_block_mxfp4 *b = blocks;
	for (int64_t i = 0; i < n / CPU_QK; i++, x += CPU_QK) {
		float amax = 0.0f;
		for (int j = 0; j < CPU_QK; j++)
			amax = fmaxf(amax, fabsf(x[j]));
		b[i].e = amax > 0.0f ? (uint8_t)(floorf(log2f(amax)) - 2 + 127) : 0;
		const float d = cpu_mxfp4_half_scale(b[i].e);
		for (int j = 0; j < CPU_QK / 2; j++)
			b[i].qs[j] = (uint8_t)(nearest_mxfp4(x[j], d) | nearest_mxfp4(x[j + CPU_QK / 2], d) << 4);
	}
}

/* A block's integer dot product with a Q8_0 block's quants. */
static int block_dot_mxfp4(const cpu_block_mxfp4 *w, const int8_t *q)
{
	int sum = 0;
	for (int j = 0; j < CPU_QK / 2; j++)
		sum += cpu_mxfp4_values[w->qs[j] & 15] * q[j] + cpu_mxfp4_values[w->qs[j] >> 4] * q[j + CPU_QK / 2];
	return sum;
}

float cpu_dot_mxfp4(const void *w, const void *x, int64_t n)
{
	const cpu_block_mxfp4 *wb = w;
	const cpu_block_q8_0 *xb = x;
	float sum = 0.0f;
	for (int64_t i = 0; i < n / CPU_QK; i++)
		sum += cpu_mxfp4_half_scale(wb[i].e) * cpu_fp16_to_f32(xb[i].d) * (float)block_dot_mxfp4(&wb[i], xb[i].qs);
	return sum;
}
