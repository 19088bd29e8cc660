/* generator.c - the token step (loom.h's loom_generator): a row of logits
 * to a token, whether generation ends there, and the text to show. The one
 * place that decides these, for loom_generate and for any host's own loop
 * (loom serve's scheduler). */
#include "infer/logit_row.h"
#include "infer/sampler.h"
#include "runtime/error.h"
#include "runtime/struct_size.h"

#include <math.h>
#include <stdlib.h>

struct loom_generator {
	const loom_model *model;
	loom_generator_params params;
	int32_t n_vocab;
	loom_sampler *sampler;
	loom_detokenizer *text;
	loom_token *eog; /* ignore_eos: the tokens that end generation, banned from every draw */
	size_t n_eog;
	logit_cand top[2 * LOOM_MAX_TOP_LOGPROBS];
	int32_t n_generated;
	bool done;
};

loom_status loom_generator_params_init(loom_generator_params *p, size_t size)
{
	static const loom_generator_params defaults = {
		.size = sizeof(loom_generator_params),
		.sampling = NULL,
		.n_predict = -1,
		.stop = NULL,
		.n_stop = 0,
		.ignore_eos = false,
		.n_logprobs = -1,
	};
	return loom_params_init(&loom_generator_params_desc, p, size, &defaults);
}

static loom_status find_eog_tokens(loom_generator *g)
{
	size_t n = 0;
	for (loom_token t = 0; t < g->n_vocab; t++)
		n += loom_token_is_eog(g->model, t);
	if (n == (size_t)g->n_vocab)
		return loom_error(LOOM_ERR_INVALID_ARGUMENT, "ignore_eos: every token of the vocabulary ends generation");
	if (n > 0 && (g->eog = malloc(n * sizeof(loom_token))) == NULL)
		return loom_error(LOOM_ERR_NO_MEMORY, "out of memory");
	for (loom_token t = 0; t < g->n_vocab; t++)
		if (loom_token_is_eog(g->model, t))
			g->eog[g->n_eog++] = t;
	return LOOM_OK;
}

loom_status loom_generator_set_logit_bias(loom_generator *g, const loom_token *tokens, const float *bias, size_t n)
{
	if (g == NULL)
		return loom_error(LOOM_ERR_INVALID_ARGUMENT, "loom_generator_set_logit_bias: the generator is NULL");
	return loom_sampler_set_logit_bias(g->sampler, tokens, bias, n);
}

loom_status loom_generator_set_grammar(loom_generator *g, const loom_grammar *grammar)
{
	if (g == NULL)
		return loom_error(LOOM_ERR_INVALID_ARGUMENT, "loom_generator_set_grammar: the generator is NULL");
	return loom_sampler_set_grammar(g->sampler, g->model, grammar);
}

loom_status loom_generator_create(const loom_model *model, const loom_generator_params *given, loom_generator **out)
{
	loom_generator_params p = loom_generator_default_params();
	const loom_generator_params *params = &p;
	if (out == NULL || model == NULL)
		return loom_error(LOOM_ERR_INVALID_ARGUMENT, "loom_generator_create: model and out are required");
	*out = NULL;
	loom_status st = loom_params_in(&loom_generator_params_desc, &p, given);
	if (st != LOOM_OK)
		return st;
	if (params->n_logprobs < -1 || params->n_logprobs > LOOM_MAX_TOP_LOGPROBS)
		return loom_error(LOOM_ERR_INVALID_ARGUMENT, "loom_generator_create: n_logprobs %d is outside -1..%d",
				  params->n_logprobs, LOOM_MAX_TOP_LOGPROBS);
	if (params->n_stop > 0 && params->stop == NULL)
		return loom_error(LOOM_ERR_INVALID_ARGUMENT, "loom_generator_create: n_stop > 0 without stop strings");
	if (loom_model_n_vocab(model) <= 0)
		return loom_error(LOOM_ERR_INVALID_ARGUMENT, "loom_generator_create: the model has no vocabulary");
	loom_generator *g = calloc(1, sizeof(*g));
	if (g == NULL)
		return loom_error(LOOM_ERR_NO_MEMORY, "out of memory");
	g->model = model;
	g->params = *params;
	g->params.stop = NULL; /* the detokenizer keeps its own copies */
	g->params.sampling = NULL; /* the sampler keeps its own */
	g->n_vocab = loom_model_n_vocab(model);
	st = loom_sampler_create(params->sampling, &g->sampler);
	if (st == LOOM_OK)
		st = loom_detokenizer_create(model, params->stop, params->n_stop, &g->text);
	if (st == LOOM_OK && params->ignore_eos)
		st = find_eog_tokens(g);
	if (st != LOOM_OK) {
		loom_generator_free(g);
		return st;
	}
	*out = g;
	return LOOM_OK;
}

void loom_generator_free(loom_generator *g)
{
	if (g == NULL)
		return;
	loom_sampler_free(g->sampler);
	loom_detokenizer_free(g->text);
	free(g->eog);
	free(g);
}

void loom_generator_accept(loom_generator *g, const loom_token *tokens, size_t n)
{
	if (g == NULL || tokens == NULL)
		return;
	for (size_t i = 0; i < n; i++)
		loom_sampler_accept(g->sampler, tokens[i]);
}

int32_t loom_generator_n_generated(const loom_generator *g)
{
	return g != NULL ? g->n_generated : 0;
}

/* The token's log-probability and the most likely alternatives, from the
 * logits as the model gave them: the largest, one pass for the softmax's
 * sum, one selection of the best n. */
static void log_probabilities(loom_generator *g, const float *logits, loom_generated *out)
{
	logit_row row = {.x = logits, .n = g->n_vocab};
	loom_token first;
	float max = logit_row_max(&row, &first);
	logit_bound all = logit_bound_all();
	float norm = max + (float)log(logit_row_weights(&row, max, 1.0f, &all, NULL));
	out->logprob = logits[out->token] - norm;
	out->n_top = 0;
	if (g->params.n_logprobs > 0) {
		out->n_top = logit_row_top(&row, g->params.n_logprobs, g->top, 2 * LOOM_MAX_TOP_LOGPROBS);
		for (int32_t i = 0; i < out->n_top; i++) {
			out->top[i] = g->top[i].id;
			out->top_logprob[i] = g->top[i].logit - norm;
		}
	}
}

static loom_status next_step(loom_generator *g, const float *logits, bool last, loom_generated *out)
{
	if (g->done)
		return loom_error(LOOM_ERR_INVALID_ARGUMENT, "loom_generator_next: generation has ended");
	*out = (loom_generated){.token = -1, .text = "", .len = 0, .n_top = 0};
	loom_token tok;
	loom_status st = sampler_draw(g->sampler, logits, g->n_vocab, g->eog, g->n_eog, &tok);
	if (st != LOOM_OK)
		return st;
	loom_sampler_accept(g->sampler, tok);
	g->n_generated++;
	out->token = tok;
	if (g->params.n_logprobs >= 0)
		log_probabilities(g, logits, out);
	if (loom_token_is_eog(g->model, tok)) {
		/* Its own text is never shown; what was held back is. */
		out->done = g->done = true;
		out->stop_reason = LOOM_STOP_EOG;
		return loom_detokenizer_finish(g->text, &out->text, &out->len);
	}
	bool enough = g->params.n_predict >= 0 && g->n_generated >= g->params.n_predict, stopped = false;
	if ((st = loom_detokenizer_push(g->text, tok, last || enough, &out->text, &out->len, &stopped)) != LOOM_OK)
		return st;
	out->done = g->done = stopped || last || enough;
	out->stop_reason = stopped ? LOOM_STOP_STRING : last ? LOOM_STOP_CONTEXT : LOOM_STOP_LENGTH;
	return LOOM_OK;
}

loom_status loom_generator_next_sized(loom_generator *g, const float *logits, bool last, loom_generated *out,
				      size_t size)
{
	if (g == NULL || logits == NULL || out == NULL)
		return loom_error(LOOM_ERR_INVALID_ARGUMENT, "loom_generator_next: generator, logits and out are required");
	loom_generated step;
	loom_status st = loom_struct_check(&loom_generated_desc, size);
	if (st == LOOM_OK)
		st = next_step(g, logits, last, &step);
	if (st == LOOM_OK)
		st = loom_struct_out(&loom_generated_desc, out, size, &step);
	return st;
}
