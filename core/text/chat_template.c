/*
 * chat_template.c - a conversation as the prompt text a chat model was
 * trained on.
 *
 * A GGUF file carries its template as Jinja source
 * (tokenizer.chat_template). loom runs no Jinja: it recognises the common
 * families by the markers their templates emit and formats with its own
 * code for each, as llama.cpp does. The text never holds BOS: the
 * tokenizer adds it as the model asks. Messages are (role, content) with
 * the roles system, user and assistant; a family without a system turn
 * puts the system text in front of the first user message.
 */
#include "text/chat_template.h"

#include "text/chat_json.h"

#include "model/meta.h"
#include "model/model.h"
#include "runtime/error.h"
#include "runtime/log.h"
#include "runtime/struct_size.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *const loom_chat_template_names[LOOM_CHAT_COUNT + 1] = {
	[LOOM_CHAT_CHATML] = "chatml", [LOOM_CHAT_LLAMA2] = "llama2", [LOOM_CHAT_LLAMA3] = "llama3",
	[LOOM_CHAT_MISTRAL] = "mistral", [LOOM_CHAT_ZEPHYR] = "zephyr", [LOOM_CHAT_PHI3] = "phi3",
	[LOOM_CHAT_GEMMA] = "gemma",   [LOOM_CHAT_PLAIN] = "plain", [LOOM_CHAT_HARMONY] = "harmony",
	[LOOM_CHAT_MISTRAL_V7] = "mistral-v7", [LOOM_CHAT_MISTRAL_V11] = "mistral-v11",
	[LOOM_CHAT_MISTRAL_V13] = "mistral-v13", [LOOM_CHAT_GLM4] = "glm4", [LOOM_CHAT_GRANITE] = "granite",
	[LOOM_CHAT_COMMAND_R7B] = "command-r7b",
	[LOOM_CHAT_TULU] = "tulu", [LOOM_CHAT_DOTS1] = "dots1",
};

const char *loom_chat_template_name(loom_chat_kind kind)
{
	return loom_chat_template_names[kind];
}

bool loom_chat_template_by_name(const char *name, loom_chat_kind *out)
{
	for (int k = 0; k < LOOM_CHAT_COUNT; k++) {
		if (strcmp(loom_chat_template_names[k], name) == 0) {
			*out = (loom_chat_kind)k;
			return true;
		}
	}
	return false;
}

bool loom_chat_template_detect(const char *jinja, size_t len, loom_chat_kind *out)
{
	char *t = strndup(jinja, len);
	bool found = true;

	if (t == NULL)
		return false;
	if (strstr(t, "<|start|>") && strstr(t, "<|channel|>"))
		*out = LOOM_CHAT_HARMONY;
	else if (strstr(t, "[gMASK]<sop>"))
		*out = LOOM_CHAT_GLM4;
	else if (strstr(t, "<|start_of_role|>") && strstr(t, "<|end_of_role|>"))
		*out = LOOM_CHAT_GRANITE;
	else if (strstr(t, "<|START_OF_TURN_TOKEN|>") && strstr(t, "<|START_RESPONSE|>"))
		*out = LOOM_CHAT_COMMAND_R7B;
	else if (strstr(t, "<|userprompt|>") && strstr(t, "<|endofuserprompt|>"))
		*out = LOOM_CHAT_DOTS1;
	else if (strstr(t, "<|im_start|>"))
		*out = LOOM_CHAT_CHATML;
	else if (strstr(t, "<|start_header_id|>"))
		*out = LOOM_CHAT_LLAMA3;
	else if (strstr(t, "<start_of_turn>"))
		*out = LOOM_CHAT_GEMMA;
	else if (strstr(t, "<|end|>") && strstr(t, "<|assistant|>"))
		*out = LOOM_CHAT_PHI3;
	else if (strstr(t, "<|user|>") && strstr(t, "<|assistant|>") && strstr(t, "not loop.last"))
		*out = LOOM_CHAT_TULU;
	else if (strstr(t, "<|user|>") && strstr(t, "<|assistant|>"))
		*out = LOOM_CHAT_ZEPHYR;
	else if (strstr(t, "[INST]") && strstr(t, "[SYSTEM_PROMPT]"))
		/* The tokenizer's version by its call markers: ids before the
		 * arguments (v11), the arguments alone (v13), or a JSON array. */
		*out = strstr(t, "[CALL_ID]") ? LOOM_CHAT_MISTRAL_V11
		       : strstr(t, "[ARGS]")  ? LOOM_CHAT_MISTRAL_V13
					      : LOOM_CHAT_MISTRAL_V7;
	else if (strstr(t, "[INST]"))
		*out = strstr(t, "<<SYS>>") ? LOOM_CHAT_LLAMA2 : LOOM_CHAT_MISTRAL;
	else
		found = false;
	free(t);
	return found;
}

/* ---- formatting ---- */

typedef struct out_text {
	char *buf;
	size_t size, len; /* len counts what did not fit too */
} out_text;

static void put_n(out_text *o, const char *s, size_t n)
{
	if (o->len < o->size) {
		size_t room = o->size - o->len - 1;
		memcpy(o->buf + o->len, s, n < room ? n : room);
	}
	o->len += n;
}

static void put(out_text *o, const char *s)
{
	put_n(o, s, strlen(s));
}

const char *loom_chat_trim(const char *s, size_t *len)
{
	size_t n = strlen(s);
	while (n > 0 && isspace((unsigned char)*s))
		s++, n--;
	while (n > 0 && isspace((unsigned char)s[n - 1]))
		n--;
	*len = n;
	return s;
}

/* s without leading and trailing white space (Llama 3's `| trim`). */
static void put_trimmed(out_text *o, const char *s)
{
	size_t n;
	s = loom_chat_trim(s, &n);
	put_n(o, s, n);
}

static bool is_role(const loom_chat_message *m, const char *role)
{
	return strcmp(m->role, role) == 0;
}

/* The families whose turns are one marker, the role, the content and an
 * end marker. */
static void put_turns(out_text *o, const loom_chat_message *msgs, size_t n, bool add_assistant, const char *start,
		      const char *after_role, const char *end)
{
	for (size_t i = 0; i < n; i++) {
		put(o, start);
		put(o, msgs[i].role);
		put(o, after_role);
		put(o, msgs[i].content);
		put(o, end);
	}
	if (add_assistant) {
		put(o, start);
		put(o, "assistant");
		put(o, after_role);
	}
}

/* Llama 2, Mistral and Gemma have no system turn: its text goes in front
 * of the first user message. */
static const char *system_text(const loom_chat_message *msgs, size_t n, size_t *first)
{
	*first = 0;
	if (n > 0 && is_role(&msgs[0], "system")) {
		*first = 1;
		return msgs[0].content;
	}
	return NULL;
}

static void put_inst(out_text *o, const loom_chat_message *msgs, size_t n, bool llama2)
{
	size_t first;
	const char *sys = system_text(msgs, n, &first);
	bool opened = false;

	for (size_t i = first; i < n; i++) {
		if (is_role(&msgs[i], "assistant")) {
			put(o, llama2 ? " " : "");
			put(o, msgs[i].content);
			put(o, llama2 ? " </s>" : "</s>");
			continue;
		}
		/* A user turn; after the first, Llama 2 opens a new sequence. */
		put(o, opened && llama2 ? "<s>[INST] " : "[INST] ");
		if (!opened && sys != NULL) {
			if (llama2) {
				put(o, "<<SYS>>\n");
				put(o, sys);
				put(o, "\n<</SYS>>\n\n");
			} else {
				put(o, sys);
				put(o, "\n\n");
			}
		}
		opened = true;
		put(o, msgs[i].content);
		put(o, " [/INST]");
	}
}

/* Gemma's templates trim each turn's text (`| trim`), not the system
 * text Gemma 3's puts before the first. */
static void put_gemma(out_text *o, const loom_chat_message *msgs, size_t n, bool add_assistant)
{
	size_t first;
	const char *sys = system_text(msgs, n, &first);

	for (size_t i = first; i < n; i++) {
		bool user = !is_role(&msgs[i], "assistant");
		put(o, user ? "<start_of_turn>user\n" : "<start_of_turn>model\n");
		if (i == first && sys != NULL) {
			put(o, sys);
			put(o, "\n\n");
		}
		put_trimmed(o, msgs[i].content);
		put(o, "<end_of_turn>\n");
	}
	if (add_assistant)
		put(o, "<start_of_turn>model\n");
}

/* OpenAI's harmony format (gpt-oss), as its chat template renders a
 * conversation: the system message the model was trained with (medium
 * reasoning; the template's current date is left out, so that a
 * conversation's text does not change from day to day), a system prompt
 * as the developer's instructions, earlier assistant turns on the final
 * channel, and the assistant's turn opened for it to choose a channel. */
static void put_harmony(out_text *o, const loom_chat_message *msgs, size_t n, bool add_assistant)
{
	size_t first;
	const char *sys = system_text(msgs, n, &first);

	put(o, "<|start|>system<|message|>You are ChatGPT, a large language model trained by OpenAI.\n"
	       "Knowledge cutoff: 2024-06\n\nReasoning: medium\n\n"
	       "# Valid channels: analysis, commentary, final. Channel must be included for every message.<|end|>");
	if (sys != NULL) {
		put(o, "<|start|>developer<|message|># Instructions\n\n");
		put(o, sys);
		put(o, "\n\n<|end|>");
	}
	for (size_t i = first; i < n; i++) {
		put(o, is_role(&msgs[i], "assistant") ? "<|start|>assistant<|channel|>final<|message|>"
						      : "<|start|>user<|message|>");
		put(o, msgs[i].content);
		put(o, "<|end|>");
	}
	if (add_assistant)
		put(o, "<|start|>assistant");
}

/* Tulu's turns (OLMo 2, OLMoE, Tulu 3): each role's marker and a
 * newline before its text, a newline after it; a reply ends with the
 * end-of-sequence token, and a newline unless it is the last turn. */
static void put_tulu(out_text *o, const loom_chat_message *msgs, size_t n, bool add_assistant, const char *eos)
{
	for (size_t i = 0; i < n; i++) {
		put(o, "<|");
		put(o, msgs[i].role);
		put(o, "|>\n");
		put(o, msgs[i].content);
		if (is_role(&msgs[i], "assistant"))
			put(o, eos);
		if (!is_role(&msgs[i], "assistant") || i + 1 < n)
			put(o, "\n");
	}
	if (add_assistant)
		put(o, "<|assistant|>\n");
}

/* The families whose turns are a marker, the text and a closing marker,
 * after a system turn they always write. */
typedef struct marked_turns {
	const char *system_open, *system_close;
	const char *default_system; /* the system turn's text without a system message */
	const char *user_open, *user_close;
	const char *reply_open, *reply_close; /* the opening is also the assistant's, to reply */
	bool trim;                            /* each user and assistant text stripped */
} marked_turns;

/* Command R7B's turns without documents: the system turn empty without a
 * system message, each turn's text stripped, replies between
 * <|START_RESPONSE|> and <|END_RESPONSE|>. */
static const marked_turns command_r7b_turns = {
	"<|START_OF_TURN_TOKEN|><|SYSTEM_TOKEN|>",
	"<|END_OF_TURN_TOKEN|>",
	"",
	"<|START_OF_TURN_TOKEN|><|USER_TOKEN|>",
	"<|END_OF_TURN_TOKEN|>",
	"<|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|><|START_RESPONSE|>",
	"<|END_RESPONSE|><|END_OF_TURN_TOKEN|>",
	true,
};

/* dots.llm1's: its default system text "You are a helpful assistant.",
 * no space or newline between the markers and the text. */
static const marked_turns dots1_turns = {
	"<|system|>", "<|endofsystem|>", "You are a helpful assistant.", "<|userprompt|>", "<|endofuserprompt|>",
	"<|response|>", "<|endofresponse|>", false,
};

static void put_marked(out_text *o, const marked_turns *f, const loom_chat_message *msgs, size_t n, bool add_assistant)
{
	size_t first;
	const char *sys = system_text(msgs, n, &first);

	put(o, f->system_open);
	put(o, sys != NULL ? sys : f->default_system);
	put(o, f->system_close);
	for (size_t i = first; i < n; i++) {
		const bool user = !is_role(&msgs[i], "assistant");
		put(o, user ? f->user_open : f->reply_open);
		if (f->trim)
			put_trimmed(o, msgs[i].content);
		else
			put(o, msgs[i].content);
		put(o, user ? f->user_close : f->reply_close);
	}
	if (add_assistant)
		put(o, f->reply_open);
}

/* Mistral's later tokenizers: the system prompt first in a block of its
 * own, turns without the spaces SentencePiece put around them. */
static void put_system_prompt(out_text *o, const loom_chat_message *msgs, size_t n)
{
	size_t first;
	const char *sys = system_text(msgs, n, &first);

	if (sys != NULL) {
		put(o, "[SYSTEM_PROMPT]");
		put(o, sys);
		put(o, "[/SYSTEM_PROMPT]");
	}
	for (size_t i = first; i < n; i++) {
		const bool user = !is_role(&msgs[i], "assistant");
		put(o, user ? "[INST]" : "");
		put(o, msgs[i].content);
		put(o, user ? "[/INST]" : "</s>");
	}
}

static void put_plain(out_text *o, const loom_chat_message *msgs, size_t n, bool add_assistant)
{
	for (size_t i = 0; i < n; i++) {
		put(o, is_role(&msgs[i], "system") ? "System: " : is_role(&msgs[i], "user") ? "User: " : "Assistant: ");
		put(o, msgs[i].content);
		put(o, "\n");
	}
	if (add_assistant)
		put(o, "Assistant: ");
}

loom_status loom_chat_check_messages(const loom_chat_message *msgs, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		if (msgs[i].role == NULL || msgs[i].content == NULL)
			return loom_error(LOOM_ERR_INVALID_ARGUMENT, "chat message %zu has no role or content", i);
		if (!is_role(&msgs[i], "system") && !is_role(&msgs[i], "user") && !is_role(&msgs[i], "assistant"))
			return loom_error(LOOM_ERR_INVALID_ARGUMENT,
					  "chat message %zu has role '%s'; the roles are system, user and assistant", i,
					  msgs[i].role);
		if (is_role(&msgs[i], "system") && i > 0)
			return loom_error(LOOM_ERR_INVALID_ARGUMENT, "a system message may only come first");
	}
	return LOOM_OK;
}

/* text (len bytes) into buf as loom_chat_apply writes it. */
static loom_status copy_out(const char *text, size_t len, char *buf, size_t size, size_t *n_out)
{
	*n_out = len;
	if (size > 0) {
		const size_t k = len < size ? len : size - 1;
		memcpy(buf, text, k);
		buf[k] = '\0';
	}
	if (len >= size)
		return loom_error(LOOM_ERR_BUFFER_TOO_SMALL, "the chat text needs %zu bytes, the buffer has %zu", len + 1,
				  size);
	return LOOM_OK;
}

loom_status loom_chat_format(loom_chat_kind kind, const loom_chat_message *msgs, size_t n, bool add_assistant,
			     char *buf, size_t size, size_t *n_out)
{
	return loom_chat_format_for(NULL, kind, msgs, n, add_assistant, buf, size, n_out);
}

/* The text of the model's end-of-sequence token, as a template's
 * eos_token reads; "" without one. */
static void eos_text(const loom_model *model, char *buf, size_t size)
{
	size_t n = 0;
	const loom_token eos = loom_token_eos(model);
	if (eos < 0 || loom_token_to_piece(model, eos, true, buf, size - 1, &n) != LOOM_OK)
		n = 0;
	buf[n] = '\0';
}

loom_status loom_chat_format_for(const loom_model *model, loom_chat_kind kind, const loom_chat_message *msgs, size_t n,
				 bool add_assistant, char *buf, size_t size, size_t *n_out)
{
	out_text o = {buf, size, 0};
	char eos[64] = "<|endoftext|>";
	if (model != NULL && kind == LOOM_CHAT_TULU)
		eos_text(model, eos, sizeof(eos));
	loom_status st = loom_chat_check_messages(msgs, n);
	if (st != LOOM_OK)
		return st;
	switch (kind) {
	case LOOM_CHAT_CHATML:
		put_turns(&o, msgs, n, add_assistant, "<|im_start|>", "\n", "<|im_end|>\n");
		break;
	case LOOM_CHAT_LLAMA3:
		for (size_t i = 0; i < n; i++) {
			put(&o, "<|start_header_id|>");
			put(&o, msgs[i].role);
			put(&o, "<|end_header_id|>\n\n");
			put_trimmed(&o, msgs[i].content);
			put(&o, "<|eot_id|>");
		}
		if (add_assistant)
			put(&o, "<|start_header_id|>assistant<|end_header_id|>\n\n");
		break;
	case LOOM_CHAT_ZEPHYR:
		put_turns(&o, msgs, n, add_assistant, "<|", "|>\n", "</s>\n");
		break;
	case LOOM_CHAT_PHI3:
		put_turns(&o, msgs, n, add_assistant, "<|", "|>\n", "<|end|>\n");
		break;
	case LOOM_CHAT_COMMAND_R7B:
		put_marked(&o, &command_r7b_turns, msgs, n, add_assistant);
		break;
	case LOOM_CHAT_TULU:
		put_tulu(&o, msgs, n, add_assistant, eos);
		break;
	case LOOM_CHAT_DOTS1:
		put_marked(&o, &dots1_turns, msgs, n, add_assistant);
		break;
	case LOOM_CHAT_GRANITE:
		/* Without a system message Granite's template writes one that
		 * holds the day's date: loom writes none, as llama.cpp. */
		put_turns(&o, msgs, n, false, "<|start_of_role|>", "<|end_of_role|>", "<|end_of_text|>\n");
		if (add_assistant)
			put(&o, "<|start_of_role|>assistant<|end_of_role|>");
		break;
	case LOOM_CHAT_GLM4:
		/* The model writes the newline after <|assistant|> itself. */
		put(&o, "[gMASK]<sop>");
		put_turns(&o, msgs, n, false, "<|", "|>\n", "");
		if (add_assistant)
			put(&o, "<|assistant|>");
		break;
	case LOOM_CHAT_LLAMA2:
	case LOOM_CHAT_MISTRAL:
		put_inst(&o, msgs, n, kind == LOOM_CHAT_LLAMA2);
		break;
	case LOOM_CHAT_GEMMA:
		put_gemma(&o, msgs, n, add_assistant);
		break;
	case LOOM_CHAT_HARMONY:
		put_harmony(&o, msgs, n, add_assistant);
		break;
	case LOOM_CHAT_MISTRAL_V7:
	case LOOM_CHAT_MISTRAL_V11:
	case LOOM_CHAT_MISTRAL_V13:
		put_system_prompt(&o, msgs, n);
		break;
	default:
		put_plain(&o, msgs, n, add_assistant);
		break;
	}
	*n_out = o.len;
	if (size > 0)
		buf[o.len < size ? o.len : size - 1] = '\0';
	if (o.len >= size)
		return loom_error(LOOM_ERR_BUFFER_TOO_SMALL, "the chat text needs %zu bytes, the buffer has %zu",
				  o.len + 1, size);
	return LOOM_OK;
}

/* ---- a model's template ---- */

loom_chat_kind loom_chat_template_resolve(const loom_model *m, const char **source)
{
	loom_string jinja;
	loom_chat_kind kind;
	const bool has_own = m->file != NULL && loom_meta_get_string(m->file, "tokenizer.chat_template", &jinja) == LOOM_OK;

	if (has_own && loom_chat_template_detect(jinja.data, jinja.len, &kind)) {
		*source = "the file's";
		return kind;
	}
	if (has_own)
		loom_warn("%s: tokenizer.chat_template is not a template loom knows; using the plain format",
			  m->arch);
	*source = has_own ? "the file's is not one loom knows" : "no template";
	if (m->contract != NULL && m->contract->has_chat_template) {
		if (!has_own)
			*source = "the contract's";
		return m->contract->chat_template;
	}
	return LOOM_CHAT_PLAIN;
}

static loom_status chat_apply(const loom_model *model, const char *template_name, const loom_chat_message *messages,
			      size_t n_messages, bool add_assistant, char *buf, size_t size, size_t *n_out)
{
	loom_chat_kind kind;

	if (template_name == NULL) {
		/* The model's own template, as the model was trained on it. */
		loom_strbuf text = {0};
		loom_status st = loom_chat_check_messages(messages, n_messages);
		if (st == LOOM_OK && loom_chat_format_model(model, messages, n_messages, add_assistant, &text, &st)) {
			if (st == LOOM_OK)
				st = copy_out(text.s != NULL ? text.s : "", text.n, buf, size, n_out);
			loom_strbuf_free(&text);
			return st;
		}
		if (st != LOOM_OK)
			return st;
		kind = model->chat_template;
	} else if (!loom_chat_template_by_name(template_name, &kind))
		return loom_error(LOOM_ERR_INVALID_ARGUMENT,
				  "unknown chat template '%s' (chatml, llama2, llama3, mistral, zephyr, phi3, gemma, plain, "
				  "harmony, mistral-v7, mistral-v11, mistral-v13, glm4, granite, command-r7b, tulu, dots1)",
				  template_name);
	return loom_chat_format_for(model, kind, messages, n_messages, add_assistant, buf, size, n_out);
}

LOOM_API loom_status loom_chat_apply_sized(const loom_model *model, const char *template_name,
					   const loom_chat_message *messages, size_t n_messages, size_t message_size,
					   bool add_assistant, char *buf, size_t size, size_t *n_out)
{
	if (model == NULL || (messages == NULL && n_messages > 0) || (buf == NULL && size > 0) || n_out == NULL)
		return loom_error(LOOM_ERR_INVALID_ARGUMENT, "loom_chat_apply: bad arguments");
	const void *msgs;
	void *copy;
	loom_status st = loom_struct_array_in(&loom_chat_message_desc, messages, n_messages, message_size, &msgs, &copy);
	if (st == LOOM_OK)
		st = chat_apply(model, template_name, msgs, n_messages, add_assistant, buf, size, n_out);
	free(copy);
	return st;
}

LOOM_API const char *loom_chat_template(const loom_model *model)
{
	return model != NULL ? loom_chat_template_names[model->chat_template] : NULL;
}
