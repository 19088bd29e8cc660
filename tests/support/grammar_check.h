/* grammar_check.h - what the grammar suites share: whether a grammar takes
 * a text, a model of the synthetic vocabulary, and a text sampled under a
 * grammar from random logits. */
#ifndef LOOM_TEST_GRAMMAR_CHECK_H
#define LOOM_TEST_GRAMMAR_CHECK_H

#include "grammar/grammar.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Whether the grammar takes all of s and a sentence may end there. */
bool grammar_takes(const loom_grammar *g, const char *s);
/* Whether s can begin a sentence of the grammar. */
bool grammar_starts(const loom_grammar *g, const char *s);

/* synth_model's default model (its SentencePiece vocabulary of 300
 * tokens: bytes, words, <s>, </s>), written under the test's temporary
 * directory dir and loaded on rt. */
loom_model *grammar_vocab_model(loom_runtime *rt, const char *dir);

/* A text sampled under g at temperature 1 from random logits (the
 * generator *rng), the end-of-sequence logit set to eos_logit when it is
 * not 0 (so that the end is likely once allowed); at most max_steps
 * tokens. Its bytes go to text (a control token the grammar takes as its
 * text; cap bytes, NUL-terminated), *len their number. Returns whether it
 * ended (an end-of-generation token). */
bool grammar_sample_text(loom_model *m, const loom_grammar *g, uint64_t seed, uint64_t *rng, float eos_logit,
			 int max_steps, char *text, size_t cap, size_t *len);

#endif
