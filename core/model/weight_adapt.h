/* weight_adapt.h - a file's tensor adapted to what the block wants, where
 * the format stores it otherwise: re-encoded in another dtype by the
 * backend's CONVERT op, matrices turned (GPT-2's Conv1D in Hugging Face
 * files), norm weights and biases as f32 with an offset added (Gemma's w
 * where the block multiplies by 1 + w). Loading and `loom convert` both
 * use these. */
#ifndef LOOM_WEIGHT_ADAPT_H
#define LOOM_WEIGHT_ADAPT_H

#include "model/tensor.h"
#include "runtime/runtime.h"

/* t's elements converted to type by the runtime's backend (LOOM_OP_CONVERT),
 * into a malloc'd block of *n_bytes; nothing is left allocated on failure. */
loom_status loom_weight_converted(loom_runtime *rt, const loom_file_tensor *t, loom_dtype type, void **bytes,
				  uint64_t *n_bytes);

/* ft, an f32, f16 or bf16 matrix stored {n_out, n_in}, as a malloc'd
 * {n_in, n_out} copy; name is for messages. */
loom_status loom_weight_transposed(const loom_file_tensor *ft, const char *name, void **out);

/* ft, a vector of f32, f16 or bf16, as a malloc'd f32 copy with add added
 * to every element (converted by rt's backend). */
loom_status loom_weight_vector_f32(loom_runtime *rt, const loom_file_tensor *ft, const char *name, float add,
				   float **out);

#endif
