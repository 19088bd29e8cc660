/* role_source.c - where a file keeps a role's tensor (role_source.h). */
#include "model/role_source.h"

#include "model/expert_stack.h"
#include "model/naming.h"
#include "model/packed_mxfp4.h"
#include "model/weight_adapt.h"
#include "runtime/error.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

/* The experts' gate and up as one tensor ({n_in, 2 F, n_expert}, or the
 * bias table {2 F, n_expert}), each expert's gate rows then its up rows
 * (fused), or the two alternating (interleaved: gpt-oss in Hugging Face's
 * files), in a malloc'd copy as planes: every expert's gate, then every
 * expert's up ({n_in, F, 2 n_expert}, or {F, 2 n_expert}), so that each
 * half is a whole stack of its own. */
static loom_status gate_up_planes(const loom_file_tensor *ft, bool table, bool interleaved, int64_t n_expert,
				  const char *name, loom_file_tensor *out, void **bytes)
{
	/* What is split: rows of each expert's matrix, or elements of each
	 * expert's bias row. */
	const int64_t n = table ? ft->ne[0] : ft->ne[1], groups = table ? ft->ne[1] : ft->ne[2];
	const size_t unit = table ? loom_dtype_row_bytes(ft->dtype, 1) : loom_dtype_row_bytes(ft->dtype, ft->ne[0]);
	if (unit == 0 || n % 2 != 0 || groups != n_expert || ft->n_dims != (table ? 2 : 3))
		return loom_error(LOOM_ERR_BAD_FORMAT, "tensor '%s' is not every expert's gate and up as one %s (%d "
				  "dimensions, %" PRId64 " %s of %" PRId64 " experts)", name, table ? "bias table" : "matrix",
				  ft->n_dims, n, table ? "biases" : "rows", groups);
	char *dst = malloc(ft->n_bytes ? ft->n_bytes : 1);
	if (dst == NULL)
		return loom_error(LOOM_ERR_NO_MEMORY, "out of memory reordering '%s'", name);
	const int64_t half = n / 2;
	const char *src = ft->data;
	for (int64_t g = 0; g < groups; g++) {
		const char *in = src + (size_t)(g * n) * unit;
		char *gate = dst + (size_t)(g * half) * unit, *up = dst + (size_t)((groups + g) * half) * unit;
		for (int64_t i = 0; i < half; i++) {
			memcpy(gate + (size_t)i * unit, in + (size_t)(interleaved ? 2 * i : i) * unit, unit);
			memcpy(up + (size_t)i * unit, in + (size_t)(interleaved ? 2 * i + 1 : half + i) * unit, unit);
		}
	}
	*out = *ft;
	if (table) {
		out->ne[0] = half;
		out->ne[1] = 2 * groups;
	} else {
		out->ne[1] = half;
		out->ne[2] = 2 * groups;
	}
	out->data = dst;
	*bytes = dst;
	return LOOM_OK;
}

/* Every expert's matrix of a stack the file keeps turned ({n_out, n_in,
 * n_expert} in ggml's order: the [experts, n_in, n_out] parameters of
 * gpt-oss's dequantized checkpoints), each turned, in a malloc'd copy. */
static loom_status turned_experts(const loom_file_tensor *ft, const char *name, loom_file_tensor *out, void **bytes)
{
	if (ft->n_dims != 3)
		return loom_error(LOOM_ERR_BAD_FORMAT, "tensor '%s' has %d dimensions, not every expert's matrix", name,
				  ft->n_dims);
	const size_t expert_bytes = loom_dtype_row_bytes(ft->dtype, ft->ne[0]) * (size_t)ft->ne[1];
	char *dst = malloc(ft->n_bytes ? ft->n_bytes : 1);
	if (dst == NULL)
		return loom_error(LOOM_ERR_NO_MEMORY, "out of memory turning '%s'", name);
	for (int64_t e = 0; e < ft->ne[2]; e++) {
		loom_file_tensor one = *ft;
		one.n_dims = 2;
		one.ne[2] = 1;
		one.data = (const char *)ft->data + (size_t)e * expert_bytes;
		void *turned;
		loom_status st = loom_weight_transposed(&one, name, &turned);
		if (st != LOOM_OK) {
			free(dst);
			return st;
		}
		memcpy(dst + (size_t)e * expert_bytes, turned, expert_bytes);
		free(turned);
	}
	*out = *ft;
	out->ne[0] = ft->ne[1];
	out->ne[1] = ft->ne[0];
	out->data = dst;
	*bytes = dst;
	return LOOM_OK;
}

loom_status loom_model_role_source(const loom_model *m, int fmt, loom_role role, int il, int64_t ne0, int64_t ne1,
				   int64_t ne2, char *name, size_t size, loom_file_tensor *made, void **owned,
				   const loom_file_tensor **out)
{
	loom_status st = LOOM_OK;
	*owned = NULL;
	*out = loom_model_find_role(m, fmt, role, il, name, size);
	if (*out == NULL && ne2 > 0 && loom_contract_names_each_expert(m->contract, fmt, role)) {
		st = loom_model_stack_experts(m, fmt, role, il, ne0, ne1, ne2, name, size, made, owned);
		*out = st == LOOM_OK ? made : NULL;
	} else if (*out == NULL && m->contract->tensor_names[fmt][role] != NULL) {
		st = loom_file_packed_mxfp4(m->file, name, made, owned);
		*out = *owned != NULL ? made : NULL;
	}
	if (st == LOOM_OK && *out != NULL && *owned == NULL && ne2 > 0 && m->contract->transposed[fmt][role]) {
		loom_file_tensor in = **out;
		st = turned_experts(&in, name, made, owned);
		*out = st == LOOM_OK ? made : NULL;
	}
	const bool table = role == LOOM_ROLE_FFN_UP_EXPS_B;
	const loom_gate_up_kind gate_up = m->contract->experts_gate_up[fmt];
	if (st != LOOM_OK || *out == NULL || gate_up == LOOM_GATE_UP_SEPARATE || (role != LOOM_ROLE_FFN_UP_EXPS && !table))
		return st;
	void *reordered = NULL;
	loom_file_tensor in = **out;
	if ((st = gate_up_planes(&in, table, gate_up == LOOM_GATE_UP_INTERLEAVED, m->hp.n_expert, name, made,
				 &reordered)) != LOOM_OK) {
		free(*owned);
		*owned = NULL;
		*out = NULL;
		return st;
	}
	free(*owned);
	*owned = reordered;
	*out = made;
	return LOOM_OK;
}
