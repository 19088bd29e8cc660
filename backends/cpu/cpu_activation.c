/*
 * cpu_activation.c - the activations, a row at a time: SwiGLU's gate,
 * silu(g) * u = g / (1 + e^-g) * u, and GELU (tanh approximation or exact).
 *
 * cpu-generic uses the C library's expf, as ggml's reference does. The x86
 * variants compute e^x eight lanes at once, as ggml's own SIMD path does:
 * x = n ln 2 + r with |r| <= ln 2 / 2, e^r by Cephes' degree-7 polynomial,
 * then 2^n put into the exponent. Its error stays within 2 ulp of expf's
 * over the range that matters (e^x past 2^127 saturates, below 2^-126 it
 * flushes to 0, and silu is then g or -0 anyway).
 */
#include "cpu_vec.h"

#include "cpu_simd.h"

#include <math.h>

#if defined(__AVX2__)

static inline __m256 exp_x8(__m256 x)
{
	const __m256 log2e = _mm256_set1_ps(1.44269504088896341f);
	const __m256 ln2_hi = _mm256_set1_ps(0.693359375f), ln2_lo = _mm256_set1_ps(-2.12194440e-4f);

	x = _mm256_max_ps(_mm256_min_ps(x, _mm256_set1_ps(88.0f)), _mm256_set1_ps(-87.0f));
	__m256 n = _mm256_round_ps(_mm256_mul_ps(x, log2e), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
	__m256 r = _mm256_fnmadd_ps(n, ln2_hi, x);
	r = _mm256_fnmadd_ps(n, ln2_lo, r);
	__m256 p = _mm256_set1_ps(1.9875691500e-4f);
	p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507e-3f));
	p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073e-3f));
	p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
	p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
	p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
	p = _mm256_fmadd_ps(p, _mm256_mul_ps(r, r), _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
	__m256i e = _mm256_slli_epi32(_mm256_cvtps_epi32(n), 23);
	return _mm256_castsi256_ps(_mm256_add_epi32(_mm256_castps_si256(p), e));
}

void cpu_swiglu_row(const float *g, const float *u, float *y, int64_t n)
{
	const __m256 one = _mm256_set1_ps(1.0f);
	int64_t i = 0;

	for (; i + 8 <= n; i += 8) {
		__m256 gv = _mm256_loadu_ps(g + i);
		__m256 e = exp_x8(_mm256_sub_ps(_mm256_setzero_ps(), gv));
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
	__m256 e = exp_x8(_mm256_mul_ps(two, z));

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

#endif
