/*
 * cpu_gemm.h - matmul tile kernels: dot products of a few weight rows with a
 * few activation rows at once, so that each weight block loaded from memory
 * serves several tokens and each activation block several rows.
 */
#ifndef LOOM_CPU_GEMM_H
#define LOOM_CPU_GEMM_H

#include "loom/plugin_api.h"

#include <stddef.h>
#include <stdint.h>

/* Largest tile: weight rows x activation rows. The float types' tiles
 * take more tokens: their weights, held in registers while the tokens pass,
 * need no unpacking registers. */
#if defined(__AVX512F__)
#define CPU_GEMM_ROWS 4
#define CPU_GEMM_TOKENS 4
#define CPU_GEMM_FLOAT_TOKENS 6
#elif defined(__AVX2__)
#define CPU_GEMM_ROWS 4
#define CPU_GEMM_TOKENS 2
#define CPU_GEMM_FLOAT_TOKENS 2
#else
#define CPU_GEMM_ROWS 4
#define CPU_GEMM_TOKENS 4
#define CPU_GEMM_FLOAT_TOKENS 6
#endif

/* One tile: y[t][r] = dot(weight row r, activation row t) for r < nr,
 * t < nt. Activations are f32 rows for F32 weights, rows of the weights'
 * own type for F16 and BF16 weights, and rows of blocks of the activation
 * type for the quantized types (cpu_quant.h). */
typedef struct cpu_gemm_args {
	int64_t n;            /* elements per row */
	const char *w;        /* weight row 0 of the tile */
	size_t w_stride;      /* bytes between weight rows */
	const char *x;        /* activation row 0 of the tile */
	size_t x_stride;      /* bytes between activation rows */
	float *y;             /* output element (token 0, row 0) */
	size_t y_stride;      /* bytes between output rows (tokens) */
	int nr;               /* 1..CPU_GEMM_ROWS */
	int nt;               /* 1..cpu_gemm_tokens(weight type) */
	/* Bytes past each weight byte read that the tile asks the memory to
	 * bring into cache meanwhile; 0 when the weights are already there
	 * (the requests then find them). */
	size_t prefetch_ahead;
} cpu_gemm_args;

typedef void (*cpu_gemm_fn)(const cpu_gemm_args *a);

/* How far ahead of its reads a tile fetches weights: whole panels (the
 * bytes the next tiles of the thread read, at the same place), at least
 * 2 KiB, enough to cover the memory's latency. The hardware prefetchers
 * stop at every 4 KiB page, which a mapped file's weights are made of. */
static inline size_t cpu_gemm_prefetch_distance(size_t w_stride)
{
	size_t panel = (size_t)CPU_GEMM_ROWS * w_stride;
	return (2048 + panel - 1) / panel * panel;
}

/* The kernel for weights of this dtype; NULL if there is none. */
cpu_gemm_fn cpu_gemm_kernel(loom_dtype weight_type);

/* Bytes of one activation row of n elements as the kernels for this
 * weight type read it: rows of F16 or BF16 for F16 or BF16 weights,
 * blocks of the quantized types' activation type (cpu_quant.h); 0 for F32
 * weights, which read the f32 rows in place. */
size_t cpu_gemm_act_row_bytes(loom_dtype weight_type, int64_t n);
/* Elements [e0, e0 + n) of the f32 row x into the activation row `row`
 * (of cpu_gemm_act_row_bytes); e0 and n whole blocks of the activation
 * type. Nothing for F32 weights. */
void cpu_gemm_act_convert(loom_dtype weight_type, const float *x, char *row, int64_t e0, int64_t n);

/* The most tokens its tiles take at once. */
int cpu_gemm_tokens(loom_dtype weight_type);

/* Rows a decode's float kernel runs side by side. */
#define CPU_GEMV_ROWS 16

/* A decode's kernel: y[r] = dot(weight row r, a->x) for r < n_rows, one
 * activation row (a->nr, a->nt and a->prefetch_ahead unused); each element
 * is the tile kernel's bit for bit. For F32, F16 and BF16 weights in the
 * AVX-512 builds, else NULL. */
typedef void (*cpu_gemv_fn)(const cpu_gemm_args *a, int64_t n_rows);
cpu_gemv_fn cpu_gemv_kernel(loom_dtype weight_type);

#endif
