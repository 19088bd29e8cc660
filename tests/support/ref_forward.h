/*
 * ref_forward.h - a plain llama forward pass in double precision, the
 * reference synthetic models are checked against.
 *
 * It reads the weights from the bytes synth_model wrote into the file and
 * dequantizes them itself (cpu_ref.h's conversions, not loom's). The step is
 * llama2.c's: RMSNorm, RoPE on adjacent pairs (x[2i], x[2i+1]) with angle
 * pos * theta^(-2i/n_rot), grouped-query attention with a causal mask,
 * SwiGLU, and the output head (token_embd when tied); with post_norms the
 * attention's and the FFN's outputs are RMS-normalised before each residual
 * add, as Gemma 2 does; Granite's multipliers scale the embeddings, each
 * residual add, q.k (in place of 1 / sqrt(head_dim)) and the logits; Gemma's
 * query_pre_attn_scalar replaces head_dim in that square root.
 *
 * One rounding of loom's is modelled, because it is part of what a
 * reduced-precision weight means in llama.cpp and loom: a matmul's input is
 * first rounded to the weight's dot type - fp16 for F16 weights, bf16 for
 * BF16, Q8_0 blocks (d = fp16(amax / 127), q = round-half-even(x * 127 /
 * amax) in f32) for Q8_0. Everything else is exact double arithmetic.
 */
#ifndef LOOM_TEST_REF_FORWARD_H
#define LOOM_TEST_REF_FORWARD_H

#include "synth_model.h"

#include <loom.h>

typedef struct ref_model ref_model;

/* Dequantizes sm's weights; sm may be freed afterwards. */
ref_model *ref_model_create(const synth_model *sm);
void ref_model_free(ref_model *m); /* NULL is fine */

/* Runs tokens[0..n) at positions 0..n-1 of one sequence and writes the
 * logits of every position: logits[p * n_vocab + v]. */
void ref_forward(const ref_model *m, const loom_token *tokens, int n, double *logits);

#endif
