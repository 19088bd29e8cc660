/* test_gguf.c - the GGUF format plugin: round trips through the test writer,
 * the real models of the shared data, and hostile files. */
#include "check_main.h"
#include "gguf_writer.h"
#include "plugin_host.h"
#include "testdata.h"

#include "model/meta.h"

#include <dirent.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- helpers ------------------------------------------------------------ */

/* "<fresh tmp dir for test>/<file>" in buf. */
static const char *tmp_file(char *buf, size_t size, const char *test, const char *file)
{
	const char *dir = test_tmp_dir(test);

	ck_assert_msg(dir != NULL, "cannot make a temporary directory for %s", test);
	snprintf(buf, size, "%s/%s", dir, file);
	return buf;
}

static loom_model_file *open_ok(const char *path)
{
	loom_model_file *f = test_open_gguf(path);

	ck_assert_msg(f != NULL, "open %s failed: %s", path, test_plugin_error());
	ck_assert_msg(f->struct_size >= sizeof(*f), "%s: struct_size %u", path, f->struct_size);
	return f;
}

/* Opening path must fail with a message that names the file and holds
 * `expect`. */
static void expect_open_fails(const char *path, const char *expect)
{
	loom_model_file *f = test_open_gguf(path);
	const char *err = test_plugin_error();

	if (f != NULL)
		test_close_gguf(f);
	ck_assert_msg(f == NULL, "%s opened, expected an error with \"%s\"", path, expect);
	ck_assert_msg(strstr(err, path) == err, "error does not start with the path %s: \"%s\"",
		      path, err);
	ck_assert_msg(strstr(err, expect) != NULL, "error \"%s\" lacks \"%s\"", err, expect);
}

/* ---- a file with every kind of value -------------------------------------- */

static const uint8_t u8s[] = {0, 1, 255};
static const int8_t i8s[] = {-128, 0, 127};
static const uint16_t u16s[] = {0, 1, 65535};
static const int16_t i16s[] = {-32768, -1, 32767};
static const uint32_t u32s[] = {0, 7, UINT32_MAX};
static const int32_t i32s[] = {INT32_MIN, -1, INT32_MAX};
static const float f32s[] = {-1.5f, 0.0f, 3.25e-7f};
static const bool bools[] = {true, false, true};
static const uint64_t u64s[] = {0, 1ull << 40, UINT64_MAX};
static const int64_t i64s[] = {INT64_MIN, -1, INT64_MAX};
static const double f64s[] = {-2.5, 0.1, 1e300};
static const char *const strs[] = {"alpha", "", "\xe2\x96\x81the"};

static const struct {
	const char *key;
	loom_meta_type type;
	const void *values;
	size_t elem_size;
} arrays[] = {
	{"arr.u8", LOOM_META_U8, u8s, 1},     {"arr.i8", LOOM_META_I8, i8s, 1},
	{"arr.u16", LOOM_META_U16, u16s, 2},  {"arr.i16", LOOM_META_I16, i16s, 2},
	{"arr.u32", LOOM_META_U32, u32s, 4},  {"arr.i32", LOOM_META_I32, i32s, 4},
	{"arr.f32", LOOM_META_F32, f32s, 4},  {"arr.bool", LOOM_META_BOOL, bools, 1},
	{"arr.u64", LOOM_META_U64, u64s, 8},  {"arr.i64", LOOM_META_I64, i64s, 8},
	{"arr.f64", LOOM_META_F64, f64s, 8},
};
#define N_ARRAYS (sizeof(arrays) / sizeof(arrays[0]))

static const struct {
	const char *name;
	loom_dtype dtype;
	int n_dims;
	int64_t ne[4];
	uint64_t n_bytes;
} tensor_specs[] = {
	{"f32.weight", LOOM_DTYPE_F32, 2, {5, 3, 1, 1}, 5 * 3 * 4},
	{"f16.weight", LOOM_DTYPE_F16, 1, {64, 1, 1, 1}, 64 * 2},
	{"q8_0.weight", LOOM_DTYPE_Q8_0, 2, {64, 3, 1, 1}, 2 * 34 * 3},
	{"bf16.weight", LOOM_DTYPE_BF16, 4, {3, 2, 2, 2}, 24 * 2},
};
#define N_TENSORS (sizeof(tensor_specs) / sizeof(tensor_specs[0]))

static void add_every_value(gguf_writer *w)
{
	gguf_writer_add_u8(w, "s.u8", 200);
	gguf_writer_add_i8(w, "s.i8", -100);
	gguf_writer_add_u16(w, "s.u16", 60000);
	gguf_writer_add_i16(w, "s.i16", -30000);
	gguf_writer_add_u32(w, "s.u32", 4000000000u);
	gguf_writer_add_i32(w, "s.i32", -2000000000);
	gguf_writer_add_f32(w, "s.f32", 0.1f);
	gguf_writer_add_bool(w, "s.true", true);
	gguf_writer_add_bool(w, "s.false", false);
	gguf_writer_add_u64(w, "s.u64", UINT64_MAX - 1);
	gguf_writer_add_i64(w, "s.i64", INT64_MIN + 1);
	gguf_writer_add_f64(w, "s.f64", -1.0 / 3.0);
	gguf_writer_add_string(w, "s.string", "hello, gguf");
	gguf_writer_add_string(w, "s.empty", "");
	for (size_t i = 0; i < N_ARRAYS; i++)
		gguf_writer_add_array(w, arrays[i].key, arrays[i].type, arrays[i].values, 3);
	gguf_writer_add_string_array(w, "arr.string", strs, 3);
	gguf_writer_add_array(w, "arr.empty", LOOM_META_U32, NULL, 0);
}

/* Tensor i's bytes: a pattern that differs between tensors. */
static void add_every_tensor(gguf_writer *w)
{
	for (size_t i = 0; i < N_TENSORS; i++) {
		size_t t = gguf_writer_add_tensor(w, tensor_specs[i].name, tensor_specs[i].dtype,
						  tensor_specs[i].n_dims, tensor_specs[i].ne, NULL);
		uint8_t *data = gguf_writer_tensor_data(w, t);

		for (uint64_t k = 0; k < tensor_specs[i].n_bytes; k++)
			data[k] = (uint8_t)(k * 7 + i * 31 + 1);
	}
}

static void check_scalars(const loom_model_file *f)
{
	ck_assert_uint_eq(test_meta_of(f, "s.u8", LOOM_META_U8)->v.u, 200);
	ck_assert_int_eq(test_meta_of(f, "s.i8", LOOM_META_I8)->v.i, -100);
	ck_assert_uint_eq(test_meta_of(f, "s.u16", LOOM_META_U16)->v.u, 60000);
	ck_assert_int_eq(test_meta_of(f, "s.i16", LOOM_META_I16)->v.i, -30000);
	ck_assert_uint_eq(test_meta_of(f, "s.u32", LOOM_META_U32)->v.u, 4000000000u);
	ck_assert_int_eq(test_meta_of(f, "s.i32", LOOM_META_I32)->v.i, -2000000000);
	ck_assert_msg(test_meta_of(f, "s.f32", LOOM_META_F32)->v.f == (double)0.1f, "s.f32 = %.17g",
		      test_meta_of(f, "s.f32", LOOM_META_F32)->v.f);
	ck_assert(test_meta_of(f, "s.true", LOOM_META_BOOL)->v.b);
	ck_assert(!test_meta_of(f, "s.false", LOOM_META_BOOL)->v.b);
	ck_assert_msg(test_meta_of(f, "s.u64", LOOM_META_U64)->v.u == UINT64_MAX - 1, "s.u64");
	ck_assert_msg(test_meta_of(f, "s.i64", LOOM_META_I64)->v.i == INT64_MIN + 1, "s.i64");
	ck_assert_msg(test_meta_of(f, "s.f64", LOOM_META_F64)->v.f == -1.0 / 3.0, "s.f64 = %.17g",
		      test_meta_of(f, "s.f64", LOOM_META_F64)->v.f);
	ck_assert_msg(loom_string_eq(test_meta_of(f, "s.string", LOOM_META_STRING)->v.s, "hello, gguf"),
		      "s.string");
	ck_assert_uint_eq(test_meta_of(f, "s.empty", LOOM_META_STRING)->v.s.len, 0);
}

static void check_arrays(const loom_model_file *f)
{
	const loom_meta_value *v;
	const loom_string *s;

	for (size_t i = 0; i < N_ARRAYS; i++) {
		v = test_meta_of(f, arrays[i].key, LOOM_META_ARRAY);
		ck_assert_msg(v->elem_type == arrays[i].type && v->count == 3,
			      "%s: elem_type %d count %" PRIu64, arrays[i].key, v->elem_type,
			      v->count);
		ck_assert_msg((uintptr_t)v->v.array % arrays[i].elem_size == 0,
			      "%s: array %p is not aligned", arrays[i].key, v->v.array);
		ck_assert_msg(memcmp(v->v.array, arrays[i].values, 3 * arrays[i].elem_size) == 0,
			      "%s: values differ", arrays[i].key);
	}
	v = test_meta_of(f, "arr.string", LOOM_META_ARRAY);
	ck_assert_msg(v->elem_type == LOOM_META_STRING && v->count == 3, "arr.string");
	s = v->v.array;
	for (int i = 0; i < 3; i++)
		ck_assert_msg(loom_string_eq(s[i], strs[i]), "arr.string[%d] = '%.*s'", i, (int)s[i].len,
			      s[i].data);
	/* Strings point into the mapping. */
	ck_assert_msg((const char *)s[0].data > (const char *)f->mapping &&
			      (const char *)s[0].data < (const char *)f->mapping + f->mapping_size,
		      "arr.string[0] does not point into the mapping");
	v = test_meta_of(f, "arr.empty", LOOM_META_ARRAY);
	ck_assert_msg(v->elem_type == LOOM_META_U32 && v->count == 0, "arr.empty");
}

static void check_tensors(const loom_model_file *f, gguf_writer *w, uint32_t alignment)
{
	uint64_t data_start = gguf_writer_data_section_offset(w);

	ck_assert_uint_eq(f->n_tensors, N_TENSORS);
	for (size_t i = 0; i < N_TENSORS; i++) {
		const loom_file_tensor *t = &f->tensors[i];
		uint64_t off = data_start + gguf_writer_tensor_data_offset(w, i);

		ck_assert_msg(loom_string_eq(t->name, tensor_specs[i].name), "tensor %zu is '%.*s'", i,
			      (int)t->name.len, t->name.data);
		ck_assert_msg(t->dtype == tensor_specs[i].dtype &&
				      t->n_dims == tensor_specs[i].n_dims,
			      "%s: dtype %d n_dims %d", tensor_specs[i].name, t->dtype, t->n_dims);
		for (int d = 0; d < 4; d++)
			ck_assert_msg(t->ne[d] == tensor_specs[i].ne[d], "%s: ne[%d] = %" PRId64,
				      tensor_specs[i].name, d, t->ne[d]);
		ck_assert_msg(t->n_bytes == tensor_specs[i].n_bytes, "%s: n_bytes %" PRIu64,
			      tensor_specs[i].name, t->n_bytes);
		ck_assert_msg(t->file_offset == off && off % alignment == 0,
			      "%s: file_offset %" PRIu64 ", expected %" PRIu64 " (alignment %u)",
			      tensor_specs[i].name, t->file_offset, off, alignment);
		ck_assert_msg(t->data == (const uint8_t *)f->mapping + off, "%s: data pointer",
			      tensor_specs[i].name);
		ck_assert_msg(memcmp(t->data, gguf_writer_tensor_data(w, i), t->n_bytes) == 0,
			      "%s: bytes differ", tensor_specs[i].name);
	}
}

/* _i: 0 for v2, 1 for v3; alignment 64 either way. */
START_TEST(every_type_round_trips)
{
	uint32_t version = 2 + (uint32_t)_i;
	gguf_writer *w = gguf_writer_create();
	char path[4096];
	loom_model_file *f;

	gguf_writer_set_version(w, version);
	gguf_writer_add_string(w, "general.architecture", "test");
	gguf_writer_set_alignment(w, 64);
	add_every_value(w);
	add_every_tensor(w);
	tmp_file(path, sizeof(path), version == 2 ? "gguf-every-v2" : "gguf-every-v3", "x.gguf");
	ck_assert_msg(gguf_writer_write(w, path), "cannot write %s", path);

	f = open_ok(path);
	ck_assert_str_eq(f->format, version == 2 ? "gguf v2" : "gguf v3");
	ck_assert_uint_eq(f->n_meta, 2 + 14 + N_ARRAYS + 2);
	ck_assert_uint_eq(test_meta_of(f, "general.alignment", LOOM_META_U32)->v.u, 64);
	check_scalars(f);
	check_arrays(f);
	check_tensors(f, w, 64);
	/* The last tensor (48 bytes) is padded to 64. */
	ck_assert_uint_eq(f->mapping_size, gguf_writer_data_section_offset(w) +
				gguf_writer_tensor_data_offset(w, N_TENSORS - 1) + 64);
	test_close_gguf(f);
	gguf_writer_free(w);
}
END_TEST

START_TEST(default_alignment_is_32)
{
	gguf_writer *w = gguf_writer_create();
	char path[4096];
	loom_model_file *f;

	add_every_tensor(w);
	tmp_file(path, sizeof(path), "gguf-align32", "x.gguf");
	ck_assert(gguf_writer_write(w, path));
	f = open_ok(path);
	ck_assert_uint_eq(f->n_meta, 0);
	check_tensors(f, w, 32);
	test_close_gguf(f);
	gguf_writer_free(w);
}
END_TEST

START_TEST(empty_model_opens)
{
	gguf_writer *w = gguf_writer_create();
	char path[4096];
	loom_model_file *f;

	tmp_file(path, sizeof(path), "gguf-empty-model", "x.gguf");
	ck_assert(gguf_writer_write(w, path));
	f = open_ok(path);
	ck_assert_uint_eq(f->n_meta, 0);
	ck_assert_uint_eq(f->n_tensors, 0);
	ck_assert_uint_eq(f->mapping_size, 32);
	test_close_gguf(f);
	gguf_writer_free(w);
}
END_TEST

START_TEST(descriptor_and_probe)
{
	const loom_plugin_desc *d = test_load_plugin("loom-gguf.so");
	const loom_format_vtable *vt = d->vtable;
	loom_probe_args args = {.struct_size = sizeof(args), .host = test_host(), .path = "x"};
	char why[128];

	ck_assert_uint_eq(d->kind, LOOM_PLUGIN_FORMAT);
	ck_assert_str_eq(d->name, "gguf");
	ck_assert_msg(d->version != NULL && d->version[0] != '\0', "no version string");
	ck_assert_msg(LOOM_VT_HAS(vt, open) && LOOM_VT_HAS(vt, close), "vtable slots missing");

	args.head = (const unsigned char *)"GGUF\3\0\0\0\0\0";
	args.head_len = 10;
	ck_assert_int_eq(d->probe(&args, why, sizeof(why)), 100);
	args.head = (const unsigned char *)"GGUF\2\0\0\0";
	args.head_len = 8;
	ck_assert_int_eq(d->probe(&args, why, sizeof(why)), 100);

	args.head = (const unsigned char *)"GGUF\1\0\0\0";
	why[0] = '\0';
	ck_assert_int_eq(d->probe(&args, why, sizeof(why)), 0);
	ck_assert_msg(strstr(why, "version 1") != NULL, "why = \"%s\"", why);
	args.head = (const unsigned char *)"{\"key\": 1}";
	args.head_len = 10;
	why[0] = '\0';
	ck_assert_int_eq(d->probe(&args, why, sizeof(why)), 0);
	ck_assert_msg(strstr(why, "not a GGUF file") != NULL, "why = \"%s\"", why);
	args.head_len = 0;
	ck_assert_int_eq(d->probe(&args, why, sizeof(why)), 0);
}
END_TEST

/* ---- real models ---------------------------------------------------------- */

#define STORIES "models/stories260K-f32.gguf"

START_TEST(stories260k_reads_back)
{
	char path[4096];
	loom_model_file *f;
	const loom_meta_value *v;
	const loom_string *tokens;
	const loom_file_tensor *t;
	float x;

	if (!test_data_path(path, sizeof(path), STORIES))
		return;
	f = open_ok(path);
	ck_assert_str_eq(f->format, "gguf v3");
	ck_assert_uint_eq(f->n_meta, 19);
	ck_assert_uint_eq(f->n_tensors, 48);
	ck_assert_uint_eq(f->mapping_size, 1185376);

	ck_assert_msg(loom_string_eq(test_meta_of(f, "general.architecture", LOOM_META_STRING)->v.s, "llama"),
		      "architecture");
	ck_assert_uint_eq(test_meta_of(f, "llama.embedding_length", LOOM_META_U32)->v.u, 64);
	ck_assert_uint_eq(test_meta_of(f, "llama.feed_forward_length", LOOM_META_U32)->v.u, 172);
	ck_assert_uint_eq(test_meta_of(f, "llama.block_count", LOOM_META_U32)->v.u, 5);
	ck_assert_uint_eq(test_meta_of(f, "llama.attention.head_count_kv", LOOM_META_U32)->v.u, 4);
	ck_assert_uint_eq(test_meta_of(f, "tokenizer.ggml.seperator_token_id", LOOM_META_U32)->v.u,
			  UINT32_MAX);
	ck_assert_msg(test_meta_of(f, "llama.attention.layer_norm_rms_epsilon", LOOM_META_F32)->v.f ==
			      (double)1e-5f,
		      "rms epsilon");

	v = test_meta_of(f, "tokenizer.ggml.tokens", LOOM_META_ARRAY);
	ck_assert_msg(v->elem_type == LOOM_META_STRING && v->count == 512, "tokens: %d x %" PRIu64,
		      v->elem_type, v->count);
	tokens = v->v.array;
	ck_assert_msg(loom_string_eq(tokens[0], "<unk>") && loom_string_eq(tokens[1], "<s>") &&
			      loom_string_eq(tokens[2], "</s>") && loom_string_eq(tokens[3], "<0x00>"),
		      "first tokens");
	v = test_meta_of(f, "tokenizer.ggml.token_type", LOOM_META_ARRAY);
	ck_assert_msg(v->elem_type == LOOM_META_I32 && v->count == 512, "token_type");
	ck_assert_int_eq(((const int32_t *)v->v.array)[0], 2);
	ck_assert_int_eq(((const int32_t *)v->v.array)[3], 6);
	v = test_meta_of(f, "tokenizer.ggml.scores", LOOM_META_ARRAY);
	ck_assert_msg(v->elem_type == LOOM_META_F32 && v->count == 512, "scores");

	t = test_file_tensor(f, "token_embd.weight");
	ck_assert_msg(t->dtype == LOOM_DTYPE_F32 && t->n_dims == 2 && t->ne[0] == 64 &&
			      t->ne[1] == 512 && t->ne[2] == 1 && t->n_bytes == 131072 &&
			      t->file_offset == 14176,
		      "token_embd.weight: dtype %d shape %" PRId64 "x%" PRId64 " offset %" PRIu64,
		      t->dtype, t->ne[0], t->ne[1], t->file_offset);
	memcpy(&x, t->data, sizeof(x));
	ck_assert_msg(x == -0.29474878f, "token_embd[0] = %.9g", x);
	t = test_file_tensor(f, "output_norm.weight");
	memcpy(&x, t->data, sizeof(x));
	ck_assert_msg(t->n_dims == 1 && t->ne[0] == 64 && x == 2.458309f,
		      "output_norm: n_dims %d, [0] = %.9g", t->n_dims, x);
	t = test_file_tensor(f, "blk.0.ffn_down.weight");
	ck_assert_msg(t->ne[0] == 172 && t->ne[1] == 64 && t->n_bytes == 44032, "ffn_down");
	t = test_file_tensor(f, "blk.4.ffn_norm.weight");
	ck_assert_msg(t->file_offset + t->n_bytes == f->mapping_size,
		      "last tensor ends at %" PRIu64, t->file_offset + t->n_bytes);
	test_close_gguf(f);
}
END_TEST

static bool has_suffix(const char *s, const char *suffix)
{
	size_t n = strlen(s), k = strlen(suffix);

	return n >= k && strcmp(s + n - k, suffix) == 0;
}

/* Every tensor of every shared model lies in the file; returns the count. */
static int open_models_in(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	int n = 0;

	ck_assert_msg(d != NULL, "cannot list %s", dir);
	while ((e = readdir(d)) != NULL) {
		char path[4096];
		loom_model_file *f;

		if (!has_suffix(e->d_name, ".gguf"))
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
		f = open_ok(path);
		ck_assert_msg(f->n_tensors > 0 && f->n_meta > 0, "%s: empty", path);
		for (uint64_t i = 0; i < f->n_tensors; i++) {
			const loom_file_tensor *t = &f->tensors[i];

			const uint8_t *at = (const uint8_t *)f->mapping + t->file_offset;

			ck_assert_msg(t->file_offset + t->n_bytes <= f->mapping_size &&
					      t->data == at,
				      "%s: tensor %" PRIu64 " out of place", path, i);
		}
		test_close_gguf(f);
		n++;
	}
	closedir(d);
	return n;
}

START_TEST(every_shared_model_opens)
{
	char dir[4096];
	int n;

	if (!test_data_path(dir, sizeof(dir), "models"))
		return;
	n = open_models_in(dir);
	ck_assert_msg(n >= 10, "only %d models in %s", n, dir);
	if (!test_data_path(dir, sizeof(dir), "models/synthetic"))
		return;
	n = open_models_in(dir);
	ck_assert_msg(n >= 10, "only %d models in %s", n, dir);
}
END_TEST

/* ---- writing ----------------------------------------------------------------- */

/* Writing what was read gives the same bytes back: keys, values, tensor
 * infos, alignment padding and data, for every shared v3 model. */
START_TEST(shared_models_rewrite_byte_identical)
{
	const loom_format_vtable *vt = test_load_plugin("loom-gguf.so")->vtable;
	const char *tmp = test_tmp_dir("gguf_rewrite");
	const char *names[] = {"models/stories260K-f32.gguf", "models/stories-llama-d256-q8_0.gguf",
			       "models/synthetic/llama-q4_k_m.gguf", "models/synthetic/gpt2-f32.gguf"};
	char path[4096], out[4200];

	ck_assert_msg(LOOM_VT_HAS(vt, write), "the gguf plugin has no write slot");
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		if (!test_data_path(path, sizeof(path), names[i]))
			return;
		loom_model_file *f = test_open_gguf(path);
		ck_assert_msg(f != NULL, "%s: %s", path, test_plugin_error());
		snprintf(out, sizeof(out), "%s/copy.gguf", tmp);
		loom_status st = vt->write(test_host(), out, f);
		ck_assert_msg(st == LOOM_OK, "write %s: %s", out, test_plugin_error());
		size_t a_len, b_len;
		char *a = test_read_file(path, &a_len), *b = test_read_file(out, &b_len);
		ck_assert_msg(a != NULL && b != NULL && a_len == b_len && memcmp(a, b, a_len) == 0,
			      "%s: the rewritten file differs (%zu vs %zu bytes)", names[i], a_len, b_len);
		free(a);
		free(b);
		test_close_gguf(f);
	}
}
END_TEST

START_TEST(write_to_a_bad_path_fails_cleanly)
{
	const loom_format_vtable *vt = test_load_plugin("loom-gguf.so")->vtable;
	loom_model_file empty = {.struct_size = sizeof(empty)};
	test_clear_error();
	ck_assert_int_eq(vt->write(test_host(), "/nonexistent/dir/x.gguf", &empty), LOOM_ERR_IO);
	ck_assert_msg(strstr(test_plugin_error(), "/nonexistent/dir/x.gguf") != NULL, "%s", test_plugin_error());
}
END_TEST

/* ---- hostile files ------------------------------------------------------- */

/* Cuts path to n bytes; opening it must fail as running past the end. */
static void expect_cut_refused(const char *path, uint64_t n)
{
	loom_model_file *f;

	ck_assert_msg(truncate(path, (off_t)n) == 0, "truncate %s to %" PRIu64, path, n);
	test_clear_error();
	f = test_open_gguf(path);
	if (f != NULL)
		test_close_gguf(f);
	ck_assert_msg(f == NULL, "the first %" PRIu64 " bytes opened", n);
	ck_assert_msg(strstr(test_plugin_error(), "past the end of the file") != NULL &&
			      strstr(test_plugin_error(), "offset") != NULL,
		      "cut at %" PRIu64 ": \"%s\"", n, test_plugin_error());
}

/* Every prefix of a real model must be refused: each length through the
 * header, the tensor infos and the padding after them, then a stride
 * through the data. Cutting one copy shorter step by step keeps it fast. */
START_TEST(truncated_model_is_refused)
{
	const uint64_t data_start = 14176; /* where stories260K-f32's data starts */
	const uint64_t stride = 4099;      /* prime, so cuts land at varied offsets */
	char src[4096], path[4096];
	size_t size;
	uint8_t *bytes;
	uint64_t n;

	if (!test_data_path(src, sizeof(src), STORIES))
		return;
	bytes = test_read_file(src, &size);
	ck_assert_msg(bytes != NULL && size > data_start, "cannot read %s", src);
	tmp_file(path, sizeof(path), "gguf-truncated", "cut.gguf");
	ck_assert(gguf_write_bytes(path, bytes, size));
	free(bytes);

	for (n = size - 1; n > data_start; n -= n - data_start < stride ? n - data_start : stride)
		expect_cut_refused(path, n);
	for (n = data_start; n > 0; n--)
		expect_cut_refused(path, n);
	ck_assert(truncate(path, 0) == 0);
	expect_open_fails(path, "empty file");
}
END_TEST

/* A small valid file to break: indices of its parts. */
typedef struct sample {
	gguf_writer *w;
	size_t kv[3];     /* general.name, tokenizer.ggml.tokens, ids */
	size_t tensor[2]; /* a.weight (f32 4x4), q.weight (q8_0 64x2) */
} sample;

enum { KV_NAME, KV_TOKENS, KV_IDS };
enum { T_A, T_Q };

static sample make_sample(void)
{
	static const char *const tokens[] = {"a", "bc", "def"};
	static const int32_t ids[] = {1, 2, 3};
	sample s = {.w = gguf_writer_create()};

	gguf_writer_add_string(s.w, "general.architecture", "llama");
	s.kv[KV_NAME] = gguf_writer_add_string(s.w, "general.name", "hostile");
	s.kv[KV_TOKENS] = gguf_writer_add_string_array(s.w, "tokenizer.ggml.tokens", tokens, 3);
	s.kv[KV_IDS] = gguf_writer_add_array(s.w, "ids", LOOM_META_I32, ids, 3);
	s.tensor[T_A] = gguf_writer_add_tensor(s.w, "a.weight", LOOM_DTYPE_F32, 2,
					       (int64_t[]){4, 4}, NULL);
	s.tensor[T_Q] = gguf_writer_add_tensor(s.w, "q.weight", LOOM_DTYPE_Q8_0, 2,
					       (int64_t[]){64, 2}, NULL);
	return s;
}

/* One field of a sample file overwritten with a bad value. */
typedef struct hostile_case {
	const char *label;
	enum { AT_HEADER, AT_KV, AT_KV_VALUE, AT_TENSOR } base;
	int which;       /* header offset, or index into sample.kv / sample.tensor */
	gguf_tensor_field field; /* AT_TENSOR */
	int delta;       /* bytes after that place */
	int width;       /* 4 or 8 */
	uint64_t value;
	const char *expect;
} hostile_case;

#define HEADER(label, off, width, value, expect) {label, AT_HEADER, off, 0, 0, width, value, expect}
#define KEY(label, kv, width, value, expect) {label, AT_KV, kv, 0, 0, width, value, expect}
#define VALUE(label, kv, delta, width, value, expect) \
	{label, AT_KV_VALUE, kv, 0, delta, width, value, expect}
#define TENSOR(label, t, field, delta, width, value, expect) \
	{label, AT_TENSOR, t, field, delta, width, value, expect}
#define BIG (1ull << 60)

static const hostile_case hostile_cases[] = {
	HEADER("wrong magic", 0, 4, 0x4c4d4747 /* "GGML" */, "not a GGUF file"),
	HEADER("version 1", GGUF_OFFSET_VERSION, 4, 1, "GGUF version 1 at offset 4"),
	HEADER("version 99", GGUF_OFFSET_VERSION, 4, 99, "GGUF version 99 at offset 4"),
	HEADER("big-endian", GGUF_OFFSET_VERSION, 4, 0x03000000, "big-endian"),
	HEADER("absurd n_tensors", GGUF_OFFSET_N_TENSORS, 8, BIG,
	       "n_tensors 1152921504606846976 at offset 8 runs past the end of the file"),
	HEADER("absurd n_kv", GGUF_OFFSET_N_KV, 8, UINT64_MAX,
	       "n_kv 18446744073709551615 at offset 16 runs past the end of the file"),
	KEY("key name past the end", KV_NAME, 8, BIG,
	    "key #1: key name length 1152921504606846976 at offset"),
	VALUE("string past the end", KV_NAME, 0, 8, 1ull << 32,
	      "key 'general.name': string length 4294967296 at offset"),
	VALUE("unknown value type", KV_NAME, -4, 4, 13,
	      "key 'general.name': unknown value type 13 at offset"),
	VALUE("absurd array count", KV_IDS, 4, 8, BIG,
	      "key 'ids': array count 1152921504606846976 (i32) at offset"),
	VALUE("absurd string array count", KV_TOKENS, 4, 8, UINT64_MAX,
	      "key 'tokenizer.ggml.tokens': array count 18446744073709551615 (string)"),
	VALUE("array string past the end", KV_TOKENS, 12, 8, BIG,
	      "array string length 1152921504606846976 at offset"),
	VALUE("nested array", KV_IDS, 0, 4, LOOM_META_ARRAY, "key 'ids': nested array at offset"),
	VALUE("unknown element type", KV_IDS, 0, 4, 13, "unknown array element type 13 at offset"),
	TENSOR("tensor name past the end", T_Q, GGUF_FIELD_NAME, 0, 8, BIG,
	       "tensor #1: tensor name length 1152921504606846976"),
	TENSOR("n_dims 0", T_A, GGUF_FIELD_N_DIMS, 0, 4, 0,
	       "tensor 'a.weight': n_dims 0 at offset"),
	TENSOR("n_dims 5", T_A, GGUF_FIELD_N_DIMS, 0, 4, 5,
	       "tensor 'a.weight': n_dims 5 at offset"),
	TENSOR("zero dimension", T_A, GGUF_FIELD_NE, 8, 8, 0, "ne[1] = 0 at offset"),
	TENSOR("dimension over int64", T_A, GGUF_FIELD_NE, 0, 8, 1ull << 63,
	       "ne[0] = 9223372036854775808 at offset"),
	TENSOR("element count overflows", T_A, GGUF_FIELD_NE, 8, 8, 1ull << 62,
	       "ne[1] = 4611686018427387904 at offset"),
	TENSOR("byte size overflows", T_A, GGUF_FIELD_NE, 0, 8, BIG,
	       "the size of this f32 tensor overflows 64 bits"),
	TENSOR("unknown type 77", T_A, GGUF_FIELD_TYPE, 0, 4, 77,
	       "tensor 'a.weight': unknown type 77 at offset"),
	TENSOR("unknown type 4", T_Q, GGUF_FIELD_TYPE, 0, 4, 4,
	       "tensor 'q.weight': unknown type 4 at offset"),
	TENSOR("q8_0 row of 48", T_Q, GGUF_FIELD_NE, 0, 8, 48,
	       "ne[0] = 48 is not a multiple of the q8_0 block size 32"),
	TENSOR("offset past the end", T_Q, GGUF_FIELD_OFFSET, 0, 8, 1ull << 40,
	       "tensor 'q.weight': 136 bytes of data at offset 1099511627776"),
	TENSOR("offset wraps around", T_Q, GGUF_FIELD_OFFSET, 0, 8, UINT64_MAX - 31,
	       "past the end of the file"),
	TENSOR("offset one block late", T_Q, GGUF_FIELD_OFFSET, 0, 8, 96,
	       "tensor 'q.weight': 136 bytes of data at offset 96"),
	TENSOR("misaligned offset", T_Q, GGUF_FIELD_OFFSET, 0, 8, 72,
	       "data offset 72 at offset"),
};
#define N_HOSTILE (sizeof(hostile_cases) / sizeof(hostile_cases[0]))

static uint64_t case_offset(const sample *s, const hostile_case *c)
{
	switch (c->base) {
	case AT_HEADER:
		return (uint64_t)c->which;
	case AT_KV:
		return gguf_writer_kv_offset(s->w, s->kv[c->which]);
	case AT_KV_VALUE:
		return gguf_writer_kv_value_offset(s->w, s->kv[c->which]) + c->delta;
	case AT_TENSOR:
		return gguf_writer_tensor_field_offset(s->w, s->tensor[c->which], c->field) +
		       c->delta;
	}
	ck_abort_msg("%s: bad case", c->label);
}

START_TEST(hostile_field_is_refused)
{
	const hostile_case *c = &hostile_cases[_i];
	sample s = make_sample();
	char path[4096], dir[64];
	size_t size;
	uint8_t *buf = gguf_writer_build(s.w, &size);
	uint64_t at = case_offset(&s, c);

	ck_assert_msg(at + (uint64_t)c->width <= size, "%s: offset %" PRIu64 " is outside the file",
		      c->label, at);
	if (c->width == 4)
		gguf_poke_u32(buf, at, (uint32_t)c->value);
	else
		gguf_poke_u64(buf, at, c->value);
	snprintf(dir, sizeof(dir), "gguf-hostile-%d", _i);
	tmp_file(path, sizeof(path), dir, "x.gguf");
	ck_assert_msg(gguf_write_bytes(path, buf, size), "%s: cannot write %s", c->label, path);
	expect_open_fails(path, c->expect);
	free(buf);
	gguf_writer_free(s.w);
}
END_TEST

/* A string that ends one byte past the end of the file, and one that ends
 * exactly at it (so the next read fails). */
START_TEST(string_reaching_the_end_is_refused)
{
	sample s = make_sample();
	char path[4096], expect[96];
	size_t size;
	uint8_t *buf = gguf_writer_build(s.w, &size);
	uint64_t at = gguf_writer_kv_value_offset(s.w, s.kv[KV_NAME]);
	uint64_t rest = size - (at + 8);

	tmp_file(path, sizeof(path), "gguf-string-end", "x.gguf");
	gguf_poke_u64(buf, at, rest + 1);
	ck_assert(gguf_write_bytes(path, buf, size));
	snprintf(expect, sizeof(expect), "string length %" PRIu64 " at offset %" PRIu64, rest + 1,
		 at);
	expect_open_fails(path, expect);

	gguf_poke_u64(buf, at, rest);
	ck_assert(gguf_write_bytes(path, buf, size));
	expect_open_fails(path, "key #2: key name (8 bytes) at offset");
	free(buf);
	gguf_writer_free(s.w);
}
END_TEST

/* A sample file with extra keys or tensors added by `extend`. */
static void expect_sample_fails(const char *test, void (*extend)(sample *s), const char *expect)
{
	sample s = make_sample();
	char path[4096];

	extend(&s);
	tmp_file(path, sizeof(path), test, "x.gguf");
	ck_assert(gguf_writer_write(s.w, path));
	expect_open_fails(path, expect);
	gguf_writer_free(s.w);
}

static void add_duplicate_tensor(sample *s)
{
	gguf_writer_add_tensor(s->w, "a.weight", LOOM_DTYPE_F32, 1, (int64_t[]){8}, NULL);
}

static void add_duplicate_key(sample *s)
{
	gguf_writer_add_u32(s->w, "ids", 7);
}

static void add_alignment_0(sample *s)
{
	gguf_writer_add_u32(s->w, "general.alignment", 0);
}

static void add_alignment_3(sample *s)
{
	gguf_writer_add_u32(s->w, "general.alignment", 3);
}

static void add_alignment_u64(sample *s)
{
	gguf_writer_add_u64(s->w, "general.alignment", 32);
}

START_TEST(duplicates_are_refused)
{
	expect_sample_fails("gguf-dup-tensor", add_duplicate_tensor,
			    "tensor 'a.weight': duplicate tensor name at offset");
	expect_sample_fails("gguf-dup-key", add_duplicate_key,
			    "key 'ids': duplicate key at offset");
}
END_TEST

START_TEST(bad_alignment_is_refused)
{
	expect_sample_fails("gguf-align-0", add_alignment_0,
			    "key 'general.alignment': alignment 0 at offset");
	expect_sample_fails("gguf-align-3", add_alignment_3,
			    "key 'general.alignment': alignment 3 at offset");
	expect_sample_fails("gguf-align-u64", add_alignment_u64, "has type u64, expected u32");
}
END_TEST

START_TEST(bad_paths_are_refused)
{
	char path[4096];
	const char *dir;

	dir = test_tmp_dir("gguf-paths");
	ck_assert(dir != NULL);
	snprintf(path, sizeof(path), "%s", dir);
	expect_open_fails(path, "not a regular file");
	snprintf(path, sizeof(path), "%s/absent.gguf", dir);
	expect_open_fails(path, "cannot open: No such file");
	snprintf(path, sizeof(path), "%s/empty.gguf", dir);
	ck_assert(gguf_write_bytes(path, "", 0));
	expect_open_fails(path, "empty file");
	snprintf(path, sizeof(path), "%s/short.gguf", dir);
	ck_assert(gguf_write_bytes(path, "GGU", 3));
	expect_open_fails(path, "header: magic (4 bytes) at offset 0 runs past the end");
	ck_assert(gguf_write_bytes(path, "GGUF\3\0\0\0\1\0", 10));
	expect_open_fails(path, "header: n_tensors (8 bytes) at offset 8 runs past the end");
}
END_TEST

static Suite *gguf_suite(void)
{
	Suite *s = suite_create("gguf");
	TCase *tc;

	tc = tcase_create("round_trip");
	tcase_add_loop_test(tc, every_type_round_trips, 0, 2);
	tcase_add_test(tc, default_alignment_is_32);
	tcase_add_test(tc, empty_model_opens);
	tcase_add_test(tc, descriptor_and_probe);
	suite_add_tcase(s, tc);

	tc = tcase_create("real_models");
	tcase_add_test(tc, stories260k_reads_back);
	tcase_add_test(tc, every_shared_model_opens);
	tcase_add_test(tc, shared_models_rewrite_byte_identical);
	tcase_add_test(tc, write_to_a_bad_path_fails_cleanly);
	suite_add_tcase(s, tc);

	tc = tcase_create("hostile");
	tcase_add_test(tc, truncated_model_is_refused);
	tcase_add_loop_test(tc, hostile_field_is_refused, 0, (int)N_HOSTILE);
	tcase_add_test(tc, string_reaching_the_end_is_refused);
	tcase_add_test(tc, duplicates_are_refused);
	tcase_add_test(tc, bad_alignment_is_refused);
	tcase_add_test(tc, bad_paths_are_refused);
	suite_add_tcase(s, tc);
	return s;
}

LOOM_TEST_MAIN(gguf_suite)
