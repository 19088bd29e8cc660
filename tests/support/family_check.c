/* family_check.c - a family model against its reference file
 * (family_check.h). */
#include "family_check.h"

#include "fixture.h"
#include "testdata.h"

#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>


static void skip_comments(FILE *f)
{
	int c;
	while ((c = fgetc(f)) == '#')
		while ((c = fgetc(f)) != '\n' && c != EOF)
			;
	if (c != EOF)
		ungetc(c, f);
}

void family_ref_load(const char *name, family_ref *r)
{
	char path[4096], word[32];
	snprintf(path, sizeof(path), "%s/tests/reference/data/%s.ref", LOOM_TEST_SOURCE_DIR, name);
	FILE *f = fopen(path, "r");
	ck_assert_msg(f != NULL, "%s is missing: tests/reference/make_references.sh makes it", path);
	memset(r, 0, sizeof(*r));
	skip_comments(f);
	ck_assert(fscanf(f, " n_vocab %d prompt %d", &r->n_vocab, &r->n_prompt) == 2);
	ck_assert_int_eq(r->n_prompt, FAMILY_PROMPT_LEN);
	for (int i = 0; i < r->n_prompt; i++)
		ck_assert(fscanf(f, "%d", &r->prompt[i]) == 1);
	r->rows = malloc(sizeof(float) * MAX_ROWS * (size_t)r->n_vocab);
	ck_assert_ptr_nonnull(r->rows);
	while (fscanf(f, " %31s", word) == 1) {
		if (strcmp(word, "logits") == 0) {
			ck_assert_int_lt(r->n_rows, MAX_ROWS);
			ck_assert(fscanf(f, "%d", &r->row_pos[r->n_rows]) == 1);
			for (int v = 0; v < r->n_vocab; v++)
				ck_assert(fscanf(f, "%f", &r->rows[(size_t)r->n_rows * r->n_vocab + v]) == 1);
			r->route_margin[r->n_rows] = INFINITY;
			r->n_rows++;
		} else if (strcmp(word, "route") == 0) {
			int pos;
			ck_assert(r->n_rows > 0 && fscanf(f, "%d", &pos) == 1);
			ck_assert_int_eq(pos, r->row_pos[r->n_rows - 1]);
			ck_assert(fscanf(f, "%f", &r->route_margin[r->n_rows - 1]) == 1);
		} else {
			int step;
			float logit;
			ck_assert_msg(strcmp(word, "greedy") == 0, "%s: unknown record '%s'", path, word);
			ck_assert_int_lt(r->n_greedy, MAX_GREEDY);
			ck_assert(fscanf(f, "%d %d %f %f", &step, &r->greedy[r->n_greedy], &logit, &r->gap[r->n_greedy]) ==
				  4);
			ck_assert_int_eq(step, r->n_greedy);
			r->n_greedy++;
		}
	}
	fclose(f);
	ck_assert_int_gt(r->n_rows, 0);
	ck_assert_int_gt(r->n_greedy, 0);
}

float family_tolerance(const family_model *fm)
{
	bool cpp = strcmp(fm->reference, "llama.cpp") == 0;
	if (fm->scheme != NULL)
		return 0.4f;
	if (fm->config.weight_type == LOOM_DTYPE_F32 && fm->config.expert_type == 0)
		return cpp && fm->gelu ? 1e-2f : 1e-4f;
	return !cpp || fm->gelu || fm->config.weight_type != LOOM_DTYPE_Q8_0 ? 0.4f : 0.05f;
}

/* The largest |logit - reference| over the recorded prompt rows; each
 * row's in row_diff when given. */
double family_prompt_diff(loom_model *m, const family_ref *r, double *row_diff)
{
	loom_context *ctx = test_context(m, 64, 32, LOOM_DTYPE_F32);
	int8_t want[FAMILY_PROMPT_LEN];
	memset(want, 1, sizeof(want));
	loom_batch b = {.n_tokens = r->n_prompt, .tokens = r->prompt, .logits = want};
	ck_assert_msg(loom_decode(ctx, &b) == LOOM_OK, "%s", loom_last_error());
	double worst = 0.0;
	for (int i = 0; i < r->n_rows; i++) {
		const float *got = loom_get_logits(ctx, r->row_pos[i]);
		const float *ref = r->rows + (size_t)i * r->n_vocab;
		double row = 0.0;
		for (int v = 0; v < r->n_vocab; v++)
			row = fmax(row, fabs((double)got[v] - ref[v]));
		if (row_diff != NULL)
			row_diff[i] = row;
		worst = fmax(worst, row);
	}
	loom_context_free(ctx);
	return worst;
}

/* Greedy decoding after the prompt, one token a step; returns the steps
 * that matched the reference (all of them, or up to a near-tie). */
int family_greedy_steps(loom_model *m, const family_ref *r, float tol, const char *label)
{
	loom_context *ctx = test_context(m, 64, 32, LOOM_DTYPE_F32);
	loom_batch b = {.n_tokens = r->n_prompt, .tokens = r->prompt};
	ck_assert_msg(loom_decode(ctx, &b) == LOOM_OK, "%s", loom_last_error());
	int step = 0;
	for (int last = r->n_prompt - 1; step < r->n_greedy; step++, last = 0) {
		const float *logits = loom_get_logits(ctx, last);
		ck_assert_ptr_nonnull(logits);
		loom_token next = test_argmax(logits, r->n_vocab);
		if (next != r->greedy[step]) {
			ck_assert_msg(r->gap[step] <= tol, "%s: greedy step %d is %d, the reference's %d (its lead %g > %g)",
				      label, step, next, r->greedy[step], r->gap[step], tol);
			printf("%s: greedy parts at step %d, a near-tie (the reference's lead %g)\n", label, step,
			       r->gap[step]);
			break;
		}
		loom_batch one = {.n_tokens = 1, .tokens = &next};
		ck_assert_msg(loom_decode(ctx, &one) == LOOM_OK, "%s", loom_last_error());
	}
	loom_context_free(ctx);
	return step;
}

/* Routing margins within which a quantized runtime may choose other
 * experts than float64 does: quantizing the activations moves router
 * scores by about a tenth in these models. */
#define ROUTE_NEAR_TIE 0.2f

/* Asserts every prompt row within tol of the reference, but for at most
 * one whose position's experts were a near-tie to choose (the reference's
 * routing margin under ROUTE_NEAR_TIE): another choice there is printed,
 * as a greedy step at a near-tie is. A runtime that routes wrongly parts
 * at every row. Returns the largest difference of the rows within tol. */
double family_within_band(const family_ref *r, const double *rows, float tol, const char *label)
{
	double worst = 0.0;
	int excused = 0;
	for (int i = 0; i < r->n_rows; i++) {
		if (rows[i] <= tol) {
			worst = fmax(worst, rows[i]);
			continue;
		}
		ck_assert_msg(r->route_margin[i] < ROUTE_NEAR_TIE && excused++ == 0,
			      "%s: max |logit - reference| at position %d = %g > %g (its routing margin %g)", label,
			      r->row_pos[i], rows[i], tol, r->route_margin[i]);
		printf("%s: position %d parts by %g where its experts were a near-tie (the reference's routing margin "
		       "%g)\n", label, r->row_pos[i], rows[i], r->route_margin[i]);
	}
	return worst;
}

const char *family_model_write_tmp(const family_model *fm, const char *suite, char *path, size_t size)
{
	char folder[512];
	snprintf(folder, sizeof(folder), "%s/%s", suite, fm->name);
	const char *dir = test_tmp_dir(folder);
	snprintf(path, size, "%s/%s.gguf", dir, fm->name);
	loom_runtime *rt = fm->scheme != NULL ? test_runtime("cpu-generic", 2) : NULL;
	ck_assert_msg(family_model_write(rt, fm, path), "%s: %s", fm->name, loom_last_error());
	loom_runtime_free(rt);
	return path;
}

void family_ref_free(family_ref *r)
{
	free(r->rows);
	r->rows = NULL;
}

bool family_check_on(const family_model *fm, const char *path, const family_ref *ref, const char *backend)
{
	loom_runtime *rt = test_runtime(backend, 2);
	if (rt == NULL)
		return false;
	loom_model *m = NULL;
	ck_assert_msg(loom_model_load(rt, path, NULL, &m) == LOOM_OK, "%s on %s: %s", fm->name, backend,
		      loom_last_error());
	char label[128];
	snprintf(label, sizeof(label), "%s on %s", fm->name, backend);
	float tol = family_tolerance(fm);
	double rows[MAX_ROWS];
	family_prompt_diff(m, ref, rows);
	double d = family_within_band(ref, rows, tol, label);
	int steps = family_greedy_steps(m, ref, tol, label);
	printf("%s: max |logit - %s| %.2e over the prompt rows within the band, greedy %d/%d\n", label, fm->reference, d,
	       steps, ref->n_greedy);
	loom_model_free(m);
	loom_runtime_free(rt);
	return true;
}
