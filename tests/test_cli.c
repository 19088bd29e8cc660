/* test_cli.c - the loom command end to end: run, tokenize, perplexity,
 * info, bench and their errors, against ../shared/golden; and the embedding
 * example, which uses nothing but loom.h. */
#include "check_main.h"
#include "fixture.h"
#include "golden.h"
#include "run_cmd.h"
#include "testdata.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static bool model_path(char *buf, size_t size, const char *file)
{
	char rel[512];
	snprintf(rel, sizeof(rel), "models/%.400s", file);
	return test_data_path(buf, size, rel);
}

static bool backend_usable(const char *backend)
{
	loom_runtime *rt = test_runtime(backend, 1);
	loom_runtime_free(rt);
	return rt != NULL;
}

/* `loom run --temp 0` prints exactly llama.cpp's greedy continuation. */
START_TEST(run_greedy_matches_reference)
{
	const char *backend = test_cpu_backends[_i];
	char model[4096];
	golden_case g;
	if (!backend_usable(backend) || !model_path(model, sizeof(model), "stories260K-f32.gguf"))
		return;
	ck_assert(golden_load("stories260K-f32", "once_upon_a_time", &g));
	cmd_result r = run_cmd("$LOOM run -m %s -p 'Once upon a time' -n %d --temp 0 --kv-type f32 --backend %s "
			       "--plugins %s -t 2", model, g.n_greedy, backend, test_plugins_file());
	ck_assert_msg(r.status == 0, "exit %d: %s", r.status, r.err);
	size_t len = strlen(g.greedy_text);
	ck_assert_msg(strncmp(r.out, g.greedy_text, len) == 0 && strcmp(r.out + len, "\n") == 0,
		      "%s: output\n  '%s'\nexpected\n  '%s'", backend, r.out, g.greedy_text);
	ck_assert_msg(strstr(r.err, "tokens/s") != NULL, "timings go to stderr: %s", r.err);
	cmd_result_free(&r);
	golden_free(&g);
}
END_TEST

/* Sampling with a seed is repeatable; another seed gives another text. */
START_TEST(run_sampling_is_seeded)
{
	char model[4096];
	if (!model_path(model, sizeof(model), "stories260K-f32.gguf"))
		return;
	const char *fmt = "$LOOM run -m %s -p 'Once upon a time' -n 48 --temp 1.0 --top-k 40 --top-p 0.9 "
			  "--min-p 0.05 --repeat-penalty 1.1 --seed %d --plugins %s";
	cmd_result a = run_cmd(fmt, model, 7, test_plugins_file());
	cmd_result b = run_cmd(fmt, model, 7, test_plugins_file());
	cmd_result c = run_cmd(fmt, model, 8, test_plugins_file());
	ck_assert_msg(a.status == 0 && b.status == 0 && c.status == 0, "exit: %s", a.err);
	ck_assert_msg(strcmp(a.out, b.out) == 0, "same seed, different text:\n%s\n%s", a.out, b.out);
	ck_assert_msg(strcmp(a.out, c.out) != 0, "seeds 7 and 8 gave the same text: %s", a.out);
	cmd_result_free(&a);
	cmd_result_free(&b);
	cmd_result_free(&c);
}
END_TEST

/* A stop string ends the output before it. */
START_TEST(run_stop_string)
{
	char model[4096];
	if (!model_path(model, sizeof(model), "stories260K-f32.gguf"))
		return;
	cmd_result r = run_cmd("$LOOM run -m %s -p 'Once upon a time' -n 64 --temp 0 --stop 'Lily' --plugins %s",
			       model, test_plugins_file());
	ck_assert_msg(r.status == 0, "exit %d: %s", r.status, r.err);
	ck_assert_msg(strcmp(r.out, ", there was a little girl named \n") == 0, "output '%s'", r.out);
	ck_assert_msg(strstr(r.err, "stop string") != NULL, "stderr: %s", r.err);
	cmd_result_free(&r);
}
END_TEST

START_TEST(tokenize_prints_ids)
{
	char model[4096];
	if (!model_path(model, sizeof(model), "stories260K-f32.gguf"))
		return;
	cmd_result r = run_cmd("$LOOM tokenize -m %s -p 'Once upon a time' --plugins %s", model, test_plugins_file());
	ck_assert_msg(r.status == 0 && strcmp(r.out, "1 403 407 261 378\n") == 0, "exit %d, out '%s' %s", r.status,
		      r.out, r.err);
	cmd_result_free(&r);
	r = run_cmd("$LOOM tokenize -m %s -p 'Once upon a time' --no-bos --plugins %s", model, test_plugins_file());
	ck_assert_msg(r.status == 0 && strcmp(r.out, "403 407 261 378\n") == 0, "out '%s'", r.out);
	cmd_result_free(&r);
}
END_TEST

/* Vocabulary-only files (no tensors) of the other tokenizers tokenize too. */
START_TEST(tokenize_vocab_only_files)
{
	static const struct {
		const char *file, *want;
	} cases[] = {
		{"ggml-vocab-gpt-2.gguf", "15496 995 0\n"},
		{"ggml-vocab-bert-bge.gguf", "101 7592 2088 999 102\n"},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char rel[256], path[4096];
		snprintf(rel, sizeof(rel), "golden/tokenizer/%s", cases[i].file);
		if (!test_data_path(path, sizeof(path), rel))
			return;
		cmd_result r = run_cmd("$LOOM tokenize -m %s -p 'Hello world!' --plugins %s", path,
				       test_plugins_file());
		ck_assert_msg(r.status == 0 && strcmp(r.out, cases[i].want) == 0, "%s: exit %d, out '%s' %s",
			      cases[i].file, r.status, r.out, r.err);
		cmd_result_free(&r);
	}
}
END_TEST

/* Perplexity as llama-perplexity computes it, within 0.1% of its value
 * (the reference used an f16 KV cache, as loom does by default). */
static const char *const ppl_models[] = {
	"stories260K-f32", "stories260K-f16", "llama-2-tiny-random",
	"stories-llama-d256-f32", "stories-llama-d256-f16", "stories-llama-d256-q8_0",
};
#define N_PPL_MODELS ((int)(sizeof(ppl_models) / sizeof(ppl_models[0])))

static double reference_ppl(const char *name)
{
	char path[4096];
	if (!test_data_path(path, sizeof(path), "golden/perplexity/results.json"))
		return -1;
	char *text = test_read_file(path, NULL);
	cJSON *root = cJSON_Parse(text);
	double v = cJSON_GetObjectItem(cJSON_GetObjectItem(root, name), "ppl")->valuedouble;
	cJSON_Delete(root);
	free(text);
	return v;
}

/* The model called name and the golden text, where the data and the
 * backend are there (each SKIPs otherwise). model and text hold 4096. */
static bool ppl_inputs(const char *backend, const char *name, char *model, char *text)
{
	char file[256];
	snprintf(file, sizeof(file), "%s.gguf", name);
	return backend_usable(backend) && model_path(model, 4096, file) &&
	       test_data_path(text, 4096, "golden/perplexity/ppl_story.txt");
}

/* `loom perplexity` of the golden text with a KV cache of kv_type. */
static double loom_ppl(const char *model, const char *text, const char *backend, const char *kv_type)
{
	cmd_result r = run_cmd("$LOOM perplexity -m %s -f %s -c 128 -b 128 -t 2 --kv-type %s --backend %s --plugins %s",
			       model, text, kv_type, backend, test_plugins_file());
	ck_assert_msg(r.status == 0, "%s: exit %d: %s", model, r.status, r.err);
	const char *last = strstr(r.out, "PPL = ");
	ck_assert_msg(last != NULL, "%s: no PPL line in '%s'", model, r.out);
	double got = strtod(last + 6, NULL);
	cmd_result_free(&r);
	return got;
}

START_TEST(perplexity_matches_reference)
{
	const char *backend = test_cpu_backends[_i / N_PPL_MODELS];
	const char *name = ppl_models[_i % N_PPL_MODELS];
	char model[4096], text[4096];
	if (!ppl_inputs(backend, name, model, text))
		return;
	double want = reference_ppl(name);
	double got = loom_ppl(model, text, backend, "f16");
	double rel = fabs(got - want) / want;
	printf("perplexity %-28s %-12s %.4f (llama.cpp %.4f, %.3f%%)\n", name, backend, got, want, rel * 100);
	ck_assert_msg(rel <= 1e-3, "%s on %s: PPL %.4f, llama.cpp %.4f (%.3f%% apart)", name, backend, got, want,
		      rel * 100);
}
END_TEST

/* A quantized KV cache costs little: against llama.cpp's perplexity with an
 * f16 cache, within 0.5% with q8_0 and 2% with q4_0. (llama.cpp's own with
 * these caches, for the record: bench/RESULTS.md.) */
static const char *const quantized_cache_models[] = {"stories-llama-d256-f32", "stories-gpt2-d128-f16"};
static const struct {
	const char *type;
	double bound;
} quantized_caches[] = {{"q8_0", 0.005}, {"q4_0", 0.02}};
#define N_QC_MODELS 2
#define N_QC_TYPES 2

START_TEST(perplexity_with_quantized_cache)
{
	const char *backend = test_cpu_backends[_i / (N_QC_MODELS * N_QC_TYPES)];
	const char *name = quantized_cache_models[_i / N_QC_TYPES % N_QC_MODELS];
	int type = _i % N_QC_TYPES;
	char model[4096], text[4096];
	if (!ppl_inputs(backend, name, model, text))
		return;
	double want = reference_ppl(name);
	double got = loom_ppl(model, text, backend, quantized_caches[type].type);
	double rel = fabs(got - want) / want;
	printf("perplexity %-28s %-12s %s cache %.4f (llama.cpp f16 cache %.4f, %.3f%%)\n", name, backend,
	       quantized_caches[type].type, got, want, rel * 100);
	ck_assert_msg(rel <= quantized_caches[type].bound, "%s on %s with a %s cache: PPL %.4f, %.3f%% from %.4f", name,
		      backend, quantized_caches[type].type, got, rel * 100, want);
}
END_TEST

START_TEST(info_lists_metadata_and_tensors)
{
	char model[4096];
	if (!model_path(model, sizeof(model), "stories260K-f32.gguf"))
		return;
	cmd_result r = run_cmd("$LOOM info %s --plugins %s", model, test_plugins_file());
	ck_assert_msg(r.status == 0, "exit %d: %s", r.status, r.err);
	ck_assert_msg(strstr(r.out, "llama.embedding_length") && strstr(r.out, "64") &&
			      strstr(r.out, "tensors (48,") && strstr(r.out, "blk.4.ffn_down.weight") &&
			      strstr(r.out, "[172, 64]"),
		      "info output:\n%s", r.out);
	cmd_result_free(&r);
}
END_TEST

START_TEST(bench_json_has_llama_bench_fields)
{
	char model[4096];
	if (!model_path(model, sizeof(model), "stories260K-f32.gguf"))
		return;
	cmd_result r = run_cmd("$LOOM bench -m %s -p 16 -n 8 -r 2 -t 1 -o json --plugins %s", model,
			       test_plugins_file());
	ck_assert_msg(r.status == 0, "exit %d: %s", r.status, r.err);
	cJSON *root = cJSON_Parse(r.out);
	ck_assert_msg(cJSON_IsArray(root) && cJSON_GetArraySize(root) == 2, "not a 2-test JSON array: %s", r.out);
	for (int i = 0; i < 2; i++) {
		const cJSON *t = cJSON_GetArrayItem(root, i);
		int n_prompt = cJSON_GetObjectItem(t, "n_prompt")->valueint;
		int n_gen = cJSON_GetObjectItem(t, "n_gen")->valueint;
		double avg = cJSON_GetObjectItem(t, "avg_ts")->valuedouble;
		ck_assert_msg(cJSON_IsNumber(cJSON_GetObjectItem(t, "stddev_ts")), "stddev_ts missing");
		ck_assert_msg(n_prompt == (i == 0 ? 16 : 0) && n_gen == (i == 0 ? 0 : 8) && avg > 0,
			      "test %d: n_prompt %d n_gen %d avg_ts %g", i, n_prompt, n_gen, avg);
	}
	cJSON_Delete(root);
	cmd_result_free(&r);
	r = run_cmd("$LOOM bench -m %s -p 16 -n 8 -r 1 --plugins %s", model, test_plugins_file());
	ck_assert_msg(r.status == 0 && strstr(r.out, "| pp16 |") && strstr(r.out, "| tg8 |"), "md: %s", r.out);
	cmd_result_free(&r);

	/* -d: both tests run after that many cached tokens, past the model's
	 * 512-token training context too. */
	r = run_cmd("$LOOM bench -m %s -p 16 -n 8 -d 600 -r 2 -t 1 -o json --plugins %s", model, test_plugins_file());
	ck_assert_msg(r.status == 0, "-d 600: exit %d: %s", r.status, r.err);
	root = cJSON_Parse(r.out);
	ck_assert_msg(cJSON_IsArray(root) && cJSON_GetArraySize(root) == 2, "-d 600: %s", r.out);
	for (int i = 0; i < 2; i++) {
		const cJSON *t = cJSON_GetArrayItem(root, i);
		ck_assert_int_eq(cJSON_GetObjectItem(t, "n_depth")->valueint, 600);
		ck_assert_msg(cJSON_GetObjectItem(t, "avg_ts")->valuedouble > 0, "-d 600: %s", r.out);
	}
	cJSON_Delete(root);
	cmd_result_free(&r);
	r = run_cmd("$LOOM bench -m %s -p 16 -n 8 -d 40 -r 1 -t 1 --plugins %s", model, test_plugins_file());
	ck_assert_msg(r.status == 0 && strstr(r.out, "| pp16 @ d40 |") && strstr(r.out, "| tg8 @ d40 |"), "md: %s",
		      r.out);
	cmd_result_free(&r);
}
END_TEST

/* User errors: exit status 1 and one line on stderr, never a signal. */
START_TEST(user_errors_exit_1_with_a_message)
{
	char model[4096], bad[4200];
	if (!model_path(model, sizeof(model), "stories260K-f32.gguf"))
		return;
	const char *dir = test_tmp_dir("cli_errors");
	snprintf(bad, sizeof(bad), "%s/truncated.gguf", dir);
	cmd_result t = run_cmd("head -c 5000 %s > %s", model, bad);
	cmd_result_free(&t);
	const char *cmds[] = {
		"$LOOM run -m /nonexistent.gguf -p hi --plugins %2$s",
		"$LOOM run -m %1$s --plugins %2$s",
		"$LOOM run -m %1$s -p hi --temp abc --plugins %2$s",
		"$LOOM run -m %1$s -p hi --frobnicate 3 --plugins %2$s",
		"$LOOM run -m %3$s -p hi --plugins %2$s",
		"$LOOM run -m %1$s -p hi --backend cpu-imaginary --plugins %2$s",
		"$LOOM run -m %1$s -p hi --plugins /nonexistent/plugins.yaml",
		"$LOOM perplexity -m %1$s -f /nonexistent.txt --plugins %2$s",
		"$LOOM frobnicate",
	};
	for (size_t i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++) {
		cmd_result r = run_cmd(cmds[i], model, test_plugins_file(), bad);
		const char *nl = strchr(r.err, '\n');
		ck_assert_msg(r.status == 1, "'%s': exit %d, stderr %s", cmds[i], r.status, r.err);
		ck_assert_msg(strncmp(r.err, "loom", 4) == 0 && nl != NULL, "'%s': stderr '%s'", cmds[i], r.err);
		cmd_result_free(&r);
	}
}
END_TEST

/* The embedding example, built against loom.h alone, runs. */
START_TEST(embed_example_runs)
{
	char model[4096];
	if (!model_path(model, sizeof(model), "stories260K-f32.gguf"))
		return;
	cmd_result r = run_cmd("LOOM_PLUGINS=%s %s/embed %s 'Once upon a time'", test_plugins_file(),
			       LOOM_TEST_BUILD_DIR, model);
	ck_assert_msg(r.status == 0, "exit %d: %s", r.status, r.err);
	ck_assert_msg(strstr(r.out, "next token: 432") && strstr(r.out, "Once upon a time, there was a little girl"),
		      "output: %s", r.out);
	cmd_result_free(&r);
}
END_TEST

/* An installed loom, moved away from where it was installed, still finds
 * its plugins.yaml, plugins and contracts: nothing points into the source
 * or build tree. */
START_TEST(installed_tree_runs_alone)
{
	char model[4096];
	if (!model_path(model, sizeof(model), "stories260K-f32.gguf"))
		return;
	const char *dir = test_tmp_dir("install");
	cmd_result r = run_cmd("cmake --install %s --prefix %s/staged >/dev/null && mv %s/staged %s/moved", LOOM_TEST_BUILD_DIR,
			       dir, dir, dir);
	ck_assert_msg(r.status == 0, "install: %s", r.err);
	cmd_result_free(&r);
	r = run_cmd("cd / && unset LOOM_PLUGINS LOOM_BACKEND && %s/moved/bin/loom run -m %s -p 'Once upon a time' -n 8 "
		    "--temp 0", dir, model);
	ck_assert_msg(r.status == 0, "installed loom: exit %d: %s", r.status, r.err);
	ck_assert_msg(strcmp(r.out, ", there was a little girl\n") == 0, "output '%s'", r.out);
	cmd_result_free(&r);
	r = run_cmd("cd / && %s/moved/bin/loom info --plugins", dir);
	ck_assert_msg(r.status == 0 && strstr(r.out, "/moved/lib") != NULL, "plugins: %s %s", r.out, r.err);
	cmd_result_free(&r);
}
END_TEST

static Suite *cli_suite(void)
{
	Suite *s = suite_create("cli");
	TCase *tc = tcase_create("cli");
	tcase_set_timeout(tc, 300);
	tcase_add_loop_test(tc, run_greedy_matches_reference, 0, test_n_cpu_backends);
	tcase_add_test(tc, run_sampling_is_seeded);
	tcase_add_test(tc, run_stop_string);
	tcase_add_test(tc, tokenize_prints_ids);
	tcase_add_test(tc, tokenize_vocab_only_files);
	tcase_add_loop_test(tc, perplexity_matches_reference, 0, N_PPL_MODELS * test_n_cpu_backends);
	tcase_add_loop_test(tc, perplexity_with_quantized_cache, 0, N_QC_MODELS * N_QC_TYPES * test_n_cpu_backends);
	tcase_add_test(tc, info_lists_metadata_and_tensors);
	tcase_add_test(tc, bench_json_has_llama_bench_fields);
	tcase_add_test(tc, user_errors_exit_1_with_a_message);
	tcase_add_test(tc, embed_example_runs);
	tcase_add_test(tc, installed_tree_runs_alone);
	suite_add_tcase(s, tc);
	return s;
}

LOOM_TEST_MAIN(cli_suite)
