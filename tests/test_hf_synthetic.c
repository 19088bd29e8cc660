/* test_hf_synthetic.c - Hugging Face checkpoints the suite writes from the
 * synthetic GGUF models: every dtype (F32, F16, BF16, norms included),
 * sharded and not, Llama's rotate-half Q/K layout and GPT-2's transposed
 * Conv1D weights. Each must compute what its source computes:
 *   F32: the GGUF's logits within 1e-4 (only summation order differs);
 *   F16, BF16: the logits of the same checkpoint converted to GGUF by
 *     `loom convert` (whose f32 output is byte-identical to llama.cpp's,
 *     test_convert), and the f32 source's within a bound for the rounding
 *     of the weights (0.1 for f16, 0.5 for bf16: 8 bits of mantissa on
 *     random weights), so that neither path can be wrong alone. Against the
 *     converted file the weights are the same, but Llama's Q/K rows are in
 *     the other RoPE order, so attention sums in another order; activations
 *     rounded to the weights' type before each product then flip by an ulp
 *     now and then: 2e-2 for f16 (as test_golden's f16 files), 0.1 for bf16
 *     (8x coarser), 1e-4 for f32. */
#include "check_main.h"
#include "cpu_ref.h"
#include "fixture.h"
#include "plugin_host.h"
#include "st_writer.h"
#include "testdata.h"

#include "meta.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum family { LLAMA, GPT2 };

typedef struct synth_case {
	const char *name;
	enum family family;
	const char *dtype; /* of every tensor in the checkpoint */
	int n_shards;      /* 0: one model.safetensors */
	float tol_source;    /* against the f32 GGUF */
	float tol_converted; /* against the checkpoint converted to GGUF */
	bool llama3_rope;    /* config.json asks for Llama 3's RoPE scaling */
} synth_case;

static const synth_case cases[] = {
	{"llama-f32", LLAMA, "F32", 0, 1e-4f, 1e-4f, false},
	{"llama-f16-sharded", LLAMA, "F16", 3, 0.1f, 2e-2f, false},
	{"llama-bf16", LLAMA, "BF16", 0, 0.5f, 0.1f, false},
	{"gpt2-f32-sharded", GPT2, "F32", 2, 1e-4f, 1e-4f, false},
	{"gpt2-f16", GPT2, "F16", 0, 0.1f, 2e-2f, false},
	{"gpt2-bf16-sharded", GPT2, "BF16", 4, 0.5f, 0.1f, false},
	/* The source has no scaling: this one must differ from it. */
	{"llama-f32-llama3-rope", LLAMA, "F32", 0, 0.0f, 1e-4f, true},
};

/* Llama 3 scaling of the test's config, computed here in double. */
#define L3_FACTOR 8.0
#define L3_LOW 1.0
#define L3_HIGH 4.0
#define L3_ORIG 64.0
static double llama3_factor(int i, int n_rot, double theta)
{
	double wavelen = 2 * 3.14159265358979323846 * pow(theta, 2.0 * i / n_rot);
	if (wavelen < L3_ORIG / L3_HIGH)
		return 1.0;
	if (wavelen > L3_ORIG / L3_LOW)
		return L3_FACTOR;
	double smooth = (L3_ORIG / wavelen - L3_LOW) / (L3_HIGH - L3_LOW);
	return 1.0 / ((1.0 - smooth) / L3_FACTOR + smooth);
}
#define N_CASES ((int)(sizeof(cases) / sizeof(cases[0])))

/* The checkpoint being assembled: tensor specs and the bytes they own. */
typedef struct checkpoint {
	st_tensor_spec t[64];
	void *owned[64];
	int n;
	char names[64][96];
} checkpoint;

static const loom_file_tensor *tensor(const loom_model_file *f, const char *name)
{
	for (uint64_t i = 0; i < f->n_tensors; i++)
		if (loom_string_eq(f->tensors[i].name, name))
			return &f->tensors[i];
	ck_abort_msg("the synthetic model lacks %s", name);
	return NULL;
}

static int64_t meta_int(const loom_model_file *f, const char *key)
{
	int64_t v;
	ck_assert_msg(loom_meta_get_int(f, key, &v) == LOOM_OK, "%s: %s", key, loom_last_error());
	return v;
}

static double meta_float(const loom_model_file *f, const char *key)
{
	double v;
	ck_assert_msg(loom_meta_get_float(f, key, &v) == LOOM_OK, "%s: %s", key, loom_last_error());
	return v;
}

/* values (rows x cols f32, row-major) stored as dtype; transposed writes the
 * cols x rows matrix (GPT-2's Conv1D). */
static void add(checkpoint *c, const char *name, const char *dtype, const float *values, int64_t rows, int64_t cols,
		bool vector, bool transposed)
{
	ck_assert(c->n < 64);
	size_t es = strcmp(dtype, "F32") == 0 ? 4 : 2, n = (size_t)(rows * cols);
	unsigned char *bytes = malloc(n * es);
	ck_assert(bytes != NULL);
	for (int64_t r = 0; r < rows; r++) {
		for (int64_t k = 0; k < cols; k++) {
			float x = values[r * cols + k];
			size_t at = transposed ? (size_t)(k * rows + r) : (size_t)(r * cols + k);
			if (es == 4) {
				memcpy(bytes + at * 4, &x, 4);
			} else {
				uint16_t h = strcmp(dtype, "F16") == 0 ? ref_f32_to_fp16(x) : ref_f32_to_bf16(x);
				memcpy(bytes + at * 2, &h, 2);
			}
		}
	}
	snprintf(c->names[c->n], sizeof(c->names[0]), "%s", name);
	st_tensor_spec *t = &c->t[c->n];
	*t = (st_tensor_spec){.name = c->names[c->n], .dtype = dtype, .data = bytes};
	if (vector) {
		t->n_dims = 1;
		t->shape[0] = rows * cols;
	} else {
		t->n_dims = 2;
		t->shape[0] = transposed ? cols : rows;
		t->shape[1] = transposed ? rows : cols;
	}
	c->owned[c->n++] = bytes;
}

/* A GGUF tensor (f32) under a Hugging Face name. */
static void add_from(checkpoint *c, const loom_model_file *f, const char *gguf_name, const char *hf_name,
		     const char *dtype, bool transposed)
{
	const loom_file_tensor *t = tensor(f, gguf_name);
	ck_assert_msg(t->dtype == LOOM_DTYPE_F32, "%s is not f32", gguf_name);
	add(c, hf_name, dtype, t->data, t->n_dims == 2 ? t->ne[1] : 1, t->ne[0], t->n_dims == 1, transposed);
}

/* GGUF llama files store Q and K rows permuted for adjacent-pair RoPE;
 * Hugging Face keeps each head's rotate-half order: rows 2j, 2j+1 of a
 * head go back to j and j + head_dim/2 (convert_hf_to_gguf's permute,
 * undone). */
static void add_unpermuted(checkpoint *c, const loom_model_file *f, const char *gguf_name, const char *hf_name,
			   const char *dtype, int64_t n_heads)
{
	const loom_file_tensor *t = tensor(f, gguf_name);
	const int64_t cols = t->ne[0], rows = t->ne[1], head_dim = rows / n_heads, half = head_dim / 2;
	const float *src = t->data;
	float *dst = malloc((size_t)(rows * cols) * sizeof(float));
	ck_assert(dst != NULL);
	for (int64_t h = 0; h < n_heads; h++)
		for (int64_t j = 0; j < half; j++) {
			memcpy(dst + (h * head_dim + j) * cols, src + (h * head_dim + 2 * j) * cols, (size_t)cols * 4);
			memcpy(dst + (h * head_dim + half + j) * cols, src + (h * head_dim + 2 * j + 1) * cols,
			       (size_t)cols * 4);
		}
	add(c, hf_name, dtype, dst, rows, cols, false, false);
	free(dst);
}

static void llama_tensors(checkpoint *c, const loom_model_file *f, const char *dt)
{
	const int64_t n_layer = meta_int(f, "llama.block_count");
	add_from(c, f, "token_embd.weight", "model.embed_tokens.weight", dt, false);
	add_from(c, f, "output_norm.weight", "model.norm.weight", dt, false);
	add_from(c, f, "output.weight", "lm_head.weight", dt, false);
	for (int64_t i = 0; i < n_layer; i++) {
		static const char *const plain[][2] = {
			{"attn_norm.weight", "input_layernorm.weight"},   {"attn_v.weight", "self_attn.v_proj.weight"},
			{"attn_output.weight", "self_attn.o_proj.weight"}, {"ffn_norm.weight", "post_attention_layernorm.weight"},
			{"ffn_gate.weight", "mlp.gate_proj.weight"},       {"ffn_up.weight", "mlp.up_proj.weight"},
			{"ffn_down.weight", "mlp.down_proj.weight"},
		};
		char g[96], h[96];
		for (size_t k = 0; k < sizeof(plain) / sizeof(plain[0]); k++) {
			snprintf(g, sizeof(g), "blk.%lld.%s", (long long)i, plain[k][0]);
			snprintf(h, sizeof(h), "model.layers.%lld.%s", (long long)i, plain[k][1]);
			add_from(c, f, g, h, dt, false);
		}
		snprintf(g, sizeof(g), "blk.%lld.attn_q.weight", (long long)i);
		snprintf(h, sizeof(h), "model.layers.%lld.self_attn.q_proj.weight", (long long)i);
		add_unpermuted(c, f, g, h, dt, meta_int(f, "llama.attention.head_count"));
		snprintf(g, sizeof(g), "blk.%lld.attn_k.weight", (long long)i);
		snprintf(h, sizeof(h), "model.layers.%lld.self_attn.k_proj.weight", (long long)i);
		add_unpermuted(c, f, g, h, dt, meta_int(f, "llama.attention.head_count_kv"));
	}
}

static void gpt2_tensors(checkpoint *c, const loom_model_file *f, const char *dt)
{
	const int64_t n_layer = meta_int(f, "gpt2.block_count");
	add_from(c, f, "token_embd.weight", "transformer.wte.weight", dt, false);
	add_from(c, f, "position_embd.weight", "transformer.wpe.weight", dt, false);
	add_from(c, f, "output_norm.weight", "transformer.ln_f.weight", dt, false);
	add_from(c, f, "output_norm.bias", "transformer.ln_f.bias", dt, false);
	add_from(c, f, "output.weight", "lm_head.weight", dt, false);
	for (int64_t i = 0; i < n_layer; i++) {
		/* {GGUF name, HF name, Conv1D (stored transposed)} */
		static const struct { const char *g, *h; bool conv; } map[] = {
			{"attn_norm.weight", "ln_1.weight", false},      {"attn_norm.bias", "ln_1.bias", false},
			{"attn_qkv.weight", "attn.c_attn.weight", true}, {"attn_qkv.bias", "attn.c_attn.bias", false},
			{"attn_output.weight", "attn.c_proj.weight", true}, {"attn_output.bias", "attn.c_proj.bias", false},
			{"ffn_norm.weight", "ln_2.weight", false},       {"ffn_norm.bias", "ln_2.bias", false},
			{"ffn_up.weight", "mlp.c_fc.weight", true},      {"ffn_up.bias", "mlp.c_fc.bias", false},
			{"ffn_down.weight", "mlp.c_proj.weight", true},  {"ffn_down.bias", "mlp.c_proj.bias", false},
		};
		for (size_t k = 0; k < sizeof(map) / sizeof(map[0]); k++) {
			char g[96], h[96];
			snprintf(g, sizeof(g), "blk.%lld.%s", (long long)i, map[k].g);
			snprintf(h, sizeof(h), "transformer.h.%lld.%s", (long long)i, map[k].h);
			add_from(c, f, g, h, dt, map[k].conv);
		}
	}
}

static char *config_json(const loom_model_file *f, enum family fam, bool llama3_rope)
{
	cJSON *j = cJSON_CreateObject();
	if (fam == LLAMA) {
		cJSON_AddStringToObject(j, "model_type", "llama");
		cJSON_AddNumberToObject(j, "hidden_size", (double)meta_int(f, "llama.embedding_length"));
		cJSON_AddNumberToObject(j, "intermediate_size", (double)meta_int(f, "llama.feed_forward_length"));
		cJSON_AddNumberToObject(j, "num_hidden_layers", (double)meta_int(f, "llama.block_count"));
		cJSON_AddNumberToObject(j, "num_attention_heads", (double)meta_int(f, "llama.attention.head_count"));
		cJSON_AddNumberToObject(j, "num_key_value_heads", (double)meta_int(f, "llama.attention.head_count_kv"));
		cJSON_AddNumberToObject(j, "max_position_embeddings", (double)meta_int(f, "llama.context_length"));
		cJSON_AddNumberToObject(j, "rms_norm_eps", meta_float(f, "llama.attention.layer_norm_rms_epsilon"));
		cJSON_AddNumberToObject(j, "rope_theta", meta_float(f, "llama.rope.freq_base"));
		if (llama3_rope) {
			cJSON *r = cJSON_AddObjectToObject(j, "rope_scaling");
			cJSON_AddStringToObject(r, "rope_type", "llama3");
			cJSON_AddNumberToObject(r, "factor", L3_FACTOR);
			cJSON_AddNumberToObject(r, "low_freq_factor", L3_LOW);
			cJSON_AddNumberToObject(r, "high_freq_factor", L3_HIGH);
			cJSON_AddNumberToObject(r, "original_max_position_embeddings", L3_ORIG);
		} else {
			cJSON_AddNullToObject(j, "rope_scaling");
		}
		cJSON_AddFalseToObject(j, "tie_word_embeddings");
	} else {
		cJSON_AddStringToObject(j, "model_type", "gpt2");
		cJSON_AddNumberToObject(j, "n_embd", (double)meta_int(f, "gpt2.embedding_length"));
		cJSON_AddNumberToObject(j, "n_layer", (double)meta_int(f, "gpt2.block_count"));
		cJSON_AddNumberToObject(j, "n_head", (double)meta_int(f, "gpt2.attention.head_count"));
		cJSON_AddNumberToObject(j, "n_positions", (double)meta_int(f, "gpt2.context_length"));
		/* null: the width comes from the c_fc weight's shape. */
		cJSON_AddNullToObject(j, "n_inner");
		cJSON_AddNumberToObject(j, "layer_norm_epsilon", meta_float(f, "gpt2.attention.layer_norm_epsilon"));
	}
	char *text = cJSON_Print(j);
	cJSON_Delete(j);
	return text;
}

static void copy_file(const char *from, const char *to_dir, const char *name)
{
	size_t size;
	char *bytes = test_read_file(from, &size), path[4200];
	ck_assert_msg(bytes != NULL, "cannot read %s", from);
	snprintf(path, sizeof(path), "%s/%s", to_dir, name);
	FILE *out = fopen(path, "wb");
	ck_assert(out != NULL && fwrite(bytes, 1, size, out) == size && fclose(out) == 0);
	free(bytes);
}

/* The tokenizer: for llama the stories checkpoints' tokenizer.json (the
 * synthetic models share their 512-token vocabulary, which the test checks
 * piece by piece); for gpt2 a tokenizer.json of the GGUF's vocabulary and
 * merges. */
static bool write_tokenizer(const loom_model_file *f, enum family fam, const char *dir)
{
	if (fam == LLAMA) {
		char from[4096];
		if (!test_data_path(from, sizeof(from), "models/stories260K-hf/tokenizer.json"))
			return false;
		copy_file(from, dir, "tokenizer.json");
		return true;
	}
	const void *tokens, *merges;
	uint64_t n, n_merges;
	ck_assert(loom_meta_get_array(f, "tokenizer.ggml.tokens", LOOM_META_STRING, &tokens, &n) == LOOM_OK);
	ck_assert(loom_meta_get_array(f, "tokenizer.ggml.merges", LOOM_META_STRING, &merges, &n_merges) == LOOM_OK);
	cJSON *root = cJSON_CreateObject(), *model = cJSON_AddObjectToObject(root, "model");
	cJSON_AddStringToObject(model, "type", "BPE");
	cJSON *vocab = cJSON_AddObjectToObject(model, "vocab"), *list = cJSON_AddArrayToObject(model, "merges");
	for (uint64_t i = 0; i < n; i++) {
		char *s = loom_string_dup(((const loom_string *)tokens)[i]);
		cJSON_AddNumberToObject(vocab, s, (double)i);
		free(s);
	}
	for (uint64_t i = 0; i < n_merges; i++) {
		char *s = loom_string_dup(((const loom_string *)merges)[i]);
		cJSON_AddItemToArray(list, cJSON_CreateString(s));
		free(s);
	}
	cJSON *pre = cJSON_AddObjectToObject(root, "pre_tokenizer");
	cJSON_AddStringToObject(pre, "type", "ByteLevel");
	cJSON_AddFalseToObject(pre, "add_prefix_space");
	cJSON_AddTrueToObject(pre, "use_regex");
	char *text = cJSON_Print(root), path[4200];
	snprintf(path, sizeof(path), "%s/tokenizer.json", dir);
	FILE *out = fopen(path, "w");
	ck_assert(out != NULL && fputs(text, out) >= 0 && fclose(out) == 0);
	free(text);
	cJSON_Delete(root);
	return true;
}

/* The checkpoint's vocabulary is the source's, piece by piece. */
static void check_same_pieces(const loom_model *a, const loom_model *b)
{
	ck_assert_int_eq(loom_model_n_vocab(a), loom_model_n_vocab(b));
	for (loom_token t = 0; t < loom_model_n_vocab(a); t++) {
		char x[256], y[256];
		size_t nx = 0, ny = 0;
		ck_assert(loom_token_to_piece(a, t, true, x, sizeof(x), &nx) == LOOM_OK);
		ck_assert(loom_token_to_piece(b, t, true, y, sizeof(y), &ny) == LOOM_OK);
		ck_assert_msg(nx == ny && memcmp(x, y, nx) == 0, "token %d: '%.*s' in the GGUF, '%.*s' in the checkpoint", t,
			      (int)nx, x, (int)ny, y);
	}
}

/* Logits of every position of a fixed token sequence. */
static float *logits_of(loom_model *m, int n_vocab)
{
	static const loom_token toks[] = {1, 17, 300, 42, 99, 250, 7, 480, 3, 64};
	const int n = (int)(sizeof(toks) / sizeof(toks[0]));
	int8_t want[16];
	memset(want, 1, sizeof(want));
	loom_context *ctx = test_context(m, 64, 64, LOOM_DTYPE_F32);
	loom_batch b = {.n_tokens = n, .tokens = (loom_token *)toks, .logits = want};
	ck_assert_msg(loom_decode(ctx, &b) == LOOM_OK, "decode: %s", loom_last_error());
	float *out = malloc((size_t)(n * n_vocab) * sizeof(float));
	for (int p = 0; p < n; p++)
		memcpy(out + (size_t)(p * n_vocab), loom_get_logits(ctx, p), (size_t)n_vocab * sizeof(float));
	loom_context_free(ctx);
	return out;
}

static float max_diff(const float *a, const float *b, size_t n)
{
	float m = 0;
	for (size_t i = 0; i < n; i++) {
		float d = fabsf(a[i] - b[i]);
		m = d > m || isnan(d) ? (isnan(d) ? INFINITY : d) : m;
	}
	return m;
}

/* The converted file carries the scaling as llama.cpp's rope_freqs
 * tensor, equal to the formula; and the scaling changed the logits. */
static void check_llama3_factors(const char *converted, float to_unscaled)
{
	loom_model_file *f = test_open_gguf(converted);
	ck_assert_msg(f != NULL, "%s: %s", converted, test_plugin_error());
	const loom_file_tensor *t = tensor(f, "rope_freqs.weight");
	const int n_rot = (int)meta_int(f, "llama.rope.dimension_count");
	const double theta = meta_float(f, "llama.rope.freq_base");
	ck_assert_int_eq(t->ne[0], n_rot / 2);
	int blended = 0;
	for (int i = 0; i < n_rot / 2; i++) {
		double want = llama3_factor(i, n_rot, theta), got = ((const float *)t->data)[i];
		ck_assert_msg(fabs(got - want) <= 1e-6 * want, "rope_freqs[%d] = %.9g, expected %.9g", i, got, want);
		blended += want > 1.0 && want < L3_FACTOR;
	}
	ck_assert_msg(blended > 0, "no pair falls between the two wavelengths");
	test_close_gguf(f);
	ck_assert_msg(to_unscaled > 1e-3f, "Llama 3 scaling left the logits unchanged (%g)", to_unscaled);
}

START_TEST(synthetic_checkpoint_computes_its_source)
{
	const synth_case *sc = &cases[_i];
	char src[4096], rel[128], dir[4096], converted[4200];
	snprintf(rel, sizeof(rel), "models/synthetic/%s-f32.gguf", sc->family == LLAMA ? "llama" : "gpt2");
	if (!test_data_path(src, sizeof(src), rel))
		return;
	loom_model_file *f = test_open_gguf(src);
	ck_assert_msg(f != NULL, "%s: %s", src, test_plugin_error());
	snprintf(dir, sizeof(dir), "%s", test_tmp_dir(sc->name));
	checkpoint *c = calloc(1, sizeof(*c));
	if (sc->family == LLAMA)
		llama_tensors(c, f, sc->dtype);
	else
		gpt2_tensors(c, f, sc->dtype);
	char path[4200], *config = config_json(f, sc->family, sc->llama3_rope);
	snprintf(path, sizeof(path), "%s/model.safetensors", dir);
	ck_assert(sc->n_shards > 0 ? st_write_sharded(dir, c->t, c->n, sc->n_shards) : st_write_file(path, c->t, c->n));
	ck_assert(st_write_config(dir, config));
	bool have_tokenizer = write_tokenizer(f, sc->family, dir);
	free(config);
	for (int i = 0; i < c->n; i++)
		free(c->owned[i]);
	free(c);
	test_close_gguf(f);
	if (!have_tokenizer)
		return;

	loom_runtime *rt = test_runtime("cpu-avx2", 2);
	if (rt == NULL)
		rt = test_runtime("cpu-generic", 2);
	loom_model *source = NULL, *hf = NULL, *conv = NULL;
	ck_assert_msg(loom_model_load(rt, src, NULL, &source) == LOOM_OK, "%s: %s", src, loom_last_error());
	ck_assert_msg(loom_model_load(rt, dir, NULL, &hf) == LOOM_OK, "%s: %s", dir, loom_last_error());
	snprintf(converted, sizeof(converted), "%s/converted.gguf", dir);
	ck_assert_msg(loom_convert(rt, dir, converted, NULL) == LOOM_OK, "convert: %s", loom_last_error());
	ck_assert_msg(loom_model_load(rt, converted, NULL, &conv) == LOOM_OK, "%s: %s", converted, loom_last_error());
	const int n_vocab = loom_model_n_vocab(source);
	check_same_pieces(source, hf);
	float *a = logits_of(source, n_vocab), *b = logits_of(hf, n_vocab), *d = logits_of(conv, n_vocab);
	size_t n = (size_t)n_vocab * 10;
	float to_source = max_diff(a, b, n), to_converted = max_diff(b, d, n);
	printf("hf %-20s %-24s max |dlogit| to the f32 GGUF %.3g, to its converted GGUF %.3g\n", sc->name,
	       loom_model_format(hf), to_source, to_converted);
	if (sc->llama3_rope)
		check_llama3_factors(converted, to_source);
	else
		ck_assert_msg(to_source <= sc->tol_source, "%s: %g from the source model (tolerance %g)", sc->name,
			      to_source, sc->tol_source);
	ck_assert_msg(to_converted <= sc->tol_converted, "%s: %g from its converted GGUF (tolerance %g)", sc->name,
		      to_converted, sc->tol_converted);
	free(a);
	free(b);
	free(d);
	loom_model_free(source);
	loom_model_free(hf);
	loom_model_free(conv);
	loom_runtime_free(rt);
}
END_TEST

static Suite *hf_synthetic_suite(void)
{
	Suite *s = suite_create("hf_synthetic");
	TCase *tc = tcase_create("checkpoints");
	tcase_set_timeout(tc, 300);
	tcase_add_loop_test(tc, synthetic_checkpoint_computes_its_source, 0, N_CASES);
	suite_add_tcase(s, tc);
	return s;
}

LOOM_TEST_MAIN(hf_synthetic_suite)
