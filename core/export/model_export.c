/* model_export.c - a model's tensors and hyperparameters under its
 * contract's GGUF names, reshaped where the file's format differs. */
#include "export/model_export.h"

#include "model/meta.h"
#include "model/naming.h"
#include "model/role_source.h"
#include "model/weight_adapt.h"
#include "runtime/error.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A tensor on its way into the export: a vector of ne0 elements
 * (n_dims 1), ne1 rows of ne0 (n_dims 2), or ne2 experts' matrices of
 * ne1 rows (n_dims 3). */
typedef struct piece {
	loom_dtype dtype;
	int n_dims;
	int64_t ne0, ne1, ne2;
	const void *data;
} piece;

static int64_t piece_rows(const piece *p)
{
	return p->n_dims == 3 ? p->ne1 * p->ne2 : p->n_dims == 2 ? p->ne1 : p->ne0;
}

/* Bytes of a row (of an element, for a vector). */
static size_t piece_row_size(const piece *p)
{
	return p->n_dims >= 2 ? loom_dtype_row_bytes(p->dtype, p->ne0) : loom_dtype_row_bytes(p->dtype, 1);
}

static bool push(void ***list, size_t *n, size_t *cap, void *p)
{
	if (*n == *cap) {
		size_t c = *cap ? 2 * *cap : 64;
		void **l = realloc(*list, c * sizeof(*l));
		if (l == NULL)
			return false;
		*list = l;
		*cap = c;
	}
	(*list)[(*n)++] = p;
	return true;
}

static void *own_block(loom_export *e, size_t size)
{
	void *p = malloc(size ? size : 1);
	if (p != NULL && !push(&e->blocks, &e->n_blocks, &e->cap_blocks, p)) {
		free(p);
		p = NULL;
	}
	if (p == NULL)
		loom_error(LOOM_ERR_NO_MEMORY, "out of memory");
	return p;
}

static char *own_string(loom_export *e, const char *s)
{
	char *p = strdup(s);
	if (p != NULL && !push((void ***)&e->strings, &e->n_strings, &e->cap_strings, p)) {
		free(p);
		p = NULL;
	}
	if (p == NULL)
		loom_error(LOOM_ERR_NO_MEMORY, "out of memory");
	return p;
}

/* ---- reshaping ---------------------------------------------------------- */

/* The rows of each head reordered between RoPE's two pairings: neox
 * rotates rows (j, j + n_rot/2), normal rows (2j, 2j + 1). Rows past
 * n_rot do not rotate and stay. */
static void reorder_heads(char *dst, const char *src, int64_t n_heads, int64_t head_dim, int64_t n_rot,
			  size_t row, bool to_normal)
{
	const int64_t half = n_rot / 2;
	for (int64_t h = 0; h < n_heads; h++) {
		const char *s = src + (size_t)(h * head_dim) * row;
		char *d = dst + (size_t)(h * head_dim) * row;
		for (int64_t j = 0; j < half; j++) {
			size_t a = (size_t)(2 * j) * row, b = (size_t)(2 * j + 1) * row;
			size_t x = (size_t)j * row, y = (size_t)(half + j) * row;
			if (to_normal) {
				memcpy(d + a, s + x, row);
				memcpy(d + b, s + y, row);
			} else {
				memcpy(d + x, s + a, row);
				memcpy(d + y, s + b, row);
			}
		}
		memcpy(d + (size_t)n_rot * row, s + (size_t)n_rot * row, (size_t)(head_dim - n_rot) * row);
	}
}

/* p's rows from first on, n_heads heads of them, in the export's RoPE
 * order: a copy of p with those rows reordered. */
static loom_status reorder_rope_rows(loom_export *e, const loom_model *m, piece *p, int64_t first, int64_t n_heads)
{
	const int to = m->contract->rope_style[LOOM_CFMT_GGUF];
	if (m->contract->positions != LOOM_POSITIONS_ROPE || m->rope_style == to)
		return LOOM_OK;
	const size_t row = piece_row_size(p), total = (size_t)piece_rows(p) * row;
	char *copy = own_block(e, total);
	if (copy == NULL)
		return LOOM_ERR_NO_MEMORY;
	memcpy(copy, p->data, total);
	reorder_heads(copy + (size_t)first * row, (const char *)p->data + (size_t)first * row, n_heads, m->hp.head_dim,
		      m->hp.n_rot, row, to == LOOM_ROPE_NORMAL);
	p->data = copy;
	return LOOM_OK;
}

/* The rows of a, b and c, one after the other. */
static loom_status concat_rows(loom_export *e, const piece parts[3], piece *out)
{
	size_t sizes[3], total = 0;
	for (int i = 0; i < 3; i++) {
		if (parts[i].dtype != parts[0].dtype || parts[i].n_dims != parts[0].n_dims ||
		    (parts[0].n_dims == 2 && parts[i].ne0 != parts[0].ne0))
			return loom_error(LOOM_ERR_BAD_FORMAT, "q, k and v differ in type or width and cannot be fused");
		sizes[i] = (size_t)piece_rows(&parts[i]) * piece_row_size(&parts[i]);
		total += sizes[i];
	}
	char *dst = own_block(e, total);
	if (dst == NULL)
		return LOOM_ERR_NO_MEMORY;
	*out = parts[0];
	out->data = dst;
	for (int i = 0; i < 3; i++) {
		memcpy(dst, parts[i].data, sizes[i]);
		dst += sizes[i];
	}
	if (out->n_dims == 2)
		out->ne1 = piece_rows(&parts[0]) + piece_rows(&parts[1]) + piece_rows(&parts[2]);
	else
		out->ne0 = piece_rows(&parts[0]) + piece_rows(&parts[1]) + piece_rows(&parts[2]);
	return LOOM_OK;
}

/* ---- tensors by role ---------------------------------------------------- */

/* An expert bias table of f16 or bf16 as f32, as GGUF files keep them. */
static loom_status f32_table(loom_export *e, loom_model *m, const loom_file_tensor *ft, const char *name, piece *p)
{
	void *bytes = NULL;
	uint64_t n_bytes;
	loom_status st = loom_weight_converted(m->rt, ft, LOOM_DTYPE_F32, &bytes, &n_bytes);
	if (st != LOOM_OK)
		return loom_error_wrap(st, "tensor '%s'", name);
	if (!push(&e->blocks, &e->n_blocks, &e->cap_blocks, bytes)) {
		free(bytes);
		return loom_error(LOOM_ERR_NO_MEMORY, "out of memory");
	}
	p->data = bytes;
	p->dtype = LOOM_DTYPE_F32;
	return LOOM_OK;
}

/* The file's tensor for role as stored, turned {n_in, n_out} and, for a
 * vector or an expert bias table, f32. *found is false when the file
 * lacks it. */
static loom_status source_piece(loom_export *e, loom_model *m, loom_role role, int il, piece *p, bool *found)
{
	char name[256];
	/* What bind reads, read again: experts stacked, MXFP4 put together,
	 * a fused gate and up as planes. */
	const int64_t E = m->hp.n_embd, F = m->hp.n_ff_exp;
	const bool down = role == LOOM_ROLE_FFN_DOWN_EXPS;
	const loom_file_tensor *ft;
	loom_file_tensor made;
	void *owned;
	loom_status st = loom_model_role_source(m, m->fmt, role, il, down ? F : E, down ? E : F, m->hp.n_expert, name,
						sizeof(name), &made, &owned, &ft);
	if (st != LOOM_OK)
		return st;
	if (owned != NULL && !push(&e->blocks, &e->n_blocks, &e->cap_blocks, owned)) {
		free(owned);
		return loom_error(LOOM_ERR_NO_MEMORY, "out of memory");
	}
	*found = ft != NULL;
	if (ft == NULL)
		return LOOM_OK;
	const bool table = role == LOOM_ROLE_FFN_GATE_EXPS_B || role == LOOM_ROLE_FFN_UP_EXPS_B ||
			   role == LOOM_ROLE_FFN_DOWN_EXPS_B;
	const int want = loom_role_is_experts(role) ? 3 : loom_role_is_matrix(role) || table ? 2 : 1;
	const bool one_row = want == 1 && ft->n_dims == 2 && ft->ne[1] == 1; /* a vector as a one-row matrix */
	if (ft->n_dims != want && !one_row)
		return loom_error(LOOM_ERR_BAD_FORMAT, "tensor '%s' has %d dimensions, expected %d", name, ft->n_dims, want);
	*p = (piece){.dtype = ft->dtype, .n_dims = want, .ne0 = ft->ne[0], .ne1 = ft->ne[1], .ne2 = ft->ne[2],
		     .data = ft->data};
	if (table && ft->dtype != LOOM_DTYPE_F32)
		return f32_table(e, m, ft, name, p);
	if (want == 3 || table || (want == 2 && !m->contract->transposed[m->fmt][role]))
		return LOOM_OK;
	/* A norm weight moves from the file's offset to GGUF's (Gemma's w
	 * becomes 1 + w). */
	const float *offsets = m->contract->norm_weight_offset;
	const float shift = loom_role_is_norm(role) ? offsets[m->fmt] - offsets[LOOM_CFMT_GGUF] : 0.0f;
	if (want == 1 && ft->dtype == LOOM_DTYPE_F32 && shift == 0.0f)
		return LOOM_OK;
	void *bytes = NULL;
	float *vector = NULL;
	st = want == 2 ? loom_weight_transposed(ft, name, &bytes) : loom_weight_vector_f32(m->rt, ft, name, shift, &vector);
	if (st != LOOM_OK)
		return st;
	if (vector != NULL)
		bytes = vector;
	if (!push(&e->blocks, &e->n_blocks, &e->cap_blocks, bytes)) {
		free(bytes);
		return loom_error(LOOM_ERR_NO_MEMORY, "out of memory");
	}
	p->data = bytes;
	if (want == 2) {
		p->ne0 = ft->ne[1];
		p->ne1 = ft->ne[0];
	} else {
		p->dtype = LOOM_DTYPE_F32;
	}
	return LOOM_OK;
}

static loom_role qkv_part(loom_role role, int i)
{
	static const loom_role w[3] = {LOOM_ROLE_ATTN_Q, LOOM_ROLE_ATTN_K, LOOM_ROLE_ATTN_V};
	static const loom_role b[3] = {LOOM_ROLE_ATTN_Q_B, LOOM_ROLE_ATTN_K_B, LOOM_ROLE_ATTN_V_B};
	return role == LOOM_ROLE_ATTN_QKV ? w[i] : b[i];
}

/* Which of q (0), k (1), v (2) role is, or -1; *bias says whether it is
 * a bias. */
static int qkv_index(loom_role role, bool *bias)
{
	for (int i = 0; i < 3; i++) {
		*bias = role == qkv_part(LOOM_ROLE_ATTN_QKV_B, i);
		if (role == qkv_part(LOOM_ROLE_ATTN_QKV, i) || *bias)
			return i;
	}
	return -1;
}

/* One plane of the experts' gate and up as role_source.h gives them:
 * every expert's gate (0) or up (1) matrices, or their bias tables' rows. */
static void gate_up_plane(piece *p, int plane, int64_t n_expert)
{
	const size_t rb = piece_row_size(p);
	if (p->n_dims == 3) {
		p->data = (const char *)p->data + (size_t)(plane * n_expert * p->ne1) * rb;
		p->ne2 = n_expert;
	} else {
		p->data = (const char *)p->data + (size_t)(plane * n_expert) * rb;
		p->ne1 = n_expert;
	}
}

/* role's tensor as the export's GGUF section wants it. */
static loom_status role_piece(loom_export *e, loom_model *m, loom_role role, int il, piece *p, bool *found)
{
	const loom_contract *c = m->contract;
	const loom_contract_format src = (loom_contract_format)m->fmt;
	const int64_t q_rows = m->hp.n_head * m->hp.head_dim, kv_rows = m->hp.n_head_kv * m->hp.head_dim;
	bool bias;
	int part = qkv_index(role, &bias);
	loom_status st;

	if (role == LOOM_ROLE_ATTN_QKV || role == LOOM_ROLE_ATTN_QKV_B) {
		if (loom_contract_uses_role(c, src, role)) {
			if ((st = source_piece(e, m, role, il, p, found)) != LOOM_OK || !*found)
				return st;
			if ((st = reorder_rope_rows(e, m, p, 0, m->hp.n_head)) != LOOM_OK)
				return st;
			return reorder_rope_rows(e, m, p, q_rows, m->hp.n_head_kv);
		}
		/* Fused here, apart in the file. */
		piece parts[3];
		for (int i = 0; i < 3; i++)
			if ((st = role_piece(e, m, qkv_part(role, i), il, &parts[i], found)) != LOOM_OK || !*found)
				return st;
		return concat_rows(e, parts, p);
	}
	const bool gate = role == LOOM_ROLE_FFN_GATE_EXPS || role == LOOM_ROLE_FFN_GATE_EXPS_B;
	const bool bias_table = role == LOOM_ROLE_FFN_GATE_EXPS_B || role == LOOM_ROLE_FFN_UP_EXPS_B;
	if ((gate || role == LOOM_ROLE_FFN_UP_EXPS || bias_table) &&
	    c->experts_gate_up[src] != c->experts_gate_up[LOOM_CFMT_GGUF]) {
		/* Apart here, each expert's gate and up one matrix in the file. */
		if (c->experts_gate_up[src] == LOOM_GATE_UP_SEPARATE)
			return loom_error(LOOM_ERR_UNSUPPORTED, "contract %s keeps the experts' gate and up apart in %s files; "
					  "GGUF files that fuse them are not written", c->name, loom_contract_format_name(src));
		loom_role both = bias_table ? LOOM_ROLE_FFN_UP_EXPS_B : LOOM_ROLE_FFN_UP_EXPS;
		if ((st = source_piece(e, m, both, il, p, found)) != LOOM_OK || !*found)
			return st;
		gate_up_plane(p, gate ? 0 : 1, m->hp.n_expert);
		return LOOM_OK;
	}
	if (part >= 0 && !loom_contract_uses_role(c, src, role)) {
		/* Apart here, fused in the file: a range of its rows. */
		loom_role fused = bias ? LOOM_ROLE_ATTN_QKV_B : LOOM_ROLE_ATTN_QKV;
		if ((st = source_piece(e, m, fused, il, p, found)) != LOOM_OK || !*found)
			return st;
		int64_t first = part == 0 ? 0 : part == 1 ? q_rows : q_rows + kv_rows;
		int64_t n = part == 0 ? q_rows : kv_rows;
		if (first + n > piece_rows(p))
			return loom_error(LOOM_ERR_BAD_FORMAT, "layer %d's fused qkv has %" PRId64 " rows, expected %" PRId64, il,
					  piece_rows(p), q_rows + 2 * kv_rows);
		p->data = (const char *)p->data + (size_t)first * piece_row_size(p);
		if (p->n_dims == 2)
			p->ne1 = n;
		else
			p->ne0 = n;
	} else if ((st = source_piece(e, m, role, il, p, found)) != LOOM_OK || !*found) {
		return st;
	}
	if (part == 0 || part == 1)
		return reorder_rope_rows(e, m, p, 0, part == 0 ? m->hp.n_head : m->hp.n_head_kv);
	return LOOM_OK;
}

static loom_status add_tensor(loom_export *e, const char *name, loom_role role, const piece *p)
{
	char *owned = own_string(e, name);
	if (owned == NULL)
		return LOOM_ERR_NO_MEMORY;
	e->roles[e->file.n_tensors] = role;
	loom_file_tensor *t = &e->tensors[e->file.n_tensors++];
	*t = (loom_file_tensor){.name = {strlen(owned), owned}, .dtype = p->dtype, .n_dims = p->n_dims,
				.ne = {p->ne0, p->n_dims >= 2 ? p->ne1 : 1, p->n_dims == 3 ? p->ne2 : 1, 1},
				.data = p->data};
	t->n_bytes = (uint64_t)piece_rows(p) * piece_row_size(p);
	return LOOM_OK;
}

static loom_status export_role(loom_export *e, loom_model *m, loom_role role, int il)
{
	const loom_contract *c = m->contract;
	if (!loom_contract_uses_role(c, LOOM_CFMT_GGUF, role))
		return LOOM_OK;
	loom_spellings names = c->tensor_names[LOOM_CFMT_GGUF][role];
	bool optional = loom_role_is_optional(role) || (role == LOOM_ROLE_OUTPUT && c->tied != LOOM_TIED_NEVER);
	if (names == NULL) {
		if (optional)
			return LOOM_OK;
		return loom_error(LOOM_ERR_CONTRACT, "%s gives no GGUF name for %s", c->path, loom_role_name(role));
	}
	char name[256], layer[16];
	snprintf(layer, sizeof(layer), "%d", il);
	loom_contract_expand(name, sizeof(name), names[0], "{i}", layer);
	piece p;
	bool found;
	loom_status st = role_piece(e, m, role, il, &p, &found);
	if (st != LOOM_OK)
		return loom_error_wrap(st, "%s", name);
	/* Factors the file gave as parameters: GGUF keeps Llama 3's and
	 * LongRoPE's as these tensors (YaRN's stays its keys). */
	const float *listed = role == LOOM_ROLE_ROPE_FREQS && m->hp.yarn_ext_factor == 0.0f ? m->hp.rope_freq_factors
			      : role == LOOM_ROLE_ROPE_FACTORS_LONG			       ? m->hp.rope_long_factors
			      : role == LOOM_ROLE_ROPE_FACTORS_SHORT			       ? m->hp.rope_short_factors
											       : NULL;
	if (!found && listed != NULL) {
		p = (piece){.dtype = LOOM_DTYPE_F32, .n_dims = 1, .ne0 = m->hp.n_rot / 2, .data = listed};
		found = true;
	}
	if (!found) {
		if (optional)
			return LOOM_OK;
		char src[256];
		loom_model_find_role(m, m->fmt, role, il, src, sizeof(src));
		return loom_error(LOOM_ERR_BAD_FORMAT, "tensor '%s' (%s) is missing", src, loom_role_name(role));
	}
	return add_tensor(e, name, role, &p);
}

/* ---- metadata ------------------------------------------------------------ */

static loom_status add_meta(loom_export *e, const char *key, loom_meta_value v)
{
	char *k = own_string(e, key);
	if (k == NULL)
		return LOOM_ERR_NO_MEMORY;
	e->meta[e->file.n_meta++] = (loom_meta_kv){.key = {strlen(k), k}, .value = v};
	return LOOM_OK;
}

/* hp under the GGUF key the contract gives it, if any, as llama.cpp
 * types it: u32 for counts, f32 for the rest. */
/* The file's architecture: the contract's name, or its name for a model
 * with experts. */
static const char *export_architecture(const loom_model *m)
{
	return m->hp.n_expert > 0 && m->contract->moe_architecture != NULL ? m->contract->moe_architecture
									   : m->contract->name;
}

static loom_status add_hparam(loom_export *e, const loom_model *m, loom_hparam hp, double value, loom_meta_type type)
{
	loom_spellings keys = m->contract->hparam_keys[LOOM_CFMT_GGUF][hp];
	if (keys == NULL)
		return LOOM_OK;
	char key[256];
	loom_contract_expand(key, sizeof(key), keys[0], "{arch}", export_architecture(m));
	loom_meta_value v = {.type = type};
	if (type == LOOM_META_F32)
		v.v.f = value;
	else
		v.v.u = (uint64_t)value;
	return add_meta(e, key, v);
}

/* Whether has() holds for every layer but every n-th (0: for every layer):
 * the rule of the windows' pattern and of the layers without RoPE. */
static bool every_nth_lacks(const loom_hparams *hp, bool (*has)(const loom_hparams *, int64_t), int64_t n)
{
	for (int64_t il = 0; il < hp->n_layer; il++)
		if (has(hp, il) != (n == 0 || (il + 1) % n != 0))
			return false;
	return true;
}

/* The period n for which every_nth_lacks holds; -1 if none does. */
static int64_t period_of(const loom_hparams *hp, bool (*has)(const loom_hparams *, int64_t))
{
	for (int64_t n = 0; n <= hp->n_layer; n++)
		if (every_nth_lacks(hp, has, n))
			return n;
	return -1;
}

/* The windowed layers of a file that listed them (Hugging Face's
 * layer_types): as the pattern's period where one gives them, as
 * llama.cpp reads it, else as its list of flags. */
static loom_status add_window_layers(loom_export *e, const loom_model *m)
{
	const loom_hparams *hp = &m->hp;
	loom_spellings keys = m->contract->hparam_keys[LOOM_CFMT_GGUF][LOOM_HP_SLIDING_WINDOW_PATTERN];
	if (keys == NULL)
		return loom_error(LOOM_ERR_UNSUPPORTED, "the model lists its windowed layers, and %s names no GGUF key for "
				  "sliding_window_pattern to keep them in", m->contract->path);
	const int64_t period = period_of(hp, loom_layer_windowed);
	if (period >= 0)
		return add_hparam(e, m, LOOM_HP_SLIDING_WINDOW_PATTERN, (double)period, LOOM_META_U32);
	uint32_t *flags = own_block(e, (size_t)hp->n_layer * sizeof(uint32_t));
	if (flags == NULL)
		return LOOM_ERR_NO_MEMORY;
	for (int64_t il = 0; il < hp->n_layer; il++)
		flags[il] = hp->swa_layers[il] != 0;
	char key[256];
	loom_contract_expand(key, sizeof(key), keys[0], "{arch}", export_architecture(m));
	return add_meta(e, key, (loom_meta_value){.type = LOOM_META_ARRAY, .elem_type = LOOM_META_U32,
						  .count = (uint64_t)hp->n_layer, .v.array = flags});
}

/* The layers without RoPE as a GGUF can say them: as the interval under
 * the contract's GGUF key where it names one, else by saying nothing,
 * which the contract's default interval must then give (SmolLM3's files,
 * whose period llama.cpp fixes at 4). */
static loom_status add_unrotated_layers(loom_export *e, const loom_model *m)
{
	const loom_hparams *hp = &m->hp;
	const int64_t period = period_of(hp, loom_layer_has_rope);
	if (m->contract->hparam_keys[LOOM_CFMT_GGUF][LOOM_HP_NO_ROPE_LAYER_INTERVAL] != NULL && period >= 0)
		return add_hparam(e, m, LOOM_HP_NO_ROPE_LAYER_INTERVAL, (double)period, LOOM_META_U32);
	const int64_t implied = m->contract->has_default[LOOM_HP_NO_ROPE_LAYER_INTERVAL]
					? (int64_t)m->contract->defaults[LOOM_HP_NO_ROPE_LAYER_INTERVAL]
					: 0;
	if (every_nth_lacks(hp, loom_layer_has_rope, implied))
		return LOOM_OK;
	char implied_text[64] = "none";
	if (implied > 0)
		snprintf(implied_text, sizeof(implied_text), "every %" PRId64 "th", implied);
	return loom_error(LOOM_ERR_UNSUPPORTED, "the model leaves RoPE off other layers than a GGUF file of %s implies "
			  "(%s), and the contract names no GGUF key for no_rope_layer_interval to say which",
			  m->contract->path, implied_text);
}

/* The RoPE scaling's keys: its type and factor, the original context, and
 * YaRN's parameters; LongRoPE's original context and attention factor
 * (Phi-3), which choose and scale its factors, with or without a type. */
static loom_status add_rope_scaling(loom_export *e, const loom_model *m)
{
	const loom_hparams *hp = &m->hp;
	loom_spellings keys = m->contract->hparam_keys[LOOM_CFMT_GGUF][LOOM_HP_ROPE_SCALING_TYPE];
	const char *type = hp->yarn_ext_factor > 0 ? "yarn" : hp->rope_freq_scale != 1.0f ? "linear" : NULL;
	const bool long_rope = m->rope_factors_long.data != NULL || m->rope_factors_short.data != NULL ||
			       hp->rope_long_factors != NULL;
	loom_status st = LOOM_OK;
	if (type != NULL && keys != NULL) {
		char key[256];
		loom_contract_expand(key, sizeof(key), keys[0], "{arch}", export_architecture(m));
		char *value = own_string(e, type);
		st = value != NULL ? LOOM_OK : LOOM_ERR_NO_MEMORY;
		if (st == LOOM_OK)
			st = add_meta(e, key, (loom_meta_value){.type = LOOM_META_STRING, .v.s = {strlen(value), value}});
		if (st == LOOM_OK)
			st = add_hparam(e, m, LOOM_HP_ROPE_SCALING_FACTOR, 1.0 / hp->rope_freq_scale, LOOM_META_F32);
	}
	if (st == LOOM_OK && ((type != NULL && keys != NULL) || long_rope))
		st = add_hparam(e, m, LOOM_HP_ROPE_ORIG_CTX, (double)hp->n_ctx_orig, LOOM_META_U32);
	if (st == LOOM_OK && (hp->yarn_ext_factor > 0 || long_rope))
		st = add_hparam(e, m, LOOM_HP_ROPE_ATTN_FACTOR, hp->yarn_attn_factor, LOOM_META_F32);
	if (st == LOOM_OK && hp->yarn_ext_factor > 0)
		st = add_hparam(e, m, LOOM_HP_ROPE_BETA_FAST, hp->yarn_beta_fast, LOOM_META_F32);
	if (st == LOOM_OK && hp->yarn_ext_factor > 0)
		st = add_hparam(e, m, LOOM_HP_ROPE_BETA_SLOW, hp->yarn_beta_slow, LOOM_META_F32);
	if (st == LOOM_OK && hp->yarn_ext_factor > 0 && !hp->yarn_truncate)
		st = add_hparam(e, m, LOOM_HP_ROPE_TRUNCATE, 0.0, LOOM_META_BOOL);
	return st;
}

static loom_status export_meta(loom_export *e, const loom_model *m)
{
	const loom_hparams *hp = &m->hp;
	const bool rope = m->contract->positions == LOOM_POSITIONS_ROPE;
	const char *arch = export_architecture(m);
	loom_status st = add_meta(e, "general.architecture",
				  (loom_meta_value){.type = LOOM_META_STRING, .v.s = {strlen(arch), (char *)arch}});
	/* The tokenizer is described in GGUF's keys whatever the format. */
	for (uint64_t i = 0; st == LOOM_OK && i < m->file->n_meta; i++) {
		const loom_meta_kv *kv = &m->file->meta[i];
		bool tokenizer = kv->key.len > 10 && memcmp(kv->key.data, "tokenizer.", 10) == 0;
		if (tokenizer || loom_string_eq(kv->key, "general.name")) {
			char *key = loom_string_dup(kv->key);
			st = key != NULL ? add_meta(e, key, kv->value) : loom_error(LOOM_ERR_NO_MEMORY, "out of memory");
			free(key);
		}
	}
	struct { loom_hparam hp; double v; loom_meta_type type; bool wanted; } values[] = {
		{LOOM_HP_N_EMBD, (double)hp->n_embd, LOOM_META_U32, true},
		{LOOM_HP_N_LAYER, (double)hp->n_layer, LOOM_META_U32, true},
		{LOOM_HP_N_FF, (double)hp->n_ff, LOOM_META_U32, true},
		{LOOM_HP_N_HEAD, (double)hp->n_head, LOOM_META_U32, true},
		{LOOM_HP_N_HEAD_KV, (double)hp->n_head_kv, LOOM_META_U32, true},
		{LOOM_HP_HEAD_DIM, (double)hp->head_dim, LOOM_META_U32, true},
		{LOOM_HP_HEAD_DIM_V, (double)hp->head_dim, LOOM_META_U32, true},
		{LOOM_HP_N_CTX_TRAIN, (double)hp->n_ctx_train, LOOM_META_U32, true},
		{LOOM_HP_NORM_EPS, hp->norm_eps, LOOM_META_F32, true},
		{LOOM_HP_N_ROT, (double)hp->n_rot, LOOM_META_U32, rope},
		{LOOM_HP_ROPE_THETA, hp->rope_theta, LOOM_META_F32, rope},
		/* The modern families' features, where the model has them: a
		 * file written without one would run as the contract's default. */
		{LOOM_HP_FINAL_LOGIT_SOFTCAP, hp->final_logit_softcap, LOOM_META_F32, hp->final_logit_softcap > 0.0f},
		{LOOM_HP_ATTN_LOGIT_SOFTCAP, hp->attn_logit_softcap, LOOM_META_F32, hp->attn_logit_softcap > 0.0f},
		{LOOM_HP_EMBEDDING_MULT, hp->embedding_mult, LOOM_META_F32, hp->embedding_mult != 1.0f},
		{LOOM_HP_RESIDUAL_MULT, hp->residual_mult, LOOM_META_F32, hp->residual_mult != 1.0f},
		{LOOM_HP_ATTENTION_MULT, hp->attention_mult, LOOM_META_F32, hp->attention_mult > 0.0f},
		{LOOM_HP_LOGIT_SCALE, hp->logit_scale, LOOM_META_F32, hp->logit_scale != 1.0f},
		{LOOM_HP_LOGIT_MULT, hp->logit_mult, LOOM_META_F32, hp->logit_mult != 1.0f},
		{LOOM_HP_ATTENTION_SCALE_BASE, hp->attention_scale_base, LOOM_META_F32, hp->attention_scale_base > 0.0f},
		{LOOM_HP_SLIDING_WINDOW, (double)hp->n_swa, LOOM_META_U32, hp->n_swa > 0},
		{LOOM_HP_SLIDING_WINDOW_PATTERN, (double)hp->swa_pattern, LOOM_META_U32, hp->n_swa > 0 && !hp->swa_layers},
		{LOOM_HP_ROPE_THETA_SWA, hp->rope_theta_swa, LOOM_META_F32, hp->rope_theta_swa > 0.0f},
		{LOOM_HP_N_EXPERT, (double)hp->n_expert, LOOM_META_U32, hp->n_expert > 0},
		{LOOM_HP_N_EXPERT_USED, (double)hp->n_expert_used, LOOM_META_U32, hp->n_expert > 0},
		{LOOM_HP_N_FF_EXPERT, (double)hp->n_ff_exp, LOOM_META_U32, hp->n_expert > 0},
		{LOOM_HP_EXPERT_WEIGHTS_NORM, hp->expert_weights_norm, LOOM_META_BOOL, hp->n_expert > 0},
		{LOOM_HP_EXPERT_WEIGHTS_SCALE, hp->expert_weights_scale, LOOM_META_F32, hp->n_expert > 0},
		{LOOM_HP_N_DENSE_LAYERS, (double)hp->n_dense_layers, LOOM_META_U32, hp->n_dense_layers > 0},
		{LOOM_HP_N_FF_SHARED, (double)hp->n_ff_shared, LOOM_META_U32, hp->n_expert > 0 && m->contract->shared_expert},
		{LOOM_HP_EXPERT_GATING_FUNC, loom_gating_func_number(hp->expert_gating), LOOM_META_U32, hp->n_expert > 0},
		{LOOM_HP_N_EXPERT_SHARED, (double)hp->n_expert_shared, LOOM_META_U32, hp->n_expert_shared > 0},
	};
	for (size_t i = 0; st == LOOM_OK && i < sizeof(values) / sizeof(values[0]); i++)
		if (values[i].wanted)
			st = add_hparam(e, m, values[i].hp, values[i].v, values[i].type);
	if (st == LOOM_OK && rope)
		st = add_rope_scaling(e, m);
	if (st == LOOM_OK && rope)
		st = add_unrotated_layers(e, m);
	if (st == LOOM_OK && hp->n_swa > 0 && hp->swa_layers != NULL)
		st = add_window_layers(e, m);
	return st;
}

/* ---- public -------------------------------------------------------------- */

loom_status loom_export_gguf(loom_model *m, loom_export *e)
{
	static const loom_role model_roles[] = {LOOM_ROLE_TOKEN_EMBD, LOOM_ROLE_POS_EMBD, LOOM_ROLE_OUTPUT_NORM,
						LOOM_ROLE_OUTPUT_NORM_B, LOOM_ROLE_OUTPUT, LOOM_ROLE_OUTPUT_B,
						LOOM_ROLE_ROPE_FREQS, LOOM_ROLE_ROPE_FACTORS_LONG,
						LOOM_ROLE_ROPE_FACTORS_SHORT};
	memset(e, 0, sizeof(*e));
	if (m->contract->tensor_names[LOOM_CFMT_GGUF][LOOM_ROLE_TOKEN_EMBD] == NULL)
		return loom_error(LOOM_ERR_CONTRACT, "%s does not describe GGUF files", m->contract->path);
	e->file.struct_size = sizeof(e->file);
	e->file.format = "gguf (converted in memory)";
	e->meta = calloc(m->file->n_meta + 32, sizeof(*e->meta));
	e->cap_tensors = (uint64_t)LOOM_ROLE_COUNT * (uint64_t)(m->hp.n_layer + 1);
	e->tensors = calloc(e->cap_tensors, sizeof(*e->tensors));
	e->roles = calloc(e->cap_tensors, sizeof(*e->roles));
	e->file.meta = e->meta;
	e->file.tensors = e->tensors;
	loom_status st = e->meta != NULL && e->tensors != NULL && e->roles != NULL ? export_meta(e, m)
							       : loom_error(LOOM_ERR_NO_MEMORY, "out of memory");
	for (size_t i = 0; st == LOOM_OK && i < sizeof(model_roles) / sizeof(model_roles[0]); i++)
		st = export_role(e, m, model_roles[i], -1);
	/* Each layer's dense FFN or mixture of experts, as it has. */
	for (int il = 0; st == LOOM_OK && il < m->hp.n_layer; il++)
		for (int r = LOOM_ROLE_ATTN_NORM; st == LOOM_OK && r < LOOM_ROLE_COUNT; r++)
			if (loom_layer_moe(&m->hp, il) ? !loom_role_is_dense_ffn((loom_role)r) : !loom_role_is_moe((loom_role)r))
				st = export_role(e, m, (loom_role)r, il);
	if (st != LOOM_OK)
		loom_export_free(e);
	return st;
}

void loom_export_free(loom_export *e)
{
	for (size_t i = 0; i < e->n_strings; i++)
		free(e->strings[i]);
	for (size_t i = 0; i < e->n_blocks; i++)
		free(e->blocks[i]);
	free(e->strings);
	free(e->blocks);
	free(e->meta);
	free(e->tensors);
	free(e->roles);
	memset(e, 0, sizeof(*e));
}
