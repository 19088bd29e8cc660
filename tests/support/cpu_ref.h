/*
 * cpu_ref.h - reference numerics for backend tests: fp16/bf16 conversions,
 * the block-quantized types (decoding, activation quantization, llama.cpp's
 * integer dot products), written independently of any backend (in double
 * arithmetic where that is the clearest statement of the rounding), a
 * deterministic random source, and error measures. The quantized-type code
 * was checked by hand against ../shared/tools/gguf_min.py: bit for bit on
 * every quantized tensor of the shared models, and exactly equal to its
 * quantize_act and qmatmul.
 */
#ifndef LOOM_TEST_CPU_REF_H
#define LOOM_TEST_CPU_REF_H

#include <loom.h>

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* IEEE binary16 and bfloat16; f32 -> 16 bits rounds to nearest even, NaNs
 * come out quiet. */
float ref_fp16_to_f32(uint16_t h);
uint16_t ref_f32_to_fp16(float f);
float ref_bf16_to_f32(uint16_t h);
uint16_t ref_f32_to_bf16(float f);

/* x rounded to fp16 / bf16 precision. */
float ref_round_fp16(float x);
float ref_round_bf16(float x);

/* Q8_0: 34-byte blocks {fp16 d; int8 qs[32]}. Quantization as llama.cpp
 * quantizes activations on x86: amax = max |x|, d = fp16(amax / 127),
 * q = round-half-even(x * (127 / amax)) in f32. n is a multiple of 32. */
#define REF_Q8_0_BLOCK_BYTES 34
void ref_quantize_q8_0(const float *x, uint8_t *blocks, int64_t n);
float ref_q8_0_value(const uint8_t *blocks, int64_t i);

/* ---- Block-quantized types ----
 * Q4_0 .. Q6_K written from the GGUF format's description, independently of
 * any backend. A block decodes to small integers, and a weight is
 *   f32(f32(d * sc) * q)     less f32(dmin * m) (Q2_K, Q4_K, Q5_K),
 *                            plus add (Q4_1, Q5_1: the block's min),
 * one f32 rounding per step, as ggml computes it (sc = 1 for the 32-element
 * types). Each step is computed here in double and rounded once, which is
 * exact for these products, sums and quotients; a step a type lacks is
 * skipped, not done with 0, which would turn -0 into +0. */
typedef struct ref_qblock {
	int n;       /* elements: 32 or 256 */
	int sub;     /* elements per sub-block (n for the 32-element types) */
	int q[256];
	int sc[16];  /* per sub-block */
	int m[16];   /* 0 where has_min is false */
	float d, dmin, add;
	bool has_min, has_add;
} ref_qblock;

/* Bytes of one block of a block-quantized type (Q8_1 and Q8_K included);
 * 0 for others. */
size_t ref_block_bytes(loom_dtype type);
/* Elements per block; 0 for types that are not block-quantized. */
int ref_block_elems(loom_dtype type);
void ref_decode_block(loom_dtype type, const uint8_t *block, ref_qblock *out);
/* Element i of a row of blocks, as f32. */
float ref_quant_value(loom_dtype type, const uint8_t *row, int64_t i);
/* The n elements of a row of blocks, as f32: each block decoded once. */
void ref_quant_row(loom_dtype type, const uint8_t *row, int64_t n, float *out);

/* The activation type llama.cpp quantizes a matmul's activations to for
 * weights of this type: Q8_0, Q8_1 or Q8_K. */
loom_dtype ref_act_type(loom_dtype weight_type);
/* Activations as llama.cpp's x86 code quantizes them: Q8_0 as above; Q8_1
 * adds s = fp16(f32(amax / 127) * sum q); Q8_K per 256: m = the first
 * element of largest |x|, iscale = f32(-127 / m), q = min(127, round-half-
 * even(f32(iscale * x))), d = f32(1 / iscale), and the sums of each 16 q. */
void ref_quantize_act(loom_dtype act_type, const float *x, uint8_t *blocks, int64_t n);
/* A weight row of n elements times its quantized activation row, as
 * llama.cpp defines it: per block the exact integer sums, scaled by the f32
 * products of the two sides' scales (Q4_1/Q5_1 adding f32(m * s), the
 * K-quants with mins subtracting f32(d_x * dmin) * sum m_j * (sum of the
 * sub-block's q_x)), summed in double. */
double ref_quant_dot(loom_dtype type, const uint8_t *w, const uint8_t *xq, int64_t n);
/* The same with the weight row's blocks decoded already (ref_decode_block,
 * n / block elements of them): a row met by many activation rows is
 * decoded once. */
double ref_decoded_dot(loom_dtype type, const ref_qblock *w, const uint8_t *xq, int64_t n);

/* splitmix64: the same sequence on every machine. */
typedef struct ref_rng {
	uint64_t state;
} ref_rng;

uint64_t ref_rng_next(ref_rng *r);
/* Uniform in [lo, hi). */
double ref_rng_uniform(ref_rng *r, double lo, double hi);
/* Standard normal (Box-Muller). */
double ref_rng_normal(ref_rng *r);
/* Uniform integer in [0, n). */
int64_t ref_rng_below(ref_rng *r, int64_t n);

/* Blocks of a block-quantized type with every byte value, except for sane
 * fp16 scales: d in [0.002, 0.02), a Q4_1/Q5_1 min in [-0.1, 0.1), a K-quant
 * dmin in [0.001, 0.01). */
void ref_random_blocks(ref_rng *rng, loom_dtype type, uint8_t *blocks, size_t n_blocks);

/* Normalized mean squared error sum (got - ref)^2 / sum ref^2 (the plain
 * squared error when ref is all zeros). */
double ref_nmse(const double *ref, const float *got, size_t n);

/* Index of the first element of x that is NaN or infinite, or -1. */
int64_t ref_first_nonfinite(const float *x, size_t n);

#endif
