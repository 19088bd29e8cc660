/* cmd_bench.c - `loom bench`: prompt-processing and generation speed, in
 * the manner of llama-bench (pp: one batch of n_prompt tokens; tg: n_gen
 * tokens one at a time from an empty cache; one warm-up run, then -r timed
 * repetitions reported as mean and standard deviation). */
#include "cli.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct bench_result {
	const char *test; /* "pp" or "tg" */
	int n_prompt, n_gen;
	double *samples_ns;
	int n_samples;
	double avg_ns, stddev_ns, avg_ts, stddev_ts;
} bench_result;

static unsigned next_rand(unsigned *state)
{
	*state = *state * 1103515245u + 12345u;
	return *state >> 8;
}

/* One timed run; false after printing an error. */
static bool run_once(loom_context *ctx, const loom_model *m, int n_prompt, int n_gen, unsigned *rng, double *ns)
{
	const int32_t n_vocab = loom_model_n_vocab(m);
	loom_token bos = loom_token_bos(m) >= 0 ? loom_token_bos(m) : 0;
	loom_token *toks = malloc((size_t)(n_prompt > 0 ? n_prompt : 1) * sizeof(loom_token));
	if (toks == NULL)
		return cli_fail("out of memory"), false;
	loom_kv_clear(ctx);
	double t0 = cli_now_ms();
	loom_status st = LOOM_OK;
	if (n_prompt > 0) {
		toks[0] = bos;
		for (int i = 1; i < n_prompt; i++)
			toks[i] = (loom_token)(next_rand(rng) % (unsigned)n_vocab);
		loom_batch b = {.n_tokens = n_prompt, .tokens = toks};
		st = loom_decode(ctx, &b);
	} else {
		loom_token tok = bos;
		for (int i = 0; i < n_gen && st == LOOM_OK; i++) {
			loom_batch b = {.n_tokens = 1, .tokens = &tok};
			st = loom_decode(ctx, &b);
			tok = (loom_token)(next_rand(rng) % (unsigned)n_vocab);
		}
	}
	*ns = (cli_now_ms() - t0) * 1e6;
	free(toks);
	if (st != LOOM_OK)
		return cli_fail_status(st, "bench"), false;
	return true;
}

static bool run_test(loom_context *ctx, const loom_model *m, int reps, bench_result *r)
{
	unsigned rng = 1234;
	double ns;
	int n = r->n_prompt + r->n_gen;
	if (!run_once(ctx, m, r->n_prompt, r->n_gen, &rng, &ns)) /* warm-up */
		return false;
	r->samples_ns = calloc((size_t)reps, sizeof(double));
	if (r->samples_ns == NULL)
		return cli_fail("out of memory"), false;
	double sum_ts = 0, sum_ts2 = 0, sum_ns = 0, sum_ns2 = 0;
	for (int i = 0; i < reps; i++) {
		if (!run_once(ctx, m, r->n_prompt, r->n_gen, &rng, &r->samples_ns[i]))
			return false;
		double ts = n * 1e9 / r->samples_ns[i];
		sum_ts += ts;
		sum_ts2 += ts * ts;
		sum_ns += r->samples_ns[i];
		sum_ns2 += r->samples_ns[i] * r->samples_ns[i];
	}
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
	for (int i = 0; i < n; i++)
		printf("| %s | %.2f MiB | %.2f M | %s | %d | %s | %s%d | %.2f ± %.2f |\n", base_name(o->model),
		       loom_model_size(m) / 1048576.0, loom_model_n_params(m) / 1e6, loom_runtime_backend_name(rt),
		       loom_runtime_n_threads(rt), loom_dtype_name(o->kv_type), r[i].test,
		       r[i].n_prompt + r[i].n_gen, r[i].avg_ts, r[i].stddev_ts);
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
		printf("    \"n_prompt\": %d,\n    \"n_gen\": %d,\n", r[i].n_prompt, r[i].n_gen);
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

int cmd_bench(int argc, char **argv)
{
	cli_options o;
	loom_runtime *rt = NULL;
	loom_model *model = NULL;
	loom_context *ctx = NULL;
	bench_result results[2];
	int n_results = 0, rc = 1;

	if (!cli_parse("bench", argc, argv, CLI_MODEL | CLI_BACKEND | CLI_CTX | CLI_BENCH | CLI_QUANTIZE, &o))
		return 1;
	if (o.n_prompt_bench == 0 && o.n_gen_bench == 0)
		return cli_fail("bench: nothing to measure (-p 0 -n 0)");
	if (o.n_ctx == 0)
		o.n_ctx = (o.n_prompt_bench > o.n_gen_bench ? o.n_prompt_bench : o.n_gen_bench) + 16;
	if (o.n_batch < o.n_prompt_bench)
		o.n_batch = o.n_prompt_bench;
	if (!cli_open_model(&o, false, &rt, &model) || !cli_open_context(&o, model, &ctx))
		goto out;
	memset(results, 0, sizeof(results));
	if (o.n_prompt_bench > 0) {
		results[n_results] = (bench_result){.test = "pp", .n_prompt = o.n_prompt_bench};
		if (!run_test(ctx, model, o.repetitions, &results[n_results++]))
			goto out;
	}
	if (o.n_gen_bench > 0) {
		results[n_results] = (bench_result){.test = "tg", .n_gen = o.n_gen_bench};
		if (!run_test(ctx, model, o.repetitions, &results[n_results++]))
			goto out;
	}
	if (strcmp(o.output_format, "json") == 0)
		print_json(&o, rt, model, results, n_results);
	else
		print_md(&o, rt, model, results, n_results);
	rc = 0;
out:
	for (int i = 0; i < n_results; i++)
		free(results[i].samples_ns);
	loom_context_free(ctx);
	loom_model_free(model);
	loom_runtime_free(rt);
	return rc;
}
