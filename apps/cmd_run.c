/* cmd_run.c - `loom run`: stream a continuation of a prompt to stdout. */
#include "cli.h"

static bool print_text(void *user, loom_token token, const char *text, size_t len)
{
	(void)user;
	(void)token;
	fwrite(text, 1, len, stdout);
	fflush(stdout);
	return true;
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

int cmd_run(int argc, char **argv)
{
	cli_options o;
	loom_runtime *rt = NULL;
	loom_model *model = NULL;
	loom_context *ctx = NULL;
	int rc = 1;

	if (!cli_parse("run", argc, argv, CLI_MODEL | CLI_PROMPT | CLI_BACKEND | CLI_CTX | CLI_SAMPLING | CLI_QUANTIZE, &o))
		return 1;
	if (o.prompt == NULL)
		return cli_fail("run: no prompt given (-p PROMPT)");
	if (!cli_open_model(&o, false, &rt, &model))
		return 1;
	if (!cli_open_context(&o, model, &ctx))
		goto out;

	loom_generate_params gp = loom_generate_default_params();
	gp.n_predict = o.n_predict;
	gp.sampling = o.sampling;
	gp.stop = o.stop;
	gp.n_stop = (size_t)o.n_stop;
	loom_generate_stats stats;
	loom_status st = loom_generate(ctx, o.prompt, &gp, print_text, NULL, &stats);
	fputc('\n', stdout);
	fflush(stdout);
	if (st != LOOM_OK) {
		cli_fail_status(st, "generation failed");
		goto out;
	}
	fprintf(stderr, "\nloom: backend %s, %d threads, model %s\n", loom_runtime_backend_name(rt),
		loom_runtime_n_threads(rt), o.model);
	fprintf(stderr, "loom: prompt: %d tokens in %.2f ms (%.2f tokens/s)\n", stats.n_prompt, stats.prompt_ms,
		stats.prompt_ms > 0 ? stats.n_prompt * 1e3 / stats.prompt_ms : 0.0);
	fprintf(stderr, "loom: generation: %d tokens in %.2f ms (%.2f tokens/s), stopped by %s\n", stats.n_generated,
		stats.generate_ms, stats.generate_ms > 0 ? stats.n_generated * 1e3 / stats.generate_ms : 0.0,
		stop_reason_name(stats.stop_reason));
	rc = 0;
out:
	loom_context_free(ctx);
	loom_model_free(model);
	loom_runtime_free(rt);
	return rc;
}
