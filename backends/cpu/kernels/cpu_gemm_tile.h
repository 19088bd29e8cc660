/*
 * cpu_gemm_tile.h - what the tile kernel files share (cpu_gemm.c for the
 * float types, cpu_gemm_legacy.c for the 32-element quantized types,
 * cpu_gemm_k.c for the K-quants): access to a tile's rows, the dispatch on
 * its height, the byte dot products, and each file's kernels for the table
 * in cpu_gemm.c.
 *
 * A tile keeps CPU_GEMM_ROWS x nt accumulators in registers. nt is a
 * compile-time constant in each instance (CPU_GEMM_DISPATCH_UP_TO switches on
 * it), so the loops over rows and tokens unroll. A tile with fewer than
 * CPU_GEMM_ROWS weight rows repeats its last row and drops the extra
 * results, which only happens at the end of a matrix. Every output element
 * is computed by the same sequence of operations wherever its tile falls,
 * so results do not depend on how the rows are split among threads.
 */
#ifndef LOOM_CPU_GEMM_TILE_H
#define LOOM_CPU_GEMM_TILE_H

#include "cpu_gemm.h"
#include "cpu_quant.h"
#include "cpu_simd.h"


/* Weight row r of the tile, the last real one standing in past nr. */
CPU_INLINE const char *cpu_tile_weight_row(const cpu_gemm_args *a, int r)
{
	return a->w + (size_t)(r < a->nr ? r : a->nr - 1) * a->w_stride;
}

CPU_INLINE const char *cpu_tile_act_row(const cpu_gemm_args *a, int t)
{
	return a->x + (size_t)t * a->x_stride;
}

CPU_INLINE float *cpu_tile_out_row(const cpu_gemm_args *a, int t)
{
	return (float *)((char *)a->y + (size_t)t * a->y_stride);
}

/* One instance of a tile per height, up to max tokens (at most 6). The
 * switch is on a height already clamped to max, so the compiler drops the
 * cases past it, whose heights are clamped only so that they compile. */
#define CPU_GEMM_AT_MOST(n, max) ((n) < (max) ? (n) : (max))
#define CPU_GEMM_DISPATCH_UP_TO(max, call)                \
	switch (CPU_GEMM_AT_MOST(a->nt, max)) {           \
	case 1: call(1); break;                           \
	case 2: call(CPU_GEMM_AT_MOST(2, max)); break;    \
	case 3: call(CPU_GEMM_AT_MOST(3, max)); break;    \
	case 4: call(CPU_GEMM_AT_MOST(4, max)); break;    \
	case 5: call(CPU_GEMM_AT_MOST(5, max)); break;    \
	default: call(CPU_GEMM_AT_MOST(6, max)); break;   \
	}

/* The kernel cpu_gemm_NAME: call(nt), a function-like macro that runs the
 * tile of height nt (a names the tile's arguments), at every height. */
#define CPU_GEMM_TILED(name, call)                              \
	void cpu_gemm_##name(const cpu_gemm_args *a)            \
	{                                                       \
		CPU_GEMM_DISPATCH_UP_TO(CPU_GEMM_TOKENS, call)  \
	}

/* The same for a float type's kernel, whose tiles are taller. */
#define CPU_GEMM_FLOAT_TILED(name, call)                             \
	void cpu_gemm_##name(const cpu_gemm_args *a)                 \
	{                                                            \
		CPU_GEMM_DISPATCH_UP_TO(CPU_GEMM_FLOAT_TOKENS, call) \
	}

/* A kernel that takes one dot product per output element through the
 * type's row kernel (cpu_quant.h): the portable build's tiles, which the
 * compiler vectorizes as it can. */
#define CPU_GEMM_BY_ROWS(name)                                                          \
	void cpu_gemm_##name(const cpu_gemm_args *a)                                    \
	{                                                                               \
		for (int t = 0; t < a->nt; t++)                                         \
			for (int r = 0; r < a->nr; r++)                                 \
				cpu_tile_out_row(a, t)[r] = cpu_dot_##name(             \
					cpu_tile_weight_row(a, r), cpu_tile_act_row(a, t), a->n); \
	}

#if defined(__AVX2__)
/* u . s for each group of 4 bytes, in the group's 32-bit lane: unsigned
 * times signed bytes. maddubs' 16-bit pair sums saturate only past 32767,
 * which no weight type's range reaches (|u| <= 64, |s| <= 127). */
CPU_INLINE __m256i cpu_dot_u8_s8(__m256i u, __m256i s)
{
#if defined(__AVX512VNNI__)
	return _mm256_dpbusd_epi32(_mm256_setzero_si256(), u, s);
#else
	return _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1));
#endif
}

/* Asks for the bytes a->prefetch_ahead past [p, p + bytes): one request
 * per 64 bytes, however the range falls on cache lines (a redundant one
 * costs less than a branch). bytes is a constant in every caller, so the
 * loop unrolls. */
CPU_INLINE void cpu_tile_prefetch(const cpu_gemm_args *a, const void *p, size_t bytes)
{
	for (size_t o = 0; o < bytes; o += 64)
		_mm_prefetch((const char *)p + a->prefetch_ahead + o, _MM_HINT_T0);
}

/* The low (high) 4 bits of each of 32 bytes. */
CPU_INLINE __m256i cpu_low_nibbles(__m256i v)
{
	return _mm256_and_si256(v, _mm256_set1_epi8(15));
}

CPU_INLINE __m256i cpu_high_nibbles(__m256i v)
{
	return _mm256_and_si256(_mm256_srli_epi16(v, 4), _mm256_set1_epi8(15));
}
#endif

/* The kernels of each file, by weight type. */
void cpu_gemm_f32(const cpu_gemm_args *a);
void cpu_gemm_f16(const cpu_gemm_args *a);
void cpu_gemm_bf16(const cpu_gemm_args *a);
void cpu_gemm_q4_0(const cpu_gemm_args *a);
void cpu_gemm_q4_1(const cpu_gemm_args *a);
void cpu_gemm_q5_0(const cpu_gemm_args *a);
void cpu_gemm_q5_1(const cpu_gemm_args *a);
void cpu_gemm_q8_0(const cpu_gemm_args *a);
void cpu_gemm_q2_k(const cpu_gemm_args *a);
void cpu_gemm_q3_k(const cpu_gemm_args *a);
void cpu_gemm_q4_k(const cpu_gemm_args *a);
void cpu_gemm_q5_k(const cpu_gemm_args *a);
void cpu_gemm_q6_k(const cpu_gemm_args *a);
void cpu_gemm_mxfp4(const cpu_gemm_args *a);

#endif
