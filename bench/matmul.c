/*
 * matmul.c - the speed of one backend plugin's MATMUL, per weight type:
 *
 *   loom-bench-matmul PLUGIN.so [-t THREADS] [-k IN] [-n OUT] [-b TOKENS]
 *                     [-r REPS] [-s 1] [-c COPIES] [-e EXPERTS [-u USED]] [TYPE...]
 *
 * Random weights [OUT x IN] are quantized to each TYPE by the plugin's own
 * CONVERT, offered to its weight_repack as the core does at load (unless
 * -s 1 keeps the file's standard layout), then multiplied with TOKENS
 * activation rows REPS times. It
 * prints the best and median time of a matmul, the multiply-adds per
 * second and, for the weight bytes streamed, GB/s: enough to tell a
 * kernel's compute rate from its memory rate without a whole model around
 * it. The plugin is driven through its ABI only, as the core drives it.
 *
 * With -c, a graph multiplies COPIES copies of the weight one after the
 * other, as a decode's graph goes through its layers: with more bytes than
 * the caches hold, every matmul reads its weight from memory, which a
 * small weight multiplied alone never does. Copies of a few times the
 * last-level cache still find part of it there (a third, at 3x): many
 * times it for memory's rate.
 *
 * With -e EXPERTS, the weight is a mixture-of-experts stack of EXPERTS
 * matrices [OUT x IN] and the op MATMUL_ID: each token takes -u USED
 * distinct experts drawn at random (other ones in each copy and each
 * repetition), the activations shared by a token's experts as a gate or
 * up projection's are. GB/s counts the bytes of the experts the tokens
 * chose (the first draw's).
 */
#include "plugin_bench.h"

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Weight copy c: the plugin's repacked copy where it has one, else the
 * quantized rows themselves (copy 0) or a copy of them. */
static int place_copy(const loom_backend_vtable *vt, void *be, const loom_tensor *wt, bool repack, int c,
		      loom_tensor *out, loom_buffer *packed, void **own)
{
	*out = *wt;
	if (repack && vt->weight_repack != NULL) {
		uint32_t layout = 0;
		loom_status st = vt->weight_repack(be, wt, packed, &layout);
		if (st == LOOM_OK) {
			out->data = packed->base;
			out->layout = layout;
			return 1;
		}
		if (st != LOOM_ERR_UNSUPPORTED) {
			fprintf(stderr, "cannot repack %s\n", loom_dtype_traits_of(wt->dtype).name);
			return 0;
		}
	}
	if (c == 0)
		return 1;
	size_t bytes = loom_dtype_row_bytes(wt->dtype, wt->ne[0]) * (size_t)wt->ne[1] * (size_t)wt->ne[2];
	if ((*own = malloc(bytes)) == NULL)
		return 0;
	memcpy(*own, wt->data, bytes);
	out->data = *own;
	return 1;
}

/* Which experts each copy's tokens take: `used` distinct ones of
 * `experts` per token. */
static void choose_experts(int32_t *ids, int64_t experts, int64_t used, int64_t tokens, unsigned *seed)
{
	for (int64_t t = 0; t < tokens; t++)
		for (int64_t j = 0; j < used; j++) {
			int32_t e;
			bool taken;
			do {
				*seed = *seed * 1103515245u + 12345u;
				e = (int32_t)((*seed >> 8) % (unsigned)experts);
				taken = false;
				for (int64_t i = 0; i < j; i++)
					taken = taken || ids[t * used + i] == e;
			} while (taken);
			ids[t * used + j] = e;
		}
}

/* The bytes of the distinct experts a copy's tokens chose. */
static size_t chosen_bytes(const int32_t *ids, int64_t experts, int64_t n_ids, size_t expert_bytes)
{
	size_t bytes = 0;
	for (int64_t e = 0; e < experts; e++)
		for (int64_t i = 0; i < n_ids; i++)
			if (ids[i] == e) {
				bytes += expert_bytes;
				break;
			}
	return bytes;
}

static int run(const loom_backend_vtable *vt, void *be, loom_dtype type, int64_t k, int64_t n, int64_t b,
	       int reps, bool repack, int copies, int64_t experts, int64_t used)
{
	const int64_t stack = experts > 0 ? experts : 1, slots = experts > 0 ? used : 1;
	size_t w_bytes = loom_dtype_row_bytes(type, k) * (size_t)n * (size_t)stack, read_bytes = 0;
	float *w32 = malloc(sizeof(float) * (size_t)(k * n * stack)), *x = malloc(sizeof(float) * (size_t)(k * b));
	float *y = malloc(sizeof(float) * (size_t)(n * slots * b));
	int32_t *ids = calloc((size_t)(copies * slots * b), sizeof(int32_t));
	loom_tensor *ids_t = calloc((size_t)copies, sizeof(loom_tensor));
	void *w = malloc(w_bytes);
	double *times = malloc(sizeof(double) * (size_t)reps);
	loom_tensor *copy = calloc((size_t)copies, sizeof(loom_tensor));
	loom_buffer *packed = calloc((size_t)copies, sizeof(loom_buffer));
	void **own = calloc((size_t)copies, sizeof(void *));
	loom_node *mm = calloc((size_t)copies, sizeof(loom_node));
	unsigned seed = 1;
	loom_tensor src, wt, xt, yt;
	int ok = 0;

	if (!w32 || !x || !y || !w || !times || !copy || !packed || !own || !mm || !ids || !ids_t)
		goto out;
	for (int64_t i = 0; i < k * n * stack; i++)
		w32[i] = bench_rand_normal(&seed) / sqrtf((float)k);
	for (int64_t i = 0; i < k * b; i++)
		x[i] = bench_rand_normal(&seed);
	bench_tensor(&src, LOOM_DTYPE_F32, k, n * stack, 1, w32);
	bench_tensor(&wt, type, k, n * stack, 1, w);
	loom_node conv = {.op = LOOM_OP_CONVERT, .dst = &wt, .src = {&src}};
	loom_graph g = {.n_nodes = 1, .nodes = &conv};
	if (type == LOOM_DTYPE_F32)
		memcpy(w, w32, w_bytes);
	else if (!vt->supports(be, &conv) || vt->compute(be, &g) != LOOM_OK) {
		fprintf(stderr, "cannot convert f32 to %s\n", loom_dtype_traits_of(type).name);
		goto out;
	}
	if (experts > 0) {
		bench_tensor(&wt, type, k, n, experts, w);
		bench_tensor(&xt, LOOM_DTYPE_F32, k, 1, b, x);
		bench_tensor(&yt, LOOM_DTYPE_F32, n, used, b, y);
	} else {
		bench_tensor(&xt, LOOM_DTYPE_F32, k, b, 1, x);
		bench_tensor(&yt, LOOM_DTYPE_F32, n, b, 1, y);
	}
	for (int c = 0; c < copies; c++) {
		if (!place_copy(vt, be, &wt, repack, c, &copy[c], &packed[c], &own[c]))
			goto out;
		if (experts == 0) {
			mm[c] = (loom_node){.op = LOOM_OP_MATMUL, .dst = &yt, .src = {&copy[c], &xt}};
			read_bytes += w_bytes;
			continue;
		}
		int32_t *chosen = ids + (size_t)(c * used * b);
		choose_experts(chosen, experts, used, b, &seed);
		bench_tensor(&ids_t[c], LOOM_DTYPE_I32, used, b, 1, chosen);
		mm[c] = (loom_node){.op = LOOM_OP_MATMUL_ID, .dst = &yt, .src = {&copy[c], &xt, &ids_t[c]}};
		read_bytes += chosen_bytes(chosen, experts, used * b, w_bytes / (size_t)experts);
	}
	g = (loom_graph){.n_nodes = copies, .nodes = mm};
	if (!vt->supports(be, &mm[0])) {
		fprintf(stderr, "no MATMUL for %s\n", loom_dtype_traits_of(type).name);
		goto out;
	}
	for (int i = -2; i < reps; i++) {
		/* Other experts each time, so that the chosen ones come from
		 * memory, not from the caches the time before left them in. */
		for (int c = 0; c < copies && experts > 0; c++)
			choose_experts(ids + (size_t)(c * used * b), experts, used, b, &seed);
		double t0 = bench_now_s();
		if (vt->compute(be, &g) != LOOM_OK)
			goto out;
		if (i >= 0)
			times[i] = (bench_now_s() - t0) / copies;
	}
	double med = bench_sort_times(times, reps), best = times[0];
	double macs = (double)k * (double)n * (double)b * (double)slots;
	printf("%-5s%c %6lld x %-6lld x %3lld tok", loom_dtype_traits_of(type).name, copy[0].layout != 0 ? '*' : ' ',
	       (long long)n, (long long)k, (long long)b);
	if (experts > 0)
		printf(" (%lld of %lld experts)", (long long)used, (long long)experts);
	printf(": best %8.3f ms  median %8.3f ms  %7.1f GMAC/s  %6.2f GB/s\n", best * 1e3, med * 1e3,
	       macs / med * 1e-9, (double)read_bytes / copies / med * 1e-9);
	ok = 1;
out:
	for (int c = 0; packed != NULL && own != NULL && c < copies; c++) {
		if (packed[c].base != NULL)
			vt->buffer_free(be, &packed[c]);
		free(own[c]);
	}
	free(copy);
	free(packed);
	free(own);
	free(mm);
	free(ids);
	free(ids_t);
	free(w32);
	free(x);
	free(y);
	free(w);
	free(times);
	return ok;
}

int main(int argc, char **argv)
{
	int threads = 1, reps = 20, copies = 1, i = 1;
	bool repack = true;
	int64_t k = 2048, n = 5632, b = 1, experts = 0, used = 2;

	if (argc < 2) {
		fprintf(stderr, "usage: %s PLUGIN.so [-t THREADS] [-k IN] [-n OUT] [-b TOKENS] [-r REPS] [-s 1] [-c COPIES] "
			"[-e EXPERTS [-u USED]] [TYPE...]\n",
			argv[0]);
		return 2;
	}
	const char *plugin = argv[i++];
	for (; i + 1 < argc && argv[i][0] == '-'; i += 2) {
		long v = atol(argv[i + 1]);
		switch (argv[i][1]) {
		case 't': threads = (int)v; break;
		case 'k': k = v; break;
		case 'n': n = v; break;
		case 'b': b = v; break;
		case 'r': reps = (int)v; break;
		case 's': repack = v == 0; break;
		case 'c': copies = (int)v; break;
		case 'e': experts = v; break;
		case 'u': used = v; break;
		default: fprintf(stderr, "unknown option %s\n", argv[i]); return 2;
		}
	}
	if (threads < 1 || k < 1 || n < 1 || b < 1 || reps < 1 || copies < 1 || experts < 0 || used < 1) {
		fprintf(stderr, "sizes and counts must be positive\n");
		return 2;
	}
	if (experts > 0 && used > experts) {
		fprintf(stderr, "-u %lld: more experts used than the %lld there are\n", (long long)used,
			(long long)experts);
		return 2;
	}
	bench_backend bb;
	if (bench_open_backend(plugin, threads, &bb) != 0)
		return 1;
	const loom_backend_vtable *vt = bb.vt;
	void *be = bb.be;
	static const char *const all[] = {"f32", "f16", "bf16", "q8_0", "q4_0", "q4_1", "q5_0",
					  "q5_1", "q2_k", "q3_k", "q4_k", "q5_k", "q6_k"};
	int n_types = i < argc ? argc - i : (int)(sizeof(all) / sizeof(all[0]));
	int status = 0;
	for (int j = 0; j < n_types; j++) {
		const char *name = i < argc ? argv[i + j] : all[j];
		loom_dtype type = bench_dtype_named(name);
		if (type == LOOM_DTYPE_COUNT || k % loom_dtype_traits_of(type).block != 0) {
			fprintf(stderr, "%s: not a type, or %lld is not a whole number of its blocks\n", name,
				(long long)k);
			status = 2;
			continue;
		}
		if (!run(vt, be, type, k, n, b, reps, repack, copies, experts, used))
			status = 1;
	}
	vt->free(be);
	return status;
}
