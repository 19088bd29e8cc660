/* logit_row.h - passes over one row of logits, as sampling and logprobs
 * need them, none of which sorts the row: its maximum, its k best tokens
 * (by a threshold that rises as candidates come), and the sums and draws of
 * exp((x - max) / T) over the tokens a bound keeps.
 *
 * A row is read in blocks of LOGIT_BLOCK. A few of its tokens may carry
 * patched logits (the penalties, or -inf for a banned token): a block that
 * holds one is copied and patched, so the row itself is never written or
 * copied whole.
 *
 * Every sum runs in LOGIT_LANES lanes, token i in lane i % LOGIT_LANES, and
 * the lanes are added in a fixed order; exp is computed by logit_exp, not
 * libm. A result is therefore the same bits whatever vector width the
 * compiler chose and whichever machine runs it, so a seed fixes the tokens
 * everywhere. */
#ifndef LOOM_INFER_LOGIT_ROW_H
#define LOOM_INFER_LOGIT_ROW_H

#include "loom.h"

#include <stdbool.h>
#include <stdint.h>

#define LOGIT_BLOCK 1024
#define LOGIT_LANES 16

/* A token whose logit is replaced. */
typedef struct logit_patch {
	loom_token id;
	float logit;
} logit_patch;

struct logit_kernels;

typedef struct logit_row {
	const float *x;
	int32_t n;
	const logit_patch *patch; /* sorted by id, each id once */
	int32_t n_patch;
	/* The vector loops to use; NULL: the widest this CPU runs. */
	const struct logit_kernels *kernels;
} logit_row;

/* The loops for vectors of width floats (4, 8 or 16); NULL if this build
 * or CPU has none. Every width gives the same results; tests compare them. */
const struct logit_kernels *logit_kernels_width(int width);

typedef struct logit_cand {
	loom_token id;
	float logit;
} logit_cand;

/* The order every rule of the sampler is stated in: the higher logit
 * first, the lower id first among equal logits. */
static inline bool logit_ranks_before(float xa, loom_token a, float xb, loom_token b)
{
	return xa > xb || (xa == xb && a < b);
}

/* The tokens a sum or draw keeps: logit >= lo, and ranked before the token
 * (hi, hi_id) in the order above, that is logit > hi, or logit == hi and
 * id < hi_id. (-inf, INT32_MAX) ranks after every token: no upper bound. */
typedef struct logit_bound {
	float lo;
	float hi;
	loom_token hi_id;
} logit_bound;

static inline logit_bound logit_bound_all(void)
{
	return (logit_bound){.lo = -__builtin_inff(), .hi = -__builtin_inff(), .hi_id = INT32_MAX};
}

/* exp(d) for d <= 0, within 2 ulp; 0 below -87 and for NaN. */
float logit_exp(float d);

/* The number of blocks of a row of n. */
static inline int32_t logit_blocks(int32_t n)
{
	return (n + LOGIT_BLOCK - 1) / LOGIT_BLOCK;
}

/* Token t's logit, its patch's where it has one. */
float logit_row_at(const logit_row *r, loom_token t);

/* The row's largest logit (NaN ignored; -inf for none) and, in *argmax,
 * the lowest id that holds it (-1 for none). */
float logit_row_max(const logit_row *r, loom_token *argmax);

/* The k best tokens (k >= 1), best first; NaN and -inf logits are never
 * among them. buf holds cap >= 2 * k candidates; returns how many were
 * found (fewer than k only when the row has fewer usable tokens). */
int32_t logit_row_top(const logit_row *r, int32_t k, logit_cand *buf, int32_t cap);

/* Sum over the tokens b keeps of exp((x - max) * inv_t), max the row's
 * largest logit; block_sum (logit_blocks(n) floats, may be NULL) gets each
 * block's share, for logit_row_draw. */
double logit_row_weights(const logit_row *r, float max, float inv_t, const logit_bound *b, float *block_sum);

/* The token at which the running sum of the same weights, in id order,
 * first exceeds target (0 <= target < the total of block_sum); -1 if every
 * weight is 0. */
loom_token logit_row_draw(const logit_row *r, float max, float inv_t, const logit_bound *b, const float *block_sum,
			  double target);

/* Sorts n candidates best first. */
void logit_cand_sort(logit_cand *c, int32_t n);

#endif
