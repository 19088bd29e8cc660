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
 * sorted order and are moved to their (token, slot) rows at the end. A
 * decode's single token is converted by every thread for itself and its
 * results written in place, a row at a time: no barrier inside the node,
 * which three matmuls a layer would otherwise pay twice each.
 * Experts repacked at load (cpu_repack.h: all their rows as one matrix,
 * each expert's whole groups of CPU_REPACK_ROWS) are multiplied a group at
 * a time by the repacked kernels, as MATMUL's decode does.
 */
#include "cpu_backend.h"

#include "cpu_gemm.h"
#include "cpu_blocks.h"

#include <string.h>

static bool matmul_id_supports(const loom_node *node)
{
	const loom_tensor *w = node->src[0];

	if (!cpu_weight_ok(w) || cpu_gemm_kernel(w->dtype) == NULL || !loom_matmul_id_node_ok(node))
		return false;
	return !cpu_layout_rearranges(w->layout) || w->ne[1] % CPU_REPACK_ROWS == 0;
}

/* Where a node's arrays lie in the scratch: each thread's sort, then the
 * converted rows and the results, both in sorted order. */
typedef struct id_plan {
	int64_t n_expert, k, n_pairs, n_out;
	bool alone; /* one token: each thread converts it for itself, results go straight to dst */
	bool shared; /* alone, and its slots share one row (a gate or up projection's): converted once */
	size_t act_bytes;  /* one converted row (f32 rows are copied) */
	size_t prep_bytes; /* what a repacked layout's kernels take of a row besides (cpu_repacked_prepare) */
	size_t sort_bytes; /* one thread's sort */
	size_t expert_bytes; /* one expert's matrix in the weight's layout */
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
	id_plan p = {.n_expert = w->ne[2], .k = ids->ne[0], .n_pairs = ids->ne[0] * ids->ne[1], .n_out = w->ne[1],
		     .alone = ids->ne[1] == 1};
	p.shared = p.alone && node->src[1]->ne[1] == 1;
	size_t converted = cpu_gemm_act_row_bytes(w->dtype, w->ne[0]);

	p.act_bytes = converted != 0 ? converted : (size_t)w->ne[0] * sizeof(float);
	p.prep_bytes = cpu_layout_rearranges(w->layout) ? cpu_align_up(cpu_repacked_act_bytes(w->layout, w->ne[0])) : 0;
	p.expert_bytes = w->nb[2];
	if (cpu_layout_rearranges(w->layout)) {
		loom_tensor one = *w;
		uint32_t layout;
		one.ne[2] = 1;
		one.layout = 0;
		p.expert_bytes = cpu_repacked_bytes(&one, &layout);
	}
	p.sort_bytes = cpu_align_up((size_t)p.n_pairs * sizeof(int32_t)) +
		       cpu_align_up((size_t)(p.n_expert + 1) * sizeof(int64_t)) +
		       cpu_align_up((size_t)p.n_pairs * sizeof(int32_t)) +
		       cpu_align_up((size_t)p.n_expert * sizeof(int32_t));
	return p;
}

static size_t matmul_id_scratch_size(const loom_node *node, int n_threads)
{
	id_plan p = make_plan(node);
	size_t rows = cpu_align_up((size_t)p.n_pairs * p.act_bytes) + (size_t)p.n_pairs * p.prep_bytes;
	if (p.alone)
		return (size_t)n_threads * (p.sort_bytes + rows);
	return (size_t)n_threads * p.sort_bytes + rows + cpu_align_up((size_t)(p.n_pairs * p.n_out) * sizeof(float));
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

/* Where a node's converted rows and results lie, in sorted order; y: the
 * node's dst, where a decode's results go in place. */
typedef struct id_rows {
	char *act, *prep;
	float *out;
	const loom_tensor *y;
	const loom_tensor *bias; /* NULL: none */
} id_rows;

/* Adds expert e's biases for outputs [o, o + n) to nt result rows. */
static void add_bias(const id_rows *r, int64_t e, int64_t o, int64_t n, float *y, size_t stride, int64_t nt)
{
	if (r->bias == NULL)
		return;
	const float *b = (const float *)loom_tensor_row(r->bias, e) + o;
	for (int64_t t = 0; t < nt; t++) {
		float *row = (float *)((char *)y + (size_t)t * stride) + o;
		for (int64_t i = 0; i < n; i++)
			row[i] += b[i];
	}
}

/* Pair i's converted row (in sorted order) and what the repacked kernels
 * take of it besides. */
static const char *act_row(const id_plan *p, const id_rows *r, int64_t i)
{
	return r->act + (size_t)(p->shared ? 0 : i) * p->act_bytes;
}

static const char *prep_row(const id_plan *p, const id_rows *r, int64_t i)
{
	return r->prep + (size_t)(p->shared ? 0 : i) * p->prep_bytes;
}

/* Where pair i (in sorted order) of rows [first, ...) puts its results:
 * its place in out, or its own row of dst, and the stride between two
 * consecutive pairs' (0: a row at a time). */
static float *result_row(const id_plan *p, const id_sort *s, const id_rows *r, int64_t i, size_t *stride)
{
	if (!p->alone) {
		*stride = (size_t)p->n_out * sizeof(float);
		return r->out + i * p->n_out;
	}
	int64_t pair = s->pair[i];
	*stride = 0;
	return (float *)((char *)r->y->data + pair / p->k * r->y->nb[2] + pair % p->k * r->y->nb[1]);
}

/* The next units (groups or panels of the chosen experts' rows, in order)
 * for this thread: a decode's as MATMUL's decode takes its rows
 * (cpu_take_decode), whose first share cpu_matmul_id_first_weights
 * fetched; else in guided takes. */
static bool take_units(const id_plan *p, const cpu_task *task, int64_t total, bool *first, int64_t *lo, int64_t *hi)
{
	if (p->alone)
		return cpu_take_decode(task, total, first, lo, hi);
	return cpu_take_guided(task, 0, total, 1, lo, hi);
}

/* Groups of each chosen expert's rows of a repacked weight against its
 * tokens. */
static void multiply_repacked(const loom_tensor *w, const id_plan *p, const id_sort *s, const id_rows *r,
			      const cpu_task *task)
{
	const int64_t n_groups = p->n_out / CPU_REPACK_ROWS;
	int64_t lo, hi;
	bool first_take = true;

	while (take_units(p, task, s->n_active * n_groups, &first_take, &lo, &hi)) {
		for (int64_t u = lo; u < hi;) {
			int64_t e = s->active[u / n_groups], g = u % n_groups, g_hi = min64(n_groups, g + (hi - u));
			int64_t first = s->start[e], last = s->start[e + 1];
			loom_tensor one = *w;
			one.ne[2] = 1;
			one.data = (char *)w->data + (size_t)e * p->expert_bytes;
			for (int64_t i = first; i < last;) {
				size_t stride;
				float *y = result_row(p, s, r, i, &stride);
				int64_t nt = stride != 0 ? last - i : 1;
				cpu_repacked_multiply(&one, g, g_hi, act_row(p, r, i), p->act_bytes, prep_row(p, r, i),
						      p->prep_bytes, nt, y,
						      stride != 0 ? stride : sizeof(float));
				add_bias(r, e, g * CPU_REPACK_ROWS, (g_hi - g) * CPU_REPACK_ROWS, y, stride, nt);
				i += nt;
			}
			u += g_hi - g;
		}
	}
}

/* Panels of CPU_GEMM_ROWS rows of each chosen expert's weights against
 * its tokens, a tile at a time. */
static void multiply_tiles(const loom_tensor *w, const id_plan *p, const id_sort *s, const id_rows *r,
			   const cpu_task *task)
{
	const cpu_gemm_fn kernel = cpu_gemm_kernel(w->dtype);
	const int tile = cpu_gemm_tokens(w->dtype);
	const int64_t n_panels = (p->n_out + CPU_GEMM_ROWS - 1) / CPU_GEMM_ROWS;
	int64_t lo, hi;
	bool first_take = true;

	while (take_units(p, task, s->n_active * n_panels, &first_take, &lo, &hi)) {
		for (int64_t u = lo; u < hi; u++) {
			int64_t e = s->active[u / n_panels], o = u % n_panels * CPU_GEMM_ROWS;
			int64_t first = s->start[e], last = s->start[e + 1];
			for (int64_t t = first; t < last;) {
				size_t stride;
				float *y = result_row(p, s, r, t, &stride);
				cpu_gemm_args a = {
					.n = w->ne[0],
					.w = (const char *)w->data + (size_t)e * p->expert_bytes + (size_t)o * w->nb[1],
					.w_stride = w->nb[1],
					.x = act_row(p, r, t),
					.x_stride = p->act_bytes,
					.y = y + o,
					.y_stride = stride != 0 ? stride : sizeof(float),
					.nr = (int)min64(CPU_GEMM_ROWS, p->n_out - o),
					.nt = stride != 0 ? (int)min64(tile, last - t) : 1,
					.prefetch_ahead = t == first ? cpu_gemm_prefetch_distance(w->nb[1]) : 0,
				};
				kernel(&a);
				add_bias(r, e, o, a.nr, y, stride, a.nt);
				t += a.nt;
			}
		}
	}
}

static void matmul_id_run(const loom_node *node, const cpu_task *task)
{
	const loom_tensor *w = node->src[0], *x = node->src[1], *y = node->dst;
	const id_plan p = make_plan(node);
	const bool convert = cpu_gemm_act_row_bytes(w->dtype, w->ne[0]) != 0;
	id_rows r;
	id_sort s;
	int64_t lo, hi;

	const size_t rows = cpu_align_up((size_t)p.n_pairs * p.act_bytes) + (size_t)p.n_pairs * p.prep_bytes;
	r.act = (char *)task->scratch + (size_t)task->nth * p.sort_bytes + (p.alone ? (size_t)task->ith * rows : 0);
	r.prep = r.act + cpu_align_up((size_t)p.n_pairs * p.act_bytes);
	r.out = (float *)(r.prep + (size_t)p.n_pairs * p.prep_bytes);
	r.y = y;
	r.bias = node->src[3];
	if (!sort_pairs(&p, node->src[2], task->scratch + (size_t)task->ith * p.sort_bytes, &s) && task->ith == 0)
		cpu_task_fail(task);

	/* Each pair's row, converted into its sorted place (by every thread
	 * for itself, a decode's; once, where its slots share it). */
	const int64_t n_placed = s.start[p.n_expert];
	lo = 0;
	hi = p.shared ? n_placed > 0 : n_placed;
	if (!p.alone)
		cpu_split(n_placed, task->ith, task->nth, &lo, &hi);
	for (int64_t i = lo; i < hi; i++) {
		int64_t pair = s.pair[i], t = pair / p.k, j = x->ne[1] == 1 ? 0 : pair % p.k;
		const float *row = (const float *)((const char *)x->data + t * x->nb[2] + j * x->nb[1]);
		char *a = r.act + (size_t)i * p.act_bytes;
		if (convert)
			cpu_gemm_act_convert(w->dtype, row, a, 0, w->ne[0]);
		else
			memcpy(a, row, p.act_bytes);
		if (p.prep_bytes != 0)
			cpu_repacked_prepare(w->layout, a, w->ne[0] / CPU_QK, r.prep + (size_t)i * p.prep_bytes);
	}
	if (!p.alone)
		cpu_task_barrier(task);

	if (cpu_layout_rearranges(w->layout))
		multiply_repacked(w, &p, &s, &r, task);
	else
		multiply_tiles(w, &p, &s, &r, task);
	if (p.alone)
		return;
	cpu_task_barrier(task);

	/* The results to their (token, slot) rows. */
	cpu_split(n_placed, task->ith, task->nth, &lo, &hi);
	for (int64_t i = lo; i < hi; i++) {
		int64_t pair = s.pair[i];
		float *dst = (float *)((char *)y->data + pair / p.k * y->nb[2] + pair % p.k * y->nb[1]);
		memcpy(dst, r.out + i * p.n_out, (size_t)p.n_out * sizeof(float));
	}
}

/* The most experts a decode's token takes for its first weights to be
 * fetched: the choices are sorted here, on the stack. */
#define FETCH_MAX_CHOSEN 64

bool cpu_matmul_id_first_weights(const loom_node *node, int ith, int nth, cpu_fetch *f)
{
	const loom_tensor *w = node->src[0], *ids = node->src[2];
	const id_plan p = make_plan(node);
	int32_t chosen[FETCH_MAX_CHOSEN];
	int64_t n_chosen = 0;

	if (!p.alone || p.k > FETCH_MAX_CHOSEN)
		return false;
	/* The distinct experts, ascending: the order the work goes in. */
	for (int64_t j = 0; j < p.k; j++) {
		int32_t e = expert_of(ids, j);
		int64_t at = n_chosen;
		if (e < 0 || e >= p.n_expert)
			return false;
		while (at > 0 && chosen[at - 1] > e)
			at--;
		if (at > 0 && chosen[at - 1] == e)
			continue;
		memmove(chosen + at + 1, chosen + at, (size_t)(n_chosen - at) * sizeof(int32_t));
		chosen[at] = e;
		n_chosen++;
	}
	const bool repacked = cpu_layout_rearranges(w->layout);
	const int64_t units = repacked ? p.n_out / CPU_REPACK_ROWS : (p.n_out + CPU_GEMM_ROWS - 1) / CPU_GEMM_ROWS;
	const size_t unit_bytes = repacked ? p.expert_bytes / (size_t)units : CPU_GEMM_ROWS * w->nb[1];
	const int64_t share = cpu_decode_share(n_chosen * units, nth), u = ith * share;
	if (share == 0)
		return false;
	/* The share's run in its first expert. */
	const int64_t in_expert = u % units, run = share < units - in_expert ? share : units - in_expert;
	const size_t at = (size_t)in_expert * unit_bytes;
	f->next = (const char *)w->data + (size_t)chosen[u / units] * p.expert_bytes + at;
	f->left = (size_t)run * unit_bytes;
	f->left = f->left < p.expert_bytes - at ? f->left : p.expert_bytes - at;
	f->left = f->left < CPU_FETCH_MAX_BYTES ? f->left : CPU_FETCH_MAX_BYTES;
	return true;
}

const cpu_op cpu_op_matmul_id = {
	.supports = matmul_id_supports,
	.scratch_size = matmul_id_scratch_size,
	.run = matmul_id_run,
};
