/*
 * cpu_attention.c - LOOM_OP_ATTENTION: softmax(q.K^T * scale + mask) V for
 * every (token, query head), reading keys and values from the cache.
 *
 * The work is cut into units of a tile of query tokens, a run of kv heads
 * (with all the query heads that share them) and a chunk of cache rows.
 * A prefill's unit takes a tile of tokens and as many heads as fill it, so
 * that each block it reads serves many queries; a decode's takes half the
 * kv heads, so that the heads go round the threads. A unit walks
 * its rows in blocks of CPU_KV_BLOCK keys with an online softmax: a running
 * maximum m, sum l and output o per query row, rescaled by e^(m_old - m_new)
 * whenever the maximum grows. Tiles let a prefill read each block of keys
 * and values once for many queries; chunks let a decode spread one
 * sequence's cache over every thread, even with a single kv head. When a
 * row's keys were split into chunks, each chunk leaves its (m, l, o) and a
 * second phase merges them, as flash-decoding does.
 *
 * Keys and values are read in the cache's own type (cpu_kv_rows.h), and
 * blocks that no query of the tile may see are skipped unread: a decode
 * among other sequences' cells costs what its own cells do. A row whose
 * keys are all masked has no defined softmax; its output is zero rather
 * than NaN.
 *
 * A soft-cap bends each block's scores as they are made; a head's sink
 * joins its row's (m, l) once, when the row is written out, since it adds
 * to the denominator alone.
 */
#include "cpu_backend.h"

#include "cpu_kv_rows.h"
#include "cpu_simd.h"
#include "cpu_vec.h"

#include <math.h>
#include <string.h>

/* Query rows (tokens x query heads) a unit aims for. */
#define TILE_ROWS 32
/* Units a step is cut into at least, where the cache is long enough: work
 * for this many threads. The cut depends on the shapes alone, never on the
 * thread count, so that any number of threads gives the same bits. */
#define MIN_UNITS 32
/* The fewest cache rows a chunk is cut to: below it merging costs more
 * than the balance gains. */
#define MIN_CHUNK 256
/* A layer's cache of this many bytes or more, with the other layers',
 * is read from memory: each block of keys and values is asked for while
 * the one before it is worked on (1.09-1.20x at 2 MiB a layer). Below, it
 * comes from the last-level cache, where the requests only cost (0.93x at
 * 512 KiB). */
#define FETCH_MIN_BYTES (1 << 20)



typedef struct attn_plan {
	const loom_tensor *q, *k, *v, *mask, *y;
	const cpu_kv_rows *kv; /* K and V share a type */
	int64_t d, group, n_head_kv, n_tokens, n_kv;
	int64_t tile, n_tiles;       /* query tokens a unit holds */
	int64_t heads, n_runs;       /* kv heads a unit holds */
	int64_t rows;                /* tile * heads * group */
	int64_t chunk, n_chunks;     /* cache rows a unit walks */
	int64_t n_units;
	size_t q_bytes; /* one prepared query row */
	float scale;
	float cap;          /* soft-cap of the scores; 0: none */
	bool fetch;         /* ask for the next block's rows while on one (FETCH_MIN_BYTES) */
	const float *sinks; /* [n_head] or NULL */
} attn_plan;

/* Where a unit's arrays lie in its thread's scratch. Its rows are ordered
 * by kv head, then token, then query head, so that the rows meeting one kv
 * head's keys are consecutive. */
typedef struct attn_unit {
	char *q;  /* [rows] prepared queries */
	float *m; /* [rows] running maximum */
	float *l; /* [rows] running sum */
	float *s; /* [rows][CPU_KV_BLOCK] scores, then weights */
	float *o; /* [rows][d] output */
} attn_unit;

static bool head_slices_ok(const loom_tensor *t, int64_t d)
{
	return d % loom_dtype_traits_of(t->dtype).block == 0;
}

static bool attention_supports(const loom_node *node)
{
	const loom_tensor *q = node->src[0], *k = node->src[1], *v = node->src[2];
	const loom_tensor *mask = node->src[3], *sinks = node->src[4], *y = node->dst;
	int n_head = node->ip[0], n_head_kv = node->ip[1];
	float cap = node->fp[1];

	if (!loom_tensor_is(q, LOOM_DTYPE_F32) || !loom_tensor_is(y, LOOM_DTYPE_F32) || q->ne[3] != 1)
		return false;
	if (n_head != q->ne[1] || n_head_kv <= 0 || n_head % n_head_kv != 0)
		return false;
	if (!loom_tensor_standard(k) || cpu_kv_rows_of(k->dtype) == NULL || !head_slices_ok(k, q->ne[0]) ||
	    !loom_tensor_is(v, k->dtype))
		return false;
	if (!loom_tensor_same_shape(k, v) || k->ne[2] != 1 || k->ne[3] != 1 || k->ne[0] != q->ne[0] * n_head_kv)
		return false;
	if (mask != NULL && (!loom_tensor_is(mask, LOOM_DTYPE_F32) || mask->ne[0] != k->ne[1] ||
			     mask->ne[1] != q->ne[2] || mask->ne[2] != 1 || mask->ne[3] != 1))
		return false;
	if (sinks != NULL && ((!loom_tensor_is(sinks, LOOM_DTYPE_F32) || !loom_tensor_is_vector(sinks)) || sinks->ne[0] != n_head))
		return false;
	if (!(cap >= 0.0f && cap < INFINITY))
		return false;
	return y->ne[0] == q->ne[0] * n_head && y->ne[1] == q->ne[2] && y->ne[2] == 1 && y->ne[3] == 1;
}

static int64_t min64(int64_t a, int64_t b)
{
	return a < b ? a : b;
}

static int64_t ceil_div(int64_t a, int64_t b)
{
	return (a + b - 1) / b;
}

/* The same plan in every thread, and for scratch_size, from the node
 * alone. */
static attn_plan make_plan(const loom_node *node)
{
	attn_plan p = {
		.q = node->src[0], .k = node->src[1], .v = node->src[2], .mask = node->src[3],
		.y = node->dst,
		.kv = cpu_kv_rows_of(node->src[1]->dtype),
		.d = node->src[0]->ne[0],
		.group = node->ip[0] / node->ip[1],
		.n_head_kv = node->ip[1],
		.n_tokens = node->src[0]->ne[2],
		.n_kv = node->src[1]->ne[1],
		.scale = node->fp[0],
		.cap = node->fp[1],
		.sinks = node->src[4] != NULL ? (const float *)node->src[4]->data : NULL,
	};
	p.tile = min64(p.group < TILE_ROWS ? TILE_ROWS / p.group : 1, p.n_tokens);
	p.n_tiles = ceil_div(p.n_tokens, p.tile);
	p.heads = min64(p.tile * p.group < TILE_ROWS ? TILE_ROWS / (p.tile * p.group) : 1, p.n_head_kv);
	/* Too few units to go round (a decode): a cache long enough to cut
	 * into chunks is cut, each chunk with all the kv heads, so that a unit
	 * reads whole rows of the cache, one stream; a shorter one goes in
	 * two halves of the kv heads, which need no merging. */
	if (p.n_tiles * ceil_div(p.n_head_kv, p.heads) < MIN_UNITS)
		p.heads = p.n_kv / MIN_CHUNK >= 2 ? p.n_head_kv : ceil_div(p.n_head_kv, 2);
	p.n_runs = ceil_div(p.n_head_kv, p.heads);
	p.rows = p.tile * p.heads * p.group;
	int64_t base = p.n_tiles * p.n_runs;
	int64_t n_chunks = base >= MIN_UNITS ? 1 : ceil_div(MIN_UNITS, base);
	n_chunks = min64(n_chunks, p.n_kv / MIN_CHUNK > 1 ? p.n_kv / MIN_CHUNK : 1);
	p.chunk = ceil_div(ceil_div(p.n_kv, n_chunks), CPU_KV_BLOCK) * CPU_KV_BLOCK;
	p.n_chunks = ceil_div(p.n_kv, p.chunk);
	p.n_units = base * p.n_chunks;
	p.q_bytes = cpu_align_up(p.kv->query_bytes(p.d));
	p.fetch = (double)p.n_kv * (double)(p.k->nb[1] + p.v->nb[1]) >= FETCH_MIN_BYTES;
	return p;
}

static size_t unit_bytes(const attn_plan *p)
{
	size_t floats = (size_t)p->rows * (size_t)(2 + CPU_KV_BLOCK + p->d);
	return cpu_align_up((size_t)p->rows * p->q_bytes + floats * sizeof(float));
}

/* Each chunk's (m, l, o) of each row, when there are chunks to merge. */
static size_t partial_floats(const attn_plan *p)
{
	return p->n_chunks > 1 ? (size_t)(p->n_units * p->rows) * (size_t)(p->d + 2) : 0;
}

static size_t attention_scratch_size(const loom_node *node, int n_threads)
{
	attn_plan p = make_plan(node);
	return (size_t)n_threads * unit_bytes(&p) + cpu_align_up(partial_floats(&p) * sizeof(float));
}

static attn_unit place_unit(const attn_plan *p, unsigned char *at)
{
	attn_unit u;

	u.q = (char *)at;
	u.m = (float *)(at + (size_t)p->rows * p->q_bytes);
	u.l = u.m + p->rows;
	u.s = u.l + p->rows;
	u.o = u.s + p->rows * CPU_KV_BLOCK;
	return u;
}

/* Byte offset of kv head g's slice in a row of cache c. */
static size_t head_slice(const loom_tensor *c, int64_t g, int64_t d)
{
	return (size_t)(g * d / loom_dtype_traits_of(c->dtype).block) * c->nb[0];
}

/* Starts the block's scores at the rows' masks (keys past n, and masked
 * ones, at -INFINITY; with a soft-cap, the keys seen at 0, since the cap
 * bends the score before the mask adds); false when no row may see any of
 * its keys. */
static bool start_scores(const attn_plan *p, const attn_unit *u, int64_t t0, int64_t nt, int64_t nh, int64_t j0,
			 int n)
{
	bool any = false;

	for (int64_t t = 0; t < nt; t++) {
		float *s = u->s + t * p->group * CPU_KV_BLOCK;
		const float *mask = p->mask != NULL ? (const float *)loom_tensor_row(p->mask, t0 + t) + j0 : NULL;
		for (int j = 0; j < CPU_KV_BLOCK; j++) {
			s[j] = j >= n ? -INFINITY : mask != NULL ? mask[j] : 0.0f;
			if (p->cap > 0.0f && s[j] != -INFINITY)
				s[j] = 0.0f;
			any |= s[j] != -INFINITY;
		}
		for (int64_t i = 1; i < p->group; i++)
			memcpy(s + i * CPU_KV_BLOCK, s, CPU_KV_BLOCK * sizeof(float));
	}
	for (int64_t gi = 1; gi < nh; gi++)
		memcpy(u->s + gi * nt * p->group * CPU_KV_BLOCK, u->s, (size_t)(nt * p->group) * CPU_KV_BLOCK * sizeof(float));
	return any;
}

/* s[j] = e^(s[j] - m), 0 where s[j] is -INFINITY; returns their sum. */
/* The soft-capped scores of the block plus the rows' masks. */
static void add_mask(const attn_plan *p, const attn_unit *u, int64_t t0, int64_t nt, int64_t nh, int64_t j0, int n)
{
	if (p->mask == NULL)
		return;
	for (int64_t gi = 0; gi < nh; gi++)
		for (int64_t t = 0; t < nt; t++) {
			const float *mask = (const float *)loom_tensor_row(p->mask, t0 + t) + j0;
			float *s = u->s + ((gi * nt + t) * p->group) * CPU_KV_BLOCK;
			for (int64_t i = 0; i < p->group; i++, s += CPU_KV_BLOCK)
				for (int j = 0; j < n; j++)
					s[j] += mask[j];
		}
}

static float exp_block(float *s, float m)
{
#if defined(__AVX2__)
	const __m256 vm = _mm256_set1_ps(m), ninf = _mm256_set1_ps(-INFINITY);
	__m256 sum = _mm256_setzero_ps();

	for (int j = 0; j < CPU_KV_BLOCK; j += 8) {
		__m256 x = _mm256_loadu_ps(s + j);
		__m256 e = cpu_exp_x8(_mm256_sub_ps(x, vm));
		e = _mm256_andnot_ps(_mm256_cmp_ps(x, ninf, _CMP_EQ_OQ), e);
		_mm256_storeu_ps(s + j, e);
		sum = _mm256_add_ps(sum, e);
	}
	return cpu_hsum_x8(sum);
#else
	float sum = 0.0f;

	for (int j = 0; j < CPU_KV_BLOCK; j++) {
		s[j] = s[j] == -INFINITY ? 0.0f : expf(s[j] - m);
		sum += s[j];
	}
	return sum;
#endif
}

/* The online softmax step of each row: its scores become weights against
 * its new maximum, and its sum and output are rescaled to that maximum. A
 * row that sees none of the block's keys is left as it was (weights 0). */
static void softmax_step(const attn_plan *p, const attn_unit *u, int64_t nr)
{
	for (int64_t r = 0; r < nr; r++) {
		float *s = u->s + r * CPU_KV_BLOCK;
		float bm = -INFINITY;
		for (int j = 0; j < CPU_KV_BLOCK; j++)
			bm = s[j] > bm ? s[j] : bm;
		if (bm == -INFINITY) {
			memset(s, 0, CPU_KV_BLOCK * sizeof(float));
			continue;
		}
		if (bm > u->m[r]) {
			if (u->m[r] != -INFINITY) {
				float alpha = expf(u->m[r] - bm);
				float *o = u->o + r * p->d;
				u->l[r] *= alpha;
				for (int64_t i = 0; i < p->d; i++)
					o[i] *= alpha;
			}
			u->m[r] = bm;
		}
		u->l[r] += exp_block(s, u->m[r]);
	}
}

/* Row r of a unit holding tokens [t0, t0 + nt) and kv heads from g0:
 * its token and query head. */
static void row_of(const attn_plan *p, int64_t t0, int64_t nt, int64_t g0, int64_t r, int64_t *t, int64_t *h)
{
	int64_t per_head = nt * p->group, gi = r / per_head, rest = r % per_head;
	*t = t0 + rest / p->group;
	*h = (g0 + gi) * p->group + rest % p->group;
}

static float *output_row(const attn_plan *p, int64_t t, int64_t h)
{
	return (float *)loom_tensor_row(p->y, t) + h * p->d;
}

/* Whether a row's block of scores (or weights) has a key it sees:
 * anything above -INFINITY (or above 0). */
static bool row_sees(const float *s, float none)
{
	return cpu_differ_x16(s, none) != 0;
}

/* fn(r0, r1) for each run [r0, r1) of consecutive rows of s (a block per
 * row) that see a key of the block. A tile's rows of other sequences see
 * none of a sequence's own cells, and are skipped rather than computed
 * against a mask: batched decode costs each sequence what its own cells do.
 * A row's result does not depend on the rows it runs with. */
#define FOR_ROWS_SEEING(s, n_rows, none, fn)                                        \
	for (int64_t r0 = 0, r1; r0 < (n_rows); r0 = r1) {                            \
		if (!row_sees((s) + r0 * CPU_KV_BLOCK, none)) {                        \
			r1 = r0 + 1;                                                   \
			continue;                                                      \
		}                                                                      \
		for (r1 = r0 + 1; r1 < (n_rows) && row_sees((s) + r1 * CPU_KV_BLOCK, none); r1++) \
			;                                                              \
		fn;                                                                    \
	}

/* What a row's output sum o is multiplied by, its running maximum m and
 * sum l done: 1 / l, or with head h's sink s, e^(m - M) / (l e^(m - M) +
 * e^(s - M)) for M = max(m, s). 0 for a row that saw no key. */
static float output_factor(const attn_plan *p, int64_t h, float m, float l)
{
	if (!(l > 0.0f))
		return 0.0f;
	if (p->sinks == NULL)
		return 1.0f / l;
	float sink = p->sinks[h], top = fmaxf(m, sink), keep = expf(m - top);
	return keep / (l * keep + expf(sink - top));
}

/* Asks for rows [j, j + n) of cache c, bytes of each from slice on. */
static void fetch_rows(const loom_tensor *c, int64_t j, int64_t n, size_t slice, size_t bytes)
{
	for (int64_t r = 0; r < n; r++) {
		const char *row = (const char *)c->data + (j + r) * c->nb[1] + slice;
		for (size_t o = 0; o < bytes; o += 64)
			__builtin_prefetch(row + o, 0, 3);
	}
}

static void run_unit(const attn_plan *p, int64_t unit, const attn_unit *u, float *partials)
{
	int64_t c = unit % p->n_chunks, run = unit / p->n_chunks % p->n_runs;
	int64_t t0 = unit / (p->n_chunks * p->n_runs) * p->tile, g0 = run * p->heads;
	int64_t nt = min64(p->tile, p->n_tokens - t0), nh = min64(p->heads, p->n_head_kv - g0);
	int64_t per_head = nt * p->group, nr = nh * per_head;
	int64_t j_lo = c * p->chunk, j_hi = min64(p->n_kv, j_lo + p->chunk);
	size_t k_slice = head_slice(p->k, g0, p->d), v_slice = head_slice(p->v, g0, p->d);
	size_t k_head = head_slice(p->k, 1, p->d), v_head = head_slice(p->v, 1, p->d);

	for (int64_t r = 0; r < nr; r++) {
		int64_t t, h;
		row_of(p, t0, nt, g0, r, &t, &h);
		p->kv->prepare_query((const float *)((const char *)p->q->data + t * p->q->nb[2] + h * p->q->nb[1]),
				     u->q + r * p->q_bytes, p->d);
		u->m[r] = -INFINITY;
		u->l[r] = 0.0f;
	}
	memset(u->o, 0, (size_t)(nr * p->d) * sizeof(float));
	for (int64_t j0 = j_lo; j0 < j_hi; j0 += CPU_KV_BLOCK) {
		int n = (int)min64(CPU_KV_BLOCK, j_hi - j0);
		const char *k = (const char *)p->k->data + j0 * p->k->nb[1] + k_slice;
		const char *v = (const char *)p->v->data + j0 * p->v->nb[1] + v_slice;
		if (!start_scores(p, u, t0, nt, nh, j0, n))
			continue;
		if (p->fetch && j0 + CPU_KV_BLOCK < j_hi) {
			int64_t next = min64(CPU_KV_BLOCK, j_hi - j0 - CPU_KV_BLOCK);
			fetch_rows(p->k, j0 + CPU_KV_BLOCK, next, k_slice, (size_t)nh * k_head);
			fetch_rows(p->v, j0 + CPU_KV_BLOCK, next, v_slice, (size_t)nh * v_head);
		}
		for (int64_t gi = 0; gi < nh; gi++) {
			float *s = u->s + gi * per_head * CPU_KV_BLOCK;
			const char *q = u->q + gi * per_head * p->q_bytes;
			FOR_ROWS_SEEING(s, per_head, -INFINITY,
					p->kv->scores(q + r0 * p->q_bytes, p->q_bytes, (int)(r1 - r0), k + gi * k_head,
						      p->k->nb[1], n, p->d, p->scale, s + r0 * CPU_KV_BLOCK));
		}
		if (p->cap > 0.0f) {
			cpu_softcap_scores(u->s, nr * CPU_KV_BLOCK, p->cap);
			add_mask(p, u, t0, nt, nh, j0, n);
		}
		softmax_step(p, u, nr);
		for (int64_t gi = 0; gi < nh; gi++) {
			const float *w = u->s + gi * per_head * CPU_KV_BLOCK;
			float *o = u->o + gi * per_head * p->d;
			FOR_ROWS_SEEING(w, per_head, 0.0f,
					p->kv->mix(o + r0 * p->d, (int)(r1 - r0), w + r0 * CPU_KV_BLOCK, v + gi * v_head,
						   p->v->nb[1], n, p->d));
		}
	}
	for (int64_t r = 0; r < nr; r++) {
		const float *o = u->o + r * p->d;
		int64_t t, h;
		if (p->n_chunks > 1) {
			float *part = partials + (size_t)(unit * p->rows + r) * (size_t)(p->d + 2);
			part[0] = u->m[r];
			part[1] = u->l[r];
			memcpy(part + 2, o, (size_t)p->d * sizeof(float));
			continue;
		}
		row_of(p, t0, nt, g0, r, &t, &h);
		float inv = output_factor(p, h, u->m[r], u->l[r]);
		float *y = output_row(p, t, h);
		for (int64_t i = 0; i < p->d; i++)
			y[i] = o[i] * inv;
	}
}

/* Output row (t, h) from its chunks' partial results. */
static void merge_row(const attn_plan *p, const float *partials, int64_t t, int64_t h)
{
	int64_t g = h / p->group, ti = t / p->tile, t0 = ti * p->tile, run = g / p->heads;
	int64_t nt = min64(p->tile, p->n_tokens - t0);
	int64_t r = ((g - run * p->heads) * nt + (t - t0)) * p->group + h % p->group;
	int64_t first = (ti * p->n_runs + run) * p->n_chunks;
	size_t stride = (size_t)p->rows * (size_t)(p->d + 2);
	const float *part0 = partials + (size_t)(first * p->rows + r) * (size_t)(p->d + 2);
	float *y = output_row(p, t, h);
	float m = -INFINITY, l = 0.0f;

	for (int64_t c = 0; c < p->n_chunks; c++)
		m = fmaxf(m, part0[c * stride]);
	memset(y, 0, (size_t)p->d * sizeof(float));
	if (m == -INFINITY)
		return;
	for (int64_t c = 0; c < p->n_chunks; c++) {
		const float *part = part0 + c * stride;
		if (part[0] == -INFINITY)
			continue;
		float w = expf(part[0] - m);
		l += w * part[1];
		for (int64_t i = 0; i < p->d; i++)
			y[i] += w * part[2 + i];
	}
	float inv = output_factor(p, h, m, l);
	for (int64_t i = 0; i < p->d; i++)
		y[i] *= inv;
}

static void attention_run(const loom_node *node, const cpu_task *task)
{
	attn_plan p = make_plan(node);
	attn_unit u = place_unit(&p, task->scratch + (size_t)task->ith * unit_bytes(&p));
	float *partials = (float *)(task->scratch + (size_t)task->nth * unit_bytes(&p));
	int64_t lo, hi;

	while (cpu_take_work(task, p.n_units, 1, &lo, &hi))
		run_unit(&p, lo, &u, partials);
	if (p.n_chunks == 1)
		return;
	cpu_task_barrier(task);
	cpu_split(p.n_tokens * p.group * p.n_head_kv, task->ith, task->nth, &lo, &hi);
	for (int64_t i = lo; i < hi; i++)
		merge_row(&p, partials, i / (p.group * p.n_head_kv), i % (p.group * p.n_head_kv));
}

const cpu_op cpu_op_attention = {
	.supports = attention_supports,
	.scratch_size = attention_scratch_size,
	.run = attention_run,
};
