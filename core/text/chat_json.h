/* chat_json.h - conversations as the OpenAI chat API sends them (JSON
 * messages, tools, tool calls and their results), formatted with each
 * template family's tool format (chat_json.c), and what the tool formats
 * share with the reply reader and the call grammar. */
#ifndef LOOM_CHAT_JSON_H
#define LOOM_CHAT_JSON_H

#include "loom.h"
#include "text/chat_template.h"
#include "text/json_text.h"

#include <cjson/cJSON.h>

/* How a family writes tools, calls and results. */
typedef enum loom_tool_style {
	LOOM_TOOL_GENERIC, /* loom's own: the whole reply a JSON object (any family) */
	LOOM_TOOL_HERMES,  /* <tool_call>{"name": ..., "arguments": ...}</tool_call> (Qwen 2.5, Qwen 3) */
	LOOM_TOOL_LLAMA3,  /* a reply that is {"name": ..., "parameters": ...} (Llama 3.1-3.3) */
	LOOM_TOOL_MISTRAL, /* [TOOL_CALLS] [{"name": ..., "arguments": ...}, ...] (Mistral v3 and v7 tokenizers) */
	LOOM_TOOL_MISTRAL_ARGS, /* [TOOL_CALLS]NAME[ARGS]{...} a call, [CALL_ID]ID before [ARGS] in v11 (Mistral
				 * v11 and v13 tokenizers) */
	LOOM_TOOL_HARMONY, /* a message to=functions.NAME whose text is the arguments (gpt-oss) */
	LOOM_TOOL_GRANITE, /* <|tool_call|>[{"name": ..., "arguments": ...}, ...] (Granite 3) */
} loom_tool_style;

loom_tool_style loom_tool_style_of(loom_chat_kind kind);
/* How a style's calls look, in a few words (loom info). */
const char *loom_tool_style_described(loom_tool_style style);

/* The family a template name (NULL: the model's own) is, checked. */
loom_status loom_chat_kind_named(const loom_model *model, const char *template_name, loom_chat_kind *out);

/* loom_chat_apply's conversation (messages already checked) in the
 * model's own template where loom knows what it adds to its family's
 * turns (Qwen 2.5's default system message, Qwen 3's reasoning history,
 * Llama 3.1's dated system block, Mistral v3's spacing and system
 * text before the last question), written to out with *st its status;
 * false when the model's template has nothing of the kind (the family's
 * plain format applies). */
/* Whether the model's own template opens every reply in <think> (Qwen 3's
 * thinking-only releases): the reply starts in its reasoning. */
bool loom_chat_opens_thinking(const loom_model *model);

/* What the model's own template lets a request choose of its reasoning,
 * in words (`loom info`); NULL where it does not reason. */
const char *loom_chat_reasoning_offered(const loom_model *model);

bool loom_chat_format_model(const loom_model *model, const loom_chat_message *msgs, size_t n, bool add_assistant,
			    loom_strbuf *out, loom_status *st);

#endif
