/* golden_check.c - a model against llama.cpp's reference outputs; see
 * test_golden.c for the tolerances. */
#include "golden_check.h"

#include "fixture.h"
#include "golden.h"

#include <check.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

static float max_abs_diff(const float *a, const float *b, int n)
{
	float m = 0;
	for (int i = 0; i < n; i++) {
		float d = fabsf(a[i] - b[i]);
		if (!(d <= m))
			m = isnan(d) ? INFINITY : d;
	}
	return m;
}

static void check_tokens(loom_model *m, const golden_case *g)
{
	loom_token toks[512];
	size_t n = 0;
	loom_status st = loom_tokenize(m, g->prompt, strlen(g->prompt), true, false, toks, 512, &n);
	ck_assert_msg(st == LOOM_OK, "%s: tokenize: %s", g->id, loom_last_error());
	if (n == 0) /* an empty prompt is evaluated from BOS, as the reference did */
		toks[n++] = loom_token_bos(m);
	ck_assert_msg((int)n == g->n_tokens, "%s: %zu tokens, reference has %d", g->id, n, g->n_tokens);
	for (int i = 0; i < g->n_tokens; i++)
		ck_assert_msg(toks[i] == g->tokens[i], "%s: token %d is %d, reference %d", g->id, i, toks[i],
			      g->tokens[i]);
}

/* The whole prompt as one batch, logits for every position. */
static float check_prompt_logits(loom_context *ctx, const golden_case *g, float tol)
{
	int8_t want[512];
	memset(want, 1, sizeof(want));
	loom_kv_clear(ctx);
	loom_batch b = {.n_tokens = g->n_tokens, .tokens = g->tokens, .logits = want};
	loom_status st = loom_decode(ctx, &b);
	ck_assert_msg(st == LOOM_OK, "%s: decode: %s", g->id, loom_last_error());
	float worst = 0;
	for (int p = 0; p < g->n_tokens; p++) {
		const float *ref = g->logits + (size_t)p * (size_t)g->n_vocab;
		float d = max_abs_diff(loom_get_logits(ctx, p), ref, g->n_vocab);
		ck_assert_msg(d <= tol, "%s: position %d: max |logit - reference| = %g > %g", g->id, p, d, tol);
		worst = d > worst ? d : worst;
	}
	return worst;
}

/* Greedy continuation, one token per decode after the prompt. */
static float check_greedy(loom_context *ctx, const loom_model *m, const golden_case *g, float tol)
{
	const int n_vocab = loom_model_n_vocab(m);
	const float *logits = loom_get_logits(ctx, g->n_tokens - 1);
	float worst = 0;
	for (int i = 0; i < g->n_greedy; i++) {
		loom_token tok = test_argmax(logits, n_vocab);
		if (tok != g->greedy[i]) {
			ck_assert_msg(g->greedy_gap[i] <= 2 * tol,
				      "%s: greedy step %d chose %d, reference %d (reference gap %g is no near-tie)",
				      g->id, i, tok, g->greedy[i], g->greedy_gap[i]);
			printf("  %s: greedy parts from the reference at step %d, a near-tie (gap %g)\n", g->id, i,
			       g->greedy_gap[i]);
			return worst;
		}
		float d = fabsf(logits[tok] - g->greedy_logit[i]);
		ck_assert_msg(d <= tol, "%s: greedy step %d: logit %g, reference %g", g->id, i, logits[tok],
			      g->greedy_logit[i]);
		worst = d > worst ? d : worst;
		loom_batch b = {.n_tokens = 1, .tokens = &tok};
		loom_status st = loom_decode(ctx, &b);
		ck_assert_msg(st == LOOM_OK, "%s: decode step %d: %s", g->id, i, loom_last_error());
		logits = loom_get_logits(ctx, 0);
	}
	return worst;
}

/* The text of the greedy tokens, as a runtime that prints pieces shows it. */
static void check_greedy_text(const loom_model *m, const golden_case *g)
{
	char text[4096] = "", piece[256];
	size_t len = 0, n;
	if (g->greedy_text == NULL)
		return;
	for (int i = 0; i < g->n_greedy; i++) {
		loom_status st = loom_token_to_piece(m, g->greedy[i], false, piece, sizeof(piece), &n);
		ck_assert_msg(st == LOOM_OK && len + n < sizeof(text), "%s: piece of %d", g->id, g->greedy[i]);
		memcpy(text + len, piece, n);
		len += n;
	}
	text[len] = '\0';
	ck_assert_msg(strcmp(text, g->greedy_text) == 0, "%s: greedy text\n  got      '%s'\n  expected '%s'", g->id,
		      text, g->greedy_text);
}

void golden_check_model(loom_model *m, const char *golden_dir, float tol, const char *label)
{
	loom_context *ctx = test_context(m, 256, 256, LOOM_DTYPE_F32);
	const char **ids;
	int n_ids = golden_prompt_ids(golden_dir, &ids);
	ck_assert_msg(n_ids > 0, "no reference prompts in %s", golden_dir);
	for (int k = 0; k < n_ids; k++) {
		golden_case g;
		ck_assert_msg(golden_load(golden_dir, ids[k], &g), "reference data for %s/%s", golden_dir, ids[k]);
		check_tokens(m, &g);
		float dp = check_prompt_logits(ctx, &g, tol);
		float dg = check_greedy(ctx, m, &g, tol);
		check_greedy_text(m, &g);
		printf("golden %-40s %-20s max |dlogit|: prompt %.3g, greedy %.3g\n", g.id, label, dp, dg);
		golden_free(&g);
	}
	loom_context_free(ctx);
}
