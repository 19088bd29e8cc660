/*
 * cpu_kv_rows.h - what attention does with the rows of a K/V cache, by the
 * cache's type: a query put in the form its keys are dotted with, the scores
 * of a block of keys, and a block of values weighted into output rows.
 *
 * F32 keys meet the query as it is; F16 keys a query rounded to fp16 and
 * dotted in f32, as ggml's F16 matmul does. Q8_0 and Q4_0 keys meet a
 * query quantized to Q8_0, dotted in integers a block at a time, as the
 * matmuls of those weight types do. Values are widened to f32 and weighted
 * in f32. Row lengths d are whole blocks of the type.
 */
#ifndef LOOM_CPU_KV_ROWS_H
#define LOOM_CPU_KV_ROWS_H

#include "loom/plugin_api.h"

#include <stddef.h>
#include <stdint.h>

/* Keys scored, and values weighted, together: a row's block of them is one
 * cpu_differ_x16's worth. */
#define CPU_KV_BLOCK 16

typedef struct cpu_kv_rows {
	/* Bytes of one prepared query row of d elements. */
	size_t (*query_bytes)(int64_t d);
	void (*prepare_query)(const float *q, void *out, int64_t d);
	/* For the nr query rows q + r * q_stride and the n <= CPU_KV_BLOCK
	 * keys k + j * k_stride: s[r * CPU_KV_BLOCK + j] += scale * q_r . k_j,
	 * except where it is -INFINITY (a masked key, which is not read). */
	void (*scores)(const char *q, size_t q_stride, int nr, const char *k, size_t k_stride, int n,
		       int64_t d, float scale, float *s);
	/* o[r * d + i] += sum_j p[r * CPU_KV_BLOCK + j] * v_j[i] for the nr
	 * rows and the n values v + j * v_stride; a value of weight 0 is not
	 * read. */
	void (*mix)(float *o, int nr, const float *p, const char *v, size_t v_stride, int n,
		    int64_t d);
} cpu_kv_rows;

/* The functions for a cache of this type (F32, F16, Q8_0 or Q4_0); NULL for
 * any other. */
const cpu_kv_rows *cpu_kv_rows_of(loom_dtype type);

#endif
