/* test_kv_cache.c - the cache's cell bookkeeping: claiming cells, the
 * attention mask across sequences, removal and rollback, cells shared by
 * sequences (copy, keep), and on a real model a shared prefix, a
 * sequence saved and restored, and tokens shifted to new positions. */
#include "check_main.h"

#include "fixture.h"
#include "infer/kv_cache.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* A cache without backend memory: only the cells are exercised here. */
static loom_kv_cache make_cells(uint32_t n)
{
	loom_kv_cache kv = {.n_cells = n};
	kv.cells = malloc(n * sizeof(loom_kv_cell));
	for (uint32_t i = 0; i < n; i++)
		kv.cells[i] = (loom_kv_cell){.pos = -1};
	return kv;
}

START_TEST(claims_lowest_free_cells)
{
	loom_kv_cache kv = make_cells(8);
	int32_t pos[3] = {0, 1, 2}, seq[3] = {0, 0, 0}, cells[3];
	ck_assert_int_eq(loom_kv_claim(&kv, 3, pos, seq, cells), LOOM_OK);
	ck_assert(cells[0] == 0 && cells[1] == 1 && cells[2] == 2);
	ck_assert_uint_eq(kv.used, 3);
	ck_assert_uint_eq(loom_kv_span(&kv), 3);
	loom_kv_remove(&kv, 0, 1, 2); /* frees the cell of position 1 */
	ck_assert_uint_eq(kv.used, 2);
	int32_t p2[1] = {7}, s2[1] = {1}, c2[1];
	ck_assert_int_eq(loom_kv_claim(&kv, 1, p2, s2, c2), LOOM_OK);
	ck_assert_int_eq(c2[0], 1);
	ck_assert_int_eq(loom_kv_pos_max(&kv, 0), 2);
	ck_assert_int_eq(loom_kv_pos_max(&kv, 1), 7);
	ck_assert_int_eq(loom_kv_pos_max(&kv, 5), -1);
	free(kv.cells);
}
END_TEST

/* Three sequences decoded together, a token each per step: each gets a
 * page of its own (LOOM_KV_PAGE cells), continued while it lasts; once no
 * page is free of other sequences, the lowest free cells. */
START_TEST(sequences_claim_cells_by_pages)
{
	enum { PAGES = 4 };
	loom_kv_cache kv = make_cells(PAGES * LOOM_KV_PAGE);
	int32_t seq[3] = {0, 1, 2}, cells[3];

	for (int32_t step = 0; step < 3; step++) {
		int32_t pos[3] = {step, step, step};
		ck_assert_int_eq(loom_kv_claim(&kv, 3, pos, seq, cells), LOOM_OK);
		for (int s = 0; s < 3; s++)
			ck_assert_msg(cells[s] == s * LOOM_KV_PAGE + step, "step %d, sequence %d: cell %d", step, s,
				      cells[s]);
	}
	/* Sequence 0 fills its page, then takes the last empty one. */
	int32_t pos[LOOM_KV_PAGE], zero[LOOM_KV_PAGE] = {0}, got[LOOM_KV_PAGE];
	for (int i = 0; i < LOOM_KV_PAGE; i++)
		pos[i] = 3 + i;
	ck_assert_int_eq(loom_kv_claim(&kv, LOOM_KV_PAGE, pos, zero, got), LOOM_OK);
	ck_assert_int_eq(got[LOOM_KV_PAGE - 4], LOOM_KV_PAGE - 1);
	ck_assert_int_eq(got[LOOM_KV_PAGE - 3], 3 * LOOM_KV_PAGE);
	/* No page is empty now: sequence 3 takes the lowest free cell, in
	 * sequence 1's page, and continues from there. */
	int32_t s3[2] = {3, 3}, p3[2] = {0, 1}, c3[2];
	ck_assert_int_eq(loom_kv_claim(&kv, 2, p3, s3, c3), LOOM_OK);
	ck_assert(c3[0] == LOOM_KV_PAGE + 3 && c3[1] == LOOM_KV_PAGE + 4);
	free(kv.cells);
}
END_TEST

START_TEST(full_cache_claims_nothing)
{
	loom_kv_cache kv = make_cells(4);
	int32_t pos[5] = {0, 1, 2, 3, 4}, seq[5] = {0}, cells[5];
	ck_assert_int_eq(loom_kv_claim(&kv, 3, pos, seq, cells), LOOM_OK);
	ck_assert_int_eq(loom_kv_claim(&kv, 2, pos + 3, seq, cells), LOOM_ERR_CONTEXT_FULL);
	ck_assert_uint_eq(kv.used, 3);
	ck_assert_int_eq(kv.cells[3].pos, -1);
	loom_kv_unclaim(&kv, 3, (int32_t[]){0, 1, 2});
	ck_assert_uint_eq(kv.used, 0);
	ck_assert_uint_eq(loom_kv_span(&kv), 0);
	free(kv.cells);
}
END_TEST

/* Two sequences interleaved in one batch: each token sees its own
 * sequence's cells up to its own position, nothing else. */
START_TEST(mask_is_causal_per_sequence)
{
	loom_kv_cache kv = make_cells(6);
	int32_t pos[4] = {0, 0, 1, 1}, seq[4] = {0, 1, 0, 1}, cells[4];
	float mask[4 * 4];
	ck_assert_int_eq(loom_kv_claim(&kv, 4, pos, seq, cells), LOOM_OK);
	loom_kv_build_mask(&kv, 4, 4, pos, seq, 0, mask);
	/* cells: 0 = (s0,p0), 1 = (s1,p0), 2 = (s0,p1), 3 = (s1,p1) */
	const int allowed[4][4] = {{1, 0, 0, 0}, {0, 1, 0, 0}, {1, 0, 1, 0}, {0, 1, 0, 1}};
	for (int t = 0; t < 4; t++)
		for (int j = 0; j < 4; j++)
			ck_assert_msg((mask[t * 4 + j] == 0.0f) == (allowed[t][j] == 1) &&
					      (allowed[t][j] || isinf(mask[t * 4 + j])),
				      "token %d cell %d: mask %g", t, j, mask[t * 4 + j]);
	loom_kv_remove(&kv, -1, 0, -1);
	ck_assert_uint_eq(kv.used, 0);
	free(kv.cells);
}
END_TEST

/* A sliding window of 3: a token at position p sees its sequence's cells
 * of positions p - 2 .. p, in a prefill of 6 tokens and a decode after it
 * whose cells another sequence's interleave. */
START_TEST(sliding_window_keeps_the_last_positions)
{
	loom_kv_cache kv = make_cells(16);
	int32_t pos[6] = {0, 1, 2, 3, 4, 5}, seq[6] = {0}, cells[6];
	float mask[6 * 16];
	ck_assert_int_eq(loom_kv_claim(&kv, 6, pos, seq, cells), LOOM_OK);
	loom_kv_build_mask(&kv, 6, 6, pos, seq, 3, mask);
	for (int t = 0; t < 6; t++)
		for (int j = 0; j < 6; j++)
			ck_assert_msg((mask[t * 6 + j] == 0.0f) == (j <= t && j > t - 3) &&
					      (mask[t * 6 + j] == 0.0f || isinf(mask[t * 6 + j])),
				      "token %d cell %d: mask %g", t, j, mask[t * 6 + j]);
	int32_t other_pos[2] = {0, 1}, other_seq[2] = {1, 1}, other_cells[2];
	ck_assert_int_eq(loom_kv_claim(&kv, 2, other_pos, other_seq, other_cells), LOOM_OK);
	int32_t next_pos[1] = {6}, next_seq[1] = {0}, next_cell[1];
	ck_assert_int_eq(loom_kv_claim(&kv, 1, next_pos, next_seq, next_cell), LOOM_OK);
	uint32_t span = loom_kv_span(&kv);
	loom_kv_build_mask(&kv, span, 1, next_pos, next_seq, 3, mask);
	for (uint32_t j = 0; j < span; j++) {
		const loom_kv_cell *c = &kv.cells[j];
		bool seen = c->pos >= 0 && loom_kv_cell_has(c, 0) && c->pos >= 4 && c->pos <= 6;
		ck_assert_msg((mask[j] == 0.0f) == seen, "decode cell %u (pos %d): mask %g", j, c->pos, mask[j]);
	}
	/* No window: every earlier position. */
	loom_kv_build_mask(&kv, span, 1, next_pos, next_seq, 0, mask);
	for (uint32_t j = 0; j < span; j++)
		ck_assert((mask[j] == 0.0f) == (kv.cells[j].pos >= 0 && loom_kv_cell_has(&kv.cells[j], 0)));
	free(kv.cells);
}
END_TEST

/* A step attends to whole windows of LOOM_KV_WINDOW_STEP cells, so its
 * shapes stay put from one token to the next; cells past the span are
 * masked; a cache smaller than one window is attended whole. */
START_TEST(window_grows_in_steps_and_masks_the_rest)
{
	const uint32_t step = LOOM_KV_WINDOW_STEP;
	loom_kv_cache kv = make_cells(3 * step);
	int32_t pos[1] = {0}, seq[1] = {0}, cells[1];
	ck_assert_int_eq(loom_kv_claim(&kv, 1, pos, seq, cells), LOOM_OK);
	ck_assert_uint_eq(loom_kv_window(&kv), step);
	float *mask = malloc(step * sizeof(float));
	loom_kv_build_mask(&kv, step, 1, pos, seq, 0, mask);
	ck_assert(mask[0] == 0.0f);
	for (uint32_t j = 1; j < step; j++)
		ck_assert_msg(isinf(mask[j]) && mask[j] < 0, "cell %u past the span: mask %g", j, mask[j]);
	free(mask);
	for (int32_t p = 1; p < (int32_t)step; p++) {
		pos[0] = p;
		ck_assert_int_eq(loom_kv_claim(&kv, 1, pos, seq, cells), LOOM_OK);
		ck_assert_uint_eq(loom_kv_window(&kv), step);
	}
	pos[0] = (int32_t)step;
	ck_assert_int_eq(loom_kv_claim(&kv, 1, pos, seq, cells), LOOM_OK);
	ck_assert_uint_eq(loom_kv_window(&kv), 2 * step);
	free(kv.cells);

	kv = make_cells(step / 2 + 3);
	ck_assert_int_eq(loom_kv_claim(&kv, 1, pos, seq, cells), LOOM_OK);
	ck_assert_uint_eq(loom_kv_window(&kv), step / 2 + 3);
	free(kv.cells);
}
END_TEST

/* A model of the reference data on cpu-generic; NULL (after SKIP, the
 * runtime freed) without the reference data. */
static loom_model *open_model_file(loom_runtime **rt, const char *file)
{
	*rt = test_runtime("cpu-generic", 1);
	loom_model *m = test_model(*rt, file);
	if (m == NULL)
		loom_runtime_free(*rt);
	return m;
}

/* stories260K. */
static loom_model *open_model(loom_runtime **rt)
{
	return open_model_file(rt, "stories260K-f32.gguf");
}

static void claim_run(loom_kv_cache *kv, int32_t seq, int32_t p0, int n)
{
	int32_t pos[16], seqs[16], cells[16];
	for (int i = 0; i < n; i++) {
		pos[i] = p0 + i;
		seqs[i] = seq;
	}
	ck_assert_int_eq(loom_kv_claim(kv, n, pos, seqs, cells), LOOM_OK);
}

/* A copied prefix is shared: no new cells, visible to both sequences,
 * freed only when neither holds it. */
START_TEST(copied_cells_are_shared)
{
	loom_kv_cache kv = make_cells(16);
	claim_run(&kv, 0, 0, 4);
	loom_kv_copy(&kv, 0, LOOM_MAX_SEQ - 1, 0, -1);
	ck_assert_uint_eq(kv.used, 4);
	ck_assert_int_eq(loom_kv_pos_max(&kv, LOOM_MAX_SEQ - 1), 3);
	int32_t pos[1] = {4}, seq[1] = {LOOM_MAX_SEQ - 1};
	float mask[4];
	loom_kv_build_mask(&kv, 4, 1, pos, seq, 0, mask);
	for (int j = 0; j < 4; j++)
		ck_assert_msg(mask[j] == 0.0f, "cell %d hidden from the copy", j);
	loom_kv_remove(&kv, 0, 0, -1);
	ck_assert_uint_eq(kv.used, 4);
	ck_assert_int_eq(loom_kv_pos_max(&kv, 0), -1);
	loom_kv_remove(&kv, LOOM_MAX_SEQ - 1, 2, -1);
	ck_assert_uint_eq(kv.used, 2);
	loom_kv_remove(&kv, -1, 0, -1);
	ck_assert_uint_eq(kv.used, 0);
	free(kv.cells);
}
END_TEST

/* Copying over a range of dst drops dst's own cells there first. */
START_TEST(a_copy_replaces_the_range_of_dst)
{
	loom_kv_cache kv = make_cells(16);
	claim_run(&kv, 0, 0, 3);
	claim_run(&kv, 1, 0, 2);
	ck_assert_uint_eq(kv.used, 5);
	loom_kv_copy(&kv, 0, 1, 0, 2);
	ck_assert_uint_eq(kv.used, 3);
	int32_t pos[1] = {5}, seq[1] = {1};
	float mask[3];
	loom_kv_build_mask(&kv, 3, 1, pos, seq, 0, mask);
	ck_assert(mask[0] == 0.0f && mask[1] == 0.0f && isinf(mask[2]));
	free(kv.cells);
}
END_TEST

START_TEST(keep_drops_every_other_sequence)
{
	loom_kv_cache kv = make_cells(16);
	claim_run(&kv, 0, 0, 2);
	loom_kv_copy(&kv, 0, 1, 0, -1);
	claim_run(&kv, 1, 2, 2);
	claim_run(&kv, 2, 0, 3);
	ck_assert_uint_eq(kv.used, 7);
	loom_kv_keep(&kv, 1);
	ck_assert_uint_eq(kv.used, 4);
	ck_assert_int_eq(loom_kv_pos_max(&kv, 0), -1);
	ck_assert_int_eq(loom_kv_pos_max(&kv, 2), -1);
	ck_assert_int_eq(loom_kv_pos_max(&kv, 1), 3);
	loom_kv_remove(&kv, 1, 0, -1);
	ck_assert_uint_eq(kv.used, 0);
	free(kv.cells);
}
END_TEST

/* On a real model: a prompt evaluated once as sequence 0 and copied to
 * sequence 1 continues in both, in one batch, exactly as sequence 0 alone
 * continues it. */
START_TEST(a_shared_prefix_continues_as_its_own)
{
	loom_runtime *rt;
	loom_model *m = open_model(&rt);
	if (m == NULL)
		return;
	const int32_t n_vocab = loom_model_n_vocab(m);
	loom_token toks[32], next[2] = {42, 42};
	size_t n = 0;
	ck_assert(loom_tokenize(m, "Once upon a time", 16, true, false, toks, 32, &n) == LOOM_OK);
	loom_batch prompt = {.n_tokens = (int32_t)n, .tokens = toks};
	float *want = malloc((size_t)n_vocab * sizeof(float));

	loom_context *ctx = test_context(m, 64, 64, LOOM_DTYPE_F32);
	loom_batch one = {.n_tokens = 1, .tokens = next};
	ck_assert(loom_decode(ctx, &prompt) == LOOM_OK && loom_decode(ctx, &one) == LOOM_OK);
	memcpy(want, loom_get_logits(ctx, 0), (size_t)n_vocab * sizeof(float));
	loom_context_free(ctx);

	ctx = test_context(m, 64, 64, LOOM_DTYPE_F32);
	ck_assert(loom_decode(ctx, &prompt) == LOOM_OK);
	ck_assert(loom_kv_seq_copy(ctx, 0, 1, 0, -1) == LOOM_OK);
	ck_assert_uint_eq(loom_kv_used(ctx), n);
	int32_t seqs[2] = {0, 1}, pos[2] = {(int32_t)n, (int32_t)n};
	int8_t logits[2] = {1, 1};
	loom_batch both = {.n_tokens = 2, .tokens = next, .pos = pos, .seq_id = seqs, .logits = logits};
	ck_assert(loom_decode(ctx, &both) == LOOM_OK);
	for (int i = 0; i < 2; i++) {
		const float *got = loom_get_logits(ctx, i);
		double worst = 0;
		for (int32_t v = 0; v < n_vocab; v++)
			worst = fmax(worst, fabs((double)got[v] - want[v]));
		/* A batch of two rows may sum in another order than one row. */
		ck_assert_msg(worst < 1e-5, "sequence %d: logits differ by %g", i, worst);
	}
	ck_assert(loom_kv_seq_keep(ctx, 1) == LOOM_OK);
	ck_assert_uint_eq(loom_kv_used(ctx), n + 1);
	ck_assert_int_eq(loom_kv_seq_copy(ctx, 0, LOOM_MAX_SEQ, 0, -1), LOOM_ERR_INVALID_ARGUMENT);
	ck_assert_int_eq(loom_kv_seq_keep(ctx, -1), LOOM_ERR_INVALID_ARGUMENT);
	loom_context_free(ctx);
	free(want);
	loom_model_free(m);
	loom_runtime_free(rt);
}
END_TEST

/* The cache types a saved sequence and a shift are tried with. */
static const loom_dtype cache_types[] = {LOOM_DTYPE_F16, LOOM_DTYPE_Q8_0, LOOM_DTYPE_Q4_0};
#define N_CACHE_TYPES 3

/* A sequence saved from one context and loaded into another (under
 * another id, its cells elsewhere) continues exactly as the original. */
START_TEST(a_saved_sequence_continues_where_it_is_loaded)
{
	const loom_dtype type = cache_types[_i];
	loom_runtime *rt;
	/* Quantized caches hold blocks of 32 per head: a model with heads of 32. */
	loom_model *m = open_model_file(&rt, type == LOOM_DTYPE_F16 ? "stories260K-f32.gguf" : "stories-llama-d256-f32.gguf");
	if (m == NULL)
		return;
	const int32_t n_vocab = loom_model_n_vocab(m);
	loom_token toks[32], other[32], next = 42;
	size_t n = 0, n_other = 0, size = 0, written = 0;
	ck_assert(loom_tokenize(m, "Once upon a time", 16, true, false, toks, 32, &n) == LOOM_OK);
	ck_assert(loom_tokenize(m, "The dog ran", 11, true, false, other, 32, &n_other) == LOOM_OK);
	float *want = malloc((size_t)n_vocab * sizeof(float));
	loom_batch prompt = {.n_tokens = (int32_t)n, .tokens = toks};

	loom_context *a = test_context(m, 64, 64, type);
	ck_assert(loom_decode(a, &prompt) == LOOM_OK);
	ck_assert(loom_kv_seq_state_size(a, 0, &size) == LOOM_OK);
	unsigned char *state = malloc(size);
	ck_assert_int_eq(loom_kv_seq_save(a, 0, state, size - 1, &written), LOOM_ERR_BUFFER_TOO_SMALL);
	ck_assert_uint_eq(written, size);
	ck_assert(loom_kv_seq_save(a, 0, state, size, &written) == LOOM_OK && written == size);
	loom_batch step = {.n_tokens = 1, .tokens = &next};
	ck_assert(loom_decode(a, &step) == LOOM_OK);
	memcpy(want, loom_get_logits(a, 0), (size_t)n_vocab * sizeof(float));
	loom_context_free(a);

	/* Another context, its first cells taken by another sequence. */
	loom_context *b = test_context(m, 64, 64, type);
	int32_t seq5[32];
	for (size_t i = 0; i < n_other; i++)
		seq5[i] = 5;
	loom_batch filler = {.n_tokens = (int32_t)n_other, .tokens = other, .seq_id = seq5};
	ck_assert(loom_decode(b, &filler) == LOOM_OK);
	ck_assert_msg(loom_kv_seq_load(b, 3, state, size) == LOOM_OK, "%s", loom_last_error());
	ck_assert_int_eq(loom_kv_seq_pos_max(b, 3), (int32_t)n - 1);
	ck_assert_uint_eq(loom_kv_used(b), n + n_other);
	int32_t seq3 = 3, pos = (int32_t)n;
	loom_batch step3 = {.n_tokens = 1, .tokens = &next, .pos = &pos, .seq_id = &seq3};
	ck_assert(loom_decode(b, &step3) == LOOM_OK);
	ck_assert(memcmp(want, loom_get_logits(b, 0), (size_t)n_vocab * sizeof(float)) == 0);

	/* Bytes that are not a state of this context are refused, naming why,
	 * and leave the cache as it was. */
	uint32_t used = loom_kv_used(b);
	ck_assert_int_eq(loom_kv_seq_load(b, 4, state, size - 1), LOOM_ERR_BAD_FORMAT);
	ck_assert_int_eq(loom_kv_seq_load(b, 4, state, 8), LOOM_ERR_BAD_FORMAT);
	state[0] ^= 0xff;
	ck_assert_int_eq(loom_kv_seq_load(b, 4, state, size), LOOM_ERR_BAD_FORMAT);
	state[0] ^= 0xff;
	ck_assert_uint_eq(loom_kv_used(b), used);
	loom_context_free(b);
	loom_context *f32 = test_context(m, 64, 64, LOOM_DTYPE_F32);
	ck_assert_int_eq(loom_kv_seq_load(f32, 0, state, size), LOOM_ERR_BAD_FORMAT);
	ck_assert_msg(strstr(loom_last_error(), "cache type") != NULL, "%s", loom_last_error());
	loom_context_free(f32);

	free(state);
	free(want);
	loom_model_free(m);
	loom_runtime_free(rt);
}
END_TEST

/* Evaluates tokens as sequence 0 at positions from p0. */
static void decode_at(loom_context *ctx, const loom_token *toks, size_t n, int32_t p0)
{
	int32_t pos[64];
	for (size_t i = 0; i < n; i++)
		pos[i] = p0 + (int32_t)i;
	loom_batch b = {.n_tokens = (int32_t)n, .tokens = toks, .pos = pos};
	ck_assert_msg(loom_decode(ctx, &b) == LOOM_OK, "%s", loom_last_error());
}

static double max_diff(const float *a, const float *b, int32_t n)
{
	double worst = 0;
	for (int32_t i = 0; i < n; i++)
		worst = fmax(worst, fabs((double)a[i] - b[i]));
	return worst;
}

/* A text evaluated at positions 20 on, then moved to 0 on, continues as
 * the same text evaluated at 0: every key turned by -20 is the key of its
 * new position, and what the layers computed depends only on distances,
 * which the move keeps. Without the turn (or turned the wrong way) the
 * next token's query would meet keys 20 positions off. */
START_TEST(shifted_tokens_continue_as_if_evaluated_there)
{
	loom_runtime *rt;
	loom_model *m = open_model(&rt);
	if (m == NULL)
		return;
	const int32_t n_vocab = loom_model_n_vocab(m);
	loom_token x[32], next = 42;
	size_t n;
	ck_assert(loom_tokenize(m, "Once upon a time there was a little girl", 40, true, false, x, 32, &n) == LOOM_OK);
	float *want = malloc((size_t)n_vocab * sizeof(float));

	loom_context *ctx = test_context(m, 128, 64, LOOM_DTYPE_F32);
	decode_at(ctx, x, n, 0);
	decode_at(ctx, &next, 1, (int32_t)n);
	memcpy(want, loom_get_logits(ctx, 0), (size_t)n_vocab * sizeof(float));
	loom_context_free(ctx);

	ctx = test_context(m, 128, 4, LOOM_DTYPE_F32); /* moved in pieces of 4 */
	for (size_t i = 0; i < n; i += 4)
		decode_at(ctx, x + i, n - i < 4 ? n - i : 4, 20 + (int32_t)i);
	ck_assert_msg(loom_kv_seq_shift(ctx, 0, 0, -1, -20) == LOOM_OK, "%s", loom_last_error());
	ck_assert_int_eq(loom_kv_seq_pos_max(ctx, 0), (int32_t)n - 1);
	decode_at(ctx, &next, 1, (int32_t)n);
	double d = max_diff(want, loom_get_logits(ctx, 0), n_vocab);
	ck_assert_msg(d < 1e-4, "moved: logits differ by %g", d);
	loom_context_free(ctx);

	/* Moving before position 0 drops those tokens. */
	ctx = test_context(m, 128, 64, LOOM_DTYPE_F32);
	decode_at(ctx, x, n, 0);
	ck_assert(loom_kv_seq_shift(ctx, 0, 0, -1, -2) == LOOM_OK);
	ck_assert_uint_eq(loom_kv_used(ctx), n - 2);
	ck_assert_int_eq(loom_kv_seq_pos_max(ctx, 0), (int32_t)n - 3);
	loom_context_free(ctx);
	free(want);
	loom_model_free(m);

	/* Learned positions are in the hidden states: nothing can move. */
	m = test_model(rt, "stories-gpt2-d128-f16.gguf");
	ctx = test_context(m, 64, 64, LOOM_DTYPE_F32);
	ck_assert_int_eq(loom_kv_seq_shift(ctx, 0, 0, -1, 3), LOOM_ERR_UNSUPPORTED);
	ck_assert_msg(strstr(loom_last_error(), "not rotary") != NULL, "%s", loom_last_error());
	loom_context_free(ctx);
	loom_model_free(m);
	loom_runtime_free(rt);
}
END_TEST

/* Decode steps of one token run the step graph built for the first of
 * them until the cache's window grows: one at a time through 300
 * positions, past the first window of LOOM_KV_WINDOW_STEP cells, they give
 * the logits of the same tokens decoded 50 at a time. A graph kept past the
 * boundary would attend to the first window alone. */
START_TEST(single_steps_past_a_window_see_every_cell)
{
	loom_runtime *rt;
	loom_model *m = open_model(&rt);
	if (m == NULL)
		return;
	const int32_t n_vocab = loom_model_n_vocab(m);
	enum { N = 300, CHUNK = 50 };
	ck_assert(N > LOOM_KV_WINDOW_STEP);
	loom_token toks[N];
	for (int i = 0; i < N; i++)
		toks[i] = 1 + (37 * i) % (n_vocab - 1);
	float *want = malloc((size_t)n_vocab * sizeof(float));

	loom_context *ctx = test_context(m, 512, CHUNK, LOOM_DTYPE_F32);
	for (int i = 0; i < N; i += CHUNK)
		decode_at(ctx, toks + i, CHUNK, i);
	memcpy(want, loom_get_logits(ctx, CHUNK - 1), (size_t)n_vocab * sizeof(float));
	loom_context_free(ctx);

	ctx = test_context(m, 512, 1, LOOM_DTYPE_F32);
	for (int i = 0; i < N; i++)
		decode_at(ctx, toks + i, 1, i);
	double d = max_diff(want, loom_get_logits(ctx, 0), n_vocab);
	ck_assert_msg(d < 1e-4, "one token a step: the last logits differ by %g from 50 a step", d);
	loom_context_free(ctx);
	free(want);
	loom_model_free(m);
	loom_runtime_free(rt);
}
END_TEST

static Suite *kv_suite(void)
{
	Suite *s = suite_create("kv_cache");
	TCase *tc = tcase_create("cells");
	tcase_add_test(tc, claims_lowest_free_cells);
	tcase_add_test(tc, sequences_claim_cells_by_pages);
	tcase_add_test(tc, full_cache_claims_nothing);
	tcase_add_test(tc, mask_is_causal_per_sequence);
	tcase_add_test(tc, sliding_window_keeps_the_last_positions);
	tcase_add_test(tc, window_grows_in_steps_and_masks_the_rest);
	tcase_add_test(tc, single_steps_past_a_window_see_every_cell);
	tcase_add_test(tc, copied_cells_are_shared);
	tcase_add_test(tc, a_copy_replaces_the_range_of_dst);
	tcase_add_test(tc, keep_drops_every_other_sequence);
	tcase_add_test(tc, a_shared_prefix_continues_as_its_own);
	tcase_add_loop_test(tc, a_saved_sequence_continues_where_it_is_loaded, 0, N_CACHE_TYPES);
	tcase_add_test(tc, shifted_tokens_continue_as_if_evaluated_there);
	suite_add_tcase(s, tc);
	return s;
}

LOOM_TEST_MAIN(kv_suite)
