/* model_export.h - a model as a GGUF file of its contract's
 * architecture holds it: GGUF metadata keys and tensor names, matrices
 * {n_in, n_out}, Q and K rows in the GGUF section's RoPE order, norms and
 * biases in f32. `loom convert` writes it; quantizing at load loads it. */
#ifndef LOOM_MODEL_EXPORT_H
#define LOOM_MODEL_EXPORT_H

#include "model/model.h"

typedef struct loom_export {
	loom_model_file file;
	loom_meta_kv *meta;
	loom_file_tensor *tensors;
	loom_role *roles;   /* each tensor's role, for the quantization policy */
	uint64_t cap_tensors;
	char **strings; /* keys and names the export made */
	size_t n_strings, cap_strings;
	void **blocks;  /* tensor bytes the export made */
	size_t n_blocks, cap_blocks;
} loom_export;

/* Builds the export of m, whose file, contract, hyperparameters and
 * vocabulary are loaded (its weights need not be). Tensors that need no
 * change point into m's file, which must outlive the export. */
loom_status loom_export_gguf(loom_model *m, loom_export *out);
void loom_export_free(loom_export *e);

#endif
