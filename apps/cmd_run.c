/* cmd_run.c - `loom run`: stream a continuation of a prompt to stdout. */
#include "cli.h"

#include <stdlib.h>

/* Stops generating once stdout fails: nobody reads what would follow. */
static bool print_text(void *user, loom_token token, const char *text, size_t len)
{
	(void)user;
	(void)token;
	return fwrite(text, 1, len, stdout) == len && fflush(stdout) == 0;
}

static const char *stop_reason_name(loom_stop_reason r)
{
	switch (r) {
	case LOOM_STOP_EOG: return "end of generation";
	case LOOM_STOP_STRING: return "stop string";
	case LOOM_STOP_CALLBACK: return "stopped";
	case LOOM_STOP_CONTEXT: return "context full";
	default: return "length";
	}
}

/* The "stopped by" line, and when the context filled, what to do about it. */
static void report_stop(const loom_generate_stats *stats, const loom_context *ctx)
{
	fprintf(stderr, "loom: generation: %d tokens in %.2f ms (%.2f tokens/s), stopped by %s", stats->n_generated,
		stats->generate_ms, stats->generate_ms > 0 ? stats->n_generated * 1e3 / stats->generate_ms : 0.0,
		stop_reason_name(stats->stop_reason));
	if (stats->n_shifts > 0)
		fprintf(stderr, "; the context was shifted %d times, dropping %d tokens", stats->n_shifts,
			stats->n_discarded);
	fputc('\n', stderr);
	if (stats->stop_reason == LOOM_STOP_CONTEXT)
		fprintf(stderr, "loom: the context of %u tokens is full; a larger -c, or --context-shift (with "
				"--keep N), lets generation go on\n", loom_context_n_ctx(ctx));
}

int cmd_run(int argc, char **argv)
{
	cli_options o;
	loom_runtime *rt = NULL;
	loom_model *model = NULL;
	loom_context *ctx = NULL;
	loom_token *prompt = NULL;
	loom_grammar *grammar = NULL;
	cli_text text = {0};
	int rc = 1;

	if (!cli_parse("run", argc, argv,
		       CLI_MODEL | CLI_PROMPT | CLI_FILE | CLI_BACKEND | CLI_CTX | CLI_SAMPLING | CLI_QUANTIZE | CLI_SHIFT |
			       CLI_GRAMMAR,
		       &o))
		return 1;
	if (!cli_read_text("run", &o, "prompt", &text))
		return 1;
	/* A grammar is read and checked before the model loads. */
	cli_text grammar_text = {0};
	if (o.grammar != NULL && o.json_schema != NULL) {
		cli_fail("run: --grammar and --json-schema: one or the other");
		goto out;
	}
	const char *grammar_file = o.grammar != NULL ? o.grammar : o.json_schema;
	if (grammar_file != NULL) {
		if (!cli_read_file("run", grammar_file, &grammar_text))
			goto out;
		loom_status gst = o.grammar != NULL
					  ? loom_grammar_parse(grammar_text.bytes, grammar_text.len, NULL, &grammar)
					  : loom_grammar_from_json_schema(grammar_text.bytes, grammar_text.len, &grammar);
		if (gst != LOOM_OK) {
			cli_fail("run: %s: %s", grammar_file, loom_last_error());
			goto out;
		}
	}
	if (!cli_open_model(&o, false, &rt, &model))
		goto out;
	if (!cli_open_context(&o, model, &ctx))
		goto out;
	size_t n_prompt = 0;
	if ((prompt = cli_tokenize_bytes(model, text.bytes, text.len, true, &n_prompt)) == NULL)
		goto out;
	/* An empty prompt starts from BOS, as llama.cpp does. */
	if (n_prompt == 0 && loom_token_bos(model) >= 0)
		prompt[n_prompt++] = loom_token_bos(model);
	if (n_prompt == 0) {
		cli_fail("run: the prompt is empty and the model has no BOS token");
		goto out;
	}
	if (o.verbose)
		fprintf(stderr, "loom: seed %llu\n", (unsigned long long)o.sampling.seed);

	loom_generate_params gp = loom_generate_default_params();
	gp.n_predict = o.n_predict;
	gp.sampling = &o.sampling;
	gp.stop = o.stop;
	gp.n_stop = (size_t)o.n_stop;
	gp.ignore_eos = o.ignore_eos;
	gp.context_shift = o.context_shift == 1;
	/* --keep counts prompt tokens after BOS, as llama-cli's does. */
	bool bos = prompt[0] == loom_token_bos(model) && loom_model_adds_bos(model);
	size_t keep = o.n_keep < 0 || (size_t)o.n_keep > n_prompt ? n_prompt : (size_t)o.n_keep + bos;
	gp.n_keep = (int32_t)(keep < n_prompt ? keep : n_prompt);
	gp.grammar = grammar;
	loom_generate_stats stats;
	loom_status st = loom_generate_tokens(ctx, prompt, n_prompt, &gp, print_text, NULL, &stats);
	fputc('\n', stdout);
	if (!cli_stdout_ok())
		goto out;
	if (st != LOOM_OK) {
		cli_fail_status(st, "generation failed");
		goto out;
	}
	fprintf(stderr, "\nloom: backend %s, %d threads, model %s\n", loom_runtime_backend_name(rt),
		loom_runtime_n_threads(rt), o.model);
	fprintf(stderr, "loom: prompt: %d tokens in %.2f ms (%.2f tokens/s)\n", stats.n_prompt, stats.prompt_ms,
		stats.prompt_ms > 0 ? stats.n_prompt * 1e3 / stats.prompt_ms : 0.0);
	report_stop(&stats, ctx);
	rc = 0;
out:
	free(prompt);
	cli_text_free(&text);
	cli_text_free(&grammar_text);
	loom_grammar_free(grammar);
	loom_context_free(ctx);
	loom_model_free(model);
	loom_runtime_free(rt);
	return rc;
}
