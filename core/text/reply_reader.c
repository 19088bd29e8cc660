/* reply_reader.c - a reply split into content and reasoning by its chat
 * template's markers.
 *
 * A model whose vocabulary has <think> and </think> (Qwen3, DeepSeek-R1's
 * distillations) reasons between them: that text is reasoning, the rest
 * content (its first spaces after </think> dropped).
 *
 * Harmony (gpt-oss) replies read
 *   <|channel|>analysis<|message|>...<|end|>
 *   <|start|>assistant<|channel|>final<|message|>...<|return|>
 * The markers are single tokens with no text of their own, so the reader
 * follows token ids: between <|start|> or <|channel|> and <|message|> it
 * collects the header, whose channel names the part the message's text
 * goes to. Each part has a detokenizer of its own, flushed at the marker
 * that ends a message, so text held back at a UTF-8 or stop-string
 * boundary is never carried into the next part. */
#include "loom.h"

#include "model/model.h"
#include "runtime/array_grow.h"
#include "runtime/error.h"
#include "runtime/struct_size.h"
#include "text/chat_json.h"
#include "text/chat_template.h"
#include "text/tool_reader.h"
#include "text/vocab_internal.h"

#include <stdlib.h>
#include <string.h>

enum marker { START, CHANNEL, MESSAGE, END, RETURN, CALL_MARKER, CONSTRAIN, N_MARKERS };

static const char *const marker_texts[N_MARKERS] = {
	"<|start|>", "<|channel|>", "<|message|>", "<|end|>", "<|return|>", "<|call|>", "<|constrain|>",
};

/* Where a message's text goes: the content, the reasoning, or (harmony)
 * the arguments of a call. */
enum part { CONTENT, REASONING, CALL, N_PARTS };

/* How a reply is read: as the generator's text, by harmony's channels, or
 * by <think> and </think>. */
enum mode { PASS, HARMONY, THINK };

struct loom_reply_reader {
	const loom_model *model;
	loom_chat_kind kind;
	enum mode mode;
	loom_tool_reader *tools; /* reading tool calls out of the content; NULL: not */
	loom_strbuf tool_out;    /* the content the tool reader lets through */
	loom_token markers[N_MARKERS];
	loom_token think_open, think_close;
	bool trim; /* the content's spaces after </think> are dropped */
	loom_detokenizer *text[N_PARTS];
	/* Harmony: in a header (after <|start|> or <|channel|>, before
	 * <|message|>), and the channel it names so far. */
	bool in_header, in_channel_name;
	char channel[32];
	size_t n_channel;
	char header[192]; /* the header's text: its recipient (to=functions.NAME) */
	size_t n_header;
	enum part part; /* where the current message's text goes */
	/* What the last push gives each part. */
	char *out[N_PARTS];
	size_t n_out[N_PARTS], cap_out[N_PARTS];
	/* The tool calls laid out for a host whose loom_tool_call is shorter. */
	void *host_calls;
	size_t cap_host_calls;
};

static loom_token find_token(const loom_model *model, const char *text)
{
	return model->vocab != NULL ? loom_vocab_find(model->vocab, text, strlen(text)) : -1;
}

loom_status loom_reply_reader_create(const loom_model *model, const char *template_name, const char *const *stop,
				     size_t n_stop, loom_reply_reader **out)
{
	if (model == NULL || out == NULL || (n_stop > 0 && stop == NULL))
		return loom_error(LOOM_ERR_INVALID_ARGUMENT, "loom_reply_reader_create: model and out are required, "
							     "and stop when n_stop > 0");
	*out = NULL;
	loom_chat_kind kind = model->chat_template;
	if (template_name != NULL && !loom_chat_template_by_name(template_name, &kind))
		return loom_error(LOOM_ERR_INVALID_ARGUMENT, "unknown chat template '%s'", template_name);
	loom_reply_reader *r = calloc(1, sizeof(*r));
	if (r == NULL)
		return loom_error(LOOM_ERR_NO_MEMORY, "out of memory");
	r->model = model;
	r->kind = kind;
	r->part = CONTENT;
	for (int m = 0; m < N_MARKERS; m++)
		r->markers[m] = find_token(model, marker_texts[m]);
	r->think_open = find_token(model, "<think>");
	r->think_close = find_token(model, "</think>");
	r->mode = kind == LOOM_CHAT_HARMONY			  ? HARMONY
		  : r->think_open >= 0 && r->think_close >= 0 ? THINK
							      : PASS;
	/* A template that opens the reply in <think> leaves the model to
	 * start in its reasoning. */
	if (r->mode == THINK && template_name == NULL && loom_chat_opens_thinking(model))
		r->part = REASONING;
	if (r->mode == HARMONY && (r->markers[CHANNEL] < 0 || r->markers[MESSAGE] < 0)) {
		loom_reply_reader_free(r);
		return loom_error(LOOM_ERR_UNSUPPORTED, "the harmony chat template needs the tokens <|channel|> and "
							"<|message|>, which this model's vocabulary lacks");
	}
	for (int p = 0; r->mode != PASS && p < N_PARTS; p++) {
		loom_status st = loom_detokenizer_create(model, stop, n_stop, &r->text[p]);
		if (st != LOOM_OK) {
			loom_reply_reader_free(r);
			return st;
		}
	}
	*out = r;
	return LOOM_OK;
}

void loom_reply_reader_free(loom_reply_reader *r)
{
	if (r == NULL)
		return;
	for (int p = 0; p < N_PARTS; p++) {
		loom_detokenizer_free(r->text[p]);
		free(r->out[p]);
	}
	loom_tool_reader_free(r->tools);
	loom_strbuf_free(&r->tool_out);
	free(r->host_calls);
	free(r);
}

static loom_status append(loom_reply_reader *r, enum part p, const char *text, size_t len)
{
	if (len == 0)
		return LOOM_OK;
	char *grown = loom_array_grow(r->out[p], &r->cap_out[p], r->n_out[p] + len, 1);
	if (grown == NULL)
		return loom_error(LOOM_ERR_NO_MEMORY, "out of memory");
	r->out[p] = grown;
	memcpy(r->out[p] + r->n_out[p], text, len);
	r->n_out[p] += len;
	return LOOM_OK;
}

/* What the tool reader let through of the content. */
static loom_status append_tool_out(loom_reply_reader *r, loom_status st)
{
	if (st == LOOM_OK)
		st = append(r, CONTENT, r->tool_out.s, r->tool_out.n);
	r->tool_out.n = 0;
	return st;
}

static loom_status give(loom_reply_reader *r, enum part p, const char *text, size_t len)
{
	for (; p == CONTENT && r->trim && len > 0 && (*text == ' ' || *text == '\n' || *text == '\t'); len--)
		text++;
	if (p == CONTENT && len > 0)
		r->trim = false;
	if (p == CONTENT && r->tools != NULL)
		return append_tool_out(r, loom_tool_reader_text(r->tools, text, len, &r->tool_out));
	if (p == CALL) {
		if (r->tools != NULL)
			loom_tool_reader_call_text(r->tools, text, len);
		return LOOM_OK;
	}
	return append(r, p, text, len);
}

/* The current message's held-back text, given to its part. */
static loom_status flush(loom_reply_reader *r)
{
	const char *text;
	size_t len;
	loom_status st = loom_detokenizer_finish(r->text[r->part], &text, &len);
	return st == LOOM_OK ? give(r, r->part, text, len) : st;
}

/* The text of a token that is not a marker, to the current part. */
static loom_status read_text(loom_reply_reader *r, const loom_generated *step)
{
	const char *text;
	size_t len;
	loom_status st = loom_detokenizer_push(r->text[r->part], step->token, step->done, &text, &len, NULL);
	return st == LOOM_OK ? give(r, r->part, text, len) : st;
}

static int marker_of(const loom_reply_reader *r, loom_token token)
{
	for (int m = 0; m < N_MARKERS; m++)
		if (r->markers[m] >= 0 && r->markers[m] == token)
			return m;
	return -1;
}

/* A header token's text: the channel's name is its first word after
 * <|channel|> ("commentary to=functions.f" names commentary). */
static loom_status read_header(loom_reply_reader *r, loom_token token)
{
	char piece[128];
	size_t n = 0;
	loom_status st = loom_token_to_piece(r->model, token, false, piece, sizeof(piece), &n);
	if (st != LOOM_OK && st != LOOM_ERR_BUFFER_TOO_SMALL)
		return st;
	for (size_t i = 0; i < n && i < sizeof(piece) && r->n_header + 1 < sizeof(r->header); i++)
		r->header[r->n_header++] = piece[i];
	for (size_t i = 0; i < n && i < sizeof(piece) && r->in_channel_name; i++) {
		if (piece[i] == ' ' && r->n_channel > 0)
			r->in_channel_name = false;
		else if (piece[i] != ' ' && r->n_channel + 1 < sizeof(r->channel))
			r->channel[r->n_channel++] = piece[i];
	}
	return LOOM_OK;
}

static loom_status push_harmony(loom_reply_reader *r, const loom_generated *step)
{
	if (step->token < 0) /* the end, from a host that could not say so before */
		return step->done && !r->in_header ? flush(r) : LOOM_OK;
	const int m = marker_of(r, step->token);
	loom_status st = LOOM_OK;
	if (m == START || m == CHANNEL) {
		if (!r->in_header && (st = flush(r)) != LOOM_OK)
			return st;
		if (m == START || !r->in_header)
			r->n_header = 0;
		r->in_header = true;
		r->in_channel_name = m == CHANNEL;
		if (m == CHANNEL)
			r->n_channel = 0;
	} else if (m == MESSAGE) {
		r->channel[r->n_channel] = '\0';
		r->part = strcmp(r->channel, "final") == 0 || r->n_channel == 0 ? CONTENT : REASONING;
		r->in_header = r->in_channel_name = false;
		/* A message to=functions.NAME is a call: its text the
		 * arguments. */
		r->header[r->n_header] = '\0';
		const char *to = strstr(r->header, "to=functions.");
		if (to != NULL && r->tools != NULL) {
			to += strlen("to=functions.");
			r->part = CALL;
			loom_tool_reader_begin_call(r->tools, to, strcspn(to, " <"));
		}
		r->n_header = 0;
		r->n_channel = 0;
	} else if (m == END || m == RETURN || m == CALL_MARKER) {
		if (!r->in_header)
			st = flush(r);
		if (r->part == CALL && r->tools != NULL)
			loom_tool_reader_end_call(r->tools);
		r->in_header = r->in_channel_name = false;
	} else if (m == CONSTRAIN) {
		r->in_channel_name = false;
	} else if (r->in_header) {
		st = read_header(r, step->token);
	} else {
		/* The message's text. A reply that opens with no header at
		 * all is read as the final answer. */
		st = read_text(r, step);
	}
	if (st == LOOM_OK && step->done && m < 0 && !r->in_header)
		st = flush(r);
	return st;
}

static loom_status push_think(loom_reply_reader *r, const loom_generated *step)
{
	if (step->token < 0)
		return step->done ? flush(r) : LOOM_OK;
	if (step->token != r->think_open && step->token != r->think_close)
		return read_text(r, step);
	loom_status st = flush(r);
	r->part = step->token == r->think_open ? REASONING : CONTENT;
	r->trim = step->token == r->think_close;
	return st;
}

static loom_status push(loom_reply_reader *r, const loom_generated *step, loom_reply_parts *out)
{
	r->n_out[CONTENT] = r->n_out[REASONING] = 0;
	loom_status st = LOOM_OK;
	if (r->tools != NULL && r->part == CONTENT && loom_tool_reader_is_marker(r->tools, step->token)) {
		/* A tool-call marker: read as one, its text not content. */
		if (r->mode != PASS)
			st = flush(r);
		if (st == LOOM_OK)
			loom_tool_reader_marker(r->tools, step->token, &r->tool_out);
		st = append_tool_out(r, st);
	} else {
		st = r->mode == HARMONY ? push_harmony(r, step)
		     : r->mode == THINK ? push_think(r, step)
					: give(r, CONTENT, step->text, step->len);
	}
	if (st == LOOM_OK && step->done && r->tools != NULL) {
		if (r->mode != PASS)
			st = flush(r);
		if (r->part == CALL)
			loom_tool_reader_end_call(r->tools);
		if (st == LOOM_OK)
			st = append_tool_out(r, loom_tool_reader_finish(r->tools, &r->tool_out));
	}
	*out = (loom_reply_parts){.content = r->n_out[CONTENT] ? r->out[CONTENT] : "",
				  .n_content = st == LOOM_OK ? r->n_out[CONTENT] : 0,
				  .reasoning = r->n_out[REASONING] ? r->out[REASONING] : "",
				  .n_reasoning = st == LOOM_OK ? r->n_out[REASONING] : 0};
	return st;
}

loom_status loom_reply_reader_read_tools(loom_reply_reader *r, const char *opening)
{
	if (r == NULL)
		return loom_error(LOOM_ERR_INVALID_ARGUMENT, "loom_reply_reader_read_tools: no reader");
	loom_tool_reader_free(r->tools);
	r->tools = NULL;
	loom_status st = loom_tool_reader_create(r->model, loom_tool_style_of(r->kind), false, &r->tools);
	/* The opening the prompt ends with is read as if the model had
	 * written it. */
	const size_t len = opening != NULL ? strlen(opening) : 0;
	loom_token *toks = len > 0 ? malloc((len + 1) * sizeof(loom_token)) : NULL;
	size_t n = 0;
	if (st == LOOM_OK && len > 0)
		st = toks == NULL ? loom_error(LOOM_ERR_NO_MEMORY, "out of memory")
				  : loom_tokenize(r->model, opening, len, false, true, toks, len + 1, &n);
	for (size_t i = 0; st == LOOM_OK && i < n; i++) {
		char piece[256];
		size_t k = 0;
		st = loom_token_to_piece(r->model, toks[i], false, piece, sizeof(piece), &k);
		const loom_generated g = {.token = toks[i], .text = piece, .len = k};
		loom_reply_parts parts;
		if (st == LOOM_OK)
			st = push(r, &g, &parts);
	}
	free(toks);
	return st;
}

loom_status loom_reply_reader_push_sized(loom_reply_reader *r, const loom_generated *step, size_t step_size,
					 loom_reply_parts *out, size_t size)
{
	if (r == NULL || step == NULL || out == NULL)
		return loom_error(LOOM_ERR_INVALID_ARGUMENT, "loom_reply_reader_push: reader, step and out are required");
	loom_generated s = {0};
	loom_reply_parts parts = {.content = "", .reasoning = ""};
	loom_status st = loom_struct_check(&loom_reply_parts_desc, size);
	if (st != LOOM_OK)
		return st;
	if ((st = loom_struct_in(&loom_generated_desc, &s, step, step_size)) == LOOM_OK)
		st = push(r, &s, &parts);
	/* Written on a failure too: with nothing in either part. */
	(void)loom_struct_out(&loom_reply_parts_desc, out, size, &parts);
	return st;
}

loom_status loom_reply_reader_tool_calls_sized(loom_reply_reader *r, const loom_tool_call **calls, size_t *n,
					       size_t size)
{
	if (r == NULL || calls == NULL || n == NULL)
		return loom_error(LOOM_ERR_INVALID_ARGUMENT, "loom_reply_reader_tool_calls: reader, calls and n are required");
	*calls = NULL;
	*n = 0;
	loom_status st = loom_struct_check(&loom_tool_call_desc, size);
	if (st != LOOM_OK || r->tools == NULL)
		return st;
	const loom_tool_call *own;
	const size_t count = loom_tool_reader_calls(r->tools, &own);
	const void *laid_out;
	if ((st = loom_struct_array_out(&loom_tool_call_desc, own, count, size, &laid_out, &r->host_calls,
					&r->cap_host_calls)) != LOOM_OK)
		return st;
	*calls = laid_out;
	*n = count;
	return LOOM_OK;
}

bool loom_reply_reader_in_tool_call(const loom_reply_reader *r)
{
	return r != NULL && r->tools != NULL && loom_tool_reader_in_call(r->tools);
}
