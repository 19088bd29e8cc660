/*
 * cpu_activation.c - the activations, a row at a time: SwiGLU's gate,
 * silu(g) * u = g / (1 + e^-g) * u, GELU (tanh approximation or exact)
 * and soft-capping, cap * tanh(x / cap).
 *
 * cpu-generic uses the C library's expf, as ggml's reference does; the x86
 * variants cpu_exp_x8 (cpu_simd.h), as ggml's own SIMD path does.
 */
#include "cpu_vec.h"

#include "cpu_simd.h"

#include <math.h>

#if defined(__AVX2__)

void cpu_swiglu_row(const float *g, const float *u, float *y, int64_t n)
{
	const __m256 one = _mm256_set1_ps(1.0f);
	int64_t i = 0;

	for (; i + 8 <= n; i += 8) {
		__m256 gv = _mm256_loadu_ps(g + i);
		__m256 e = cpu_exp_x8(_mm256_sub_ps(_mm256_setzero_ps(), gv));
		__m256 silu = _mm256_div_ps(gv, _mm256_add_ps(one, e));
		_mm256_storeu_ps(y + i, _mm256_mul_ps(silu, _mm256_loadu_ps(u + i)));
	}
	for (; i < n; i++)
		y[i] = g[i] / (1.0f + expf(-g[i])) * u[i];
}

/* tanh(z) = 1 - 2 / (e^2z + 1): exact to a few ulp, and +-1 where e^2z
 * saturates. */
static inline __m256 tanh_x8(__m256 z)
{
	const __m256 one = _mm256_set1_ps(1.0f), two = _mm256_set1_ps(2.0f);
	__m256 e = cpu_exp_x8(_mm256_mul_ps(two, z));

	return _mm256_sub_ps(one, _mm256_div_ps(two, _mm256_add_ps(e, one)));
}

void cpu_gelu_row(const float *x, float *y, int64_t n, loom_gelu_kind kind)
{
	int64_t i = 0;

	if (kind == LOOM_GELU_TANH) {
		const __m256 c = _mm256_set1_ps(GELU_SQRT_2_OVER_PI), a = _mm256_set1_ps(GELU_COEF_A);
		const __m256 half = _mm256_set1_ps(0.5f), one = _mm256_set1_ps(1.0f);
		for (; i + 8 <= n; i += 8) {
			__m256 v = _mm256_loadu_ps(x + i);
			__m256 inner = _mm256_mul_ps(_mm256_mul_ps(c, v), _mm256_fmadd_ps(_mm256_mul_ps(a, v), v, one));
			__m256 r = _mm256_mul_ps(_mm256_mul_ps(half, v), _mm256_add_ps(one, tanh_x8(inner)));
			_mm256_storeu_ps(y + i, r);
		}
	}
	for (; i < n; i++)
		y[i] = cpu_gelu(x[i], kind);
}

void cpu_softcap_row(const float *x, float *y, int64_t n, float cap)
{
	const float inv = 1.0f / cap;
	const __m256 inv8 = _mm256_set1_ps(inv), cap8 = _mm256_set1_ps(cap);
	int64_t i = 0;

	for (; i + 8 <= n; i += 8)
		_mm256_storeu_ps(y + i, _mm256_mul_ps(cap8, tanh_x8(_mm256_mul_ps(_mm256_loadu_ps(x + i), inv8))));
	for (; i < n; i++)
		y[i] = cap * tanhf(x[i] * inv);
}

void cpu_softcap_scores(float *s, int64_t n, float cap)
{
	const float inv = 1.0f / cap;
	const __m256 inv8 = _mm256_set1_ps(inv), cap8 = _mm256_set1_ps(cap), ninf = _mm256_set1_ps(-INFINITY);
	int64_t i = 0;

	for (; i + 8 <= n; i += 8) {
		__m256 x = _mm256_loadu_ps(s + i);
		__m256 y = _mm256_mul_ps(cap8, tanh_x8(_mm256_mul_ps(x, inv8)));
		_mm256_storeu_ps(s + i, _mm256_blendv_ps(y, x, _mm256_cmp_ps(x, ninf, _CMP_EQ_OQ)));
	}
	for (; i < n; i++)
		s[i] = s[i] == -INFINITY ? s[i] : cap * tanhf(s[i] * inv);
}

#else

void cpu_swiglu_row(const float *g, const float *u, float *y, int64_t n)
{
	for (int64_t i = 0; i < n; i++)
		y[i] = g[i] / (1.0f + expf(-g[i])) * u[i];
}

void cpu_gelu_row(const float *x, float *y, int64_t n, loom_gelu_kind kind)
{
	for (int64_t i = 0; i < n; i++)
		y[i] = cpu_gelu(x[i], kind);
}

void cpu_softcap_row(const float *x, float *y, int64_t n, float cap)
{
	const float inv = 1.0f / cap;

	for (int64_t i = 0; i < n; i++)
		y[i] = cap * tanhf(x[i] * inv);
}

void cpu_softcap_scores(float *s, int64_t n, float cap)
{
	const float inv = 1.0f / cap;

	for (int64_t i = 0; i < n; i++)
		s[i] = s[i] == -INFINITY ? s[i] : cap * tanhf(s[i] * inv);
}

#endif
