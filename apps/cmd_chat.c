/* cmd_chat.c - `loom chat`: a conversation, one user message per line of
 * stdin (or of -f FILE), each reply streamed to stdout as one paragraph
 * (a reply's reasoning, where its template marks it, to stderr; the
 * conversation keeps the content alone).
 * The KV cache keeps the conversation: a turn evaluates only the tokens
 * after the longest prefix its prompt shares with the tokens the cache
 * already holds. When the context fills, it is shifted as llama.cpp does
 * (the first --keep tokens stay, the older half of the rest goes), and the
 * conversation goes on over what remains. */
#include "cli.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct chat {
	loom_chat_message *msgs;
	size_t n, cap;
	/* The tokens sequence 0 holds at positions 0, 1, ..., and the last
	 * sampled one, which was never evaluated. */
	loom_token *cached;
	size_t n_cached, cached_cap;
	/* Shifts dropped the conversation's tokens [keep, keep + discarded):
	 * cached[i] stands for token i of the whole conversation below keep,
	 * and for token i + discarded from there on. */
	size_t keep, discarded;
	char *reply;
	size_t reply_len, reply_cap;
	loom_reply_reader *reader; /* this turn's reply: content and reasoning */
	bool reasoned;             /* this turn wrote reasoning to stderr */
	loom_reasoning reasoning;  /* --reasoning's */
} chat;

static bool add_cached(chat *c, loom_token token)
{
	if (c->n_cached == c->cached_cap) {
		size_t cap = c->cached_cap ? 2 * c->cached_cap : 1024;
		loom_token *t = realloc(c->cached, cap * sizeof(*t));
		if (t == NULL)
			return false;
		c->cached = t;
		c->cached_cap = cap;
	}
	c->cached[c->n_cached++] = token;
	return true;
}

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
	if (token >= 0 && !add_cached(c, token))
		return false;
	loom_generated step = {.token = token, .text = text, .len = len, .done = token < 0};
	loom_reply_parts parts;
	if (loom_reply_reader_push(c->reader, &step, &parts) != LOOM_OK)
		return false;
	if (parts.n_reasoning > 0 && fwrite(parts.reasoning, 1, parts.n_reasoning, stderr) != parts.n_reasoning)
		return false;
	c->reasoned |= parts.n_reasoning > 0;
	text = parts.content;
	len = parts.n_content;
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
	return fwrite(text, 1, len, stdout) == len && fflush(stdout) == 0;
}

/* --reasoning's level; false if it names none. */
static bool reasoning_named(const char *name, loom_reasoning *out)
{
	static const char *const names[] = {"none", "on", "low", "medium", "high"};
	static const loom_reasoning levels[] = {LOOM_REASONING_NONE, LOOM_REASONING_ON, LOOM_REASONING_LOW,
						LOOM_REASONING_MEDIUM, LOOM_REASONING_HIGH};
	*out = LOOM_REASONING_DEFAULT;
	for (size_t i = 0; name != NULL && i < sizeof(names) / sizeof(names[0]); i++)
		if (strcmp(name, names[i]) == 0) {
			*out = levels[i];
			return true;
		}
	return name == NULL;
}

/* The conversation as the chat API's JSON messages; NULL when out of
 * memory. */
static char *messages_json(const chat *c)
{
	cJSON *msgs = cJSON_CreateArray();
	for (size_t i = 0; msgs != NULL && i < c->n; i++) {
		cJSON *m = cJSON_CreateObject();
		if (m == NULL || !cJSON_AddItemToArray(msgs, m) ||
		    cJSON_AddStringToObject(m, "role", c->msgs[i].role) == NULL ||
		    cJSON_AddStringToObject(m, "content", c->msgs[i].content) == NULL) {
			cJSON_Delete(msgs);
			return NULL;
		}
	}
	char *text = msgs != NULL ? cJSON_PrintUnformatted(msgs) : NULL;
	cJSON_Delete(msgs);
	return text;
}

/* The conversation in the template, with the reasoning asked for. */
static loom_status chat_text(const loom_model *model, const cli_options *o, const chat *c, const char *messages,
			     char *buf, size_t size, size_t *n)
{
	return loom_chat_apply_json_reasoning(model, o->chat_template, c->reasoning, messages, strlen(messages), NULL, 0,
					      true, buf, size, n);
}

/* The whole conversation as the template's tokens, ending with the
 * assistant's opening, BOS as the model asks; NULL on error (reported). */
static loom_token *prompt_tokens(const loom_model *model, const cli_options *o, const chat *c, size_t *n)
{
	size_t need = 0;
	char *messages = messages_json(c);
	if (messages == NULL) {
		cli_fail("chat template: out of memory");
		return NULL;
	}
	loom_status st = chat_text(model, o, c, messages, NULL, 0, &need);
	if (st != LOOM_OK && st != LOOM_ERR_BUFFER_TOO_SMALL) {
		free(messages);
		cli_fail_status(st, "chat template");
		return NULL;
	}
	char *text = malloc(need + 1);
	st = text == NULL ? LOOM_ERR_NO_MEMORY : chat_text(model, o, c, messages, text, need + 1, &need);
	free(messages);
	if (st != LOOM_OK) {
		free(text);
		cli_fail_status(st, "chat template");
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
	/* The first turn fixes what a shift keeps: --keep tokens of its
	 * prompt after BOS (-1: all of it). */
	if (index == 1) {
		bool bos = n > 0 && toks[0] == loom_token_bos(loom_context_model(ctx));
		c->keep = o->n_keep < 0 || (size_t)o->n_keep + bos > n ? n : (size_t)o->n_keep + bos;
	}
	/* Whatever the cache holds is reused as far as it matches the
	 * prompt's tokens (the reply as the template writes it back may
	 * tokenize otherwise, or be cut by a stop string), skipping what
	 * shifts dropped; at least one token is evaluated, for the logits to
	 * sample from. */
	size_t common = 0;
	for (; common < c->n_cached; common++) {
		size_t at = common < c->keep ? common : common + c->discarded;
		if (at + 1 >= n || toks[at] != c->cached[common])
			break;
	}
	/* A model's windowed layers keep only what their windows see: cut
	 * back past that, the conversation is evaluated again. */
	if (common > 0 && (int64_t)common < loom_kv_seq_resume_min(ctx, 0))
		common = 0;
	size_t from = common < c->keep ? common : common + c->discarded;
	if (common < c->keep && c->discarded > 0) {
		/* The kept tokens changed: what followed them means nothing now. */
		from = common;
		c->discarded = 0;
	}
	loom_kv_seq_remove(ctx, 0, (int32_t)common, -1);
	c->n_cached = common;
	for (size_t i = from; i < n; i++) {
		if (!add_cached(c, toks[i])) {
			free(toks);
			return cli_fail("out of memory"), false;
		}
	}

	loom_generate_params gp = loom_generate_default_params();
	gp.n_predict = o->n_predict;
	gp.sampling = &o->sampling;
	gp.stop = o->stop;
	gp.n_stop = (size_t)o->n_stop;
	gp.ignore_eos = o->ignore_eos;
	gp.context_shift = o->context_shift != 0;
	gp.n_keep = (int32_t)c->keep;
	gp.keep_cache = common > 0;
	c->reply_len = 0;
	if (c->reply != NULL)
		c->reply[0] = '\0';
	loom_generate_stats stats;
	loom_status st = loom_reply_reader_create(loom_context_model(ctx), o->chat_template, gp.stop, gp.n_stop,
						  &c->reader);
	if (st == LOOM_OK)
		st = loom_generate_tokens(ctx, toks + from, n - from, &gp, on_reply, c, &stats);
	/* What the reader still holds back of a reply cut by its length. */
	if (st == LOOM_OK && !on_reply(c, -1, "", 0))
		st = LOOM_ERR_NO_MEMORY;
	loom_reply_reader_free(c->reader);
	c->reader = NULL;
	if (c->reasoned)
		fputc('\n', stderr);
	c->reasoned = false;
	free(toks);
	fputc('\n', stdout);
	if (!cli_stdout_ok())
		return false;
	/* Every shift dropped the tokens right after the kept ones, so
	 * together they dropped one run there. */
	if (st == LOOM_OK && stats.n_discarded > 0) {
		size_t d = (size_t)stats.n_discarded;
		memmove(c->cached + c->keep, c->cached + c->keep + d, (c->n_cached - c->keep - d) * sizeof(loom_token));
		c->n_cached -= d;
		c->discarded += d;
	}
	/* The cache holds the prompt and the reply's tokens but the last
	 * sampled one, which was never evaluated. */
	size_t held = (size_t)(loom_kv_seq_pos_max(ctx, 0) + 1);
	if (c->n_cached > held)
		c->n_cached = held;
	if (st != LOOM_OK) {
		cli_fail_status(st, "chat turn");
		if (st == LOOM_ERR_CONTEXT_FULL && o->context_shift == 0)
			fprintf(stderr, "loom: a larger -c, or leaving context shifting on, lets the chat go on\n");
		return false;
	}
	fprintf(stderr, "loom: turn %d: %d prompt tokens evaluated, %zu from the cache, %d generated", index,
		stats.n_prompt, common, stats.n_generated);
	if (stats.n_shifts > 0)
		fprintf(stderr, "; the context was shifted %d times, dropping %d tokens", stats.n_shifts,
			stats.n_discarded);
	fputc('\n', stderr);
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
	FILE *input = stdin;
	char *line = NULL;
	size_t line_cap = 0;
	int rc = 1;

	if (!cli_parse("chat", argc, argv, CLI_MODEL | CLI_FILE | CLI_BACKEND | CLI_CTX | CLI_SAMPLING | CLI_CHAT | CLI_QUANTIZE | CLI_SHIFT, &o))
		return 1;
	if (o.file != NULL && strcmp(o.file, "-") != 0) {
		int fd = cli_open_text_file("chat", o.file);
		if (fd < 0)
			return 1;
		if ((input = fdopen(fd, "r")) == NULL) {
			close(fd);
			return cli_fail("chat: cannot read %s: %s", o.file, strerror(errno));
		}
	}
	if (!cli_open_model(&o, false, &rt, &model))
		goto out;
	if (!cli_open_context(&o, model, &ctx))
		goto out;
	if (o.verbose)
		fprintf(stderr, "loom: seed %llu\n", (unsigned long long)o.sampling.seed);
	if (o.chat_template != NULL) {
		size_t n;
		loom_chat_message probe = {"user", ""};
		if (loom_chat_apply(model, o.chat_template, &probe, 1, true, NULL, 0, &n) == LOOM_ERR_INVALID_ARGUMENT) {
			cli_fail("%s", loom_last_error());
			goto out;
		}
	}
	if (!reasoning_named(o.reasoning, &c.reasoning)) {
		cli_fail("chat: --reasoning is none, on, low, medium or high, not '%s'", o.reasoning);
		goto out;
	}
	if (loom_chat_check_reasoning(model, o.chat_template, c.reasoning) != LOOM_OK) {
		cli_fail("chat: --reasoning %s: %s", o.reasoning, loom_last_error());
		goto out;
	}
	fprintf(stderr, "loom: chat template %s; one message per line, end with Ctrl-D\n",
		o.chat_template != NULL ? o.chat_template : loom_chat_template(model));
	if (o.system != NULL && !add_message(&c, "system", o.system)) {
		cli_fail("out of memory");
		goto out;
	}
	for (int index = 1;; index++) {
		ssize_t len = getline(&line, &line_cap, input);
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
	if (input != stdin)
		fclose(input);
	loom_context_free(ctx);
	loom_model_free(model);
	loom_runtime_free(rt);
	return rc;
}
