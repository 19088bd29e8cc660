/* test_struct_size.c - structs cross the API at the host's size: a host
 * built against an older loom.h (a shorter struct) is read with the
 * defaults for the fields it lacks and written no further than its struct
 * goes; one built against a newer loom.h (a longer struct) is refused,
 * the message naming the struct, both sizes and the library's version.
 * The older layouts are those of a struct grown past its first version,
 * through the core's helper every entry point uses; every loom.h struct
 * is checked at its own size and one larger, with guard bytes past the
 * host's end. A random-weight model; no reference data. */
#include "check_main.h"
#include "fixture.h"
#include "synth_model.h"
#include "testdata.h"

#include "runtime/struct_size.h"

#include <stdio.h>
#include <string.h>

#define GUARD 0xA5
#define NEWER 8 /* bytes a newer loom.h appended */

/* Bytes [from, to) of buf all still GUARD. */
static void assert_untouched(const unsigned char *buf, size_t from, size_t to, const char *what)
{
	for (size_t i = from; i < to; i++)
		ck_assert_msg(buf[i] == GUARD, "%s: byte %zu written (0x%02x)", what, i, buf[i]);
}

/* st is the refusal of a struct of host bytes that the library has lib
 * bytes of. */
static void assert_refused(loom_status st, const char *name, size_t host, size_t lib)
{
	ck_assert_msg(st == LOOM_ERR_INVALID_ARGUMENT, "%s of %zu bytes: status %d, not refused", name, host, st);
	const char *e = loom_last_error();
	char sizes[64];
	snprintf(sizes, sizeof(sizes), "%zu bytes", host);
	ck_assert_msg(strstr(e, name) != NULL && strstr(e, sizes) != NULL, "'%s' names neither %s nor %s", e, name, sizes);
	snprintf(sizes, sizeof(sizes), "%zu bytes", lib);
	ck_assert_msg(strstr(e, sizes) != NULL && strstr(e, loom_version()) != NULL,
		      "'%s' names neither the library's %s nor its version %s", e, sizes, loom_version());
}

/* ---- the helper, on a struct that grew ------------------------------------ */

/* A params struct as a first version had it, and as it grew since. */
typedef struct params_v1 {
	size_t size;
	int32_t n;
	float x;
} params_v1;

typedef struct params_v2 {
	size_t size;
	int32_t n;
	float x;
	int64_t added; /* past params_v1's sizeof, as appended fields must be */
	const char *also;
} params_v2;

static const loom_struct_desc v2_desc = LOOM_STRUCT_DESC(params_v2, x);
static const params_v2 v2_defaults = {.size = sizeof(params_v2), .n = 1, .x = 2.5f, .added = 42, .also = "default"};

START_TEST(an_older_hosts_params_keep_the_new_fields_defaults)
{
	/* The older host's default_params: the library fills its 16 bytes. */
	unsigned char buf[sizeof(params_v1) + 32];
	memset(buf, GUARD, sizeof(buf));
	ck_assert_int_eq(loom_params_init(&v2_desc, buf, sizeof(params_v1), &v2_defaults), LOOM_OK);
	assert_untouched(buf, sizeof(params_v1), sizeof(buf), "params_v2 init at params_v1's size");
	params_v1 old;
	memcpy(&old, buf, sizeof(old));
	ck_assert_uint_eq(old.size, sizeof(params_v1));
	ck_assert_int_eq(old.n, 1);
	ck_assert(old.x == 2.5f);
	/* It sets what it knows; the library reads it over its defaults. */
	old.n = 7;
	params_v2 got = v2_defaults;
	ck_assert_int_eq(loom_params_in(&v2_desc, &got, &old), LOOM_OK);
	ck_assert_int_eq(got.n, 7);
	ck_assert(got.x == 2.5f);
	ck_assert_int_eq(got.added, 42);
	ck_assert_str_eq(got.also, "default");
	ck_assert_uint_eq(got.size, sizeof(params_v2));
	/* A host of this version's size reads as it is. */
	params_v2 cur = v2_defaults;
	cur.added = -1;
	got = v2_defaults;
	ck_assert_int_eq(loom_params_in(&v2_desc, &got, &cur), LOOM_OK);
	ck_assert_int_eq(got.added, -1);
	/* NULL: the defaults. */
	got = v2_defaults;
	ck_assert_int_eq(loom_params_in(&v2_desc, &got, NULL), LOOM_OK);
	ck_assert_int_eq(got.n, 1);
}
END_TEST

START_TEST(a_newer_or_unset_struct_is_refused)
{
	struct {
		params_v2 p;
		int64_t newer;
	} newer;
	memset(&newer, GUARD, sizeof(newer));
	assert_refused(loom_params_init(&v2_desc, &newer, sizeof(newer), &v2_defaults), "params_v2", sizeof(newer),
		       sizeof(params_v2));
	ck_assert_uint_eq(newer.p.size, sizeof(newer));
	ck_assert_int_eq(newer.newer, 0); /* what the library does not know: zero */
	params_v2 got = v2_defaults;
	assert_refused(loom_params_in(&v2_desc, &got, &newer), "params_v2", sizeof(newer), sizeof(params_v2));
	ck_assert_int_eq(got.added, 42);
	/* A struct no default_params set (size 0), or shorter than the first
	 * version. */
	params_v2 unset = {.size = 0};
	assert_refused(loom_params_in(&v2_desc, &got, &unset), "params_v2", 0, sizeof(params_v2));
	ck_assert_msg(strstr(loom_last_error(), "smaller than any version") != NULL, "%s", loom_last_error());
	unset.size = sizeof(params_v1) - 4;
	assert_refused(loom_params_in(&v2_desc, &got, &unset), "params_v2", sizeof(params_v1) - 4, sizeof(params_v2));
	/* Too short for the size member itself: nothing written. */
	unsigned char small[sizeof(size_t) + 8];
	memset(small, GUARD, sizeof(small));
	ck_assert_int_eq(loom_params_init(&v2_desc, small, sizeof(size_t) - 1, &v2_defaults), LOOM_ERR_INVALID_ARGUMENT);
	assert_untouched(small, 0, sizeof(small), "params_v2 init of 7 bytes");
}
END_TEST

START_TEST(an_older_host_is_written_no_further_than_its_struct)
{
	const params_v2 lib = {.size = sizeof(params_v2), .n = 3, .x = 1.0f, .added = 5, .also = "x"};
	unsigned char buf[sizeof(params_v1) + 32];
	memset(buf, GUARD, sizeof(buf));
	ck_assert_int_eq(loom_struct_out(&v2_desc, buf, sizeof(params_v1), &lib), LOOM_OK);
	assert_untouched(buf, sizeof(params_v1), sizeof(buf), "params_v2 out at params_v1's size");
	params_v1 old;
	memcpy(&old, buf, sizeof(old));
	ck_assert_int_eq(old.n, 3);
	/* Larger than the library's: refused, nothing written. */
	unsigned char big[sizeof(params_v2) + NEWER];
	memset(big, GUARD, sizeof(big));
	assert_refused(loom_struct_out(&v2_desc, big, sizeof(big), &lib), "params_v2", sizeof(big), sizeof(params_v2));
	assert_untouched(big, 0, sizeof(big), "params_v2 out, refused");

	/* Arrays, both ways, at the older host's stride. */
	params_v1 hosts[3] = {{.n = 10}, {.n = 11}, {.n = 12}};
	const void *read;
	void *copy;
	ck_assert_int_eq(loom_struct_array_in(&v2_desc, hosts, 3, sizeof(params_v1), &read, &copy), LOOM_OK);
	const params_v2 *as_lib = read;
	for (int i = 0; i < 3; i++) {
		ck_assert_int_eq(as_lib[i].n, 10 + i);
		ck_assert_int_eq(as_lib[i].added, 0);
	}
	free(copy);
	params_v2 libs[3] = {{.n = 20, .added = 1}, {.n = 21, .added = 1}, {.n = 22, .added = 1}};
	void *buf_out = NULL;
	size_t cap = 0;
	const void *laid;
	ck_assert_int_eq(loom_struct_array_out(&v2_desc, libs, 3, sizeof(params_v1), &laid, &buf_out, &cap), LOOM_OK);
	const params_v1 *as_host = laid;
	for (int i = 0; i < 3; i++)
		ck_assert_int_eq(as_host[i].n, 20 + i);
	free(buf_out);
	/* At the library's own size: the array itself, no copy. */
	ck_assert_int_eq(loom_struct_array_out(&v2_desc, libs, 3, sizeof(params_v2), &laid, &buf_out, &cap), LOOM_OK);
	ck_assert_ptr_eq(laid, libs);
}
END_TEST

/* ---- loom.h's params structs ----------------------------------------------- */

typedef loom_status (*init_fn)(void *p, size_t size);

#define INIT_OF(type) \
	static loom_status init_##type(void *p, size_t size) { return type##_init((type *)p, size); }
INIT_OF(loom_runtime_params)
INIT_OF(loom_model_params)
INIT_OF(loom_quantize_params)
INIT_OF(loom_convert_params)
INIT_OF(loom_context_params)
INIT_OF(loom_sampler_params)
INIT_OF(loom_generate_params)
INIT_OF(loom_generator_params)

static const struct {
	const char *name;
	size_t size;
	init_fn init;
} params_types[] = {
#define PARAMS_TYPE(type) {#type, sizeof(type), init_##type}
	PARAMS_TYPE(loom_runtime_params), PARAMS_TYPE(loom_model_params),   PARAMS_TYPE(loom_quantize_params),
	PARAMS_TYPE(loom_convert_params), PARAMS_TYPE(loom_context_params), PARAMS_TYPE(loom_sampler_params),
	PARAMS_TYPE(loom_generate_params), PARAMS_TYPE(loom_generator_params),
};

START_TEST(every_params_init_writes_its_size_and_no_more)
{
	for (size_t t = 0; t < sizeof(params_types) / sizeof(params_types[0]); t++) {
		const char *name = params_types[t].name;
		const size_t size = params_types[t].size;
		unsigned char buf[512];
		ck_assert_uint_lt(size + NEWER + 32, sizeof(buf));
		memset(buf, GUARD, sizeof(buf));
		ck_assert_msg(params_types[t].init(buf, size) == LOOM_OK, "%s: %s", name, loom_last_error());
		size_t got;
		memcpy(&got, buf, sizeof(got));
		ck_assert_uint_eq(got, size);
		assert_untouched(buf, size, sizeof(buf), name);
		/* A newer host's: refused, and filled as far as the library
		 * knows, zero after, nothing past it. */
		memset(buf, GUARD, sizeof(buf));
		assert_refused(params_types[t].init(buf, size + NEWER), name, size + NEWER, size);
		for (size_t i = size; i < size + NEWER; i++)
			ck_assert_msg(buf[i] == 0, "%s: byte %zu past the library's struct not zero", name, i);
		assert_untouched(buf, size + NEWER, sizeof(buf), name);
		/* Size 0: refused, nothing written. */
		memset(buf, GUARD, sizeof(buf));
		assert_refused(params_types[t].init(buf, 0), name, 0, size);
		assert_untouched(buf, 0, sizeof(buf), name);
	}
}
END_TEST

typedef struct fixture {
	char path[4200];
	loom_runtime *rt;
	loom_model *m;
	loom_context *ctx;
} fixture;

static void open_fixture(fixture *f)
{
	snprintf(f->path, sizeof(f->path), "%s/model.gguf", test_tmp_dir("struct_size"));
	synth_config c = synth_default_config();
	synth_model *sm = synth_model_build(&c, NULL);
	ck_assert(synth_model_write(sm, f->path));
	synth_model_free(sm);
	f->rt = test_runtime("cpu-generic", 1);
	ck_assert_msg(loom_model_load(f->rt, f->path, NULL, &f->m) == LOOM_OK, "%s", loom_last_error());
	loom_context_params cp = loom_context_default_params();
	cp.n_ctx = 64;
	ck_assert_msg(loom_context_create(f->m, &cp, &f->ctx) == LOOM_OK, "%s", loom_last_error());
}

static void close_fixture(fixture *f)
{
	loom_context_free(f->ctx);
	loom_model_free(f->m);
	loom_runtime_free(f->rt);
}

/* A params struct as a newer loom.h has it: one field more. */
#define NEWER_PARAMS(type)          \
	struct {                    \
		type p;             \
		uint64_t appended;  \
	}

START_TEST(every_call_refuses_a_newer_hosts_params)
{
	fixture f;
	open_fixture(&f);
	loom_token prompt[2] = {1, 5};

	NEWER_PARAMS(loom_runtime_params) rp;
	loom_runtime_params_init(&rp.p, sizeof(rp));
	loom_runtime *rt = NULL;
	assert_refused(loom_runtime_create(&rp.p, &rt), "loom_runtime_params", sizeof(rp), sizeof(rp.p));
	ck_assert_ptr_null(rt);

	NEWER_PARAMS(loom_model_params) mp;
	loom_model_params_init(&mp.p, sizeof(mp));
	loom_model *m = NULL;
	assert_refused(loom_model_load(f.rt, f.path, &mp.p, &m), "loom_model_params", sizeof(mp), sizeof(mp.p));
	ck_assert_ptr_null(m);

	NEWER_PARAMS(loom_context_params) cp;
	loom_context_params_init(&cp.p, sizeof(cp));
	loom_context *ctx = NULL;
	assert_refused(loom_context_create(f.m, &cp.p, &ctx), "loom_context_params", sizeof(cp), sizeof(cp.p));
	ck_assert_ptr_null(ctx);

	NEWER_PARAMS(loom_sampler_params) sp;
	loom_sampler_params_init(&sp.p, sizeof(sp));
	loom_sampler *s = NULL;
	assert_refused(loom_sampler_create(&sp.p, &s), "loom_sampler_params", sizeof(sp), sizeof(sp.p));
	ck_assert_ptr_null(s);

	/* Through the params that point at it, too. */
	loom_generator_params gp = loom_generator_default_params();
	gp.sampling = &sp.p;
	loom_generator *g = NULL;
	assert_refused(loom_generator_create(f.m, &gp, &g), "loom_sampler_params", sizeof(sp), sizeof(sp.p));
	ck_assert_ptr_null(g);
	NEWER_PARAMS(loom_generator_params) gnp;
	loom_generator_params_init(&gnp.p, sizeof(gnp));
	assert_refused(loom_generator_create(f.m, &gnp.p, &g), "loom_generator_params", sizeof(gnp), sizeof(gnp.p));
	ck_assert_ptr_null(g);

	NEWER_PARAMS(loom_generate_params) gen;
	loom_generate_params_init(&gen.p, sizeof(gen));
	assert_refused(loom_generate(f.ctx, "hi", &gen.p, NULL, NULL, NULL), "loom_generate_params", sizeof(gen),
		       sizeof(gen.p));
	assert_refused(loom_generate_tokens(f.ctx, prompt, 2, &gen.p, NULL, NULL, NULL), "loom_generate_params",
		       sizeof(gen), sizeof(gen.p));
	ck_assert_uint_eq(loom_kv_used(f.ctx), 0);

	NEWER_PARAMS(loom_quantize_params) qp;
	loom_quantize_params_init(&qp.p, sizeof(qp));
	assert_refused(loom_quantize(f.rt, f.path, "/nonexistent/q.gguf", &qp.p), "loom_quantize_params", sizeof(qp),
		       sizeof(qp.p));
	NEWER_PARAMS(loom_convert_params) vp;
	loom_convert_params_init(&vp.p, sizeof(vp));
	assert_refused(loom_convert(f.rt, f.path, "/nonexistent/c.gguf", &vp.p), "loom_convert_params", sizeof(vp),
		       sizeof(vp.p));

	/* A struct set up by hand, not from its default_params: size 0. */
	loom_sampler_params unset = {.temperature = 0};
	assert_refused(loom_sampler_create(&unset, &s), "loom_sampler_params", 0, sizeof(unset));
	close_fixture(&f);
}
END_TEST

/* ---- loom.h's other structs: each at its size and one larger --------------- */

typedef struct guarded {
	unsigned char b[1024];
} guarded;

static void *guard(guarded *g)
{
	memset(g->b, GUARD, sizeof(g->b));
	return g->b;
}

START_TEST(out_structs_stop_at_the_hosts_size)
{
	fixture f;
	open_fixture(&f);
	guarded g;

	/* loom_plugin_info */
	ck_assert_int_eq(loom_runtime_plugin_info_sized(f.rt, 0, guard(&g), sizeof(loom_plugin_info)), LOOM_OK);
	assert_untouched(g.b, sizeof(loom_plugin_info), sizeof(g.b), "loom_plugin_info");
	ck_assert_ptr_nonnull(((loom_plugin_info *)(void *)g.b)->path);
	assert_refused(loom_runtime_plugin_info_sized(f.rt, 0, guard(&g), sizeof(loom_plugin_info) + NEWER),
		       "loom_plugin_info", sizeof(loom_plugin_info) + NEWER, sizeof(loom_plugin_info));
	assert_untouched(g.b, 0, sizeof(g.b), "loom_plugin_info, refused");

	/* loom_device_info: the size is judged before the CPU backend says it
	 * has no device. */
	ck_assert_int_eq(loom_runtime_device_sized(f.rt, guard(&g), sizeof(loom_device_info)), LOOM_ERR_UNSUPPORTED);
	assert_untouched(g.b, 0, sizeof(g.b), "loom_device_info");
	assert_refused(loom_runtime_device_sized(f.rt, guard(&g), sizeof(loom_device_info) + NEWER), "loom_device_info",
		       sizeof(loom_device_info) + NEWER, sizeof(loom_device_info));

	/* loom_tensor_info */
	ck_assert_int_eq(loom_model_tensor_info_sized(f.m, 0, guard(&g), sizeof(loom_tensor_info)), LOOM_OK);
	assert_untouched(g.b, sizeof(loom_tensor_info), sizeof(g.b), "loom_tensor_info");
	ck_assert_int_gt(((loom_tensor_info *)(void *)g.b)->n_dims, 0);
	assert_refused(loom_model_tensor_info_sized(f.m, 0, guard(&g), sizeof(loom_tensor_info) + NEWER),
		       "loom_tensor_info", sizeof(loom_tensor_info) + NEWER, sizeof(loom_tensor_info));
	assert_untouched(g.b, 0, sizeof(g.b), "loom_tensor_info, refused");

	/* loom_generate_stats, through a generation of 3 tokens. */
	loom_generate_params gp = loom_generate_default_params();
	gp.n_predict = 3;
	ck_assert_int_eq(loom_generate_sized(f.ctx, "hi", &gp, NULL, NULL, guard(&g), sizeof(loom_generate_stats)),
			 LOOM_OK);
	assert_untouched(g.b, sizeof(loom_generate_stats), sizeof(g.b), "loom_generate_stats");
	ck_assert_int_eq(((loom_generate_stats *)(void *)g.b)->n_generated, 3);
	assert_refused(loom_generate_sized(f.ctx, "hi", &gp, NULL, NULL, guard(&g), sizeof(loom_generate_stats) + NEWER),
		       "loom_generate_stats", sizeof(loom_generate_stats) + NEWER, sizeof(loom_generate_stats));
	assert_untouched(g.b, 0, sizeof(g.b), "loom_generate_stats, refused");

	/* loom_profile */
	loom_context_set_profiling(f.ctx, true);
	ck_assert_int_eq(loom_context_profile_sized(f.ctx, guard(&g), sizeof(loom_profile)), LOOM_OK);
	assert_untouched(g.b, sizeof(loom_profile), sizeof(g.b), "loom_profile");
	assert_refused(loom_context_profile_sized(f.ctx, guard(&g), sizeof(loom_profile) + NEWER), "loom_profile",
		       sizeof(loom_profile) + NEWER, sizeof(loom_profile));
	assert_untouched(g.b, 0, sizeof(g.b), "loom_profile, refused");

	/* loom_generated, then loom_reply_parts from it. */
	loom_token toks[2] = {1, 5};
	loom_batch b = {.n_tokens = 2, .tokens = toks};
	loom_kv_clear(f.ctx);
	ck_assert_int_eq(loom_decode(f.ctx, &b), LOOM_OK);
	loom_generator *gen = NULL;
	ck_assert_int_eq(loom_generator_create(f.m, NULL, &gen), LOOM_OK);
	const float *logits = loom_get_logits(f.ctx, 1);
	assert_refused(loom_generator_next_sized(gen, logits, false, guard(&g), sizeof(loom_generated) + NEWER),
		       "loom_generated", sizeof(loom_generated) + NEWER, sizeof(loom_generated));
	assert_untouched(g.b, 0, sizeof(g.b), "loom_generated, refused");
	ck_assert_int_eq(loom_generator_n_generated(gen), 0);
	ck_assert_int_eq(loom_generator_next_sized(gen, logits, false, guard(&g), sizeof(loom_generated)), LOOM_OK);
	assert_untouched(g.b, sizeof(loom_generated), sizeof(g.b), "loom_generated");
	loom_generated step;
	memcpy(&step, g.b, sizeof(step));
	ck_assert_int_ge(step.token, 0);

	loom_reply_reader *r = NULL;
	ck_assert_int_eq(loom_reply_reader_create(f.m, "chatml", NULL, 0, &r), LOOM_OK);
	assert_refused(loom_reply_reader_push_sized(r, &step, sizeof(step) + NEWER, guard(&g), sizeof(loom_reply_parts)),
		       "loom_generated", sizeof(step) + NEWER, sizeof(step));
	assert_untouched(g.b, sizeof(loom_reply_parts), sizeof(g.b), "loom_reply_parts, step refused");
	assert_refused(loom_reply_reader_push_sized(r, &step, sizeof(step), guard(&g), sizeof(loom_reply_parts) + NEWER),
		       "loom_reply_parts", sizeof(loom_reply_parts) + NEWER, sizeof(loom_reply_parts));
	assert_untouched(g.b, 0, sizeof(g.b), "loom_reply_parts, refused");
	ck_assert_int_eq(loom_reply_reader_push_sized(r, &step, sizeof(step), guard(&g), sizeof(loom_reply_parts)),
			 LOOM_OK);
	assert_untouched(g.b, sizeof(loom_reply_parts), sizeof(g.b), "loom_reply_parts");

	/* loom_tool_call, as an array. */
	const loom_tool_call *calls = (const loom_tool_call *)&g;
	size_t n = 1;
	assert_refused(loom_reply_reader_tool_calls_sized(r, &calls, &n, sizeof(loom_tool_call) + NEWER),
		       "loom_tool_call", sizeof(loom_tool_call) + NEWER, sizeof(loom_tool_call));
	ck_assert(calls == NULL && n == 0);
	ck_assert_int_eq(loom_reply_reader_tool_calls_sized(r, &calls, &n, sizeof(loom_tool_call)), LOOM_OK);
	loom_reply_reader_free(r);
	loom_generator_free(gen); /* after the reader: step.text is the generator's */
	close_fixture(&f);
}
END_TEST

START_TEST(in_structs_are_read_at_the_hosts_size)
{
	fixture f;
	open_fixture(&f);
	/* loom_batch */
	loom_token toks[2] = {1, 5};
	struct {
		loom_batch b;
		uint64_t appended;
	} newer = {.b = {.n_tokens = 2, .tokens = toks}, .appended = 1};
	assert_refused(loom_decode_sized(f.ctx, &newer.b, sizeof(newer)), "loom_batch", sizeof(newer),
		       sizeof(loom_batch));
	ck_assert_uint_eq(loom_kv_used(f.ctx), 0);
	ck_assert_int_eq(loom_decode_sized(f.ctx, &newer.b, sizeof(loom_batch)), LOOM_OK);
	ck_assert_uint_eq(loom_kv_used(f.ctx), 2);

	/* loom_chat_message, an array at the host's stride. */
	struct wide_message {
		loom_chat_message m;
		uint64_t appended;
	} wide[2] = {{.m = {"user", "hello"}}, {.m = {"assistant", "hi"}}};
	char text[512];
	size_t len = 0;
	assert_refused(loom_chat_apply_sized(f.m, "chatml", &wide[0].m, 2, sizeof(wide[0]), true, text, sizeof(text),
					     &len),
		       "loom_chat_message", sizeof(wide[0]), sizeof(loom_chat_message));
	const loom_chat_message plain[2] = {{"user", "hello"}, {"assistant", "hi"}};
	ck_assert_int_eq(loom_chat_apply(f.m, "chatml", plain, 2, true, text, sizeof(text), &len), LOOM_OK);
	ck_assert_msg(strstr(text, "<|im_start|>user\nhello") != NULL, "%s", text);
	close_fixture(&f);
}
END_TEST

static Suite *struct_size_suite(void)
{
	Suite *s = suite_create("struct_size");
	TCase *tc = tcase_create("struct_size");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, an_older_hosts_params_keep_the_new_fields_defaults);
	tcase_add_test(tc, a_newer_or_unset_struct_is_refused);
	tcase_add_test(tc, an_older_host_is_written_no_further_than_its_struct);
	tcase_add_test(tc, every_params_init_writes_its_size_and_no_more);
	tcase_add_test(tc, every_call_refuses_a_newer_hosts_params);
	tcase_add_test(tc, out_structs_stop_at_the_hosts_size);
	tcase_add_test(tc, in_structs_are_read_at_the_hosts_size);
	suite_add_tcase(s, tc);
	return s;
}

LOOM_TEST_MAIN(struct_size_suite)
