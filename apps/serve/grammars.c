/* grammars.c - the server's compiled grammars, by the text they were
 * compiled from: agents and clients send the same schema with every
 * request, and it is compiled once. Grammars are immutable, so any number
 * of requests share one; the cache keeps them for the server's life, up to
 * a bound past which a request's grammar is its own. */
#include "serve.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CACHED_GRAMMARS 256

typedef struct cached_grammar {
	char *key;
	loom_grammar *g;
} cached_grammar;

struct serve_grammars {
	pthread_mutex_t lock;
	cached_grammar *all;
	int n;
};

serve_grammars *serve_grammars_new(void)
{
	serve_grammars *c = calloc(1, sizeof(*c));
	if (c == NULL || (c->all = calloc(CACHED_GRAMMARS, sizeof(cached_grammar))) == NULL) {
		free(c);
		return NULL;
	}
	pthread_mutex_init(&c->lock, NULL);
	return c;
}

void serve_grammars_free(serve_grammars *c)
{
	if (c == NULL)
		return;
	for (int i = 0; i < c->n; i++) {
		free(c->all[i].key);
		loom_grammar_free(c->all[i].g);
	}
	free(c->all);
	pthread_mutex_destroy(&c->lock);
	free(c);
}

/* The cached grammar of key, or one compiled by compile(arg) and kept. */
static loom_status get(serve_grammars *c, char *key, loom_status (*compile)(const void *arg, loom_grammar **g),
		       const void *arg, const loom_grammar **out, loom_grammar **owned)
{
	*out = NULL;
	*owned = NULL;
	pthread_mutex_lock(&c->lock);
	for (int i = 0; i < c->n; i++)
		if (strcmp(c->all[i].key, key) == 0) {
			*out = c->all[i].g;
			pthread_mutex_unlock(&c->lock);
			free(key);
			return LOOM_OK;
		}
	pthread_mutex_unlock(&c->lock);
	/* Compiled outside the lock: a large schema does not hold up others. */
	loom_grammar *g = NULL;
	loom_status st = compile(arg, &g);
	if (st != LOOM_OK) {
		free(key);
		return st;
	}
	pthread_mutex_lock(&c->lock);
	bool kept = c->n < CACHED_GRAMMARS;
	if (kept)
		c->all[c->n++] = (cached_grammar){key, g};
	pthread_mutex_unlock(&c->lock);
	if (!kept) {
		free(key);
		*owned = g;
	}
	*out = g;
	return LOOM_OK;
}

typedef struct text_source {
	bool json_schema;
	const char *text;
	size_t len;
} text_source;

static loom_status compile_text(const void *arg, loom_grammar **g)
{
	const text_source *t = arg;
	return t->json_schema ? loom_grammar_from_json_schema(t->text, t->len, g)
			      : loom_grammar_parse(t->text, t->len, NULL, g);
}

loom_status serve_grammar_get(serve_grammars *c, bool json_schema, const char *text, size_t len,
			      const loom_grammar **out, loom_grammar **owned)
{
	char *key = malloc(len + 2);
	if (key == NULL)
		return LOOM_ERR_NO_MEMORY;
	key[0] = json_schema ? 'j' : 'g';
	memcpy(key + 1, text, len);
	key[len + 1] = '\0';
	const text_source t = {json_schema, text, len};
	return get(c, key, compile_text, &t, out, owned);
}

typedef struct tool_source {
	const loom_model *model;
	const char *tools, *only_name;
	size_t len;
	unsigned flags;
} tool_source;

static loom_status compile_tools(const void *arg, loom_grammar **g)
{
	const tool_source *t = arg;
	return loom_tool_grammar(t->model, NULL, t->tools, t->len, t->only_name, t->flags, g);
}

loom_status serve_tool_grammar_get(serve_grammars *c, const loom_model *model, const char *tools, size_t len,
				   const char *only_name, unsigned flags, const loom_grammar **out, loom_grammar **owned)
{
	/* t, the flags, the name the choice names, then the tools. */
	const size_t name_len = only_name != NULL ? strlen(only_name) : 0;
	char *key = malloc(len + name_len + 8);
	if (key == NULL)
		return LOOM_ERR_NO_MEMORY;
	int head = snprintf(key, 8, "t%u:", flags & 7u);
	memcpy(key + head, only_name != NULL ? only_name : "", name_len);
	key[head + (int)name_len] = '\n';
	memcpy(key + head + name_len + 1, tools, len);
	key[head + name_len + 1 + len] = '\0';
	const tool_source t = {model, tools, only_name, len, flags};
	return get(c, key, compile_tools, &t, out, owned);
}
