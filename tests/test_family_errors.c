/*
 * test_family_errors.c - hostile models of the families loom takes as
 * contract files: experts and their routing, windows, soft-caps, sinks,
 * shared experts, leading dense layers, multipliers, epsilons and bases.
 *
 * Each broken model is one of the test suite's family models
 * (family_models.h) with exactly one defect: a hyperparameter out of
 * range, of the wrong type or missing, or a tensor missing or misshapen.
 * Loading it must fail with the expected status and a message that names
 * the key or tensor at fault (substrings of loom_last_error()), and leave
 * the output handle NULL. The same model without the defect loads and
 * decodes, so the defect is what the loader objects to.
 */
#include "check_main.h"
#include "family_models.h"
#include "fixture.h"
#include "synth_model.h"
#include "testdata.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>

#define MAX_NEEDLES 4

typedef struct broken_family {
	const char *name;
	const char *family;              /* a family model's name (family_models.h) */
	void (*defect)(synth_config *c); /* a broken hyperparameter; NULL: none */
	synth_faults faults;             /* its arch is the family's */
	loom_status status;
	const char *needles[MAX_NEEDLES]; /* all must appear in the message */
} broken_family;

static void negative_attention_cap(synth_config *c)
{
	c->attn_softcap = -4.0f;
}

static void nan_final_cap(synth_config *c)
{
	c->final_softcap = NAN;
}

static void negative_expert_scale(synth_config *c)
{
	c->expert_weights_scale = -2.5f;
}

static void negative_embedding_mult(synth_config *c)
{
	c->embedding_mult = -12.0f;
}

static void infinite_residual_mult(synth_config *c)
{
	c->residual_mult = INFINITY;
}

static void infinite_norm_eps(synth_config *c)
{
	c->norm_eps = INFINITY;
}

static void infinite_rope_base(synth_config *c)
{
	c->rope_theta = INFINITY;
}

static void short_window_list(synth_config *c)
{
	c->n_window_layers = 2;
}

static const broken_family broken[] = {
	/* experts: counts and the router */
	{"no experts used", "mixtral-q8_0", NULL, {.set_key = "llama.expert_used_count", .set_value = 0},
	 LOOM_ERR_BAD_FORMAT, {"n_expert_used = 0", "out of range"}},
	{"more experts used than there are", "mixtral-q8_0", NULL,
	 {.set_key = "llama.expert_used_count", .set_value = 9}, LOOM_ERR_BAD_FORMAT, {"9 experts a token out of 8"}},
	/* Without a count the file is a dense llama, whose FFN it lacks. */
	{"no expert count", "mixtral-q8_0", NULL, {.omit_key = "llama.expert_count"}, LOOM_ERR_BAD_FORMAT,
	 {"'blk.0.ffn_gate.weight'", "missing", "'blk.0.ffn_gate_exps.weight'", "no expert count ('llama.expert_count')"}},
	{"expert count below the tensors'", "mixtral-q8_0", NULL, {.set_key = "llama.expert_count", .set_value = 4},
	 LOOM_ERR_BAD_FORMAT, {"'blk.0.ffn_gate_inp.weight'", "[64, 8]", "expected [64, 4]"}},
	{"expert count past the tensors'", "mixtral-q8_0", NULL, {.set_key = "llama.expert_count", .set_value = 16},
	 LOOM_ERR_BAD_FORMAT, {"'blk.0.ffn_gate_inp.weight'", "[64, 8]", "expected [64, 16]"}},
	{"implausible expert count", "qwen3moe-q8_0", NULL,
	 {.set_key = "qwen3moe.expert_count", .set_value = UINT32_MAX}, LOOM_ERR_BAD_FORMAT,
	 {"n_expert = 4294967295", "out of range"}},
	{"no router", "mixtral-q8_0", NULL, {.omit_tensor = "blk.1.ffn_gate_inp.weight"}, LOOM_ERR_BAD_FORMAT,
	 {"'blk.1.ffn_gate_inp.weight'", "missing"}},
	{"misshapen experts", "olmoe-q8_0", NULL, {.grow_tensor = "blk.0.ffn_down_exps.weight"}, LOOM_ERR_BAD_FORMAT,
	 {"'blk.0.ffn_down_exps.weight'", "9]", "8] (ffn_down_exps: every expert's matrix)"}},
	{"experts as a string", "granitemoe-q8_0", NULL, {.string_key = "granitemoe.expert_used_count"},
	 LOOM_ERR_BAD_FORMAT, {"'granitemoe.expert_used_count'", "string"}},
	{"expert width zero", "qwen3moe-q8_0", NULL,
	 {.set_key = "qwen3moe.expert_feed_forward_length", .set_value = 0}, LOOM_ERR_BAD_FORMAT,
	 {"n_ff_expert = 0", "out of range"}},
	{"no shared expert gate", "qwen2moe-q8_0", NULL, {.omit_tensor = "blk.0.ffn_gate_inp_shexp.weight"},
	 LOOM_ERR_BAD_FORMAT, {"'blk.0.ffn_gate_inp_shexp.weight'", "missing"}},
	{"shared expert width zero", "qwen2moe-q8_0", NULL,
	 {.set_key = "qwen2moe.expert_shared_feed_forward_length", .set_value = 0}, LOOM_ERR_BAD_FORMAT,
	 {"n_ff_shared = 0", "out of range"}},
	/* Every layer then wants the dense FFN the file has only in its first. */
	{"dense layers past the depth", "dots1-q8_0", NULL,
	 {.set_key = "dots1.leading_dense_block_count", .set_value = 1000}, LOOM_ERR_BAD_FORMAT,
	 {"n_dense_layers = 1000", "past the model's 3 layers"}},
	{"dense layers over the experts' layers", "dots1-q8_0", NULL,
	 {.set_key = "dots1.leading_dense_block_count", .set_value = 2}, LOOM_ERR_BAD_FORMAT,
	 {"'blk.1.ffn_gate.weight'", "missing", "layer 1's experts ('blk.1.ffn_gate_exps.weight')",
	  "'dots1.leading_dense_block_count' = 2 makes the layer dense"}},
	{"unknown gating function", "dots1-q8_0", NULL, {.set_key = "dots1.expert_gating_func", .set_value = 7},
	 LOOM_ERR_UNSUPPORTED, {"expert gating function 7"}},
	{"negative expert weight scale", "dots1-q8_0", negative_expert_scale, {0}, LOOM_ERR_BAD_FORMAT,
	 {"expert_weights_scale = -2.5", "out of range"}},
	{"no expert bias", "gpt-oss-mxfp4", NULL, {.omit_tensor = "blk.1.ffn_up_exps.bias"}, LOOM_ERR_BAD_FORMAT,
	 {"'blk.1.ffn_up_exps.bias'", "missing"}},
	{"i32 experts", "gpt-oss-mxfp4", NULL, {.retype_tensor = "blk.0.ffn_gate_exps.weight", .retype = LOOM_DTYPE_I32},
	 LOOM_ERR_UNSUPPORTED, {"'blk.0.ffn_gate_exps.weight'", "i32", "cannot multiply experts"}},

	/* scalars: multipliers, epsilons, bases */
	{"negative embedding multiplier", "granite-q8_0", negative_embedding_mult, {0}, LOOM_ERR_BAD_FORMAT,
	 {"embedding_multiplier = -12", "must be positive"}},
	{"infinite residual multiplier", "granitemoe-q8_0", infinite_residual_mult, {0}, LOOM_ERR_BAD_FORMAT,
	 {"residual_multiplier = inf", "must be positive and finite"}},
	{"infinite norm epsilon", "qwen3moe-q8_0", infinite_norm_eps, {0}, LOOM_ERR_BAD_FORMAT,
	 {"norm_eps = inf", "must be positive and finite"}},
	{"infinite RoPE base", "gpt-oss-q8_0", infinite_rope_base, {0}, LOOM_ERR_BAD_FORMAT,
	 {"rope_theta = inf", "must be positive and finite"}},

	/* attention: windows, caps, sinks */
	{"window of zero", "gemma2-q8_0", NULL, {.set_key = "gemma2.attention.sliding_window", .set_value = 0},
	 LOOM_ERR_BAD_FORMAT, {"sliding_window = 0", "windowed layers"}},
	{"window as a string", "gemma3-q8_0", NULL, {.string_key = "gemma3.attention.sliding_window"},
	 LOOM_ERR_BAD_FORMAT, {"'gemma3.attention.sliding_window'", "string"}},
	{"window past the limit", "gemma3-q8_0", NULL,
	 {.set_key = "gemma3.attention.sliding_window", .set_value = UINT32_MAX}, LOOM_ERR_BAD_FORMAT,
	 {"sliding_window = 4294967295", "out of range"}},
	{"window list shorter than the layers", "olmo3-q8_0", short_window_list, {0}, LOOM_ERR_BAD_FORMAT,
	 {"'olmo2.attention.sliding_window_pattern'", "has 2 entries for 4 layers"}},
	{"negative attention soft-cap", "gemma2-q8_0", negative_attention_cap, {0}, LOOM_ERR_BAD_FORMAT,
	 {"attn_logit_softcap = -4", "must be 0 (none) or positive"}},
	{"NaN final soft-cap", "gemma2-q8_0", nan_final_cap, {0}, LOOM_ERR_BAD_FORMAT,
	 {"final_logit_softcap = nan", "must be 0 (none) or positive"}},
	{"soft-cap as a string", "gemma2-q8_0", NULL, {.string_key = "gemma2.attn_logit_softcapping"},
	 LOOM_ERR_BAD_FORMAT, {"'gemma2.attn_logit_softcapping'", "string"}},
	{"no sinks", "gpt-oss-q8_0", NULL, {.omit_tensor = "blk.0.attn_sinks.weight"}, LOOM_ERR_BAD_FORMAT,
	 {"'blk.0.attn_sinks.weight'", "missing"}},
	{"misshapen sinks", "gpt-oss-q8_0", NULL, {.grow_tensor = "blk.1.attn_sinks.weight"}, LOOM_ERR_BAD_FORMAT,
	 {"'blk.1.attn_sinks.weight'", "[5, 1]", "expected [4, 1]"}},
	{"no post-attention norm", "gemma3-q8_0", NULL, {.omit_tensor = "blk.2.post_attention_norm.weight"},
	 LOOM_ERR_BAD_FORMAT, {"'blk.2.post_attention_norm.weight'", "missing"}},
	{"misshapen fused qkv", "phi3-q8_0", NULL, {.grow_tensor = "blk.0.attn_qkv.weight"}, LOOM_ERR_BAD_FORMAT,
	 {"'blk.0.attn_qkv.weight'", "[64, 193]", "expected [64, 192]"}},
};
#define N_BROKEN ((int)(sizeof(broken) / sizeof(broken[0])))

static const char *write_model(const family_model *f, const synth_config *c, synth_faults faults, const char *file)
{
	static char path[4096];
	const char *dir = test_tmp_dir("family_errors");
	ck_assert_msg(dir != NULL, "cannot make a temporary directory");
	snprintf(path, sizeof(path), "%s/%s", dir, file);
	faults.arch = f->arch;
	synth_model *sm = synth_model_build(c, &faults);
	ck_assert_msg(synth_model_write(sm, path), "cannot write %s", path);
	synth_model_free(sm);
	return path;
}

/* The intact model loads and decodes a token to finite logits. */
static void intact_decodes(loom_runtime *rt, const family_model *f, const char *name)
{
	loom_model *m = NULL;
	const char *path = write_model(f, &f->config, (synth_faults){0}, "intact.gguf");
	ck_assert_msg(loom_model_load(rt, path, NULL, &m) == LOOM_OK, "%s: the intact model fails: %s", name,
		      loom_last_error());
	loom_context *ctx = test_context(m, 16, 4, LOOM_DTYPE_F16);
	loom_token tok = 1;
	loom_batch b = {.n_tokens = 1, .tokens = &tok};
	ck_assert_msg(loom_decode(ctx, &b) == LOOM_OK, "%s: the intact model's decode: %s", name, loom_last_error());
	const float *logits = loom_get_logits(ctx, 0);
	for (int32_t v = 0; v < loom_model_n_vocab(m); v++)
		ck_assert_msg(isfinite(logits[v]), "%s: intact logit %d is %g", name, v, (double)logits[v]);
	loom_context_free(ctx);
	loom_model_free(m);
}

START_TEST(broken_family_fails)
{
	const broken_family *b = &broken[_i];
	const family_model *f = family_model_named(b->family);
	ck_assert_msg(f != NULL && f->scheme == NULL, "%s: no unquantized family model %s", b->name, b->family);
	loom_runtime *rt = test_runtime(NULL, 1);
	intact_decodes(rt, f, b->name);

	synth_config c = f->config;
	if (b->defect != NULL)
		b->defect(&c);
	const char *path = write_model(f, &c, b->faults, "broken.gguf");
	const char *msg = test_load_refused(rt, path, b->name, b->status, b->needles, MAX_NEEDLES);
	printf("family error %-36s %s\n", b->name, msg);
	loom_runtime_free(rt);
}
END_TEST

static Suite *family_errors_suite(void)
{
	Suite *s = suite_create("family_errors");
	TCase *tc = tcase_create("broken");
	tcase_set_timeout(tc, 120);
	tcase_add_loop_test(tc, broken_family_fails, 0, N_BROKEN);
	suite_add_tcase(s, tc);
	return s;
}

LOOM_TEST_MAIN(family_errors_suite)
