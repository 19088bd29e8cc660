/*
 * test_synthetic.c - random-weight llama models of awkward shapes, written
 * by synth_model, loaded by loom and checked against ref_forward (a plain
 * double-precision forward pass over the same file bytes), for every weight
 * type loom multiplies by (F32, F16, BF16, Q8_0) on every CPU backend this
 * machine can run.
 *
 * Each model sees one fixed sequence of 17 random tokens: the first 9 as
 * one batch with logits at every position, the other 8 one decode at a time
 * (the KV cache path). Around that, the cache and batch bookkeeping: a
 * prompt split in two batches, two sequences interleaved in one batch,
 * removing a sequence's tail and evaluating it again, decoding into the
 * holes another sequence left, a full context, 1 vs 2 threads, and an F16
 * KV cache against an F32 one.
 *
 * Logit tolerances are relative to the logit scale S = max |reference
 * logit| over the sequence (about 4 for these models), because an absolute
 * bound would mean something different for every shape. The reference
 * rounds each matmul input to the weight's dot type as loom does, so what
 * is left is f32 summation noise plus "flips": inputs that loom's f32 value
 * and the reference's double value round to neighbouring steps. One flip
 * moves a logit by about 1e-4 S for F16, 1e-3 S for BF16 and 2.5e-3 S for
 * Q8_0 (measured by moving one input of the output head by one step).
 *   F32:  1e-4 S; measured under 1e-6 S.
 *   F16:  1e-3 S; measured up to 5.5e-4 S (F16's fine steps flip several
 *         times per sequence). Not rounding at all would give about 9e-4 S
 *         here, so test_backend_ops, not this suite, shows that loom rounds.
 *   BF16: 5e-3 S; measured under 2e-7 S in a Release build (no flips),
 *         2.2e-3 S for one model on cpu-avx512 in a Debug build, where the
 *         compiler fuses no multiply-adds and a flip happens. Without the
 *         rounding the error would be 1.6e-3 to 4.6e-3 S, so here too
 *         test_backend_ops is what shows that loom rounds.
 *   Q8_0: 5e-3 S, two flips; measured under 1e-7 S (no flips: the integer
 *         dot products leave almost no f32 noise to flip on). Without the
 *         rounding the error would be 1.1e-2 to 1.9e-2 S.
 * Where loom is compared with itself (batch splits, sequences) the same
 * arithmetic runs on the same rows, so the results must agree to f32 noise,
 * 1e-5 S; 1 and 2 threads must agree bit for bit. An F16 KV cache rounds
 * keys, values, queries and attention weights to fp16 (as llama.cpp does);
 * against the F32 cache it may move logits by 1e-2 S, more where those
 * roundings flip coarser BF16 or Q8_0 inputs downstream (measured: F32 and
 * F16 weights under 2e-3 S, BF16 under 8e-3 S, Q8_0 under 2.2e-2 S).
 */
#include "check_main.h"
#include "cpu_ref.h"
#include "fixture.h"
#include "ref_forward.h"
#include "synth_model.h"
#include "testdata.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define N_PROMPT 9
#define N_STEPS 8
#define N_SEQ (N_PROMPT + N_STEPS)

#define TOL_SELF 1e-5

/* Tolerances relative to the logit scale; see the top of the file. */
typedef struct weight_type {
	loom_dtype type;
	double tol;    /* against the reference */
	double tol_kv; /* F16 KV cache against F32 */
} weight_type;

static const weight_type weight_types[] = {
	{LOOM_DTYPE_F32, 1e-4, 1e-2},
	{LOOM_DTYPE_F16, 1e-3, 1e-2},
	{LOOM_DTYPE_BF16, 5e-3, 2e-2},
	{LOOM_DTYPE_Q8_0, 5e-3, 5e-2},
};
#define N_TYPES ((int)(sizeof(weight_types) / sizeof(weight_types[0])))

/* Shapes chosen to be awkward: vocabularies that are no multiple of 32,
 * n_ff that is no power of two, MHA, GQA and MQA, head_dim 16, 24 and 32
 * (with n_head * head_dim != n_embd), a partial rotary dimension, tied and
 * untied heads. Every in-dimension is a multiple of 32, as Q8_0 needs. */
typedef struct shape {
	const char *name;
	int n_vocab, n_embd, n_layer, n_head, n_head_kv, head_dim, n_rot, n_ff;
	float rope_theta, norm_eps;
	bool tied;
} shape;

static const shape shapes[] = {
	{"mha-e64-hd16-tied", 300, 64, 2, 4, 4, 16, 0, 160, 10000.0f, 1e-5f, true},
	{"gqa-e96-hd24", 301, 96, 3, 4, 2, 24, 0, 96, 500000.0f, 1e-6f, false},
	{"mqa-e64-hd32-rot16", 299, 64, 1, 4, 1, 32, 16, 160, 10000.0f, 1e-5f, false},
	{"gqa-e96-hd32-tied", 333, 96, 2, 4, 2, 32, 0, 160, 1000000.0f, 1e-5f, true},
};
#define N_SHAPES ((int)(sizeof(shapes) / sizeof(shapes[0])))

/* ------------------------------------------------------------------------ */
/* A model, its reference logits, and a runtime on one backend              */

typedef struct bench {
	char label[128];
	const shape *shape;
	const weight_type *wt;
	const char *backend;
	synth_model *sm;
	loom_runtime *rt;
	loom_model *model;
	char path[4096];
	int n_vocab;
	loom_token tokens[N_SEQ];
	double *ref;  /* [N_SEQ][n_vocab] */
	double scale; /* max |ref| */
} bench;

static synth_config config_of(const shape *s, loom_dtype type)
{
	synth_config c = synth_default_config();
	c.n_vocab = s->n_vocab;
	c.n_embd = s->n_embd;
	c.n_layer = s->n_layer;
	c.n_head = s->n_head;
	c.n_head_kv = s->n_head_kv;
	c.head_dim = s->head_dim;
	c.n_rot = s->n_rot;
	c.n_ff = s->n_ff;
	c.rope_theta = s->rope_theta;
	c.norm_eps = s->norm_eps;
	c.tied = s->tied;
	c.weight_type = type;
	c.seed = 0x5eed0000u + (uint64_t)(s - shapes);
	return c;
}

static void random_tokens(uint64_t seed, int n_vocab, loom_token *out, int n)
{
	ref_rng rng = {seed};
	for (int i = 0; i < n; i++)
		out[i] = (loom_token)ref_rng_below(&rng, n_vocab);
}

static void compute_reference(bench *b)
{
	ref_model *ref = ref_model_create(b->sm);
	size_t n = (size_t)N_SEQ * (size_t)b->n_vocab;

	b->ref = malloc(n * sizeof(double));
	ck_assert_ptr_nonnull(b->ref);
	ref_forward(ref, b->tokens, N_SEQ, b->ref);
	ref_model_free(ref);
	b->scale = 0.0;
	for (size_t i = 0; i < n; i++)
		b->scale = fmax(b->scale, fabs(b->ref[i]));
	ck_assert_msg(b->scale > 0.1 && isfinite(b->scale), "%s: degenerate reference logits (scale %g)", b->label,
		      b->scale);
}

/* Writes shape x weight type to a file and loads it on backend with
 * n_threads; false (after a SKIP line) if the backend cannot run here. */
static bool bench_open(bench *b, int shape_i, int type_i, const char *backend, int n_threads)
{
	memset(b, 0, sizeof(*b));
	b->shape = &shapes[shape_i];
	b->wt = &weight_types[type_i];
	b->backend = backend;
	snprintf(b->label, sizeof(b->label), "%s/%s/%s", b->shape->name, loom_dtype_name(b->wt->type), backend);
	b->rt = test_runtime(backend, n_threads);
	if (b->rt == NULL)
		return false;

	synth_config c = config_of(b->shape, b->wt->type);
	b->sm = synth_model_build(&c, NULL);
	const char *dir = test_tmp_dir("synthetic");
	ck_assert_msg(dir != NULL, "cannot make a temporary directory");
	snprintf(b->path, sizeof(b->path), "%s/%s-%s.gguf", dir, b->shape->name, loom_dtype_name(b->wt->type));
	ck_assert_msg(synth_model_write(b->sm, b->path), "cannot write %s", b->path);
	loom_status st = loom_model_load(b->rt, b->path, NULL, &b->model);
	ck_assert_msg(st == LOOM_OK, "%s: load: %s", b->label, loom_last_error());
	b->n_vocab = loom_model_n_vocab(b->model);
	ck_assert_int_eq(b->n_vocab, b->shape->n_vocab);
	random_tokens(c.seed ^ 0x70c5, b->n_vocab, b->tokens, N_SEQ);
	compute_reference(b);
	return true;
}

static void bench_close(bench *b)
{
	loom_model_free(b->model);
	loom_runtime_free(b->rt);
	synth_model_free(b->sm);
	free(b->ref);
}

static double tol_ref(const bench *b)
{
	return b->wt->tol * b->scale;
}

static double tol_self(const bench *b)
{
	return TOL_SELF * b->scale;
}

/* ------------------------------------------------------------------------ */
/* Helpers                                                                  */

static double diff_ref(const float *got, const double *ref, int n)
{
	double m = 0.0;
	for (int i = 0; i < n; i++) {
		double d = fabs((double)got[i] - ref[i]);
		if (!(d <= m))
			m = isnan(d) ? INFINITY : d;
	}
	return m;
}

static double diff(const float *a, const float *b, int n)
{
	double m = 0.0;
	for (int i = 0; i < n; i++) {
		double d = fabs((double)a[i] - (double)b[i]);
		if (!(d <= m))
			m = isnan(d) ? INFINITY : d;
	}
	return m;
}

static loom_context *new_context(const bench *b, uint32_t n_ctx, loom_dtype kv_type)
{
	return test_context(b->model, n_ctx, n_ctx, kv_type);
}

/* Decodes tokens[0..n) of sequence seq at positions pos0.. with logits for
 * every row. */
static void decode_rows(const bench *b, loom_context *ctx, const loom_token *tokens, int n, int pos0, int seq)
{
	int32_t pos[N_SEQ], seq_id[N_SEQ];
	int8_t want[N_SEQ];
	ck_assert_int_le(n, N_SEQ);
	for (int i = 0; i < n; i++) {
		pos[i] = pos0 + i;
		seq_id[i] = seq;
		want[i] = 1;
	}
	loom_batch batch = {.n_tokens = n, .tokens = tokens, .pos = pos, .seq_id = seq_id, .logits = want};
	loom_status st = loom_decode(ctx, &batch);
	ck_assert_msg(st == LOOM_OK, "%s: decode of %d tokens at %d: %s", b->label, n, pos0, loom_last_error());
}

static const float *logits_of(const bench *b, loom_context *ctx, int row)
{
	const float *l = loom_get_logits(ctx, row);
	ck_assert_msg(l != NULL, "%s: no logits for row %d: %s", b->label, row, loom_last_error());
	return l;
}

/* Copies the logits of rows [0, n) of the last batch to out. */
static void save_rows(const bench *b, loom_context *ctx, int n, float *out)
{
	for (int r = 0; r < n; r++)
		memcpy(out + (size_t)r * b->n_vocab, logits_of(b, ctx, r), (size_t)b->n_vocab * sizeof(float));
}

/* The whole sequence on a fresh context: the prompt as one batch, then one
 * token per decode. Writes every position's logits to out. */
static void run_sequence(const bench *b, loom_context *ctx, float *out)
{
	loom_kv_clear(ctx);
	decode_rows(b, ctx, b->tokens, N_PROMPT, 0, 0);
	save_rows(b, ctx, N_PROMPT, out);
	for (int p = N_PROMPT; p < N_SEQ; p++) {
		decode_rows(b, ctx, b->tokens + p, 1, p, 0);
		save_rows(b, ctx, 1, out + (size_t)p * b->n_vocab);
	}
}

static float *alloc_rows(const bench *b, int n)
{
	float *p = calloc((size_t)n * (size_t)b->n_vocab, sizeof(float));
	ck_assert_ptr_nonnull(p);
	return p;
}

/* Index decomposition of the loop tests: backend x type x shape. */
static void split_index(int i, int *backend, int *type, int *shape_i)
{
	*shape_i = i % N_SHAPES;
	*type = (i / N_SHAPES) % N_TYPES;
	*backend = i / (N_SHAPES * N_TYPES);
}

static bool open_indexed(bench *b, int i)
{
	int be, type, shape_i;
	split_index(i, &be, &type, &shape_i);
	return bench_open(b, shape_i, type, test_cpu_backends[be], 1);
}

/* ------------------------------------------------------------------------ */
/* Against the reference                                                    */

/* Prompt batch and decode steps against the reference (F32 cache), then the
 * F16 cache against the F32 one. */
START_TEST(matches_reference)
{
	bench b;
	if (!open_indexed(&b, _i))
		return;
	float *got = alloc_rows(&b, N_SEQ), *got16 = alloc_rows(&b, N_SEQ);
	loom_context *ctx = new_context(&b, 64, LOOM_DTYPE_F32);
	double worst_prompt = 0.0, worst_steps = 0.0, worst_kv = 0.0;

	run_sequence(&b, ctx, got);
	for (int p = 0; p < N_SEQ; p++) {
		double d = diff_ref(got + (size_t)p * b.n_vocab, b.ref + (size_t)p * b.n_vocab, b.n_vocab);
		ck_assert_msg(d <= tol_ref(&b), "%s: %s position %d: max |logit - reference| = %g > %g (scale %g)",
			      b.label, p < N_PROMPT ? "prompt" : "decode", p, d, tol_ref(&b), b.scale);
		if (p < N_PROMPT)
			worst_prompt = fmax(worst_prompt, d);
		else
			worst_steps = fmax(worst_steps, d);
	}
	loom_context_free(ctx);

	ctx = new_context(&b, 64, LOOM_DTYPE_F16);
	run_sequence(&b, ctx, got16);
	for (int p = 0; p < N_SEQ; p++) {
		double d = diff(got16 + (size_t)p * b.n_vocab, got + (size_t)p * b.n_vocab, b.n_vocab);
		ck_assert_msg(d <= b.wt->tol_kv * b.scale, "%s: position %d: F16 cache differs from F32 cache by %g > %g",
			      b.label, p, d, b.wt->tol_kv * b.scale);
		worst_kv = fmax(worst_kv, d);
	}
	loom_context_free(ctx);
	printf("synthetic %-36s scale %5.2f  max |dlogit|/scale: prompt %.2e, decode %.2e, f16 kv %.2e\n", b.label,
	       b.scale, worst_prompt / b.scale, worst_steps / b.scale, worst_kv / b.scale);
	free(got);
	free(got16);
	bench_close(&b);
}
END_TEST

/* A full context refuses a batch that does not fit and keeps its cache: a
 * batch that fits afterwards still matches the reference. */
START_TEST(context_full)
{
	bench b;
	if (!open_indexed(&b, _i))
		return;
	const int n_ctx = 16;
	loom_context *ctx = new_context(&b, (uint32_t)n_ctx, LOOM_DTYPE_F32);

	decode_rows(&b, ctx, b.tokens, 12, 0, 0);
	loom_batch five = {.n_tokens = 5, .tokens = b.tokens + 12};
	loom_status st = loom_decode(ctx, &five);
	ck_assert_msg(st == LOOM_ERR_CONTEXT_FULL, "%s: 17 tokens in 16 cells gave %s", b.label, loom_strerror(st));
	ck_assert_msg(strstr(loom_last_error(), "full") != NULL, "message: %s", loom_last_error());
	ck_assert_uint_eq(loom_kv_used(ctx), 12);
	ck_assert_int_eq(loom_kv_seq_pos_max(ctx, 0), 11);

	decode_rows(&b, ctx, b.tokens + 12, 4, 12, 0);
	for (int r = 0; r < 4; r++) {
		double d = diff_ref(logits_of(&b, ctx, r), b.ref + (size_t)(12 + r) * b.n_vocab, b.n_vocab);
		ck_assert_msg(d <= tol_ref(&b), "%s: after CONTEXT_FULL, position %d is off by %g", b.label, 12 + r, d);
	}
	loom_batch one = {.n_tokens = 1, .tokens = b.tokens + 16};
	ck_assert_int_eq(loom_decode(ctx, &one), LOOM_ERR_CONTEXT_FULL);
	ck_assert_uint_eq(loom_kv_used(ctx), 16);
	loom_context_free(ctx);
	bench_close(&b);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* loom against itself                                                      */

static void check_same_rows(const bench *b, const char *what, const float *expected, loom_context *ctx, int row0,
			    int n, int exp_row0)
{
	for (int r = 0; r < n; r++) {
		double d = diff(logits_of(b, ctx, row0 + r), expected + (size_t)(exp_row0 + r) * b->n_vocab, b->n_vocab);
		ck_assert_msg(d <= tol_self(b), "%s: %s: row %d differs by %g > %g", b->label, what, row0 + r, d,
			      tol_self(b));
	}
}

/* The prompt in two batches (5 + 4) gives the one-batch logits. */
static void check_split_prompt(const bench *b, loom_context *ctx, const float *whole)
{
	loom_kv_clear(ctx);
	decode_rows(b, ctx, b->tokens, 5, 0, 0);
	check_same_rows(b, "first half of a split prompt", whole, ctx, 0, 5, 0);
	decode_rows(b, ctx, b->tokens + 5, 4, 5, 0);
	check_same_rows(b, "second half of a split prompt", whole, ctx, 0, 4, 5);
}

/* Removing positions 5.. of the sequence and evaluating them again gives
 * the first logits again. */
static void check_remove_tail(const bench *b, loom_context *ctx, const float *whole)
{
	loom_kv_clear(ctx);
	decode_rows(b, ctx, b->tokens, N_PROMPT, 0, 0);
	ck_assert_int_eq(loom_kv_seq_remove(ctx, 0, 5, -1), LOOM_OK);
	ck_assert_uint_eq(loom_kv_used(ctx), 5);
	ck_assert_int_eq(loom_kv_seq_pos_max(ctx, 0), 4);
	/* pos NULL: the batch continues the sequence after its cache. */
	loom_batch batch = {.n_tokens = N_PROMPT - 5, .tokens = b->tokens + 5,
			    .logits = (const int8_t[N_PROMPT]){1, 1, 1, 1}};
	ck_assert_msg(loom_decode(ctx, &batch) == LOOM_OK, "%s: %s", b->label, loom_last_error());
	check_same_rows(b, "tail evaluated again after loom_kv_seq_remove", whole, ctx, 0, N_PROMPT - 5, 5);
}

/* Two sequences interleaved in one batch (pos NULL: each continues its
 * own) give the logits each gets alone. */
static void check_two_sequences(const bench *b, loom_context *ctx, const float *whole)
{
	loom_token other[N_PROMPT], mixed[2 * N_PROMPT];
	int32_t seq[2 * N_PROMPT];
	int8_t want[2 * N_PROMPT];
	float *alone = alloc_rows(b, N_PROMPT);

	random_tokens(0xabcdef, b->n_vocab, other, N_PROMPT);
	loom_kv_clear(ctx);
	decode_rows(b, ctx, other, N_PROMPT, 0, 1);
	save_rows(b, ctx, N_PROMPT, alone);

	for (int i = 0; i < 2 * N_PROMPT; i++) {
		mixed[i] = i % 2 == 0 ? b->tokens[i / 2] : other[i / 2];
		seq[i] = i % 2;
		want[i] = 1;
	}
	loom_kv_clear(ctx);
	loom_batch batch = {.n_tokens = 2 * N_PROMPT, .tokens = mixed, .seq_id = seq, .logits = want};
	ck_assert_msg(loom_decode(ctx, &batch) == LOOM_OK, "%s: %s", b->label, loom_last_error());
	ck_assert_int_eq(loom_kv_seq_pos_max(ctx, 0), N_PROMPT - 1);
	ck_assert_int_eq(loom_kv_seq_pos_max(ctx, 1), N_PROMPT - 1);
	for (int i = 0; i < 2 * N_PROMPT; i++) {
		const float *expected = (i % 2 == 0 ? whole : alone) + (size_t)(i / 2) * b->n_vocab;
		double d = diff(logits_of(b, ctx, i), expected, b->n_vocab);
		ck_assert_msg(d <= tol_self(b), "%s: sequence %d position %d in a shared batch differs by %g", b->label,
			      i % 2, i / 2, d);
	}
	free(alone);
}

/* With both sequences cached interleaved, dropping sequence 1 leaves every
 * other cell free; sequence 0's decode steps then land in those holes, out
 * of position order, and must still match the reference. (Not loom's own
 * unfragmented logits to f32 noise: attention sums its cells in cell order,
 * and a different f32 order can flip the rounding of a later F16 or Q8_0
 * matmul input.) */
static void check_fragmented_cache(const bench *b, loom_context *ctx)
{
	ck_assert_int_eq(loom_kv_seq_remove(ctx, 1, 0, -1), LOOM_OK);
	ck_assert_uint_eq(loom_kv_used(ctx), N_PROMPT);
	ck_assert_int_eq(loom_kv_seq_pos_max(ctx, 1), -1);
	for (int p = N_PROMPT; p < N_SEQ; p++) {
		decode_rows(b, ctx, b->tokens + p, 1, p, 0);
		double d = diff_ref(logits_of(b, ctx, 0), b->ref + (size_t)p * b->n_vocab, b->n_vocab);
		ck_assert_msg(d <= tol_ref(b), "%s: a decode step into a fragmented cache: position %d is off by %g > %g",
			      b->label, p, d, tol_ref(b));
	}
}

START_TEST(batches_and_sequences)
{
	bench b;
	if (!open_indexed(&b, _i))
		return;
	float *whole = alloc_rows(&b, N_SEQ);
	loom_context *ctx = new_context(&b, 64, LOOM_DTYPE_F32);

	run_sequence(&b, ctx, whole);
	check_split_prompt(&b, ctx, whole);
	check_remove_tail(&b, ctx, whole);
	check_two_sequences(&b, ctx, whole);
	check_fragmented_cache(&b, ctx);
	loom_context_free(ctx);
	free(whole);
	bench_close(&b);
}
END_TEST

/* Two threads give the logits of one, bit for bit: every output element is
 * summed by a single thread in a fixed order. (The other tests run on one
 * thread: on a busy 2-core machine, OpenMP barriers between the tiny ops of
 * these models cost far more than the ops.) */
START_TEST(threads_agree)
{
	bench b;
	if (!open_indexed(&b, _i))
		return;
	loom_runtime *rt2 = test_runtime(b.backend, 2);
	loom_model *m2 = NULL;
	ck_assert_int_eq(loom_model_load(rt2, b.path, NULL, &m2), LOOM_OK);
	loom_context *ctx1 = new_context(&b, 64, LOOM_DTYPE_F16);
	loom_context *ctx2 = test_context(m2, 64, 64, LOOM_DTYPE_F16);
	float *two = alloc_rows(&b, N_SEQ), *one = alloc_rows(&b, N_SEQ);

	run_sequence(&b, ctx2, two);
	run_sequence(&b, ctx1, one);
	for (int p = 0; p < N_SEQ; p++) {
		size_t off = (size_t)p * b.n_vocab;
		ck_assert_msg(memcmp(one + off, two + off, (size_t)b.n_vocab * sizeof(float)) == 0,
			      "%s: position %d: 1 and 2 threads differ (max %g)", b.label, p,
			      diff(one + off, two + off, b.n_vocab));
	}
	free(one);
	free(two);
	loom_context_free(ctx1);
	loom_context_free(ctx2);
	loom_model_free(m2);
	loom_runtime_free(rt2);
	bench_close(&b);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* The model files themselves                                               */

/* synth_model's encoders round to nearest even, as GGUF's writers do. */
START_TEST(encoding)
{
	const float f16_in[] = {1.0f + 0x1p-11f, 1.0f + 3 * 0x1p-11f, 65519.0f, 65520.0f, 0x1p-25f, 3 * 0x1p-25f, -2.0f};
	const uint16_t f16_out[] = {0x3c00, 0x3c02, 0x7bff, 0x7c00, 0x0000, 0x0002, 0xc000};
	const float bf16_in[] = {1.0f + 0x1p-8f, 1.0f + 3 * 0x1p-8f, -0.0f, 0x1p-130f};
	const uint16_t bf16_out[] = {0x3f80, 0x3f82, 0x8000, 0x0008};
	uint16_t h[8];

	synth_encode(LOOM_DTYPE_F16, f16_in, h, 7);
	for (int i = 0; i < 7; i++)
		ck_assert_msg(h[i] == f16_out[i], "f16(%a) = %#06x, expected %#06x", f16_in[i], h[i], f16_out[i]);
	synth_encode(LOOM_DTYPE_BF16, bf16_in, h, 4);
	for (int i = 0; i < 4; i++)
		ck_assert_msg(h[i] == bf16_out[i], "bf16(%a) = %#06x, expected %#06x", bf16_in[i], h[i], bf16_out[i]);

	/* amax 127 makes d exactly 1, so x.5 values are ties. */
	float x[32] = {127.0f, 2.5f, 3.5f, -2.5f, -127.0f, 0.4f};
	const int8_t q_expected[6] = {127, 2, 4, -2, -127, 0};
	uint8_t blk[34];
	synth_encode(LOOM_DTYPE_Q8_0, x, blk, 32);
	ck_assert_msg(blk[0] == 0x00 && blk[1] == 0x3c, "q8_0 d = %#04x%02x, expected 0x3c00", blk[1], blk[0]);
	for (int j = 0; j < 6; j++)
		ck_assert_msg((int8_t)blk[2 + j] == q_expected[j], "q8_0 q[%d] = %d, expected %d", j, (int8_t)blk[2 + j],
			      q_expected[j]);
}
END_TEST

/* The vocabulary loads as SentencePiece's and tokenizes. */
START_TEST(vocabulary)
{
	bench b;
	if (!bench_open(&b, 0, 0, "cpu-generic", 1))
		return;
	loom_token toks[16];
	size_t n = 0;
	const char *text = "the cat!";
	ck_assert_int_eq(loom_tokenize(b.model, text, strlen(text), true, false, toks, 16, &n), LOOM_OK);
	ck_assert_int_eq(loom_token_bos(b.model), SYNTH_TOKEN_BOS);
	ck_assert_int_eq(loom_token_eos(b.model), SYNTH_TOKEN_EOS);
	ck_assert_msg(n == 4 && toks[0] == SYNTH_TOKEN_BOS, "'%s' gave %zu tokens", text, n);
	char piece[32];
	size_t len;
	ck_assert_int_eq(loom_token_to_piece(b.model, toks[2], false, piece, sizeof(piece), &len), LOOM_OK);
	ck_assert_msg(len == 4 && memcmp(piece, " cat", 4) == 0, "piece '%.*s'", (int)len, piece);
	/* A byte with no token of its own falls back to its <0xXX> token. */
	ck_assert_int_eq(loom_tokenize(b.model, "\x01", 1, false, false, toks, 16, &n), LOOM_OK);
	ck_assert_msg(n == 2 && toks[1] == SYNTH_TOKEN_BYTE0 + 1, "'\\x01' gave %zu tokens, last %d", n, toks[n - 1]);
	bench_close(&b);
}
END_TEST

/* An embedding padded past the vocabulary (290 tokens, 300 rows) is valid:
 * the model has 300 logits, and the padding rows are tokens like any other. */
START_TEST(padded_embedding)
{
	synth_config c = config_of(&shapes[0], LOOM_DTYPE_F32);
	synth_faults pad = {.extra_tokens = -10};
	synth_model *sm = synth_model_build(&c, &pad);
	char path[4096];
	snprintf(path, sizeof(path), "%s/padded.gguf", test_tmp_dir("synthetic"));
	ck_assert(synth_model_write(sm, path));
	loom_runtime *rt = test_runtime("cpu-generic", 1);
	loom_model *m = NULL;
	ck_assert_msg(loom_model_load(rt, path, NULL, &m) == LOOM_OK, "%s", loom_last_error());
	ck_assert_int_eq(loom_model_n_vocab(m), c.n_vocab);

	loom_token tokens[2] = {7, (loom_token)c.n_vocab - 1};
	double *ref = calloc(2 * (size_t)c.n_vocab, sizeof(double)), scale = 0.0;
	ck_assert_ptr_nonnull(ref);
	ref_model *rm = ref_model_create(sm);
	ref_forward(rm, tokens, 2, ref);
	for (int v = 0; v < 2 * c.n_vocab; v++)
		scale = fmax(scale, fabs(ref[v]));
	loom_context *ctx = test_context(m, 8, 8, LOOM_DTYPE_F32);
	loom_batch b = {.n_tokens = 2, .tokens = tokens};
	ck_assert_msg(loom_decode(ctx, &b) == LOOM_OK, "%s", loom_last_error());
	double d = diff_ref(loom_get_logits(ctx, 1), ref + c.n_vocab, c.n_vocab);
	ck_assert_msg(d <= weight_types[0].tol * scale, "a padding row as a token: logits off by %g", d);
	loom_context_free(ctx);
	ref_model_free(rm);
	free(ref);
	loom_model_free(m);
	loom_runtime_free(rt);
	synth_model_free(sm);
}
END_TEST

/* Logits of the tokens at the given positions (NULL: 0, 1, ...), one batch,
 * every row, on cpu-generic; arch_dir's contracts are searched first
 * (NULL: the built-in ones alone). */
static float *logits_at(const char *arch_dir, const char *path, const loom_token *tokens, const int32_t *pos, int n,
			int n_vocab)
{
	loom_runtime *rt = test_generic_runtime(arch_dir);
	loom_model *m = NULL;
	ck_assert_msg(loom_model_load(rt, path, NULL, &m) == LOOM_OK, "%s: %s", path, loom_last_error());
	loom_context *ctx = test_context(m, 64, 16, LOOM_DTYPE_F32);
	int8_t want[16];
	memset(want, 1, sizeof(want));
	loom_batch b = {.n_tokens = n, .tokens = tokens, .pos = pos, .logits = want};
	ck_assert_msg(loom_decode(ctx, &b) == LOOM_OK, "%s: %s", path, loom_last_error());
	float *out = malloc(sizeof(float) * (size_t)(n * n_vocab));
	ck_assert_ptr_nonnull(out);
	for (int i = 0; i < n; i++)
		memcpy(out + (size_t)i * n_vocab, loom_get_logits(ctx, i), sizeof(float) * (size_t)n_vocab);
	loom_context_free(ctx);
	loom_model_free(m);
	loom_runtime_free(rt);
	return out;
}

/* RoPE scaling read from the file: linear scaling by 2 (rope.scaling.*)
 * or frequency factors of 2 (Llama 3's rope_freqs.weight) halve every
 * angle, so tokens at positions 0, 2, 4, ... give exactly the logits the
 * unscaled model gives at 0, 1, 2, ...: the angles are the same f32
 * numbers, only scaled by powers of two. */
START_TEST(rope_scaling_from_the_file)
{
	const char *dir = test_tmp_dir("rope_scaling");
	synth_config plain = config_of(&shapes[0], LOOM_DTYPE_F32), linear = plain, factors = plain;
	linear.rope_scaling = "linear";
	linear.rope_scaling_factor = 2.0f;
	factors.rope_freq_factor = 2.0f;
	const synth_config *configs[] = {&plain, &linear, &factors};
	char paths[3][4200];
	for (int k = 0; k < 3; k++) {
		synth_model *sm = synth_model_build(configs[k], NULL);
		snprintf(paths[k], sizeof(paths[k]), "%s/model%d.gguf", dir, k);
		ck_assert(synth_model_write(sm, paths[k]));
		synth_model_free(sm);
	}
	enum { N = 6 };
	loom_token tokens[N] = {5, 17, 3, 260, 9, 42};
	int32_t near[N], far[N];
	for (int i = 0; i < N; i++) {
		near[i] = 3 * i;
		far[i] = 6 * i;
	}
	float *want = logits_at(NULL, paths[0], tokens, near, N, plain.n_vocab);
	for (int k = 1; k < 3; k++) {
		float *got = logits_at(NULL, paths[k], tokens, far, N, plain.n_vocab);
		ck_assert_msg(memcmp(got, want, sizeof(float) * (size_t)(N * plain.n_vocab)) == 0,
			      "%s at positions 0, 6, 12, ... differs from the plain model at 0, 3, 6, ...",
			      k == 1 ? "linear scaling by 2" : "frequency factors of 2");
		free(got);
	}
	/* And the scaling is applied: the scaled model at the plain model's
	 * positions gives other logits. */
	float *other = logits_at(NULL, paths[1], tokens, near, N, plain.n_vocab);
	ck_assert(memcmp(other, want, sizeof(float) * (size_t)(N * plain.n_vocab)) != 0);
	free(other);
	free(want);

	/* A scaling loom does not implement (Hugging Face's dynamic NTK) is a
	 * load error naming it; LongRoPE without its lists of factors too. */
	static const struct {
		const char *scaling, *error;
		loom_status status;
	} refused[] = {
		{"dynamic", "RoPE scaling 'dynamic' is not supported", LOOM_ERR_UNSUPPORTED},
		{"longrope", "RoPE scaling longrope without its rope_factors_long", LOOM_ERR_BAD_FORMAT},
	};
	loom_runtime *rt = test_runtime("cpu-generic", 1);
	for (int i = 0; i < 2; i++) {
		synth_config scaled = plain;
		scaled.rope_scaling = refused[i].scaling;
		scaled.rope_scaling_factor = 4.0f;
		synth_model *sm = synth_model_build(&scaled, NULL);
		char path[4200];
		snprintf(path, sizeof(path), "%s/%s.gguf", dir, refused[i].scaling);
		ck_assert(synth_model_write(sm, path));
		synth_model_free(sm);
		loom_model *m = NULL;
		ck_assert_int_eq(loom_model_load(rt, path, NULL, &m), refused[i].status);
		ck_assert_msg(strstr(loom_last_error(), refused[i].error) != NULL, "%s", loom_last_error());
	}
	loom_runtime_free(rt);
}
END_TEST

/* Text inserted after the first occurrence of an anchor. */
typedef struct insertion {
	const char *after, *text;
} insertion;

/* llama.yaml with the insertions (anchors in the order they appear) as
 * dir/llama.yaml. */
static void write_llama_with(const char *dir, const insertion *edits, int n)
{
	char *text = test_read_file(LOOM_TEST_SOURCE_DIR "/arch/llama.yaml", NULL), contract[4200];
	ck_assert_ptr_nonnull(text);
	size_t size = strlen(text) + 1, len = 0;
	for (int i = 0; i < n; i++)
		size += strlen(edits[i].text);
	char *out = malloc(size);
	ck_assert_ptr_nonnull(out);
	const char *at = text;
	for (int i = 0; i < n; i++) {
		const char *hit = strstr(at, edits[i].after);
		ck_assert_msg(hit != NULL, "llama.yaml has no '%s' after the edits before it", edits[i].after);
		hit += strlen(edits[i].after);
		len += (size_t)snprintf(out + len, size - len, "%.*s%s", (int)(hit - at), at, edits[i].text);
		at = hit;
	}
	snprintf(out + len, size - len, "%s", at);
	test_write_file(contract, sizeof(contract), dir, "llama.yaml", out);
	free(out);
	free(text);
}

/* A synthetic model of config c written as dir/model.gguf (path). */
static void write_synth(const char *dir, const synth_config *c, char *path, size_t size, ref_model **ref)
{
	synth_model *sm = synth_model_build(c, NULL);
	snprintf(path, size, "%s/model.gguf", dir);
	ck_assert(synth_model_write(sm, path));
	if (ref != NULL)
		*ref = ref_model_create(sm);
	synth_model_free(sm);
}

/* A synthetic model of config c through llama.yaml with the edits, and
 * through the built-in llama.yaml, against the reference's logits: within
 * F32's band with the edits, and far without them (what the test sees is
 * what the contract adds). */
static void check_against_reference(const char *what, const synth_config *c, const insertion *edits, int n_edits)
{
	const char *dir = test_tmp_dir(what);
	char path[4200];
	ref_model *ref;
	write_synth(dir, c, path, sizeof(path), &ref);
	write_llama_with(dir, edits, n_edits);
	enum { N = 7 };
	loom_token tokens[N] = {1, 5, 17, 3, 260, 9, 42};
	double *want = malloc(sizeof(double) * (size_t)(N * c->n_vocab));
	ck_assert_ptr_nonnull(want);
	ref_forward(ref, tokens, N, want);
	double scale = 0.0;
	for (int i = 0; i < N * c->n_vocab; i++)
		scale = fmax(scale, fabs(want[i]));
	float *got = logits_at(dir, path, tokens, NULL, N, c->n_vocab);
	double d = diff_ref(got, want, N * c->n_vocab);
	ck_assert_msg(d <= 1e-4 * scale, "%s: max |logit - reference| = %g > %g", what, d, 1e-4 * scale);
	free(got);
	char plain_name[64];
	snprintf(plain_name, sizeof(plain_name), "plain_%s", what);
	float *plain = logits_at(test_tmp_dir(plain_name), path, tokens, NULL, N, c->n_vocab);
	double d_plain = diff_ref(plain, want, N * c->n_vocab);
	ck_assert_msg(d_plain > 100 * 1e-4 * scale, "%s: without it the model is only %g from the reference", what,
		      d_plain);
	printf("%s: max |dlogit|/scale %.2e (without it %.2e)\n", what, d / scale, d_plain / scale);
	free(plain);
	free(want);
	ref_model_free(ref);
}

/* block.post_norm, through llama.yaml copied with it and llama.cpp's
 * Gemma 2 names for the two norms (blk.N.post_attention_norm,
 * post_ffw_norm): a synthetic model that has them against the reference
 * forward pass, which normalises each output before its residual add. */
START_TEST(post_norms_match_reference)
{
	synth_config c = config_of(&shapes[0], LOOM_DTYPE_F32);
	c.post_norms = true;
	/* The norms' names follow each format's ffn_down (the safetensors
	 * ones are never read here: the contract must name them all). */
	const insertion edits[] = {
		{"\nblock:\n", "  post_norm: true\n"},
		{"    ffn_down: blk.{i}.ffn_down.weight\n", "    attn_post_norm: blk.{i}.post_attention_norm.weight\n"
							 "    ffn_post_norm: blk.{i}.post_ffw_norm.weight\n"},
		{"    ffn_down: model.layers.{i}.mlp.down_proj.weight\n",
		 "    attn_post_norm: model.layers.{i}.post_attn_norm.weight\n"
		 "    ffn_post_norm: model.layers.{i}.post_ffn_norm.weight\n"},
	};
	check_against_reference("post_norm", &c, edits, 3);
}
END_TEST

/* Granite's multipliers as hyperparameters (embedding_multiplier,
 * residual_multiplier, attention_multiplier, logit_scale), through
 * llama.yaml copied with granite's GGUF keys for them. */
START_TEST(multipliers_match_reference)
{
	synth_config c = config_of(&shapes[0], LOOM_DTYPE_F32);
	c.embedding_mult = 12.0f;
	c.residual_mult = 0.22f;
	c.attention_mult = 0.0078125f;
	c.logit_scale = 8.0f;
	const insertion edits[] = {{"hparams:\n  gguf:\n", "    embedding_multiplier: \"{arch}.embedding_scale\"\n"
							   "    residual_multiplier: \"{arch}.residual_scale\"\n"
							   "    attention_multiplier: \"{arch}.attention.scale\"\n"
							   "    logit_scale: \"{arch}.logit_scale\"\n"}};
	check_against_reference("multipliers", &c, edits, 1);
}
END_TEST

/* Gemma's attention scale, query_pre_attn_scalar^-1/2 (attention_scale_base),
 * set apart from head_dim (as Gemma 2 27B's 144 against its heads of 128). */
START_TEST(attention_scale_base_matches_reference)
{
	synth_config c = config_of(&shapes[0], LOOM_DTYPE_F32);
	c.attention_scale_base = 2.0f;
	const insertion edits[] = {
		{"hparams:\n  gguf:\n", "    attention_scale_base: \"{arch}.attention.query_pre_attn_scalar\"\n"}};
	check_against_reference("attention_scale_base", &c, edits, 1);

	/* With Granite's attention multiplier too, which scales q.k is
	 * ambiguous: refused. */
	const char *dir = test_tmp_dir("attention_scale_both");
	char path[4200];
	c.attention_mult = 0.25f;
	write_synth(dir, &c, path, sizeof(path), NULL);
	const insertion both[] = {{"hparams:\n  gguf:\n", "    attention_scale_base: \"{arch}.attention.query_pre_attn_scalar\"\n"
							   "    attention_multiplier: \"{arch}.attention.scale\"\n"}};
	write_llama_with(dir, both, 1);
	loom_runtime *rt = test_generic_runtime(dir);
	loom_model *m = NULL;
	ck_assert_int_eq(loom_model_load(rt, path, NULL, &m), LOOM_ERR_BAD_FORMAT);
	ck_assert_msg(strstr(loom_last_error(), "both attention_multiplier and attention_scale_base") != NULL, "%s",
		      loom_last_error());
	loom_runtime_free(rt);
}
END_TEST

static Suite *synthetic_suite(void)
{
	Suite *s = suite_create("synthetic");
	const int n_loop = test_n_cpu_backends * N_TYPES * N_SHAPES;

	TCase *tc = tcase_create("files");
	tcase_add_test(tc, encoding);
	tcase_add_test(tc, vocabulary);
	tcase_add_test(tc, padded_embedding);
	tcase_add_test(tc, rope_scaling_from_the_file);
	tcase_add_test(tc, post_norms_match_reference);
	tcase_add_test(tc, multipliers_match_reference);
	tcase_add_test(tc, attention_scale_base_matches_reference);
	suite_add_tcase(s, tc);

	tc = tcase_create("reference");
	tcase_set_timeout(tc, 120);
	tcase_add_loop_test(tc, matches_reference, 0, n_loop);
	tcase_add_loop_test(tc, context_full, 0, n_loop);
	suite_add_tcase(s, tc);

	tc = tcase_create("self");
	tcase_set_timeout(tc, 120);
	tcase_add_loop_test(tc, batches_and_sequences, 0, n_loop);
	suite_add_tcase(s, tc);

	tc = tcase_create("threads");
	tcase_set_timeout(tc, 120);
	tcase_add_loop_test(tc, threads_agree, 0, n_loop);
	suite_add_tcase(s, tc);
	return s;
}

LOOM_TEST_MAIN(synthetic_suite)
