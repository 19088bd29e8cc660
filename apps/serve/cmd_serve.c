/* cmd_serve.c - `loom serve`: loads the model, starts the scheduler and the
 * HTTP side, and waits for SIGINT or SIGTERM. The first signal stops new
 * work (the listening socket closes, /health says 503, queued requests get
 * 503) and lets running requests finish; a second cuts them short. */
#include "../cli.h"
#include "serve.h"

#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static char *read_key_file(const char *path)
{
	FILE *f = fopen(path, "r");
	if (f == NULL) {
		cli_fail("cannot read --api-key-file %s", path);
		return NULL;
	}
	char *line = NULL;
	size_t cap = 0;
	ssize_t n = getline(&line, &cap, f);
	fclose(f);
	while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == '\r' || line[n - 1] == ' '))
		line[--n] = '\0';
	if (n <= 0) {
		free(line);
		cli_fail("--api-key-file %s holds no key on its first line", path);
		return NULL;
	}
	return line;
}

static void model_id(serve_server *s, const char *path)
{
	size_t len = strlen(path);
	while (len > 1 && path[len - 1] == '/')
		len--;
	size_t start = len;
	while (start > 0 && path[start - 1] != '/')
		start--;
	snprintf(s->model_id, sizeof(s->model_id), "%.*s", (int)(len - start), path + start);
	serve_buf b = {0};
	if (serve_json_string(&b, s->model_id, strlen(s->model_id)))
		s->model_id_json = b.data;
	else
		serve_buf_free(&b);
}

/* Waits for work to drain after the first signal; a second cancels it. */
static void wait_for_signals(serve_server *s, const sigset_t *set)
{
	int sig = sigwaitinfo(set, NULL);
	while (sig == SIGPIPE)
		sig = sigwaitinfo(set, NULL);
	fprintf(stderr, "loom serve: %s: finishing running requests (again to cancel them)\n", strsignal(sig));
	pthread_mutex_lock(&s->lock);
	s->draining = true;
	pthread_cond_signal(&s->wake);
	pthread_mutex_unlock(&s->lock);
	serve_http_quiesce(s);
	struct timespec tick = {0, 50 * 1000 * 1000};
	for (;;) {
		pthread_mutex_lock(&s->lock);
		bool idle = s->n_running == 0 && s->queue_len == 0 && s->embedding == NULL;
		pthread_mutex_unlock(&s->lock);
		if (idle)
			return;
		sig = sigtimedwait(set, NULL, &tick);
		if (sig == SIGINT || sig == SIGTERM) {
			fprintf(stderr, "loom serve: %s: cancelling running requests\n", strsignal(sig));
			pthread_mutex_lock(&s->lock);
			s->cancel_all = true;
			pthread_cond_signal(&s->wake);
			pthread_mutex_unlock(&s->lock);
		}
	}
}

/* Whether the chat template's tool-call marker is one token of the
 * vocabulary: a call the model opens is constrained from the token after
 * it; a marker the model writes in pieces may end inside a token that
 * already holds the call's first bytes, so those calls are read without a
 * grammar (and the log says so once). */
static bool tool_marker_is_a_token(const loom_model *model)
{
	char opening[256];
	size_t len = 0, n = 0;
	unsigned flags = 0;
	if (loom_tool_call_opening(model, NULL, NULL, opening, sizeof(opening), &len, &flags) != LOOM_OK ||
	    (flags & (LOOM_TOOL_OPENING_WHOLE_REPLY | LOOM_TOOL_OPENING_BY_NAME)))
		return true;
	len = strcspn(opening, "\n");
	loom_token t[8];
	loom_status st = loom_tokenize(model, opening, len, false, true, t, 8, &n);
	if (st == LOOM_OK && n == 1)
		return true;
	fprintf(stderr, "loom serve: the %s template's tool-call marker %.*s is not one token of this vocabulary: "
			"calls a model opens itself are read without a grammar\n",
		loom_chat_template(model), (int)len, opening);
	return false;
}

int cmd_serve(int argc, char **argv)
{
	cli_options o;
	if (!cli_parse("serve", argc, argv, CLI_MODEL | CLI_BACKEND | CLI_CTX | CLI_SERVE | CLI_QUANTIZE, &o))
		return 1;
	if (o.api_key != NULL && o.api_key_file != NULL)
		return cli_fail("serve: give --api-key or --api-key-file, not both");
	if (o.api_key != NULL && o.api_key[0] == '\0')
		return cli_fail("serve: --api-key is empty");
	char *key_from_file = o.api_key_file != NULL ? read_key_file(o.api_key_file) : NULL;
	if (o.api_key_file != NULL && key_from_file == NULL)
		return 1;

	/* Signals go to the thread that waits for them, not to the HTTP or
	 * compute threads, which inherit this mask. */
	sigset_t set;
	sigemptyset(&set);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGPIPE);
	pthread_sigmask(SIG_BLOCK, &set, NULL);

	serve_server s = {0};
	loom_runtime *rt = NULL;
	int rc = 1;
	pthread_mutex_init(&s.lock, NULL);
	pthread_cond_init(&s.wake, NULL);
	s.cfg = (serve_config){.host = o.host, .port = o.port, .n_slots = o.n_slots, .queue_size = o.queue_size,
			       .prompt_chunk = o.prompt_chunk,
			       .api_key = key_from_file != NULL ? key_from_file : o.api_key, .verbose = o.verbose};
	if (!cli_open_model(&o, false, &rt, &s.model))
		goto out;
	if (!cli_open_context(&o, s.model, &s.ctx))
		goto out;
	s.n_vocab = loom_model_n_vocab(s.model);
	s.n_embd = loom_model_n_embd(s.model);
	s.n_threads = loom_runtime_n_threads(rt);
	s.n_ctx = loom_context_n_ctx(s.ctx);
	s.n_batch = (uint32_t)o.n_batch;
	s.started = (int64_t)time(NULL);
	model_id(&s, o.model);
	s.tool_marker_token = tool_marker_is_a_token(s.model);
	s.grammars = serve_grammars_new();
	if (s.model_id_json == NULL || s.grammars == NULL) {
		cli_fail("out of memory");
		goto out;
	}
	if (!serve_scheduler_start(&s)) {
		cli_fail("serve: cannot start the scheduler");
		goto out;
	}
	if (!serve_http_start(&s))
		goto out;
	fprintf(stderr, "loom serve: listening on http://%s:%d (model %s, %d slots sharing %u cells, batch %u, %s)\n",
		s.cfg.host, s.cfg.port, s.model_id, s.cfg.n_slots, s.n_ctx, s.n_batch, loom_runtime_backend_name(rt));
	fflush(stderr);
	wait_for_signals(&s, &set);
	rc = 0;
out:
	serve_scheduler_stop(&s);
	serve_http_stop(&s);
	loom_context_free(s.ctx);
	loom_model_free(s.model);
	loom_runtime_free(rt);
	free(s.model_id_json);
	serve_grammars_free(s.grammars);
	free(key_from_file);
	pthread_mutex_destroy(&s.lock);
	pthread_cond_destroy(&s.wake);
	if (rc == 0)
		fprintf(stderr, "loom serve: stopped\n");
	return rc;
}
