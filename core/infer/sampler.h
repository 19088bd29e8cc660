/* sampler.h - what the core adds to loom.h's sampler: a draw in which
 * some tokens cannot win (a generator's ignore_eos). */
#ifndef LOOM_INFER_SAMPLER_H
#define LOOM_INFER_SAMPLER_H

#include "loom.h"

/* loom_sampler_sample with the banned tokens' logits taken as -inf, and a
 * status that says why when there is no token (*out -1). */
loom_status sampler_draw(loom_sampler *s, const float *logits, int32_t n_vocab, const loom_token *banned,
			 size_t n_banned, loom_token *out);

#endif
