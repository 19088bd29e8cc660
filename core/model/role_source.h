/* role_source.h - a role's tensor as a file keeps it, found by its name,
 * or put together where the file keeps it in parts or in another order:
 * one tensor an expert (expert_stack.h), MXFP4 weights as transformers'
 * blocks and scales apart (packed_mxfp4.h), the experts' gate and up as
 * one tensor (fused or interleaved), which comes as planes: every
 * expert's gate, then every expert's up ({n_in, F, 2 n_expert}; a bias
 * table {F, 2 n_expert}).
 * Binding (bind.c) and `loom convert` (model_export.c) read roles through
 * it, so both see the same tensor. */
#ifndef LOOM_ROLE_SOURCE_H
#define LOOM_ROLE_SOURCE_H

#include "model/model.h"

/* The tensor of role (of layer il, or -1) in contract section fmt, in
 * *out; *out is NULL when the file has none. A role of experts has the
 * shape {ne0, ne1, ne2} (for stacking experts kept one tensor each).
 * Where the tensor is put together, *out points to *made, whose bytes are
 * malloc'd in *owned (the caller's to keep or free); *owned is NULL when
 * *out is the file's own. name gets the tensor's name (or the contract's
 * first spelling), for messages. Fails with a message naming the tensor
 * when its parts do not fit together. */
loom_status loom_model_role_source(const loom_model *m, int fmt, loom_role role, int il, int64_t ne0, int64_t ne1,
				   int64_t ne2, char *name, size_t size, loom_file_tensor *made, void **owned,
				   const loom_file_tensor **out);

#endif
