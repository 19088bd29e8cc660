/* logit_row.c - the passes of logit_row.h: blocks of the row, patched
 * where they must be, through the vector loops of logit_kernels.h at the
 * widest width the CPU runs. */
#include "infer/logit_row.h"

#include <stdlib.h>
#include <string.h>

/* The lanes added pairwise in a fixed order. */
static float lane_sum(float *s)
{
	for (int w = LOGIT_LANES / 2; w > 0; w /= 2)
		for (int j = 0; j < w; j++)
			s[j] += s[j + w];
	return s[0];
}

/* The vector loops, one set per vector width. */
typedef struct logit_kernels {
	float (*block_max)(const float *x, int32_t len);
	float (*block_weights)(const float *x, int32_t len, loom_token id0, float max, float inv_t,
			       const logit_bound *b);
	bool (*any_above)(const float *x, float t);
} logit_kernels;

#define KW 4
#define KATTR
#include "infer/logit_kernels.h"
#undef KW
#undef KATTR

#if defined(__x86_64__)
#define KW 8
#define KATTR __attribute__((target("avx2")))
#include "infer/logit_kernels.h"
#undef KW
#undef KATTR

#define KW 16
#define KATTR __attribute__((target("avx512f")))
#include "infer/logit_kernels.h"
#undef KW
#undef KATTR
#endif

const logit_kernels *logit_kernels_width(int width)
{
#if defined(__x86_64__)
	if (width == 16 && __builtin_cpu_supports("avx512f"))
		return &kernels_w16;
	if (width == 8 && __builtin_cpu_supports("avx2"))
		return &kernels_w8;
#endif
	return width == 4 ? &kernels_w4 : NULL;
}

/* The row's loops: its own, else the widest this CPU runs. */
static const logit_kernels *kernels(const logit_row *r)
{
	const logit_kernels *k = r->kernels;
	if (k == NULL && (k = logit_kernels_width(16)) == NULL && (k = logit_kernels_width(8)) == NULL)
		k = &kernels_w4;
	return k;
}

float logit_exp(float d)
{
	return exp_neg_w4(splat_w4(d))[0];
}

/* The first patch at or after token lo. */
static int32_t first_patch(const logit_row *r, loom_token lo)
{
	int32_t a = 0, b = r->n_patch;
	while (a < b) {
		int32_t mid = a + (b - a) / 2;
		if (r->patch[mid].id < lo)
			a = mid + 1;
		else
			b = mid;
	}
	return a;
}

float logit_row_at(const logit_row *r, loom_token t)
{
	int32_t p = first_patch(r, t);
	return p < r->n_patch && r->patch[p].id == t ? r->patch[p].logit : r->x[t];
}

/* Block b's logits with its patches applied, *len of them rounded up to a
 * whole number of lanes (the row's end padded with -inf, which no pass
 * keeps): the row itself, or a patched copy in buf (LOGIT_BLOCK floats). */
static const float *block_of(const logit_row *r, int32_t b, float *buf, int32_t *len)
{
	const int32_t lo = b * LOGIT_BLOCK, n = r->n - lo < LOGIT_BLOCK ? r->n - lo : LOGIT_BLOCK;
	const int32_t padded = (n + LOGIT_LANES - 1) / LOGIT_LANES * LOGIT_LANES;
	int32_t p = first_patch(r, lo);
	*len = padded;
	if (padded == n && (p == r->n_patch || r->patch[p].id >= lo + n))
		return r->x + lo;
	memcpy(buf, r->x + lo, (size_t)n * sizeof(float));
	for (int32_t i = n; i < padded; i++)
		buf[i] = -__builtin_inff();
	for (; p < r->n_patch && r->patch[p].id < lo + n; p++)
		buf[r->patch[p].id - lo] = r->patch[p].logit;
	return buf;
}

float logit_row_max(const logit_row *r, loom_token *argmax)
{
	const logit_kernels *k = kernels(r);
	float buf[LOGIT_BLOCK], best = -__builtin_inff();
	int32_t best_block = -1, len;
	for (int32_t b = 0; b < logit_blocks(r->n); b++) {
		const float *x = block_of(r, b, buf, &len);
		float m = k->block_max(x, len);
		if (m > best) {
			best = m;
			best_block = b;
		}
	}
	*argmax = -1;
	if (best_block >= 0) {
		const float *x = block_of(r, best_block, buf, &len);
		for (int32_t i = 0; i < len; i++)
			if (x[i] == best) {
				*argmax = best_block * LOGIT_BLOCK + i;
				break;
			}
	}
	return best;
}

static inline bool keeps(const logit_bound *b, float v, loom_token id)
{
	return v >= b->lo && (v > b->hi || (v == b->hi && id < b->hi_id));
}

double logit_row_weights(const logit_row *r, float max, float inv_t, const logit_bound *b, float *block_sum)
{
	const logit_kernels *k = kernels(r);
	float buf[LOGIT_BLOCK];
	double total = 0;
	int32_t len;
	for (int32_t blk = 0; blk < logit_blocks(r->n); blk++) {
		const float *x = block_of(r, blk, buf, &len);
		float s = k->block_weights(x, len, blk * LOGIT_BLOCK, max, inv_t, b);
		if (block_sum != NULL)
			block_sum[blk] = s;
		total += s;
	}
	return total;
}

loom_token logit_row_draw(const logit_row *r, float max, float inv_t, const logit_bound *b, const float *block_sum,
			  double target)
{
	const int32_t nb = logit_blocks(r->n);
	int32_t blk, last = -1;
	double cum = 0;
	for (blk = 0; blk < nb; blk++) {
		if (!(block_sum[blk] > 0))
			continue;
		last = blk;
		if (cum + block_sum[blk] > target)
			break;
		cum += block_sum[blk];
	}
	if (last < 0)
		return -1;
	/* Rounding may leave the target past every block: the last one's last
	 * kept token takes it. */
	if (blk == nb)
		blk = last;
	float buf[LOGIT_BLOCK];
	int32_t len;
	const float *x = block_of(r, blk, buf, &len);
	loom_token pick = -1;
	for (int32_t i = 0; i < len; i++) {
		loom_token id = blk * LOGIT_BLOCK + i;
		float w = logit_exp((x[i] - max) * inv_t);
		if (!keeps(b, x[i], id) || !(w > 0))
			continue;
		pick = id;
		cum += w;
		if (cum > target)
			break;
	}
	return pick;
}

static bool cand_before(const logit_cand *a, const logit_cand *b)
{
	return logit_ranks_before(a->logit, a->id, b->logit, b->id);
}

/* Reorders c so that its k best come first, in no order (k < n). */
static void select_best(logit_cand *c, int32_t n, int32_t k)
{
	int32_t lo = 0, hi = n - 1;
	while (lo < hi) {
		/* The median of three as the pivot, moved to hi. */
		int32_t mid = lo + (hi - lo) / 2;
		logit_cand t;
		if (cand_before(&c[mid], &c[lo]))
			t = c[mid], c[mid] = c[lo], c[lo] = t;
		if (cand_before(&c[hi], &c[lo]))
			t = c[hi], c[hi] = c[lo], c[lo] = t;
		if (cand_before(&c[mid], &c[hi]))
			t = c[mid], c[mid] = c[hi], c[hi] = t;
		logit_cand pivot = c[hi];
		int32_t store = lo;
		for (int32_t i = lo; i < hi; i++)
			if (cand_before(&c[i], &pivot)) {
				t = c[i], c[i] = c[store], c[store] = t;
				store++;
			}
		c[hi] = c[store], c[store] = pivot;
		if (store == k - 1 || store == k)
			return;
		if (store < k)
			lo = store + 1;
		else
			hi = store - 1;
	}
}

int32_t logit_row_top(const logit_row *r, int32_t k, logit_cand *buf, int32_t cap)
{
	const logit_kernels *kern = kernels(r);
	float block[LOGIT_BLOCK], floor = -__builtin_inff(); /* what a newcomer must beat */
	int32_t n = 0, len;
	for (int32_t b = 0; b < logit_blocks(r->n); b++) {
		const float *x = block_of(r, b, block, &len);
		for (int32_t i = 0; i < len; i += 4 * LOGIT_LANES) {
			if (i + 4 * LOGIT_LANES <= len && !kern->any_above(x + i, floor))
				continue;
			for (int j = 0; j < 4 * LOGIT_LANES && i + j < len; j++) {
				if (!(x[i + j] > floor))
					continue;
				if (n == cap) {
					/* Keep the k best; the worst of them is the new floor.
					 * A later token that only equals it has a higher id,
					 * so it ranks after. */
					select_best(buf, n, k);
					n = k;
					floor = buf[0].logit;
					for (int32_t c = 1; c < k; c++)
						floor = buf[c].logit < floor ? buf[c].logit : floor;
					if (!(x[i + j] > floor))
						continue;
				}
				buf[n++] = (logit_cand){.id = b * LOGIT_BLOCK + i + j, .logit = x[i + j]};
			}
		}
	}
	if (n > k) {
		select_best(buf, n, k);
		n = k;
	}
	logit_cand_sort(buf, n);
	return n;
}

static int by_rank(const void *a, const void *b)
{
	const logit_cand *x = a, *y = b;
	return cand_before(x, y) ? -1 : cand_before(y, x) ? 1 : 0;
}

void logit_cand_sort(logit_cand *c, int32_t n)
{
	qsort(c, (size_t)n, sizeof(*c), by_rank);
}
