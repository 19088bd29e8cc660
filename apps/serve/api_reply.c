/* api_reply.c - replies in the OpenAI schema. They are written straight
 * into byte buffers: a streamed chunk per token is the server's hot path,
 * and its shape is fixed. */
#include "serve.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Length of the valid UTF-8 sequence at s (at most n bytes), 0 if invalid. */
static size_t utf8_valid(const unsigned char *s, size_t n)
{
	unsigned c = s[0];
	size_t len;
	unsigned cp;
	if (c < 0x80)
		return 1;
	if (c >= 0xc2 && c <= 0xdf)
		len = 2, cp = c & 0x1f;
	else if (c >= 0xe0 && c <= 0xef)
		len = 3, cp = c & 0x0f;
	else if (c >= 0xf0 && c <= 0xf4)
		len = 4, cp = c & 0x07;
	else
		return 0;
	if (len > n)
		return 0;
	for (size_t i = 1; i < len; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return 0;
		cp = cp << 6 | (s[i] & 0x3f);
	}
	if ((len == 3 && (cp < 0x800 || (cp >= 0xd800 && cp <= 0xdfff))) || (len == 4 && (cp < 0x10000 || cp > 0x10ffff)))
		return 0;
	return len;
}

bool serve_json_string(serve_buf *out, const char *text, size_t len)
{
	const unsigned char *s = (const unsigned char *)(text != NULL ? text : "");
	if (!serve_buf_append(out, "\"", 1))
		return false;
	size_t run = 0; /* bytes copied as they are, flushed before each escape */
	for (size_t i = 0; i < len;) {
		unsigned c = s[i];
		const char *esc = NULL;
		char ubuf[8];
		size_t step = 1;
		if (c == '"')
			esc = "\\\"";
		else if (c == '\\')
			esc = "\\\\";
		else if (c == '\n')
			esc = "\\n";
		else if (c == '\r')
			esc = "\\r";
		else if (c == '\t')
			esc = "\\t";
		else if (c < 0x20) {
			snprintf(ubuf, sizeof(ubuf), "\\u%04x", c);
			esc = ubuf;
		} else if (c >= 0x80 && (step = utf8_valid(s + i, len - i)) == 0) {
			esc = "\xef\xbf\xbd"; /* U+FFFD for a byte that is not UTF-8 */
			step = 1;
		}
		if (esc == NULL) {
			run += step;
			i += step;
			continue;
		}
		if (!serve_buf_append(out, (const char *)s + i - run, run) || !serve_buf_append(out, esc, strlen(esc)))
			return false;
		run = 0;
		i += step;
	}
	return serve_buf_append(out, (const char *)s + len - run, run) && serve_buf_append(out, "\"", 1);
}

char *serve_reply_error(const char *message, const char *type, const char *param, const char *code)
{
	serve_buf b = {0};
	bool ok = serve_buf_append(&b, "{\"error\":{\"message\":", 20) && serve_json_string(&b, message, strlen(message)) &&
		  serve_buf_appendf(&b, ",\"type\":\"%s\",\"param\":", type);
	if (ok && param != NULL)
		ok = serve_json_string(&b, param, strlen(param));
	else if (ok)
		ok = serve_buf_append(&b, "null", 4);
	ok = ok && serve_buf_append(&b, ",\"code\":", 8);
	if (ok && code != NULL)
		ok = serve_json_string(&b, code, strlen(code));
	else if (ok)
		ok = serve_buf_append(&b, "null", 4);
	if (!(ok && serve_buf_append(&b, "}}", 2))) {
		serve_buf_free(&b);
		return NULL;
	}
	return b.data;
}

char *serve_reply_models(const serve_server *s)
{
	serve_buf b = {0};
	if (!serve_buf_appendf(&b, "{\"object\":\"list\",\"data\":[{\"id\":%s,\"object\":\"model\",\"created\":%lld,"
				   "\"owned_by\":\"loom\",\"meta\":{\"architecture\":",
			       s->model_id_json, (long long)s->started) ||
	    !serve_json_string(&b, loom_model_architecture(s->model), strlen(loom_model_architecture(s->model))) ||
	    !serve_buf_appendf(&b, ",\"n_ctx\":%u,\"n_ctx_train\":%d,\"n_vocab\":%d,\"n_embd\":%d,\"n_params\":%llu}}]}",
			       s->n_ctx, loom_model_n_ctx_train(s->model), s->n_vocab, s->n_embd,
			       (unsigned long long)loom_model_n_params(s->model))) {
		serve_buf_free(&b);
		return NULL;
	}
	return b.data;
}

size_t serve_token_piece(const serve_server *s, loom_token t, bool special, char *buf)
{
	size_t n = 0;
	return loom_token_to_piece(s->model, t, special, buf, SERVE_PIECE_MAX, &n) == LOOM_OK ? n : 0;
}

static bool piece_json(serve_server *s, loom_token t, serve_buf *out, bool with_bytes)
{
	char piece[SERVE_PIECE_MAX];
	size_t n = serve_token_piece(s, t, true, piece);
	if (!serve_buf_append(out, "\"token\":", 8) || !serve_json_string(out, piece, n))
		return false;
	if (!with_bytes)
		return true;
	if (!serve_buf_append(out, ",\"bytes\":[", 10))
		return false;
	for (size_t i = 0; i < n; i++)
		if (!serve_buf_appendf(out, "%s%u", i ? "," : "", (unsigned char)piece[i]))
			return false;
	return serve_buf_append(out, "]", 1);
}

/* The logprobs object of the entries r holds, in its API's shape. */
static bool logprobs_json(serve_server *s, serve_request *r, serve_buf *out)
{
	if (r->logprobs < 0)
		return serve_buf_append(out, "null", 4);
	bool ok = true;
	if (r->kind == SERVE_CHAT) {
		ok = serve_buf_append(out, "{\"content\":[", 12);
		for (size_t i = 0; ok && i < r->n_lps; i++) {
			const serve_logprob *lp = &r->lps[i];
			ok = serve_buf_append(out, i ? ",{" : "{", i ? 2 : 1) && piece_json(s, lp->token, out, true) &&
			     serve_buf_appendf(out, ",\"logprob\":%.6g,\"top_logprobs\":[", lp->logprob);
			for (int32_t k = 0; ok && k < lp->n_top; k++)
				ok = serve_buf_append(out, k ? ",{" : "{", k ? 2 : 1) && piece_json(s, lp->top[k], out, true) &&
				     serve_buf_appendf(out, ",\"logprob\":%.6g}", lp->top_logprob[k]);
			ok = ok && serve_buf_append(out, "]}", 2);
		}
		return ok && serve_buf_append(out, "]}", 2);
	}
	/* The legacy shape: parallel arrays. */
	ok = serve_buf_append(out, "{\"tokens\":[", 11);
	for (size_t i = 0; ok && i < r->n_lps; i++) {
		char piece[SERVE_PIECE_MAX];
		size_t n = serve_token_piece(s, r->lps[i].token, true, piece);
		ok = (i == 0 || serve_buf_append(out, ",", 1)) && serve_json_string(out, piece, n);
	}
	ok = ok && serve_buf_append(out, "],\"token_logprobs\":[", 20);
	for (size_t i = 0; ok && i < r->n_lps; i++)
		ok = serve_buf_appendf(out, "%s%.6g", i ? "," : "", r->lps[i].logprob);
	ok = ok && serve_buf_append(out, "],\"top_logprobs\":[", 18);
	for (size_t i = 0; ok && i < r->n_lps; i++) {
		const serve_logprob *lp = &r->lps[i];
		ok = serve_buf_append(out, i ? ",{" : "{", i ? 2 : 1);
		for (int32_t k = 0; ok && k < lp->n_top; k++) {
			char piece[SERVE_PIECE_MAX];
			size_t n = serve_token_piece(s, lp->top[k], true, piece);
			ok = (k == 0 || serve_buf_append(out, ",", 1)) && serve_json_string(out, piece, n) &&
			     serve_buf_appendf(out, ":%.6g", lp->top_logprob[k]);
		}
		ok = ok && serve_buf_append(out, "}", 1);
	}
	ok = ok && serve_buf_append(out, "],\"text_offset\":[", 17);
	for (size_t i = 0; ok && i < r->n_lps; i++)
		ok = serve_buf_appendf(out, "%s%u", i ? "," : "", r->lps[i].text_offset);
	return ok && serve_buf_append(out, "]}", 2);
}

bool serve_logprob_add(serve_server *s, serve_request *r, const loom_generated *g)
{
	if (r->n_lps == r->cap_lps) {
		size_t cap = r->cap_lps ? 2 * r->cap_lps : 16;
		serve_logprob *lps = realloc(r->lps, cap * sizeof(*lps));
		if (lps == NULL)
			return false;
		r->lps = lps;
		r->cap_lps = cap;
	}
	serve_logprob *lp = &r->lps[r->n_lps++];
	lp->token = g->token;
	lp->logprob = g->logprob;
	lp->text_offset = (uint32_t)r->text_offset;
	lp->n_top = g->n_top;
	for (int32_t k = 0; k < g->n_top; k++) {
		lp->top[k] = g->top[k];
		lp->top_logprob[k] = g->top_logprob[k];
	}
	char piece[SERVE_PIECE_MAX];
	r->text_offset += serve_token_piece(s, g->token, true, piece);
	return true;
}

static const char *finish_name(const serve_request *r)
{
	return r->finish == SERVE_FINISH_TOOL_CALLS ? "\"tool_calls\""
	       : r->finish == SERVE_FINISH_STOP     ? "\"stop\""
						    : "\"length\"";
}

const char *serve_call_id(serve_request *r, size_t i)
{
	static const char alphabet[] = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ";
	while (r->n_calls_seen <= i) {
		if (r->n_calls_seen == r->cap_calls) {
			size_t cap = r->cap_calls ? r->cap_calls * 2 : 4;
			char(*ids)[32] = realloc(r->call_ids, cap * sizeof(*ids));
			if (ids == NULL)
				return NULL;
			r->call_ids = ids;
			size_t *sent = realloc(r->call_sent, cap * sizeof(*sent));
			if (sent == NULL)
				return NULL;
			r->call_sent = sent;
			r->cap_calls = cap;
		}
		/* call_ and 24 letters and digits from the request's id and
		 * the call's number. */
		uint64_t x = 0xcbf29ce484222325ull ^ (uint64_t)r->n_calls_seen;
		for (const char *p = r->id; *p; p++)
			x = (x ^ (unsigned char)*p) * 0x100000001b3ull;
		char *id = r->call_ids[r->n_calls_seen];
		memcpy(id, "call_", 5);
		for (int k = 0; k < 24; k++) {
			x = x * 6364136223846793005ull + 1442695040888963407ull;
			id[5 + k] = alphabet[(x >> 33) % 62];
		}
		id[29] = '\0';
		r->call_sent[r->n_calls_seen++] = 0;
	}
	return r->call_ids[i];
}

static bool put(serve_buf *out, const char *text)
{
	return serve_buf_append(out, text, strlen(text));
}

/* A call's closing JSON: {"id": ..., "type": "function", "function": {"name": ..., "arguments": ...}}. */
static bool call_json(serve_request *r, size_t i, const loom_tool_call *c, serve_buf *out)
{
	const char *id = serve_call_id(r, i);
	return id != NULL && serve_buf_appendf(out, "{\"id\":\"%s\",\"type\":\"function\",\"function\":{\"name\":", id) &&
	       serve_json_string(out, c->name, strlen(c->name)) && put(out, ",\"arguments\":") &&
	       serve_json_string(out, c->arguments, c->n_arguments) && put(out, "}}");
}


static bool chunk_head(serve_server *s, serve_request *r, serve_buf *out)
{
	return serve_buf_appendf(out, "data: {\"id\":\"%s\",\"object\":\"%s\",\"created\":%lld,\"model\":%s,\"choices\":",
				 r->id, r->kind == SERVE_CHAT ? "chat.completion.chunk" : "text_completion",
				 (long long)r->created, s->model_id_json);
}

static bool usage_json(const serve_request *r, serve_buf *out)
{
	return serve_buf_appendf(out,
				 "\"usage\":{\"prompt_tokens\":%zu,\"completion_tokens\":%d,\"total_tokens\":%zu,"
				 "\"prompt_tokens_details\":{\"cached_tokens\":%d}}",
				 r->n_prompt, r->n_generated, r->n_prompt + (size_t)r->n_generated, r->n_cached_prompt);
}

bool serve_reply_chunk(serve_server *s, serve_request *r, const loom_reply_parts *p, bool finish,
		       serve_buf *out)
{
	bool ok = chunk_head(s, r, out) && serve_buf_append(out, "[{\"index\":0,", 12);
	if (r->kind == SERVE_CHAT) {
		ok = ok && serve_buf_append(out, "\"delta\":{", 9);
		if (ok && !r->role_sent) {
			ok = serve_buf_append(out, "\"role\":\"assistant\"", 18) && (finish || serve_buf_append(out, ",", 1));
			r->role_sent = true;
		}
		/* A step of reasoning alone carries no content. */
		if (ok && !finish && (p->n_content > 0 || p->n_reasoning == 0))
			ok = serve_buf_append(out, "\"content\":", 10) && serve_json_string(out, p->content, p->n_content) &&
			     (p->n_reasoning == 0 || serve_buf_append(out, ",", 1));
		if (ok && !finish && p->n_reasoning > 0)
			ok = serve_buf_append(out, "\"reasoning_content\":", 20) &&
			     serve_json_string(out, p->reasoning, p->n_reasoning);
		ok = ok && serve_buf_append(out, "}", 1);
	} else {
		ok = ok && serve_buf_append(out, "\"text\":", 7) && serve_json_string(out, p->content, p->n_content);
	}
	ok = ok && serve_buf_append(out, ",\"logprobs\":", 12) &&
	     (r->n_lps > 0 ? logprobs_json(s, r, out) : serve_buf_append(out, "null", 4)) &&
	     serve_buf_appendf(out, ",\"finish_reason\":%s}]}\n\n", finish ? finish_name(r) : "null");
	if (ok && finish && r->include_usage)
		ok = chunk_head(s, r, out) && serve_buf_append(out, "[],", 3) && usage_json(r, out) &&
		     serve_buf_append(out, "}\n\n", 3);
	if (ok && finish)
		ok = serve_buf_append(out, "data: [DONE]\n\n", 14);
	return ok;
}

bool serve_reply_tool_deltas(serve_server *s, serve_request *r, serve_buf *out)
{
	const loom_tool_call *calls;
	const size_t n = loom_reply_reader_tool_calls(r->reader, &calls);
	bool ok = true;
	for (size_t i = 0; ok && i < n; i++) {
		/* A call goes out once its name is whole: its first delta
		 * carries the id, type and name, every one its arguments'
		 * new bytes. */
		if (calls[i].name[0] == '\0' || serve_call_id(r, i) == NULL)
			break;
		const bool first = i >= r->n_calls_sent;
		if (!first && calls[i].n_arguments == r->call_sent[i])
			continue;
		const size_t from = first ? 0 : r->call_sent[i];
		ok = chunk_head(s, r, out) && put(out, "[{\"index\":0,\"delta\":{");
		if (ok && !r->role_sent) {
			ok = put(out, "\"role\":\"assistant\",");
			r->role_sent = true;
		}
		ok = ok && serve_buf_appendf(out, "\"tool_calls\":[{\"index\":%zu,", i);
		if (ok && first)
			ok = serve_buf_appendf(out, "\"id\":\"%s\",\"type\":\"function\",", serve_call_id(r, i)) &&
			     put(out, "\"function\":{\"name\":") &&
			     serve_json_string(out, calls[i].name, strlen(calls[i].name)) && put(out, ",");
		else
			ok = ok && put(out, "\"function\":{");
		ok = ok && put(out, "\"arguments\":") &&
		     serve_json_string(out, calls[i].arguments + from, calls[i].n_arguments - from) &&
		     put(out, "}}]},\"logprobs\":null,\"finish_reason\":null}]}\n\n");
		r->call_sent[i] = calls[i].n_arguments;
		if (first)
			r->n_calls_sent = i + 1;
	}
	return ok;
}

bool serve_reply_stream_error(serve_buf *out, const char *message)
{
	char *body = serve_reply_error(message, "server_error", NULL, NULL);
	bool ok = body != NULL && serve_buf_appendf(out, "data: %s\n\ndata: [DONE]\n\n", body);
	free(body);
	return ok;
}

bool serve_reply_final(serve_server *s, serve_request *r, serve_buf *out)
{
	bool chat = r->kind == SERVE_CHAT;
	bool ok = serve_buf_appendf(out, "{\"id\":\"%s\",\"object\":\"%s\",\"created\":%lld,\"model\":%s,\"choices\":[{\"index\":0,",
				    r->id, chat ? "chat.completion" : "text_completion", (long long)r->created,
				    s->model_id_json);
	const loom_tool_call *calls = NULL;
	const size_t n_calls = chat ? loom_reply_reader_tool_calls(r->reader, &calls) : 0;
	size_t named = 0;
	while (named < n_calls && calls[named].name[0] != '\0')
		named++;
	if (chat)
		ok = ok && serve_buf_append(out, "\"message\":{\"role\":\"assistant\",\"content\":", 40) &&
		     (named > 0 && r->text.len == 0 ? serve_buf_append(out, "null", 4)
						    : serve_json_string(out, r->text.data, r->text.len));
	if (chat && named > 0) {
		ok = ok && put(out, ",\"tool_calls\":[");
		for (size_t i = 0; ok && i < named; i++)
			ok = (i == 0 || serve_buf_append(out, ",", 1)) && call_json(r, i, &calls[i], out);
		ok = ok && serve_buf_append(out, "]", 1);
	}
	if (chat)
		ok = ok &&
		     (r->reasoning.len == 0 || (serve_buf_append(out, ",\"reasoning_content\":", 21) &&
						serve_json_string(out, r->reasoning.data, r->reasoning.len))) &&
		     serve_buf_append(out, "}", 1);
	else
		ok = ok && serve_buf_append(out, "\"text\":", 7) && serve_json_string(out, r->text.data, r->text.len);
	ok = ok && serve_buf_append(out, ",\"logprobs\":", 12) && logprobs_json(s, r, out) &&
	     serve_buf_appendf(out, ",\"finish_reason\":%s}],", finish_name(r)) && usage_json(r, out) &&
	     serve_buf_append(out, "}", 1);
	return ok;
}

static bool base64_floats(serve_buf *out, const float *v, size_t n)
{
	static const char alphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
	const unsigned char *p = (const unsigned char *)v; /* little-endian on every target loom builds for */
	size_t len = n * sizeof(float);
	if (!serve_buf_append(out, "\"", 1))
		return false;
	for (size_t i = 0; i < len; i += 3) {
		unsigned x = (unsigned)p[i] << 16 | (i + 1 < len ? (unsigned)p[i + 1] << 8 : 0) | (i + 2 < len ? p[i + 2] : 0);
		char q[4] = {alphabet[x >> 18 & 63], alphabet[x >> 12 & 63], i + 1 < len ? alphabet[x >> 6 & 63] : '=',
			     i + 2 < len ? alphabet[x & 63] : '='};
		if (!serve_buf_append(out, q, 4))
			return false;
	}
	return serve_buf_append(out, "\"", 1);
}

bool serve_reply_embeddings(serve_server *s, serve_request *r, serve_buf *out)
{
	size_t tokens = 0;
	bool ok = serve_buf_append(out, "{\"object\":\"list\",\"data\":[", 25);
	for (size_t i = 0; ok && i < r->n_input; i++) {
		const float *v = r->embeddings + i * (size_t)s->n_embd;
		tokens += r->n_inputs[i];
		ok = serve_buf_appendf(out, "%s{\"object\":\"embedding\",\"index\":%zu,\"embedding\":", i ? "," : "", i);
		if (ok && r->base64) {
			ok = base64_floats(out, v, (size_t)s->n_embd);
		} else {
			ok = ok && serve_buf_append(out, "[", 1);
			for (int32_t k = 0; ok && k < s->n_embd; k++)
				ok = serve_buf_appendf(out, "%s%.9g", k ? "," : "", v[k]);
			ok = ok && serve_buf_append(out, "]", 1);
		}
		ok = ok && serve_buf_append(out, "}", 1);
	}
	return ok && serve_buf_appendf(out, "],\"model\":%s,\"usage\":{\"prompt_tokens\":%zu,\"total_tokens\":%zu}}",
				       s->model_id_json, tokens, tokens);
}
