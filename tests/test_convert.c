/* test_convert.c - `loom convert` and quantizing at load. The Hugging Face
 * checkpoints in ../shared/models hold the same weights as llama.cpp's f32
 * GGUFs of them; converted, they must give those files back tensor for
 * tensor (Q and K rows permuted back to llama.cpp's order), with the
 * hyperparameters llama.cpp reads, and run to the golden outputs. */
#include "check_main.h"
#include "fixture.h"
#include "golden_check.h"
#include "plugin_host.h"
#include "run_cmd.h"
#include "testdata.h"

#include "model/meta.h"
#include "model/model.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct hf_case {
	const char *hf;     /* directory under models/ */
	const char *gguf;   /* llama.cpp's f32 file of the same weights */
	const char *golden; /* its golden directory */
} hf_case;

static const hf_case cases[] = {
	{"stories260K-hf", "stories260K-f32.gguf", "stories260K-f32"},
	{"stories-llama-d256-hf", "stories-llama-d256-f32.gguf", "stories-llama-d256-f32"},
};
#define N_CASES ((int)(sizeof(cases) / sizeof(cases[0])))

static const loom_file_tensor *find(const loom_model_file *f, loom_string name)
{
	for (uint64_t i = 0; i < f->n_tensors; i++)
		if (f->tensors[i].name.len == name.len && memcmp(f->tensors[i].name.data, name.data, name.len) == 0)
			return &f->tensors[i];
	return NULL;
}

static const loom_meta_value *find_meta(const loom_model_file *f, loom_string key)
{
	for (uint64_t i = 0; i < f->n_meta; i++)
		if (f->meta[i].key.len == key.len && memcmp(f->meta[i].key.data, key.data, key.len) == 0)
			return &f->meta[i].value;
	return NULL;
}

/* Writes models/<hf> as a GGUF in a fresh directory; false if the data is
 * absent. */
static bool convert(loom_runtime *rt, const char *hf, const char *type, char *out, size_t size)
{
	char rel[256], in[4096];
	snprintf(rel, sizeof(rel), "models/%s", hf);
	if (!test_data_path(in, sizeof(in), rel))
		return false;
	snprintf(out, size, "%s/%s-%s.gguf", test_tmp_dir("convert"), hf, type ? type : "kept");
	loom_convert_params p = loom_convert_default_params();
	p.type = type;
	loom_status st = loom_convert(rt, in, out, &p);
	ck_assert_msg(st == LOOM_OK, "convert %s: %s", hf, loom_last_error());
	return true;
}

/* Every tensor of llama.cpp's file is in the converted one, byte for byte,
 * but a head the checkpoint ties to the embedding; every llama.* key they
 * share has the same type and value; the vocabulary is the same. */
START_TEST(converted_checkpoint_is_llama_cpp_file)
{
	const hf_case *c = &cases[_i];
	char ref_path[4096], rel[256], out[4200];
	snprintf(rel, sizeof(rel), "models/%s", c->gguf);
	if (!test_data_path(ref_path, sizeof(ref_path), rel))
		return;
	loom_runtime *rt = test_runtime("cpu-generic", 2);
	if (!convert(rt, c->hf, NULL, out, sizeof(out))) {
		loom_runtime_free(rt);
		return;
	}
	loom_model_file *ours = test_open_gguf(out), *ref = test_open_gguf(ref_path);
	ck_assert_msg(ours != NULL && ref != NULL, "open: %s", test_plugin_error());
	int compared = 0;
	for (uint64_t i = 0; i < ref->n_tensors; i++) {
		const loom_file_tensor *r = &ref->tensors[i], *o = find(ours, r->name);
		if (o == NULL && loom_string_eq(r->name, "output.weight")) {
			loom_string embd = {strlen("token_embd.weight"), "token_embd.weight"};
			o = find(ours, embd);
			ck_assert_msg(o != NULL && memcmp(o->data, r->data, r->n_bytes) == 0,
				      "%s: the tied head is not the embedding", c->hf);
			continue;
		}
		ck_assert_msg(o != NULL, "%s: converted file lacks %.*s", c->hf, (int)r->name.len, r->name.data);
		ck_assert_msg(o->dtype == r->dtype && o->n_dims == r->n_dims && o->ne[0] == r->ne[0] && o->ne[1] == r->ne[1],
			      "%s: %.*s differs in type or shape", c->hf, (int)r->name.len, r->name.data);
		ck_assert_msg(memcmp(o->data, r->data, r->n_bytes) == 0, "%s: %.*s has other bytes", c->hf,
			      (int)r->name.len, r->name.data);
		compared++;
	}
	ck_assert_int_eq((int)ours->n_tensors, compared);
	for (uint64_t i = 0; i < ref->n_meta; i++) {
		loom_string k = ref->meta[i].key;
		if (k.len < 6 || memcmp(k.data, "llama.", 6) != 0)
			continue;
		const loom_meta_value *a = find_meta(ours, k), *b = &ref->meta[i].value;
		ck_assert_msg(a != NULL, "%s: converted file lacks %.*s", c->hf, (int)k.len, k.data);
		ck_assert_msg(a->type == b->type, "%s: %.*s is %s, llama.cpp wrote %s", c->hf, (int)k.len, k.data,
			      loom_meta_type_name(a->type), loom_meta_type_name(b->type));
		bool same = a->type == LOOM_META_F32 ? fabs(a->v.f - b->v.f) <= 1e-6 * fabs(b->v.f) : a->v.u == b->v.u;
		ck_assert_msg(same, "%s: %.*s differs", c->hf, (int)k.len, k.data);
	}
	const void *ta, *tb;
	uint64_t na, nb;
	ck_assert(loom_meta_get_array(ours, "tokenizer.ggml.tokens", LOOM_META_STRING, &ta, &na) == LOOM_OK);
	ck_assert(loom_meta_get_array(ref, "tokenizer.ggml.tokens", LOOM_META_STRING, &tb, &nb) == LOOM_OK);
	ck_assert_uint_eq(na, nb);
	for (uint64_t i = 0; i < na; i++) {
		loom_string x = ((const loom_string *)ta)[i], y = ((const loom_string *)tb)[i];
		ck_assert_msg(x.len == y.len && memcmp(x.data, y.data, x.len) == 0, "%s: token %llu differs", c->hf,
			      (unsigned long long)i);
	}
	printf("convert %-24s %d tensors byte-identical to %s\n", c->hf, compared, c->gguf);
	test_close_gguf(ours);
	test_close_gguf(ref);

	loom_model *m = NULL;
	ck_assert_msg(loom_model_load(rt, out, NULL, &m) == LOOM_OK, "load %s: %s", out, loom_last_error());
	golden_check_model(m, c->golden, 1e-4f, "converted");
	loom_model_free(m);
	loom_runtime_free(rt);
}
END_TEST

/* Converting with --type writes what `loom quantize` makes of llama.cpp's
 * f32 file, and quantizing at load computes exactly what that file does. */
START_TEST(quantized_conversion_matches_quantize)
{
	char src[4096], out[4200], quantized[4200];
	if (!test_data_path(src, sizeof(src), "models/stories-llama-d256-f32.gguf"))
		return;
	loom_runtime *rt = test_runtime("cpu-generic", 2);
	if (!convert(rt, "stories-llama-d256-hf", "q4_k_m", out, sizeof(out))) {
		loom_runtime_free(rt);
		return;
	}
	snprintf(quantized, sizeof(quantized), "%s/q4_k_m.gguf", test_tmp_dir("convert_quantize"));
	loom_quantize_params qp = loom_quantize_default_params();
	qp.scheme = "q4_k_m";
	ck_assert_msg(loom_quantize(rt, src, quantized, &qp) == LOOM_OK, "quantize: %s", loom_last_error());
	loom_model_file *a = test_open_gguf(out), *b = test_open_gguf(quantized);
	ck_assert_msg(a != NULL && b != NULL, "open: %s", test_plugin_error());
	ck_assert_uint_eq(a->n_tensors, b->n_tensors);
	for (uint64_t i = 0; i < b->n_tensors; i++) {
		const loom_file_tensor *t = find(a, b->tensors[i].name);
		ck_assert_msg(t != NULL && t->dtype == b->tensors[i].dtype && t->n_bytes == b->tensors[i].n_bytes &&
				      memcmp(t->data, b->tensors[i].data, t->n_bytes) == 0,
			      "%.*s differs from loom quantize's", (int)b->tensors[i].name.len, b->tensors[i].name.data);
	}
	test_close_gguf(a);
	test_close_gguf(b);

	loom_model_params mp = loom_model_default_params();
	mp.quantize = "q4_k_m";
	loom_model *at_load = test_model_with(rt, "stories-llama-d256-hf", &mp), *file = NULL;
	ck_assert_msg(loom_model_load(rt, out, NULL, &file) == LOOM_OK, "load %s: %s", out, loom_last_error());
	loom_context *x = test_context(at_load, 64, 64, LOOM_DTYPE_F32), *y = test_context(file, 64, 64, LOOM_DTYPE_F32);
	loom_token toks[] = {1, 403, 407, 261, 378, 9, 77, 300};
	int8_t want[8];
	memset(want, 1, sizeof(want));
	loom_batch batch = {.n_tokens = 8, .tokens = toks, .logits = want};
	ck_assert(loom_decode(x, &batch) == LOOM_OK && loom_decode(y, &batch) == LOOM_OK);
	for (int p = 0; p < 8; p++)
		ck_assert_msg(memcmp(loom_get_logits(x, p), loom_get_logits(y, p), 512 * sizeof(float)) == 0,
			      "position %d: quantized at load differs from the converted file", p);
	loom_context_free(x);
	loom_context_free(y);
	loom_model_free(at_load);
	loom_model_free(file);
	loom_runtime_free(rt);
}
END_TEST

/* The command: a converted checkpoint continues a prompt as the GGUF does. */
START_TEST(convert_command)
{
	char hf[4096], gguf[4096], out[4200];
	if (!test_data_path(hf, sizeof(hf), "models/stories260K-hf") ||
	    !test_data_path(gguf, sizeof(gguf), "models/stories260K-f32.gguf"))
		return;
	snprintf(out, sizeof(out), "%s/s.gguf", test_tmp_dir("convert_command"));
	const char *plugins = "--plugins " LOOM_TEST_BUILD_DIR "/plugins.yaml";
	cmd_result r = run_cmd("$LOOM convert %s %s --type f16 %s", hf, out, plugins);
	ck_assert_msg(r.status == 0 && strstr(r.err, "-> ") != NULL, "convert: exit %d: %s", r.status, r.err);
	cmd_result_free(&r);
	cmd_result a = run_cmd("$LOOM run -m %s -p 'Once upon a time' -n 16 --temp 0 %s", out, plugins);
	cmd_result b = run_cmd("$LOOM run -m %s -p 'Once upon a time' -n 16 --temp 0 %s", gguf, plugins);
	ck_assert_msg(a.status == 0 && b.status == 0, "run: %s %s", a.err, b.err);
	ck_assert_msg(strlen(a.out) > 20 && strcmp(a.out, b.out) == 0, "converted f16 '%s', gguf f32 '%s'", a.out, b.out);
	cmd_result_free(&a);
	cmd_result_free(&b);
	r = run_cmd("$LOOM convert %s %s --type q3 %s", hf, out, plugins);
	ck_assert_msg(r.status != 0 && strstr(r.err, "unknown quantization scheme 'q3'") != NULL, "bad type: %s", r.err);
	cmd_result_free(&r);
}
END_TEST

/* Logits of "Once upon a time" and one more token on m. */
static float *step_logits(loom_model *m)
{
	loom_context *ctx = test_context(m, 64, 64, LOOM_DTYPE_F32);
	loom_token toks[32];
	size_t n;
	ck_assert(loom_tokenize(m, "Once upon a time", 16, true, false, toks, 32, &n) == LOOM_OK);
	loom_batch b = {.n_tokens = (int32_t)n, .tokens = toks};
	ck_assert_msg(loom_decode(ctx, &b) == LOOM_OK, "%s", loom_last_error());
	size_t bytes = (size_t)loom_model_n_vocab(m) * sizeof(float);
	float *out = malloc(bytes);
	memcpy(out, loom_get_logits(ctx, (int32_t)n - 1), bytes);
	loom_context_free(ctx);
	return out;
}

/* `loom convert --layout` writes the weights as the backend repacked them;
 * that file loads with nothing repacked, the weights used in place, and
 * computes exactly what the original does. Any other backend refuses it,
 * naming the one it is for; a backend that repacks nothing has nothing to
 * write. One file per repacked layout: Q8_0, Q4_0, Q4_K (and Q6_K). */
static const char *const layout_models[] = {"stories-llama-d256-q8_0.gguf", "stories-llama-d256-q4_0.gguf",
					     "stories-llama-d256-q4_k_m.gguf"};

START_TEST(laid_out_file_runs_in_place)
{
	char in[4096], rel[256], out[4300];
	snprintf(rel, sizeof(rel), "models/%s", layout_models[_i]);
	if (!test_data_path(in, sizeof(in), rel))
		return;
	loom_runtime *rt = test_runtime("cpu-avx512", 2);
	if (rt == NULL)
		return;
	snprintf(out, sizeof(out), "%s/laid-out-%d.gguf", test_tmp_dir("convert_layout"), _i);
	loom_convert_params p = loom_convert_default_params();
	p.backend_layout = true;
	ck_assert_msg(loom_convert(rt, in, out, &p) == LOOM_OK, "%s", loom_last_error());

	loom_model *orig = NULL, *laid = NULL;
	ck_assert(loom_model_load(rt, in, NULL, &orig) == LOOM_OK);
	ck_assert_msg(loom_model_load(rt, out, NULL, &laid) == LOOM_OK, "%s", loom_last_error());
	ck_assert_int_gt(orig->n_repacked, 0);
	/* Q4_K's layout is larger than its blocks: those are repacked at load
	 * still, the Q6_K ones are not. */
	ck_assert_msg(laid->in_backend_layouts && (_i == 2 ? laid->n_repacked < orig->n_repacked : laid->n_repacked == 0),
		      "the laid-out file was repacked again (%d of %d)", laid->n_repacked, orig->n_repacked);
	float *want = step_logits(orig), *got = step_logits(laid);
	ck_assert_msg(memcmp(want, got, (size_t)loom_model_n_vocab(orig) * sizeof(float)) == 0,
		      "the laid-out file computes other logits");
	free(want);
	free(got);
	loom_model_free(orig);
	loom_model_free(laid);

	/* Laying it out again, or with a type, is refused or harmless. */
	p.type = "q8_0";
	ck_assert_int_eq(loom_convert(rt, in, out, &p), LOOM_ERR_INVALID_ARGUMENT);
	loom_runtime_free(rt);

	rt = test_runtime("cpu-avx2", 1);
	if (rt != NULL) {
		ck_assert_int_eq(loom_model_load(rt, out, NULL, &laid), LOOM_ERR_UNSUPPORTED);
		ck_assert_msg(strstr(loom_last_error(), "laid out for backend cpu-avx512") != NULL, "%s", loom_last_error());
		loom_runtime_free(rt);
	}
	rt = test_runtime("cpu-generic", 1);
	p.type = NULL;
	ck_assert_int_eq(loom_convert(rt, in, out, &p), LOOM_ERR_UNSUPPORTED);
	ck_assert_msg(strstr(loom_last_error(), "nothing to lay out") != NULL, "%s", loom_last_error());
	loom_runtime_free(rt);
}
END_TEST

static Suite *convert_suite(void)
{
	Suite *s = suite_create("convert");
	TCase *tc = tcase_create("convert");
	tcase_set_timeout(tc, 300);
	tcase_add_loop_test(tc, converted_checkpoint_is_llama_cpp_file, 0, N_CASES);
	tcase_add_test(tc, quantized_conversion_matches_quantize);
	tcase_add_test(tc, convert_command);
	tcase_add_loop_test(tc, laid_out_file_runs_in_place, 0, 3);
	suite_add_tcase(s, tc);
	return s;
}

LOOM_TEST_MAIN(convert_suite)
