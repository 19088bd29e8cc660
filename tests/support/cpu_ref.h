/*
 * cpu_ref.h - reference numerics for backend tests: fp16/bf16 conversions
 * and Q8_0 quantization written independently of any backend (in double
 * arithmetic where that is the clearest statement of the rounding), a
 * deterministic random source, and error measures.
 */
#ifndef LOOM_TEST_CPU_REF_H
#define LOOM_TEST_CPU_REF_H

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

/* Normalized mean squared error sum (got - ref)^2 / sum ref^2 (the plain
 * squared error when ref is all zeros). */
double ref_nmse(const double *ref, const float *got, size_t n);

/* Index of the first element of x that is NaN or infinite, or -1. */
int64_t ref_first_nonfinite(const float *x, size_t n);

#endif
