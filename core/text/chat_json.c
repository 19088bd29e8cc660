/*
 * chat_json.c - a conversation given as the OpenAI chat API's JSON, with
 * tools, the assistant's tool calls and their results, written as the
 * model's chat template writes it.
 *
 * Each family that was trained on tools has its own way of listing them,
 * of writing a call and of giving a result back; the functions below
 * write the bytes the models' own Jinja templates write (tests/
 * test_chat_tools.c holds them to it, rendered by a Jinja engine). A
 * family without a tool format gets loom's generic one: the tools and
 * the shape of an answer described in the system message, calls and
 * results as JSON text in the family's ordinary turns.
 *
 * Arguments arrive as JSON text (the API's strings) or objects; templates
 * write them with tojson, so they are parsed once here and written back
 * as json.dumps would.
 */
#include "text/chat_json.h"

#include "model/meta.h"
#include "model/model.h"
#include "runtime/error.h"
#include "text/json_text.h"

#include <ctype.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

loom_tool_style loom_tool_style_of(loom_chat_kind kind)
{
	switch (kind) {
	case LOOM_CHAT_CHATML:
		return LOOM_TOOL_HERMES;
	case LOOM_CHAT_LLAMA3:
		return LOOM_TOOL_LLAMA3;
	case LOOM_CHAT_MISTRAL:
	case LOOM_CHAT_MISTRAL_V7:
		return LOOM_TOOL_MISTRAL;
	case LOOM_CHAT_MISTRAL_V11:
	case LOOM_CHAT_MISTRAL_V13:
		return LOOM_TOOL_MISTRAL_ARGS;
	case LOOM_CHAT_HARMONY:
		return LOOM_TOOL_HARMONY;
	case LOOM_CHAT_GRANITE:
		return LOOM_TOOL_GRANITE;
	default:
		return LOOM_TOOL_GENERIC;
	}
}

const char *loom_tool_style_described(loom_tool_style style)
{
	switch (style) {
	case LOOM_TOOL_HERMES:
		return "between <tool_call> and </tool_call>";
	case LOOM_TOOL_LLAMA3:
		return "as the whole reply, with \"parameters\"";
	case LOOM_TOOL_MISTRAL:
		return "after [TOOL_CALLS], a JSON list";
	case LOOM_TOOL_MISTRAL_ARGS:
		return "as [TOOL_CALLS]NAME[ARGS]";
	case LOOM_TOOL_HARMONY:
		return "as messages to functions.NAME";
	case LOOM_TOOL_GRANITE:
		return "after <|tool_call|>, a JSON list";
	default:
		return "in loom's generic JSON";
	}
}

loom_status loom_chat_kind_named(const loom_model *model, const char *template_name, loom_chat_kind *out)
{
	if (template_name == NULL) {
		*out = model->chat_template;
		return LOOM_OK;
	}
	if (!loom_chat_template_by_name(template_name, out))
		return loom_error(LOOM_ERR_INVALID_ARGUMENT,
				  "unknown chat template '%s' (chatml, llama2, llama3, mistral, zephyr, phi3, gemma, plain, "
				  "harmony, mistral-v7, mistral-v11, mistral-v13, glm4, granite, command-r7b, tulu, dots1)",
				  template_name);
	return LOOM_OK;
}

/* ---- the conversation, read ---- */

typedef struct tool_call {
	const char *id;   /* "" when the client gave none */
	const char *name;
	cJSON *arguments; /* parsed */
	const char *text; /* the arguments' JSON text as the client sent it; NULL if an object */
} tool_call;

typedef struct turn {
	const char *role; /* system, user, assistant or tool */
	char *content;    /* text parts joined; "" for none */
	bool has_content; /* content was given (not null or absent) */
	tool_call *calls;
	size_t n_calls;
	const char *tool_call_id; /* tool: the call it answers ("" if none) */
	const char *tool_name;    /* tool: that call's function name, from the earlier call */
	const char *reasoning;    /* assistant: reasoning_content, NULL if none */
} turn;

typedef struct conversation {
	cJSON *messages, *tools;
	turn *turns;
	size_t n;
} conversation;

static void conversation_free(conversation *c)
{
	for (size_t i = 0; i < c->n; i++) {
		free(c->turns[i].content);
		for (size_t k = 0; k < c->turns[i].n_calls; k++)
			cJSON_Delete(c->turns[i].calls[k].arguments);
		free(c->turns[i].calls);
	}
	free(c->turns);
	cJSON_Delete(c->messages);
	cJSON_Delete(c->tools);
}

static const char *string_of(const cJSON *obj, const char *key)
{
	const cJSON *f = cJSON_GetObjectItemCaseSensitive(obj, key);
	return cJSON_IsString(f) ? f->valuestring : NULL;
}

static loom_status read_content(const cJSON *content, size_t i, turn *t)
{
	loom_strbuf b = {0};
	t->has_content = content != NULL && !cJSON_IsNull(content);
	if (!t->has_content) {
		loom_strbuf_put(&b, "");
	} else if (cJSON_IsString(content)) {
		loom_strbuf_put(&b, content->valuestring);
	} else if (cJSON_IsArray(content)) {
		loom_strbuf_put(&b, "");
		for (const cJSON *part = content->child; part != NULL; part = part->next) {
			const char *type = string_of(part, "type"), *text = string_of(part, "text");
			if (type == NULL || strcmp(type, "text") != 0 || text == NULL) {
				loom_strbuf_free(&b);
				return loom_error(LOOM_ERR_INVALID_ARGUMENT, "message %zu: only text content parts are supported",
						  i);
			}
			loom_strbuf_put(&b, text);
		}
	} else {
		return loom_error(LOOM_ERR_INVALID_ARGUMENT,
				  "message %zu: 'content' must be a string, an array of text parts or null", i);
	}
	if (b.failed)
		return loom_error(LOOM_ERR_NO_MEMORY, "out of memory");
	t->content = b.s;
	return LOOM_OK;
}

static loom_status read_calls(const cJSON *calls, size_t i, turn *t)
{
	if (!cJSON_IsArray(calls))
		return loom_error(LOOM_ERR_INVALID_ARGUMENT, "message %zu: 'tool_calls' must be an array", i);
	const size_t n = (size_t)cJSON_GetArraySize(calls);
	if (n == 0)
		return LOOM_OK;
	if ((t->calls = calloc(n, sizeof(tool_call))) == NULL)
		return loom_error(LOOM_ERR_NO_MEMORY, "out of memory");
	for (const cJSON *c = calls->child; c != NULL; c = c->next) {
		const cJSON *fn = cJSON_GetObjectItemCaseSensitive(c, "function");
		const char *name = string_of(fn, "name"), *id = string_of(c, "id");
		const cJSON *args = cJSON_GetObjectItemCaseSensitive(fn, "arguments");
		if (!cJSON_IsObject(c) || name == NULL)
			return loom_error(LOOM_ERR_INVALID_ARGUMENT,
					  "message %zu, tool call %zu: needs 'function' with a string 'name'", i, t->n_calls);
		tool_call *tc = &t->calls[t->n_calls++];
		tc->id = id != NULL ? id : "";
		tc->name = name;
		if (args == NULL || cJSON_IsNull(args))
			tc->arguments = cJSON_CreateObject();
		else if (cJSON_IsString(args))
			tc->arguments = cJSON_Parse(args->valuestring), tc->text = args->valuestring;
		else
			tc->arguments = cJSON_Duplicate(args, true);
		if (tc->arguments == NULL)
			return loom_error(LOOM_ERR_INVALID_ARGUMENT,
					  "message %zu, tool call %zu ('%s'): 'arguments' is not JSON text", i, t->n_calls - 1,
					  name);
	}
	return LOOM_OK;
}

/* The function name of the earlier call with this id ("" if none). */
static const char *name_of_call(const conversation *c, size_t before, const char *id)
{
	for (size_t i = before; i-- > 0;)
		for (size_t k = 0; k < c->turns[i].n_calls; k++)
			if (strcmp(c->turns[i].calls[k].id, id) == 0)
				return c->turns[i].calls[k].name;
	return "";
}

static loom_status read_conversation(const char *messages, size_t messages_len, const char *tools, size_t tools_len,
				     conversation *c)
{
	*c = (conversation){0};
	c->messages = cJSON_ParseWithLength(messages, messages_len);
	if (!cJSON_IsArray(c->messages))
		return loom_error(LOOM_ERR_INVALID_ARGUMENT, "the messages are not a JSON array");
	if (tools != NULL && tools_len > 0) {
		c->tools = cJSON_ParseWithLength(tools, tools_len);
		if (!cJSON_IsArray(c->tools))
			return loom_error(LOOM_ERR_INVALID_ARGUMENT, "the tools are not a JSON array");
		size_t k = 0;
		for (const cJSON *t = c->tools->child; t != NULL; t = t->next, k++) {
			const cJSON *fn = cJSON_GetObjectItemCaseSensitive(t, "function");
			const char *type = string_of(t, "type");
			if (type == NULL || strcmp(type, "function") != 0 || string_of(fn, "name") == NULL)
				return loom_error(LOOM_ERR_INVALID_ARGUMENT,
						  "tool %zu: needs type \"function\" and a 'function' with a string 'name'", k);
		}
		if (k == 0) {
			cJSON_Delete(c->tools);
			c->tools = NULL;
		}
	}
	const size_t n = (size_t)cJSON_GetArraySize(c->messages);
	if ((c->turns = calloc(n ? n : 1, sizeof(turn))) == NULL)
		return loom_error(LOOM_ERR_NO_MEMORY, "out of memory");
	for (const cJSON *m = c->messages->child; m != NULL; m = m->next) {
		const size_t i = c->n;
		turn *t = &c->turns[c->n++];
		const char *role = string_of(m, "role");
		if (role == NULL)
			return loom_error(LOOM_ERR_INVALID_ARGUMENT, "message %zu has no string 'role'", i);
		t->role = strcmp(role, "developer") == 0 ? "system" : role;
		if (strcmp(t->role, "system") != 0 && strcmp(t->role, "user") != 0 && strcmp(t->role, "assistant") != 0 &&
		    strcmp(t->role, "tool") != 0)
			return loom_error(LOOM_ERR_INVALID_ARGUMENT,
					  "message %zu has role '%s' (system, developer, user, assistant, tool)", i, role);
		if (strcmp(t->role, "system") == 0 && i > 0)
			return loom_error(LOOM_ERR_INVALID_ARGUMENT, "message %zu: a system message may only come first", i);
		loom_status st = read_content(cJSON_GetObjectItemCaseSensitive(m, "content"), i, t);
		const cJSON *calls = cJSON_GetObjectItemCaseSensitive(m, "tool_calls");
		if (st == LOOM_OK && calls != NULL && !cJSON_IsNull(calls)) {
			if (strcmp(t->role, "assistant") != 0)
				return loom_error(LOOM_ERR_INVALID_ARGUMENT, "message %zu: only an assistant message has tool_calls", i);
			st = read_calls(calls, i, t);
		}
		if (st != LOOM_OK)
			return st;
		if (!t->has_content && strcmp(t->role, "assistant") != 0)
			return loom_error(LOOM_ERR_INVALID_ARGUMENT, "message %zu: a %s message needs 'content'", i, t->role);
		t->reasoning = strcmp(t->role, "assistant") == 0 ? string_of(m, "reasoning_content") : NULL;
		if (strcmp(t->role, "tool") == 0) {
			const char *id = string_of(m, "tool_call_id");
			t->tool_call_id = id != NULL ? id : "";
			t->tool_name = name_of_call(c, i, t->tool_call_id);
		}
	}
	return LOOM_OK;
}

static bool is(const turn *t, const char *role)
{
	return strcmp(t->role, role) == 0;
}

/* ---- Hermes (Qwen 2.5's and Qwen 3's templates) ---- */

/* {"name": "NAME", "ARGS_KEY": ARGUMENTS}, the arguments as the client's
 * text when verbatim (Qwen 3 writes a string as it is), else tojson. */
static void put_call_json(loom_strbuf *b, const tool_call *tc, const char *args_key, bool verbatim)
{
	loom_strbuf_put(b, "{\"name\": \"");
	loom_strbuf_put(b, tc->name);
	loom_strbuf_put(b, "\", \"");
	loom_strbuf_put(b, args_key);
	loom_strbuf_put(b, "\": ");
	if (verbatim && tc->text != NULL)
		loom_strbuf_put(b, tc->text);
	else
		loom_json_dump(b, tc->arguments, 0);
	loom_strbuf_put(b, "}");
}

/* A turn's calls as a JSON list: [{"name": ..., "arguments": ...}, ...]. */
static void put_call_list(loom_strbuf *b, const turn *t)
{
	loom_strbuf_put(b, "[");
	for (size_t k = 0; k < t->n_calls; k++) {
		loom_strbuf_put(b, k ? ", " : "");
		put_call_json(b, &t->calls[k], "arguments", false);
	}
	loom_strbuf_put(b, "]");
}

static const char qwen_default_system[] = "You are Qwen, created by Alibaba Cloud. You are a helpful assistant.";

/* How the Hermes templates differ: Qwen 2.5 has a default system
 * message; Qwen 3 writes the reasoning of the turns after the last
 * question between <think> and </think>, and arguments sent as text as
 * they are. */
typedef struct hermes_kind {
	const char *default_system; /* NULL: none */
	bool thinks;
	const char *opening; /* what the assistant's opening ends with: "", or the reasoning set for the reply */
} hermes_kind;

static void put_stripped(loom_strbuf *b, const char *s, size_t n, bool front, bool back)
{
	while (front && n > 0 && *s == '\n')
		s++, n--;
	while (back && n > 0 && s[n - 1] == '\n')
		n--;
	loom_strbuf_put_n(b, s, n);
}

static bool is_tool_response(const char *s)
{
	static const char open[] = "<tool_response>", close[] = "</tool_response>";
	const size_t n = strlen(s);
	return n >= sizeof(open) - 1 + sizeof(close) - 1 && memcmp(s, open, sizeof(open) - 1) == 0 &&
	       memcmp(s + n - (sizeof(close) - 1), close, sizeof(close) - 1) == 0;
}

/* An assistant turn with Qwen 3's reasoning: its own, or what its content
 * holds before </think>. */
static void put_thinking_turn(loom_strbuf *b, const turn *t, bool after_query, bool last, const char **content)
{
	const char *text = t->content, *end_think = strstr(text, "</think>");
	const char *r = t->reasoning != NULL ? t->reasoning : "";
	size_t n_r = strlen(r);
	if (t->reasoning == NULL && end_think != NULL) {
		/* content.split('</think>')[0].rstrip('\n').split('<think>')[-1].lstrip('\n') */
		const char *from = text;
		for (const char *p = text; (p = strstr(p, "<think>")) != NULL && p < end_think; p += 7)
			from = p + 7;
		r = from;
		n_r = (size_t)(end_think - from);
		const char *last = end_think;
		for (const char *p = end_think; (p = strstr(p + 1, "</think>")) != NULL;)
			last = p;
		text = last + 8;
		while (*text == '\n')
			text++;
	}
	loom_strbuf_put(b, "<|im_start|>assistant\n");
	if (after_query && (last || n_r > 0)) {
		loom_strbuf_put(b, "<think>\n");
		put_stripped(b, r, n_r, true, true);
		loom_strbuf_put(b, "\n</think>\n\n");
		while (*text == '\n')
			text++;
	}
	loom_strbuf_put(b, text);
	*content = text;
}

static void render_hermes(loom_strbuf *b, const conversation *c, bool add_assistant, hermes_kind kind)
{
	const bool sys = c->n > 0 && is(&c->turns[0], "system");
	if (c->tools != NULL) {
		loom_strbuf_put(b, "<|im_start|>system\n");
		if (sys || kind.default_system != NULL) {
			loom_strbuf_put(b, sys ? c->turns[0].content : kind.default_system);
			loom_strbuf_put(b, "\n\n");
		}
		loom_strbuf_put(b, "# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
				   "You are provided with function signatures within <tools></tools> XML tags:\n<tools>");
		for (const cJSON *t = c->tools->child; t != NULL; t = t->next) {
			loom_strbuf_put(b, "\n");
			loom_json_dump(b, t, 0);
		}
		loom_strbuf_put(b, "\n</tools>\n\nFor each function call, return a json object with function name and "
				   "arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": "
				   "<function-name>, \"arguments\": <args-json-object>}\n</tool_call><|im_end|>\n");
	} else if (sys || kind.default_system != NULL) {
		loom_strbuf_put(b, "<|im_start|>system\n");
		loom_strbuf_put(b, sys ? c->turns[0].content : kind.default_system);
		loom_strbuf_put(b, "<|im_end|>\n");
	}
	/* The last question: the last user turn that is not tool results. */
	size_t last_query = c->n - 1;
	for (size_t i = c->n; i-- > 0;)
		if (is(&c->turns[i], "user") && !is_tool_response(c->turns[i].content)) {
			last_query = i;
			break;
		}
	for (size_t i = sys ? 1 : 0; i < c->n; i++) {
		const turn *t = &c->turns[i];
		if (is(t, "tool")) {
			if (i == 0 || !is(&c->turns[i - 1], "tool"))
				loom_strbuf_put(b, "<|im_start|>user");
			loom_strbuf_put(b, "\n<tool_response>\n");
			loom_strbuf_put(b, t->content);
			loom_strbuf_put(b, "\n</tool_response>");
			if (i + 1 == c->n || !is(&c->turns[i + 1], "tool"))
				loom_strbuf_put(b, "<|im_end|>\n");
		} else if (is(t, "assistant") && kind.thinks) {
			const char *content;
			put_thinking_turn(b, t, i > last_query, i + 1 == c->n, &content);
			for (size_t k = 0; k < t->n_calls; k++) {
				if (k > 0 || content[0] != '\0')
					loom_strbuf_put(b, "\n");
				loom_strbuf_put(b, "<tool_call>\n");
				put_call_json(b, &t->calls[k], "arguments", true);
				loom_strbuf_put(b, "\n</tool_call>");
			}
			loom_strbuf_put(b, "<|im_end|>\n");
		} else if (is(t, "assistant") && t->n_calls > 0) {
			loom_strbuf_put(b, "<|im_start|>assistant");
			if (t->content[0] != '\0') {
				loom_strbuf_put(b, "\n");
				loom_strbuf_put(b, t->content);
			}
			for (size_t k = 0; k < t->n_calls; k++) {
				loom_strbuf_put(b, "\n<tool_call>\n");
				put_call_json(b, &t->calls[k], "arguments", false);
				loom_strbuf_put(b, "\n</tool_call>");
			}
			loom_strbuf_put(b, "<|im_end|>\n");
		} else {
			loom_strbuf_put(b, "<|im_start|>");
			loom_strbuf_put(b, t->role);
			loom_strbuf_put(b, "\n");
			loom_strbuf_put(b, t->content);
			loom_strbuf_put(b, "<|im_end|>\n");
		}
	}
	if (add_assistant) {
		loom_strbuf_put(b, "<|im_start|>assistant\n");
		loom_strbuf_put(b, kind.opening);
	}
}

/* ---- Llama 3.1 (tools in the first user message) ---- */

static void put_trimmed(loom_strbuf *b, const char *s)
{
	size_t n;
	s = loom_chat_trim(s, &n);
	loom_strbuf_put_n(b, s, n);
}

static loom_status render_llama3(loom_strbuf *b, const conversation *c, bool add_assistant)
{
	size_t i = 0;
	const char *sys = "";
	if (c->n > 0 && is(&c->turns[0], "system"))
		sys = c->turns[i++].content;
	loom_strbuf_put(b, "<|start_header_id|>system<|end_header_id|>\n\n");
	if (c->tools != NULL)
		loom_strbuf_put(b, "Environment: ipython\n");
	loom_strbuf_put(b, "Cutting Knowledge Date: December 2023\nToday Date: 26 Jul 2024\n\n");
	put_trimmed(b, sys);
	loom_strbuf_put(b, "<|eot_id|>");
	if (c->tools != NULL) {
		if (i == c->n)
			return loom_error(LOOM_ERR_INVALID_ARGUMENT,
					  "the llama3 template puts the tools in the first user message, and there is none");
		loom_strbuf_put(b, "<|start_header_id|>user<|end_header_id|>\n\n"
				   "Given the following functions, please respond with a JSON for a function call with its "
				   "proper arguments that best answers the given prompt.\n\n"
				   "Respond in the format {\"name\": function name, \"parameters\": dictionary of argument "
				   "name and its value}.Do not use variables.\n\n");
		for (const cJSON *t = c->tools->child; t != NULL; t = t->next) {
			loom_json_dump(b, t, 4);
			loom_strbuf_put(b, "\n\n");
		}
		put_trimmed(b, c->turns[i++].content);
		loom_strbuf_put(b, "<|eot_id|>");
	}
	for (; i < c->n; i++) {
		const turn *t = &c->turns[i];
		if (is(t, "tool")) {
			loom_strbuf_put(b, "<|start_header_id|>ipython<|end_header_id|>\n\n");
			/* The template writes a result with tojson (a string is
			 * iterable to Jinja): quoted and escaped. */
			cJSON *s = cJSON_CreateString(t->content);
			loom_json_dump(b, s, 0);
			cJSON_Delete(s);
			loom_strbuf_put(b, "<|eot_id|>");
		} else if (t->n_calls > 0) {
			if (t->n_calls != 1)
				return loom_error(LOOM_ERR_INVALID_ARGUMENT,
						  "the llama3 template takes one tool call a message, and message %zu has %zu", i,
						  t->n_calls);
			loom_strbuf_put(b, "<|start_header_id|>assistant<|end_header_id|>\n\n");
			put_call_json(b, &t->calls[0], "parameters", false);
			loom_strbuf_put(b, "<|eot_id|>");
		} else {
			loom_strbuf_put(b, "<|start_header_id|>");
			loom_strbuf_put(b, t->role);
			loom_strbuf_put(b, "<|end_header_id|>\n\n");
			put_trimmed(b, t->content);
			loom_strbuf_put(b, "<|eot_id|>");
		}
	}
	if (add_assistant)
		loom_strbuf_put(b, "<|start_header_id|>assistant<|end_header_id|>\n\n");
	return LOOM_OK;
}

/* ---- Mistral (by its tokenizer's version) ---- */

/* mistral-common takes call ids of nine letters and digits: the client's
 * id when it is one, else nine base-62 digits of its hash, the same for
 * the call and the result that names it. */
static void mistral_id(const char *id, char out[10])
{
	size_t n = strlen(id);
	bool ok = n == 9;
	for (size_t i = 0; ok && i < n; i++)
		ok = isalnum((unsigned char)id[i]) != 0;
	if (ok) {
		memcpy(out, id, 10);
		return;
	}
	static const char digits[] = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ";
	uint64_t h = 1469598103934665603ull;
	for (size_t i = 0; i < n; i++)
		h = (h ^ (unsigned char)id[i]) * 1099511628211ull;
	for (int i = 0; i < 9; i++, h /= 62)
		out[i] = digits[h % 62];
	out[9] = '\0';
}

/* How a Mistral model's conversation is written: mistral-common's rules
 * for its tokenizer's version, and where the model's own template writes
 * the tools another way, that. */
typedef struct mistral_format {
	loom_chat_kind kind;
	bool spm;         /* v3's SentencePiece spacing: "[INST] question" and " answer" */
	bool json_tools;  /* v3's tool text: the tools key by key after "[AVAILABLE_TOOLS] [", the calls
			   * after "[TOOL_CALLS] [", a result {"content": ..., "call_id": ...} */
	bool tools_first; /* v13: the tools after the system prompt, not before the last question */
} mistral_format;

/* The tools: one JSON array (mistral-common), or key by key as the v3
 * templates write them. */
static void put_mistral_tools(loom_strbuf *b, const cJSON *tools, bool json_tools)
{
	if (!json_tools) {
		loom_strbuf_put(b, "[AVAILABLE_TOOLS]");
		loom_json_dump(b, tools, 0);
		loom_strbuf_put(b, "[/AVAILABLE_TOOLS]");
		return;
	}
	loom_strbuf_put(b, "[AVAILABLE_TOOLS] [");
	for (const cJSON *tool = tools->child; tool != NULL; tool = tool->next) {
		const cJSON *fn = cJSON_GetObjectItemCaseSensitive(tool, "function");
		loom_strbuf_put(b, "{\"type\": \"function\", \"function\": {");
		bool any = false;
		for (const cJSON *kv = fn->child; kv != NULL; kv = kv->next) {
			if (strcmp(kv->string, "return") == 0)
				continue;
			loom_strbuf_put(b, any ? ", \"" : "\"");
			loom_strbuf_put(b, kv->string);
			loom_strbuf_put(b, "\": ");
			/* The template writes a string value unescaped. */
			if (cJSON_IsString(kv)) {
				loom_strbuf_put(b, "\"");
				loom_strbuf_put(b, kv->valuestring);
				loom_strbuf_put(b, "\"");
			} else {
				loom_json_dump(b, kv, 0);
			}
			any = true;
		}
		loom_strbuf_put(b, tool->next != NULL ? "}}, " : "}}]");
	}
	loom_strbuf_put(b, "[/AVAILABLE_TOOLS]");
}

/* An assistant turn's calls: a JSON array of calls with their ids (v3,
 * v7), or each call after its own [TOOL_CALLS], its id after [CALL_ID]
 * (v11), its arguments after [ARGS]. */
static void put_mistral_calls(loom_strbuf *b, const turn *t, const mistral_format *f)
{
	char id[10];
	if (f->kind == LOOM_CHAT_MISTRAL || f->kind == LOOM_CHAT_MISTRAL_V7) {
		loom_strbuf_put(b, f->json_tools ? "[TOOL_CALLS] [" : "[TOOL_CALLS][");
		for (size_t k = 0; k < t->n_calls; k++) {
			mistral_id(t->calls[k].id, id);
			loom_strbuf_put(b, k ? ", " : "");
			put_call_json(b, &t->calls[k], "arguments", false);
			b->n--; /* the object's closing brace: the id goes before it */
			loom_strbuf_put(b, ", \"id\": \"");
			loom_strbuf_put(b, id);
			loom_strbuf_put(b, "\"}");
		}
		loom_strbuf_put(b, "]");
		return;
	}
	for (size_t k = 0; k < t->n_calls; k++) {
		const tool_call *tc = &t->calls[k];
		loom_strbuf_put(b, "[TOOL_CALLS]");
		loom_strbuf_put(b, tc->name);
		if (f->kind == LOOM_CHAT_MISTRAL_V11) {
			mistral_id(tc->id, id);
			loom_strbuf_put(b, "[CALL_ID]");
			loom_strbuf_put(b, id);
		}
		loom_strbuf_put(b, "[ARGS]");
		/* v13's templates write arguments sent as text as they are. */
		if (f->kind == LOOM_CHAT_MISTRAL_V13 && tc->text != NULL)
			loom_strbuf_put(b, tc->text);
		else
			loom_json_dump(b, tc->arguments, 0);
	}
}

/* A result: the v3 templates' object, the call's id and the text (v7,
 * v11), or the text alone (v13: ids are no longer written). */
static void put_mistral_result(loom_strbuf *b, const turn *t, const mistral_format *f)
{
	char id[10];
	mistral_id(t->tool_call_id, id);
	if (f->json_tools) {
		loom_strbuf_put(b, "[TOOL_RESULTS] {\"content\": ");
		loom_strbuf_put(b, t->content);
		loom_strbuf_put(b, ", \"call_id\": \"");
		loom_strbuf_put(b, id);
		loom_strbuf_put(b, "\"}[/TOOL_RESULTS]");
		return;
	}
	loom_strbuf_put(b, "[TOOL_RESULTS]");
	if (f->kind != LOOM_CHAT_MISTRAL_V13) {
		loom_strbuf_put(b, id);
		loom_strbuf_put(b, "[TOOL_CONTENT]");
	}
	loom_strbuf_put(b, t->content);
	loom_strbuf_put(b, "[/TOOL_RESULTS]");
}

/* The system prompt in front of the last question (v3), or first in a
 * block of its own; the tools before the last question, or (v13) after
 * the system prompt. An assistant turn with calls is its calls (v13:
 * after its text). */
static void render_mistral(loom_strbuf *b, const conversation *c, const mistral_format *f)
{
	size_t first = 0, last_user = c->n;
	const char *sys = NULL;
	if (c->n > 0 && is(&c->turns[0], "system"))
		sys = c->turns[first++].content;
	for (size_t i = first; i < c->n; i++)
		if (is(&c->turns[i], "user"))
			last_user = i;
	if (f->kind != LOOM_CHAT_MISTRAL && sys != NULL) {
		loom_strbuf_put(b, "[SYSTEM_PROMPT]");
		loom_strbuf_put(b, sys);
		loom_strbuf_put(b, "[/SYSTEM_PROMPT]");
	}
	if (f->tools_first && c->tools != NULL)
		put_mistral_tools(b, c->tools, f->json_tools);
	for (size_t i = first; i < c->n; i++) {
		const turn *t = &c->turns[i];
		if (is(t, "user")) {
			if (c->tools != NULL && i == last_user && !f->tools_first)
				put_mistral_tools(b, c->tools, f->json_tools);
			loom_strbuf_put(b, f->spm ? "[INST] " : "[INST]");
			if (i == last_user && sys != NULL && f->kind == LOOM_CHAT_MISTRAL) {
				loom_strbuf_put(b, sys);
				loom_strbuf_put(b, "\n\n");
			}
			loom_strbuf_put(b, t->content);
			loom_strbuf_put(b, "[/INST]");
		} else if (is(t, "assistant")) {
			if (t->n_calls == 0 || f->kind == LOOM_CHAT_MISTRAL_V13) {
				if (f->spm) {
					loom_strbuf_put(b, " ");
					put_trimmed(b, t->content);
				} else {
					loom_strbuf_put(b, t->content);
				}
			}
			if (t->n_calls > 0)
				put_mistral_calls(b, t, f);
			loom_strbuf_put(b, "</s>");
		} else if (is(t, "tool")) {
			put_mistral_result(b, t, f);
		}
	}
}

/* ---- harmony (gpt-oss) ---- */

static bool truthy(const cJSON *v)
{
	return v != NULL && !cJSON_IsNull(v) && !cJSON_IsFalse(v) &&
	       !((cJSON_IsArray(v) || cJSON_IsObject(v)) && v->child == NULL) &&
	       !(cJSON_IsString(v) && v->valuestring[0] == '\0');
}

static bool type_is(const cJSON *spec, const char *type)
{
	const char *t = string_of(spec, "type");
	return t != NULL && strcmp(t, type) == 0;
}

static bool listed(const cJSON *list, const char *name)
{
	for (const cJSON *v = cJSON_IsArray(list) ? list->child : NULL; v != NULL; v = v->next)
		if (cJSON_IsString(v) && strcmp(v->valuestring, name) == 0)
			return true;
	return false;
}

/* A JSON Schema as the TypeScript type the template writes for it. */
static void put_ts_type(loom_strbuf *b, const cJSON *spec)
{
	const cJSON *type = cJSON_GetObjectItemCaseSensitive(spec, "type");
	const bool nullable = truthy(cJSON_GetObjectItemCaseSensitive(spec, "nullable"));
	if (type_is(spec, "array")) {
		const cJSON *items = cJSON_GetObjectItemCaseSensitive(spec, "items");
		if (!truthy(items)) {
			loom_strbuf_put(b, "any[]");
		} else if (type_is(items, "string") || type_is(items, "number") || type_is(items, "integer") ||
			   type_is(items, "boolean")) {
			loom_strbuf_put(b, type_is(items, "string") ? "string" : type_is(items, "boolean") ? "boolean" : "number");
			loom_strbuf_put(b, "[]");
		} else {
			loom_strbuf inner = {0};
			put_ts_type(&inner, items);
			const char *t = inner.s != NULL ? inner.s : "";
			loom_strbuf_put(b, strcmp(t, "object | object") == 0 || inner.n > 50 ? "any" : t);
			loom_strbuf_put(b, "[]");
			loom_strbuf_free(&inner);
		}
		if (nullable)
			loom_strbuf_put(b, " | null");
	} else if (cJSON_IsArray(type) && type->child != NULL) {
		for (const cJSON *t = type->child; t != NULL; t = t->next) {
			loom_strbuf_put(b, cJSON_IsString(t) ? t->valuestring : "");
			if (t->next != NULL)
				loom_strbuf_put(b, " | ");
		}
	} else if (truthy(cJSON_GetObjectItemCaseSensitive(spec, "oneOf"))) {
		/* Unions of objects the template writes as any; of others, as
		 * a union. */
		const cJSON *one = cJSON_GetObjectItemCaseSensitive(spec, "oneOf");
		bool objects = false;
		for (const cJSON *v = one->child; v != NULL; v = v->next)
			objects = objects || type_is(v, "object");
		if (objects && cJSON_GetArraySize(one) > 1) {
			loom_strbuf_put(b, "any");
		} else {
			for (const cJSON *v = one->child; v != NULL; v = v->next) {
				put_ts_type(b, v);
				if (v->next != NULL)
					loom_strbuf_put(b, " | ");
			}
		}
	} else if (type_is(spec, "string")) {
		const cJSON *e = cJSON_GetObjectItemCaseSensitive(spec, "enum");
		if (truthy(e)) {
			for (const cJSON *v = e->child; v != NULL; v = v->next) {
				loom_strbuf_put(b, "\"");
				loom_strbuf_put(b, cJSON_IsString(v) ? v->valuestring : "");
				loom_strbuf_put(b, v->next != NULL ? "\" | " : "\"");
			}
		} else {
			loom_strbuf_put(b, nullable ? "string | null" : "string");
		}
	} else if (type_is(spec, "number") || type_is(spec, "integer")) {
		loom_strbuf_put(b, "number");
	} else if (type_is(spec, "boolean")) {
		loom_strbuf_put(b, "boolean");
	} else if (type_is(spec, "object")) {
		const cJSON *props = cJSON_GetObjectItemCaseSensitive(spec, "properties");
		const cJSON *required = cJSON_GetObjectItemCaseSensitive(spec, "required");
		if (!truthy(props)) {
			loom_strbuf_put(b, "object");
			return;
		}
		loom_strbuf_put(b, "{\n");
		for (const cJSON *p = props->child; p != NULL; p = p->next) {
			loom_strbuf_put(b, p->string);
			loom_strbuf_put(b, listed(required, p->string) ? ": " : "?: ");
			put_ts_type(b, p);
			if (p->next != NULL)
				loom_strbuf_put(b, ", ");
		}
		loom_strbuf_put(b, "}");
	} else {
		loom_strbuf_put(b, "any");
	}
}

/* The tools as the template's TypeScript namespace of functions. */
static void put_harmony_tools(loom_strbuf *b, const cJSON *tools)
{
	loom_strbuf_put(b, "## functions\n\nnamespace functions {\n\n");
	for (const cJSON *t = tools->child; t != NULL; t = t->next) {
		const cJSON *fn = cJSON_GetObjectItemCaseSensitive(t, "function");
		const char *desc = string_of(fn, "description");
		const cJSON *params = cJSON_GetObjectItemCaseSensitive(fn, "parameters");
		const cJSON *props = cJSON_GetObjectItemCaseSensitive(params, "properties");
		const cJSON *required = cJSON_GetObjectItemCaseSensitive(params, "required");
		if (desc != NULL) {
			loom_strbuf_put(b, "// ");
			loom_strbuf_put(b, desc);
			loom_strbuf_put(b, "\n");
		}
		loom_strbuf_put(b, "type ");
		loom_strbuf_put(b, string_of(fn, "name"));
		if (!truthy(props)) {
			loom_strbuf_put(b, " = () => any;\n\n");
			continue;
		}
		loom_strbuf_put(b, " = (_: {\n");
		for (const cJSON *p = props->child; p != NULL; p = p->next) {
			const char *pdesc = string_of(p, "description");
			if (pdesc != NULL && pdesc[0] != '\0') {
				loom_strbuf_put(b, "// ");
				loom_strbuf_put(b, pdesc);
				loom_strbuf_put(b, "\n");
			}
			loom_strbuf_put(b, p->string);
			loom_strbuf_put(b, listed(required, p->string) ? ": " : "?: ");
			put_ts_type(b, p);
			const cJSON *def = cJSON_GetObjectItemCaseSensitive(p, "default");
			if (def != NULL) {
				const bool plain = truthy(cJSON_GetObjectItemCaseSensitive(p, "enum")) ||
						   truthy(cJSON_GetObjectItemCaseSensitive(p, "oneOf"));
				loom_strbuf_put(b, truthy(cJSON_GetObjectItemCaseSensitive(p, "oneOf")) ? "// default: "
													 : ", // default: ");
				if (plain && cJSON_IsString(def))
					loom_strbuf_put(b, def->valuestring);
				else
					loom_json_dump(b, def, 0);
			}
			loom_strbuf_put(b, ",\n");
		}
		loom_strbuf_put(b, "}) => any;\n\n");
	}
	loom_strbuf_put(b, "} // namespace functions");
}

/* gpt-oss's template: the trained system message (its current date left
 * out, as loom_chat_apply leaves it out, so that a conversation's text
 * does not change from day to day), the system prompt and the tools as
 * the developer's message, earlier answers on the final channel, each
 * call a message to=functions.NAME on the commentary channel, each result
 * a message from functions.NAME. The template writes only a turn's first
 * call; loom writes each (gpt-oss makes one call a message). */
static void render_harmony(loom_strbuf *b, const conversation *c, bool add_assistant, const char *effort)
{
	size_t i = 0;
	const char *dev = "";
	if (c->n > 0 && is(&c->turns[0], "system"))
		dev = c->turns[i++].content;
	loom_strbuf_put(b, "<|start|>system<|message|>You are ChatGPT, a large language model trained by OpenAI.\n"
			   "Knowledge cutoff: 2024-06\n\nReasoning: ");
	loom_strbuf_put(b, effort);
	loom_strbuf_put(b, "\n\n# Valid channels: analysis, commentary, final. "
			   "Channel must be included for every message.");
	if (c->tools != NULL)
		loom_strbuf_put(b, "\nCalls to these tools must go to the commentary channel: 'functions'.");
	loom_strbuf_put(b, "<|end|>");
	if (dev[0] != '\0' || c->tools != NULL) {
		loom_strbuf_put(b, "<|start|>developer<|message|>");
		if (dev[0] != '\0') {
			loom_strbuf_put(b, "# Instructions\n\n");
			loom_strbuf_put(b, dev);
			loom_strbuf_put(b, "\n\n");
		}
		if (c->tools != NULL) {
			loom_strbuf_put(b, "# Tools\n\n");
			put_harmony_tools(b, c->tools);
		}
		loom_strbuf_put(b, "<|end|>");
	}
	for (; i < c->n; i++) {
		const turn *t = &c->turns[i];
		if (is(t, "assistant") && t->n_calls > 0) {
			/* Its text is the analysis before the call, dropped once a
			 * later answer closed the exchange. */
			bool answered = false;
			for (size_t k = i + 1; k < c->n && !answered; k++)
				answered = is(&c->turns[k], "assistant") && c->turns[k].n_calls == 0;
			const char *analysis = t->content[0] != '\0' ? t->content : t->reasoning;
			if (!answered && analysis != NULL && analysis[0] != '\0') {
				loom_strbuf_put(b, "<|start|>assistant<|channel|>analysis<|message|>");
				loom_strbuf_put(b, analysis);
				loom_strbuf_put(b, "<|end|>");
			}
			for (size_t k = 0; k < t->n_calls; k++) {
				loom_strbuf_put(b, "<|start|>assistant to=functions.");
				loom_strbuf_put(b, t->calls[k].name);
				loom_strbuf_put(b, "<|channel|>commentary json<|message|>");
				loom_json_dump(b, t->calls[k].arguments, 0);
				loom_strbuf_put(b, "<|call|>");
			}
		} else if (is(t, "assistant")) {
			loom_strbuf_put(b, "<|start|>assistant<|channel|>final<|message|>");
			loom_strbuf_put(b, t->content);
			loom_strbuf_put(b, "<|end|>");
		} else if (is(t, "tool")) {
			loom_strbuf_put(b, "<|start|>functions.");
			loom_strbuf_put(b, t->tool_name);
			loom_strbuf_put(b, " to=assistant<|channel|>commentary<|message|>");
			cJSON *s = cJSON_CreateString(t->content);
			loom_json_dump(b, s, 0);
			cJSON_Delete(s);
			loom_strbuf_put(b, "<|end|>");
		} else {
			loom_strbuf_put(b, "<|start|>user<|message|>");
			loom_strbuf_put(b, t->content);
			loom_strbuf_put(b, "<|end|>");
		}
	}
	if (add_assistant)
		loom_strbuf_put(b, "<|start|>assistant");
}

/* ---- Granite 3 ---- */

/* What Granite's template adds to its default system message when there
 * are tools. Its default also holds the day's date, which loom leaves out
 * (a conversation's text does not change from day to day), so loom's
 * system message is this alone. */
static const char granite_tools_system[] =
	"You are a helpful assistant with access to the following tools. When a tool is required to answer the user's "
	"query, respond only with <|tool_call|> followed by a JSON list of tools used. If a tool does not exist in the "
	"provided list of tools, notify the user that you do not have the ability to fulfill the request.";

/* Granite 3's template: the tools as a JSON list (indented 4) in a turn
 * of their own after the system message, every other turn its role and
 * content. It writes an assistant turn's content only; loom adds the
 * turn's calls after it as the model wrote them, <|tool_call|> and the
 * list, so that the model sees what it called. */
static void render_granite(loom_strbuf *b, const conversation *c, bool add_assistant)
{
	size_t i = 0;
	const char *system = c->tools != NULL ? granite_tools_system : NULL;
	if (c->n > 0 && is(&c->turns[0], "system"))
		system = c->turns[i++].content;
	if (system != NULL) {
		loom_strbuf_put(b, "<|start_of_role|>system<|end_of_role|>");
		loom_strbuf_put(b, system);
		loom_strbuf_put(b, "<|end_of_text|>\n");
	}
	if (c->tools != NULL) {
		loom_strbuf_put(b, "<|start_of_role|>available_tools<|end_of_role|>");
		loom_json_dump(b, c->tools, 4);
		loom_strbuf_put(b, "<|end_of_text|>\n");
	}
	for (; i < c->n; i++) {
		const turn *t = &c->turns[i];
		loom_strbuf_put(b, "<|start_of_role|>");
		loom_strbuf_put(b, t->role);
		loom_strbuf_put(b, "<|end_of_role|>");
		loom_strbuf_put(b, t->content);
		if (t->n_calls > 0) {
			loom_strbuf_put(b, "<|tool_call|>");
			put_call_list(b, t);
		}
		loom_strbuf_put(b, "<|end_of_text|>\n");
	}
	if (add_assistant)
		loom_strbuf_put(b, "<|start_of_role|>assistant<|end_of_role|>");
}

/* ---- loom's generic format, in any family's turns ---- */

static loom_status render_generic(loom_strbuf *b, const loom_model *model, loom_chat_kind kind, const conversation *c,
				  bool add_assistant)
{
	loom_chat_message *msgs = calloc(c->n + 1, sizeof(*msgs));
	loom_strbuf *texts = calloc(c->n + 1, sizeof(*texts));
	if (msgs == NULL || texts == NULL) {
		free(msgs);
		free(texts);
		return loom_error(LOOM_ERR_NO_MEMORY, "out of memory");
	}
	size_t n = 0, i = 0;
	if (c->tools != NULL || (c->n > 0 && is(&c->turns[0], "system"))) {
		loom_strbuf *s = &texts[n];
		if (c->n > 0 && is(&c->turns[0], "system"))
			loom_strbuf_put(s, c->turns[i++].content);
		if (c->tools != NULL) {
			loom_strbuf_put(s, s->n > 0 ? "\n\n" : "");
			loom_strbuf_put(s, "You can call these tools:\n");
			for (const cJSON *t = c->tools->child; t != NULL; t = t->next) {
				loom_json_dump(s, cJSON_GetObjectItemCaseSensitive(t, "function"), 0);
				loom_strbuf_put(s, "\n");
			}
			loom_strbuf_put(s, "\nAnswer with one JSON object: {\"tool_calls\": [{\"name\": <a tool's name>, "
					   "\"arguments\": <its arguments>}, ...]} to call tools, or {\"response\": <your "
					   "answer>} to answer.");
		}
		msgs[n++] = (loom_chat_message){"system", s->s};
	}
	for (; i < c->n; i++) {
		const turn *t = &c->turns[i];
		loom_strbuf *s = &texts[n];
		if (t->n_calls > 0) {
			loom_strbuf_put(s, "{\"tool_calls\": ");
			put_call_list(s, t);
			loom_strbuf_put(s, "}");
			msgs[n++] = (loom_chat_message){"assistant", s->s};
		} else if (is(t, "tool")) {
			cJSON *r = cJSON_CreateObject();
			cJSON *inner = cJSON_AddObjectToObject(r, "tool_response");
			cJSON_AddStringToObject(inner, "tool", t->tool_name);
			cJSON_AddStringToObject(inner, "content", t->content);
			loom_json_dump(s, r, 0);
			cJSON_Delete(r);
			msgs[n++] = (loom_chat_message){"user", s->s};
		} else if (is(t, "assistant") && c->tools != NULL) {
			cJSON *r = cJSON_CreateObject();
			cJSON_AddStringToObject(r, "response", t->content);
			loom_json_dump(s, r, 0);
			cJSON_Delete(r);
			msgs[n++] = (loom_chat_message){"assistant", s->s};
		} else {
			msgs[n++] = (loom_chat_message){t->role, t->content};
		}
	}
	loom_status st = LOOM_OK;
	for (size_t k = 0; k < n; k++)
		if (texts[k].failed || msgs[k].content == NULL)
			st = loom_error(LOOM_ERR_NO_MEMORY, "out of memory");
	size_t len = 0;
	if (st == LOOM_OK) {
		st = loom_chat_format_for(model, kind, msgs, n, add_assistant, NULL, 0, &len);
		if (st == LOOM_ERR_BUFFER_TOO_SMALL) {
			char *text = malloc(len + 1);
			st = text == NULL ? loom_error(LOOM_ERR_NO_MEMORY, "out of memory")
					  : loom_chat_format_for(model, kind, msgs, n, add_assistant, text, len + 1, &len);
			if (st == LOOM_OK)
				loom_strbuf_put_n(b, text, len);
			free(text);
		}
	}
	for (size_t k = 0; k < n; k++)
		loom_strbuf_free(&texts[k]);
	free(texts);
	free(msgs);
	return st;
}

/* A conversation without tools, calls or results: loom_chat_apply's. */
static bool plain_conversation(const conversation *c)
{
	if (c->tools != NULL)
		return false;
	for (size_t i = 0; i < c->n; i++)
		if (c->turns[i].n_calls > 0 || is(&c->turns[i], "tool"))
			return false;
	return true;
}

static loom_status apply_plain(const loom_model *model, const char *template_name, const conversation *c,
			       bool add_assistant, loom_strbuf *out)
{
	loom_chat_message *msgs = calloc(c->n + 1, sizeof(*msgs));
	if (msgs == NULL)
		return loom_error(LOOM_ERR_NO_MEMORY, "out of memory");
	for (size_t i = 0; i < c->n; i++)
		msgs[i] = (loom_chat_message){c->turns[i].role, c->turns[i].content};
	size_t len = 0;
	loom_status st = loom_chat_apply(model, template_name, msgs, c->n, add_assistant, NULL, 0, &len);
	char *text = st == LOOM_ERR_BUFFER_TOO_SMALL ? malloc(len + 1) : NULL;
	if (text != NULL)
		st = loom_chat_apply(model, template_name, msgs, c->n, add_assistant, text, len + 1, &len);
	else if (st == LOOM_ERR_BUFFER_TOO_SMALL)
		st = loom_error(LOOM_ERR_NO_MEMORY, "out of memory");
	if (st == LOOM_OK)
		loom_strbuf_put_n(out, text, len);
	free(text);
	free(msgs);
	return st;
}

/* Whether the model's own template text holds s. */
static bool template_has(const loom_model *m, const char *s)
{
	loom_string jinja;
	if (m->file == NULL || loom_meta_get_string(m->file, "tokenizer.chat_template", &jinja) != LOOM_OK)
		return false;
	const size_t n = strlen(s);
	for (size_t i = 0; i + n <= jinja.len; i++)
		if (memcmp(jinja.data + i, s, n) == 0)
			return true;
	return false;
}

/* The Mistral format of kind; model: the model whose own template is
 * read for how it writes the tools (NULL: a template named, whose rules
 * are mistral-common's). A v7 template that writes them as the v3
 * templates do (Mistral Small 3.1's) has them so. */
static mistral_format mistral_format_of(loom_chat_kind kind, const loom_model *model)
{
	return (mistral_format){
		.kind = kind,
		.spm = kind == LOOM_CHAT_MISTRAL,
		.json_tools = kind == LOOM_CHAT_MISTRAL ||
			      (kind == LOOM_CHAT_MISTRAL_V7 && model != NULL && template_has(model, "[TOOL_CALLS] [")),
		.tools_first = kind == LOOM_CHAT_MISTRAL_V13,
	};
}

/* What a template lets a request choose of the model's reasoning
 * (loom.h's loom_reasoning). */
typedef enum reasoning_offer {
	OFFERS_NOTHING, /* the model does not reason */
	OFFERS_SWITCH,  /* on, or off (Qwen 3's enable_thinking) */
	OFFERS_ALWAYS,  /* every reply opened in <think> (Qwen 3's thinking-only releases) */
	OFFERS_LEVELS,  /* low, medium or high (harmony) */
	OFFERS_UNKNOWN, /* a switch loom does not know how to write (SmolLM3's metadata block): the default only */
} reasoning_offer;

/* The Jinja text of a generation prompt that opens the reasoning, and of
 * Qwen 3's reasoning switched off. */
static const char think_opening_jinja[] = "<|im_start|>assistant\\n<think>\\n";
static const char qwen3_no_thinking_jinja[] = "'<think>\\n\\n</think>\\n\\n'";

static reasoning_offer reasoning_offer_of(const loom_model *model, const char *template_name, loom_chat_kind kind)
{
	if (kind == LOOM_CHAT_HARMONY)
		return OFFERS_LEVELS;
	if (template_name != NULL || kind != LOOM_CHAT_CHATML || !template_has(model, "</think>"))
		return OFFERS_NOTHING;
	/* A template that reads enable_thinking switches as Qwen 3's does
	 * when it writes what Qwen 3's writes. */
	if (template_has(model, "enable_thinking"))
		return template_has(model, qwen3_no_thinking_jinja) ? OFFERS_SWITCH : OFFERS_UNKNOWN;
	return template_has(model, think_opening_jinja) ? OFFERS_ALWAYS : OFFERS_NOTHING;
}

bool loom_chat_opens_thinking(const loom_model *model)
{
	return reasoning_offer_of(model, NULL, model->chat_template) == OFFERS_ALWAYS;
}

const char *loom_chat_reasoning_offered(const loom_model *model)
{
	switch (reasoning_offer_of(model, NULL, model->chat_template)) {
	case OFFERS_LEVELS:
		return "low, medium (the default) or high";
	case OFFERS_SWITCH:
		return "on (the default) or none";
	case OFFERS_ALWAYS:
		return "always";
	case OFFERS_UNKNOWN:
		return "its template's own only (its switch is not one loom writes)";
	default:
		return NULL;
	}
}

/* Whether offer gives reasoning r: *effort is harmony's level, *opening
 * what the assistant's opening ends with. */
static loom_status reasoning_check(reasoning_offer offer, loom_chat_kind kind, loom_reasoning r, const char **effort,
				   const char **opening)
{
	*effort = r == LOOM_REASONING_LOW ? "low" : r == LOOM_REASONING_HIGH ? "high" : "medium";
	*opening = "";
	if ((int)r < LOOM_REASONING_DEFAULT || (int)r > LOOM_REASONING_HIGH)
		return loom_error(LOOM_ERR_INVALID_ARGUMENT, "reasoning %d is not one of loom_reasoning's values",
				  (int)r);
	const bool none = r == LOOM_REASONING_NONE, asked = r != LOOM_REASONING_DEFAULT && !none;
	switch (offer) {
	case OFFERS_LEVELS:
		if (none)
			return loom_error(LOOM_ERR_INVALID_ARGUMENT, "gpt-oss's harmony format always reasons: its "
								     "reasoning is low, medium or high, not none");
		return LOOM_OK;
	case OFFERS_SWITCH:
		if (none)
			*opening = "<think>\n\n</think>\n\n";
		return LOOM_OK;
	case OFFERS_ALWAYS:
		if (none)
			return loom_error(LOOM_ERR_INVALID_ARGUMENT,
					  "this model's chat template opens every reply in <think>: it always reasons, "
					  "and cannot be asked not to");
		*opening = "<think>\n";
		return LOOM_OK;
	case OFFERS_UNKNOWN:
		if (r != LOOM_REASONING_DEFAULT)
			return loom_error(LOOM_ERR_INVALID_ARGUMENT,
					  "this model's chat template switches its reasoning (enable_thinking) in a way "
					  "loom does not write (it writes Qwen 3's): only the template's own default");
		return LOOM_OK;
	default:
		if (asked)
			return loom_error(LOOM_ERR_INVALID_ARGUMENT,
					  "this model's chat template (%s) has no reasoning to ask for: its reasoning "
					  "can only be none",
					  loom_chat_template_name(kind));
		return LOOM_OK;
	}
}

LOOM_API loom_status loom_chat_check_reasoning(const loom_model *model, const char *template_name,
					       loom_reasoning reasoning)
{
	if (model == NULL)
		return loom_error(LOOM_ERR_INVALID_ARGUMENT, "loom_chat_check_reasoning: no model");
	loom_chat_kind kind;
	loom_status st = loom_chat_kind_named(model, template_name, &kind);
	const char *effort, *opening;
	return st != LOOM_OK ? st
			     : reasoning_check(reasoning_offer_of(model, template_name, kind), kind, reasoning, &effort,
					       &opening);
}

bool loom_chat_format_model(const loom_model *model, const loom_chat_message *msgs, size_t n, bool add_assistant,
			    loom_strbuf *out, loom_status *st)
{
	const loom_chat_kind kind = model->chat_template;
	const bool qwen = kind == LOOM_CHAT_CHATML &&
			  (template_has(model, qwen_default_system) || template_has(model, "</think>"));
	const bool llama31 = kind == LOOM_CHAT_LLAMA3 && template_has(model, "Cutting Knowledge Date");
	const bool mistral3 = kind == LOOM_CHAT_MISTRAL && template_has(model, "[TOOL_CALLS]");
	if (!qwen && !llama31 && !mistral3)
		return false;
	conversation c = {0};
	*st = LOOM_OK;
	if ((c.turns = calloc(n ? n : 1, sizeof(turn))) == NULL) {
		*st = loom_error(LOOM_ERR_NO_MEMORY, "out of memory");
		return true;
	}
	for (size_t i = 0; i < n && *st == LOOM_OK; i++) {
		turn *t = &c.turns[c.n++];
		t->role = msgs[i].role;
		t->has_content = true;
		if ((t->content = strdup(msgs[i].content)) == NULL)
			*st = loom_error(LOOM_ERR_NO_MEMORY, "out of memory");
	}
	if (*st == LOOM_OK && qwen)
		render_hermes(out, &c, add_assistant,
			      (hermes_kind){.default_system = template_has(model, qwen_default_system) ? qwen_default_system : NULL,
					    .thinks = template_has(model, "</think>"),
					    .opening = loom_chat_opens_thinking(model) ? "<think>\n" : ""});
	else if (*st == LOOM_OK && llama31)
		*st = render_llama3(out, &c, add_assistant);
	else if (*st == LOOM_OK) {
		const mistral_format f = mistral_format_of(LOOM_CHAT_MISTRAL, model);
		render_mistral(out, &c, &f);
	}
	if (*st == LOOM_OK && out->failed)
		*st = loom_error(LOOM_ERR_NO_MEMORY, "out of memory");
	conversation_free(&c);
	return true;
}

LOOM_API loom_status loom_chat_apply_json_reasoning(const loom_model *model, const char *template_name,
						    loom_reasoning reasoning, const char *messages_json,
						    size_t messages_len, const char *tools_json, size_t tools_len,
						    bool add_assistant, char *buf, size_t size, size_t *n_out)
{
	if (model == NULL || messages_json == NULL || (buf == NULL && size > 0) || n_out == NULL)
		return loom_error(LOOM_ERR_INVALID_ARGUMENT, "loom_chat_apply_json: bad arguments");
	loom_chat_kind kind;
	loom_status st = loom_chat_kind_named(model, template_name, &kind);
	if (st != LOOM_OK)
		return st;
	const reasoning_offer offer = reasoning_offer_of(model, template_name, kind);
	const char *effort, *opening;
	if ((st = reasoning_check(offer, kind, reasoning, &effort, &opening)) != LOOM_OK)
		return st;
	/* loom_chat_apply writes a plain conversation with the reasoning its
	 * template has when told nothing. */
	const bool told = reasoning != LOOM_REASONING_DEFAULT && (offer == OFFERS_LEVELS || offer == OFFERS_SWITCH);
	conversation c;
	st = read_conversation(messages_json, messages_len, tools_json, tools_len, &c);
	loom_strbuf b = {0};
	if (st == LOOM_OK && plain_conversation(&c) && !told)
		st = apply_plain(model, template_name, &c, add_assistant, &b);
	else if (st == LOOM_OK) {
		switch (loom_tool_style_of(kind)) {
		case LOOM_TOOL_HERMES:
			/* Which Hermes template: the model's own, read. */
			render_hermes(&b, &c, add_assistant,
				      (hermes_kind){.default_system = template_name == NULL &&
										template_has(model, qwen_default_system)
									? qwen_default_system
									: NULL,
						    .thinks = template_name == NULL && template_has(model, "</think>"),
						    .opening = opening});
			break;
		case LOOM_TOOL_LLAMA3:
			st = render_llama3(&b, &c, add_assistant);
			break;
		case LOOM_TOOL_MISTRAL:
		case LOOM_TOOL_MISTRAL_ARGS: {
			const mistral_format f = mistral_format_of(kind, template_name == NULL ? model : NULL);
			render_mistral(&b, &c, &f);
			break;
		}
		case LOOM_TOOL_HARMONY:
			render_harmony(&b, &c, add_assistant, effort);
			break;
		case LOOM_TOOL_GRANITE:
			render_granite(&b, &c, add_assistant);
			break;
		default:
			st = render_generic(&b, model, kind, &c, add_assistant);
			break;
		}
	}
	if (st == LOOM_OK && b.failed)
		st = loom_error(LOOM_ERR_NO_MEMORY, "out of memory");
	if (st == LOOM_OK) {
		*n_out = b.n;
		if (size > 0) {
			const size_t k = b.n < size ? b.n : size - 1;
			memcpy(buf, b.s != NULL ? b.s : "", k);
			buf[k] = '\0';
		}
		if (b.n >= size)
			st = loom_error(LOOM_ERR_BUFFER_TOO_SMALL, "the chat text needs %zu bytes, the buffer has %zu", b.n + 1,
					size);
	}
	loom_strbuf_free(&b);
	conversation_free(&c);
	return st;
}

LOOM_API loom_status loom_chat_apply_json(const loom_model *model, const char *template_name, const char *messages_json,
					  size_t messages_len, const char *tools_json, size_t tools_len, bool add_assistant,
					  char *buf, size_t size, size_t *n_out)
{
	return loom_chat_apply_json_reasoning(model, template_name, LOOM_REASONING_DEFAULT, messages_json, messages_len,
					      tools_json, tools_len, add_assistant, buf, size, n_out);
}
