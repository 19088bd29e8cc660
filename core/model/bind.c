/* bind.c - each role the contract's choices use, bound to its tensor in
 * the file: shape and type checked, the backend asked whether it can use
 * it, matrices stored transposed turned and norms widened to f32 in host
 * copies. The tensors point into host memory until place.c moves them. */
#include "model/bind.h"

#include "model/role_source.h"
#include "model/naming.h"
#include "model/weight_adapt.h"
#include "runtime/array_grow.h"
#include "runtime/error.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Keeps a copy of name for t's messages, with the model. */
static loom_status name_tensor(loom_model *m, loom_tensor *t, const char *name)
{
	char **names = loom_array_grow(m->names, &m->cap_names, m->n_names + 1, sizeof(*names));
	char *copy = strdup(name);
	if (names == NULL || copy == NULL) {
		free(copy);
		return loom_error(LOOM_ERR_NO_MEMORY, "out of memory");
	}
	m->names = names;
	m->names[m->n_names++] = copy;
	t->name = copy;
	return LOOM_OK;
}

/* Hands a malloc'd host copy of size bytes to the model, for place.c. */
static loom_status keep_copy(loom_model *m, void *copy, size_t size, loom_tensor *t)
{
	loom_host_copy *copies = loom_array_grow(m->copies, &m->cap_copies, m->n_copies + 1, sizeof(*copies));
	if (copies == NULL) {
		free(copy);
		return loom_error(LOOM_ERR_NO_MEMORY, "out of memory");
	}
	m->copies = copies;
	m->copies[m->n_copies++] = (loom_host_copy){.data = copy, .size = size};
	t->data = copy;
	return LOOM_OK;
}

/* Asks the backend whether it can use t as the weight of op (GET_ROWS,
 * MATMUL or MATMUL_ID). */
bool loom_backend_takes(const loom_model *m, loom_op op, const loom_tensor *t)
{
	loom_tensor in, out, ids;
	loom_node node = {.op = op, .dst = &out, .src = {(loom_tensor *)t, &in}};
	memset(&in, 0, sizeof(in));
	memset(&out, 0, sizeof(out));
	memset(&ids, 0, sizeof(ids));
	if (op == LOOM_OP_GET_ROWS) {
		loom_tensor_set_contiguous(&in, LOOM_DTYPE_I32, 1, 1, 1, 1);
		loom_tensor_set_contiguous(&out, LOOM_DTYPE_F32, t->ne[0], 1, 1, 1);
	} else {
		loom_tensor_set_contiguous(&in, LOOM_DTYPE_F32, t->ne[0], 1, 1, 1);
		loom_tensor_set_contiguous(&out, LOOM_DTYPE_F32, t->ne[1], 1, 1, 1);
	}
	if (op == LOOM_OP_MATMUL_ID) {
		loom_tensor_set_contiguous(&ids, LOOM_DTYPE_I32, 1, 1, 1, 1);
		node.src[2] = &ids;
	}
	return loom_backend_supports(&m->rt->backend, &node);
}

/* A norm weight or bias: the file's bytes when they are f32 as the block
 * wants them, else an f32 copy with the contract's norm_weight_offset
 * added (a format that stores Gemma's w where the block multiplies by
 * 1 + w). */
static loom_status bind_vector(loom_model *m, int fmt, loom_role role, const loom_file_tensor *ft, const char *name,
			       loom_tensor *t)
{
	const float offset = loom_role_is_norm(role) ? m->contract->norm_weight_offset[fmt] : 0.0f;
	loom_tensor_set_contiguous(t, LOOM_DTYPE_F32, ft->ne[0], 1, 1, 1);
	if (ft->dtype == LOOM_DTYPE_F32 && offset == 0.0f) {
		t->data = (void *)ft->data;
		return LOOM_OK;
	}
	float *v = NULL;
	loom_status st = loom_weight_vector_f32(m->rt, ft, name, offset, &v);
	if (st != LOOM_OK)
		return st;
	return keep_copy(m, v, (size_t)ft->ne[0] * sizeof(float), t);
}

/* Every expert's matrices, {ne0, ne1, ne2}: shape checked, and the
 * backend asked whether MATMUL_ID takes them. */
static loom_status bind_experts(loom_model *m, loom_role role, const loom_file_tensor *ft, const char *name,
				int64_t ne0, int64_t ne1, int64_t ne2, loom_tensor *t)
{
	if (ft->n_dims != 3 || ft->ne[0] != ne0 || ft->ne[1] != ne1 || ft->ne[2] != ne2)
		return loom_error(LOOM_ERR_BAD_FORMAT,
				  "tensor '%s' has %d dimensions [%" PRId64 ", %" PRId64 ", %" PRId64 "], expected [%" PRId64
				  ", %" PRId64 ", %" PRId64 "] (%s: every expert's matrix)",
				  name, ft->n_dims, ft->ne[0], ft->n_dims > 1 ? ft->ne[1] : 1, ft->n_dims > 2 ? ft->ne[2] : 1,
				  ne0, ne1, ne2, loom_role_name(role));
	loom_tensor_set_contiguous(t, ft->dtype, ne0, ne1, ne2, 1);
	t->data = (void *)ft->data;
	loom_status st = name_tensor(m, t, name);
	if (st != LOOM_OK)
		return st;
	if (!loom_backend_takes(m, LOOM_OP_MATMUL_ID, t)) {
		const char *type = loom_dtype_name(ft->dtype);
		return loom_error(LOOM_ERR_UNSUPPORTED, "tensor '%s' has type %s, which backend %s cannot multiply "
				  "experts by (MATMUL_ID)", name, type ? type : "?", loom_backend_name(&m->rt->backend));
	}
	return LOOM_OK;
}

/* The experts' biases, a table of f32 rows, one an expert: the file's
 * bytes, or an f32 copy of a table of f16 or bf16. */
static loom_status bias_table(loom_model *m, const loom_file_tensor *ft, const char *name, bool transposed,
			      loom_tensor *t)
{
	if (transposed || (ft->dtype != LOOM_DTYPE_F32 && ft->dtype != LOOM_DTYPE_F16 && ft->dtype != LOOM_DTYPE_BF16)) {
		const char *type = loom_dtype_name(ft->dtype);
		return loom_error(LOOM_ERR_UNSUPPORTED, "tensor '%s' (an expert bias table) must be f32, f16 or bf16 as "
				  "stored, not %s%s", name, type ? type : "?", transposed ? " transposed" : "");
	}
	if (ft->dtype == LOOM_DTYPE_F32)
		return LOOM_OK;
	void *bytes = NULL;
	uint64_t n_bytes;
	loom_status st = loom_weight_converted(m->rt, ft, LOOM_DTYPE_F32, &bytes, &n_bytes);
	if (st != LOOM_OK)
		return loom_error_wrap(st, "tensor '%s'", name);
	const char *keep = t->name;
	loom_tensor_set_contiguous(t, LOOM_DTYPE_F32, ft->ne[0], ft->ne[1], 1, 1);
	t->name = keep;
	return keep_copy(m, bytes, (size_t)n_bytes, t);
}

/* A matrix, vector or bias table: shape checked, turned or widened where
 * the block wants it otherwise, and the backend asked whether it can use
 * it. */
static loom_status bind_matrix(loom_model *m, int fmt, loom_role role, const loom_file_tensor *ft, const char *name,
			       int64_t ne0, int64_t ne1, bool transposed, loom_tensor *t)
{
	const int want_dims = ne1 > 0 ? 2 : 1;
	int64_t want0 = transposed ? ne1 : ne0, want1 = transposed ? ne0 : ne1;
	/* A vector may be stored as a one-row matrix (Qwen2-MoE's shared
	 * expert gate, {n_embd, 1} in Hugging Face's checkpoints). */
	const bool one_row = want_dims == 1 && ft->n_dims == 2 && ft->ne[1] == 1;
	if ((ft->n_dims != want_dims && !one_row) || ft->ne[0] != want0 || (ne1 > 0 && ft->ne[1] != want1))
		return loom_error(LOOM_ERR_BAD_FORMAT,
				  "tensor '%s' has shape [%" PRId64 ", %" PRId64 "], expected [%" PRId64 ", %" PRId64 "]%s",
				  name, ft->ne[0], ft->n_dims > 1 ? ft->ne[1] : 1, want0, ne1 > 0 ? want1 : 1,
				  transposed ? " (stored transposed)" : "");
	loom_status st = ne1 <= 0 ? bind_vector(m, fmt, role, ft, name, t) : LOOM_OK;
	if (st == LOOM_OK && ne1 > 0 && transposed) {
		/* A copy with rows and columns swapped: {n_in, n_out}. */
		void *turned;
		if ((st = loom_weight_transposed(ft, name, &turned)) != LOOM_OK)
			return st;
		loom_tensor_set_contiguous(t, ft->dtype, ft->ne[1], ft->ne[0], 1, 1);
		st = keep_copy(m, turned, (size_t)(ft->ne[0] * ft->ne[1]) * (ft->dtype == LOOM_DTYPE_F32 ? 4 : 2), t);
	} else if (st == LOOM_OK && ne1 > 0) {
		loom_tensor_set_contiguous(t, ft->dtype, ft->ne[0], ft->n_dims > 1 ? ft->ne[1] : 1, 1, 1);
		t->data = (void *)ft->data;
	}
	if (st == LOOM_OK)
		st = name_tensor(m, t, name);
	if (st != LOOM_OK || ne1 <= 0)
		return st;
	const char *type = loom_dtype_name(ft->dtype);
	/* The experts' biases are a table of f32 rows, one an expert. */
	if (role == LOOM_ROLE_FFN_GATE_EXPS_B || role == LOOM_ROLE_FFN_UP_EXPS_B || role == LOOM_ROLE_FFN_DOWN_EXPS_B)
		return bias_table(m, ft, name, transposed, t);
	loom_op op = role == LOOM_ROLE_TOKEN_EMBD ? LOOM_OP_GET_ROWS : LOOM_OP_MATMUL;
	if (!loom_backend_takes(m, op, t))
		return loom_error(LOOM_ERR_UNSUPPORTED, "tensor '%s' has type %s, which backend %s cannot %s", name,
				  type ? type : "?", loom_backend_name(&m->rt->backend),
				  op == LOOM_OP_GET_ROWS ? "look rows up in" : "multiply by");
	return LOOM_OK;
}

/* The experts' role in place of a dense FFN role, or LOOM_ROLE_COUNT. */
static loom_role experts_role(loom_role dense)
{
	switch (dense) {
	case LOOM_ROLE_FFN_GATE: return LOOM_ROLE_FFN_GATE_EXPS;
	case LOOM_ROLE_FFN_UP: return LOOM_ROLE_FFN_UP_EXPS;
	case LOOM_ROLE_FFN_DOWN: return LOOM_ROLE_FFN_DOWN_EXPS;
	default: return LOOM_ROLE_COUNT;
	}
}

/* A dense FFN tensor that layer il lacks, named: where the file has that
 * layer's experts instead, the message names the hyperparameter that made
 * the layer dense (no expert count, or the leading dense layers reaching
 * it), since that, not the tensor, is what is wrong with the file. */
static loom_status missing_tensor(const loom_model *m, int fmt, loom_role role, int il, const char *name)
{
	char experts[256], key[256] = "";
	const loom_role exps = experts_role(role);
	if (il < 0 || exps == LOOM_ROLE_COUNT || !m->contract->experts ||
	    loom_model_find_role(m, fmt, exps, il, experts, sizeof(experts)) == NULL)
		return loom_error(LOOM_ERR_BAD_FORMAT, "tensor '%s' (%s) is missing", name, loom_role_name(role));
	const loom_hparam why = m->hp.n_expert == 0 ? LOOM_HP_N_EXPERT : LOOM_HP_N_DENSE_LAYERS;
	(void)loom_model_hparam_value(m, fmt, why, key, sizeof(key));
	const char *said = key[0] != '\0' ? key : loom_hparam_name(why);
	if (why == LOOM_HP_N_EXPERT)
		return loom_error(LOOM_ERR_BAD_FORMAT, "tensor '%s' (%s) is missing: the file has layer %d's experts "
				  "('%s') but no expert count ('%s')", name, loom_role_name(role), il, experts, said);
	return loom_error(LOOM_ERR_BAD_FORMAT, "tensor '%s' (%s) is missing: the file has layer %d's experts ('%s'), "
			  "but '%s' = %" PRId64 " makes the layer dense", name, loom_role_name(role), il, experts, said,
			  m->hp.n_dense_layers);
}

/* Binds role (of layer il, or -1) to its tensor, checking shape and type.
 * A missing optional tensor leaves t zeroed. */
static loom_status bind(loom_model *m, int fmt, loom_role role, int il, int64_t ne0, int64_t ne1, int64_t ne2,
			bool optional, loom_tensor *t)
{
	char name[256];
	const bool transposed = m->contract->transposed[fmt][role];
	const loom_file_tensor *ft;
	loom_file_tensor made;
	void *owned;
	memset(t, 0, sizeof(*t));
	loom_status st = loom_model_role_source(m, fmt, role, il, ne0, ne1, ne2, name, sizeof(name), &made, &owned, &ft);
	if (st != LOOM_OK)
		return st;
	if (ft == NULL) {
		if (optional)
			return LOOM_OK;
		return missing_tensor(m, fmt, role, il, name);
	}
	if (ne2 > 0) {
		if ((st = bind_experts(m, role, ft, name, ne0, ne1, ne2, t)) != LOOM_OK || owned == NULL) {
			free(owned);
			return st;
		}
		return keep_copy(m, owned, ft->n_bytes, t);
	}
	st = bind_matrix(m, fmt, role, ft, name, ne0, ne1, transposed, t);
	if (st == LOOM_OK && owned != NULL && t->data == ft->data)
		return keep_copy(m, owned, ft->n_bytes, t);
	free(owned);
	return st;
}

/* Binds role if the contract's choices use it; leaves t zeroed if not. */
static loom_status bind_used(loom_model *m, int fmt, loom_role role, int il, int64_t ne0, int64_t ne1,
			     int64_t ne2, loom_tensor *t)
{
	memset(t, 0, sizeof(*t));
	if (!loom_contract_uses_role(m->contract, (loom_contract_format)fmt, role))
		return LOOM_OK;
	if (m->contract->tensor_names[fmt][role] == NULL && loom_role_is_dense_ffn(role))
		return loom_error(LOOM_ERR_BAD_FORMAT, "layer %d has a dense FFN (the model has no experts there), which "
				  "contract %s does not name: it describes a mixture of experts", il, m->contract->name);
	if (m->contract->tensor_names[fmt][role] == NULL && loom_role_is_moe(role))
		return loom_error(LOOM_ERR_UNSUPPORTED, "contract %s names no %s tensor for %s files: their experts are not "
				  "supported", m->contract->name, loom_role_name(role),
				  loom_contract_format_name((loom_contract_format)fmt));
	return bind(m, fmt, role, il, ne0, ne1, ne2, false, t);
}

/* Rows [row, row + n) of matrix w (or elements of vector w) as a tensor of
 * their own: fused QKV split into q, k and v. */
static loom_tensor row_range(const loom_tensor *w, int64_t row, int64_t n)
{
	loom_tensor t = *w;
	bool matrix = w->ne[1] > 1;

	if (matrix) {
		t.ne[1] = n;
		t.data = (char *)w->data + (size_t)row * w->nb[1];
		t.nb[2] = t.nb[3] = t.nb[1] * (size_t)n;
	} else {
		t.ne[0] = n;
		t.data = (char *)w->data + (size_t)row * sizeof(float);
		t.nb[1] = t.nb[2] = t.nb[3] = (size_t)n * sizeof(float);
	}
	return t;
}

int loom_layer_slots(const loom_model *m, int il, loom_layer *l, loom_weight_slot slots[LOOM_ROLE_COUNT])
{
	const loom_hparams *hp = &m->hp;
	const int64_t X = hp->n_expert, F = hp->n_ff_exp;
	const int64_t q_dim = hp->n_head * hp->head_dim, kv_dim = hp->n_head_kv * hp->head_dim;
	const int64_t E = hp->n_embd;
	const bool full_qk = m->contract->qk_norm == LOOM_QK_NORM_FULL;
	/* A fused gate and up: one matrix of both's rows, or the experts'
	 * gate and up as planes, twice as many experts (role_source.h), both
	 * split in bind_layer. */
	const int64_t up_rows = m->contract->gate_up[m->fmt] == LOOM_QKV_FUSED ? 2 * hp->n_ff : hp->n_ff;
	const int64_t up_planes = m->contract->experts_gate_up[m->fmt] == LOOM_GATE_UP_SEPARATE ? 1 : 2;
	const loom_weight_slot table[] = {
		{LOOM_ROLE_ATTN_NORM, E, 0, 0, &l->attn_norm},
		{LOOM_ROLE_ATTN_NORM_B, E, 0, 0, &l->attn_norm_b},
		{LOOM_ROLE_ATTN_Q, E, q_dim, 0, &l->attn_q},
		{LOOM_ROLE_ATTN_Q_B, q_dim, 0, 0, &l->attn_q_b},
		{LOOM_ROLE_ATTN_K, E, kv_dim, 0, &l->attn_k},
		{LOOM_ROLE_ATTN_K_B, kv_dim, 0, 0, &l->attn_k_b},
		{LOOM_ROLE_ATTN_V, E, kv_dim, 0, &l->attn_v},
		{LOOM_ROLE_ATTN_V_B, kv_dim, 0, 0, &l->attn_v_b},
		{LOOM_ROLE_ATTN_Q_NORM, full_qk ? q_dim : hp->head_dim, 0, 0, &l->attn_q_norm},
		{LOOM_ROLE_ATTN_K_NORM, full_qk ? kv_dim : hp->head_dim, 0, 0, &l->attn_k_norm},
		{LOOM_ROLE_ATTN_OUTPUT, q_dim, E, 0, &l->attn_output},
		{LOOM_ROLE_ATTN_OUTPUT_B, E, 0, 0, &l->attn_output_b},
		{LOOM_ROLE_FFN_NORM, E, 0, 0, &l->ffn_norm},
		{LOOM_ROLE_FFN_NORM_B, E, 0, 0, &l->ffn_norm_b},
		{LOOM_ROLE_FFN_GATE, E, hp->n_ff, 0, &l->ffn_gate},
		{LOOM_ROLE_FFN_GATE_B, hp->n_ff, 0, 0, &l->ffn_gate_b},
		{LOOM_ROLE_FFN_UP, E, up_rows, 0, &l->ffn_up},
		{LOOM_ROLE_FFN_UP_B, hp->n_ff, 0, 0, &l->ffn_up_b},
		{LOOM_ROLE_FFN_DOWN, hp->n_ff, E, 0, &l->ffn_down},
		{LOOM_ROLE_FFN_DOWN_B, E, 0, 0, &l->ffn_down_b},
		{LOOM_ROLE_ATTN_POST_NORM, E, 0, 0, &l->attn_post_norm},
		{LOOM_ROLE_FFN_POST_NORM, E, 0, 0, &l->ffn_post_norm},
		{LOOM_ROLE_ATTN_SINKS, hp->n_head, 0, 0, &l->attn_sinks},
		{LOOM_ROLE_FFN_GATE_INP, E, X, 0, &l->ffn_gate_inp},
		{LOOM_ROLE_FFN_GATE_EXPS, E, F, X, &l->ffn_gate_exps},
		{LOOM_ROLE_FFN_UP_EXPS, E, F, up_planes * X, &l->ffn_up_exps},
		{LOOM_ROLE_FFN_DOWN_EXPS, F, E, X, &l->ffn_down_exps},
		{LOOM_ROLE_FFN_GATE_INP_SHEXP, E, 0, 0, &l->ffn_gate_inp_shexp},
		{LOOM_ROLE_FFN_GATE_SHEXP, E, hp->n_ff_shared, 0, &l->ffn_gate_shexp},
		{LOOM_ROLE_FFN_UP_SHEXP, E, hp->n_ff_shared, 0, &l->ffn_up_shexp},
		{LOOM_ROLE_FFN_DOWN_SHEXP, hp->n_ff_shared, E, 0, &l->ffn_down_shexp},
		{LOOM_ROLE_FFN_GATE_INP_B, X, 0, 0, &l->ffn_gate_inp_b},
		{LOOM_ROLE_FFN_GATE_EXPS_B, F, X, 0, &l->ffn_gate_exps_b},
		{LOOM_ROLE_FFN_UP_EXPS_B, F, up_planes * X, 0, &l->ffn_up_exps_b},
		{LOOM_ROLE_FFN_DOWN_EXPS_B, E, X, 0, &l->ffn_down_exps_b},
		{LOOM_ROLE_FFN_EXP_PROBS_B, X, 0, 0, &l->ffn_exp_probs_b},
	};
	const bool moe = loom_layer_moe(hp, il);
	int n = 0;
	for (size_t i = 0; i < sizeof(table) / sizeof(table[0]); i++) {
		loom_role r = table[i].role;
		if (moe ? !loom_role_is_dense_ffn(r) : !loom_role_is_moe(r))
			slots[n++] = table[i];
	}
	return n;
}

/* Experts [first, first + n) of a stack {n_in, n_out, n_expert}, a stack
 * of their own. */
static loom_tensor expert_range(const loom_tensor *w, int64_t first, int64_t n)
{
	loom_tensor t = *w;
	t.ne[2] = n;
	t.data = (char *)w->data + (size_t)first * w->nb[2];
	t.nb[3] = t.nb[2] * (size_t)n;
	return t;
}

static loom_status bind_layer(loom_model *m, int fmt, int il, loom_layer *l)
{
	const loom_hparams *hp = &m->hp;
	const int64_t q_dim = hp->n_head * hp->head_dim, kv_dim = hp->n_head_kv * hp->head_dim;
	loom_weight_slot slots[LOOM_ROLE_COUNT];
	const int n = loom_layer_slots(m, il, l, slots);
	loom_status st;
	for (int i = 0; i < n; i++)
		if ((st = bind_used(m, fmt, slots[i].role, il, slots[i].ne0, slots[i].ne1, slots[i].ne2, slots[i].t)) !=
		    LOOM_OK)
			return st;
	if (m->contract->gate_up[fmt] == LOOM_QKV_FUSED && l->ffn_up.data != NULL) {
		/* One matrix whose rows are the gate's, then up's. */
		loom_tensor both = l->ffn_up;
		l->ffn_gate = row_range(&both, 0, hp->n_ff);
		l->ffn_up = row_range(&both, hp->n_ff, hp->n_ff);
	}
	if (m->contract->experts_gate_up[fmt] != LOOM_GATE_UP_SEPARATE && l->ffn_up_exps.data != NULL) {
		/* Planes: every expert's gate, then every expert's up; and their
		 * bias tables' rows the same way. */
		loom_tensor both = l->ffn_up_exps;
		l->ffn_gate_exps = expert_range(&both, 0, hp->n_expert);
		l->ffn_up_exps = expert_range(&both, hp->n_expert, hp->n_expert);
		if (l->ffn_up_exps_b.data != NULL) {
			loom_tensor biases = l->ffn_up_exps_b;
			l->ffn_gate_exps_b = row_range(&biases, 0, hp->n_expert);
			l->ffn_up_exps_b = row_range(&biases, hp->n_expert, hp->n_expert);
		}
	}
	if (m->contract->qkv[fmt] != LOOM_QKV_FUSED)
		return LOOM_OK;
	/* One matrix whose rows are q's, then k's, then v's. */
	loom_tensor qkv, qkv_b;
	if ((st = bind_used(m, fmt, LOOM_ROLE_ATTN_QKV, il, hp->n_embd, q_dim + 2 * kv_dim, 0, &qkv)) != LOOM_OK ||
	    (st = bind_used(m, fmt, LOOM_ROLE_ATTN_QKV_B, il, q_dim + 2 * kv_dim, 0, 0, &qkv_b)) != LOOM_OK)
		return st;
	l->attn_q = row_range(&qkv, 0, q_dim);
	l->attn_k = row_range(&qkv, q_dim, kv_dim);
	l->attn_v = row_range(&qkv, q_dim + kv_dim, kv_dim);
	if (qkv_b.data != NULL) {
		l->attn_q_b = row_range(&qkv_b, 0, q_dim);
		l->attn_k_b = row_range(&qkv_b, q_dim, kv_dim);
		l->attn_v_b = row_range(&qkv_b, q_dim + kv_dim, kv_dim);
	}
	return LOOM_OK;
}

/* The head, tied to the token embedding where the contract says or the
 * file has none. */
static loom_status bind_output(loom_model *m, int fmt)
{
	const loom_hparams *hp = &m->hp;
	if (m->contract->tied == LOOM_TIED_ALWAYS) {
		m->output = m->token_embd;
	} else {
		bool optional = m->contract->tied == LOOM_TIED_IF_MISSING;
		loom_status st = bind(m, fmt, LOOM_ROLE_OUTPUT, -1, hp->n_embd, hp->n_vocab, 0, optional, &m->output);
		if (st != LOOM_OK)
			return st;
		if (m->output.data == NULL)
			m->output = m->token_embd;
	}
	if (m->output.data == m->token_embd.data && !loom_backend_takes(m, LOOM_OP_MATMUL, &m->output))
		return loom_error(LOOM_ERR_UNSUPPORTED, "the tied output head (%s) has a type backend %s cannot multiply by",
				  m->token_embd.name, loom_backend_name(&m->rt->backend));
	return LOOM_OK;
}

/* Frequency factors the file gives as parameters, not as a tensor: Llama
 * 3's or YaRN's without truncation (rope_freqs), LongRoPE's lists. */
static loom_status bind_factor_list(loom_model *m, const float *factors, const char *name, loom_tensor *t)
{
	const size_t size = (size_t)(m->hp.n_rot / 2) * sizeof(float);
	float *copy = malloc(size ? size : 1);
	if (copy == NULL)
		return loom_error(LOOM_ERR_NO_MEMORY, "out of memory");
	memcpy(copy, factors, size);
	loom_tensor_set_contiguous(t, LOOM_DTYPE_F32, m->hp.n_rot / 2, 1, 1, 1);
	t->name = name;
	return keep_copy(m, copy, size, t);
}

loom_status loom_model_bind(loom_model *m)
{
	const int fmt = m->fmt;
	const loom_hparams *hp = &m->hp;
	loom_status st;

	char name[256];
	const loom_file_tensor *emb = loom_model_find_role(m, fmt, LOOM_ROLE_TOKEN_EMBD, -1, name, sizeof(name));
	if (emb == NULL)
		return loom_error(LOOM_ERR_BAD_FORMAT, "tensor '%s' (token_embd) is missing", name);
	m->hp.n_vocab = emb->n_dims != 2 ? 0 : m->contract->transposed[fmt][LOOM_ROLE_TOKEN_EMBD] ? emb->ne[0] : emb->ne[1];
	if (m->hp.n_vocab < loom_vocab_n_tokens(m->vocab))
		return loom_error(LOOM_ERR_BAD_FORMAT, "tensor '%s' has %" PRId64 " rows but the vocabulary has %d tokens",
				  name, m->hp.n_vocab, loom_vocab_n_tokens(m->vocab));

	if ((st = bind(m, fmt, LOOM_ROLE_TOKEN_EMBD, -1, hp->n_embd, hp->n_vocab, 0, false, &m->token_embd)) != LOOM_OK ||
	    (st = bind_used(m, fmt, LOOM_ROLE_POS_EMBD, -1, hp->n_embd, hp->n_ctx_train, 0, &m->pos_embd)) != LOOM_OK ||
	    (st = bind(m, fmt, LOOM_ROLE_OUTPUT_NORM, -1, hp->n_embd, 0, 0, false, &m->output_norm)) != LOOM_OK ||
	    (st = bind_used(m, fmt, LOOM_ROLE_OUTPUT_NORM_B, -1, hp->n_embd, 0, 0, &m->output_norm_b)) != LOOM_OK ||
	    (st = bind_used(m, fmt, LOOM_ROLE_OUTPUT_B, -1, hp->n_vocab, 0, 0, &m->output_b)) != LOOM_OK)
		return st;
	const loom_role factor_roles[] = {LOOM_ROLE_ROPE_FREQS, LOOM_ROLE_ROPE_FACTORS_LONG, LOOM_ROLE_ROPE_FACTORS_SHORT};
	loom_tensor *factors[] = {&m->rope_freqs, &m->rope_factors_long, &m->rope_factors_short};
	for (int i = 0; i < 3; i++)
		if (m->contract->tensor_names[fmt][factor_roles[i]] != NULL &&
		    (st = bind(m, fmt, factor_roles[i], -1, hp->n_rot / 2, 0, 0, true, factors[i])) != LOOM_OK)
			return st;
	if (m->rope_freqs.data == NULL && hp->rope_freq_factors != NULL &&
	    (st = bind_factor_list(m, hp->rope_freq_factors, "rope_freqs (from the file's RoPE scaling parameters)",
					&m->rope_freqs)) != LOOM_OK)
		return st;
	if (m->rope_factors_long.data == NULL && hp->rope_long_factors != NULL &&
	    ((st = bind_factor_list(m, hp->rope_long_factors, "rope_factors_long (from the file's list)",
				       &m->rope_factors_long)) != LOOM_OK ||
	     (st = bind_factor_list(m, hp->rope_short_factors, "rope_factors_short (from the file's list)",
				       &m->rope_factors_short)) != LOOM_OK))
		return st;
	if (m->pos_embd.data != NULL && !loom_backend_takes(m, LOOM_OP_GET_ROWS, &m->pos_embd))
		return loom_error(LOOM_ERR_UNSUPPORTED, "the position embeddings have a type backend %s cannot read",
				  loom_backend_name(&m->rt->backend));
	if ((st = bind_output(m, fmt)) != LOOM_OK)
		return st;

	m->layers = calloc((size_t)hp->n_layer, sizeof(loom_layer));
	if (m->layers == NULL)
		return loom_error(LOOM_ERR_NO_MEMORY, "out of memory");
	for (int il = 0; il < hp->n_layer; il++)
		if ((st = bind_layer(m, fmt, il, &m->layers[il])) != LOOM_OK)
			return st;
	return LOOM_OK;
}
