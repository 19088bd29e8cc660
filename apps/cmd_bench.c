/* cmd_bench.c - `loom bench`: prompt-processing and generation speed, in
 * the manner of llama-bench (pp: one batch of n_prompt tokens; tg: n_gen
 * tokens one at a time; both after -d cached tokens, from an empty cache by
 * default; one warm-up run, then -r timed repetitions reported as mean and
 * standard deviation). With -v, where the timed steps' time went (the
 * context's profile), and what sampling each generated step's logits
 * costs, timed apart from the steps. */
#include "cli.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct bench_result {
	const char *test; /* "pp" or "tg" */
	int n_prompt, n_gen, n_depth;
	const loom_token *text; /* -f: the pp test's tokens, repeated as needed */
	size_t n_text;
	double *samples_ns;
	int n_samples;
	double avg_ns, stddev_ns, avg_ts, stddev_ts;
	/* -v: the timed runs' profile; sampling's time with loom run's
	 * defaults and at temperature 1 (OpenAI's), and the whole token step
	 * at temperature 1 with 20 logprobs (a server stream's), over
	 * n_sampled rows. */
	loom_profile profile;
	loom_sampler *samplers[2];
	loom_generator *step;
	double sample_ms[3];
	int n_sampled;
} bench_result;

/* The cache holds exactly n_depth tokens: evaluated once, in n_batch
 * pieces, then kept while each run drops what it added (evaluated again
 * where a model's windowed layers dropped what the next run needs). */
static loom_status fill_depth(loom_context *ctx, const loom_model *m, int n_depth, int n_batch, unsigned *rng)
{
	if (loom_kv_seq_pos_max(ctx, 0) + 1 >= n_depth && n_depth > 0 && loom_kv_seq_resume_min(ctx, 0) <= n_depth)
		return loom_kv_seq_remove(ctx, 0, n_depth, -1);
	loom_kv_clear(ctx);
	loom_token *toks = malloc((size_t)n_batch * sizeof(loom_token));
	if (toks == NULL)
		return LOOM_ERR_NO_MEMORY;
	loom_status st = LOOM_OK;
	for (int done = 0; done < n_depth && st == LOOM_OK;) {
		int n = n_depth - done < n_batch ? n_depth - done : n_batch;
		for (int i = 0; i < n; i++)
			toks[i] = done + i == 0 && loom_token_bos(m) >= 0
					  ? loom_token_bos(m)
					  : cli_random_token(m, rng);
		loom_batch b = {.n_tokens = n, .tokens = toks};
		st = loom_decode(ctx, &b);
		done += n;
	}
	free(toks);
	return st;
}

/* OpenAI's default sampling: temperature 1 and nothing else. */
static loom_sampler_params openai_sampling(void)
{
	loom_sampler_params p = loom_sampler_default_params();
	p.temperature = 1.0f;
	p.top_k = 0;
	p.top_p = 1.0f;
	p.min_p = 0.0f;
	return p;
}

/* A server stream's token step: OpenAI's sampling, 20 logprobs. */
static loom_status make_token_step(const loom_model *m, loom_generator **out)
{
	const loom_sampler_params sampling = openai_sampling();
	loom_generator_params gp = loom_generator_default_params();
	gp.sampling = &sampling;
	gp.n_logprobs = LOOM_MAX_TOP_LOGPROBS;
	return loom_generator_create(m, &gp, out);
}

/* -v: each sampler draws a token from the step's logits, timed; the
 * time is not the step's. */
static double sample_logits(loom_context *ctx, const loom_model *m, bench_result *r)
{
	double t0 = cli_now_ms();
	const float *logits = loom_get_logits(ctx, 0);
	for (int k = 0; k < 2 && logits != NULL; k++) {
		double t = cli_now_ms();
		loom_sampler_sample(r->samplers[k], logits, loom_model_n_vocab(m));
		r->sample_ms[k] += cli_now_ms() - t;
	}
	loom_generated out;
	double t = cli_now_ms();
	if (logits != NULL && loom_generator_next(r->step, logits, false, &out) == LOOM_OK && out.done) {
		/* An end-of-generation token: a fresh step for the next row. */
		loom_generator_free(r->step);
		r->step = NULL;
		make_token_step(m, &r->step);
	}
	r->sample_ms[2] += cli_now_ms() - t;
	r->n_sampled++;
	return cli_now_ms() - t0;
}

/* One timed run; false after printing an error. */
static bool run_once(loom_context *ctx, const loom_model *m, bench_result *r, int n_batch, unsigned *rng,
		     double *ns)
{
	const int n_prompt = r->n_prompt, n_gen = r->n_gen;
	loom_token bos = loom_token_bos(m) >= 0 ? loom_token_bos(m) : 0;
	loom_token *toks = malloc((size_t)(n_prompt > 0 ? n_prompt : 1) * sizeof(loom_token));
	if (toks == NULL)
		return cli_fail("out of memory"), false;
	loom_status st = fill_depth(ctx, m, r->n_depth, n_batch, rng);
	if (st != LOOM_OK) {
		free(toks);
		return cli_fail_status(st, "bench: filling the cache"), false;
	}
	double t0 = cli_now_ms(), not_steps = 0;
	if (n_prompt > 0) {
		toks[0] = r->n_depth > 0 ? cli_random_token(m, rng) : bos;
		for (int i = 1; i < n_prompt; i++)
			toks[i] = cli_random_token(m, rng);
		for (int i = 0; r->n_text > 0 && i < n_prompt; i++)
			toks[i] = r->text[(size_t)i % r->n_text];
		loom_batch b = {.n_tokens = n_prompt, .tokens = toks};
		st = loom_decode(ctx, &b);
	} else {
		loom_token tok = r->n_depth > 0 ? cli_random_token(m, rng) : bos;
		for (int i = 0; i < n_gen && st == LOOM_OK; i++) {
			loom_batch b = {.n_tokens = 1, .tokens = &tok};
			st = loom_decode(ctx, &b);
			if (st == LOOM_OK && r->step != NULL)
				not_steps += sample_logits(ctx, m, r);
			tok = cli_random_token(m, rng);
		}
	}
	*ns = (cli_now_ms() - t0 - not_steps) * 1e6;
	free(toks);
	if (st != LOOM_OK)
		return cli_fail_status(st, "bench"), false;
	return true;
}

static bool run_test(loom_context *ctx, const loom_model *m, int reps, int n_batch, bool profile, bench_result *r)
{
	unsigned rng = 1234;
	double ns;
	int n = r->n_prompt + r->n_gen;
	if (profile && r->n_gen > 0) {
		loom_sampler_params p[2] = {loom_sampler_default_params(), openai_sampling()};
		for (int k = 0; k < 2; k++)
			if (loom_sampler_create(&p[k], &r->samplers[k]) != LOOM_OK)
				return cli_fail_status(LOOM_ERR_NO_MEMORY, "bench"), false;
		if (make_token_step(m, &r->step) != LOOM_OK)
			return cli_fail_status(LOOM_ERR_NO_MEMORY, "bench"), false;
	}
	if (!run_once(ctx, m, r, n_batch, &rng, &ns)) /* warm-up */
		return false;
	r->sample_ms[0] = r->sample_ms[1] = r->sample_ms[2] = 0;
	r->n_sampled = 0;
	loom_context_set_profiling(ctx, profile);
	r->samples_ns = calloc((size_t)reps, sizeof(double));
	if (r->samples_ns == NULL)
		return cli_fail("out of memory"), false;
	double sum_ts = 0, sum_ts2 = 0, sum_ns = 0, sum_ns2 = 0;
	for (int i = 0; i < reps; i++) {
		if (!run_once(ctx, m, r, n_batch, &rng, &r->samples_ns[i]))
			return false;
		double ts = n * 1e9 / r->samples_ns[i];
		sum_ts += ts;
		sum_ts2 += ts * ts;
		sum_ns += r->samples_ns[i];
		sum_ns2 += r->samples_ns[i] * r->samples_ns[i];
	}
	loom_context_profile(ctx, &r->profile);
	loom_context_set_profiling(ctx, false);
	r->n_samples = reps;
	r->avg_ts = sum_ts / reps;
	r->avg_ns = sum_ns / reps;
	r->stddev_ts = reps > 1 ? sqrt(fmax(0, (sum_ts2 - reps * r->avg_ts * r->avg_ts) / (reps - 1))) : 0;
	r->stddev_ns = reps > 1 ? sqrt(fmax(0, (sum_ns2 - reps * r->avg_ns * r->avg_ns) / (reps - 1))) : 0;
	return true;
}

static const char *base_name(const char *path)
{
	const char *s = strrchr(path, '/');
	return s != NULL ? s + 1 : path;
}

static void print_md(const cli_options *o, loom_runtime *rt, const loom_model *m, const bench_result *r, int n)
{
	printf("| model | size | params | backend | threads | type_kv | test | t/s |\n");
	printf("| --- | ---: | ---: | --- | ---: | --- | ---: | ---: |\n");
	for (int i = 0; i < n; i++) {
		char depth[32] = "";
		if (r[i].n_depth > 0)
			snprintf(depth, sizeof(depth), " @ d%d", r[i].n_depth);
		printf("| %s | %.2f MiB | %.2f M | %s | %d | %s | %s%d%s | %.2f ± %.2f |\n", base_name(o->model),
		       loom_model_size(m) / 1048576.0, loom_model_n_params(m) / 1e6, loom_runtime_backend_name(rt),
		       loom_runtime_n_threads(rt), loom_dtype_name(o->kv_type), r[i].test,
		       r[i].n_prompt + r[i].n_gen, depth, r[i].avg_ts, r[i].stddev_ts);
	}
}

static void print_json(const cli_options *o, loom_runtime *rt, const loom_model *m, const bench_result *r, int n)
{
	printf("[\n");
	for (int i = 0; i < n; i++) {
		printf("  {\n");
		printf("    \"model_filename\": \"%s\",\n", o->model);
		printf("    \"model_type\": \"%s\",\n", loom_model_architecture(m));
		printf("    \"model_size\": %llu,\n", (unsigned long long)loom_model_size(m));
		printf("    \"model_n_params\": %llu,\n", (unsigned long long)loom_model_n_params(m));
		printf("    \"backends\": \"%s\",\n", loom_runtime_backend_name(rt));
		printf("    \"n_batch\": %d,\n", o->n_batch);
		printf("    \"n_threads\": %d,\n", loom_runtime_n_threads(rt));
		printf("    \"type_k\": \"%s\",\n    \"type_v\": \"%s\",\n", loom_dtype_name(o->kv_type),
		       loom_dtype_name(o->kv_type));
		printf("    \"n_prompt\": %d,\n    \"n_gen\": %d,\n    \"n_depth\": %d,\n", r[i].n_prompt, r[i].n_gen,
		       r[i].n_depth);
		printf("    \"avg_ns\": %.0f,\n    \"stddev_ns\": %.0f,\n", r[i].avg_ns, r[i].stddev_ns);
		printf("    \"avg_ts\": %.6f,\n    \"stddev_ts\": %.6f,\n", r[i].avg_ts, r[i].stddev_ts);
		printf("    \"samples_ns\": [");
		for (int s = 0; s < r[i].n_samples; s++)
			printf(s ? ", %.0f" : "%.0f", r[i].samples_ns[s]);
		printf("],\n    \"samples_ts\": [");
		for (int s = 0; s < r[i].n_samples; s++)
			printf(s ? ", %.6f" : "%.6f", (r[i].n_prompt + r[i].n_gen) * 1e9 / r[i].samples_ns[s]);
		printf("]\n  }%s\n", i + 1 < n ? "," : "");
	}
	printf("]\n");
}

/* -v: where a step's time went, per step, to stderr. */
static void print_profile(const loom_model *m, const bench_result *r)
{
	const loom_profile *p = &r->profile;
	if (p->n_steps == 0)
		return;
	const double n = (double)p->n_steps, whole = p->total_ms > 0 ? p->total_ms : 1;
	fprintf(stderr, "loom bench: %s%d: a step %.3f ms", r->test, r->n_prompt + r->n_gen, p->total_ms / n);
	if (p->by_node)
		fprintf(stderr, " = matmul %.3f (%.0f%%), head %.3f (%.0f%%), attention %.3f (%.0f%%), other %.3f (%.0f%%),",
			p->matmul_ms / n, 100 * p->matmul_ms / whole, p->head_ms / n, 100 * p->head_ms / whole,
			p->attention_ms / n, 100 * p->attention_ms / whole, p->other_ms / n, 100 * p->other_ms / whole);
	else
		fprintf(stderr, " (the backend does not time its nodes):");
	fprintf(stderr, " host %.3f (%.0f%%)\n", p->host_ms / n, 100 * p->host_ms / whole);
	if (r->n_sampled > 0)
		fprintf(stderr, "loom bench: %s%d: sampling a token of %d: %.3f ms with loom run's defaults, %.3f ms at "
				"temperature 1; the token step at temperature 1 with 20 logprobs %.3f ms\n",
			r->test, r->n_prompt + r->n_gen, loom_model_n_vocab(m), r->sample_ms[0] / r->n_sampled,
			r->sample_ms[1] / r->n_sampled, r->sample_ms[2] / r->n_sampled);
}

int cmd_bench(int argc, char **argv)
{
	cli_options o;
	loom_runtime *rt = NULL;
	loom_model *model = NULL;
	loom_context *ctx = NULL;
	bench_result results[2];
	int n_results = 0, rc = 1;
	cli_text text = {0};
	loom_token *text_tokens = NULL;
	size_t n_text = 0;

	if (!cli_parse("bench", argc, argv, CLI_MODEL | CLI_FILE | CLI_BACKEND | CLI_CTX | CLI_BENCH | CLI_QUANTIZE, &o))
		return 1;
	if (o.batched_pl.n > 0)
		return cmd_bench_batched(&o);
	if (o.batched_pp.n > 0 || o.batched_tg.n > 0 || o.batched_pp_shared)
		return cli_fail("bench: -npp, -ntg and -pps go with -npl (the sequences decoded together)");
	if (o.n_prompt_bench == 0 && o.n_gen_bench == 0)
		return cli_fail("bench: nothing to measure (-p 0 -n 0)");
	if (o.n_ctx == 0)
		o.n_ctx = o.n_depth + (o.n_prompt_bench > o.n_gen_bench ? o.n_prompt_bench : o.n_gen_bench) + 16;
	if (o.n_batch < o.n_prompt_bench)
		o.n_batch = o.n_prompt_bench;
	if (o.file != NULL && !cli_read_file("bench", o.file, &text))
		return 1;
	if (!cli_open_model(&o, false, &rt, &model) || !cli_open_context(&o, model, &ctx))
		goto out;
	if (o.file != NULL) {
		if ((text_tokens = cli_tokenize_bytes(model, text.bytes, text.len, true, &n_text)) == NULL)
			goto out;
		if (n_text == 0) {
			cli_fail("bench: %s has no tokens", o.file);
			goto out;
		}
	}
	memset(results, 0, sizeof(results));
	if (o.n_prompt_bench > 0) {
		results[n_results] = (bench_result){.test = "pp", .n_prompt = o.n_prompt_bench, .n_depth = o.n_depth,
						    .text = text_tokens, .n_text = n_text};
		if (!run_test(ctx, model, o.repetitions, o.n_batch, o.verbose, &results[n_results++]))
			goto out;
	}
	if (o.n_gen_bench > 0) {
		results[n_results] = (bench_result){.test = "tg", .n_gen = o.n_gen_bench, .n_depth = o.n_depth};
		if (!run_test(ctx, model, o.repetitions, o.n_batch, o.verbose, &results[n_results++]))
			goto out;
	}
	for (int i = 0; o.verbose && i < n_results; i++)
		print_profile(model, &results[i]);
	if (strcmp(o.output_format, "json") == 0)
		print_json(&o, rt, model, results, n_results);
	else
		print_md(&o, rt, model, results, n_results);
	rc = cli_stdout_ok() ? 0 : 1;
out:
	free(text_tokens);
	cli_text_free(&text);
	for (int i = 0; i < n_results; i++) {
		free(results[i].samples_ns);
		loom_sampler_free(results[i].samplers[0]);
		loom_sampler_free(results[i].samplers[1]);
		loom_generator_free(results[i].step);
	}
	loom_context_free(ctx);
	loom_model_free(model);
	loom_runtime_free(rt);
	return rc;
}
