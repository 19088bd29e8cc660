/* metrics.c - the server's counters in Prometheus' text format, for
 * GET /metrics: one scrape per instance of a fleet. */
#include "serve.h"

#include <stdlib.h>

static bool metric(serve_buf *b, const char *name, const char *type, const char *help, double value)
{
	return serve_buf_appendf(b, "# HELP %s %s\n# TYPE %s %s\n%s %.17g\n", name, help, name, type, name, value);
}

char *serve_metrics_text(serve_server *s)
{
	static const char *const kinds[] = {"completions", "chat", "embeddings"};
	static const unsigned codes[] = {400, 401, 404, 405, 413, 503};
	serve_buf b = {0};
	pthread_mutex_lock(&s->lock);
	const serve_metrics m = s->metrics;
	int slots_busy = s->n_running, busy = s->n_running + (s->embedding != NULL), queued = s->queue_len;
	uint32_t kv_used = s->kv_used;
	pthread_mutex_unlock(&s->lock);

	bool ok = serve_buf_appendf(&b, "# HELP loom_requests_total Requests accepted into the queue, by endpoint.\n"
					"# TYPE loom_requests_total counter\n");
	for (int i = 0; ok && i < 3; i++)
		ok = serve_buf_appendf(&b, "loom_requests_total{endpoint=\"%s\"} %llu\n", kinds[i],
				       (unsigned long long)m.requests[i]);
	ok = ok && metric(&b, "loom_requests_finished_total", "counter", "Requests answered in full.", (double)m.finished) &&
	     metric(&b, "loom_requests_cancelled_total", "counter",
		    "Requests dropped because their client disconnected.", (double)m.cancelled) &&
	     metric(&b, "loom_requests_rejected_total", "counter", "Requests refused with 503: the queue was full.",
		    (double)m.rejected_queue_full) &&
	     metric(&b, "loom_requests_preempted_total", "counter",
		    "Times a running request gave up its cells to let others go on, to run again later.",
		    (double)m.preempted) &&
	     metric(&b, "loom_requests_running", "gauge", "Requests being evaluated now.", (double)busy) &&
	     metric(&b, "loom_requests_queued", "gauge", "Requests waiting for a slot.", (double)queued) &&
	     metric(&b, "loom_slots_total", "gauge", "Sequences that run at once (-np).", (double)s->cfg.n_slots) &&
	     metric(&b, "loom_slots_busy", "gauge", "Slots running a request.", (double)slots_busy) &&
	     metric(&b, "loom_prompt_tokens_total", "counter", "Prompt tokens of admitted requests.",
		    (double)m.prompt_tokens) &&
	     metric(&b, "loom_prompt_tokens_cached_total", "counter",
		    "Prompt tokens a slot's cache already held, not evaluated again.", (double)m.prompt_tokens_cached) &&
	     metric(&b, "loom_generated_tokens_total", "counter", "Tokens generated.", (double)m.generated_tokens) &&
	     metric(&b, "loom_decode_steps_total", "counter", "Batched decode steps.", (double)m.steps) &&
	     metric(&b, "loom_decode_tokens_total", "counter", "Tokens evaluated by decode steps.", (double)m.step_tokens) &&
	     metric(&b, "loom_decode_step_tokens_max", "gauge", "Most tokens in one step (at most -b).",
		    (double)m.step_tokens_max) &&
	     metric(&b, "loom_decode_step_seconds_max", "gauge",
		    "Longest step: the longest any stream waited between two tokens for the model.", m.step_seconds_max) &&
	     metric(&b, "loom_kv_cells_used", "gauge", "KV cache cells in use (running and idle slots).",
		    (double)kv_used) &&
	     metric(&b, "loom_kv_cells_total", "gauge", "KV cache cells (-c).", (double)s->n_ctx) &&
	     serve_buf_appendf(&b, "# HELP loom_http_errors_total Error replies, by status.\n"
				   "# TYPE loom_http_errors_total counter\n");
	for (int i = 0; ok && i < 6; i++)
		ok = serve_buf_appendf(&b, "loom_http_errors_total{code=\"%u\"} %llu\n", codes[i],
				       (unsigned long long)m.http_errors[i]);
	if (!ok) {
		serve_buf_free(&b);
		return NULL;
	}
	return b.data;
}
