/* quant_policy.c - which type each tensor gets under a quantization scheme.
 *
 * The rules are llama.cpp's (llama-quantize without an importance matrix)
 * for the schemes loom offers, applied to the tensors' roles in the
 * model's contract:
 *   - tensors that are not weight matrices (norms, biases, position
 *     embeddings, tensors the contract does not name) keep their type;
 *   - the output head (the token embedding when there is no head) gets
 *     Q6_K, or Q8_0 when its rows are not a multiple of 256, unless the
 *     scheme is Q8_0 already;
 *   - the _M mixes give Q6_K to the attn_v and ffn_down tensors of the first
 *     and last eighth of the layers and every third one between; the _S
 *     mixes give Q5_K to the first few; fused attn_qkv gets one step more;
 *   - a type whose block does not divide the row length falls back as
 *     llama.cpp does (Q4_K to Q5_0, Q5_K to Q5_1, Q6_K to Q8_0; Q2_K and
 *     Q3_K to Q4_0 where llama.cpp uses IQ4_NL, which loom lacks), and to
 *     F16 when even that block does not fit. */
#define _GNU_SOURCE /* qsort_r */
#include "export/quant_policy.h"


#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static const loom_quant_scheme schemes[] = {
	{"f32", LOOM_DTYPE_F32, 0, false},      {"f16", LOOM_DTYPE_F16, 1, false},
	{"q8_0", LOOM_DTYPE_Q8_0, 7, false},
	{"q4_0", LOOM_DTYPE_Q4_0, 2, false},    {"q4_1", LOOM_DTYPE_Q4_1, 3, false},
	{"q5_0", LOOM_DTYPE_Q5_0, 8, false},    {"q5_1", LOOM_DTYPE_Q5_1, 9, false},
	{"q6_k", LOOM_DTYPE_Q6_K, 18, false},   {"q4_k_s", LOOM_DTYPE_Q4_K, 14, true},
	{"q4_k_m", LOOM_DTYPE_Q4_K, 15, true},  {"q5_k_s", LOOM_DTYPE_Q5_K, 16, true},
	{"q5_k_m", LOOM_DTYPE_Q5_K, 17, true},
};
#define N_SCHEMES (sizeof(schemes) / sizeof(schemes[0]))

const loom_quant_scheme *loom_quant_scheme_find(const char *name)
{
	/* llama-quantize's short names for the _M mixes. */
	if (strcasecmp(name, "q4_k") == 0)
		name = "q4_k_m";
	else if (strcasecmp(name, "q5_k") == 0)
		name = "q5_k_m";
	for (size_t i = 0; i < N_SCHEMES; i++)
		if (strcasecmp(schemes[i].name, name) == 0)
			return &schemes[i];
	return NULL;
}

const char *loom_quant_scheme_names(void)
{
	static char names[256];
	if (names[0] == '\0')
		for (size_t i = 0; i < N_SCHEMES; i++)
			snprintf(names + strlen(names), sizeof(names) - strlen(names), "%s%s", i ? ", " : "",
				 schemes[i].name);
	return names;
}

static bool is_float_type(loom_dtype t)
{
	return t == LOOM_DTYPE_F32 || t == LOOM_DTYPE_F16 || t == LOOM_DTYPE_BF16;
}

/* The weight matrices; norms, biases, learned positions and a mixture of
 * experts' router (as llama-quantize leaves it) keep their type. */
static bool quantizable(const loom_file_tensor *t, loom_role role)
{
	return role != LOOM_ROLE_COUNT && (loom_role_is_matrix(role) || loom_role_is_experts(role)) &&
	       role != LOOM_ROLE_POS_EMBD && role != LOOM_ROLE_FFN_GATE_INP && t->n_dims >= 2;
}

/* The first and last eighth of n, and every third one between. */
static bool use_more_bits(int i, int n)
{
	return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2;
}

static loom_dtype fit_row(loom_dtype type, int64_t n)
{
	if (n % loom_dtype_traits_of(type).block == 0)
		return type;
	switch (type) {
	case LOOM_DTYPE_Q2_K:
	case LOOM_DTYPE_Q3_K:
		type = LOOM_DTYPE_Q4_0;
		break;
	case LOOM_DTYPE_Q4_K:
		type = LOOM_DTYPE_Q5_0;
		break;
	case LOOM_DTYPE_Q5_K:
		type = LOOM_DTYPE_Q5_1;
		break;
	case LOOM_DTYPE_Q6_K:
		type = LOOM_DTYPE_Q8_0;
		break;
	default:
		break;
	}
	return n % loom_dtype_traits_of(type).block == 0 ? type : LOOM_DTYPE_F16;
}

typedef struct plan_state {
	const loom_quant_scheme *scheme;
	bool has_output;
	bool eight_experts; /* llama-quantize gives Mixtral-8x7B's attention more bits */
	int i_attn_v, n_attn_v;
	int i_ffn_down, n_ffn_down;
} plan_state;

static loom_dtype choose(plan_state *st, const loom_file_tensor *t, loom_role role)
{
	const loom_quant_scheme *s = st->scheme;
	const bool m_mix = s->mixed && (s->file_type == 15 || s->file_type == 17);
	const bool s_mix = s->mixed && !m_mix;
	loom_dtype type = s->base;

	if (is_float_type(s->base))
		return type;
	if (role == LOOM_ROLE_OUTPUT || (!st->has_output && role == LOOM_ROLE_TOKEN_EMBD)) {
		if (t->ne[0] % 256 != 0)
			type = LOOM_DTYPE_Q8_0;
		else if (type != LOOM_DTYPE_Q8_0)
			type = LOOM_DTYPE_Q6_K;
	} else if (role == LOOM_ROLE_ATTN_V) {
		if (m_mix && use_more_bits(st->i_attn_v, st->n_attn_v))
			type = LOOM_DTYPE_Q6_K;
		else if (s_mix && st->i_attn_v < 4)
			type = LOOM_DTYPE_Q5_K;
		if (st->eight_experts)
			type = LOOM_DTYPE_Q8_0;
		st->i_attn_v++;
	} else if (role == LOOM_ROLE_ATTN_K && st->eight_experts) {
		type = LOOM_DTYPE_Q8_0;
	} else if (role == LOOM_ROLE_ATTN_OUTPUT && st->eight_experts && s->mixed && s->base == LOOM_DTYPE_Q4_K) {
		type = LOOM_DTYPE_Q5_K;
	} else if (role == LOOM_ROLE_FFN_DOWN || role == LOOM_ROLE_FFN_DOWN_EXPS) {
		if (m_mix && use_more_bits(st->i_ffn_down, st->n_ffn_down))
			type = LOOM_DTYPE_Q6_K;
		else if (s_mix && st->i_ffn_down < st->n_ffn_down / 8)
			type = LOOM_DTYPE_Q5_K;
		st->i_ffn_down++;
	} else if (role == LOOM_ROLE_ATTN_QKV && s->mixed) {
		type = s->base == LOOM_DTYPE_Q4_K ? LOOM_DTYPE_Q5_K : LOOM_DTYPE_Q6_K;
	}
	return fit_row(type, t->ne[0]);
}

/* llama-quantize visits tensors sorted by name (blk.10 before blk.2), and
 * the attn_v / ffn_down counters follow that order. */
static int by_name(const void *a, const void *b, void *tensors)
{
	const loom_file_tensor *t = tensors;
	loom_string x = t[*(const uint64_t *)a].name, y = t[*(const uint64_t *)b].name;
	int c = memcmp(x.data, y.data, x.len < y.len ? x.len : y.len);
	return c != 0 ? c : (x.len > y.len) - (x.len < y.len);
}

loom_status loom_quant_plan(const loom_model_file *file, const loom_role *roles, const loom_quant_scheme *scheme,
			    loom_dtype *types)
{
	plan_state st = {.scheme = scheme};
	uint64_t *order = malloc((file->n_tensors + 1) * sizeof(uint64_t));
	if (order == NULL)
		return LOOM_ERR_NO_MEMORY;
	for (uint64_t i = 0; i < file->n_tensors; i++) {
		order[i] = i;
		st.has_output = st.has_output || roles[i] == LOOM_ROLE_OUTPUT;
		st.n_attn_v += roles[i] == LOOM_ROLE_ATTN_V;
		st.n_ffn_down += (roles[i] == LOOM_ROLE_FFN_DOWN || roles[i] == LOOM_ROLE_FFN_DOWN_EXPS) &&
				 quantizable(&file->tensors[i], roles[i]);
		st.eight_experts = st.eight_experts || (loom_role_is_experts(roles[i]) && file->tensors[i].ne[2] == 8);
	}
	qsort_r(order, file->n_tensors, sizeof(order[0]), by_name, (void *)file->tensors);
	for (uint64_t k = 0; k < file->n_tensors; k++) {
		const loom_file_tensor *t = &file->tensors[order[k]];
		const loom_role role = roles[order[k]];
		types[order[k]] = quantizable(t, role) ? choose(&st, t, role) : t->dtype;
	}
	free(order);
	return LOOM_OK;
}
