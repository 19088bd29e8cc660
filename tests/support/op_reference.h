/*
 * op_reference.h - what MATMUL and ATTENTION must give, in double
 * arithmetic, with the roundings the ops document (docs/plugins.md):
 * activations met as the weight type meets them, queries as the cache
 * type meets them. The element-wise ops' references are one line each and
 * live beside their cases.
 */
#ifndef LOOM_TEST_OP_REFERENCE_H
#define LOOM_TEST_OP_REFERENCE_H

#include "op_case.h"

/* MATMUL's outputs (ref), and per output two sizes its rounding errors
 * are measured against (either may be NULL): mag, the sum of |w * x|,
 * which bounds an f32 summation's error however the terms cancel, and
 * energy, the sum of (w * x)^2, the noise a rounding of each term adds.
 * Quantized weights meet activations quantized to their activation type in
 * llama.cpp's integer arithmetic; F16 and BF16 weights meet activations
 * rounded to their precision; F32 weights the activations as they are. */
void matmul_reference(const op_case *c, double *ref, double *mag, double *energy);

/* MATMUL_ID's outputs, and their sizes as matmul_reference's: each
 * (token, slot) row through its expert's matrix, plus its bias where src3
 * has them (mag, energy may be NULL, and leave the bias out). */
void matmul_id_reference(const op_case *c, double *ref, double *mag, double *energy);

/* ATTENTION's outputs: the query rounded to fp16 for an F16 cache,
 * quantized to Q8_0 for a quantized one (integer dot products per block);
 * the softmax in double, its probabilities weighting the values unrounded
 * as a flash attention does. A row whose mask hides every cell is zeros.
 * A soft-cap (fp[1]) bends the scores before the mask adds; sinks (src[4])
 * join each head's maximum and denominator. */
void attention_reference(const op_case *c, double *ref);

#endif
