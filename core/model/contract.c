/* contract.c - reading and checking arch/NAME.yaml. */
#include "model/contract.h"
#include "model/contract_text_model.h"

#include "loom/plugin_api.h"
#include "runtime/error.h"
#include "runtime/yaml_doc.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *const hparam_names[LOOM_HP_COUNT] = {
	[LOOM_HP_N_EMBD] = "n_embd",
	[LOOM_HP_N_LAYER] = "n_layer",
	[LOOM_HP_N_FF] = "n_ff",
	[LOOM_HP_N_HEAD] = "n_head",
	[LOOM_HP_N_HEAD_KV] = "n_head_kv",
	[LOOM_HP_HEAD_DIM] = "head_dim",
	[LOOM_HP_HEAD_DIM_V] = "head_dim_v",
	[LOOM_HP_N_ROT] = "n_rot",
	[LOOM_HP_N_CTX_TRAIN] = "n_ctx_train",
	[LOOM_HP_NORM_EPS] = "norm_eps",
	[LOOM_HP_ROPE_THETA] = "rope_theta",
	[LOOM_HP_ROPE_SCALING_TYPE] = "rope_scaling_type",
	[LOOM_HP_ROPE_SCALING_FACTOR] = "rope_scaling_factor",
	[LOOM_HP_ROPE_ORIG_CTX] = "rope_orig_ctx",
	[LOOM_HP_ROPE_ATTN_FACTOR] = "rope_attn_factor",
	[LOOM_HP_ROPE_BETA_FAST] = "rope_beta_fast",
	[LOOM_HP_ROPE_BETA_SLOW] = "rope_beta_slow",
	[LOOM_HP_ROPE_PARTIAL] = "rope_partial_factor",
	[LOOM_HP_ROPE_LOW_FREQ] = "rope_low_freq_factor",
	[LOOM_HP_ROPE_HIGH_FREQ] = "rope_high_freq_factor",
	[LOOM_HP_FINAL_LOGIT_SOFTCAP] = "final_logit_softcap",
	[LOOM_HP_EMBEDDING_MULT] = "embedding_multiplier",
	[LOOM_HP_RESIDUAL_MULT] = "residual_multiplier",
	[LOOM_HP_ATTENTION_MULT] = "attention_multiplier",
	[LOOM_HP_LOGIT_SCALE] = "logit_scale",
	[LOOM_HP_ATTENTION_SCALE_BASE] = "attention_scale_base",
	[LOOM_HP_ATTN_LOGIT_SOFTCAP] = "attn_logit_softcap",
	[LOOM_HP_SLIDING_WINDOW] = "sliding_window",
	[LOOM_HP_SLIDING_WINDOW_PATTERN] = "sliding_window_pattern",
	[LOOM_HP_LAYER_TYPES] = "layer_types",
	[LOOM_HP_ROPE_FACTORS_LONG] = "rope_factors_long",
	[LOOM_HP_ROPE_FACTORS_SHORT] = "rope_factors_short",
	[LOOM_HP_ROPE_THETA_SWA] = "rope_theta_swa",
	[LOOM_HP_N_EXPERT] = "n_expert",
	[LOOM_HP_N_EXPERT_USED] = "n_expert_used",
	[LOOM_HP_N_FF_EXPERT] = "n_ff_expert",
	[LOOM_HP_EXPERT_WEIGHTS_NORM] = "expert_weights_norm",
	[LOOM_HP_EXPERT_WEIGHTS_SCALE] = "expert_weights_scale",
	[LOOM_HP_N_DENSE_LAYERS] = "n_dense_layers",
	[LOOM_HP_N_FF_SHARED] = "n_ff_shared",
	[LOOM_HP_N_EXPERT_SHARED] = "n_expert_shared",
	[LOOM_HP_EXPERT_GATING_FUNC] = "expert_gating_func",
	[LOOM_HP_SWIGLU_ALPHA] = "swiglu_alpha",
	[LOOM_HP_SWIGLU_LIMIT] = "swiglu_limit",
	[LOOM_HP_LOGIT_MULT] = "logit_multiplier",
	[LOOM_HP_ROPE_TRUNCATE] = "rope_truncate",
	[LOOM_HP_NO_ROPE_LAYERS] = "no_rope_layers",
	[LOOM_HP_NO_ROPE_LAYER_INTERVAL] = "no_rope_layer_interval",
};

/* NULL-terminated: the values transposed allows. */
static const char *const role_names[LOOM_ROLE_COUNT + 1] = {
	[LOOM_ROLE_TOKEN_EMBD] = "token_embd",
	[LOOM_ROLE_POS_EMBD] = "pos_embd",
	[LOOM_ROLE_OUTPUT_NORM] = "output_norm",
	[LOOM_ROLE_OUTPUT_NORM_B] = "output_norm_bias",
	[LOOM_ROLE_OUTPUT] = "output",
	[LOOM_ROLE_OUTPUT_B] = "output_bias",
	[LOOM_ROLE_ROPE_FREQS] = "rope_freqs",
	[LOOM_ROLE_ROPE_FACTORS_LONG] = "rope_factors_long",
	[LOOM_ROLE_ROPE_FACTORS_SHORT] = "rope_factors_short",
	[LOOM_ROLE_ATTN_NORM] = "attn_norm",
	[LOOM_ROLE_ATTN_NORM_B] = "attn_norm_bias",
	[LOOM_ROLE_ATTN_QKV] = "attn_qkv",
	[LOOM_ROLE_ATTN_QKV_B] = "attn_qkv_bias",
	[LOOM_ROLE_ATTN_Q] = "attn_q",
	[LOOM_ROLE_ATTN_Q_B] = "attn_q_bias",
	[LOOM_ROLE_ATTN_K] = "attn_k",
	[LOOM_ROLE_ATTN_K_B] = "attn_k_bias",
	[LOOM_ROLE_ATTN_V] = "attn_v",
	[LOOM_ROLE_ATTN_V_B] = "attn_v_bias",
	[LOOM_ROLE_ATTN_Q_NORM] = "attn_q_norm",
	[LOOM_ROLE_ATTN_K_NORM] = "attn_k_norm",
	[LOOM_ROLE_ATTN_OUTPUT] = "attn_output",
	[LOOM_ROLE_ATTN_OUTPUT_B] = "attn_output_bias",
	[LOOM_ROLE_FFN_NORM] = "ffn_norm",
	[LOOM_ROLE_FFN_NORM_B] = "ffn_norm_bias",
	[LOOM_ROLE_FFN_GATE] = "ffn_gate",
	[LOOM_ROLE_FFN_GATE_B] = "ffn_gate_bias",
	[LOOM_ROLE_FFN_UP] = "ffn_up",
	[LOOM_ROLE_FFN_UP_B] = "ffn_up_bias",
	[LOOM_ROLE_FFN_DOWN] = "ffn_down",
	[LOOM_ROLE_FFN_DOWN_B] = "ffn_down_bias",
	[LOOM_ROLE_ATTN_POST_NORM] = "attn_post_norm",
	[LOOM_ROLE_FFN_POST_NORM] = "ffn_post_norm",
	[LOOM_ROLE_ATTN_SINKS] = "attn_sinks",
	[LOOM_ROLE_FFN_GATE_INP] = "ffn_gate_inp",
	[LOOM_ROLE_FFN_GATE_EXPS] = "ffn_gate_exps",
	[LOOM_ROLE_FFN_UP_EXPS] = "ffn_up_exps",
	[LOOM_ROLE_FFN_DOWN_EXPS] = "ffn_down_exps",
	[LOOM_ROLE_FFN_GATE_INP_SHEXP] = "ffn_gate_inp_shexp",
	[LOOM_ROLE_FFN_GATE_SHEXP] = "ffn_gate_shexp",
	[LOOM_ROLE_FFN_UP_SHEXP] = "ffn_up_shexp",
	[LOOM_ROLE_FFN_DOWN_SHEXP] = "ffn_down_shexp",
	[LOOM_ROLE_FFN_GATE_INP_B] = "ffn_gate_inp_bias",
	[LOOM_ROLE_FFN_GATE_EXPS_B] = "ffn_gate_exps_bias",
	[LOOM_ROLE_FFN_UP_EXPS_B] = "ffn_up_exps_bias",
	[LOOM_ROLE_FFN_DOWN_EXPS_B] = "ffn_down_exps_bias",
	[LOOM_ROLE_FFN_EXP_PROBS_B] = "ffn_exp_probs_bias",
};

/* NULL-terminated: the values block.biases allows. */
static const char *const bias_names[LOOM_BIAS_COUNT + 1] = {
	[LOOM_BIAS_Q] = "q",       [LOOM_BIAS_K] = "k",   [LOOM_BIAS_V] = "v",
	[LOOM_BIAS_QKV] = "qkv",   [LOOM_BIAS_O] = "o",   [LOOM_BIAS_GATE] = "gate",
	[LOOM_BIAS_UP] = "up",     [LOOM_BIAS_DOWN] = "down", [LOOM_BIAS_OUTPUT] = "output",
	[LOOM_BIAS_ROUTER] = "router", [LOOM_BIAS_EXPERTS] = "experts",
};

/* The naming sections, NULL-terminated: the keys hparams and tensors allow. */
static const char *const format_names[LOOM_CFMT_COUNT + 1] = {
	[LOOM_CFMT_GGUF] = "gguf",
	[LOOM_CFMT_SAFETENSORS] = "safetensors",
};

const char *loom_hparam_name(loom_hparam hp)
{
	return hparam_names[hp];
}

const char *loom_role_name(loom_role role)
{
	return role_names[role];
}

bool loom_role_is_per_layer(loom_role role)
{
	return role >= LOOM_ROLE_ATTN_NORM;
}

void loom_contract_expand(char *buf, size_t size, const char *pattern, const char *placeholder, const char *value)
{
	const char *at = strstr(pattern, placeholder);
	if (at == NULL)
		snprintf(buf, size, "%s", pattern);
	else
		snprintf(buf, size, "%.*s%s%s", (int)(at - pattern), pattern, value, at + strlen(placeholder));
}

bool loom_role_is_norm(loom_role role)
{
	return role == LOOM_ROLE_OUTPUT_NORM || role == LOOM_ROLE_ATTN_NORM || role == LOOM_ROLE_FFN_NORM ||
	       role == LOOM_ROLE_ATTN_Q_NORM || role == LOOM_ROLE_ATTN_K_NORM || role == LOOM_ROLE_ATTN_POST_NORM ||
	       role == LOOM_ROLE_FFN_POST_NORM;
}

bool loom_role_is_matrix(loom_role role)
{
	switch (role) {
	case LOOM_ROLE_TOKEN_EMBD: case LOOM_ROLE_POS_EMBD: case LOOM_ROLE_OUTPUT:
	case LOOM_ROLE_ATTN_QKV: case LOOM_ROLE_ATTN_Q: case LOOM_ROLE_ATTN_K: case LOOM_ROLE_ATTN_V:
	case LOOM_ROLE_ATTN_OUTPUT: case LOOM_ROLE_FFN_GATE: case LOOM_ROLE_FFN_UP: case LOOM_ROLE_FFN_DOWN:
	case LOOM_ROLE_FFN_GATE_INP: case LOOM_ROLE_FFN_GATE_SHEXP: case LOOM_ROLE_FFN_UP_SHEXP:
	case LOOM_ROLE_FFN_DOWN_SHEXP:
		return true;
	default:
		return false;
	}
}

bool loom_role_is_experts(loom_role role)
{
	return role == LOOM_ROLE_FFN_GATE_EXPS || role == LOOM_ROLE_FFN_UP_EXPS || role == LOOM_ROLE_FFN_DOWN_EXPS;
}

bool loom_role_is_moe(loom_role role)
{
	return role == LOOM_ROLE_FFN_GATE_INP || loom_role_is_experts(role) ||
	       (role >= LOOM_ROLE_FFN_GATE_INP_SHEXP && role <= LOOM_ROLE_FFN_EXP_PROBS_B);
}

bool loom_role_is_dense_ffn(loom_role role)
{
	return role >= LOOM_ROLE_FFN_GATE && role <= LOOM_ROLE_FFN_DOWN_B;
}

const char *loom_contract_format_name(loom_contract_format f)
{
	return format_names[f];
}

bool loom_role_is_optional(loom_role role)
{
	return role == LOOM_ROLE_ROPE_FREQS || role == LOOM_ROLE_ROPE_FACTORS_LONG || role == LOOM_ROLE_ROPE_FACTORS_SHORT;
}

int loom_contract_format_index(const char *name)
{
	for (int i = 0; i < LOOM_CFMT_COUNT; i++)
		if (strcmp(format_names[i], name) == 0)
			return i;
	return -1;
}

bool loom_contract_uses_role(const loom_contract *c, loom_contract_format f, loom_role role)
{
	bool fused = c->qkv[f] == LOOM_QKV_FUSED, sequential = c->residual == LOOM_RESIDUAL_SEQUENTIAL;
	bool gated = c->ffn != LOOM_FFN_MLP;

	switch (role) {
	case LOOM_ROLE_POS_EMBD:
		return c->positions == LOOM_POSITIONS_LEARNED;
	case LOOM_ROLE_OUTPUT_NORM_B:
		return c->norm_bias;
	case LOOM_ROLE_ATTN_NORM:
		return c->pre_norm;
	case LOOM_ROLE_ATTN_NORM_B:
		return c->pre_norm && c->norm_bias;
	case LOOM_ROLE_OUTPUT:
		return c->tied != LOOM_TIED_ALWAYS;
	case LOOM_ROLE_OUTPUT_B:
		return c->bias[LOOM_BIAS_OUTPUT];
	case LOOM_ROLE_ROPE_FREQS:
	case LOOM_ROLE_ROPE_FACTORS_LONG:
	case LOOM_ROLE_ROPE_FACTORS_SHORT:
		return c->positions == LOOM_POSITIONS_ROPE;
	case LOOM_ROLE_ATTN_QKV:
		return fused;
	case LOOM_ROLE_ATTN_QKV_B:
		return fused && c->bias[LOOM_BIAS_QKV];
	case LOOM_ROLE_ATTN_Q:
	case LOOM_ROLE_ATTN_K:
	case LOOM_ROLE_ATTN_V:
		return !fused;
	case LOOM_ROLE_ATTN_Q_B:
		return !fused && (c->bias[LOOM_BIAS_Q] || c->bias[LOOM_BIAS_QKV]);
	case LOOM_ROLE_ATTN_K_B:
		return !fused && (c->bias[LOOM_BIAS_K] || c->bias[LOOM_BIAS_QKV]);
	case LOOM_ROLE_ATTN_V_B:
		return !fused && (c->bias[LOOM_BIAS_V] || c->bias[LOOM_BIAS_QKV]);
	case LOOM_ROLE_ATTN_Q_NORM:
	case LOOM_ROLE_ATTN_K_NORM:
		return c->qk_norm != LOOM_QK_NORM_NONE;
	case LOOM_ROLE_ATTN_POST_NORM:
	case LOOM_ROLE_FFN_POST_NORM:
		return c->post_norm;
	case LOOM_ROLE_ATTN_SINKS:
		return c->attn_sinks;
	case LOOM_ROLE_FFN_GATE_INP:
	case LOOM_ROLE_FFN_UP_EXPS:
	case LOOM_ROLE_FFN_DOWN_EXPS:
		return c->experts;
	case LOOM_ROLE_FFN_GATE_EXPS:
		return c->experts && gated && c->experts_gate_up[f] == LOOM_GATE_UP_SEPARATE;
	case LOOM_ROLE_FFN_GATE_INP_SHEXP:
		return c->shared_expert_gated;
	case LOOM_ROLE_FFN_EXP_PROBS_B:
		return c->selection_bias;
	case LOOM_ROLE_FFN_GATE_SHEXP:
	case LOOM_ROLE_FFN_UP_SHEXP:
	case LOOM_ROLE_FFN_DOWN_SHEXP:
		return c->shared_expert;
	case LOOM_ROLE_FFN_GATE_INP_B:
		return c->bias[LOOM_BIAS_ROUTER];
	case LOOM_ROLE_FFN_GATE_EXPS_B:
		return c->bias[LOOM_BIAS_EXPERTS] && c->experts_gate_up[f] == LOOM_GATE_UP_SEPARATE;
	case LOOM_ROLE_FFN_UP_EXPS_B:
	case LOOM_ROLE_FFN_DOWN_EXPS_B:
		return c->bias[LOOM_BIAS_EXPERTS];
	case LOOM_ROLE_ATTN_OUTPUT_B:
		return c->bias[LOOM_BIAS_O];
	case LOOM_ROLE_FFN_NORM:
		return sequential && c->pre_norm;
	case LOOM_ROLE_FFN_NORM_B:
		return sequential && c->pre_norm && c->norm_bias;
	case LOOM_ROLE_FFN_GATE:
		return gated && c->gate_up[f] != LOOM_QKV_FUSED;
	case LOOM_ROLE_FFN_GATE_B:
		return gated && c->bias[LOOM_BIAS_GATE];
	case LOOM_ROLE_FFN_UP_B:
		return c->bias[LOOM_BIAS_UP];
	case LOOM_ROLE_FFN_DOWN_B:
		return c->bias[LOOM_BIAS_DOWN];
	default:
		/* token_embd, the norms, attn_output, ffn_up, ffn_down. */
		return true;
	}
}

/* Each `block:` choice is listed with the values loom implements; an
 * unknown value is an error, never a silent default. */
static const char *const norm_choices[] = {"rmsnorm", "layernorm", NULL};
static const char *const ffn_choices[] = {"swiglu", "geglu", "mlp", NULL};
static const char *const activation_choices[] = {"silu", "gelu", "gelu_tanh", "swiglu_oai", NULL};
static const char *const positions_choices[] = {"rope", "learned", NULL};
static const char *const rope_style_choices[] = {"normal", "neox", NULL};
static const char *const qkv_choices[] = {"separate", "fused", NULL};
static const char *const residual_choices[] = {"sequential", "parallel", NULL};
static const char *const tied_choices[] = {"never", "always", "if_missing", NULL};
/* true is per_head, as before there was a choice. */
static const char *const qk_norm_choices[] = {"false", "true", "per_head", "full", NULL};
/* In loom_gating's order. */
static const char *const gating_choices[] = {"softmax", "softmax_selected", "sigmoid", NULL};

static loom_status choice(loom_yaml *y, yaml_node_t *map, const char *key, const char *const *choices,
			  const char *def, int *out)
{
	yaml_node_t *n = loom_yaml_get(y, map, key);
	if (n == NULL) {
		if (def == NULL)
			return loom_error(LOOM_ERR_CONTRACT, "%s:%d: block needs '%s' (one of the values: %s%s)",
					  y->path, loom_yaml_line(map), key, choices[0],
					  choices[1] ? ", ..." : "");
		for (int i = 0; choices[i] != NULL; i++)
			if (strcmp(choices[i], def) == 0)
				*out = i;
		return LOOM_OK;
	}
	return loom_yaml_get_choice(y, n, choices, LOOM_ERR_CONTRACT, key, out);
}

/* The node giving key's value for format f: key's own, or, when key maps
 * format names to values, the entry for f (NULL if it has none). */
static loom_status per_format_node(loom_yaml *y, yaml_node_t *map, const char *key, int f, yaml_node_t **out)
{
	yaml_node_t *n = loom_yaml_get(y, map, key);
	*out = n;
	if (n == NULL || n->type != YAML_MAPPING_NODE)
		return LOOM_OK;
	loom_status st = loom_yaml_check_keys(y, n, format_names, LOOM_ERR_CONTRACT, key);
	*out = st == LOOM_OK ? loom_yaml_get(y, n, format_names[f]) : NULL;
	return st;
}

/* choice() for a key whose value may differ by format. */
static loom_status format_choice(loom_yaml *y, yaml_node_t *map, const char *key, const char *const *choices,
				 const char *def, int out[LOOM_CFMT_COUNT])
{
	for (int f = 0; f < LOOM_CFMT_COUNT; f++) {
		yaml_node_t *n;
		loom_status st = per_format_node(y, map, key, f, &n);
		for (int i = 0; choices[i] != NULL; i++)
			if (strcmp(choices[i], def) == 0)
				out[f] = i;
		if (st == LOOM_OK && n != NULL)
			st = loom_yaml_get_choice(y, n, choices, LOOM_ERR_CONTRACT, key, &out[f]);
		if (st != LOOM_OK)
			return st;
	}
	return LOOM_OK;
}

/* A number that may differ by format; def where not given. */
static loom_status format_number(loom_yaml *y, yaml_node_t *map, const char *key, double def,
				 double out[LOOM_CFMT_COUNT])
{
	for (int f = 0; f < LOOM_CFMT_COUNT; f++) {
		yaml_node_t *n;
		loom_status st = per_format_node(y, map, key, f, &n);
		out[f] = def;
		if (st == LOOM_OK && n != NULL)
			st = loom_yaml_get_double(y, n, LOOM_ERR_CONTRACT, key, &out[f]);
		if (st != LOOM_OK)
			return st;
	}
	return LOOM_OK;
}

static loom_status flag_or(loom_yaml *y, yaml_node_t *map, const char *key, bool def, bool *out)
{
	yaml_node_t *n = loom_yaml_get(y, map, key);

	*out = def;
	return n != NULL ? loom_yaml_get_bool(y, n, LOOM_ERR_CONTRACT, key, out) : LOOM_OK;
}

static loom_status flag(loom_yaml *y, yaml_node_t *map, const char *key, bool *out)
{
	return flag_or(y, map, key, false, out);
}

/* A positive number, or the word `named` for the value the block derives
 * (*is_named); absent, the derived one if derived_default, else 1. */
static loom_status scale_value(loom_yaml *y, yaml_node_t *map, const char *key, const char *named,
			       bool derived_default, bool *is_named, float *value)
{
	yaml_node_t *n = loom_yaml_get(y, map, key);
	double v;

	*is_named = n != NULL || derived_default;
	*value = 1.0f;
	if (n == NULL)
		return LOOM_OK;
	const char *text = loom_yaml_scalar(n);
	if (text != NULL && strcmp(text, named) == 0)
		return LOOM_OK;
	loom_status st = loom_yaml_get_double(y, n, LOOM_ERR_CONTRACT, key, &v);
	if (st != LOOM_OK)
		return st;
	if (!(v > 0) || v > 1e30)
		return loom_error(LOOM_ERR_CONTRACT, "%s:%d: %s must be %s or a positive number", y->path,
				  loom_yaml_line(n), key, named);
	*is_named = false;
	*value = (float)v;
	return LOOM_OK;
}

/* experts: {gating, shared_expert, selection_bias, gate_up}: how a
 * mixture of experts chooses and weighs its experts, whether a shared
 * expert joins them, and whether a format stores each expert's gate and up
 * as one matrix. */
static loom_status parse_experts(loom_yaml *y, yaml_node_t *map, loom_contract *c)
{
	static const char *const keys[] = {"gating", "shared_expert", "selection_bias", "gate_up", NULL};
	static const char *const shared_choices[] = {"none", "plain", "gated", NULL};
	int shared = 0;
	loom_status st = loom_yaml_expect(y, map, YAML_MAPPING_NODE, LOOM_ERR_CONTRACT, "experts");
	if (st == LOOM_OK)
		st = loom_yaml_check_keys(y, map, keys, LOOM_ERR_CONTRACT, "experts");
	if (st == LOOM_OK)
		st = choice(y, map, "gating", gating_choices, "softmax", &c->expert_gating);
	if (st == LOOM_OK)
		st = choice(y, map, "shared_expert", shared_choices, "none", &shared);
	if (st == LOOM_OK)
		st = flag(y, map, "selection_bias", &c->selection_bias);
	static const char *const gate_up_choices[] = {"separate", "fused", "interleaved", NULL};
	int gate_up[LOOM_CFMT_COUNT];
	if (st == LOOM_OK)
		st = format_choice(y, map, "gate_up", gate_up_choices, "separate", gate_up);
	for (int f = 0; st == LOOM_OK && f < LOOM_CFMT_COUNT; f++)
		c->experts_gate_up[f] = (loom_gate_up_kind)gate_up[f];
	/* The bias shifts sigmoids; a softmax's choice is its logits'. */
	if (st == LOOM_OK && c->selection_bias && c->expert_gating != LOOM_GATING_SIGMOID)
		st = loom_error(LOOM_ERR_CONTRACT, "%s:%d: experts: selection_bias needs gating: sigmoid", y->path,
				loom_yaml_line(loom_yaml_get(y, map, "selection_bias")));
	c->experts = st == LOOM_OK;
	c->shared_expert = shared != 0;
	c->shared_expert_gated = shared == 2;
	return st;
}

static loom_status parse_biases(loom_yaml *y, yaml_node_t *list, loom_contract *c)
{
	loom_status st = loom_yaml_expect(y, list, YAML_SEQUENCE_NODE, LOOM_ERR_CONTRACT, "biases");
	if (st != LOOM_OK)
		return st;
	loom_yaml_for_each_item(y, list, item) {
		yaml_node_t *n = loom_yaml_node(y, *item);
		int b;
		if ((st = loom_yaml_get_choice(y, n, bias_names, LOOM_ERR_CONTRACT, "biases", &b)) != LOOM_OK)
			return st;
		if (c->bias[b])
			return loom_error(LOOM_ERR_CONTRACT, "%s:%d: biases lists '%s' twice", y->path,
					  loom_yaml_line(n), bias_names[b]);
		c->bias[b] = true;
	}
	return LOOM_OK;
}

/* An error at key's line for a choice that contradicts another. */
static loom_status contradiction(loom_yaml *y, yaml_node_t *block, const char *key, const char *why)
{
	yaml_node_t *n = loom_yaml_get(y, block, key);
	return loom_error(LOOM_ERR_CONTRACT, "%s:%d: %s: %s", y->path, loom_yaml_line(n != NULL ? n : block), key,
			  why);
}

static loom_status check_choices(loom_yaml *y, yaml_node_t *block, const loom_contract *c)
{
	bool fused = false;
	for (int f = 0; f < LOOM_CFMT_COUNT; f++)
		fused = fused || c->qkv[f] == LOOM_QKV_FUSED;

	if (c->norm_bias && c->norm != LOOM_NORM_LAYERNORM)
		return contradiction(y, block, "norm_bias", "only layernorm has a bias");
	if (loom_yaml_get(y, block, "activation") != NULL &&
	    ((c->ffn == LOOM_FFN_SWIGLU && c->activation != LOOM_ACT_SILU && c->activation != LOOM_ACT_SWIGLU_OAI) ||
	     (c->ffn == LOOM_FFN_GEGLU && (c->activation == LOOM_ACT_SILU || c->activation == LOOM_ACT_SWIGLU_OAI))))
		return contradiction(y, block, "activation",
				     c->ffn == LOOM_FFN_SWIGLU ? "swiglu's activation is silu or swiglu_oai"
							       : "geglu's activation is gelu or gelu_tanh");
	if (c->ffn == LOOM_FFN_MLP && (c->activation == LOOM_ACT_SILU || c->activation == LOOM_ACT_SWIGLU_OAI))
		return contradiction(y, block, "activation", "an mlp takes gelu or gelu_tanh (silu is gated: swiglu)");
	if ((c->bias[LOOM_BIAS_ROUTER] || c->bias[LOOM_BIAS_EXPERTS]) && !c->experts)
		return contradiction(y, block, "biases", "router and experts biases need block.experts");
	if (c->positions != LOOM_POSITIONS_ROPE && loom_yaml_get(y, block, "global_rope") != NULL)
		return contradiction(y, block, "global_rope", "positions are not rope");
	if (c->positions != LOOM_POSITIONS_ROPE && loom_yaml_get(y, block, "rope_style") != NULL)
		return contradiction(y, block, "rope_style", "positions are not rope");
	if ((c->bias[LOOM_BIAS_Q] || c->bias[LOOM_BIAS_K] || c->bias[LOOM_BIAS_V]) && fused)
		return contradiction(y, block, "biases", "with qkv: fused the bias is 'qkv'");
	bool gate_up_fused = false, gate_up_apart = false;
	for (int f = 0; f < LOOM_CFMT_COUNT; f++) {
		gate_up_fused = gate_up_fused || c->gate_up[f] == LOOM_QKV_FUSED;
		gate_up_apart = gate_up_apart || c->gate_up[f] != LOOM_QKV_FUSED;
	}
	if (gate_up_fused && gate_up_apart)
		return contradiction(y, block, "gate_up", "every format keeps gate and up the same way (fused or separate)");
	if (gate_up_fused && (c->ffn == LOOM_FFN_MLP || c->bias[LOOM_BIAS_GATE] || c->bias[LOOM_BIAS_UP]))
		return contradiction(y, block, "gate_up", "a fused gate and up is a gated FFN's, without biases");
	if (c->bias[LOOM_BIAS_GATE] && c->ffn == LOOM_FFN_MLP)
		return contradiction(y, block, "biases", "an mlp has no gate");
	if (!c->pre_norm && !c->post_norm)
		return contradiction(y, block, "pre_norm", "a block without pre-norms needs post_norm: true");
	if (!c->pre_norm && c->residual == LOOM_RESIDUAL_PARALLEL)
		return contradiction(y, block, "pre_norm", "a parallel residual shares one pre-norm");
	if (c->experts && c->ffn == LOOM_FFN_MLP)
		return contradiction(y, block, "experts", "experts are gated FFNs (swiglu or geglu), not an mlp");
	return LOOM_OK;
}

static loom_status parse_block(loom_yaml *y, yaml_node_t *block, loom_contract *c)
{
	static const char *const keys[] = {"norm", "norm_bias", "norm_weight_offset", "ffn", "activation",
					   "positions", "rope_style", "qkv", "gate_up", "qk_norm", "pre_norm", "post_norm", "global_rope",
					   "attention_sinks", "experts", "residual", "tied_embeddings", "biases",
					   "embedding_scale", "attention_scale", NULL};
	static const loom_activation ffn_activation[] = {LOOM_ACT_SILU, LOOM_ACT_GELU_TANH, LOOM_ACT_GELU_TANH};
	int norm = 0, ffn = 0, act = 0, pos = 0, style[LOOM_CFMT_COUNT], qkv[LOOM_CFMT_COUNT], gate_up[LOOM_CFMT_COUNT];
	int res = 0, tied = 0, qk = 0;
	double offset[LOOM_CFMT_COUNT];
	loom_status st = loom_yaml_check_keys(y, block, keys, LOOM_ERR_CONTRACT, "block");
	if (st == LOOM_OK)
		st = choice(y, block, "norm", norm_choices, NULL, &norm);
	if (st == LOOM_OK)
		st = choice(y, block, "ffn", ffn_choices, NULL, &ffn);
	if (st == LOOM_OK)
		st = choice(y, block, "activation", activation_choices, activation_choices[ffn_activation[ffn]], &act);
	if (st == LOOM_OK)
		st = choice(y, block, "positions", positions_choices, NULL, &pos);
	if (st == LOOM_OK)
		st = format_choice(y, block, "rope_style", rope_style_choices, "normal", style);
	if (st == LOOM_OK)
		st = format_choice(y, block, "qkv", qkv_choices, "separate", qkv);
	if (st == LOOM_OK)
		st = format_choice(y, block, "gate_up", qkv_choices, "separate", gate_up);
	if (st == LOOM_OK)
		st = choice(y, block, "residual", residual_choices, "sequential", &res);
	if (st == LOOM_OK)
		st = choice(y, block, "tied_embeddings", tied_choices, "never", &tied);
	if (st == LOOM_OK)
		st = flag(y, block, "norm_bias", &c->norm_bias);
	if (st == LOOM_OK)
		st = choice(y, block, "qk_norm", qk_norm_choices, "false", &qk);
	if (st == LOOM_OK)
		st = flag_or(y, block, "pre_norm", true, &c->pre_norm);
	if (st == LOOM_OK)
		st = flag_or(y, block, "global_rope", true, &c->global_rope);
	if (st == LOOM_OK)
		st = flag(y, block, "post_norm", &c->post_norm);
	if (st == LOOM_OK)
		st = flag(y, block, "attention_sinks", &c->attn_sinks);
	if (st == LOOM_OK)
		st = format_number(y, block, "norm_weight_offset", 0.0, offset);
	if (st == LOOM_OK && loom_yaml_get(y, block, "experts") != NULL)
		st = parse_experts(y, loom_yaml_get(y, block, "experts"), c);
	if (st == LOOM_OK && loom_yaml_get(y, block, "biases") != NULL)
		st = parse_biases(y, loom_yaml_get(y, block, "biases"), c);
	if (st == LOOM_OK)
		st = scale_value(y, block, "embedding_scale", "sqrt_n_embd", false, &c->embd_scale_sqrt,
				 &c->embd_scale);
	if (st == LOOM_OK)
		st = scale_value(y, block, "attention_scale", "inv_sqrt_head_dim", true, &c->attn_scale_default,
				 &c->attn_scale);
	if (st != LOOM_OK)
		return st;
	c->norm = (loom_norm_kind)norm;
	c->qk_norm = qk == 0 ? LOOM_QK_NORM_NONE : qk == 3 ? LOOM_QK_NORM_FULL : LOOM_QK_NORM_PER_HEAD;
	for (int f = 0; f < LOOM_CFMT_COUNT; f++) {
		c->norm_weight_offset[f] = (float)offset[f];
		c->rope_style[f] = style[f] == 0 ? LOOM_ROPE_NORMAL : LOOM_ROPE_NEOX;
		c->qkv[f] = (loom_qkv_kind)qkv[f];
		c->gate_up[f] = (loom_qkv_kind)gate_up[f];
	}
	c->ffn = (loom_ffn_kind)ffn;
	c->activation = (loom_activation)act;
	c->positions = (loom_positions_kind)pos;
	c->residual = (loom_residual_kind)res;
	c->tied = (loom_tied_kind)tied;
	return check_choices(y, block, c);
}

static void free_strings(char **v)
{
	for (char **p = v; p != NULL && *p != NULL; p++)
		free(*p);
	free(v);
}

/* A string, or a list of them, as a NULL-terminated vector. */
static loom_status parse_strings(loom_yaml *y, yaml_node_t *n, const char *key, char ***out)
{
	size_t count = 1;
	if (n->type == YAML_SEQUENCE_NODE)
		count = (size_t)(n->data.sequence.items.top - n->data.sequence.items.start);
	else if (n->type != YAML_SCALAR_NODE)
		return loom_error(LOOM_ERR_CONTRACT, "%s:%d: %s must be a string or a list of strings", y->path,
				  loom_yaml_line(n), key);
	if (count == 0)
		return loom_error(LOOM_ERR_CONTRACT, "%s:%d: %s is an empty list", y->path, loom_yaml_line(n), key);
	char **v = calloc(count + 1, sizeof(*v));
	if (v == NULL)
		return loom_error(LOOM_ERR_NO_MEMORY, "out of memory");
	*out = v;
	if (n->type == YAML_SCALAR_NODE) {
		v[0] = strdup(loom_yaml_scalar(n));
		return v[0] != NULL ? LOOM_OK : loom_error(LOOM_ERR_NO_MEMORY, "out of memory");
	}
	size_t i = 0;
	loom_yaml_for_each_item(y, n, item) {
		yaml_node_t *e = loom_yaml_node(y, *item);
		loom_status st = loom_yaml_expect(y, e, YAML_SCALAR_NODE, LOOM_ERR_CONTRACT, key);
		if (st != LOOM_OK)
			return st;
		if ((v[i++] = strdup(loom_yaml_scalar(e))) == NULL)
			return loom_error(LOOM_ERR_NO_MEMORY, "out of memory");
	}
	return LOOM_OK;
}

/* A per-format mapping from loom names (names[0..count)) to spellings. */
static loom_status parse_name_map(loom_yaml *y, yaml_node_t *map, const char *section,
				  const char *const *names, int count, loom_spellings out[LOOM_CFMT_COUNT][count])
{
	loom_status st = loom_yaml_check_keys(y, map, format_names, LOOM_ERR_CONTRACT, section);
	if (st != LOOM_OK)
		return st;
	const char *allowed[count + 1];
	for (int i = 0; i < count; i++)
		allowed[i] = names[i];
	allowed[count] = NULL;
	for (int f = 0; f < LOOM_CFMT_COUNT; f++) {
		yaml_node_t *fm = loom_yaml_get(y, map, format_names[f]);
		if (fm == NULL)
			continue;
		char where[64];
		snprintf(where, sizeof(where), "%s.%s", section, format_names[f]);
		if ((st = loom_yaml_check_keys(y, fm, allowed, LOOM_ERR_CONTRACT, where)) != LOOM_OK)
			return st;
		for (int i = 0; i < count; i++) {
			yaml_node_t *v = loom_yaml_get(y, fm, names[i]);
			if (v != NULL && (st = parse_strings(y, v, names[i], &out[f][i])) != LOOM_OK)
				return st;
		}
	}
	return LOOM_OK;
}

/* A map of hyperparameters to numbers (rope_scaling_type, a string,
 * defaults to none); by_layers: one depth's, which cannot set the depth. */
static loom_status parse_defaults(loom_yaml *y, yaml_node_t *map, bool by_layers, bool has[LOOM_HP_COUNT],
				  double values[LOOM_HP_COUNT])
{
	const char *allowed[LOOM_HP_COUNT + 1];
	int n = 0;
	for (int i = 0; i < LOOM_HP_COUNT; i++)
		if (i != LOOM_HP_ROPE_SCALING_TYPE && !(by_layers && i == LOOM_HP_N_LAYER))
			allowed[n++] = hparam_names[i];
	allowed[n] = NULL;
	loom_status st = loom_yaml_expect(y, map, YAML_MAPPING_NODE, LOOM_ERR_CONTRACT,
					  by_layers ? "a depth's defaults" : "defaults");
	if (st == LOOM_OK)
		st = loom_yaml_check_keys(y, map, allowed, LOOM_ERR_CONTRACT,
					  by_layers ? "defaults_by_layers" : "defaults");
	for (int i = 0; st == LOOM_OK && i < LOOM_HP_COUNT; i++) {
		yaml_node_t *v = loom_yaml_get(y, map, hparam_names[i]);
		if (v == NULL)
			continue;
		st = loom_yaml_get_double(y, v, LOOM_ERR_CONTRACT, hparam_names[i], &values[i]);
		has[i] = true;
	}
	return st;
}

/* defaults_by_layers: {N_LAYER: {HPARAM: number, ...}, ...}. */
static loom_status parse_defaults_by_layers(loom_yaml *y, yaml_node_t *map, loom_contract *c)
{
	loom_status st = loom_yaml_expect(y, map, YAML_MAPPING_NODE, LOOM_ERR_CONTRACT, "defaults_by_layers");
	if (st != LOOM_OK)
		return st;
	const size_t n = (size_t)(map->data.mapping.pairs.top - map->data.mapping.pairs.start);
	if ((c->layer_defaults = calloc(n > 0 ? n : 1, sizeof(*c->layer_defaults))) == NULL)
		return loom_error(LOOM_ERR_NO_MEMORY, "out of memory");
	loom_yaml_for_each_pair(y, map, pair) {
		yaml_node_t *key = yaml_document_get_node(&y->doc, pair->key);
		struct loom_layer_defaults *d = &c->layer_defaults[c->n_layer_defaults];
		double depth = 0;
		if ((st = loom_yaml_get_double(y, key, LOOM_ERR_CONTRACT, "defaults_by_layers", &depth)) != LOOM_OK)
			return st;
		if (!(depth >= 1 && depth <= 1e6) || depth != (double)(int64_t)depth)
			return loom_error(LOOM_ERR_CONTRACT, "%s:%d: defaults_by_layers: '%s' is not a layer count",
					  y->path, loom_yaml_line(key), loom_yaml_scalar(key));
		for (int i = 0; i < c->n_layer_defaults; i++)
			if (c->layer_defaults[i].n_layer == (int64_t)depth)
				return loom_error(LOOM_ERR_CONTRACT, "%s:%d: defaults_by_layers: %s layers twice", y->path,
						  loom_yaml_line(key), loom_yaml_scalar(key));
		d->n_layer = (int64_t)depth;
		st = parse_defaults(y, yaml_document_get_node(&y->doc, pair->value), true, d->has_default, d->defaults);
		if (st != LOOM_OK)
			return st;
		c->n_layer_defaults++;
	}
	return LOOM_OK;
}

/* Names that the choices need must be given for every format the contract
 * describes, so a model is never half-described. */
static loom_status check_complete(loom_yaml *y, yaml_node_t *tensors, loom_contract *c)
{
	for (int f = 0; f < LOOM_CFMT_COUNT; f++) {
		bool described = false;
		for (int r = 0; r < LOOM_ROLE_COUNT; r++)
			described = described || c->tensor_names[f][r] != NULL;
		if (!described)
			continue;
		yaml_node_t *names = loom_yaml_get(y, tensors, format_names[f]);
		for (int r = 0; r < LOOM_ROLE_COUNT; r++) {
			bool used = loom_contract_uses_role(c, (loom_contract_format)f, (loom_role)r), named = c->tensor_names[f][r] != NULL;
			/* A contract with experts may describe no dense FFN, or no
			 * experts in a format (whose files with experts it then
			 * refuses). */
			bool may_lack = loom_role_is_optional((loom_role)r) ||
					(c->experts && (loom_role_is_dense_ffn((loom_role)r) || loom_role_is_moe((loom_role)r)));
			if (used && !named && !may_lack)
				return loom_error(LOOM_ERR_CONTRACT, "%s:%d: tensors.%s lacks '%s', which the block needs",
						  y->path, loom_yaml_line(tensors), format_names[f], role_names[r]);
			if (named && !used)
				return loom_error(LOOM_ERR_CONTRACT,
						  "%s:%d: tensors.%s.%s names a tensor the block's choices do not use",
						  y->path, loom_yaml_line(loom_yaml_get(y, names, role_names[r])),
						  format_names[f], role_names[r]);
		}
		for (int r = 0; r < LOOM_ROLE_COUNT; r++) {
			for (char **name = c->tensor_names[f][r]; name != NULL && *name != NULL; name++)
				if (loom_role_is_per_layer((loom_role)r) && strstr(*name, "{i}") == NULL)
					return loom_error(LOOM_ERR_CONTRACT,
							  "%s:%d: tensors.%s.%s ('%s') needs the layer placeholder {i}",
							  y->path, loom_yaml_line(loom_yaml_get(y, names, role_names[r])),
							  format_names[f], role_names[r], *name);
			/* {e}: one tensor an expert, stacked at load; every
			 * spelling of the role says it or none does. */
			bool each = c->tensor_names[f][r] != NULL && strstr(c->tensor_names[f][r][0], "{e}") != NULL;
			for (char **name = c->tensor_names[f][r]; name != NULL && *name != NULL; name++)
				if ((strstr(*name, "{e}") != NULL) != each || (each && !loom_role_is_experts((loom_role)r)))
					return loom_error(LOOM_ERR_CONTRACT,
							  "%s:%d: tensors.%s.%s ('%s'): the expert placeholder {e} belongs in "
							  "every spelling of ffn_gate_exps, ffn_up_exps or ffn_down_exps, or "
							  "in none",
							  y->path, loom_yaml_line(loom_yaml_get(y, names, role_names[r])),
							  format_names[f], role_names[r], *name);
		}
	}
	return LOOM_OK;
}

/* transposed: {FORMAT: [role, ...]}: matrices (or every expert's) the
 * format stores with rows and columns swapped. Each must be one the format
 * names. */
static loom_status parse_transposed(loom_yaml *y, yaml_node_t *map, loom_contract *c)
{
	loom_status st = loom_yaml_check_keys(y, map, format_names, LOOM_ERR_CONTRACT, "transposed");
	for (int f = 0; st == LOOM_OK && f < LOOM_CFMT_COUNT; f++) {
		yaml_node_t *list = loom_yaml_get(y, map, format_names[f]);
		if (list == NULL)
			continue;
		if ((st = loom_yaml_expect(y, list, YAML_SEQUENCE_NODE, LOOM_ERR_CONTRACT, "transposed")) != LOOM_OK)
			return st;
		loom_yaml_for_each_item(y, list, item) {
			yaml_node_t *n = loom_yaml_node(y, *item);
			int r;
			if ((st = loom_yaml_get_choice(y, n, role_names, LOOM_ERR_CONTRACT, "transposed", &r)) != LOOM_OK)
				return st;
			if (!(loom_role_is_matrix((loom_role)r) || loom_role_is_experts((loom_role)r)) ||
			    c->tensor_names[f][r] == NULL)
				return loom_error(LOOM_ERR_CONTRACT, "%s:%d: transposed.%s: %s is not a matrix tensors.%s names",
						  y->path, loom_yaml_line(n), format_names[f], role_names[r], format_names[f]);
			c->transposed[f][r] = true;
		}
	}
	return st;
}

/* tokenizer: what the family's vocabularies need beyond their files. */
static loom_status parse_tokenizer(loom_yaml *y, yaml_node_t *map, loom_contract *c)
{
	static const char *const keys[] = {"rstrip_special", "rstrip_except", NULL};
	loom_status st = loom_yaml_check_keys(y, map, keys, LOOM_ERR_CONTRACT, "tokenizer");
	if (st == LOOM_OK)
		st = flag(y, map, "rstrip_special", &c->tokenizer.rstrip_special);
	yaml_node_t *except = loom_yaml_get(y, map, "rstrip_except");
	if (st != LOOM_OK || except == NULL)
		return st;
	if (!c->tokenizer.rstrip_special)
		return loom_error(LOOM_ERR_CONTRACT, "%s:%d: tokenizer.rstrip_except needs rstrip_special: true",
				  y->path, loom_yaml_line(except));
	return parse_strings(y, except, "rstrip_except", &c->tokenizer.rstrip_except);
}

/* The model's block: its choices, hyperparameters and tensors. A contract
 * may leave all three out to describe only the family's tokenizer. */
static loom_status parse_model(loom_yaml *y, yaml_node_t *root, loom_contract *c)
{
	yaml_node_t *block = loom_yaml_get(y, root, "block");
	yaml_node_t *hparams = loom_yaml_get(y, root, "hparams");
	yaml_node_t *defaults = loom_yaml_get(y, root, "defaults");
	yaml_node_t *tensors = loom_yaml_get(y, root, "tensors");
	yaml_node_t *tokenizer = loom_yaml_get(y, root, "tokenizer");
	const bool none = block == NULL && hparams == NULL && tensors == NULL && defaults == NULL &&
			  loom_yaml_get(y, root, "transposed") == NULL && loom_yaml_get(y, root, "text_model") == NULL;
	if (none && tokenizer != NULL)
		return LOOM_OK;
	if (block == NULL || hparams == NULL || tensors == NULL)
		return loom_error(LOOM_ERR_CONTRACT,
				  "%s:%d: a contract needs name, block, hparams and tensors (or only a tokenizer section)",
				  y->path, loom_yaml_line(root));
	c->has_block = true;
	loom_status st = parse_block(y, block, c);
	if (st == LOOM_OK)
		st = parse_name_map(y, hparams, "hparams", hparam_names, LOOM_HP_COUNT, c->hparam_keys);
	if (st == LOOM_OK && defaults != NULL)
		st = parse_defaults(y, defaults, false, c->has_default, c->defaults);
	yaml_node_t *by_layers = loom_yaml_get(y, root, "defaults_by_layers");
	if (st == LOOM_OK && by_layers != NULL)
		st = parse_defaults_by_layers(y, by_layers, c);
	if (st == LOOM_OK)
		st = parse_name_map(y, tensors, "tensors", role_names, LOOM_ROLE_COUNT, c->tensor_names);
	yaml_node_t *transposed = loom_yaml_get(y, root, "transposed");
	if (st == LOOM_OK && transposed != NULL)
		st = parse_transposed(y, transposed, c);
	yaml_node_t *text_model = loom_yaml_get(y, root, "text_model");
	if (st == LOOM_OK && text_model != NULL)
		st = loom_contract_text_model(y, text_model, c);
	return st == LOOM_OK ? check_complete(y, tensors, c) : st;
}

static loom_status parse_contract(loom_yaml *y, loom_contract *c)
{
	static const char *const keys[] = {"name",	"description", "aliases",	"block",     "hparams",
					   "defaults",	"defaults_by_layers", "tensors", "transposed", "tokenizer",
					   "chat_template", "moe_architecture", "text_model", NULL};
	yaml_node_t *root = loom_yaml_root(y);
	loom_status st = loom_yaml_check_keys(y, root, keys, LOOM_ERR_CONTRACT, "the contract");
	if (st != LOOM_OK)
		return st;
	yaml_node_t *name = loom_yaml_get(y, root, "name");
	if (name == NULL)
		return loom_error(LOOM_ERR_CONTRACT, "%s:%d: a contract needs name, block, hparams and tensors",
				  y->path, loom_yaml_line(root));
	if ((st = loom_yaml_expect(y, name, YAML_SCALAR_NODE, LOOM_ERR_CONTRACT, "name")) != LOOM_OK)
		return st;
	if ((c->name = strdup(loom_yaml_scalar(name))) == NULL)
		return loom_error(LOOM_ERR_NO_MEMORY, "out of memory");
	if ((st = parse_model(y, root, c)) != LOOM_OK)
		return st;
	yaml_node_t *moe = loom_yaml_get(y, root, "moe_architecture");
	if (moe != NULL) {
		if ((st = loom_yaml_expect(y, moe, YAML_SCALAR_NODE, LOOM_ERR_CONTRACT, "moe_architecture")) != LOOM_OK)
			return st;
		if ((c->moe_architecture = strdup(loom_yaml_scalar(moe))) == NULL)
			return loom_error(LOOM_ERR_NO_MEMORY, "out of memory");
	}
	yaml_node_t *tokenizer = loom_yaml_get(y, root, "tokenizer");
	if (tokenizer != NULL && (st = parse_tokenizer(y, tokenizer, c)) != LOOM_OK)
		return st;
	yaml_node_t *chat = loom_yaml_get(y, root, "chat_template");
	if (chat != NULL) {
		int k;
		if ((st = loom_yaml_get_choice(y, chat, loom_chat_template_names, LOOM_ERR_CONTRACT, "chat_template",
					       &k)) != LOOM_OK)
			return st;
		c->has_chat_template = true;
		c->chat_template = (loom_chat_kind)k;
	}
	yaml_node_t *aliases = loom_yaml_get(y, root, "aliases");
	if (aliases != NULL && (st = parse_strings(y, aliases, "aliases", &c->aliases)) != LOOM_OK)
		return st;
	return LOOM_OK;
}

loom_status loom_contract_load(const char *path, loom_contract **out)
{
	loom_yaml y;
	*out = NULL;
	loom_contract *c = calloc(1, sizeof(*c));
	if (c == NULL)
		return loom_error(LOOM_ERR_NO_MEMORY, "out of memory");
	loom_status st = loom_yaml_load(path, LOOM_ERR_CONTRACT, &y);
	if (st != LOOM_OK) {
		free(c);
		return st;
	}
	c->path = strdup(path);
	st = c->path != NULL ? parse_contract(&y, c) : loom_error(LOOM_ERR_NO_MEMORY, "out of memory");
	loom_yaml_free(&y);
	if (st != LOOM_OK) {
		loom_contract_free(c);
		return st;
	}
	*out = c;
	return LOOM_OK;
}

static bool has_alias(const loom_contract *c, const char *name)
{
	for (char **a = c->aliases; a != NULL && *a != NULL; a++)
		if (strcmp(*a, name) == 0)
			return true;
	return false;
}

static int is_yaml_file(const struct dirent *e)
{
	size_t n = strlen(e->d_name);
	return e->d_name[0] != '.' && n > 5 && strcmp(e->d_name + n - 5, ".yaml") == 0;
}

/* The first contract in dir, by file name, whose aliases list name.
 * Contracts that do not load are passed over here: they are reported
 * when a model names them. */
static loom_status find_alias(const char *name, const char *dir, loom_contract **out)
{
	struct dirent **entries;
	int n = scandir(dir, &entries, is_yaml_file, alphasort);
	loom_status st = LOOM_ERR_NOT_FOUND;
	for (int i = 0; i < n; i++) {
		char path[4096];
		loom_contract *c;
		snprintf(path, sizeof(path), "%s/%s", dir, entries[i]->d_name);
		if (st == LOOM_ERR_NOT_FOUND && loom_contract_load(path, &c) == LOOM_OK) {
			if (has_alias(c, name)) {
				*out = c;
				st = LOOM_OK;
			} else {
				loom_contract_free(c);
			}
		}
		free(entries[i]);
	}
	if (n >= 0)
		free(entries);
	loom_error_clear();
	return st;
}

loom_status loom_contract_find(const char *name, char *const *dirs, int n_dirs, loom_contract **out)
{
	char path[4096], searched[2048] = "";
	*out = NULL;
	if (strchr(name, '/') != NULL || name[0] == '.' || name[0] == '\0')
		return loom_error(LOOM_ERR_CONTRACT, "'%s' is not a valid architecture name", name);
	for (int i = 0; i < n_dirs; i++) {
		snprintf(path, sizeof(path), "%s/%s.yaml", dirs[i], name);
		if (access(path, F_OK) == 0) {
			loom_status st = loom_contract_load(path, out);
			if (st == LOOM_OK && strcmp((*out)->name, name) != 0) {
				st = loom_error(LOOM_ERR_CONTRACT, "%s: the contract is named '%s', not '%s'", path,
						(*out)->name, name);
				loom_contract_free(*out);
				*out = NULL;
			}
			return st;
		}
		strncat(searched, i ? ", " : "", sizeof(searched) - strlen(searched) - 1);
		strncat(searched, dirs[i], sizeof(searched) - strlen(searched) - 1);
	}
	for (int i = 0; i < n_dirs; i++)
		if (find_alias(name, dirs[i], out) == LOOM_OK)
			return LOOM_OK;
	return loom_error(LOOM_ERR_NOT_FOUND,
			  "no contract for architecture '%s' (looked for %s.yaml, and for a contract whose aliases list it, in %s)",
			  name, name, searched);
}

void loom_contract_free(loom_contract *c)
{
	if (c == NULL)
		return;
	for (int f = 0; f < LOOM_CFMT_COUNT; f++) {
		for (int i = 0; i < LOOM_HP_COUNT; i++)
			free_strings(c->hparam_keys[f][i]);
		for (int i = 0; i < LOOM_ROLE_COUNT; i++)
			free_strings(c->tensor_names[f][i]);
	}
	free_strings(c->aliases);
	free(c->layer_defaults);
	free_strings(c->tokenizer.rstrip_except);
	free(c->name);
	free(c->moe_architecture);
	free(c->path);
	free(c);
}
