/*
 * attention.c - the speed of one backend plugin's ATTENTION over a filled
 * cache, per cache type:
 *
 *   loom-bench-attention PLUGIN.so [-t THREADS] [-D HEAD_DIM] [-H HEADS]
 *                        [-G KV_HEADS] [-n CACHED] [-b TOKENS] [-l LAYERS]
 *                        [-r REPS] [TYPE...]
 *
 * LAYERS caches of CACHED random keys and values are written by the
 * plugin's own KV_STORE (so quantized ones hold what a model's would), and
 * one step's attention of TOKENS causal queries runs over each of them, as a
 * model's layers do. It prints the best and median time of a step and the
 * GB/s of cache it read: LAYERS caches larger than the CPU's caches make
 * that a memory rate, to hold against a weight matmul's (loom-bench-matmul)
 * and membw.c's.
 */
#include "plugin_bench.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct shape {
	int64_t d, n_head, n_head_kv, n_kv, tokens, layers;
} shape;

/* Fills cache c ({kv_dim, n_kv} of its type) with random rows through
 * KV_STORE. */
static int fill_cache(const bench_backend *bb, loom_tensor *c, unsigned *seed)
{
	int64_t kv_dim = c->ne[0], n = c->ne[1];
	float *x = malloc(sizeof(float) * (size_t)(kv_dim * n));
	int32_t *cells = malloc(sizeof(int32_t) * (size_t)n);
	loom_tensor xt, it;
	int ok = 0;

	if (x != NULL && cells != NULL) {
		for (int64_t i = 0; i < kv_dim * n; i++)
			x[i] = bench_rand_normal(seed);
		for (int64_t j = 0; j < n; j++)
			cells[j] = (int32_t)j;
		bench_tensor(&xt, LOOM_DTYPE_F32, kv_dim, n, 1, x);
		bench_tensor(&it, LOOM_DTYPE_I32, n, 1, 1, cells);
		loom_node store = {.op = LOOM_OP_KV_STORE, .dst = c, .src = {&xt, &it}};
		loom_graph g = {.n_nodes = 1, .nodes = &store};
		ok = bb->vt->supports(bb->be, &store) && bb->vt->compute(bb->be, &g) == LOOM_OK;
	}
	free(x);
	free(cells);
	return ok;
}

static int run(const bench_backend *bb, loom_dtype type, const shape *s, int reps)
{
	int64_t kv_dim = s->d * s->n_head_kv, nl = s->layers;
	size_t cache_bytes = loom_dtype_row_bytes(type, kv_dim) * (size_t)s->n_kv;
	loom_tensor *k = calloc((size_t)nl, sizeof(loom_tensor)), *v = calloc((size_t)nl, sizeof(loom_tensor));
	loom_node *nodes = calloc((size_t)nl, sizeof(loom_node));
	float *q = malloc(sizeof(float) * (size_t)(s->d * s->n_head * s->tokens));
	float *y = malloc(sizeof(float) * (size_t)(s->d * s->n_head * s->tokens));
	float *mask = malloc(sizeof(float) * (size_t)(s->n_kv * s->tokens));
	char *caches = malloc(cache_bytes * 2 * (size_t)nl);
	double *times = malloc(sizeof(double) * (size_t)reps);
	loom_tensor qt, yt, mt;
	unsigned seed = 1;
	int ok = 0;

	if (!k || !v || !nodes || !q || !y || !mask || !caches || !times)
		goto out;
	for (int64_t i = 0; i < s->d * s->n_head * s->tokens; i++)
		q[i] = bench_rand_normal(&seed);
	for (int64_t t = 0; t < s->tokens; t++)
		for (int64_t j = 0; j < s->n_kv; j++)
			mask[t * s->n_kv + j] = j <= s->n_kv - s->tokens + t ? 0.0f : -INFINITY;
	bench_tensor(&qt, LOOM_DTYPE_F32, s->d, s->n_head, s->tokens, q);
	bench_tensor(&yt, LOOM_DTYPE_F32, s->d * s->n_head, s->tokens, 1, y);
	bench_tensor(&mt, LOOM_DTYPE_F32, s->n_kv, s->tokens, 1, mask);
	for (int64_t l = 0; l < nl; l++) {
		bench_tensor(&k[l], type, kv_dim, s->n_kv, 1, caches + cache_bytes * (size_t)(2 * l));
		bench_tensor(&v[l], type, kv_dim, s->n_kv, 1, caches + cache_bytes * (size_t)(2 * l + 1));
		if (!fill_cache(bb, &k[l], &seed) || !fill_cache(bb, &v[l], &seed)) {
			fprintf(stderr, "cannot store a %s cache\n", loom_dtype_traits_of(type).name);
			goto out;
		}
		nodes[l] = (loom_node){.op = LOOM_OP_ATTENTION, .dst = &yt, .src = {&qt, &k[l], &v[l], &mt},
				       .ip = {(int32_t)s->n_head, (int32_t)s->n_head_kv},
				       .fp = {1.0f / sqrtf((float)s->d)}};
	}
	if (!bb->vt->supports(bb->be, &nodes[0])) {
		fprintf(stderr, "no ATTENTION over a %s cache\n", loom_dtype_traits_of(type).name);
		goto out;
	}
	loom_graph g = {.n_nodes = (int)nl, .nodes = nodes};
	for (int i = -2; i < reps; i++) {
		double t0 = bench_now_s();
		if (bb->vt->compute(bb->be, &g) != LOOM_OK)
			goto out;
		if (i >= 0)
			times[i] = bench_now_s() - t0;
	}
	double med = bench_sort_times(times, reps), bytes = (double)cache_bytes * 2.0 * (double)nl;
	printf("%-5s d %lld heads %lld/%lld cached %lld tokens %lld x %lld layers: best %8.3f ms  median %8.3f ms  %6.2f GB/s\n",
	       loom_dtype_traits_of(type).name, (long long)s->d, (long long)s->n_head, (long long)s->n_head_kv,
	       (long long)s->n_kv, (long long)s->tokens, (long long)nl, times[0] * 1e3, med * 1e3, bytes / med * 1e-9);
	ok = 1;
out:
	free(k);
	free(v);
	free(nodes);
	free(q);
	free(y);
	free(mask);
	free(caches);
	free(times);
	return ok;
}

int main(int argc, char **argv)
{
	shape s = {.d = 64, .n_head = 12, .n_head_kv = 12, .n_kv = 2048, .tokens = 1, .layers = 12};
	int threads = 1, reps = 20, i = 1;

	if (argc < 2) {
		fprintf(stderr,
			"usage: %s PLUGIN.so [-t THREADS] [-D HEAD_DIM] [-H HEADS] [-G KV_HEADS] [-n CACHED] [-b TOKENS] [-l LAYERS] [-r REPS] [TYPE...]\n",
			argv[0]);
		return 2;
	}
	const char *plugin = argv[i++];
	for (; i + 1 < argc && argv[i][0] == '-'; i += 2) {
		long val = atol(argv[i + 1]);
		switch (argv[i][1]) {
		case 't': threads = (int)val; break;
		case 'D': s.d = val; break;
		case 'H': s.n_head = val; break;
		case 'G': s.n_head_kv = val; break;
		case 'n': s.n_kv = val; break;
		case 'b': s.tokens = val; break;
		case 'l': s.layers = val; break;
		case 'r': reps = (int)val; break;
		default: fprintf(stderr, "unknown option %s\n", argv[i]); return 2;
		}
	}
	if (threads < 1 || s.d < 1 || s.n_head_kv < 1 || s.n_head % s.n_head_kv != 0 || s.n_kv < s.tokens ||
	    s.tokens < 1 || s.layers < 1 || reps < 1) {
		fprintf(stderr, "sizes and counts must be positive, HEADS a multiple of KV_HEADS, TOKENS <= CACHED\n");
		return 2;
	}
	bench_backend bb;
	if (bench_open_backend(plugin, threads, &bb) != 0)
		return 1;
	static const char *const all[] = {"f32", "f16", "q8_0", "q4_0"};
	int n_types = i < argc ? argc - i : (int)(sizeof(all) / sizeof(all[0]));
	int status = 0;
	for (int j = 0; j < n_types; j++) {
		const char *name = i < argc ? argv[i + j] : all[j];
		loom_dtype type = bench_dtype_named(name);
		if (type == LOOM_DTYPE_COUNT) {
			fprintf(stderr, "%s: not a type\n", name);
			status = 2;
			continue;
		}
		if (!run(&bb, type, &s, reps))
			status = 1;
	}
	bb.vt->free(bb.be);
	return status;
}
