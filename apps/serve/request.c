/* request.c - a request's lifetime, and the byte buffers replies are built in. */
#include "serve.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

bool serve_buf_append(serve_buf *b, const char *data, size_t len)
{
	if (b->len + len + 1 > b->cap) {
		size_t cap = b->cap ? b->cap : 256;
		while (cap < b->len + len + 1)
			cap *= 2;
		char *d = realloc(b->data, cap);
		if (d == NULL)
			return false;
		b->data = d;
		b->cap = cap;
	}
	if (len > 0)
		memcpy(b->data + b->len, data, len);
	b->len += len;
	b->data[b->len] = '\0';
	return true;
}

bool serve_buf_appendf(serve_buf *b, const char *fmt, ...)
{
	char small[256];
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(small, sizeof(small), fmt, ap);
	va_end(ap);
	if (n < 0)
		return false;
	if ((size_t)n < sizeof(small))
		return serve_buf_append(b, small, (size_t)n);
	char *big = malloc((size_t)n + 1);
	if (big == NULL)
		return false;
	va_start(ap, fmt);
	vsnprintf(big, (size_t)n + 1, fmt, ap);
	va_end(ap);
	bool ok = serve_buf_append(b, big, (size_t)n);
	free(big);
	return ok;
}

void serve_buf_free(serve_buf *b)
{
	free(b->data);
	*b = (serve_buf){0};
}

serve_request *serve_request_new(serve_kind kind)
{
	serve_request *r = calloc(1, sizeof(*r));
	if (r == NULL)
		return NULL;
	r->kind = kind;
	r->fd = -1;
	r->refs = 1;
	r->logprobs = -1;
	return r;
}

void serve_request_unref(serve_request *r)
{
	if (r == NULL || --r->refs > 0)
		return;
	free(r->prompt);
	for (size_t i = 0; i < r->n_stop; i++)
		free(r->stop[i]);
	free(r->stop);
	loom_grammar_free(r->own_grammar);
	loom_grammar_free(r->own_tool_grammar);
	free(r->call_ids);
	free(r->tool_opening);
	free(r->tools_json);
	free(r->call_sent);
	free(r->bias_tokens);
	free(r->bias);
	for (size_t i = 0; i < r->n_input; i++)
		free(r->inputs[i]);
	free(r->inputs);
	free(r->n_inputs);
	free(r->embeddings);
	free(r->resume);
	free(r->lps);
	loom_generator_free(r->gen);
	loom_reply_reader_free(r->reader);
	free(r->error);
	serve_buf_free(&r->out);
	serve_buf_free(&r->pending);
	serve_buf_free(&r->text);
	serve_buf_free(&r->reasoning);
	free(r);
}
