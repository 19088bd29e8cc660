/*
 * cpu_vec.h - single-row vector kernels: the dot products and updates of
 * attention and the reductions of the norms.
 */
#ifndef LOOM_CPU_VEC_H
#define LOOM_CPU_VEC_H

#include "loom/plugin_api.h"

#include <math.h>
#include <stdint.h>

/* sum a[i] * b[i], accumulated in f32. */
float cpu_dot_f32(const float *a, const float *b, int64_t n);
/* The same with a in fp16 (b usually holds fp16-rounded values). */
float cpu_dot_fp16(const uint16_t *a, const float *b, int64_t n);

/* y[i] += a * x[i]. */
void cpu_axpy_f32(float *y, float a, const float *x, int64_t n);
void cpu_axpy_fp16(float *y, float a, const uint16_t *x, int64_t n);

/* sum x[i]^2 with each square rounded to f32 and the sum kept in double,
 * as ggml's RMS norm does. */
double cpu_sum_squares(const float *x, int64_t n);

/* y[i] = x[i] * s (* w[i] when w is not NULL), each product rounded to f32.
 * y may be x. */
void cpu_scale_row(const float *x, float s, const float *w, float *y, int64_t n);

/* y[i] = silu(g[i]) * u[i] (cpu_activation.c). y may be g or u. */
void cpu_swiglu_row(const float *g, const float *u, float *y, int64_t n);

#define GELU_SQRT_2_OVER_PI 0.79788456080286535588f
#define GELU_COEF_A 0.044715f

/* One GELU, in f32 with the C library's tanhf or erff. */
static inline float cpu_gelu(float x, loom_gelu_kind kind)
{
	if (kind == LOOM_GELU_ERF)
		return 0.5f * x * (1.0f + erff(x * 0.70710678118654752440f));
	return 0.5f * x * (1.0f + tanhf(GELU_SQRT_2_OVER_PI * x * (1.0f + GELU_COEF_A * x * x)));
}

/* y[i] = gelu(x[i]) (cpu_activation.c). y may be x. */
void cpu_gelu_row(const float *x, float *y, int64_t n, loom_gelu_kind kind);

/* y[i] = cap * tanh(x[i] * f32(1 / cap)) (cpu_activation.c). y may be x. */
void cpu_softcap_row(const float *x, float *y, int64_t n, float cap);
/* s[i] = cap * tanh(s[i] * f32(1 / cap)) where s[i] is not -INFINITY (a
 * masked score stays masked). */
void cpu_softcap_scores(float *s, int64_t n, float cap);

#endif
