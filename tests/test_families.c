/* test_families.c - the families loom takes as contract files, against
 * another implementation on the very same model files.
 *
 * Each family model (support/family_models.c: random weights, written
 * alike every time) is written to a temporary directory and run by loom
 * on every CPU backend this machine has; tests/reference/data/NAME.ref
 * holds what llama.cpp computed on the same file, or for the families it
 * lacks a float64 numpy forward pass written from Hugging Face's modeling
 * code (tests/reference/README.md): the logits at five prompt positions
 * and a greedy continuation. Bands as test_golden's: the prompt's logits
 * within the weight type's tolerance (against llama.cpp 1e-4 at F32, 0.05
 * at Q8_0, GELU families 1e-2 and 0.4 as ggml's GELU goes through an fp16
 * table; against float64, which quantizes no activations, 1e-4 and the
 * golden data's 0.4; Q4_K_M, each family widened to whole K-quant blocks
 * and quantized by loom as llama-quantize mixes it, 0.4), the greedy ids
 * identical or parting only where the reference's lead was within it,
 * which is printed. Against float64 a quantized mixture of experts may
 * also choose other experts for one prompt position whose routing was a
 * near-tie in the reference, which is printed too.
 *
 * Then each feature the contract adds is shown to matter: the same file
 * through a copy of the contract without it lands far outside the band. */
#include "check_main.h"
#include "family_check.h"
#include "family_models.h"
#include "fixture.h"
#include "testdata.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

START_TEST(family_matches_its_reference)
{
	int n;
	const family_model *fm = &family_models(&n)[_i];
	family_ref ref;
	char path[4200];
	family_ref_load(fm->name, &ref);
	family_model_write_tmp(fm, "families", path, sizeof(path));
	for (int bi = 0; bi < test_n_cpu_backends; bi++)
		family_check_on(fm, path, &ref, test_cpu_backends[bi]);
	family_ref_free(&ref);
}
END_TEST

/* Each F32 family model written again to Q8_0 by loom_quantize (the file's
 * metadata as it is) and by loom_convert (the model re-described through
 * its contract's GGUF section: caps, windows, multipliers and experts in
 * the contract's keys), against the Q8_0 model's reference: the experts
 * are quantized and nothing the family needs is lost. The Q8_0 band, as
 * the quantizer may round a block's value the other way from the tests'
 * own writer. */
START_TEST(quantized_by_loom_matches_the_reference)
{
	int n;
	const family_model *fm = &family_models(&n)[_i];
	if (fm->config.weight_type != LOOM_DTYPE_F32 || fm->config.expert_type != 0 || fm->scheme != NULL)
		return;
	char sibling[64], path[4200], out[4300];
	snprintf(sibling, sizeof(sibling), "%.*s-q8_0", (int)(strlen(fm->name) - strlen("-f32")), fm->name);
	const family_model *q8 = family_model_named(sibling);
	ck_assert_msg(q8 != NULL, "%s has no Q8_0 sibling", fm->name);
	family_ref ref;
	family_ref_load(q8->name, &ref);
	family_model_write_tmp(fm, "families", path, sizeof(path));
	loom_runtime *rt = test_runtime("cpu-generic", 2);
	ck_assert_ptr_nonnull(rt);
	for (int convert = 0; convert < 2; convert++) {
		snprintf(out, sizeof(out), "%s.%s.gguf", path, convert ? "converted" : "quantized");
		loom_status st;
		if (convert) {
			loom_convert_params cp = loom_convert_default_params();
			cp.type = "q8_0";
			st = loom_convert(rt, path, out, &cp);
		} else {
			loom_quantize_params qp = loom_quantize_default_params();
			qp.scheme = "q8_0";
			st = loom_quantize(rt, path, out, &qp);
		}
		ck_assert_msg(st == LOOM_OK, "%s: %s", fm->name, loom_last_error());
		loom_model *m = NULL;
		ck_assert_msg(loom_model_load(rt, out, NULL, &m) == LOOM_OK, "%s: %s", out, loom_last_error());
		double d = family_prompt_diff(m, &ref, NULL);
		const char *how = convert ? "loom_convert" : "loom_quantize";
		printf("%s to q8_0 by %s: max |logit - %s's q8_0 reference| %.2e\n", fm->name, how, q8->reference, d);
		ck_assert_msg(d <= family_tolerance(q8), "%s to q8_0 by %s: %g from the q8_0 reference", fm->name, how, d);
		loom_model_free(m);
	}
	loom_runtime_free(rt);
	family_ref_free(&ref);
}
END_TEST

/* Mixtral quantized to Q4_K_M takes llama-quantize's types tensor for
 * tensor: with 8 experts, attn_k and attn_v Q8_0 and attn_output Q5_K;
 * ffn_down_exps Q6_K in the layers use_more_bits picks; the router kept
 * F32. (These rows are 64 wide, so each K-quant falls back as llama.cpp's
 * does: Q4_K to Q5_0, Q5_K to Q5_1, Q6_K to Q8_0.) The list is what
 * llama-quantize c392e50 wrote for this file. */
START_TEST(moe_q4_k_m_types_are_llama_quantize_s)
{
	static const struct {
		const char *name;
		loom_dtype type;
	} want[] = {
		{"token_embd.weight", LOOM_DTYPE_Q5_0},	       {"output.weight", LOOM_DTYPE_Q8_0},
		{"blk.0.attn_q.weight", LOOM_DTYPE_Q5_0},      {"blk.0.attn_k.weight", LOOM_DTYPE_Q8_0},
		{"blk.0.attn_v.weight", LOOM_DTYPE_Q8_0},      {"blk.0.attn_output.weight", LOOM_DTYPE_Q5_1},
		{"blk.0.ffn_gate_inp.weight", LOOM_DTYPE_F32}, {"blk.0.ffn_gate_exps.weight", LOOM_DTYPE_Q5_0},
		{"blk.0.ffn_up_exps.weight", LOOM_DTYPE_Q5_0}, {"blk.0.ffn_down_exps.weight", LOOM_DTYPE_Q5_0},
		{"blk.1.ffn_down_exps.weight", LOOM_DTYPE_Q8_0},
	};
	char path[4200], out[4300];
	family_model_write_tmp(family_model_named("mixtral-f32"), "families", path, sizeof(path));
	snprintf(out, sizeof(out), "%s.q4_k_m.gguf", path);
	loom_runtime *rt = test_runtime("cpu-generic", 2);
	ck_assert_ptr_nonnull(rt);
	loom_quantize_params qp = loom_quantize_default_params();
	qp.scheme = "q4_k_m";
	ck_assert_msg(loom_quantize(rt, path, out, &qp) == LOOM_OK, "%s", loom_last_error());
	loom_model_params mp = loom_model_default_params();
	mp.metadata_only = true;
	loom_model *m = NULL;
	ck_assert_msg(loom_model_load(rt, out, &mp, &m) == LOOM_OK, "%s", loom_last_error());
	int found = 0;
	for (size_t i = 0; i < loom_model_tensor_count(m); i++) {
		loom_tensor_info ti;
		ck_assert_int_eq(loom_model_tensor_info(m, i, &ti), LOOM_OK);
		for (size_t k = 0; k < sizeof(want) / sizeof(want[0]); k++) {
			if (strcmp(ti.name, want[k].name) != 0)
				continue;
			ck_assert_msg(ti.dtype == want[k].type, "%s is %s, llama-quantize made it %s", ti.name,
				      loom_dtype_name(ti.dtype), loom_dtype_name(want[k].type));
			found++;
		}
	}
	ck_assert_int_eq(found, (int)(sizeof(want) / sizeof(want[0])));
	loom_model_free(m);
	loom_runtime_free(rt);
}
END_TEST

/* Fills ctx's sequence seq with n tokens of a fixed walk through the
 * vocabulary, positions 0.., in batches of at most 256. */
static void feed(loom_context *ctx, int32_t seq, int n, int n_vocab)
{
	loom_token tokens[256];
	int32_t pos[256], seqs[256];
	for (int done = 0; done < n;) {
		int m = n - done < 256 ? n - done : 256;
		for (int i = 0; i < m; i++) {
			tokens[i] = (loom_token)(3 + (done + i) * 37 % (n_vocab - 3));
			pos[i] = done + i;
			seqs[i] = seq;
		}
		loom_batch b = {.n_tokens = m, .tokens = tokens, .pos = pos, .seq_id = seqs};
		ck_assert_msg(loom_decode(ctx, &b) == LOOM_OK, "%s", loom_last_error());
		done += m;
	}
}

/* A windowed layer reads the cache only from the first cell a token of the
 * step may see (rounded down to 256 cells): a sequence 600 tokens deep
 * reads from cell 512 when its token comes alone, and from cell 0 when a
 * short sequence whose cells come first shares the step. Its logits are
 * the same either way, to the rounding of a differently cut cache. */
START_TEST(windowed_layers_read_from_the_window)
{
	const family_model *fm = family_model_named("gemma3-f32");
	const int n_vocab = fm->config.n_vocab, deep = 600;
	char path[4200];
	family_model_write_tmp(fm, "families", path, sizeof(path));
	loom_runtime *rt = test_runtime("cpu-generic", 2);
	ck_assert_ptr_nonnull(rt);
	loom_model *m = NULL;
	ck_assert_msg(loom_model_load(rt, path, NULL, &m) == LOOM_OK, "%s", loom_last_error());
	loom_context *ctx = test_context(m, 1024, 256, LOOM_DTYPE_F32);
	feed(ctx, 1, 10, n_vocab); /* the short sequence, in cells 0..9 */
	feed(ctx, 0, deep, n_vocab);
	float *alone = malloc(sizeof(float) * (size_t)n_vocab);
	ck_assert_ptr_nonnull(alone);
	loom_token next = 42;
	int32_t pos_alone = deep, seq0 = 0;
	int8_t want = 1;
	loom_batch one = {.n_tokens = 1, .tokens = &next, .pos = &pos_alone, .seq_id = &seq0, .logits = &want};
	ck_assert_msg(loom_decode(ctx, &one) == LOOM_OK, "%s", loom_last_error());
	memcpy(alone, loom_get_logits(ctx, 0), sizeof(float) * (size_t)n_vocab);
	/* The same token again, beside the short sequence's next one. */
	ck_assert_int_eq(loom_kv_seq_remove(ctx, 0, deep, -1), LOOM_OK);
	loom_token two_tokens[2] = {42, 7};
	int32_t two_pos[2] = {deep, 10}, two_seq[2] = {0, 1};
	int8_t two_want[2] = {1, 0};
	loom_batch two = {.n_tokens = 2, .tokens = two_tokens, .pos = two_pos, .seq_id = two_seq, .logits = two_want};
	ck_assert_msg(loom_decode(ctx, &two) == LOOM_OK, "%s", loom_last_error());
	const float *shared = loom_get_logits(ctx, 0);
	double worst = 0.0, scale = 0.0;
	for (int v = 0; v < n_vocab; v++) {
		worst = fmax(worst, fabs((double)shared[v] - alone[v]));
		scale = fmax(scale, fabs((double)alone[v]));
	}
	printf("a token 600 deep, alone (windowed layers from cell 512) and beside another sequence (from cell 0): "
	       "max |dlogit| %.2e of %.2e\n", worst, scale);
	ck_assert_msg(worst <= 1e-5 * scale, "windowed reads differ by %g (logits of %g)", worst, scale);
	free(alone);
	loom_context_free(ctx);
	loom_model_free(m);
	loom_runtime_free(rt);
}
END_TEST

/* loom_model_describe_file (what `loom info` prints) says what the
 * contract and the file make of the block, without the weights. */
START_TEST(description_names_the_features)
{
	static const struct {
		const char *model;
		const char *says[5];
	} cases[] = {
		{"gpt-oss-mxfp4",
		 {"contract: gpt-oss", "sliding window: 6 positions on 2 of 4 layers", "attention sinks",
		  "chat template: harmony (the contract's); tool calls as messages to functions.NAME; reasoning low, "
		  "medium (the default) or high\n",
		  "experts: 8 a layer of n_ff 32, 2 a token, weighted by the softmax of the chosen"}},
		{"gemma2-f32",
		 {"contract: gemma2", "soft-caps: attention 4, logits 3", "sliding window: 6", "26 layers",
		  "tool calls in loom's generic JSON\n"}},
		{"qwen2moe-f32", {"experts: 8 a layer of n_ff 32, 2 a token", "a gated shared expert of n_ff 128", NULL}},
		{"granite-f32",
		 {"multipliers: embeddings 12, residual 0.22, attention 0.0078125", "logits x 0.125",
		  "chat template: granite (the contract's); tool calls after <|tool_call|>, a JSON list\n", NULL}},
		{"dots1-f32",
		 {"experts: 8 a layer of n_ff 32, 2 a token, weighted by the sigmoid, renormalised, times 2.5, chosen "
		  "with a bias; an ungated shared expert of n_ff 64; the first 1 layers dense",
		  NULL}},
	};
	loom_runtime *rt = test_runtime("cpu-generic", 1);
	ck_assert_ptr_nonnull(rt);
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		const family_model *fm = family_model_named(cases[i].model);
		char path[4200], text[4096];
		size_t n;
		family_model_write_tmp(fm, "families", path, sizeof(path));
		ck_assert_msg(loom_model_describe_file(rt, path, text, sizeof(text), &n) == LOOM_OK, "%s: %s", fm->name,
			      loom_last_error());
		ck_assert_uint_eq(n, strlen(text));
		for (int k = 0; k < 5 && cases[i].says[k] != NULL; k++)
			ck_assert_msg(strstr(text, cases[i].says[k]) != NULL, "%s: '%s' not in:\n%s", fm->name,
				      cases[i].says[k], text);
		if (strcmp(fm->name, "qwen2moe-f32") == 0)
			ck_assert_msg(strstr(text, "renormalised") == NULL, "qwen2moe's experts are not renormalised:\n%s",
				      text);
	}
	char small[8];
	size_t n;
	char path[4200];
	family_model_write_tmp(family_model_named("gemma2-f32"), "families", path, sizeof(path));
	ck_assert_int_eq(loom_model_describe_file(rt, path, small, sizeof(small), &n), LOOM_ERR_BUFFER_TOO_SMALL);
	ck_assert_uint_gt(n, sizeof(small));
	loom_runtime_free(rt);
}
END_TEST

/* arch/NAME.yaml copied into dir without the lines that start (after
 * their indentation) with any of drop, each replaced by with[i] where that
 * is given (with may be NULL). */
static void contract_edited(const char *dir, const char *name, const char *const *drop, const char *const *with,
			    int n_drop)
{
	char src[4096], dst[4200], line[1024];
	snprintf(src, sizeof(src), "%s/arch/%s.yaml", LOOM_TEST_SOURCE_DIR, name);
	snprintf(dst, sizeof(dst), "%s/%s.yaml", dir, name);
	FILE *in = fopen(src, "r"), *out = fopen(dst, "w");
	ck_assert(in != NULL && out != NULL);
	int dropped = 0;
	while (fgets(line, sizeof(line), in) != NULL) {
		const char *text = line + strspn(line, " ");
		bool keep = true;
		for (int i = 0; i < n_drop; i++)
			if (strncmp(text, drop[i], strlen(drop[i])) == 0) {
				keep = false;
				if (with != NULL && with[i] != NULL)
					fprintf(out, "%.*s%s\n", (int)(text - line), line, with[i]);
			}
		dropped += !keep;
		if (keep)
			fputs(line, out);
	}
	fclose(in);
	fclose(out);
	ck_assert_msg(dropped > 0, "%s has none of the lines to drop", src);
}

/* Each feature a family's contract adds, left out of a copy of its
 * contract: the F32 model then parts from its reference by far more than the
 * band. */
static const struct feature {
	const char *model, *what;
	const char *drop[6]; /* the contract's lines that give it */
} features[] = {
	{"gemma2-f32", "sliding window", {"sliding_window:"}},
	{"gemma2-f32", "attention soft-cap", {"attn_logit_softcap:"}},
	{"gemma2-f32", "final soft-cap", {"final_logit_softcap:"}},
	{"gemma2-f32", "post-norms", {"post_norm:", "attn_post_norm:", "ffn_post_norm:"}},
	{"mixtral-f32", "experts' weights renormalised", {"expert_weights_norm:"}},
	{"granite-f32", "multipliers",
	 {"embedding_multiplier:", "residual_multiplier:", "attention_multiplier:"}},
	{"granite-f32", "logit scale", {"logit_scale:"}},
	{"granitemoe-f32", "multipliers",
	 {"embedding_multiplier:", "residual_multiplier:", "attention_multiplier:"}},
	{"olmo2-f32", "QK-norm", {"qk_norm:", "attn_q_norm:", "attn_k_norm:"}},
	{"olmoe-f32", "QK-norm", {"qk_norm:", "attn_q_norm:", "attn_k_norm:"}},
	{"gemma3-f32", "sliding window", {"sliding_window:"}},
	{"gemma3-f32", "local RoPE base", {"rope_theta_swa:"}},
	{"gemma3-f32", "QK-norm", {"qk_norm:", "attn_q_norm:", "attn_k_norm:"}},
	{"qwen3moe-f32", "experts' weights renormalised", {"expert_weights_norm:"}},
	{"gpt-oss-f32", "attention sinks", {"attention_sinks:", "attn_sinks:"}},
	{"gpt-oss-f32", "clamped SwiGLU", {"activation: swiglu_oai"}},
	{"gpt-oss-f32", "sliding window", {"sliding_window:"}},
	{"cohere2-f32", "unrotated global layers", {"global_rope:"}},
	{"cohere2-f32", "logit multiplier", {"logit_multiplier:"}},
	{"phi3-f32", "LongRoPE factors", {"rope_factors_long:", "rope_factors_short:"}},
	{"phi3-f32", "sliding window", {"sliding_window:"}},
	{"qwen2moe-f32", "shared expert",
	 {"shared_expert:", "ffn_gate_inp_shexp:", "ffn_gate_shexp:", "ffn_up_shexp:", "ffn_down_shexp:"}},
	{"dots1-f32", "experts' selection bias", {"selection_bias:", "ffn_exp_probs_bias:"}},
	{"dots1-f32", "ungated shared experts",
	 {"shared_expert:", "n_expert_shared:", "ffn_gate_shexp:", "ffn_up_shexp:", "ffn_down_shexp:"}},
	{"dots1-f32", "experts' weight scale", {"expert_weights_scale:"}},
};

START_TEST(feature_matters)
{
	const struct feature *f = &features[_i];
	const family_model *fm = family_model_named(f->model);
	family_ref ref;
	char path[4200], dir_name[64];
	family_ref_load(fm->name, &ref);
	family_model_write_tmp(fm, "families", path, sizeof(path));
	snprintf(dir_name, sizeof(dir_name), "without_%d", _i);
	const char *dir = test_tmp_dir(dir_name);
	int n_drop = 0;
	while (n_drop < 6 && f->drop[n_drop] != NULL)
		n_drop++;
	contract_edited(dir, fm->contract, f->drop, NULL, n_drop);
	loom_runtime *rt = test_generic_runtime(dir);
	loom_model *m = NULL;
	ck_assert_msg(loom_model_load(rt, path, NULL, &m) == LOOM_OK, "%s without its %s: %s", fm->name, f->what,
		      loom_last_error());
	double d = family_prompt_diff(m, &ref, NULL);
	printf("%s without its %s: max |logit - %s| %.2e\n", fm->name, f->what, fm->reference, d);
	ck_assert_msg(d > 10 * family_tolerance(fm), "without its %s %s is still only %g from %s", f->what, fm->name, d,
		      fm->reference);
	loom_model_free(m);
	loom_runtime_free(rt);
	family_ref_free(&ref);
}
END_TEST

/* The last position's logits of the family prompt on the model written
 * from c (as arch), on cpu-generic, with the contracts in arch_dir (NULL:
 * the build's). */
static float *prompt_logits(const synth_config *c, const char *arch, const char *arch_dir, int *n_vocab)
{
	char path[4200];
	snprintf(path, sizeof(path), "%s/model.gguf", test_tmp_dir("gemma-depth"));
	synth_faults faults = {.arch = arch};
	synth_model *sm = synth_model_build(c, &faults);
	ck_assert(synth_model_write(sm, path));
	synth_model_free(sm);
	loom_runtime *rt = test_generic_runtime(arch_dir);
	loom_model *m = NULL;
	ck_assert_msg(loom_model_load(rt, path, NULL, &m) == LOOM_OK, "%s: %s", path, loom_last_error());
	loom_context *ctx = test_context(m, 64, 32, LOOM_DTYPE_F32);
	loom_batch b = {.n_tokens = FAMILY_PROMPT_LEN, .tokens = (loom_token *)family_prompt};
	ck_assert_msg(loom_decode(ctx, &b) == LOOM_OK, "%s", loom_last_error());
	*n_vocab = loom_model_n_vocab(m);
	float *out = malloc((size_t)*n_vocab * sizeof(float));
	memcpy(out, loom_get_logits(ctx, FAMILY_PROMPT_LEN - 1), (size_t)*n_vocab * sizeof(float));
	loom_context_free(ctx);
	loom_model_free(m);
	loom_runtime_free(rt);
	return out;
}

static double logits_apart(const float *a, const float *b, int n)
{
	double worst = 0;
	for (int i = 0; i < n; i++)
		worst = fmax(worst, fabs((double)a[i] - b[i]));
	return worst;
}

/* Gemma 2 and 3 GGUF files at their 27B's depth scale q.k by
 * 1/sqrt(n_embd / n_head), as llama.cpp does (defaults_by_layers): what a
 * copy of the contract with that scale written out computes, and not what
 * one without the rule (1/sqrt(head_dim)) does; a layer fewer, the rule
 * does not apply. */
START_TEST(gemma_27b_depth_scales_attention_as_llama_cpp)
{
	static const struct {
		const char *model;
		int n_layer;
		const char *scale; /* 1/sqrt(144), 1/sqrt(168) */
	} sizes[] = {{"gemma2-f32", 46, "attention_scale: 0.08333333333"},
		     {"gemma3-f32", 62, "attention_scale: 0.07715167498"}};
	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		const family_model *fm = family_model_named(sizes[i].model);
		/* (Gemma 3's 4B defaults go with the section.) */
		const char *const rule[] = {"defaults_by_layers:", "46: {", "62: {", "34: {", "attention_scale:"};
		const char *const literal[] = {NULL, NULL, NULL, NULL, sizes[i].scale};
		char plain_dir[4096], literal_dir[4096];
		snprintf(plain_dir, sizeof(plain_dir), "%s", test_tmp_dir("gemma-depth-plain"));
		snprintf(literal_dir, sizeof(literal_dir), "%s", test_tmp_dir("gemma-depth-literal"));
		contract_edited(plain_dir, fm->contract, rule, NULL, 4);
		contract_edited(literal_dir, fm->contract, rule, literal, 5);
		synth_config c = fm->config;
		int n;
		c.n_layer = sizes[i].n_layer;
		float *by_rule = prompt_logits(&c, fm->arch, NULL, &n);
		float *written = prompt_logits(&c, fm->arch, literal_dir, &n);
		float *plain = prompt_logits(&c, fm->arch, plain_dir, &n);
		c.n_layer = sizes[i].n_layer - 1;
		float *shallow = prompt_logits(&c, fm->arch, NULL, &n);
		float *shallow_plain = prompt_logits(&c, fm->arch, plain_dir, &n);
		printf("%s at %d layers: %.2e from its scale written out, %.2e from 1/sqrt(head_dim)'s\n", fm->arch,
		       sizes[i].n_layer, logits_apart(by_rule, written, n), logits_apart(by_rule, plain, n));
		ck_assert_msg(logits_apart(by_rule, written, n) <= 1e-5, "%s: not the 27B's scale", fm->arch);
		ck_assert_msg(logits_apart(by_rule, plain, n) > 1e-3, "%s: the rule changes nothing", fm->arch);
		ck_assert_msg(logits_apart(shallow, shallow_plain, n) == 0.0, "%s: the rule applies a layer fewer",
			      fm->arch);
		free(by_rule);
		free(written);
		free(plain);
		free(shallow);
		free(shallow_plain);
	}
}
END_TEST

static Suite *families_suite(void)
{
	Suite *s = suite_create("families");
	TCase *tc = tcase_create("reference");
	int n;
	family_models(&n);
	tcase_set_timeout(tc, 600);
	tcase_add_loop_test(tc, family_matches_its_reference, 0, n);
	tcase_add_loop_test(tc, quantized_by_loom_matches_the_reference, 0, n);
	tcase_add_test(tc, moe_q4_k_m_types_are_llama_quantize_s);
	tcase_add_test(tc, windowed_layers_read_from_the_window);
	tcase_add_test(tc, description_names_the_features);
	tcase_add_test(tc, gemma_27b_depth_scales_attention_as_llama_cpp);
	tcase_add_loop_test(tc, feature_matters, 0, (int)(sizeof(features) / sizeof(features[0])));
	suite_add_tcase(s, tc);
	return s;
}

LOOM_TEST_MAIN(families_suite)
