/* test_quant_policy.c - loom's choice of type per tensor under each
 * quantization scheme equals llama-quantize's, checked on every model in
 * ../shared that llama.cpp quantized from a float file that is there too. */
#include "check_main.h"
#include "plugin_host.h"
#include "testdata.h"

#include "export/quant_policy.h"
#include "model/contract.h"
#include "model/meta.h"
#include "model/naming.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct quantized_pair {
	const char *source;    /* under models/ */
	const char *quantized; /* made from it by llama-quantize */
	const char *scheme;
} quantized_pair;

static const quantized_pair pairs[] = {
	{"stories260K-f32.gguf", "stories260K-q4_k_m.gguf", "q4_k_m"},
	{"stories260K-f32.gguf", "stories260K-q5_k_m.gguf", "q5_k_m"},
	{"stories260K-f32.gguf", "stories260K-q6_k.gguf", "q6_k"},
	{"stories-llama-d256-f32.gguf", "stories-llama-d256-q8_0.gguf", "q8_0"},
	{"stories-llama-d256-f32.gguf", "stories-llama-d256-q4_0.gguf", "q4_0"},
	{"stories-llama-d256-f32.gguf", "stories-llama-d256-q4_k_m.gguf", "q4_k_m"},
	{"stories-llama-d256-f32.gguf", "stories-llama-d256-q5_k_m.gguf", "q5_k_m"},
	{"stories-llama-d256-f32.gguf", "stories-llama-d256-q6_k.gguf", "q6_k"},
	{"stories-llama-d256-f32.gguf", "stories-llama-d256-f16.gguf", "f16"},
	{"synthetic/llama-f32.gguf", "synthetic/llama-q8_0.gguf", "q8_0"},
	{"synthetic/llama-f32.gguf", "synthetic/llama-q4_k_m.gguf", "q4_k_m"},
	{"synthetic/qwen2-f32.gguf", "synthetic/qwen2-q4_k_m.gguf", "q4_k_m"},
	{"synthetic/qwen3-f32.gguf", "synthetic/qwen3-q4_k_m.gguf", "q4_k_m"},
	{"synthetic/gpt2-f32.gguf", "synthetic/gpt2-q4_k_m.gguf", "q4_k_m"},
	{"synthetic/gpt2-f32.gguf", "synthetic/gpt2-q8_0.gguf", "q8_0"},
	{"synthetic/phi2-f32.gguf", "synthetic/phi2-q4_k_m.gguf", "q4_k_m"},
	{"synthetic/gemma-f32.gguf", "synthetic/gemma-q4_k_m.gguf", "q4_k_m"},
	{"synthetic/stablelm-f32.gguf", "synthetic/stablelm-q4_k_m.gguf", "q4_k_m"},
	{"synthetic/starcoder2-f32.gguf", "synthetic/starcoder2-q4_k_m.gguf", "q4_k_m"},
};
#define N_PAIRS ((int)(sizeof(pairs) / sizeof(pairs[0])))

static loom_model_file *open_shared(const char *rel)
{
	char relpath[512], path[4096];
	snprintf(relpath, sizeof(relpath), "models/%s", rel);
	if (!test_data_path(path, sizeof(path), relpath))
		return NULL;
	loom_model_file *f = test_open_gguf(path);
	ck_assert_msg(f != NULL, "%s: %s", path, test_plugin_error());
	return f;
}

static const loom_file_tensor *find(const loom_model_file *f, loom_string name)
{
	for (uint64_t i = 0; i < f->n_tensors; i++)
		if (f->tensors[i].name.len == name.len && memcmp(f->tensors[i].name.data, name.data, name.len) == 0)
			return &f->tensors[i];
	return NULL;
}

/* Each tensor's role in the contract of the file's architecture (the
 * shipped contracts, GGUF section). */
static loom_role *roles_of(const loom_model_file *f)
{
	loom_string arch;
	char name[64], dir[4096];
	ck_assert(loom_meta_get_string(f, "general.architecture", &arch) == LOOM_OK);
	snprintf(name, sizeof(name), "%.*s", (int)arch.len, arch.data);
	snprintf(dir, sizeof(dir), "%s/arch", LOOM_TEST_SOURCE_DIR);
	char *dirs[] = {dir};
	loom_contract *c = NULL;
	ck_assert_msg(loom_contract_find(name, dirs, 1, &c) == LOOM_OK, "%s: %s", name, loom_last_error());
	loom_role *roles = malloc(f->n_tensors * sizeof(*roles));
	loom_contract_file_roles(c, LOOM_CFMT_GGUF, f, roles);
	loom_contract_free(c);
	return roles;
}

START_TEST(plan_matches_llama_quantize)
{
	const quantized_pair *p = &pairs[_i];
	loom_model_file *src = open_shared(p->source), *ref = src ? open_shared(p->quantized) : NULL;
	if (src == NULL || ref == NULL) {
		test_close_gguf(src);
		return;
	}
	const loom_quant_scheme *s = loom_quant_scheme_find(p->scheme);
	ck_assert_msg(s != NULL, "no scheme %s", p->scheme);
	ck_assert_uint_eq(src->n_tensors, ref->n_tensors);
	loom_dtype *types = malloc(src->n_tensors * sizeof(loom_dtype));
	loom_role *roles = roles_of(src);
	ck_assert_int_eq(loom_quant_plan(src, roles, s, types), LOOM_OK);
	free(roles);
	for (uint64_t i = 0; i < src->n_tensors; i++) {
		const loom_file_tensor *r = find(ref, src->tensors[i].name);
		ck_assert_msg(r != NULL, "%s lacks %.*s", p->quantized, (int)src->tensors[i].name.len,
			      src->tensors[i].name.data);
		ck_assert_msg(types[i] == r->dtype, "%s -> %s: %.*s is %s here, %s in llama.cpp's file", p->source,
			      p->scheme, (int)r->name.len, r->name.data, loom_dtype_traits_of(types[i]).name,
			      loom_dtype_traits_of(r->dtype).name);
	}
	int64_t ftype = -1;
	ck_assert(loom_meta_get_int(ref, "general.file_type", &ftype) == LOOM_OK);
	ck_assert_msg(ftype == s->file_type, "%s: file_type %lld, scheme says %d", p->quantized, (long long)ftype,
		      s->file_type);
	free(types);
	test_close_gguf(src);
	test_close_gguf(ref);
}
END_TEST

START_TEST(schemes_are_named)
{
	ck_assert_ptr_nonnull(loom_quant_scheme_find("Q4_K_M"));
	ck_assert_ptr_eq(loom_quant_scheme_find("q4_k"), loom_quant_scheme_find("q4_k_m"));
	ck_assert_ptr_eq(loom_quant_scheme_find("Q5_K"), loom_quant_scheme_find("q5_k_m"));
	ck_assert_ptr_null(loom_quant_scheme_find("q3_xl"));
	ck_assert_msg(strstr(loom_quant_scheme_names(), "q5_k_m") != NULL, "%s", loom_quant_scheme_names());
}
END_TEST

static Suite *quant_policy_suite(void)
{
	Suite *s = suite_create("quant_policy");
	TCase *tc = tcase_create("policy");
	tcase_add_loop_test(tc, plan_matches_llama_quantize, 0, N_PAIRS);
	tcase_add_test(tc, schemes_are_named);
	suite_add_tcase(s, tc);
	return s;
}

LOOM_TEST_MAIN(quant_policy_suite)
