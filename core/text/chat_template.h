/* chat_template.h - chat templates: recognising a model's, and formatting a
 * conversation with one (chat_template.c). */
#ifndef LOOM_CHAT_TEMPLATE_H
#define LOOM_CHAT_TEMPLATE_H

#include "loom.h"

#include <stdbool.h>
#include <stddef.h>

typedef enum loom_chat_kind {
	LOOM_CHAT_CHATML,
	LOOM_CHAT_LLAMA2,
	LOOM_CHAT_LLAMA3,
	LOOM_CHAT_MISTRAL,
	LOOM_CHAT_ZEPHYR,
	LOOM_CHAT_PHI3,
	LOOM_CHAT_GEMMA,
	LOOM_CHAT_PLAIN, /* "System: ...\nUser: ...\nAssistant: " for a template loom does not know */
	LOOM_CHAT_HARMONY, /* gpt-oss's: messages on channels (analysis, commentary, final) */
	/* Mistral's later tokenizers: the system prompt in [SYSTEM_PROMPT]
	 * first, [INST] without spaces, and their own tool calls. */
	LOOM_CHAT_MISTRAL_V7,  /* Mistral Small 3, 3.1 */
	LOOM_CHAT_MISTRAL_V11, /* Mistral Small 3.2: [TOOL_CALLS]name[CALL_ID]id[ARGS]{...} */
	LOOM_CHAT_MISTRAL_V13, /* Magistral 2509, Devstral, Ministral 3: [TOOL_CALLS]name[ARGS]{...} */
	LOOM_CHAT_GLM4,        /* GLM-4: [gMASK]<sop>, then <|role|>\ncontent a turn */
	LOOM_CHAT_GRANITE,     /* IBM Granite 3: <|start_of_role|>role<|end_of_role|>content<|end_of_text|>\n */
	LOOM_CHAT_COMMAND_R7B, /* Cohere Command R7B: <|START_OF_TURN_TOKEN|> turns, replies in <|START_RESPONSE|> */
	LOOM_CHAT_TULU,        /* OLMo 2, OLMoE, Tulu 3: <|role|>\ncontent\n, replies ending in EOS */
	LOOM_CHAT_DOTS1,       /* dots.llm1: <|userprompt|>...<|endofuserprompt|><|response|>...<|endofresponse|> */
	LOOM_CHAT_COUNT
} loom_chat_kind;

/* The families' names, in loom_chat_kind order, then NULL. */
extern const char *const loom_chat_template_names[LOOM_CHAT_COUNT + 1];

const char *loom_chat_template_name(loom_chat_kind kind);
bool loom_chat_template_by_name(const char *name, loom_chat_kind *out);

/* The family of a Jinja template (GGUF tokenizer.chat_template), by the
 * markers it emits; false if none is recognised. */
bool loom_chat_template_detect(const char *jinja, size_t len, loom_chat_kind *out);

/* s without leading and trailing white space (a template's `| trim`):
 * where it begins in s, *len its length. */
const char *loom_chat_trim(const char *s, size_t *len);

/* Whether messages are a conversation loom_chat_apply takes (roles
 * system, first only, user and assistant; text in each). */
loom_status loom_chat_check_messages(const loom_chat_message *msgs, size_t n);

/* Formats as loom_chat_apply does (loom.h), with a given family. */
loom_status loom_chat_format(loom_chat_kind kind, const loom_chat_message *msgs, size_t n, bool add_assistant,
			     char *buf, size_t size, size_t *n_out);
/* The same for a model: a family that writes the end-of-sequence token
 * after a reply writes the model's (NULL: OLMo's <|endoftext|>). */
loom_status loom_chat_format_for(const loom_model *model, loom_chat_kind kind, const loom_chat_message *msgs, size_t n,
				 bool add_assistant, char *buf, size_t size, size_t *n_out);

/* The model's template, found once at load: its file's, if recognised;
 * else its contract's chat_template; else plain (with a warning when the
 * file had one). *source says where it came from, in words. */
loom_chat_kind loom_chat_template_resolve(const loom_model *m, const char **source);

#endif
