/* tokenize.c - loom.h's vocabulary functions: a loaded model's special
 * tokens, text to tokens and tokens to text. */
#include "model/model.h"
#include "runtime/error.h"

loom_token loom_token_bos(const loom_model *m)
{
	return m->vocab != NULL ? loom_vocab_bos(m->vocab) : -1;
}

loom_token loom_token_eos(const loom_model *m)
{
	return m->vocab != NULL ? loom_vocab_eos(m->vocab) : -1;
}

bool loom_model_adds_bos(const loom_model *m)
{
	return m->vocab != NULL && loom_vocab_adds_bos(m->vocab);
}

bool loom_token_is_eog(const loom_model *m, loom_token token)
{
	return m->vocab != NULL && loom_vocab_is_eog(m->vocab, token);
}

loom_status loom_tokenize(const loom_model *m, const char *text, size_t text_len, bool add_special,
			  bool parse_special, loom_token *out, size_t capacity, size_t *n_out)
{
	if (m == NULL || (text == NULL && text_len > 0) || n_out == NULL)
		return loom_error(LOOM_ERR_INVALID_ARGUMENT, "loom_tokenize: model, text and n_out are required");
	if (m->vocab == NULL)
		return loom_error(LOOM_ERR_INVALID_ARGUMENT, "the model was loaded without its vocabulary");
	return loom_vocab_tokenize(m->vocab, text ? text : "", text_len, add_special, parse_special, out,
				   capacity, n_out);
}

loom_status loom_token_to_piece(const loom_model *m, loom_token token, bool special, char *buf,
				size_t size, size_t *n_out)
{
	if (m == NULL || n_out == NULL)
		return loom_error(LOOM_ERR_INVALID_ARGUMENT, "loom_token_to_piece: model and n_out are required");
	if (m->vocab == NULL)
		return loom_error(LOOM_ERR_INVALID_ARGUMENT, "the model was loaded without its vocabulary");
	return loom_vocab_token_to_piece(m->vocab, token, special, buf, size, n_out);
}
