/*
 * cpu_attention.c - LOOM_OP_ATTENTION: softmax(q.K^T * scale + mask) V for
 * every (token, query head), reading keys and values from the cache.
 *
 * Rounding follows llama.cpp's non-flash path, where q.K and p.V are ggml
 * matmuls: with an F16 K cache q is rounded to fp16 before the dot products;
 * with an F16 V cache the probabilities are rounded to fp16 before they
 * weight V. The softmax subtracts the row maximum, sums the exponentials in
 * double and scales by the f32 reciprocal, as ggml's soft_max does.
 *
 * A row whose keys are all masked has no defined softmax; its output is
 * zero rather than NaN.
 */
#include "cpu_backend.h"

#include "cpu_convert.h"
#include "cpu_vec.h"

#include <math.h>
#include <string.h>

static bool attention_supports(const loom_node *node)
{
	const loom_tensor *q = node->src[0], *k = node->src[1], *v = node->src[2];
	const loom_tensor *mask = node->src[3], *y = node->dst;
	int n_head = node->ip[0], n_head_kv = node->ip[1];

	if (!cpu_tensor_is(q, LOOM_DTYPE_F32) || !cpu_tensor_is(y, LOOM_DTYPE_F32) || q->ne[3] != 1)
		return false;
	if (n_head != q->ne[1] || n_head_kv <= 0 || n_head % n_head_kv != 0)
		return false;
	if (!cpu_tensor_is(k, LOOM_DTYPE_F32) && !cpu_tensor_is(k, LOOM_DTYPE_F16))
		return false;
	if (!cpu_tensor_is(v, k->dtype) || !cpu_same_shape(k, v) || k->ne[2] != 1 || k->ne[3] != 1 ||
	    k->ne[0] != q->ne[0] * n_head_kv)
		return false;
	if (mask != NULL && (!cpu_tensor_is(mask, LOOM_DTYPE_F32) || mask->ne[0] != k->ne[1] ||
			     mask->ne[1] != q->ne[2] || mask->ne[2] != 1 || mask->ne[3] != 1))
		return false;
	return y->ne[0] == q->ne[0] * n_head && y->ne[1] == q->ne[2] && y->ne[2] == 1 && y->ne[3] == 1;
}

/*
 * Work is split by token, and each token's query heads into as many
 * contiguous parts as it takes to give every thread work. A part walks the
 * cache rows in order and reads, from each, the slices of the kv heads its
 * query heads use: contiguous bytes, each read once for all the query heads
 * that share it while it is in L1.
 */
typedef struct attn_args {
	const loom_tensor *q, *k, *v, *mask, *y;
	int64_t head_dim, n_kv, group; /* group: query heads per kv head */
	int64_t parts;                 /* slices each token's heads are split into */
	bool fp16;                     /* K and V caches are F16 */
	float scale;
} attn_args;

static int64_t head_parts(const loom_node *node, int n_threads)
{
	int64_t n_tokens = node->src[0]->ne[2], n_head = node->ip[0];
	int64_t parts = (n_threads + n_tokens - 1) / n_tokens;
	return parts < n_head ? parts : n_head;
}

/* Per thread, room for all the query heads of a token (a part is at most
 * that, however many threads the compute gets): where each one's kv head
 * lies in a cache row, its softmax sum, its scores (n_kv), its q (rounded to
 * fp16 for an F16 cache), its row maximum and the reciprocal of its sum;
 * and the list of keys the token may attend to. */
static size_t thread_scratch(const loom_node *node)
{
	int64_t n_head = node->ip[0], n_kv = node->src[1]->ne[1], head_dim = node->src[0]->ne[0];
	size_t floats = (size_t)(n_kv + head_dim + 2);
	size_t per_head = sizeof(size_t) + sizeof(double) + floats * sizeof(float);
	return cpu_align_up((size_t)n_head * per_head + (size_t)n_kv * sizeof(int32_t));
}

static size_t attention_scratch_size(const loom_node *node, int n_threads)
{
	return (size_t)n_threads * thread_scratch(node);
}

/* The query heads [h0, h0 + nq) of token t. Only the keys the mask lets
 * it see are visited (a masked key weighs exactly 0): a decode among other
 * sequences' cells costs what its own cells do. Scores are stored
 * key-major, scores[k * nq + i] for the k-th such key, so that each pass
 * over the cache reads the weights of all the part's heads for one key
 * from one place. */
typedef struct attn_part {
	int64_t t, h0, nq;
	const float *mask; /* row t, or NULL */
	int32_t *keys;     /* [n_keys] the cache rows visited, in order */
	int64_t n_keys;
	size_t *slice;     /* [nq] element offset of each one's kv head in a row */
	double *sum;       /* [nq] */
	float *scores;     /* [n_kv][nq] */
	float *q;          /* [nq][head_dim] */
	float *max;        /* [nq] */
	float *inv;        /* [nq] */
} attn_part;

/* Carves the part's arrays out of the thread's scratch, widest first. */
static void place_part(const attn_args *a, attn_part *p, unsigned char *scratch)
{
	p->sum = (double *)scratch;
	p->slice = (size_t *)(p->sum + p->nq);
	p->scores = (float *)(p->slice + p->nq);
	p->q = p->scores + a->n_kv * p->nq;
	p->max = p->q + p->nq * a->head_dim;
	p->inv = p->max + p->nq;
	p->keys = (int32_t *)(p->inv + p->nq);
}

/* The rows token t may attend to: every row, or those its mask leaves
 * finite. */
static void list_keys(const attn_args *a, attn_part *p)
{
	p->n_keys = 0;
	for (int64_t j = 0; j < a->n_kv; j++)
		if (p->mask == NULL || p->mask[j] != -INFINITY)
			p->keys[p->n_keys++] = (int32_t)j;
}

/* Query head i's slice of cache row j. */
static const void *cache_at(const attn_part *p, const loom_tensor *c, int64_t j, int64_t i)
{
	return (const char *)c->data + j * c->nb[1] + p->slice[i] * c->nb[0];
}

/* Rows this far ahead are fetched early: a part reads a slice of each row,
 * rows apart, a pattern the hardware prefetchers follow poorly. */
#define PREFETCH_ROWS 8

/* Prefetches the row of the k-th visited key. */
static void prefetch_row(const attn_args *a, const attn_part *p, const loom_tensor *c, int64_t k)
{
	if (k >= p->n_keys)
		return;
	int64_t j = p->keys[k];
	const char *first = cache_at(p, c, j, 0);
	const char *end = (const char *)cache_at(p, c, j, p->nq - 1) + a->head_dim * c->nb[0];

	for (const char *line = first; line < end; line += CPU_ALIGN)
		__builtin_prefetch(line);
}

static void load_queries(const attn_args *a, const attn_part *p)
{
	for (int64_t i = 0; i < p->nq; i++) {
		const float *q = (const float *)((const char *)a->q->data + p->t * a->q->nb[2] +
						 (p->h0 + i) * a->q->nb[1]);
		p->slice[i] = (size_t)((p->h0 + i) / a->group * a->head_dim);
		if (a->fp16)
			cpu_round_fp16_row(q, p->q + i * a->head_dim, a->head_dim);
		else
			memcpy(p->q + i * a->head_dim, q, (size_t)a->head_dim * sizeof(float));
	}
}

/* scores[k][i] = q_i.k_j * scale + mask[j] for the k-th visited key j;
 * masked keys' (possibly never written) cells are not read. */
static void attention_scores(const attn_args *a, const attn_part *p)
{
	for (int64_t i = 0; i < p->nq; i++)
		p->max[i] = -INFINITY;
	for (int64_t k = 0; k < p->n_keys; k++) {
		int64_t j = p->keys[k];
		float *s = p->scores + k * p->nq;

		prefetch_row(a, p, a->k, k + PREFETCH_ROWS);
		for (int64_t i = 0; i < p->nq; i++) {
			const void *kj = cache_at(p, a->k, j, i);
			const float *q = p->q + i * a->head_dim;
			float dot = a->fp16 ? cpu_dot_fp16(kj, q, a->head_dim)
					    : cpu_dot_f32(kj, q, a->head_dim);
			s[i] = dot * a->scale + (p->mask != NULL ? p->mask[j] : 0.0f);
			p->max[i] = fmaxf(p->max[i], s[i]);
		}
	}
}

/* Each head's scores become probabilities, rounded to fp16 for an F16 V
 * cache. A head with every key masked gets all zeros. */
static void attention_softmax(const attn_args *a, const attn_part *p)
{
	for (int64_t i = 0; i < p->nq; i++)
		p->sum[i] = 0.0;
	for (int64_t k = 0; k < p->n_keys; k++) {
		float *s = p->scores + k * p->nq;
		for (int64_t i = 0; i < p->nq; i++) {
			s[i] = p->max[i] == -INFINITY ? 0.0f : expf(s[i] - p->max[i]);
			p->sum[i] += s[i];
		}
	}
	for (int64_t i = 0; i < p->nq; i++)
		p->inv[i] = p->sum[i] > 0.0 ? (float)(1.0 / p->sum[i]) : 0.0f;
	for (int64_t k = 0; k < p->n_keys; k++) {
		float *s = p->scores + k * p->nq;
		for (int64_t i = 0; i < p->nq; i++) {
			s[i] *= p->inv[i];
			if (a->fp16)
				s[i] = cpu_fp16_to_f32(cpu_f32_to_fp16(s[i]));
		}
	}
}

/* out_i = sum_j p_i[j] * v_j, skipping keys of zero weight. */
static void attention_mix(const attn_args *a, const attn_part *p)
{
	float *out = (float *)cpu_row(a->y, p->t) + p->h0 * a->head_dim;

	memset(out, 0, (size_t)(p->nq * a->head_dim) * sizeof(float));
	for (int64_t k = 0; k < p->n_keys; k++) {
		int64_t j = p->keys[k];
		const float *w = p->scores + k * p->nq;

		prefetch_row(a, p, a->v, k + PREFETCH_ROWS);
		for (int64_t i = 0; i < p->nq; i++) {
			const void *vj = cache_at(p, a->v, j, i);
			if (w[i] == 0.0f)
				continue;
			if (a->fp16)
				cpu_axpy_fp16(out + i * a->head_dim, w[i], vj, a->head_dim);
			else
				cpu_axpy_f32(out + i * a->head_dim, w[i], vj, a->head_dim);
		}
	}
}

static void attention_run(const loom_node *node, const cpu_task *task)
{
	attn_args a = {
		.q = node->src[0], .k = node->src[1], .v = node->src[2], .mask = node->src[3],
		.y = node->dst,
		.head_dim = node->src[0]->ne[0],
		.n_kv = node->src[1]->ne[1],
		.group = node->ip[0] / node->ip[1],
		.parts = head_parts(node, task->nth),
		.fp16 = node->src[1]->dtype == LOOM_DTYPE_F16,
		.scale = node->fp[0],
	};
	unsigned char *scratch = task->scratch + (size_t)task->ith * thread_scratch(node);
	int64_t lo, hi;

	cpu_split(a.q->ne[2] * a.parts, task->ith, task->nth, &lo, &hi);
	for (int64_t u = lo; u < hi; u++) {
		int64_t h_lo, h_hi;
		attn_part p = {.t = u / a.parts};

		cpu_split(a.q->ne[1], (int)(u % a.parts), (int)a.parts, &h_lo, &h_hi);
		p.h0 = h_lo;
		p.nq = h_hi - h_lo;
		if (p.nq == 0)
			continue;
		p.mask = a.mask != NULL ? cpu_row(a.mask, p.t) : NULL;
		place_part(&a, &p, scratch);
		list_keys(&a, &p);
		load_queries(&a, &p);
		attention_scores(&a, &p);
		attention_softmax(&a, &p);
		attention_mix(&a, &p);
	}
}

const cpu_op cpu_op_attention = {
	.supports = attention_supports,
	.scratch_size = attention_scratch_size,
	.run = attention_run,
};
