/* golden.c - reading ../shared/golden: the llm-golden-v1 files of the real
 * models and the sidecar files of the synthetic ones. */
#include "golden.h"

#include "testdata.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static loom_token *int_array(const cJSON *a, int *n)
{
	*n = cJSON_GetArraySize(a);
	loom_token *v = malloc(((size_t)*n + 1) * sizeof(loom_token));
	for (int i = 0; v != NULL && i < *n; i++)
		v[i] = (loom_token)cJSON_GetArrayItem(a, i)->valuedouble;
	return v;
}

static float *read_floats(const char *path, size_t count)
{
	size_t size = 0;
	float *v = test_read_file(path, &size);
	if (v != NULL && size != count * sizeof(float)) {
		fprintf(stderr, "golden: %s has %zu bytes, expected %zu\n", path, size, count * sizeof(float));
		free(v);
		return NULL;
	}
	return v;
}

static char *dup_string(const cJSON *s)
{
	return cJSON_IsString(s) ? strdup(s->valuestring) : NULL;
}

/* llm-golden-v1: greedy steps carry the chosen and runner-up logits. */
static bool load_v1(const cJSON *root, const char *base, golden_case *g)
{
	const cJSON *greedy = cJSON_GetObjectItem(root, "greedy");
	const cJSON *steps = cJSON_GetObjectItem(greedy, "steps");
	char path[4200];
	g->tokens = int_array(cJSON_GetObjectItem(root, "prompt_tokens"), &g->n_tokens);
	g->n_vocab = cJSON_GetObjectItem(root, "n_vocab")->valueint;
	g->greedy = int_array(cJSON_GetObjectItem(greedy, "tokens"), &g->n_greedy);
	g->greedy_text = dup_string(cJSON_GetObjectItem(greedy, "text"));
	g->first_eog = cJSON_GetObjectItem(greedy, "first_eog_index")->valueint;
	g->greedy_logit = calloc((size_t)g->n_greedy + 1, sizeof(float));
	g->greedy_gap = calloc((size_t)g->n_greedy + 1, sizeof(float));
	for (int i = 0; i < g->n_greedy && i < cJSON_GetArraySize(steps); i++) {
		const cJSON *s = cJSON_GetArrayItem(steps, i);
		g->greedy_logit[i] = (float)cJSON_GetObjectItem(s, "logit")->valuedouble;
		g->greedy_gap[i] = g->greedy_logit[i] - (float)cJSON_GetObjectItem(s, "second_logit")->valuedouble;
	}
	snprintf(path, sizeof(path), "%s.logits.f32", base);
	g->logits = read_floats(path, (size_t)g->n_tokens * (size_t)g->n_vocab);
	return g->logits != NULL;
}

/* Synthetic sidecars: the greedy logits are whole rows in <prompt>.gen.f32. */
static bool load_synthetic(const cJSON *root, const char *base, golden_case *g)
{
	char path[4200];
	g->tokens = int_array(cJSON_GetObjectItem(root, "tokens"), &g->n_tokens);
	g->n_vocab = cJSON_GetObjectItem(root, "n_vocab")->valueint;
	g->greedy = int_array(cJSON_GetObjectItem(root, "greedy"), &g->n_greedy);
	g->first_eog = -1;
	const cJSON *gaps = cJSON_GetObjectItem(root, "greedy_top1_top2_gap");
	g->greedy_logit = calloc((size_t)g->n_greedy + 1, sizeof(float));
	g->greedy_gap = calloc((size_t)g->n_greedy + 1, sizeof(float));
	snprintf(path, sizeof(path), "%s.gen.f32", base);
	float *gen = read_floats(path, (size_t)g->n_greedy * (size_t)g->n_vocab);
	if (gen == NULL)
		return false;
	for (int i = 0; i < g->n_greedy; i++) {
		g->greedy_logit[i] = gen[(size_t)i * (size_t)g->n_vocab + (size_t)g->greedy[i]];
		g->greedy_gap[i] = (float)cJSON_GetArrayItem(gaps, i)->valuedouble;
	}
	free(gen);
	snprintf(path, sizeof(path), "%s.logits.f32", base);
	g->logits = read_floats(path, (size_t)g->n_tokens * (size_t)g->n_vocab);
	return g->logits != NULL;
}

bool golden_load(const char *dir, const char *prompt, golden_case *g)
{
	char rel[512], base[4096], path[4200];
	memset(g, 0, sizeof(*g));
	snprintf(g->id, sizeof(g->id), "%s/%s", dir, prompt);
	snprintf(rel, sizeof(rel), "golden/%s/%s", dir, prompt);
	if (!test_data_path(base, sizeof(base), rel))
		return false;
	snprintf(path, sizeof(path), "%s.json", base);
	char *text = test_read_file(path, NULL);
	cJSON *root = text != NULL ? cJSON_Parse(text) : NULL;
	free(text);
	if (root == NULL) {
		fprintf(stderr, "golden: cannot read %s\n", path);
		return false;
	}
	g->prompt = dup_string(cJSON_GetObjectItem(root, "prompt"));
	bool ok = cJSON_GetObjectItem(root, "prompt_tokens") != NULL ? load_v1(root, base, g)
								       : load_synthetic(root, base, g);
	cJSON_Delete(root);
	ok = ok && g->prompt != NULL && g->tokens != NULL && g->greedy != NULL;
	if (!ok) {
		fprintf(stderr, "golden: %s is incomplete\n", path);
		golden_free(g);
	}
	return ok;
}

void golden_free(golden_case *g)
{
	free(g->prompt);
	free(g->tokens);
	free(g->logits);
	free(g->greedy);
	free(g->greedy_logit);
	free(g->greedy_gap);
	free(g->greedy_text);
	memset(g, 0, sizeof(*g));
}

int golden_prompt_ids(const char *dir, const char ***ids)
{
	static const char *real[] = {"once_upon_a_time", "quick_brown_fox", "lily_and_tom", "bos_only"};
	static const char *synthetic[] = {"once", "fox"};
	if (strncmp(dir, "synthetic/", 10) == 0) {
		*ids = synthetic;
		return 2;
	}
	*ids = real;
	return 4;
}
