/* cmd_chat.c - `loom chat`: a conversation, one user message per line of
 * stdin, each reply streamed to stdout as one paragraph. The KV cache keeps
 * the conversation: a turn evaluates only the text its template adds to
 * what the cache already holds. */
#include "cli.h"

#include <stdlib.h>
#include <string.h>

typedef struct chat {
	loom_chat_message *msgs;
	size_t n, cap;
	char *cached; /* the prompt text the cache holds; NULL: nothing usable */
	char *reply;
	size_t reply_len, reply_cap;
	loom_token last; /* the reply's last token */
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
	c->last = token;
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

/* The whole conversation as the template's text, ending with the
 * assistant's opening; NULL on error (reported). */
static char *format(const loom_model *model, const cli_options *o, const chat *c)
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
	return text;
}

/* One turn: the user's line in, the reply out. */
static bool turn(loom_context *ctx, const cli_options *o, chat *c, int index)
{
	const loom_model *model = loom_context_model(ctx);
	char *full = format(model, o, c);
	if (full == NULL)
		return false;
	size_t cached = c->cached != NULL ? strlen(c->cached) : 0;
	bool keep = cached > 0 && strncmp(full, c->cached, cached) == 0 && full[cached] != '\0';

	loom_generate_params gp = loom_generate_default_params();
	gp.n_predict = o->n_predict;
	gp.sampling = o->sampling;
	gp.stop = o->stop;
	gp.n_stop = (size_t)o->n_stop;
	gp.parse_special = true;
	gp.keep_cache = keep;
	gp.add_special = !keep;
	c->reply_len = 0;
	if (c->reply != NULL)
		c->reply[0] = '\0';
	loom_generate_stats stats;
	loom_status st = loom_generate(ctx, keep ? full + cached : full, &gp, on_reply, c, &stats);
	fputc('\n', stdout);
	fflush(stdout);
	if (st != LOOM_OK) {
		free(full);
		cli_fail_status(st, "chat turn");
		return false;
	}
	fprintf(stderr, "loom: turn %d: %d prompt tokens evaluated%s, %d generated\n", index, stats.n_prompt,
		keep ? " (the rest was cached)" : "", stats.n_generated);
	bool ok = add_message(c, "assistant", c->reply != NULL ? c->reply : "");
	/* The cache holds the prompt and the reply's tokens but the last: an
	 * end-of-generation token the template's text writes again, or, when
	 * the reply ran to its length, one evaluated here. After a stop string
	 * (cut out of the text) the next turn starts over. */
	bool whole = stats.stop_reason == LOOM_STOP_EOG;
	if (stats.stop_reason == LOOM_STOP_LENGTH && stats.n_generated > 0) {
		int32_t pos = loom_kv_seq_pos_max(ctx, 0) + 1, seq = 0;
		loom_batch b = {.n_tokens = 1, .tokens = &c->last, .pos = &pos, .seq_id = &seq, .logits = NULL};
		whole = loom_decode(ctx, &b) == LOOM_OK;
	}
	free(c->cached);
	c->cached = NULL;
	if (ok && whole) {
		size_t n = strlen(full), r = c->reply_len;
		c->cached = malloc(n + r + 1);
		if (c->cached != NULL) {
			memcpy(c->cached, full, n);
			memcpy(c->cached + n, c->reply != NULL ? c->reply : "", r);
			c->cached[n + r] = '\0';
		}
	}
	free(full);
	if (!ok)
		cli_fail("out of memory");
	return ok;
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
