/*
 * test_quant.c - the block-quantized types Q4_0 .. Q6_K and the activation
 * types Q8_1 and Q8_K:
 *
 *  - layouts: block sizes agree between the plugin ABI's table, the CPU
 *    backend's structs and the reference (cpu_ref.h);
 *  - weight quantizers: the quantize -> dequantize error stays within a
 *    stated bound per type, on Gaussian and on outlier-heavy data, and
 *    degenerate rows decode to finite values; the 32-element types come out
 *    byte for byte as llama-quantize wrote the shared models, and the
 *    K-quants' error on the same tensors is at most 5% above llama-quantize's;
 *  - activation quantizers: byte for byte the reference's;
 *  - real tensors from ../shared/models through every CPU variant's
 *    GET_ROWS (bit for bit the reference's values) and MATMUL (against the
 *    reference's integer arithmetic).
 *
 * The quantizers and row kernels are internal to the CPU plugins, which
 * export one symbol each, so their portable sources (the cpu-generic
 * variant's code) are compiled into this suite; the variants themselves run
 * through their ops, here and in test_backend_ops.c.
 */
#include "check_main.h"
#include "cpu_ref.h"
#include "plugin_host.h"
#include "testdata.h"

#include "../backends/cpu/kernels/cpu_quant.c"
#include "../backends/cpu/kernels/cpu_quant_act.c"
#include "../backends/cpu/kernels/cpu_quant_k.c"
#include "../backends/cpu/kernels/cpu_quant_k_search.c"
#include "../backends/cpu/kernels/cpu_quant_legacy.c"
#include "../backends/cpu/kernels/cpu_quant_mxfp4.c"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define N_OF(a) (sizeof(a) / sizeof((a)[0]))

/* Normalized MSE bounds of quantize -> dequantize on 16 rows of 4096:
 * N(0, 1) values, and the same with 1% of them scaled by 10. They sit about
 * 10% above what the quantizers reach (gauss / outliers: q4_0 7.3e-3 /
 * 2.1e-2, q4_1 6.1e-3 / 1.0e-2, q5_0 1.8e-3 / 5.6e-3, q5_1 1.4e-3 /
 * 2.3e-3, q8_0 2.9e-5 / 8.7e-5, q2_k 7.4e-2 / 8.1e-2, q3_k 2.1e-2 /
 * 3.5e-2, q4_k 5.1e-3 / 8.7e-3, q5_k 1.3e-3 / 2.2e-3, q6_k 3.0e-4 / 7.3e-4),
 * so a worse scale search fails here. */
typedef struct qtype {
	loom_dtype type;
	size_t block_size; /* sizeof the CPU backend's block struct */
	double bound_gauss;
	double bound_outliers;
} qtype;

static const qtype qtypes[] = {
	{LOOM_DTYPE_Q4_0, sizeof(cpu_block_q4_0), 8.0e-3, 2.3e-2},
	{LOOM_DTYPE_Q4_1, sizeof(cpu_block_q4_1), 6.7e-3, 1.1e-2},
	{LOOM_DTYPE_Q5_0, sizeof(cpu_block_q5_0), 2.0e-3, 6.1e-3},
	{LOOM_DTYPE_Q5_1, sizeof(cpu_block_q5_1), 1.6e-3, 2.6e-3},
	{LOOM_DTYPE_Q8_0, sizeof(cpu_block_q8_0), 3.2e-5, 9.6e-5},
	{LOOM_DTYPE_Q2_K, sizeof(cpu_block_q2_k), 8.2e-2, 8.9e-2},
	{LOOM_DTYPE_Q3_K, sizeof(cpu_block_q3_k), 2.4e-2, 3.9e-2},
	{LOOM_DTYPE_Q4_K, sizeof(cpu_block_q4_k), 5.7e-3, 9.6e-3},
	{LOOM_DTYPE_Q5_K, sizeof(cpu_block_q5_k), 1.4e-3, 2.4e-3},
	{LOOM_DTYPE_Q6_K, sizeof(cpu_block_q6_k), 3.3e-4, 8.0e-4},
};

#define ROUNDTRIP_N (16 * 4096)

/* MATMUL against the reference's integer arithmetic: only the f32 order of
 * the block sums differs (see test_backend_ops.c). */
#define TOL_MATMUL 1e-9

static const char *type_name(loom_dtype type)
{
	return loom_dtype_traits_of(type).name;
}

static double nmse_f32(const float *ref, const float *got, size_t n)
{
	double err = 0.0, norm = 0.0;

	for (size_t i = 0; i < n; i++) {
		double d = (double)got[i] - ref[i];
		err += d * d;
		norm += (double)ref[i] * ref[i];
	}
	return norm > 0.0 ? err / norm : err;
}

/* Index of the first element whose bits differ, or -1. */
static int64_t first_difference(const float *a, const float *b, int64_t n)
{
	for (int64_t i = 0; i < n; i++)
		if (memcmp(&a[i], &b[i], sizeof(float)) != 0)
			return i;
	return -1;
}

/* ------------------------------------------------------------------------ */
/* Layouts                                                                  */

START_TEST(test_layouts)
{
	const qtype *q = &qtypes[_i];
	loom_dtype_traits l = loom_dtype_traits_of(q->type);

	ck_assert_msg(l.block_bytes == q->block_size && ref_block_bytes(q->type) == q->block_size,
		      "%s: %zu bytes in the ABI table, %zu in the backend, %zu in the reference",
		      type_name(q->type), l.block_bytes, q->block_size, ref_block_bytes(q->type));
	ck_assert_int_eq(l.block, ref_block_elems(q->type));
	ck_assert_ptr_nonnull(cpu_quant_type_of(q->type));
	ck_assert_int_eq(cpu_quant_type_of(q->type)->act_type, ref_act_type(q->type));
	ck_assert_uint_eq(sizeof(cpu_block_q8_1), ref_block_bytes(LOOM_DTYPE_Q8_1));
	ck_assert_uint_eq(sizeof(cpu_block_q8_k), ref_block_bytes(LOOM_DTYPE_Q8_K));
	ck_assert_uint_eq(sizeof(cpu_block_q8_k), loom_dtype_traits_of(LOOM_DTYPE_Q8_K).block_bytes);
	ck_assert_ptr_null(cpu_quant_type_of(LOOM_DTYPE_Q8_K));
	ck_assert_ptr_null(cpu_quant_type_of(LOOM_DTYPE_Q8_1));
	ck_assert_ptr_null(cpu_quant_type_of(LOOM_DTYPE_F16));
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Weight quantizers                                                        */

/* Quantizes n floats and decodes them with the backend's decoder, which
 * must agree bit for bit with the reference's. Returns the decoded values
 * (malloc'd). */
static float *roundtrip(loom_dtype type, const float *x, int64_t n)
{
	const cpu_quant_type *qt = cpu_quant_type_of(type);
	uint8_t *blocks = malloc(loom_dtype_row_bytes(type, n));
	float *y = malloc(sizeof(float) * (size_t)n), *ref = malloc(sizeof(float) * (size_t)n);

	ck_assert(blocks != NULL && y != NULL && ref != NULL);
	qt->quantize(x, blocks, n);
	qt->dequantize(blocks, y, n);
	for (int64_t i = 0; i < n; i++)
		ref[i] = ref_quant_value(type, blocks, i);
	int64_t bad = first_difference(ref, y, n);
	ck_assert_msg(bad < 0, "%s: decoded element %lld is %.9g, the reference says %.9g",
		      type_name(type), (long long)bad, bad < 0 ? 0.0 : y[bad], bad < 0 ? 0.0 : ref[bad]);
	free(ref);
	free(blocks);
	return y;
}

static void gaussian(float *x, int64_t n, uint64_t seed, bool outliers)
{
	ref_rng rng = {seed};

	for (int64_t i = 0; i < n; i++) {
		x[i] = (float)ref_rng_normal(&rng);
		if (outliers && ref_rng_below(&rng, 100) == 0)
			x[i] *= 10.0f;
	}
}

START_TEST(test_roundtrip_error)
{
	const qtype *q = &qtypes[_i];
	float *x = malloc(sizeof(float) * ROUNDTRIP_N);

	for (int outliers = 0; outliers < 2; outliers++) {
		gaussian(x, ROUNDTRIP_N, 42, outliers);
		float *y = roundtrip(q->type, x, ROUNDTRIP_N);
		double e = nmse_f32(x, y, ROUNDTRIP_N), bound = outliers ? q->bound_outliers : q->bound_gauss;
		printf("quantize %-5s %s data: nmse %.3g (bound %.2g)\n", type_name(q->type),
		       outliers ? "outlier" : "gauss  ", e, bound);
		ck_assert_msg(e <= bound, "%s on %s data: nmse %.4g exceeds %.2g", type_name(q->type),
			      outliers ? "outlier-heavy" : "Gaussian", e, bound);
		free(y);
	}
	free(x);
}
END_TEST

/* Rows that stress the scale arithmetic: zeros decode to exact zeros;
 * constants, one-signed rows and lone spikes decode near the input; values
 * so small that the fp16 scales underflow decode to something finite and
 * no worse than zeros. */
START_TEST(test_degenerate_rows)
{
	const qtype *q = &qtypes[_i];
	const int64_t n = 512;
	float x[512];

	for (int kind = 0; kind < 6; kind++) {
		ref_rng rng = {7 + (uint64_t)kind};
		for (int64_t i = 0; i < n; i++) {
			double g = ref_rng_normal(&rng);
			x[i] = kind == 0   ? 0.0f
			       : kind == 1 ? 0.7f
			       : kind == 2 ? -0.7f
			       : kind == 3 ? (float)fabs(g) + 1.0f
			       : kind == 4 ? (i % 97 == 5 ? 50.0f : 0.01f * (float)g)
					   : 1e-6f * (float)g;
		}
		float *y = roundtrip(q->type, x, n);
		int64_t bad = ref_first_nonfinite(y, (size_t)n);
		ck_assert_msg(bad < 0, "%s, row kind %d: element %lld decodes to %g", type_name(q->type), kind,
			      (long long)bad, bad < 0 ? 0.0 : y[bad]);
		double e = nmse_f32(x, y, (size_t)n);
		if (kind == 0)
			ck_assert_msg(e == 0.0, "%s: zeros decode to nonzero values", type_name(q->type));
		double bound = kind == 5 ? 1.0 : 2 * q->bound_outliers;
		ck_assert_msg(e <= bound, "%s, row kind %d: nmse %.4g exceeds %.2g", type_name(q->type), kind, e,
			      bound);
		if (kind == 5)
			printf("quantize %-5s 1e-6 data: nmse %.3g\n", type_name(q->type), e);
		free(y);
	}
}
END_TEST

/* ---- against llama-quantize's files ---- */

static const loom_file_tensor *find_tensor(const loom_model_file *f, const loom_string *name)
{
	for (uint64_t i = 0; i < f->n_tensors; i++)
		if (f->tensors[i].name.len == name->len &&
		    memcmp(f->tensors[i].name.data, name->data, name->len) == 0)
			return &f->tensors[i];
	return NULL;
}

static int64_t n_elems(const loom_file_tensor *t)
{
	return t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3];
}

/* Opens models/<rel>; NULL (after a SKIP line) without the shared data. */
static loom_model_file *open_model(const char *rel)
{
	char path[4096];
	loom_model_file *f;

	if (!test_data_path(path, sizeof(path), rel))
		return NULL;
	f = test_open_gguf(path);
	ck_assert_msg(f != NULL, "%s: %s", path, test_plugin_error());
	return f;
}

/* A quantized model and the f32 model llama-quantize made it from. */
typedef struct quantized_pair {
	const char *f32;
	const char *quantized;
} quantized_pair;

static const quantized_pair legacy_pairs[] = {
	{"models/synthetic/llama-f32.gguf", "models/synthetic/llama-q4_0.gguf"},
	{"models/synthetic/llama-f32.gguf", "models/synthetic/llama-q4_1.gguf"},
	{"models/synthetic/llama-f32.gguf", "models/synthetic/llama-q5_0.gguf"},
	{"models/synthetic/llama-f32.gguf", "models/synthetic/llama-q5_1.gguf"},
	{"models/synthetic/llama-f32.gguf", "models/synthetic/llama-q8_0.gguf"},
	{"models/stories-llama-d256-f32.gguf", "models/stories-llama-d256-q4_0.gguf"},
};

/* Every tensor of the 32-element types is what loom's quantizer writes for
 * the f32 original, byte for byte (the K-quant tensors of the same files are
 * compared by error below). */
START_TEST(test_legacy_as_llama_quantize)
{
	const quantized_pair *p = &legacy_pairs[_i];
	loom_model_file *src = open_model(p->f32), *q;
	int compared = 0;

	if (src == NULL)
		return;
	q = open_model(p->quantized);
	for (uint64_t i = 0; i < q->n_tensors; i++) {
		const loom_file_tensor *t = &q->tensors[i], *orig = find_tensor(src, &t->name);
		if (ref_block_elems(t->dtype) != 32)
			continue;
		ck_assert_msg(orig != NULL && orig->dtype == LOOM_DTYPE_F32, "%s: no f32 original of %.*s",
			      p->f32, (int)t->name.len, t->name.data);
		uint8_t *mine = malloc(t->n_bytes);
		cpu_quant_type_of(t->dtype)->quantize(orig->data, mine, n_elems(t));
		size_t k = 0;
		while (k < t->n_bytes && mine[k] == ((const uint8_t *)t->data)[k])
			k++;
		ck_assert_msg(k == t->n_bytes, "%s %.*s (%s): byte %zu (block %zu) differs from llama-quantize's",
			      p->quantized, (int)t->name.len, t->name.data, type_name(t->dtype), k,
			      k / ref_block_bytes(t->dtype));
		free(mine);
		compared++;
	}
	ck_assert_int_gt(compared, 0);
	printf("%s: %d tensors byte-identical to llama-quantize\n", p->quantized, compared);
	test_close_gguf(q);
	test_close_gguf(src);
}
END_TEST

static const quantized_pair k_pairs[] = {
	{"models/synthetic/llama-f32.gguf", "models/synthetic/llama-q2_k.gguf"},
	{"models/synthetic/llama-f32.gguf", "models/synthetic/llama-q3_k.gguf"},
	{"models/synthetic/llama-f32.gguf", "models/synthetic/llama-q4_k_m.gguf"},
	{"models/stories-llama-d256-f32.gguf", "models/stories-llama-d256-q4_k_m.gguf"},
	{"models/stories-llama-d256-f32.gguf", "models/stories-llama-d256-q5_k_m.gguf"},
	{"models/stories-llama-d256-f32.gguf", "models/stories-llama-d256-q6_k.gguf"},
};

/* loom's K-quant scale search against llama-quantize's (no importance
 * matrix), on the tensors it quantized: the error may be at most 5% above
 * theirs on any tensor (measured: Q2_K 0.85x, Q3_K 0.93x, Q4_K 1.01x at
 * worst, Q5_K 0.99x, Q6_K 0.96x). */
START_TEST(test_k_quants_against_llama_quantize)
{
	const quantized_pair *p = &k_pairs[_i];
	loom_model_file *src = open_model(p->f32), *q;
	double worst = 0.0;
	int compared = 0;

	if (src == NULL)
		return;
	q = open_model(p->quantized);
	for (uint64_t i = 0; i < q->n_tensors; i++) {
		const loom_file_tensor *t = &q->tensors[i], *orig = find_tensor(src, &t->name);
		if (ref_block_elems(t->dtype) != 256)
			continue;
		ck_assert(orig != NULL && orig->dtype == LOOM_DTYPE_F32);
		int64_t n = n_elems(t);
		float *theirs = malloc(sizeof(float) * (size_t)n);
		for (int64_t e = 0; e < n; e++)
			theirs[e] = ref_quant_value(t->dtype, t->data, e);
		float *mine = roundtrip(t->dtype, orig->data, n);
		double e_mine = nmse_f32(orig->data, mine, (size_t)n);
		double e_theirs = nmse_f32(orig->data, theirs, (size_t)n);
		ck_assert_msg(e_mine <= 1.05 * e_theirs, "%s %.*s (%s): nmse %.4g, llama-quantize's %.4g",
			      p->quantized, (int)t->name.len, t->name.data, type_name(t->dtype), e_mine,
			      e_theirs);
		worst = e_mine / e_theirs > worst ? e_mine / e_theirs : worst;
		compared++;
		free(mine);
		free(theirs);
	}
	ck_assert_int_gt(compared, 0);
	printf("%s: %d K-quant tensors, error at most %.3fx llama-quantize's\n", p->quantized, compared,
	       worst);
	test_close_gguf(q);
	test_close_gguf(src);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Activation quantizers                                                    */

static const loom_dtype act_types[] = {LOOM_DTYPE_Q8_0, LOOM_DTYPE_Q8_1, LOOM_DTYPE_Q8_K};

/* Rows of 1024 that exercise the quantizers' corners: Gaussian, rounding
 * ties (an extreme of +-127 makes the scale +-1, so k + 0.5 ties), zero
 * blocks, a block whose extremes are equal and opposite (the first wins for
 * Q8_K), and huge and tiny magnitudes. */
static void activation_row(int kind, float *x, int64_t n)
{
	ref_rng rng = {100 + (uint64_t)kind};

	for (int64_t i = 0; i < n; i++) {
		double g = ref_rng_normal(&rng);
		switch (kind) {
		case 0:
			x[i] = (float)(3.0 * g);
			break;
		case 1:
			x[i] = i % 32 == 0 ? (i / 256 % 2 ? -127.0f : 127.0f) : (float)(i % 32 - 16) + 0.5f;
			break;
		case 2:
			x[i] = i / 256 % 2 ? 0.0f : (float)g;
			break;
		case 3:
			x[i] = i % 256 == 3 ? 5.0f : i % 256 == 200 ? -5.0f : (float)g;
			break;
		default:
			x[i] = (float)(g * (i / 256 % 2 ? 1e4 : 1e-4));
			break;
		}
	}
}

START_TEST(test_activation_quantizers)
{
	loom_dtype act = act_types[_i];
	const int64_t n = 1024;
	size_t bytes = loom_dtype_row_bytes(act, n);
	uint8_t *mine = malloc(bytes), *ref = malloc(bytes);
	float x[1024];

	for (int kind = 0; kind < 5; kind++) {
		activation_row(kind, x, n);
		memset(mine, 0x5a, bytes);
		cpu_quantize_act(act, x, mine, n);
		ref_quantize_act(act, x, ref, n);
		size_t k = 0;
		while (k < bytes && mine[k] == ref[k])
			k++;
		ck_assert_msg(k == bytes, "%s, row kind %d: byte %zu (block %zu) is %#x, the reference has %#x",
			      type_name(act), kind, k, k / ref_block_bytes(act), k < bytes ? mine[k] : 0,
			      k < bytes ? ref[k] : 0);
	}
	free(mine);
	free(ref);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Real tensors through the CPU plugins                                      */

static const char *const variant_files[] = {"loom-cpu-generic.so", "loom-cpu-avx2.so",
					    "loom-cpu-avx512.so"};

/* A backend instance of variant v with 2 threads; NULL (after a SKIP line)
 * if this CPU cannot run it. */
static void *open_variant(int v, const loom_backend_vtable **vt)
{
	const loom_plugin_desc *desc = test_load_plugin(variant_files[v]);
	loom_probe_args args = {.struct_size = sizeof(args), .host = test_host()};
	loom_backend_options o = {.struct_size = sizeof(o), .n_threads = 2};
	char why[256];

	if (desc->probe(&args, why, sizeof(why)) == 0) {
		printf("SKIP %s: %s\n", desc->name, why);
		return NULL;
	}
	*vt = desc->vtable;
	void *be = (*vt)->init(test_host(), &o);
	ck_assert_msg(be != NULL, "%s: init: %s", desc->name, test_plugin_error());
	return be;
}

static loom_tensor host_tensor(loom_dtype type, int64_t ne0, int64_t ne1, const void *data)
{
	loom_dtype_traits l = loom_dtype_traits_of(type);
	size_t rb = loom_dtype_row_bytes(type, ne0);

	return (loom_tensor){
		.dtype = type,
		.ne = {ne0, ne1, 1, 1},
		.nb = {l.block_bytes, rb, rb * (size_t)ne1, rb * (size_t)ne1},
		.data = (void *)data,
	};
}

static void compute_node(const loom_backend_vtable *vt, void *be, loom_node *node, const char *what)
{
	loom_graph g = {.n_nodes = 1, .nodes = node};

	ck_assert_msg(vt->supports(be, node), "%s: supports() refused it", what);
	test_clear_error();
	ck_assert_msg(vt->compute(be, &g) == LOOM_OK, "%s: compute: %s", what, test_plugin_error());
}

/* Every row through GET_ROWS, against the reference's values. */
static void check_rows(const loom_backend_vtable *vt, void *be, const loom_file_tensor *t,
		       const char *what)
{
	int64_t ne0 = t->ne[0], rows = t->ne[1];
	int32_t *idx = malloc(sizeof(int32_t) * (size_t)rows);
	float *got = malloc(sizeof(float) * (size_t)(ne0 * rows));
	float *want = malloc(sizeof(float) * (size_t)(ne0 * rows));

	for (int64_t r = 0; r < rows; r++)
		idx[r] = (int32_t)(rows - 1 - r);
	loom_tensor table = host_tensor(t->dtype, ne0, rows, t->data);
	loom_tensor ids = host_tensor(LOOM_DTYPE_I32, rows, 1, idx);
	loom_tensor out = host_tensor(LOOM_DTYPE_F32, ne0, rows, got);
	loom_node node = {.op = LOOM_OP_GET_ROWS, .dst = &out, .src = {&table, &ids}};
	compute_node(vt, be, &node, what);
	for (int64_t r = 0; r < rows; r++) {
		const uint8_t *row = (const uint8_t *)t->data + (size_t)idx[r] * table.nb[1];
		for (int64_t e = 0; e < ne0; e++)
			want[r * ne0 + e] = ref_quant_value(t->dtype, row, e);
	}
	int64_t bad = first_difference(want, got, ne0 * rows);
	ck_assert_msg(bad < 0, "%s: GET_ROWS element %lld is %.9g, the reference says %.9g", what,
		      (long long)bad, bad < 0 ? 0.0 : got[bad], bad < 0 ? 0.0 : want[bad]);
	free(idx);
	free(got);
	free(want);
}

/* Three tokens of random activations through MATMUL. */
static void check_matmul(const loom_backend_vtable *vt, void *be, const loom_file_tensor *t,
			 const char *what)
{
	const int64_t n_tok = 3;
	int64_t n = t->ne[0], n_out = t->ne[1];
	loom_dtype act = ref_act_type(t->dtype);
	float *x = malloc(sizeof(float) * (size_t)(n * n_tok));
	float *got = malloc(sizeof(float) * (size_t)(n_out * n_tok));
	double *want = malloc(sizeof(double) * (size_t)(n_out * n_tok));
	uint8_t *xq = malloc(loom_dtype_row_bytes(act, n));
	ref_rng rng = {(uint64_t)n_out};

	for (int64_t i = 0; i < n * n_tok; i++)
		x[i] = (float)ref_rng_normal(&rng);
	loom_tensor w = host_tensor(t->dtype, n, n_out, t->data);
	loom_tensor xt = host_tensor(LOOM_DTYPE_F32, n, n_tok, x);
	loom_tensor y = host_tensor(LOOM_DTYPE_F32, n_out, n_tok, got);
	loom_node node = {.op = LOOM_OP_MATMUL, .dst = &y, .src = {&w, &xt}};
	compute_node(vt, be, &node, what);
	for (int64_t k = 0; k < n_tok; k++) {
		ref_quantize_act(act, x + k * n, xq, n);
		for (int64_t o = 0; o < n_out; o++)
			want[k * n_out + o] = ref_quant_dot(t->dtype, (const uint8_t *)t->data + o * w.nb[1], xq, n);
	}
	int64_t bad = ref_first_nonfinite(got, (size_t)(n_out * n_tok));
	ck_assert_msg(bad < 0, "%s: MATMUL output %lld is %g", what, (long long)bad, bad < 0 ? 0.0 : got[bad]);
	double e = ref_nmse(want, got, (size_t)(n_out * n_tok));
	ck_assert_msg(e <= TOL_MATMUL, "%s: MATMUL nmse %.3g against the reference exceeds %.1g", what, e,
		      TOL_MATMUL);
	free(x);
	free(got);
	free(want);
	free(xq);
}

/* Between them these hold every block-quantized type: whole models in one
 * type, the Q4_K/Q5_K/Q6_K mixes, and 64-wide rows in Q5_0/Q5_1/Q8_0. */
static const char *const real_models[] = {
	"models/synthetic/llama-q4_0.gguf",      "models/synthetic/llama-q4_1.gguf",
	"models/synthetic/llama-q5_0.gguf",      "models/synthetic/llama-q5_1.gguf",
	"models/synthetic/llama-q8_0.gguf",      "models/synthetic/llama-q2_k.gguf",
	"models/synthetic/llama-q3_k.gguf",      "models/synthetic/llama-q4_k_m.gguf",
	"models/stories-llama-d256-q5_k_m.gguf", "models/stories-llama-d256-q6_k.gguf",
	"models/stories260K-q4_k_m.gguf",        "models/stories260K-q5_k_m.gguf",
};

/* Loop index: model, then variant. */
START_TEST(test_real_tensors)
{
	const char *rel = real_models[_i / (int)N_OF(variant_files)];
	const loom_backend_vtable *vt = NULL;
	loom_model_file *f = open_model(rel);
	void *be;
	int checked = 0;

	if (f == NULL)
		return;
	be = open_variant(_i % (int)N_OF(variant_files), &vt);
	if (be == NULL) {
		test_close_gguf(f);
		return;
	}
	for (uint64_t i = 0; i < f->n_tensors; i++) {
		const loom_file_tensor *t = &f->tensors[i];
		char what[256];
		if (ref_block_elems(t->dtype) == 0 || t->ne[2] != 1 || t->ne[3] != 1)
			continue;
		snprintf(what, sizeof(what), "%s %.*s (%s) on %s", rel, (int)t->name.len, t->name.data,
			 type_name(t->dtype), variant_files[_i % (int)N_OF(variant_files)]);
		check_rows(vt, be, t, what);
		check_matmul(vt, be, t, what);
		checked++;
	}
	ck_assert_int_gt(checked, 0);
	vt->free(be);
	test_close_gguf(f);
}
END_TEST

/* ------------------------------------------------------------------------ */

static void add_loop(Suite *s, const char *name, const TTest *test, int n)
{
	TCase *tc = tcase_create(name);
	tcase_set_timeout(tc, 600);
	tcase_add_loop_test(tc, test, 0, n);
	suite_add_tcase(s, tc);
}

static Suite *quant_suite(void)
{
	Suite *s = suite_create("quant");

	add_loop(s, "layouts", test_layouts, N_OF(qtypes));
	add_loop(s, "roundtrip_error", test_roundtrip_error, N_OF(qtypes));
	add_loop(s, "degenerate_rows", test_degenerate_rows, N_OF(qtypes));
	add_loop(s, "legacy_as_llama_quantize", test_legacy_as_llama_quantize, N_OF(legacy_pairs));
	add_loop(s, "k_quants_against_llama_quantize", test_k_quants_against_llama_quantize,
		 N_OF(k_pairs));
	add_loop(s, "activation_quantizers", test_activation_quantizers, N_OF(act_types));
	add_loop(s, "real_tensors", test_real_tensors, N_OF(real_models) * N_OF(variant_files));
	return s;
}

LOOM_TEST_MAIN(quant_suite)
