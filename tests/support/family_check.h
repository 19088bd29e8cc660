/*
 * family_check.h - a family model against its reference file
 * (tests/reference/data/NAME.ref: what llama.cpp, or a float64 numpy
 * forward pass written from Hugging Face's modeling code, computed on the
 * very same file): the prompt's logits at the recorded positions within
 * the weight type's band, and the greedy continuation, on any backend.
 * test_families runs it on every CPU backend, test_cuda on the GPU.
 */
#ifndef LOOM_TEST_FAMILY_CHECK_H
#define LOOM_TEST_FAMILY_CHECK_H

#include "family_models.h"

#define MAX_ROWS 16
#define MAX_GREEDY 64

typedef struct family_ref {
	int n_vocab, n_prompt;
	int32_t prompt[FAMILY_PROMPT_LEN];
	int n_rows;
	int row_pos[MAX_ROWS];
	float *rows; /* [n_rows][n_vocab] */
	/* A mixture of experts' routing margin at each row's position (its
	 * least lead of a chosen expert over one left out, numpy references
	 * only); INFINITY where the reference gives none. */
	float route_margin[MAX_ROWS];
	int n_greedy;
	int32_t greedy[MAX_GREEDY];
	float gap[MAX_GREEDY]; /* the reference's top-1 minus top-2 at that step */
} family_ref;

/* The reference of family model name; family_ref_free releases it. */
void family_ref_load(const char *name, family_ref *r);
void family_ref_free(family_ref *r);

/* The band of |logit - reference| for the model: against llama.cpp 1e-4
 * at F32, 0.05 at Q8_0, GELU families 1e-2 and 0.4 (ggml's GELU goes
 * through an fp16 table); against float64 1e-4 and 0.4; Q4_K_M 0.4. */
float family_tolerance(const family_model *fm);

/* The largest |logit - reference| over the recorded prompt rows; each
 * row's in row_diff when given. */
double family_prompt_diff(loom_model *m, const family_ref *r, double *row_diff);

/* Greedy decoding after the prompt, one token a step; the steps that
 * matched the reference (all of them, or up to a near-tie, printed). */
int family_greedy_steps(loom_model *m, const family_ref *r, float tol, const char *label);

/* Asserts every prompt row within tol of the reference, but for at most
 * one whose position's experts were a near-tie to choose; the largest
 * difference of the rows within tol. */
double family_within_band(const family_ref *r, const double *rows, float tol, const char *label);

/* The model written to path, quantized by loom where its scheme asks, in
 * a folder of the suite's own (test_tmp_dir(suite/name)): suites run side
 * by side, and test_tmp_dir empties the folder it gives; path. */
const char *family_model_write_tmp(const family_model *fm, const char *suite, char *path, size_t size);

/* The model file at path loaded on backend (threads 2) and checked against
 * ref: the prompt rows within the band, the greedy continuation; a line
 * with both. False, having done nothing, where the backend is not here. */
bool family_check_on(const family_model *fm, const char *path, const family_ref *ref, const char *backend);

#endif
