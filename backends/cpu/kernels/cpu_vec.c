/* cpu_vec.c - single-row vector kernels (see cpu_vec.h). */
#include "cpu_vec.h"

#include "cpu_half.h"
#include "cpu_simd.h"

#include <stddef.h>

#if defined(__AVX512F__)

float cpu_dot_f32(const float *a, const float *b, int64_t n)
{
	__m512 acc = _mm512_setzero_ps();
	int64_t i = 0;

	for (; i + 16 <= n; i += 16)
		acc = _mm512_fmadd_ps(_mm512_loadu_ps(a + i), _mm512_loadu_ps(b + i), acc);
	if (i < n) {
		__mmask16 m = cpu_tail_mask(n - i);
		__m512 va = _mm512_maskz_loadu_ps(m, a + i), vb = _mm512_maskz_loadu_ps(m, b + i);
		acc = _mm512_fmadd_ps(va, vb, acc);
	}
	return _mm512_reduce_add_ps(acc);
}

float cpu_dot_fp16(const uint16_t *a, const float *b, int64_t n)
{
	__m512 acc = _mm512_setzero_ps();
	int64_t i = 0;

	for (; i + 16 <= n; i += 16)
		acc = _mm512_fmadd_ps(cpu_load_fp16_x16(a + i, 0xffff), _mm512_loadu_ps(b + i), acc);
	if (i < n) {
		__mmask16 m = cpu_tail_mask(n - i);
		acc = _mm512_fmadd_ps(cpu_load_fp16_x16(a + i, m), _mm512_maskz_loadu_ps(m, b + i), acc);
	}
	return _mm512_reduce_add_ps(acc);
}

void cpu_axpy_fp16(float *y, float a, const uint16_t *x, int64_t n)
{
	__m512 va = _mm512_set1_ps(a);
	int64_t i = 0;

	for (; i + 16 <= n; i += 16)
		_mm512_storeu_ps(y + i, _mm512_fmadd_ps(va, cpu_load_fp16_x16(x + i, 0xffff),
							_mm512_loadu_ps(y + i)));
	if (i < n) {
		__mmask16 m = cpu_tail_mask(n - i);
		__m512 r = _mm512_fmadd_ps(va, cpu_load_fp16_x16(x + i, m), _mm512_maskz_loadu_ps(m, y + i));
		_mm512_mask_storeu_ps(y + i, m, r);
	}
}

double cpu_sum_squares(const float *x, int64_t n)
{
	__m512d lo = _mm512_setzero_pd(), hi = _mm512_setzero_pd();
	int64_t i = 0;

	for (; i < n; i += 16) {
		__mmask16 m = n - i >= 16 ? 0xffff : cpu_tail_mask(n - i);
		__m512 v = _mm512_maskz_loadu_ps(m, x + i);
		__m512 sq = _mm512_mul_ps(v, v);
		lo = _mm512_add_pd(lo, _mm512_cvtps_pd(_mm512_castps512_ps256(sq)));
		hi = _mm512_add_pd(hi, _mm512_cvtps_pd(_mm512_extractf32x8_ps(sq, 1)));
	}
	return _mm512_reduce_add_pd(_mm512_add_pd(lo, hi));
}

#elif defined(__AVX2__)

float cpu_dot_f32(const float *a, const float *b, int64_t n)
{
	__m256 acc = _mm256_setzero_ps();
	int64_t i = 0;

	for (; i + 8 <= n; i += 8)
		acc = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), acc);
	float sum = cpu_hsum_x8(acc);
	for (; i < n; i++)
		sum += a[i] * b[i];
	return sum;
}

float cpu_dot_fp16(const uint16_t *a, const float *b, int64_t n)
{
	__m256 acc = _mm256_setzero_ps();
	int64_t i = 0;

	for (; i + 8 <= n; i += 8)
		acc = _mm256_fmadd_ps(cpu_load_fp16_x8(a + i), _mm256_loadu_ps(b + i), acc);
	float sum = cpu_hsum_x8(acc);
	for (; i < n; i++)
		sum += cpu_fp16_to_f32(a[i]) * b[i];
	return sum;
}

void cpu_axpy_fp16(float *y, float a, const uint16_t *x, int64_t n)
{
	__m256 va = _mm256_set1_ps(a);
	int64_t i = 0;

	for (; i + 8 <= n; i += 8) {
		__m256 r = _mm256_fmadd_ps(va, cpu_load_fp16_x8(x + i), _mm256_loadu_ps(y + i));
		_mm256_storeu_ps(y + i, r);
	}
	for (; i < n; i++)
		y[i] += a * cpu_fp16_to_f32(x[i]);
}

double cpu_sum_squares(const float *x, int64_t n)
{
	__m256d lo = _mm256_setzero_pd(), hi = _mm256_setzero_pd();
	int64_t i = 0;

	for (; i + 8 <= n; i += 8) {
		__m256 v = _mm256_loadu_ps(x + i);
		__m256 sq = _mm256_mul_ps(v, v);
		lo = _mm256_add_pd(lo, _mm256_cvtps_pd(_mm256_castps256_ps128(sq)));
		hi = _mm256_add_pd(hi, _mm256_cvtps_pd(_mm256_extractf128_ps(sq, 1)));
	}
	__m256d s = _mm256_add_pd(lo, hi);
	__m128d s2 = _mm_add_pd(_mm256_castpd256_pd128(s), _mm256_extractf128_pd(s, 1));
	double sum = _mm_cvtsd_f64(_mm_add_sd(s2, _mm_unpackhi_pd(s2, s2)));
	for (; i < n; i++)
		sum += (double)(x[i] * x[i]);
	return sum;
}

#else

float cpu_dot_f32(const float *a, const float *b, int64_t n)
{
	float sum = 0.0f;
	for (int64_t i = 0; i < n; i++)
		sum += a[i] * b[i];
	return sum;
}

float cpu_dot_fp16(const uint16_t *a, const float *b, int64_t n)
{
	float sum = 0.0f;
	for (int64_t i = 0; i < n; i++)
		sum += cpu_fp16_to_f32(a[i]) * b[i];
	return sum;
}

void cpu_axpy_fp16(float *y, float a, const uint16_t *x, int64_t n)
{
	for (int64_t i = 0; i < n; i++)
		y[i] += a * cpu_fp16_to_f32(x[i]);
}

double cpu_sum_squares(const float *x, int64_t n)
{
	double sum = 0.0;
	for (int64_t i = 0; i < n; i++)
		sum += (double)(x[i] * x[i]);
	return sum;
}

#endif

/* Plain loops: the compiler vectorizes these for each variant's ISA. */
void cpu_axpy_f32(float *y, float a, const float *x, int64_t n)
{
	for (int64_t i = 0; i < n; i++)
		y[i] += a * x[i];
}

void cpu_scale_row(const float *x, float s, const float *w, float *y, int64_t n)
{
	if (w == NULL) {
		for (int64_t i = 0; i < n; i++)
			y[i] = x[i] * s;
		return;
	}
	for (int64_t i = 0; i < n; i++)
		y[i] = (x[i] * s) * w[i];
}
