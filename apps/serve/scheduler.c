/* scheduler.c - continuous batching: every running request advances in one
 * loom_decode per step. A running request adds its last sampled token; a
 * request still reading its prompt adds a chunk of it, so a long prompt
 * shares steps with the streams already running instead of stalling them.
 * A step holds at most n_batch tokens, which bounds the gap between two
 * tokens of any stream by the time of one such step.
 *
 * The slots share the context's cells. A request is admitted when its
 * prompt fits in the free cells (idle slots give theirs up, oldest first);
 * when generation then runs the cache full, the newest request is
 * preempted: its cells are freed and it waits at the head of the queue to
 * evaluate its prompt and what it generated again. */
#include "serve.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

bool serve_enqueue(serve_server *s, serve_request *r)
{
	/* The bound is on requests that will wait: those a free slot takes at
	 * the next step do not count. */
	int free_slots = s->cfg.n_slots - s->n_running;
	if (s->queue_len >= s->cfg.queue_size + free_slots) {
		s->metrics.rejected_queue_full++;
		return false;
	}
	r->refs++;
	r->t_queued = now_s();
	r->state = SERVE_QUEUED;
	r->next = NULL;
	if (s->queue_tail != NULL)
		s->queue_tail->next = r;
	else
		s->queue_head = r;
	s->queue_tail = r;
	s->queue_len++;
	s->metrics.requests[r->kind]++;
	pthread_cond_signal(&s->wake);
	return true;
}

static void queue_push_front(serve_server *s, serve_request *r)
{
	r->next = s->queue_head;
	s->queue_head = r;
	if (s->queue_tail == NULL)
		s->queue_tail = r;
	s->queue_len++;
	r->state = SERVE_QUEUED;
}

static void queue_remove(serve_server *s, serve_request *r)
{
	serve_request **p = &s->queue_head, *prev = NULL;
	while (*p != NULL && *p != r) {
		prev = *p;
		p = &(*p)->next;
	}
	if (*p == NULL)
		return;
	*p = r->next;
	if (s->queue_tail == r)
		s->queue_tail = prev;
	r->next = NULL;
	s->queue_len--;
}

/* True when the peer has closed its end: a non-blocking peek reads EOF or
 * an error. Pipelined bytes of a next request also mean it is there. */
static bool peer_closed(const serve_request *r)
{
	if (r->fd < 0)
		return false;
	char c;
	ssize_t n = recv(r->fd, &c, 1, MSG_PEEK | MSG_DONTWAIT);
	return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
}

/* Hands the request's step output to the HTTP side (under the lock). */
static void publish(serve_request *r)
{
	if (r->pending.len > 0 && !r->client_gone) {
		if (r->status == 0)
			r->status = 200;
		if (!serve_buf_append(&r->out, r->pending.data, r->pending.len))
			r->client_gone = true; /* out of memory: the reply cannot be completed */
	}
	r->pending.len = 0;
	serve_http_resume(r);
}

/* The request is over for the scheduler: its reply is complete in out (or
 * its client is gone). Under the lock. */
static void retire(serve_server *s, serve_request *r)
{
	r->state = SERVE_DONE;
	publish(r);
	serve_request_unref(r);
	(void)s;
}

static void release_slot(serve_server *s, serve_slot *sl)
{
	/* The last sampled token was never evaluated: the cache holds the rest. */
	sl->n_tokens = sl->n_cached;
	sl->req = NULL;
	sl->last_used = s->step;
	s->n_running--;
}

static size_t common_prefix(const loom_token *a, size_t na, const loom_token *b, size_t nb)
{
	size_t n = na < nb ? na : nb, i = 0;
	while (i < n && a[i] == b[i])
		i++;
	return i;
}

static uint32_t free_cells(const serve_server *s)
{
	return s->n_ctx - loom_kv_used(s->ctx);
}

/* Frees idle slots' cells, the least recently used first (not keep's),
 * until need cells are free. */
static bool make_room(serve_server *s, uint32_t need, const serve_slot *keep)
{
	while (free_cells(s) < need) {
		serve_slot *oldest = NULL;
		for (int i = 0; i < s->cfg.n_slots; i++) {
			serve_slot *sl = &s->slots[i];
			if (sl->req == NULL && sl != keep && sl->n_cached > 0 &&
			    (oldest == NULL || sl->last_used < oldest->last_used))
				oldest = sl;
		}
		if (oldest == NULL)
			return false;
		loom_kv_seq_remove(s->ctx, oldest->seq, 0, -1);
		oldest->n_cached = oldest->n_tokens = 0;
	}
	return true;
}

static bool slot_reserve(serve_slot *sl, size_t n)
{
	if (n <= sl->cap)
		return true;
	size_t cap = sl->cap ? sl->cap : 256;
	while (cap < n)
		cap *= 2;
	loom_token *t = realloc(sl->tokens, cap * sizeof(*t));
	if (t == NULL)
		return false;
	sl->tokens = t;
	sl->cap = cap;
	return true;
}

/* A free slot for tokens: the one whose cache shares the longest prefix
 * with them, else an empty one, else the least recently used. */
/* c, if seq's cache can be cut back to its first c tokens and continued
 * (a model's windowed layers drop what their windows no longer see), else
 * 0: the prompt is evaluated from its start. */
static size_t resumable(const serve_server *s, int32_t seq, size_t c)
{
	return c == 0 || (int64_t)c >= loom_kv_seq_resume_min(s->ctx, seq) ? c : 0;
}

static serve_slot *pick_slot(serve_server *s, const loom_token *tokens, size_t n, size_t *common)
{
	serve_slot *best = NULL;
	size_t best_common = 0;
	for (int i = 0; i < s->cfg.n_slots; i++) {
		serve_slot *sl = &s->slots[i];
		if (sl->req != NULL)
			continue;
		/* At least one token is evaluated, for the logits of the next. */
		size_t c = resumable(s, sl->seq, common_prefix(sl->tokens, sl->n_cached, tokens, n > 0 ? n - 1 : 0));
		bool better;
		if (best == NULL || c != best_common)
			better = best == NULL || c > best_common;
		else if ((sl->n_cached == 0) != (best->n_cached == 0))
			better = sl->n_cached == 0;
		else
			better = sl->last_used < best->last_used;
		if (better) {
			best = sl;
			best_common = c;
		}
	}
	*common = best_common;
	return best;
}

static void fail_request(serve_server *s, serve_request *r, int status, const char *message)
{
	r->pending.len = 0;
	if (r->status == 200) {
		serve_reply_stream_error(&r->pending, message);
	} else {
		char *body = serve_reply_error(message, status >= 500 ? "server_error" : "invalid_request_error",
					       NULL, NULL);
		r->status = status;
		if (body != NULL)
			serve_buf_append(&r->pending, body, strlen(body));
		free(body);
	}
	retire(s, r);
}

/* The running slot whose cached tokens share the longest prefix with
 * tokens (at most n - 1 of them), or NULL. */
static serve_slot *running_prefix(serve_server *s, const loom_token *tokens, size_t n, size_t *common)
{
	serve_slot *best = NULL;
	*common = 0;
	for (int i = 0; i < s->cfg.n_slots; i++) {
		serve_slot *sl = &s->slots[i];
		if (sl->req == NULL)
			continue;
		size_t c = resumable(s, sl->seq, common_prefix(sl->tokens, sl->n_cached, tokens, n > 0 ? n - 1 : 0));
		if (c > *common) {
			best = sl;
			*common = c;
		}
	}
	return best;
}

static bool follow_tool_calls(serve_server *s, serve_request *r, bool *done);

/* Puts r on slot sl, whose cache keeps its first common tokens; with a
 * donor, sl's cache is dropped and it shares the donor's first common
 * cells instead (a system prompt many requests start with is evaluated
 * and stored once). */
static bool start_request(serve_server *s, serve_slot *sl, serve_request *r, size_t common, const serve_slot *donor)
{
	const loom_token *tokens = r->resume != NULL ? r->resume : r->prompt;
	size_t n = r->resume != NULL ? r->n_resume : r->n_prompt;
	if (!slot_reserve(sl, n + 1))
		return false;
	if (r->gen == NULL) {
		loom_generator_params gp = loom_generator_default_params();
		gp.sampling = &r->sampling;
		gp.n_predict = r->max_tokens;
		gp.stop = (const char *const *)r->stop;
		gp.n_stop = r->n_stop;
		gp.n_logprobs = r->logprobs;
		if (r->kind == SERVE_CHAT && loom_reply_reader_create(s->model, NULL, gp.stop, gp.n_stop, &r->reader) !=
						     LOOM_OK)
			return false;
		if (r->read_tools && loom_reply_reader_read_tools(r->reader, r->tool_opening) != LOOM_OK)
			return false;
		if (loom_generator_create(s->model, &gp, &r->gen) != LOOM_OK ||
		    (r->grammar != NULL && loom_generator_set_grammar(r->gen, r->grammar) != LOOM_OK) ||
		    loom_generator_set_logit_bias(r->gen, r->bias_tokens, r->bias, r->n_bias) != LOOM_OK)
			return false;
		/* The tool grammar starts armed over a whole reply or a call
		 * opened for the model; otherwise when the model opens one. */
		bool none = false;
		if (r->read_tools && !follow_tool_calls(s, r, &none))
			return false;
		loom_generator_accept(r->gen, r->prompt, r->n_prompt);
		r->n_cached_prompt = (int32_t)common;
		s->metrics.prompt_tokens += r->n_prompt;
		s->metrics.prompt_tokens_cached += common;
	}
	if (donor != NULL) {
		loom_kv_seq_remove(s->ctx, sl->seq, 0, -1);
		loom_kv_seq_copy(s->ctx, donor->seq, sl->seq, 0, (int32_t)common);
	} else {
		loom_kv_seq_remove(s->ctx, sl->seq, (int32_t)common, -1);
	}
	memcpy(sl->tokens, tokens, n * sizeof(*tokens));
	sl->n_tokens = n;
	sl->n_cached = common;
	sl->req = r;
	sl->admitted = ++s->n_requests;
	free(r->resume);
	r->resume = NULL;
	r->n_resume = 0;
	r->state = SERVE_RUNNING;
	s->n_running++;
	return true;
}

/* Starts queued requests while a slot and cells for their prompts are
 * free. Under the lock. */
static void admit(serve_server *s)
{
	while (s->queue_head != NULL) {
		serve_request *r = s->queue_head;
		if (r->kind == SERVE_EMBEDDING) {
			if (s->embedding != NULL)
				return;
			queue_remove(s, r);
			r->state = SERVE_RUNNING;
			s->embedding = r;
			continue;
		}
		const loom_token *tokens = r->resume != NULL ? r->resume : r->prompt;
		size_t n = r->resume != NULL ? r->n_resume : r->n_prompt, common, shared;
		serve_slot *sl = pick_slot(s, tokens, n, &common);
		if (sl == NULL)
			return;
		/* A running request may hold a longer prefix than any free slot:
		 * then its cells are shared rather than evaluated again. */
		serve_slot *donor = running_prefix(s, tokens, n, &shared);
		if (shared <= common)
			donor = NULL;
		else
			common = shared;
		/* Cells for the rest of the prompt, and for the running decodes'
		 * next tokens. The slot's own cells that are not kept are freed
		 * anyway. */
		uint32_t need = (uint32_t)(n - common) + (uint32_t)s->n_running;
		uint32_t own = donor != NULL ? (uint32_t)sl->n_cached : (uint32_t)(sl->n_cached - common);
		if (need > s->n_ctx || !make_room(s, need > own ? need - own : 0, sl))
			return;
		queue_remove(s, r);
		if (!start_request(s, sl, r, common, donor))
			fail_request(s, r, 500, "out of memory");
	}
}

/* Frees a running request's cells and queues it first, to evaluate its
 * prompt and the tokens it generated again once there is room. */
static void preempt(serve_server *s, serve_slot *sl)
{
	serve_request *r = sl->req;
	r->resume = malloc(sl->n_tokens * sizeof(loom_token));
	if (r->resume == NULL) {
		release_slot(s, sl);
		loom_kv_seq_remove(s->ctx, sl->seq, 0, -1);
		sl->n_cached = sl->n_tokens = 0;
		fail_request(s, r, 500, "out of memory");
		return;
	}
	memcpy(r->resume, sl->tokens, sl->n_tokens * sizeof(loom_token));
	r->n_resume = sl->n_tokens;
	loom_kv_seq_remove(s->ctx, sl->seq, 0, -1);
	sl->n_cached = sl->n_tokens = 0;
	release_slot(s, sl);
	queue_push_front(s, r);
	s->metrics.preempted++;
}

/* Ends a request that will not run on: counted as cancelled if its client
 * left, else refused because the server is stopping. */
static void drop(serve_server *s, serve_request *r)
{
	if (r->client_gone) {
		s->metrics.cancelled++;
		retire(s, r);
	} else {
		fail_request(s, r, 503, "the server is shutting down");
	}
}

/* Ends requests whose clients have gone, and all of them when the server
 * is cancelling. Under the lock. */
static void reap(serve_server *s)
{
	for (int i = 0; i < s->cfg.n_slots; i++) {
		serve_slot *sl = &s->slots[i];
		serve_request *r = sl->req;
		if (r == NULL)
			continue;
		if (!r->client_gone && peer_closed(r))
			r->client_gone = true;
		if (r->client_gone || s->cancel_all) {
			release_slot(s, sl);
			drop(s, r);
		}
	}
	for (serve_request *r = s->queue_head, *next; r != NULL; r = next) {
		next = r->next;
		if (!r->client_gone && peer_closed(r))
			r->client_gone = true;
		if (r->client_gone || s->draining) {
			queue_remove(s, r);
			drop(s, r);
		}
	}
	if (s->embedding != NULL && (s->embedding->client_gone || s->cancel_all)) {
		serve_request *r = s->embedding;
		s->embedding = NULL;
		drop(s, r);
	}
}

/* One decode's tokens. */
typedef struct step_batch {
	int32_t n;
	loom_token *tokens;
	int32_t *pos, *seq;
	int8_t *logits;
	serve_slot **owner;  /* slot of each token asking for logits */
	int32_t *chunk;      /* per slot: tokens it adds this step */
	struct step_row *rows; /* the rows of logits the step gave, for advance_all */
} step_batch;

/* Plans the step: each decoding slot's token, then prompt chunks,
 * shortest remainder first, in what n_batch and the free cells allow;
 * while some requests are generating, at most prompt_chunk prompt tokens,
 * so that their next tokens wait for a short step, not a full batch of
 * prompt. Preempts the newest requests while the decodes alone do not fit.
 * Under the lock. */
static void plan(serve_server *s, step_batch *b)
{
	int n_decode = 0;
	for (int i = 0; i < s->cfg.n_slots; i++)
		if (s->slots[i].req != NULL && s->slots[i].n_tokens - s->slots[i].n_cached == 1)
			n_decode++;
	while (n_decode > 0 && !make_room(s, (uint32_t)n_decode, NULL)) {
		serve_slot *newest = NULL;
		for (int i = 0; i < s->cfg.n_slots; i++) {
			serve_slot *sl = &s->slots[i];
			if (sl->req != NULL && (newest == NULL || sl->admitted > newest->admitted))
				newest = sl;
		}
		if (newest->n_tokens - newest->n_cached == 1)
			n_decode--;
		preempt(s, newest);
	}
	uint32_t room = free_cells(s);
	int32_t budget = (int32_t)(s->n_batch < room ? s->n_batch : room);
	b->n = 0;
	for (int i = 0; i < s->cfg.n_slots; i++)
		b->chunk[i] = 0;
	for (int pass = 0; pass < 2; pass++) {
		if (pass == 1 && b->n > 0 && budget > s->cfg.prompt_chunk)
			budget = s->cfg.prompt_chunk;
		for (;;) {
			/* pass 0: decodes; pass 1: the prompt with the fewest tokens left. */
			serve_slot *pick = NULL;
			for (int i = 0; i < s->cfg.n_slots; i++) {
				serve_slot *sl = &s->slots[i];
				size_t left = sl->n_tokens - sl->n_cached;
				if (sl->req == NULL || b->chunk[i] > 0 || left == 0 || (pass == 0) != (left == 1))
					continue;
				if (pick == NULL || left < pick->n_tokens - pick->n_cached)
					pick = sl;
			}
			if (pick == NULL || budget == 0)
				break;
			int idx = (int)(pick - s->slots);
			size_t left = pick->n_tokens - pick->n_cached;
			int32_t take = left < (size_t)budget ? (int32_t)left : budget;
			for (int32_t k = 0; k < take; k++) {
				int32_t j = b->n++;
				b->tokens[j] = pick->tokens[pick->n_cached + (size_t)k];
				b->pos[j] = (int32_t)pick->n_cached + k;
				b->seq[j] = pick->seq;
				b->logits[j] = k == take - 1 && (size_t)take == left;
				b->owner[j] = b->logits[j] ? pick : NULL;
			}
			b->chunk[idx] = take;
			budget -= take;
		}
	}
}

static bool emit(serve_server *s, serve_request *r, const loom_reply_parts *p, bool finish)
{
	if (r->stream) {
		bool ok = serve_reply_chunk(s, r, p, finish, &r->pending);
		r->n_lps = 0;
		return ok;
	}
	if (!serve_buf_append(&r->text, p->content, p->n_content) ||
	    !serve_buf_append(&r->reasoning, p->reasoning, p->n_reasoning))
		return false;
	return !finish || serve_reply_final(s, r, &r->pending);
}

/* The grammar a request's calls follow now: the whole reply's, a call's
 * of any tool, or (harmony) the grammar of the function the open call
 * names, compiled once per name and kept with the server's grammars. */
static bool tool_grammar_now(serve_server *s, serve_request *r, const loom_tool_call *calls, size_t n,
			     const loom_grammar **g)
{
	*g = r->tool_grammar;
	if (!r->tool_by_name || n == 0 || calls[n - 1].done)
		return true;
	loom_grammar *owned = NULL;
	unsigned flags = r->parallel_tools ? LOOM_TOOL_GRAMMAR_PARALLEL : 0;
	loom_status st = serve_tool_grammar_get(s->grammars, s->model, r->tools_json, strlen(r->tools_json),
						calls[n - 1].name, flags, g, &owned);
	if (st == LOOM_ERR_INVALID_ARGUMENT) {
		*g = NULL; /* a function that is no tool: read as it comes */
		return true;
	}
	if (owned != NULL) {
		loom_grammar_free(r->own_tool_grammar);
		r->own_tool_grammar = owned;
	}
	return st == LOOM_OK;
}

/* After a step of a request that reads tool calls (and before its
 * first): the call grammar armed while the reply is inside a call (a
 * whole-reply grammar stays), the reply ended once a call is whole when
 * only one may come, and a reply that ended (*done) with calls finished
 * as tool_calls. */
static bool follow_tool_calls(serve_server *s, serve_request *r, bool *done)
{
	const loom_tool_call *calls;
	const size_t n = loom_reply_reader_tool_calls(r->reader, &calls);
	const bool in_call = loom_reply_reader_in_tool_call(r->reader);
	const bool arm = r->tool_whole || in_call;
	if (r->tool_grammar != NULL && arm != r->tool_armed) {
		const loom_grammar *g = NULL;
		if ((arm && !tool_grammar_now(s, r, calls, n, &g)) ||
		    loom_generator_set_grammar(r->gen, arm ? g : r->grammar) != LOOM_OK)
			return false;
		r->tool_armed = arm;
	}
	size_t whole = 0;
	for (size_t i = 0; i < n; i++)
		whole += calls[i].done;
	if (whole > 0 && !in_call && !r->parallel_tools && !*done) {
		*done = true;
		r->finish = SERVE_FINISH_STOP;
	}
	if (*done && whole > 0 && r->finish == SERVE_FINISH_STOP)
		r->finish = SERVE_FINISH_TOOL_CALLS;
	return true;
}

/* The request on sl takes its next token from logits (its generator's
 * step) and writes what its client gets into its pending output. Runs on
 * any thread, for one request at a time: it touches only the request and
 * its slot. Returns true when the request is finished; one that failed
 * (out of memory, a row with nothing to sample) has its error set. */
static bool advance(serve_server *s, serve_slot *sl, const float *logits)
{
	serve_request *r = sl->req;
	loom_generated g;
	bool full = sl->n_cached >= s->n_ctx;
	bool ok = slot_reserve(sl, sl->n_tokens + 1);
	if (ok && loom_generator_next(r->gen, logits, full, &g) != LOOM_OK) {
		r->error = strdup(loom_last_error());
		r->pending.len = 0;
		return true;
	}
	if (ok) {
		sl->tokens[sl->n_tokens++] = g.token;
		if (r->n_generated++ == 0)
			r->t_first = now_s();
		if (r->logprobs >= 0)
			ok = serve_logprob_add(s, r, &g);
		r->finish = g.done && (g.stop_reason == LOOM_STOP_EOG || g.stop_reason == LOOM_STOP_STRING)
				    ? SERVE_FINISH_STOP
				    : SERVE_FINISH_LENGTH;
	}
	/* A stream gets a chunk per generated token, its text empty while held
	 * back, so clients see progress; the end-of-generation token adds
	 * only what was held back. A chat's reply is read apart into its
	 * content and reasoning. */
	loom_reply_parts parts = {.content = g.text, .n_content = g.len, .reasoning = ""};
	if (ok && r->reader != NULL && loom_reply_reader_push(r->reader, &g, &parts) != LOOM_OK) {
		r->error = strdup(loom_last_error());
		r->pending.len = 0;
		return true;
	}
	bool done = g.done;
	if (ok && r->read_tools && !follow_tool_calls(s, r, &done)) {
		r->error = strdup(loom_last_error());
		r->pending.len = 0;
		return true;
	}
	bool eog = ok && g.done && g.stop_reason == LOOM_STOP_EOG;
	if (ok && (!eog || parts.n_content > 0 || parts.n_reasoning > 0 || r->n_lps > 0))
		ok = emit(s, r, &parts, false);
	if (ok && r->stream && r->read_tools)
		ok = serve_reply_tool_deltas(s, r, &r->pending);
	const loom_reply_parts none = {.content = "", .reasoning = ""};
	if (ok && done)
		ok = emit(s, r, &none, true);
	if (!ok) {
		r->error = strdup("out of memory");
		r->pending.len = 0;
		return true;
	}
	return done;
}

/* One step's rows of logits, each the next token of a running request. */
typedef struct step_row {
	serve_slot *slot;
	const float *logits;
} step_row;

/* Every request that asked for logits this step takes its next token.
 * Each row costs a few passes over the vocabulary, so the rows are shared
 * among the compute threads, which sit idle between decodes. */
static void advance_all(serve_server *s, const step_row *rows, int n, bool *finished)
{
#pragma omp parallel for schedule(dynamic, 1) num_threads(s->n_threads) if (n > 1)
	for (int i = 0; i < n; i++)
		finished[rows[i].slot - s->slots] = advance(s, rows[i].slot, rows[i].logits);
}

static void log_finished(const serve_request *r)
{
	double now = now_s();
	fprintf(stderr, "loom serve: %s: %zu prompt tokens (%d cached), %d generated (%s); first token %.0f ms, %.1f tok/s\n",
		r->id, r->n_prompt, r->n_cached_prompt, r->n_generated, r->finish == SERVE_FINISH_TOOL_CALLS ? "tool_calls" : r->finish == SERVE_FINISH_STOP ? "stop" : "length",
		(r->t_first - r->t_queued) * 1e3, r->n_generated > 1 ? (r->n_generated - 1) / (now - r->t_first) : 0.0);
}

static void run_embedding_input(serve_server *s, serve_request *r)
{
	size_t i = r->embed_next;
	float *out = r->embeddings + i * (size_t)s->n_embd;
	loom_status st = loom_embed(s->ctx, s->cfg.n_slots, r->inputs[i], r->n_inputs[i], out, (size_t)s->n_embd);
	if (st != LOOM_OK) {
		r->pending.len = 0;
		r->embed_next = r->n_input + 1; /* failed */
		return;
	}
	r->embed_next++;
	if (r->embed_next == r->n_input && !serve_reply_embeddings(s, r, &r->pending))
		r->embed_next = r->n_input + 1;
}

static void *scheduler_main(void *arg)
{
	serve_server *s = arg;
	size_t cap = s->n_batch;
	step_batch b = {
		.tokens = malloc(cap * sizeof(loom_token)),
		.pos = malloc(cap * sizeof(int32_t)),
		.seq = malloc(cap * sizeof(int32_t)),
		.logits = malloc(cap),
		.owner = malloc(cap * sizeof(serve_slot *)),
		.chunk = malloc((size_t)s->cfg.n_slots * sizeof(int32_t)),
		.rows = malloc((size_t)s->cfg.n_slots * sizeof(struct step_row)),
	};
	pthread_mutex_lock(&s->lock);
	if (b.tokens == NULL || b.pos == NULL || b.seq == NULL || b.logits == NULL || b.owner == NULL ||
	    b.chunk == NULL || b.rows == NULL) {
		s->stopping = true;
		fprintf(stderr, "loom serve: out of memory\n");
	}
	while (!s->stopping) {
		reap(s);
		admit(s);
		/* An embeddings request runs one input per step, beside the decodes,
		 * when its cells can be found. */
		serve_request *embed = s->embedding;
		if (embed != NULL && !make_room(s, (uint32_t)embed->n_inputs[embed->embed_next], NULL))
			embed = NULL;
		plan(s, &b);
		if (embed == NULL && b.n == 0) {
			s->kv_used = loom_kv_used(s->ctx);
			pthread_cond_wait(&s->wake, &s->lock);
			continue;
		}
		pthread_mutex_unlock(&s->lock);

		if (embed != NULL) {
			run_embedding_input(s, embed);
			pthread_mutex_lock(&s->lock);
			if (embed->embed_next > embed->n_input) {
				s->embedding = NULL;
				fail_request(s, embed, 500, loom_last_error());
			} else if (embed->embed_next == embed->n_input) {
				s->embedding = NULL;
				s->metrics.finished++;
				retire(s, embed);
			}
			pthread_mutex_unlock(&s->lock);
		}
		if (b.n == 0) {
			pthread_mutex_lock(&s->lock);
			continue;
		}

		double t0 = now_s();
		loom_batch batch = {.n_tokens = b.n, .tokens = b.tokens, .pos = b.pos, .seq_id = b.seq, .logits = b.logits};
		loom_status st = loom_decode(s->ctx, &batch);
		bool finished[LOOM_MAX_SEQ] = {0};
		int n_rows = 0;
		if (st == LOOM_OK) {
			for (int i = 0; i < s->cfg.n_slots; i++)
				s->slots[i].n_cached += (size_t)b.chunk[i];
			for (int32_t j = 0; j < b.n; j++)
				if (b.owner[j] != NULL && b.owner[j]->req != NULL)
					b.rows[n_rows++] = (step_row){b.owner[j], loom_get_logits(s->ctx, j)};
			advance_all(s, b.rows, n_rows, finished);
		}
		double dt = now_s() - t0;

		pthread_mutex_lock(&s->lock);
		s->step++;
		s->metrics.steps++;
		s->metrics.generated_tokens += (uint64_t)n_rows;
		s->metrics.step_tokens += (uint64_t)b.n;
		if ((uint64_t)b.n > s->metrics.step_tokens_max)
			s->metrics.step_tokens_max = (uint64_t)b.n;
		if (dt > s->metrics.step_seconds_max)
			s->metrics.step_seconds_max = dt;
		for (int i = 0; i < s->cfg.n_slots; i++) {
			serve_slot *sl = &s->slots[i];
			serve_request *r = sl->req;
			if (r == NULL || b.chunk[i] == 0)
				continue;
			sl->last_used = s->step;
			if (st != LOOM_OK) {
				loom_kv_seq_remove(s->ctx, sl->seq, (int32_t)sl->n_cached, -1);
				release_slot(s, sl);
				fail_request(s, r, 500, loom_last_error());
			} else if (r->error != NULL) {
				release_slot(s, sl);
				fail_request(s, r, 500, r->error);
			} else if (finished[i]) {
				release_slot(s, sl);
				if (r->client_gone) {
					s->metrics.cancelled++;
				} else {
					s->metrics.finished++;
					if (s->cfg.verbose)
						log_finished(r);
				}
				retire(s, r);
			} else {
				publish(r);
			}
		}
		s->kv_used = loom_kv_used(s->ctx);
	}
	/* Stopping: whatever is left is cut short. */
	s->cancel_all = true;
	s->draining = true;
	reap(s);
	pthread_mutex_unlock(&s->lock);
	free(b.tokens);
	free(b.pos);
	free(b.seq);
	free(b.logits);
	free(b.owner);
	free(b.chunk);
	free(b.rows);
	return NULL;
}

bool serve_scheduler_start(serve_server *s)
{
	s->slots = calloc((size_t)s->cfg.n_slots, sizeof(serve_slot));
	if (s->slots == NULL)
		return false;
	for (int i = 0; i < s->cfg.n_slots; i++)
		s->slots[i].seq = i;
	if (pthread_create(&s->scheduler, NULL, scheduler_main, s) != 0)
		return false;
	s->scheduler_started = true;
	return true;
}

void serve_scheduler_stop(serve_server *s)
{
	if (s->scheduler_started) {
		pthread_mutex_lock(&s->lock);
		s->stopping = true;
		pthread_cond_signal(&s->wake);
		pthread_mutex_unlock(&s->lock);
		pthread_join(s->scheduler, NULL);
		s->scheduler_started = false;
	}
	if (s->slots != NULL)
		for (int i = 0; i < s->cfg.n_slots; i++)
			free(s->slots[i].tokens);
	free(s->slots);
	s->slots = NULL;
}
