/* test_json_schema.c - JSON Schemas compiled to grammars: instances each
 * schema's grammar takes and refuses (as a validator would, narrowed to
 * the schema's property order and bounded whitespace), each keyword loom
 * cannot enforce refused with where it is, and texts sampled from random
 * logits under a schema checked field by field. */
#include "check_main.h"

#include "fixture.h"
#include "grammar/grammar.h"
#include "grammar_check.h"
#include "testdata.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static loom_grammar *from_schema(const char *schema)
{
	loom_grammar *g = NULL;
	ck_assert_msg(loom_grammar_from_json_schema(schema, strlen(schema), &g) == LOOM_OK, "%s: %s", schema,
		      loom_last_error());
	return g;
}

static const struct instance {
	const char *schema, *text;
	bool valid;
} instances[] = {
	/* Objects: the schema's order, required always, optional maybe. */
	{"{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"},\"b\":{\"type\":\"string\"}},"
	 "\"required\":[\"a\"],\"additionalProperties\":false}",
	 "{\"a\": 1, \"b\": \"x\"}", true},
	{"{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"},\"b\":{\"type\":\"string\"}},\"required\":[\"a\"]}",
	 "{\"a\": -12}", true},
	{"{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"},\"b\":{\"type\":\"string\"}},\"required\":[\"a\"]}",
	 "{\"b\": \"x\"}", false},
	{"{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"},\"b\":{\"type\":\"string\"}},\"required\":[\"b\"]}",
	 "{\"b\": \"x\"}", true},
	{"{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"}},\"additionalProperties\":false}",
	 "{\"a\": 1, \"c\": 2}", false},
	{"{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"}}}", "{}", true},
	{"{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"},\"b\":{\"type\":\"boolean\"}}}",
	 "{\n  \"a\": 1,\n  \"b\": false\n}", true},
	{"{\"type\":\"object\"}", "{\"anything\": [1, {\"x\": null}]}", true},
	{"{\"type\":\"object\",\"additionalProperties\":{\"type\":\"integer\"}}", "{\"x\": 1, \"y\": 2}", true},
	{"{\"type\":\"object\",\"additionalProperties\":{\"type\":\"integer\"}}", "{\"x\": \"1\"}", false},
	/* Nullable, enum, const. */
	{"{\"type\":[\"string\",\"null\"]}", "null", true},
	{"{\"type\":[\"string\",\"null\"]}", "\"n\"", true},
	{"{\"type\":[\"string\",\"null\"]}", "1", false},
	{"{\"enum\":[\"red\",\"green\",1,null]}", "\"green\"", true},
	{"{\"enum\":[\"red\",\"green\",1,null]}", "\"blue\"", false},
	{"{\"enum\":[\"red\",\"green\",1,null]}", "null", true},
	{"{\"const\":{\"k\":[1,\"a\\\"b\"]}}", "{\"k\":[1,\"a\\\"b\"]}", true},
	/* Arrays. */
	{"{\"type\":\"array\",\"items\":{\"type\":\"integer\"},\"minItems\":2,\"maxItems\":3}", "[1, 2]", true},
	{"{\"type\":\"array\",\"items\":{\"type\":\"integer\"},\"minItems\":2,\"maxItems\":3}", "[1]", false},
	{"{\"type\":\"array\",\"items\":{\"type\":\"integer\"},\"minItems\":2,\"maxItems\":3}", "[1, 2, 3, 4]", false},
	{"{\"type\":\"array\",\"items\":{\"type\":\"integer\"}}", "[]", true},
	{"{\"type\":\"array\",\"prefixItems\":[{\"type\":\"string\"},{\"type\":\"integer\"}],\"items\":false}",
	 "[\"a\", 1]", true},
	{"{\"type\":\"array\",\"prefixItems\":[{\"type\":\"string\"},{\"type\":\"integer\"}],\"items\":false}",
	 "[\"a\", 1, 2]", false},
	{"{\"type\":\"array\",\"prefixItems\":[{\"type\":\"string\"}],\"items\":{\"type\":\"boolean\"}}",
	 "[\"a\", true, false]", true},
	/* References, recursive. */
	{"{\"$ref\":\"#/$defs/node\",\"$defs\":{\"node\":{\"type\":\"object\",\"properties\":{\"v\":{\"type\":\"integer\"},"
	 "\"kids\":{\"type\":\"array\",\"items\":{\"$ref\":\"#/$defs/node\"}}},\"required\":[\"v\"]}}}",
	 "{\"v\": 1, \"kids\": [{\"v\": 2}, {\"v\": 3, \"kids\": []}]}", true},
	{"{\"definitions\":{\"x\":{\"type\":\"boolean\"}},\"type\":\"object\",\"properties\":{\"f\":{\"$ref\":\"#/definitions/x\"}}}",
	 "{\"f\": true}", true},
	/* anyOf, oneOf of distinct types. */
	{"{\"anyOf\":[{\"type\":\"integer\"},{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"string\"}}}]}",
	 "{\"a\": \"s\"}", true},
	{"{\"oneOf\":[{\"type\":\"integer\"},{\"type\":\"string\"}]}", "\"s\"", true},
	{"{\"oneOf\":[{\"type\":\"integer\"},{\"type\":\"string\"}]}", "true", false},
	/* Strings. */
	{"{\"type\":\"string\",\"minLength\":2,\"maxLength\":3}", "\"ab\"", true},
	{"{\"type\":\"string\",\"minLength\":2,\"maxLength\":3}", "\"abcd\"", false},
	{"{\"type\":\"string\",\"minLength\":2,\"maxLength\":3}", "\"\\u00e9\\n\"", true},
	{"{\"type\":\"string\",\"maxLength\":2}", "\"\xc3\xa9\xc3\xa9\"", true}, /* code points, not bytes */
	{"{\"type\":\"string\"}", "\"a\nb\"", false},                         /* a raw control character */
	/* Surrogates escaped only in pairs, high then low (one a code point). */
	{"{\"type\":\"string\",\"maxLength\":1}", "\"\\ud83d\\ude00\"", true},
	{"{\"type\":\"string\"}", "\"\\ud83d\"", false},
	{"{\"type\":\"string\"}", "\"\\ude00\\ud83d\"", false},
	{"{\"type\":\"string\"}", "\"\\uD7FF\\uE000\"", true},
	{"{\"type\":\"string\",\"format\":\"date\"}", "\"2026-11-27\"", true},
	{"{\"type\":\"string\",\"format\":\"date\"}", "\"2026-13-27\"", false},
	/* Days a month has: no 30th of February, no 31st of April. */
	{"{\"type\":\"string\",\"format\":\"date\"}", "\"2024-02-30\"", false},
	{"{\"type\":\"string\",\"format\":\"date\"}", "\"2026-04-31\"", false},
	{"{\"type\":\"string\",\"format\":\"date\"}", "\"2026-04-30\"", true},
	{"{\"type\":\"string\",\"format\":\"date\"}", "\"2026-12-31\"", true},
	{"{\"type\":\"string\",\"format\":\"date\"}", "\"0000-01-01\"", false},
	{"{\"type\":\"string\",\"format\":\"date-time\"}", "\"2026-02-31T10:00:00Z\"", false},
	{"{\"type\":\"string\",\"format\":\"date-time\"}", "\"2026-11-27T20:28:57Z\"", true},
	{"{\"type\":\"string\",\"format\":\"date-time\"}", "\"2026-11-27T20:28:57.5+01:00\"", true},
	{"{\"type\":\"string\",\"format\":\"uuid\"}", "\"123e4567-e89b-12d3-a456-426614174000\"", true},
	{"{\"type\":\"string\",\"format\":\"uuid\"}", "\"123e4567-e89b-12d3-a456\"", false},
	{"{\"type\":\"string\",\"format\":\"email\"}", "\"a.b+c@example.co.uk\"", true},
	{"{\"type\":\"string\",\"format\":\"email\"}", "\"a@b\"", false},
	/* Patterns: anchored or matching anywhere, classes, escapes,
	 * groups and alternatives, as JSON writes the string. */
	{"{\"type\":\"string\",\"pattern\":\"^[a-z]+$\"}", "\"abc\"", true},
	{"{\"type\":\"string\",\"pattern\":\"^[a-z]+$\"}", "\"aBc\"", false},
	{"{\"type\":\"string\",\"pattern\":\"^[a-z]+$\"}", "\"\"", false},
	{"{\"type\":\"string\",\"pattern\":\"^\\\\d{3}-\\\\d{4}$\"}", "\"555-1234\"", true},
	{"{\"type\":\"string\",\"pattern\":\"^\\\\d{3}-\\\\d{4}$\"}", "\"5551234\"", false},
	{"{\"type\":\"string\",\"pattern\":\"a+\"}", "\"xxaay\"", true},
	{"{\"type\":\"string\",\"pattern\":\"a+\"}", "\"xyz\"", false},
	{"{\"type\":\"string\",\"pattern\":\"^(cat|dog)s?$\"}", "\"cats\"", true},
	{"{\"type\":\"string\",\"pattern\":\"^(cat|dog)s?$\"}", "\"dog\"", true},
	{"{\"type\":\"string\",\"pattern\":\"^(cat|dog)s?$\"}", "\"cow\"", false},
	{"{\"type\":\"string\",\"pattern\":\"^[^x]*$\"}", "\"abc\"", true},
	{"{\"type\":\"string\",\"pattern\":\"^[^x]*$\"}", "\"axc\"", false},
	{"{\"type\":\"string\",\"pattern\":\"^\\\"$\"}", "\"\\\"\"", true}, /* a quote, written escaped */
	{"{\"type\":\"string\",\"pattern\":\"^[ -~]+$\"}", "\"hello world\"", true},
	{"{\"type\":\"string\",\"pattern\":\"^[ -~]+$\"}", "\"h\xc3\xa9\"", false},
	{"{\"type\":\"string\",\"pattern\":\"^\\\\w+@\\\\w+\\\\.com$\"}", "\"ab@cd.com\"", true},
	{"{\"type\":\"string\",\"pattern\":\"^\\\\w+@\\\\w+\\\\.com$\"}", "\"ab@cdxcom\"", false},
	{"{\"type\":\"string\",\"pattern\":\"^x{2,3}$\"}", "\"xxxx\"", false},
	/* Numbers. */
	{"{\"type\":\"integer\"}", "-0", true},
	{"{\"type\":\"integer\"}", "1.5", false},
	{"{\"type\":\"integer\"}", "0123", false},
	{"{\"type\":\"integer\",\"minimum\":0}", "-1", false},
	{"{\"type\":\"integer\",\"minimum\":0}", "42", true},
	{"{\"type\":\"number\"}", "-1.25e-3", true},
	/* Integer bounds, inclusive and exclusive, across zero and not. */
	{"{\"type\":\"integer\",\"minimum\":3,\"maximum\":17}", "3", true},
	{"{\"type\":\"integer\",\"minimum\":3,\"maximum\":17}", "17", true},
	{"{\"type\":\"integer\",\"minimum\":3,\"maximum\":17}", "10", true},
	{"{\"type\":\"integer\",\"minimum\":3,\"maximum\":17}", "2", false},
	{"{\"type\":\"integer\",\"minimum\":3,\"maximum\":17}", "18", false},
	{"{\"type\":\"integer\",\"minimum\":3,\"maximum\":17}", "03", false},
	{"{\"type\":\"integer\",\"exclusiveMinimum\":0,\"maximum\":100}", "1", true},
	{"{\"type\":\"integer\",\"exclusiveMinimum\":0,\"maximum\":100}", "0", false},
	{"{\"type\":\"integer\",\"exclusiveMinimum\":0,\"maximum\":100}", "100", true},
	{"{\"type\":\"integer\",\"exclusiveMinimum\":0,\"maximum\":100}", "101", false},
	{"{\"type\":\"integer\",\"minimum\":-20,\"maximum\":-5}", "-20", true},
	{"{\"type\":\"integer\",\"minimum\":-20,\"maximum\":-5}", "-13", true},
	{"{\"type\":\"integer\",\"minimum\":-20,\"maximum\":-5}", "-4", false},
	{"{\"type\":\"integer\",\"minimum\":-20,\"maximum\":-5}", "-21", false},
	{"{\"type\":\"integer\",\"minimum\":-20,\"maximum\":-5}", "5", false},
	{"{\"type\":\"integer\",\"maximum\":250}", "-9999", true},
	{"{\"type\":\"integer\",\"maximum\":250}", "250", true},
	{"{\"type\":\"integer\",\"maximum\":250}", "251", false},
	{"{\"type\":\"integer\",\"exclusiveMaximum\":99.5,\"minimum\":0}", "99", true},
	{"{\"type\":\"integer\",\"exclusiveMaximum\":99.5,\"minimum\":0}", "100", false},
	{"{\"type\":\"integer\",\"minimum\":1000,\"maximum\":123456}", "123457", false},
	{"{\"type\":\"integer\",\"minimum\":1000,\"maximum\":123456}", "99999", true},
	{"{\"type\":\"integer\",\"minimum\":1000,\"maximum\":123456}", "999", false},
	/* Number bounds, inclusive and whole. */
	{"{\"type\":\"number\",\"minimum\":0,\"maximum\":1}", "0", true},
	{"{\"type\":\"number\",\"minimum\":0,\"maximum\":1}", "0.25", true},
	{"{\"type\":\"number\",\"minimum\":0,\"maximum\":1}", "1.000", true},
	{"{\"type\":\"number\",\"minimum\":0,\"maximum\":1}", "1.5", false},
	{"{\"type\":\"number\",\"minimum\":0,\"maximum\":1}", "-0.1", false},
	{"{\"type\":\"number\",\"minimum\":0,\"maximum\":1}", "1e0", false}, /* no exponents when bounded */
	{"{\"type\":\"number\",\"minimum\":-1,\"maximum\":1}", "-0.5", true},
	{"{\"type\":\"number\",\"minimum\":-1,\"maximum\":1}", "-1.0", true},
	{"{\"type\":\"number\",\"minimum\":-1,\"maximum\":1}", "-1.5", false},
	{"{\"type\":\"number\",\"minimum\":-3,\"maximum\":-2}", "-2.5", true},
	{"{\"type\":\"number\",\"minimum\":-3,\"maximum\":-2}", "-1.5", false},
	{"{\"type\":\"number\"}", "12345678901234567", false}, /* 17 digits */
	/* A number's exclusive or fractional bounds, rounded inward to whole
	 * numbers: a narrowing (5.5 and 2.5 are valid, and not written). */
	{"{\"type\":\"number\",\"exclusiveMinimum\":5}", "6", true},
	{"{\"type\":\"number\",\"exclusiveMinimum\":5}", "6.25", true},
	{"{\"type\":\"number\",\"exclusiveMinimum\":5}", "5", false},
	{"{\"type\":\"number\",\"exclusiveMinimum\":5}", "5.5", false},
	{"{\"type\":\"number\",\"minimum\":0.5,\"maximum\":2.5}", "1", true},
	{"{\"type\":\"number\",\"minimum\":0.5,\"maximum\":2.5}", "1.75", true},
	{"{\"type\":\"number\",\"minimum\":0.5,\"maximum\":2.5}", "2.0", true},
	{"{\"type\":\"number\",\"minimum\":0.5,\"maximum\":2.5}", "2.5", false},
	{"{\"type\":\"number\",\"minimum\":0.5,\"maximum\":2.5}", "0.25", false},
	{"{\"type\":\"number\",\"minimum\":0.5,\"maximum\":2.5}", "3", false},
	{"{\"type\":\"number\",\"exclusiveMaximum\":0}", "-1", true},
	{"{\"type\":\"number\",\"exclusiveMaximum\":0}", "-7.5", true},
	{"{\"type\":\"number\",\"exclusiveMaximum\":0}", "0", false},
	{"{\"type\":\"number\",\"exclusiveMaximum\":0}", "-0.5", false},
	/* Whitespace is bounded; nothing follows the value. */
	{"{\"type\":\"object\"}", "{\"a\":\n                     1}", false},
	{"{\"type\":\"boolean\"}", "true ", false},
	{"true", "[1, \"x\", {\"y\": null}]", true},
	{"{\"title\":\"t\",\"description\":\"d\",\"examples\":[1],\"type\":\"null\"}", "null", true},
};

START_TEST(schemas_take_their_instances)
{
	const struct instance *c = &instances[_i];
	loom_grammar *g = from_schema(c->schema);
	ck_assert_msg(grammar_takes(g, c->text) == c->valid, "%s\n  on %s: expected %s", c->schema, c->text,
		      c->valid ? "valid" : "invalid");
	loom_grammar_free(g);
}
END_TEST

static const struct refused {
	const char *schema, *message;
} refused[] = {
	{"{\"type\":\"string\",\"pattern\":\"^(?=a)b$\"}",
	 "json schema at '#': pattern '^(?=a)b$': lookarounds and named groups are not supported"},
	{"{\"type\":\"string\",\"pattern\":\"(a)\\\\1\"}", "backreferences are not supported"},
	{"{\"type\":\"string\",\"pattern\":\"a^b\"}", "an anchor inside the pattern is not supported"},
	{"{\"type\":\"string\",\"pattern\":\"^a+$\",\"maxLength\":3}", "'pattern' beside minLength"},
	{"{\"type\":\"object\",\"properties\":{\"n\":{\"type\":\"number\",\"minimum\":0.2,\"maximum\":0.8}}}",
	 "json schema at '#/properties/n': no number meets the bounds as loom writes them"},
	{"{\"type\":\"integer\",\"multipleOf\":3}", "keyword 'multipleOf' is not supported"},
	{"{\"type\":\"integer\",\"minimum\":5,\"maximum\":4}", "no integer meets the bounds"},
	{"{\"allOf\":[{\"type\":\"integer\"}]}", "keyword 'allOf' is not supported: loom cannot enforce it"},
	{"{\"type\":\"array\",\"uniqueItems\":true}", "keyword 'uniqueItems' is not supported"},
	{"{\"not\":{\"type\":\"null\"}}", "keyword 'not' is not supported"},
	{"{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"array\",\"items\":{\"type\":\"string\",\"format\":\"ipv6\"}}}}",
	 "json schema at '#/properties/a/items': format 'ipv6' is not supported"},
	{"{\"oneOf\":[{\"type\":\"integer\"},{\"type\":\"number\"}]}", "'oneOf' whose branches may both match is not enforced"},
	{"{\"$ref\":\"https://example.com/s.json\"}", "only references within the schema"},
	{"{\"$ref\":\"#/$defs/missing\"}", "'$ref' to '#/$defs/missing' finds nothing"},
	{"{\"type\":\"object\",\"properties\":{\"a\":{}},\"required\":[\"b\"]}", "required property 'b' is not in properties"},
	{"{\"type\":\"array\",\"minItems\":3,\"maxItems\":2}", "maxItems is below minItems"},
	{"{\"type\":\"strin\"}", "type 'strin' is not a JSON Schema type"},
	{"{\"type\":\"object\",\"properties\":{\"a\":false}}", "json schema at '#/properties/a': a false schema matches nothing"},
	{"{\"type\": ", "json schema: not JSON"},
	{"{\"type\":\"string\",\"maxLength\":-1}", "'maxLength' must be a whole number from 0 to 10000"},
};

START_TEST(keywords_loom_cannot_enforce_are_refused)
{
	const struct refused *c = &refused[_i];
	loom_grammar *g = (loom_grammar *)1;
	ck_assert_int_eq(loom_grammar_from_json_schema(c->schema, strlen(c->schema), &g), LOOM_ERR_INVALID_ARGUMENT);
	ck_assert_ptr_null(g);
	ck_assert_msg(strstr(loom_last_error(), c->message) != NULL, "%s: %s (expected '%s')", c->schema,
		      loom_last_error(), c->message);
}
END_TEST

/* Random logits under a schema of the kinds clients send (an object of
 * required fields, an enum, a nullable, a bounded array): each of 30 texts
 * ends and holds what the schema says. */
START_TEST(sampled_texts_hold_the_schema)
{
	static const char schema[] =
		"{\"type\":\"object\",\"properties\":{"
		"\"name\":{\"type\":\"string\",\"maxLength\":8},"
		"\"kind\":{\"enum\":[\"cat\",\"dog\"]},"
		"\"age\":{\"type\":[\"integer\",\"null\"],\"minimum\":0},"
		"\"tags\":{\"type\":\"array\",\"items\":{\"type\":\"boolean\"},\"maxItems\":2}},"
		"\"required\":[\"name\",\"kind\",\"age\",\"tags\"],\"additionalProperties\":false}";
	loom_grammar *g = from_schema(schema);
	loom_runtime *rt = test_runtime("cpu-generic", 1);
	loom_model *m = grammar_vocab_model(rt, test_tmp_dir("json_schema"));
	uint64_t x = 99;
	for (int seed = 0; seed < 30; seed++) {
		char text[1024];
		size_t len = 0;
		const bool ended = grammar_sample_text(m, g, (uint64_t)seed, &x, 20.0f, 400, text, sizeof(text), &len);
		ck_assert_msg(ended, "seed %d: no end: %.*s", seed, (int)len, text);
		cJSON *j = cJSON_ParseWithLength(text, len);
		ck_assert_msg(j != NULL, "seed %d: not JSON: %.*s", seed, (int)len, text);
		const cJSON *name = cJSON_GetObjectItemCaseSensitive(j, "name"), *kind = cJSON_GetObjectItemCaseSensitive(j, "kind");
		const cJSON *age = cJSON_GetObjectItemCaseSensitive(j, "age"), *tags = cJSON_GetObjectItemCaseSensitive(j, "tags");
		ck_assert_msg(cJSON_GetArraySize(j) == 4, "%.*s", (int)len, text);
		ck_assert(cJSON_IsString(name));
		ck_assert(cJSON_IsString(kind) && (strcmp(kind->valuestring, "cat") == 0 || strcmp(kind->valuestring, "dog") == 0));
		ck_assert(cJSON_IsNull(age) || (cJSON_IsNumber(age) && age->valuedouble >= 0));
		ck_assert(cJSON_IsArray(tags) && cJSON_GetArraySize(tags) <= 2);
		for (const cJSON *t = tags->child; t != NULL; t = t->next)
			ck_assert(cJSON_IsBool(t));
		if (seed == 0)
			printf("seed 0: %.*s\n", (int)len, text);
		cJSON_Delete(j);
	}
	loom_model_free(m);
	loom_runtime_free(rt);
	loom_grammar_free(g);
}
END_TEST

static Suite *json_schema_suite(void)
{
	Suite *s = suite_create("json_schema");
	TCase *tc = tcase_create("json_schema");
	tcase_add_loop_test(tc, schemas_take_their_instances, 0, (int)(sizeof(instances) / sizeof(instances[0])));
	tcase_add_loop_test(tc, keywords_loom_cannot_enforce_are_refused, 0, (int)(sizeof(refused) / sizeof(refused[0])));
	tcase_add_test(tc, sampled_texts_hold_the_schema);
	suite_add_tcase(s, tc);
	return s;
}

LOOM_TEST_MAIN(json_schema_suite)
