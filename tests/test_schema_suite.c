/* test_schema_suite.c - the JSON-Schema-Test-Suite (Debian's
 * json-schema-test-suite, draft 7) against loom's schema grammars: every
 * schema loom compiles must refuse every instance the suite calls invalid
 * (a grammar narrower than its schema is allowed, a wider one never), and
 * take the valid instances it can write as given (compact, properties in
 * the schema's order); a schema loom refuses must be refused naming a
 * keyword. Skips, saying so, when the suite is not installed. */
#include "check_main.h"

#include "grammar/grammar.h"

#include <cjson/cJSON.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SUITE_DIR "/usr/share/json-schema-test-suite/tests/draft7"

static char *read_all(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	ck_assert_ptr_nonnull(f);
	fseek(f, 0, SEEK_END);
	long n = ftell(f);
	fseek(f, 0, SEEK_SET);
	char *text = malloc((size_t)n + 1);
	ck_assert(fread(text, 1, (size_t)n, f) == (size_t)n);
	text[n] = '\0';
	fclose(f);
	*len = (size_t)n;
	return text;
}

static bool takes(const loom_grammar *g, const char *s)
{
	loom_gr_matcher m;
	ck_assert_int_eq(loom_gr_matcher_init(&m, g), LOOM_OK);
	bool ok = loom_gr_matcher_accept(&m, (const unsigned char *)s, strlen(s)) && loom_gr_can_end(m.state);
	loom_gr_matcher_free(&m);
	return ok;
}

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
		char *text = read_all(path, &len);
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
				const bool took = takes(g, inst);
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

static Suite *schema_suite(void)
{
	Suite *s = suite_create("schema_suite");
	TCase *tc = tcase_create("schema_suite");
	tcase_add_test(tc, suite_instances_never_widen);
	suite_add_tcase(s, tc);
	return s;
}

LOOM_TEST_MAIN(schema_suite)
