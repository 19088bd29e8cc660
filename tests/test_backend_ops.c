/*
 * test_backend_ops.c - the backend conformance suite: every op case, written
 * once, against a scalar reference, on every backend there is.
 *
 * The backends are those the build's plugins.yaml lists (cpu-amx,
 * cpu-avx512, cpu-avx2, cpu-generic, cuda) and the example plugin
 * (examples/plugin), each probed with its plugins.yaml options; one that
 * is not built or whose probe refuses this machine is skipped with a line
 * saying why. Given plugin files as arguments, the suite runs those
 * instead, which is how a backend written outside loom checks itself:
 *
 *   build/tests/test_backend_ops path/to/my-backend.so
 *
 * `--only NAME` runs one of the build's backends alone, held to the same
 * tiers as in the whole run (the GPU machine's check runs cuda so).
 *
 * Each test builds one group of cases (an op, or MATMUL of one weight
 * type), computes the reference once per case, and runs the case on every
 * backend whose supports() takes it. loom's own backends may not refuse a
 * case except for the gaps listed in known_gap(): the CPU backends encode
 * no BF16, cuda keeps no quantized KV cache. Any other backend's refusals
 * are counted and printed.
 *
 * What a backend must give, per case, is one of two tiers:
 *  - documented rounding (loom's CPU backends): the roundings
 *    docs/plugins.md states for each op, so within the reference's own
 *    rounding noise (1e-14 to 1e-9 of normalized MSE), bit for bit where
 *    the op is exact, and the same bits on 1 and 2 threads, rows packed or
 *    padded;
 *  - the op's contract (any other backend): what the API allows a backend
 *    to round otherwise - activations to fp16 or Q8_1 for a matmul, the
 *    softmax's probabilities, fma in a block decode - with tolerances
 *    stated beside each op below, and an fp16 NaN matching any NaN.
 */
#include "cpu_ref.h"
#include "graph_runner.h"
#include "op_case.h"
#include "op_reference.h"
#include "op_runner.h"
#include "plugin_host.h"

#include "runtime/config.h"

/* The weight quantizers' scalar code, as test_quant.c checks it against
 * llama-quantize: the reference for CONVERT to a block-quantized type. */
#include "../backends/cpu/kernels/cpu_quant.c"
#include "../backends/cpu/kernels/cpu_quant_act.c"
#include "../backends/cpu/kernels/cpu_quant_k.c"
#include "../backends/cpu/kernels/cpu_quant_k_search.c"
#include "../backends/cpu/kernels/cpu_quant_legacy.c"
#include "../backends/cpu/kernels/cpu_quant_mxfp4.c"

#include <check.h>
#include <dlfcn.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define N_OF(a) (sizeof(a) / sizeof((a)[0]))

/* ------------------------------------------------------------------------ */
/* Backends under test                                                      */

enum { MAX_BACKENDS = 16, MAX_OPTIONS = 8 };

typedef struct listed_backend {
	char path[4096];
	char listed_as[64]; /* the name in plugins.yaml; "" for a file given */
	bool optional;      /* may be absent (built only with a toolkit) */
	bool in_tree;       /* one of loom's own: held to known_gap() */
	int n_options;
	char keys[MAX_OPTIONS][64], values[MAX_OPTIONS][64];
} listed_backend;

/* Filled in main, before Check forks. */
static listed_backend listed[MAX_BACKENDS];
static int n_listed;

typedef struct backend_state {
	op_backend b;
	bool usable;
	bool strict;  /* documented rounding */
	bool in_tree;
	int run, refused;
} backend_state;

/* Opened in each test's process (CUDA must not start before a fork). */
static backend_state backends[MAX_BACKENDS];
static bool opened;

static void option_ptrs(const listed_backend *l, const char **keys, const char **values)
{
	for (int i = 0; i < l->n_options; i++) {
		keys[i] = l->keys[i];
		values[i] = l->values[i];
	}
}

/* Loads, probes and starts listed backend i; false (after a line saying
 * why) when it cannot run here. */
static bool open_backend(int i, bool say)
{
	const listed_backend *l = &listed[i];
	backend_state *s = &backends[i];
	const char *keys[MAX_OPTIONS], *values[MAX_OPTIONS];
	char why[512] = "";

	option_ptrs(l, keys, values);
	if (access(l->path, F_OK) != 0) {
		ck_assert_msg(l->optional, "%s: %s not built", l->listed_as, l->path);
		if (say)
			printf("SKIP %s: %s not built\n", l->listed_as, l->path);
		return false;
	}
	void *lib = dlopen(l->path, RTLD_NOW | RTLD_LOCAL);
	ck_assert_msg(lib != NULL, "dlopen %s: %s", l->path, dlerror());
	const loom_plugin_desc *(*entry)(void) = (const loom_plugin_desc *(*)(void))dlsym(lib, "loom_plugin_entry");
	ck_assert_msg(entry != NULL, "%s exports no loom_plugin_entry", l->path);
	const loom_plugin_desc *d = entry();
	ck_assert_msg(d != NULL && d->abi_version == LOOM_PLUGIN_ABI_VERSION && d->kind == LOOM_PLUGIN_BACKEND,
		      "%s is not a backend plugin for ABI version %d", l->path, LOOM_PLUGIN_ABI_VERSION);
	snprintf(s->b.name, sizeof(s->b.name), "%s", d->name);
	s->b.vt = d->vtable;
	loom_probe_args args = {.struct_size = sizeof(args), .host = test_host(), .n_options = l->n_options,
				.option_keys = keys, .option_values = values};
	int score = d->probe(&args, why, sizeof(why));
	if (score <= 0) {
		if (say)
			printf("SKIP %s: %s\n", s->b.name, why);
		return false;
	}
	for (int k = 0; k < 2; k++) {
		loom_backend_options o = {.struct_size = sizeof(o), .n_threads = k + 1, .n_options = l->n_options,
					  .option_keys = keys, .option_values = values};
		s->b.be[k] = s->b.vt->init(test_host(), &o);
		ck_assert_msg(s->b.be[k] != NULL, "%s: init: %s", s->b.name, test_plugin_error());
	}
	s->in_tree = l->in_tree;
	s->strict = l->in_tree && strncmp(s->b.name, "cpu-", 4) == 0;
	s->b.deterministic = s->strict;
	return true;
}

static void open_backends(bool say)
{
	if (opened)
		return;
	for (int i = 0; i < n_listed; i++)
		backends[i].usable = open_backend(i, say);
	opened = true;
}

/* Cases loom's own backends refuse by design; any other refusal of theirs
 * fails the case. */
static bool known_gap(const backend_state *s, const op_case *c)
{
	bool quant_cache = ref_block_elems(c->op == LOOM_OP_KV_STORE ? c->dst.dtype : c->src[1].dtype) > 0;

	if (strncmp(s->b.name, "cpu-", 4) == 0)
		return c->op == LOOM_OP_CONVERT && c->dst.dtype == LOOM_DTYPE_BF16;
	if (strcmp(s->b.name, "cuda") == 0)
		return (c->op == LOOM_OP_KV_STORE || c->op == LOOM_OP_ATTENTION) && quant_cache;
	return false;
}

/* Which tiers the usable backends that take c hold it to: bit 0 the
 * documented rounding, bit 1 the contract (0: none takes it, and its
 * reference need not be computed). */
static unsigned tiers_taking(const op_case *c)
{
	unsigned tiers = 0;

	open_backends(false);
	for (int i = 0; i < n_listed; i++)
		if (backends[i].usable && op_supported(&backends[i].b, c))
			tiers |= backends[i].strict ? 1u : 2u;
	return tiers;
}

/* A case's checks for one backend and tier. */
typedef void (*case_check)(const backend_state *s, const op_case *c, const void *expect);

/* Runs c on every usable backend that takes it. */
static void on_each_backend(const op_case *c, case_check check, const void *expect)
{
	open_backends(false);
	for (int i = 0; i < n_listed; i++) {
		backend_state *s = &backends[i];
		if (!s->usable)
			continue;
		if (!op_supported(&s->b, c)) {
			ck_assert_msg(!s->in_tree || known_gap(s, c), "%s on %s: supports() refused it", c->what,
				      s->b.name);
			s->refused++;
			continue;
		}
		s->run++;
		check(s, c, expect);
	}
}

static void report(const char *group)
{
	for (int i = 0; i < n_listed; i++)
		if (backends[i].usable)
			printf("%s on %s: %d cases run, %d refused\n", group, backends[i].b.name, backends[i].run,
			       backends[i].refused);
}

/* ------------------------------------------------------------------------ */
/* Expectations                                                             */

/* An F32 result within a tolerance: per tier, the squared sizes the error
 * is normalized by (NULL: the reference) and the bound. */
typedef struct close_expect {
	const double *ref;
	const double *norm2[2]; /* [0] documented rounding, [1] contract */
	double tol[2];
	bool zero_rows; /* rows the mask hides entirely must be zeros, exactly */
} close_expect;

static void check_zero_rows(const backend_state *s, const op_case *c, const float *got)
{
	const htensor *m = &c->src[3];
	int64_t n_kv = m->ne[0], width = c->dst.ne[0];

	for (int64_t t = 0; t < m->ne[1]; t++) {
		int64_t j = 0, d = 0;
		const float *y = got + t * width;
		while (j < n_kv && isinf(ht_f32(m)[t * n_kv + j]))
			j++;
		while (j == n_kv && d < width && y[d] == 0.0f)
			d++;
		ck_assert_msg(j < n_kv || d == width, "%s on %s: token %lld attends to no cell, output %lld is %g",
			      c->what, s->b.name, (long long)t, (long long)d, y[d]);
	}
}

static void check_close(const backend_state *s, const op_case *c, const void *expect)
{
	const close_expect *e = expect;
	int tier = s->strict ? 0 : 1;
	void *out[2];

	op_outputs(&s->b, c, out);
	for (int k = 0; k < 2; k++) {
		if (out[k] == NULL)
			continue;
		op_check_close(&s->b, c, out[k], e->ref, e->norm2[tier], e->tol[tier]);
		if (e->zero_rows && ht_present(&c->src[3]))
			check_zero_rows(s, c, out[k]);
	}
	free(out[0]);
	free(out[1]);
}

/* Bytes, exactly; the contract lets an fp16 NaN be any NaN. */
static void check_bytes(const backend_state *s, const op_case *c, const void *want)
{
	op_expect_bytes(&s->b, c, want, !s->strict && c->dst.dtype == LOOM_DTYPE_F16);
}

/* Rows decoded to f32: bit for bit in the documented rounding, within
 * 1e-12 of normalized MSE in the contract (fma may round a scaled value and
 * its offset once instead of twice). */
static void check_decoded(const backend_state *s, const op_case *c, const void *want)
{
	if (s->strict || loom_dtype_traits_of(c->src[0].dtype).block == 1) {
		op_expect_bytes(&s->b, c, want, false);
		return;
	}
	size_t n = ht_elements(&c->dst);
	double *ref = malloc(n * sizeof(double));
	ck_assert(ref != NULL);
	for (size_t i = 0; i < n; i++)
		ref[i] = ((const float *)want)[i];
	op_expect_close(&s->b, c, ref, NULL, 1e-12);
	free(ref);
}

/* The f32 source rows of a case, decoded from want (a quantized dst). */
static float *decode_rows(const htensor *like, const void *data)
{
	htensor t = *like;
	float *out = malloc(ht_elements(like) * sizeof(float));
	ck_assert(out != NULL);
	t.data = (void *)data;
	for (int64_t r = 0; r < ht_rows(like); r++)
		ht_row_values(&t, r, out + r * like->ne[0]);
	return out;
}

/* Quantized output of CONVERT: an error against the f32 source no more
 * than 1% above the scalar quantizer's, and 99% of the blocks as it wrote
 * them or decoding to the same values (an all-zero block may get a dmin
 * of -0): a float step that rounds otherwise may move a tie or a scale
 * search. The CPU backends' own quantizers allow 85% (rounded down to
 * whole blocks): cpu-avx2 and cpu-avx512 choose other scales than the
 * scalar code for 0.4% to 12% of Q4_K, Q5_K and Q6_K blocks, with errors
 * within 0.03% of its. */
static void check_quantized(const backend_state *s, const op_case *c, const void *want)
{
	const htensor *x = &c->src[0], *y = &c->dst;
	size_t bb = loom_dtype_traits_of(y->dtype).block_bytes, nb = ht_bytes(y) / bb;
	size_t per = (size_t)ref_block_elems(y->dtype);
	double min_same = s->strict ? 0.85 : 0.99;
	void *out[2];

	float *w = decode_rows(y, want);
	op_outputs(&s->b, c, out);
	for (int k = 0; k < 2; k++) {
		if (out[k] == NULL)
			continue;
		float *g = decode_rows(y, out[k]);
		double ew = 0.0, eg = 0.0, norm = 0.0;
		size_t same = 0;
		for (size_t b = 0; b < nb; b++) {
			size_t i = b * per;
			while (i < (b + 1) * per && w[i] == g[i])
				i++;
			same += i == (b + 1) * per ||
				memcmp((const char *)want + b * bb, (const char *)out[k] + b * bb, bb) == 0;
		}
		for (size_t i = 0; i < ht_elements(y); i++) {
			double v = ht_f32(x)[i], dw = w[i] - v, dg = g[i] - v;
			ew += dw * dw;
			eg += dg * dg;
			norm += v * v;
		}
		free(g);
		/* Whole blocks: a case of a single block may differ in it. */
		ck_assert_msg((double)same >= floor(min_same * (double)nb),
			      "%s on %s: %zu of %zu blocks as the reference wrote them", c->what, s->b.name, same, nb);
		ck_assert_msg(eg <= 1.01 * ew + 1e-12 * norm, "%s on %s: quantization error %.4g, the reference's %.4g",
			      c->what, s->b.name, eg / norm, ew / norm);
	}
	free(w);
	free(out[0]);
	free(out[1]);
}

/* Runs an F32-output case whose reference is ref, normalized by itself,
 * with one tolerance per tier. */
static void expect_close(const op_case *c, const double *ref, double tol_documented, double tol_contract)
{
	close_expect e = {.ref = ref, .tol = {tol_documented, tol_contract}};
	on_each_backend(c, check_close, &e);
}

/* Tolerances of the element-wise f32 ops against the double reference.
 * Documented rounding: f32 sums in any order stay near 1e-14; a missing
 * or extra rounding step shows as 1e-8 or more. The contract allows 1e-10
 * (a different summation order or a one-pass variance would show as
 * ~1e-8). */
#define TOL_CONTRACT_F32 1e-10
#define TOL_RMS_NORM 1e-12
/* The mean is rounded to f32 before it comes off (as ggml): on rows offset
 * by 100, an error of ~1e-6 relative to the deviations. */
#define TOL_LAYER_NORM 1e-10
#define TOL_SWIGLU 1e-12
#define TOL_GELU 1e-12
#define TOL_ROPE 1e-12
/* tanh by 1 - 2 / (e^2z + 1) loses relative precision near 0 but not
 * absolute: ~1e-14 of the row's energy. */
#define TOL_SOFTCAP 1e-12

/* ------------------------------------------------------------------------ */
/* Shapes                                                                   */

/* Every weight and table type. */
static const loom_dtype weight_types[] = {
	LOOM_DTYPE_F32,  LOOM_DTYPE_F16,  LOOM_DTYPE_BF16, LOOM_DTYPE_Q4_0, LOOM_DTYPE_Q4_1,
	LOOM_DTYPE_Q5_0, LOOM_DTYPE_Q5_1, LOOM_DTYPE_Q8_0, LOOM_DTYPE_Q2_K, LOOM_DTYPE_Q3_K,
	LOOM_DTYPE_Q4_K, LOOM_DTYPE_Q5_K, LOOM_DTYPE_Q6_K, LOOM_DTYPE_MXFP4,
};

/* Row lengths for a dtype: the whole numbers of blocks among these, 512
 * (two K-quant super-blocks) for the quantized types, and odd lengths for
 * the types without blocks. 2816 = 11 * 256 and 11008 = 43 * 256 (the FFN
 * widths of TinyLlama and Llama 2 7B). */
static int row_lengths(loom_dtype type, int64_t *out)
{
	static const int64_t blocky[] = {32, 64, 256, 2816, 11008};
	static const int64_t odd[] = {5, 172};
	int64_t block = loom_dtype_traits_of(type).block;
	int n = 0;

	for (size_t i = 0; i < N_OF(blocky); i++)
		if (blocky[i] % block == 0)
			out[n++] = blocky[i];
	if (block > 1)
		out[n++] = 512;
	else
		for (size_t i = 0; i < N_OF(odd); i++)
			out[n++] = odd[i];
	return n;
}

/* The same at the sizes a GPU's kernels split differently: 256 and 4096
 * for all, 32 where the block allows, 5 and 172 without blocks. */
static int wide_row_lengths(loom_dtype type, int64_t *out)
{
	int64_t block = loom_dtype_traits_of(type).block;
	int n = 0;

	out[n++] = 256;
	out[n++] = 4096;
	if (block <= 32)
		out[n++] = 32;
	if (block == 1) {
		out[n++] = 5;
		out[n++] = 172;
	}
	return n;
}

/* 33 rows: two whole 16-row groups and one row; 14 tokens: runs of 8, 4
 * and single tokens in the repacked kernels, two full float tiles and a
 * short one of 2; 3 and 5: short tiles of the 4- and 6-token kernels; 64
 * the prompt-sized batch. */
static const int64_t row_counts[] = {1, 7, 33};
static const int64_t token_counts[] = {1, 3, 5, 14, 64};
/* Widths most ops run at besides: 5 (no vector width), 256, 4096 (a real
 * width); rows or tokens: one, a few, a prompt. */
static const int64_t widths[] = {5, 256, 4096};
static const int64_t counts[] = {1, 7, 64};

/* ------------------------------------------------------------------------ */
/* GET_ROWS                                                                 */

static void get_rows_case(ref_rng *rng, loom_dtype type, int64_t ne0, int64_t n_rows, int64_t n, bool last_first)
{
	op_case c = {.op = LOOM_OP_GET_ROWS};
	htensor want = ht(LOOM_DTYPE_F32, ne0, n, 1, 1);

	c.src[0] = random_weights(rng, type, ne0, n_rows, 1.0);
	c.src[1] = ht(LOOM_DTYPE_I32, n, 1, 1, 1);
	c.dst = ht(LOOM_DTYPE_F32, ne0, n, 1, 1);
	for (int64_t k = 0; k < n; k++) {
		int32_t row = (int32_t)(last_first && k == 0 ? n_rows - 1 : ref_rng_below(rng, n_rows));
		ht_i32(&c.src[1])[k] = row;
		ht_row_values(&c.src[0], row, ht_f32(&want) + k * ne0);
	}
	snprintf(c.what, sizeof(c.what), "GET_ROWS %s [%lld x %lld] x %lld", dtype_name(type), (long long)ne0,
		 (long long)n_rows, (long long)n);
	on_each_backend(&c, check_decoded, want.data);
	free(want.data);
	op_case_free(&c);
}

/* Every table type at every row length; 1, 3 and 14 rows leave one of two
 * threads idle, split unevenly, or give each several; then the wide
 * lengths with 1, 7 and 64 rows of a 40-row table, its last row first. */
static void group_get_rows(void)
{
	static const int64_t ids_counts[] = {1, 3, 14};
	ref_rng rng = {1};
	int64_t lens[8];

	for (size_t ti = 0; ti < N_OF(weight_types); ti++) {
		int idx[3] = {0}, sizes[3] = {row_lengths(weight_types[ti], lens), 2, N_OF(ids_counts)};
		do
			get_rows_case(&rng, weight_types[ti], lens[idx[0]], row_counts[1 + idx[1]], ids_counts[idx[2]],
				      false);
		while (grid_next(idx, sizes, 3));
	}
	for (size_t ti = 0; ti < N_OF(weight_types); ti++) {
		int n_lens = wide_row_lengths(weight_types[ti], lens);
		for (int li = 0; li < n_lens; li++)
			for (size_t ci = 0; ci < N_OF(counts); ci++)
				get_rows_case(&rng, weight_types[ti], lens[li], 40, counts[ci], true);
	}
	/* Every fp16 and bf16 bit pattern: the conversions to f32 are exact,
	 * NaNs come out quiet with their payload. */
	const loom_dtype halves[] = {LOOM_DTYPE_F16, LOOM_DTYPE_BF16};
	for (int ti = 0; ti < 2; ti++) {
		op_case c = {.op = LOOM_OP_GET_ROWS};
		c.src[0] = ht(halves[ti], 256, 256, 1, 1);
		c.src[1] = ht(LOOM_DTYPE_I32, 256, 1, 1, 1);
		c.dst = ht(LOOM_DTYPE_F32, 256, 256, 1, 1);
		htensor want = ht(LOOM_DTYPE_F32, 256, 256, 1, 1);
		for (int h = 0; h < 65536; h++) {
			uint16_t bits = (uint16_t)h;
			ht_u16(&c.src[0])[h] = bits;
			ht_f32(&want)[h] = ti == 0 ? ref_fp16_to_f32(bits) : ref_bf16_to_f32(bits);
		}
		for (int k = 0; k < 256; k++)
			ht_i32(&c.src[1])[k] = k;
		snprintf(c.what, sizeof(c.what), "GET_ROWS of all %s values", dtype_name(halves[ti]));
		on_each_backend(&c, check_bytes, want.data);
		free(want.data);
		op_case_free(&c);
	}
}

/* ------------------------------------------------------------------------ */
/* CONVERT                                                                  */

/* F32 to each type the scalar quantizers encode, to BF16, and each type
 * back to F32. */
static void group_convert(void)
{
	static const int64_t lens[] = {256, 4096}, rows[] = {1, 33};
	ref_rng rng = {2};

	for (size_t li = 0; li < N_OF(lens); li++) {
		for (size_t ri = 0; ri < N_OF(rows); ri++) {
			int64_t n = lens[li], nr = rows[ri];
			for (size_t ti = 1; ti < N_OF(weight_types); ti++) {
				loom_dtype type = weight_types[ti];
				op_case c = {.op = LOOM_OP_CONVERT};
				htensor want = ht(LOOM_DTYPE_F32, n, nr, 1, 1);
				c.src[0] = random_weights(&rng, type, n, nr, 1.0);
				c.dst = ht(LOOM_DTYPE_F32, n, nr, 1, 1);
				for (int64_t r = 0; r < nr; r++)
					ht_row_values(&c.src[0], r, ht_f32(&want) + r * n);
				snprintf(c.what, sizeof(c.what), "CONVERT %s -> f32 [%lld x %lld]", dtype_name(type),
					 (long long)n, (long long)nr);
				on_each_backend(&c, check_decoded, want.data);
				free(want.data);
				op_case_free(&c);
			}
			for (size_t ti = 1; ti < N_OF(weight_types); ti++) {
				loom_dtype type = weight_types[ti];
				op_case c = {.op = LOOM_OP_CONVERT};
				c.src[0] = ht(LOOM_DTYPE_F32, n, nr, 1, 1);
				c.dst = ht(type, n, nr, 1, 1);
				htensor want = ht(type, n, nr, 1, 1);
				fill_normal(&rng, ht_f32(&c.src[0]), ht_elements(&c.src[0]), 1.0);
				/* A zero super-block in the first row: the quantizers' zero path. */
				if (n >= 512)
					memset(ht_f32(&c.src[0]) + 256, 0, 256 * sizeof(float));
				for (size_t i = 0; type != LOOM_DTYPE_F16 && type != LOOM_DTYPE_BF16 && i < (size_t)nr; i++)
					cpu_quant_type_of(type)->quantize(ht_f32(&c.src[0]) + i * (size_t)n,
									  (char *)want.data + i * ht_row_bytes(&want), n);
				for (size_t i = 0; ref_block_elems(type) == 0 && i < ht_elements(&want); i++)
					ht_u16(&want)[i] = type == LOOM_DTYPE_F16 ? ref_f32_to_fp16(ht_f32(&c.src[0])[i])
										  : ref_f32_to_bf16(ht_f32(&c.src[0])[i]);
				snprintf(c.what, sizeof(c.what), "CONVERT f32 -> %s [%lld x %lld]", dtype_name(type),
					 (long long)n, (long long)nr);
				on_each_backend(&c, ref_block_elems(type) > 0 ? check_quantized : check_bytes, want.data);
				free(want.data);
				op_case_free(&c);
			}
		}
	}
}

/* ------------------------------------------------------------------------ */
/* RMS_NORM, LAYER_NORM                                                     */

static void rms_norm_case(ref_rng *rng, int64_t n, int64_t rows, bool weighted, float eps, bool in_place)
{
	op_case c = {.op = LOOM_OP_RMS_NORM, .fp = {eps}, .in_place = in_place};
	double *ref = malloc(sizeof(double) * (size_t)(n * rows));

	c.src[0] = ht(LOOM_DTYPE_F32, n, rows, 1, 1);
	c.dst = ht(LOOM_DTYPE_F32, n, rows, 1, 1);
	fill_normal(rng, ht_f32(&c.src[0]), (size_t)(n * rows), 3.0);
	if (weighted) {
		c.src[1] = ht(LOOM_DTYPE_F32, n, 1, 1, 1);
		fill_normal(rng, ht_f32(&c.src[1]), (size_t)n, 1.0);
	}
	for (int64_t r = 0; r < rows; r++) {
		const float *x = ht_f32(&c.src[0]) + r * n;
		double ss = 0.0;
		for (int64_t i = 0; i < n; i++)
			ss += (double)x[i] * x[i];
		double scale = 1.0 / sqrt(ss / (double)n + (double)c.fp[0]);
		for (int64_t i = 0; i < n; i++)
			ref[r * n + i] = x[i] * scale * (weighted ? ht_f32(&c.src[1])[i] : 1.0);
	}
	snprintf(c.what, sizeof(c.what), "RMS_NORM [%lld x %lld]%s%s", (long long)n, (long long)rows,
		 weighted ? " weighted" : "", in_place ? " in place" : "");
	expect_close(&c, ref, TOL_RMS_NORM, TOL_CONTRACT_F32);
	free(ref);
	op_case_free(&c);
}

/* params: bit 0 a weight, bit 1 a bias. */
static void layer_norm_case(ref_rng *rng, int64_t n, int64_t rows, int params, bool in_place)
{
	op_case c = {.op = LOOM_OP_LAYER_NORM, .fp = {1e-5f}, .in_place = in_place};
	double *ref = malloc(sizeof(double) * (size_t)(n * rows));

	c.src[0] = ht(LOOM_DTYPE_F32, n, rows, 1, 1);
	c.dst = ht(LOOM_DTYPE_F32, n, rows, 1, 1);
	/* An offset much larger than the spread: the mean must come off
	 * before the squares are summed. */
	fill_normal(rng, ht_f32(&c.src[0]), (size_t)(n * rows), 3.0);
	for (int64_t i = 0; i < n * rows; i++)
		ht_f32(&c.src[0])[i] += 100.0f;
	for (int k = 0; k < 2; k++) {
		if (params & (1 << k)) {
			c.src[1 + k] = ht(LOOM_DTYPE_F32, n, 1, 1, 1);
			fill_normal(rng, ht_f32(&c.src[1 + k]), (size_t)n, 1.0);
		}
	}
	for (int64_t r = 0; r < rows; r++) {
		const float *x = ht_f32(&c.src[0]) + r * n;
		double mean = 0.0, var = 0.0;
		for (int64_t i = 0; i < n; i++)
			mean += x[i];
		mean /= (double)n;
		for (int64_t i = 0; i < n; i++)
			var += (x[i] - mean) * (x[i] - mean);
		double scale = 1.0 / sqrt(var / (double)n + (double)c.fp[0]);
		for (int64_t i = 0; i < n; i++) {
			double y = (x[i] - mean) * scale;
			if (params & 1)
				y *= ht_f32(&c.src[1])[i];
			if (params & 2)
				y += ht_f32(&c.src[2])[i];
			ref[r * n + i] = y;
		}
	}
	snprintf(c.what, sizeof(c.what), "LAYER_NORM [%lld x %lld]%s%s%s", (long long)n, (long long)rows,
		 params & 1 ? " weighted" : "", params & 2 ? " biased" : "", in_place ? " in place" : "");
	expect_close(&c, ref, TOL_LAYER_NORM, TOL_CONTRACT_F32);
	free(ref);
	op_case_free(&c);
}

static void group_norms(void)
{
	static const int64_t lens[] = {5, 32, 172, 256, 2816};
	ref_rng rng = {3};
	int idx[3] = {0}, sizes[3] = {N_OF(lens), N_OF(row_counts), 2};

	do
		rms_norm_case(&rng, lens[idx[0]], row_counts[idx[1]], idx[2], idx[2] ? 1e-5f : 1e-6f, false);
	while (grid_next(idx, sizes, 3));
	int ldx[4] = {0}, lsizes[4] = {N_OF(lens), N_OF(row_counts), 4, 2};
	do
		layer_norm_case(&rng, lens[ldx[0]], row_counts[ldx[1]], ldx[2], ldx[3]);
	while (grid_next(ldx, lsizes, 4));
	/* The wide rows and prompt-sized batches, every third in place. */
	int k = 0;
	for (size_t wi = 0; wi < N_OF(widths); wi++) {
		for (size_t ci = 0; ci < N_OF(counts); ci++) {
			for (int weighted = 0; weighted < 2; weighted++)
				rms_norm_case(&rng, widths[wi], counts[ci], weighted, 1e-5f, k++ % 3 == 0);
			for (int params = 0; params < 4; params++)
				layer_norm_case(&rng, widths[wi], counts[ci], params, k++ % 3 == 0);
		}
	}
}

/* ------------------------------------------------------------------------ */
/* MATMUL                                                                   */

/* The documented rounding: f32 accumulation, normalized by the sums of
 * |w * x| (which bound f32 rounding however the terms cancel): rows of
 * 11008 reach ~1e-12. */
#define TOL_MATMUL 1e-9

/* The contract, normalized by the sums of (w * x)^2 (the noise a rounding
 * of each term adds), per weight type. */
static double matmul_contract_tol(loom_dtype type)
{
	switch (type) {
	case LOOM_DTYPE_F32:
		/* f32 products and sums (no TF32): summation order only. */
		return 1e-10;
	case LOOM_DTYPE_F16:
		/* The API lets a backend round activations to fp16 or not: one
		 * side rounding them is (2^-11)^2 / 3 = 8e-8. */
		return 1e-6;
	case LOOM_DTYPE_BF16:
		/* The same with bf16's 8 bits: (2^-8)^2 / 3 = 5e-6. */
		return 5e-5;
	case LOOM_DTYPE_Q4_0:
	case LOOM_DTYPE_Q5_0:
	case LOOM_DTYPE_Q8_0:
	case LOOM_DTYPE_Q4_1:
	case LOOM_DTYPE_Q5_1:
		/* Q8_1 activations have the d and q of the reference's Q8_0 /
		 * Q8_1 blocks: only the summation order differs (0 to 2e-8). A
		 * path through fp16 activations adds a rounding of them: 3e-5.
		 * A case with one output sees one draw of that noise, hence 17x. */
		return 5e-4;
	default:
		/* K-quants: the reference quantizes activations to Q8_K (a scale
		 * per 256), a GPU may quantize to Q8_1 (per 32): 5.5e-5 to 8e-5
		 * apart (fp16 activations: 4e-5 to 5.5e-5); 1e-3 leaves 12x for
		 * the draw of a single output. */
		return 1e-3;
	}
}

static void expect_matmul(const op_case *c, double tol_documented)
{
	size_t n = ht_elements(&c->dst);
	double *ref = malloc(n * sizeof(double)), *mag = malloc(n * sizeof(double));
	double *energy = malloc(n * sizeof(double));

	unsigned tiers = tiers_taking(c);
	ck_assert(ref != NULL && mag != NULL && energy != NULL);
	if (tiers != 0)
		matmul_reference(c, ref, tiers & 1 ? mag : NULL, tiers & 2 ? energy : NULL);
	for (size_t i = 0; tiers & 1 && i < n; i++)
		mag[i] *= mag[i];
	close_expect e = {.ref = ref, .norm2 = {mag, energy}, .tol = {tol_documented, matmul_contract_tol(c->src[0].dtype)}};
	on_each_backend(c, check_close, &e);
	free(ref);
	free(mag);
	free(energy);
}

/* zero_from: the activations' first zero block (of zero_len elements), the
 * quantizers' zero path; 0 for none. */
static void matmul_case(ref_rng *rng, loom_dtype type, int64_t n, int64_t n_out, int64_t n_tok, int64_t zero_from,
			int64_t zero_len)
{
	op_case c = {.op = LOOM_OP_MATMUL};

	c.src[0] = random_weights(rng, type, n, n_out, 1.0 / sqrt((double)n));
	c.src[1] = ht(LOOM_DTYPE_F32, n, n_tok, 1, 1);
	c.dst = ht(LOOM_DTYPE_F32, n_out, n_tok, 1, 1);
	fill_normal(rng, ht_f32(&c.src[1]), (size_t)(n * n_tok), 2.0);
	if (zero_len > 0 && n >= zero_from + zero_len)
		memset(ht_f32(&c.src[1]) + zero_from, 0, (size_t)zero_len * sizeof(float));
	snprintf(c.what, sizeof(c.what), "MATMUL %s [%lld x %lld] x %lld tokens", dtype_name(type), (long long)n,
		 (long long)n_out, (long long)n_tok);
	expect_matmul(&c, TOL_MATMUL);
	op_case_free(&c);
}

/* Whether the first grid of group_matmul (row_lengths x row_counts x
 * token_counts) has run this shape already, at every row count. */
static bool in_first_grid(loom_dtype type, int64_t n, int64_t n_tok)
{
	int64_t lens[8];
	int n_lens = row_lengths(type, lens);
	bool len_in = false, tok_in = false;

	for (int i = 0; i < n_lens; i++)
		len_in |= lens[i] == n;
	for (size_t i = 0; i < N_OF(token_counts); i++)
		tok_in |= token_counts[i] == n_tok;
	return len_in && tok_in && !(n > 4096 && n_tok > 16);
}

static void group_matmul(loom_dtype type)
{
	ref_rng rng = {3 + (uint64_t)type};
	int64_t lens[8], act_block = ref_block_elems(ref_act_type(type));
	int idx[3] = {0}, sizes[3] = {row_lengths(type, lens), N_OF(row_counts), N_OF(token_counts)};

	do {
		/* The longest rows check how error accumulates, which a few
		 * tokens show; the 2816-long rows' batches cover the rest. */
		if (lens[idx[0]] > 4096 && token_counts[idx[2]] > 16)
			continue;
		matmul_case(&rng, type, lens[idx[0]], row_counts[idx[1]], token_counts[idx[2]], act_block, act_block);
	} while (grid_next(idx, sizes, 3));

	/* Tiles of tokens and rows that do not fill up, for kernels that take
	 * 16 of each at once: 37 tokens are two whole tiles and one of 5, 19
	 * rows a group and 3; F16 and BF16 rows of 100 end inside a tile row
	 * of 32. */
	if (type != LOOM_DTYPE_F32)
		matmul_case(&rng, type, loom_dtype_traits_of(type).block == 1 ? 100 : 512, 19, 37, act_block,
			    act_block);

	/* The sizes a GPU splits: every row count and batch (one token, a few,
	 * a prompt, a long prompt) at 256 and 4096; 512 and 11008 at fewer;
	 * the odd widths where the type has no blocks. A zero block of every
	 * activation type (Q8_0/Q8_1 and Q8_K) at 256. */
	static const int64_t toks[] = {1, 3, 64, 512};
	static const int64_t wide[] = {256, 4096}, awkward[] = {512, 11008}, odd[] = {7, 33};
	for (size_t li = 0; li < N_OF(wide); li++)
		for (size_t ri = 0; ri < N_OF(row_counts); ri++)
			for (size_t ti = 0; ti < N_OF(toks); ti++)
				if (!in_first_grid(type, wide[li], toks[ti]))
					matmul_case(&rng, type, wide[li], row_counts[ri], toks[ti], 256, 256);
	for (size_t li = 0; li < N_OF(awkward); li++)
		for (size_t ri = 1; ri < N_OF(row_counts); ri++)
			for (size_t ti = 0; ti < N_OF(toks); ti += 2)
				if (!in_first_grid(type, awkward[li], toks[ti]))
					matmul_case(&rng, type, awkward[li], row_counts[ri], toks[ti], 256, 256);
	if (loom_dtype_traits_of(type).block == 1)
		for (size_t li = 0; li < N_OF(odd); li++)
			for (size_t ri = 0; ri < N_OF(row_counts); ri++)
				for (size_t ti = 0; ti < N_OF(toks); ti++)
					matmul_case(&rng, type, odd[li], row_counts[ri], toks[ti], 0, 0);
}

/* Activations that quantize to exact ties (x * scale = k + 1/2): the
 * documented rounding goes to even, as llama.cpp's x86 quantizers do. With
 * one element of magnitude 127 per block the Q8_0/Q8_1 scale 127 / amax
 * and the Q8_K scale -127 / max are +-1, so x = k + 0.5 is a tie; a block
 * whose extreme is negative checks the sign of Q8_K's scale. Weights:
 * Q8_0, Q4_1 and Q4_K, one per activation type. */
static void group_matmul_ties(void)
{
	static const loom_dtype types[] = {LOOM_DTYPE_Q8_0, LOOM_DTYPE_Q4_1, LOOM_DTYPE_Q4_K};
	ref_rng rng = {4};

	for (size_t k = 0; k < N_OF(types); k++) {
		op_case c = {.op = LOOM_OP_MATMUL};
		int64_t n = 512;
		c.src[0] = random_weights(&rng, types[k], n, 5, 1.0);
		c.src[1] = ht(LOOM_DTYPE_F32, n, 2, 1, 1);
		c.dst = ht(LOOM_DTYPE_F32, 5, 2, 1, 1);
		for (int64_t i = 0; i < 2 * n; i++) {
			float extreme = i / 256 % 2 ? -127.0f : 127.0f;
			ht_f32(&c.src[1])[i] = i % 32 == 0 ? extreme : (float)(i % 32 - 16) + 0.5f;
		}
		snprintf(c.what, sizeof(c.what), "MATMUL %s with rounding ties", dtype_name(types[k]));
		double ref[10], energy[10];
		matmul_reference(&c, ref, NULL, energy);
		close_expect e = {.ref = ref, .norm2 = {NULL, energy}, .tol = {1e-12, matmul_contract_tol(types[k])}};
		on_each_backend(&c, check_close, &e);
		op_case_free(&c);
	}
}

/* ------------------------------------------------------------------------ */
/* ADD, MUL, SCALE, SWIGLU, GELU                                            */

/* mode bit 0: src1 is one broadcast row; bit 1: dst is src0. f32 add and
 * multiply are correctly rounded: exact. */
static void binary_case(ref_rng *rng, loom_op op, int64_t n, int64_t rows, int mode)
{
	op_case c = {.op = op, .in_place = mode & 2};
	htensor want = ht(LOOM_DTYPE_F32, n, rows, 1, 1);

	c.src[0] = ht(LOOM_DTYPE_F32, n, rows, 1, 1);
	c.src[1] = ht(LOOM_DTYPE_F32, n, mode & 1 ? 1 : rows, 1, 1);
	c.dst = ht(LOOM_DTYPE_F32, n, rows, 1, 1);
	fill_normal(rng, ht_f32(&c.src[0]), (size_t)(n * rows), 1.0);
	fill_normal(rng, ht_f32(&c.src[1]), ht_elements(&c.src[1]), 1.0);
	for (int64_t i = 0; i < n * rows; i++) {
		float x = ht_f32(&c.src[0])[i], y = ht_f32(&c.src[1])[mode & 1 ? i % n : i];
		ht_f32(&want)[i] = op == LOOM_OP_ADD ? x + y : x * y;
	}
	snprintf(c.what, sizeof(c.what), "%s [%lld x %lld]%s%s", op == LOOM_OP_ADD ? "ADD" : "MUL", (long long)n,
		 (long long)rows, mode & 1 ? " broadcast" : "", mode & 2 ? " in place" : "");
	on_each_backend(&c, check_bytes, want.data);
	free(want.data);
	op_case_free(&c);
}

static void scale_case(ref_rng *rng, int64_t n, int64_t rows, bool in_place)
{
	op_case c = {.op = LOOM_OP_SCALE, .fp = {0.375f}, .in_place = in_place};
	htensor want = ht(LOOM_DTYPE_F32, n, rows, 1, 1);

	c.src[0] = ht(LOOM_DTYPE_F32, n, rows, 1, 1);
	c.dst = ht(LOOM_DTYPE_F32, n, rows, 1, 1);
	fill_normal(rng, ht_f32(&c.src[0]), (size_t)(n * rows), 1.0);
	for (int64_t i = 0; i < n * rows; i++)
		ht_f32(&want)[i] = ht_f32(&c.src[0])[i] * c.fp[0];
	snprintf(c.what, sizeof(c.what), "SCALE [%lld x %lld]%s", (long long)n, (long long)rows,
		 in_place ? " in place" : "");
	on_each_backend(&c, check_bytes, want.data);
	free(want.data);
	op_case_free(&c);
}

static void swiglu_case(ref_rng *rng, int64_t n, int64_t rows)
{
	op_case c = {.op = LOOM_OP_SWIGLU};
	double *ref = malloc(sizeof(double) * (size_t)(n * rows));

	c.src[0] = ht(LOOM_DTYPE_F32, n, rows, 1, 1);
	c.src[1] = ht(LOOM_DTYPE_F32, n, rows, 1, 1);
	c.dst = ht(LOOM_DTYPE_F32, n, rows, 1, 1);
	/* Gates up to |x| ~ 40: e^-x overflows f32 and silu goes to -0. */
	fill_normal(rng, ht_f32(&c.src[0]), (size_t)(n * rows), 10.0);
	fill_normal(rng, ht_f32(&c.src[1]), (size_t)(n * rows), 1.0);
	for (int64_t i = 0; i < n * rows; i++) {
		double g = ht_f32(&c.src[0])[i];
		ref[i] = g / (1.0 + exp(-g)) * ht_f32(&c.src[1])[i];
	}
	snprintf(c.what, sizeof(c.what), "SWIGLU [%lld x %lld]", (long long)n, (long long)rows);
	expect_close(&c, ref, TOL_SWIGLU, TOL_CONTRACT_F32);
	free(ref);
	op_case_free(&c);
}

static void gelu_case(ref_rng *rng, int64_t n, int64_t rows, loom_gelu_kind kind, bool in_place)
{
	op_case c = {.op = LOOM_OP_GELU, .ip = {kind}, .in_place = in_place};
	double *ref = malloc(sizeof(double) * (size_t)(n * rows));

	c.src[0] = ht(LOOM_DTYPE_F32, n, rows, 1, 1);
	c.dst = ht(LOOM_DTYPE_F32, n, rows, 1, 1);
	/* Up to |x| ~ 40: tanh and erf saturate, gelu goes to x or -0. */
	fill_normal(rng, ht_f32(&c.src[0]), (size_t)(n * rows), 10.0);
	for (int64_t i = 0; i < n * rows; i++) {
		double x = ht_f32(&c.src[0])[i];
		ref[i] = kind == LOOM_GELU_ERF ? 0.5 * x * (1.0 + erf(x / sqrt(2.0)))
					       : 0.5 * x * (1.0 + tanh(0.79788456080286535588 * (x + 0.044715 * x * x * x)));
	}
	snprintf(c.what, sizeof(c.what), "GELU %s [%lld x %lld]%s", kind == LOOM_GELU_ERF ? "erf" : "tanh",
		 (long long)n, (long long)rows, in_place ? " in place" : "");
	expect_close(&c, ref, TOL_GELU, TOL_CONTRACT_F32);
	free(ref);
	op_case_free(&c);
}

/* cap * tanh(x * f32(1 / cap)), in double after the f32 product. */
static void softcap_case(ref_rng *rng, int64_t n, int64_t rows, float cap, bool in_place)
{
	op_case c = {.op = LOOM_OP_SOFTCAP, .fp = {cap}, .in_place = in_place};
	double *ref = malloc(sizeof(double) * (size_t)(n * rows));
	float inv = 1.0f / cap;

	c.src[0] = ht(LOOM_DTYPE_F32, n, rows, 1, 1);
	c.dst = ht(LOOM_DTYPE_F32, n, rows, 1, 1);
	/* Up to several caps either side, where tanh saturates, and the small
	 * values around 0 where it is near the identity. */
	fill_normal(rng, ht_f32(&c.src[0]), (size_t)(n * rows), 2.0 * cap);
	for (int64_t i = 0; i < n * rows; i += 7)
		ht_f32(&c.src[0])[i] *= 1e-3f;
	for (int64_t i = 0; i < n * rows; i++)
		ref[i] = (double)cap * tanh((double)(ht_f32(&c.src[0])[i] * inv));
	snprintf(c.what, sizeof(c.what), "SOFTCAP %g [%lld x %lld]%s", cap, (long long)n, (long long)rows,
		 in_place ? " in place" : "");
	expect_close(&c, ref, TOL_SOFTCAP, TOL_CONTRACT_F32);
	free(ref);
	op_case_free(&c);
}

/* f32 exp and a division: ~1e-14 of the energy. */
#define TOL_SIGMOID 1e-12

static void sigmoid_case(ref_rng *rng, int64_t n, int64_t rows, bool in_place)
{
	op_case c = {.op = LOOM_OP_SIGMOID, .in_place = in_place};
	double *ref = malloc(sizeof(double) * (size_t)(n * rows));

	ck_assert_ptr_nonnull(ref);
	c.src[0] = ht(LOOM_DTYPE_F32, n, rows, 1, 1);
	c.dst = ht(LOOM_DTYPE_F32, n, rows, 1, 1);
	/* Out to where the exponential overflows (|x| > 88). */
	fill_normal(rng, ht_f32(&c.src[0]), (size_t)(n * rows), 30.0);
	for (int64_t i = 0; i < n * rows; i++)
		ref[i] = 1.0 / (1.0 + exp(-(double)ht_f32(&c.src[0])[i]));
	snprintf(c.what, sizeof(c.what), "SIGMOID [%lld x %lld]%s", (long long)n, (long long)rows,
		 in_place ? " in place" : "");
	expect_close(&c, ref, TOL_SIGMOID, TOL_CONTRACT_F32);
	free(ref);
	op_case_free(&c);
}

/* f32 exp and clamps, ggml's order of operations: ~1e-14 of the energy. */
#define TOL_SWIGLU_OAI 1e-12

static void swiglu_oai_case(ref_rng *rng, int64_t n, int64_t rows, float alpha, float limit, bool in_place)
{
	op_case c = {.op = LOOM_OP_SWIGLU_OAI, .fp = {alpha, limit}, .in_place = in_place};
	double *ref = malloc(sizeof(double) * (size_t)(n * rows));

	ck_assert_ptr_nonnull(ref);
	c.src[0] = ht(LOOM_DTYPE_F32, n, rows, 1, 1);
	c.src[1] = ht(LOOM_DTYPE_F32, n, rows, 1, 1);
	c.dst = ht(LOOM_DTYPE_F32, n, rows, 1, 1);
	/* Spread past the limit on both sides, so that the clamps bite. */
	fill_normal(rng, ht_f32(&c.src[0]), (size_t)(n * rows), 2.0 * limit);
	fill_normal(rng, ht_f32(&c.src[1]), (size_t)(n * rows), 2.0 * limit);
	for (int64_t i = 0; i < n * rows; i++) {
		double g = fmin(ht_f32(&c.src[0])[i], limit), u = fmin(fmax(ht_f32(&c.src[1])[i], -limit), limit);
		ref[i] = g / (1.0 + exp(-(double)alpha * g)) * (u + 1.0);
	}
	snprintf(c.what, sizeof(c.what), "SWIGLU_OAI alpha %g limit %g [%lld x %lld]%s", alpha, limit, (long long)n,
		 (long long)rows, in_place ? " in place" : "");
	expect_close(&c, ref, TOL_SWIGLU_OAI, TOL_CONTRACT_F32);
	free(ref);
	op_case_free(&c);
}

static void group_sigmoid(void)
{
	static const int64_t lens[] = {1, 5, 172, 2816};
	ref_rng rng = {15};
	int k = 0;

	for (size_t li = 0; li < N_OF(lens); li++)
		for (size_t ci = 0; ci < N_OF(counts); ci++) {
			sigmoid_case(&rng, lens[li], counts[ci], k % 2 == 0);
			swiglu_oai_case(&rng, lens[li], counts[ci], 1.702f, 7.0f, k % 2 == 0);
			swiglu_oai_case(&rng, lens[li], counts[ci], 1.0f, 3.0f, k++ % 2 != 0);
		}
}

/* Gemma 2's caps: 30 on the final logits, 50 on attention scores. */
static void group_softcap(void)
{
	static const int64_t lens[] = {5, 172, 256, 2816, 4096};
	static const float caps[] = {30.0f, 50.0f};
	ref_rng rng = {13};
	int k = 0;

	for (size_t li = 0; li < N_OF(lens); li++)
		for (size_t ci = 0; ci < N_OF(counts); ci++)
			for (size_t cap = 0; cap < N_OF(caps); cap++)
				softcap_case(&rng, lens[li], counts[ci], caps[cap], k++ % 2 == 0);
}

static void group_elementwise(void)
{
	static const int64_t lens[] = {5, 172, 256, 2816};
	ref_rng rng = {5};
	int idx[4] = {0}, sizes[4] = {2, N_OF(lens), N_OF(row_counts), 4};

	do
		binary_case(&rng, idx[0] ? LOOM_OP_MUL : LOOM_OP_ADD, lens[idx[1]], row_counts[idx[2]], idx[3]);
	while (grid_next(idx, sizes, 4));
	for (size_t li = 0; li < N_OF(lens); li++)
		for (size_t ri = 0; ri < N_OF(row_counts); ri++) {
			for (int in_place = 0; in_place < 2; in_place++)
				scale_case(&rng, lens[li], row_counts[ri], in_place);
			swiglu_case(&rng, lens[li], row_counts[ri]);
			for (int kind = 0; kind < 2; kind++)
				for (int in_place = 0; in_place < 2; in_place++)
					gelu_case(&rng, lens[li], row_counts[ri], (loom_gelu_kind)kind, in_place);
		}
	/* The wide rows and prompt-sized batches. */
	int k = 0;
	for (size_t wi = 0; wi < N_OF(widths); wi++) {
		for (size_t ci = 0; ci < N_OF(counts); ci++) {
			for (int m = 0; m < 8; m++)
				binary_case(&rng, m & 4 ? LOOM_OP_MUL : LOOM_OP_ADD, widths[wi], counts[ci], m & 3);
			scale_case(&rng, widths[wi], counts[ci], k++ % 2 == 0);
			swiglu_case(&rng, widths[wi], counts[ci]);
			for (int kind = 0; kind < 2; kind++)
				gelu_case(&rng, widths[wi], counts[ci], (loom_gelu_kind)kind, k++ % 2 == 0);
		}
	}
}

/* ------------------------------------------------------------------------ */
/* ROPE                                                                     */

typedef struct rope_config {
	int64_t head_dim, n_heads;
	int n_rot, style;
} rope_config;

static void rope_reference(const op_case *c, double *ref)
{
	const htensor *x = &c->src[0];
	int64_t hd = x->ne[0], nh = x->ne[1], nt = x->ne[2];
	int n_rot = c->ip[0];
	bool neox = c->ip[1] == LOOM_ROPE_NEOX;
	/* The documented angle: an iterated f32 product, then cos/sin. */
	float theta_scale = powf(c->fp[0], -2.0f / (float)n_rot);

	/* YaRN's ramp between the pairs that turn beta_fast and beta_slow
	 * times in the original context (fp[4], fp[5], ip[2]). */
	float ext = c->fp[2], attn = c->fp[3] != 0.0f ? c->fp[3] : 1.0f, low = 0, high = 0;
	if (ext > 0) {
		float dim[2];
		for (int k = 0; k < 2; k++)
			dim[k] = (float)n_rot * logf((float)c->ip[2] / (c->fp[4 + k] * 2.0f * (float)M_PI)) /
				 (2.0f * logf(c->fp[0]));
		low = fmaxf(0.0f, floorf(dim[0]));
		high = fminf((float)(n_rot - 1), ceilf(dim[1]));
	}
	const float *ff = ht_present(&c->src[2]) ? ht_f32(&c->src[2]) : NULL;

	for (int64_t t = 0; t < nt; t++) {
		float theta = (float)ht_i32(&c->src[1])[t];
		double cs[512][2];
		for (int i = 0; i < n_rot / 2; i++) {
			float unscaled = ff != NULL ? theta / ff[i] : theta;
			float angle = c->fp[1] * unscaled;
			double mscale = attn;
			if (ext > 0) {
				float ramp = 1.0f - fminf(1.0f, fmaxf(0.0f, ((float)i - low) / fmaxf(0.001f, high - low)));
				angle = fmaf(angle, 1.0f - ramp * ext, unscaled * (ramp * ext));
				mscale *= 1.0 + 0.1 * log(1.0 / (double)c->fp[1]);
			}
			cs[i][0] = cos((double)angle) * mscale;
			cs[i][1] = sin((double)angle) * mscale;
			theta *= theta_scale;
		}
		for (int64_t h = 0; h < nh; h++) {
			const float *in = ht_f32(x) + (t * nh + h) * hd;
			double *out = ref + (t * nh + h) * hd;
			for (int64_t d = 0; d < hd; d++)
				out[d] = in[d];
			for (int i = 0; i < n_rot / 2; i++) {
				int a = neox ? i : 2 * i, b = neox ? i + n_rot / 2 : 2 * i + 1;
				out[a] = in[a] * cs[i][0] - in[b] * cs[i][1];
				out[b] = in[a] * cs[i][1] + in[b] * cs[i][0];
			}
		}
	}
}

/* Scalings of the angles beyond a frequency scale. */
enum rope_extra { ROPE_PLAIN, ROPE_FREQ_FACTORS, ROPE_YARN, ROPE_EXTRA_COUNT };

static void rope_case(ref_rng *rng, const rope_config *rc, int64_t nt, float base, float freq_scale,
		      enum rope_extra extra, bool in_place)
{
	static const char *const extras[] = {"", " freq factors", " yarn"};
	op_case c = {.op = LOOM_OP_ROPE, .ip = {rc->n_rot, rc->style}, .fp = {base, freq_scale}, .in_place = in_place};

	if (extra == ROPE_FREQ_FACTORS) {
		/* Llama 3's factors run from 1 (high frequencies) to 8. */
		c.src[2] = ht(LOOM_DTYPE_F32, rc->n_rot / 2, 1, 1, 1);
		for (int i = 0; i < rc->n_rot / 2; i++)
			ht_f32(&c.src[2])[i] = 1.0f + 7.0f * (float)ref_rng_below(rng, 1000) / 1000.0f;
	} else if (extra == ROPE_YARN) {
		c.fp[2] = 1.0f;  /* ext_factor */
		c.fp[3] = 0.9f;  /* attn_factor */
		c.fp[4] = 32.0f; /* beta_fast */
		c.fp[5] = 1.0f;  /* beta_slow */
		c.ip[2] = 4096;  /* original context */
	}
	c.src[0] = ht(LOOM_DTYPE_F32, rc->head_dim, rc->n_heads, nt, 1);
	c.src[1] = ht(LOOM_DTYPE_I32, nt, 1, 1, 1);
	c.dst = ht(LOOM_DTYPE_F32, rc->head_dim, rc->n_heads, nt, 1);
	fill_normal(rng, ht_f32(&c.src[0]), ht_elements(&c.src[0]), 1.0);
	/* Positions far into a long context, where angle rounding shows. */
	for (int64_t t = 0; t < nt; t++)
		ht_i32(&c.src[1])[t] = t == 0 ? 0 : (int32_t)ref_rng_below(rng, 32768);
	double *ref = malloc(sizeof(double) * ht_elements(&c.dst));
	rope_reference(&c, ref);
	snprintf(c.what, sizeof(c.what), "ROPE %s hd %lld heads %lld rot %d tokens %lld base %g x%g%s%s",
		 rc->style == LOOM_ROPE_NEOX ? "neox" : "normal", (long long)rc->head_dim, (long long)rc->n_heads,
		 rc->n_rot, (long long)nt, base, freq_scale, extras[extra], in_place ? " in place" : "");
	expect_close(&c, ref, TOL_ROPE, TOL_CONTRACT_F32);
	free(ref);
	op_case_free(&c);
}

/* Normal and NEOX, partial rotation, odd head sizes, each plain, with
 * frequency factors and with YaRN; then head sizes 80 and 128 with a
 * prompt's worth of tokens. */
static void group_rope(void)
{
	static const rope_config configs[] = {
		{64, 8, 64, LOOM_ROPE_NORMAL}, {64, 8, 64, LOOM_ROPE_NEOX},   {64, 4, 24, LOOM_ROPE_NEOX},
		{64, 4, 16, LOOM_ROPE_NORMAL}, {32, 2, 32, LOOM_ROPE_NEOX},   {128, 1, 128, LOOM_ROPE_NORMAL},
		{6, 3, 4, LOOM_ROPE_NEOX},     {6, 3, 2, LOOM_ROPE_NORMAL},
	};
	static const rope_config wide[] = {
		{64, 8, 64, LOOM_ROPE_NORMAL}, {64, 8, 64, LOOM_ROPE_NEOX}, {128, 4, 128, LOOM_ROPE_NEOX},
		{64, 4, 24, LOOM_ROPE_NEOX},   {80, 4, 32, LOOM_ROPE_NEOX}, {80, 2, 80, LOOM_ROPE_NORMAL},
	};
	static const float bases[] = {1e4f, 1e6f}, freq_scales[] = {1.0f, 0.25f};
	int idx[5] = {0}, sizes[5] = {N_OF(configs), N_OF(token_counts), 2, 2, ROPE_EXTRA_COUNT};
	ref_rng rng = {8};
	int k = 0;

	do
		rope_case(&rng, &configs[idx[0]], token_counts[idx[1]], bases[idx[2]], freq_scales[idx[3]],
			  (enum rope_extra)idx[4], k++ % 3 == 0);
	while (grid_next(idx, sizes, 5));
	for (size_t ci = 0; ci < N_OF(wide); ci++)
		for (size_t ti = 0; ti < N_OF(counts); ti++)
			for (int extra = 0; extra < ROPE_EXTRA_COUNT; extra++)
				for (int b = 0; b < 2; b++)
					rope_case(&rng, &wide[ci], counts[ti], bases[b], freq_scales[b],
						  (enum rope_extra)extra, k++ % 3 == 0);
}

/* ------------------------------------------------------------------------ */
/* KV_STORE                                                                 */

/* The cache as it was, with nt tokens' rows stored in distinct cells
 * (the last cell first when last_first): f32 as it is, fp16 and Q8_0 with
 * llama.cpp's rounding. */
static void kv_store_case(ref_rng *rng, loom_dtype type, int64_t kv, int64_t nt, bool last_first)
{
	const int64_t n_cells = 100;
	op_case c = {.op = LOOM_OP_KV_STORE};

	c.src[0] = ht(LOOM_DTYPE_F32, kv, nt, 1, 1);
	c.src[1] = ht(LOOM_DTYPE_I32, nt, 1, 1, 1);
	c.dst = random_weights(rng, type, kv, n_cells, 1.0);
	for (int64_t i = 0; i < kv * nt; i++)
		ht_f32(&c.src[0])[i] = type == LOOM_DTYPE_F16 ? awkward_f32(rng) : (float)ref_rng_normal(rng);
	pick_cells(rng, ht_i32(&c.src[1]), nt, n_cells);
	for (int64_t t = 1; last_first && t < nt; t++)
		if (ht_i32(&c.src[1])[t] == n_cells - 1)
			ht_i32(&c.src[1])[t] = ht_i32(&c.src[1])[0];
	if (last_first)
		ht_i32(&c.src[1])[0] = (int32_t)(n_cells - 1);
	htensor want = ht_copy(&c.dst);
	for (int64_t t = 0; t < nt; t++) {
		int64_t cell = ht_i32(&c.src[1])[t];
		if (type == LOOM_DTYPE_Q8_0) {
			ref_quantize_q8_0(ht_f32(&c.src[0]) + t * kv, (uint8_t *)want.data + cell * ht_row_bytes(&want), kv);
			continue;
		}
		for (int64_t e = 0; e < kv; e++) {
			float x = ht_f32(&c.src[0])[t * kv + e];
			if (type == LOOM_DTYPE_F16)
				ht_u16(&want)[cell * kv + e] = ref_f32_to_fp16(x);
			else
				ht_f32(&want)[cell * kv + e] = x;
		}
	}
	snprintf(c.what, sizeof(c.what), "KV_STORE %s kv_dim %lld tokens %lld", dtype_name(type), (long long)kv,
		 (long long)nt);
	on_each_backend(&c, check_bytes, want.data);
	free(want.data);
	op_case_free(&c);
}

/* F32, F16 and Q8_0 caches; rows up to 800; then 160 and 1024-wide rows
 * with a prompt's worth of tokens. */
static void group_kv_store(void)
{
	static const loom_dtype types[] = {LOOM_DTYPE_F32, LOOM_DTYPE_F16, LOOM_DTYPE_Q8_0};
	static const int64_t dims[] = {5, 64, 256, 800}, wide[] = {64, 160, 1024};
	int idx[3] = {0}, sizes[3] = {N_OF(types), N_OF(dims), N_OF(token_counts)};
	ref_rng rng = {9};

	do
		if (dims[idx[1]] % loom_dtype_traits_of(types[idx[0]]).block == 0)
			kv_store_case(&rng, types[idx[0]], dims[idx[1]], token_counts[idx[2]], false);
	while (grid_next(idx, sizes, 3));
	for (int ti = 0; ti < 2; ti++)
		for (size_t di = 0; di < N_OF(wide); di++)
			for (size_t ci = 0; ci < N_OF(counts); ci++)
				kv_store_case(&rng, types[ti], wide[di], counts[ci], true);
}

/* ------------------------------------------------------------------------ */
/* ATTENTION                                                                */

typedef struct attn_shape {
	int64_t head_dim, n_head, n_head_kv, n_tokens, n_kv;
	loom_dtype type;
	int mask; /* 0 none, 1 causal with random holes, 2 finite offsets too, 3 a row all masked,
		   * 4 three sequences whose cells interleave, each token seeing its own */
	float scale; /* q.k's factor; 0: 1 / sqrt(head_dim) */
	float cap;   /* soft-cap; 0: none */
	bool sinks;  /* a sink logit per head */
} attn_shape;

static void fill_mask(ref_rng *rng, const attn_shape *a, float *mask)
{
	if (a->mask == 4) {
		int8_t *owner = malloc((size_t)a->n_kv);
		ck_assert(owner != NULL);
		for (int64_t j = 0; j < a->n_kv; j++)
			owner[j] = (int8_t)ref_rng_below(rng, 3);
		for (int64_t t = 0; t < a->n_tokens; t++)
			for (int64_t j = 0; j < a->n_kv; j++)
				mask[t * a->n_kv + j] = owner[j] == t % 3 && j <= a->n_kv - a->n_tokens + t ? 0.0f : -INFINITY;
		free(owner);
		return;
	}
	for (int64_t t = 0; t < a->n_tokens; t++) {
		for (int64_t j = 0; j < a->n_kv; j++) {
			bool future = j > a->n_kv - a->n_tokens + t;
			bool hole = j > 0 && ref_rng_below(rng, 5) == 0;
			float *m = &mask[t * a->n_kv + j];
			*m = future || hole ? -INFINITY : 0.0f;
			if (a->mask == 2 && *m == 0.0f)
				*m = (float)ref_rng_uniform(rng, -3.0, 0.0);
			if (a->mask == 3 && t == a->n_tokens - 1)
				*m = -INFINITY;
		}
	}
}

/* Documented rounding: 1e-11 for f32 and quantized caches; the query
 * rounded to fp16 can land on the other side of a rounding boundary when
 * f32 inputs differ in the last bit: 1e-7 for F16. The contract: a kernel
 * may round elsewhere (an online softmax rounds p against a running
 * maximum): each fp16 rounding is ~3e-4 relative, ~1e-7 here, and 1e-5 is
 * allowed; 1e-10 for f32. */
static void expect_attention(const op_case *c)
{
	loom_dtype type = c->src[1].dtype;
	bool half = type != LOOM_DTYPE_F32;
	double *ref = malloc(sizeof(double) * ht_elements(&c->dst));

	ck_assert(ref != NULL);
	if (tiers_taking(c) != 0)
		attention_reference(c, ref);
	close_expect e = {.ref = ref,
			  .tol = {type == LOOM_DTYPE_F16 ? 1e-7 : 1e-11, half ? 1e-5 : TOL_CONTRACT_F32},
			  .zero_rows = true};
	on_each_backend(c, check_close, &e);
	free(ref);
}

static void attention_case(ref_rng *rng, const attn_shape *a)
{
	int64_t kv_dim = a->head_dim * a->n_head_kv;
	op_case c = {.op = LOOM_OP_ATTENTION, .ip = {(int32_t)a->n_head, (int32_t)a->n_head_kv},
		     .fp = {a->scale > 0.0f ? a->scale : (float)(1.0 / sqrt((double)a->head_dim)), a->cap}};

	c.src[0] = ht(LOOM_DTYPE_F32, a->head_dim, a->n_head, a->n_tokens, 1);
	fill_normal(rng, ht_f32(&c.src[0]), ht_elements(&c.src[0]), 1.0);
	c.src[1] = random_weights(rng, a->type, kv_dim, a->n_kv, 1.0);
	c.src[2] = random_weights(rng, a->type, kv_dim, a->n_kv, 1.0);
	if (a->mask) {
		c.src[3] = ht(LOOM_DTYPE_F32, a->n_kv, a->n_tokens, 1, 1);
		fill_mask(rng, a, ht_f32(&c.src[3]));
	}
	if (a->sinks) {
		c.src[4] = ht(LOOM_DTYPE_F32, a->n_head, 1, 1, 1);
		fill_normal(rng, ht_f32(&c.src[4]), (size_t)a->n_head, 2.0);
	}
	c.dst = ht(LOOM_DTYPE_F32, a->head_dim * a->n_head, a->n_tokens, 1, 1);
	snprintf(c.what, sizeof(c.what),
		 "ATTENTION %s hd %lld heads %lld/%lld tokens %lld kv %lld mask %d scale %g cap %g sinks %d",
		 dtype_name(a->type), (long long)a->head_dim, (long long)a->n_head, (long long)a->n_head_kv,
		 (long long)a->n_tokens, (long long)a->n_kv, a->mask, c.fp[0], a->cap, a->sinks);
	expect_attention(&c);
	op_case_free(&c);
}

static const loom_dtype cache_types[] = {LOOM_DTYPE_F32, LOOM_DTYPE_F16, LOOM_DTYPE_Q8_0, LOOM_DTYPE_Q4_0};

/* Every cache type, head sizes 20 to 128, GQA, MQA and one kv head per
 * head, a few tokens over short caches, each mask in turn. */
static void group_attention(void)
{
	static const int64_t head_dims[] = {20, 64, 128};
	static const int64_t heads[][2] = {{8, 2}, {4, 1}, {4, 4}};
	static const int64_t tokens[] = {1, 3, 7};
	static const int64_t n_kvs[] = {7, 17, 64};
	int idx[5] = {0}, sizes[5] = {N_OF(cache_types), N_OF(head_dims), N_OF(heads), N_OF(tokens), N_OF(n_kvs)};
	ref_rng rng = {10};
	int k = 0;

	do {
		attn_shape a = {
			.head_dim = head_dims[idx[1]],
			.n_head = heads[idx[2]][0],
			.n_head_kv = heads[idx[2]][1],
			.n_tokens = tokens[idx[3]],
			.n_kv = n_kvs[idx[4]],
			.type = cache_types[idx[0]],
			.mask = k++ % 5,
		};
		/* Quantized caches hold whole blocks of 32 per head. */
		if (ref_block_elems(a.type) > 0 && a.head_dim % ref_block_elems(a.type) != 0)
			continue;
		attention_case(&rng, &a);
	} while (grid_next(idx, sizes, 5));
	/* One key, one token, no mask. */
	attn_shape one = {64, 4, 1, 1, 1, LOOM_DTYPE_F16, 0, 0.0f, 0.0f, false};
	attention_case(&rng, &one);
}

/* The shapes where tiles, blocks of keys and chunks of the cache leave
 * remainders: 1, 7 and 33 queries; 1, 31, 513 and 4,095 cached tokens
 * (4,095 is cut into chunks whose results are merged); 1, 4 and 8 query
 * heads per kv head; masks with holes and several sequences' cells; every
 * cache type. Then F16 and F32 caches at head sizes 64, 80 and 128 with up
 * to 1,000 cells and a prompt's worth of tokens. */
static void group_attention_long(void)
{
	static const int64_t tokens[] = {1, 7, 33};
	static const int64_t n_kvs[] = {1, 31, 513, 4095};
	static const int64_t groups[] = {1, 4, 8};
	int idx[3] = {0}, sizes[3] = {N_OF(tokens), N_OF(n_kvs), N_OF(groups)};
	ref_rng rng = {11};
	int k = 0;

	do {
		attn_shape a = {
			.head_dim = 64,
			.n_head = groups[idx[2]] * (idx[2] == 1 ? 1 : 2),
			.n_head_kv = idx[2] == 1 ? 1 : 2,
			.n_tokens = tokens[idx[0]],
			.n_kv = n_kvs[idx[1]],
			.type = cache_types[k % N_OF(cache_types)],
			.mask = 1 + k % 4,
		};
		if (a.n_tokens > a.n_kv)
			a.n_tokens = a.n_kv;
		k++;
		attention_case(&rng, &a);
	} while (grid_next(idx, sizes, 3));

	static const int64_t head_dims[] = {64, 80, 128}, heads[][2] = {{8, 2}, {8, 1}, {4, 4}};
	static const int64_t wide_kvs[] = {1, 17, 256, 1000};
	k = 0;
	for (int f16 = 0; f16 < 2; f16++)
		for (size_t hi = 0; hi < N_OF(head_dims); hi++)
			for (size_t gi = 0; gi < N_OF(heads); gi++)
				for (size_t ki = 0; ki < N_OF(wide_kvs); ki++)
					for (size_t ti = 0; ti < N_OF(counts); ti++) {
						attn_shape a = {head_dims[hi], heads[gi][0], heads[gi][1], counts[ti],
								wide_kvs[ki], f16 ? LOOM_DTYPE_F16 : LOOM_DTYPE_F32,
								k++ % 4, 0.0f, 0.0f, false};
						attention_case(&rng, &a);
					}
}

/* Soft-capped scores and sinks, apart and together, on every cache type:
 * Gemma 2's cap of 50 at its own scale, where it barely bends, and a cap
 * of 3 on scores of unit scale (spread ~8), where it flattens most of
 * them; sinks of spread 2 against rows of few and many keys, and rows
 * that see nothing (zeros still); short caches and a long one whose
 * chunks are merged. */
static void group_attention_capped(void)
{
	static const struct {
		float scale, cap;
		bool sinks;
	} kinds[] = {{0.0f, 50.0f, false}, {1.0f, 3.0f, false}, {0.0f, 0.0f, true}, {1.0f, 3.0f, true}};
	static const int64_t shapes[][3] = {{1, 1}, {3, 17}, {7, 64}, {1, 4095}, {33, 513}}; /* tokens, kv */
	ref_rng rng = {13};
	int k = 0;

	for (size_t ki = 0; ki < N_OF(kinds); ki++)
		for (size_t ti = 0; ti < N_OF(cache_types); ti++)
			for (size_t si = 0; si < N_OF(shapes); si++) {
				attn_shape a = {64, k % 2 ? 8 : 4, k % 2 ? 2 : 4, shapes[si][0], shapes[si][1],
						cache_types[ti], 1 + k % 4, kinds[ki].scale, kinds[ki].cap,
						kinds[ki].sinks};
				k++;
				attention_case(&rng, &a);
			}
}

/* A batched decode: one token of each of 16 sequences (op_case.h). */
static void group_attention_batched(void)
{
	static const int64_t heads[][2] = {{4, 4}, {8, 2}};
	ref_rng rng = {12};

	for (size_t ti = 0; ti < N_OF(cache_types); ti++) {
		for (size_t hi = 0; hi < N_OF(heads); hi++) {
			op_case c = batched_decode_case(&rng, cache_types[ti], heads[hi][0], heads[hi][1]);
			expect_attention(&c);
			op_case_free(&c);
		}
	}
}

/* ------------------------------------------------------------------------ */
/* TOPK, MOE_WEIGHTS, MATMUL_ID, MOE_SUM: a mixture of experts              */

/* The k largest of each row, largest first, the lower index first among
 * equals: a stable sort by value, descending. */
static void topk_reference(const float *x, int64_t n, int64_t k, int32_t *out)
{
	for (int64_t j = 0; j < k; j++) {
		int64_t best = -1;
		for (int64_t i = 0; i < n; i++) {
			bool taken = false;
			for (int64_t q = 0; q < j; q++)
				taken |= out[q] == i;
			if (!taken && (best < 0 || x[i] > x[best]))
				best = i;
		}
		out[j] = (int32_t)best;
	}
}

/* Values in few levels (ties), or normal ones. */
static void fill_logits(ref_rng *rng, float *x, size_t n, bool ties)
{
	fill_normal(rng, x, n, 2.0);
	for (size_t i = 0; ties && i < n; i++)
		x[i] = (float)ref_rng_below(rng, 4);
}

static void topk_case(ref_rng *rng, int64_t n, int64_t k, int64_t rows, bool ties)
{
	op_case c = {.op = LOOM_OP_TOPK, .ip = {(int32_t)k}};
	c.src[0] = ht(LOOM_DTYPE_F32, n, rows, 1, 1);
	fill_logits(rng, ht_f32(&c.src[0]), (size_t)(n * rows), ties);
	c.dst = ht(LOOM_DTYPE_I32, k, rows, 1, 1);
	htensor want = ht(LOOM_DTYPE_I32, k, rows, 1, 1);
	for (int64_t r = 0; r < rows; r++)
		topk_reference(ht_f32(&c.src[0]) + r * n, n, k, ht_i32(&want) + r * k);
	snprintf(c.what, sizeof(c.what), "TOPK %lld of %lld, %lld rows%s", (long long)k, (long long)n, (long long)rows,
		 ties ? " with ties" : "");
	on_each_backend(&c, check_bytes, want.data);
	free(want.data);
	op_case_free(&c);
}

/* MOE_WEIGHTS in double: the gating, the renormalisation, the scale. */
static void moe_weights_reference(const op_case *c, double *ref)
{
	const htensor *x = &c->src[0], *ids = &c->src[1];
	int64_t n = x->ne[0], k = ids->ne[0];
	for (int64_t r = 0; r < ids->ne[1]; r++) {
		const float *xr = ht_f32(x) + r * n;
		const int32_t *id = ht_i32(ids) + r * k;
		double *w = ref + r * k, max = -INFINITY, sum = 0.0;
		if (c->ip[0] == LOOM_GATING_SIGMOID) {
			for (int64_t j = 0; j < k; j++)
				w[j] = 1.0 / (1.0 + exp(-(double)xr[id[j]]));
		} else {
			bool all = c->ip[0] == LOOM_GATING_SOFTMAX;
			for (int64_t i = 0; i < (all ? n : k); i++)
				max = fmax(max, xr[all ? i : id[i]]);
			for (int64_t i = 0; i < (all ? n : k); i++)
				sum += exp(xr[all ? i : id[i]] - max);
			for (int64_t j = 0; j < k; j++)
				w[j] = exp(xr[id[j]] - max) / sum;
		}
		double total = 0.0;
		for (int64_t j = 0; j < k; j++)
			total += w[j];
		for (int64_t j = 0; j < k; j++)
			w[j] = (c->ip[1] ? w[j] / total : w[j]) * c->fp[0];
	}
}

/* n_expert distinct experts' ids per row, in random order, k of them. */
static void pick_experts(ref_rng *rng, int32_t *ids, int64_t n_expert, int64_t k, int64_t rows)
{
	for (int64_t r = 0; r < rows; r++)
		pick_cells(rng, ids + r * k, k, n_expert);
}

/* Documented rounding: f32 exponentials and sums, ~1e-14 of the weights'
 * energy; the contract 1e-10 (another exp or summation order). */
#define TOL_MOE_WEIGHTS 1e-12

static void moe_weights_case(ref_rng *rng, int gating, bool norm, float scale, int64_t n_expert, int64_t k,
			     int64_t rows)
{
	op_case c = {.op = LOOM_OP_MOE_WEIGHTS, .ip = {gating, norm}, .fp = {scale}};
	c.src[0] = ht(LOOM_DTYPE_F32, n_expert, rows, 1, 1);
	fill_normal(rng, ht_f32(&c.src[0]), (size_t)(n_expert * rows), 3.0);
	c.src[1] = ht(LOOM_DTYPE_I32, k, rows, 1, 1);
	pick_experts(rng, ht_i32(&c.src[1]), n_expert, k, rows);
	c.dst = ht(LOOM_DTYPE_F32, k, rows, 1, 1);
	double *ref = malloc(sizeof(double) * (size_t)(k * rows));
	ck_assert_ptr_nonnull(ref);
	moe_weights_reference(&c, ref);
	snprintf(c.what, sizeof(c.what), "MOE_WEIGHTS gating %d norm %d scale %g, %lld of %lld, %lld rows", gating, norm,
		 scale, (long long)k, (long long)n_expert, (long long)rows);
	expect_close(&c, ref, TOL_MOE_WEIGHTS, TOL_CONTRACT_F32);
	free(ref);
	op_case_free(&c);
}

/* per_slot: activations of one row per (token, slot), else one per token.
 * crowd: every token's first choice is expert 0, so that one expert
 * meets every token at once (a prefill's tiles). */
static void matmul_id_case(ref_rng *rng, loom_dtype type, int64_t n, int64_t n_out, int64_t n_expert, int64_t k,
			   int64_t n_tok, bool per_slot, bool crowd, bool repack, bool bias)
{
	op_case c = {.op = LOOM_OP_MATMUL_ID, .repack = repack};
	if (bias) {
		c.src[3] = ht(LOOM_DTYPE_F32, n_out, n_expert, 1, 1);
		fill_normal(rng, ht_f32(&c.src[3]), (size_t)(n_out * n_expert), 1.0);
	}
	c.src[0] = random_weights(rng, type, n, n_out * n_expert, 1.0 / sqrt((double)n));
	c.src[0].ne[1] = n_out;
	c.src[0].ne[2] = n_expert;
	c.src[1] = ht(LOOM_DTYPE_F32, n, per_slot ? k : 1, n_tok, 1);
	fill_normal(rng, ht_f32(&c.src[1]), ht_elements(&c.src[1]), 2.0);
	c.src[2] = ht(LOOM_DTYPE_I32, k, n_tok, 1, 1);
	pick_experts(rng, ht_i32(&c.src[2]), n_expert, k, n_tok);
	for (int64_t t = 0; crowd && t < n_tok; t++)
		for (int64_t j = 0; j < k; j++)
			if (ht_i32(&c.src[2])[t * k + j] == 0)
				ht_i32(&c.src[2])[t * k + j] = ht_i32(&c.src[2])[t * k];
	for (int64_t t = 0; crowd && t < n_tok; t++)
		ht_i32(&c.src[2])[t * k] = 0;
	c.dst = ht(LOOM_DTYPE_F32, n_out, k, n_tok, 1);
	size_t count = ht_elements(&c.dst);
	double *ref = malloc(count * sizeof(double)), *mag = malloc(count * sizeof(double));
	double *energy = malloc(count * sizeof(double));
	ck_assert(ref != NULL && mag != NULL && energy != NULL);
	matmul_id_reference(&c, ref, mag, energy);
	for (size_t i = 0; i < count; i++)
		mag[i] *= mag[i];
	snprintf(c.what, sizeof(c.what), "MATMUL_ID %s [%lld x %lld] x %lld experts, %lld of them for %lld tokens%s%s%s%s",
		 dtype_name(type), (long long)n, (long long)n_out, (long long)n_expert, (long long)k, (long long)n_tok,
		 per_slot ? ", a row per slot" : "", crowd ? ", expert 0 for all" : "", repack ? ", repacked" : "",
		 bias ? ", biased" : "");
	close_expect e = {.ref = ref, .norm2 = {mag, energy}, .tol = {TOL_MATMUL, matmul_contract_tol(type)}};
	on_each_backend(&c, check_close, &e);
	free(ref);
	free(mag);
	free(energy);
	op_case_free(&c);
}

/* f32 products summed in slot order against the double sum: ~1e-15. */
#define TOL_MOE_SUM 1e-13

static void moe_sum_case(ref_rng *rng, int64_t n, int64_t k, int64_t n_tok)
{
	op_case c = {.op = LOOM_OP_MOE_SUM};
	c.src[0] = ht(LOOM_DTYPE_F32, n, k, n_tok, 1);
	fill_normal(rng, ht_f32(&c.src[0]), ht_elements(&c.src[0]), 1.0);
	c.src[1] = ht(LOOM_DTYPE_F32, k, n_tok, 1, 1);
	fill_normal(rng, ht_f32(&c.src[1]), (size_t)(k * n_tok), 0.5);
	c.dst = ht(LOOM_DTYPE_F32, n, n_tok, 1, 1);
	double *ref = calloc((size_t)(n * n_tok), sizeof(double));
	ck_assert_ptr_nonnull(ref);
	for (int64_t t = 0; t < n_tok; t++)
		for (int64_t j = 0; j < k; j++)
			for (int64_t i = 0; i < n; i++)
				ref[t * n + i] += (double)ht_f32(&c.src[1])[t * k + j] * ht_f32(&c.src[0])[(t * k + j) * n + i];
	snprintf(c.what, sizeof(c.what), "MOE_SUM %lld x %lld slots, %lld tokens", (long long)n, (long long)k,
		 (long long)n_tok);
	expect_close(&c, ref, TOL_MOE_SUM, TOL_CONTRACT_F32);
	free(ref);
	op_case_free(&c);
}

/* Routing: TOPK of 1, 2 and 8 out of 8 to 128 (with and without ties),
 * MOE_WEIGHTS of each gating with and without renormalising and a scale;
 * rows of 300 besides, longer than a GPU block's threads; MATMUL_ID of
 * every weight type, tokens routed at random or crowding one expert,
 * activations shared by a token's slots or one per slot; MOE_SUM. */
static void group_moe(void)
{
	ref_rng rng = {14};
	static const int64_t ns[] = {8, 60, 128}, ks[] = {1, 2, 8}, rows[] = {1, 7, 33};

	for (size_t ni = 0; ni < N_OF(ns); ni++)
		for (size_t ki = 0; ki < N_OF(ks); ki++)
			for (size_t ri = 0; ri < N_OF(rows); ri++)
				for (int ties = 0; ties < 2; ties++)
					topk_case(&rng, ns[ni], ks[ki], rows[ri], ties);
	for (int ties = 0; ties < 2; ties++)
		topk_case(&rng, 300, 8, 3, ties);
	for (int gating = 0; gating < 3; gating++)
		for (int norm = 0; norm < 2; norm++) {
			for (size_t ki = 0; ki < N_OF(ks); ki++) {
				moe_weights_case(&rng, gating, norm, 1.0f, 64, ks[ki], 9);
				moe_weights_case(&rng, gating, norm, 2.5f, 8, ks[ki], 1);
			}
			moe_weights_case(&rng, gating, norm, 1.0f, 300, 8, 3);
		}
	for (size_t ti = 0; ti < N_OF(weight_types); ti++) {
		loom_dtype type = weight_types[ti];
		int64_t block = loom_dtype_traits_of(type).block, n = block == 1 ? 96 : 256;
		matmul_id_case(&rng, type, n, 33, 8, 2, 1, false, false, false, false);
		matmul_id_case(&rng, type, n, 16, 8, 2, 5, true, false, false, false);
		matmul_id_case(&rng, type, n, 33, 8, 4, 40, false, true, false, true);
		matmul_id_case(&rng, type, n, 5, 16, 8, 9, true, false, false, false);
		/* Offered to weight_repack first (experts of whole 16-row groups),
		 * as the core offers them at load; with biases (gpt-oss). */
		matmul_id_case(&rng, type, n, 32, 8, 2, 1, false, false, true, true);
		matmul_id_case(&rng, type, n, 48, 8, 4, 40, false, true, true, false);
		/* A decode's token over many experts, whose even shares end
		 * within an expert: its one row shared by the 8 slots (a gate
		 * or up projection), or a row per slot (a down projection). */
		matmul_id_case(&rng, type, n, 64, 16, 8, 1, false, false, true, false);
		matmul_id_case(&rng, type, n, 48, 16, 8, 1, true, false, true, true);
		matmul_id_case(&rng, type, n, 40, 16, 8, 1, false, false, false, false);
		/* The sizes a GPU's kernels split: rows of several staging steps
		 * ending in a short one, outputs over two tiles of 64, a crowded
		 * expert's pairs over two and four tiles of 64, a prefill's
		 * pairs over many grouping rounds. */
		int64_t wide = block == 1 ? 100 : block == 32 ? 288 : 512;
		matmul_id_case(&rng, type, wide, 80, 8, 4, 70, false, true, false, true);
		matmul_id_case(&rng, type, wide, 72, 16, 4, 200, true, true, false, false);
	}
	for (size_t ki = 0; ki < N_OF(ks); ki++) {
		moe_sum_case(&rng, 64, ks[ki], 1);
		moe_sum_case(&rng, 100, ks[ki], 9);
	}
}

/* ------------------------------------------------------------------------ */
/* The tests                                                                */

/* One tcase per group, so that Check's CK_RUN_CASE picks one by name. */
/* ------------------------------------------------------------------------ */
/* Runs of nodes                                                            */

/* The case run on each of loom's backends that takes it, as one graph and
 * a node at a time: every tensor the same bytes after, as a backend that
 * enqueues the run as one kernel (cuda's fused runs), or writes a
 * product's Q8_1 activations in the node before it, promises. Tensor mask
 * (-1: none) is a mask row seeing every cell but the last; the others
 * random. The nodes' own results are the other groups' to check. */
static void graph_alike_masked(graph_case *g, ref_rng *rng, int mask)
{
	for (int t = 0; t < g->n_tensors; t++) {
		htensor *h = &g->tensors[t].h;
		if (g->tensors[t].view_of >= 0 || h->dtype == LOOM_DTYPE_I32)
			continue;
		if (t == mask) {
			for (size_t i = 0; i < ht_elements(h); i++)
				ht_f32(h)[i] = i + 1 < ht_elements(h) ? 0.0f : -INFINITY;
			continue;
		}
		if (h->dtype == LOOM_DTYPE_F32)
			fill_normal(rng, ht_f32(h), ht_elements(h), 1.0);
		else {
			htensor w = random_weights(rng, h->dtype, h->ne[0], ht_rows(h), 1.0);
			memcpy(h->data, w.data, ht_bytes(h));
			free(w.data);
		}
	}
	open_backends(false);
	for (int i = 0; i < n_listed; i++) {
		backend_state *s = &backends[i];
		if (!s->usable || !s->in_tree)
			continue;
		if (!graph_supported(&s->b, s->b.be[0], g)) {
			s->refused++;
			continue;
		}
		s->run++;
		void *whole[GRAPH_MAX_TENSORS], *alone[GRAPH_MAX_TENSORS];
		graph_run(&s->b, s->b.be[0], g, true, whole);
		graph_run(&s->b, s->b.be[0], g, false, alone);
		for (int t = 0; t < g->n_tensors; t++) {
			if (whole[t] == NULL)
				continue;
			ck_assert_msg(memcmp(whole[t], alone[t], ht_bytes(&g->tensors[t].h)) == 0,
				      "%s on %s: tensor %d differs run whole and a node at a time", g->what, s->b.name,
				      t);
			free(whole[t]);
			free(alone[t]);
		}
	}
	graph_case_free(g);
}

static void graph_alike(graph_case *g, ref_rng *rng)
{
	graph_alike_masked(g, rng, -1);
}

/* x += proj; xb = rms_norm(x) * w over rows of n (then, with a product of
 * weights of type, y = W xb). */
static void add_norm_graph(ref_rng *rng, int64_t n, int64_t rows, loom_dtype type)
{
	graph_case g = {0};
	int x = graph_tensor_add(&g, LOOM_DTYPE_F32, n, rows, 1, -1);
	int proj = graph_tensor_add(&g, LOOM_DTYPE_F32, n, rows, 1, -1);
	int xb = graph_tensor_add(&g, LOOM_DTYPE_F32, n, rows, 1, -1);
	int w = graph_tensor_add(&g, LOOM_DTYPE_F32, n, 1, 1, -1);
	graph_node_add(&g, LOOM_OP_ADD, x, x, proj, -1, -1);
	graph_node_add(&g, LOOM_OP_RMS_NORM, xb, x, w, -1, -1)->fp[0] = 1e-5f;
	if (type != LOOM_DTYPE_F32) {
		int weights = graph_tensor_add(&g, type, n, 48, 1, -1);
		int y = graph_tensor_add(&g, LOOM_DTYPE_F32, 48, rows, 1, -1);
		graph_node_add(&g, LOOM_OP_MATMUL, y, weights, xb, -1, -1);
	}
	snprintf(g.what, sizeof(g.what), "ADD, RMS_NORM%s%s: %lld rows of %lld", type != LOOM_DTYPE_F32 ? ", MATMUL " : "",
		 type != LOOM_DTYPE_F32 ? dtype_name(type) : "", (long long)rows, (long long)n);
	graph_alike(&g, rng);
}

/* A layer's attention prologue over nt tokens: q (n_head heads) and k
 * (n_head_kv, rotated as heads over k's rows) by RoPE of style in place,
 * then k and v stored in distinct cells of caches of type; without
 * rotate, the stores alone. */
static void prologue_graph(ref_rng *rng, int64_t head_dim, int64_t n_head, int64_t n_head_kv, int n_rot, int style,
			   int64_t nt, loom_dtype type, bool rotate)
{
	const int64_t kv = head_dim * n_head_kv, n_cells = 100;
	graph_case g = {0};
	int q = graph_tensor_add(&g, LOOM_DTYPE_F32, head_dim, n_head, nt, -1);
	int k = graph_tensor_add(&g, LOOM_DTYPE_F32, kv, nt, 1, -1);
	int k_heads = graph_tensor_add(&g, LOOM_DTYPE_F32, head_dim, n_head_kv, nt, k);
	int v = graph_tensor_add(&g, LOOM_DTYPE_F32, kv, nt, 1, -1);
	int pos = graph_tensor_add(&g, LOOM_DTYPE_I32, nt, 1, 1, -1);
	int cells = graph_tensor_add(&g, LOOM_DTYPE_I32, nt, 1, 1, -1);
	int k_cache = graph_tensor_add(&g, type, kv, n_cells, 1, -1);
	int v_cache = graph_tensor_add(&g, type, kv, n_cells, 1, -1);
	for (int64_t t = 0; t < nt; t++)
		ht_i32(&g.tensors[pos].h)[t] = (int32_t)(7 * t + 3);
	pick_cells(rng, ht_i32(&g.tensors[cells].h), nt, n_cells);
	if (rotate) {
		int ropes[2][2] = {{q, q}, {k_heads, k_heads}};
		for (int r = 0; r < 2; r++) {
			graph_node *n = graph_node_add(&g, LOOM_OP_ROPE, ropes[r][0], ropes[r][1], pos, -1, -1);
			n->ip[0] = n_rot;
			n->ip[1] = style;
			n->fp[0] = 10000.0f;
			n->fp[1] = 1.0f;
		}
	}
	graph_node_add(&g, LOOM_OP_KV_STORE, k_cache, k, cells, -1, -1);
	graph_node_add(&g, LOOM_OP_KV_STORE, v_cache, v, cells, -1, -1);
	snprintf(g.what, sizeof(g.what), "%sKV_STORE k, v (%s): %lld tokens, %lld/%lld heads of %lld, n_rot %d",
		 rotate ? "ROPE q, k, " : "", dtype_name(type), (long long)nt, (long long)n_head, (long long)n_head_kv,
		 (long long)head_dim, n_rot);
	graph_alike(&g, rng);
}

/* One token's products of one input with matrices of type, of n_outs
 * rows each (n of them). */
static void products_graph(ref_rng *rng, loom_dtype type, int64_t n_in, const int64_t *n_outs, int n)
{
	graph_case g = {0};
	int x = graph_tensor_add(&g, LOOM_DTYPE_F32, n_in, 1, 1, -1);
	for (int m = 0; m < n; m++) {
		int w = graph_tensor_add(&g, type, n_in, n_outs[m], 1, -1);
		int y = graph_tensor_add(&g, LOOM_DTYPE_F32, n_outs[m], 1, 1, -1);
		graph_node_add(&g, LOOM_OP_MATMUL, y, w, x, -1, -1);
	}
	snprintf(g.what, sizeof(g.what), "%d MATMULs %s of one token of %lld", n, dtype_name(type), (long long)n_in);
	graph_alike(&g, rng);
}

/* A decode's attention (n_head heads of 64 over n_kv cells of a cache of
 * type, a causal mask) and the product of its result with weights of
 * wtype: the attention may write the product's Q8_1 rows itself. */
static void attention_product_graph(ref_rng *rng, int64_t n_head, int64_t n_kv, loom_dtype type, loom_dtype wtype)
{
	const int64_t hd = 64, n_head_kv = 2, q_dim = hd * n_head;
	graph_case g = {0};
	int q = graph_tensor_add(&g, LOOM_DTYPE_F32, hd, n_head, 1, -1);
	int k = graph_tensor_add(&g, type, hd * n_head_kv, n_kv, 1, -1);
	int v = graph_tensor_add(&g, type, hd * n_head_kv, n_kv, 1, -1);
	int mask = graph_tensor_add(&g, LOOM_DTYPE_F32, n_kv, 1, 1, -1);
	int attn = graph_tensor_add(&g, LOOM_DTYPE_F32, q_dim, 1, 1, -1);
	int w = graph_tensor_add(&g, wtype, q_dim, 96, 1, -1);
	int y = graph_tensor_add(&g, LOOM_DTYPE_F32, 96, 1, 1, -1);
	graph_node *a = graph_node_add(&g, LOOM_OP_ATTENTION, attn, q, k, v, mask);
	a->ip[0] = (int32_t)n_head;
	a->ip[1] = (int32_t)n_head_kv;
	a->fp[0] = 0.125f;
	graph_node_add(&g, LOOM_OP_MATMUL, y, w, attn, -1, -1);
	snprintf(g.what, sizeof(g.what), "ATTENTION (%s, %lld heads over %lld cells), MATMUL %s", dtype_name(type),
		 (long long)n_head, (long long)n_kv, dtype_name(wtype));
	/* Every cell seen but the last, which is masked. */
	graph_alike_masked(&g, rng, mask);
}

static void group_runs(void)
{
	ref_rng rng = {17};
	for (size_t i = 0; i < N_OF(counts); i++) {
		add_norm_graph(&rng, 256, counts[i], LOOM_DTYPE_F32);
		add_norm_graph(&rng, 4096, counts[i], LOOM_DTYPE_Q4_K);
	}
	add_norm_graph(&rng, 96, 3, LOOM_DTYPE_Q8_0);
	static const loom_dtype caches[] = {LOOM_DTYPE_F16, LOOM_DTYPE_F32};
	for (int c = 0; c < 2; c++)
		for (size_t i = 0; i < N_OF(token_counts); i++) {
			prologue_graph(&rng, 64, 8, 2, 64, LOOM_ROPE_NEOX, token_counts[i], caches[c], true);
			prologue_graph(&rng, 128, 4, 4, 32, LOOM_ROPE_NORMAL, token_counts[i], caches[c], true);
			prologue_graph(&rng, 64, 4, 2, 64, LOOM_ROPE_NEOX, token_counts[i], caches[c], false);
		}
	for (int c = 0; c < 2; c++) {
		attention_product_graph(&rng, 8, 40, caches[c], LOOM_DTYPE_Q4_K);
		attention_product_graph(&rng, 4, 300, caches[c], LOOM_DTYPE_Q8_0);
	}
	static const int64_t qkv[] = {512, 128, 128}, gate_up[] = {96, 96};
	for (size_t i = 0; i < N_OF(weight_types); i++) {
		if (loom_dtype_traits_of(weight_types[i]).block <= 1)
			continue;
		products_graph(&rng, weight_types[i], 512, qkv, 3);
		products_graph(&rng, weight_types[i], 256, gate_up, 2);
	}
}

typedef struct group {
	const char *tcase, *name;
	void (*run)(void);
} group;

static const group groups[] = {
	{"get_rows", "GET_ROWS", group_get_rows},
	{"convert", "CONVERT", group_convert},
	{"norms", "RMS_NORM, LAYER_NORM", group_norms},
	{"matmul_ties", "MATMUL ties", group_matmul_ties},
	{"elementwise", "ADD, MUL, SCALE, SWIGLU, GELU", group_elementwise},
	{"softcap", "SOFTCAP", group_softcap},
	{"sigmoid", "SIGMOID, SWIGLU_OAI", group_sigmoid},
	{"rope", "ROPE", group_rope},
	{"kv_store", "KV_STORE", group_kv_store},
	{"attention", "ATTENTION", group_attention},
	{"attention_long", "ATTENTION long", group_attention_long},
	{"attention_batched", "ATTENTION batched decode", group_attention_batched},
	{"attention_capped", "ATTENTION soft-capped, with sinks", group_attention_capped},
	{"moe", "TOPK, MOE_WEIGHTS, MATMUL_ID, MOE_SUM", group_moe},
	{"runs", "runs of nodes, whole and a node at a time", group_runs},
};

START_TEST(op_group)
{
	open_backends(_i == 0);
	groups[_i].run();
	report(groups[_i].name);
}
END_TEST

/* MATMUL of one weight type per test. */
START_TEST(matmul_of_type)
{
	char name[64];

	open_backends(false);
	group_matmul(weight_types[_i]);
	snprintf(name, sizeof(name), "MATMUL %s", dtype_name(weight_types[_i]));
	report(name);
}
END_TEST

static Suite *backend_ops_suite(void)
{
	Suite *s = suite_create("backend_ops");
	TCase *tc;
	for (int i = 0; i < (int)N_OF(groups); i++) {
		tc = tcase_create(groups[i].tcase);
		tcase_set_timeout(tc, 600);
		tcase_add_loop_test(tc, op_group, i, i + 1);
		suite_add_tcase(s, tc);
	}
	tc = tcase_create("matmul");
	tcase_set_timeout(tc, 600);
	tcase_add_loop_test(tc, matmul_of_type, 0, (int)N_OF(weight_types));
	suite_add_tcase(s, tc);
	return s;
}

/* ------------------------------------------------------------------------ */
/* The list of backends                                                     */

static listed_backend *add_listed(const char *path)
{
	if (n_listed == MAX_BACKENDS) {
		fprintf(stderr, "test_backend_ops: more than %d backends\n", MAX_BACKENDS);
		exit(EXIT_FAILURE);
	}
	listed_backend *l = &listed[n_listed++];
	snprintf(l->path, sizeof(l->path), "%s", path);
	return l;
}

/* The backends of the build's plugins.yaml, in its search path, with
 * their options, and the example plugin. */
static void list_build_backends(void)
{
	loom_config cfg;

	if (loom_config_load(LOOM_TEST_BUILD_DIR "/plugins.yaml", &cfg) != LOOM_OK) {
		fprintf(stderr, "test_backend_ops: %s\n", loom_last_error());
		exit(EXIT_FAILURE);
	}
	for (int i = 0; i < cfg.n_backends; i++) {
		const loom_plugin_config *p = &cfg.backends[i];
		char path[4096];
		snprintf(path, sizeof(path), "%s/%s", LOOM_TEST_PLUGIN_DIR, p->file);
		listed_backend *l = add_listed(path);
		snprintf(l->listed_as, sizeof(l->listed_as), "%s", p->name);
		l->optional = p->optional;
		l->in_tree = true;
		for (int k = 0; k < p->n_options && k < MAX_OPTIONS; k++) {
			snprintf(l->keys[k], sizeof(l->keys[k]), "%s", p->option_keys[k]);
			snprintf(l->values[k], sizeof(l->values[k]), "%s", p->option_values[k]);
			l->n_options++;
		}
	}
	loom_config_free(&cfg);
	listed_backend *example = add_listed(LOOM_TEST_EXAMPLE_PLUGIN);
	snprintf(example->listed_as, sizeof(example->listed_as), "example-f32");
}

/* Keeps only the listed backend called name. */
static void keep_only(const char *name)
{
	int kept = 0;
	for (int i = 0; i < n_listed; i++)
		if (strcmp(listed[i].listed_as, name) == 0)
			listed[kept++] = listed[i];
	if (kept == 0) {
		fprintf(stderr, "test_backend_ops: the build lists no backend '%s'\n", name);
		exit(EXIT_FAILURE);
	}
	n_listed = kept;
}

int main(int argc, char **argv)
{
	if (argc == 3 && strcmp(argv[1], "--only") == 0) {
		list_build_backends();
		keep_only(argv[2]);
	} else if (argc > 1) {
		for (int i = 1; i < argc; i++) {
			listed_backend *l = add_listed(argv[i]);
			snprintf(l->listed_as, sizeof(l->listed_as), "%s", argv[i]);
		}
	} else {
		list_build_backends();
	}
	SRunner *runner = srunner_create(backend_ops_suite());
	srunner_run_all(runner, CK_NORMAL);
	int failed = srunner_ntests_failed(runner);
	srunner_free(runner);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
