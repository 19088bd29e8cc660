/* api_parse.c - OpenAI request bodies to requests. Every field the server
 * reads is type- and range-checked, naming the field at fault; fields it
 * does not know are ignored (clients send extensions), but known ones it
 * cannot honour (n > 1, echo, tools, a schema keyword loom cannot
 * enforce) are refused rather than silently dropped. */
#include "serve.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct parse_error {
	char **msg;
	const char **param;
} parse_error;

static int fail(parse_error *e, int status, const char *param, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

static int fail(parse_error *e, int status, const char *param, const char *fmt, ...)
{
	char buf[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	*e->msg = strdup(buf);
	*e->param = param;
	return status;
}

/* The field, or NULL when absent or null. */
static cJSON *field(const cJSON *root, const char *name)
{
	cJSON *f = cJSON_GetObjectItemCaseSensitive(root, name);
	return f == NULL || cJSON_IsNull(f) ? NULL : f;
}

static int number(const cJSON *root, const char *name, double lo, double hi, float *out, parse_error *e)
{
	cJSON *f = field(root, name);
	if (f == NULL)
		return 0;
	if (!cJSON_IsNumber(f) || !(f->valuedouble >= lo && f->valuedouble <= hi))
		return fail(e, 400, name, "'%s' must be a number in [%g, %g]", name, lo, hi);
	*out = (float)f->valuedouble;
	return 0;
}

static bool is_integer(const cJSON *f)
{
	return cJSON_IsNumber(f) && isfinite(f->valuedouble) && f->valuedouble == floor(f->valuedouble);
}

static int integer(const cJSON *root, const char *name, double lo, double hi, int64_t *out, parse_error *e)
{
	cJSON *f = field(root, name);
	if (f == NULL)
		return 0;
	if (!is_integer(f) || f->valuedouble < lo || f->valuedouble > hi)
		return fail(e, 400, name, "'%s' must be an integer in [%.0f, %.0f]", name, lo, hi);
	*out = (int64_t)f->valuedouble;
	return 0;
}

static int boolean(const cJSON *root, const char *name, bool *out, parse_error *e)
{
	cJSON *f = field(root, name);
	if (f == NULL)
		return 0;
	if (!cJSON_IsBool(f))
		return fail(e, 400, name, "'%s' must be true or false", name);
	*out = cJSON_IsTrue(f);
	return 0;
}

static int parse_json(const char *body, size_t len, cJSON **root, parse_error *e)
{
	const char *end = NULL;
	*root = cJSON_ParseWithLengthOpts(body, len, &end, false);
	if (*root == NULL)
		return fail(e, 400, NULL, "the body is not valid JSON (near byte %zu)",
			    cJSON_GetErrorPtr() != NULL && cJSON_GetErrorPtr() >= body ? (size_t)(cJSON_GetErrorPtr() - body)
											: (size_t)0);
	/* Nothing but whitespace after the value: a body is one JSON text. */
	for (const char *p = end; p != NULL && p < body + len; p++)
		if (*p != ' ' && *p != '\t' && *p != '\n' && *p != '\r')
			return fail(e, 400, NULL, "the body has bytes after its JSON value (at byte %zu)", (size_t)(p - body));
	if (!cJSON_IsObject(*root))
		return fail(e, 400, NULL, "the body must be a JSON object");
	return 0;
}

static int tokenize(serve_server *s, const char *text, size_t len, bool add_special, bool parse_special,
		    loom_token **out, size_t *n, parse_error *e)
{
	size_t need = 0;
	loom_status st = loom_tokenize(s->model, text, len, add_special, parse_special, NULL, 0, &need);
	if (st != LOOM_OK && st != LOOM_ERR_BUFFER_TOO_SMALL)
		return fail(e, 400, NULL, "cannot tokenize: %s", loom_last_error());
	*out = malloc((need + 1) * sizeof(loom_token));
	if (*out == NULL)
		return fail(e, 500, NULL, "out of memory");
	if (loom_tokenize(s->model, text, len, add_special, parse_special, *out, need, n) != LOOM_OK)
		return fail(e, 400, NULL, "cannot tokenize: %s", loom_last_error());
	return 0;
}

/* An array of token ids, each checked against the vocabulary. */
static int token_array(serve_server *s, const cJSON *arr, const char *param, loom_token **out, size_t *n,
		       parse_error *e)
{
	size_t count = (size_t)cJSON_GetArraySize(arr);
	*out = malloc((count + 1) * sizeof(loom_token));
	if (*out == NULL)
		return fail(e, 500, NULL, "out of memory");
	*n = 0;
	const cJSON *t;
	cJSON_ArrayForEach(t, arr)
	{
		if (!is_integer(t) || t->valuedouble < 0 || t->valuedouble >= s->n_vocab)
			return fail(e, 400, param, "'%s' holds something other than a token id in [0, %d)", param,
				    s->n_vocab);
		(*out)[(*n)++] = (loom_token)t->valuedouble;
	}
	return 0;
}

static bool is_token_array(const cJSON *f)
{
	return cJSON_IsArray(f) && cJSON_GetArraySize(f) > 0 && cJSON_IsNumber(cJSON_GetArrayItem(f, 0));
}

static int parse_prompt(serve_server *s, const cJSON *root, serve_request *r, parse_error *e)
{
	cJSON *p = field(root, "prompt");
	if (p == NULL)
		return fail(e, 400, "prompt", "'prompt' is required");
	if (cJSON_IsArray(p) && cJSON_GetArraySize(p) == 1 && !is_token_array(p))
		p = cJSON_GetArrayItem(p, 0); /* a batch of one */
	int st;
	if (cJSON_IsString(p))
		st = tokenize(s, p->valuestring, strlen(p->valuestring), true, true, &r->prompt, &r->n_prompt, e);
	else if (is_token_array(p))
		st = token_array(s, p, "prompt", &r->prompt, &r->n_prompt, e);
	else if (cJSON_IsArray(p) && cJSON_GetArraySize(p) > 1)
		return fail(e, 400, "prompt", "one prompt per request: send each of a batch on its own");
	else
		return fail(e, 400, "prompt", "'prompt' must be a string or an array of token ids");
	if (st != 0)
		return st;
	if (r->n_prompt == 0) {
		/* An empty prompt starts from BOS. */
		if (loom_token_bos(s->model) < 0)
			return fail(e, 400, "prompt", "the prompt is empty and the model has no BOS token");
		r->prompt[r->n_prompt++] = loom_token_bos(s->model);
	}
	return 0;
}

/* A message's text: a string, or the text parts of an array. */
static int message_text(const cJSON *content, bool may_be_null, char **out, parse_error *e)
{
	if (content == NULL || cJSON_IsNull(content)) {
		if (!may_be_null)
			return fail(e, 400, "messages", "a message's 'content' is required");
		*out = strdup("");
	} else if (cJSON_IsString(content)) {
		*out = strdup(content->valuestring);
	} else if (cJSON_IsArray(content)) {
		serve_buf b = {0};
		const cJSON *part;
		cJSON_ArrayForEach(part, content)
		{
			cJSON *type = cJSON_GetObjectItemCaseSensitive(part, "type");
			cJSON *text = cJSON_GetObjectItemCaseSensitive(part, "text");
			if (!cJSON_IsString(type) || strcmp(type->valuestring, "text") != 0 || !cJSON_IsString(text)) {
				serve_buf_free(&b);
				return fail(e, 400, "messages", "only text content parts are supported");
			}
			if (!serve_buf_append(&b, text->valuestring, strlen(text->valuestring))) {
				serve_buf_free(&b);
				return fail(e, 500, NULL, "out of memory");
			}
		}
		*out = b.data != NULL ? b.data : strdup("");
	} else {
		return fail(e, 400, "messages", "a message's 'content' must be a string or an array of text parts");
	}
	return *out == NULL ? fail(e, 500, NULL, "out of memory") : 0;
}

/* What a chat request asks of tools: the tools (as JSON text) and how the
 * reply may call them. */
typedef enum tool_choice { CHOICE_NONE, CHOICE_AUTO, CHOICE_REQUIRED, CHOICE_NAMED } tool_choice;

typedef struct tools_request {
	char *json; /* the tools, NULL: none */
	tool_choice choice;
	const char *name; /* CHOICE_NAMED: the function (in the body) */
} tools_request;

static bool valid_tool_name(const char *s)
{
	const size_t n = strlen(s);
	return n >= 1 && n <= 64 &&
	       strspn(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-") == n;
}

/* tools ([{type: "function", function: {name, description, parameters,
 * strict}}]), tool_choice (none, auto, required, or {type: "function",
 * function: {name}}) and parallel_tool_calls. */
static int parse_tools(const cJSON *root, serve_request *r, tools_request *t, parse_error *e)
{
	bool parallel = true;
	int st = boolean(root, "parallel_tool_calls", &parallel, e);
	if (st != 0)
		return st;
	r->parallel_tools = parallel;
	const cJSON *tools = field(root, "tools"), *choice = field(root, "tool_choice");
	const int n = cJSON_IsArray(tools) ? cJSON_GetArraySize(tools) : 0;
	if (tools != NULL && !cJSON_IsArray(tools))
		return fail(e, 400, "tools", "'tools' must be an array");
	if (n > SERVE_MAX_TOOLS)
		return fail(e, 400, "tools", "at most %d tools", SERVE_MAX_TOOLS);
	int k = 0;
	for (const cJSON *tool = n > 0 ? tools->child : NULL; tool != NULL; tool = tool->next, k++) {
		const cJSON *type = cJSON_GetObjectItemCaseSensitive(tool, "type");
		const cJSON *fn = cJSON_GetObjectItemCaseSensitive(tool, "function");
		const cJSON *name = cJSON_GetObjectItemCaseSensitive(fn, "name");
		if (!cJSON_IsObject(tool) || !cJSON_IsString(type))
			return fail(e, 400, "tools", "tool %d must be an object with a 'type'", k);
		if (strcmp(type->valuestring, "function") != 0)
			return fail(e, 400, "tools", "tool %d: type '%s' is not supported (only \"function\")", k,
				    type->valuestring);
		if (!cJSON_IsObject(fn) || !cJSON_IsString(name) || !valid_tool_name(name->valuestring))
			return fail(e, 400, "tools",
				    "tool %d: 'function.name' must be 1 to 64 of a-z, A-Z, 0-9, _ and -", k);
		const cJSON *desc = field(fn, "description"), *params = field(fn, "parameters"),
			    *strict = field(fn, "strict");
		if ((desc != NULL && !cJSON_IsString(desc)) || (params != NULL && !cJSON_IsObject(params)) ||
		    (strict != NULL && !cJSON_IsBool(strict)))
			return fail(e, 400, "tools",
				    "tool %d ('%s'): 'description' must be a string, 'parameters' an object and 'strict' "
				    "a boolean",
				    k, name->valuestring);
		for (const cJSON *other = tools->child; other != tool; other = other->next)
			if (strcmp(cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(other, "function"),
								    "name")
					   ->valuestring,
				   name->valuestring) == 0)
				return fail(e, 400, "tools", "two tools are named '%s'", name->valuestring);
	}
	t->choice = n > 0 ? CHOICE_AUTO : CHOICE_NONE;
	if (cJSON_IsString(choice)) {
		const char *c = choice->valuestring;
		if (strcmp(c, "none") == 0)
			t->choice = CHOICE_NONE;
		else if (strcmp(c, "auto") == 0 || strcmp(c, "required") == 0)
			t->choice = strcmp(c, "auto") == 0 ? CHOICE_AUTO : CHOICE_REQUIRED;
		else
			return fail(e, 400, "tool_choice", "'tool_choice' '%s' is not one of none, auto, required", c);
	} else if (choice != NULL) {
		const cJSON *type = cJSON_GetObjectItemCaseSensitive(choice, "type");
		const cJSON *name = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(choice, "function"),
								     "name");
		if (!cJSON_IsObject(choice) || !cJSON_IsString(type) || strcmp(type->valuestring, "function") != 0 ||
		    !cJSON_IsString(name))
			return fail(e, 400, "tool_choice",
				    "'tool_choice' must be none, auto, required or {\"type\": \"function\", "
				    "\"function\": {\"name\": ...}}");
		t->choice = CHOICE_NAMED;
		t->name = name->valuestring;
	}
	if (t->choice != CHOICE_NONE && n == 0)
		return fail(e, 400, "tool_choice", "'tool_choice' asks for a tool call, and there are no 'tools'");
	if (t->choice == CHOICE_NAMED) {
		bool found = false;
		for (const cJSON *tool = tools->child; tool != NULL && !found; tool = tool->next)
			found = strcmp(cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(tool, "function"),
									"name")
					       ->valuestring,
				       t->name) == 0;
		if (!found)
			return fail(e, 400, "tool_choice", "'tool_choice' names '%s', which is not one of the tools", t->name);
	}
	if (n > 0 && (t->json = cJSON_PrintUnformatted(tools)) == NULL)
		return fail(e, 500, NULL, "out of memory");
	return 0;
}

/* A conversation with tools, tool calls or results: formatted from its
 * JSON by the template's tool format. */
static bool uses_tools(const cJSON *msgs, const tools_request *t)
{
	if (t->json != NULL)
		return true;
	for (const cJSON *m = msgs->child; m != NULL; m = m->next) {
		const cJSON *role = cJSON_GetObjectItemCaseSensitive(m, "role");
		if (field(m, "tool_calls") != NULL || (cJSON_IsString(role) && strcmp(role->valuestring, "tool") == 0))
			return true;
	}
	return false;
}

/* The reasoning a chat request asks for, and the field that asked. */
typedef struct reasoning_request {
	loom_reasoning level;
	const char *param; /* NULL: none asked */
} reasoning_request;

static int effort_of(const cJSON *f, const char *param, loom_reasoning *out, parse_error *e)
{
	static const char *const names[] = {"none", "low", "medium", "high"};
	static const loom_reasoning levels[] = {LOOM_REASONING_NONE, LOOM_REASONING_LOW, LOOM_REASONING_MEDIUM,
						LOOM_REASONING_HIGH};
	for (size_t i = 0; cJSON_IsString(f) && i < sizeof(names) / sizeof(names[0]); i++)
		if (strcmp(f->valuestring, names[i]) == 0) {
			*out = levels[i];
			return 0;
		}
	return fail(e, 400, param, "'%s' must be \"none\", \"low\", \"medium\" or \"high\"", param);
}

/* Two settings of one request: the same reasoning, or on and a level. */
static bool reasoning_agrees(loom_reasoning a, loom_reasoning b)
{
	return a == b || (a == LOOM_REASONING_ON && b > LOOM_REASONING_ON) ||
	       (b == LOOM_REASONING_ON && a > LOOM_REASONING_ON);
}

/* OpenAI's reasoning_effort, and chat_template_kwargs' enable_thinking
 * and reasoning_effort as vLLM and llama-server take them. loom runs no
 * Jinja: another template variable would be dropped unread, so it is
 * refused. */
static int parse_reasoning(serve_server *s, const cJSON *root, reasoning_request *out, parse_error *e)
{
	*out = (reasoning_request){LOOM_REASONING_DEFAULT, NULL};
	const cJSON *f = field(root, "reasoning_effort");
	if (f != NULL) {
		if (effort_of(f, "reasoning_effort", &out->level, e) != 0)
			return 400;
		out->param = "reasoning_effort";
	}
	const cJSON *kw = field(root, "chat_template_kwargs");
	if (kw != NULL && !cJSON_IsObject(kw))
		return fail(e, 400, "chat_template_kwargs", "'chat_template_kwargs' must be an object");
	for (const cJSON *k = kw != NULL ? kw->child : NULL; k != NULL; k = k->next) {
		loom_reasoning level = LOOM_REASONING_DEFAULT;
		if (strcmp(k->string, "reasoning_effort") == 0) {
			if (effort_of(k, "chat_template_kwargs.reasoning_effort", &level, e) != 0)
				return 400;
		} else if (strcmp(k->string, "enable_thinking") == 0) {
			if (!cJSON_IsBool(k))
				return fail(e, 400, "chat_template_kwargs",
					    "'chat_template_kwargs.enable_thinking' must be true or false");
			level = cJSON_IsTrue(k) ? LOOM_REASONING_ON : LOOM_REASONING_NONE;
		} else
			return fail(e, 400, "chat_template_kwargs",
				    "'chat_template_kwargs.%s' is not a variable loom's chat templates read (they read "
				    "enable_thinking and reasoning_effort)",
				    k->string);
		if (out->param != NULL && !reasoning_agrees(out->level, level))
			return fail(e, 400, "chat_template_kwargs",
				    "'%s' and 'chat_template_kwargs.%s' ask for different reasoning", out->param, k->string);
		if (out->param == NULL || out->level == LOOM_REASONING_ON) {
			out->level = level;
			out->param = "chat_template_kwargs";
		}
	}
	if (out->param != NULL && loom_chat_check_reasoning(s->model, NULL, out->level) != LOOM_OK)
		return fail(e, 400, out->param, "%s", loom_last_error());
	return 0;
}

static int format_with_tools(serve_server *s, const cJSON *msgs, const tools_request *t, const char *opening,
			     loom_reasoning reasoning, char **prompt, size_t *len, parse_error *e)
{
	char *messages = cJSON_PrintUnformatted(msgs);
	if (messages == NULL)
		return fail(e, 500, NULL, "out of memory");
	/* Loom's generic format tells the model to answer in JSON: with
	 * tool_choice none the tools are left out of its prompt. */
	char buf[256];
	size_t n = 0;
	unsigned flags = 0;
	loom_tool_call_opening(s->model, NULL, NULL, buf, sizeof(buf), &n, &flags);
	const bool generic = (flags & LOOM_TOOL_OPENING_WHOLE_REPLY) && strcmp(loom_chat_template(s->model), "llama3") != 0;
	const char *tools = t->choice == CHOICE_NONE && generic ? NULL : t->json;
	const size_t tools_len = tools != NULL ? strlen(tools) : 0, extra = strlen(opening);
	int st = 0;
	loom_status ls = loom_chat_apply_json_reasoning(s->model, NULL, reasoning, messages, strlen(messages), tools,
							tools_len, true, NULL, 0, len);
	if (ls != LOOM_OK && ls != LOOM_ERR_BUFFER_TOO_SMALL)
		st = fail(e, 400, "messages", "%s", loom_last_error());
	else if ((*prompt = malloc(*len + extra + 1)) == NULL)
		st = fail(e, 500, NULL, "out of memory");
	else if (loom_chat_apply_json_reasoning(s->model, NULL, reasoning, messages, strlen(messages), tools, tools_len,
						true, *prompt, *len + 1, len) != LOOM_OK)
		st = fail(e, 400, "messages", "%s", loom_last_error());
	if (st == 0) {
		/* A call the request requires is opened for the model. */
		memcpy(*prompt + *len, opening, extra + 1);
		*len += extra;
	}
	free(messages);
	return st;
}

static int parse_messages(serve_server *s, const cJSON *root, serve_request *r, const tools_request *t,
			  const char *opening, parse_error *e)
{
	cJSON *msgs = field(root, "messages");
	if (!cJSON_IsArray(msgs) || cJSON_GetArraySize(msgs) == 0)
		return fail(e, 400, "messages", "'messages' must be a non-empty array");
	reasoning_request reasoning;
	if (parse_reasoning(s, root, &reasoning, e) != 0)
		return 400;
	if (uses_tools(msgs, t) || reasoning.param != NULL) {
		char *prompt = NULL;
		size_t len = 0;
		int st = format_with_tools(s, msgs, t, opening, reasoning.level, &prompt, &len, e);
		if (st == 0)
			st = tokenize(s, prompt, len, true, true, &r->prompt, &r->n_prompt, e);
		free(prompt);
		return st;
	}
	size_t n = (size_t)cJSON_GetArraySize(msgs), i = 0;
	loom_chat_message *m = calloc(n, sizeof(*m));
	if (m == NULL)
		return fail(e, 500, NULL, "out of memory");
	int st = 0;
	const cJSON *msg;
	cJSON_ArrayForEach(msg, msgs)
	{
		cJSON *role = cJSON_GetObjectItemCaseSensitive(msg, "role");
		if (!cJSON_IsObject(msg) || !cJSON_IsString(role)) {
			st = fail(e, 400, "messages", "each message must be an object with a string 'role'");
			break;
		}
		const char *name = role->valuestring;
		if (strcmp(name, "developer") == 0)
			name = "system";
		if (strcmp(name, "system") != 0 && strcmp(name, "user") != 0 && strcmp(name, "assistant") != 0) {
			st = fail(e, 400, "messages", "message role '%s' is not supported (system, developer, user, "
						      "assistant)", role->valuestring);
			break;
		}
		char *text = NULL;
		st = message_text(cJSON_GetObjectItemCaseSensitive(msg, "content"), strcmp(name, "assistant") == 0,
				  &text, e);
		if (st != 0)
			break;
		m[i++] = (loom_chat_message){.role = name, .content = text};
	}
	char *prompt = NULL;
	size_t len = 0;
	if (st == 0) {
		loom_status ls = loom_chat_apply(s->model, NULL, m, i, true, NULL, 0, &len);
		if (ls != LOOM_OK && ls != LOOM_ERR_BUFFER_TOO_SMALL)
			st = fail(e, 400, "messages", "%s", loom_last_error());
		else if ((prompt = malloc(len + 1)) == NULL)
			st = fail(e, 500, NULL, "out of memory");
		else if (loom_chat_apply(s->model, NULL, m, i, true, prompt, len + 1, &len) != LOOM_OK)
			st = fail(e, 400, "messages", "%s", loom_last_error());
	}
	if (st == 0)
		st = tokenize(s, prompt, len, true, true, &r->prompt, &r->n_prompt, e);
	free(prompt);
	for (size_t k = 0; k < i; k++)
		free((char *)m[k].content);
	free(m);
	return st;
}

static int parse_stop(const cJSON *root, serve_request *r, parse_error *e)
{
	cJSON *stop = field(root, "stop");
	if (stop == NULL)
		return 0;
	size_t n = cJSON_IsString(stop) ? 1 : cJSON_IsArray(stop) ? (size_t)cJSON_GetArraySize(stop) : 0;
	if (!cJSON_IsString(stop) && !cJSON_IsArray(stop))
		return fail(e, 400, "stop", "'stop' must be a string or an array of strings");
	if (n > SERVE_MAX_STOP)
		return fail(e, 400, "stop", "at most %d stop strings", SERVE_MAX_STOP);
	r->stop = calloc(n ? n : 1, sizeof(char *));
	if (r->stop == NULL)
		return fail(e, 500, NULL, "out of memory");
	for (size_t i = 0; i < n; i++) {
		const cJSON *one = cJSON_IsString(stop) ? stop : cJSON_GetArrayItem(stop, (int)i);
		if (!cJSON_IsString(one))
			return fail(e, 400, "stop", "'stop' must be a string or an array of strings");
		if ((r->stop[r->n_stop++] = strdup(one->valuestring)) == NULL)
			return fail(e, 500, NULL, "out of memory");
	}
	return 0;
}

/* Fields of the legacy API and the chat API that loom does not implement:
 * refused, so a client never gets a silently different answer. */
static int refuse_unsupported(const cJSON *root, serve_kind kind, parse_error *e)
{
	int64_t one = 1;
	int st;
	if ((st = integer(root, "n", 1, 1, &one, e)) != 0 || (st = integer(root, "best_of", 1, 1, &one, e)) != 0)
		return st;
	cJSON *f;
	if ((f = field(root, "echo")) != NULL && !cJSON_IsFalse(f))
		return fail(e, 400, "echo", "'echo' is not supported");
	if (field(root, "suffix") != NULL)
		return fail(e, 400, "suffix", "'suffix' is not supported");
	if ((f = field(root, "tools")) != NULL && kind != SERVE_CHAT && !(cJSON_IsArray(f) && f->child == NULL))
		return fail(e, 400, "tools", "'tools' is for /v1/chat/completions");
	if (field(root, "functions") != NULL || field(root, "function_call") != NULL)
		return fail(e, 400, "functions", "the deprecated 'functions' and 'function_call' are not supported: send "
						 "'tools' and 'tool_choice'");
	return 0;
}

/* logit_bias: {"token id": bias in [-100, 100], ...}, as OpenAI's. */
static int parse_logit_bias(serve_server *s, const cJSON *root, serve_request *r, parse_error *e)
{
	const cJSON *f = field(root, "logit_bias");
	if (f == NULL)
		return 0;
	if (!cJSON_IsObject(f))
		return fail(e, 400, "logit_bias", "'logit_bias' must be an object of token ids and biases");
	const int n = cJSON_GetArraySize(f);
	if (n > SERVE_MAX_LOGIT_BIAS)
		return fail(e, 400, "logit_bias", "at most %d tokens in 'logit_bias'", SERVE_MAX_LOGIT_BIAS);
	r->bias_tokens = malloc(((size_t)n + 1) * sizeof(loom_token));
	r->bias = malloc(((size_t)n + 1) * sizeof(float));
	if (r->bias_tokens == NULL || r->bias == NULL)
		return fail(e, 500, NULL, "out of memory");
	for (const cJSON *b = f->child; b != NULL; b = b->next) {
		char *end;
		long id = strtol(b->string, &end, 10);
		if (end == b->string || *end != '\0' || id < 0 || id >= s->n_vocab)
			return fail(e, 400, "logit_bias", "'logit_bias' key '%s' is not a token id of this model (0 to %d)",
				    b->string, s->n_vocab - 1);
		if (!cJSON_IsNumber(b) || !(b->valuedouble >= -100 && b->valuedouble <= 100))
			return fail(e, 400, "logit_bias", "'logit_bias' values must be numbers in [-100, 100]");
		r->bias_tokens[r->n_bias] = (loom_token)id;
		r->bias[r->n_bias++] = (float)b->valuedouble;
	}
	return 0;
}

/* response_format: text, json_object (any JSON object, or the schema
 * llama.cpp's extension puts beside it) or json_schema (strict or not, the
 * reply follows the schema: loom constrains both, and refuses a schema it
 * cannot enforce). */
static int parse_response_format(serve_server *s, const cJSON *root, serve_request *r, parse_error *e)
{
	const cJSON *f = field(root, "response_format");
	if (f == NULL)
		return 0;
	const cJSON *type = cJSON_GetObjectItemCaseSensitive(f, "type");
	if (!cJSON_IsObject(f) || !cJSON_IsString(type))
		return fail(e, 400, "response_format", "'response_format' must be an object with a 'type'");
	const cJSON *schema = NULL;
	if (strcmp(type->valuestring, "text") == 0) {
		return 0;
	} else if (strcmp(type->valuestring, "json_object") == 0) {
		schema = field(f, "schema");
	} else if (strcmp(type->valuestring, "json_schema") == 0) {
		const cJSON *js = field(f, "json_schema");
		if (!cJSON_IsObject(js))
			return fail(e, 400, "response_format", "'response_format.json_schema' must be an object");
		const cJSON *name = field(js, "name"), *strict = field(js, "strict");
		if (!cJSON_IsString(name) || strlen(name->valuestring) == 0 || strlen(name->valuestring) > 64 ||
		    strspn(name->valuestring, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-") !=
			    strlen(name->valuestring))
			return fail(e, 400, "response_format",
				    "'response_format.json_schema.name' must be 1 to 64 of a-z, A-Z, 0-9, _ and -");
		if (strict != NULL && !cJSON_IsBool(strict))
			return fail(e, 400, "response_format", "'response_format.json_schema.strict' must be a boolean");
		schema = field(js, "schema");
		if (schema == NULL)
			return fail(e, 400, "response_format", "'response_format.json_schema.schema' is required");
	} else {
		return fail(e, 400, "response_format", "response_format type '%s' is not one of text, json_object, json_schema",
			    type->valuestring);
	}
	char *text = schema != NULL ? cJSON_PrintUnformatted(schema) : strdup("{\"type\":\"object\"}");
	if (text == NULL)
		return fail(e, 500, NULL, "out of memory");
	loom_status st = serve_grammar_get(s->grammars, true, text, strlen(text), &r->grammar, &r->own_grammar);
	free(text);
	if (st == LOOM_ERR_NO_MEMORY)
		return fail(e, 500, NULL, "out of memory");
	if (st != LOOM_OK)
		return fail(e, 400, "response_format", "%s", loom_last_error());
	return 0;
}

static int parse_sampling(serve_server *s, const cJSON *root, serve_request *r, parse_error *e)
{
	loom_sampler_params *p = &r->sampling;
	*p = loom_sampler_default_params();
	/* OpenAI's defaults: plain sampling at temperature 1. */
	p->temperature = 1.0f;
	p->top_k = 0;
	p->top_p = 1.0f;
	p->min_p = 0.0f;
	p->repeat_penalty = 1.0f;
	p->seed = (uint64_t)time(NULL) ^ ((uint64_t)(uintptr_t)r << 16);
	int64_t top_k = 0, seed = 0;
	int st;
	if ((st = number(root, "temperature", 0, 2, &p->temperature, e)) != 0 ||
	    (st = number(root, "top_p", 0, 1, &p->top_p, e)) != 0 ||
	    (st = integer(root, "top_k", 0, s->n_vocab, &top_k, e)) != 0 ||
	    (st = number(root, "min_p", 0, 1, &p->min_p, e)) != 0 ||
	    (st = number(root, "presence_penalty", -2, 2, &p->presence_penalty, e)) != 0 ||
	    (st = number(root, "frequency_penalty", -2, 2, &p->frequency_penalty, e)) != 0 ||
	    (st = number(root, "repeat_penalty", 0.01, 10, &p->repeat_penalty, e)) != 0)
		return st;
	p->top_k = (int32_t)top_k;
	if (field(root, "seed") != NULL) {
		if ((st = integer(root, "seed", -9007199254740991.0, 9007199254740991.0, &seed, e)) != 0)
			return st;
		p->seed = (uint64_t)seed;
	}
	return 0;
}

static int parse_logprobs(const cJSON *root, serve_request *r, parse_error *e)
{
	int64_t n = -1;
	int st;
	if (r->kind == SERVE_COMPLETION) {
		if ((st = integer(root, "logprobs", 0, SERVE_MAX_TOP_LOGPROBS, &n, e)) != 0)
			return st;
		r->logprobs = (int32_t)n;
		return 0;
	}
	bool on = false;
	int64_t top = 0;
	if ((st = boolean(root, "logprobs", &on, e)) != 0 ||
	    (st = integer(root, "top_logprobs", 0, SERVE_MAX_TOP_LOGPROBS, &top, e)) != 0)
		return st;
	if (field(root, "top_logprobs") != NULL && !on)
		return fail(e, 400, "top_logprobs", "'top_logprobs' needs 'logprobs': true");
	r->logprobs = on ? (int32_t)top : -1;
	return 0;
}

/* How the reply's tool calls are read and constrained: in auto, the
 * grammar is armed while the model is inside a call it opened (or, in
 * formats without a marker, over the whole reply with a plain answer
 * allowed); a call that is required or named is opened for the model at
 * the end of the prompt (*opening), or its grammar is the whole reply. */
static int setup_tool_calls(serve_server *s, serve_request *r, const tools_request *t, const char **opening,
			    parse_error *e)
{
	const char *name = t->choice == CHOICE_NAMED ? t->name : NULL;
	char open[256];
	size_t n = 0;
	unsigned how = 0;
	if (loom_tool_call_opening(s->model, NULL, name, open, sizeof(open), &n, &how) != LOOM_OK)
		return fail(e, 400, "tool_choice", "%s", loom_last_error());
	const bool whole = (how & LOOM_TOOL_OPENING_WHOLE_REPLY) != 0;
	unsigned flags = r->parallel_tools ? LOOM_TOOL_GRAMMAR_PARALLEL : 0;
	r->read_tools = true;
	r->tool_by_name = (how & LOOM_TOOL_OPENING_BY_NAME) != 0;
	if (whole) {
		flags |= LOOM_TOOL_GRAMMAR_WHOLE_REPLY | (t->choice == CHOICE_AUTO ? LOOM_TOOL_GRAMMAR_ANSWER : 0);
		r->tool_whole = true;
	} else if (t->choice != CHOICE_AUTO && (r->tool_opening = strdup(open)) == NULL) {
		return fail(e, 500, NULL, "out of memory");
	}
	if (r->tool_by_name && (r->tools_json = strdup(t->json)) == NULL)
		return fail(e, 500, NULL, "out of memory");
	*opening = r->tool_opening != NULL ? r->tool_opening : "";
	/* Compiled now, so that a schema loom cannot enforce is refused. */
	loom_status ls = serve_tool_grammar_get(s->grammars, s->model, t->json, strlen(t->json), name, flags,
						&r->tool_grammar, &r->own_tool_grammar);
	if (ls == LOOM_ERR_NO_MEMORY)
		return fail(e, 500, NULL, "out of memory");
	if (ls != LOOM_OK)
		return fail(e, 400, "tools", "%s", loom_last_error());
	if (t->choice == CHOICE_AUTO && !whole && !r->tool_by_name && !s->tool_marker_token) {
		/* Calls are read without it (cmd_serve.c says why). */
		loom_grammar_free(r->own_tool_grammar);
		r->own_tool_grammar = NULL;
		r->tool_grammar = NULL;
	}
	return 0;
}

static void make_id(serve_request *r, const char *prefix)
{
	static const char hex[] = "0123456789abcdef";
	static uint64_t counter;
	uint64_t n = __atomic_add_fetch(&counter, 1, __ATOMIC_RELAXED);
	uint64_t x = ((uint64_t)time(NULL) << 20 ^ n) * 0x9e3779b97f4a7c15ull;
	char tail[17];
	for (int i = 0; i < 16; i++, x >>= 4)
		tail[i] = hex[x & 15];
	tail[16] = '\0';
	snprintf(r->id, sizeof(r->id), "%s-%s", prefix, tail);
	r->created = (int64_t)time(NULL);
}

int serve_parse_completion(serve_server *s, const char *body, size_t len, serve_kind kind, serve_request *r,
			   char **err, const char **param)
{
	parse_error e = {err, param};
	cJSON *root = NULL;
	int st = parse_json(body, len, &root, &e);
	cJSON *f;
	if (st == 0 && (f = field(root, "model")) != NULL && !cJSON_IsString(f))
		st = fail(&e, 400, "model", "'model' must be a string");
	if (st == 0)
		st = refuse_unsupported(root, kind, &e);
	if (st == 0)
		st = parse_sampling(s, root, r, &e);
	if (st == 0)
		st = parse_logprobs(root, r, &e);
	if (st == 0)
		st = parse_stop(root, r, &e);
	if (st == 0)
		st = parse_response_format(s, root, r, &e);
	if (st == 0)
		st = parse_logit_bias(s, root, r, &e);
	if (st == 0)
		st = boolean(root, "stream", &r->stream, &e);
	if (st == 0 && (f = field(root, "stream_options")) != NULL) {
		if (!cJSON_IsObject(f))
			st = fail(&e, 400, "stream_options", "'stream_options' must be an object");
		else
			st = boolean(f, "include_usage", &r->include_usage, &e);
	}
	int64_t max_tokens = -1;
	if (st == 0)
		st = integer(root, "max_tokens", 1, 1e9, &max_tokens, &e);
	if (st == 0 && kind == SERVE_CHAT && max_tokens < 0)
		st = integer(root, "max_completion_tokens", 1, 1e9, &max_tokens, &e);
	tools_request tools = {0};
	const char *opening = "";
	if (st == 0 && kind == SERVE_CHAT)
		st = parse_tools(root, r, &tools, &e);
	if (st == 0 && tools.choice != CHOICE_NONE && r->grammar != NULL)
		st = fail(&e, 400, "response_format",
			  "'response_format' with tool calls is not supported: send tool_choice none, or no response_format");
	if (st == 0 && tools.choice != CHOICE_NONE)
		st = setup_tool_calls(s, r, &tools, &opening, &e);
	if (st == 0)
		st = kind == SERVE_CHAT ? parse_messages(s, root, r, &tools, opening, &e) : parse_prompt(s, root, r, &e);
	free(tools.json);
	if (st == 0 && r->n_prompt >= s->n_ctx)
		st = fail(&e, 400, kind == SERVE_CHAT ? "messages" : "prompt",
			  "this server's context holds %u tokens, and the prompt has %zu", s->n_ctx, r->n_prompt);
	if (st == 0 && max_tokens > 0 && r->n_prompt + (size_t)max_tokens > s->n_ctx)
		st = fail(&e, 400, "max_tokens",
			  "this server's context holds %u tokens; the prompt has %zu and max_tokens asks for %lld more",
			  s->n_ctx, r->n_prompt, (long long)max_tokens);
	if (st == 0) {
		/* Unset, the legacy API's default is 16 tokens; chat runs to the
		 * context's end. */
		int64_t room = (int64_t)s->n_ctx - (int64_t)r->n_prompt;
		r->max_tokens = (int32_t)(max_tokens > 0 ? max_tokens : kind == SERVE_COMPLETION && room > 16 ? 16 : room);
		make_id(r, kind == SERVE_CHAT ? "chatcmpl" : "cmpl");
	}
	cJSON_Delete(root);
	return st;
}

int serve_parse_embedding(serve_server *s, const char *body, size_t len, serve_request *r, char **err,
			  const char **param)
{
	parse_error e = {err, param};
	cJSON *root = NULL, *f;
	int st = parse_json(body, len, &root, &e);
	if (st == 0 && (f = field(root, "model")) != NULL && !cJSON_IsString(f))
		st = fail(&e, 400, "model", "'model' must be a string");
	if (st == 0 && (f = field(root, "encoding_format")) != NULL) {
		if (!cJSON_IsString(f) || (strcmp(f->valuestring, "float") != 0 && strcmp(f->valuestring, "base64") != 0))
			st = fail(&e, 400, "encoding_format", "'encoding_format' must be \"float\" or \"base64\"");
		else
			r->base64 = strcmp(f->valuestring, "base64") == 0;
	}
	int64_t dims = s->n_embd;
	if (st == 0)
		st = integer(root, "dimensions", s->n_embd, s->n_embd, &dims, &e);
	cJSON *input = st == 0 ? field(root, "input") : NULL;
	if (st == 0 && input == NULL)
		st = fail(&e, 400, "input", "'input' is required");
	/* One input (a string or token ids), or an array of them. */
	bool many = st == 0 && cJSON_IsArray(input) && !is_token_array(input);
	size_t n = many ? (size_t)cJSON_GetArraySize(input) : 1;
	if (st == 0 && (n == 0 || n > SERVE_MAX_EMBED_INPUTS))
		st = fail(&e, 400, "input", "'input' must hold 1 to %d inputs", SERVE_MAX_EMBED_INPUTS);
	if (st == 0) {
		r->inputs = calloc(n, sizeof(loom_token *));
		r->n_inputs = calloc(n, sizeof(size_t));
		r->embeddings = malloc(n * (size_t)s->n_embd * sizeof(float));
		if (r->inputs == NULL || r->n_inputs == NULL || r->embeddings == NULL)
			st = fail(&e, 500, NULL, "out of memory");
	}
	for (size_t i = 0; st == 0 && i < n; i++) {
		const cJSON *one = many ? cJSON_GetArrayItem(input, (int)i) : input;
		if (cJSON_IsString(one) && one->valuestring[0] != '\0')
			st = tokenize(s, one->valuestring, strlen(one->valuestring), true, false, &r->inputs[i],
				      &r->n_inputs[i], &e);
		else if (is_token_array(one))
			st = token_array(s, one, "input", &r->inputs[i], &r->n_inputs[i], &e);
		else
			st = fail(&e, 400, "input", "each input must be a non-empty string or an array of token ids");
		r->n_input = i + 1;
		if (st == 0 && r->n_inputs[i] == 0)
			st = fail(&e, 400, "input", "input %zu has no tokens", i);
		if (st == 0 && r->n_inputs[i] > s->n_ctx)
			st = fail(&e, 400, "input", "input %zu has %zu tokens; this server's context holds %u", i,
				  r->n_inputs[i], s->n_ctx);
	}
	if (st == 0)
		make_id(r, "embd");
	cJSON_Delete(root);
	return st;
}

int serve_parse_tokenize(serve_server *s, const char *body, size_t len, char **reply, char **err)
{
	const char *param = NULL;
	parse_error e = {err, &param};
	cJSON *root = NULL, *content = NULL;
	bool add_special = true, parse_special = true, with_pieces = false;
	int st = parse_json(body, len, &root, &e);
	if (st == 0 && !cJSON_IsString(content = field(root, "content")))
		st = fail(&e, 400, "content", "'content' must be a string");
	if (st == 0)
		st = boolean(root, "add_special", &add_special, &e);
	if (st == 0)
		st = boolean(root, "parse_special", &parse_special, &e);
	if (st == 0)
		st = boolean(root, "with_pieces", &with_pieces, &e);
	loom_token *toks = NULL;
	size_t n = 0;
	if (st == 0)
		st = tokenize(s, content->valuestring, strlen(content->valuestring), add_special, parse_special, &toks, &n,
			      &e);
	serve_buf b = {0};
	bool ok = st == 0 && serve_buf_append(&b, "{\"tokens\":[", 11);
	for (size_t i = 0; ok && i < n; i++) {
		if (!with_pieces) {
			ok = serve_buf_appendf(&b, "%s%d", i ? "," : "", toks[i]);
			continue;
		}
		char piece[SERVE_PIECE_MAX];
		size_t plen = serve_token_piece(s, toks[i], true, piece);
		ok = serve_buf_appendf(&b, "%s{\"id\":%d,\"piece\":", i ? "," : "", toks[i]) &&
		     serve_json_string(&b, piece, plen) && serve_buf_append(&b, "}", 1);
	}
	ok = ok && serve_buf_append(&b, "]}", 2);
	if (st == 0 && !ok)
		st = fail(&e, 500, NULL, "out of memory");
	free(toks);
	cJSON_Delete(root);
	if (st != 0) {
		serve_buf_free(&b);
		return st;
	}
	*reply = b.data;
	return 0;
}

int serve_parse_detokenize(serve_server *s, const char *body, size_t len, char **reply, char **err)
{
	const char *param = NULL;
	parse_error e = {err, &param};
	cJSON *root = NULL, *tokens = NULL;
	int st = parse_json(body, len, &root, &e);
	if (st == 0 && !cJSON_IsArray(tokens = field(root, "tokens")))
		st = fail(&e, 400, "tokens", "'tokens' must be an array of token ids");
	loom_token *toks = NULL;
	size_t n = 0;
	if (st == 0)
		st = token_array(s, tokens, "tokens", &toks, &n, &e);
	serve_buf text = {0}, b = {0};
	bool ok = true;
	for (size_t i = 0; st == 0 && ok && i < n; i++) {
		char piece[SERVE_PIECE_MAX];
		ok = serve_buf_append(&text, piece, serve_token_piece(s, toks[i], false, piece));
	}
	if (st == 0)
		ok = ok && serve_buf_append(&b, "{\"content\":", 11) && serve_json_string(&b, text.data, text.len) &&
		     serve_buf_append(&b, "}", 1);
	if (st == 0 && !ok)
		st = fail(&e, 500, NULL, "out of memory");
	free(toks);
	serve_buf_free(&text);
	cJSON_Delete(root);
	if (st != 0) {
		serve_buf_free(&b);
		return st;
	}
	*reply = b.data;
	return 0;
}
