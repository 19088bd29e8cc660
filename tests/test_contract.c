/*
 * test_contract.c - architecture contracts (arch/NAME.yaml).
 *
 * The shipped llama contract must read back as the choices and names it
 * states. Broken contracts are a small valid one with one edit each; every
 * one must be LOOM_ERR_CONTRACT with the file and the line to look at,
 * unknown keys included (a contract is never read loosely). Finally a real
 * model is loaded through a contract in a directory of the test's own, and
 * a misspelled tensor name in it must fail the load naming that tensor.
 */
#include "check_main.h"
#include "model/contract.h"
#include "fixture.h"
#include "loom/plugin_api.h"
#include "testdata.h"

#include <glob.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LLAMA_YAML LOOM_TEST_SOURCE_DIR "/arch/llama.yaml"

/* The smallest complete contract: defaults left to the code where it has
 * them, every tensor the block needs. */
static const char tiny_yaml[] =
	"name: tiny\n"
	"block:\n"
	"  norm: rmsnorm\n"
	"  ffn: swiglu\n"
	"  positions: rope\n"
	"hparams:\n"
	"  gguf:\n"
	"    n_embd: \"{arch}.embedding_length\"\n"
	"    n_layer: \"{arch}.block_count\"\n"
	"    n_ff: \"{arch}.feed_forward_length\"\n"
	"    n_head: \"{arch}.attention.head_count\"\n"
	"defaults:\n"
	"  norm_eps: 1.0e-5\n"
	"tensors:\n"
	"  gguf:\n"
	"    token_embd: token_embd.weight\n"
	"    output_norm: output_norm.weight\n"
	"    output: output.weight\n"
	"    attn_norm: blk.{i}.attn_norm.weight\n"
	"    attn_q: blk.{i}.attn_q.weight\n"
	"    attn_k: blk.{i}.attn_k.weight\n"
	"    attn_v: blk.{i}.attn_v.weight\n"
	"    attn_output: blk.{i}.attn_output.weight\n"
	"    ffn_norm: blk.{i}.ffn_norm.weight\n"
	"    ffn_gate: blk.{i}.ffn_gate.weight\n"
	"    ffn_up: blk.{i}.ffn_up.weight\n"
	"    ffn_down: blk.{i}.ffn_down.weight\n";

/* ------------------------------------------------------------------------ */
/* Helpers                                                                  */

/* A fresh temporary directory for test name, copied into buf. */
static const char *tmp_dir(char *buf, size_t size, const char *name)
{
	const char *dir = test_tmp_dir(name);
	ck_assert_msg(dir != NULL, "cannot make a temporary directory for %s", name);
	snprintf(buf, size, "%s", dir);
	return buf;
}

/* text with its first `from` replaced by `to`, into out. */
static const char *edit(char *out, size_t size, const char *text, const char *from, const char *to)
{
	const char *at = strstr(text, from);
	ck_assert_msg(at != NULL, "\"%s\" is not in the text to edit", from);
	int n = snprintf(out, size, "%.*s%s%s", (int)(at - text), text, to, at + strlen(from));
	ck_assert_msg(n >= 0 && (size_t)n < size, "the edited text does not fit");
	return out;
}

static void expect_in(const char *err, const char *needle)
{
	ck_assert_msg(needle == NULL || strstr(err, needle) != NULL, "\"%s\" is not in the error: %s",
		      needle, err);
}

static loom_contract *load_ok(const char *path)
{
	loom_contract *c = NULL;
	loom_status st = loom_contract_load(path, &c);
	ck_assert_msg(st == LOOM_OK, "%s: %s", path, loom_last_error());
	ck_assert_ptr_nonnull(c);
	return c;
}

/* ------------------------------------------------------------------------ */
/* Good contracts                                                           */

START_TEST(llama_contract_reads_back)
{
	loom_contract *c = load_ok(LLAMA_YAML);
	ck_assert_str_eq(c->name, "llama");
	ck_assert_str_eq(c->path, LLAMA_YAML);
	ck_assert_int_eq(c->norm, LOOM_NORM_RMSNORM);
	ck_assert_int_eq(c->ffn, LOOM_FFN_SWIGLU);
	ck_assert_int_eq(c->positions, LOOM_POSITIONS_ROPE);
	ck_assert_int_eq(c->rope_style[LOOM_CFMT_GGUF], LOOM_ROPE_NORMAL);
	ck_assert_int_eq(c->qkv[LOOM_CFMT_GGUF], LOOM_QKV_SEPARATE);
	ck_assert_int_eq(c->residual, LOOM_RESIDUAL_SEQUENTIAL);
	ck_assert_int_eq(c->tied, LOOM_TIED_IF_MISSING);

	loom_spellings const *keys = c->hparam_keys[LOOM_CFMT_GGUF];
	ck_assert_str_eq(keys[LOOM_HP_N_EMBD][0], "{arch}.embedding_length");
	ck_assert_str_eq(keys[LOOM_HP_N_LAYER][0], "{arch}.block_count");
	ck_assert_str_eq(keys[LOOM_HP_N_HEAD_KV][0], "{arch}.attention.head_count_kv");
	ck_assert_str_eq(keys[LOOM_HP_NORM_EPS][0], "{arch}.attention.layer_norm_rms_epsilon");
	ck_assert_str_eq(keys[LOOM_HP_ROPE_THETA][0], "{arch}.rope.freq_base");
	/* GGUF stores n_rot itself, never the fraction, and Llama 3's scaling
	 * as the rope_freqs tensor; llama soft-caps and multiplies nothing. */
	for (int hp = 0; hp < LOOM_HP_COUNT; hp++)
		ck_assert_msg(keys[hp] != NULL || hp == LOOM_HP_ROPE_PARTIAL || hp == LOOM_HP_ROPE_LOW_FREQ ||
				      hp == LOOM_HP_ROPE_HIGH_FREQ || hp >= LOOM_HP_FINAL_LOGIT_SOFTCAP,
			      "llama.yaml gives no GGUF key for %s",
			      loom_hparam_name((loom_hparam)hp));

	ck_assert_msg(c->has_default[LOOM_HP_NORM_EPS] && c->defaults[LOOM_HP_NORM_EPS] == 1e-5,
		      "norm_eps default %g", c->defaults[LOOM_HP_NORM_EPS]);
	ck_assert_msg(c->has_default[LOOM_HP_ROPE_THETA] && c->defaults[LOOM_HP_ROPE_THETA] == 10000.0,
		      "rope_theta default %g", c->defaults[LOOM_HP_ROPE_THETA]);
	ck_assert_msg(c->has_default[LOOM_HP_N_CTX_TRAIN] && c->defaults[LOOM_HP_N_CTX_TRAIN] == 2048,
		      "n_ctx_train default %g", c->defaults[LOOM_HP_N_CTX_TRAIN]);
	ck_assert_msg(!c->has_default[LOOM_HP_N_EMBD], "n_embd has a default");

	loom_spellings const *names = c->tensor_names[LOOM_CFMT_GGUF];
	ck_assert_str_eq(names[LOOM_ROLE_TOKEN_EMBD][0], "token_embd.weight");
	ck_assert_str_eq(names[LOOM_ROLE_OUTPUT][0], "output.weight");
	ck_assert_str_eq(names[LOOM_ROLE_ATTN_Q][0], "blk.{i}.attn_q.weight");
	ck_assert_str_eq(names[LOOM_ROLE_FFN_DOWN][0], "blk.{i}.ffn_down.weight");
	/* Exactly the roles llama's choices use are named (an optional one
	 * may be left out). */
	for (int r = 0; r < LOOM_ROLE_COUNT; r++) {
		bool uses = loom_contract_uses_role(c, LOOM_CFMT_GGUF, (loom_role)r);
		if (uses && names[r] == NULL && loom_role_is_optional((loom_role)r))
			continue;
		ck_assert_msg(uses == (names[r] != NULL), "llama.yaml: %s used %d, named %d",
			      loom_role_name((loom_role)r), uses, names[r] != NULL);
		if (!uses)
			continue;
		ck_assert_msg(loom_role_is_per_layer((loom_role)r) == (strstr(names[r][0], "{i}") != NULL),
			      "%s: per layer %d, name %s", loom_role_name((loom_role)r),
			      loom_role_is_per_layer((loom_role)r), names[r][0]);
	}
	loom_contract_free(c);
	loom_contract_free(NULL);
}
END_TEST

/* What the block leaves out takes the documented default. */
START_TEST(omitted_choices_take_their_defaults)
{
	char dir[4096], path[4200];
	tmp_dir(dir, sizeof(dir), "contract_defaults");
	loom_contract *c = load_ok(test_write_file(path, sizeof(path), dir, "tiny.yaml", tiny_yaml));
	ck_assert_str_eq(c->name, "tiny");
	ck_assert_int_eq(c->rope_style[LOOM_CFMT_GGUF], LOOM_ROPE_NORMAL);
	ck_assert_int_eq(c->qkv[LOOM_CFMT_GGUF], LOOM_QKV_SEPARATE);
	ck_assert_int_eq(c->residual, LOOM_RESIDUAL_SEQUENTIAL);
	ck_assert_int_eq(c->tied, LOOM_TIED_NEVER);
	ck_assert_ptr_null(c->hparam_keys[LOOM_CFMT_GGUF][LOOM_HP_ROPE_THETA]);
	ck_assert_msg(!c->has_default[LOOM_HP_ROPE_THETA], "rope_theta has a default");
	loom_contract_free(c);
}
END_TEST

/* A head tied to the embedding needs no output tensor. */
START_TEST(tied_head_needs_no_output_tensor)
{
	char dir[4096], path[4200], text[4096], text2[4096];
	tmp_dir(dir, sizeof(dir), "contract_tied");
	edit(text, sizeof(text), tiny_yaml, "  positions: rope\n",
	     "  positions: rope\n  rope_style: neox\n  tied_embeddings: always\n");
	edit(text2, sizeof(text2), text, "    output: output.weight\n", "");
	loom_contract *c = load_ok(test_write_file(path, sizeof(path), dir, "tiny.yaml", text2));
	ck_assert_int_eq(c->tied, LOOM_TIED_ALWAYS);
	ck_assert_int_eq(c->rope_style[LOOM_CFMT_GGUF], LOOM_ROPE_NEOX);
	ck_assert_msg(!loom_contract_uses_role(c, LOOM_CFMT_GGUF, LOOM_ROLE_OUTPUT), "a tied head still uses output");
	ck_assert_ptr_null(c->tensor_names[LOOM_CFMT_GGUF][LOOM_ROLE_OUTPUT]);
	loom_contract_free(c);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Broken contracts                                                         */

struct broken {
	const char *test;
	const char *from, *to; /* the one edit to tiny_yaml */
	const char *mark;      /* the error's line is this text's (after the edit) */
	const char *needle1;   /* must be in the message */
	const char *needle2;
};

static const struct broken broken[] = {
	{"contract_depth_not_a_count", "defaults:\n", "defaults_by_layers:\n  27b: {norm_eps: 1.0e-6}\ndefaults:\n",
	 "27b", "defaults_by_layers must be a number, not '27b'", NULL},
	{"contract_depth_sets_depth", "defaults:\n", "defaults_by_layers:\n  46: {n_layer: 4}\ndefaults:\n",
	 "46: {n_layer", "unknown key 'n_layer' in defaults_by_layers", NULL},
	{"contract_depth_twice", "defaults:\n",
	 "defaults_by_layers:\n  46: {norm_eps: 1.0e-6}\n  \"46\": {norm_eps: 1.0e-5}\ndefaults:\n", "\"46\"",
	 "defaults_by_layers: 46 layers twice", NULL},
	{"contract_unknown_top_key", "defaults:\n", "license: mit\ndefaults:\n", "license",
	 "unknown key 'license' in the contract",
	 "expected one of: name, description, aliases, block, hparams, defaults, defaults_by_layers, tensors"},
	{"contract_unknown_block_key", "  ffn: swiglu\n", "  ffn: swiglu\n  parallel_residual: true\n",
	 "parallel_residual", "unknown key 'parallel_residual' in block", "expected one of: norm, norm_bias,"},
	{"contract_unknown_hparam", "    n_ff:", "    n_inner:", "n_inner",
	 "unknown key 'n_inner' in hparams.gguf", "n_embd, n_layer, n_ff"},
	{"contract_unknown_format", "hparams:\n  gguf:", "hparams:\n  ggml:", "ggml",
	 "unknown key 'ggml' in hparams", "expected one of: gguf"},
	{"contract_unknown_role", "    ffn_down:", "    ffn_out:", "ffn_out",
	 "unknown key 'ffn_out' in tensors.gguf", "token_embd"},
	{"contract_unknown_default", "  norm_eps:", "  eps:", "  eps:",
	 "unknown key 'eps' in defaults", "norm_eps"},
	{"contract_unsupported_norm", "norm: rmsnorm", "norm: batchnorm", "norm: batchnorm",
	 "norm must be one of rmsnorm | layernorm, not 'batchnorm'", NULL},
	{"contract_unsupported_ffn", "ffn: swiglu", "ffn: reglu", "ffn: reglu",
	 "ffn must be one of swiglu | geglu | mlp, not 'reglu'", NULL},
	{"contract_unsupported_positions", "positions: rope", "positions: absolute", "positions:",
	 "positions must be one of rope | learned, not 'absolute'", NULL},
	{"contract_unknown_bias", "  ffn: swiglu\n", "  ffn: swiglu\n  biases: [q, kv]\n", "biases",
	 "biases must be one of q | k | v | qkv | o | gate | up | down | output | router | experts, not 'kv'", NULL},
	{"contract_norm_bias_on_rmsnorm", "  ffn: swiglu\n", "  ffn: swiglu\n  norm_bias: true\n", "norm_bias",
	 "norm_bias: only layernorm has a bias", NULL},
	{"contract_swiglu_with_gelu", "  ffn: swiglu\n", "  ffn: swiglu\n  activation: gelu\n", "activation",
	 "activation: swiglu's activation is silu", NULL},
	{"contract_qkv_bias_separate", "  ffn: swiglu\n", "  ffn: swiglu\n  biases: [qkv]\n", "  gguf:\n    token_embd",
	 "tensors.gguf lacks 'attn_q_bias', which the block needs", NULL},
	{"contract_per_format_unknown_format", "  ffn: swiglu\n", "  ffn: swiglu\n  rope_style: {gguf: normal, onnx: neox}\n",
	 "rope_style", "unknown key 'onnx' in rope_style", "gguf, safetensors"},
	{"contract_transposed_vector", "tensors:\n", "transposed:\n  gguf: [attn_norm]\ntensors:\n", "attn_norm]",
	 "transposed.gguf: attn_norm is not a matrix tensors.gguf names", NULL},
	{"contract_expert_placeholder_outside_experts", "blk.{i}.attn_q.weight", "blk.{i}.attn_q.{e}.weight",
	 "attn_q:", "tensors.gguf.attn_q ('blk.{i}.attn_q.{e}.weight'): the expert placeholder {e} belongs in every "
	 "spelling of ffn_gate_exps, ffn_up_exps or ffn_down_exps, or in none", NULL},
	{"contract_selection_bias_on_softmax", "  ffn: swiglu\n",
	 "  ffn: swiglu\n  experts: {gating: softmax, selection_bias: true}\n", "experts:",
	 "experts: selection_bias needs gating: sigmoid", NULL},
	{"contract_unknown_shared_expert", "  ffn: swiglu\n", "  ffn: swiglu\n  experts: {shared_expert: weighted}\n",
	 "experts:", "shared_expert must be one of none | plain | gated, not 'weighted'", NULL},
	{"contract_empty_spellings", "    ffn_up: blk.{i}.ffn_up.weight\n", "    ffn_up: []\n", "ffn_up: []",
	 "ffn_up is an empty list", NULL},
	{"contract_fused_without_tensor", "  ffn: swiglu\n", "  ffn: swiglu\n  qkv: fused\n", "  gguf:\n    token_embd",
	 "tensors.gguf lacks 'attn_qkv', which the block needs", NULL},
	{"contract_unused_tensor", "    ffn_down: blk.{i}.ffn_down.weight\n",
	 "    ffn_down: blk.{i}.ffn_down.weight\n    attn_qkv: blk.{i}.attn_qkv.weight\n", "attn_qkv:",
	 "tensors.gguf.attn_qkv names a tensor the block's choices do not use", NULL},
	{"contract_rope_style_learned", "positions: rope", "positions: learned\n  rope_style: neox", "rope_style",
	 "rope_style: positions are not rope", NULL},
	{"contract_bad_embedding_scale", "  ffn: swiglu\n", "  ffn: swiglu\n  embedding_scale: -2\n",
	 "embedding_scale", "embedding_scale must be sqrt_n_embd or a positive number", NULL},
	{"contract_unsupported_rope_style", "  ffn: swiglu\n", "  ffn: swiglu\n  rope_style: yarn\n",
	 "rope_style", "rope_style must be one of normal | neox, not 'yarn'", NULL},
	{"contract_unsupported_tied", "  ffn: swiglu\n", "  ffn: swiglu\n  tied_embeddings: sometimes\n",
	 "tied_embeddings", "tied_embeddings must be one of never | always | if_missing", NULL},
	{"contract_missing_name", "name: tiny\n", "", "block:",
	 "a contract needs name, block, hparams and tensors", NULL},
	{"contract_missing_choice", "  norm: rmsnorm\n", "", "  ffn: swiglu",
	 "block needs 'norm'", "rmsnorm"},
	{"contract_layer_without_placeholder", "blk.{i}.attn_q.weight", "blk.attn_q.weight",
	 "attn_q:", "tensors.gguf.attn_q ('blk.attn_q.weight') needs the layer placeholder {i}", NULL},
	{"contract_missing_role", "    ffn_up: blk.{i}.ffn_up.weight\n", "", "  gguf:\n    token_embd",
	 "tensors.gguf lacks 'ffn_up', which the block needs", NULL},
	{"contract_tensors_list", "tensors:\n  gguf:\n", "tensors:\n  - gguf:\n", "- gguf",
	 "tensors must be a mapping, not a list", NULL},
	{"contract_block_scalar", "block:\n  norm: rmsnorm\n  ffn: swiglu\n  positions: rope\n",
	 "block: rmsnorm\n", "block:",
	 "block must be a mapping, not a scalar", NULL},
	{"contract_tensor_name_nested", "token_embd: token_embd.weight", "token_embd: [[token_embd.weight]]",
	 "token_embd:", "token_embd must be a scalar, not a list", NULL},
	{"contract_default_not_number", "norm_eps: 1.0e-5", "norm_eps: tiny", "norm_eps",
	 "norm_eps must be a number, not 'tiny'", NULL},
	{"contract_repeated_key", "  positions: rope\n", "  positions: rope\n  ffn: geglu\n", "ffn: geglu",
	 "key 'ffn' appears twice in block", NULL},
	{"contract_syntax", "  ffn: swiglu\n", "  ffn: [swiglu\n", "  positions",
	 "flow sequence", NULL},
	{"contract_tokenizer_unknown_key", "defaults:\n", "tokenizer:\n  lstrip_special: true\ndefaults:\n",
	 "lstrip_special", "unknown key 'lstrip_special' in tokenizer", "rstrip_special"},
	{"contract_rstrip_except_alone", "defaults:\n", "tokenizer:\n  rstrip_except: [\"<s>\"]\ndefaults:\n",
	 "rstrip_except", "tokenizer.rstrip_except needs rstrip_special: true", NULL},
	{"contract_text_model_unknown_key", "tensors:\n", "text_model:\n  prefix: text_config\ntensors:\n", "prefix",
	 "unknown key 'prefix' in text_model", "config, tensors"},
	{"contract_text_model_without_safetensors", "tensors:\n", "text_model:\n  config: text_config\ntensors:\n",
	 "  config: text_config", "text_model: the contract describes no safetensors checkpoints", NULL},
	{"contract_tokenizer_without_block", "block:\n  norm: rmsnorm\n  ffn: swiglu\n  positions: rope\n",
	 "tokenizer:\n  rstrip_special: true\n", "name: tiny", "hparams and tensors (or only a tokenizer section)", NULL},
};
#define N_BROKEN ((int)(sizeof(broken) / sizeof(broken[0])))

START_TEST(broken_contract_names_file_and_line)
{
	const struct broken *b = &broken[_i];
	char dir[4096], path[4200], text[4096], where[4400];
	edit(text, sizeof(text), tiny_yaml, b->from, b->to);
	test_write_file(path, sizeof(path), tmp_dir(dir, sizeof(dir), b->test), "tiny.yaml", text);

	loom_contract *c = (loom_contract *)&c; /* not NULL: a failed load must reset it */
	loom_status st = loom_contract_load(path, &c);
	const char *err = loom_last_error();
	ck_assert_msg(st == LOOM_ERR_CONTRACT, "%s: status %d (%s), expected LOOM_ERR_CONTRACT; message: %s",
		      b->test, st, loom_strerror(st), err);
	ck_assert_msg(c == NULL, "%s: a failed load left a contract", b->test);
	snprintf(where, sizeof(where), "%s:%d:", path, test_line_of(text, b->mark));
	expect_in(err, where);
	expect_in(err, b->needle1);
	expect_in(err, b->needle2);
}
END_TEST

START_TEST(missing_and_empty_contracts_are_errors)
{
	char dir[4096], path[4200];
	loom_contract *c = NULL;
	tmp_dir(dir, sizeof(dir), "contract_empty");
	snprintf(path, sizeof(path), "%s/none.yaml", dir);
	ck_assert_int_eq(loom_contract_load(path, &c), LOOM_ERR_CONTRACT);
	expect_in(loom_last_error(), path);
	expect_in(loom_last_error(), "cannot open");

	test_write_file(path, sizeof(path), dir, "empty.yaml", "# nothing yet\n");
	ck_assert_int_eq(loom_contract_load(path, &c), LOOM_ERR_CONTRACT);
	expect_in(loom_last_error(), path);
	expect_in(loom_last_error(), "empty");
	ck_assert_ptr_null(c);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Finding a contract by architecture name                                  */

START_TEST(find_takes_the_first_directory_that_has_it)
{
	char first[4096], second[4096], path[4200], text[4096];
	tmp_dir(second, sizeof(second), "contract_find_second");
	tmp_dir(first, sizeof(first), "contract_find_first");
	test_write_file(path, sizeof(path), second, "tiny.yaml", tiny_yaml);
	edit(text, sizeof(text), tiny_yaml, "  ffn: swiglu\n", "  ffn: swiglu\n  rope_style: neox\n");
	test_write_file(path, sizeof(path), first, "tiny.yaml", text);

	char *dirs[] = {first, second};
	loom_contract *c = NULL;
	loom_status st = loom_contract_find("tiny", dirs, 2, &c);
	ck_assert_msg(st == LOOM_OK, "find tiny: %s", loom_last_error());
	ck_assert_str_eq(c->path, path);
	ck_assert_int_eq(c->rope_style[LOOM_CFMT_GGUF], LOOM_ROPE_NEOX);
	loom_contract_free(c);
}
END_TEST

/* A file must call itself what its name says. */
/* Values that differ by format, several spellings of a name, transposed
 * storage and aliases read back as written. */
START_TEST(per_format_values_read_back)
{
	char dir[4096], path[4200], text[4096], text2[8192];
	tmp_dir(dir, sizeof(dir), "contract_per_format");
	edit(text, sizeof(text), tiny_yaml, "  positions: rope\n",
	     "  positions: rope\n  rope_style: {gguf: normal, safetensors: neox}\n"
	     "  norm_weight_offset: {safetensors: 1}\n");
	edit(text2, sizeof(text2), text, "tensors:\n",
	     "aliases: [small, little]\n"
	     "transposed:\n  safetensors: [ffn_up]\n"
	     "tensors:\n"
	     "  safetensors:\n"
	     "    token_embd: [model.wte.weight, wte.weight]\n"
	     "    output_norm: ln_f.weight\n    output: lm_head.weight\n"
	     "    attn_norm: h.{i}.ln_1.weight\n    attn_q: h.{i}.q.weight\n    attn_k: h.{i}.k.weight\n"
	     "    attn_v: h.{i}.v.weight\n    attn_output: h.{i}.o.weight\n    ffn_norm: h.{i}.ln_2.weight\n"
	     "    ffn_gate: h.{i}.gate.weight\n    ffn_up: h.{i}.up.weight\n    ffn_down: h.{i}.down.weight\n");
	loom_contract *c = load_ok(test_write_file(path, sizeof(path), dir, "tiny.yaml", text2));
	ck_assert_int_eq(c->rope_style[LOOM_CFMT_GGUF], LOOM_ROPE_NORMAL);
	ck_assert_int_eq(c->rope_style[LOOM_CFMT_SAFETENSORS], LOOM_ROPE_NEOX);
	ck_assert_msg(c->norm_weight_offset[LOOM_CFMT_GGUF] == 0.0f && c->norm_weight_offset[LOOM_CFMT_SAFETENSORS] == 1.0f,
		      "offsets %g %g", c->norm_weight_offset[LOOM_CFMT_GGUF], c->norm_weight_offset[LOOM_CFMT_SAFETENSORS]);
	loom_spellings embd = c->tensor_names[LOOM_CFMT_SAFETENSORS][LOOM_ROLE_TOKEN_EMBD];
	ck_assert_str_eq(embd[0], "model.wte.weight");
	ck_assert_str_eq(embd[1], "wte.weight");
	ck_assert_ptr_null(embd[2]);
	ck_assert_msg(c->transposed[LOOM_CFMT_SAFETENSORS][LOOM_ROLE_FFN_UP], "ffn_up is not transposed");
	ck_assert_msg(!c->transposed[LOOM_CFMT_GGUF][LOOM_ROLE_FFN_UP], "ffn_up is transposed in GGUF");
	ck_assert_str_eq(c->aliases[1], "little");
	loom_contract_free(c);
}
END_TEST

/* The tiny contract with a safetensors section (two spellings of the
 * embedding and of n_layer) and `text_model` as given. */
static const char *tiny_with_text_model(char *out, size_t size, const char *text_model)
{
	char text[4096];
	edit(text, sizeof(text), tiny_yaml, "defaults:\n",
	     "  safetensors:\n    n_embd: hidden_size\n    n_layer: [num_hidden_layers, n_layers]\ndefaults:\n");
	char tail[2048];
	snprintf(tail, sizeof(tail),
		 "\n%stensors:\n"
		 "  safetensors:\n"
		 "    token_embd: [model.wte.weight, wte.weight]\n"
		 "    output_norm: model.ln_f.weight\n    output: lm_head.weight\n"
		 "    attn_norm: model.h.{i}.ln_1.weight\n    attn_q: model.h.{i}.q.weight\n"
		 "    attn_k: model.h.{i}.k.weight\n    attn_v: model.h.{i}.v.weight\n"
		 "    attn_output: model.h.{i}.o.weight\n    ffn_norm: model.h.{i}.ln_2.weight\n"
		 "    ffn_gate: model.h.{i}.gate.weight\n    ffn_up: model.h.{i}.up.weight\n"
		 "    ffn_down: model.h.{i}.down.weight\n",
		 text_model);
	return edit(out, size, text, "\ntensors:\n", tail);
}

static void expect_spellings(loom_spellings v, const char *const *want)
{
	int i = 0;
	for (; want[i] != NULL; i++) {
		ck_assert_ptr_nonnull(v[i]);
		ck_assert_str_eq(v[i], want[i]);
	}
	ck_assert_ptr_null(v[i]);
}

/* text_model: each safetensors spelling is followed by its text_config.
 * form and, for tensor names beginning with a listed part, each
 * replacement of it; names that begin otherwise gain none. */
START_TEST(text_model_adds_spellings_after_the_plain_ones)
{
	char dir[4096], path[4200], text[8192];
	tmp_dir(dir, sizeof(dir), "contract_text_model");
	tiny_with_text_model(text, sizeof(text),
			     "text_model:\n  config: text_config\n  tensors:\n"
			     "    \"model.\": [language_model.model., model.language_model.]\n"
			     "    \"lm_head.\": language_model.lm_head.\n");
	loom_contract *c = load_ok(test_write_file(path, sizeof(path), dir, "tiny.yaml", text));
	expect_spellings(c->hparam_keys[LOOM_CFMT_SAFETENSORS][LOOM_HP_N_LAYER],
			 (const char *const[]){"num_hidden_layers", "n_layers", "text_config.num_hidden_layers",
					       "text_config.n_layers", NULL});
	expect_spellings(c->tensor_names[LOOM_CFMT_SAFETENSORS][LOOM_ROLE_TOKEN_EMBD],
			 (const char *const[]){"model.wte.weight", "wte.weight", "language_model.model.wte.weight",
					       "model.language_model.wte.weight", NULL});
	expect_spellings(c->tensor_names[LOOM_CFMT_SAFETENSORS][LOOM_ROLE_OUTPUT],
			 (const char *const[]){"lm_head.weight", "language_model.lm_head.weight", NULL});
	expect_spellings(c->tensor_names[LOOM_CFMT_SAFETENSORS][LOOM_ROLE_ATTN_Q],
			 (const char *const[]){"model.h.{i}.q.weight", "language_model.model.h.{i}.q.weight",
					       "model.language_model.h.{i}.q.weight", NULL});
	ck_assert_ptr_null(c->hparam_keys[LOOM_CFMT_GGUF][LOOM_HP_N_LAYER][1]);
	loom_contract_free(c);

	/* An empty part, and replacements that are not strings, are refused
	 * at their line. */
	static const char *const bad[][2] = {
		{"text_model:\n  tensors:\n    \"\": [x.]\n", "a name's part to replace is empty"},
		{"text_model:\n  tensors:\n    \"model.\": {a: b}\n", "replacements must be a string or a list"},
	};
	for (int i = 0; i < 2; i++) {
		tiny_with_text_model(text, sizeof(text), bad[i][0]);
		test_write_file(path, sizeof(path), dir, "tiny.yaml", text);
		c = NULL;
		ck_assert_int_eq(loom_contract_load(path, &c), LOOM_ERR_CONTRACT);
		ck_assert_ptr_null(c);
		char where[4400];
		snprintf(where, sizeof(where), "%s:%d:", path, test_line_of(text, i == 0 ? "\"\"" : "{a: b}"));
		expect_in(loom_last_error(), where);
		expect_in(loom_last_error(), bad[i][1]);
	}
}
END_TEST

/* A name no contract file has is found through a contract's aliases. */
START_TEST(find_by_alias)
{
	char dir[4096], path[4200], text[4096];
	tmp_dir(dir, sizeof(dir), "contract_find_alias");
	edit(text, sizeof(text), tiny_yaml, "block:\n", "aliases: [wee]\nblock:\n");
	test_write_file(path, sizeof(path), dir, "tiny.yaml", text);
	test_write_file(path, sizeof(path), dir, "broken.yaml", "name: [\n");
	char *dirs[] = {dir};
	loom_contract *c = NULL;
	loom_status st = loom_contract_find("wee", dirs, 1, &c);
	ck_assert_msg(st == LOOM_OK, "find wee: %s", loom_last_error());
	ck_assert_str_eq(c->name, "tiny");
	loom_contract_free(c);
	st = loom_contract_find("tinier", dirs, 1, &c);
	ck_assert_int_eq(st, LOOM_ERR_NOT_FOUND);
	ck_assert_msg(strstr(loom_last_error(), "aliases") != NULL, "message: %s", loom_last_error());
}
END_TEST

START_TEST(find_rejects_a_misnamed_contract)
{
	char dir[4096], path[4200];
	tmp_dir(dir, sizeof(dir), "contract_misnamed");
	test_write_file(path, sizeof(path), dir, "tinier.yaml", tiny_yaml);
	char *dirs[] = {dir};
	loom_contract *c = NULL;
	ck_assert_int_eq(loom_contract_find("tinier", dirs, 1, &c), LOOM_ERR_CONTRACT);
	ck_assert_ptr_null(c);
	expect_in(loom_last_error(), path);
	expect_in(loom_last_error(), "named 'tiny', not 'tinier'");
}
END_TEST

START_TEST(find_lists_the_directories_it_searched)
{
	char first[4096], second[4096];
	tmp_dir(second, sizeof(second), "contract_search_second");
	tmp_dir(first, sizeof(first), "contract_search_first");
	char *dirs[] = {first, second};
	loom_contract *c = NULL;
	ck_assert_int_eq(loom_contract_find("mamba", dirs, 2, &c), LOOM_ERR_NOT_FOUND);
	ck_assert_ptr_null(c);
	expect_in(loom_last_error(), "no contract for architecture 'mamba'");
	expect_in(loom_last_error(), "mamba.yaml");
	expect_in(loom_last_error(), first);
	expect_in(loom_last_error(), second);
}
END_TEST

/* An architecture name comes from the model file: it must not reach
 * outside the contract directories. */
START_TEST(find_refuses_names_that_are_paths)
{
	static const char *const bad[] = {"../etc/passwd", "a/b", ".hidden", ""};
	char dir[4096];
	tmp_dir(dir, sizeof(dir), "contract_bad_names");
	char *dirs[] = {dir};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		loom_contract *c = NULL;
		loom_status st = loom_contract_find(bad[i], dirs, 1, &c);
		ck_assert_msg(st == LOOM_ERR_CONTRACT && c == NULL, "'%s': status %d", bad[i], st);
		expect_in(loom_last_error(), "not a valid architecture name");
	}
}
END_TEST

/* ------------------------------------------------------------------------ */
/* A real model through a contract of the test's own                        */

/* llama.yaml, edited, as arch_dir/llama.yaml. */
static void write_llama(const char *arch_dir, const char *from, const char *to)
{
	char path[4200], *edited = NULL;
	char *text = test_read_file(LLAMA_YAML, NULL);
	ck_assert_msg(text != NULL, "cannot read %s", LLAMA_YAML);
	if (from != NULL) {
		size_t size = strlen(text) + strlen(to) + 1;
		edited = malloc(size);
		ck_assert_ptr_nonnull(edited);
		edit(edited, size, text, from, to);
	}
	test_write_file(path, sizeof(path), arch_dir, "llama.yaml", edited != NULL ? edited : text);
	free(edited);
	free(text);
}

START_TEST(model_loads_through_a_copied_contract)
{
	char model[4096], dir[4096];
	if (!test_data_path(model, sizeof(model), "models/stories260K-f32.gguf"))
		return;
	tmp_dir(dir, sizeof(dir), "contract_model_ok");
	write_llama(dir, NULL, NULL);
	loom_runtime *rt = test_generic_runtime(dir);
	loom_model *m = NULL;
	loom_status st = loom_model_load(rt, model, NULL, &m);
	ck_assert_msg(st == LOOM_OK, "load %s with %s/llama.yaml: %s", model, dir, loom_last_error());
	ck_assert_str_eq(loom_model_architecture(m), "llama");
	ck_assert_int_gt(loom_model_n_layer(m), 0);
	loom_model_free(m);
	loom_runtime_free(rt);
}
END_TEST

/* Logits of the first prompt token through a model loaded with arch_dir's
 * llama.yaml (n_vocab of them, malloc'd). */
static float *first_logits(const char *arch_dir, const char *model, int *n_vocab)
{
	loom_runtime *rt = test_generic_runtime(arch_dir);
	loom_model *m = NULL;
	loom_status st = loom_model_load(rt, model, NULL, &m);
	ck_assert_msg(st == LOOM_OK, "load %s with %s/llama.yaml: %s", model, arch_dir, loom_last_error());
	loom_context *ctx = test_context(m, 64, 16, LOOM_DTYPE_F32);
	loom_token toks[3] = {1, 400, 300};
	loom_batch b = {.n_tokens = 3, .tokens = toks};
	ck_assert_msg(loom_decode(ctx, &b) == LOOM_OK, "decode: %s", loom_last_error());
	*n_vocab = loom_model_n_vocab(m);
	float *out = malloc(sizeof(float) * (size_t)*n_vocab);
	ck_assert_ptr_nonnull(out);
	memcpy(out, loom_get_logits(ctx, 2), sizeof(float) * (size_t)*n_vocab);
	loom_context_free(ctx);
	loom_model_free(m);
	loom_runtime_free(rt);
	return out;
}

/* final_logit_softcap from the contract's defaults: every logit is
 * c tanh(logit / c) of the same model's logit without it, as the SOFTCAP op
 * computes it; a negative cap is refused at load. */
START_TEST(final_logit_softcap_caps_every_logit)
{
	char model[4096], plain[4096], capped[4096], bad[4096];
	if (!test_data_path(model, sizeof(model), "models/stories260K-f32.gguf"))
		return;
	tmp_dir(plain, sizeof(plain), "contract_softcap_plain");
	tmp_dir(capped, sizeof(capped), "contract_softcap");
	write_llama(plain, NULL, NULL);
	write_llama(capped, "defaults:\n", "defaults:\n  final_logit_softcap: 2.0\n");
	int n = 0, n_capped = 0;
	float *want = first_logits(plain, model, &n), *got = first_logits(capped, model, &n_capped);
	ck_assert_int_eq(n, n_capped);
	int saturated = 0;
	for (int i = 0; i < n; i++) {
		float c = 2.0f * tanhf(want[i] * 0.5f);
		ck_assert_msg(fabsf(got[i] - c) <= 1e-6f, "logit %d: %.9g, expected 2 tanh(%.9g / 2) = %.9g", i, got[i],
			      want[i], c);
		saturated += fabsf(want[i]) > 4.0f;
	}
	ck_assert_msg(saturated > 0, "no logit beyond twice the cap: the test would not see the cap");
	free(want);
	free(got);

	tmp_dir(bad, sizeof(bad), "contract_softcap_negative");
	write_llama(bad, "defaults:\n", "defaults:\n  final_logit_softcap: -1.0\n");
	loom_runtime *rt = test_generic_runtime(bad);
	loom_model *m = NULL;
	ck_assert_int_eq(loom_model_load(rt, model, NULL, &m), LOOM_ERR_BAD_FORMAT);
	expect_in(loom_last_error(), "final_logit_softcap = -1 must be 0 (none) or positive");
	loom_runtime_free(rt);
}
END_TEST

START_TEST(misspelled_tensor_name_fails_the_load)
{
	char model[4096], dir[4096];
	if (!test_data_path(model, sizeof(model), "models/stories260K-f32.gguf"))
		return;
	tmp_dir(dir, sizeof(dir), "contract_model_misspelled");
	write_llama(dir, "blk.{i}.ffn_up.weight", "blk.{i}.ffn_upp.weight");
	loom_runtime *rt = test_generic_runtime(dir);
	loom_model *m = (loom_model *)&m; /* not NULL: a failed load must reset it */
	loom_status st = loom_model_load(rt, model, NULL, &m);
	const char *err = loom_last_error();
	ck_assert_msg(st == LOOM_ERR_BAD_FORMAT, "status %d (%s), expected LOOM_ERR_BAD_FORMAT: %s", st,
		      loom_strerror(st), err);
	ck_assert_ptr_null(m);
	expect_in(err, model);
	expect_in(err, dir); /* the contract that was used */
	expect_in(err, "tensor 'blk.0.ffn_upp.weight' (ffn_up) is missing");
	loom_runtime_free(rt);
}
END_TEST

/* A broken contract in the directory fails the load with its own line, not
 * a fallback to the next directory's good copy. */
START_TEST(broken_contract_fails_the_load)
{
	char model[4096], dir[4096];
	if (!test_data_path(model, sizeof(model), "models/stories260K-f32.gguf"))
		return;
	tmp_dir(dir, sizeof(dir), "contract_model_broken");
	write_llama(dir, "  qkv: separate\n", "  qkv: tripled\n");
	loom_runtime *rt = test_generic_runtime(dir);
	loom_model *m = NULL;
	loom_status st = loom_model_load(rt, model, NULL, &m);
	const char *err = loom_last_error();
	ck_assert_msg(st == LOOM_ERR_CONTRACT, "status %d (%s), expected LOOM_ERR_CONTRACT: %s", st,
		      loom_strerror(st), err);
	ck_assert_ptr_null(m);
	expect_in(err, dir);
	expect_in(err, "qkv must be one of separate | fused, not 'tripled'");
	loom_runtime_free(rt);
}
END_TEST

/* Phi-3's tokenizer section alone, as a contract of its own: what a family
 * whose block loom cannot run yet is given. */
static const char phi3_tokenizer_only[] =
	"name: phi3\n"
	"description: Phi-3's tokenizer and chat format\n"
	"tokenizer:\n"
	"  rstrip_special: true\n"
	"  rstrip_except: [\"<unk>\", \"<s>\", \"<|endoftext|>\"]\n"
	"chat_template: phi3\n";

/* A directory whose phi3.yaml describes only the tokenizer. */
static const char *tokenizer_only_dir(void)
{
	char path[4300];
	const char *dir = test_tmp_dir("tokenizer_only");
	test_write_file(path, sizeof(path), dir, "phi3.yaml", phi3_tokenizer_only);
	return dir;
}

/* A contract may describe only a family's tokenizer. */
START_TEST(tokenizer_only_contract_reads_back)
{
	char path[4300];
	snprintf(path, sizeof(path), "%s/phi3.yaml", tokenizer_only_dir());
	loom_contract *c = load_ok(path);
	ck_assert(!c->has_block);
	ck_assert(c->tokenizer.rstrip_special);
	ck_assert_ptr_nonnull(c->tokenizer.rstrip_except);
	ck_assert_str_eq(c->tokenizer.rstrip_except[0], "<unk>");
	ck_assert_str_eq(c->tokenizer.rstrip_except[1], "<s>");
	ck_assert_str_eq(c->tokenizer.rstrip_except[2], "<|endoftext|>");
	ck_assert_ptr_null(c->tokenizer.rstrip_except[3]);
	ck_assert(c->has_chat_template && c->chat_template == LOOM_CHAT_PHI3);
	loom_contract_free(c);
	c = load_ok(LLAMA_YAML);
	ck_assert(c->has_block && !c->tokenizer.rstrip_special && c->tokenizer.rstrip_except == NULL);
	loom_contract_free(c);
}
END_TEST

/* Tokens of text (add_special off), into out; returns how many. */
static size_t tokens_of(const loom_model *m, const char *text, bool parse_special, loom_token *out, size_t cap)
{
	size_t n = 0;
	loom_status st = loom_tokenize(m, text, strlen(text), false, parse_special, out, cap, &n);
	ck_assert_msg(st == LOOM_OK, "tokenize '%s': %s", text, loom_last_error());
	return n;
}

/* Phi-3's vocabulary, through a tokenizer-only contract: a special token
 * eats the whitespace after it, so "<|user|>\n hello" is <|user|> and then
 * "hello" as if it began the text. The model cannot run: the contract
 * describes no block. */
START_TEST(tokenizer_only_contract_tokenizes_but_does_not_run)
{
	char path[4096];
	if (!test_data_path(path, sizeof(path), "golden/tokenizer/ggml-vocab-phi-3.gguf"))
		return;
	loom_runtime_params rp = loom_runtime_default_params();
	loom_runtime *rt = NULL;
	rp.plugins_file = test_plugins_file();
	rp.arch_dir = tokenizer_only_dir();
	rp.n_threads = 1;
	rp.log_level = LOOM_LOG_ERROR;
	ck_assert_msg(loom_runtime_create(&rp, &rt) == LOOM_OK, "runtime: %s", loom_last_error());
	loom_model_params mp = loom_model_default_params();
	mp.vocab_only = true;
	loom_model *m = NULL;
	ck_assert_msg(loom_model_load(rt, path, &mp, &m) == LOOM_OK, "%s: %s", path, loom_last_error());
	loom_token got[64], user[8], hello[8], plain[64];
	size_t n = tokens_of(m, "<|user|>\n hello", true, got, 64);
	size_t n_user = tokens_of(m, "<|user|>", true, user, 8);
	size_t n_hello = tokens_of(m, "hello", false, hello, 8);
	ck_assert_uint_eq(n_user, 1);
	ck_assert_msg(n == 1 + n_hello && got[0] == user[0] && memcmp(got + 1, hello, n_hello * sizeof(*hello)) == 0,
		      "'<|user|>\\n hello' gave %zu tokens (first %d), expected <|user|> %d then 'hello'", n, got[0],
		      user[0]);
	/* Without parsing specials the text after the marker keeps its space. */
	size_t n_plain = tokens_of(m, "<|user|>\n hello", false, plain, 64);
	ck_assert_msg(n_plain != n || memcmp(plain, got, n * sizeof(*got)) != 0, "the rule changed nothing");
	ck_assert_str_eq(loom_chat_template(m), "phi3");
	loom_model_free(m);

	m = (loom_model *)&m;
	loom_status st = loom_model_load(rt, path, NULL, &m);
	ck_assert_msg(st == LOOM_ERR_UNSUPPORTED && m == NULL, "a full load: status %d (%s)", st, loom_last_error());
	expect_in(loom_last_error(), "phi3.yaml describes only phi3's tokenizer");
	loom_runtime_free(rt);
}
END_TEST

/* Every shipped contract reads back, and a model with learned positions
 * refuses a context longer than its position table. */
START_TEST(shipped_contracts_load)
{
	char dir[4096], pattern[4200];
	snprintf(dir, sizeof(dir), "%s/arch", LOOM_TEST_SOURCE_DIR);
	snprintf(pattern, sizeof(pattern), "%s/*.yaml", dir);
	char *dirs[] = {dir};
	glob_t found;
	ck_assert_int_eq(glob(pattern, 0, NULL, &found), 0);
	ck_assert_uint_ge(found.gl_pathc, 11);
	for (size_t i = 0; i < found.gl_pathc; i++) {
		char name[256];
		const char *base = strrchr(found.gl_pathv[i], '/') + 1;
		snprintf(name, sizeof(name), "%.*s", (int)(strlen(base) - strlen(".yaml")), base);
		loom_contract *c = NULL;
		loom_status st = loom_contract_find(name, dirs, 1, &c);
		ck_assert_msg(st == LOOM_OK, "%s: %s", name, loom_last_error());
		ck_assert_str_eq(c->name, name);
		loom_contract_free(c);
	}
	globfree(&found);
}
END_TEST

START_TEST(learned_positions_bound_the_context)
{
	loom_runtime *rt = test_runtime(NULL, 1);
	if (rt == NULL)
		return;
	loom_model *m = test_model(rt, "synthetic/gpt2-f32.gguf");
	if (m == NULL) {
		loom_runtime_free(rt);
		return;
	}
	loom_context_params cp = loom_context_default_params();
	loom_context *ctx = NULL;
	cp.n_ctx = 257;
	ck_assert_int_eq(loom_context_create(m, &cp, &ctx), LOOM_ERR_INVALID_ARGUMENT);
	ck_assert_ptr_null(ctx);
	ck_assert_msg(strstr(loom_last_error(), "learned positions for 256 tokens") != NULL, "%s", loom_last_error());
	cp.n_ctx = 256;
	ck_assert_int_eq(loom_context_create(m, &cp, &ctx), LOOM_OK);
	loom_context_free(ctx);
	loom_model_free(m);
	loom_runtime_free(rt);
}
END_TEST

static Suite *contract_suite(void)
{
	Suite *s = suite_create("contract");
	TCase *tc;

	tc = tcase_create("good");
	tcase_add_test(tc, llama_contract_reads_back);
	tcase_add_test(tc, shipped_contracts_load);
	tcase_add_test(tc, tokenizer_only_contract_reads_back);
	tcase_add_test(tc, omitted_choices_take_their_defaults);
	tcase_add_test(tc, tied_head_needs_no_output_tensor);
	tcase_add_test(tc, per_format_values_read_back);
	suite_add_tcase(s, tc);

	tc = tcase_create("broken");
	tcase_add_loop_test(tc, broken_contract_names_file_and_line, 0, N_BROKEN);
	tcase_add_test(tc, missing_and_empty_contracts_are_errors);
	suite_add_tcase(s, tc);

	tc = tcase_create("find");
	tcase_add_test(tc, find_takes_the_first_directory_that_has_it);
	tcase_add_test(tc, find_rejects_a_misnamed_contract);
	tcase_add_test(tc, text_model_adds_spellings_after_the_plain_ones);
	tcase_add_test(tc, find_by_alias);
	tcase_add_test(tc, find_lists_the_directories_it_searched);
	tcase_add_test(tc, find_refuses_names_that_are_paths);
	suite_add_tcase(s, tc);

	tc = tcase_create("model");
	tcase_add_test(tc, model_loads_through_a_copied_contract);
	tcase_add_test(tc, misspelled_tensor_name_fails_the_load);
	tcase_add_test(tc, final_logit_softcap_caps_every_logit);
	tcase_add_test(tc, broken_contract_fails_the_load);
	tcase_add_test(tc, learned_positions_bound_the_context);
	tcase_add_test(tc, tokenizer_only_contract_tokenizes_but_does_not_run);
	suite_add_tcase(s, tc);
	return s;
}

LOOM_TEST_MAIN(contract_suite)
