/* test_schema_suite.c - the JSON-Schema-Test-Suite (Debian's
 * json-schema-test-suite, draft 7) against loom's schema grammars: every
 * schema loom compiles must refuse every instance the suite calls invalid
 * (a grammar narrower than its schema is allowed, a wider one never), and
 * take the valid instances it can write as given (compact, properties in
 * the schema's order); a schema loom refuses must be refused naming a
 * keyword. Then texts sampled under those schemas are checked by an
 * independent validator (Python's jsonschema). Each part skips, saying so,
 * when what it reads is not installed. */
#include "check_main.h"

#include "fixture.h"
#include "grammar/grammar.h"
#include "grammar_check.h"
#include "testdata.h"

#include <cjson/cJSON.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SUITE_DIR "/usr/share/json-schema-test-suite/tests/draft7"


static int by_name(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

START_TEST(suite_instances_never_widen)
{
	DIR *dir = opendir(SUITE_DIR);
	if (dir == NULL) {
		printf("SKIP: %s is absent (Debian's json-schema-test-suite)\n", SUITE_DIR);
		return;
	}
	char *names[256];
	int n_files = 0;
	for (struct dirent *d; (d = readdir(dir)) != NULL && n_files < 256;)
		if (strstr(d->d_name, ".json") != NULL)
			names[n_files++] = strdup(d->d_name);
	closedir(dir);
	qsort(names, (size_t)n_files, sizeof(char *), by_name);
	int compiled = 0, refused = 0, valid_taken = 0, valid_total = 0, invalid_total = 0;
	for (int f = 0; f < n_files; f++) {
		char path[512];
		size_t len;
		snprintf(path, sizeof(path), "%s/%s", SUITE_DIR, names[f]);
		char *text = test_read_file(path, &len);
		cJSON *groups = cJSON_ParseWithLength(text, len);
		ck_assert_msg(cJSON_IsArray(groups), "%s is not a list of groups", path);
		int file_compiled = 0, file_refused = 0;
		for (const cJSON *grp = groups->child; grp != NULL; grp = grp->next) {
			char *schema = cJSON_PrintUnformatted(cJSON_GetObjectItemCaseSensitive(grp, "schema"));
			loom_grammar *g = NULL;
			loom_status st = loom_grammar_from_json_schema(schema, strlen(schema), &g);
			const char *desc = cJSON_GetObjectItemCaseSensitive(grp, "description")->valuestring;
			if (st != LOOM_OK) {
				ck_assert_msg(st == LOOM_ERR_INVALID_ARGUMENT && strstr(loom_last_error(), "json schema") != NULL,
					      "%s / %s: %s", names[f], desc, loom_last_error());
				refused++;
				file_refused++;
				free(schema);
				continue;
			}
			compiled++;
			file_compiled++;
			const cJSON *tests = cJSON_GetObjectItemCaseSensitive(grp, "tests");
			for (const cJSON *t = tests->child; t != NULL; t = t->next) {
				char *inst = cJSON_PrintUnformatted(cJSON_GetObjectItemCaseSensitive(t, "data"));
				const bool valid = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(t, "valid"));
				const bool took = grammar_takes(g, inst);
				ck_assert_msg(valid || !took, "%s / %s / %s: the grammar takes the invalid %s\n  schema %s", names[f],
					      desc, cJSON_GetObjectItemCaseSensitive(t, "description")->valuestring, inst, schema);
				valid_total += valid;
				invalid_total += !valid;
				valid_taken += valid && took;
				free(inst);
			}
			loom_grammar_free(g);
			free(schema);
		}
		printf("%-28s %2d schemas compiled, %2d refused\n", names[f], file_compiled, file_refused);
		cJSON_Delete(groups);
		free(text);
		free(names[f]);
	}
	printf("draft 7: %d schemas compiled, %d refused; of their instances %d invalid all refused, %d of %d valid "
	       "taken as written\n",
	       compiled, refused, invalid_total, valid_taken, valid_total);
	/* Not vacuous: the schemas of the keywords loom reads compile (39 of
	 * the suite's 124 when written), their invalid instances are many,
	 * and most valid ones are taken as the suite writes them. */
	ck_assert_int_ge(compiled, 39);
	ck_assert_int_ge(invalid_total, 75);
	ck_assert_int_ge(valid_taken * 5, valid_total * 4);
}
END_TEST

/* Schemas shaped like what agents and clients send (zod's and pydantic's
 * output: nullable fields, enums, nested objects and arrays, formats,
 * patterns, bounds, references). */
static const char *const client_schemas[] = {
	"{\"type\":\"object\",\"properties\":{\"location\":{\"type\":\"string\"},\"unit\":{\"enum\":[\"celsius\","
	"\"fahrenheit\"]}},\"required\":[\"location\",\"unit\"],\"additionalProperties\":false}",
	"{\"type\":\"object\",\"properties\":{\"title\":{\"type\":\"string\",\"maxLength\":30},\"year\":{\"type\":"
	"\"integer\",\"minimum\":1900,\"maximum\":2030},\"rating\":{\"type\":\"number\",\"minimum\":0,\"maximum\":10},"
	"\"tags\":{\"type\":\"array\",\"items\":{\"type\":\"string\",\"pattern\":\"^[a-z-]{1,12}$\"},\"maxItems\":4},"
	"\"director\":{\"type\":[\"string\",\"null\"]}},\"required\":[\"title\",\"year\",\"rating\",\"tags\","
	"\"director\"],\"additionalProperties\":false}",
	"{\"$defs\":{\"step\":{\"type\":\"object\",\"properties\":{\"explanation\":{\"type\":\"string\"},"
	"\"output\":{\"type\":\"string\"}},\"required\":[\"explanation\",\"output\"],\"additionalProperties\":false}},"
	"\"type\":\"object\",\"properties\":{\"steps\":{\"type\":\"array\",\"items\":{\"$ref\":\"#/$defs/step\"},"
	"\"maxItems\":3},\"final_answer\":{\"type\":\"string\"}},\"required\":[\"steps\",\"final_answer\"],"
	"\"additionalProperties\":false}",
	"{\"$schema\":\"https://json-schema.org/draft/2020-12/schema\",\"type\":\"object\",\"properties\":{\"id\":{"
	"\"type\":\"string\",\"format\":\"uuid\"},\"when\":{\"type\":"
	"\"string\",\"format\":\"date-time\"},\"email\":{\"type\":\"string\",\"format\":\"email\"},\"kind\":{"
	"\"oneOf\":[{\"type\":\"integer\",\"minimum\":-5,\"maximum\":5},{\"type\":\"boolean\"}]},\"point\":{\"type\":"
	"\"array\",\"prefixItems\":[{\"type\":\"number\"},{\"type\":\"number\"}],\"items\":false}},"
	"\"required\":[\"id\",\"when\",\"email\",\"kind\",\"point\"]}",
};

/* Texts sampled from random logits (the end favoured once allowed) under
 * every schema loom compiles from the suite and the clients' ones, each
 * parsed and validated by Python's jsonschema: nothing loom writes under
 * a schema is outside it. Skips when python3-jsonschema is absent. */
START_TEST(sampled_texts_validate_independently)
{
	if (system("/usr/bin/python3 -c 'import jsonschema' 2>/dev/null") != 0) {
		printf("SKIP: python3-jsonschema is absent\n");
		return;
	}
	char dir_path[4096], cases[4300], cmd[8800];
	snprintf(dir_path, sizeof(dir_path), "%s", test_tmp_dir("schema_validate"));
	snprintf(cases, sizeof(cases), "%s/cases.jsonl", dir_path);
	FILE *out = fopen(cases, "w");
	ck_assert_ptr_nonnull(out);
	/* The schemas: the suite's that compile, then the clients'. */
	char *schemas[512];
	int n_schemas = 0;
	DIR *dir = opendir(SUITE_DIR);
	for (struct dirent *d; dir != NULL && (d = readdir(dir)) != NULL;) {
		if (strstr(d->d_name, ".json") == NULL)
			continue;
		char path[512];
		size_t len;
		snprintf(path, sizeof(path), "%s/%s", SUITE_DIR, d->d_name);
		char *text = test_read_file(path, &len);
		cJSON *groups = cJSON_ParseWithLength(text, len);
		for (const cJSON *grp = groups ? groups->child : NULL; grp != NULL && n_schemas < 500; grp = grp->next)
			schemas[n_schemas++] = cJSON_PrintUnformatted(cJSON_GetObjectItemCaseSensitive(grp, "schema"));
		cJSON_Delete(groups);
		free(text);
	}
	if (dir != NULL)
		closedir(dir);
	for (size_t i = 0; i < sizeof(client_schemas) / sizeof(client_schemas[0]); i++)
		schemas[n_schemas++] = strdup(client_schemas[i]);
	loom_runtime *rt = test_runtime("cpu-generic", 1);
	loom_model *m = grammar_vocab_model(rt, dir_path);
	uint64_t x = 7;
	int written = 0, unfinished = 0, compiled = 0;
	for (int k = 0; k < n_schemas; k++) {
		loom_grammar *g = NULL;
		if (loom_grammar_from_json_schema(schemas[k], strlen(schemas[k]), &g) != LOOM_OK) {
			free(schemas[k]);
			continue;
		}
		compiled++;
		for (int seed = 0; seed < 8; seed++) {
			char text[2048];
			size_t len = 0;
			const bool ended =
				grammar_sample_text(m, g, (uint64_t)(k * 100 + seed), &x, 30.0f, 400, text, sizeof(text), &len);
			if (!ended) {
				unfinished++;
				continue;
			}
			cJSON *schema_json = cJSON_Parse(schemas[k]);
			cJSON *line = cJSON_CreateObject();
			cJSON_AddItemToObject(line, "schema", schema_json);
			char *t = malloc(len + 1);
			memcpy(t, text, len);
			t[len] = '\0';
			cJSON_AddStringToObject(line, "text", t);
			char *printed = cJSON_PrintUnformatted(line);
			fprintf(out, "%s\n", printed);
			free(printed);
			free(t);
			cJSON_Delete(line);
			written++;
		}
		loom_grammar_free(g);
		free(schemas[k]);
	}
	fclose(out);
	loom_model_free(m);
	loom_runtime_free(rt);
	snprintf(cmd, sizeof(cmd), "/usr/bin/python3 %s/tests/tools/validate_instances.py < %s 2>&1", LOOM_TEST_SOURCE_DIR,
		 cases);
	FILE *p = popen(cmd, "r");
	ck_assert_ptr_nonnull(p);
	char report[65536];
	size_t got = fread(report, 1, sizeof(report) - 1, p);
	report[got] = '\0';
	int status = pclose(p);
	printf("%d schemas compiled, %d texts written (%d did not end in 400 tokens): %s", compiled, written, unfinished,
	       strrchr(report, 'v') != NULL ? strstr(report, "validated") : report);
	ck_assert_msg(status == 0, "the validator refused loom's texts:\n%s", report);
	ck_assert_int_ge(written, 300);
}
END_TEST

static Suite *schema_suite(void)
{
	Suite *s = suite_create("schema_suite");
	TCase *tc = tcase_create("schema_suite");
	tcase_add_test(tc, suite_instances_never_widen);
	tcase_add_test(tc, sampled_texts_validate_independently);
	suite_add_tcase(s, tc);
	return s;
}

LOOM_TEST_MAIN(schema_suite)
