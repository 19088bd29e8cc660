/* array_grow.h - the growable arrays of the tokenizers: doubling. */
#ifndef LOOM_ARRAY_GROW_H
#define LOOM_ARRAY_GROW_H

#include <stdlib.h>

/* p, an array of *cap elements of elem bytes, grown (by doubling, from 64)
 * to hold need. NULL if out of memory: p is then unchanged and still the
 * caller's. */
static inline void *loom_array_grow(void *p, size_t *cap, size_t need, size_t elem)
{
	if (need <= *cap)
		return p;
	size_t c = *cap ? *cap : 64;
	while (c < need)
		c *= 2;
	void *q = realloc(p, c * elem);
	if (q != NULL)
		*cap = c;
	return q;
}

#endif
