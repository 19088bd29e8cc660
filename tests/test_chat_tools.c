/* test_chat_tools.c - tools in conversations: each family's tool format
 * rendered byte for byte as the model's own Jinja template renders it
 * (through a Jinja engine, @huggingface/jinja, on the same messages and
 * tools); replies' tool calls read the same whatever the steps' split, their
 * arguments growing step by step; and the grammar of calls, which takes
 * the calls of its tools and nothing else, sampled from random logits. */
#include "check_main.h"

#include "fixture.h"
#include "grammar/grammar.h"
#include "grammar/token_trie.h"
#include "grammar_check.h"
#include "run_cmd.h"
#include "synth_model.h"
#include "testdata.h"
#include "text/json_text.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define NODE_DIR LOOM_TEST_BUILD_DIR "/node"
#define TEMPLATES LOOM_TEST_SOURCE_DIR "/tests/data/chat_templates"

/* The markers the families' replies use, as control tokens. */
static const char *const markers[] = {"<tool_call>", "</tool_call>", "[TOOL_CALLS]", "<|python_tag|>", "<|start|>",
				      "<|channel|>",  "<|message|>",  "<|end|>",      "<|return|>",     "<|call|>",
				      "<|constrain|>", "[ARGS]",     "[CALL_ID]",    "<|tool_call|>", NULL};

/* A small model with the markers and, when given, a template of its own. */
static loom_model *marker_model(loom_runtime *rt, const char *dir, const char *name, const char *jinja)
{
	synth_config c = synth_default_config();
	c.control_tokens = markers;
	c.chat_template = jinja;
	synth_model *sm = synth_model_build(&c, NULL);
	char path[4300];
	snprintf(path, sizeof(path), "%s/%s.gguf", dir, name);
	ck_assert(synth_model_write(sm, path));
	synth_model_free(sm);
	loom_model *m = NULL;
	ck_assert_msg(loom_model_load(rt, path, NULL, &m) == LOOM_OK, "%s: %s", path, loom_last_error());
	return m;
}

static loom_token marker(const loom_model *m, const char *text)
{
	loom_token t[4];
	size_t n = 0;
	ck_assert(loom_tokenize(m, text, strlen(text), false, true, t, 4, &n) == LOOM_OK && n == 1);
	return t[0];
}

/* ---- rendering against the models' own templates ---- */

static const char tools_json[] =
	"[{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"description\": \"Get the current weather "
	"for a city\", \"parameters\": {\"type\": \"object\", \"properties\": {\"location\": {\"type\": \"string\", "
	"\"description\": \"City name, e.g. Z\\u00fcrich\"}, \"unit\": {\"type\": \"string\", \"enum\": [\"celsius\", "
	"\"fahrenheit\"]}}, \"required\": [\"location\"]}}}, {\"type\": \"function\", \"function\": {\"name\": "
	"\"get_time\", \"description\": \"Get the current time\"}}]";

/* Conversations, with arguments as objects (what the templates are given:
 * loom is sent the same as JSON text, as the API sends them). */
static const struct conversation {
	const char *what, *messages;
	bool with_tools;
	bool one_call_each; /* every assistant turn has at most one call (Llama 3 takes no more) */
} conversations[] = {
	{"a call, its result, an answer and a new question",
	 "[{\"role\": \"system\", \"content\": \"You are a helpful assistant.\"},"
	 "{\"role\": \"user\", \"content\": \"What's the weather in Paris?\"},"
	 "{\"role\": \"assistant\", \"content\": \"\", \"tool_calls\": [{\"id\": \"abcDEF123\", \"type\": \"function\", "
	 "\"function\": {\"name\": \"get_weather\", \"arguments\": {\"location\": \"Paris\", \"unit\": \"celsius\"}}}]},"
	 "{\"role\": \"tool\", \"tool_call_id\": \"abcDEF123\", \"content\": \"{\\\"temperature\\\": 18, "
	 "\\\"condition\\\": \\\"sunny\\\"}\"},"
	 "{\"role\": \"assistant\", \"content\": \"It is 18 degrees and sunny in Paris.\"},"
	 "{\"role\": \"user\", \"content\": \"Thanks! And what time is it?\"}]",
	 true, true},
	{"two calls at once, without a system message",
	 "[{\"role\": \"user\", \"content\": \"Weather in Z\\u00fcrich, and the \\\"time\\\"?\"},"
	 "{\"role\": \"assistant\", \"content\": \"\", \"tool_calls\": [{\"id\": \"abcDEF123\", \"type\": \"function\", "
	 "\"function\": {\"name\": \"get_weather\", \"arguments\": {\"location\": \"Z\\u00fcrich\"}}}, "
	 "{\"id\": \"xyz789QRS\", \"type\": \"function\", \"function\": {\"name\": \"get_time\", \"arguments\": {}}}]},"
	 "{\"role\": \"tool\", \"tool_call_id\": \"abcDEF123\", \"content\": \"11 degrees\"},"
	 "{\"role\": \"tool\", \"tool_call_id\": \"xyz789QRS\", \"content\": \"10:42\"},"
	 "{\"role\": \"assistant\", \"content\": \"11 degrees at 10:42.\"},"
	 "{\"role\": \"user\", \"content\": \"Thanks.\"}]",
	 true, false},
	{"tools, and a first question without a system message",
	 "[{\"role\": \"user\", \"content\": \"Is it raining in Oslo?\"}]", true, true},
	{"no tools, no system message", "[{\"role\": \"user\", \"content\": \"Hi\"}]", false, true},
	{"no tools: a system message, a question, an answer, a question",
	 "[{\"role\": \"system\", \"content\": \"Be brief.\"}, {\"role\": \"user\", \"content\": \"Hi\"}, "
	 "{\"role\": \"assistant\", \"content\": \"Hello!\"}, {\"role\": \"user\", \"content\": \"Who are you?\"}]",
	 false, true},
	{"no tools: spaces and line breaks around each turn's text",
	 "[{\"role\": \"system\", \"content\": \" Be brief.\\n\"}, {\"role\": \"user\", \"content\": \"  Hi \\n\"}, "
	 "{\"role\": \"assistant\", \"content\": \"\\nHello!\\n\\n\"}, {\"role\": \"user\", \"content\": \"\\tWho are you? \"}]",
	 false, true},
};

/* The instructions vLLM's template for Mistral Small 3.1 (llama.cpp's
 * copy of it) puts in front of the system prompt when there are tools:
 * not Mistral's, and loom leaves them out. */
static const char vllm_tool_prompt[] =
	"You are a helpful assistant that can call tools. If you call one or more tools, format them in a single "
	"JSON array or objects, where each object is a tool call, not as separate objects outside of an array or "
	"multiple arrays. Use the format [{\"name\": tool call name, \"arguments\": tool call arguments}, "
	"additional tool calls] if you call more than one tool. If you call tools, do not attempt to interpret them "
	"or otherwise provide a response until you receive a tool call result that you can interpret for the user.";

static const char granite_tools_system[] =
	"You are a helpful assistant with access to the following tools. When a tool is required to answer the user's "
	"query, respond only with <|tool_call|> followed by a JSON list of tools used. If a tool does not exist in the "
	"provided list of tools, notify the user that you do not have the ability to fulfill the request.";

static const struct family {
	const char *file, *eos;
	const char *date;      /* Llama 3.2's template asks strftime_now: loom writes 3.1's date */
	bool text_arguments;   /* the template writes arguments sent as text as they are */
	bool first_call_only;  /* the template writes only a turn's first call (loom writes each) */
	const char *left_out;  /* a line of the template's that loom leaves out on purpose */
	/* Without a system message the template writes its own, which loom
	 * leaves out: the end of that first block (NULL: none). */
	const char *default_system_end;
	const char *kind;      /* the template loom recognises it as */
	bool no_tools;         /* the template writes no tools: only conversations without them are compared */
	/* The template writes only an assistant turn's content: it is given
	 * the turn's calls in it as loom writes them, this marker and the
	 * list of calls (NULL: it writes the calls). */
	const char *calls_in_content;
	/* With tools and without a system message, the system message loom
	 * writes, which the template's default one ends with, and where the
	 * part of the default loom leaves out begins (NULL: none). */
	const char *tools_system, *tools_system_cut;
} families[] = {
	{"qwen2.5.jinja", "<|im_end|>", NULL, false, false, NULL, NULL, "chatml", false, NULL, NULL, NULL},
	{"qwen3.jinja", "<|im_end|>", NULL, true, false, NULL, NULL, "chatml", false, NULL, NULL, NULL},
	{"gemma3.jinja", "<end_of_turn>", NULL, false, false, NULL, NULL, "gemma", true, NULL, NULL, NULL},
	/* Granite's default system message holds the day's date: loom writes
	 * none, as llama.cpp, and with tools only what the template adds to
	 * it for them. */
	{"granite3.3.jinja", "<|end_of_text|>", NULL, false, false, NULL, "<|end_of_text|>\n", "granite", false,
	 "<|tool_call|>", granite_tools_system, "Knowledge Cutoff Date"},
	/* Command R7B's writes the tools only beside documents. */
	{"command-r7b.jinja", "<|END_OF_TURN_TOKEN|>", NULL, false, false, NULL, NULL, "command-r7b", true, NULL, NULL, NULL},
	/* OLMo 2's writes no tools; its eos_token is the model's. */
	{"olmo2.jinja", "</s>", NULL, false, false, NULL, NULL, "tulu", true, NULL, NULL, NULL},
	{"llama3.1.jinja", "<|eot_id|>", NULL, false, false, NULL, NULL, "llama3", false, NULL, NULL, NULL},
	{"llama3.2.jinja", "<|eot_id|>", "26 Jul 2024", false, false, NULL, NULL, "llama3", false, NULL, NULL, NULL},
	{"mistral-v0.3.jinja", "</s>", NULL, false, false, NULL, NULL, "mistral", false, NULL, NULL, NULL},
	/* gpt-oss's system message holds the day's date: loom leaves it out
	 * (a conversation's text does not change from day to day). */
	{"gpt-oss.jinja", "<|return|>", NULL, false, true, "Current date: 2026-01-01\n", NULL, "harmony", false,
	 NULL, NULL, NULL},
	/* Mistral's later tokenizers. Their templates' default system
	 * prompts hold the day's date (or placeholders for it): mistral-common
	 * writes none, nor does loom. */
	{"mistral-small-3.1.jinja", "</s>", NULL, false, false, vllm_tool_prompt, "[/SYSTEM_PROMPT]", "mistral-v7", false,
	 NULL, NULL, NULL},
	{"mistral-small-3.2.jinja", "</s>", NULL, false, false, NULL, "[/SYSTEM_PROMPT]", "mistral-v11", false,
	 NULL, NULL, NULL},
	{"ministral-3.jinja", "</s>", NULL, true, false, NULL, "[/SYSTEM_PROMPT]", "mistral-v13", false, NULL, NULL, NULL},
};

/* Takes what out of text, where it is. */
static void cut(char *text, const char *what)
{
	char *at = strstr(text, what);
	if (at != NULL)
		memmove(at, at + strlen(what), strlen(at + strlen(what)) + 1);
}

/* messages with each assistant turn's calls also written after its
 * content, marker then the list of calls, as loom writes them. */
static char *with_calls_in_content(const char *messages, const char *marker)
{
	cJSON *m = cJSON_Parse(messages);
	for (cJSON *msg = m->child; msg != NULL; msg = msg->next) {
		const cJSON *calls = cJSON_GetObjectItemCaseSensitive(msg, "tool_calls");
		if (calls == NULL)
			continue;
		loom_strbuf b = {0};
		loom_strbuf_put(&b, cJSON_GetObjectItemCaseSensitive(msg, "content")->valuestring);
		loom_strbuf_put(&b, marker);
		loom_strbuf_put(&b, "[");
		for (const cJSON *c = calls->child; c != NULL; c = c->next) {
			const cJSON *fn = cJSON_GetObjectItemCaseSensitive(c, "function");
			loom_strbuf_put(&b, c != calls->child ? ", {\"name\": \"" : "{\"name\": \"");
			loom_strbuf_put(&b, cJSON_GetObjectItemCaseSensitive(fn, "name")->valuestring);
			loom_strbuf_put(&b, "\", \"arguments\": ");
			loom_json_dump(&b, cJSON_GetObjectItemCaseSensitive(fn, "arguments"), 0);
			loom_strbuf_put(&b, "}");
		}
		loom_strbuf_put(&b, "]");
		cJSON_ReplaceItemInObjectCaseSensitive(msg, "content", cJSON_CreateString(b.s));
		loom_strbuf_free(&b);
	}
	char *out = cJSON_PrintUnformatted(m);
	cJSON_Delete(m);
	return out;
}

/* messages with each call's arguments as JSON text. */
static char *with_text_arguments(const char *messages)
{
	cJSON *m = cJSON_Parse(messages);
	for (cJSON *msg = m->child; msg != NULL; msg = msg->next) {
		cJSON *calls = cJSON_GetObjectItemCaseSensitive(msg, "tool_calls");
		for (cJSON *c = calls != NULL ? calls->child : NULL; c != NULL; c = c->next) {
			cJSON *fn = cJSON_GetObjectItemCaseSensitive(c, "function");
			char *text = cJSON_PrintUnformatted(cJSON_GetObjectItemCaseSensitive(fn, "arguments"));
			cJSON_ReplaceItemInObjectCaseSensitive(fn, "arguments", cJSON_CreateString(text));
			free(text);
		}
	}
	char *out = cJSON_PrintUnformatted(m);
	cJSON_Delete(m);
	return out;
}

/* The template's default system prompt in its block, as it writes it
 * for a conversation without one. */
static char *jinja_render(const char *dir, const struct family *f, const char *messages, bool with_tools);
static char *jinja_render_with(const char *dir, const char *template_path, const struct family *f, const char *messages,
			       bool with_tools, const char *vars);

static char *default_system_block(const char *dir, const struct family *f)
{
	char *text = jinja_render(dir, f, "[{\"role\": \"user\", \"content\": \"Hi\"}]", false);
	ck_assert_ptr_nonnull(text);
	char *end = strstr(text, f->default_system_end);
	ck_assert_msg(end != NULL && strstr(text, "Hi") > end, "%s: %s", f->file, text);
	end[strlen(f->default_system_end)] = '\0';
	return text;
}

/* The template rendered by the Jinja engine; NULL if it raised. */
static char *jinja_render(const char *dir, const struct family *f, const char *messages, bool with_tools)
{
	char path[4300];
	snprintf(path, sizeof(path), "%s/%s", TEMPLATES, f->file);
	return jinja_render_with(dir, path, f, messages, with_tools, NULL);
}

/* The template at template_path rendered with f's tokens and date, vars
 * (JSON members: "NAME": VALUE, ...; NULL: none) its variables too. */
static char *jinja_render_with(const char *dir, const char *template_path, const struct family *f, const char *messages,
			       bool with_tools, const char *vars)
{
	char req[4300];
	snprintf(req, sizeof(req), "%s/request.json", dir);
	FILE *out = fopen(req, "w");
	ck_assert_ptr_nonnull(out);
	fprintf(out, "{\"messages\": %s, %s%s%s\"add_generation_prompt\": true, \"bos_token\": \"\", \"eos_token\": \"%s\"",
		messages, with_tools ? "\"tools\": " : "", with_tools ? tools_json : "", with_tools ? ", " : "", f->eos);
	if (f->date != NULL)
		fprintf(out, ", \"date_string\": \"%s\"", f->date);
	if (vars != NULL)
		fprintf(out, ", %s", vars);
	fprintf(out, "}");
	fclose(out);
	cmd_result r = run_cmd("cd %s && node render_chat_template.mjs %s < %s", NODE_DIR, template_path, req);
	char *text = r.status == 0 ? strdup(r.out) : NULL;
	if (r.status != 0)
		printf("  %s raises: %s", f->file, r.err);
	cmd_result_free(&r);
	return text;
}

static char *loom_render_reasoning(const loom_model *m, const char *messages, bool with_tools, loom_reasoning reasoning,
				   loom_status *st)
{
	size_t need = 0;
	const char *tools = with_tools ? tools_json : NULL;
	const size_t tools_len = with_tools ? strlen(tools_json) : 0;
	*st = loom_chat_apply_json_reasoning(m, NULL, reasoning, messages, strlen(messages), tools, tools_len, true, NULL,
					     0, &need);
	if (*st != LOOM_ERR_BUFFER_TOO_SMALL)
		return NULL;
	char *text = malloc(need + 1);
	*st = loom_chat_apply_json_reasoning(m, NULL, reasoning, messages, strlen(messages), tools, tools_len, true, text,
					     need + 1, &need);
	ck_assert_uint_eq(strlen(text), need);
	return text;
}

static char *loom_render(const loom_model *m, const char *messages, bool with_tools, loom_status *st)
{
	return loom_render_reasoning(m, messages, with_tools, LOOM_REASONING_DEFAULT, st);
}

/* A conversation of plain turns through loom_chat_apply. */
static char *plain_render(const loom_model *m, const char *messages)
{
	cJSON *j = cJSON_Parse(messages);
	loom_chat_message msgs[16];
	size_t n = 0;
	for (const cJSON *msg = j->child; msg != NULL && n < 16; msg = msg->next)
		msgs[n++] = (loom_chat_message){cJSON_GetObjectItemCaseSensitive(msg, "role")->valuestring,
						cJSON_GetObjectItemCaseSensitive(msg, "content")->valuestring};
	size_t need = 0;
	ck_assert_int_eq(loom_chat_apply(m, NULL, msgs, n, true, NULL, 0, &need), LOOM_ERR_BUFFER_TOO_SMALL);
	char *text = malloc(need + 1);
	ck_assert_int_eq(loom_chat_apply(m, NULL, msgs, n, true, text, need + 1, &need), LOOM_OK);
	cJSON_Delete(j);
	return text;
}

/* The Jinja engine's script in the build's node/ beside the package, and
 * the test's folder; NULL (a skip, said) where the package is missing. */
static const char *jinja_engine_ready(const char *name)
{
	if (access(NODE_DIR "/node_modules/@huggingface/jinja/package.json", R_OK) != 0) {
		printf("SKIP: @huggingface/jinja is not in %s: run scripts/test.sh, which installs it\n", NODE_DIR);
		return NULL;
	}
	cmd_result cp = run_cmd("cp %s/tests/tools/render_chat_template.mjs %s/", LOOM_TEST_SOURCE_DIR, NODE_DIR);
	ck_assert_int_eq(cp.status, 0);
	cmd_result_free(&cp);
	return test_tmp_dir(name);
}

START_TEST(renders_as_the_models_own_templates)
{
	const char *dir = jinja_engine_ready("chat_tools_render");
	if (dir == NULL)
		return;
	loom_runtime *rt = test_runtime("cpu-generic", 1);
	int compared = 0, refused = 0;
	for (size_t fi = 0; fi < sizeof(families) / sizeof(families[0]); fi++) {
		const struct family *f = &families[fi];
		char path[4300];
		snprintf(path, sizeof(path), "%s/%s", TEMPLATES, f->file);
		size_t jinja_len;
		char *jinja = test_read_file(path, &jinja_len);
		ck_assert_msg(jinja != NULL, "%s", path);
		loom_model *m = marker_model(rt, dir, "family", jinja);
		ck_assert_str_eq(loom_chat_template(m), f->kind);
		char *default_system = f->default_system_end != NULL ? default_system_block(dir, f) : NULL;
		for (size_t ci = 0; ci < sizeof(conversations) / sizeof(conversations[0]); ci++) {
			const struct conversation *c = &conversations[ci];
			if ((f->first_call_only && !c->one_call_each) ||
			    (f->no_tools && (c->with_tools || strstr(c->messages, "tool_calls") != NULL)))
				continue;
			char *sent = with_text_arguments(c->messages);
			loom_status st;
			char *ours = loom_render(m, sent, c->with_tools, &st);
			/* The other templates write a string's tojson: they are
			 * given the objects that loom reads out of the text. */
			char *given = f->calls_in_content != NULL ? with_calls_in_content(c->messages, f->calls_in_content)
								  : strdup(f->text_arguments ? sent : c->messages);
			char *theirs = jinja_render(dir, f, given, c->with_tools);
			const bool own_system = strstr(c->messages, "\"system\"") == NULL;
			if (theirs != NULL && f->left_out != NULL)
				cut(theirs, f->left_out);
			if (theirs != NULL && own_system && c->with_tools && f->tools_system != NULL) {
				/* The default's part before what it says of tools. */
				char *from = strstr(theirs, f->tools_system_cut), *to = strstr(theirs, f->tools_system);
				ck_assert_msg(from != NULL && to != NULL && from < to, "%s: %s", f->file, theirs);
				memmove(from, to, strlen(to) + 1);
			} else if (theirs != NULL && default_system != NULL && own_system) {
				cut(theirs, default_system);
			}
			if (theirs == NULL) {
				/* The template refuses (Llama 3 takes one call a turn):
				 * loom must refuse too, saying why. */
				ck_assert_msg(ours == NULL && st == LOOM_ERR_INVALID_ARGUMENT,
					      "%s, %s: the template raises, loom renders", f->file, c->what);
				printf("  loom refuses too: %s\n", loom_last_error());
				refused++;
			} else {
				ck_assert_msg(ours != NULL, "%s, %s: %s", f->file, c->what, loom_last_error());
				size_t at = 0;
				while (ours[at] != '\0' && ours[at] == theirs[at])
					at++;
				ck_assert_msg(strcmp(ours, theirs) == 0,
					      "%s, %s: differs at byte %zu\n--- the template:\n%s\n--- loom:\n%s", f->file,
					      c->what, at, theirs, ours);
				compared++;
				if (!c->with_tools) {
					/* loom_chat_apply, which chat without tools takes,
					 * writes the same. */
					char *plain = plain_render(m, c->messages);
					ck_assert_msg(strcmp(plain, theirs) == 0, "%s, %s, loom_chat_apply:\n%s", f->file,
						      c->what, plain);
					free(plain);
					compared++;
				}
			}
			free(ours);
			free(theirs);
			free(given);
			free(sent);
		}
		printf("%s (%s): as loom renders\n", f->file, loom_chat_template(m));
		loom_model_free(m);
		free(default_system);
		free(jinja);
	}
	printf("%d renders byte for byte, %d refused by both\n", compared, refused);
	ck_assert_int_ge(compared, 60);
	loom_runtime_free(rt);
}
END_TEST

/* Qwen 3's thinking-only releases (Qwen3-4B-Thinking-2507, ...) ship
 * qwen3.jinja with another generation prompt, which opens the reply's
 * reasoning (tests/data/chat_templates/README.md). */
static const char qwen3_generation_prompt[] =
	"{%- if add_generation_prompt %}\n    {{- '<|im_start|>assistant\\n' }}\n"
	"    {%- if enable_thinking is defined and enable_thinking is false %}\n"
	"        {{- '<think>\\n\\n</think>\\n\\n' }}\n    {%- endif %}\n{%- endif %}";
static const char thinking_only_generation_prompt[] =
	"{%- if add_generation_prompt %}\n    {{- '<|im_start|>assistant\\n<think>\\n' }}\n{%- endif %}";

/* The reasoning a request asks for, rendered as the models' own templates
 * render their variables (enable_thinking, reasoning_effort), byte for
 * byte; what a template does not offer refused. */
START_TEST(reasoning_as_the_models_own_templates)
{
	const char *dir = jinja_engine_ready("chat_tools_reasoning");
	if (dir == NULL)
		return;
	/* The thinking-only template, made from qwen3.jinja. */
	size_t qwen3_len;
	char *qwen3 = test_read_file(TEMPLATES "/qwen3.jinja", &qwen3_len);
	ck_assert_ptr_nonnull(qwen3);
	char *prompt_at = strstr(qwen3, qwen3_generation_prompt);
	ck_assert_msg(prompt_at != NULL && prompt_at[strlen(qwen3_generation_prompt)] == '\0',
		      "qwen3.jinja no longer ends with its generation prompt");
	char *thinking_only = malloc(qwen3_len + sizeof(thinking_only_generation_prompt));
	memcpy(thinking_only, qwen3, (size_t)(prompt_at - qwen3));
	strcpy(thinking_only + (prompt_at - qwen3), thinking_only_generation_prompt);
	char thinking_only_path[4300];
	snprintf(thinking_only_path, sizeof(thinking_only_path), "%s/qwen3-thinking-only.jinja", dir);
	FILE *out = fopen(thinking_only_path, "w");
	ck_assert_ptr_nonnull(out);
	fputs(thinking_only, out);
	fclose(out);

	static const struct {
		const char *family; /* the family's file in families[] */
		bool thinking_only; /* the family's template with the thinking-only generation prompt */
		loom_reasoning reasoning;
		const char *vars; /* what the template is told; NULL: refused */
	} cases[] = {
		{"qwen3.jinja", false, LOOM_REASONING_NONE, "\"enable_thinking\": false"},
		{"qwen3.jinja", false, LOOM_REASONING_ON, "\"enable_thinking\": true"},
		{"qwen3.jinja", false, LOOM_REASONING_HIGH, "\"enable_thinking\": true"},
		{"qwen3.jinja", true, LOOM_REASONING_DEFAULT, ""},
		{"qwen3.jinja", true, LOOM_REASONING_ON, ""},
		{"qwen3.jinja", true, LOOM_REASONING_NONE, NULL},
		{"gpt-oss.jinja", false, LOOM_REASONING_LOW, "\"reasoning_effort\": \"low\""},
		{"gpt-oss.jinja", false, LOOM_REASONING_MEDIUM, "\"reasoning_effort\": \"medium\""},
		{"gpt-oss.jinja", false, LOOM_REASONING_HIGH, "\"reasoning_effort\": \"high\""},
		{"gpt-oss.jinja", false, LOOM_REASONING_ON, ""},
		{"gpt-oss.jinja", false, LOOM_REASONING_NONE, NULL},
		{"qwen2.5.jinja", false, LOOM_REASONING_NONE, ""},
		{"qwen2.5.jinja", false, LOOM_REASONING_LOW, NULL},
		{"llama3.1.jinja", false, LOOM_REASONING_ON, NULL},
	};
	loom_runtime *rt = test_runtime("cpu-generic", 1);
	int compared = 0, refused = 0;
	for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
		const struct family *f = NULL;
		for (size_t fi = 0; fi < sizeof(families) / sizeof(families[0]); fi++)
			if (strcmp(families[fi].file, cases[k].family) == 0)
				f = &families[fi];
		ck_assert_ptr_nonnull(f);
		char path[4300];
		snprintf(path, sizeof(path), "%s/%s", TEMPLATES, f->file);
		const char *template_path = cases[k].thinking_only ? thinking_only_path : path;
		size_t jinja_len;
		char *jinja = test_read_file(template_path, &jinja_len);
		ck_assert_ptr_nonnull(jinja);
		loom_model *m = marker_model(rt, dir, "reasoning", jinja);
		if (cases[k].vars == NULL) {
			ck_assert_int_eq(loom_chat_check_reasoning(m, NULL, cases[k].reasoning), LOOM_ERR_INVALID_ARGUMENT);
			printf("  %s%s, reasoning %d refused: %s\n", f->file, cases[k].thinking_only ? " (thinking only)" : "",
			       (int)cases[k].reasoning, loom_last_error());
			loom_status st;
			char *ours = loom_render_reasoning(m, conversations[0].messages, false, cases[k].reasoning, &st);
			ck_assert_ptr_null(ours);
			ck_assert_int_eq(st, LOOM_ERR_INVALID_ARGUMENT);
			refused++;
		}
		for (size_t ci = 0; cases[k].vars != NULL && ci < sizeof(conversations) / sizeof(conversations[0]); ci++) {
			const struct conversation *c = &conversations[ci];
			if (f->first_call_only && !c->one_call_each)
				continue;
			ck_assert_int_eq(loom_chat_check_reasoning(m, NULL, cases[k].reasoning), LOOM_OK);
			char *sent = with_text_arguments(c->messages);
			loom_status st;
			char *ours = loom_render_reasoning(m, sent, c->with_tools, cases[k].reasoning, &st);
			char *theirs = jinja_render_with(dir, template_path, f, f->text_arguments ? sent : c->messages,
							 c->with_tools, cases[k].vars[0] != '\0' ? cases[k].vars : NULL);
			if (theirs == NULL) {
				ck_assert_msg(ours == NULL && st == LOOM_ERR_INVALID_ARGUMENT,
					      "%s, %s: the template raises, loom renders", f->file, c->what);
			} else {
				if (f->left_out != NULL)
					cut(theirs, f->left_out);
				ck_assert_msg(ours != NULL, "%s, %s: %s", f->file, c->what, loom_last_error());
				ck_assert_msg(strcmp(ours, theirs) == 0,
					      "%s, %s, reasoning %d:\n--- the template:\n%s\n--- loom:\n%s", f->file, c->what,
					      (int)cases[k].reasoning, theirs, ours);
				compared++;
			}
			free(ours);
			free(theirs);
			free(sent);
		}
		loom_model_free(m);
		free(jinja);
	}
	printf("%d renders with reasoning byte for byte, %d refused\n", compared, refused);
	ck_assert_int_ge(compared, 40);
	ck_assert_int_eq(refused, 4);
	loom_runtime_free(rt);
	free(thinking_only);
	free(qwen3);
}
END_TEST

/* Named, or the model's own template not writing tools (Mistral Small
 * 3's has none), "mistral-v7" writes them as mistral-common's v7
 * tokenizer encodes them (Tekken: no space after a marker): the tools
 * as one JSON array, the calls as one after [TOOL_CALLS], a result
 * [TOOL_RESULTS]ID[TOOL_CONTENT]TEXT[/TOOL_RESULTS]. The text derived from
 * those rules: */
static const char mistral_v7_rendered[] =
	"[SYSTEM_PROMPT]You are a helpful assistant.[/SYSTEM_PROMPT][INST]What's the weather in Paris?[/INST]"
	"[TOOL_CALLS][{\"name\": \"get_weather\", \"arguments\": {\"location\": \"Paris\", \"unit\": \"celsius\"}, "
	"\"id\": \"abcDEF123\"}]</s>"
	"[TOOL_RESULTS]abcDEF123[TOOL_CONTENT]{\"temperature\": 18, \"condition\": \"sunny\"}[/TOOL_RESULTS]"
	"It is 18 degrees and sunny in Paris.</s>"
	"[AVAILABLE_TOOLS][{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"description\": \"Get "
	"the current weather for a city\", \"parameters\": {\"type\": \"object\", \"properties\": {\"location\": "
	"{\"type\": \"string\", \"description\": \"City name, e.g. Z\xc3\xbcrich\"}, \"unit\": {\"type\": \"string\", "
	"\"enum\": [\"celsius\", \"fahrenheit\"]}}, \"required\": [\"location\"]}}}, {\"type\": \"function\", "
	"\"function\": {\"name\": \"get_time\", \"description\": \"Get the current time\"}}][/AVAILABLE_TOOLS]"
	"[INST]Thanks! And what time is it?[/INST]";

START_TEST(mistral_v7_by_mistral_common_rules)
{
	loom_runtime *rt = test_runtime("cpu-generic", 1);
	const char *dir = test_tmp_dir("chat_tools_v7");
	/* Mistral Small 3's template, cut to what tells the family. */
	loom_model *own = marker_model(rt, dir, "small3",
				       "{{- '[SYSTEM_PROMPT]' + system_message + '[/SYSTEM_PROMPT]' }}"
				       "{%- for message in loop_messages %}{{- '[INST]' + message['content'] + '[/INST]' }}"
				       "{%- endfor %}");
	loom_model *plain = marker_model(rt, dir, "plain", NULL);
	ck_assert_str_eq(loom_chat_template(own), "mistral-v7");
	char *sent = with_text_arguments(conversations[0].messages);
	const struct {
		const loom_model *m;
		const char *name;
	} ways[] = {{own, NULL}, {plain, "mistral-v7"}};
	for (size_t i = 0; i < 2; i++) {
		char buf[4096];
		size_t n = 0;
		ck_assert_int_eq(loom_chat_apply_json(ways[i].m, ways[i].name, sent, strlen(sent), tools_json,
						      strlen(tools_json), true, buf, sizeof(buf), &n),
				 LOOM_OK);
		ck_assert_str_eq(buf, mistral_v7_rendered);
		ck_assert_uint_eq(n, strlen(mistral_v7_rendered));
	}
	free(sent);
	loom_model_free(own);
	loom_model_free(plain);
	loom_runtime_free(rt);
}
END_TEST

/* Bad conversations are refused, saying what is wrong. */
START_TEST(bad_conversations_are_refused)
{
	loom_runtime *rt = test_runtime("cpu-generic", 1);
	loom_model *m = marker_model(rt, test_tmp_dir("chat_tools_bad"), "plain", NULL);
	static const struct {
		const char *messages, *tools, *says;
	} bad[] = {
		{"{\"role\": \"user\"}", NULL, "not a JSON array"},
		{"[{\"role\": \"robot\", \"content\": \"hi\"}]", NULL, "role 'robot'"},
		{"[{\"role\": \"user\", \"content\": \"hi\"}, {\"role\": \"system\", \"content\": \"x\"}]", NULL,
		 "system message may only come first"},
		{"[{\"role\": \"assistant\", \"tool_calls\": [{\"function\": {\"name\": \"f\", \"arguments\": \"{oops\"}}]}]",
		 NULL, "'arguments' is not JSON"},
		{"[{\"role\": \"assistant\", \"tool_calls\": [{\"function\": {\"arguments\": \"{}\"}}]}]", NULL, "'name'"},
		{"[{\"role\": \"user\", \"content\": \"x\", \"tool_calls\": []}]", NULL, "only an assistant message"},
		{"[{\"role\": \"tool\", \"tool_call_id\": \"a\"}]", NULL, "needs 'content'"},
		{"[{\"role\": \"user\", \"content\": \"x\"}]", "[{\"type\": \"custom\"}]", "tool 0"},
		{"[{\"role\": \"user\", \"content\": 5}]", NULL, "'content' must be"},
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		char buf[4096];
		size_t n = 0;
		loom_status st = loom_chat_apply_json(m, NULL, bad[i].messages, strlen(bad[i].messages), bad[i].tools,
						      bad[i].tools ? strlen(bad[i].tools) : 0, true, buf, sizeof(buf), &n);
		ck_assert_msg(st == LOOM_ERR_INVALID_ARGUMENT && strstr(loom_last_error(), bad[i].says) != NULL,
			      "%s: status %d, '%s' (expected to say '%s')", bad[i].messages, st, loom_last_error(),
			      bad[i].says);
	}
	loom_model_free(m);
	loom_runtime_free(rt);
}
END_TEST

/* ---- reading calls out of replies ---- */

/* A reply as the model writes it: text, or a marker token (text NULL). */
typedef struct piece {
	const char *text;
	const char *marker;
} piece;

typedef struct read_result {
	char content[2048];
	size_t n_calls;
	char names[8][64];
	char args[8][512];
	bool done[8];
} read_result;

/* The reply read by a reader, its text pieces each cut at cut bytes (0:
 * whole) into steps. Checks on the way that each call's arguments only
 * grow. */
static void read_reply(const loom_model *m, const char *template_name, const piece *pieces, size_t n_pieces, size_t cut,
		       read_result *out)
{
	memset(out, 0, sizeof(*out));
	loom_reply_reader *r = NULL;
	ck_assert_int_eq(loom_reply_reader_create(m, template_name, NULL, 0, &r), LOOM_OK);
	ck_assert_int_eq(loom_reply_reader_read_tools(r, NULL), LOOM_OK);
	size_t len = 0;
	char seen[8][512] = {{0}};
	for (size_t p = 0; p <= n_pieces; p++) {
		/* The pieces, then the end of the reply. */
		const char *text = p < n_pieces ? pieces[p].text : "";
		const size_t n = p < n_pieces && text != NULL ? strlen(text) : 0;
		for (size_t at = 0; at < n || (at == 0 && n == 0); at += cut ? cut : n) {
			const size_t k = cut && at + cut < n ? cut : n - at;
			loom_generated g = {.token = p == n_pieces   ? -1
						     : text == NULL ? marker(m, pieces[p].marker)
								    : SYNTH_TOKEN_BYTE0 + 'a',
					    .text = text != NULL ? text + at : "",
					    .len = k,
					    .done = p == n_pieces};
			loom_reply_parts parts;
			ck_assert_int_eq(loom_reply_reader_push(r, &g, &parts), LOOM_OK);
			ck_assert_uint_lt(len + parts.n_content, sizeof(out->content));
			memcpy(out->content + len, parts.content, parts.n_content);
			len += parts.n_content;
			const loom_tool_call *calls;
			const size_t nc = loom_reply_reader_tool_calls(r, &calls);
			for (size_t i = 0; i < nc && i < 8; i++) {
				ck_assert_msg(strncmp(calls[i].arguments, seen[i], strlen(seen[i])) == 0,
					      "call %zu's arguments went from '%s' to '%.*s'", i, seen[i],
					      (int)calls[i].n_arguments, calls[i].arguments);
				snprintf(seen[i], sizeof(seen[i]), "%.*s", (int)calls[i].n_arguments, calls[i].arguments);
			}
			if (n == 0)
				break;
		}
	}
	const loom_tool_call *calls;
	out->n_calls = loom_reply_reader_tool_calls(r, &calls);
	for (size_t i = 0; i < out->n_calls && i < 8; i++) {
		snprintf(out->names[i], sizeof(out->names[i]), "%s", calls[i].name);
		snprintf(out->args[i], sizeof(out->args[i]), "%.*s", (int)calls[i].n_arguments, calls[i].arguments);
		out->done[i] = calls[i].done;
	}
	ck_assert(!loom_reply_reader_in_tool_call(r));
	loom_reply_reader_free(r);
}

static const struct reply_case {
	const char *what, *template_name;
	piece pieces[8];
	const char *content;
	size_t n_calls;
	const char *names[3], *args[3];
} replies[] = {
	{"Hermes: text, then two calls between marker tokens",
	 "chatml",
	 {{"Let me look.\n", NULL},
	  {NULL, "<tool_call>"},
	  {"\n{\"name\": \"get_weather\", \"arguments\": {\"location\": \"Paris\", \"note\": \"a } and a \\\" inside\"}}\n",
	   NULL},
	  {NULL, "</tool_call>"},
	  {"\n", NULL},
	  {NULL, "<tool_call>"},
	  {"\n{\"name\": \"get_time\", \"arguments\": {}}\n", NULL},
	  {NULL, "</tool_call>"}},
	 "Let me look.\n\n",
	 2,
	 {"get_weather", "get_time"},
	 {"{\"location\": \"Paris\", \"note\": \"a } and a \\\" inside\"}", "{}"}},
	{"Hermes: the markers written as text, a call without arguments, 'name' last",
	 "chatml",
	 {{"Sure.<tool_call>\n{\"arguments\": {\"q\": [1, 2, {\"x\": null}]}, \"name\": \"search\"}\n</tool_call>"
	   "<tool_call>{\"name\": \"ping\"}</tool_call> done <tool_", NULL}},
	 "Sure. done <tool_",
	 2,
	 {"search", "ping"},
	 {"{\"q\": [1, 2, {\"x\": null}]}", "{}"}},
	{"Mistral: an array of calls after [TOOL_CALLS]",
	 "mistral",
	 {{NULL, "[TOOL_CALLS]"},
	  {" [{\"name\": \"get_weather\", \"arguments\": {\"location\": \"Oslo\"}}, {\"name\": \"get_time\", "
	   "\"arguments\": {}, \"id\": \"abcDEF123\"}]",
	   NULL}},
	 "",
	 2,
	 {"get_weather", "get_time"},
	 {"{\"location\": \"Oslo\"}", "{}"}},
	{"Granite: text, then the array after <|tool_call|>",
	 "granite",
	 {{"One moment.", NULL},
	  {NULL, "<|tool_call|>"},
	  {"[{\"name\": \"get_weather\", \"arguments\": {\"location\": \"Oslo\", \"note\": \"a ] inside\"}}, "
	   "{\"name\": \"get_time\", \"arguments\": {}}]",
	   NULL}},
	 "One moment.",
	 2,
	 {"get_weather", "get_time"},
	 {"{\"location\": \"Oslo\", \"note\": \"a ] inside\"}", "{}"}},
	{"Granite: the marker written as text",
	 "granite",
	 {{"<|tool_call|>[{\"name\": \"get_time\", \"arguments\": {}}]", NULL}},
	 "",
	 1,
	 {"get_time"},
	 {"{}"}},
	{"Mistral v7: the array right after [TOOL_CALLS]",
	 "mistral-v7",
	 {{NULL, "[TOOL_CALLS]"}, {"[{\"name\": \"get_time\", \"arguments\": {}, \"id\": \"abcDEF123\"}]", NULL}},
	 "",
	 1,
	 {"get_time"},
	 {"{}"}},
	{"Mistral v11: each call after its [TOOL_CALLS], the id after [CALL_ID], the arguments after [ARGS], as tokens "
	 "and as text",
	 "mistral-v11",
	 {{NULL, "[TOOL_CALLS]"},
	  {"get_weather", NULL},
	  {NULL, "[CALL_ID]"},
	  {"abcDEF123", NULL},
	  {NULL, "[ARGS]"},
	  {"{\"location\": \"Oslo\", \"note\": \"[ARGS] and } inside\"}", NULL},
	  {NULL, "[TOOL_CALLS]"},
	  {"get_time[CALL_ID]xyz789QRS[ARGS]{}", NULL}},
	 "",
	 2,
	 {"get_weather", "get_time"},
	 {"{\"location\": \"Oslo\", \"note\": \"[ARGS] and } inside\"}", "{}"}},
	{"Mistral v13: text, then calls with their markers written as text",
	 "mistral-v13",
	 {{"Checking.[TOOL_CALLS]get_weather[ARGS]{\"location\": \"Lima\", \"days\": [1, 2]}[TOOL_CALLS] search [ARGS] "
	   "{\"q\": \"a [TOOL_CALLS] b\"}",
	   NULL}},
	 "Checking.",
	 2,
	 {"get_weather", "search"},
	 {"{\"location\": \"Lima\", \"days\": [1, 2]}", "{\"q\": \"a [TOOL_CALLS] b\"}"}},
	{"Mistral v13: a call between marker tokens",
	 "mistral-v13",
	 {{"Sure. ", NULL},
	  {NULL, "[TOOL_CALLS]"},
	  {"search", NULL},
	  {NULL, "[ARGS]"},
	  {"{\"q\": [1, {\"x\": null}]}", NULL}},
	 "Sure. ",
	 1,
	 {"search"},
	 {"{\"q\": [1, {\"x\": null}]}"}},
	{"Llama 3: a reply that is a call",
	 "llama3",
	 {{"  {\"name\": \"get_weather\", \"parameters\": {\"location\": \"Lima\", \"days\": 3}}", NULL}},
	 "",
	 1,
	 {"get_weather"},
	 {"{\"location\": \"Lima\", \"days\": 3}"}},
	{"Llama 3: an object that is no call is the answer",
	 "llama3",
	 {{"{\"answer\": 42}", NULL}},
	 "{\"answer\": 42}",
	 0,
	 {NULL},
	 {NULL}},
	{"Llama 3: arguments written as a JSON string",
	 "llama3",
	 {{"{\"name\": \"f\", \"parameters\": \"{\\\"a\\\": 1}\"}", NULL}},
	 "",
	 1,
	 {"f"},
	 {"{\"a\": 1}"}},
	{"loom's generic format: calls",
	 "plain",
	 {{"{\"tool_calls\": [{\"name\": \"get_weather\", \"arguments\": {\"location\": \"Rome\"}}, {\"name\": \"get_time\", "
	   "\"arguments\": {}}]}",
	   NULL}},
	 "",
	 2,
	 {"get_weather", "get_time"},
	 {"{\"location\": \"Rome\"}", "{}"}},
	{"loom's generic format: an answer",
	 "plain",
	 {{"{\"response\": \"It is \\\"sunny\\\" \\u2600\"}", NULL}},
	 "It is \"sunny\" \xe2\x98\x80",
	 0,
	 {NULL},
	 {NULL}},
	{"loom's generic format: plain text is the answer",
	 "plain",
	 {{"Hello there.", NULL}},
	 "Hello there.",
	 0,
	 {NULL},
	 {NULL}},
};

/* Every reply reads the same whether its text comes whole, split in two
 * at any byte, a byte a step or in any other cut: the content without the
 * calls, each call's name and arguments. */
START_TEST(calls_read_the_same_at_every_cut)
{
	loom_runtime *rt = test_runtime("cpu-generic", 1);
	loom_model *m = marker_model(rt, test_tmp_dir("chat_tools_read"), "markers", NULL);
	for (size_t i = 0; i < sizeof(replies) / sizeof(replies[0]); i++) {
		const struct reply_case *c = &replies[i];
		size_t n_pieces = 0;
		while (n_pieces < 8 && (c->pieces[n_pieces].text != NULL || c->pieces[n_pieces].marker != NULL))
			n_pieces++;
		read_result whole;
		read_reply(m, c->template_name, c->pieces, n_pieces, 0, &whole);
		ck_assert_msg(strcmp(whole.content, c->content) == 0, "%s: content '%s', expected '%s'", c->what,
			      whole.content, c->content);
		ck_assert_msg(whole.n_calls == c->n_calls, "%s: %zu calls, expected %zu", c->what, whole.n_calls,
			      c->n_calls);
		for (size_t k = 0; k < c->n_calls; k++) {
			ck_assert_str_eq(whole.names[k], c->names[k]);
			ck_assert_msg(strcmp(whole.args[k], c->args[k]) == 0, "%s: call %zu's arguments '%s', expected '%s'",
				      c->what, k, whole.args[k], c->args[k]);
			ck_assert(whole.done[k]);
			cJSON *j = cJSON_Parse(whole.args[k]);
			ck_assert_msg(cJSON_IsObject(j), "%s: arguments '%s' are no JSON object", c->what, whole.args[k]);
			cJSON_Delete(j);
		}
		for (size_t cut = 1; cut < 40; cut++) {
			read_result split;
			read_reply(m, c->template_name, c->pieces, n_pieces, cut, &split);
			ck_assert_msg(strcmp(split.content, whole.content) == 0 && split.n_calls == whole.n_calls,
				      "%s, cut every %zu bytes: content '%s', %zu calls", c->what, cut, split.content,
				      split.n_calls);
			for (size_t k = 0; k < whole.n_calls; k++)
				ck_assert_msg(strcmp(split.names[k], whole.names[k]) == 0 &&
						      strcmp(split.args[k], whole.args[k]) == 0,
					      "%s, cut every %zu bytes: call %zu is %s(%s)", c->what, cut, k, split.names[k],
					      split.args[k]);
		}
		/* Every two-way split of every piece of text. */
		int splits = 0;
		for (size_t j = 0; j < n_pieces; j++) {
			const char *text = c->pieces[j].text;
			for (size_t q = 1; text != NULL && q < strlen(text); q++) {
				piece split_pieces[9];
				char *front = strndup(text, q);
				size_t n = 0;
				for (size_t i = 0; i < n_pieces; i++) {
					if (i == j) {
						split_pieces[n++] = (piece){front, NULL};
						split_pieces[n++] = (piece){text + q, NULL};
					} else {
						split_pieces[n++] = c->pieces[i];
					}
				}
				read_result split;
				read_reply(m, c->template_name, split_pieces, n, 0, &split);
				ck_assert_msg(strcmp(split.content, whole.content) == 0 && split.n_calls == whole.n_calls,
					      "%s, split at byte %zu of piece %zu: content '%s', %zu calls", c->what, q, j,
					      split.content, split.n_calls);
				for (size_t k = 0; k < whole.n_calls; k++)
					ck_assert_msg(strcmp(split.args[k], whole.args[k]) == 0 &&
							      strcmp(split.names[k], whole.names[k]) == 0,
						      "%s, split at byte %zu of piece %zu: call %zu is %s(%s)", c->what, q, j, k,
						      split.names[k], split.args[k]);
				free(front);
				splits++;
			}
		}
		printf("%s: %zu calls, content '%s'; the same at %d splits\n", c->what, whole.n_calls, whole.content,
		       splits);
	}
	loom_model_free(m);
	loom_runtime_free(rt);
}
END_TEST

/* gpt-oss's reply: reasoning on the analysis channel, then a message
 * to=functions.get_weather on the commentary channel whose text is the
 * arguments, token by token as the model writes it; and the same call
 * when the prompt opened it (named), read from the opening on. */
START_TEST(harmony_calls_are_messages_to_functions)
{
	loom_runtime *rt = test_runtime("cpu-generic", 1);
	loom_model *m = marker_model(rt, test_tmp_dir("chat_tools_harmony"), "markers", NULL);
	static const char *const reply[] = {"<|channel|>", "analysis", "<|message|>", "Need the weather.", "<|end|>",
					    "<|start|>", "assistant", "<|channel|>", "commentary to=functions.get_weather ",
					    "<|constrain|>", "json", "<|message|>", "{\"location\": \"Oslo\"}", "<|call|>"};
	for (int named = 0; named < 2; named++) {
		loom_reply_reader *r = NULL;
		ck_assert_int_eq(loom_reply_reader_create(m, "harmony", NULL, 0, &r), LOOM_OK);
		char opening[256];
		size_t n_opening = 0;
		unsigned flags = 0;
		ck_assert_int_eq(loom_tool_call_opening(m, "harmony", named ? "get_weather" : NULL, opening, sizeof(opening),
							&n_opening, &flags),
				 LOOM_OK);
		ck_assert_uint_eq(flags, LOOM_TOOL_OPENING_BY_NAME);
		ck_assert_int_eq(loom_reply_reader_read_tools(r, named ? opening : NULL), LOOM_OK);
		ck_assert(loom_reply_reader_in_tool_call(r) == (named == 1));
		char reasoning[256] = "", content[256] = "";
		const size_t first = named ? 12 : 0, n = sizeof(reply) / sizeof(reply[0]);
		for (size_t i = first; i < n; i++) {
			loom_token toks[64];
			size_t nt = 0;
			ck_assert(loom_tokenize(m, reply[i], strlen(reply[i]), false, true, toks, 64, &nt) == LOOM_OK);
			for (size_t k = 0; k < nt; k++) {
				char piece[64];
				size_t len = 0;
				ck_assert(loom_token_to_piece(m, toks[k], false, piece, sizeof(piece), &len) == LOOM_OK);
				const loom_generated g = {.token = toks[k], .text = piece, .len = len,
							  .done = i + 1 == n && k + 1 == nt};
				loom_reply_parts parts;
				ck_assert_int_eq(loom_reply_reader_push(r, &g, &parts), LOOM_OK);
				strncat(reasoning, parts.reasoning, parts.n_reasoning);
				strncat(content, parts.content, parts.n_content);
				if (i == 12 && k + 1 < nt)
					ck_assert(loom_reply_reader_in_tool_call(r));
			}
		}
		const loom_tool_call *calls;
		ck_assert_uint_eq(loom_reply_reader_tool_calls(r, &calls), 1);
		ck_assert_str_eq(calls[0].name, "get_weather");
		ck_assert_str_eq(calls[0].arguments, "{\"location\": \"Oslo\"}");
		ck_assert(calls[0].done && !loom_reply_reader_in_tool_call(r));
		ck_assert_str_eq(content, "");
		/* (The synthetic vocabulary's SentencePiece puts a space in
		 * front of each piece tokenized alone.) */
		ck_assert_str_eq(reasoning + strspn(reasoning, " "), named ? "" : "Need the weather.");
		loom_reply_reader_free(r);
	}
	loom_model_free(m);
	loom_runtime_free(rt);
}
END_TEST

/* ---- the grammar of calls ---- */

static loom_grammar *tool_grammar(const loom_model *m, const char *template_name, const char *only, unsigned flags)
{
	loom_grammar *g = NULL;
	ck_assert_msg(loom_tool_grammar(m, template_name, tools_json, strlen(tools_json), only, flags, &g) == LOOM_OK,
		      "%s: %s", template_name, loom_last_error());
	return g;
}

/* Whether g takes the pieces (text, or a marker as its token) whole. */
static bool grammar_takes_pieces(const loom_model *m, const loom_grammar *g, const piece *pieces, size_t n)
{
	loom_gr_matcher mt;
	ck_assert_int_eq(loom_gr_matcher_init(&mt, g), LOOM_OK);
	bool ok = true;
	for (size_t i = 0; i < n && ok; i++)
		ok = pieces[i].text != NULL
			     ? loom_gr_matcher_accept(&mt, (const unsigned char *)pieces[i].text, strlen(pieces[i].text))
			     : loom_gr_matcher_accept_token(&mt, marker(m, pieces[i].marker));
	ok = ok && loom_gr_can_end(mt.state);
	loom_gr_matcher_free(&mt);
	return ok;
}

/* Mistral's calls from its v11 tokenizer: one call a grammar, NAME and
 * its arguments around the [ARGS] token ([CALL_ID] and an id before it in
 * v11), which is the only token the grammar allows after the name. */
static void mistral_args_grammars(const loom_model *m)
{
	loom_grammar *v13 = tool_grammar(m, "mistral-v13", NULL, LOOM_TOOL_GRAMMAR_PARALLEL);
	const piece weather[] = {{"get_weather", NULL}, {NULL, "[ARGS]"}, {"{\"location\": \"Paris\"}", NULL}};
	const piece time[] = {{"get_time", NULL}, {NULL, "[ARGS]"}, {"{}", NULL}};
	const piece no_location[] = {{"get_weather", NULL}, {NULL, "[ARGS]"}, {"{\"unit\": \"celsius\"}", NULL}};
	const piece as_text[] = {{"get_weather[ARGS]{\"location\": \"Paris\"}", NULL}};
	const piece two[] = {{"get_time", NULL}, {NULL, "[ARGS]"}, {"{}", NULL}, {NULL, "[TOOL_CALLS]"},
			     {"get_time", NULL}};
	const piece with_id[] = {{"get_weather", NULL}, {NULL, "[CALL_ID]"}, {"abcDEF123", NULL}, {NULL, "[ARGS]"},
				 {"{\"location\": \"Paris\"}", NULL}};
	const piece short_id[] = {{"get_weather", NULL}, {NULL, "[CALL_ID]"}, {"abc", NULL}, {NULL, "[ARGS]"},
				  {"{\"location\": \"Paris\"}", NULL}};
	ck_assert(grammar_takes_pieces(m, v13, weather, 3) && grammar_takes_pieces(m, v13, time, 3));
	ck_assert(!grammar_takes_pieces(m, v13, no_location, 3));
	ck_assert(!grammar_takes_pieces(m, v13, as_text, 1)); /* [ARGS] is a token of this vocabulary */
	ck_assert(!grammar_takes_pieces(m, v13, two, 5));     /* the next call is armed at its own marker */
	ck_assert(!grammar_takes_pieces(m, v13, with_id, 5));
	/* After the name, the [ARGS] token alone. */
	loom_gr_matcher mt;
	ck_assert_int_eq(loom_gr_matcher_init(&mt, v13), LOOM_OK);
	ck_assert(loom_gr_matcher_accept(&mt, (const unsigned char *)"get_weather", 11));
	const loom_token_trie *t = loom_model_token_trie(m);
	ck_assert_ptr_nonnull(t);
	uint32_t *bits = calloc(((size_t)t->n_vocab + 31) / 32, sizeof(uint32_t));
	loom_trie_walk walk = {0};
	int32_t n_allowed = 0;
	ck_assert_int_eq(loom_token_trie_mask(t, &walk, &mt.arena, v13, mt.state, bits, &n_allowed), LOOM_OK);
	const loom_token args = marker(m, "[ARGS]");
	ck_assert_int_eq(n_allowed, 1);
	ck_assert((bits[args / 32] >> (args % 32)) & 1);
	bool error = true;
	ck_assert(loom_token_trie_allows(t, &mt.arena, v13, mt.state, args, &error) && !error);
	ck_assert(!loom_token_trie_allows(t, &mt.arena, v13, mt.state, marker(m, "[CALL_ID]"), &error));
	loom_trie_walk_free(&walk);
	free(bits);
	loom_gr_matcher_free(&mt);
	loom_grammar *named = tool_grammar(m, "mistral-v13", "get_time", 0);
	ck_assert(grammar_takes_pieces(m, named, time, 3) && !grammar_takes_pieces(m, named, weather, 3));
	loom_grammar *v11 = tool_grammar(m, "mistral-v11", NULL, 0);
	ck_assert(grammar_takes_pieces(m, v11, with_id, 5) && grammar_takes_pieces(m, v11, weather, 3));
	ck_assert(!grammar_takes_pieces(m, v11, short_id, 5));
	loom_grammar *v7 = tool_grammar(m, "mistral-v7", NULL, 0);
	ck_assert(grammar_takes(v7, "[{\"name\": \"get_time\", \"arguments\": {}, \"id\": \"abcDEF123\"}]"));
	ck_assert(!grammar_takes(v7, "[{\"name\": \"get_time\", \"arguments\": {}}, {\"name\": \"get_time\", "
				     "\"arguments\": {}}]"));
	loom_grammar_free(v13);
	loom_grammar_free(named);
	loom_grammar_free(v11);
	loom_grammar_free(v7);
}

START_TEST(grammar_takes_calls_of_the_tools_only)
{
	loom_runtime *rt = test_runtime("cpu-generic", 1);
	loom_model *m = marker_model(rt, test_tmp_dir("chat_tools_grammar"), "markers", NULL);
	const unsigned P = LOOM_TOOL_GRAMMAR_PARALLEL, W = LOOM_TOOL_GRAMMAR_WHOLE_REPLY, A = LOOM_TOOL_GRAMMAR_ANSWER;
	static const char weather[] = "{\"name\": \"get_weather\", \"arguments\": {\"location\": \"Paris\"}}";
	loom_grammar *hermes = tool_grammar(m, "chatml", NULL, P);
	ck_assert(grammar_takes(hermes, "\n{\"name\": \"get_weather\", \"arguments\": {\"location\": \"Paris\", \"unit\": "
					"\"celsius\"}}\n"));
	ck_assert(grammar_takes(hermes, "{\"name\": \"get_time\", \"arguments\": {}}"));
	ck_assert(!grammar_takes(hermes, "{\"name\": \"get_wether\", \"arguments\": {\"location\": \"Paris\"}}"));
	ck_assert(!grammar_takes(hermes, "{\"name\": \"get_weather\", \"arguments\": {\"unit\": \"celsius\"}}"));
	ck_assert(!grammar_takes(hermes, "{\"name\": \"get_weather\", \"arguments\": {\"location\": \"P\", \"unit\": "
					 "\"kelvin\"}}"));
	ck_assert(!grammar_takes(hermes, "{\"name\": \"get_time\", \"arguments\": {\"x\": 1}}"));
	ck_assert(grammar_starts(hermes, "{\"name\": \"get_"));
	loom_grammar *named = tool_grammar(m, "chatml", "get_time", 0);
	ck_assert(!grammar_takes(named, weather));
	ck_assert(grammar_takes(named, "{\"name\": \"get_time\", \"arguments\": {}}"));
	loom_grammar *mistral = tool_grammar(m, "mistral", NULL, P), *single = tool_grammar(m, "mistral", NULL, 0);
	char two[512];
	snprintf(two, sizeof(two), " [%s, {\"name\": \"get_time\", \"arguments\": {}}]", weather);
	ck_assert(grammar_takes(mistral, two));
	ck_assert(!grammar_takes(single, two));
	ck_assert(grammar_takes(single, " [{\"name\": \"get_time\", \"arguments\": {}, \"id\": \"abcDEF123\"}]"));
	/* Granite: Mistral's array, without ids. */
	loom_grammar *granite = tool_grammar(m, "granite", NULL, P);
	ck_assert(grammar_takes(granite, two + 1));
	ck_assert(!grammar_takes(granite, "[{\"name\": \"get_time\", \"arguments\": {}, \"id\": \"abcDEF123\"}]"));
	ck_assert(!grammar_takes(granite, "[{\"name\": \"get_wether\", \"arguments\": {}}]"));
	loom_grammar_free(granite);
	loom_grammar *llama = tool_grammar(m, "llama3", NULL, W | A), *llama_call = tool_grammar(m, "llama3", NULL, W);
	ck_assert(grammar_takes(llama, "{\"name\": \"get_weather\", \"parameters\": {\"location\": \"Paris\"}}"));
	ck_assert(!grammar_takes(llama, weather)); /* Llama 3 names them parameters */
	ck_assert(grammar_takes(llama, "It is sunny."));
	ck_assert(!grammar_takes(llama_call, "It is sunny."));
	loom_grammar *generic = tool_grammar(m, "plain", NULL, W | A | P);
	char calls[512];
	snprintf(calls, sizeof(calls), "{\"tool_calls\": [%s]}", weather);
	ck_assert(grammar_takes(generic, calls));
	ck_assert(grammar_takes(generic, "{\"response\": \"Hi.\"}"));
	ck_assert(!grammar_takes(generic, "Hi."));
	loom_grammar *harmony = tool_grammar(m, "harmony", "get_weather", 0);
	ck_assert(grammar_takes(harmony, "{\"location\": \"Paris\", \"unit\": \"celsius\"}"));
	ck_assert(!grammar_takes(harmony, "{}"));
	ck_assert(!grammar_takes(harmony, weather));
	loom_grammar_free(harmony);
	mistral_args_grammars(m);
	/* What loom cannot build is refused, saying why. */
	loom_grammar *g = NULL;
	ck_assert_int_eq(loom_tool_grammar(m, "chatml", tools_json, strlen(tools_json), "nope", 0, &g),
			 LOOM_ERR_INVALID_ARGUMENT);
	ck_assert_ptr_nonnull(strstr(loom_last_error(), "no tool is named 'nope'"));
	static const char bad_schema[] = "[{\"type\": \"function\", \"function\": {\"name\": \"f\", \"parameters\": "
					 "{\"type\": \"object\", \"properties\": {\"a\": {\"not\": {}}}}}}]";
	ck_assert_int_eq(loom_tool_grammar(m, "chatml", bad_schema, strlen(bad_schema), NULL, 0, &g),
			 LOOM_ERR_INVALID_ARGUMENT);
	ck_assert_ptr_nonnull(strstr(loom_last_error(), "not"));
	ck_assert_int_eq(loom_tool_grammar(m, "chatml", tools_json, strlen(tools_json), NULL, W, &g),
			 LOOM_ERR_INVALID_ARGUMENT);
	loom_grammar_free(hermes);
	loom_grammar_free(named);
	loom_grammar_free(mistral);
	loom_grammar_free(single);
	loom_grammar_free(llama);
	loom_grammar_free(llama_call);
	loom_grammar_free(generic);
	loom_model_free(m);
	loom_runtime_free(rt);
}
END_TEST

/* Texts sampled from random logits under each format's grammar read as
 * calls of the tools: a known name, arguments a JSON object with the
 * required location and a unit from the enum. */
START_TEST(sampled_calls_read_as_calls_of_the_tools)
{
	loom_runtime *rt = test_runtime("cpu-generic", 1);
	loom_model *m = marker_model(rt, test_tmp_dir("chat_tools_sample"), "markers", NULL);
	static const struct {
		const char *template_name, *opening;
		unsigned flags;
	} formats[] = {
		{"chatml", "<tool_call>", LOOM_TOOL_GRAMMAR_PARALLEL},
		{"mistral", "[TOOL_CALLS]", LOOM_TOOL_GRAMMAR_PARALLEL},
		{"mistral-v7", "[TOOL_CALLS]", LOOM_TOOL_GRAMMAR_PARALLEL},
		{"granite", "<|tool_call|>", LOOM_TOOL_GRAMMAR_PARALLEL},
		/* One call a grammar: [ARGS] (and v11's [CALL_ID]) tokens
		 * in it, read back as their text. */
		{"mistral-v11", "[TOOL_CALLS]", 0},
		{"mistral-v13", "[TOOL_CALLS]", 0},
		{"llama3", NULL, LOOM_TOOL_GRAMMAR_WHOLE_REPLY},
		{"plain", NULL, LOOM_TOOL_GRAMMAR_WHOLE_REPLY | LOOM_TOOL_GRAMMAR_PARALLEL},
	};
	uint64_t x = 2024;
	int n_calls = 0, ended = 0;
	for (size_t f = 0; f < sizeof(formats) / sizeof(formats[0]); f++) {
		loom_grammar *g = tool_grammar(m, formats[f].template_name, NULL, formats[f].flags);
		for (int seed = 0; seed < 25; seed++) {
			char text[2048];
			size_t len = 0;
			if (!grammar_sample_text(m, g, (uint64_t)seed, &x, 25.0f, 300, text, sizeof(text), &len))
				continue;
			ended++;
			read_result got;
			const piece pieces[2] = {{formats[f].opening != NULL ? NULL : text, formats[f].opening},
						 {text, NULL}};
			read_reply(m, formats[f].template_name, formats[f].opening != NULL ? pieces : pieces + 1,
				   formats[f].opening != NULL ? 2 : 1, 0, &got);
			ck_assert_msg(got.n_calls >= 1, "%s: no call read from %s", formats[f].template_name, text);
			for (size_t k = 0; k < got.n_calls; k++) {
				cJSON *args = cJSON_Parse(got.args[k]);
				ck_assert_msg(cJSON_IsObject(args) && got.done[k], "%s: %s", formats[f].template_name, text);
				if (strcmp(got.names[k], "get_weather") == 0) {
					const cJSON *loc = cJSON_GetObjectItemCaseSensitive(args, "location");
					const cJSON *unit = cJSON_GetObjectItemCaseSensitive(args, "unit");
					ck_assert_msg(cJSON_IsString(loc), "%s", text);
					ck_assert(unit == NULL || (cJSON_IsString(unit) && (strcmp(unit->valuestring, "celsius") == 0 ||
											    strcmp(unit->valuestring, "fahrenheit") == 0)));
				} else {
					ck_assert_str_eq(got.names[k], "get_time");
					ck_assert_int_eq(cJSON_GetArraySize(args), 0);
				}
				cJSON_Delete(args);
				n_calls++;
			}
			if (seed == 0)
				printf("%s: %s\n", formats[f].template_name, text);
		}
		loom_grammar_free(g);
	}
	printf("%d replies ended, %d calls read, each of a tool with arguments its schema takes\n", ended, n_calls);
	ck_assert_int_ge(ended, 60);
	loom_model_free(m);
	loom_runtime_free(rt);
}
END_TEST

static Suite *chat_tools_suite(void)
{
	Suite *s = suite_create("chat_tools");
	TCase *tc = tcase_create("tools");
	tcase_set_timeout(tc, 300);
	tcase_add_test(tc, renders_as_the_models_own_templates);
	tcase_add_test(tc, reasoning_as_the_models_own_templates);
	tcase_add_test(tc, mistral_v7_by_mistral_common_rules);
	tcase_add_test(tc, bad_conversations_are_refused);
	tcase_add_test(tc, calls_read_the_same_at_every_cut);
	tcase_add_test(tc, harmony_calls_are_messages_to_functions);
	tcase_add_test(tc, grammar_takes_calls_of_the_tools_only);
	tcase_add_test(tc, sampled_calls_read_as_calls_of_the_tools);
	suite_add_tcase(s, tc);
	return s;
}

LOOM_TEST_MAIN(chat_tools_suite)
