/* json_schema.c - a JSON Schema compiled to a grammar: the JSON texts the
 * schema accepts, or a narrower set of them (properties in the schema's
 * order, no properties it does not name, bounded whitespace, numbers of at
 * most 16 digits), never a wider one. A keyword loom cannot enforce is
 * refused, naming it and where it is (a JSON pointer); annotations
 * (title, description, examples, ...) are read past.
 *
 * The schema becomes GBNF text, one rule a schema node, which
 * loom_grammar_parse compiles: one grammar form for both. */
#include "grammar/grammar.h"
#include "grammar/regex_gbnf.h"

#include "runtime/error.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Limits on what a request's schema may make. */
#define MAX_DEPTH 64
#define MAX_RULES 4096
#define MAX_TEXT (8u << 20)

typedef struct text_buf {
	char *s;
	size_t n, cap;
} text_buf;

typedef struct ref_rule {
	char *pointer;
	int rule;
} ref_rule;

typedef struct compiler {
	const cJSON *root;
	text_buf out;
	int n_rules;
	ref_rule *refs;
	int n_refs, cap_refs;
	loom_status st;
	char pointer[1024]; /* where the schema being compiled is, after "#", for errors */
} compiler;

static bool put(compiler *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static bool put(compiler *c, const char *fmt, ...)
{
	if (c->st != LOOM_OK)
		return false;
	for (;;) {
		va_list ap;
		va_start(ap, fmt);
		size_t room = c->out.cap - c->out.n;
		int k = vsnprintf(c->out.s ? c->out.s + c->out.n : NULL, room, fmt, ap);
		va_end(ap);
		if (k < 0)
			return false;
		if ((size_t)k < room) {
			c->out.n += (size_t)k;
			return true;
		}
		size_t cap = c->out.cap ? c->out.cap * 2 : 4096;
		while (cap < c->out.n + (size_t)k + 1)
			cap *= 2;
		if (cap > MAX_TEXT) {
			c->st = loom_error(LOOM_ERR_INVALID_ARGUMENT, "json schema: the schema makes a grammar past 8 MiB");
			return false;
		}
		char *p = realloc(c->out.s, cap);
		if (p == NULL) {
			c->st = loom_error(LOOM_ERR_NO_MEMORY, "out of memory compiling a JSON schema");
			return false;
		}
		c->out.s = p;
		c->out.cap = cap;
	}
}

static bool refuse(compiler *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static bool refuse(compiler *c, const char *fmt, ...)
{
	if (c->st != LOOM_OK)
		return false;
	char what[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(what, sizeof(what), fmt, ap);
	va_end(ap);
	c->st = loom_error(LOOM_ERR_INVALID_ARGUMENT, "json schema at '#%s': %s", c->pointer, what);
	return false;
}

/* A new rule's number (its name is "r<number>"). */
static bool new_rule(compiler *c, int *out)
{
	if (c->n_rules >= MAX_RULES)
		return refuse(c, "the schema makes more than %d grammar rules", MAX_RULES);
	*out = c->n_rules++;
	return true;
}

/* s as a GBNF string literal's body (JSON text: ASCII-safe, escaped). */
static bool put_literal(compiler *c, const char *s)
{
	if (!put(c, "\""))
		return false;
	for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
		bool ok = *p == '"' || *p == '\\' ? put(c, "\\%c", *p)
			  : *p < 0x20 || *p == 0x7F ? put(c, "\\x%02X", *p)
						    : put(c, "%c", *p);
		if (!ok)
			return false;
	}
	return put(c, "\"");
}

/* The canonical JSON text of a value as a literal. */
static bool put_json_literal(compiler *c, const cJSON *v)
{
	char *text = cJSON_PrintUnformatted(v);
	if (text == NULL) {
		c->st = loom_error(LOOM_ERR_NO_MEMORY, "out of memory compiling a JSON schema");
		return false;
	}
	bool ok = put_literal(c, text);
	free(text);
	return ok;
}

static bool compile_node(compiler *c, const cJSON *schema, int depth, int *rule);

/* Extends the pointer by a key for the duration of a nested compile. */
static size_t push_pointer(compiler *c, const char *key)
{
	size_t len = strlen(c->pointer);
	snprintf(c->pointer + len, sizeof(c->pointer) - len, "/%s", key);
	return len;
}

static bool compile_at(compiler *c, const cJSON *schema, const char *key, int depth, int *rule)
{
	size_t len = push_pointer(c, key);
	bool ok = compile_node(c, schema, depth, rule);
	if (ok)
		c->pointer[len] = '\0';
	return ok;
}

/* The rules every grammar from a schema shares. */
static const char common_rules[] =
	"ws ::= | \" \" | \"\\n\" [ \\t]{0,20}\n"
	"jchar ::= [^\"\\\\\\x00-\\x1F] | \"\\\\\" ([\"\\\\/bfnrt] | \"u\" jcode)\n"
	/* An escape of four hex digits names a code point: a surrogate only
	 * in a pair, high then low (a lone one is no text, and strict
	 * parsers refuse it). */
	"jcode ::= [0-9a-cA-Ce-fE-F] [0-9a-fA-F]{3} | [dD] [0-7] [0-9a-fA-F]{2} | [dD] [89abAB] [0-9a-fA-F]{2} "
	"\"\\\\u\" [dD] [c-fC-F] [0-9a-fA-F]{2}\n"
	"jstring ::= \"\\\"\" jchar* \"\\\"\"\n"
	"jint ::= \"-\"? (\"0\" | [1-9] [0-9]{0,15})\n"
	"jnumber ::= jint (\".\" [0-9]{1,16})? ([eE] [-+]? [0-9]{1,3})?\n"
	"jvalue ::= jobject | jarray | jstring | jnumber | \"true\" | \"false\" | \"null\"\n"
	"jobject ::= \"{\" ws (jstring ws \":\" ws jvalue ws (\",\" ws jstring ws \":\" ws jvalue ws)*)? \"}\"\n"
	"jarray ::= \"[\" ws (jvalue ws (\",\" ws jvalue ws)*)? \"]\"\n"
	/* Days each month has (February's 29th left out: a narrowing that
	 * spares the leap-year rule); years from 1000. */
	"jdate ::= [1-9] [0-9]{3} \"-\" ((\"0\" [13578] | \"1\" [02]) \"-\" jday31 | (\"0\" [469] | \"11\") \"-\" "
	"jday30 | \"02-\" jday28)\n"
	"jday31 ::= jday30 | \"31\"\n"
	"jday30 ::= jday28 | \"29\" | \"30\"\n"
	"jday28 ::= \"0\" [1-9] | \"1\" [0-9] | \"2\" [0-8]\n"
	"jtime ::= ([01] [0-9] | \"2\" [0-3]) \":\" [0-5] [0-9] \":\" [0-5] [0-9] (\".\" [0-9]{1,9})? "
	"(\"Z\" | [+-] ([01] [0-9] | \"2\" [0-3]) \":\" [0-5] [0-9])\n"
	"jhex ::= [0-9a-fA-F]\n"
	"juuid ::= jhex{8} \"-\" jhex{4} \"-\" jhex{4} \"-\" jhex{4} \"-\" jhex{12}\n"
	"jemail ::= [a-zA-Z0-9._%+-]{1,64} \"@\" [a-zA-Z0-9-]{1,63} (\".\" [a-zA-Z0-9-]{1,63})* \".\" [a-zA-Z]{2,24}\n";

/* Keywords read as notes, never enforced. */
static bool is_annotation(const char *k)
{
	static const char *const notes[] = {"title",    "description", "default",   "examples", "$schema",
					    "$id",      "$comment",    "deprecated", "readOnly", "writeOnly",
					    "$defs",    "definitions", NULL};
	for (int i = 0; notes[i] != NULL; i++)
		if (strcmp(k, notes[i]) == 0)
			return true;
	return false;
}

/* Every keyword of schema is one this node's compile reads (or an
 * annotation); else refused by name. */
static bool check_keywords(compiler *c, const cJSON *schema, const char *const *known)
{
	for (const cJSON *k = schema->child; k != NULL; k = k->next) {
		bool ok = is_annotation(k->string);
		for (int i = 0; !ok && known[i] != NULL; i++)
			ok = strcmp(k->string, known[i]) == 0;
		if (!ok)
			return refuse(c, "keyword '%s' is not supported: loom cannot enforce it", k->string);
	}
	return true;
}

static const cJSON *get(const cJSON *schema, const char *key)
{
	return cJSON_GetObjectItemCaseSensitive(schema, key);
}

/* A non-negative integer keyword, or def when absent. */
static bool count_keyword(compiler *c, const cJSON *schema, const char *key, long def, long *out)
{
	const cJSON *v = get(schema, key);
	*out = def;
	if (v == NULL)
		return true;
	if (!cJSON_IsNumber(v) || v->valuedouble < 0 || v->valuedouble != floor(v->valuedouble) ||
	    v->valuedouble > 10000)
		return refuse(c, "'%s' must be a whole number from 0 to 10000", key);
	*out = (long)v->valuedouble;
	return true;
}

/* GBNF for "item{min,max}" separated by commas (max < 0: no bound). */
static bool put_separated(compiler *c, const char *item, long min, long max)
{
	if (max == 0)
		return put(c, "\"\"");
	if (min == 0)
		put(c, "(");
	put(c, "%s ws", item);
	long more_min = min > 0 ? min - 1 : 0;
	if (max < 0)
		put(c, " (\",\" ws %s ws){%ld,}", item, more_min);
	else if (max > 1)
		put(c, " (\",\" ws %s ws){%ld,%ld}", item, more_min, max - 1);
	if (min == 0)
		put(c, ")?");
	return c->st == LOOM_OK;
}

static bool compile_string(compiler *c, const cJSON *schema, int rule)
{
	long min, max;
	if (!count_keyword(c, schema, "minLength", 0, &min) || !count_keyword(c, schema, "maxLength", -1, &max))
		return false;
	if (max >= 0 && max < min)
		return refuse(c, "maxLength is below minLength");
	const cJSON *pattern = get(schema, "pattern");
	if (pattern != NULL) {
		if (!cJSON_IsString(pattern))
			return refuse(c, "'pattern' must be a string");
		if (min > 0 || max >= 0 || get(schema, "format") != NULL)
			return refuse(c, "'pattern' beside minLength, maxLength or format is not supported");
		char *why = NULL, *body = loom_regex_gbnf(pattern->valuestring, "jchar", &why);
		if (body == NULL) {
			refuse(c, "pattern '%.100s': %s", pattern->valuestring, why);
			free(why);
			return false;
		}
		bool ok = put(c, "r%d ::= \"\\\"\" %s \"\\\"\"\n", rule, body);
		free(body);
		return ok;
	}
	const cJSON *format = get(schema, "format");
	if (format != NULL) {
		static const struct {
			const char *name, *rule;
		} formats[] = {{"date", "jdate"},
			       {"time", "jtime"},
			       {"date-time", "jdate \"T\" jtime"},
			       {"uuid", "juuid"},
			       {"email", "jemail"}};
		if (!cJSON_IsString(format))
			return refuse(c, "'format' must be a string");
		if (min > 0 || max >= 0)
			return refuse(c, "minLength or maxLength beside format '%s' is not supported", format->valuestring);
		for (size_t i = 0; i < sizeof(formats) / sizeof(formats[0]); i++)
			if (strcmp(format->valuestring, formats[i].name) == 0)
				return put(c, "r%d ::= \"\\\"\" %s \"\\\"\"\n", rule, formats[i].rule);
		return refuse(c, "format '%s' is not supported (date, time, date-time, uuid and email are)",
			      format->valuestring);
	}
	if (max < 0)
		return put(c, "r%d ::= \"\\\"\" jchar{%ld,} \"\\\"\"\n", rule, min);
	return put(c, "r%d ::= \"\\\"\" jchar{%ld,%ld} \"\\\"\"\n", rule, min, max);
}

/* The largest magnitude a bounded number's integer part takes: 16
 * digits, as jint's. */
#define INT_LIMIT 9999999999999999LL

/* The decimal numbers of n digits from lo to hi (leading zeros taken), as
 * alternatives of digit classes. */
static bool put_digits(compiler *c, const char *lo, const char *hi, size_t n)
{
	if (n == 0)
		return put(c, "\"\"");
	if (lo[0] == hi[0])
		return put(c, "\"%c\" ", lo[0]) && put_digits(c, lo + 1, hi + 1, n - 1);
	bool lo_zeros = strspn(lo + 1, "0") == n - 1, hi_nines = strspn(hi + 1, "9") == n - 1;
	char from = lo_zeros ? lo[0] : (char)(lo[0] + 1), to = hi_nines ? hi[0] : (char)(hi[0] - 1);
	char nines[32], zeros[32];
	memset(nines, '9', n - 1);
	memset(zeros, '0', n - 1);
	bool first = true;
	put(c, "(");
	if (!lo_zeros) {
		put(c, "\"%c\" (", lo[0]);
		put_digits(c, lo + 1, nines, n - 1);
		put(c, ")");
		first = false;
	}
	if (from <= to) {
		put(c, "%s[%c-%c]", first ? "" : " | ", from, to);
		if (n > 1)
			put(c, " [0-9]{%zu}", n - 1);
		first = false;
	}
	if (!hi_nines) {
		put(c, "%s\"%c\" (", first ? "" : " | ", hi[0]);
		put_digits(c, zeros, hi + 1, n - 1);
		put(c, ")");
	}
	return put(c, ")");
}

/* The integers lo..hi (0 <= lo <= hi), written without leading zeros. */
static bool put_nonneg_range(compiler *c, long long lo, long long hi)
{
	bool first = true;
	put(c, "(");
	if (lo == 0) {
		put(c, "\"0\"");
		first = false;
		lo = 1;
	}
	char a[32], b[32];
	for (long long from = lo, width = 1; from <= hi; width *= 10) {
		if (from >= width * 10)
			continue;
		/* The numbers of this many digits. */
		long long to = width * 10 - 1 < hi ? width * 10 - 1 : hi;
		snprintf(a, sizeof(a), "%lld", from);
		snprintf(b, sizeof(b), "%lld", to);
		put(c, "%s", first ? "" : " | ");
		put_digits(c, a, b, strlen(a));
		first = false;
		from = to + 1;
	}
	return put(c, ")");
}

/* Numbers of magnitude m1..m2 (0 <= m1 <= m2): an integer part below m2
 * with any fraction, or m2 itself with none (or zeros). */
static bool put_magnitude(compiler *c, long long m1, long long m2)
{
	put(c, "(");
	if (m1 < m2) {
		put_nonneg_range(c, m1, m2 - 1);
		put(c, " (\".\" [0-9]{1,16})? | ");
	}
	return put(c, "\"%lld\" (\".\" \"0\"{1,16})?)", m2);
}

/* An integer keyword bound as a whole number, rounded inward. */
static bool bound(compiler *c, const cJSON *schema, const char *key, bool upper, bool exclusive, long long *out)
{
	const cJSON *b = get(schema, key);
	if (b == NULL)
		return true;
	if (!cJSON_IsNumber(b))
		return refuse(c, "'%s' must be a number (draft 4's boolean form is not read)", key);
	double v = b->valuedouble;
	if (!(fabs(v) <= (double)INT_LIMIT))
		return refuse(c, "'%s' is past the 16 digits loom writes", key);
	double r = upper ? (exclusive ? ceil(v) - 1 : floor(v)) : (exclusive ? floor(v) + 1 : ceil(v));
	if (upper ? r < (double)*out : r > (double)*out)
		*out = (long long)r;
	return true;
}

static bool compile_number(compiler *c, const cJSON *schema, bool integer, int rule)
{
	if (get(schema, "multipleOf") != NULL)
		return refuse(c, "keyword 'multipleOf' is not supported: loom cannot enforce it");
	const bool bounded = get(schema, "minimum") || get(schema, "maximum") || get(schema, "exclusiveMinimum") ||
			     get(schema, "exclusiveMaximum");
	if (!bounded)
		return put(c, "r%d ::= %s\n", rule, integer ? "jint" : "jnumber");
	/* The bounds rounded inward to whole numbers: a number's exclusive or
	 * fractional bound narrows it to the whole numbers within (and the
	 * fractions between them), never widens it. */
	long long lo = -INT_LIMIT, hi = INT_LIMIT;
	if (!bound(c, schema, "minimum", false, false, &lo) || !bound(c, schema, "exclusiveMinimum", false, true, &lo) ||
	    !bound(c, schema, "maximum", true, false, &hi) || !bound(c, schema, "exclusiveMaximum", true, true, &hi))
		return false;
	if (lo > hi)
		return refuse(c, integer ? "no integer meets the bounds"
					 : "no number meets the bounds as loom writes them (from the whole numbers within "
					   "them, and the fractions between those)");
	put(c, "r%d ::= ", rule);
	bool first = true;
	if (lo < 0) {
		/* Negative values: their magnitudes. */
		long long m1 = hi < 0 ? -hi : (integer ? 1 : 0), m2 = -lo;
		put(c, "\"-\" ");
		if (integer)
			put_nonneg_range(c, m1, m2);
		else
			put_magnitude(c, m1, m2);
		first = false;
	}
	if (hi >= 0) {
		long long m1 = lo > 0 ? lo : 0;
		put(c, "%s", first ? "" : " | ");
		if (integer)
			put_nonneg_range(c, m1, hi);
		else
			put_magnitude(c, m1, hi);
	}
	return put(c, "\n");
}

/* A rule for each property's "key": value, then the chain that emits them
 * in order, the required ones always, with commas between. */
static bool compile_properties(compiler *c, const cJSON *schema, const cJSON *props, int rule, int depth)
{
	const cJSON *required = get(schema, "required");
	if (required != NULL && !cJSON_IsArray(required))
		return refuse(c, "'required' must be an array of names");
	int n = cJSON_GetArraySize(props);
	for (const cJSON *r = required ? required->child : NULL; r != NULL; r = r->next)
		if (!cJSON_IsString(r) || get(props, r->valuestring) == NULL)
			return refuse(c, "required property '%s' is not in properties",
				      cJSON_IsString(r) ? r->valuestring : "?");
	int *kv = malloc(((size_t)n + 1) * sizeof(int));
	bool *req = calloc((size_t)n + 1, sizeof(bool));
	if (kv == NULL || req == NULL) {
		free(kv);
		free(req);
		c->st = loom_error(LOOM_ERR_NO_MEMORY, "out of memory compiling a JSON schema");
		return false;
	}
	int i = 0;
	bool ok = true;
	size_t len = push_pointer(c, "properties");
	for (const cJSON *p = props->child; ok && p != NULL; p = p->next, i++) {
		for (const cJSON *r = required ? required->child : NULL; r != NULL; r = r->next)
			req[i] |= strcmp(r->valuestring, p->string) == 0;
		int value;
		ok = compile_at(c, p, p->string, depth + 1, &value) && new_rule(c, &kv[i]);
		if (ok) {
			cJSON *name = cJSON_CreateString(p->string);
			ok = name != NULL && put(c, "r%d ::= ", kv[i]) && put_json_literal(c, name) &&
			     put(c, " ws \":\" ws r%d ws\n", value);
			cJSON_Delete(name);
		}
	}
	c->pointer[len] = '\0';
	/* chain(i, before): the properties from i on, with "," before the
	 * first if a property came before it. */
	int *chain = malloc(((size_t)n + 1) * 2 * sizeof(int));
	ok = ok && chain != NULL;
	for (int k = 0; ok && k <= n; k++)
		ok = new_rule(c, &chain[2 * k]) && new_rule(c, &chain[2 * k + 1]);
	for (int k = 0; ok && k <= n; k++)
		for (int before = 0; ok && before < 2; before++) {
			const int self = chain[2 * k + before];
			if (k == n) {
				ok = put(c, "r%d ::= \"\"\n", self);
				continue;
			}
			const char *sep = before ? "\",\" ws " : "";
			ok = put(c, "r%d ::= %sr%d r%d", self, sep, kv[k], chain[2 * (k + 1) + 1]);
			if (ok && !req[k])
				ok = put(c, " | r%d", chain[2 * (k + 1) + before]);
			ok = ok && put(c, "\n");
		}
	if (ok)
		ok = put(c, "r%d ::= \"{\" ws r%d \"}\"\n", rule, chain[0]);
	free(chain);
	free(kv);
	free(req);
	return ok;
}

static bool compile_object(compiler *c, const cJSON *schema, int rule, int depth)
{
	const cJSON *props = get(schema, "properties");
	const cJSON *extra = get(schema, "additionalProperties");
	if (props != NULL && !cJSON_IsObject(props))
		return refuse(c, "'properties' must be an object");
	if (props != NULL && cJSON_GetArraySize(props) > 0)
		/* Named properties only: narrower than extra ones allowed, and
		 * what a model writing this object means. */
		return compile_properties(c, schema, props, rule, depth);
	if (get(schema, "required") != NULL && cJSON_GetArraySize(get(schema, "required")) > 0)
		return refuse(c, "'required' names properties that 'properties' does not describe");
	if (extra == NULL || cJSON_IsTrue(extra))
		return put(c, "r%d ::= jobject\n", rule);
	if (cJSON_IsFalse(extra))
		return put(c, "r%d ::= \"{\" ws \"}\"\n", rule);
	int value;
	if (!compile_at(c, extra, "additionalProperties", depth + 1, &value))
		return false;
	return put(c, "r%d ::= \"{\" ws (jstring ws \":\" ws r%d ws (\",\" ws jstring ws \":\" ws r%d ws)*)? \"}\"\n", rule,
		   value, value);
}

static bool compile_array(compiler *c, const cJSON *schema, int rule, int depth)
{
	long min, max;
	if (!count_keyword(c, schema, "minItems", 0, &min) || !count_keyword(c, schema, "maxItems", -1, &max))
		return false;
	if (max >= 0 && max < min)
		return refuse(c, "maxItems is below minItems");
	const cJSON *prefix = get(schema, "prefixItems"), *items = get(schema, "items");
	if (prefix != NULL && !cJSON_IsArray(prefix))
		return refuse(c, "'prefixItems' must be an array of schemas");
	if (items != NULL && cJSON_IsArray(items))
		return refuse(c, "'items' as an array (draft 4 tuples) is not supported: use prefixItems");
	int item = -1;
	if (items != NULL && !cJSON_IsFalse(items) && !compile_at(c, items, "items", depth + 1, &item))
		return false;
	char item_name[32] = "jvalue";
	if (item >= 0)
		snprintf(item_name, sizeof(item_name), "r%d", item);
	const int n_prefix = prefix != NULL ? cJSON_GetArraySize(prefix) : 0;
	if (n_prefix == 0) {
		if (items != NULL && cJSON_IsFalse(items))
			max = 0;
		put(c, "r%d ::= \"[\" ws ", rule);
		put_separated(c, item_name, min, max);
		return put(c, " \"]\"\n");
	}
	/* A tuple: its items in order, all required here (as a model fills a
	 * tuple), then the rest by items. */
	if (min > n_prefix || (max >= 0 && max < n_prefix))
		return refuse(c, "minItems or maxItems that cut into prefixItems are not supported");
	int *p = malloc((size_t)n_prefix * sizeof(int));
	if (p == NULL) {
		c->st = loom_error(LOOM_ERR_NO_MEMORY, "out of memory compiling a JSON schema");
		return false;
	}
	int i = 0;
	bool ok = true;
	size_t len = push_pointer(c, "prefixItems");
	for (const cJSON *s = prefix->child; ok && s != NULL; s = s->next, i++) {
		char index[16];
		snprintf(index, sizeof(index), "%d", i);
		ok = compile_at(c, s, index, depth + 1, &p[i]);
	}
	c->pointer[len] = '\0';
	ok = ok && put(c, "r%d ::= \"[\" ws", rule);
	for (i = 0; ok && i < n_prefix; i++)
		ok = put(c, "%s r%d ws", i ? " \",\" ws" : "", p[i]);
	free(p);
	if (ok && !(items != NULL && cJSON_IsFalse(items)) && (max < 0 || max > n_prefix)) {
		long rest = max < 0 ? -1 : max - n_prefix;
		ok = rest < 0 ? put(c, " (\",\" ws %s ws)*", item_name) : put(c, " (\",\" ws %s ws){0,%ld}", item_name, rest);
	}
	return ok && put(c, " \"]\"\n");
}

/* A local reference's target: "#", "#/$defs/x", "#/definitions/x", or any
 * JSON pointer into the document. */
static const cJSON *resolve(compiler *c, const char *ref)
{
	if (ref[0] != '#')
		return refuse(c, "'$ref' to '%s': only references within the schema (#...) are read", ref), NULL;
	const cJSON *node = c->root;
	const char *p = ref + 1;
	while (node != NULL && *p == '/') {
		p++;
		char key[256];
		size_t k = 0;
		while (*p && *p != '/' && k + 1 < sizeof(key)) {
			if (p[0] == '~' && (p[1] == '0' || p[1] == '1')) {
				key[k++] = p[1] == '0' ? '~' : '/';
				p += 2;
			} else {
				key[k++] = *p++;
			}
		}
		key[k] = '\0';
		node = cJSON_IsArray(node) ? cJSON_GetArrayItem(node, atoi(key)) : get(node, key);
	}
	if (node == NULL || *p != '\0')
		return refuse(c, "'$ref' to '%s' finds nothing", ref), NULL;
	return node;
}

/* A branch list's alternatives (anyOf, or oneOf whose branches cannot
 * both match). */
static bool compile_branches(compiler *c, const cJSON *list, const char *key, int rule, int depth)
{
	if (!cJSON_IsArray(list) || cJSON_GetArraySize(list) == 0)
		return refuse(c, "'%s' must be a non-empty array of schemas", key);
	int n = cJSON_GetArraySize(list), *alt = malloc((size_t)n * sizeof(int));
	if (alt == NULL) {
		c->st = loom_error(LOOM_ERR_NO_MEMORY, "out of memory compiling a JSON schema");
		return false;
	}
	bool ok = true;
	int i = 0;
	size_t len = push_pointer(c, key);
	for (const cJSON *s = list->child; ok && s != NULL; s = s->next, i++) {
		char index[16];
		snprintf(index, sizeof(index), "%d", i);
		ok = compile_at(c, s, index, depth + 1, &alt[i]);
	}
	c->pointer[len] = '\0';
	ok = ok && put(c, "r%d ::=", rule);
	for (i = 0; ok && i < n; i++)
		ok = put(c, "%s r%d", i ? " |" : "", alt[i]);
	free(alt);
	return ok && put(c, "\n");
}

/* oneOf is enforced where its branches cannot both match: each has a
 * single, different type (integer and number overlap), or a different
 * const. */
static bool branches_disjoint(const cJSON *list)
{
	for (const cJSON *a = list->child; a != NULL; a = a->next)
		for (const cJSON *b = a->next; b != NULL; b = b->next) {
			const cJSON *ta = get(a, "type"), *tb = get(b, "type");
			const cJSON *ca = get(a, "const"), *cb = get(b, "const");
			if (ca != NULL && cb != NULL && !cJSON_Compare(ca, cb, true))
				continue;
			if (!cJSON_IsString(ta) || !cJSON_IsString(tb))
				return false;
			const bool numeric = (strcmp(ta->valuestring, "integer") == 0 || strcmp(ta->valuestring, "number") == 0) &&
					     (strcmp(tb->valuestring, "integer") == 0 || strcmp(tb->valuestring, "number") == 0);
			if (numeric || strcmp(ta->valuestring, tb->valuestring) == 0)
				return false;
		}
	return true;
}

/* The rule for one type name. */
static bool compile_type(compiler *c, const cJSON *schema, const char *type, int rule, int depth)
{
	if (strcmp(type, "string") == 0)
		return compile_string(c, schema, rule);
	if (strcmp(type, "integer") == 0 || strcmp(type, "number") == 0)
		return compile_number(c, schema, type[0] == 'i', rule);
	if (strcmp(type, "boolean") == 0)
		return put(c, "r%d ::= \"true\" | \"false\"\n", rule);
	if (strcmp(type, "null") == 0)
		return put(c, "r%d ::= \"null\"\n", rule);
	if (strcmp(type, "object") == 0)
		return compile_object(c, schema, rule, depth);
	if (strcmp(type, "array") == 0)
		return compile_array(c, schema, rule, depth);
	return refuse(c, "type '%s' is not a JSON Schema type", type);
}

static bool compile_types(compiler *c, const cJSON *schema, const char *const *names, int n, int rule, int depth);

static bool compile_node(compiler *c, const cJSON *schema, int depth, int *rule)
{
	if (depth > MAX_DEPTH)
		return refuse(c, "the schema nests deeper than %d", MAX_DEPTH);
	if (!new_rule(c, rule))
		return false;
	if (cJSON_IsTrue(schema))
		return put(c, "r%d ::= jvalue\n", *rule);
	if (cJSON_IsFalse(schema))
		return refuse(c, "a false schema matches nothing");
	if (!cJSON_IsObject(schema))
		return refuse(c, "a schema must be an object or a boolean");
	static const char *const known[] = {"type",	  "properties", "required",  "additionalProperties", "items",
					    "prefixItems", "minItems",	  "maxItems",  "enum",		     "const",
					    "anyOf",	  "oneOf",	  "$ref",	     "minLength",	     "maxLength",
					    "pattern",	  "format",	  "minimum",   "maximum",	     "exclusiveMinimum",
					    "exclusiveMaximum", "multipleOf", NULL};
	if (!check_keywords(c, schema, known))
		return false;
	const cJSON *ref = get(schema, "$ref");
	if (ref != NULL) {
		if (!cJSON_IsString(ref))
			return refuse(c, "'$ref' must be a string");
		for (const cJSON *k = schema->child; k != NULL; k = k->next)
			if (!is_annotation(k->string) && strcmp(k->string, "$ref") != 0)
				return refuse(c, "'$ref' beside '%s' is not supported", k->string);
		/* One rule a target, made once: recursion refers back to it. */
		for (int i = 0; i < c->n_refs; i++)
			if (strcmp(c->refs[i].pointer, ref->valuestring) == 0)
				return put(c, "r%d ::= r%d\n", *rule, c->refs[i].rule);
		const cJSON *target = resolve(c, ref->valuestring);
		if (target == NULL)
			return false;
		if (c->n_refs == c->cap_refs) {
			int cap = c->cap_refs ? 2 * c->cap_refs : 8;
			ref_rule *r = realloc(c->refs, (size_t)cap * sizeof(*r));
			if (r == NULL) {
				c->st = loom_error(LOOM_ERR_NO_MEMORY, "out of memory compiling a JSON schema");
				return false;
			}
			c->refs = r;
			c->cap_refs = cap;
		}
		int target_rule = 0;
		if (!new_rule(c, &target_rule))
			return false;
		char *pointer = strdup(ref->valuestring);
		if (pointer == NULL) {
			c->st = loom_error(LOOM_ERR_NO_MEMORY, "out of memory compiling a JSON schema");
			return false;
		}
		c->refs[c->n_refs++] = (ref_rule){pointer, target_rule};
		int body = 0;
		char saved[sizeof(c->pointer)];
		memcpy(saved, c->pointer, sizeof(saved));
		snprintf(c->pointer, sizeof(c->pointer), "%s", ref->valuestring + 1);
		bool ok = compile_node(c, target, depth + 1, &body);
		if (ok)
			memcpy(c->pointer, saved, sizeof(saved));
		return ok && put(c, "r%d ::= r%d\nr%d ::= r%d\n", target_rule, body, *rule, target_rule);
	}
	const cJSON *constant = get(schema, "const"), *choices = get(schema, "enum");
	if (constant != NULL) {
		put(c, "r%d ::= ", *rule);
		put_json_literal(c, constant);
		return put(c, "\n");
	}
	if (choices != NULL) {
		if (!cJSON_IsArray(choices) || cJSON_GetArraySize(choices) == 0)
			return refuse(c, "'enum' must be a non-empty array");
		put(c, "r%d ::=", *rule);
		for (const cJSON *v = choices->child; v != NULL; v = v->next) {
			put(c, "%s ", v == choices->child ? "" : " |");
			put_json_literal(c, v);
		}
		return put(c, "\n");
	}
	const cJSON *any = get(schema, "anyOf"), *one = get(schema, "oneOf");
	if (any != NULL || one != NULL) {
		if (get(schema, "type") != NULL || get(schema, "properties") != NULL || (any != NULL && one != NULL))
			return refuse(c, "'%s' beside other constraints is not supported", any != NULL ? "anyOf" : "oneOf");
		if (one != NULL && cJSON_IsArray(one) && !branches_disjoint(one))
			return refuse(c, "'oneOf' whose branches may both match is not enforced (use anyOf)");
		return compile_branches(c, any != NULL ? any : one, any != NULL ? "anyOf" : "oneOf", *rule, depth);
	}
	const cJSON *type = get(schema, "type");
	if (type == NULL) {
		/* Keywords of one type imply it; none: any value. */
		if (get(schema, "properties") != NULL || get(schema, "additionalProperties") != NULL)
			return compile_object(c, schema, *rule, depth);
		if (get(schema, "items") != NULL || get(schema, "prefixItems") != NULL)
			return compile_array(c, schema, *rule, depth);
		bool asserts = false;
		for (const cJSON *k = schema->child; k != NULL; k = k->next)
			asserts |= !is_annotation(k->string);
		if (!asserts)
			return put(c, "r%d ::= jvalue\n", *rule);
		/* {"maxLength": 2}: any value, each type's keywords holding for
		 * values of that type. */
		static const char *const every[] = {"null", "boolean", "object", "array", "number", "string"};
		return compile_types(c, schema, every, 6, *rule, depth);
	}
	if (cJSON_IsString(type))
		return compile_type(c, schema, type->valuestring, *rule, depth);
	if (!cJSON_IsArray(type) || cJSON_GetArraySize(type) == 0)
		return refuse(c, "'type' must be a type name or a non-empty array of them");
	/* ["string", "null"]: one alternative a type. */
	const char *names[8];
	int n = cJSON_GetArraySize(type), i = 0;
	if (n > 8)
		return refuse(c, "'type' lists more than 8 types");
	for (const cJSON *t = type->child; t != NULL; t = t->next, i++) {
		if (!cJSON_IsString(t))
			return refuse(c, "'type' must list type names");
		names[i] = t->valuestring;
	}
	return compile_types(c, schema, names, n, *rule, depth);
}

/* One alternative a type, each with the schema's keywords for it. */
static bool compile_types(compiler *c, const cJSON *schema, const char *const *names, int n, int rule, int depth)
{
	int alts[8];
	for (int i = 0; i < n; i++)
		if (!new_rule(c, &alts[i]) || !compile_type(c, schema, names[i], alts[i], depth))
			return false;
	put(c, "r%d ::=", rule);
	for (int i = 0; i < n; i++)
		put(c, "%s r%d", i ? " |" : "", alts[i]);
	return put(c, "\n");
}

/* Frees what a compile kept apart from its text. */
static void compiler_forget_refs(compiler *c)
{
	for (int i = 0; i < c->n_refs; i++)
		free(c->refs[i].pointer);
	free(c->refs);
	c->refs = NULL;
	c->n_refs = c->cap_refs = 0;
}

loom_status loom_json_schemas_gbnf(const cJSON *const *schemas, const char *const *names, size_t n, char **text,
				   size_t *len)
{
	compiler c = {0};
	bool ok = put(&c, "%s", common_rules);
	for (size_t i = 0; ok && i < n; i++) {
		/* Each schema's references are its own document's. */
		compiler_forget_refs(&c);
		c.root = schemas[i];
		c.pointer[0] = '\0';
		int root;
		ok = compile_node(&c, schemas[i], 0, &root) && put(&c, "%s ::= r%d\n", names[i], root);
	}
	compiler_forget_refs(&c);
	if (!ok) {
		free(c.out.s);
		return c.st != LOOM_OK ? c.st : loom_error(LOOM_ERR_NO_MEMORY, "out of memory compiling a JSON schema");
	}
	*text = c.out.s;
	*len = c.out.n;
	return LOOM_OK;
}

loom_status loom_grammar_from_json_schema(const char *json, size_t len, loom_grammar **out)
{
	*out = NULL;
	if (json == NULL)
		return loom_error(LOOM_ERR_INVALID_ARGUMENT, "a JSON schema is NULL");
	cJSON *schema = cJSON_ParseWithLength(json, len);
	if (schema == NULL)
		return loom_error(LOOM_ERR_INVALID_ARGUMENT, "json schema: not JSON (near byte %zu)",
				  (size_t)(cJSON_GetErrorPtr() != NULL ? cJSON_GetErrorPtr() - json : 0));
	const cJSON *one[1] = {schema};
	static const char *const root_name[1] = {"root"};
	char *text = NULL;
	size_t n = 0;
	loom_status st = loom_json_schemas_gbnf(one, root_name, 1, &text, &n);
	if (st == LOOM_OK && (st = loom_grammar_parse(text, n, NULL, out)) != LOOM_OK) {
		char why[512];
		snprintf(why, sizeof(why), "%s", loom_last_error());
		st = loom_error(st, "json schema: its grammar: %s", why);
	}
	free(text);
	cJSON_Delete(schema);
	return st;
}
