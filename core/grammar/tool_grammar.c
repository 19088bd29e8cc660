/*
 * tool_grammar.c - the grammar of a reply's tool calls, in the model's
 * tool format: each call names one of the tools and gives arguments its
 * parameters' schema takes.
 *
 * A call is {"name": "<one of the tools>", "arguments": <its schema>} in
 * the order and spacing the formats' models write (Llama 3 names the
 * arguments "parameters"); Hermes takes one call after its marker,
 * Mistral and Granite an array of them, loom's generic format an object holding the
 * array or an answer. From Mistral's v11 tokenizer a call is NAME[ARGS]
 * and the arguments ([CALL_ID] and an id of 9 letters and digits before
 * [ARGS] in v11), one after each [TOOL_CALLS]: the grammar is one call,
 * armed again at the next marker. Each tool's parameters compile as their
 * own JSON Schema document (their references are theirs), all into one
 * grammar.
 */
#include "grammar/grammar.h"

#include "model/model.h"
#include "runtime/error.h"
#include "text/chat_json.h"
#include "text/json_text.h"
#include "text/vocab_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static bool valid_name(const char *s)
{
	const size_t n = strlen(s);
	return n >= 1 && n <= 64 &&
	       strspn(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-") == n;
}

/* A marker in the grammar: the token itself (<[id]>) where the
 * vocabulary has it as one control token, which has no text to match;
 * else its text. */
static void marker_term(const loom_model *m, const char *text, char *out, size_t size)
{
	const loom_token t = m->vocab != NULL ? loom_vocab_find(m->vocab, text, strlen(text)) : -1;
	char piece[32];
	size_t n = 0;
	if (t >= 0 && loom_token_to_piece(m, t, false, piece, sizeof(piece), &n) == LOOM_OK && n == 0)
		snprintf(out, size, "<[%d]>", (int)t);
	else
		snprintf(out, size, "\"%s\"", text);
}

LOOM_API loom_status loom_tool_grammar(const loom_model *model, const char *template_name, const char *tools_json,
				       size_t tools_len, const char *only_name, unsigned flags, loom_grammar **out)
{
	if (model == NULL || tools_json == NULL || out == NULL)
		return loom_error(LOOM_ERR_INVALID_ARGUMENT, "loom_tool_grammar: model, tools and out are required");
	*out = NULL;
	loom_chat_kind kind;
	loom_status st = loom_chat_kind_named(model, template_name, &kind);
	if (st != LOOM_OK)
		return st;
	const loom_tool_style style = loom_tool_style_of(kind);
	if ((flags & LOOM_TOOL_GRAMMAR_WHOLE_REPLY) != 0 && style != LOOM_TOOL_LLAMA3 && style != LOOM_TOOL_GENERIC)
		return loom_error(LOOM_ERR_INVALID_ARGUMENT,
				  "the %s template's calls follow a marker: its grammar is the text after it, not the "
				  "whole reply",
				  loom_chat_template_name(kind));
	cJSON *tools = cJSON_ParseWithLength(tools_json, tools_len);
	const size_t n_tools = cJSON_IsArray(tools) ? (size_t)cJSON_GetArraySize(tools) : 0;
	const cJSON **schemas = calloc(n_tools + 1, sizeof(*schemas));
	char **names = calloc(n_tools + 1, sizeof(*names));
	cJSON *no_parameters = cJSON_Parse("{\"type\":\"object\",\"properties\":{},\"additionalProperties\":false}");
	loom_strbuf g = {0};
	size_t n = 0;
	if (!cJSON_IsArray(tools) || n_tools == 0)
		st = loom_error(LOOM_ERR_INVALID_ARGUMENT, "the tools are not a non-empty JSON array");
	else if (schemas == NULL || names == NULL || no_parameters == NULL)
		st = loom_error(LOOM_ERR_NO_MEMORY, "out of memory");
	/* Each tool that may be called: its name and parameters. */
	const char *args_key = style == LOOM_TOOL_LLAMA3 ? "parameters" : "arguments";
	char args_marker[32], id_marker[32];
	marker_term(model, "[ARGS]", args_marker, sizeof(args_marker));
	marker_term(model, "[CALL_ID]", id_marker, sizeof(id_marker));
	size_t k = 0;
	for (const cJSON *t = st == LOOM_OK ? tools->child : NULL; t != NULL && st == LOOM_OK; t = t->next, k++) {
		const cJSON *fn = cJSON_GetObjectItemCaseSensitive(t, "function");
		const cJSON *name = cJSON_GetObjectItemCaseSensitive(fn, "name");
		const cJSON *params = cJSON_GetObjectItemCaseSensitive(fn, "parameters");
		if (!cJSON_IsString(name) || !valid_name(name->valuestring)) {
			st = loom_error(LOOM_ERR_INVALID_ARGUMENT,
					"tool %zu: its function's name must be 1 to 64 of a-z, A-Z, 0-9, _ and -", k);
			break;
		}
		if (only_name != NULL && strcmp(only_name, name->valuestring) != 0)
			continue;
		char rule[32];
		snprintf(rule, sizeof(rule), "targs%zu", n);
		schemas[n] = params != NULL && !cJSON_IsNull(params) ? params : no_parameters;
		names[n] = strdup(rule);
		if (names[n] == NULL) {
			st = loom_error(LOOM_ERR_NO_MEMORY, "out of memory");
			break;
		}
		/* tcallN ::= "{\"name\": \"NAME\", \"arguments\": " targsN "}" (Mistral's
		 * later tokenizers: "NAME" [ARGS] targsN), spaced as the
		 * models were taught: whitespace a model could loop on is
		 * only inside the arguments, where the schema bounds it. */
		char line[512];
		const bool v11 = kind == LOOM_CHAT_MISTRAL_V11;
		if (style == LOOM_TOOL_MISTRAL_ARGS)
			snprintf(line, sizeof(line), "tcall%zu ::= \"%s\" %s%s%s %s targs%zu\n", n, name->valuestring,
				 v11 ? "(" : "", v11 ? id_marker : "", v11 ? " [a-zA-Z0-9]{9})?" : "", args_marker, n);
		else
			snprintf(line, sizeof(line),
				 "tcall%zu ::= \"{\\\"name\\\": \\\"%s\\\", \\\"%s\\\": \" targs%zu%s \"}\"\n", n,
				 name->valuestring, args_key, n,
				 style == LOOM_TOOL_MISTRAL ? " (\", \\\"id\\\": \" jstring)?" : "");
		loom_strbuf_put(&g, line);
		n++;
	}
	if (st == LOOM_OK && n == 0)
		st = loom_error(LOOM_ERR_INVALID_ARGUMENT, "no tool is named '%s'", only_name != NULL ? only_name : "");
	char *rules = NULL;
	size_t n_rules_text = 0;
	if (st == LOOM_OK)
		st = loom_json_schemas_gbnf(schemas, (const char *const *)names, n, &rules, &n_rules_text);
	if (st == LOOM_OK) {
		loom_strbuf_put_n(&g, rules, n_rules_text);
		loom_strbuf_put(&g, "tcall ::=");
		for (size_t i = 0; i < n; i++) {
			char alt[32];
			snprintf(alt, sizeof(alt), "%s tcall%zu", i ? " |" : "", i);
			loom_strbuf_put(&g, alt);
		}
		const bool parallel = (flags & LOOM_TOOL_GRAMMAR_PARALLEL) != 0;
		const char *calls = parallel ? "\"[\" tcall (\", \" tcall)* \"]\"" : "\"[\" tcall \"]\"";
		loom_strbuf_put(&g, "\nroot ::= ");
		if (style == LOOM_TOOL_MISTRAL || style == LOOM_TOOL_GRANITE) {
			loom_strbuf_put(&g, "ws ");
			loom_strbuf_put(&g, calls);
		} else if (style == LOOM_TOOL_GENERIC) {
			loom_strbuf_put(&g, "\"{\\\"tool_calls\\\": \" ");
			loom_strbuf_put(&g, calls);
			loom_strbuf_put(&g, " \"}\"");
			if (flags & LOOM_TOOL_GRAMMAR_ANSWER)
				loom_strbuf_put(&g, " | \"{\\\"response\\\": \" jstring \"}\"");
		} else if (style == LOOM_TOOL_MISTRAL_ARGS) {
			loom_strbuf_put(&g, "tcall");
		} else if (style == LOOM_TOOL_HARMONY) {
			/* The message's text is the arguments. */
			for (size_t i = 0; i < n; i++) {
				char alt[32];
				snprintf(alt, sizeof(alt), "%s targs%zu", i ? " |" : "", i);
				loom_strbuf_put(&g, alt);
			}
		} else {
			loom_strbuf_put(&g, "ws tcall ws");
			/* Llama 3's answer is any text that does not open
			 * with a brace. */
			if ((flags & LOOM_TOOL_GRAMMAR_WHOLE_REPLY) && (flags & LOOM_TOOL_GRAMMAR_ANSWER))
				loom_strbuf_put(&g, " | [ \\t\\r\\n]* [^{ \\t\\r\\n] [^\\x00]*");
		}
		loom_strbuf_put(&g, "\n");
		st = g.failed ? loom_error(LOOM_ERR_NO_MEMORY, "out of memory") : loom_grammar_parse(g.s, g.n, NULL, out);
	}
	free(rules);
	for (size_t i = 0; i < n_tools; i++)
		free(names[i]);
	free(names);
	free(schemas);
	cJSON_Delete(no_parameters);
	cJSON_Delete(tools);
	loom_strbuf_free(&g);
	return st;
}

LOOM_API loom_status loom_tool_call_opening(const loom_model *model, const char *template_name, const char *name,
					    char *buf, size_t size, size_t *n_out, unsigned *flags)
{
	loom_chat_kind kind;
	if (model == NULL || (buf == NULL && size > 0) || n_out == NULL || flags == NULL)
		return loom_error(LOOM_ERR_INVALID_ARGUMENT, "loom_tool_call_opening: bad arguments");
	loom_status st = loom_chat_kind_named(model, template_name, &kind);
	if (st != LOOM_OK)
		return st;
	if (name != NULL && !valid_name(name))
		return loom_error(LOOM_ERR_INVALID_ARGUMENT, "a function's name must be 1 to 64 of a-z, A-Z, 0-9, _ and -");
	const loom_tool_style style = loom_tool_style_of(kind);
	loom_strbuf b = {0};
	*flags = 0;
	switch (style) {
	case LOOM_TOOL_HERMES:
		/* After a prompt that opened the reasoning, the call's reply
		 * has none: the block is closed empty, as Qwen 3 writes it. */
		if (template_name == NULL && loom_chat_opens_thinking(model))
			loom_strbuf_put(&b, "\n</think>\n\n");
		loom_strbuf_put(&b, "<tool_call>\n");
		break;
	case LOOM_TOOL_MISTRAL:
	case LOOM_TOOL_MISTRAL_ARGS:
		/* Named, the grammar writes the name after it. */
		loom_strbuf_put(&b, "[TOOL_CALLS]");
		break;
	case LOOM_TOOL_GRANITE:
		loom_strbuf_put(&b, "<|tool_call|>");
		break;
	case LOOM_TOOL_HARMONY:
		/* A commentary message to the function; named, its header
		 * whole, so that the model writes the arguments. */
		loom_strbuf_put(&b, "<|channel|>commentary to=functions.");
		if (name != NULL) {
			loom_strbuf_put(&b, name);
			loom_strbuf_put(&b, " <|constrain|>json<|message|>");
		}
		*flags = LOOM_TOOL_OPENING_BY_NAME;
		break;
	default:
		*flags = LOOM_TOOL_OPENING_WHOLE_REPLY;
		break;
	}
	if (b.failed)
		return loom_error(LOOM_ERR_NO_MEMORY, "out of memory");
	*n_out = b.n;
	if (size > 0) {
		const size_t k = b.n < size ? b.n : size - 1;
		memcpy(buf, b.s != NULL ? b.s : "", k);
		buf[k] = '\0';
	}
	loom_strbuf_free(&b);
	return *n_out < size ? LOOM_OK
			     : loom_error(LOOM_ERR_BUFFER_TOO_SMALL, "the opening needs %zu bytes", *n_out + 1);
}
