/* chat_json.h - conversations as the OpenAI chat API sends them (JSON
 * messages, tools, tool calls and their results), formatted with each
 * template family's tool format (chat_json.c), and what the tool formats
 * share with the reply reader and the call grammar. */
#ifndef LOOM_CHAT_JSON_H
#define LOOM_CHAT_JSON_H

#include "loom.h"
#include "text/chat_template.h"

#include <cjson/cJSON.h>

/* How a family writes tools, calls and results. */
typedef enum loom_tool_style {
	LOOM_TOOL_GENERIC, /* loom's own: the whole reply a JSON object (any family) */
	LOOM_TOOL_HERMES,  /* <tool_call>{"name": ..., "arguments": ...}</tool_call> (Qwen 2.5, Qwen 3) */
	LOOM_TOOL_LLAMA3,  /* a reply that is {"name": ..., "parameters": ...} (Llama 3.1-3.3) */
	LOOM_TOOL_MISTRAL, /* [TOOL_CALLS] [{"name": ..., "arguments": ...}, ...] (Mistral v3 tokenizers) */
	LOOM_TOOL_HARMONY, /* a message to=functions.NAME whose text is the arguments (gpt-oss) */
} loom_tool_style;

loom_tool_style loom_tool_style_of(loom_chat_kind kind);

/* The family a template name (NULL: the model's own) is, checked. */
loom_status loom_chat_kind_named(const loom_model *model, const char *template_name, loom_chat_kind *out);

#endif
