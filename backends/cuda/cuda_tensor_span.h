/*
 * cuda_tensor_span.h - where two tensors' elements lie, for the cuda
 * backend's decisions about a step's nodes (cuda_q8_1_reuse.c,
 * cuda_fusion.c): whether they share any byte, and whether they are the
 * same rows in the same order.
 *
 * Plain C, with no CUDA in it, so that the host tests check it.
 */
#ifndef LOOM_CUDA_TENSOR_SPAN_H
#define LOOM_CUDA_TENSOR_SPAN_H

#include "loom/plugin_api.h"

#include <stdbool.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Whether a and b are the same rows (the same bytes at the same row
 * indices) in the same order: a MATMUL_ID reads its one row per token as
 * [n, 1, tokens] where the norm before it wrote [n, tokens]. */
bool cuda_same_rows(const loom_tensor *a, const loom_tensor *b);

/* Whether the bytes a's elements lie within and b's share any. */
bool cuda_tensors_overlap(const loom_tensor *a, const loom_tensor *b);

#ifdef __cplusplus
}
#endif

#endif
