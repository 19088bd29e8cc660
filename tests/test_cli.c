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

/* bench -npl: llama-batched-bench's table, a row per (PP, TG, B), the
 * cells each needed, and a clear refusal of the single-sequence options. */
START_TEST(batched_bench_reports_every_combination)
{
	char model[4096];
	if (!model_path(model, sizeof(model), "stories260K-f32.gguf"))
		return;
	const char *p = test_plugins_file();
	cmd_result r = run_cmd("$LOOM bench -m %s -npp 8,24 -ntg 4 -npl 1,3,20 -t 1 -o json --plugins %s", model, p);
	ck_assert_msg(r.status == 0, "exit %d: %s", r.status, r.err);
	cJSON *root = cJSON_Parse(r.out);
	ck_assert_msg(cJSON_IsArray(root) && cJSON_GetArraySize(root) == 6, "not 6 rows: %s", r.out);
	static const int pp[] = {8, 8, 8, 24, 24, 24}, pl[] = {1, 3, 20, 1, 3, 20};
	for (int i = 0; i < 6; i++) {
		const cJSON *t = cJSON_GetArrayItem(root, i);
		ck_assert_int_eq(cJSON_GetObjectItem(t, "pp")->valueint, pp[i]);
		ck_assert_int_eq(cJSON_GetObjectItem(t, "tg")->valueint, 4);
		ck_assert_int_eq(cJSON_GetObjectItem(t, "pl")->valueint, pl[i]);
		ck_assert_int_eq(cJSON_GetObjectItem(t, "n_kv")->valueint, pl[i] * (pp[i] + 4));
		double t_pp = cJSON_GetObjectItem(t, "t_pp")->valuedouble, s_pp = cJSON_GetObjectItem(t, "speed_pp")->valuedouble;
		double t_tg = cJSON_GetObjectItem(t, "t_tg")->valuedouble, s_tg = cJSON_GetObjectItem(t, "speed_tg")->valuedouble;
		ck_assert_msg(t_pp > 0 && t_tg > 0 && fabs(s_pp * t_pp - pl[i] * pp[i]) < 1e-3 * pl[i] * pp[i] &&
				      fabs(s_tg * t_tg - pl[i] * 4) < 1e-3 * pl[i] * 4,
			      "row %d: %s", i, cJSON_PrintUnformatted(t));
	}
	cJSON_Delete(root);
	cmd_result_free(&r);

	/* A shared prompt is evaluated once: PP + B * TG cells. A context too
	 * small for a combination skips it, saying so. */
	r = run_cmd("$LOOM bench -m %s -npp 16 -ntg 4 -npl 2,8 -pps -c 40 -t 1 --plugins %s", model, p);
	ck_assert_msg(r.status == 0 && strstr(r.out, "| 16 | 4 | 2 | 24 |") != NULL &&
			      strstr(r.out, "| 16 | 4 | 8 |") == NULL && strstr(r.err, "skipping PP 16 TG 4 B 8: 48 cells") != NULL,
		      "-pps -c 40: %d\n%s\n%s", r.status, r.out, r.err);
	cmd_result_free(&r);

	static const char *const wrong[][2] = {
		{"-npp 8 -ntg 4", "go with -npl"},
		{"-npl 2 -p 16", "single-sequence"},
		{"-npl 0", "in [1, 256]"},
		{"-npl 2,x", "-npl expects an integer"},
		{"-npl 2,,3", "-npl expects an integer"},
		{"-npl 300", "in [1, 256]"},
	};
	for (size_t i = 0; i < sizeof(wrong) / sizeof(wrong[0]); i++) {
		r = run_cmd("$LOOM bench -m %s %s --plugins %s", model, wrong[i][0], p);
		ck_assert_msg(r.status == 1 && strstr(r.err, wrong[i][1]) != NULL, "%s: %d %s", wrong[i][0], r.status,
			      r.err);
		cmd_result_free(&r);
	}
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

/* Every subcommand prints its own usage for -h, --help and `loom help
 * CMD`, on stdout, and exits 0. */
START_TEST(help_on_every_subcommand)
{
	static const char *const cmds[] = {"run", "chat", "serve", "tokenize", "perplexity",
					   "info", "bench", "quantize", "convert"};
	for (size_t i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++) {
		char usage[64];
		snprintf(usage, sizeof(usage), "usage: loom %s", cmds[i]);
		cmd_result h = run_cmd("$LOOM %s -h", cmds[i]);
		cmd_result l = run_cmd("$LOOM %s -v --help", cmds[i]);
		cmd_result c = run_cmd("$LOOM help %s", cmds[i]);
		ck_assert_msg(h.status == 0 && strncmp(h.out, usage, strlen(usage)) == 0 && h.err[0] == '\0',
			      "loom %s -h: exit %d, out '%.80s', err '%s'", cmds[i], h.status, h.out, h.err);
		ck_assert_msg(l.status == 0 && strcmp(l.out, h.out) == 0, "loom %s --help: exit %d", cmds[i], l.status);
		ck_assert_msg(c.status == 0 && strcmp(c.out, h.out) == 0, "loom help %s: exit %d", cmds[i], c.status);
		cmd_result_free(&h);
		cmd_result_free(&l);
		cmd_result_free(&c);
	}
	cmd_result r = run_cmd("$LOOM help");
	ck_assert_msg(r.status == 0 && strstr(r.out, "loom help COMMAND") != NULL, "loom help: %d %s", r.status, r.out);
	cmd_result_free(&r);
	r = run_cmd("$LOOM help frobnicate");
	ck_assert_msg(r.status == 1 && strstr(r.err, "unknown command 'frobnicate'") != NULL, "%d %s", r.status, r.err);
	cmd_result_free(&r);
}
END_TEST

/* -f FILE gives the same prompt as -p; - is stdin. A missing file, a
 * directory, or both -p and -f is a one-line error. */
START_TEST(prompt_from_a_file)
{
	char model[4096], file[4200], nul[4200];
	if (!model_path(model, sizeof(model), "stories260K-f32.gguf"))
		return;
	const char *dir = test_tmp_dir("cli_prompt_file");
	test_write_file(file, sizeof(file), dir, "prompt.txt", "Once upon a time");
	const char *p = test_plugins_file();
	cmd_result a = run_cmd("$LOOM run -m %s -p 'Once upon a time' -n 12 --temp 0 --plugins %s", model, p);
	cmd_result b = run_cmd("$LOOM run -m %s -f %s -n 12 --temp 0 --plugins %s", model, file, p);
	cmd_result c = run_cmd("printf 'Once upon a time' | $LOOM run -m %s -f - -n 12 --temp 0 --plugins %s", model, p);
	ck_assert_msg(a.status == 0 && b.status == 0 && c.status == 0, "exit %d %d %d: %s %s", a.status, b.status,
		      c.status, b.err, c.err);
	ck_assert_msg(strcmp(a.out, b.out) == 0 && strcmp(a.out, c.out) == 0, "-p '%s', -f '%s', stdin '%s'", a.out,
		      b.out, c.out);
	cmd_result_free(&a);
	cmd_result_free(&b);
	cmd_result_free(&c);

	/* A NUL byte is text like any other byte: the tokenizer's byte token. */
	snprintf(nul, sizeof(nul), "%s/nul.txt", dir);
	cmd_result t = run_cmd("printf 'a\\000b' > %s && $LOOM tokenize -m %s -f %s --no-bos --plugins %s && "
			       "$LOOM tokenize -m %s -p a --no-bos --plugins %s",
			       nul, model, nul, p, model, p);
	ck_assert_msg(t.status == 0, "tokenize with a NUL: %s", t.err);
	/* <0x00> is token 3 + 0 in a llama2.c vocabulary. */
	ck_assert_msg(strstr(t.out, " 3 ") != NULL, "no byte token for the NUL: %s", t.out);
	cmd_result_free(&t);
	/* So is a byte that is not UTF-8: <0xFF> is 3 + 255. */
	t = run_cmd("printf 'a\\377b' | $LOOM tokenize -m %s -f - --no-bos --plugins %s", model, p);
	ck_assert_msg(t.status == 0 && strstr(t.out, " 258 ") != NULL, "invalid UTF-8: %d '%s' %s", t.status, t.out,
		      t.err);
	cmd_result_free(&t);

	t = run_cmd("$LOOM bench -m %s -f %s -p 16 -n 0 -r 1 --plugins %s", model, file, p);
	ck_assert_msg(t.status == 0 && strstr(t.out, "pp16") != NULL, "bench -f: %d %s %s", t.status, t.out, t.err);
	cmd_result_free(&t);

	const char *bad[] = {
		"$LOOM run -m %1$s -f /nonexistent/prompt.txt --plugins %2$s",
		"$LOOM run -m %1$s -f %3$s --plugins %2$s",
		"$LOOM run -m %1$s -p hi -f %4$s --plugins %2$s",
		"$LOOM tokenize -m %1$s -f %3$s --plugins %2$s",
		"$LOOM chat -m %1$s -f %3$s --plugins %2$s",
		"$LOOM perplexity -m %1$s -f %3$s --plugins %2$s",
	};
	const char *want[] = {"No such file", "is a directory", "not both", "is a directory", "is a directory",
			      "is a directory"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		cmd_result r = run_cmd(bad[i], model, p, dir, file);
		ck_assert_msg(r.status == 1 && strstr(r.err, want[i]) != NULL && strchr(r.err, '\n') == r.err + strlen(r.err) - 1,
			      "'%s': exit %d, stderr '%s'", bad[i], r.status, r.err);
		cmd_result_free(&r);
	}
}
END_TEST

/* Mistakes that used to pass in silence. */
START_TEST(mistakes_are_not_silent)
{
	char model[4096];
	if (!model_path(model, sizeof(model), "stories260K-f32.gguf"))
		return;
	const char *p = test_plugins_file();
	const char *dir = test_tmp_dir("cli_mistakes");

	/* An unquoted prompt: the stray word is named. */
	cmd_result r = run_cmd("$LOOM run -m %s -p Once upon a time --plugins %s", model, p);
	ck_assert_msg(r.status == 1 && strstr(r.err, "unexpected argument 'upon'") != NULL, "%d %s", r.status, r.err);
	cmd_result_free(&r);
	r = run_cmd("$LOOM quantize a.gguf b.gguf q8_0 extra");
	ck_assert_msg(r.status == 1 && strstr(r.err, "unexpected argument 'extra'") != NULL, "%d %s", r.status, r.err);
	cmd_result_free(&r);

	/* Output that cannot be written is a failure. */
	r = run_cmd("$LOOM run -m %s -p Once -n 8 --temp 0 --plugins %s > /dev/full", model, p);
	ck_assert_msg(r.status == 1 && strstr(r.err, "cannot write to standard output") != NULL, "%d %s", r.status,
		      r.err);
	cmd_result_free(&r);
	r = run_cmd("$LOOM tokenize -m %s -p Once --plugins %s > /dev/full", model, p);
	ck_assert_msg(r.status == 1 && strstr(r.err, "cannot write to standard output") != NULL, "%d %s", r.status,
		      r.err);
	cmd_result_free(&r);

	/* A FIFO as the model is refused at once, not read forever. */
	r = run_cmd("rm -f %1$s/fifo && mkfifo %1$s/fifo && timeout 20 $LOOM run -m %1$s/fifo -p hi --plugins %2$s", dir, p);
	ck_assert_msg(r.status == 1 && strstr(r.err, "is a FIFO") != NULL, "%d %s", r.status, r.err);
	cmd_result_free(&r);

	/* A context beyond the training context warns; one the machine
	 * cannot hold is refused before it is allocated. */
	r = run_cmd("$LOOM run -m %s -p Once -n 2 -c 1024 --plugins %s", model, p);
	ck_assert_msg(r.status == 0 && strstr(r.err, "warning: -c 1024 is more than the 512 tokens") != NULL, "%d %s",
		      r.status, r.err);
	cmd_result_free(&r);
	r = run_cmd("/usr/bin/time -f 'peak %%M KiB' $LOOM run -m %s -p Once -c 16000000 --plugins %s", model, p);
	long peak_kib = -1;
	const char *peak = strstr(r.err, "peak ");
	if (peak != NULL)
		peak_kib = strtol(peak + 5, NULL, 10);
	ck_assert_msg(r.status != 0 && strstr(r.err, "of host memory; this machine has") != NULL, "%d %s", r.status,
		      r.err);
	ck_assert_msg(peak_kib > 0 && peak_kib < 512 * 1024, "refusing the context took %ld KiB", peak_kib);
	cmd_result_free(&r);
}
END_TEST

/* The seed of an unseeded run comes from the system's entropy and is shown
 * with -v; given back with -s it repeats the run. */
START_TEST(unseeded_runs_differ_and_show_their_seed)
{
	char model[4096];
	if (!model_path(model, sizeof(model), "stories260K-f32.gguf"))
		return;
	const char *fmt = "$LOOM run -m %s -p 'Once upon a time' -n 40 --temp 1.0 --top-k 0 --top-p 1 -v %s --plugins %s";
	cmd_result a = run_cmd(fmt, model, "", test_plugins_file());
	cmd_result b = run_cmd(fmt, model, "--seed -1", test_plugins_file());
	ck_assert_msg(a.status == 0 && b.status == 0, "exit %d %d: %s", a.status, b.status, a.err);
	ck_assert_msg(strcmp(a.out, b.out) != 0, "two unseeded runs wrote the same text: %s", a.out);
	const char *seed = strstr(a.err, "loom: seed ");
	ck_assert_msg(seed != NULL, "-v does not show the seed: %s", a.err);
	char again[64];
	snprintf(again, sizeof(again), "-s %llu", strtoull(seed + strlen("loom: seed "), NULL, 10));
	cmd_result c = run_cmd(fmt, model, again, test_plugins_file());
	ck_assert_msg(c.status == 0 && strcmp(a.out, c.out) == 0, "%s did not repeat the run:\n%s\n%s", again, a.out,
		      c.out);
	cmd_result_free(&a);
	cmd_result_free(&b);
	cmd_result_free(&c);
}
END_TEST

/* When the context fills, `run` says what to do; with --context-shift it
 * goes on, and the tokens before the first shift are the same. */
START_TEST(run_shifts_the_context_when_asked)
{
	char model[4096];
	if (!model_path(model, sizeof(model), "stories260K-f32.gguf"))
		return;
	const char *p = test_plugins_file();
	cmd_result a = run_cmd("$LOOM run -m %s -p 'Once upon a time' -n 100 -c 32 --temp 0 --plugins %s", model, p);
	ck_assert_msg(a.status == 0 && strstr(a.err, "stopped by context full") != NULL &&
			      strstr(a.err, "--context-shift") != NULL,
		      "%d %s", a.status, a.err);
	cmd_result b = run_cmd("$LOOM run -m %s -p 'Once upon a time' -n 100 -c 32 --temp 0 --context-shift --keep 2 "
			       "--plugins %s",
			       model, p);
	/* 5 prompt tokens with BOS, 3 kept: shifts drop 14, 14, 14, ... as
	 * the 100 tokens pass position 32. */
	ck_assert_msg(b.status == 0 && strstr(b.err, "generation: 100 tokens") != NULL &&
			      strstr(b.err, "the context was shifted 6 times, dropping 84 tokens") != NULL,
		      "%d %s", b.status, b.err);
	size_t n = strlen(a.out) - 1; /* without its newline */
	ck_assert_msg(strncmp(a.out, b.out, n) == 0 && strlen(b.out) > n + 100, "without shift '%s'\nwith '%s'", a.out,
		      b.out);
	cmd_result_free(&a);
	cmd_result_free(&b);
}
END_TEST

/* A chat past its context goes on by default (shifting), and ends with
 * the reason when shifting is off. */
START_TEST(chat_shifts_the_context_by_default)
{
	char model[4096], file[4200];
	if (!model_path(model, sizeof(model), "stories260K-qwen2-f32.gguf"))
		return;
	test_write_file(file, sizeof(file), test_tmp_dir("cli_chat_shift"), "turns.txt",
			"Hello there\nHow are you?\nTell me a story\n");
	const char *p = test_plugins_file();
	cmd_result a = run_cmd("$LOOM chat -m %s -f %s -c 64 -n 30 --temp 0 --plugins %s", model, file, p);
	ck_assert_msg(a.status == 0 && strstr(a.err, "turn 3:") != NULL && strstr(a.err, "the context was shifted") != NULL,
		      "%d %s", a.status, a.err);
	cmd_result b = run_cmd("$LOOM chat -m %s -f %s -c 64 -n 30 --temp 0 --no-context-shift --plugins %s", model,
			       file, p);
	ck_assert_msg(b.status == 1 && strstr(b.err, "context") != NULL && strstr(b.err, "turn 3:") == NULL, "%d %s",
		      b.status, b.err);
	/* Until the first shift both chats wrote the same. */
	const char *first_line_end = strchr(a.out, '\n');
	ck_assert(first_line_end != NULL);
	ck_assert_msg(strncmp(a.out, b.out, (size_t)(first_line_end - a.out)) == 0, "%s\n--\n%s", a.out, b.out);
	cmd_result_free(&a);
	cmd_result_free(&b);
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

	/* A host program finds the moved tree through pkg-config, and through
	 * CMake's find_package, and runs against it. */
	r = run_cmd("export PKG_CONFIG_PATH=%1$s/moved/lib/pkgconfig && pkg-config --cflags --libs loom && "
		    "cc -std=c11 " LOOM_TEST_HOST_CFLAGS " %2$s/examples/embed.c $(pkg-config --cflags --libs loom) "
		    "-Wl,-rpath,$(pkg-config --variable=libdir loom) -o %1$s/embed-pc && "
		    "cd / && env -u LOOM_PLUGINS %1$s/embed-pc %3$s 'Once upon a time'",
		    dir, LOOM_TEST_SOURCE_DIR, model);
	ck_assert_msg(r.status == 0 && strstr(r.out, "-I") != NULL && strstr(r.out, "/moved/lib/pkgconfig/../../include") != NULL &&
			      strstr(r.out, "next token: 432") != NULL,
		      "pkg-config build: exit %d: %s %s", r.status, r.out, r.err);
	cmd_result_free(&r);
	r = run_cmd("mkdir -p %1$s/host && printf '%%s\\n' 'cmake_minimum_required(VERSION 3.16)' 'project(host C)' "
		    "'find_package(loom 1.0 REQUIRED)' 'add_executable(embed %2$s/examples/embed.c)' "
		    "'target_link_libraries(embed PRIVATE loom::loom)' > %1$s/host/CMakeLists.txt && "
		    "cmake -S %1$s/host -B %1$s/host/build -DCMAKE_PREFIX_PATH=%1$s/moved "
		    "-DCMAKE_C_FLAGS='" LOOM_TEST_HOST_CFLAGS "' >/dev/null && "
		    "cmake --build %1$s/host/build >/dev/null && cd / && env -u LOOM_PLUGINS %1$s/host/build/embed %3$s "
		    "'Once upon a time'",
		    dir, LOOM_TEST_SOURCE_DIR, model);
	ck_assert_msg(r.status == 0 && strstr(r.out, "next token: 432") != NULL, "find_package build: exit %d: %s %s",
		      r.status, r.out, r.err);
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
	tcase_add_test(tc, batched_bench_reports_every_combination);
	tcase_add_test(tc, user_errors_exit_1_with_a_message);
	tcase_add_test(tc, help_on_every_subcommand);
	tcase_add_test(tc, prompt_from_a_file);
	tcase_add_test(tc, mistakes_are_not_silent);
	tcase_add_test(tc, unseeded_runs_differ_and_show_their_seed);
	tcase_add_test(tc, run_shifts_the_context_when_asked);
	tcase_add_test(tc, chat_shifts_the_context_by_default);
	tcase_add_test(tc, embed_example_runs);
	tcase_add_test(tc, installed_tree_runs_alone);
	suite_add_tcase(s, tc);
	return s;
}

LOOM_TEST_MAIN(cli_suite)
