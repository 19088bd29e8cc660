/* cmd_perplexity.c - `loom perplexity`, computed the way llama-perplexity
 * does: the text is cut into chunks of n_ctx tokens, each chunk is evaluated
 * from an empty cache (its first token replaced by BOS when the model adds
 * one), and only the second half of each chunk is scored, so every scored
 * token has at least n_ctx/2 tokens of context. */
#include "cli.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* -log p(target) from one row of logits, in double precision. */
static double neg_log_prob(const float *logits, int32_t n_vocab, loom_token target)
{
	float max = logits[0];
	for (int32_t i = 1; i < n_vocab; i++)
		if (logits[i] > max)
			max = logits[i];
	double sum = 0;
	for (int32_t i = 0; i < n_vocab; i++)
		sum += exp((double)(logits[i] - max));
	return log(sum) - (double)(logits[target] - max);
}

/* Evaluates one chunk and adds the scored tokens' NLL to the sums. */
static bool eval_chunk(loom_context *ctx, const loom_model *m, const loom_token *chunk, int n_ctx, int n_batch,
		       double *nll, double *nll2, int *count)
{
	const int first = n_ctx / 2;
	const int32_t n_vocab = loom_model_n_vocab(m);
	loom_token *toks = malloc((size_t)n_ctx * sizeof(loom_token));
	int32_t *pos = malloc((size_t)n_batch * sizeof(int32_t));
	int8_t *want = malloc((size_t)n_batch);
	bool ok = toks != NULL && pos != NULL && want != NULL;
	if (!ok)
		cli_fail("out of memory");
	else
		memcpy(toks, chunk, (size_t)n_ctx * sizeof(loom_token));
	if (ok && loom_model_adds_bos(m))
		toks[0] = loom_token_bos(m);
	loom_kv_clear(ctx);
	for (int start = 0; ok && start < n_ctx; start += n_batch) {
		int n = n_ctx - start < n_batch ? n_ctx - start : n_batch;
		for (int i = 0; i < n; i++) {
			pos[i] = start + i;
			want[i] = start + i >= first && start + i < n_ctx - 1;
		}
		loom_batch b = {.n_tokens = n, .tokens = toks + start, .pos = pos, .logits = want};
		loom_status st = loom_decode(ctx, &b);
		if (st != LOOM_OK) {
			cli_fail_status(st, "evaluation failed");
			ok = false;
			break;
		}
		for (int i = 0; i < n; i++) {
			if (!want[i])
				continue;
			double v = neg_log_prob(loom_get_logits(ctx, i), n_vocab, chunk[start + i + 1]);
			*nll += v;
			*nll2 += v * v;
			(*count)++;
		}
	}
	free(toks);
	free(pos);
	free(want);
	return ok;
}

int cmd_perplexity(int argc, char **argv)
{
	cli_options o;
	loom_runtime *rt = NULL;
	loom_model *model = NULL;
	loom_context *ctx = NULL;
	loom_token *tokens = NULL;
	cli_text text = {0};
	int rc = 1;

	if (!cli_parse("perplexity", argc, argv, CLI_MODEL | CLI_FILE | CLI_BACKEND | CLI_CTX | CLI_QUANTIZE, &o))
		return 1;
	if (o.file == NULL)
		return cli_fail("perplexity: no text file given (-f FILE)");
	if (!cli_read_file("perplexity", o.file, &text))
		return 1;
	if (o.n_ctx == 0)
		o.n_ctx = 512;
	if (o.n_batch > o.n_ctx)
		o.n_batch = o.n_ctx;
	if (!cli_open_model(&o, false, &rt, &model))
		goto out;
	if (!cli_open_context(&o, model, &ctx))
		goto out;
	size_t n_tokens = 0;
	if ((tokens = cli_tokenize_bytes(model, text.bytes, text.len, true, &n_tokens)) == NULL)
		goto out;
	const int n_chunks = (int)(n_tokens / (size_t)o.n_ctx);
	if (n_chunks < 1) {
		cli_fail("perplexity: the text has %zu tokens; it needs at least 2 * n_ctx = %d", n_tokens, 2 * o.n_ctx);
		goto out;
	}
	fprintf(stderr, "perplexity: %zu tokens, %d chunks of %d, batch %d\n", n_tokens, n_chunks, o.n_ctx, o.n_batch);
	double nll = 0, nll2 = 0, t0 = cli_now_ms();
	int count = 0;
	for (int c = 0; c < n_chunks; c++) {
		if (!eval_chunk(ctx, model, tokens + (size_t)c * (size_t)o.n_ctx, o.n_ctx, o.n_batch, &nll, &nll2, &count))
			goto out;
		printf("[%d]%.4f,", c + 1, exp(nll / count));
		fflush(stdout);
	}
	printf("\n");
	double mean = nll / count, var = nll2 / count - mean * mean;
	double err = count > 1 && var > 0 ? exp(mean) * sqrt(var / (count - 1)) : 0;
	fprintf(stderr, "perplexity: %.2f ms per chunk\n", (cli_now_ms() - t0) / n_chunks);
	printf("PPL = %.4f +/- %.5f\n", exp(mean), err);
	rc = cli_stdout_ok() ? 0 : 1;
out:
	free(tokens);
	cli_text_free(&text);
	loom_context_free(ctx);
	loom_model_free(model);
	loom_runtime_free(rt);
	return rc;
}
