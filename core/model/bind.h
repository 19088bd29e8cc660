/* bind.h - binding the contract's roles to the file's tensors. */
#ifndef LOOM_BIND_H
#define LOOM_BIND_H

#include "model/model.h"

/* A role of a layer, the tensor bound to it, and the shape the block
 * wants ({ne0, ne1} for a matrix, {ne0} when ne1 is 0). */
/* A weight's role and shape: {ne0} (ne1 = 0), {ne0, ne1}, or every
 * expert's {ne0, ne1, ne2}. */
typedef struct loom_weight_slot {
	loom_role role;
	int64_t ne0, ne1, ne2;
	loom_tensor *t;
} loom_weight_slot;

/* Layer il's slots (l is its weights), in role order: the dense FFN's or
 * the experts', as the layer has; fused qkv has none of its own (its rows
 * are bound as q's, k's and v's). Returns how many. */
int loom_layer_slots(const loom_model *m, int il, loom_layer *l, loom_weight_slot slots[LOOM_ROLE_COUNT]);

/* Whether the backend runs op, MATMUL or GET_ROWS, with weight (or
 * table) t. */
bool loom_backend_takes(const loom_model *m, loom_op op, const loom_tensor *t);

/* Binds every role the contract's choices use (from m's file, in contract
 * section m->fmt), checking shapes and asking the backend about each
 * weight's type; errors name the tensor. The tensors point into host
 * memory: the file, or copies kept in m->copies. */
loom_status loom_model_bind(loom_model *m);

#endif
