/*
 * cpu_matmul_id.c - LOOM_OP_MATMUL_ID: each token's rows multiplied by the
 * matrices of the experts it was routed to.
 *
 * The (token, slot) pairs are sorted by expert (a counting sort every
 * thread makes for itself, the same in each), and each pair's activation
 * row is converted to the weight's dot type into its place in that order,
 * so that an expert's rows lie together. The work is then the panels of
 * CPU_GEMM_ROWS weight rows of every expert that has pairs, each meeting
 * that expert's rows a tile at a time with MATMUL's kernels (cpu_gemm.h):
 * an expert's weights are read once a step however many tokens chose it,
 * and an expert no token chose is not read at all. Results land in the
 * sorted order and are moved to their (token, slot) rows at the end.
 * Weights are in the standard layout: MATMUL's repacked layouts are not
 * offered for experts.
 */
#include "cpu_backend.h"

#include "cpu_gemm.h"

#include <string.h>

static bool matmul_id_supports(const loom_node *node)
{
	const loom_tensor *w = node->src[0], *x = node->src[1], *ids = node->src[2], *y = node->dst;

	if (!loom_tensor_standard(w) || cpu_gemm_kernel(w->dtype) == NULL || w->ne[3] != 1)
		return false;
	if (!loom_tensor_is(x, LOOM_DTYPE_F32) || !loom_tensor_is(ids, LOOM_DTYPE_I32) ||
	    !loom_tensor_is(y, LOOM_DTYPE_F32))
		return false;
	int64_t k = ids->ne[0], n_tokens = ids->ne[1];
	if (ids->ne[2] != 1 || ids->ne[3] != 1)
		return false;
	if (x->ne[0] != w->ne[0] || (x->ne[1] != 1 && x->ne[1] != k) || x->ne[2] != n_tokens || x->ne[3] != 1)
		return false;
	return y->ne[0] == w->ne[1] && y->ne[1] == k && y->ne[2] == n_tokens && y->ne[3] == 1;
}

/* Where a node's arrays lie in the scratch: each thread's sort, then the
 * converted rows and the results, both in sorted order. */
typedef struct id_plan {
	int64_t n_expert, k, n_pairs, n_out;
	size_t act_bytes;  /* one converted row (f32 rows are copied) */
	size_t sort_bytes; /* one thread's sort */
} id_plan;

typedef struct id_sort {
	int64_t *start;  /* [n_expert + 1]: expert e's pairs are [start[e], start[e + 1]) */
	int32_t *pair;   /* [n_pairs]: token * k + slot, by expert, in order within each */
	int32_t *active; /* the experts with pairs, ascending */
	int64_t n_active;
} id_sort;

static id_plan make_plan(const loom_node *node)
{
	const loom_tensor *w = node->src[0], *ids = node->src[2];
	id_plan p = {.n_expert = w->ne[2], .k = ids->ne[0], .n_pairs = ids->ne[0] * ids->ne[1], .n_out = w->ne[1]};
	size_t converted = cpu_gemm_act_row_bytes(w->dtype, w->ne[0]);

	p.act_bytes = converted != 0 ? converted : (size_t)w->ne[0] * sizeof(float);
	p.sort_bytes = cpu_align_up((size_t)p.n_pairs * sizeof(int32_t)) +
		       cpu_align_up((size_t)(p.n_expert + 1) * sizeof(int64_t)) +
		       cpu_align_up((size_t)p.n_pairs * sizeof(int32_t)) +
		       cpu_align_up((size_t)p.n_expert * sizeof(int32_t));
	return p;
}

static size_t matmul_id_scratch_size(const loom_node *node, int n_threads)
{
	id_plan p = make_plan(node);
	return (size_t)n_threads * p.sort_bytes + cpu_align_up((size_t)p.n_pairs * p.act_bytes) +
	       cpu_align_up((size_t)(p.n_pairs * p.n_out) * sizeof(float));
}

/* The expert of pair i (token i / k, slot i % k). */
static int32_t expert_of(const loom_tensor *ids, int64_t i)
{
	return ((const int32_t *)loom_tensor_row(ids, i / ids->ne[0]))[i % ids->ne[0]];
}

/* The counting sort of the pairs by expert; false if an index is out of
 * range (those pairs are left out). */
static bool sort_pairs(const id_plan *p, const loom_tensor *ids_tensor, unsigned char *at, id_sort *s)
{
	bool ok = true;
	int32_t *ids = (int32_t *)at; /* the pairs' experts, in pair order */

	for (int64_t i = 0; i < p->n_pairs; i++)
		ids[i] = expert_of(ids_tensor, i);
	at += cpu_align_up((size_t)p->n_pairs * sizeof(int32_t));
	s->start = (int64_t *)at;
	s->pair = (int32_t *)(at + cpu_align_up((size_t)(p->n_expert + 1) * sizeof(int64_t)));
	s->active = (int32_t *)((unsigned char *)s->pair + cpu_align_up((size_t)p->n_pairs * sizeof(int32_t)));
	memset(s->start, 0, (size_t)(p->n_expert + 1) * sizeof(int64_t));
	for (int64_t i = 0; i < p->n_pairs; i++) {
		if (ids[i] < 0 || ids[i] >= p->n_expert) {
			ok = false;
			continue;
		}
		s->start[ids[i] + 1]++;
	}
	s->n_active = 0;
	for (int64_t e = 0; e < p->n_expert; e++) {
		if (s->start[e + 1] > 0)
			s->active[s->n_active++] = (int32_t)e;
		s->start[e + 1] += s->start[e];
	}
	/* start[e] is the next free place of expert e while placing, then
	 * back to its first one. */
	for (int64_t i = 0; i < p->n_pairs; i++)
		if (ids[i] >= 0 && ids[i] < p->n_expert)
			s->pair[s->start[ids[i]]++] = (int32_t)i;
	for (int64_t e = p->n_expert; e > 0; e--)
		s->start[e] = s->start[e - 1];
	s->start[0] = 0;
	return ok;
}

static int64_t min64(int64_t a, int64_t b)
{
	return a < b ? a : b;
}

static void matmul_id_run(const loom_node *node, const cpu_task *task)
{
	const loom_tensor *w = node->src[0], *x = node->src[1], *y = node->dst;
	const loom_tensor *ids = node->src[2];
	const id_plan p = make_plan(node);
	const bool convert = cpu_gemm_act_row_bytes(w->dtype, w->ne[0]) != 0;
	char *act = (char *)task->scratch + (size_t)task->nth * p.sort_bytes;
	float *out = (float *)(act + cpu_align_up((size_t)p.n_pairs * p.act_bytes));
	id_sort s;
	int64_t lo, hi;

	if (!sort_pairs(&p, ids, task->scratch + (size_t)task->ith * p.sort_bytes, &s) && task->ith == 0)
		cpu_task_fail(task);

	/* Each pair's row, converted into its sorted place. */
	const int64_t n_placed = s.start[p.n_expert];
	cpu_split(n_placed, task->ith, task->nth, &lo, &hi);
	for (int64_t i = lo; i < hi; i++) {
		int64_t pair = s.pair[i], t = pair / p.k, j = x->ne[1] == 1 ? 0 : pair % p.k;
		const float *row = (const float *)((const char *)x->data + t * x->nb[2] + j * x->nb[1]);
		if (convert)
			cpu_gemm_act_convert(w->dtype, row, act + (size_t)i * p.act_bytes, 0, w->ne[0]);
		else
			memcpy(act + (size_t)i * p.act_bytes, row, p.act_bytes);
	}
	cpu_task_barrier(task);

	/* Panels of each chosen expert's weights against its rows. */
	const cpu_gemm_fn kernel = cpu_gemm_kernel(w->dtype);
	const int tile = cpu_gemm_tokens(w->dtype);
	const int64_t n_panels = (p.n_out + CPU_GEMM_ROWS - 1) / CPU_GEMM_ROWS;
	while (cpu_take_guided(task, 0, s.n_active * n_panels, 1, &lo, &hi)) {
		for (int64_t u = lo; u < hi; u++) {
			int64_t e = s.active[u / n_panels], o = u % n_panels * CPU_GEMM_ROWS;
			int64_t first = s.start[e], last = s.start[e + 1];
			for (int64_t r = first; r < last; r += tile) {
				cpu_gemm_args a = {
					.n = w->ne[0],
					.w = (const char *)w->data + (size_t)e * w->nb[2] + (size_t)o * w->nb[1],
					.w_stride = w->nb[1],
					.x = act + (size_t)r * p.act_bytes,
					.x_stride = p.act_bytes,
					.y = out + r * p.n_out + o,
					.y_stride = (size_t)p.n_out * sizeof(float),
					.nr = (int)min64(CPU_GEMM_ROWS, p.n_out - o),
					.nt = (int)min64(tile, last - r),
					.prefetch_ahead = r == first ? cpu_gemm_prefetch_distance(w->nb[1]) : 0,
				};
				kernel(&a);
			}
		}
	}
	cpu_task_barrier(task);

	/* The results to their (token, slot) rows. */
	cpu_split(n_placed, task->ith, task->nth, &lo, &hi);
	for (int64_t i = lo; i < hi; i++) {
		int64_t pair = s.pair[i];
		float *dst = (float *)((char *)y->data + pair / p.k * y->nb[2] + pair % p.k * y->nb[1]);
		memcpy(dst, out + i * p.n_out, (size_t)p.n_out * sizeof(float));
	}
}

const cpu_op cpu_op_matmul_id = {
	.supports = matmul_id_supports,
	.scratch_size = matmul_id_scratch_size,
	.run = matmul_id_run,
};
