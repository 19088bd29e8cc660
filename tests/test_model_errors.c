/*
 * test_model_errors.c - hostile models and API misuse.
 *
 * Each broken model is a synth_model with exactly one defect; loading it
 * must fail with the expected status and a message that names the tensor or
 * key at fault (checked by substrings of loom_last_error()), and leave the
 * output handle NULL. The same model without the defect loads, so the
 * defect is what the loader objects to.
 *
 * The misuse tests call the public API with NULL handles, batches that
 * break its rules, and rows that asked for no logits: every call must fail
 * cleanly (LOOM_ERR_INVALID_ARGUMENT or NULL) and leave the context as it
 * was.
 */
#include "check_main.h"
#include "fixture.h"
#include "synth_model.h"
#include "testdata.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#define MAX_NEEDLES 4

typedef struct broken_model {
	const char *name;
	void (*shape)(synth_config *c);  /* of the intact and the broken model; NULL: default */
	void (*defect)(synth_config *c); /* a broken hyperparameter; NULL: none */
	synth_faults faults;
	loom_status status;
	const char *needles[MAX_NEEDLES]; /* all must appear in the message */
} broken_model;

/* Q8_K blocks hold 256 values: the weight broken with them needs an
 * in-dimension of 256. */
static void ff_256(synth_config *c)
{
	c->n_ff = 256;
}

static void kv_heads_3(synth_config *c)
{
	c->n_head_kv = 3;
}

static void kv_heads_8(synth_config *c)
{
	c->n_head_kv = 8;
}

static void odd_rot(synth_config *c)
{
	c->n_rot = 15;
}

static void rot_past_head(synth_config *c)
{
	c->head_dim = 16;
	c->n_rot = 32;
}

static void tied(synth_config *c)
{
	c->tied = true;
}

static const broken_model broken[] = {
	/* tensors */
	{"missing tensor", NULL, NULL, {.omit_tensor = "blk.1.ffn_up.weight"}, LOOM_ERR_BAD_FORMAT,
	 {"'blk.1.ffn_up.weight'", "missing"}},
	{"missing output norm", NULL, NULL, {.omit_tensor = "output_norm.weight"}, LOOM_ERR_BAD_FORMAT,
	 {"'output_norm.weight'", "missing"}},
	{"missing embedding", NULL, NULL, {.omit_tensor = "token_embd.weight"}, LOOM_ERR_BAD_FORMAT,
	 {"'token_embd.weight'", "missing"}},
	{"wrong shape", NULL, NULL, {.grow_tensor = "blk.0.attn_k.weight"}, LOOM_ERR_BAD_FORMAT,
	 {"'blk.0.attn_k.weight'", "[64, 33]", "expected [64, 32]"}},
	{"wrong shape of a norm", NULL, NULL, {.grow_tensor = "blk.1.ffn_norm.weight"}, LOOM_ERR_BAD_FORMAT,
	 {"'blk.1.ffn_norm.weight'", "[65, 1]", "expected [64, 1]"}},
	{"wrong shape of the head", NULL, NULL, {.grow_tensor = "output.weight"}, LOOM_ERR_BAD_FORMAT,
	 {"'output.weight'", "[64, 301]", "expected [64, 300]"}},
	/* F16 and BF16 norms are widened at load; a quantized one is refused. */
	{"i16 norm", NULL, NULL, {.retype_tensor = "blk.1.attn_norm.weight", .retype = LOOM_DTYPE_I16},
	 LOOM_ERR_UNSUPPORTED, {"'blk.1.attn_norm.weight'", "i16", "must be f32, f16 or bf16"}},
	/* Q8_K is a block type only activations use: no backend multiplies
	 * weights stored in it; I32 is no weight type at all. */
	{"q8_k weight", ff_256, NULL, {.retype_tensor = "blk.0.ffn_down.weight", .retype = LOOM_DTYPE_Q8_K},
	 LOOM_ERR_UNSUPPORTED, {"'blk.0.ffn_down.weight'", "q8_k", "cannot multiply"}},
	{"i32 weight", NULL, NULL, {.retype_tensor = "blk.0.attn_q.weight", .retype = LOOM_DTYPE_I32},
	 LOOM_ERR_UNSUPPORTED, {"'blk.0.attn_q.weight'", "i32"}},
	{"i32 tied embedding", tied, NULL, {.retype_tensor = "token_embd.weight", .retype = LOOM_DTYPE_I32},
	 LOOM_ERR_UNSUPPORTED, {"'token_embd.weight'", "i32"}},

	/* architecture and hyperparameters */
	{"no architecture", NULL, NULL, {.omit_key = "general.architecture"}, LOOM_ERR_BAD_FORMAT,
	 {"general.architecture", "missing"}},
	{"architecture without a contract", NULL, NULL, {.arch = "noarch"}, LOOM_ERR_NOT_FOUND,
	 {"'noarch'", "no contract"}},
	{"no embedding_length", NULL, NULL, {.omit_key = "llama.embedding_length"}, LOOM_ERR_BAD_FORMAT,
	 {"llama.embedding_length", "n_embd"}},
	{"no block_count", NULL, NULL, {.omit_key = "llama.block_count"}, LOOM_ERR_BAD_FORMAT,
	 {"llama.block_count", "n_layer"}},
	{"zero heads", NULL, NULL, {.set_key = "llama.attention.head_count", .set_value = 0}, LOOM_ERR_BAD_FORMAT,
	 {"n_head = 0", "out of range"}},
	{"zero kv heads", NULL, NULL, {.set_key = "llama.attention.head_count_kv", .set_value = 0},
	 LOOM_ERR_BAD_FORMAT, {"n_head_kv = 0", "out of range"}},
	{"zero head_dim", NULL, NULL, {.set_key = "llama.attention.key_length", .set_value = 0}, LOOM_ERR_BAD_FORMAT,
	 {"head_dim = 0", "out of range"}},
	{"zero context", NULL, NULL, {.set_key = "llama.context_length", .set_value = 0}, LOOM_ERR_BAD_FORMAT,
	 {"n_ctx_train = 0", "out of range"}},
	{"huge embedding_length", NULL, NULL, {.set_key = "llama.embedding_length", .set_value = UINT32_MAX},
	 LOOM_ERR_BAD_FORMAT, {"n_embd = ", "out of range"}},
	{"implausible block_count", NULL, NULL, {.set_key = "llama.block_count", .set_value = 100000},
	 LOOM_ERR_BAD_FORMAT, {"n_layer = 100000"}},
	{"embedding_length disagrees with the tensors", NULL, NULL,
	 {.set_key = "llama.embedding_length", .set_value = 65}, LOOM_ERR_BAD_FORMAT,
	 {"'token_embd.weight'", "[64, 300]", "expected [65, 300]"}},
	/* The file's value_length stays 16: loom's attention needs them equal. */
	{"key heads wider than value heads", NULL, NULL, {.set_key = "llama.attention.key_length", .set_value = 32},
	 LOOM_ERR_UNSUPPORTED, {"value heads of 16 differ from key heads of 32"}},
	{"value heads wider than key heads", NULL, NULL, {.set_key = "llama.attention.value_length", .set_value = 32},
	 LOOM_ERR_UNSUPPORTED, {"value heads of 32 differ from key heads of 16"}},
	{"embedding_length as a string", NULL, NULL, {.string_key = "llama.embedding_length"}, LOOM_ERR_BAD_FORMAT,
	 {"'llama.embedding_length'", "string"}},
	{"rope base as a string", NULL, NULL, {.string_key = "llama.rope.freq_base"}, LOOM_ERR_BAD_FORMAT,
	 {"'llama.rope.freq_base'", "string"}},
	{"n_head not a multiple of n_head_kv", NULL, kv_heads_3, {0}, LOOM_ERR_BAD_FORMAT,
	 {"n_head (4)", "n_head_kv (3)"}},
	{"more kv heads than heads", NULL, kv_heads_8, {0}, LOOM_ERR_BAD_FORMAT, {"n_head (4)", "n_head_kv (8)"}},
	{"odd n_rot", NULL, odd_rot, {0}, LOOM_ERR_BAD_FORMAT, {"n_rot = 15", "even"}},
	{"n_rot past head_dim", NULL, rot_past_head, {0}, LOOM_ERR_BAD_FORMAT, {"n_rot = 32", "head_dim = 16"}},

	/* vocabulary */
	{"no tokens", NULL, NULL, {.omit_key = "tokenizer.ggml.tokens"}, LOOM_ERR_BAD_FORMAT,
	 {"vocabulary", "tokenizer.ggml.tokens"}},
	{"no tokenizer model", NULL, NULL, {.omit_key = "tokenizer.ggml.model"}, LOOM_ERR_BAD_FORMAT,
	 {"vocabulary", "tokenizer.ggml.model"}},
	{"BOS id out of range", NULL, NULL, {.set_key = "tokenizer.ggml.bos_token_id", .set_value = 1000},
	 LOOM_ERR_BAD_FORMAT, {"'tokenizer.ggml.bos_token_id' = 1000", "out of range"}},
	{"vocabulary larger than the embedding", NULL, NULL, {.extra_tokens = 10}, LOOM_ERR_BAD_FORMAT,
	 {"'token_embd.weight'", "300 rows", "310 tokens"}},
};
#define N_BROKEN ((int)(sizeof(broken) / sizeof(broken[0])))

/* The default synthetic config: n_vocab 300, n_embd 64, 4 heads of 16,
 * 2 kv heads (kv_dim 32), untied; then b's shape. */
static synth_config config_of(const broken_model *b)
{
	synth_config c = synth_default_config();
	c.head_dim = 16;
	if (b != NULL && b->shape != NULL)
		b->shape(&c);
	return c;
}

static const char *write_model(const synth_config *c, const synth_faults *faults, const char *file)
{
	static char path[4096];
	const char *dir = test_tmp_dir("model_errors");
	ck_assert_msg(dir != NULL, "cannot make a temporary directory");
	snprintf(path, sizeof(path), "%s/%s", dir, file);
	synth_model *sm = synth_model_build(c, faults);
	ck_assert_msg(synth_model_write(sm, path), "cannot write %s", path);
	synth_model_free(sm);
	return path;
}

START_TEST(broken_model_fails)
{
	const broken_model *b = &broken[_i];
	loom_runtime *rt = test_runtime(NULL, 1);
	synth_config c = config_of(b);

	/* Without its defect the model loads. */
	loom_model *m = NULL;
	const char *path = write_model(&c, NULL, "intact.gguf");
	ck_assert_msg(loom_model_load(rt, path, NULL, &m) == LOOM_OK, "%s: the intact model fails: %s", b->name,
		      loom_last_error());
	loom_model_free(m);

	if (b->defect != NULL)
		b->defect(&c);
	path = write_model(&c, &b->faults, "broken.gguf");
	const char *msg = test_load_refused(rt, path, b->name, b->status, b->needles, MAX_NEEDLES);
	printf("model error %-38s %s\n", b->name, msg);
	loom_runtime_free(rt);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* API misuse                                                               */

typedef struct session {
	loom_runtime *rt;
	loom_model *model;
	loom_context *ctx;
	char path[4096];
} session;

static void session_open(session *s)
{
	synth_config c = config_of(NULL);
	snprintf(s->path, sizeof(s->path), "%s", write_model(&c, NULL, "model.gguf"));
	s->rt = test_runtime(NULL, 1);
	ck_assert_int_eq(loom_model_load(s->rt, s->path, NULL, &s->model), LOOM_OK);
	s->ctx = test_context(s->model, 32, 8, LOOM_DTYPE_F32);
}

static void session_close(session *s)
{
	loom_context_free(s->ctx);
	loom_model_free(s->model);
	loom_runtime_free(s->rt);
}

#define EXPECT_INVALID(call)                                                                     \
	do {                                                                                     \
		loom_status st_ = (call);                                                        \
		ck_assert_msg(st_ == LOOM_ERR_INVALID_ARGUMENT, "%s gave %d (%s), not INVALID_ARGUMENT", \
			      #call, st_, loom_strerror(st_));                                   \
		ck_assert_msg(loom_last_error()[0] != '\0', "%s set no message", #call);         \
	} while (0)

START_TEST(null_arguments)
{
	session s;
	session_open(&s);
	loom_model *m = NULL;
	loom_context *ctx = NULL;
	loom_tensor_info info;
	loom_token tok = 5;
	size_t n;
	char buf[16];

	EXPECT_INVALID(loom_model_load(NULL, s.path, NULL, &m));
	ck_assert_ptr_null(m);
	EXPECT_INVALID(loom_model_load(s.rt, NULL, NULL, &m));
	EXPECT_INVALID(loom_model_load(s.rt, s.path, NULL, NULL));
	EXPECT_INVALID(loom_context_create(NULL, NULL, &ctx));
	ck_assert_ptr_null(ctx);
	EXPECT_INVALID(loom_context_create(s.model, NULL, NULL));
	EXPECT_INVALID(loom_decode(NULL, &(loom_batch){.n_tokens = 1, .tokens = &tok}));
	EXPECT_INVALID(loom_decode(s.ctx, NULL));
	EXPECT_INVALID(loom_decode(s.ctx, &(loom_batch){.n_tokens = 1, .tokens = NULL}));
	EXPECT_INVALID(loom_kv_seq_remove(NULL, 0, 0, -1));
	EXPECT_INVALID(loom_tokenize(NULL, "a", 1, true, false, &tok, 1, &n));
	EXPECT_INVALID(loom_tokenize(s.model, "a", 1, true, false, &tok, 1, NULL));
	EXPECT_INVALID(loom_tokenize(s.model, NULL, 1, true, false, &tok, 1, &n));
	EXPECT_INVALID(loom_token_to_piece(NULL, 5, false, buf, sizeof(buf), &n));
	EXPECT_INVALID(loom_token_to_piece(s.model, 5, false, buf, sizeof(buf), NULL));
	EXPECT_INVALID(loom_model_tensor_info(NULL, 0, &info));
	EXPECT_INVALID(loom_model_tensor_info(s.model, 0, NULL));
	EXPECT_INVALID(loom_sampler_create(NULL, NULL));
	EXPECT_INVALID(loom_generate(NULL, "a", NULL, NULL, NULL, NULL));
	EXPECT_INVALID(loom_generate(s.ctx, NULL, NULL, NULL, NULL, NULL));
	EXPECT_INVALID(loom_generate_tokens(NULL, &tok, 1, NULL, NULL, NULL, NULL));
	EXPECT_INVALID(loom_generate_tokens(s.ctx, NULL, 1, NULL, NULL, NULL, NULL));
	EXPECT_INVALID(loom_generate_tokens(s.ctx, &tok, 0, NULL, NULL, NULL, NULL));
	EXPECT_INVALID(loom_runtime_create(NULL, NULL));
	ck_assert_ptr_null(loom_get_logits(NULL, 0));
	ck_assert_int_eq(loom_kv_seq_pos_max(NULL, 0), -1);
	ck_assert_uint_eq(loom_kv_used(NULL), 0);
	loom_kv_clear(NULL);
	loom_context_free(NULL);
	loom_model_free(NULL);
	loom_runtime_free(NULL);
	loom_sampler_free(NULL);
	session_close(&s);
}
END_TEST

START_TEST(bad_handles_and_ranges)
{
	session s;
	session_open(&s);
	loom_context *ctx = NULL;
	loom_model *vocab_only = NULL;
	loom_tensor_info info;
	size_t n;
	char buf[16];

	loom_context_params p = loom_context_default_params();
	p.kv_type = LOOM_DTYPE_Q4_K;
	EXPECT_INVALID(loom_context_create(s.model, &p, &ctx));
	ck_assert_ptr_null(ctx);
	/* A Q8_0 cache stores blocks of 32 values: heads of 16 cannot be cut
	 * from it. */
	p.kv_type = LOOM_DTYPE_Q8_0;
	ck_assert_int_eq(loom_context_create(s.model, &p, &ctx), LOOM_ERR_UNSUPPORTED);
	ck_assert_ptr_null(ctx);
	ck_assert_msg(strstr(loom_last_error(), "q8_0 KV cache stores blocks of 32") != NULL, "%s", loom_last_error());

	loom_model_params mp = loom_model_default_params();
	mp.vocab_only = true;
	ck_assert_int_eq(loom_model_load(s.rt, s.path, &mp, &vocab_only), LOOM_OK);
	EXPECT_INVALID(loom_context_create(vocab_only, NULL, &ctx));
	ck_assert_ptr_null(ctx);
	loom_model_free(vocab_only);

	EXPECT_INVALID(loom_model_tensor_info(s.model, loom_model_tensor_count(s.model), &info));
	EXPECT_INVALID(loom_token_to_piece(s.model, -1, false, buf, sizeof(buf), &n));
	EXPECT_INVALID(loom_token_to_piece(s.model, loom_model_n_vocab(s.model), false, buf, sizeof(buf), &n));

	loom_model *absent = NULL;
	loom_status st = loom_model_load(s.rt, "/nonexistent/model.gguf", NULL, &absent);
	ck_assert_int_eq(st, LOOM_ERR_IO);
	ck_assert_msg(strstr(loom_last_error(), "/nonexistent/model.gguf") != NULL, "message: %s", loom_last_error());
	ck_assert_ptr_null(absent);
	session_close(&s);
}
END_TEST

/* A batch that breaks a rule fails before touching the cache: what was
 * cached stays, and the next good batch works. */
static void expect_bad_batch(session *s, const loom_batch *b, const char *what, const char *needle)
{
	uint32_t used = loom_kv_used(s->ctx);
	int32_t pos_max = loom_kv_seq_pos_max(s->ctx, 0);
	loom_status st = loom_decode(s->ctx, b);
	ck_assert_msg(st == LOOM_ERR_INVALID_ARGUMENT, "%s gave %d (%s)", what, st, loom_strerror(st));
	ck_assert_msg(strstr(loom_last_error(), needle) != NULL, "%s: message lacks \"%s\": %s", what, needle,
		      loom_last_error());
	ck_assert_msg(loom_kv_used(s->ctx) == used && loom_kv_seq_pos_max(s->ctx, 0) == pos_max,
		      "%s changed the cache", what);
}

START_TEST(bad_batches)
{
	session s;
	session_open(&s);
	const int32_t n_vocab = loom_model_n_vocab(s.model);
	loom_token good[9] = {1, 17, 260, 261, 262, 263, 264, 265, 266};

	ck_assert_int_eq(loom_decode(s.ctx, &(loom_batch){.n_tokens = 2, .tokens = good}), LOOM_OK);

	expect_bad_batch(&s, &(loom_batch){.n_tokens = 0, .tokens = good}, "an empty batch", "not 0");
	expect_bad_batch(&s, &(loom_batch){.n_tokens = -3, .tokens = good}, "a negative count", "not -3");
	expect_bad_batch(&s, &(loom_batch){.n_tokens = 9, .tokens = good}, "9 tokens with n_batch 8", "not 9");
	expect_bad_batch(&s, &(loom_batch){.n_tokens = 2, .tokens = (loom_token[]){5, -1}}, "token -1", "-1");
	expect_bad_batch(&s, &(loom_batch){.n_tokens = 2, .tokens = (loom_token[]){5, n_vocab}}, "token n_vocab",
			 "300");
	expect_bad_batch(&s, &(loom_batch){.n_tokens = 1, .tokens = good, .seq_id = (int32_t[]){-1}},
			 "sequence -1", "sequence id -1");
	expect_bad_batch(&s, &(loom_batch){.n_tokens = 1, .tokens = good, .pos = (int32_t[]){-5}}, "position -5",
			 "position -5");

	/* Logits: only the rows that asked for them, only of the last batch. */
	loom_batch b = {.n_tokens = 3, .tokens = good + 2, .logits = (int8_t[]){1, 0, 1}};
	ck_assert_int_eq(loom_decode(s.ctx, &b), LOOM_OK);
	ck_assert_ptr_nonnull(loom_get_logits(s.ctx, 0));
	ck_assert_ptr_null(loom_get_logits(s.ctx, 1));
	ck_assert_ptr_nonnull(loom_get_logits(s.ctx, 2));
	ck_assert_ptr_null(loom_get_logits(s.ctx, 3));
	ck_assert_ptr_null(loom_get_logits(s.ctx, -1));
	ck_assert_uint_eq(loom_kv_used(s.ctx), 5);

	/* Default logits: the last row only. */
	ck_assert_int_eq(loom_decode(s.ctx, &(loom_batch){.n_tokens = 2, .tokens = good + 5}), LOOM_OK);
	ck_assert_ptr_null(loom_get_logits(s.ctx, 0));
	ck_assert_ptr_nonnull(loom_get_logits(s.ctx, 1));
	/* No logits at all still fills the cache. */
	ck_assert_int_eq(loom_decode(s.ctx, &(loom_batch){.n_tokens = 1, .tokens = good + 7,
							  .logits = (int8_t[]){0}}), LOOM_OK);
	ck_assert_ptr_null(loom_get_logits(s.ctx, 0));
	ck_assert_int_eq(loom_kv_seq_pos_max(s.ctx, 0), 7);
	session_close(&s);
}
END_TEST

/* A sequence at the largest position has no next one: a batch that would
 * continue it is refused, not wrapped around. */
START_TEST(last_position)
{
	session s;
	session_open(&s);
	loom_token tok[2] = {5, 6};

	loom_batch at_max = {.n_tokens = 1, .tokens = tok, .pos = (int32_t[]){INT32_MAX}};
	ck_assert_msg(loom_decode(s.ctx, &at_max) == LOOM_OK, "decode at INT32_MAX: %s", loom_last_error());
	ck_assert_ptr_nonnull(loom_get_logits(s.ctx, 0));
	expect_bad_batch(&s, &(loom_batch){.n_tokens = 1, .tokens = tok + 1}, "continuing past INT32_MAX",
			 "position");
	ck_assert_int_eq(loom_kv_seq_pos_max(s.ctx, 0), INT32_MAX);
	session_close(&s);
}
END_TEST

static Suite *model_errors_suite(void)
{
	Suite *s = suite_create("model_errors");
	TCase *tc = tcase_create("broken models");
	tcase_add_loop_test(tc, broken_model_fails, 0, N_BROKEN);
	suite_add_tcase(s, tc);

	tc = tcase_create("misuse");
	tcase_add_test(tc, null_arguments);
	tcase_add_test(tc, bad_handles_and_ranges);
	tcase_add_test(tc, bad_batches);
	tcase_add_test(tc, last_position);
	suite_add_tcase(s, tc);
	return s;
}

LOOM_TEST_MAIN(model_errors_suite)
