/* expert_stack.c - a mixture's experts stored one tensor an expert,
 * stacked at load. The copy costs host memory once per layer's matrix; the
 * CPU backends repack the stack anyway, and other backends upload it. */
#include "model/expert_stack.h"

#include "loom/plugin_api.h"
#include "model/naming.h"
#include "runtime/error.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define EXPERT_PLACEHOLDER "{e}"

bool loom_contract_names_each_expert(const loom_contract *c, int fmt, loom_role role)
{
	loom_spellings names = c->tensor_names[fmt][role];
	return loom_role_is_experts(role) && names != NULL && names[0] != NULL &&
	       strstr(names[0], EXPERT_PLACEHOLDER) != NULL;
}

loom_status loom_model_stack_experts(const loom_model *m, int fmt, loom_role role, int il, int64_t ne0, int64_t ne1,
				     int64_t n_expert, char *name, size_t size, loom_file_tensor *out, void **bytes)
{
	const char *pattern = m->contract->tensor_names[fmt][role][0];
	char layer[16], expert[24], one[256];
	snprintf(layer, sizeof(layer), "%d", il);
	loom_contract_expand(name, size, pattern, "{i}", layer);
	*bytes = NULL;
	memset(out, 0, sizeof(*out));
	uint8_t *stack = NULL;
	size_t each = 0;
	for (int64_t e = 0; e < n_expert; e++) {
		snprintf(expert, sizeof(expert), "%" PRId64, e);
		loom_contract_expand(one, sizeof(one), name, EXPERT_PLACEHOLDER, expert);
		const loom_file_tensor *ft = loom_file_find_tensor(m->file, one);
		if (ft == NULL) {
			free(stack);
			return loom_error(LOOM_ERR_BAD_FORMAT, "tensor '%s' (%s, expert %" PRId64 " of %" PRId64 ") is missing",
					  one, loom_role_name(role), e, n_expert);
		}
		if (ft->n_dims != 2 || ft->ne[0] != ne0 || ft->ne[1] != ne1 || (e > 0 && ft->dtype != out->dtype)) {
			const char *type = loom_dtype_name(ft->dtype), *want = e > 0 ? loom_dtype_name(out->dtype) : NULL;
			free(stack);
			return loom_error(LOOM_ERR_BAD_FORMAT,
					  "tensor '%s' is %s [%" PRId64 ", %" PRId64 "], expected %s [%" PRId64 ", %" PRId64
					  "] (%s: one expert's matrix)",
					  one, type ? type : "?", ft->ne[0], ft->n_dims > 1 ? ft->ne[1] : 1,
					  want ? want : "a matrix", ne0, ne1, loom_role_name(role));
		}
		if (e == 0) {
			each = loom_dtype_row_bytes(ft->dtype, ne0) * (size_t)ne1;
			if (each == 0 || ft->n_bytes != each)
				return loom_error(LOOM_ERR_BAD_FORMAT, "tensor '%s' holds %" PRIu64 " bytes, not the %zu of "
						  "its shape", one, ft->n_bytes, each);
			stack = malloc(each * (size_t)n_expert);
			if (stack == NULL)
				return loom_error(LOOM_ERR_NO_MEMORY, "out of memory stacking the experts of '%s'", name);
			*out = (loom_file_tensor){.dtype = ft->dtype, .n_dims = 3, .ne = {ne0, ne1, n_expert, 1},
						  .n_bytes = each * (uint64_t)n_expert, .data = stack};
		}
		memcpy(stack + each * (size_t)e, ft->data, each);
	}
	out->name = (loom_string){strlen(name), name};
	*bytes = stack;
	return LOOM_OK;
}
