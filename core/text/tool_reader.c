/*
 * tool_reader.c - tool calls read out of a reply's content as it comes.
 *
 * Each format opens a call its own way: Hermes between <tool_call> and
 * </tool_call>, Mistral after [TOOL_CALLS] (an array of calls to the
 * end; from its v11 tokenizer each call NAME[ARGS]{...} after a
 * [TOOL_CALLS] of its own), Llama 3 as a reply that is a JSON object naming a function (or
 * after <|python_tag|>), loom's generic format as a reply that is
 * {"tool_calls": [...]} or {"response": "..."}. Markers are matched as
 * tokens when the vocabulary has them whole and as text otherwise, the
 * content's last bytes held back while they may begin one.
 *
 * A call's text is scanned again at every step (calls are short): its
 * name once its string is whole, then its arguments' text as far as it
 * has come. That text only grows, so a host can send the new bytes at
 * each step (OpenAI's streamed argument fragments) and their sum is the
 * arguments read at the end.
 */
#include "text/tool_reader.h"

#include "model/model.h"
#include "runtime/array_grow.h"
#include "runtime/error.h"
#include "text/vocab_internal.h"

#include <stdlib.h>
#include <string.h>

/* Where a JSON value ends, found by scanning on from where the last look
 * stopped: a body only grows, so a long call is read once, not again at
 * every step. */
typedef struct value_scan {
	size_t from; /* the value's first byte (0: none yet: a value never begins a body) */
	size_t at;   /* scanned up to here */
	size_t end;  /* past its last byte once found, else 0 */
	int depth;
	bool in_string, escape;
} value_scan;

typedef struct call_state {
	char *name;
	loom_strbuf args;
	value_scan args_scan;
	bool done;
} call_state;

enum state { CONTENT, START, BODY, MESSAGE_CALL };

struct loom_tool_reader {
	loom_tool_style style;
	loom_token open_tok, close_tok, alt_open_tok;
	loom_token args_tok, call_id_tok; /* Mistral's [ARGS] and [CALL_ID], inside a body */
	const char *open_text, *close_text;
	enum state state;
	loom_strbuf hold; /* content held back: a marker's first bytes, or a reply's start */
	loom_strbuf body; /* the open call's text */
	bool body_whole;  /* the body's calls (or answer) are complete JSON */
	size_t first;     /* calls[first..] are the open body's */
	size_t next_call, next_at; /* the body's first call not whole yet, and where it begins (0: not known) */
	size_t args_at; /* Mistral's NAME[ARGS]: past the open call's [ARGS] (0: not found yet) */
	size_t seek;    /* where the search for the marker the body waits for goes on */
	value_scan answer_scan;    /* loom's generic format: the reply's object */
	call_state *calls;
	size_t n_calls, cap_calls;
	loom_tool_call *view;
	size_t cap_view;
};

static loom_token find_token(const loom_model *m, const char *text)
{
	return m->vocab != NULL ? loom_vocab_find(m->vocab, text, strlen(text)) : -1;
}

loom_status loom_tool_reader_create(const loom_model *model, loom_tool_style style, bool opened,
				    loom_tool_reader **out)
{
	loom_tool_reader *tr = calloc(1, sizeof(*tr));
	if (tr == NULL)
		return loom_error(LOOM_ERR_NO_MEMORY, "out of memory");
	tr->style = style;
	tr->open_tok = tr->close_tok = tr->alt_open_tok = tr->args_tok = tr->call_id_tok = -1;
	switch (style) {
	case LOOM_TOOL_HERMES:
		tr->open_text = "<tool_call>";
		tr->close_text = "</tool_call>";
		break;
	case LOOM_TOOL_MISTRAL:
		tr->open_text = "[TOOL_CALLS]";
		break;
	case LOOM_TOOL_GRANITE:
		tr->open_text = "<|tool_call|>";
		break;
	case LOOM_TOOL_MISTRAL_ARGS:
		tr->open_text = "[TOOL_CALLS]";
		tr->args_tok = find_token(model, "[ARGS]");
		tr->call_id_tok = find_token(model, "[CALL_ID]");
		break;
	case LOOM_TOOL_LLAMA3:
		tr->alt_open_tok = find_token(model, "<|python_tag|>");
		break;
	case LOOM_TOOL_GENERIC:
	case LOOM_TOOL_HARMONY:
		break;
	}
	if (tr->open_text != NULL)
		tr->open_tok = find_token(model, tr->open_text);
	if (tr->close_text != NULL)
		tr->close_tok = find_token(model, tr->close_text);
	tr->state = opened ? BODY : tr->open_text != NULL || style == LOOM_TOOL_HARMONY ? CONTENT : START;
	*out = tr;
	return LOOM_OK;
}

void loom_tool_reader_free(loom_tool_reader *tr)
{
	if (tr == NULL)
		return;
	for (size_t i = 0; i < tr->n_calls; i++) {
		free(tr->calls[i].name);
		loom_strbuf_free(&tr->calls[i].args);
	}
	free(tr->calls);
	free(tr->view);
	loom_strbuf_free(&tr->hold);
	loom_strbuf_free(&tr->body);
	free(tr);
}

/* ---- scanning a call's JSON as far as it has come ---- */

static size_t skip_ws(const char *s, size_t n, size_t i)
{
	while (i < n && (s[i] == ' ' || s[i] == '\n' || s[i] == '\t' || s[i] == '\r'))
		i++;
	return i;
}

/* Where the JSON value at s[i] ends; 0 if it has not yet (a value never
 * ends at 0). Malformed text reads as unfinished: the grammar keeps a
 * constrained call well-formed, and an unconstrained one that is not
 * never completes. */
static size_t value_end(const char *s, size_t n, size_t i)
{
	if (i >= n)
		return 0;
	if (s[i] == '"') {
		for (size_t j = i + 1; j < n; j++) {
			if (s[j] == '\\')
				j++;
			else if (s[j] == '"')
				return j + 1;
		}
		return 0;
	}
	if (s[i] == '{' || s[i] == '[') {
		int depth = 0;
		bool in_string = false;
		for (size_t j = i; j < n; j++) {
			const char c = s[j];
			if (in_string) {
				if (c == '\\')
					j++;
				else if (c == '"')
					in_string = false;
			} else if (c == '"') {
				in_string = true;
			} else if (c == '{' || c == '[') {
				depth++;
			} else if ((c == '}' || c == ']') && --depth == 0) {
				return j + 1;
			}
		}
		return 0;
	}
	size_t j = i;
	while (j < n && strchr("+-0123456789.eEtruefalsn", s[j]) != NULL)
		j++;
	return j < n && j > i ? j : 0;
}

/* value_end for a value scanned before, from where that scan stopped. */
static size_t value_end_on(const char *s, size_t n, size_t from, value_scan *vs)
{
	if (from >= n || (s[from] != '"' && s[from] != '{' && s[from] != '['))
		return value_end(s, n, from); /* a literal: short */
	if (vs->from != from)
		*vs = (value_scan){.from = from, .at = from};
	for (size_t j = vs->at; vs->end == 0 && j < n; j++) {
		const char c = s[j];
		vs->at = j + 1;
		if (vs->in_string) {
			if (vs->escape)
				vs->escape = false;
			else if (c == '\\')
				vs->escape = true;
			else if (c == '"') {
				vs->in_string = false;
				if (vs->depth == 0)
					vs->end = j + 1;
			}
		} else if (c == '"') {
			vs->in_string = true;
		} else if (c == '{' || c == '[') {
			vs->depth++;
		} else if ((c == '}' || c == ']') && --vs->depth == 0) {
			vs->end = j + 1;
		}
	}
	return vs->end;
}

/* The string value at s[i..end) decoded, malloc'd; NULL if it is not one. */
static char *decode_string(const char *s, size_t i, size_t end)
{
	cJSON *v = cJSON_ParseWithLength(s + i, end - i);
	char *out = cJSON_IsString(v) ? strdup(v->valuestring) : NULL;
	cJSON_Delete(v);
	return out;
}

static call_state *call_at(loom_tool_reader *tr, size_t k)
{
	while (tr->n_calls <= k) {
		call_state *grown = loom_array_grow(tr->calls, &tr->cap_calls, tr->n_calls + 1, sizeof(call_state));
		if (grown == NULL)
			return NULL;
		tr->calls = grown;
		tr->calls[tr->n_calls++] = (call_state){0};
	}
	return &tr->calls[k];
}

/* The arguments' text shown so far becomes s[0..n): it only grows. */
static void show_args(call_state *c, const char *s, size_t n)
{
	if (n > c->args.n)
		loom_strbuf_put_n(&c->args, s + c->args.n, n - c->args.n);
}

/* A call's arguments, s[at..end), read whole: a JSON string's text
 * decoded, any other value as it is. */
static void whole_args(call_state *c, const char *s, size_t at, size_t end)
{
	if (s[at] == '"' && c->args.n == 0) {
		char *text = decode_string(s, at, end);
		if (text != NULL)
			loom_strbuf_put(&c->args, text);
		free(text);
	} else {
		show_args(c, s + at, end - at);
	}
	c->done = true;
}

/* One call object at s[i]; its end, or 0 while it is open. */
static size_t scan_call(loom_tool_reader *tr, size_t k, const char *s, size_t n, size_t i)
{
	if (i >= n || s[i] != '{')
		return 0;
	call_state *c = call_at(tr, k);
	if (c == NULL)
		return 0;
	size_t args_at = 0, args_end = 0;
	i = skip_ws(s, n, i + 1);
	while (i < n && s[i] != '}') {
		const size_t key_end = value_end(s, n, i);
		if (key_end == 0 || s[i] != '"')
			return 0;
		size_t v = skip_ws(s, n, key_end);
		if (v >= n || s[v] != ':')
			return 0;
		v = skip_ws(s, n, v + 1);
		const size_t key_len = key_end - i - 2;
		const char *key = s + i + 1;
		const bool is_args = (key_len == 9 && memcmp(key, "arguments", 9) == 0) ||
				     (key_len == 10 && memcmp(key, "parameters", 10) == 0);
		const size_t end = is_args ? value_end_on(s, n, v, &c->args_scan) : value_end(s, n, v);
		if (key_len == 4 && memcmp(key, "name", 4) == 0) {
			if (end != 0 && c->name == NULL)
				c->name = decode_string(s, v, end);
		} else if (is_args) {
			args_at = v;
			args_end = end;
			/* Arguments written as a JSON string show once whole;
			 * others as they come, once the name is known. */
			if (!c->done && c->name != NULL && v < n && s[v] != '"')
				show_args(c, s + v, (end != 0 ? end : n) - v);
		}
		if (end == 0)
			return 0;
		i = skip_ws(s, n, end);
		if (i < n && s[i] == ',')
			i = skip_ws(s, n, i + 1);
	}
	if (i >= n || c->name == NULL)
		return 0;
	if (c->done) {
		/* Read whole at an earlier step. */
	} else if (args_at == 0) {
		show_args(c, "{}", 2); /* a call without parameters */
		c->done = true;
	} else {
		whole_args(c, s, args_at, args_end);
	}
	return i + 1;
}

static const char *find(const char *s, size_t n, const char *what);

/* Where a search for a marker of m bytes that found none in s[from..n)
 * goes on: its first bytes may be the text's last. */
static size_t seek_on(size_t from, size_t n, size_t m)
{
	return n >= m && n - m + 1 > from ? n - m + 1 : from;
}

/* Mistral's calls from its v11 tokenizer: NAME, [CALL_ID]ID (v11), [ARGS]
 * and the arguments, the next call after a [TOOL_CALLS] of its own (the
 * first one opened the body). A marker written as a token is in the body
 * as its text. The name is read whole at [ARGS], the arguments as they
 * come, and the body is whole between calls. */
static void scan_args_body(loom_tool_reader *tr)
{
	static const char calls_marker[] = "[TOOL_CALLS]", args_marker[] = "[ARGS]", id_marker[] = "[CALL_ID]";
	const char *s = tr->body.s;
	const size_t n = tr->body.n;
	size_t k = tr->next_at != 0 ? tr->next_call : tr->first, i = tr->next_at;
	for (; s != NULL; k++) {
		call_state *c = call_at(tr, k);
		if (c == NULL)
			return;
		if (tr->args_at == 0) {
			const size_t from = tr->seek > i ? tr->seek : i;
			const char *a = find(s + from, n - from, args_marker);
			if (a == NULL) {
				tr->seek = seek_on(from, n, sizeof(args_marker) - 1);
				return;
			}
			const size_t at = (size_t)(a - s);
			const char *id = find(s + i, at - i, id_marker);
			size_t end = id != NULL ? (size_t)(id - s) : at;
			i = skip_ws(s, end, i);
			while (end > i && (s[end - 1] == ' ' || s[end - 1] == '\n' || s[end - 1] == '\t'))
				end--;
			if (c->name == NULL)
				c->name = strndup(s + i, end - i);
			tr->args_at = tr->seek = at + sizeof(args_marker) - 1;
		}
		const size_t v = skip_ws(s, n, tr->args_at);
		const size_t end = value_end_on(s, n, v, &c->args_scan);
		if (end == 0) {
			if (v < n && s[v] != '"')
				show_args(c, s + v, n - v);
			return;
		}
		if (!c->done)
			whole_args(c, s, v, end);
		tr->body_whole = true;
		const size_t from = tr->seek > end ? tr->seek : end;
		const char *next = find(s + from, n - from, calls_marker);
		if (next == NULL) {
			tr->seek = seek_on(from, n, sizeof(calls_marker) - 1);
			return;
		}
		tr->body_whole = false;
		i = (size_t)(next - s) + sizeof(calls_marker) - 1;
		tr->next_call = k + 1;
		tr->next_at = tr->seek = i;
		tr->args_at = 0;
	}
}

/* The open body's calls, as far as its text has come. */
static void scan_body(loom_tool_reader *tr)
{
	const char *s = tr->body.s;
	const size_t n = tr->body.n;
	size_t i = skip_ws(s, n, 0);
	bool array = tr->style == LOOM_TOOL_MISTRAL || tr->style == LOOM_TOOL_GRANITE;
	tr->body_whole = false;
	if (tr->style == LOOM_TOOL_MISTRAL_ARGS) {
		scan_args_body(tr);
		return;
	}
	if (s == NULL || i >= n)
		return;
	if (tr->style == LOOM_TOOL_GENERIC) {
		/* {"tool_calls": [...]} or {"response": ...}: only the first
		 * holds calls. */
		static const char calls_key[] = "\"tool_calls\"";
		if (s[i] != '{')
			return;
		i = skip_ws(s, n, i + 1);
		if (n - i < sizeof(calls_key) - 1 || memcmp(s + i, calls_key, sizeof(calls_key) - 1) != 0) {
			tr->body_whole = value_end_on(s, n, skip_ws(s, n, 0), &tr->answer_scan) != 0;
			return;
		}
		i = skip_ws(s, n, i + sizeof(calls_key) - 1);
		if (i >= n || s[i] != ':')
			return;
		i = skip_ws(s, n, i + 1);
		array = true;
	}
	if (array) {
		if (s[i] != '[')
			return;
		i = skip_ws(s, n, i + 1);
	}
	size_t k = tr->first;
	if (tr->next_at != 0) {
		/* The calls before it are whole: read on from there. */
		k = tr->next_call;
		i = skip_ws(s, n, tr->next_at);
	}
	for (;; k++) {
		if (array && i < n && s[i] == ']') {
			tr->body_whole = true;
			return;
		}
		const size_t end = scan_call(tr, k, s, n, i);
		if (end == 0)
			return;
		i = skip_ws(s, n, end);
		if (!array) {
			tr->body_whole = true;
			return;
		}
		if (i < n && s[i] == ',') {
			i = skip_ws(s, n, i + 1);
			tr->next_call = k + 1;
			tr->next_at = i;
		}
	}
}

/* ---- content, markers and bodies ---- */

/* The length of the longest end of s[0..n) that begins marker. */
static size_t partial_marker(const char *s, size_t n, const char *marker)
{
	const size_t m = strlen(marker);
	for (size_t k = m - 1 < n ? m - 1 : n; k > 0; k--)
		if (memcmp(s + n - k, marker, k) == 0)
			return k;
	return 0;
}

static const char *find(const char *s, size_t n, const char *what)
{
	const size_t m = strlen(what);
	for (size_t i = 0; i + m <= n; i++)
		if (memcmp(s + i, what, m) == 0)
			return s + i;
	return NULL;
}

static void drop_front(loom_strbuf *b, size_t k)
{
	memmove(b->s, b->s + k, b->n - k);
	b->n -= k;
	b->s[b->n] = '\0';
}

static void open_body(loom_tool_reader *tr)
{
	tr->state = BODY;
	tr->body.n = 0;
	tr->body_whole = false;
	tr->first = tr->n_calls;
	tr->next_call = tr->next_at = tr->args_at = tr->seek = 0;
	tr->answer_scan = (value_scan){0};
}

static void close_body(loom_tool_reader *tr)
{
	scan_body(tr);
	tr->state = tr->open_text != NULL ? CONTENT : START;
	/* Loom's generic reply and Llama 3's have one body: content after. */
	if (tr->style == LOOM_TOOL_GENERIC || tr->style == LOOM_TOOL_LLAMA3)
		tr->state = CONTENT;
	tr->body.n = 0;
	tr->first = tr->n_calls;
	tr->next_call = tr->next_at = tr->args_at = tr->seek = 0;
}

/* A reply that may be a call without a marker (Llama 3, generic): held
 * until its first bytes tell. */
static bool decide_start(loom_tool_reader *tr)
{
	const char *s = tr->hold.s;
	const size_t n = tr->hold.n, i = skip_ws(s, n, 0);
	if (i >= n)
		return false;
	if (s[i] != '{') {
		tr->state = CONTENT;
		return true;
	}
	if (tr->style == LOOM_TOOL_LLAMA3) {
		/* {"name": or {"type": begins a call; any other object is an
		 * answer. */
		const size_t j = skip_ws(s, n, i + 1);
		const size_t have = n - j;
		bool maybe = false, sure = false;
		static const char *const keys[] = {"\"name\"", "\"type\""};
		for (int k = 0; k < 2; k++) {
			const size_t m = strlen(keys[k]);
			if (memcmp(s + j, keys[k], have < m ? have : m) == 0) {
				maybe = true;
				sure = sure || have >= m;
			}
		}
		if (!sure) {
			if (!maybe)
				tr->state = CONTENT;
			return !maybe;
		}
	}
	open_body(tr);
	drop_front(&tr->hold, i);
	return true;
}

static loom_status step(loom_tool_reader *tr, loom_strbuf *out)
{
	for (;;) {
		if (tr->state == START) {
			if (!decide_start(tr))
				return LOOM_OK;
		} else if (tr->state == CONTENT) {
			const char *at = tr->open_text != NULL ? find(tr->hold.s, tr->hold.n, tr->open_text) : NULL;
			if (at != NULL) {
				const size_t k = (size_t)(at - tr->hold.s);
				loom_strbuf_put_n(out, tr->hold.s, k);
				drop_front(&tr->hold, k + strlen(tr->open_text));
				open_body(tr);
				continue;
			}
			const size_t keep = tr->open_text != NULL ? partial_marker(tr->hold.s, tr->hold.n, tr->open_text) : 0;
			loom_strbuf_put_n(out, tr->hold.s, tr->hold.n - keep);
			drop_front(&tr->hold, tr->hold.n - keep);
			return LOOM_OK;
		} else {
			const char *at = tr->close_text != NULL ? find(tr->hold.s, tr->hold.n, tr->close_text) : NULL;
			if (at != NULL) {
				const size_t k = (size_t)(at - tr->hold.s);
				loom_strbuf_put_n(&tr->body, tr->hold.s, k);
				drop_front(&tr->hold, k + strlen(tr->close_text));
				close_body(tr);
				continue;
			}
			const size_t keep = tr->close_text != NULL ? partial_marker(tr->hold.s, tr->hold.n, tr->close_text) : 0;
			loom_strbuf_put_n(&tr->body, tr->hold.s, tr->hold.n - keep);
			drop_front(&tr->hold, tr->hold.n - keep);
			scan_body(tr);
			return LOOM_OK;
		}
	}
}

static loom_status status_of(const loom_tool_reader *tr, const loom_strbuf *out)
{
	return tr->hold.failed || tr->body.failed || out->failed ? loom_error(LOOM_ERR_NO_MEMORY, "out of memory")
								 : LOOM_OK;
}

loom_status loom_tool_reader_text(loom_tool_reader *tr, const char *text, size_t n, loom_strbuf *out)
{
	if (n == 0)
		return LOOM_OK;
	loom_strbuf_put_n(&tr->hold, text, n);
	step(tr, out);
	return status_of(tr, out);
}

bool loom_tool_reader_is_marker(const loom_tool_reader *tr, loom_token token)
{
	if (token < 0)
		return false;
	if (tr->state != BODY)
		return token == tr->open_tok || token == tr->alt_open_tok;
	return token == tr->close_tok || token == tr->args_tok || token == tr->call_id_tok ||
	       (tr->style == LOOM_TOOL_MISTRAL_ARGS && token == tr->open_tok);
}

void loom_tool_reader_marker(loom_tool_reader *tr, loom_token token, loom_strbuf *out)
{
	if (!loom_tool_reader_is_marker(tr, token))
		return;
	if (tr->state != BODY) {
		/* What was held is content: a marker did not follow it. */
		loom_strbuf_put_n(out, tr->hold.s, tr->hold.n);
		tr->hold.n = 0;
		open_body(tr);
	} else {
		loom_strbuf_put_n(&tr->body, tr->hold.s, tr->hold.n);
		tr->hold.n = 0;
		if (token == tr->close_tok) {
			close_body(tr);
			return;
		}
		/* Mistral's markers inside the calls: their text. */
		loom_strbuf_put(&tr->body, token == tr->args_tok      ? "[ARGS]"
					   : token == tr->call_id_tok ? "[CALL_ID]"
								      : "[TOOL_CALLS]");
		scan_body(tr);
	}
}

loom_status loom_tool_reader_finish(loom_tool_reader *tr, loom_strbuf *out)
{
	if (tr->state == BODY) {
		loom_strbuf_put_n(&tr->body, tr->hold.s, tr->hold.n);
		tr->hold.n = 0;
		scan_body(tr);
		if (tr->style == LOOM_TOOL_GENERIC && tr->first == tr->n_calls) {
			/* {"response": "..."}: the answer is its text. */
			cJSON *j = cJSON_ParseWithLength(tr->body.s, tr->body.n);
			const cJSON *r = cJSON_GetObjectItemCaseSensitive(j, "response");
			if (cJSON_IsString(r))
				loom_strbuf_put(out, r->valuestring);
			else
				loom_strbuf_put_n(out, tr->body.s, tr->body.n);
			cJSON_Delete(j);
		}
		tr->state = CONTENT;
	} else {
		loom_strbuf_put_n(out, tr->hold.s, tr->hold.n);
		tr->hold.n = 0;
	}
	return status_of(tr, out);
}

void loom_tool_reader_begin_call(loom_tool_reader *tr, const char *name, size_t n)
{
	call_state *c = call_at(tr, tr->n_calls);
	if (c == NULL)
		return;
	c->name = strndup(name, n);
	tr->state = MESSAGE_CALL;
}

void loom_tool_reader_call_text(loom_tool_reader *tr, const char *text, size_t n)
{
	if (tr->state != MESSAGE_CALL || tr->n_calls == 0)
		return;
	call_state *c = &tr->calls[tr->n_calls - 1];
	/* Space before the JSON is no part of the arguments. */
	for (; c->args.n == 0 && n > 0 && (*text == ' ' || *text == '\n' || *text == '\t'); n--)
		text++;
	loom_strbuf_put_n(&c->args, text, n);
}

void loom_tool_reader_end_call(loom_tool_reader *tr)
{
	if (tr->state != MESSAGE_CALL || tr->n_calls == 0)
		return;
	call_state *c = &tr->calls[tr->n_calls - 1];
	if (c->args.n == 0)
		loom_strbuf_put(&c->args, "{}");
	c->done = true;
	tr->state = CONTENT;
	tr->first = tr->n_calls;
}

size_t loom_tool_reader_calls(loom_tool_reader *tr, const loom_tool_call **calls)
{
	loom_tool_call *grown = loom_array_grow(tr->view, &tr->cap_view, tr->n_calls + 1, sizeof(loom_tool_call));
	if (grown == NULL) {
		*calls = NULL;
		return 0;
	}
	tr->view = grown;
	for (size_t i = 0; i < tr->n_calls; i++) {
		const call_state *c = &tr->calls[i];
		tr->view[i] = (loom_tool_call){.name = c->name != NULL ? c->name : "",
					       .arguments = c->args.s != NULL ? c->args.s : "",
					       .n_arguments = c->args.n,
					       .done = c->done};
	}
	*calls = tr->view;
	return tr->n_calls;
}

bool loom_tool_reader_in_call(const loom_tool_reader *tr)
{
	return (tr->state == BODY && !tr->body_whole) || tr->state == MESSAGE_CALL;
}
