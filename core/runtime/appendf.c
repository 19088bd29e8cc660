/* appendf.c - building text in a fixed buffer piece by piece. */
#include "runtime/appendf.h"

#include <stdarg.h>
#include <stdio.h>

void loom_appendf(char *buf, size_t size, size_t *len, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(*len < size ? buf + *len : NULL, *len < size ? size - *len : 0, fmt, ap);
	va_end(ap);
	if (n > 0)
		*len += (size_t)n;
}
