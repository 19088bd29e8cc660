/* cmd_chat.c - `loom chat`: a conversation, one user message per line of
 * stdin, each reply streamed to stdout as one paragraph. The KV cache keeps
 * the conversation: a turn evaluates only the tokens after the longest
 * prefix its prompt shares with the tokens the cache already holds. */
#include "cli.h"

#include <stdlib.h>
#include <string.h>

typedef struct chat {
	loom_chat_message *msgs;
	size_t n, cap;
	/* The tokens sequence 0 holds at positions 0, 1, ... (room for
	 * n_ctx + 1: the cache never holds more, the last sampled token
	 * aside). */
	loom_token *cached;
	size_t n_cached, cached_cap;
	char *reply;
	size_t reply_len, reply_cap;
} chat;

static bool add_message(chat *c, const char *role, const char *content)
{
	if (c->n == c->cap) {
		size_t cap = c->cap ? 2 * c->cap : 16;
		loom_chat_message *m = realloc(c->msgs, cap * sizeof(*m));
		if (m == NULL)
			return false;
		c->msgs = m;
		c->cap = cap;
	}
	char *copy = strdup(content);
	if (copy == NULL)
		return false;
	c->msgs[c->n++] = (loom_chat_message){.role = role, .content = copy};
	return true;
}

static bool on_reply(void *user, loom_token token, const char *text, size_t len)
{
	chat *c = user;
	if (c->n_cached < c->cached_cap)
		c->cached[c->n_cached++] = token;
	if (c->reply_len + len + 1 > c->reply_cap) {
		size_t cap = (c->reply_len + len + 1) * 2;
		char *r = realloc(c->reply, cap);
		if (r == NULL)
			return false;
		c->reply = r;
		c->reply_cap = cap;
	}
	memcpy(c->reply + c->reply_len, text, len);
	c->reply_len += len;
	c->reply[c->reply_len] = '\0';
	fwrite(text, 1, len, stdout);
	fflush(stdout);
	return true;
}

/* The whole conversation as the template's tokens, ending with the
 * assistant's opening, BOS as the model asks; NULL on error (reported). */
static loom_token *prompt_tokens(const loom_model *model, const cli_options *o, const chat *c, size_t *n)
{
	size_t need = 0;
	loom_status st = loom_chat_apply(model, o->chat_template, c->msgs, c->n, true, NULL, 0, &need);
	if (st != LOOM_OK && st != LOOM_ERR_BUFFER_TOO_SMALL) {
		cli_fail_status(st, "chat template");
		return NULL;
	}
	char *text = malloc(need + 1);
	if (text == NULL || loom_chat_apply(model, o->chat_template, c->msgs, c->n, true, text, need + 1, &need) != LOOM_OK) {
		free(text);
		cli_fail("chat template: out of memory");
		return NULL;
	}
	loom_token *toks = NULL;
	st = loom_tokenize(model, text, need, true, true, NULL, 0, n);
	if (st == LOOM_OK || st == LOOM_ERR_BUFFER_TOO_SMALL) {
		toks = malloc((*n + 1) * sizeof(loom_token));
		st = toks == NULL ? LOOM_ERR_NO_MEMORY : loom_tokenize(model, text, need, true, true, toks, *n, n);
	}
	free(text);
	if (st != LOOM_OK) {
		free(toks);
		cli_fail_status(st, "cannot tokenize the conversation");
		return NULL;
	}
	return toks;
}

/* One turn: the user's line in, the reply out. */
static bool turn(loom_context *ctx, const cli_options *o, chat *c, int index)
{
	size_t n;
	loom_token *toks = prompt_tokens(loom_context_model(ctx), o, c, &n);
	if (toks == NULL)
		return false;
	/* Whatever the cache holds is reused as far as it matches the
	 * prompt's tokens (the reply as the template writes it back may
	 * tokenize otherwise, or be cut by a stop string); at least one token
	 * is evaluated, for the logits to sample from. */
	size_t common = 0;
	while (common + 1 < n && common < c->n_cached && toks[common] == c->cached[common])
		common++;
	loom_kv_seq_remove(ctx, 0, (int32_t)common, -1);
	c->n_cached = common;
	for (size_t i = common; i < n && c->n_cached < c->cached_cap; i++)
		c->cached[c->n_cached++] = toks[i];

	loom_generate_params gp = loom_generate_default_params();
	gp.n_predict = o->n_predict;
	gp.sampling = o->sampling;
	gp.stop = o->stop;
	gp.n_stop = (size_t)o->n_stop;
	gp.keep_cache = common > 0;
	c->reply_len = 0;
	if (c->reply != NULL)
		c->reply[0] = '\0';
	loom_generate_stats stats;
	loom_status st = loom_generate_tokens(ctx, toks + common, n - common, &gp, on_reply, c, &stats);
	free(toks);
	fputc('\n', stdout);
	fflush(stdout);
	/* The cache holds the prompt and the reply's tokens but the last
	 * sampled one, which was never evaluated. */
	size_t held = (size_t)(loom_kv_seq_pos_max(ctx, 0) + 1);
	if (c->n_cached > held)
		c->n_cached = held;
	if (st != LOOM_OK) {
		cli_fail_status(st, "chat turn");
		return false;
	}
	fprintf(stderr, "loom: turn %d: %d prompt tokens evaluated, %zu from the cache, %d generated\n", index,
		stats.n_prompt, common, stats.n_generated);
	if (!add_message(c, "assistant", c->reply != NULL ? c->reply : "")) {
		cli_fail("out of memory");
		return false;
	}
	return true;
}

int cmd_chat(int argc, char **argv)
{
	cli_options o;
	loom_runtime *rt = NULL;
	loom_model *model = NULL;
	loom_context *ctx = NULL;
	chat c = {0};
	char *line = NULL;
	size_t line_cap = 0;
	int rc = 1;

	if (!cli_parse("chat", argc, argv, CLI_MODEL | CLI_BACKEND | CLI_CTX | CLI_SAMPLING | CLI_CHAT | CLI_QUANTIZE, &o))
		return 1;
	if (!cli_open_model(&o, false, &rt, &model))
		return 1;
	if (!cli_open_context(&o, model, &ctx))
		goto out;
	c.cached_cap = (size_t)loom_context_n_ctx(ctx) + 1;
	c.cached = malloc(c.cached_cap * sizeof(loom_token));
	if (c.cached == NULL) {
		cli_fail("out of memory");
		goto out;
	}
	if (o.chat_template != NULL) {
		size_t n;
		loom_chat_message probe = {"user", ""};
		if (loom_chat_apply(model, o.chat_template, &probe, 1, true, NULL, 0, &n) == LOOM_ERR_INVALID_ARGUMENT) {
			cli_fail("%s", loom_last_error());
			goto out;
		}
	}
	fprintf(stderr, "loom: chat template %s; one message per line, end with Ctrl-D\n",
		o.chat_template != NULL ? o.chat_template : loom_chat_template(model));
	if (o.system != NULL && !add_message(&c, "system", o.system)) {
		cli_fail("out of memory");
		goto out;
	}
	for (int index = 1;; index++) {
		ssize_t len = getline(&line, &line_cap, stdin);
		if (len < 0)
			break;
		while (len > 0 && (line[len - 1] == '\n' || line[len - 1] == '\r'))
			line[--len] = '\0';
		if (len == 0) {
			index--;
			continue;
		}
		if (!add_message(&c, "user", line)) {
			cli_fail("out of memory");
			goto out;
		}
		if (!turn(ctx, &o, &c, index))
			goto out;
	}
	rc = 0;
out:
	for (size_t i = 0; i < c.n; i++)
		free((char *)c.msgs[i].content);
	free(c.msgs);
	free(c.cached);
	free(c.reply);
	free(line);
	loom_context_free(ctx);
	loom_model_free(model);
	loom_runtime_free(rt);
	return rc;
}
