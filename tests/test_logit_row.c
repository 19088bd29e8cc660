/* test_logit_row.c - the passes the sampler is built on (core/infer/
 * logit_row.h): each against a plain reference (a sort, a sum in double,
 * libm's exp), a patched row against the same row written out, and every
 * vector width this CPU runs against the 4-wide loops, bit for bit. */
#include "check_main.h"

#include "infer/logit_row.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint64_t rng_state;

static double uniform(void)
{
	rng_state ^= rng_state << 13;
	rng_state ^= rng_state >> 7;
	rng_state ^= rng_state << 17;
	return (double)(rng_state >> 11) * 0x1.0p-53;
}

/* A row of n logits: N(0, 2^2)-ish, with ties (every eighth rounded to a
 * whole number), and NaN / -inf sprinkled in when odd is set. */
static float *make_row(int32_t n, uint64_t seed, bool odd)
{
	float *x = malloc((size_t)n * sizeof(float));
	ck_assert_ptr_nonnull(x);
	rng_state = seed * 0x9e3779b97f4a7c15ull + 7;
	for (int32_t i = 0; i < n; i++) {
		double u = uniform() + uniform() + uniform() + uniform() - 2.0;
		x[i] = (float)(2.0 * u * 1.7);
		if (i % 8 == 3)
			x[i] = roundf(x[i]);
		if (odd && i % 97 == 5)
			x[i] = i % 2 ? NAN : -INFINITY;
	}
	return x;
}

static const int32_t sizes[] = {1, 15, 16, 17, 1023, 1024, 1025, 3001, 70000};

START_TEST(exp_is_within_two_ulp)
{
	double worst = 0;
	for (float d = -86.9f; d <= 0; d += 0.00731f) {
		double want = exp((double)d), got = logit_exp(d);
		double ulp = ldexp(1.0, ilogb(want) - 23);
		worst = fmax(worst, fabs(got - want) / ulp);
	}
	ck_assert_msg(worst <= 2.0, "logit_exp is %.2f ulp off", worst);
	ck_assert(logit_exp(0.0f) == 1.0f);
	ck_assert(logit_exp(-88.0f) == 0.0f);
	ck_assert(logit_exp(-INFINITY) == 0.0f);
	ck_assert(logit_exp(NAN) == 0.0f);
}
END_TEST

START_TEST(max_and_argmax)
{
	for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++) {
		int32_t n = sizes[s];
		float *x = make_row(n, 11 + s, true);
		float want = -INFINITY;
		loom_token want_id = -1, id;
		for (int32_t i = 0; i < n; i++)
			if (x[i] > want)
				want = x[i], want_id = i;
		logit_row r = {.x = x, .n = n};
		float got = logit_row_max(&r, &id);
		ck_assert_msg(got == want && id == want_id, "n %d: max %g at %d, expected %g at %d", n, got, id, want,
			      want_id);
		free(x);
	}
	/* Nothing usable: no token. */
	float none[20];
	for (int i = 0; i < 20; i++)
		none[i] = i % 2 ? NAN : -INFINITY;
	logit_row r = {.x = none, .n = 20};
	loom_token id;
	ck_assert(logit_row_max(&r, &id) == -INFINITY);
	ck_assert_int_eq(id, -1);
}
END_TEST

static int by_rank_ref(const void *a, const void *b)
{
	const logit_cand *x = a, *y = b;
	if (x->logit != y->logit)
		return x->logit > y->logit ? -1 : 1;
	return (x->id > y->id) - (x->id < y->id);
}

/* The k best by sorting every usable token. */
static int32_t top_ref(const float *x, int32_t n, int32_t k, logit_cand *out)
{
	logit_cand *all = malloc((size_t)n * sizeof(*all));
	int32_t m = 0;
	for (int32_t i = 0; i < n; i++)
		if (x[i] > -INFINITY)
			all[m++] = (logit_cand){.id = i, .logit = x[i]};
	qsort(all, (size_t)m, sizeof(*all), by_rank_ref);
	m = m < k ? m : k;
	memcpy(out, all, (size_t)m * sizeof(*out));
	free(all);
	return m;
}

START_TEST(top_k_is_the_sorted_prefix)
{
	const int32_t ks[] = {1, 2, 40, 100, 5000};
	for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++)
		for (size_t q = 0; q < sizeof(ks) / sizeof(ks[0]); q++) {
			int32_t n = sizes[s], k = ks[q];
			float *x = make_row(n, 23 + s, true);
			logit_cand *want = malloc((size_t)k * sizeof(*want));
			/* The smallest buffer allowed, so that it is cut often. */
			logit_cand *buf = malloc((size_t)2 * (size_t)k * sizeof(*buf));
			logit_row r = {.x = x, .n = n};
			int32_t nw = top_ref(x, n, k, want), ng = logit_row_top(&r, k, buf, 2 * k);
			ck_assert_msg(nw == ng, "n %d k %d: %d candidates, expected %d", n, k, ng, nw);
			for (int32_t i = 0; i < nw; i++)
				ck_assert_msg(buf[i].id == want[i].id && buf[i].logit == want[i].logit,
					      "n %d k %d: #%d is %d (%g), expected %d (%g)", n, k, i, buf[i].id,
					      buf[i].logit, want[i].id, want[i].logit);
			free(x);
			free(want);
			free(buf);
		}
}
END_TEST

/* Ties at the cut go to the lower ids, wherever they lie in the row. */
START_TEST(top_k_ties_take_lower_ids)
{
	const int32_t n = 5000;
	float *x = calloc(n, sizeof(float));
	x[4000] = 2.0f;
	logit_cand buf[8];
	logit_row r = {.x = x, .n = n};
	ck_assert_int_eq(logit_row_top(&r, 4, buf, 8), 4);
	ck_assert_int_eq(buf[0].id, 4000);
	for (int i = 1; i < 4; i++)
		ck_assert_int_eq(buf[i].id, i - 1);
	free(x);
}
END_TEST

static bool ref_keeps(const logit_bound *b, float v, loom_token id)
{
	return v >= b->lo && (v > b->hi || (v == b->hi && id < b->hi_id));
}

START_TEST(weights_match_a_double_sum)
{
	for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++) {
		int32_t n = sizes[s];
		float *x = make_row(n, 31 + s, true);
		logit_row r = {.x = x, .n = n};
		loom_token id;
		float max = logit_row_max(&r, &id);
		logit_bound bounds[3] = {logit_bound_all(), logit_bound_all(), logit_bound_all()};
		bounds[1].lo = max - 3.0f;
		bounds[2].hi = x[n / 2] == x[n / 2] && x[n / 2] > -INFINITY ? x[n / 2] : 0.0f;
		bounds[2].hi_id = n / 2;
		const float inv_ts[] = {1.0f, 1.0f / 0.7f, 0.5f};
		for (int b = 0; b < 3; b++)
			for (int t = 0; t < 3; t++) {
				double want = 0;
				for (int32_t i = 0; i < n; i++)
					if (x[i] == x[i] && ref_keeps(&bounds[b], x[i], i))
						want += exp(((double)x[i] - max) * inv_ts[t]);
				double got = logit_row_weights(&r, max, inv_ts[t], &bounds[b], NULL);
				ck_assert_msg(fabs(got - want) <= 1e-6 * want + 1e-30, "n %d bound %d: %.9g, expected %.9g",
					      n, b, got, want);
			}
		free(x);
	}
}
END_TEST

/* The draw stops where the running sum in id order passes the target. */
START_TEST(draw_walks_to_the_target)
{
	const int32_t n = 3001;
	float *x = make_row(n, 41, false);
	logit_row r = {.x = x, .n = n};
	loom_token id;
	float max = logit_row_max(&r, &id);
	logit_bound all = logit_bound_all();
	float *blocks = malloc((size_t)logit_blocks(n) * sizeof(float));
	double total = logit_row_weights(&r, max, 1.0f, &all, blocks);
	double cum = 0;
	int checked = 0;
	for (int32_t i = 0; i < n; i++) {
		double w = logit_exp(x[i] - max);
		/* A target a little inside token i's share (far from the edges,
		 * which the blocks' lane-order sums may shift by an ulp). */
		if (w > 1e-3 * total / n && i % 7 == 0) {
			loom_token got = logit_row_draw(&r, max, 1.0f, &all, blocks, cum + 0.5 * w);
			ck_assert_msg(got == i, "target in token %d's share drew %d", i, got);
			checked++;
		}
		cum += w;
	}
	ck_assert_int_gt(checked, 100);
	ck_assert_int_eq(logit_row_draw(&r, max, 1.0f, &all, blocks, total * 2), n - 1);
	free(blocks);
	free(x);
}
END_TEST

/* A patched row reads as the row with the patches written in. */
START_TEST(patches_read_as_written)
{
	const int32_t n = 5000;
	float *x = make_row(n, 53, false), *written = malloc(n * sizeof(float));
	memcpy(written, x, n * sizeof(float));
	logit_patch patch[] = {{0, 9.0f}, {17, -INFINITY}, {1023, 3.5f}, {1024, -2.0f}, {4999, 8.0f}};
	for (size_t i = 0; i < sizeof(patch) / sizeof(patch[0]); i++)
		written[patch[i].id] = patch[i].logit;
	logit_row pr = {.x = x, .n = n, .patch = patch, .n_patch = 5}, wr = {.x = written, .n = n};
	loom_token pa, wa;
	float pm = logit_row_max(&pr, &pa), wm = logit_row_max(&wr, &wa);
	ck_assert(pm == wm && pa == wa && pa == 0);
	logit_bound all = logit_bound_all();
	float pb[8], wb[8];
	double pw = logit_row_weights(&pr, pm, 1.0f, &all, pb), ww = logit_row_weights(&wr, wm, 1.0f, &all, wb);
	ck_assert(pw == ww && memcmp(pb, wb, sizeof(float) * (size_t)logit_blocks(n)) == 0);
	for (double f = 0.05; f < 1; f += 0.1)
		ck_assert_int_eq(logit_row_draw(&pr, pm, 1.0f, &all, pb, f * pw),
				 logit_row_draw(&wr, wm, 1.0f, &all, wb, f * ww));
	logit_cand pc[20], wc[20];
	ck_assert_int_eq(logit_row_top(&pr, 10, pc, 20), 10);
	ck_assert_int_eq(logit_row_top(&wr, 10, wc, 20), 10);
	ck_assert(memcmp(pc, wc, sizeof(pc[0]) * 10) == 0);
	free(x);
	free(written);
}
END_TEST

/* Every width this CPU runs gives the 4-wide loops' results, bit for bit:
 * a seed's tokens do not depend on the machine. */
START_TEST(every_width_gives_the_same_bits)
{
	const struct logit_kernels *base = logit_kernels_width(4);
	ck_assert_ptr_nonnull(base);
	int widths = 0;
	for (int w = 8; w <= 16; w *= 2) {
		const struct logit_kernels *k = logit_kernels_width(w);
		if (k == NULL)
			continue;
		widths++;
		for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++) {
			int32_t n = sizes[s];
			float *x = make_row(n, 61 + s, true);
			logit_patch patch[] = {{0, 1.5f}, {n / 2, -INFINITY}};
			logit_row a = {.x = x, .n = n, .patch = n > 1 ? patch : NULL, .n_patch = n > 1 ? 2 : 0,
				       .kernels = base};
			logit_row b = a;
			b.kernels = k;
			loom_token ia, ib;
			float ma = logit_row_max(&a, &ia), mb = logit_row_max(&b, &ib);
			ck_assert(ma == mb && ia == ib);
			logit_bound bound = logit_bound_all();
			bound.lo = ma - 4.0f;
			bound.hi = x[n - 1] == x[n - 1] ? x[n - 1] : 0.0f;
			bound.hi_id = n - 1;
			int32_t nb = logit_blocks(n);
			float *ba = malloc((size_t)nb * sizeof(float)), *bb = malloc((size_t)nb * sizeof(float));
			double wa = logit_row_weights(&a, ma, 1.3f, &bound, ba), wb = logit_row_weights(&b, mb, 1.3f, &bound, bb);
			ck_assert_msg(memcmp(&wa, &wb, sizeof(wa)) == 0 && memcmp(ba, bb, (size_t)nb * sizeof(float)) == 0,
				      "width %d, n %d: %.17g against %.17g", w, n, wb, wa);
			logit_cand ca[64], cb[64];
			int32_t na = logit_row_top(&a, 32, ca, 64), nb2 = logit_row_top(&b, 32, cb, 64);
			ck_assert(na == nb2 && memcmp(ca, cb, (size_t)na * sizeof(ca[0])) == 0);
			free(ba);
			free(bb);
			free(x);
		}
	}
	if (widths == 0)
		fprintf(stderr, "SKIP every_width_gives_the_same_bits: this CPU runs only the 4-wide loops\n");
}
END_TEST

static Suite *logit_row_suite(void)
{
	Suite *s = suite_create("logit_row");
	TCase *tc = tcase_create("logit_row");
	tcase_add_test(tc, exp_is_within_two_ulp);
	tcase_add_test(tc, max_and_argmax);
	tcase_add_test(tc, top_k_is_the_sorted_prefix);
	tcase_add_test(tc, top_k_ties_take_lower_ids);
	tcase_add_test(tc, weights_match_a_double_sum);
	tcase_add_test(tc, draw_walks_to_the_target);
	tcase_add_test(tc, patches_read_as_written);
	tcase_add_test(tc, every_width_gives_the_same_bits);
	suite_add_tcase(s, tc);
	return s;
}

LOOM_TEST_MAIN(logit_row_suite)
