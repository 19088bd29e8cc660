/* embed.c - loom_embed: the mean of the last hidden state over a text's
 * tokens, L2-normalised (llama.cpp's mean pooling with --embd-normalize 2,
 * what an OpenAI-style /v1/embeddings returns). */
#include "infer/context.h"

#include "runtime/error.h"

#include <math.h>
#include <stdlib.h>

/* Evaluates the tokens as sequence seq in pieces of n_batch, adding each
 * token's hidden state into sum. */
static loom_status sum_hidden(loom_context *ctx, int32_t seq, const loom_token *tokens, size_t n_tokens, double *sum)
{
	const size_t n_batch = ctx->params.n_batch, n_embd = (size_t)ctx->model->hp.n_embd;
	int32_t *pos = malloc(n_batch * sizeof(int32_t)), *seqs = malloc(n_batch * sizeof(int32_t));
	int8_t *want = malloc(n_batch);
	float *hidden = malloc(n_batch * n_embd * sizeof(float));
	loom_status st = LOOM_OK;
	if (pos == NULL || seqs == NULL || want == NULL || hidden == NULL)
		st = loom_error(LOOM_ERR_NO_MEMORY, "out of memory for the hidden states of %zu tokens", n_batch);
	for (size_t start = 0; st == LOOM_OK && start < n_tokens; start += n_batch) {
		size_t n = n_tokens - start < n_batch ? n_tokens - start : n_batch;
		for (size_t i = 0; i < n; i++) {
			pos[i] = (int32_t)(start + i);
			seqs[i] = seq;
			want[i] = 1;
		}
		loom_batch b = {.n_tokens = (int32_t)n, .tokens = tokens + start, .pos = pos, .seq_id = seqs, .logits = want};
		st = loom_decode_step(ctx, &b, LOOM_STEP_HIDDEN, hidden);
		for (size_t i = 0; st == LOOM_OK && i < n * n_embd; i++)
			sum[i % n_embd] += hidden[i];
	}
	free(pos);
	free(seqs);
	free(want);
	free(hidden);
	return st;
}

loom_status loom_embed(loom_context *ctx, int32_t seq_id, const loom_token *tokens, size_t n_tokens, float *out,
		       size_t n_dims)
{
	if (ctx == NULL || tokens == NULL || out == NULL || n_tokens == 0 || seq_id < 0 || seq_id >= LOOM_MAX_SEQ)
		return loom_error(LOOM_ERR_INVALID_ARGUMENT,
				  "loom_embed: context, tokens (at least one), out and a sequence id in [0, %d) are required",
				  LOOM_MAX_SEQ);
	const size_t n_embd = (size_t)ctx->model->hp.n_embd;
	if (n_dims != n_embd)
		return loom_error(LOOM_ERR_INVALID_ARGUMENT, "loom_embed: the model's embeddings have %zu dimensions, not %zu",
				  n_embd, n_dims);
	if (n_tokens > ctx->params.n_ctx)
		return loom_error(LOOM_ERR_CONTEXT_FULL, "%zu tokens to embed; the context holds %u", n_tokens,
				  ctx->params.n_ctx);
	double *sum = calloc(n_embd, sizeof(double));
	if (sum == NULL)
		return loom_error(LOOM_ERR_NO_MEMORY, "out of memory");
	loom_kv_seq_remove(ctx, seq_id, 0, -1);
	loom_status st = sum_hidden(ctx, seq_id, tokens, n_tokens, sum);
	loom_kv_seq_remove(ctx, seq_id, 0, -1);
	if (st == LOOM_OK) {
		double norm = 0;
		for (size_t i = 0; i < n_embd; i++) {
			sum[i] /= (double)n_tokens;
			norm += sum[i] * sum[i];
		}
		norm = sqrt(norm);
		/* An all-zero mean stays zero rather than becoming NaN. */
		for (size_t i = 0; i < n_embd; i++)
			out[i] = norm > 0 ? (float)(sum[i] / norm) : 0.0f;
	}
	free(sum);
	return st;
}
