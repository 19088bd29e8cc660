/* packed_mxfp4.h - MXFP4 weights as Hugging Face checkpoints keep them
 * (gpt-oss's experts, transformers' Mxfp4 quantization): the 4-bit values
 * and their exponents in two tensors, read into GGUF's blocks. */
#ifndef LOOM_PACKED_MXFP4_H
#define LOOM_PACKED_MXFP4_H

#include "loom/plugin_api.h"

/* Whether the file keeps name as MXFP4 in transformers' two parts:
 * name_blocks, bytes [..., rows, n / 32, 16], two elements a byte with the
 * even one in the low nibble, and name_scales, E8M0 exponents [..., rows,
 * n / 32]. If so, *out describes the tensor {n, rows, ...} in MXFP4 blocks
 * (an exponent, then element j in the low nibble of byte j and element
 * j + 16 in its high one, as GGUF keeps them) held in *bytes (malloc'd,
 * the caller's); if not, *bytes is NULL. */
loom_status loom_file_packed_mxfp4(const loom_model_file *f, const char *name, loom_file_tensor *out, void **bytes);

#endif
