/* test_safetensors.c - the safetensors format plugin, container side:
 * files and sharded checkpoints written by the test writer, config.json as
 * metadata, the Hugging Face directories of the shared data, and hostile
 * headers and indexes. */
#include "check_main.h"
#include "plugin_host.h"
#include "st_writer.h"
#include "testdata.h"

#include "model/meta.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define PLUGIN_FILE "loom-safetensors.so"
#define INDEX_FILE "model.safetensors.index.json"

/* ---- helpers ------------------------------------------------------------ */

static const loom_format_vtable *vtable(void)
{
	return test_load_plugin(PLUGIN_FILE)->vtable;
}

static loom_model_file *open_st(const char *path)
{
	test_clear_error();
	return vtable()->open(test_host(), path);
}

static void close_st(loom_model_file *f)
{
	if (f != NULL)
		vtable()->close(f);
}

static const char *tmp_dir(const char *test)
{
	const char *dir = test_tmp_dir(test);

	ck_assert_msg(dir != NULL, "cannot make a temporary directory for %s", test);
	return dir;
}

static loom_model_file *open_ok(const char *path)
{
	loom_model_file *f = open_st(path);

	ck_assert_msg(f != NULL, "open %s failed: %s", path, test_plugin_error());
	ck_assert_msg(f->struct_size >= sizeof(*f), "%s: struct_size %u", path, f->struct_size);
	return f;
}

/* Opening path must fail with a message that starts with `who` (the file at
 * fault) and holds `expect`. */
static void expect_fails_naming(const char *path, const char *who, const char *expect)
{
	loom_model_file *f = open_st(path);
	const char *err = test_plugin_error();

	close_st(f);
	ck_assert_msg(f == NULL, "%s opened, expected an error with \"%s\"", path, expect);
	ck_assert_msg(strncmp(err, who, strlen(who)) == 0,
		      "error does not start with %s: \"%s\"", who, err);
	ck_assert_msg(strstr(err, expect) != NULL, "error \"%s\" lacks \"%s\"", err, expect);
}

static void expect_open_fails(const char *path, const char *expect)
{
	expect_fails_naming(path, path, expect);
}

static const char *join(char *buf, size_t size, const char *dir, const char *name)
{
	snprintf(buf, size, "%s/%s", dir, name);
	return buf;
}

static void write_bytes(const char *path, const void *data, size_t size)
{
	FILE *f = fopen(path, "wb");

	ck_assert_msg(f != NULL, "cannot create %s", path);
	ck_assert_msg((size == 0 || fwrite(data, 1, size, f) == size) && fclose(f) == 0,
		      "cannot write %s", path);
}

static const char *const small_config = "{\"model_type\": \"llama\", \"hidden_size\": 4}";

/* ---- one tensor of each usable dtype -------------------------------------- */

static uint8_t pattern[8][512];

static const st_tensor_spec every_dtype[] = {
	{"f32.weight", "F32", 2, {3, 5}, pattern[0]},
	{"f16.weight", "F16", 1, {64}, pattern[1]},
	{"bf16.weight", "BF16", 4, {2, 2, 2, 3}, pattern[2]},
	{"f64.weight", "F64", 2, {2, 3}, pattern[3]},
	{"i8.weight", "I8", 1, {7}, pattern[4]},
	{"i16.weight", "I16", 2, {3, 2}, pattern[5]},
	{"i32.weight", "I32", 4, {4, 1, 1, 2}, pattern[6]},
	{"scalar", "I64", 0, {0}, pattern[7]},
	{"empty.weight", "F32", 2, {0, 4}, NULL},
};
#define N_EVERY ((int)(sizeof(every_dtype) / sizeof(every_dtype[0])))

static const loom_dtype every_loom_dtype[N_EVERY] = {
	LOOM_DTYPE_F32, LOOM_DTYPE_F16, LOOM_DTYPE_BF16, LOOM_DTYPE_F64, LOOM_DTYPE_I8,
	LOOM_DTYPE_I16, LOOM_DTYPE_I32, LOOM_DTYPE_I64, LOOM_DTYPE_F32,
};

static void fill_patterns(void)
{
	for (int i = 0; i < 8; i++)
		for (int k = 0; k < 512; k++)
			pattern[i][k] = (uint8_t)(k * 7 + i * 31 + 1);
}

/* Tensor i of the file is specs[i], with its own bytes, inside the mapping,
 * aligned to its element size. */
static void check_spec(const loom_model_file *f, const st_tensor_spec *s, loom_dtype dtype)
{
	const loom_file_tensor *t = test_file_tensor(f, s->name);
	const uint8_t *map = f->mapping;
	size_t esize = loom_dtype_traits_of(dtype).block_bytes;

	ck_assert_msg(t->dtype == dtype, "%s: dtype %d, expected %d", s->name, t->dtype, dtype);
	ck_assert_msg(t->n_dims == (s->n_dims > 0 ? s->n_dims : 1), "%s: n_dims %d", s->name,
		      t->n_dims);
	for (int d = 0; d < 4; d++) {
		int64_t want = d < s->n_dims ? s->shape[s->n_dims - 1 - d] : 1;

		ck_assert_msg(t->ne[d] == want, "%s: ne[%d] = %" PRId64 ", expected %" PRId64,
			      s->name, d, t->ne[d], want);
	}
	ck_assert_msg(t->n_bytes == st_tensor_bytes(s), "%s: n_bytes %" PRIu64, s->name,
		      t->n_bytes);
	ck_assert_msg((const uint8_t *)t->data >= map &&
			      (const uint8_t *)t->data + t->n_bytes <= map + f->mapping_size,
		      "%s: data outside the mapping", s->name);
	ck_assert_msg((uintptr_t)t->data % esize == 0, "%s: data %p not aligned to %zu", s->name,
		      t->data, esize);
	ck_assert_msg(s->data == NULL || memcmp(t->data, s->data, t->n_bytes) == 0,
		      "%s: bytes differ", s->name);
}

static void check_every_dtype(const loom_model_file *f)
{
	ck_assert_uint_eq(f->n_tensors, N_EVERY);
	for (int i = 0; i < N_EVERY; i++)
		check_spec(f, &every_dtype[i], every_loom_dtype[i]);
}

START_TEST(every_dtype_round_trips)
{
	const char *dir = tmp_dir("st-every-dtype");
	char path[4096];
	loom_model_file *f;

	fill_patterns();
	join(path, sizeof(path), dir, "model.safetensors");
	ck_assert(st_write_file(path, every_dtype, N_EVERY));
	ck_assert(st_write_config(dir, small_config));

	/* By the file's path and by its directory. */
	f = open_ok(path);
	ck_assert_str_eq(f->format, "safetensors");
	check_every_dtype(f);
	for (uint64_t i = 0; i < f->n_tensors; i++) {
		const loom_file_tensor *t = &f->tensors[i];

		ck_assert_msg(t->data == (const uint8_t *)f->mapping + t->file_offset,
			      "%.*s: data is not mapping + file_offset", (int)t->name.len,
			      t->name.data);
	}
	/* Writers order tensors in the header as given. */
	ck_assert_msg(loom_string_eq(f->tensors[0].name, "f32.weight") &&
			      loom_string_eq(f->tensors[N_EVERY - 1].name, "empty.weight"),
		      "tensor order");
	close_st(f);
	f = open_ok(dir);
	check_every_dtype(f);
	close_st(f);
}
END_TEST

START_TEST(empty_checkpoint_opens)
{
	const char *dir = tmp_dir("st-empty");
	char path[4096];
	loom_model_file *f;

	join(path, sizeof(path), dir, "model.safetensors");
	ck_assert(st_write_config(dir, small_config));
	ck_assert(st_write_raw(path, "{}", NULL, 0));
	f = open_ok(dir);
	ck_assert_uint_eq(f->n_tensors, 0);
	ck_assert_msg(f->mapping != NULL && f->mapping_size > 0, "no mapping");
	ck_assert_int_eq(test_meta_of(f, "hidden_size", LOOM_META_I64)->v.i, 4);
	close_st(f);

	ck_assert(st_write_file(path, NULL, 0));
	f = open_ok(dir);
	ck_assert_uint_eq(f->n_tensors, 0);
	close_st(f);
}
END_TEST

/* ---- config.json ---------------------------------------------------------- */

static const char *const rich_config =
	"{\n"
	"  \"model_type\": \"llama\",\n"
	"  \"hidden_size\": 64,\n"
	"  \"neg\": -3,\n"
	"  \"rms_norm_eps\": 1e-05,\n"
	"  \"rope_theta\": 10000.0,\n"
	"  \"beyond_2_53\": 18014398509481984,\n"
	"  \"tie_word_embeddings\": true,\n"
	"  \"use_cache\": false,\n"
	"  \"torch_dtype\": \"float32\",\n"
	"  \"rope_scaling\": {\"factor\": 8.5, \"rope_type\": \"llama3\", \"inner\": {\"deep\": 1}},\n"
	"  \"text_config\": {\"hidden_size\": 128},\n"
	"  \"ints\": [1, 2, -3],\n"
	"  \"floats\": [0.5, 1],\n"
	"  \"architectures\": [\"LlamaForCausalLM\", \"x\"],\n"
	"  \"empty\": [],\n"
	"  \"nothing\": null,\n"
	"  \"mixed\": [1, \"a\"],\n"
	"  \"objects\": [{\"a\": 1}],\n"
	"  \"bools\": [true, false],\n"
	"  \"general\": {\"name\": \"evil\", \"architecture\": \"evil\"},\n"
	"  \"tokenizer\": {\"ggml\": {\"model\": \"evil\"}},\n"
	"  \"tokenizer_class\": \"LlamaTokenizer\"\n"
	"}\n";

static void check_array(const loom_model_file *f, const char *key, loom_meta_type elem,
			uint64_t count)
{
	const loom_meta_value *v = test_meta_of(f, key, LOOM_META_ARRAY);

	ck_assert_msg(v->elem_type == elem && v->count == count,
		      "%s: elem_type %d count %" PRIu64 ", expected %d and %" PRIu64, key,
		      v->elem_type, v->count, elem, count);
}

START_TEST(config_is_flattened)
{
	const char *dir = tmp_dir("st-config-rich");
	char path[4096];
	loom_model_file *f;
	const loom_meta_value *v;
	const loom_string *s;
	const int64_t *ints;
	const double *floats;

	join(path, sizeof(path), dir, "model.safetensors");
	ck_assert(st_write_file(path, NULL, 0));
	ck_assert(st_write_config(dir, rich_config));
	f = open_ok(dir);

	ck_assert_msg(loom_string_eq(test_meta_of(f, "general.architecture", LOOM_META_STRING)->v.s, "llama"),
		      "general.architecture");
	ck_assert_msg(loom_string_eq(test_meta_of(f, "general.name", LOOM_META_STRING)->v.s, "st-config-rich"),
		      "general.name is the directory's name");
	ck_assert_msg(loom_string_eq(test_meta_of(f, "model_type", LOOM_META_STRING)->v.s, "llama"), "model_type");
	ck_assert_int_eq(test_meta_of(f, "hidden_size", LOOM_META_I64)->v.i, 64);
	ck_assert_int_eq(test_meta_of(f, "neg", LOOM_META_I64)->v.i, -3);
	ck_assert_msg(test_meta_of(f, "rms_norm_eps", LOOM_META_F64)->v.f == 1e-05, "rms_norm_eps");
	/* An integral number is an integer, whatever its spelling. */
	ck_assert_int_eq(test_meta_of(f, "rope_theta", LOOM_META_I64)->v.i, 10000);
	ck_assert_msg(test_meta_of(f, "beyond_2_53", LOOM_META_F64)->v.f == 18014398509481984.0,
		      "beyond_2_53");
	ck_assert(test_meta_of(f, "tie_word_embeddings", LOOM_META_BOOL)->v.b);
	ck_assert(!test_meta_of(f, "use_cache", LOOM_META_BOOL)->v.b);
	ck_assert_msg(loom_string_eq(test_meta_of(f, "torch_dtype", LOOM_META_STRING)->v.s, "float32"),
		      "torch_dtype");
	ck_assert_msg(test_meta_of(f, "rope_scaling.factor", LOOM_META_F64)->v.f == 8.5, "factor");
	ck_assert_msg(loom_string_eq(test_meta_of(f, "rope_scaling.rope_type", LOOM_META_STRING)->v.s, "llama3"),
		      "rope_type");
	ck_assert_int_eq(test_meta_of(f, "rope_scaling.inner.deep", LOOM_META_I64)->v.i, 1);
	ck_assert_int_eq(test_meta_of(f, "text_config.hidden_size", LOOM_META_I64)->v.i, 128);
	ck_assert_msg(loom_string_eq(test_meta_of(f, "tokenizer_class", LOOM_META_STRING)->v.s,
			     "LlamaTokenizer"),
		      "tokenizer_class");

	check_array(f, "ints", LOOM_META_I64, 3);
	ints = test_meta_of(f, "ints", LOOM_META_ARRAY)->v.array;
	ck_assert_msg(ints[0] == 1 && ints[1] == 2 && ints[2] == -3, "ints");
	check_array(f, "floats", LOOM_META_F64, 2);
	floats = test_meta_of(f, "floats", LOOM_META_ARRAY)->v.array;
	ck_assert_msg(floats[0] == 0.5 && floats[1] == 1.0, "floats");
	check_array(f, "architectures", LOOM_META_STRING, 2);
	s = test_meta_of(f, "architectures", LOOM_META_ARRAY)->v.array;
	ck_assert_msg(loom_string_eq(s[0], "LlamaForCausalLM") && loom_string_eq(s[1], "x"), "architectures");
	check_array(f, "empty", LOOM_META_I64, 0);

	/* Left out: null, arrays with no metadata type, and the plugin's own
	 * namespaces. */
	ck_assert_msg(loom_meta_find(f, "nothing") == NULL, "null is left out");
	ck_assert_msg(loom_meta_find(f, "mixed") == NULL && loom_meta_find(f, "objects") == NULL &&
			      loom_meta_find(f, "bools") == NULL,
		      "arrays of mixed elements, objects or bools are left out");
	ck_assert_msg(loom_meta_find(f, "general.architecture")->type == LOOM_META_STRING &&
			      !loom_string_eq(loom_meta_find(f, "general.name")->v.s, "evil") &&
			      loom_meta_find(f, "tokenizer.ggml.model") == NULL,
		      "config.json reached the general. or tokenizer. keys");
	v = loom_meta_find(f, "general.architecture");
	ck_assert_msg(loom_string_eq(v->v.s, "llama"), "general.architecture was overwritten");
	/* 18 flattened values and 2 of the plugin's; nothing else. */
	ck_assert_uint_eq(f->n_meta, 20);
	close_st(f);
}
END_TEST

START_TEST(config_without_model_type_opens)
{
	const char *dir = tmp_dir("st-config-no-type");
	char path[4096];
	loom_model_file *f;

	join(path, sizeof(path), dir, "model.safetensors");
	ck_assert(st_write_file(path, NULL, 0));
	ck_assert(st_write_config(dir, "{\"hidden_size\": 8}"));
	f = open_ok(dir);
	ck_assert_msg(loom_meta_find(f, "general.architecture") == NULL,
		      "general.architecture without model_type");
	ck_assert_int_eq(test_meta_of(f, "hidden_size", LOOM_META_I64)->v.i, 8);
	close_st(f);
}
END_TEST

/* ---- shards ------------------------------------------------------------- */

/* The same tensors, whatever their order. */
static void check_same_tensors(const loom_model_file *a, const loom_model_file *b)
{
	ck_assert_uint_eq(a->n_tensors, b->n_tensors);
	for (uint64_t i = 0; i < a->n_tensors; i++) {
		const loom_file_tensor *x = &a->tensors[i];
		char name[256];
		const loom_file_tensor *y;

		snprintf(name, sizeof(name), "%.*s", (int)x->name.len, x->name.data);
		y = test_file_tensor(b, name);

		ck_assert_msg(x->dtype == y->dtype && x->n_dims == y->n_dims &&
				      memcmp(x->ne, y->ne, sizeof(x->ne)) == 0 &&
				      x->n_bytes == y->n_bytes &&
				      memcmp(x->data, y->data, x->n_bytes) == 0,
			      "tensor %.*s differs", (int)x->name.len, x->name.data);
	}
}

/* specs[] written by st_write_sharded: shard s lies whole in its
 * page-aligned slot of the mapping, and its tensors (specs[k] for the k
 * with k * n_shards / n == s, in order) at their offsets in it. */
static void check_shard_slots(const loom_model_file *f, const char *dir,
			      const st_tensor_spec *specs, int n, int n_shards)
{
	const uint8_t *slot = f->mapping;
	size_t page = (size_t)sysconf(_SC_PAGESIZE);
	int k = 0;

	ck_assert_uint_eq(f->n_tensors, (uint64_t)n);
	for (int s = 0; s < n_shards; s++) {
		char name[64], path[4096];
		size_t size;
		uint8_t *bytes;

		st_shard_name(name, sizeof(name), s, n_shards);
		bytes = test_read_file(join(path, sizeof(path), dir, name), &size);
		ck_assert_msg(bytes != NULL, "cannot read %s", path);
		ck_assert_msg(memcmp(slot, bytes, size) == 0, "shard %d is not at its slot", s);
		for (; k < n && k * n_shards / n == s; k++) {
			const loom_file_tensor *t = &f->tensors[k];

			ck_assert_msg(loom_string_eq(t->name, specs[k].name), "tensor %d is not %s", k,
				      specs[k].name);
			ck_assert_msg(t->data == slot + t->file_offset &&
					      t->file_offset + t->n_bytes <= size,
				      "%s: file_offset %" PRIu64 " in shard %d", specs[k].name,
				      t->file_offset, s);
		}
		slot += (size + page - 1) / page * page;
		free(bytes);
	}
	ck_assert_uint_eq(f->mapping_size, (uint64_t)(slot - (const uint8_t *)f->mapping));
}

START_TEST(sharded_matches_single)
{
	char one[4096], many[4096], path[4096];
	loom_model_file *a, *b;

	fill_patterns();
	snprintf(one, sizeof(one), "%s", tmp_dir("st-one"));
	snprintf(many, sizeof(many), "%s", tmp_dir("st-many"));
	ck_assert(st_write_file(join(path, sizeof(path), one, "model.safetensors"), every_dtype,
				N_EVERY));
	ck_assert(st_write_sharded(many, every_dtype, N_EVERY, 3));
	ck_assert(st_write_config(one, small_config));
	ck_assert(st_write_config(many, small_config));

	a = open_ok(one);
	b = open_ok(many);
	ck_assert_str_eq(b->format, "safetensors (3 shards)");
	check_same_tensors(a, b);
	check_every_dtype(b);
	check_shard_slots(b, many, every_dtype, N_EVERY, 3);
	close_st(b);
	/* By the index's own path. */
	b = open_ok(join(path, sizeof(path), many, INDEX_FILE));
	ck_assert_str_eq(b->format, "safetensors (3 shards)");
	check_same_tensors(a, b);
	close_st(b);
	close_st(a);
}
END_TEST

START_TEST(index_wins_over_single_file)
{
	const char *dir = tmp_dir("st-index-wins");
	const st_tensor_spec other = {"other.weight", "F32", 1, {2}, NULL};
	char path[4096];
	loom_model_file *f;

	fill_patterns();
	ck_assert(st_write_sharded(dir, every_dtype, N_EVERY, 2));
	ck_assert(st_write_file(join(path, sizeof(path), dir, "model.safetensors"), &other, 1));
	ck_assert(st_write_config(dir, small_config));
	f = open_ok(dir);
	ck_assert_str_eq(f->format, "safetensors (2 shards)");
	check_every_dtype(f);
	close_st(f);
}
END_TEST

/* A tensor a shard holds but the index does not name is kept. */
START_TEST(index_may_leave_tensors_out)
{
	const char *dir = tmp_dir("st-index-partial");
	const st_tensor_spec t[] = {
		{"a", "F32", 1, {2}, NULL},
		{"b", "F16", 1, {2}, NULL},
	};
	char path[4096];
	loom_model_file *f;

	ck_assert(st_write_sharded(dir, t, 2, 1));
	ck_assert(st_write_config(dir, small_config));
	test_write_file(path, sizeof(path), dir, INDEX_FILE,
			"{\"weight_map\": {\"a\": \"model-00001-of-00001.safetensors\"}}");
	f = open_ok(dir);
	ck_assert_str_eq(f->format, "safetensors (1 shard)");
	ck_assert_uint_eq(f->n_tensors, 2);
	ck_assert_int_eq(test_file_tensor(f, "b")->dtype, LOOM_DTYPE_F16);
	close_st(f);
}
END_TEST

/* ---- descriptor and probe ------------------------------------------------- */

static int probe(const char *path, const void *head, size_t head_len, char *why, size_t size)
{
	const loom_plugin_desc *d = test_load_plugin(PLUGIN_FILE);
	loom_probe_args args = {.struct_size = sizeof(args),
				.host = test_host(),
				.path = path,
				.head = head,
				.head_len = head_len};

	why[0] = '\0';
	return d->probe(&args, why, size);
}

START_TEST(descriptor_and_probe)
{
	const loom_plugin_desc *d = test_load_plugin(PLUGIN_FILE);
	const loom_format_vtable *vt = d->vtable;
	const char *dir = tmp_dir("st-probe");
	static const uint8_t st_head[] = {2, 0, 0, 0, 0, 0, 0, 0, '{', '}'};
	static const uint8_t huge_head[] = {0, 0, 0, 0x10, 0, 0, 0, 0, '{', '}'};
	static const uint8_t gguf_head[] = {'G', 'G', 'U', 'F', 3, 0, 0, 0, 0, 0, 0, 0, 0};
	char why[256], path[4096];

	ck_assert_uint_eq(d->kind, LOOM_PLUGIN_FORMAT);
	ck_assert_str_eq(d->name, "safetensors");
	ck_assert_msg(d->version != NULL && d->version[0] != '\0', "no version string");
	ck_assert_msg(LOOM_VT_HAS(vt, open) && LOOM_VT_HAS(vt, close), "vtable slots missing");

	ck_assert_int_eq(probe("x.safetensors", st_head, sizeof(st_head), why, sizeof(why)), 100);
	ck_assert_int_eq(probe("x.bin", st_head, sizeof(st_head), why, sizeof(why)), 100);
	ck_assert_int_eq(probe("a/" INDEX_FILE, "{\n", 2, why, sizeof(why)), 100);

	ck_assert_int_eq(probe("x.gguf", gguf_head, sizeof(gguf_head), why, sizeof(why)), 0);
	ck_assert_msg(strstr(why, "not a safetensors file or Hugging Face directory") != NULL,
		      "why = \"%s\"", why);
	ck_assert_int_eq(probe("x.safetensors", huge_head, sizeof(huge_head), why, sizeof(why)), 0);
	ck_assert_int_eq(probe("x.safetensors", st_head, 8, why, sizeof(why)), 0);
	ck_assert_int_eq(probe("x.safetensors", NULL, 0, why, sizeof(why)), 0);

	/* Directories: by what they hold. */
	ck_assert_int_eq(probe(dir, NULL, 0, why, sizeof(why)), 0);
	ck_assert_msg(strstr(why, "without model.safetensors") != NULL, "why = \"%s\"", why);
	ck_assert(st_write_file(join(path, sizeof(path), dir, "model.safetensors"), NULL, 0));
	ck_assert_int_eq(probe(dir, NULL, 0, why, sizeof(why)), 100);
	unlink(path);
	test_write_file(path, sizeof(path), dir, INDEX_FILE, "{}");
	ck_assert_int_eq(probe(dir, NULL, 0, why, sizeof(why)), 100);
}
END_TEST

/* ---- hostile headers -------------------------------------------------- */

typedef struct header_case {
	const char *label;
	const char *header;
	size_t data_size;
	const char *expect;
} header_case;

#define F32_2(offsets) "{\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": " offsets "}"
#define W_ENTRY(body) "{\"model.w\": " body "}"

static const header_case header_cases[] = {
	{"syntax error", "{\"model.w\" 5}", 0, "JSON syntax error at byte 11 of the header"},
	{"trailing comma", "{\"model.w\": " F32_2("[0, 8]") ",}", 8, "JSON syntax error at byte"},
	{"garbage after the object", "{} x", 0,
	 "unexpected bytes after the JSON value at byte 3 of the header"},
	{"top level is an array", "[1, 2]", 0, "the header is not a JSON object"},
	{"entry not an object", W_ENTRY("5"), 0, "tensor 'model.w': the entry is not a JSON object"},
	{"dtype missing", W_ENTRY("{\"shape\": [2], \"data_offsets\": [0, 8]}"), 8,
	 "tensor 'model.w': \"dtype\" is missing"},
	{"dtype not a string", W_ENTRY("{\"dtype\": 4, \"shape\": [2], \"data_offsets\": [0, 8]}"), 8,
	 "tensor 'model.w': \"dtype\" is not a string"},
	{"unknown dtype", W_ENTRY("{\"dtype\": \"F33\", \"shape\": [2], \"data_offsets\": [0, 8]}"),
	 8, "tensor 'model.w': unknown dtype 'F33'"},
	{"U32", W_ENTRY("{\"dtype\": \"U32\", \"shape\": [2], \"data_offsets\": [0, 8]}"), 8,
	 "tensor 'model.w': dtype U32 is not one loom can use"},
	{"BOOL", W_ENTRY("{\"dtype\": \"BOOL\", \"shape\": [2], \"data_offsets\": [0, 2]}"), 8,
	 "tensor 'model.w': dtype BOOL is not one loom can use"},
	{"F8_E4M3", W_ENTRY("{\"dtype\": \"F8_E4M3\", \"shape\": [2], \"data_offsets\": [0, 2]}"),
	 8, "tensor 'model.w': dtype F8_E4M3 is not one loom can use"},
	{"U16", W_ENTRY("{\"dtype\": \"U16\", \"shape\": [2], \"data_offsets\": [0, 4]}"), 8,
	 "tensor 'model.w': dtype U16 is not one loom can use"},
	{"shape missing", W_ENTRY("{\"dtype\": \"F32\", \"data_offsets\": [0, 8]}"), 8,
	 "tensor 'model.w': \"shape\" is missing"},
	{"shape not an array", W_ENTRY("{\"dtype\": \"F32\", \"shape\": 2, \"data_offsets\": [0, 8]}"),
	 8, "tensor 'model.w': \"shape\" is not an array"},
	{"negative dimension",
	 W_ENTRY("{\"dtype\": \"F32\", \"shape\": [2, -1], \"data_offsets\": [0, 8]}"), 8,
	 "tensor 'model.w': shape[1] is not an integer in 0..2^53"},
	{"fractional dimension",
	 W_ENTRY("{\"dtype\": \"F32\", \"shape\": [1.5], \"data_offsets\": [0, 8]}"), 8,
	 "tensor 'model.w': shape[0] is not an integer in 0..2^53"},
	{"dimension over 2^53",
	 W_ENTRY("{\"dtype\": \"F32\", \"shape\": [1e16], \"data_offsets\": [0, 8]}"), 8,
	 "tensor 'model.w': shape[0] is not an integer in 0..2^53"},
	{"dimension a string",
	 W_ENTRY("{\"dtype\": \"F32\", \"shape\": [\"2\"], \"data_offsets\": [0, 8]}"), 8,
	 "tensor 'model.w': shape[0] is not an integer in 0..2^53"},
	{"five dimensions",
	 W_ENTRY("{\"dtype\": \"F32\", \"shape\": [1, 1, 1, 1, 2], \"data_offsets\": [0, 8]}"), 8,
	 "tensor 'model.w': shape has 5 dimensions; loom supports at most 4"},
	{"element count overflows",
	 W_ENTRY("{\"dtype\": \"F32\", \"shape\": [4503599627370496, 4503599627370496], "
		 "\"data_offsets\": [0, 8]}"),
	 8, "tensor 'model.w': the element count overflows 64 bits"},
	{"byte count overflows",
	 W_ENTRY("{\"dtype\": \"F32\", \"shape\": [2147483648, 2147483648], "
		 "\"data_offsets\": [0, 8]}"),
	 8, "tensor 'model.w': the byte count of the shape overflows 64 bits"},
	{"data_offsets missing", W_ENTRY("{\"dtype\": \"F32\", \"shape\": [2]}"), 8,
	 "tensor 'model.w': \"data_offsets\" is missing"},
	{"one offset", W_ENTRY(F32_2("[8]")), 8,
	 "tensor 'model.w': \"data_offsets\" is not two integers in 0..2^53"},
	{"three offsets", W_ENTRY(F32_2("[0, 8, 16]")), 16,
	 "tensor 'model.w': \"data_offsets\" is not two integers"},
	{"offset a string", W_ENTRY(F32_2("[0, \"8\"]")), 8,
	 "tensor 'model.w': \"data_offsets\" is not two integers"},
	{"negative offset", W_ENTRY(F32_2("[-8, 0]")), 8,
	 "tensor 'model.w': \"data_offsets\" is not two integers"},
	{"end before begin", W_ENTRY(F32_2("[8, 0]")), 8,
	 "tensor 'model.w': data_offsets [8, 0] end before they begin"},
	{"too few bytes", W_ENTRY(F32_2("[0, 4]")), 8,
	 "tensor 'model.w': data_offsets [0, 4] hold 4 bytes, but 2 f32 elements take 8"},
	{"too many bytes", W_ENTRY(F32_2("[0, 12]")), 16,
	 "tensor 'model.w': data_offsets [0, 12] hold 12 bytes, but 2 f32 elements take 8"},
	{"past the end", W_ENTRY(F32_2("[8, 16]")), 12,
	 "tensor 'model.w': data_offsets [8, 16] run past the end of the file "
	 "(its data section holds 12 bytes)"},
	{"far past the end", W_ENTRY(F32_2("[9007199254740984, 9007199254740992]")), 12,
	 "tensor 'model.w': data_offsets [9007199254740984, 9007199254740992] run past the end"},
	{"misaligned", W_ENTRY(F32_2("[2, 10]")), 12,
	 "tensor 'model.w': data at file offset "},
	{"overlap",
	 "{\"model.a\": " F32_2("[0, 8]") ", \"model.w\": " F32_2("[4, 12]") "}", 12,
	 "tensor 'model.w': data_offsets [4, 12] overlap those of tensor 'model.a' [0, 8]"},
	{"overlap listed backwards",
	 "{\"model.w\": " F32_2("[4, 12]") ", \"model.a\": {\"dtype\": \"F32\", \"shape\": [4], "
	 "\"data_offsets\": [0, 16]}}",
	 16, "tensor 'model.w': data_offsets [4, 12] overlap those of tensor 'model.a' [0, 16]"},
	{"duplicate name",
	 "{\"model.w\": " F32_2("[0, 8]") ", \"model.w\": " F32_2("[8, 16]") "}", 16,
	 "tensor 'model.w' appears twice in the header"},
	{"metadata not an object", "{\"__metadata__\": [1]}", 0,
	 "__metadata__ is not a JSON object"},
	{"metadata not strings", "{\"__metadata__\": {\"format\": \"pt\", \"n\": 1}}", 0,
	 "__metadata__ member 'n' is not a string"},
};
#define N_HEADER_CASES ((int)(sizeof(header_cases) / sizeof(header_cases[0])))

START_TEST(hostile_header_is_refused)
{
	const header_case *c = &header_cases[_i];
	char name[64], path[4096];
	const char *dir;

	snprintf(name, sizeof(name), "st-hostile-%d", _i);
	dir = tmp_dir(name);
	ck_assert(st_write_config(dir, small_config));
	join(path, sizeof(path), dir, "model.safetensors");
	ck_assert_msg(st_write_raw(path, c->header, NULL, c->data_size), "%s: cannot write",
		      c->label);
	expect_open_fails(path, c->expect);
	/* Through the directory, the same file is named. */
	expect_fails_naming(dir, path, c->expect);
}
END_TEST

/* The misaligned case in full: where the data starts, and the element. */
START_TEST(misaligned_data_names_the_offset)
{
	const char *dir = tmp_dir("st-misaligned");
	const char *header = W_ENTRY("{\"dtype\": \"I16\", \"shape\": [2], \"data_offsets\": [3, 7]}");
	uint64_t start = 8 + (strlen(header) + 7) / 8 * 8;
	char path[4096], expect[128];

	ck_assert(st_write_config(dir, small_config));
	join(path, sizeof(path), dir, "model.safetensors");
	ck_assert(st_write_raw(path, header, NULL, 8));
	snprintf(expect, sizeof(expect),
		 "tensor 'model.w': data at file offset %" PRIu64
		 " is not aligned to its 2-byte i16 elements",
		 start + 3);
	expect_open_fails(path, expect);
}
END_TEST

/* A hostile name is cut in messages, and does not break them. */
START_TEST(long_names_are_cut_in_messages)
{
	const char *dir = tmp_dir("st-long-name");
	char *header = malloc(20000), path[4096];
	char *name = malloc(10001);

	ck_assert(header != NULL && name != NULL);
	memset(name, 'n', 10000);
	name[10000] = '\0';
	snprintf(header, 20000, "{\"%s\": {\"dtype\": \"U16\", \"shape\": [1], \"data_offsets\": [0, 2]}}",
		 name);
	ck_assert(st_write_config(dir, small_config));
	join(path, sizeof(path), dir, "model.safetensors");
	ck_assert(st_write_raw(path, header, NULL, 8));
	name[80] = '\0';
	snprintf(header, 20000, "tensor '%s': dtype U16 is not one loom can use", name);
	expect_open_fails(path, header);
	free(name);
	free(header);
}
END_TEST

/* Lengths and sizes, before any JSON is read. */
START_TEST(bad_lengths_are_refused)
{
	const char *dir = tmp_dir("st-lengths");
	char path[4096];
	uint8_t bytes[32] = {0};

	ck_assert(st_write_config(dir, small_config));
	join(path, sizeof(path), dir, "model.safetensors");

	write_bytes(path, "", 0);
	expect_open_fails(path, "empty file (0 bytes)");
	write_bytes(path, bytes, 5);
	expect_open_fails(path, "5 bytes, too short for a safetensors file");
	write_bytes(path, bytes, 8);
	expect_open_fails(path, "header length 0 at offset 0 is not in 2..");
	bytes[0] = 0x00, bytes[3] = 0x40; /* 1 GiB */
	bytes[8] = '{', bytes[9] = '}';
	write_bytes(path, bytes, 10);
	expect_open_fails(path, "header length 1073741824 at offset 0 is not in 2..104857600 "
				"(the limit is 100 MiB)");
	bytes[0] = 100, bytes[3] = 0;
	write_bytes(path, bytes, 32);
	expect_open_fails(path, "header length 100 at offset 0 runs past the end of the file "
				"(32 bytes)");
	bytes[0] = 3, bytes[8] = ' ', bytes[9] = '{', bytes[10] = '}';
	write_bytes(path, bytes, 11);
	expect_open_fails(path, "the header is not a JSON object (byte 8 is not '{')");
}
END_TEST

/* A GGUF file handed to this plugin anyway is refused, not misread. */
START_TEST(gguf_file_is_refused)
{
	char path[4096];

	if (!test_data_path(path, sizeof(path), "models/stories260K-f32.gguf"))
		return;
	expect_open_fails(path, "at offset 0 is not in 2..");
}
END_TEST

/* ---- hostile indexes ------------------------------------------------------ */

static const st_tensor_spec pair[] = {
	{"model.a", "F32", 1, {2}, NULL},
	{"model.b", "F32", 1, {2}, NULL},
};

/* dir: two shards (model.a in the first, model.b in the second) and the
 * index text given. */
static const char *sharded_dir(const char *test, const char *index)
{
	const char *dir = tmp_dir(test);
	char path[4096];

	ck_assert(st_write_sharded(dir, pair, 2, 2));
	ck_assert(st_write_config(dir, small_config));
	if (index != NULL)
		test_write_file(path, sizeof(path), dir, INDEX_FILE, index);
	return dir;
}

#define SHARD1 "model-00001-of-00002.safetensors"
#define SHARD2 "model-00002-of-00002.safetensors"

typedef struct index_case {
	const char *label;
	const char *index;
	const char *expect;
} index_case;

static const index_case index_cases[] = {
	{"syntax error", "{\"weight_map\": {\"model.a\": }}", "JSON syntax error at byte 27 of the file"},
	{"not an object", "[\"" SHARD1 "\"]", "the index is not a JSON object"},
	{"no weight_map", "{\"metadata\": {}}", "\"weight_map\" is missing"},
	{"weight_map an array", "{\"weight_map\": [\"" SHARD1 "\"]}",
	 "\"weight_map\" is not a JSON object"},
	{"empty weight_map", "{\"weight_map\": {}}", "\"weight_map\" lists no tensors"},
	{"shard not a string", "{\"weight_map\": {\"model.a\": 1}}",
	 "weight_map: tensor 'model.a': the shard is not a string"},
	{"shard in a parent", "{\"weight_map\": {\"model.a\": \"../" SHARD1 "\"}}",
	 "weight_map: tensor 'model.a': shard '../" SHARD1
	 "' is not a file name in the index's directory"},
	{"shard in a subdirectory", "{\"weight_map\": {\"model.a\": \"sub/" SHARD1 "\"}}",
	 "shard 'sub/" SHARD1 "' is not a file name"},
	{"shard an absolute path", "{\"weight_map\": {\"model.a\": \"/etc/passwd\"}}",
	 "shard '/etc/passwd' is not a file name"},
	{"hidden shard", "{\"weight_map\": {\"model.a\": \".hidden\"}}",
	 "shard '.hidden' is not a file name"},
	{"empty shard name", "{\"weight_map\": {\"model.a\": \"\"}}", "shard '' is not a file name"},
	{"tensor in the wrong shard",
	 "{\"weight_map\": {\"model.a\": \"" SHARD2 "\", \"model.b\": \"" SHARD1 "\"}}",
	 "weight_map places tensor 'model.a' in " SHARD2 ", which does not hold it; it is in "
	 SHARD1},
	{"tensor nowhere",
	 "{\"weight_map\": {\"model.a\": \"" SHARD1 "\", \"model.c\": \"" SHARD2 "\"}}",
	 "weight_map places tensor 'model.c' in " SHARD2 ", which does not hold it"},
};
#define N_INDEX_CASES ((int)(sizeof(index_cases) / sizeof(index_cases[0])))

START_TEST(hostile_index_is_refused)
{
	const index_case *c = &index_cases[_i];
	char name[64], index[4096];
	const char *dir;

	snprintf(name, sizeof(name), "st-hostile-index-%d", _i);
	dir = sharded_dir(name, c->index);
	join(index, sizeof(index), dir, INDEX_FILE);
	expect_fails_naming(dir, index, c->expect);
	expect_open_fails(index, c->expect);
}
END_TEST

START_TEST(missing_shard_is_named)
{
	const char *dir = sharded_dir("st-missing-shard", NULL);
	char path[4096];

	join(path, sizeof(path), dir, SHARD2);
	ck_assert(unlink(path) == 0);
	expect_fails_naming(dir, path, "cannot open: No such file or directory");
}
END_TEST

START_TEST(empty_shard_is_refused)
{
	const char *dir = sharded_dir("st-empty-shard", NULL);
	char path[4096];

	write_bytes(join(path, sizeof(path), dir, SHARD2), "", 0);
	expect_fails_naming(dir, path, "empty file (0 bytes)");
}
END_TEST

START_TEST(hostile_shard_is_named)
{
	const char *dir = sharded_dir("st-hostile-shard", NULL);
	char path[4096];

	join(path, sizeof(path), dir, SHARD2);
	ck_assert(st_write_raw(path, W_ENTRY(F32_2("[0, 4]")), NULL, 8));
	expect_fails_naming(dir, path, "tensor 'model.w': data_offsets [0, 4] hold 4 bytes");
}
END_TEST

START_TEST(tensor_in_two_shards_is_refused)
{
	const char *dir = sharded_dir("st-two-shards", NULL);
	char path[4096], expect[8400];

	/* The second shard holds model.b and a second model.a. */
	join(path, sizeof(path), dir, SHARD2);
	ck_assert(st_write_file(path, (const st_tensor_spec[]){pair[1], pair[0]}, 2));
	snprintf(expect, sizeof(expect), "tensor 'model.a' is in two shards, %s/" SHARD1 " and %s",
		 dir, path);
	expect_fails_naming(dir, dir, expect);
}
END_TEST

/* ---- paths and config.json ------------------------------------------------ */

START_TEST(bad_paths_are_refused)
{
	const char *dir = tmp_dir("st-paths");
	char path[4096], config[4096];

	join(path, sizeof(path), dir, "absent");
	expect_open_fails(path, "No such file or directory");
	expect_open_fails(dir, "a directory without model.safetensors or " INDEX_FILE);

	join(path, sizeof(path), dir, "model.safetensors");
	ck_assert(st_write_file(path, NULL, 0));
	expect_open_fails(dir, "no config.json");
	expect_fails_naming(path, dir, "no config.json");

	join(config, sizeof(config), dir, "config.json");
	ck_assert(st_write_config(dir, "[1, 2]"));
	expect_fails_naming(dir, config, "the top level is not a JSON object");
	ck_assert(st_write_config(dir, "{\"model_type\": \"llama\",\n \"x\": nul}"));
	expect_fails_naming(dir, config, "JSON syntax error at byte 30 of the file");
	ck_assert(st_write_config(dir, ""));
	expect_fails_naming(dir, config, "JSON syntax error at byte 0 of the file");
	ck_assert(st_write_config(dir, "{\"model_type\": 5}"));
	expect_fails_naming(dir, config, "\"model_type\" is not a string");
}
END_TEST

/* ---- the shared data's Hugging Face directories ---------------------------- */

static void check_f32(const loom_model_file *f, const char *name, int64_t ne0, int64_t ne1,
		      float first)
{
	const loom_file_tensor *t = test_file_tensor(f, name);
	float x;

	ck_assert_msg(t->dtype == LOOM_DTYPE_F32 && t->ne[0] == ne0 && t->ne[1] == ne1 &&
			      t->n_bytes == (uint64_t)(ne0 * ne1) * 4,
		      "%s: dtype %d ne {%" PRId64 ", %" PRId64 "}", name, t->dtype, t->ne[0],
		      t->ne[1]);
	ck_assert_msg(t->n_dims == (ne1 > 1 ? 2 : 1), "%s: n_dims %d", name, t->n_dims);
	memcpy(&x, t->data, sizeof(x));
	ck_assert_msg(x == first, "%s[0] = %.9g, expected %.9g", name, x, first);
}

START_TEST(stories260k_hf_opens)
{
	char dir[4096];
	loom_model_file *f;

	if (!test_data_path(dir, sizeof(dir), "models/stories260K-hf"))
		return;
	f = open_ok(dir);
	ck_assert_str_eq(f->format, "safetensors");
	ck_assert_uint_eq(f->n_tensors, 47);
	ck_assert_uint_eq(f->mapping_size % (uint64_t)sysconf(_SC_PAGESIZE), 0);
	ck_assert_msg(f->mapping_size >= 1045056 &&
			      f->mapping_size < 1045056 + (uint64_t)sysconf(_SC_PAGESIZE),
		      "mapping_size %" PRIu64, f->mapping_size);
	/* The same first weights as the GGUF it was derived from. */
	check_f32(f, "model.embed_tokens.weight", 64, 512, -0.29474878f);
	check_f32(f, "model.layers.0.mlp.down_proj.weight", 172, 64, 0.13498419523239136f);
	check_f32(f, "model.norm.weight", 64, 1, 2.458309f);
	ck_assert_uint_eq(test_file_tensor(f, "model.embed_tokens.weight")->file_offset, 4928);
	ck_assert_msg(loom_string_eq(test_meta_of(f, "general.architecture", LOOM_META_STRING)->v.s, "llama"),
		      "architecture");
	ck_assert_msg(loom_string_eq(test_meta_of(f, "general.name", LOOM_META_STRING)->v.s, "stories260K-hf"),
		      "name");
	ck_assert_int_eq(test_meta_of(f, "hidden_size", LOOM_META_I64)->v.i, 64);
	ck_assert_int_eq(test_meta_of(f, "intermediate_size", LOOM_META_I64)->v.i, 172);
	ck_assert_int_eq(test_meta_of(f, "num_key_value_heads", LOOM_META_I64)->v.i, 4);
	ck_assert_msg(test_meta_of(f, "rms_norm_eps", LOOM_META_F64)->v.f == 1e-5, "rms_norm_eps");
	ck_assert(test_meta_of(f, "tie_word_embeddings", LOOM_META_BOOL)->v.b);
	ck_assert_msg(loom_meta_find(f, "rope_scaling") == NULL, "rope_scaling is null");
	close_st(f);
}
END_TEST

START_TEST(stories_llama_d256_hf_opens)
{
	char dir[4096], path[4096];
	loom_model_file *f;

	if (!test_data_path(dir, sizeof(dir), "models/stories-llama-d256-hf"))
		return;
	f = open_ok(join(path, sizeof(path), dir, "model.safetensors"));
	ck_assert_uint_eq(f->n_tensors, 30);
	check_f32(f, "lm_head.weight", 256, 512, 0.07911570370197296f);
	check_f32(f, "model.embed_tokens.weight", 256, 512, -0.029033174738287926f);
	check_f32(f, "model.layers.0.mlp.down_proj.weight", 512, 256, 0.009728331118822098f);
	check_f32(f, "model.norm.weight", 256, 1, 1.1036025285720825f);
	ck_assert_msg(loom_string_eq(test_meta_of(f, "general.architecture", LOOM_META_STRING)->v.s, "llama"),
		      "architecture");
	ck_assert_int_eq(test_meta_of(f, "hidden_size", LOOM_META_I64)->v.i, 256);
	ck_assert_int_eq(test_meta_of(f, "num_hidden_layers", LOOM_META_I64)->v.i, 3);
	ck_assert(!test_meta_of(f, "tie_word_embeddings", LOOM_META_BOOL)->v.b);
	close_st(f);
}
END_TEST

static Suite *safetensors_suite(void)
{
	Suite *s = suite_create("safetensors");
	TCase *files = tcase_create("files");
	TCase *hostile = tcase_create("hostile");
	TCase *shared = tcase_create("shared");

	tcase_add_test(files, descriptor_and_probe);
	tcase_add_test(files, every_dtype_round_trips);
	tcase_add_test(files, empty_checkpoint_opens);
	tcase_add_test(files, config_is_flattened);
	tcase_add_test(files, config_without_model_type_opens);
	tcase_add_test(files, sharded_matches_single);
	tcase_add_test(files, index_wins_over_single_file);
	tcase_add_test(files, index_may_leave_tensors_out);
	suite_add_tcase(s, files);

	tcase_add_loop_test(hostile, hostile_header_is_refused, 0, N_HEADER_CASES);
	tcase_add_test(hostile, misaligned_data_names_the_offset);
	tcase_add_test(hostile, long_names_are_cut_in_messages);
	tcase_add_test(hostile, bad_lengths_are_refused);
	tcase_add_test(hostile, gguf_file_is_refused);
	tcase_add_loop_test(hostile, hostile_index_is_refused, 0, N_INDEX_CASES);
	tcase_add_test(hostile, missing_shard_is_named);
	tcase_add_test(hostile, empty_shard_is_refused);
	tcase_add_test(hostile, hostile_shard_is_named);
	tcase_add_test(hostile, tensor_in_two_shards_is_refused);
	tcase_add_test(hostile, bad_paths_are_refused);
	suite_add_tcase(s, hostile);

	tcase_add_test(shared, stories260k_hf_opens);
	tcase_add_test(shared, stories_llama_d256_hf_opens);
	suite_add_tcase(s, shared);
	return s;
}

LOOM_TEST_MAIN(safetensors_suite)
