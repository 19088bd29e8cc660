/*
 * test_hostile_inputs.c - what fuzzing loom's inputs found (tests/fuzz,
 * docs/robustness.md), kept as regression tests.
 *
 * Weights that make a model's activations overflow must not reach
 * undefined behaviour in any kernel (a float that is inf or NaN converted
 * to an integer), and a step whose logits are not finite is an error that
 * names the model file, never something to sample from. The hostile
 * models are synthetic llama models with whole tensors set to inf, NaN or
 * 1e-38, run on every CPU backend this machine has; under the sanitizer build (and
 * clang's -fsanitize=float-cast-overflow) a conversion of a non-finite
 * value stops the test.
 */
#include "check_main.h"
#include "fixture.h"
#include "model/contract.h"
#include "synth_model.h"
#include "testdata.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A llama model whose rows fill Q8_K blocks (256 values), so that K-quant
 * weights quantize their activations with the Q8_K quantizer. */
static synth_config kquant_shape(void)
{
	synth_config c = synth_default_config();
	c.n_embd = 256;
	c.n_head = 4;
	c.n_head_kv = 2;
	c.n_ff = 256;
	c.n_layer = 1;
	return c;
}

/* An F32 tensor (a norm weight, or a matrix of an F32 model) set to value
 * throughout. */
typedef struct poison {
	const char *tensor;
	float value;
} poison;

/* Writes the model of cfg to the test's directory as name, with n_poisons
 * tensors overwritten. */
static void write_model(char *path, size_t size, const char *name, const synth_config *cfg,
			const poison *poisons, int n_poisons)
{
	synth_model *sm = synth_model_build(cfg, NULL);
	ck_assert_ptr_nonnull(sm);
	for (int i = 0; i < n_poisons; i++) {
		loom_dtype type;
		int64_t ne0, ne1;
		/* The stored bytes are the model's own: what is changed here is
		 * what the file will hold. */
		float *w = (float *)synth_model_tensor(sm, poisons[i].tensor, &type, &ne0, &ne1);
		ck_assert_msg(w != NULL && type == LOOM_DTYPE_F32, "no f32 tensor %s", poisons[i].tensor);
		for (int64_t e = 0; e < ne0 * ne1; e++)
			w[e] = poisons[i].value;
	}
	snprintf(path, size, "%s/%s", test_tmp_dir("hostile_inputs"), name);
	ck_assert_msg(synth_model_write(sm, path), "writing %s", path);
	synth_model_free(sm);
}

typedef struct session {
	loom_runtime *rt;
	loom_model *model;
	loom_context *ctx;
} session;

/* false (after SKIP) when backend cannot run here. */
static bool session_open(session *s, const char *backend, const char *path, const char *quantize,
			 loom_dtype kv_type)
{
	memset(s, 0, sizeof(*s));
	s->rt = test_runtime(backend, 2);
	if (s->rt == NULL)
		return false;
	loom_model_params mp = loom_model_default_params();
	mp.quantize = quantize;
	ck_assert_msg(loom_model_load(s->rt, path, &mp, &s->model) == LOOM_OK, "%s on %s: %s", path, backend,
		      loom_last_error());
	s->ctx = test_context(s->model, 32, 8, kv_type);
	return true;
}

static void session_close(session *s)
{
	loom_context_free(s->ctx);
	loom_model_free(s->model);
	loom_runtime_free(s->rt);
}

static const loom_token prompt[4] = {SYNTH_TOKEN_BOS, 260, 261, 262};

/* A decode that failed (with status st) as a bad model, naming its file,
 * and left no logits and no cache entries behind. */
static void check_refused(session *s, loom_status st, const char *backend, const char *path)
{
	ck_assert_msg(st == LOOM_ERR_BAD_FORMAT, "%s: decode gave %s (%s)", backend, loom_strerror(st),
		      loom_last_error());
	const char *err = loom_last_error();
	ck_assert_msg(strstr(err, path) != NULL && strstr(err, "logit") != NULL && strstr(err, "overflow") != NULL,
		      "%s: the message names neither the file nor the overflow: %s", backend, err);
	ck_assert_ptr_null(loom_get_logits(s->ctx, 3));
	ck_assert_int_eq(loom_kv_seq_pos_max(s->ctx, 0), -1);
}

static void expect_overflow(session *s, const char *backend, const char *path)
{
	loom_batch batch = {.n_tokens = 4, .tokens = prompt};
	check_refused(s, loom_decode(s->ctx, &batch), backend, path);
}

/* What loom promises whatever the weights: a decode that succeeds gives
 * finite logits, and one that does not is refused as above. */
static void expect_finite_or_refused(session *s, const char *backend, const char *path, int32_t n_vocab)
{
	loom_batch batch = {.n_tokens = 4, .tokens = prompt};
	loom_status st = loom_decode(s->ctx, &batch);
	if (st != LOOM_OK) {
		check_refused(s, st, backend, path);
		return;
	}
	const float *logits = loom_get_logits(s->ctx, 3);
	for (int v = 0; v < n_vocab; v++)
		ck_assert_msg(isfinite(logits[v]), "%s: decode succeeded with logit %d = %g", backend, v,
			      (double)logits[v]);
}

/* The intact models decode to finite logits: the check that refuses the
 * others does not get in the way. */
START_TEST(intact_model_decodes)
{
	char path[4096];
	synth_config cfg = kquant_shape();
	write_model(path, sizeof(path), "intact.gguf", &cfg, NULL, 0);
	session s;
	if (!session_open(&s, NULL, path, "q4_k_m", LOOM_DTYPE_F16))
		return;
	loom_batch batch = {.n_tokens = 4, .tokens = prompt};
	ck_assert_msg(loom_decode(s.ctx, &batch) == LOOM_OK, "decode: %s", loom_last_error());
	const float *logits = loom_get_logits(s.ctx, 3);
	ck_assert_ptr_nonnull(logits);
	for (int v = 0; v < cfg.n_vocab; v++)
		ck_assert_msg(isfinite(logits[v]), "logit %d is %g", v, (double)logits[v]);
	ck_assert_int_eq(loom_kv_seq_pos_max(s.ctx, 0), 3);
	session_close(&s);
}
END_TEST

/* A mutated Q2_K model stopped clang's UBSan in the Q8_K activation
 * quantizer, which every K-quant weight's matmul uses: a block whose
 * largest activation is below 127 / FLT_MAX has a scale of -inf, and
 * -inf was converted to int8. An output norm of 1e-38 makes such a block
 * for the output matmul (Q6_K, quantized at load); the logits it gives are
 * as small as they should be. */
START_TEST(kquant_tiny_activations)
{
	const char *backend = test_cpu_backends[_i];
	char path[4096];
	synth_config cfg = kquant_shape();
	write_model(path, sizeof(path), "tiny-output-norm.gguf", &cfg, &(poison){"output_norm.weight", 1e-38f}, 1);
	session s;
	if (!session_open(&s, backend, path, "q4_k_m", LOOM_DTYPE_F16))
		return;
	loom_batch batch = {.n_tokens = 4, .tokens = prompt};
	ck_assert_msg(loom_decode(s.ctx, &batch) == LOOM_OK, "%s: decode: %s", backend, loom_last_error());
	const float *logits = loom_get_logits(s.ctx, 3);
	for (int v = 0; v < cfg.n_vocab; v++)
		ck_assert_msg(isfinite(logits[v]) && fabsf(logits[v]) < 1e-30f, "%s: logit %d is %g", backend, v,
			      (double)logits[v]);
	session_close(&s);
}
END_TEST

/* Activations of inf in the same quantizer: a scale of 0 and q of NaN,
 * which must not be converted either; the logits are not finite, and the
 * decode says so. */
START_TEST(kquant_activations_overflow)
{
	const char *backend = test_cpu_backends[_i];
	char path[4096];
	synth_config cfg = kquant_shape();
	write_model(path, sizeof(path), "inf-output-norm.gguf", &cfg, &(poison){"output_norm.weight", INFINITY}, 1);
	session s;
	if (!session_open(&s, backend, path, "q4_k_m", LOOM_DTYPE_F16))
		return;
	expect_overflow(&s, backend, path);
	session_close(&s);
}
END_TEST

/* Keys and values that overflowed are stored in a quantized KV cache
 * too: the Q4_0 cache's rounding converted NaN to int. The first layer's
 * attention norm of inf makes them; the output norm of NaN makes the
 * outcome the same whatever the layers make of them. */
START_TEST(quantized_cache_overflow)
{
	static const loom_dtype kv_types[] = {LOOM_DTYPE_Q8_0, LOOM_DTYPE_Q4_0};
	static const poison poisons[] = {{"blk.0.attn_norm.weight", INFINITY}, {"output_norm.weight", NAN}};
	const char *backend = test_cpu_backends[_i / 2];
	char path[4096];
	synth_config cfg = synth_default_config();
	cfg.n_head = 2; /* heads of 32 values: one cache block each */
	write_model(path, sizeof(path), "inf-keys.gguf", &cfg, poisons, 2);
	session s;
	if (!session_open(&s, backend, path, NULL, kv_types[_i % 2]))
		return;
	expect_overflow(&s, backend, path);
	session_close(&s);
}
END_TEST

/* Quantizing at load converts scaled weights to integers: a matrix of inf
 * and one of NaN must quantize to something defined, as K-quants, Q8_0
 * and Q4_0 (the K-quant search and Q8_0 converted them as they were). What
 * the damage does to the logits depends on the scheme and the backend (a
 * quantizer may take NaN for zero): finite, or an error. */
START_TEST(non_finite_weights_quantized_at_load)
{
	static const poison poisons[] = {{"blk.0.ffn_down.weight", INFINITY},
					 {"blk.0.attn_q.weight", NAN},
					 {"output_norm.weight", INFINITY}};
	static const char *const schemes[] = {"q4_k_m", "q8_0", "q4_0"};
	const char *backend = test_cpu_backends[_i / 3];
	char path[4096];
	synth_config cfg = kquant_shape();
	write_model(path, sizeof(path), "non-finite-matrices.gguf", &cfg, poisons, 3);
	session s;
	if (!session_open(&s, backend, path, schemes[_i % 3], LOOM_DTYPE_F16))
		return;
	expect_finite_or_refused(&s, backend, path, cfg.n_vocab);
	session_close(&s);
}
END_TEST

/* Logits of NaN (an output norm weight of NaN) are an error, and
 * loom_generate stops on it instead of sampling a token. */
START_TEST(non_finite_logits_are_an_error)
{
	const char *backend = test_cpu_backends[_i];
	char path[4096];
	synth_config cfg = synth_default_config();
	write_model(path, sizeof(path), "nan-output-norm.gguf", &cfg, &(poison){"output_norm.weight", NAN}, 1);
	session s;
	if (!session_open(&s, backend, path, NULL, LOOM_DTYPE_F16))
		return;
	expect_overflow(&s, backend, path);

	loom_generate_params gp = loom_generate_default_params();
	gp.n_predict = 4;
	loom_generate_stats stats = {0};
	loom_status st = loom_generate_tokens(s.ctx, prompt, 4, &gp, NULL, NULL, &stats);
	ck_assert_msg(st == LOOM_ERR_BAD_FORMAT, "%s: generate gave %s", backend, loom_strerror(st));
	ck_assert_ptr_nonnull(strstr(loom_last_error(), path));
	ck_assert_int_eq(stats.n_generated, 0);
	session_close(&s);
}
END_TEST

/* A value of transposed that names no role: the list of roles the lookup
 * searched had no NULL at its end, and the search ran past it (ASan:
 * global-buffer-overflow). The error names the file, the key and the
 * value instead. */
START_TEST(contract_transposed_unknown_role)
{
	char *text = test_read_file(LOOM_TEST_SOURCE_DIR "/arch/gpt2.yaml", NULL);
	ck_assert_ptr_nonnull(text);
	const char *list = "safetensors: [attn_qkv, attn_output, ffn_up, ffn_down]";
	char *at = strstr(text, list);
	ck_assert_msg(at != NULL, "arch/gpt2.yaml has no '%s'", list);
	char edited[65536];
	snprintf(edited, sizeof(edited), "%.*ssafetensors: [attn_qkv, not_a_role]%s", (int)(at - text), text,
		 at + strlen(list));
	free(text);
	char path[4096];
	test_write_file(path, sizeof(path), test_tmp_dir("hostile_contract"), "gpt2.yaml", edited);

	loom_contract *c = NULL;
	ck_assert_int_eq(loom_contract_load(path, &c), LOOM_ERR_CONTRACT);
	ck_assert_ptr_null(c);
	const char *err = loom_last_error();
	ck_assert_msg(strstr(err, path) != NULL && strstr(err, "transposed must be one of token_embd") != NULL &&
			      strstr(err, "not 'not_a_role'") != NULL,
		      "unexpected message: %s", err);
}
END_TEST

static Suite *hostile_inputs_suite(void)
{
	Suite *s = suite_create("hostile_inputs");
	TCase *tc = tcase_create("overflowing weights");
	tcase_add_test(tc, intact_model_decodes);
	tcase_add_loop_test(tc, kquant_tiny_activations, 0, test_n_cpu_backends);
	tcase_add_loop_test(tc, kquant_activations_overflow, 0, test_n_cpu_backends);
	tcase_add_loop_test(tc, quantized_cache_overflow, 0, 2 * test_n_cpu_backends);
	tcase_add_loop_test(tc, non_finite_weights_quantized_at_load, 0, 3 * test_n_cpu_backends);
	tcase_add_loop_test(tc, non_finite_logits_are_an_error, 0, test_n_cpu_backends);
	suite_add_tcase(s, tc);

	tc = tcase_create("parsers");
	tcase_add_test(tc, contract_transposed_unknown_role);
	suite_add_tcase(s, tc);
	return s;
}

LOOM_TEST_MAIN(hostile_inputs_suite)
