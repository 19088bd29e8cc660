/* cuda_tensor_span.c - where tensors' elements lie (cuda_tensor_span.h). */
#include "cuda_tensor_span.h"

#include <stdint.h>

/* Where row r of t starts: rows count over dimensions 1..3 in order. */
static uintptr_t row_at(const loom_tensor *t, int64_t r)
{
	int64_t i1 = r % t->ne[1], i2 = r / t->ne[1] % t->ne[2], i3 = r / (t->ne[1] * t->ne[2]);
	return (uintptr_t)t->data + (size_t)i1 * t->nb[1] + (size_t)i2 * t->nb[2] + (size_t)i3 * t->nb[3];
}

bool cuda_same_rows(const loom_tensor *a, const loom_tensor *b)
{
	const int64_t rows = loom_tensor_nrows(a);
	if (a->data != b->data || a->dtype != b->dtype || a->layout != b->layout || a->ne[0] != b->ne[0] ||
	    a->nb[0] != b->nb[0] || rows != loom_tensor_nrows(b))
		return false;
	for (int64_t r = 0; r < rows; r++)
		if (row_at(a, r) != row_at(b, r))
			return false;
	return true;
}

/* The bytes [*lo, *hi) t's elements lie in. */
static void span(const loom_tensor *t, uintptr_t *lo, uintptr_t *hi)
{
	size_t last = loom_dtype_row_bytes(t->dtype, t->ne[0]);
	for (int d = 1; d < LOOM_MAX_DIMS; d++)
		last += (size_t)(t->ne[d] - 1) * t->nb[d];
	*lo = (uintptr_t)t->data;
	*hi = *lo + last;
}

bool cuda_tensors_overlap(const loom_tensor *a, const loom_tensor *b)
{
	uintptr_t a_lo, a_hi, b_lo, b_hi;
	span(a, &a_lo, &a_hi);
	span(b, &b_lo, &b_hi);
	return a_lo < b_hi && b_lo < a_hi;
}
