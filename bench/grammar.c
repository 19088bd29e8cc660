/*
 * grammar.c - what following a JSON schema costs a token, per vocabulary:
 *
 *   loom-bench-grammar [--dump FILE] PLUGINS_YAML SUITE_DIR MODEL...
 *
 * The workload: every schema of the JSON-Schema-Test-Suite (SUITE_DIR,
 * e.g. /usr/share/json-schema-test-suite/tests/draft7) that loom compiles,
 * and schemas shaped like agents' tool arguments (below), each followed
 * through its valid instances as the model's tokenizer cuts them. At every
 * token: the check of that token (what sample-then-check costs when the
 * draw is allowed) and the whole mask (what it costs when the draw is
 * refused), timed apart. Prints per model the p50, p99 and largest of each
 * in microseconds, and the schemas' compile times. --dump writes the
 * workload (one {"schema", "instance"} a line) for bench/grammar_llamacpp.cpp
 * to run llama.cpp's grammar sampler on (bench/grammar_table.sh).
 */
#include "grammar/grammar_sampler.h"

#include <cjson/cJSON.h>
#include <dirent.h>
#include <loom.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

/* Agents' tool arguments, and the instances a model would write. */
static const struct {
	const char *schema, *instance;
} agent_cases[] = {
	{"{\"type\":\"object\",\"properties\":{\"location\":{\"type\":\"string\",\"description\":\"City\"},"
	 "\"unit\":{\"enum\":[\"celsius\",\"fahrenheit\"]}},\"required\":[\"location\",\"unit\"],\"additionalProperties\":false}",
	 "{\"location\": \"San Francisco, CA\", \"unit\": \"celsius\"}"},
	{"{\"type\":\"object\",\"properties\":{\"query\":{\"type\":\"string\"},\"max_results\":{\"type\":\"integer\",\"minimum\":0},"
	 "\"filters\":{\"type\":\"array\",\"items\":{\"type\":\"object\",\"properties\":{\"field\":{\"type\":\"string\"},"
	 "\"value\":{\"type\":[\"string\",\"number\",\"null\"]}},\"required\":[\"field\",\"value\"]}}},\"required\":[\"query\"]}",
	 "{\"query\": \"open issues about grammar sampling in llama.cpp\", \"max_results\": 20, \"filters\": "
	 "[{\"field\": \"state\", \"value\": \"open\"}, {\"field\": \"comments\", \"value\": 3.5}]}"},
	{"{\"type\":\"object\",\"properties\":{\"path\":{\"type\":\"string\"},\"content\":{\"type\":\"string\"},"
	 "\"mode\":{\"enum\":[\"overwrite\",\"append\"]},\"created\":{\"type\":\"string\",\"format\":\"date-time\"}},"
	 "\"required\":[\"path\",\"content\",\"mode\",\"created\"],\"additionalProperties\":false}",
	 "{\"path\": \"src/main.c\", \"content\": \"#include <stdio.h>\\nint main(void) { puts(\\\"hi\\\"); }\\n\", "
	 "\"mode\": \"overwrite\", \"created\": \"2026-11-27T21:15:00Z\"}"},
};

typedef struct workload {
	char **schemas, **instances;
	int n, cap;
} workload;

static void add_case(workload *w, const char *schema, const char *instance)
{
	if (w->n == w->cap) {
		w->cap = w->cap ? 2 * w->cap : 64;
		w->schemas = realloc(w->schemas, (size_t)w->cap * sizeof(char *));
		w->instances = realloc(w->instances, (size_t)w->cap * sizeof(char *));
	}
	w->schemas[w->n] = strdup(schema);
	w->instances[w->n++] = strdup(instance);
}

static bool grammar_takes(const loom_grammar *g, const char *s)
{
	loom_gr_matcher m;
	if (loom_gr_matcher_init(&m, g) != LOOM_OK)
		return false;
	bool ok = loom_gr_matcher_accept(&m, (const unsigned char *)s, strlen(s)) && loom_gr_can_end(m.state);
	loom_gr_matcher_free(&m);
	return ok;
}

/* The suite's compiled schemas with their valid instances loom takes. */
static void read_suite(const char *dir_path, workload *w, double *compile_us, int *n_compiled)
{
	DIR *dir = opendir(dir_path);
	if (dir == NULL)
		return;
	for (struct dirent *d; (d = readdir(dir)) != NULL;) {
		if (strstr(d->d_name, ".json") == NULL)
			continue;
		char path[1024];
		snprintf(path, sizeof(path), "%s/%s", dir_path, d->d_name);
		FILE *f = fopen(path, "rb");
		if (f == NULL)
			continue;
		static char text[1 << 20];
		size_t len = fread(text, 1, sizeof(text) - 1, f);
		fclose(f);
		cJSON *groups = cJSON_ParseWithLength(text, len);
		for (const cJSON *grp = groups ? groups->child : NULL; grp != NULL; grp = grp->next) {
			char *schema = cJSON_PrintUnformatted(cJSON_GetObjectItemCaseSensitive(grp, "schema"));
			loom_grammar *g = NULL;
			double t0 = now_us();
			loom_status st = loom_grammar_from_json_schema(schema, strlen(schema), &g);
			double dt = now_us() - t0;
			if (st == LOOM_OK) {
				compile_us[(*n_compiled)++] = dt;
				const cJSON *tests = cJSON_GetObjectItemCaseSensitive(grp, "tests");
				for (const cJSON *t = tests->child; t != NULL; t = t->next) {
					char *inst = cJSON_PrintUnformatted(cJSON_GetObjectItemCaseSensitive(t, "data"));
					if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(t, "valid")) && grammar_takes(g, inst))
						add_case(w, schema, inst);
					free(inst);
				}
				loom_grammar_free(g);
			}
			free(schema);
		}
		cJSON_Delete(groups);
	}
	closedir(dir);
}

static int by_value(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

static void summary(const char *what, double *v, int n)
{
	qsort(v, (size_t)n, sizeof(double), by_value);
	printf("  %-6s %6d tokens: p50 %8.1f us  p99 %8.1f us  max %8.1f us\n", what, n, v[n / 2], v[n * 99 / 100],
	       v[n - 1]);
}

int main(int argc, char **argv)
{
	const char *dump = NULL;
	if (argc > 2 && strcmp(argv[1], "--dump") == 0) {
		dump = argv[2];
		argv += 2;
		argc -= 2;
	}
	if (argc < 4) {
		fprintf(stderr, "usage: %s [--dump FILE] PLUGINS_YAML SUITE_DIR MODEL...\n", argv[0]);
		return 2;
	}
	workload w = {0};
	static double compile_us[4096];
	int n_compiled = 0;
	for (size_t i = 0; i < sizeof(agent_cases) / sizeof(agent_cases[0]); i++) {
		loom_grammar *g = NULL;
		double t0 = now_us();
		if (loom_grammar_from_json_schema(agent_cases[i].schema, strlen(agent_cases[i].schema), &g) != LOOM_OK) {
			fprintf(stderr, "agent schema %zu: %s\n", i, loom_last_error());
			return 1;
		}
		compile_us[n_compiled++] = now_us() - t0;
		if (!grammar_takes(g, agent_cases[i].instance)) {
			fprintf(stderr, "agent schema %zu does not take its instance\n", i);
			return 1;
		}
		loom_grammar_free(g);
		add_case(&w, agent_cases[i].schema, agent_cases[i].instance);
	}
	read_suite(argv[2], &w, compile_us, &n_compiled);
	if (dump != NULL) {
		FILE *f = fopen(dump, "w");
		for (int i = 0; f != NULL && i < w.n; i++) {
			cJSON *line = cJSON_CreateObject();
			cJSON_AddItemToObject(line, "schema", cJSON_Parse(w.schemas[i]));
			cJSON_AddStringToObject(line, "instance", w.instances[i]);
			char *text = cJSON_PrintUnformatted(line);
			fprintf(f, "%s\n", text);
			free(text);
			cJSON_Delete(line);
		}
		if (f == NULL || fclose(f) != 0) {
			fprintf(stderr, "cannot write %s\n", dump);
			return 1;
		}
	}
	qsort(compile_us, (size_t)n_compiled, sizeof(double), by_value);
	printf("%d schemas compiled: p50 %.1f us, max %.1f us; %d instances\n", n_compiled, compile_us[n_compiled / 2],
	       compile_us[n_compiled - 1], w.n);

	loom_runtime_params rp = loom_runtime_default_params();
	rp.plugins_file = argv[1];
	rp.backend = "cpu-generic";
	rp.log_level = LOOM_LOG_ERROR;
	loom_runtime *rt = NULL;
	if (loom_runtime_create(&rp, &rt) != LOOM_OK) {
		fprintf(stderr, "%s\n", loom_last_error());
		return 1;
	}
	for (int mi = 3; mi < argc; mi++) {
		/* The vocabulary is all it needs: a tokenizer's GGUF will do. */
		loom_model *m = NULL;
		loom_model_params mp = loom_model_default_params();
		mp.vocab_only = true;
		if (loom_model_load(rt, argv[mi], &mp, &m) != LOOM_OK) {
			fprintf(stderr, "%s: %s\n", argv[mi], loom_last_error());
			return 1;
		}
		double t0 = now_us();
		if (loom_model_token_trie(m) == NULL) {
			fprintf(stderr, "trie: %s\n", loom_last_error());
			return 1;
		}
		printf("%s: vocabulary %d, trie built in %.1f ms\n", argv[mi], loom_model_n_vocab(m), (now_us() - t0) / 1e3);
		size_t cap = 1 << 16;
		double *check = malloc(cap * sizeof(double)), *mask = malloc(cap * sizeof(double));
		int n = 0;
		const int32_t n_vocab = loom_model_n_vocab(m);
		float *logits = calloc((size_t)n_vocab, sizeof(float));
		for (int c = 0; c < w.n; c++) {
			loom_grammar *g = NULL;
			loom_grammar_from_json_schema(w.schemas[c], strlen(w.schemas[c]), &g);
			loom_grammar_follow *f = NULL;
			loom_grammar_follow_create(m, g, &f);
			/* The instance as tokens a model writes mid-text: after an "x"
			 * (a SentencePiece tokenizer gives a text's first token its
			 * space), whose token is dropped. */
			static char text[1 << 16];
			static loom_token toks[1 << 14];
			snprintf(text, sizeof(text), "x%s", w.instances[c]);
			size_t n_toks = 0, first = 0;
			char prefix[64];
			size_t prefix_len = 0;
			bool ok = loom_tokenize(m, text, strlen(text), false, false, toks, 1 << 14, &n_toks) == LOOM_OK;
			/* The tokens that make " x" or "x" are the prefix. */
			while (ok && first < n_toks && prefix_len < 2 && !(prefix_len == 1 && prefix[0] == 'x')) {
				size_t len = 0;
				ok = loom_token_to_piece(m, toks[first++], false, prefix + prefix_len, sizeof(prefix) - prefix_len,
							 &len) == LOOM_OK;
				prefix_len += len;
			}
			if (!ok || !((prefix_len == 1 && prefix[0] == 'x') || (prefix_len == 2 && memcmp(prefix, " x", 2) == 0))) {
				loom_grammar_follow_free(f);
				loom_grammar_free(g);
				continue;
			}
			for (size_t k = first; k < n_toks && n + 1 < (int)cap; k++) {
				bool allowed;
				const float *masked;
				double a = now_us();
				loom_grammar_follow_check(f, toks[k], &allowed);
				double b = now_us();
				loom_grammar_follow_mask(f, logits, n_vocab, &masked);
				double e = now_us();
				if (!allowed)
					break; /* the tokenizer cut it where the grammar does not go */
				check[n] = b - a;
				mask[n++] = e - b;
				loom_grammar_follow_accept(f, toks[k]);
			}
			loom_grammar_follow_free(f);
			loom_grammar_free(g);
		}
		summary("check", check, n);
		summary("mask", mask, n);
		free(check);
		free(mask);
		free(logits);
		loom_model_free(m);
	}
	loom_runtime_free(rt);
	return 0;
}
