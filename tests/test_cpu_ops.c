/*
 * test_cpu_ops.c - the CPU backend plugins (generic, avx2, avx512), op by op.
 *
 * Every op x dtype x variant runs on random inputs of awkward shapes and is
 * compared with (a) a double-precision reference written here that models
 * the documented rounding (cpu_ref.h) and (b) cpu-generic's result, by
 * normalized MSE with a per-op tolerance, or bit for bit where the op is
 * exact. Each case runs twice: with 1 thread on packed rows and with 2
 * threads on rows padded with sentinel bytes; the two must agree bit for
 * bit, and no sentinel (padding or past the end of a buffer) may change.
 * A variant whose probe refuses this CPU is skipped with a SKIP line.
 */
#include "check_main.h"
#include "cpu_ref.h"
#include "fixture.h"
#include "plugin_host.h"

#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define N_OF(a) (sizeof(a) / sizeof((a)[0]))

/* ------------------------------------------------------------------------ */
/* Variants                                                                 */

enum { V_GENERIC, V_AVX2, V_AVX512, V_AMX, N_VARIANTS };

typedef struct variant {
	const char *file;
	const char *name;
	int score_when_usable;
	bool loaded;
	const loom_plugin_desc *desc;
	const loom_backend_vtable *vt;
	int score;
	char why[256];
	void *be[2]; /* 1 thread, 2 threads */
} variant;

static variant variants[N_VARIANTS] = {
	{.file = "loom-cpu-generic.so", .name = "cpu-generic", .score_when_usable = 10},
	{.file = "loom-cpu-avx2.so", .name = "cpu-avx2", .score_when_usable = 20},
	{.file = "loom-cpu-avx512.so", .name = "cpu-avx512", .score_when_usable = 30},
	{.file = "loom-cpu-amx.so", .name = "cpu-amx", .score_when_usable = 40},
};

static void *new_backend(variant *v, int n_threads)
{
	loom_backend_options o = {.struct_size = sizeof(o), .n_threads = n_threads};
	void *be = v->vt->init(test_host(), &o);
	ck_assert_msg(be != NULL, "%s: init(%d threads) failed: %s", v->name, n_threads,
		      test_plugin_error());
	return be;
}

/* Loads and probes a variant once per test process (Check forks per test). */
static variant *load_variant(int i)
{
	variant *v = &variants[i];
	loom_probe_args args = {.struct_size = sizeof(args), .host = test_host()};

	if (v->loaded)
		return v;
	v->desc = test_load_plugin(v->file);
	v->vt = v->desc->vtable;
	v->score = v->desc->probe(&args, v->why, sizeof(v->why));
	if (v->score > 0) {
		v->be[0] = new_backend(v, 1);
		v->be[1] = new_backend(v, 2);
	}
	v->loaded = true;
	return v;
}

/* The variant, or NULL after a SKIP line if this CPU cannot run it. */
static variant *usable_variant(int i, const char *test)
{
	variant *v = load_variant(i);
	if (v->score > 0)
		return v;
	printf("SKIP %s on %s: %s\n", test, v->name, v->why);
	return NULL;
}

/* ------------------------------------------------------------------------ */
/* Host-side tensors and test cases                                         */

typedef struct htensor {
	loom_dtype dtype;
	int64_t ne[LOOM_MAX_DIMS]; /* all zero: absent */
	void *data;                /* packed rows */
} htensor;

static size_t row_bytes(const htensor *t)
{
	return loom_dtype_row_bytes(t->dtype, t->ne[0]);
}

static int64_t nrows(const htensor *t)
{
	return t->ne[1] * t->ne[2] * t->ne[3];
}

static size_t packed_bytes(const htensor *t)
{
	return row_bytes(t) * (size_t)nrows(t);
}

static size_t n_elements(const htensor *t)
{
	return (size_t)(t->ne[0] * nrows(t));
}

static bool present(const htensor *t)
{
	return t->ne[0] != 0;
}

/* A zeroed tensor of the given dtype and shape. */
static htensor ht(loom_dtype type, int64_t ne0, int64_t ne1, int64_t ne2, int64_t ne3)
{
	htensor t = {.dtype = type, .ne = {ne0, ne1, ne2, ne3}};
	t.data = calloc(1, packed_bytes(&t) > 0 ? packed_bytes(&t) : 1);
	ck_assert(t.data != NULL);
	return t;
}

static float *f32(const htensor *t)
{
	return t->data;
}

static int32_t *i32(const htensor *t)
{
	return t->data;
}

static uint16_t *u16(const htensor *t)
{
	return t->data;
}

typedef struct op_case {
	char what[160]; /* names the case in failure messages */
	loom_op op;
	htensor src[LOOM_NODE_MAX_SRC];
	htensor dst; /* dtype and shape; data = initial contents */
	int32_t ip[LOOM_NODE_MAX_PARAMS];
	float fp[LOOM_NODE_MAX_PARAMS];
	bool in_place; /* dst is src[0]'s memory */
	bool repack;   /* src[0] goes through weight_repack first */
} op_case;

/* The layout weight_repack gave the last case that asked for it (0: kept). */
static uint32_t last_repack_layout;

static void case_free(op_case *c)
{
	for (int i = 0; i < LOOM_NODE_MAX_SRC; i++)
		free(c->src[i].data);
	free(c->dst.data);
}

/* ------------------------------------------------------------------------ */
/* Running a case on a backend                                              */

#define SENTINEL 0xa5
#define SENTINEL_BYTES 64
/* Row padding in the 2-thread run: keeps f32 alignment, breaks vector
 * alignment, and leaves sentinel bytes between rows. */
#define ROW_PAD 12

typedef struct dtensor {
	loom_buffer buf;
	loom_tensor t;
	size_t stride;
} dtensor;

/* Copies a host tensor into a new buffer with rows `pad` bytes apart and
 * sentinel bytes in the padding and after the end. */
static void place(variant *v, void *be, const htensor *h, size_t pad, dtensor *d)
{
	size_t rb = row_bytes(h), total;
	loom_dtype_layout l = loom_dtype_layout_of(h->dtype);
	unsigned char *image;

	d->stride = rb + pad;
	total = d->stride * (size_t)nrows(h) + SENTINEL_BYTES;
	image = malloc(total);
	ck_assert(image != NULL);
	memset(image, SENTINEL, total);
	for (int64_t r = 0; r < nrows(h); r++)
		memcpy(image + r * d->stride, (const char *)h->data + r * rb, rb);
	ck_assert_msg(v->vt->buffer_alloc(be, total, &d->buf) == LOOM_OK, "%s: buffer_alloc", v->name);
	ck_assert(v->vt->buffer_upload(be, &d->buf, 0, image, total) == LOOM_OK);
	free(image);
	d->t = (loom_tensor){
		.dtype = h->dtype,
		.ne = {h->ne[0], h->ne[1], h->ne[2], h->ne[3]},
		.nb = {l.block_bytes, d->stride, d->stride * h->ne[1], d->stride * h->ne[1] * h->ne[2]},
		.data = d->buf.base,
	};
}

/* The first byte in [lo, hi) that is not SENTINEL, else none. */
static size_t first_not_sentinel(const unsigned char *image, size_t lo, size_t hi, size_t none)
{
	for (size_t i = lo; i < hi; i++)
		if (image[i] != SENTINEL)
			return i;
	return none;
}

/* Reads the rows back into packed host memory and checks every sentinel. */
static void fetch(variant *v, void *be, const dtensor *d, const htensor *h, void *out,
		  const char *what)
{
	size_t rb = row_bytes(h), total = d->buf.size;
	unsigned char *image = malloc(total);

	ck_assert(image != NULL);
	ck_assert(v->vt->buffer_download(be, &d->buf, 0, image, total) == LOOM_OK);
	/* Assertions are costly in Check's fork mode: find, then assert once.
	 * Only the bytes around the rows are looked at: each row's padding,
	 * then the guard past the last. */
	size_t bad = total, rows_end = d->stride * (size_t)nrows(h);
	for (int64_t r = 0; r < nrows(h) && bad == total; r++)
		bad = first_not_sentinel(image, (size_t)r * d->stride + rb, (size_t)(r + 1) * d->stride, total);
	if (bad == total)
		bad = first_not_sentinel(image, rows_end, total, total);
	ck_assert_msg(bad == total, "%s on %s: sentinel byte %zu of a %zu-byte buffer overwritten",
		      what, v->name, bad, total);
	if (out != NULL)
		for (int64_t r = 0; r < nrows(h); r++)
			memcpy((char *)out + r * rb, image + r * d->stride, rb);
	free(image);
}

/* Runs the case as a one-node graph with thread setting k (0: 1 thread,
 * 1: 2 threads) and rows padded by pad; the dst contents land in out. */
static void run_case(variant *v, int k, const op_case *c, size_t pad, void *out)
{
	void *be = v->be[k];
	dtensor src[LOOM_NODE_MAX_SRC] = {0}, dst = {0};
	loom_node node = {.op = c->op};
	loom_graph graph = {.n_nodes = 1, .nodes = &node};
	loom_status st;

	for (int i = 0; i < LOOM_NODE_MAX_SRC; i++) {
		if (!present(&c->src[i]))
			continue;
		place(v, be, &c->src[i], pad, &src[i]);
		node.src[i] = &src[i].t;
	}
	if (c->in_place) {
		node.dst = &src[0].t;
	} else {
		place(v, be, &c->dst, pad, &dst);
		node.dst = &dst.t;
	}
	memcpy(node.ip, c->ip, sizeof(node.ip));
	memcpy(node.fp, c->fp, sizeof(node.fp));
	loom_buffer packed = {0};
	loom_tensor repacked;
	if (c->repack) {
		uint32_t layout = 0;
		st = v->vt->weight_repack(be, &src[0].t, &packed, &layout);
		ck_assert_msg(st == LOOM_OK || st == LOOM_ERR_UNSUPPORTED, "%s on %s: weight_repack: %d", c->what,
			      v->name, st);
		last_repack_layout = st == LOOM_OK ? layout : 0;
		if (st == LOOM_OK) {
			ck_assert_msg(layout != 0, "%s on %s: repacked into layout 0", c->what, v->name);
			repacked = src[0].t;
			repacked.data = packed.base;
			repacked.layout = layout;
			node.src[0] = &repacked;
		}
	}
	ck_assert_msg(v->vt->supports(be, &node), "%s on %s: supports() refused it", c->what, v->name);
	test_clear_error();
	st = v->vt->compute(be, &graph);
	if (packed.base != NULL)
		v->vt->buffer_free(be, &packed);
	ck_assert_msg(st == LOOM_OK, "%s on %s: compute failed (%d): %s", c->what, v->name, st,
		      test_plugin_error());
	for (int i = 0; i < LOOM_NODE_MAX_SRC; i++) {
		if (!present(&c->src[i]))
			continue;
		fetch(v, be, &src[i], &c->src[i], i == 0 && c->in_place ? out : NULL, c->what);
		v->vt->buffer_free(be, &src[i].buf);
	}
	if (!c->in_place) {
		fetch(v, be, &dst, &c->dst, out, c->what);
		v->vt->buffer_free(be, &dst.buf);
	}
}

/* The case's output on v: run with 1 thread on packed rows and with 2
 * threads on padded rows, which must agree bit for bit. malloc'd. */
static void *exercise(variant *v, const op_case *c)
{
	size_t bytes = packed_bytes(&c->dst);
	void *one = malloc(bytes), *two = malloc(bytes);

	ck_assert(one != NULL && two != NULL);
	run_case(v, 0, c, 0, one);
	run_case(v, 1, c, ROW_PAD, two);
	ck_assert_msg(memcmp(one, two, bytes) == 0,
		      "%s on %s: 2 threads (padded rows) differ from 1 thread", c->what, v->name);
	free(two);
	return one;
}

static double nmse_vs_float(const float *ref, const float *got, size_t n)
{
	double *r = malloc(n * sizeof(double));
	ck_assert(r != NULL);
	for (size_t i = 0; i < n; i++)
		r[i] = ref[i];
	double e = ref_nmse(r, got, n);
	free(r);
	return e;
}

/* sum (got - want)^2 / sum scale^2. */
static double scaled_mse(const double *want, const float *got, const double *scale, size_t n)
{
	double err = 0.0, norm = 0.0;

	for (size_t i = 0; i < n; i++) {
		double d = (double)got[i] - want[i];
		err += d * d;
		norm += scale[i] * scale[i];
	}
	return norm > 0.0 ? err / norm : err;
}

/* F32 output: finite, within tol of the reference, and of cpu-generic's
 * output. The error is the normalized MSE, normalized by scale (the sizes
 * the sums were made of) where given, else by the reference itself. */
static void check_close_scaled(variant *v, const op_case *c, const double *ref, const double *scale,
			       double tol)
{
	size_t n = n_elements(&c->dst);
	float *got = exercise(v, c);
	int64_t bad = ref_first_nonfinite(got, n);
	double e;

	ck_assert_msg(bad < 0, "%s on %s: element %lld is %g", c->what, v->name, (long long)bad,
		      bad < 0 ? 0.0 : got[bad]);
	e = scale != NULL ? scaled_mse(ref, got, scale, n) : ref_nmse(ref, got, n);
	ck_assert_msg(e <= tol, "%s on %s: nmse %.3g against the reference exceeds %.1g", c->what,
		      v->name, e, tol);
	if (v != &variants[V_GENERIC]) {
		/* One run: cpu-generic's own tests compare its thread counts. */
		float *gen = malloc(packed_bytes(&c->dst));
		double *g = malloc(n * sizeof(double));
		ck_assert(gen != NULL && g != NULL);
		run_case(load_variant(V_GENERIC), 0, c, 0, gen);
		for (size_t i = 0; i < n; i++)
			g[i] = gen[i];
		e = scale != NULL ? scaled_mse(g, got, scale, n) : nmse_vs_float(gen, got, n);
		ck_assert_msg(e <= tol, "%s on %s: nmse %.3g against cpu-generic exceeds %.1g", c->what,
			      v->name, e, tol);
		free(g);
		free(gen);
	}
	free(got);
}

static void check_close(variant *v, const op_case *c, const double *ref, double tol)
{
	check_close_scaled(v, c, ref, NULL, tol);
}

/* Output that must equal `expected` (packed dst bytes) bit for bit. */
static void check_exact(variant *v, const op_case *c, const void *expected)
{
	size_t bytes = packed_bytes(&c->dst);
	unsigned char *got = exercise(v, c);

	const unsigned char *want = expected;
	size_t i = 0;

	while (i < bytes && got[i] == want[i])
		i++;
	ck_assert_msg(i == bytes, "%s on %s: byte %zu is %#x, expected %#x", c->what, v->name, i,
		      i < bytes ? got[i] : 0, i < bytes ? want[i] : 0);
	free(got);
}

/* ------------------------------------------------------------------------ */
/* Random contents                                                          */

static void fill_normal(ref_rng *rng, float *x, size_t n, double scale)
{
	for (size_t i = 0; i < n; i++)
		x[i] = (float)(scale * ref_rng_normal(rng));
}

/* Random weights of any supported dtype: normal values (scale s) rounded to
 * F16/BF16, or random blocks of a quantized type. */
static htensor random_weights(ref_rng *rng, loom_dtype type, int64_t ne0, int64_t ne1, double s)
{
	htensor t = ht(type, ne0, ne1, 1, 1);
	size_t n = n_elements(&t);

	if (ref_block_elems(type) > 0) {
		ref_random_blocks(rng, type, t.data, n / (size_t)ref_block_elems(type));
		return t;
	}
	for (size_t i = 0; i < n; i++) {
		float x = (float)(s * ref_rng_normal(rng));
		if (type == LOOM_DTYPE_F32)
			f32(&t)[i] = x;
		else if (type == LOOM_DTYPE_F16)
			u16(&t)[i] = ref_f32_to_fp16(x);
		else if (type == LOOM_DTYPE_BF16)
			u16(&t)[i] = ref_f32_to_bf16(x);
	}
	return t;
}

/* Element i of row r of a weight-like tensor, as the exact f32 value. */
static float value_at(const htensor *t, int64_t r, int64_t i)
{
	const char *row = (const char *)t->data + r * row_bytes(t);

	switch (t->dtype) {
	case LOOM_DTYPE_F16:
		return ref_fp16_to_f32(((const uint16_t *)row)[i]);
	case LOOM_DTYPE_BF16:
		return ref_bf16_to_f32(((const uint16_t *)row)[i]);
	case LOOM_DTYPE_F32:
		return ((const float *)row)[i];
	default:
		return ref_quant_value(t->dtype, (const uint8_t *)row, i);
	}
}

/* Row r of t as f32, a quantized row's blocks decoded once each. */
static void row_values(const htensor *t, int64_t r, float *out)
{
	if (ref_block_elems(t->dtype) > 0) {
		ref_quant_row(t->dtype, (const uint8_t *)t->data + r * row_bytes(t), t->ne[0], out);
		return;
	}
	for (int64_t i = 0; i < t->ne[0]; i++)
		out[i] = value_at(t, r, i);
}

static const char *dtype_name(loom_dtype t)
{
	return loom_dtype_layout_of(t).name;
}

/* Row lengths for a dtype: the whole numbers of blocks among these, 512
 * (two K-quant super-blocks) for the quantized types, and odd lengths for
 * the types without blocks. 2816 = 11 * 256 and 11008 = 43 * 256 (the FFN
 * widths of TinyLlama and Llama 2 7B). */
static int row_lengths(loom_dtype type, int64_t *out)
{
	static const int64_t blocky[] = {32, 64, 256, 2816, 11008};
	static const int64_t odd[] = {5, 172};
	int64_t block = loom_dtype_layout_of(type).block;
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

/* The block-quantized weight types. */
static const loom_dtype quant_types[] = {
	LOOM_DTYPE_Q4_0, LOOM_DTYPE_Q4_1, LOOM_DTYPE_Q5_0, LOOM_DTYPE_Q5_1, LOOM_DTYPE_Q8_0,
	LOOM_DTYPE_Q2_K, LOOM_DTYPE_Q3_K, LOOM_DTYPE_Q4_K, LOOM_DTYPE_Q5_K, LOOM_DTYPE_Q6_K,
};

/* 33 rows: two whole 16-row groups and one row; 14 tokens: runs of 8, 4
 * and single tokens in the repacked kernels (cpu_repack.c), two full float
 * tiles and a short one of 2; 3 and 5: short tiles of the 4- and 6-token
 * kernels; 64 the prompt-sized batch. */
static const int64_t row_counts[] = {1, 7, 33};
static const int64_t token_counts[] = {1, 3, 5, 14, 64};

/* Steps idx[0..n) through every combination of idx[k] < sizes[k], the last
 * index fastest, like nested loops; false once all were visited. */
static bool grid_next(int *idx, const int *sizes, int n)
{
	for (int k = n - 1; k >= 0; k--) {
		if (++idx[k] < sizes[k])
			return true;
		idx[k] = 0;
	}
	return false;
}

/* Tolerances (normalized MSE) per op, against the double reference. The
 * kernels accumulate in f32: matmul rows of 11008 reach ~1e-12 (normalized
 * by the sums of |w * x|, which bound f32 rounding however the terms
 * cancel), the other ops stay near 1e-14. A missing or extra rounding step
 * shows as 1e-8 or more. */
#define TOL_RMS_NORM 1e-12
#define TOL_MATMUL 1e-9
#define TOL_SWIGLU 1e-12
/* The mean is rounded to f32 before it comes off (as ggml): on rows
 * offset by 100, an error of ~1e-6 relative to the deviations. */
#define TOL_LAYER_NORM 1e-10
#define TOL_GELU 1e-12
#define TOL_ROPE 1e-12
#define TOL_ATTENTION_F32 1e-11
/* The query rounded to fp16 can land on the other side of a rounding
 * boundary when the f32 inputs differ in the last bit (test_attention_fp16
 * checks the rounding itself). */
#define TOL_ATTENTION_F16 1e-7

/* ------------------------------------------------------------------------ */
/* Probe, buffers, supports, errors                                         */

static bool cpu_has_variant_features(int i)
{
	__builtin_cpu_init();
	bool avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
		      __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
		      __builtin_cpu_supports("avx512vnni");
	switch (i) {
	case V_AVX2:
		return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
	case V_AVX512:
		return avx512;
	case V_AMX:
		return avx512 && test_cpu_has_amx();
	default:
		return true;
	}
}

START_TEST(test_probe)
{
	variant *v = load_variant(_i);

	ck_assert_int_eq(v->desc->abi_version, LOOM_PLUGIN_ABI_VERSION);
	ck_assert_int_eq(v->desc->kind, LOOM_PLUGIN_BACKEND);
	ck_assert_str_eq(v->desc->name, v->name);
	ck_assert_ptr_nonnull(v->desc->version);
	ck_assert_uint_ge(v->vt->struct_size, sizeof(loom_backend_vtable));
	if (cpu_has_variant_features(_i)) {
		ck_assert_msg(v->score == v->score_when_usable, "%s: score %d, expected %d (%s)", v->name,
			      v->score, v->score_when_usable, v->why);
		ck_assert_str_eq(v->why, "");
	} else {
		ck_assert_int_eq(v->score, 0);
		ck_assert_msg(strncmp(v->why, "CPU lacks ", 10) == 0 || strstr(v->why, "OS") != NULL ||
				      strstr(v->why, "the kernel refuses") != NULL,
			      "%s: unclear reason '%s'", v->name, v->why);
		printf("%s refuses this CPU: %s\n", v->name, v->why);
	}
	/* A probe may be asked without room for a reason. */
	loom_probe_args args = {.struct_size = sizeof(args), .host = test_host()};
	ck_assert_int_eq(v->desc->probe(&args, NULL, 0), v->score);
}
END_TEST

START_TEST(test_buffers)
{
	variant *v = usable_variant(_i, "buffers");
	unsigned char host[100], back[100];
	loom_buffer buf, wrapped;
	void *be;

	if (v == NULL)
		return;
	be = v->be[0];
	ck_assert_int_eq(v->vt->buffer_alloc(be, 1000, &buf), LOOM_OK);
	ck_assert_uint_eq((uintptr_t)buf.base % 64, 0);
	ck_assert_uint_eq(buf.size, 1000);
	unsigned char *zeros = malloc(1000);
	ck_assert_int_eq(v->vt->buffer_download(be, &buf, 0, zeros, 1000), LOOM_OK);
	int nonzero = 0;
	for (int i = 0; i < 1000; i++)
		nonzero += zeros[i] != 0;
	ck_assert_msg(nonzero == 0, "%d bytes of a new buffer are not zero", nonzero);
	free(zeros);

	for (int i = 0; i < 100; i++)
		host[i] = (unsigned char)(i * 7);
	ck_assert_int_eq(v->vt->buffer_upload(be, &buf, 900, host, 100), LOOM_OK);
	ck_assert_int_eq(v->vt->buffer_download(be, &buf, 900, back, 100), LOOM_OK);
	ck_assert_mem_eq(host, back, 100);
	ck_assert_int_eq(v->vt->buffer_upload(be, &buf, 901, host, 100), LOOM_ERR_INVALID_ARGUMENT);
	ck_assert_int_eq(v->vt->buffer_upload(be, &buf, 2000, host, 0), LOOM_ERR_INVALID_ARGUMENT);
	ck_assert_int_eq(v->vt->buffer_download(be, &buf, 1, back, SIZE_MAX), LOOM_ERR_INVALID_ARGUMENT);
	ck_assert_int_eq(v->vt->buffer_download(be, &buf, SIZE_MAX, back, 2), LOOM_ERR_INVALID_ARGUMENT);
	ck_assert_int_eq(v->vt->buffer_upload(be, &buf, 1000, host, 0), LOOM_OK);
	v->vt->buffer_free(be, &buf);
	ck_assert_ptr_null(buf.base);

	ck_assert_int_eq(v->vt->buffer_alloc(be, 0, &buf), LOOM_OK);
	v->vt->buffer_free(be, &buf);

	/* Host memory is used in place and not freed with the buffer (a free
	 * of this stack array would abort under ASan). */
	ck_assert_int_eq(v->vt->buffer_from_host(be, host, sizeof(host), &wrapped), LOOM_OK);
	ck_assert_ptr_eq(wrapped.base, host);
	ck_assert_uint_eq(wrapped.size, sizeof(host));
	ck_assert_int_eq(v->vt->buffer_download(be, &wrapped, 10, back, 5), LOOM_OK);
	ck_assert_mem_eq(back, host + 10, 5);
	ck_assert_int_eq(v->vt->buffer_upload(be, &wrapped, 0, "\x01\x02", 2), LOOM_OK);
	ck_assert_int_eq(host[1], 2);
	ck_assert_int_eq(v->vt->buffer_download(be, &wrapped, 99, back, 2), LOOM_ERR_INVALID_ARGUMENT);
	v->vt->buffer_free(be, &wrapped);
	v->vt->buffer_free(be, NULL);
}
END_TEST

START_TEST(test_init_options)
{
	variant *v = usable_variant(_i, "init options");
	const char *key = "flash", *value = "on";
	loom_backend_options o = {.struct_size = sizeof(o), .n_threads = 0};
	void *be;

	if (v == NULL)
		return;
	/* 0 threads: as many as there are online CPUs. */
	be = v->vt->init(test_host(), &o);
	ck_assert_ptr_nonnull(be);
	v->vt->free(be);
	be = v->vt->init(test_host(), NULL);
	ck_assert_ptr_nonnull(be);
	v->vt->free(be);
	v->vt->free(NULL);

	o.n_options = 1;
	o.option_keys = &key;
	o.option_values = &value;
	test_clear_error();
	ck_assert_ptr_null(v->vt->init(test_host(), &o));
	ck_assert_msg(strstr(test_plugin_error(), "flash") != NULL, "error '%s'", test_plugin_error());
}
END_TEST

/* cpu-amx's one option, as its probe reads it from plugins.yaml: off
 * refuses (score 0) on any CPU, a bad key or value is a mistake in the file
 * (below 0), on changes nothing. The other variants' init refuses it. */
START_TEST(test_amx_option)
{
	static const struct {
		const char *key, *value;
		int score; /* -1, 0, or the probe's score without options */
		const char *why;
	} cases[] = {
		{"amx", "off", 0, "turned off in plugins.yaml (amx: off)"},
		{"amx", "maybe", -1, "option amx must be on or off, not 'maybe'"},
		{"flash", "on", -1, "unknown option 'flash'"},
		{"amx", "on", 1, NULL},
	};
	variant *amx = load_variant(V_AMX);

	for (size_t i = 0; i < N_OF(cases); i++) {
		char why[256] = "";
		loom_probe_args args = {.struct_size = sizeof(args), .host = test_host(), .n_options = 1,
					.option_keys = &cases[i].key, .option_values = &cases[i].value};
		int score = amx->desc->probe(&args, why, sizeof(why));
		int expect = cases[i].score == 1 ? amx->score : cases[i].score;
		ck_assert_msg(score == expect, "%s: %s: score %d, expected %d (%s)", cases[i].key, cases[i].value,
			      score, expect, why);
		if (cases[i].why != NULL)
			ck_assert_msg(strstr(why, cases[i].why) != NULL, "%s: %s: why '%s'", cases[i].key,
				      cases[i].value, why);
	}

	const char *key = "amx", *value = "on";
	loom_backend_options o = {.struct_size = sizeof(o), .n_threads = 1, .n_options = 1,
				  .option_keys = &key, .option_values = &value};
	variant *v = usable_variant(_i, "amx option");
	if (v == NULL)
		return;
	test_clear_error();
	void *be = v->vt->init(test_host(), &o);
	if (_i == V_AMX) {
		ck_assert_msg(be != NULL, "cpu-amx refuses its own option: %s", test_plugin_error());
		v->vt->free(be);
	} else {
		ck_assert_msg(be == NULL && strstr(test_plugin_error(), "unknown option 'amx'") != NULL,
			      "%s: error '%s'", v->name, test_plugin_error());
	}
}
END_TEST

/* A tensor descriptor with contiguous strides and no data (enough for
 * supports()). */
static loom_tensor desc(loom_dtype type, int64_t ne0, int64_t ne1, int64_t ne2)
{
	loom_dtype_layout l = loom_dtype_layout_of(type);
	size_t rb = l.block ? (size_t)(ne0 / l.block) * l.block_bytes : 0;
	loom_tensor t = {.dtype = type, .ne = {ne0, ne1, ne2, 1}, .nb = {l.block_bytes, rb, rb * ne1, rb * ne1 * ne2}};
	return t;
}

static bool supported(variant *v, loom_op op, loom_tensor *dst, loom_tensor *s0, loom_tensor *s1,
		      loom_tensor *s2, loom_tensor *s3, int32_t ip0, int32_t ip1)
{
	loom_node node = {.op = op, .dst = dst, .src = {s0, s1, s2, s3}, .ip = {ip0, ip1}, .fp = {1e4f, 1.0f}};
	return v->vt->supports(v->be[0], &node);
}

START_TEST(test_supports)
{
	variant *v = usable_variant(_i, "supports");
	loom_tensor w_q4k = desc(LOOM_DTYPE_Q4_K, 256, 8, 1), w_q8 = desc(LOOM_DTYPE_Q8_0, 256, 8, 1);
	loom_tensor w_q4k_short = desc(LOOM_DTYPE_Q4_K, 128, 8, 1), w_q8k = desc(LOOM_DTYPE_Q8_K, 256, 8, 1);
	loom_tensor w_q81 = desc(LOOM_DTYPE_Q8_1, 256, 8, 1), w_i8 = desc(LOOM_DTYPE_I8, 256, 8, 1);
	loom_tensor w_q8_odd = desc(LOOM_DTYPE_Q8_0, 48, 8, 1), w_f16 = desc(LOOM_DTYPE_F16, 256, 8, 1);
	loom_tensor x = desc(LOOM_DTYPE_F32, 256, 3, 1), x16 = desc(LOOM_DTYPE_F16, 256, 3, 1);
	loom_tensor x_short = desc(LOOM_DTYPE_F32, 128, 3, 1), y = desc(LOOM_DTYPE_F32, 8, 3, 1);
	loom_tensor idx = desc(LOOM_DTYPE_I32, 3, 1, 1), idx_f = desc(LOOM_DTYPE_F32, 3, 1, 1);
	loom_tensor table_q4 = desc(LOOM_DTYPE_Q4_0, 256, 10, 1), rows = desc(LOOM_DTYPE_F32, 256, 3, 1);
	loom_tensor q = desc(LOOM_DTYPE_F32, 64, 6, 3), k16 = desc(LOOM_DTYPE_F16, 128, 20, 1);
	loom_tensor v16 = desc(LOOM_DTYPE_F16, 128, 20, 1), v32 = desc(LOOM_DTYPE_F32, 128, 20, 1);
	loom_tensor kbf = desc(LOOM_DTYPE_BF16, 128, 20, 1), att = desc(LOOM_DTYPE_F32, 384, 3, 1);
	loom_tensor mask = desc(LOOM_DTYPE_F32, 20, 3, 1), pos = desc(LOOM_DTYPE_I32, 3, 1, 1);
	loom_tensor cache_bf = desc(LOOM_DTYPE_BF16, 256, 10, 1), cache_16 = desc(LOOM_DTYPE_F16, 128, 10, 1);
	loom_tensor y16 = desc(LOOM_DTYPE_F16, 256, 3, 1), two = desc(LOOM_DTYPE_F32, 256, 2, 1);
	loom_tensor strided = x;

	if (v == NULL)
		return;
	/* The accepted forms, for contrast. */
	ck_assert(supported(v, LOOM_OP_MATMUL, &y, &w_q8, &x, NULL, NULL, 0, 0));
	ck_assert(supported(v, LOOM_OP_MATMUL, &y, &w_f16, &x, NULL, NULL, 0, 0));
	ck_assert(supported(v, LOOM_OP_MATMUL, &y, &w_q4k, &x, NULL, NULL, 0, 0));
	ck_assert(supported(v, LOOM_OP_GET_ROWS, &rows, &table_q4, &idx, NULL, NULL, 0, 0));
	for (size_t k = 0; k < N_OF(quant_types); k++) {
		loom_tensor w = desc(quant_types[k], 256, 8, 1), table = desc(quant_types[k], 256, 10, 1);
		ck_assert_msg(supported(v, LOOM_OP_MATMUL, &y, &w, &x, NULL, NULL, 0, 0), "MATMUL %s",
			      dtype_name(quant_types[k]));
		ck_assert_msg(supported(v, LOOM_OP_GET_ROWS, &rows, &table, &idx, NULL, NULL, 0, 0),
			      "GET_ROWS %s", dtype_name(quant_types[k]));
	}
	ck_assert(supported(v, LOOM_OP_ATTENTION, &att, &q, &k16, &v16, &mask, 6, 2));
	ck_assert(supported(v, LOOM_OP_ATTENTION, &att, &q, &k16, &v16, NULL, 6, 2));
	/* Refused: activation-only and integer types as weights, a K-quant row
	 * that is not a whole super-block. */
	ck_assert(!supported(v, LOOM_OP_MATMUL, &y, &w_q8k, &x, NULL, NULL, 0, 0));
	ck_assert(!supported(v, LOOM_OP_MATMUL, &y, &w_q81, &x, NULL, NULL, 0, 0));
	ck_assert(!supported(v, LOOM_OP_MATMUL, &y, &w_i8, &x, NULL, NULL, 0, 0));
	ck_assert(!supported(v, LOOM_OP_MATMUL, &y, &w_q4k_short, &x_short, NULL, NULL, 0, 0));
	ck_assert(!supported(v, LOOM_OP_GET_ROWS, &rows, &w_q8k, &idx, NULL, NULL, 0, 0));
	ck_assert(!supported(v, LOOM_OP_MATMUL, &y, &w_q8, &x16, NULL, NULL, 0, 0));
	ck_assert(!supported(v, LOOM_OP_MATMUL, &y, &w_q8, &x_short, NULL, NULL, 0, 0));
	ck_assert(!supported(v, LOOM_OP_MATMUL, &y, &w_q8_odd, &x, NULL, NULL, 0, 0));
	ck_assert(!supported(v, LOOM_OP_MATMUL, &y, &w_q8, NULL, NULL, NULL, 0, 0));
	strided.nb[0] = 8;
	ck_assert(!supported(v, LOOM_OP_MATMUL, &y, &w_q8, &strided, NULL, NULL, 0, 0));
	ck_assert(!supported(v, LOOM_OP_GET_ROWS, &rows, &w_f16, &idx_f, NULL, NULL, 0, 0));
	ck_assert(!supported(v, LOOM_OP_ATTENTION, &att, &q, &k16, &v16, &mask, 6, 4));
	ck_assert(!supported(v, LOOM_OP_ATTENTION, &att, &q, &k16, &v32, &mask, 6, 2));
	ck_assert(!supported(v, LOOM_OP_ATTENTION, &att, &q, &kbf, &kbf, &mask, 6, 2));
	ck_assert(!supported(v, LOOM_OP_ATTENTION, &att, &q, &k16, &v16, &mask, 5, 1));
	ck_assert(supported(v, LOOM_OP_ROPE, &q, &q, &pos, NULL, NULL, 64, LOOM_ROPE_NEOX));
	ck_assert(!supported(v, LOOM_OP_ROPE, &q, &q, &pos, NULL, NULL, 63, LOOM_ROPE_NEOX));
	ck_assert(!supported(v, LOOM_OP_ROPE, &q, &q, &pos, NULL, NULL, 66, LOOM_ROPE_NEOX));
	ck_assert(!supported(v, LOOM_OP_ROPE, &q, &q, &pos, NULL, NULL, 64, 1));
	ck_assert(!supported(v, LOOM_OP_KV_STORE, &cache_bf, &x, &idx, NULL, NULL, 0, 0));
	ck_assert(!supported(v, LOOM_OP_KV_STORE, &cache_16, &x, &idx, NULL, NULL, 0, 0));
	ck_assert(!supported(v, LOOM_OP_RMS_NORM, &y16, &x, NULL, NULL, NULL, 0, 0));
	ck_assert(!supported(v, LOOM_OP_ADD, &x, &x, &two, NULL, NULL, 0, 0));
	ck_assert(!supported(v, LOOM_OP_NONE, &x, &x, NULL, NULL, NULL, 0, 0));
	ck_assert(!supported(v, (loom_op)99, &x, &x, NULL, NULL, NULL, 0, 0));
	ck_assert(!supported(v, LOOM_OP_SCALE, NULL, &x, NULL, NULL, NULL, 0, 0));
}
END_TEST

START_TEST(test_compute_errors)
{
	variant *v = usable_variant(_i, "compute errors");
	float table[4 * 2] = {0}, out[4 * 2];
	int32_t bad_idx[2] = {1, 2};
	loom_tensor t = desc(LOOM_DTYPE_F32, 4, 2, 1), i = desc(LOOM_DTYPE_I32, 2, 1, 1);
	loom_tensor o = desc(LOOM_DTYPE_F32, 4, 2, 1), w = desc(LOOM_DTYPE_Q8_K, 256, 4, 1);
	loom_node node = {.op = LOOM_OP_GET_ROWS, .dst = &o, .src = {&t, &i}};
	loom_graph g = {.n_nodes = 1, .nodes = &node};

	if (v == NULL)
		return;
	t.data = table;
	i.data = bad_idx;
	o.data = out;
	/* Index 2 of a 2-row table. */
	test_clear_error();
	ck_assert_int_eq(v->vt->compute(v->be[1], &g), LOOM_ERR_INVALID_ARGUMENT);
	ck_assert_msg(strstr(test_plugin_error(), "node 0") != NULL, "error '%s'", test_plugin_error());
	bad_idx[1] = -1;
	node.op = LOOM_OP_KV_STORE;
	node.dst = &t;
	node.src[0] = &o;
	ck_assert_int_eq(v->vt->compute(v->be[0], &g), LOOM_ERR_INVALID_ARGUMENT);
	/* A tensor without memory. */
	bad_idx[1] = 0;
	o.data = NULL;
	ck_assert_int_eq(v->vt->compute(v->be[0], &g), LOOM_ERR_INVALID_ARGUMENT);
	/* An unsupported node anywhere refuses the whole graph. */
	o.data = out;
	loom_node two[2] = {node, {.op = LOOM_OP_MATMUL, .dst = &o, .src = {&w, &t}}};
	g = (loom_graph){.n_nodes = 2, .nodes = two};
	test_clear_error();
	ck_assert_int_eq(v->vt->compute(v->be[0], &g), LOOM_ERR_UNSUPPORTED);
	ck_assert_msg(strstr(test_plugin_error(), "node 1") != NULL, "error '%s'", test_plugin_error());
	g.n_nodes = 0;
	ck_assert_int_eq(v->vt->compute(v->be[0], &g), LOOM_OK);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* GET_ROWS                                                                 */

static const loom_dtype table_types[] = {
	LOOM_DTYPE_F32,  LOOM_DTYPE_F16,  LOOM_DTYPE_BF16, LOOM_DTYPE_Q4_0, LOOM_DTYPE_Q4_1,
	LOOM_DTYPE_Q5_0, LOOM_DTYPE_Q5_1, LOOM_DTYPE_Q8_0, LOOM_DTYPE_Q2_K, LOOM_DTYPE_Q3_K,
	LOOM_DTYPE_Q4_K, LOOM_DTYPE_Q5_K, LOOM_DTYPE_Q6_K,
};

static void check_get_rows(variant *v, ref_rng *rng, loom_dtype type, int64_t ne0, int64_t n_rows,
			   int64_t n)
{
	op_case c = {.op = LOOM_OP_GET_ROWS};
	htensor want = ht(LOOM_DTYPE_F32, ne0, n, 1, 1);

	c.src[0] = random_weights(rng, type, ne0, n_rows, 1.0);
	c.src[1] = ht(LOOM_DTYPE_I32, n, 1, 1, 1);
	c.dst = ht(LOOM_DTYPE_F32, ne0, n, 1, 1);
	for (int64_t k = 0; k < n; k++) {
		int32_t row = (int32_t)ref_rng_below(rng, n_rows);
		i32(&c.src[1])[k] = row;
		row_values(&c.src[0], row, f32(&want) + k * ne0);
	}
	snprintf(c.what, sizeof(c.what), "GET_ROWS %s [%lld x %lld] x %lld", dtype_name(type),
		 (long long)ne0, (long long)n_rows, (long long)n);
	check_exact(v, &c, want.data);
	free(want.data);
	case_free(&c);
}

/* Rows are the op's only unit of work: counts that leave one of two
 * threads idle, split unevenly, or give each several. */
static const int64_t ids_counts[] = {1, 3, 14};

START_TEST(test_get_rows)
{
	variant *v = usable_variant(_i, "GET_ROWS");
	ref_rng rng = {1};
	int64_t lens[8];

	if (v == NULL)
		return;
	for (size_t ti = 0; ti < N_OF(table_types); ti++) {
		int idx[3] = {0}, sizes[3] = {row_lengths(table_types[ti], lens), 2, N_OF(ids_counts)};
		do
			check_get_rows(v, &rng, table_types[ti], lens[idx[0]], row_counts[1 + idx[1]],
				       ids_counts[idx[2]]);
		while (grid_next(idx, sizes, 3));
	}
}
END_TEST

/* Every fp16 and bf16 bit pattern through GET_ROWS: the conversions to f32
 * are exact, NaNs come out quiet with their payload. */
START_TEST(test_get_rows_all_16bit)
{
	variant *v = usable_variant(_i, "GET_ROWS all 16-bit patterns");
	const loom_dtype types[] = {LOOM_DTYPE_F16, LOOM_DTYPE_BF16};

	if (v == NULL)
		return;
	for (int ti = 0; ti < 2; ti++) {
		op_case c = {.op = LOOM_OP_GET_ROWS};
		c.src[0] = ht(types[ti], 256, 256, 1, 1);
		c.src[1] = ht(LOOM_DTYPE_I32, 256, 1, 1, 1);
		c.dst = ht(LOOM_DTYPE_F32, 256, 256, 1, 1);
		htensor want = ht(LOOM_DTYPE_F32, 256, 256, 1, 1);
		for (int h = 0; h < 65536; h++) {
			uint16_t bits = (uint16_t)h;
			u16(&c.src[0])[h] = bits;
			f32(&want)[h] = ti == 0 ? ref_fp16_to_f32(bits) : ref_bf16_to_f32(bits);
		}
		for (int k = 0; k < 256; k++)
			i32(&c.src[1])[k] = k;
		snprintf(c.what, sizeof(c.what), "GET_ROWS of all %s values", dtype_name(types[ti]));
		check_exact(v, &c, want.data);
		free(want.data);
		case_free(&c);
	}
}
END_TEST

/* ------------------------------------------------------------------------ */
/* RMS_NORM                                                                 */

static void check_rms_norm(variant *v, ref_rng *rng, int64_t n, int64_t rows, bool weighted)
{
	op_case c = {.op = LOOM_OP_RMS_NORM, .fp = {weighted ? 1e-5f : 1e-6f}};
	double *ref = malloc(sizeof(double) * (size_t)(n * rows));

	c.src[0] = ht(LOOM_DTYPE_F32, n, rows, 1, 1);
	c.dst = ht(LOOM_DTYPE_F32, n, rows, 1, 1);
	fill_normal(rng, f32(&c.src[0]), (size_t)(n * rows), 3.0);
	if (weighted) {
		c.src[1] = ht(LOOM_DTYPE_F32, n, 1, 1, 1);
		fill_normal(rng, f32(&c.src[1]), (size_t)n, 1.0);
	}
	for (int64_t r = 0; r < rows; r++) {
		const float *x = f32(&c.src[0]) + r * n;
		double ss = 0.0;
		for (int64_t i = 0; i < n; i++)
			ss += (double)x[i] * x[i];
		double scale = 1.0 / sqrt(ss / (double)n + (double)c.fp[0]);
		for (int64_t i = 0; i < n; i++)
			ref[r * n + i] = x[i] * scale * (weighted ? f32(&c.src[1])[i] : 1.0);
	}
	snprintf(c.what, sizeof(c.what), "RMS_NORM [%lld x %lld]%s", (long long)n, (long long)rows,
		 weighted ? " weighted" : "");
	check_close(v, &c, ref, TOL_RMS_NORM);
	free(ref);
	case_free(&c);
}

START_TEST(test_rms_norm)
{
	variant *v = usable_variant(_i, "RMS_NORM");
	static const int64_t lens[] = {5, 32, 172, 256, 2816};
	int idx[3] = {0}, sizes[3] = {N_OF(lens), N_OF(row_counts), 2};
	ref_rng rng = {2};

	if (v == NULL)
		return;
	do
		check_rms_norm(v, &rng, lens[idx[0]], row_counts[idx[1]], idx[2]);
	while (grid_next(idx, sizes, 3));
}
END_TEST

/* ------------------------------------------------------------------------ */
/* LAYER_NORM                                                               */

/* params: bit 0 a weight, bit 1 a bias; in place when in_place. */
static void check_layer_norm(variant *v, ref_rng *rng, int64_t n, int64_t rows, int params, bool in_place)
{
	op_case c = {.op = LOOM_OP_LAYER_NORM, .fp = {1e-5f}, .in_place = in_place};
	double *ref = malloc(sizeof(double) * (size_t)(n * rows));

	c.src[0] = ht(LOOM_DTYPE_F32, n, rows, 1, 1);
	c.dst = ht(LOOM_DTYPE_F32, n, rows, 1, 1);
	/* An offset much larger than the spread: the mean must come off
	 * before the squares are summed. */
	fill_normal(rng, f32(&c.src[0]), (size_t)(n * rows), 3.0);
	for (int64_t i = 0; i < n * rows; i++)
		f32(&c.src[0])[i] += 100.0f;
	for (int k = 0; k < 2; k++) {
		if (params & (1 << k)) {
			c.src[1 + k] = ht(LOOM_DTYPE_F32, n, 1, 1, 1);
			fill_normal(rng, f32(&c.src[1 + k]), (size_t)n, 1.0);
		}
	}
	for (int64_t r = 0; r < rows; r++) {
		const float *x = f32(&c.src[0]) + r * n;
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
				y *= f32(&c.src[1])[i];
			if (params & 2)
				y += f32(&c.src[2])[i];
			ref[r * n + i] = y;
		}
	}
	snprintf(c.what, sizeof(c.what), "LAYER_NORM [%lld x %lld]%s%s%s", (long long)n, (long long)rows,
		 params & 1 ? " weighted" : "", params & 2 ? " biased" : "", in_place ? " in place" : "");
	check_close(v, &c, ref, TOL_LAYER_NORM);
	free(ref);
	case_free(&c);
}

START_TEST(test_layer_norm)
{
	variant *v = usable_variant(_i, "LAYER_NORM");
	static const int64_t lens[] = {5, 32, 172, 256, 2816};
	int idx[4] = {0}, sizes[4] = {N_OF(lens), N_OF(row_counts), 4, 2};
	ref_rng rng = {3};

	if (v == NULL)
		return;
	do
		check_layer_norm(v, &rng, lens[idx[0]], row_counts[idx[1]], idx[2], idx[3]);
	while (grid_next(idx, sizes, 4));
}
END_TEST

/* ------------------------------------------------------------------------ */
/* MATMUL                                                                   */

/* The activation as the dot product sees it for F32, F16 and BF16 weights. */
static void round_activations(loom_dtype type, const float *x, int64_t n, double *out)
{
	for (int64_t i = 0; i < n; i++)
		out[i] = type == LOOM_DTYPE_F16 ? ref_round_fp16(x[i])
			 : type == LOOM_DTYPE_BF16 ? ref_round_bf16(x[i])
						   : x[i];
}

/* Quantized weights meet activations quantized to their activation type,
 * in llama.cpp's integer arithmetic (cpu_ref.h); the others a plain double
 * dot product with the rounded activations. mag (if not NULL) gets each
 * output's sum of |w * x|, the size that bounds its rounding errors
 * however much the terms cancel. */
static void matmul_reference_mag(const op_case *c, double *ref, double *mag)
{
	const htensor *w = &c->src[0], *x = &c->src[1];
	int64_t n = w->ne[0], n_out = w->ne[1], n_tok = x->ne[1];
	bool quant = ref_block_elems(w->dtype) > 0;
	loom_dtype act = ref_act_type(w->dtype);
	double *xr = malloc(sizeof(double) * (size_t)n);
	uint8_t *xq = malloc(quant ? loom_dtype_row_bytes(act, n) : 1);

	for (int64_t t = 0; t < n_tok; t++) {
		const float *xt = f32(x) + t * n;
		if (quant)
			ref_quantize_act(act, xt, xq, n);
		else
			round_activations(w->dtype, xt, n, xr);
		for (int64_t o = 0; o < n_out; o++) {
			const uint8_t *wr = (const uint8_t *)w->data + o * row_bytes(w);
			double sum = 0.0;
			if (quant)
				sum = ref_quant_dot(w->dtype, wr, xq, n);
			else
				for (int64_t i = 0; i < n; i++)
					sum += (double)value_at(w, o, i) * xr[i];
			ref[t * n_out + o] = sum;
		}
	}
	if (mag != NULL) {
		double *wd = malloc(sizeof(double) * (size_t)(n * n_out));
		float *wo = malloc(sizeof(float) * (size_t)n);
		ck_assert(wd != NULL && wo != NULL);
		for (int64_t o = 0; o < n_out; o++) {
			row_values(w, o, wo);
			for (int64_t i = 0; i < n; i++)
				wd[o * n + i] = fabs((double)wo[i]);
		}
		free(wo);
		for (int64_t t = 0; t < n_tok; t++) {
			const float *xt = f32(x) + t * n;
			for (int64_t o = 0; o < n_out; o++) {
				double m = 0.0;
				for (int64_t i = 0; i < n; i++)
					m += wd[o * n + i] * fabs((double)xt[i]);
				mag[t * n_out + o] = m;
			}
		}
		free(wd);
	}
	free(xr);
	free(xq);
}

static void matmul_reference(const op_case *c, double *ref)
{
	matmul_reference_mag(c, ref, NULL);
}

static void check_matmul_case(variant *v, ref_rng *rng, loom_dtype type, int64_t n, int64_t n_out,
			      int64_t n_tok)
{
	op_case c = {.op = LOOM_OP_MATMUL};
	double *ref = malloc(sizeof(double) * (size_t)(n_out * n_tok));

	c.src[0] = random_weights(rng, type, n, n_out, 1.0 / sqrt((double)n));
	c.src[1] = ht(LOOM_DTYPE_F32, n, n_tok, 1, 1);
	c.dst = ht(LOOM_DTYPE_F32, n_out, n_tok, 1, 1);
	fill_normal(rng, f32(&c.src[1]), (size_t)(n * n_tok), 2.0);
	/* An all-zero block of the activation type: the quantizers' zero path. */
	int64_t act_block = ref_block_elems(ref_act_type(type));
	if (n >= 2 * act_block)
		memset(f32(&c.src[1]) + act_block, 0, (size_t)act_block * sizeof(float));
	double *mag = malloc(sizeof(double) * (size_t)(n_out * n_tok));
	matmul_reference_mag(&c, ref, mag);
	snprintf(c.what, sizeof(c.what), "MATMUL %s [%lld x %lld] x %lld tokens", dtype_name(type),
		 (long long)n, (long long)n_out, (long long)n_tok);
	check_close_scaled(v, &c, ref, mag, TOL_MATMUL);
	free(mag);
	free(ref);
	case_free(&c);
}

static void check_matmul(int vi, loom_dtype type)
{
	variant *v = usable_variant(vi, "MATMUL");
	ref_rng rng = {3 + (uint64_t)type};
	int64_t lens[8];
	int idx[3] = {0}, sizes[3] = {row_lengths(type, lens), N_OF(row_counts), N_OF(token_counts)};

	if (v == NULL)
		return;
	do {
		/* The longest rows check how error accumulates, which a few
		 * tokens show; with a prompt's worth they would be half of this
		 * suite's time, for what the 2816-long rows' batches cover. */
		if (lens[idx[0]] > 4096 && token_counts[idx[2]] > 16)
			continue;
		check_matmul_case(v, &rng, type, lens[idx[0]], row_counts[idx[1]], token_counts[idx[2]]);
	} while (grid_next(idx, sizes, 3));
}

START_TEST(test_matmul_f32)
{
	check_matmul(_i, LOOM_DTYPE_F32);
}
END_TEST

START_TEST(test_matmul_f16)
{
	check_matmul(_i, LOOM_DTYPE_F16);
}
END_TEST

START_TEST(test_matmul_bf16)
{
	check_matmul(_i, LOOM_DTYPE_BF16);
}
END_TEST

/* Every block-quantized type (loop index: type, then variant). */
START_TEST(test_matmul_quant)
{
	check_matmul(_i % N_VARIANTS, quant_types[_i / N_VARIANTS]);
}
END_TEST

/* A decode's float weights go through a kernel of their own (16 rows side
 * by side) that must give the tiles' results bit for bit, so that a token's
 * output does not depend on the tokens it comes with: one token against
 * the same token 7 times (a tile of 6 and one of 1). Rows of 16 to 2056
 * elements (a part line at the end; 1024 and 2048, rows a whole number of
 * 4 KiB apart, run 8 side by side), row counts around the blocks of 16. */
START_TEST(test_matmul_decode_rows)
{
	static const loom_dtype types[] = {LOOM_DTYPE_F32, LOOM_DTYPE_F16, LOOM_DTYPE_BF16};
	static const int64_t lens[] = {16, 100, 768, 1024, 2048, 2056};
	static const int64_t outs[] = {5, 16, 31, 48, 67};
	variant *v = usable_variant(_i, "MATMUL decode rows");
	ref_rng rng = {41};

	if (v == NULL)
		return;
	for (size_t k = 0; k < N_OF(types); k++)
		for (size_t li = 0; li < N_OF(lens); li++)
			for (size_t oi = 0; oi < N_OF(outs); oi++) {
				int64_t n = lens[li], n_out = outs[oi];
				op_case one = {.op = LOOM_OP_MATMUL}, seven = {.op = LOOM_OP_MATMUL};
				one.src[0] = random_weights(&rng, types[k], n, n_out, 1.0 / sqrt((double)n));
				one.src[1] = ht(LOOM_DTYPE_F32, n, 1, 1, 1);
				one.dst = ht(LOOM_DTYPE_F32, n_out, 1, 1, 1);
				fill_normal(&rng, f32(&one.src[1]), (size_t)n, 2.0);
				seven.src[0] = ht(types[k], n, n_out, 1, 1);
				memcpy(seven.src[0].data, one.src[0].data, packed_bytes(&one.src[0]));
				seven.src[1] = ht(LOOM_DTYPE_F32, n, 7, 1, 1);
				seven.dst = ht(LOOM_DTYPE_F32, n_out, 7, 1, 1);
				for (int t = 0; t < 7; t++)
					memcpy(f32(&seven.src[1]) + t * n, f32(&one.src[1]), (size_t)n * sizeof(float));
				snprintf(one.what, sizeof(one.what), "MATMUL %s [%lld x %lld] x 1 token", dtype_name(types[k]),
						 (long long)n, (long long)n_out);
				snprintf(seven.what, sizeof(seven.what), "%s", one.what);
				float *got = exercise(v, &one), *tiles = exercise(v, &seven);
				for (int t = 0; t < 7; t++)
					ck_assert_msg(memcmp(got, tiles + t * n_out, (size_t)n_out * sizeof(float)) == 0,
								  "%s on %s: differs from token %d of 7", one.what, v->name, t);
				free(got);
				free(tiles);
				case_free(&one);
				case_free(&seven);
			}
}
END_TEST

/* Tiles of tokens and rows that do not fill up, for the kernels that take
 * 16 of each at once (cpu-amx's): 37 tokens are two whole tiles and one of
 * 5, 19 rows a group and 3; F16 and BF16 rows of 100 end inside a tile
 * row of 32. Every weight type (loop index: type, then variant). */
static const loom_dtype tail_types[] = {
	LOOM_DTYPE_F16,  LOOM_DTYPE_BF16, LOOM_DTYPE_Q4_0, LOOM_DTYPE_Q4_1, LOOM_DTYPE_Q5_0, LOOM_DTYPE_Q5_1,
	LOOM_DTYPE_Q8_0, LOOM_DTYPE_Q2_K, LOOM_DTYPE_Q3_K, LOOM_DTYPE_Q4_K, LOOM_DTYPE_Q5_K, LOOM_DTYPE_Q6_K,
};

START_TEST(test_matmul_tile_tails)
{
	loom_dtype type = tail_types[_i / N_VARIANTS];
	variant *v = usable_variant(_i % N_VARIANTS, "MATMUL tile tails");
	ref_rng rng = {29 + (uint64_t)type};
	int64_t n = loom_dtype_layout_of(type).block == 1 ? 100 : 512;

	if (v != NULL)
		check_matmul_case(v, &rng, type, n, 19, 37);
}
END_TEST

/* Repacked Q8_0 sums each block exactly before scaling it, the standard
 * layout (llama.cpp's order) each 4 products: outputs may differ by the
 * roundings of one f32 sum per block, at most about 3e-8 of sum |w * x|
 * each; 1e-5 of it allows 300 blocks' worth. */
static void check_rounding_apart(const op_case *c, const float *standard, const float *got, const char *name)
{
	size_t n = n_elements(&c->dst);
	double *ref = malloc(sizeof(double) * n), *mag = malloc(sizeof(double) * n);

	matmul_reference_mag(c, ref, mag);
	for (size_t i = 0; i < n; i++)
		ck_assert_msg(fabs((double)got[i] - (double)standard[i]) <= 1e-5 * mag[i],
			      "%s on %s: output %zu is %.9g, the standard layout's %.9g (sum |w*x| %.3g)", c->what,
			      name, i, got[i], standard[i], mag[i]);
	free(ref);
	free(mag);
}

/* c run on the standard layout, then repacked (weight_repack) or kept in
 * it: the same outputs, bit for bit, except a rearranged Q8_0's, within
 * its summation order's roundings. Frees c. */
static void check_repacked(variant *v, op_case *c, bool rearranged)
{
	size_t bytes = (size_t)(c->dst.ne[0] * c->dst.ne[1]) * sizeof(float);
	float *standard = exercise(v, c);
	c->repack = true;
	float *got = exercise(v, c);

	ck_assert_msg((last_repack_layout != 0) == rearranged, "%s on %s: layout %u", c->what, v->name,
		      last_repack_layout);
	if (c->src[0].dtype != LOOM_DTYPE_Q8_0 || !rearranged)
		ck_assert_msg(memcmp(standard, got, bytes) == 0, "%s on %s: differs from the standard layout", c->what,
			      v->name);
	else
		check_rounding_apart(c, standard, got, v->name);
	free(standard);
	free(got);
	case_free(c);
}

/* Weights repacked at load (weight_repack): the variants with AVX-512 VNNI
 * rearrange Q4_0, Q8_0, Q4_K and Q6_K; any other weight of 8 MiB or more,
 * in every variant, is copied as it is into the backend's (huge-page)
 * memory, and smaller ones stay in the file's. For every token count and
 * for row counts that leave a group part-filled, they must give the
 * standard layout's output bit for bit (with 1 and 3 tokens the standard
 * layout goes through the tile kernels, with more Q4_0 and the K-quants
 * are repacked a group at a time), Q8_0 rearranged to within its
 * summation order's roundings. */
START_TEST(test_matmul_repacked)
{
	static const loom_dtype types[] = {LOOM_DTYPE_Q4_0, LOOM_DTYPE_Q8_0, LOOM_DTYPE_Q4_K,
					   LOOM_DTYPE_Q6_K, LOOM_DTYPE_Q5_K, LOOM_DTYPE_F16};
	static const int64_t lens[] = {256, 2816};
	variant *v = usable_variant(_i, "MATMUL repacked");
	ref_rng rng = {11};

	if (v == NULL)
		return;
	for (size_t k = 0; k < N_OF(types); k++) {
		bool rearranged = (types[k] == LOOM_DTYPE_Q4_0 || types[k] == LOOM_DTYPE_Q8_0 ||
				   types[k] == LOOM_DTYPE_Q4_K || types[k] == LOOM_DTYPE_Q6_K) &&
				  (_i == V_AVX512 || _i == V_AMX);
		for (size_t li = 0; li < N_OF(lens); li++) {
			for (size_t ri = 0; ri < N_OF(row_counts); ri++) {
				for (size_t ti = 0; ti < N_OF(token_counts); ti++) {
					int64_t n = lens[li], n_out = row_counts[ri], n_tok = token_counts[ti];
					op_case c = {.op = LOOM_OP_MATMUL};
					c.src[0] = random_weights(&rng, types[k], n, n_out, 1.0 / sqrt((double)n));
					c.src[1] = ht(LOOM_DTYPE_F32, n, n_tok, 1, 1);
					c.dst = ht(LOOM_DTYPE_F32, n_out, n_tok, 1, 1);
					fill_normal(&rng, f32(&c.src[1]), (size_t)(n * n_tok), 2.0);
					snprintf(c.what, sizeof(c.what), "MATMUL %s [%lld x %lld] x %lld tokens, repacked",
						 dtype_name(types[k]), (long long)n, (long long)n_out, (long long)n_tok);
					check_repacked(v, &c, rearranged);
				}
			}
		}
	}

	/* A decode reads its run of Q4_0 or Q8_0 groups as two halves side by
	 * side: six groups, the last part-filled, so that one thread's run
	 * (a single thread takes four, then two) ends with a pair on it. */
	for (int k = 0; k < 2 && (_i == V_AVX512 || _i == V_AMX); k++) {
		loom_dtype type = k == 0 ? LOOM_DTYPE_Q4_0 : LOOM_DTYPE_Q8_0;
		op_case c = {.op = LOOM_OP_MATMUL};
		c.src[0] = random_weights(&rng, type, 256, 89, 1.0 / 16.0);
		c.src[1] = ht(LOOM_DTYPE_F32, 256, 1, 1, 1);
		c.dst = ht(LOOM_DTYPE_F32, 89, 1, 1, 1);
		fill_normal(&rng, f32(&c.src[1]), 256, 2.0);
		snprintf(c.what, sizeof(c.what), "MATMUL %s [256 x 89] x 1 token, repacked", dtype_name(type));
		check_repacked(v, &c, true);
	}

	/* An F16 weight of 8 MiB, copied as it is: the same outputs. */
	for (size_t ti = 0; ti < N_OF(token_counts); ti += 3) {
		op_case c = {.op = LOOM_OP_MATMUL};
		c.src[0] = random_weights(&rng, LOOM_DTYPE_F16, 4096, 1024, 1.0 / 64.0);
		c.src[1] = ht(LOOM_DTYPE_F32, 4096, token_counts[ti], 1, 1);
		c.dst = ht(LOOM_DTYPE_F32, 1024, token_counts[ti], 1, 1);
		fill_normal(&rng, f32(&c.src[1]), (size_t)(4096 * token_counts[ti]), 2.0);
		snprintf(c.what, sizeof(c.what), "MATMUL f16 [4096 x 1024] x %lld tokens, copied",
			 (long long)token_counts[ti]);
		check_repacked(v, &c, true);
	}
}
END_TEST

/* GET_ROWS on a repacked table, as a tied head's copy is read for the
 * token embedding: every row of a weight whose last group is part-filled,
 * out of order, in the standard layout's values exactly. */
START_TEST(test_get_rows_repacked)
{
	static const loom_dtype types[] = {LOOM_DTYPE_Q4_0, LOOM_DTYPE_Q8_0, LOOM_DTYPE_Q4_K, LOOM_DTYPE_Q6_K};
	const int64_t ne0 = 512, n_rows = 37;
	variant *v = usable_variant(_i, "GET_ROWS repacked");
	ref_rng rng = {12};

	if (v == NULL)
		return;
	for (size_t k = 0; k < N_OF(types); k++) {
		op_case c = {.op = LOOM_OP_GET_ROWS, .repack = true};
		htensor want = ht(LOOM_DTYPE_F32, ne0, n_rows, 1, 1);
		c.src[0] = random_weights(&rng, types[k], ne0, n_rows, 1.0);
		c.src[1] = ht(LOOM_DTYPE_I32, n_rows, 1, 1, 1);
		c.dst = ht(LOOM_DTYPE_F32, ne0, n_rows, 1, 1);
		for (int64_t i = 0; i < n_rows; i++) {
			int32_t row = (int32_t)((i * 11 + 3) % n_rows);
			i32(&c.src[1])[i] = row;
			row_values(&c.src[0], row, f32(&want) + i * ne0);
		}
		snprintf(c.what, sizeof(c.what), "GET_ROWS %s [%lld x %lld], repacked", dtype_name(types[k]),
			 (long long)ne0, (long long)n_rows);
		check_exact(v, &c, want.data);
		ck_assert_msg((last_repack_layout != 0) == (_i == V_AVX512 || _i == V_AMX), "%s on %s: layout %u",
			      c.what, v->name, last_repack_layout);
		free(want.data);
		case_free(&c);
	}
}
END_TEST

/* The mapping of this process that holds p, from /proc/self/maps. */
static bool mapping_of(const void *p, uintptr_t *lo, uintptr_t *hi)
{
	FILE *f = fopen("/proc/self/maps", "r");
	char line[512];
	bool found = false;

	ck_assert(f != NULL);
	while (!found && fgets(line, sizeof(line), f) != NULL) {
		unsigned long a, b;
		if (sscanf(line, "%lx-%lx", &a, &b) == 2 && (uintptr_t)p >= a && (uintptr_t)p < b) {
			*lo = a;
			*hi = b;
			found = true;
		}
	}
	fclose(f);
	return found;
}

/* Weights moved into backend memory at load lie side by side in mappings
 * that start on a 2 MiB page and span whole ones, small weights too (a
 * small model's matrices, a megabyte each, would otherwise get no huge
 * page), without overlapping; freed, their memory serves again. The
 * variants that rearrange Q8_0 take nine 17 KiB weights, every variant
 * two F16 ones of 8 MiB (copied as they are). */
START_TEST(test_weight_slabs)
{
	const uintptr_t huge = (uintptr_t)2 << 20;
	variant *v = usable_variant(_i, "weight slabs");
	ref_rng rng = {17};
	enum { N = 9 };

	if (v == NULL)
		return;
	void *be = v->be[0];
	for (int round = 0; round < 2; round++) {
		loom_buffer packed[N];
		dtensor d[N];
		htensor h[N];
		memset(packed, 0, sizeof(packed));
		memset(d, 0, sizeof(d));
		int n = 0;
		for (int k = 0; k < N; k++) {
			bool small = _i == V_AVX512 || _i == V_AMX;
			if (!small && k >= 2)
				break;
			/* Where the bytes go is the question, not their values: the
			 * big ones are zeros, cheap to make under the sanitizers. */
			h[k] = small ? random_weights(&rng, LOOM_DTYPE_Q8_0, 256, 64, 1.0)
				     : ht(LOOM_DTYPE_F16, 4096, 1024, 1, 1);
			place(v, be, &h[k], 0, &d[k]);
			uint32_t layout = 0;
			ck_assert_msg(v->vt->weight_repack(be, &d[k].t, &packed[k], &layout) == LOOM_OK && layout != 0,
				      "%s: weight %d not moved", v->name, k);
			n++;
		}
		for (int k = 0; k < n; k++) {
			uintptr_t a = (uintptr_t)packed[k].base, lo, hi;
			ck_assert_msg(a % 64 == 0, "%s: weight %d at %#lx", v->name, k, (unsigned long)a);
			ck_assert_msg(mapping_of(packed[k].base, &lo, &hi), "%s: weight %d in no mapping", v->name, k);
			ck_assert_msg(lo % huge == 0 && hi - lo >= huge && a + packed[k].size <= hi,
				      "%s: weight %d (%zu bytes) in a mapping [%#lx, %#lx) of no whole 2 MiB page", v->name,
				      k, packed[k].size, (unsigned long)lo, (unsigned long)hi);
			for (int j = 0; j < k; j++)
				ck_assert_msg(a >= (uintptr_t)packed[j].base + packed[j].size ||
						      a + packed[k].size <= (uintptr_t)packed[j].base,
					      "%s: weights %d and %d overlap", v->name, j, k);
		}
		for (int k = 0; k < n; k++) {
			v->vt->buffer_free(be, &packed[k]);
			v->vt->buffer_free(be, &d[k].buf);
			free(h[k].data);
		}
	}
}
END_TEST

/* Activations that quantize to exact ties (x * scale = k + 1/2): the
 * rounding must go to even, as llama.cpp's x86 quantizers do. With one
 * element of magnitude 127 per block the Q8_0/Q8_1 scale 127 / amax and
 * the Q8_K scale -127 / max are +-1, so x = k + 0.5 is a tie; a block whose
 * extreme is negative checks the sign of Q8_K's scale. Weights: Q8_0, Q4_1
 * and Q4_K, one per activation type. */
START_TEST(test_matmul_ties)
{
	static const loom_dtype weights[] = {LOOM_DTYPE_Q8_0, LOOM_DTYPE_Q4_1, LOOM_DTYPE_Q4_K};
	variant *v = usable_variant(_i, "MATMUL ties");
	ref_rng rng = {4};

	if (v == NULL)
		return;
	for (size_t k = 0; k < N_OF(weights); k++) {
		op_case c = {.op = LOOM_OP_MATMUL};
		int64_t n = 512;
		c.src[0] = random_weights(&rng, weights[k], n, 5, 1.0);
		c.src[1] = ht(LOOM_DTYPE_F32, n, 2, 1, 1);
		c.dst = ht(LOOM_DTYPE_F32, 5, 2, 1, 1);
		for (int64_t i = 0; i < 2 * n; i++) {
			float extreme = i / 256 % 2 ? -127.0f : 127.0f;
			f32(&c.src[1])[i] = i % 32 == 0 ? extreme : (float)(i % 32 - 16) + 0.5f;
		}
		double ref[10];
		matmul_reference(&c, ref);
		snprintf(c.what, sizeof(c.what), "MATMUL %s with rounding ties", dtype_name(weights[k]));
		check_close(v, &c, ref, 1e-12);
		case_free(&c);
	}
}
END_TEST

/* ------------------------------------------------------------------------ */
/* ADD, MUL, SCALE, SWIGLU                                                  */

static const int64_t elementwise_lens[] = {5, 172, 256, 2816};

/* mode bit 0: src1 is one broadcast row; bit 1: dst is src0. */
static void check_binary(variant *v, ref_rng *rng, loom_op op, int64_t n, int64_t rows, int mode)
{
	op_case c = {.op = op, .in_place = mode & 2};
	htensor want = ht(LOOM_DTYPE_F32, n, rows, 1, 1);

	c.src[0] = ht(LOOM_DTYPE_F32, n, rows, 1, 1);
	c.src[1] = ht(LOOM_DTYPE_F32, n, mode & 1 ? 1 : rows, 1, 1);
	c.dst = ht(LOOM_DTYPE_F32, n, rows, 1, 1);
	fill_normal(rng, f32(&c.src[0]), (size_t)(n * rows), 1.0);
	fill_normal(rng, f32(&c.src[1]), n_elements(&c.src[1]), 1.0);
	for (int64_t i = 0; i < n * rows; i++) {
		float x = f32(&c.src[0])[i], y = f32(&c.src[1])[mode & 1 ? i % n : i];
		f32(&want)[i] = op == LOOM_OP_ADD ? x + y : x * y;
	}
	snprintf(c.what, sizeof(c.what), "%s [%lld x %lld]%s%s", op == LOOM_OP_ADD ? "ADD" : "MUL",
		 (long long)n, (long long)rows, mode & 1 ? " broadcast" : "", mode & 2 ? " in place" : "");
	/* f32 add and multiply are correctly rounded: exact. */
	check_exact(v, &c, want.data);
	free(want.data);
	case_free(&c);
}

START_TEST(test_add_mul)
{
	variant *v = usable_variant(_i, "ADD/MUL");
	int idx[4] = {0}, sizes[4] = {2, N_OF(elementwise_lens), N_OF(row_counts), 4};
	ref_rng rng = {5};

	if (v == NULL)
		return;
	do
		check_binary(v, &rng, idx[0] ? LOOM_OP_MUL : LOOM_OP_ADD, elementwise_lens[idx[1]],
			     row_counts[idx[2]], idx[3]);
	while (grid_next(idx, sizes, 4));
}
END_TEST

static void check_scale(variant *v, ref_rng *rng, int64_t n, int64_t rows, bool in_place)
{
	op_case c = {.op = LOOM_OP_SCALE, .fp = {0.375f}, .in_place = in_place};
	htensor want = ht(LOOM_DTYPE_F32, n, rows, 1, 1);

	c.src[0] = ht(LOOM_DTYPE_F32, n, rows, 1, 1);
	c.dst = ht(LOOM_DTYPE_F32, n, rows, 1, 1);
	fill_normal(rng, f32(&c.src[0]), (size_t)(n * rows), 1.0);
	for (int64_t i = 0; i < n * rows; i++)
		f32(&want)[i] = f32(&c.src[0])[i] * c.fp[0];
	snprintf(c.what, sizeof(c.what), "SCALE [%lld x %lld]%s", (long long)n, (long long)rows,
		 in_place ? " in place" : "");
	check_exact(v, &c, want.data);
	free(want.data);
	case_free(&c);
}

START_TEST(test_scale)
{
	variant *v = usable_variant(_i, "SCALE");
	int idx[3] = {0}, sizes[3] = {N_OF(elementwise_lens), N_OF(row_counts), 2};
	ref_rng rng = {6};

	if (v == NULL)
		return;
	do
		check_scale(v, &rng, elementwise_lens[idx[0]], row_counts[idx[1]], idx[2]);
	while (grid_next(idx, sizes, 3));
}
END_TEST

static void check_swiglu(variant *v, ref_rng *rng, int64_t n, int64_t rows)
{
	op_case c = {.op = LOOM_OP_SWIGLU};
	double *ref = malloc(sizeof(double) * (size_t)(n * rows));

	c.src[0] = ht(LOOM_DTYPE_F32, n, rows, 1, 1);
	c.src[1] = ht(LOOM_DTYPE_F32, n, rows, 1, 1);
	c.dst = ht(LOOM_DTYPE_F32, n, rows, 1, 1);
	/* Gates up to |x| ~ 40: e^-x overflows f32 and silu goes to -0. */
	fill_normal(rng, f32(&c.src[0]), (size_t)(n * rows), 10.0);
	fill_normal(rng, f32(&c.src[1]), (size_t)(n * rows), 1.0);
	for (int64_t i = 0; i < n * rows; i++) {
		double g = f32(&c.src[0])[i];
		ref[i] = g / (1.0 + exp(-g)) * f32(&c.src[1])[i];
	}
	snprintf(c.what, sizeof(c.what), "SWIGLU [%lld x %lld]", (long long)n, (long long)rows);
	check_close(v, &c, ref, TOL_SWIGLU);
	free(ref);
	case_free(&c);
}

START_TEST(test_swiglu)
{
	variant *v = usable_variant(_i, "SWIGLU");
	int idx[2] = {0}, sizes[2] = {N_OF(elementwise_lens), N_OF(row_counts)};
	ref_rng rng = {7};

	if (v == NULL)
		return;
	do
		check_swiglu(v, &rng, elementwise_lens[idx[0]], row_counts[idx[1]]);
	while (grid_next(idx, sizes, 2));
}
END_TEST

static void check_gelu(variant *v, ref_rng *rng, int64_t n, int64_t rows, loom_gelu_kind kind, bool in_place)
{
	op_case c = {.op = LOOM_OP_GELU, .ip = {kind}, .in_place = in_place};
	double *ref = malloc(sizeof(double) * (size_t)(n * rows));

	c.src[0] = ht(LOOM_DTYPE_F32, n, rows, 1, 1);
	c.dst = ht(LOOM_DTYPE_F32, n, rows, 1, 1);
	/* Up to |x| ~ 40: tanh and erf saturate, gelu goes to x or -0. */
	fill_normal(rng, f32(&c.src[0]), (size_t)(n * rows), 10.0);
	for (int64_t i = 0; i < n * rows; i++) {
		double x = f32(&c.src[0])[i];
		ref[i] = kind == LOOM_GELU_ERF ? 0.5 * x * (1.0 + erf(x / sqrt(2.0)))
					       : 0.5 * x * (1.0 + tanh(0.79788456080286535588 * (x + 0.044715 * x * x * x)));
	}
	snprintf(c.what, sizeof(c.what), "GELU %s [%lld x %lld]%s", kind == LOOM_GELU_ERF ? "erf" : "tanh",
		 (long long)n, (long long)rows, in_place ? " in place" : "");
	check_close(v, &c, ref, TOL_GELU);
	free(ref);
	case_free(&c);
}

START_TEST(test_gelu)
{
	variant *v = usable_variant(_i, "GELU");
	int idx[4] = {0}, sizes[4] = {N_OF(elementwise_lens), N_OF(row_counts), 2, 2};
	ref_rng rng = {8};

	if (v == NULL)
		return;
	do
		check_gelu(v, &rng, elementwise_lens[idx[0]], row_counts[idx[1]], (loom_gelu_kind)idx[2], idx[3]);
	while (grid_next(idx, sizes, 4));
}
END_TEST

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
	const float *ff = c->src[2].data != NULL ? f32(&c->src[2]) : NULL;

	for (int64_t t = 0; t < nt; t++) {
		float theta = (float)i32(&c->src[1])[t];
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
			const float *in = f32(x) + (t * nh + h) * hd;
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

static void check_rope(variant *v, ref_rng *rng, const rope_config *rc, int64_t nt, float base,
		       float freq_scale, enum rope_extra extra, bool in_place)
{
	op_case c = {.op = LOOM_OP_ROPE, .ip = {rc->n_rot, rc->style}, .fp = {base, freq_scale},
		     .in_place = in_place};
	double *ref;

	if (extra == ROPE_FREQ_FACTORS) {
		/* Llama 3's factors run from 1 (high frequencies) to 8. */
		c.src[2] = ht(LOOM_DTYPE_F32, rc->n_rot / 2, 1, 1, 1);
		for (int i = 0; i < rc->n_rot / 2; i++)
			f32(&c.src[2])[i] = 1.0f + 7.0f * (float)ref_rng_below(rng, 1000) / 1000.0f;
	} else if (extra == ROPE_YARN) {
		c.fp[2] = 1.0f;   /* ext_factor */
		c.fp[3] = 0.9f;   /* attn_factor */
		c.fp[4] = 32.0f;  /* beta_fast */
		c.fp[5] = 1.0f;   /* beta_slow */
		c.ip[2] = 4096;   /* original context */
	}

	c.src[0] = ht(LOOM_DTYPE_F32, rc->head_dim, rc->n_heads, nt, 1);
	c.src[1] = ht(LOOM_DTYPE_I32, nt, 1, 1, 1);
	c.dst = ht(LOOM_DTYPE_F32, rc->head_dim, rc->n_heads, nt, 1);
	fill_normal(rng, f32(&c.src[0]), n_elements(&c.src[0]), 1.0);
	/* Positions far into a long context, where angle rounding shows. */
	for (int64_t t = 0; t < nt; t++)
		i32(&c.src[1])[t] = t == 0 ? 0 : (int32_t)ref_rng_below(rng, 32768);
	ref = malloc(sizeof(double) * n_elements(&c.dst));
	rope_reference(&c, ref);
	static const char *const extras[] = {"", " freq factors", " yarn"};
	snprintf(c.what, sizeof(c.what), "ROPE %s hd %lld heads %lld rot %d tokens %lld base %g x%g%s%s",
		 rc->style == LOOM_ROPE_NEOX ? "neox" : "normal", (long long)rc->head_dim,
		 (long long)rc->n_heads, rc->n_rot, (long long)nt, base, freq_scale, extras[extra],
		 in_place ? " in place" : "");
	check_close(v, &c, ref, TOL_ROPE);
	free(ref);
	case_free(&c);
}

START_TEST(test_rope)
{
	variant *v = usable_variant(_i, "ROPE");
	static const rope_config configs[] = {
		{64, 8, 64, LOOM_ROPE_NORMAL}, {64, 8, 64, LOOM_ROPE_NEOX},
		{64, 4, 24, LOOM_ROPE_NEOX},   {64, 4, 16, LOOM_ROPE_NORMAL},
		{32, 2, 32, LOOM_ROPE_NEOX},   {128, 1, 128, LOOM_ROPE_NORMAL},
		{6, 3, 4, LOOM_ROPE_NEOX},     {6, 3, 2, LOOM_ROPE_NORMAL},
	};
	static const float bases[] = {1e4f, 1e6f};
	static const float freq_scales[] = {1.0f, 0.25f};
	int idx[5] = {0}, sizes[5] = {N_OF(configs), N_OF(token_counts), 2, 2, ROPE_EXTRA_COUNT};
	ref_rng rng = {8};
	int k = 0;

	if (v == NULL)
		return;
	do
		check_rope(v, &rng, &configs[idx[0]], token_counts[idx[1]], bases[idx[2]],
			   freq_scales[idx[3]], (enum rope_extra)idx[4], k++ % 3 == 0);
	while (grid_next(idx, sizes, 5));
}
END_TEST

/* ------------------------------------------------------------------------ */
/* KV_STORE                                                                 */

/* f32 values that stress the fp16 conversion: every exponent, subnormals,
 * exact ties, overflow, infinities and NaNs. */
static float awkward_f32(ref_rng *rng)
{
	uint32_t u;
	float f;

	switch (ref_rng_below(rng, 6)) {
	case 0: /* any bit pattern */
		u = (uint32_t)ref_rng_next(rng);
		break;
	case 1: /* an fp16 value plus exactly half its ulp (a tie) */
		u = (uint32_t)(ref_rng_below(rng, 0x7c00) | ref_rng_below(rng, 2) << 15);
		f = ref_fp16_to_f32((uint16_t)u);
		memcpy(&u, &f, 4);
		u |= 1u << 12;
		break;
	case 2: /* fp16 subnormal range */
		f = (float)ref_rng_uniform(rng, -0x1p-14, 0x1p-14);
		memcpy(&u, &f, 4);
		break;
	case 3: /* near the top of fp16's range */
		f = (float)ref_rng_uniform(rng, 65000.0, 66000.0);
		memcpy(&u, &f, 4);
		break;
	default:
		f = (float)ref_rng_normal(rng);
		memcpy(&u, &f, 4);
		break;
	}
	memcpy(&f, &u, 4);
	return f;
}

/* Cells for nt tokens: distinct, a shuffled prefix of 0..n_cells-1. */
static void pick_cells(ref_rng *rng, int32_t *out, int64_t nt, int64_t n_cells)
{
	int32_t *cells = malloc(sizeof(int32_t) * (size_t)n_cells);

	for (int64_t i = 0; i < n_cells; i++)
		cells[i] = (int32_t)i;
	for (int64_t i = 0; i < nt; i++) {
		int64_t j = i + ref_rng_below(rng, n_cells - i);
		int32_t tmp = cells[i];
		cells[i] = cells[j];
		cells[j] = tmp;
		out[i] = cells[i];
	}
	free(cells);
}

static void check_kv_store(variant *v, ref_rng *rng, loom_dtype type, int64_t kv, int64_t nt)
{
	const int64_t n_cells = 100;
	op_case c = {.op = LOOM_OP_KV_STORE};
	htensor want;

	c.src[0] = ht(LOOM_DTYPE_F32, kv, nt, 1, 1);
	c.src[1] = ht(LOOM_DTYPE_I32, nt, 1, 1, 1);
	c.dst = random_weights(rng, type, kv, n_cells, 1.0); /* the cache as it was */
	for (int64_t i = 0; i < kv * nt; i++)
		f32(&c.src[0])[i] = type == LOOM_DTYPE_F16 ? awkward_f32(rng) : (float)ref_rng_normal(rng);
	pick_cells(rng, i32(&c.src[1]), nt, n_cells);
	want = ht(type, kv, n_cells, 1, 1);
	memcpy(want.data, c.dst.data, packed_bytes(&want));
	for (int64_t t = 0; t < nt; t++) {
		if (type == LOOM_DTYPE_Q8_0) {
			ref_quantize_q8_0(f32(&c.src[0]) + t * kv,
					  (uint8_t *)want.data + (size_t)i32(&c.src[1])[t] * row_bytes(&want), kv);
			continue;
		}
		for (int64_t e = 0; e < kv; e++) {
			float x = f32(&c.src[0])[t * kv + e];
			int64_t at = (int64_t)i32(&c.src[1])[t] * kv + e;
			if (type == LOOM_DTYPE_F16)
				u16(&want)[at] = ref_f32_to_fp16(x);
			else
				f32(&want)[at] = x;
		}
	}
	snprintf(c.what, sizeof(c.what), "KV_STORE %s kv_dim %lld tokens %lld", dtype_name(type),
		 (long long)kv, (long long)nt);
	check_exact(v, &c, want.data);
	free(want.data);
	case_free(&c);
}

/* F32, F16 and Q8_0 caches (llama.cpp's rounding); rows up to 800. */
START_TEST(test_kv_store)
{
	variant *v = usable_variant(_i, "KV_STORE");
	static const loom_dtype types[] = {LOOM_DTYPE_F32, LOOM_DTYPE_F16, LOOM_DTYPE_Q8_0};
	static const int64_t dims[] = {5, 64, 256, 800};
	int idx[3] = {0}, sizes[3] = {N_OF(types), N_OF(dims), N_OF(token_counts)};
	ref_rng rng = {9};

	if (v == NULL)
		return;
	do
		if (dims[idx[1]] % loom_dtype_layout_of(types[idx[0]]).block == 0)
			check_kv_store(v, &rng, types[idx[0]], dims[idx[1]], token_counts[idx[2]]);
	while (grid_next(idx, sizes, 3));
}
END_TEST

/* ------------------------------------------------------------------------ */
/* ATTENTION                                                                */

typedef struct attn_shape {
	int64_t head_dim, n_head, n_head_kv, n_tokens, n_kv;
	loom_dtype type;
	int mask; /* 0 none, 1 causal with random holes, 2 finite offsets too, 3 a row all masked,
		   * 4 three sequences whose cells interleave, each token seeing its own */
} attn_shape;

/* The query row qv (hd elements) as the cache type meets it: rounded to
 * fp16 for an F16 cache (into qr), quantized to Q8_0 for a Q8_0 or Q4_0
 * cache (into xq, then integer dot products per block), as is for F32. */
static void attention_query(const htensor *k, const float *qv, int64_t hd, double *qr, uint8_t *xq)
{
	if (ref_block_elems(k->dtype) > 0)
		ref_quantize_act(LOOM_DTYPE_Q8_0, qv, xq, hd);
	for (int64_t d = 0; d < hd; d++)
		qr[d] = k->dtype == LOOM_DTYPE_F16 ? ref_round_fp16(qv[d]) : qv[d];
}

/* Score of the prepared query against kv head g of cache row j. */
static double attention_score(const htensor *k, const double *qr, const uint8_t *xq, int64_t hd, int64_t g,
			      int64_t j)
{
	double dot = 0.0;

	if (ref_block_elems(k->dtype) > 0) {
		const uint8_t *row = (const uint8_t *)k->data + j * row_bytes(k) +
				     (size_t)(g * hd / 32) * loom_dtype_layout_of(k->dtype).block_bytes;
		return ref_quant_dot(k->dtype, row, xq, hd);
	}
	for (int64_t d = 0; d < hd; d++)
		dot += qr[d] * value_at(k, j, g * hd + d);
	return dot;
}

/* The softmax's probabilities weight the values unrounded, as in a flash
 * attention (llama.cpp's non-flash path rounds them to fp16 for an F16 V
 * cache; the difference is below TOL_ATTENTION_F16). */
static void attention_reference(const op_case *c, double *ref)
{
	const htensor *q = &c->src[0], *k = &c->src[1], *vv = &c->src[2], *m = &c->src[3];
	int64_t hd = q->ne[0], nh = q->ne[1], nt = q->ne[2], n_kv = k->ne[1];
	int64_t group = c->ip[0] / c->ip[1];
	double *s = malloc(sizeof(double) * (size_t)n_kv), *qr = malloc(sizeof(double) * (size_t)hd);
	uint8_t *xq = malloc((size_t)(hd / 32 + 1) * REF_Q8_0_BLOCK_BYTES);
	/* The values as f32, each row decoded once. */
	float *vf = malloc(sizeof(float) * (size_t)(n_kv * vv->ne[0]));
	ck_assert(s != NULL && qr != NULL && xq != NULL && vf != NULL);
	for (int64_t j = 0; j < n_kv; j++)
		row_values(vv, j, vf + j * vv->ne[0]);

	for (int64_t t = 0; t < nt; t++) {
		for (int64_t h = 0; h < nh; h++) {
			int64_t g = h / group;
			double max = -INFINITY, sum = 0.0;
			double *out = ref + t * nh * hd + h * hd;
			attention_query(k, f32(q) + (t * nh + h) * hd, hd, qr, xq);
			for (int64_t j = 0; j < n_kv; j++) {
				double mv = present(m) ? f32(m)[t * n_kv + j] : 0.0;
				s[j] = mv == -INFINITY ? -INFINITY : attention_score(k, qr, xq, hd, g, j) * c->fp[0] + mv;
				max = fmax(max, s[j]);
			}
			for (int64_t d = 0; d < hd; d++)
				out[d] = 0.0;
			if (max == -INFINITY)
				continue;
			for (int64_t j = 0; j < n_kv; j++)
				sum += s[j] = exp(s[j] - max);
			for (int64_t j = 0; j < n_kv; j++) {
				if (s[j] == 0.0)
					continue;
				for (int64_t d = 0; d < hd; d++)
					out[d] += s[j] / sum * vf[j * vv->ne[0] + g * hd + d];
			}
		}
	}
	free(s);
	free(qr);
	free(xq);
	free(vf);
}

static void fill_mask(ref_rng *rng, const attn_shape *a, float *mask)
{
	if (a->mask == 4) {
		int8_t *owner = malloc((size_t)a->n_kv);
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

static double attention_tolerance(loom_dtype type)
{
	return type == LOOM_DTYPE_F16 ? TOL_ATTENTION_F16 : TOL_ATTENTION_F32;
}

static void run_attention(variant *v, const attn_shape *a, ref_rng *rng)
{
	int64_t kv_dim = a->head_dim * a->n_head_kv;
	op_case c = {.op = LOOM_OP_ATTENTION, .ip = {(int32_t)a->n_head, (int32_t)a->n_head_kv},
		     .fp = {(float)(1.0 / sqrt((double)a->head_dim))}};
	double *ref;

	c.src[0] = ht(LOOM_DTYPE_F32, a->head_dim, a->n_head, a->n_tokens, 1);
	fill_normal(rng, f32(&c.src[0]), n_elements(&c.src[0]), 1.0);
	c.src[1] = random_weights(rng, a->type, kv_dim, a->n_kv, 1.0);
	c.src[2] = random_weights(rng, a->type, kv_dim, a->n_kv, 1.0);
	if (a->mask) {
		c.src[3] = ht(LOOM_DTYPE_F32, a->n_kv, a->n_tokens, 1, 1);
		fill_mask(rng, a, f32(&c.src[3]));
	}
	c.dst = ht(LOOM_DTYPE_F32, a->head_dim * a->n_head, a->n_tokens, 1, 1);
	ref = malloc(sizeof(double) * n_elements(&c.dst));
	attention_reference(&c, ref);
	snprintf(c.what, sizeof(c.what), "ATTENTION %s hd %lld heads %lld/%lld tokens %lld kv %lld mask %d",
		 dtype_name(a->type), (long long)a->head_dim, (long long)a->n_head,
		 (long long)a->n_head_kv, (long long)a->n_tokens, (long long)a->n_kv, a->mask);
	check_close(v, &c, ref, attention_tolerance(a->type));
	free(ref);
	case_free(&c);
}

static const loom_dtype cache_types[] = {LOOM_DTYPE_F32, LOOM_DTYPE_F16, LOOM_DTYPE_Q8_0, LOOM_DTYPE_Q4_0};

START_TEST(test_attention)
{
	variant *v = usable_variant(_i, "ATTENTION");
	static const int64_t head_dims[] = {20, 64, 128};
	static const int64_t heads[][2] = {{8, 2}, {4, 1}, {4, 4}};
	static const int64_t tokens[] = {1, 3, 7};
	static const int64_t n_kvs[] = {7, 17, 64};
	int idx[5] = {0}, sizes[5] = {N_OF(cache_types), N_OF(head_dims), N_OF(heads), N_OF(tokens), N_OF(n_kvs)};
	ref_rng rng = {10};
	int k = 0;

	if (v == NULL)
		return;
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
		run_attention(v, &a, &rng);
	} while (grid_next(idx, sizes, 5));
	/* One key, one token, no mask. */
	attn_shape one = {64, 4, 1, 1, 1, LOOM_DTYPE_F16, 0};
	run_attention(v, &one, &rng);
}
END_TEST

/* The shapes where tiles, blocks of keys and chunks of the cache leave
 * remainders: 1, 7 and 33 queries; 1, 31, 513 and 4,095 cached tokens
 * (4,095 is cut into chunks whose results are merged); 1, 4 and 8 query
 * heads per kv head; masks with holes and several sequences' cells; every
 * cache type. */
START_TEST(test_attention_long)
{
	variant *v = usable_variant(_i, "ATTENTION long");
	static const int64_t tokens[] = {1, 7, 33};
	static const int64_t n_kvs[] = {1, 31, 513, 4095};
	static const int64_t groups[] = {1, 4, 8};
	int idx[3] = {0}, sizes[3] = {N_OF(tokens), N_OF(n_kvs), N_OF(groups)};
	ref_rng rng = {11};
	int k = 0;

	if (v == NULL)
		return;
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
		run_attention(v, &a, &rng);
	} while (grid_next(idx, sizes, 3));
}
END_TEST

/* A batched decode: one token of each of 16 sequences. The cache holds each
 * sequence's prompt as a run of cells, then their generated cells
 * interleaved, as decode steps of all of them leave it. Each token's output
 * is what it gets alone (its own query and mask row), bit for bit, and
 * within the usual tolerance of the reference. */
START_TEST(test_attention_batched_decode)
{
	variant *v = usable_variant(_i, "ATTENTION batched");
	enum { SEQS = 16, PROMPT = 40, GEN = 3, HD = 64 };
	const int64_t n_kv = SEQS * (PROMPT + GEN);
	static const int64_t heads[][2] = {{4, 4}, {8, 2}};
	ref_rng rng = {12};

	if (v == NULL)
		return;
	for (size_t ti = 0; ti < N_OF(cache_types); ti++) {
		for (size_t hi = 0; hi < N_OF(heads); hi++) {
			op_case c = {.op = LOOM_OP_ATTENTION, .ip = {(int32_t)heads[hi][0], (int32_t)heads[hi][1]},
				     .fp = {(float)(1.0 / sqrt((double)HD))}};
			c.src[0] = ht(LOOM_DTYPE_F32, HD, heads[hi][0], SEQS, 1);
			fill_normal(&rng, f32(&c.src[0]), n_elements(&c.src[0]), 1.0);
			c.src[1] = random_weights(&rng, cache_types[ti], HD * heads[hi][1], n_kv, 1.0);
			c.src[2] = random_weights(&rng, cache_types[ti], HD * heads[hi][1], n_kv, 1.0);
			c.src[3] = ht(LOOM_DTYPE_F32, n_kv, SEQS, 1, 1);
			for (int64_t t = 0; t < SEQS; t++)
				for (int64_t j = 0; j < n_kv; j++) {
					int64_t owner = j < SEQS * PROMPT ? j / PROMPT : (j - SEQS * PROMPT) % SEQS;
					f32(&c.src[3])[t * n_kv + j] = owner == t ? 0.0f : -INFINITY;
				}
			c.dst = ht(LOOM_DTYPE_F32, HD * heads[hi][0], SEQS, 1, 1);
			snprintf(c.what, sizeof(c.what), "ATTENTION batched decode %s heads %lld/%lld",
				 dtype_name(cache_types[ti]), (long long)heads[hi][0], (long long)heads[hi][1]);
			double *ref = malloc(sizeof(double) * n_elements(&c.dst));
			attention_reference(&c, ref);
			check_close(v, &c, ref, attention_tolerance(cache_types[ti]));
			const float *batch = exercise(v, &c);
			size_t q_row = (size_t)HD * (size_t)heads[hi][0], out_row = q_row * sizeof(float);
			for (int64_t t = 0; t < SEQS; t++) {
				op_case one = c;
				one.src[0] = ht(LOOM_DTYPE_F32, HD, heads[hi][0], 1, 1);
				memcpy(one.src[0].data, f32(&c.src[0]) + t * q_row, out_row);
				one.src[3] = ht(LOOM_DTYPE_F32, n_kv, 1, 1, 1);
				memcpy(one.src[3].data, f32(&c.src[3]) + t * n_kv, (size_t)n_kv * sizeof(float));
				one.dst = ht(LOOM_DTYPE_F32, HD * heads[hi][0], 1, 1, 1);
				snprintf(one.what, sizeof(one.what), "%s, token %lld alone", c.what, (long long)t);
				check_exact(v, &one, batch + t * q_row);
				free(one.src[0].data);
				free(one.src[3].data);
				free(one.dst.data);
			}
			free((void *)batch);
			free(ref);
			case_free(&c);
		}
	}
}
END_TEST

/* With identity K and V caches in fp16, score j is q_j and output d is p_d,
 * so the documented rounding shows directly: q to fp16 before q.k, and p
 * weighting V unrounded. Missing the first, or adding a rounding of p,
 * changes most outputs. */
START_TEST(test_attention_fp16_rounding)
{
	variant *v = usable_variant(_i, "ATTENTION fp16 rounding");
	const int64_t hd = 64, nt = 16;
	op_case c = {.op = LOOM_OP_ATTENTION, .ip = {1, 1}, .fp = {1.0f}};
	ref_rng rng = {12};
	double *ref;

	if (v == NULL)
		return;
	c.src[0] = ht(LOOM_DTYPE_F32, hd, 1, nt, 1);
	fill_normal(&rng, f32(&c.src[0]), n_elements(&c.src[0]), 3.0);
	for (int i = 1; i <= 2; i++) {
		c.src[i] = ht(LOOM_DTYPE_F16, hd, hd, 1, 1);
		for (int64_t j = 0; j < hd; j++)
			u16(&c.src[i])[j * hd + j] = ref_f32_to_fp16(1.0f);
	}
	c.dst = ht(LOOM_DTYPE_F32, hd, nt, 1, 1);
	ref = malloc(sizeof(double) * (size_t)(hd * nt));
	attention_reference(&c, ref);
	snprintf(c.what, sizeof(c.what), "ATTENTION f16 with identity caches");
	float *got = exercise(v, &c);
	int off = 0;
	for (int64_t i = 0; i < hd * nt; i++)
		off += fabs(got[i] - ref[i]) > 1e-6 * fabs(ref[i]);
	ck_assert_msg(off <= hd * nt / 50,
		      "%s on %s: %d of %lld outputs are not the probabilities of the fp16-rounded query", c.what,
		      v->name, off, (long long)(hd * nt));
	free(got);
	free(ref);
	case_free(&c);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Whole graphs: a barrier between nodes, scratch shared across ops         */

START_TEST(test_graph)
{
	variant *v = usable_variant(_i, "graph");
	if (v == NULL)
		return;
	const int64_t n = 256, n_ff = 96, nt = 5;
	ref_rng rng = {11};
	htensor x = ht(LOOM_DTYPE_F32, n, nt, 1, 1), nw = ht(LOOM_DTYPE_F32, n, 1, 1, 1);
	htensor h = ht(LOOM_DTYPE_F32, n, nt, 1, 1), g = ht(LOOM_DTYPE_F32, n_ff, nt, 1, 1);
	htensor w[3];
	/* 1 and 2 threads, whose waits at the barrier between nodes sleep
	 * (ctest sets OMP_WAIT_POLICY=passive); 2 threads that spin first, as
	 * they do by default; and 5, more than most test machines have cores,
	 * spinning and sleeping in turns. */
	static const int threads[] = {1, 2, 2, 5};
	enum { N_BACKENDS = 4 };
	const char *policy = getenv("OMP_WAIT_POLICY");
	char *saved = policy != NULL ? strdup(policy) : NULL;
	unsetenv("OMP_WAIT_POLICY");
	void *spinning = new_backend(v, threads[2]), *many = new_backend(v, threads[3]);
	if (saved != NULL)
		setenv("OMP_WAIT_POLICY", saved, 1);
	free(saved);
	void *backends[N_BACKENDS] = {v->be[0], v->be[1], spinning, many};
	float *out[N_BACKENDS];

	w[0] = random_weights(&rng, LOOM_DTYPE_Q8_0, n, n_ff, 0.1);
	w[1] = random_weights(&rng, LOOM_DTYPE_Q4_K, n, n_ff, 0.1);
	w[2] = random_weights(&rng, LOOM_DTYPE_BF16, n_ff, n, 0.1);
	fill_normal(&rng, f32(&x), n_elements(&x), 1.0);
	fill_normal(&rng, f32(&nw), (size_t)n, 1.0);
	/* y = x + Wd (silu(Wg h) * Wu h) with h = rms(x) * nw, as one graph and
	 * node by node, on each thread count: all must agree. */
	for (int k = 0; k < N_BACKENDS; k++) {
		void *be = backends[k];
		enum { X, NW, WG, WU, WD, H, G, U, S, Y, N_T };
		const htensor *layout[N_T] = {&x, &nw, &w[0], &w[1], &w[2], &h, &g, &g, &g, &h};
		dtensor d[N_T];
		for (int i = 0; i < N_T; i++)
			place(v, be, layout[i], 0, &d[i]);
		loom_node nodes[] = {
			{.op = LOOM_OP_RMS_NORM, .dst = &d[H].t, .src = {&d[X].t, &d[NW].t}, .fp = {1e-5f}},
			{.op = LOOM_OP_MATMUL, .dst = &d[G].t, .src = {&d[WG].t, &d[H].t}},
			{.op = LOOM_OP_MATMUL, .dst = &d[U].t, .src = {&d[WU].t, &d[H].t}},
			{.op = LOOM_OP_SWIGLU, .dst = &d[S].t, .src = {&d[G].t, &d[U].t}},
			{.op = LOOM_OP_MATMUL, .dst = &d[Y].t, .src = {&d[WD].t, &d[S].t}},
			{.op = LOOM_OP_ADD, .dst = &d[Y].t, .src = {&d[Y].t, &d[X].t}},
		};
		loom_graph graph = {.n_nodes = (int)N_OF(nodes), .nodes = nodes};
		size_t bytes = packed_bytes(&h);
		float *whole = malloc(bytes);
		ck_assert_int_eq(v->vt->compute(be, &graph), LOOM_OK);
		fetch(v, be, &d[Y], &h, whole, "graph");
		for (size_t i = 0; i < N_OF(nodes); i++) {
			loom_graph one = {.n_nodes = 1, .nodes = &nodes[i]};
			ck_assert_int_eq(v->vt->compute(be, &one), LOOM_OK);
		}
		out[k] = malloc(bytes);
		fetch(v, be, &d[Y], &h, out[k], "graph node by node");
		ck_assert_msg(memcmp(whole, out[k], bytes) == 0,
			      "%s: graph and node-by-node results differ (%d threads)", v->name, threads[k]);
		free(whole);
		for (int i = 0; i < N_T; i++)
			v->vt->buffer_free(be, &d[i].buf);
	}
	for (int k = 1; k < N_BACKENDS; k++) {
		ck_assert_msg(memcmp(out[0], out[k], packed_bytes(&h)) == 0,
			      "%s: graph results differ between 1 and %d threads (backend %d)", v->name, threads[k], k);
		free(out[k]);
	}
	free(out[0]);
	v->vt->free(spinning);
	v->vt->free(many);
	free(x.data);
	free(nw.data);
	free(h.data);
	free(g.data);
	for (int i = 0; i < 3; i++)
		free(w[i].data);
}
END_TEST

/* Two host threads computing on one backend instance (two contexts sharing
 * it) must each get their own answer: computes take turns over the scratch. */
typedef struct concurrent_job {
	variant *v;
	const op_case *c;
	const void *want;
	int mismatches;
} concurrent_job;

static void *concurrent_worker(void *arg)
{
	concurrent_job *job = arg;
	size_t bytes = packed_bytes(&job->c->dst);
	void *got = malloc(bytes);

	for (int i = 0; i < 20; i++) {
		run_case(job->v, 1, job->c, 0, got);
		job->mismatches += memcmp(got, job->want, bytes) != 0;
	}
	free(got);
	return NULL;
}

START_TEST(test_concurrent_compute)
{
	variant *v = usable_variant(_i, "concurrent compute");
	ref_rng rng = {13};
	op_case c[2];
	concurrent_job jobs[2];
	pthread_t tid[2];

	if (v == NULL)
		return;
	for (int k = 0; k < 2; k++) {
		int64_t n = 1024, n_out = 64, nt = 8 + 8 * k;
		c[k] = (op_case){.op = LOOM_OP_MATMUL};
		c[k].src[0] = random_weights(&rng, LOOM_DTYPE_Q8_0, n, n_out, 0.05);
		c[k].src[1] = ht(LOOM_DTYPE_F32, n, nt, 1, 1);
		c[k].dst = ht(LOOM_DTYPE_F32, n_out, nt, 1, 1);
		fill_normal(&rng, f32(&c[k].src[1]), (size_t)(n * nt), 1.0);
		snprintf(c[k].what, sizeof(c[k].what), "concurrent MATMUL %d", k);
		jobs[k] = (concurrent_job){.v = v, .c = &c[k], .want = exercise(v, &c[k])};
	}
	for (int k = 0; k < 2; k++)
		ck_assert_int_eq(pthread_create(&tid[k], NULL, concurrent_worker, &jobs[k]), 0);
	for (int k = 0; k < 2; k++) {
		pthread_join(tid[k], NULL);
		ck_assert_msg(jobs[k].mismatches == 0, "%s: %d of 20 concurrent computes went wrong",
			      v->name, jobs[k].mismatches);
		free((void *)jobs[k].want);
		case_free(&c[k]);
	}
}
END_TEST

/* ------------------------------------------------------------------------ */

static void add_variant_test(Suite *s, const char *name, const TTest *test)
{
	TCase *tc = tcase_create(name);
	tcase_set_timeout(tc, 600);
	tcase_add_loop_test(tc, test, 0, N_VARIANTS);
	suite_add_tcase(s, tc);
}

/* A test looped over n_types types x the variants. */
static void add_type_variant_test(Suite *s, const char *name, const TTest *test, int n_types)
{
	TCase *tc = tcase_create(name);
	tcase_set_timeout(tc, 600);
	tcase_add_loop_test(tc, test, 0, n_types * N_VARIANTS);
	suite_add_tcase(s, tc);
}

static Suite *cpu_ops_suite(void)
{
	Suite *s = suite_create("cpu_ops");

	add_variant_test(s, "probe", test_probe);
	add_variant_test(s, "buffers", test_buffers);
	add_variant_test(s, "init_options", test_init_options);
	add_variant_test(s, "amx_option", test_amx_option);
	add_variant_test(s, "supports", test_supports);
	add_variant_test(s, "compute_errors", test_compute_errors);
	add_variant_test(s, "get_rows", test_get_rows);
	add_variant_test(s, "get_rows_all_16bit", test_get_rows_all_16bit);
	add_variant_test(s, "get_rows_repacked", test_get_rows_repacked);
	add_variant_test(s, "rms_norm", test_rms_norm);
	add_variant_test(s, "matmul_f32", test_matmul_f32);
	add_variant_test(s, "matmul_f16", test_matmul_f16);
	add_variant_test(s, "matmul_bf16", test_matmul_bf16);
	add_type_variant_test(s, "matmul_quant", test_matmul_quant, N_OF(quant_types));
	add_variant_test(s, "matmul_ties", test_matmul_ties);
	add_variant_test(s, "matmul_repacked", test_matmul_repacked);
	add_variant_test(s, "weight_slabs", test_weight_slabs);
	add_type_variant_test(s, "matmul_tile_tails", test_matmul_tile_tails, N_OF(tail_types));
	add_variant_test(s, "matmul_decode_rows", test_matmul_decode_rows);
	add_variant_test(s, "add_mul", test_add_mul);
	add_variant_test(s, "scale", test_scale);
	add_variant_test(s, "swiglu", test_swiglu);
	add_variant_test(s, "layer_norm", test_layer_norm);
	add_variant_test(s, "gelu", test_gelu);
	add_variant_test(s, "rope", test_rope);
	add_variant_test(s, "kv_store", test_kv_store);
	add_variant_test(s, "attention", test_attention);
	add_variant_test(s, "attention_long", test_attention_long);
	add_variant_test(s, "attention_batched_decode", test_attention_batched_decode);
	add_variant_test(s, "attention_fp16_rounding", test_attention_fp16_rounding);
	add_variant_test(s, "graph", test_graph);
	add_variant_test(s, "concurrent_compute", test_concurrent_compute);
	return s;
}

LOOM_TEST_MAIN(cpu_ops_suite)
