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
#include <stdarg.h>
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

/* Texts sampled under schemas, written for the validator: one line of
 * {"schema", "text"} each. */
typedef struct samples {
	FILE *out;
	loom_runtime *rt;
	loom_model *m;
	uint64_t x;
	int written, unfinished, compiled, refused;
} samples;

/* n texts sampled from random logits (the end favoured once allowed)
 * under schema; false if loom refuses the schema. */
static bool sample_schema(samples *sp, const char *schema, int n, uint64_t seed)
{
	loom_grammar *g = NULL;
	if (loom_grammar_from_json_schema(schema, strlen(schema), &g) != LOOM_OK) {
		sp->refused++;
		return false;
	}
	sp->compiled++;
	for (int k = 0; k < n; k++) {
		char text[2048];
		size_t len = 0;
		if (!grammar_sample_text(sp->m, g, seed * 100 + (uint64_t)k, &sp->x, 30.0f, 400, text, sizeof(text), &len)) {
			sp->unfinished++;
			continue;
		}
		cJSON *line = cJSON_CreateObject();
		cJSON_AddItemToObject(line, "schema", cJSON_Parse(schema));
		cJSON_AddStringToObject(line, "text", text);
		char *printed = cJSON_PrintUnformatted(line);
		fprintf(sp->out, "%s\n", printed);
		free(printed);
		cJSON_Delete(line);
		sp->written++;
	}
	loom_grammar_free(g);
	return true;
}

static bool have_validator(void)
{
	if (system("/usr/bin/python3 -c 'import jsonschema' 2>/dev/null") == 0)
		return true;
	printf("SKIP: python3-jsonschema is absent\n");
	return false;
}

static void samples_open(samples *sp, const char *name, char *cases, size_t size)
{
	const char *dir = test_tmp_dir(name);
	snprintf(cases, size, "%s/cases.jsonl", dir);
	*sp = (samples){.out = fopen(cases, "w"), .x = 7};
	ck_assert_ptr_nonnull(sp->out);
	sp->rt = test_runtime("cpu-generic", 1);
	sp->m = grammar_vocab_model(sp->rt, dir);
}

/* Python's jsonschema reads every text written: each must parse and
 * validate against its schema (formats checked too). */
static void samples_validate(samples *sp, const char *cases)
{
	fclose(sp->out);
	loom_model_free(sp->m);
	loom_runtime_free(sp->rt);
	char cmd[8800];
	snprintf(cmd, sizeof(cmd), "/usr/bin/python3 %s/tests/tools/validate_instances.py < %s 2>&1", LOOM_TEST_SOURCE_DIR,
		 cases);
	FILE *p = popen(cmd, "r");
	ck_assert_ptr_nonnull(p);
	static char report[65536];
	size_t got = fread(report, 1, sizeof(report) - 1, p);
	report[got] = '\0';
	int status = pclose(p);
	printf("%d schemas compiled (%d refused), %d texts written (%d did not end in 400 tokens): %s", sp->compiled,
	       sp->refused, sp->written, sp->unfinished, strstr(report, "validated") != NULL ? strstr(report, "validated") : report);
	ck_assert_msg(status == 0, "the validator refused loom's texts:\n%s", report);
}

/* Texts sampled under every schema loom compiles from the suite and the
 * clients' ones, each parsed and validated by Python's jsonschema:
 * nothing loom writes under a schema is outside it. Skips when
 * python3-jsonschema is absent. */
START_TEST(sampled_texts_validate_independently)
{
	if (!have_validator())
		return;
	char cases[4300];
	samples sp;
	samples_open(&sp, "schema_validate", cases, sizeof(cases));
	int k = 0;
	DIR *dir = opendir(SUITE_DIR);
	for (struct dirent *d; dir != NULL && (d = readdir(dir)) != NULL;) {
		if (strstr(d->d_name, ".json") == NULL)
			continue;
		char path[512];
		size_t len;
		snprintf(path, sizeof(path), "%s/%s", SUITE_DIR, d->d_name);
		char *text = test_read_file(path, &len);
		cJSON *groups = cJSON_ParseWithLength(text, len);
		for (const cJSON *grp = groups ? groups->child : NULL; grp != NULL; grp = grp->next) {
			char *schema = cJSON_PrintUnformatted(cJSON_GetObjectItemCaseSensitive(grp, "schema"));
			sample_schema(&sp, schema, 8, (uint64_t)k++);
			free(schema);
		}
		cJSON_Delete(groups);
		free(text);
	}
	if (dir != NULL)
		closedir(dir);
	for (size_t i = 0; i < sizeof(client_schemas) / sizeof(client_schemas[0]); i++)
		ck_assert_msg(sample_schema(&sp, client_schemas[i], 8, (uint64_t)k++), "%s: %s", client_schemas[i],
			      loom_last_error());
	samples_validate(&sp, cases);
	ck_assert_int_ge(sp.written, 300);
}
END_TEST

/* ---- random schemas ---- */

/* A random schema of the keywords loom reads, as JSON text: every kind of
 * value, objects with required and optional properties, arrays with items
 * and bounds and tuples, enums and consts, nullable type lists, anyOf,
 * oneOf of distinct types, strings with lengths, formats or patterns,
 * bounded integers and numbers, and definitions a reference names. */
typedef struct schema_gen {
	uint64_t x;
	char *s;
	size_t n, cap;
} schema_gen;

static unsigned roll(schema_gen *g, unsigned n)
{
	g->x = g->x * 6364136223846793005ull + 1442695040888963407ull;
	return (unsigned)(g->x >> 33) % n;
}

static void put(schema_gen *g, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void put(schema_gen *g, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int k = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	if (g->n + (size_t)k + 1 > g->cap) {
		g->cap = (g->n + (size_t)k + 1) * 2;
		g->s = realloc(g->s, g->cap);
		ck_assert_ptr_nonnull(g->s);
	}
	va_start(ap, fmt);
	vsnprintf(g->s + g->n, (size_t)k + 1, fmt, ap);
	va_end(ap);
	g->n += (size_t)k;
}

static const char *const literals[] = {"\"a\"", "\"b c\"", "1", "-2", "0.5", "true", "false", "null", "{\"k\":1}",
				       "[1,\"x\"]", "\"\\u00e9t\\u00e9\""};
static const char *const patterns[] = {"^[a-z]+$", "^[A-Z][a-z]{1,5}$", "^\\\\d{3}-\\\\d{4}$", "^(cat|dog)s?$",
				       "[0-9]", "^a.c$", "^\\\\w+@\\\\w+$", "^[^x]{2}$"};
static const char *const formats[] = {"date", "time", "date-time", "uuid", "email"};
static const char *const scalar_types[] = {"string", "integer", "number", "boolean", "null"};

static void gen_schema(schema_gen *g, int depth, bool has_defs);

static void gen_scalar(schema_gen *g)
{
	switch (roll(g, 10)) {
	case 0:
		put(g, "{\"type\":\"string\",\"maxLength\":%u}", roll(g, 8));
		break;
	case 1: {
		const unsigned lo = roll(g, 3);
		put(g, "{\"type\":\"string\",\"minLength\":%u,\"maxLength\":%u}", lo, lo + roll(g, 5));
		break;
	}
	case 2:
		put(g, "{\"type\":\"string\",\"format\":\"%s\"}", formats[roll(g, 5)]);
		break;
	case 3:
		put(g, "{\"type\":\"string\",\"pattern\":\"%s\"}", patterns[roll(g, 8)]);
		break;
	case 4: {
		const int lo = (int)roll(g, 200) - 100;
		put(g, "{\"type\":\"integer\",\"%s\":%d,\"%s\":%d}", roll(g, 2) ? "minimum" : "exclusiveMinimum", lo,
		    roll(g, 2) ? "maximum" : "exclusiveMaximum", lo + 2 + (int)roll(g, 3000));
		break;
	}
	case 5:
		if (roll(g, 3) == 0)
			put(g, "{\"type\":\"integer\"}");
		else if (roll(g, 2))
			put(g, "{\"type\":\"number\",\"minimum\":%d,\"maximum\":%d}", -(int)roll(g, 50), (int)roll(g, 50));
		else /* exclusive and fractional bounds, at least a whole number apart */
			put(g, "{\"type\":\"number\",\"%s\":%d.%u,\"%s\":%d.%u}", roll(g, 2) ? "minimum" : "exclusiveMinimum",
			    -(int)roll(g, 40) - 1, roll(g, 10), roll(g, 2) ? "maximum" : "exclusiveMaximum", (int)roll(g, 40) + 1,
			    roll(g, 10));
		break;
	case 6: {
		put(g, "{\"enum\":[");
		const unsigned n = 1 + roll(g, 4);
		for (unsigned i = 0; i < n; i++)
			put(g, "%s%s", i ? "," : "", literals[roll(g, 11)]);
		put(g, "]}");
		break;
	}
	case 7:
		put(g, "{\"const\":%s}", literals[roll(g, 11)]);
		break;
	case 8:
		if (roll(g, 2))
			put(g, "{\"type\":[\"string\",\"null\"],\"maxLength\":4}");
		else
			put(g, "{\"type\":[\"%s\",\"null\"]}", scalar_types[roll(g, 4)]);
		break;
	default:
		put(g, "{\"type\":\"%s\"}", roll(g, 2) ? "boolean" : "null");
		break;
	}
}

static void gen_schema(schema_gen *g, int depth, bool has_defs)
{
	const unsigned k = depth >= 3 ? 0 : roll(g, 12);
	if (k < 5) {
		if (has_defs && roll(g, 4) == 0)
			put(g, "{\"$ref\":\"#/$defs/d\"}");
		else
			gen_scalar(g);
		return;
	}
	switch (k) {
	case 5:
	case 6: {
		const unsigned n = 1 + roll(g, 4);
		put(g, "{\"type\":\"object\",\"properties\":{");
		for (unsigned i = 0; i < n; i++) {
			put(g, "%s\"p%u\":", i ? "," : "", i);
			gen_schema(g, depth + 1, has_defs);
		}
		put(g, "},\"required\":[");
		bool any = false;
		for (unsigned i = 0; i < n; i++)
			if (roll(g, 2)) {
				put(g, "%s\"p%u\"", any ? "," : "", i);
				any = true;
			}
		put(g, "]%s}", roll(g, 3) ? ",\"additionalProperties\":false" : "");
		break;
	}
	case 7: {
		const unsigned lo = roll(g, 2);
		put(g, "{\"type\":\"array\",\"minItems\":%u,\"maxItems\":%u,\"items\":", lo, lo + roll(g, 3));
		gen_schema(g, depth + 1, has_defs);
		put(g, "}");
		break;
	}
	case 8:
		put(g, "{\"type\":\"array\",\"prefixItems\":[");
		gen_schema(g, depth + 1, has_defs);
		put(g, ",");
		gen_schema(g, depth + 1, has_defs);
		put(g, "],\"items\":false}");
		break;
	case 9:
	case 10: {
		put(g, "{\"anyOf\":[");
		const unsigned n = 2 + roll(g, 2);
		for (unsigned i = 0; i < n; i++) {
			put(g, "%s", i ? "," : "");
			gen_schema(g, depth + 1, has_defs);
		}
		put(g, "]}");
		break;
	}
	default: {
		/* oneOf of distinct types: at most one branch matches. */
		static const char *const distinct[] = {"string", "integer", "boolean", "null"};
		const unsigned first = roll(g, 4), second = (first + 1 + roll(g, 3)) % 4;
		put(g, "{\"oneOf\":[{\"type\":\"%s\"},{\"type\":\"%s\"}]}", distinct[first], distinct[second]);
		break;
	}
	}
}

/* Thousands of random schemas, each sampled from random logits, every
 * text then validated by Python's jsonschema: every schema loom reads is
 * compiled (the generator uses only keywords it enforces) and nothing
 * loom writes falls outside its schema. */
START_TEST(random_schemas_validate_independently)
{
	if (!have_validator())
		return;
	char cases[4300];
	samples sp;
	samples_open(&sp, "schema_random", cases, sizeof(cases));
	schema_gen g = {.x = 20261127};
	enum { N_SCHEMAS = 2000 };
	for (int i = 0; i < N_SCHEMAS; i++) {
		g.n = 0;
		if (roll(&g, 4) == 0) {
			/* A definition the schema refers to. */
			put(&g, "{\"$defs\":{\"d\":");
			gen_schema(&g, 2, false);
			put(&g, "},\"type\":\"object\",\"properties\":{\"r\":{\"$ref\":\"#/$defs/d\"},\"s\":");
			gen_schema(&g, 1, true);
			put(&g, "},\"required\":[\"r\",\"s\"],\"additionalProperties\":false}");
		} else {
			gen_schema(&g, 0, false);
		}
		/* Draft 2020-12's, as prefixItems is: the validator reads it
		 * so. */
		char *schema = malloc(g.n + 64);
		ck_assert_ptr_nonnull(schema);
		snprintf(schema, g.n + 64, "{\"$schema\":\"https://json-schema.org/draft/2020-12/schema\",%s", g.s + 1);
		ck_assert_msg(sample_schema(&sp, schema, 2, (uint64_t)i), "loom refuses %s: %s", schema, loom_last_error());
		free(schema);
	}
	free(g.s);
	samples_validate(&sp, cases);
	ck_assert_int_eq(sp.compiled, N_SCHEMAS);
	ck_assert_int_ge(sp.written, 3000);
}
END_TEST

static Suite *schema_suite(void)
{
	Suite *s = suite_create("schema_suite");
	TCase *tc = tcase_create("schema_suite");
	tcase_add_test(tc, suite_instances_never_widen);
	tcase_add_test(tc, sampled_texts_validate_independently);
	tcase_add_test(tc, random_schemas_validate_independently);
	suite_add_tcase(s, tc);
	return s;
}

LOOM_TEST_MAIN(schema_suite)
