/*
 * test_cpu_ops.c - what the CPU backend plugins (generic, avx2, avx512, amx)
 * promise beyond the ops' results, which test_backend_ops.c checks on
 * every backend: their probes and options, buffers, supports() and
 * compute()'s refusals, weights repacked at load and the huge-page slabs
 * they live in, a decode's output independent of the tokens beside it,
 * the documented fp16 rounding of attention, whole graphs on 1 to 5
 * threads, and two host threads sharing one instance.
 *
 * A variant whose probe refuses this CPU is skipped with a SKIP line.
 */
#include "check_main.h"
#include "cpu_ref.h"
#include "fixture.h"
#include "op_case.h"
#include "op_reference.h"
#include "op_runner.h"
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
	int score_when_usable;
	bool loaded;
	const loom_plugin_desc *desc;
	op_backend b; /* name, vtable, and instances of 1 and 2 threads */
	int score;
	char why[256];
} variant;

static variant variants[N_VARIANTS] = {
	{.file = "loom-cpu-generic.so", .b.name = "cpu-generic", .score_when_usable = 10},
	{.file = "loom-cpu-avx2.so", .b.name = "cpu-avx2", .score_when_usable = 20},
	{.file = "loom-cpu-avx512.so", .b.name = "cpu-avx512", .score_when_usable = 30},
	{.file = "loom-cpu-amx.so", .b.name = "cpu-amx", .score_when_usable = 40},
};

static void *new_backend(variant *v, int n_threads)
{
	loom_backend_options o = {.struct_size = sizeof(o), .n_threads = n_threads};
	void *be = v->b.vt->init(test_host(), &o);
	ck_assert_msg(be != NULL, "%s: init(%d threads) failed: %s", v->b.name, n_threads, test_plugin_error());
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
	v->b.vt = v->desc->vtable;
	v->b.deterministic = true;
	v->score = v->desc->probe(&args, v->why, sizeof(v->why));
	if (v->score > 0) {
		v->b.be[0] = new_backend(v, 1);
		v->b.be[1] = new_backend(v, 2);
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
	printf("SKIP %s on %s: %s\n", test, v->b.name, v->why);
	return NULL;
}

/* The case's output on v: run with 1 thread on packed rows and with 2
 * threads on padded rows, which must agree bit for bit. malloc'd. */
static void *exercise(variant *v, const op_case *c)
{
	void *out[2];
	op_outputs(&v->b, c, out);
	return out[0];
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
	ck_assert_str_eq(v->desc->name, v->b.name);
	ck_assert_ptr_nonnull(v->desc->version);
	ck_assert_uint_ge(v->b.vt->struct_size, sizeof(loom_backend_vtable));
	if (cpu_has_variant_features(_i)) {
		ck_assert_msg(v->score == v->score_when_usable, "%s: score %d, expected %d (%s)", v->b.name,
			      v->score, v->score_when_usable, v->why);
		ck_assert_str_eq(v->why, "");
	} else {
		ck_assert_int_eq(v->score, 0);
		ck_assert_msg(strncmp(v->why, "CPU lacks ", 10) == 0 || strstr(v->why, "OS") != NULL ||
				      strstr(v->why, "the kernel refuses") != NULL,
			      "%s: unclear reason '%s'", v->b.name, v->why);
		printf("%s refuses this CPU: %s\n", v->b.name, v->why);
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
	be = v->b.be[0];
	ck_assert_int_eq(v->b.vt->buffer_alloc(be, 1000, &buf), LOOM_OK);
	ck_assert_uint_eq((uintptr_t)buf.base % 64, 0);
	ck_assert_uint_eq(buf.size, 1000);
	unsigned char *zeros = malloc(1000);
	ck_assert_int_eq(v->b.vt->buffer_download(be, &buf, 0, zeros, 1000), LOOM_OK);
	int nonzero = 0;
	for (int i = 0; i < 1000; i++)
		nonzero += zeros[i] != 0;
	ck_assert_msg(nonzero == 0, "%d bytes of a new buffer are not zero", nonzero);
	free(zeros);

	for (int i = 0; i < 100; i++)
		host[i] = (unsigned char)(i * 7);
	ck_assert_int_eq(v->b.vt->buffer_upload(be, &buf, 900, host, 100), LOOM_OK);
	ck_assert_int_eq(v->b.vt->buffer_download(be, &buf, 900, back, 100), LOOM_OK);
	ck_assert_mem_eq(host, back, 100);
	ck_assert_int_eq(v->b.vt->buffer_upload(be, &buf, 901, host, 100), LOOM_ERR_INVALID_ARGUMENT);
	ck_assert_int_eq(v->b.vt->buffer_upload(be, &buf, 2000, host, 0), LOOM_ERR_INVALID_ARGUMENT);
	ck_assert_int_eq(v->b.vt->buffer_download(be, &buf, 1, back, SIZE_MAX), LOOM_ERR_INVALID_ARGUMENT);
	ck_assert_int_eq(v->b.vt->buffer_download(be, &buf, SIZE_MAX, back, 2), LOOM_ERR_INVALID_ARGUMENT);
	ck_assert_int_eq(v->b.vt->buffer_upload(be, &buf, 1000, host, 0), LOOM_OK);
	v->b.vt->buffer_free(be, &buf);
	ck_assert_ptr_null(buf.base);

	ck_assert_int_eq(v->b.vt->buffer_alloc(be, 0, &buf), LOOM_OK);
	v->b.vt->buffer_free(be, &buf);

	/* Host memory is used in place and not freed with the buffer (a free
	 * of this stack array would abort under ASan). */
	ck_assert_int_eq(v->b.vt->buffer_from_host(be, host, sizeof(host), &wrapped), LOOM_OK);
	ck_assert_ptr_eq(wrapped.base, host);
	ck_assert_uint_eq(wrapped.size, sizeof(host));
	ck_assert_int_eq(v->b.vt->buffer_download(be, &wrapped, 10, back, 5), LOOM_OK);
	ck_assert_mem_eq(back, host + 10, 5);
	ck_assert_int_eq(v->b.vt->buffer_upload(be, &wrapped, 0, "\x01\x02", 2), LOOM_OK);
	ck_assert_int_eq(host[1], 2);
	ck_assert_int_eq(v->b.vt->buffer_download(be, &wrapped, 99, back, 2), LOOM_ERR_INVALID_ARGUMENT);
	v->b.vt->buffer_free(be, &wrapped);
	v->b.vt->buffer_free(be, NULL);
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
	be = v->b.vt->init(test_host(), &o);
	ck_assert_ptr_nonnull(be);
	v->b.vt->free(be);
	be = v->b.vt->init(test_host(), NULL);
	ck_assert_ptr_nonnull(be);
	v->b.vt->free(be);
	v->b.vt->free(NULL);

	o.n_options = 1;
	o.option_keys = &key;
	o.option_values = &value;
	test_clear_error();
	ck_assert_ptr_null(v->b.vt->init(test_host(), &o));
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
	void *be = v->b.vt->init(test_host(), &o);
	if (_i == V_AMX) {
		ck_assert_msg(be != NULL, "cpu-amx refuses its own option: %s", test_plugin_error());
		v->b.vt->free(be);
	} else {
		ck_assert_msg(be == NULL && strstr(test_plugin_error(), "unknown option 'amx'") != NULL,
			      "%s: error '%s'", v->b.name, test_plugin_error());
	}
}
END_TEST

/* A tensor descriptor with contiguous strides and no data (enough for
 * supports()). */
static loom_tensor desc(loom_dtype type, int64_t ne0, int64_t ne1, int64_t ne2)
{
	loom_dtype_traits l = loom_dtype_traits_of(type);
	size_t rb = l.block ? (size_t)(ne0 / l.block) * l.block_bytes : 0;
	loom_tensor t = {.dtype = type, .ne = {ne0, ne1, ne2, 1}, .nb = {l.block_bytes, rb, rb * ne1, rb * ne1 * ne2}};
	return t;
}

static bool supported(variant *v, loom_op op, loom_tensor *dst, loom_tensor *s0, loom_tensor *s1,
		      loom_tensor *s2, loom_tensor *s3, int32_t ip0, int32_t ip1)
{
	loom_node node = {.op = op, .dst = dst, .src = {s0, s1, s2, s3}, .ip = {ip0, ip1}, .fp = {1e4f, 1.0f}};
	return v->b.vt->supports(v->b.be[0], &node);
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
	/* SOFTCAP's cap must be positive and finite. */
	loom_node cap = {.op = LOOM_OP_SOFTCAP, .dst = &x, .src = {&x}, .fp = {30.0f}};
	ck_assert(v->b.vt->supports(v->b.be[0], &cap));
	cap.fp[0] = 0.0f;
	ck_assert(!v->b.vt->supports(v->b.be[0], &cap));
	cap.fp[0] = INFINITY;
	ck_assert(!v->b.vt->supports(v->b.be[0], &cap));
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
	ck_assert_int_eq(v->b.vt->compute(v->b.be[1], &g), LOOM_ERR_INVALID_ARGUMENT);
	ck_assert_msg(strstr(test_plugin_error(), "node 0") != NULL, "error '%s'", test_plugin_error());
	bad_idx[1] = -1;
	node.op = LOOM_OP_KV_STORE;
	node.dst = &t;
	node.src[0] = &o;
	ck_assert_int_eq(v->b.vt->compute(v->b.be[0], &g), LOOM_ERR_INVALID_ARGUMENT);
	/* A tensor without memory. */
	bad_idx[1] = 0;
	o.data = NULL;
	ck_assert_int_eq(v->b.vt->compute(v->b.be[0], &g), LOOM_ERR_INVALID_ARGUMENT);
	/* An unsupported node anywhere refuses the whole graph. */
	o.data = out;
	loom_node two[2] = {node, {.op = LOOM_OP_MATMUL, .dst = &o, .src = {&w, &t}}};
	g = (loom_graph){.n_nodes = 2, .nodes = two};
	test_clear_error();
	ck_assert_int_eq(v->b.vt->compute(v->b.be[0], &g), LOOM_ERR_UNSUPPORTED);
	ck_assert_msg(strstr(test_plugin_error(), "node 1") != NULL, "error '%s'", test_plugin_error());
	g.n_nodes = 0;
	ck_assert_int_eq(v->b.vt->compute(v->b.be[0], &g), LOOM_OK);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* MATMUL: decode rows, weights repacked at load                            */

/* MATMUL of random weights [n x n_out] (offered to weight_repack or not:
 * rearranged says whether the variant rearranges them) with one token,
 * then with the same token 7 times: the token's output must not depend on
 * the tokens it comes with, bit for bit. */
static void check_alone_as_with_six(variant *v, ref_rng *rng, loom_dtype type, int64_t n, int64_t n_out, bool repack,
				    bool rearranged)
{
	op_case one = {.op = LOOM_OP_MATMUL, .repack = repack}, seven = {.op = LOOM_OP_MATMUL, .repack = repack};

	one.src[0] = random_weights(rng, type, n, n_out, 1.0 / sqrt((double)n));
	one.src[1] = ht(LOOM_DTYPE_F32, n, 1, 1, 1);
	one.dst = ht(LOOM_DTYPE_F32, n_out, 1, 1, 1);
	fill_normal(rng, ht_f32(&one.src[1]), (size_t)n, 2.0);
	seven.src[0] = ht(type, n, n_out, 1, 1);
	memcpy(seven.src[0].data, one.src[0].data, ht_bytes(&one.src[0]));
	seven.src[1] = ht(LOOM_DTYPE_F32, n, 7, 1, 1);
	seven.dst = ht(LOOM_DTYPE_F32, n_out, 7, 1, 1);
	for (int t = 0; t < 7; t++)
		memcpy(ht_f32(&seven.src[1]) + t * n, ht_f32(&one.src[1]), (size_t)n * sizeof(float));
	snprintf(one.what, sizeof(one.what), "MATMUL %s [%lld x %lld] x 1 token%s", dtype_name(type), (long long)n,
		 (long long)n_out, repack ? ", repacked" : "");
	snprintf(seven.what, sizeof(seven.what), "%s", one.what);
	float *alone = exercise(v, &one), *together = exercise(v, &seven);
	if (repack)
		ck_assert_msg((op_last_repack_layout != 0) == rearranged, "%s on %s: layout %u", one.what, v->b.name,
			      op_last_repack_layout);
	for (int t = 0; t < 7; t++)
		ck_assert_msg(memcmp(alone, together + t * n_out, (size_t)n_out * sizeof(float)) == 0,
			      "%s on %s: differs from token %d of 7", one.what, v->b.name, t);
	free(alone);
	free(together);
	op_case_free(&one);
	op_case_free(&seven);
}

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
			for (size_t oi = 0; oi < N_OF(outs); oi++)
				check_alone_as_with_six(v, &rng, types[k], lens[li], outs[oi], false, false);
}
END_TEST

/* Repacked Q8_0 sums each block exactly before scaling it, the standard
 * layout (llama.cpp's order) each 4 products: outputs may differ by the
 * roundings of one f32 sum per block, at most about 3e-8 of sum |w * x|
 * each; 1e-5 of it allows 300 blocks' worth. */
static void check_rounding_apart(const op_case *c, const float *standard, const float *got, const char *name)
{
	size_t n = ht_elements(&c->dst);
	double *ref = malloc(sizeof(double) * n), *mag = malloc(sizeof(double) * n);

	matmul_reference(c, ref, mag, NULL);
	for (size_t i = 0; i < n; i++)
		ck_assert_msg(fabs((double)got[i] - (double)standard[i]) <= 1e-5 * mag[i],
			      "%s on %s: output %zu is %.9g, the standard layout's %.9g (sum |w*x| %.3g)", c->what,
			      name, i, got[i], standard[i], mag[i]);
	free(ref);
	free(mag);
}

/* c run on the standard layout, then repacked (weight_repack) or kept in
 * it: the same outputs, bit for bit, except where the layout sums in
 * another order (every rearranged type but Q4_0), within its summation
 * order's roundings. Frees c. */
static void check_repacked(variant *v, op_case *c, bool rearranged)
{
	size_t bytes = (size_t)(c->dst.ne[0] * c->dst.ne[1]) * sizeof(float);
	float *standard = exercise(v, c);
	c->repack = true;
	float *got = exercise(v, c);

	ck_assert_msg((op_last_repack_layout != 0) == rearranged, "%s on %s: layout %u", c->what, v->b.name,
		      op_last_repack_layout);
	loom_dtype type = c->src[0].dtype;
	if (!rearranged || type == LOOM_DTYPE_Q4_0)
		ck_assert_msg(memcmp(standard, got, bytes) == 0, "%s on %s: differs from the standard layout", c->what,
			      v->b.name);
	else
		check_rounding_apart(c, standard, got, v->b.name);
	free(standard);
	free(got);
	op_case_free(c);
}

/* Weights repacked at load (weight_repack): the variants with AVX-512 VNNI
 * rearrange Q4_0, Q5_0, Q8_0, MXFP4, Q4_K and Q6_K; any other weight of
 * 8 MiB or more, in every variant, is copied as it is into the backend's
 * (huge-page) memory, and smaller ones stay in the file's. For every token count and
 * for row counts that leave a group part-filled, they must give the
 * standard layout's output bit for bit (with 1 and 3 tokens the standard
 * layout goes through the tile kernels, with more Q4_0 is repacked a
 * group at a time), the other rearranged types to within their summation
 * order's roundings. */
START_TEST(test_matmul_repacked)
{
	static const loom_dtype types[] = {LOOM_DTYPE_Q4_0, LOOM_DTYPE_Q8_0, LOOM_DTYPE_Q5_0, LOOM_DTYPE_MXFP4,
					   LOOM_DTYPE_Q4_K, LOOM_DTYPE_Q6_K, LOOM_DTYPE_Q5_K, LOOM_DTYPE_F16};
	static const int64_t lens[] = {256, 2816};
	variant *v = usable_variant(_i, "MATMUL repacked");
	ref_rng rng = {11};

	if (v == NULL)
		return;
	for (size_t k = 0; k < N_OF(types); k++) {
		bool rearranged = (types[k] == LOOM_DTYPE_Q4_0 || types[k] == LOOM_DTYPE_Q8_0 ||
				   types[k] == LOOM_DTYPE_Q5_0 || types[k] == LOOM_DTYPE_MXFP4 ||
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
					fill_normal(&rng, ht_f32(&c.src[1]), (size_t)(n * n_tok), 2.0);
					snprintf(c.what, sizeof(c.what), "MATMUL %s [%lld x %lld] x %lld tokens, repacked",
						 dtype_name(types[k]), (long long)n, (long long)n_out, (long long)n_tok);
					check_repacked(v, &c, rearranged);
				}
			}
		}
	}

	/* A decode reads its run of groups of a 32-element type as two halves
	 * side by side: six groups, the last part-filled, so that one thread's
	 * run (a single thread takes four, then two) ends with a pair on it. */
	static const loom_dtype paired[] = {LOOM_DTYPE_Q4_0, LOOM_DTYPE_Q8_0, LOOM_DTYPE_Q5_0, LOOM_DTYPE_MXFP4};
	for (size_t k = 0; k < N_OF(paired) && (_i == V_AVX512 || _i == V_AMX); k++) {
		loom_dtype type = paired[k];
		op_case c = {.op = LOOM_OP_MATMUL};
		c.src[0] = random_weights(&rng, type, 256, 89, 1.0 / 16.0);
		c.src[1] = ht(LOOM_DTYPE_F32, 256, 1, 1, 1);
		c.dst = ht(LOOM_DTYPE_F32, 89, 1, 1, 1);
		fill_normal(&rng, ht_f32(&c.src[1]), 256, 2.0);
		snprintf(c.what, sizeof(c.what), "MATMUL %s [256 x 89] x 1 token, repacked", dtype_name(type));
		check_repacked(v, &c, true);
	}

	/* An F16 weight of 8 MiB, copied as it is: the same outputs. */
	for (size_t ti = 0; ti < N_OF(token_counts); ti += 3) {
		op_case c = {.op = LOOM_OP_MATMUL};
		c.src[0] = random_weights(&rng, LOOM_DTYPE_F16, 4096, 1024, 1.0 / 64.0);
		c.src[1] = ht(LOOM_DTYPE_F32, 4096, token_counts[ti], 1, 1);
		c.dst = ht(LOOM_DTYPE_F32, 1024, token_counts[ti], 1, 1);
		fill_normal(&rng, ht_f32(&c.src[1]), (size_t)(4096 * token_counts[ti]), 2.0);
		snprintf(c.what, sizeof(c.what), "MATMUL f16 [4096 x 1024] x %lld tokens, copied",
			 (long long)token_counts[ti]);
		check_repacked(v, &c, true);
	}
}
END_TEST

/* The types the variants with AVX-512 VNNI rearrange at load. */
static const loom_dtype rearranged_types[] = {LOOM_DTYPE_Q4_0,  LOOM_DTYPE_Q5_0, LOOM_DTYPE_Q8_0,
					      LOOM_DTYPE_MXFP4, LOOM_DTYPE_Q4_K, LOOM_DTYPE_Q6_K};

/* A weight repacked at load gives a token the same output alone as with
 * companions, bit for bit, in every layout, those that sum in their own
 * order included: one token against the same token 7 times (runs of 4, 2
 * and 1 tokens through the repacked kernels), over rows that leave the
 * last group part-filled. */
START_TEST(test_matmul_repacked_alone)
{
	variant *v = usable_variant(_i, "MATMUL repacked, alone");
	ref_rng rng = {13};

	if (v == NULL)
		return;
	for (size_t k = 0; k < N_OF(rearranged_types); k++)
		check_alone_as_with_six(v, &rng, rearranged_types[k], 512, 37, true, _i == V_AVX512 || _i == V_AMX);
}
END_TEST

/* GET_ROWS on a repacked table, as a tied head's copy is read for the
 * token embedding: every row of a weight whose last group is part-filled,
 * out of order, in the standard layout's values exactly. */
START_TEST(test_get_rows_repacked)
{
	const int64_t ne0 = 512, n_rows = 37;
	variant *v = usable_variant(_i, "GET_ROWS repacked");
	ref_rng rng = {12};

	if (v == NULL)
		return;
	for (size_t k = 0; k < N_OF(rearranged_types); k++) {
		op_case c = {.op = LOOM_OP_GET_ROWS, .repack = true};
		htensor want = ht(LOOM_DTYPE_F32, ne0, n_rows, 1, 1);
		c.src[0] = random_weights(&rng, rearranged_types[k], ne0, n_rows, 1.0);
		c.src[1] = ht(LOOM_DTYPE_I32, n_rows, 1, 1, 1);
		c.dst = ht(LOOM_DTYPE_F32, ne0, n_rows, 1, 1);
		for (int64_t i = 0; i < n_rows; i++) {
			int32_t row = (int32_t)((i * 11 + 3) % n_rows);
			ht_i32(&c.src[1])[i] = row;
			ht_row_values(&c.src[0], row, ht_f32(&want) + i * ne0);
		}
		snprintf(c.what, sizeof(c.what), "GET_ROWS %s [%lld x %lld], repacked", dtype_name(rearranged_types[k]),
			 (long long)ne0, (long long)n_rows);
		op_expect_bytes(&v->b, &c, want.data, false);
		ck_assert_msg((op_last_repack_layout != 0) == (_i == V_AVX512 || _i == V_AMX), "%s on %s: layout %u",
			      c.what, v->b.name, op_last_repack_layout);
		free(want.data);
		op_case_free(&c);
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
	void *be = v->b.be[0];
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
			op_place(&v->b, be, &h[k], 0, &d[k]);
			uint32_t layout = 0;
			ck_assert_msg(v->b.vt->weight_repack(be, &d[k].t, &packed[k], &layout) == LOOM_OK && layout != 0,
				      "%s: weight %d not moved", v->b.name, k);
			n++;
		}
		for (int k = 0; k < n; k++) {
			uintptr_t a = (uintptr_t)packed[k].base, lo, hi;
			ck_assert_msg(a % 64 == 0, "%s: weight %d at %#lx", v->b.name, k, (unsigned long)a);
			ck_assert_msg(mapping_of(packed[k].base, &lo, &hi), "%s: weight %d in no mapping", v->b.name, k);
			ck_assert_msg(lo % huge == 0 && hi - lo >= huge && a + packed[k].size <= hi,
				      "%s: weight %d (%zu bytes) in a mapping [%#lx, %#lx) of no whole 2 MiB page", v->b.name,
				      k, packed[k].size, (unsigned long)lo, (unsigned long)hi);
			for (int j = 0; j < k; j++)
				ck_assert_msg(a >= (uintptr_t)packed[j].base + packed[j].size ||
						      a + packed[k].size <= (uintptr_t)packed[j].base,
					      "%s: weights %d and %d overlap", v->b.name, j, k);
		}
		for (int k = 0; k < n; k++) {
			v->b.vt->buffer_free(be, &packed[k]);
			v->b.vt->buffer_free(be, &d[k].buf);
			free(h[k].data);
		}
	}
}
END_TEST

/* A batched decode: one token of each of 16 sequences. The cache holds each
 * sequence's prompt as a run of cells, then their generated cells
 * interleaved, as decode steps of all of them leave it. Each token's output
 * is what it gets alone (its own query and mask row), bit for bit
 * (test_backend_ops.c checks the batch against the reference). */
static const loom_dtype cache_types[] = {LOOM_DTYPE_F32, LOOM_DTYPE_F16, LOOM_DTYPE_Q8_0, LOOM_DTYPE_Q4_0};

START_TEST(test_attention_batched_decode)
{
	variant *v = usable_variant(_i, "ATTENTION batched");
	enum { SEQS = BATCHED_SEQS, HD = BATCHED_HEAD_DIM };
	const int64_t n_kv = SEQS * (BATCHED_PROMPT + BATCHED_GEN);
	static const int64_t heads[][2] = {{4, 4}, {8, 2}};
	ref_rng rng = {12};

	if (v == NULL)
		return;
	for (size_t ti = 0; ti < N_OF(cache_types); ti++) {
		for (size_t hi = 0; hi < N_OF(heads); hi++) {
			op_case c = batched_decode_case(&rng, cache_types[ti], heads[hi][0], heads[hi][1]);
			const float *batch = exercise(v, &c);
			size_t q_row = (size_t)HD * (size_t)heads[hi][0], out_row = q_row * sizeof(float);
			for (int64_t t = 0; t < SEQS; t++) {
				op_case one = c;
				one.src[0] = ht(LOOM_DTYPE_F32, HD, heads[hi][0], 1, 1);
				memcpy(one.src[0].data, ht_f32(&c.src[0]) + t * q_row, out_row);
				one.src[3] = ht(LOOM_DTYPE_F32, n_kv, 1, 1, 1);
				memcpy(one.src[3].data, ht_f32(&c.src[3]) + t * n_kv, (size_t)n_kv * sizeof(float));
				one.dst = ht(LOOM_DTYPE_F32, HD * heads[hi][0], 1, 1, 1);
				snprintf(one.what, sizeof(one.what), "%s, token %lld alone", c.what, (long long)t);
				op_expect_bytes(&v->b, &one, batch + t * q_row, false);
				free(one.src[0].data);
				free(one.src[3].data);
				free(one.dst.data);
			}
			free((void *)batch);
			op_case_free(&c);
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
	fill_normal(&rng, ht_f32(&c.src[0]), ht_elements(&c.src[0]), 3.0);
	for (int i = 1; i <= 2; i++) {
		c.src[i] = ht(LOOM_DTYPE_F16, hd, hd, 1, 1);
		for (int64_t j = 0; j < hd; j++)
			ht_u16(&c.src[i])[j * hd + j] = ref_f32_to_fp16(1.0f);
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
		      v->b.name, off, (long long)(hd * nt));
	free(got);
	free(ref);
	op_case_free(&c);
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
	void *backends[N_BACKENDS] = {v->b.be[0], v->b.be[1], spinning, many};
	float *out[N_BACKENDS];

	w[0] = random_weights(&rng, LOOM_DTYPE_Q8_0, n, n_ff, 0.1);
	w[1] = random_weights(&rng, LOOM_DTYPE_Q4_K, n, n_ff, 0.1);
	w[2] = random_weights(&rng, LOOM_DTYPE_BF16, n_ff, n, 0.1);
	fill_normal(&rng, ht_f32(&x), ht_elements(&x), 1.0);
	fill_normal(&rng, ht_f32(&nw), (size_t)n, 1.0);
	/* y = x + Wd (silu(Wg h) * Wu h) with h = rms(x) * nw, as one graph and
	 * node by node, on each thread count: all must agree. */
	for (int k = 0; k < N_BACKENDS; k++) {
		void *be = backends[k];
		enum { X, NW, WG, WU, WD, H, G, U, S, Y, N_T };
		const htensor *layout[N_T] = {&x, &nw, &w[0], &w[1], &w[2], &h, &g, &g, &g, &h};
		dtensor d[N_T];
		for (int i = 0; i < N_T; i++)
			op_place(&v->b, be, layout[i], 0, &d[i]);
		loom_node nodes[] = {
			{.op = LOOM_OP_RMS_NORM, .dst = &d[H].t, .src = {&d[X].t, &d[NW].t}, .fp = {1e-5f}},
			{.op = LOOM_OP_MATMUL, .dst = &d[G].t, .src = {&d[WG].t, &d[H].t}},
			{.op = LOOM_OP_MATMUL, .dst = &d[U].t, .src = {&d[WU].t, &d[H].t}},
			{.op = LOOM_OP_SWIGLU, .dst = &d[S].t, .src = {&d[G].t, &d[U].t}},
			{.op = LOOM_OP_MATMUL, .dst = &d[Y].t, .src = {&d[WD].t, &d[S].t}},
			{.op = LOOM_OP_ADD, .dst = &d[Y].t, .src = {&d[Y].t, &d[X].t}},
		};
		loom_graph graph = {.n_nodes = (int)N_OF(nodes), .nodes = nodes};
		size_t bytes = ht_bytes(&h);
		float *whole = malloc(bytes);
		ck_assert_int_eq(v->b.vt->compute(be, &graph), LOOM_OK);
		op_fetch(&v->b, be, &d[Y], &h, whole, "graph");
		for (size_t i = 0; i < N_OF(nodes); i++) {
			loom_graph one = {.n_nodes = 1, .nodes = &nodes[i]};
			ck_assert_int_eq(v->b.vt->compute(be, &one), LOOM_OK);
		}
		out[k] = malloc(bytes);
		op_fetch(&v->b, be, &d[Y], &h, out[k], "graph node by node");
		ck_assert_msg(memcmp(whole, out[k], bytes) == 0,
			      "%s: graph and node-by-node results differ (%d threads)", v->b.name, threads[k]);
		free(whole);
		for (int i = 0; i < N_T; i++)
			v->b.vt->buffer_free(be, &d[i].buf);
	}
	for (int k = 1; k < N_BACKENDS; k++) {
		ck_assert_msg(memcmp(out[0], out[k], ht_bytes(&h)) == 0,
			      "%s: graph results differ between 1 and %d threads (backend %d)", v->b.name, threads[k], k);
		free(out[k]);
	}
	free(out[0]);
	v->b.vt->free(spinning);
	v->b.vt->free(many);
	free(x.data);
	free(nw.data);
	free(h.data);
	free(g.data);
	for (int i = 0; i < 3; i++)
		free(w[i].data);
}
END_TEST

/* Part [first, first + n) of a one-row tensor. */
static loom_tensor row_part(const dtensor *d, int64_t first, int64_t n)
{
	loom_tensor t = d->t;
	t.data = (char *)t.data + first * (int64_t)sizeof(float);
	t.ne[0] = n;
	return t;
}

/* A decode's products of three weight types and two lengths (whose
 * activations take scratch of different sizes) side by side, an ADD of
 * parts of two of them, one that writes another part of the first beside
 * it, and a MUL that reads that part. The graph must give what the nodes
 * give one by one, every time, on 2 and 5 threads: a node started before
 * what it reads is written, or sharing another's scratch, would not. */
START_TEST(test_graph_independent_nodes)
{
	variant *v = usable_variant(_i, "graph of independent nodes");
	if (v == NULL)
		return;
	const int64_t k1 = 256, k2 = 2816, n1 = 96, n2 = 64, part = 32;
	ref_rng rng = {23};
	htensor x1 = ht(LOOM_DTYPE_F32, k1, 1, 1, 1), x2 = ht(LOOM_DTYPE_F32, k2, 1, 1, 1);
	htensor y1 = ht(LOOM_DTYPE_F32, n1, 1, 1, 1), y2 = ht(LOOM_DTYPE_F32, n2, 1, 1, 1);
	htensor y3 = ht(LOOM_DTYPE_F32, n2, 1, 1, 1), z = ht(LOOM_DTYPE_F32, part, 1, 1, 1);
	htensor w[3] = {
		random_weights(&rng, LOOM_DTYPE_Q4_K, k1, n1, 0.1),
		random_weights(&rng, LOOM_DTYPE_Q8_0, k2, n2, 0.1),
		random_weights(&rng, LOOM_DTYPE_F16, k1, n2, 0.1),
	};
	fill_normal(&rng, ht_f32(&x1), (size_t)k1, 1.0);
	fill_normal(&rng, ht_f32(&x2), (size_t)k2, 1.0);
	void *many = new_backend(v, 5);
	void *backends[] = {v->b.be[1], many};

	for (size_t k = 0; k < N_OF(backends); k++) {
		void *be = backends[k];
		enum { X1, X2, W1, W2, W3, Y1, Y2, Y3, Z, N_T };
		const htensor *layout[N_T] = {&x1, &x2, &w[0], &w[1], &w[2], &y1, &y2, &y3, &z};
		dtensor d[N_T];
		for (int i = 0; i < N_T; i++)
			op_place(&v->b, be, layout[i], 0, &d[i]);
		loom_tensor y1_mid = row_part(&d[Y1], part, part), y1_end = row_part(&d[Y1], 2 * part, part);
		loom_tensor y2_head = row_part(&d[Y2], 0, part), y3_head = row_part(&d[Y3], 0, part);
		loom_node nodes[] = {
			{.op = LOOM_OP_MATMUL, .dst = &d[Y1].t, .src = {&d[W1].t, &d[X1].t}},
			{.op = LOOM_OP_MATMUL, .dst = &d[Y2].t, .src = {&d[W2].t, &d[X2].t}},
			{.op = LOOM_OP_MATMUL, .dst = &d[Y3].t, .src = {&d[W3].t, &d[X1].t}},
			{.op = LOOM_OP_ADD, .dst = &d[Z].t, .src = {&y1_mid, &y2_head}},
			{.op = LOOM_OP_ADD, .dst = &y1_end, .src = {&y1_end, &y3_head}},
			{.op = LOOM_OP_MUL, .dst = &d[Z].t, .src = {&d[Z].t, &y1_end}},
		};
		float want_z[32], want_y1[96], got_z[32], got_y1[96];
		for (size_t i = 0; i < N_OF(nodes); i++) {
			loom_graph one = {.n_nodes = 1, .nodes = &nodes[i]};
			ck_assert_int_eq(v->b.vt->compute(be, &one), LOOM_OK);
		}
		op_fetch(&v->b, be, &d[Z], &z, want_z, "node by node");
		op_fetch(&v->b, be, &d[Y1], &y1, want_y1, "node by node");
		int differ = 0;
		for (int rep = 0; rep < 50; rep++) {
			loom_graph graph = {.n_nodes = (int)N_OF(nodes), .nodes = nodes};
			ck_assert_int_eq(v->b.vt->compute(be, &graph), LOOM_OK);
			op_fetch(&v->b, be, &d[Z], &z, got_z, "graph");
			op_fetch(&v->b, be, &d[Y1], &y1, got_y1, "graph");
			differ += memcmp(got_z, want_z, sizeof(got_z)) != 0 ||
				  memcmp(got_y1, want_y1, sizeof(got_y1)) != 0;
		}
		ck_assert_msg(differ == 0, "%s: %d of 50 graphs differ from the nodes run one by one (%d threads)",
			      v->b.name, differ, k == 0 ? 2 : 5);
		for (int i = 0; i < N_T; i++)
			v->b.vt->buffer_free(be, &d[i].buf);
	}
	v->b.vt->free(many);
	free(x1.data);
	free(x2.data);
	free(y1.data);
	free(y2.data);
	free(y3.data);
	free(z.data);
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
	size_t bytes = ht_bytes(&job->c->dst);
	void *got = malloc(bytes);

	for (int i = 0; i < 20; i++) {
		op_run(&job->v->b, 1, job->c, 0, got);
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
		fill_normal(&rng, ht_f32(&c[k].src[1]), (size_t)(n * nt), 1.0);
		snprintf(c[k].what, sizeof(c[k].what), "concurrent MATMUL %d", k);
		jobs[k] = (concurrent_job){.v = v, .c = &c[k], .want = exercise(v, &c[k])};
	}
	for (int k = 0; k < 2; k++)
		ck_assert_int_eq(pthread_create(&tid[k], NULL, concurrent_worker, &jobs[k]), 0);
	for (int k = 0; k < 2; k++) {
		pthread_join(tid[k], NULL);
		ck_assert_msg(jobs[k].mismatches == 0, "%s: %d of 20 concurrent computes went wrong",
			      v->b.name, jobs[k].mismatches);
		free((void *)jobs[k].want);
		op_case_free(&c[k]);
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

static Suite *cpu_ops_suite(void)
{
	Suite *s = suite_create("cpu_ops");

	add_variant_test(s, "probe", test_probe);
	add_variant_test(s, "buffers", test_buffers);
	add_variant_test(s, "init_options", test_init_options);
	add_variant_test(s, "amx_option", test_amx_option);
	add_variant_test(s, "supports", test_supports);
	add_variant_test(s, "compute_errors", test_compute_errors);
	add_variant_test(s, "get_rows_repacked", test_get_rows_repacked);
	add_variant_test(s, "matmul_repacked", test_matmul_repacked);
	add_variant_test(s, "matmul_repacked_alone", test_matmul_repacked_alone);
	add_variant_test(s, "weight_slabs", test_weight_slabs);
	add_variant_test(s, "matmul_decode_rows", test_matmul_decode_rows);
	add_variant_test(s, "attention_batched_decode", test_attention_batched_decode);
	add_variant_test(s, "attention_fp16_rounding", test_attention_fp16_rounding);
	add_variant_test(s, "graph", test_graph);
	add_variant_test(s, "graph of independent nodes", test_graph_independent_nodes);
	add_variant_test(s, "concurrent_compute", test_concurrent_compute);
	return s;
}

LOOM_TEST_MAIN(cpu_ops_suite)

