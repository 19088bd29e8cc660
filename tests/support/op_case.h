/*
 * op_case.h - one node of a backend's work, written down on the host: the
 * tensors as packed rows, the op's parameters, and random contents for
 * them. The backend suites build cases with these, compute what the op
 * must give with op_reference.h, and run them with op_runner.h.
 */
#ifndef LOOM_TEST_OP_CASE_H
#define LOOM_TEST_OP_CASE_H

#include "cpu_ref.h"

#include <loom/plugin_api.h>

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* A tensor in host memory, rows packed. All-zero ne: absent. */
typedef struct htensor {
	loom_dtype dtype;
	int64_t ne[LOOM_MAX_DIMS];
	void *data;
} htensor;

size_t ht_row_bytes(const htensor *t);
int64_t ht_rows(const htensor *t);
size_t ht_bytes(const htensor *t);
size_t ht_elements(const htensor *t);
bool ht_present(const htensor *t);
/* A zeroed tensor of this dtype and shape (calloc'd). */
htensor ht(loom_dtype type, int64_t ne0, int64_t ne1, int64_t ne2, int64_t ne3);
/* A copy of t's contents in a new tensor. */
htensor ht_copy(const htensor *t);

static inline float *ht_f32(const htensor *t)
{
	return t->data;
}

static inline int32_t *ht_i32(const htensor *t)
{
	return t->data;
}

static inline uint16_t *ht_u16(const htensor *t)
{
	return t->data;
}

typedef struct op_case {
	char what[160]; /* names the case in failure messages */
	loom_op op;
	htensor src[LOOM_NODE_MAX_SRC];
	htensor dst; /* dtype and shape; data = the initial contents */
	int32_t ip[LOOM_NODE_MAX_PARAMS];
	float fp[LOOM_NODE_MAX_PARAMS];
	bool in_place; /* dst is src[0]'s memory */
	bool repack;   /* src[0] goes through weight_repack first */
} op_case;

void op_case_free(op_case *c);

const char *dtype_name(loom_dtype t);

/* ---- Random contents ---- */

void fill_normal(ref_rng *rng, float *x, size_t n, double scale);
/* Rows of any weight or cache dtype: normal values (scale s) rounded to
 * F16 or BF16, or random blocks of a quantized type (cpu_ref.h). */
htensor random_weights(ref_rng *rng, loom_dtype type, int64_t ne0, int64_t ne1, double s);
/* f32 values that stress a conversion to fp16: any bit pattern (NaNs and
 * infinities), exact ties, subnormals, the top of the range. */
float awkward_f32(ref_rng *rng);
/* nt distinct cells out of n_cells, in random order. */
void pick_cells(ref_rng *rng, int32_t *out, int64_t nt, int64_t n_cells);

/* A batched decode's ATTENTION: one token of each of BATCHED_SEQS
 * sequences, heads of BATCHED_HEAD_DIM. The cache holds each sequence's
 * prompt of BATCHED_PROMPT cells as a run, then BATCHED_GEN generated
 * cells of each interleaved, as decode steps of all of them leave it; each
 * token's mask row sees its own sequence's cells. */
enum { BATCHED_SEQS = 16, BATCHED_PROMPT = 40, BATCHED_GEN = 3, BATCHED_HEAD_DIM = 64 };
op_case batched_decode_case(ref_rng *rng, loom_dtype cache_type, int64_t n_head, int64_t n_head_kv);

/* ---- Values ---- */

/* Element i of row r of a weight or cache tensor, as the exact f32 value. */
float ht_value(const htensor *t, int64_t r, int64_t i);
/* Row r as f32, a quantized row's blocks decoded once each. */
void ht_row_values(const htensor *t, int64_t r, float *out);

/* Steps idx[0..n) through every combination of idx[k] < sizes[k], the last
 * index fastest, like nested loops; false once all were visited. */
bool grid_next(int *idx, const int *sizes, int n);

#endif
