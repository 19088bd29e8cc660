/* grammar_check.c - what the grammar suites share (grammar_check.h). */
#include "grammar_check.h"

#include "check_main.h"
#include "synth_model.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static bool walks(const loom_grammar *g, const char *s, bool whole)
{
	loom_gr_matcher m;
	ck_assert_int_eq(loom_gr_matcher_init(&m, g), LOOM_OK);
	bool ok = whole ? loom_gr_matcher_accept(&m, (const unsigned char *)s, strlen(s)) && loom_gr_can_end(m.state)
			: loom_gr_matcher_allows(&m, (const unsigned char *)s, strlen(s));
	ck_assert(!m.failed);
	loom_gr_matcher_free(&m);
	return ok;
}

bool grammar_takes(const loom_grammar *g, const char *s)
{
	return walks(g, s, true);
}

bool grammar_starts(const loom_grammar *g, const char *s)
{
	return walks(g, s, false);
}

loom_model *grammar_vocab_model(loom_runtime *rt, const char *dir)
{
	synth_config c = synth_default_config();
	synth_model *sm = synth_model_build(&c, NULL);
	char path[4200];
	snprintf(path, sizeof(path), "%s/model.gguf", dir);
	ck_assert(synth_model_write(sm, path));
	synth_model_free(sm);
	loom_model *m = NULL;
	ck_assert_msg(loom_model_load(rt, path, NULL, &m) == LOOM_OK, "%s: %s", path, loom_last_error());
	return m;
}

bool grammar_sample_text(loom_model *m, const loom_grammar *g, uint64_t seed, uint64_t *rng, float eos_logit,
			 int max_steps, char *text, size_t cap, size_t *len)
{
	const int32_t n_vocab = loom_model_n_vocab(m);
	float *logits = malloc((size_t)n_vocab * sizeof(float));
	ck_assert_ptr_nonnull(logits);
	loom_sampler_params sp = loom_sampler_default_params();
	sp.temperature = 1.0f;
	sp.top_k = 0;
	sp.top_p = 1.0f;
	sp.min_p = 0.0f;
	sp.seed = seed;
	loom_sampler *s = NULL;
	ck_assert(loom_sampler_create(&sp, &s) == LOOM_OK);
	ck_assert_int_eq(loom_sampler_set_grammar(s, m, g), LOOM_OK);
	bool ended = false;
	*len = 0;
	for (int step = 0; step < max_steps && !ended && *len + 64 < cap; step++) {
		for (int32_t i = 0; i < n_vocab; i++) {
			*rng = *rng * 6364136223846793005ull + 1442695040888963407ull;
			logits[i] = (float)((*rng >> 40) % 1000) / 100.0f;
		}
		if (eos_logit != 0.0f)
			logits[SYNTH_TOKEN_EOS] = eos_logit;
		loom_token tok = loom_sampler_sample(s, logits, n_vocab);
		ck_assert_msg(tok >= 0, "seed %llu step %d: %s after %.*s", (unsigned long long)seed, step, loom_last_error(),
			      (int)*len, text);
		loom_sampler_accept(s, tok);
		size_t n = 0;
		if (loom_token_is_eog(m, tok))
			ended = true;
		else if (loom_token_to_piece(m, tok, true, text + *len, cap - *len - 1, &n) == LOOM_OK)
			*len += n;
	}
	text[*len] = '\0';
	loom_sampler_free(s);
	free(logits);
	return ended;
}
