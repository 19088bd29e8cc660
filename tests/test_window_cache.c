/* test_window_cache.c - the windowed layers' own cache, which keeps only
 * what their windows can still see: its cells dropped and its room grown
 * (cell bookkeeping), and on a model with windowed layers the same logits
 * as a cache that keeps everything, through several sequences, a cut back
 * within and past what it keeps, a saved and restored sequence, and a
 * shift. */
#include "check_main.h"
#include "family_fixture.h"
#include "fixture.h"
#include "infer/context.h"
#include "infer/kv_cache.h"
#include "testdata.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A cache without backend memory: only the cells are exercised. */
static loom_kv_cache make_cells(uint32_t n)
{
	loom_kv_cache kv = {.n_cells = n, .layers = LOOM_KV_WINDOWED_LAYERS};
	kv.cells = malloc(n * sizeof(loom_kv_cell));
	for (uint32_t i = 0; i < n; i++)
		kv.cells[i] = (loom_kv_cell){.pos = -1};
	return kv;
}

/* Positions [p0, p1) of seq claimed in kv. */
static void claim_run(loom_kv_cache *kv, int32_t seq, int32_t p0, int32_t p1)
{
	for (int32_t p = p0; p < p1; p++) {
		int32_t c;
		ck_assert_int_eq(loom_kv_claim(kv, 1, &p, &seq, &c), LOOM_OK);
	}
}

static bool holds(const loom_kv_cache *kv, int32_t seq, int32_t pos)
{
	for (uint32_t j = 0; j < kv->n_cells; j++)
		if (kv->cells[j].pos == pos && loom_kv_cell_has(&kv->cells[j], seq))
			return true;
	return false;
}

/* With room to spare nothing is dropped; short of room, each sequence's
 * cells before its coming window and the slack go: for the sequence in
 * the batch before its earliest token's, for another before its next
 * token's. Then the full cache's cells below the windowed cache's earliest
 * are what a cut back cannot reach. */
START_TEST(drops_what_no_window_will_see)
{
	enum { W = 8, CELLS = 256 };
	const int32_t slack = LOOM_KV_WINDOW_SLACK;
	loom_kv_cache full = make_cells(1024), win = make_cells(CELLS);
	claim_run(&full, 0, 0, 200);
	claim_run(&win, 0, 0, 200);
	claim_run(&full, 1, 0, 40);
	claim_run(&win, 1, 0, 40);
	int32_t pos[16], seq[16];
	for (int i = 0; i < 16; i++) {
		pos[i] = 200 + i;
		seq[i] = 0;
	}
	/* 240 used, 16 free: room without dropping. */
	ck_assert_int_eq(loom_kv_make_room(&win, NULL, 16, pos, seq, W, CELLS), LOOM_OK);
	ck_assert_uint_eq(win.used, 240);
	ck_assert_int_eq(loom_kv_resume_min(&full, &win, 0, W), 0);
	int32_t cells[16];
	ck_assert_int_eq(loom_kv_claim(&full, 16, pos, seq, cells), LOOM_OK);
	ck_assert_int_eq(loom_kv_claim(&win, 16, pos, seq, cells), LOOM_OK);
	/* Full: the next batch makes seq 0 keep [216 - W + 1 - slack, ...) and
	 * seq 1 (next token 40) [40 - W + 1 - slack, ...), all of its 40. */
	for (int i = 0; i < 16; i++)
		pos[i] = 216 + i;
	ck_assert_int_eq(loom_kv_make_room(&win, NULL, 16, pos, seq, W, CELLS), LOOM_OK);
	const int32_t kept = 216 + 1 - W - slack;
	for (int32_t p = 0; p < 216; p++)
		ck_assert_msg(holds(&win, 0, p) == (p >= kept), "position %d of sequence 0", p);
	for (int32_t p = 0; p < 40; p++)
		ck_assert(holds(&win, 1, p));
	ck_assert_uint_eq(win.used, (uint32_t)(216 - kept + 40));
	/* The cut back: continuing at p sees [p - W + 1, p); the latest
	 * dropped position is kept - 1. */
	ck_assert_int_eq(loom_kv_resume_min(&full, &win, 0, W), kept - 1 + W);
	ck_assert_int_eq(loom_kv_resume_min(&full, &win, 1, W), 0);
	int32_t at = kept - 1 + W, s0 = 0;
	ck_assert_int_eq(loom_kv_check_windows(&full, &win, 1, &at, &s0, W), LOOM_OK);
	at--;
	ck_assert_int_eq(loom_kv_check_windows(&full, &win, 1, &at, &s0, W), LOOM_ERR_INVALID_ARGUMENT);
	ck_assert_msg(strstr(loom_last_error(), "sequence 0") != NULL && strstr(loom_last_error(), "decode it again"),
		      "%s", loom_last_error());
	/* A sequence dropped whole starts afresh. */
	loom_kv_remove(&full, 0, 0, -1);
	loom_kv_remove(&win, 0, 0, -1);
	ck_assert_int_eq(loom_kv_resume_min(&full, &win, 0, W), 0);
	free(full.cells);
	free(win.cells);
}
END_TEST

/* The windowed layers as llama.cpp's list form of the pattern: the caches
 * split as the list says (layers 2 and 7 global, which no period gives);
 * a list of another length than the layers is refused by name. */
START_TEST(windowed_layers_as_a_list)
{
	static const uint32_t flags[8] = {1, 1, 0, 1, 1, 1, 1, 0};
	family_model fm = *family_model_named("gemma3-f32");
	loom_runtime *rt = test_runtime("cpu-generic", 1);
	for (int n = 8; n >= 7; n--) {
		char path[4200];
		fm.config.window_layers = flags;
		fm.config.n_window_layers = n;
		snprintf(path, sizeof(path), "%s/gemma3-listed-%d.gguf", test_tmp_dir("window_list"), n);
		ck_assert(family_model_write(NULL, &fm, path));
		loom_model *m = NULL;
		if (n == 7) {
			ck_assert_int_eq(loom_model_load(rt, path, NULL, &m), LOOM_ERR_BAD_FORMAT);
			ck_assert_ptr_null(m);
			ck_assert_msg(strstr(loom_last_error(), "'gemma3.attention.sliding_window_pattern' has 7 entries for 8 "
							       "layers") != NULL, "%s", loom_last_error());
			continue;
		}
		ck_assert_msg(loom_model_load(rt, path, NULL, &m) == LOOM_OK, "%s", loom_last_error());
		loom_context *ctx = test_context(m, 512, 16, LOOM_DTYPE_F16);
		for (int il = 0; il < 8; il++) {
			ck_assert(loom_kv_holds(&ctx->kv, m, il) == (flags[il] == 0));
			ck_assert(loom_kv_holds(&ctx->kv_swa, m, il) == (flags[il] != 0));
		}
		loom_context_free(ctx);
		loom_model_free(m);
	}
	loom_runtime_free(rt);
}
END_TEST

/* Each cache holds its layers' rows: Gemma 3's global layer in a cache of
 * the context's 2048 cells, its windowed layers in one of 256, which 1600
 * tokens of one sequence do not grow. */
START_TEST(each_cache_holds_its_layers)
{
	loom_runtime *rt = test_runtime("cpu-generic", 1);
	loom_model *m = family_model_load(rt, "gemma3-f32", "window_layers");
	loom_context *ctx = test_context(m, 2048, 16, LOOM_DTYPE_F16);
	/* Gemma 3: every sixth layer global (layer 5 of 8). */
	for (int il = 0; il < 8; il++) {
		ck_assert(loom_kv_holds(&ctx->kv, m, il) == (il == 5));
		ck_assert(loom_kv_holds(&ctx->kv_swa, m, il) == (il != 5));
		ck_assert((ctx->kv.k[il].data != NULL) == (il == 5));
	}
	/* A window of 6 with its slack and a batch of 16: one step of 256,
	 * however long the sequence. */
	ck_assert_uint_eq(ctx->kv_swa.n_cells, LOOM_KV_WINDOW_STEP);
	ck_assert_uint_eq(ctx->kv.n_cells, 2048);
	const int32_t n_vocab = loom_model_n_vocab(m);
	for (int32_t p = 0; p < 1600; p += 16) {
		loom_token tok[16];
		for (int i = 0; i < 16; i++)
			tok[i] = 3 + (p + i) * 7 % (n_vocab - 3);
		loom_batch b = {.n_tokens = 16, .tokens = tok};
		ck_assert_msg(loom_decode(ctx, &b) == LOOM_OK, "%s", loom_last_error());
	}
	ck_assert_uint_eq(ctx->kv.used, 1600);
	ck_assert_uint_eq(ctx->kv_swa.n_cells, LOOM_KV_WINDOW_STEP);
	ck_assert_uint_le(ctx->kv_swa.used, LOOM_KV_WINDOW_STEP);
	/* Bytes: the global layer's 2048 cells, the windowed layers' 256. */
	const size_t row = loom_dtype_row_bytes(LOOM_DTYPE_F16, 2 * 32);
	ck_assert_uint_eq(ctx->kv.buf.size, 2 * 2048 * row);
	ck_assert_uint_eq(ctx->kv_swa.buf.size, 7 * 2 * LOOM_KV_WINDOW_STEP * row);
	loom_context_free(ctx);
	loom_model_free(m);
	loom_runtime_free(rt);
}
END_TEST

enum { N_SEQ = 6, PROMPT = 8, STEPS = 92, N_CTX = 1024 };

typedef struct twin {
	loom_context *small; /* a windowed cache that drops and grows */
	loom_context *whole; /* a windowed cache of n_ctx cells: it never drops */
	int32_t n_vocab;
	double worst, scale;
} twin;

/* The same batch through both contexts; their logits for it compared. */
static void both(twin *t, const loom_token *tok, const int32_t *pos, const int32_t *seq, int n)
{
	int8_t want[PROMPT];
	for (int i = 0; i < n; i++)
		want[i] = i == n - 1;
	loom_batch b = {.n_tokens = n, .tokens = (loom_token *)tok, .pos = (int32_t *)pos, .seq_id = (int32_t *)seq,
			.logits = want};
	ck_assert_msg(loom_decode(t->small, &b) == LOOM_OK, "%s", loom_last_error());
	ck_assert_msg(loom_decode(t->whole, &b) == LOOM_OK, "%s", loom_last_error());
	const float *a = loom_get_logits(t->small, n - 1), *w = loom_get_logits(t->whole, n - 1);
	for (int32_t v = 0; v < t->n_vocab; v++) {
		t->worst = fmax(t->worst, fabs((double)a[v] - w[v]));
		t->scale = fmax(t->scale, fabs((double)w[v]));
	}
}

static loom_token token_at(int32_t seq, int32_t pos, int32_t n_vocab)
{
	return 3 + (loom_token)((seq * 131 + pos * 37) % (n_vocab - 3));
}

/* One token at pos for seq through both. */
static void step(twin *t, int32_t seq, int32_t pos)
{
	loom_token tok = token_at(seq, pos, t->n_vocab);
	both(t, &tok, &pos, &seq, 1);
}

/* Six sequences of 100 tokens on a model with windows of 6, round robin:
 * the windowed layers' cache (first 256 cells) drops what the windows no
 * longer see and grows once, to 512 of the 1024, and the logits are those
 * of a context whose windowed cache keeps everything. Then a sequence cut
 * back within the slack continues; cut back to its start, loom_decode refuses
 * it by name and loom_kv_seq_resume_min says where it could go on; a
 * sequence saved and loaded under another id, and a shift of one, continue
 * as in the other context. */
START_TEST(a_windowed_cache_computes_as_a_whole_one)
{
	loom_runtime *rt = test_runtime("cpu-generic", 2);
	loom_model *m = family_model_load(rt, "gemma3-f32", "window_twin");
	twin t = {.small = test_context(m, N_CTX, PROMPT, LOOM_DTYPE_F32),
		  .whole = test_context(m, N_CTX, N_CTX, LOOM_DTYPE_F32),
		  .n_vocab = loom_model_n_vocab(m)};
	ck_assert_uint_eq(t.small->kv_swa.n_cells, 256);
	ck_assert_uint_eq(t.whole->kv_swa.n_cells, N_CTX);

	for (int32_t s = 0; s < N_SEQ; s++) {
		loom_token tok[PROMPT];
		int32_t pos[PROMPT], seq[PROMPT];
		for (int i = 0; i < PROMPT; i++) {
			pos[i] = i;
			seq[i] = s;
			tok[i] = token_at(s, i, t.n_vocab);
		}
		both(&t, tok, pos, seq, PROMPT);
	}
	for (int32_t k = 0; k < STEPS; k++)
		for (int32_t s = 0; s < N_SEQ; s++)
			step(&t, s, PROMPT + k);
	const int32_t end = PROMPT + STEPS;
	printf("%d sequences of %d tokens: the windowed cache holds %u of its %u cells (the whole one %u of %u); "
	       "max |dlogit| %.2e of %.2e\n",
	       N_SEQ, end, t.small->kv_swa.used, t.small->kv_swa.n_cells, t.whole->kv_swa.used,
	       t.whole->kv_swa.n_cells, t.worst, t.scale);
	ck_assert_uint_eq(t.small->kv.used, N_SEQ * end);
	ck_assert_uint_eq(t.small->kv_swa.n_cells, 512);
	ck_assert_uint_lt(t.small->kv_swa.used, N_SEQ * end);
	ck_assert_uint_eq(t.whole->kv_swa.used, N_SEQ * end);
	ck_assert_msg(t.worst <= 1e-5 * t.scale, "the windowed cache's logits differ by %g", t.worst);

	/* Cut back by 10, within the slack: both go on alike. */
	for (int i = 0; i < 2; i++)
		ck_assert(loom_kv_seq_remove(i ? t.whole : t.small, 0, end - 10, -1) == LOOM_OK);
	ck_assert_int_le(loom_kv_seq_resume_min(t.small, 0), end - 10);
	step(&t, 0, end - 10);

	/* Cut back to position 10: past what the small cache kept. */
	const int32_t back = 10;
	ck_assert_int_gt(loom_kv_seq_resume_min(t.small, 1), back);
	ck_assert_int_eq(loom_kv_seq_resume_min(t.whole, 1), 0);
	ck_assert(loom_kv_seq_remove(t.small, 1, back, -1) == LOOM_OK);
	loom_token tok = token_at(1, back, t.n_vocab);
	int32_t pos = back, seq = 1;
	loom_batch b = {.n_tokens = 1, .tokens = &tok, .pos = &pos, .seq_id = &seq};
	ck_assert_int_eq(loom_decode(t.small, &b), LOOM_ERR_INVALID_ARGUMENT);
	ck_assert_msg(strstr(loom_last_error(), "sequence 1") != NULL, "%s", loom_last_error());
	ck_assert_uint_eq(t.small->kv.used, (uint32_t)(N_SEQ * end - 9 - (end - back)));

	/* Sequence 2 saved, loaded as 7, both go on alike. */
	for (int i = 0; i < 2; i++) {
		loom_context *ctx = i ? t.whole : t.small;
		size_t size, written;
		ck_assert(loom_kv_seq_state_size(ctx, 2, &size) == LOOM_OK);
		void *state = malloc(size);
		ck_assert(loom_kv_seq_save(ctx, 2, state, size, &written) == LOOM_OK && written == size);
		ck_assert_msg(loom_kv_seq_load(ctx, 7, state, size) == LOOM_OK, "%s", loom_last_error());
		free(state);
	}
	ck_assert_int_eq(loom_kv_seq_resume_min(t.small, 7), loom_kv_seq_resume_min(t.small, 2));
	step(&t, 7, end);

	/* Sequence 3 shifted as a context shift does: 40 positions after the
	 * first 4 dropped, the rest moved down over them. */
	for (int i = 0; i < 2; i++) {
		loom_context *ctx = i ? t.whole : t.small;
		ck_assert(loom_kv_seq_remove(ctx, 3, 4, 44) == LOOM_OK);
		ck_assert(loom_kv_seq_shift(ctx, 3, 44, -1, -40) == LOOM_OK);
	}
	step(&t, 3, end - 40);
	printf("after a cut back, a restored sequence and a shift: max |dlogit| %.2e\n", t.worst);
	ck_assert_msg(t.worst <= 1e-5 * t.scale, "the windowed cache's logits differ by %g", t.worst);

	loom_context_free(t.small);
	loom_context_free(t.whole);
	loom_model_free(m);
	loom_runtime_free(rt);
}
END_TEST

static Suite *window_cache_suite(void)
{
	Suite *s = suite_create("window_cache");
	TCase *tc = tcase_create("window_cache");
	tcase_add_test(tc, drops_what_no_window_will_see);
	tcase_add_test(tc, each_cache_holds_its_layers);
	tcase_add_test(tc, windowed_layers_as_a_list);
	tcase_add_test(tc, a_windowed_cache_computes_as_a_whole_one);
	suite_add_tcase(s, tc);
	return s;
}

LOOM_TEST_MAIN(window_cache_suite)
