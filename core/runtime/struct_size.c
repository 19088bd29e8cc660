/* struct_size.c - reading and writing public structs at the host's size. */
#include "runtime/struct_size.h"

#include "runtime/array_grow.h"
#include "runtime/error.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

loom_status loom_struct_check(const loom_struct_desc *d, size_t size)
{
	if (size > d->size)
		return loom_error(LOOM_ERR_INVALID_ARGUMENT,
				  "%s of %zu bytes is larger than this library's (%zu bytes, libloom %s): the program "
				  "was built against a newer loom.h than the libloom it runs with",
				  d->name, size, d->size, loom_version());
	if (size < d->first_size)
		return loom_error(LOOM_ERR_INVALID_ARGUMENT,
				  "%s of %zu bytes is smaller than any version of it (the first has %zu bytes, this "
				  "library's %zu bytes, libloom %s)%s",
				  d->name, size, d->first_size, d->size, loom_version(),
				  strstr(d->name, "_params") != NULL ? ": not started from its *_default_params()?" : "");
	return LOOM_OK;
}

loom_status loom_struct_in(const loom_struct_desc *d, void *dst, const void *src, size_t size)
{
	loom_status st = loom_struct_check(d, size);
	if (st == LOOM_OK)
		memcpy(dst, src, size);
	return st;
}

loom_status loom_params_in(const loom_struct_desc *d, void *dst, const void *src)
{
	if (src == NULL)
		return LOOM_OK;
	size_t size;
	memcpy(&size, src, sizeof(size));
	loom_status st = loom_struct_in(d, dst, src, size);
	memcpy(dst, &d->size, sizeof(d->size));
	return st;
}

loom_status loom_params_init(const loom_struct_desc *d, void *p, size_t size, const void *defaults)
{
	if (p == NULL)
		return loom_error(LOOM_ERR_INVALID_ARGUMENT, "%s_init: the struct is NULL", d->name);
	loom_status st = loom_struct_check(d, size);
	if (size < sizeof(size))
		return st;
	const size_t known = size < d->size ? size : d->size;
	memcpy(p, defaults, known);
	memset((char *)p + known, 0, size - known);
	memcpy(p, &size, sizeof(size));
	return st;
}

loom_status loom_struct_out(const loom_struct_desc *d, void *dst, size_t size, const void *src)
{
	loom_status st = loom_struct_check(d, size);
	if (st == LOOM_OK)
		memcpy(dst, src, size);
	return st;
}

loom_status loom_struct_array_in(const loom_struct_desc *d, const void *src, size_t n, size_t size,
				 const void **out, void **copy)
{
	*copy = NULL;
	*out = src;
	loom_status st = loom_struct_check(d, size);
	if (st != LOOM_OK || size == d->size || n == 0)
		return st;
	char *a = calloc(n, d->size);
	if (a == NULL)
		return loom_error(LOOM_ERR_NO_MEMORY, "out of memory");
	for (size_t i = 0; i < n; i++)
		memcpy(a + i * d->size, (const char *)src + i * size, size);
	*copy = a;
	*out = a;
	return LOOM_OK;
}

loom_status loom_struct_array_out(const loom_struct_desc *d, const void *src, size_t n, size_t size,
				  const void **out, void **buf, size_t *cap)
{
	*out = src;
	loom_status st = loom_struct_check(d, size);
	if (st != LOOM_OK || size == d->size || n == 0)
		return st;
	if (n > SIZE_MAX / size)
		return loom_error(LOOM_ERR_NO_MEMORY, "out of memory");
	void *grown = loom_array_grow(*buf, cap, n * size, 1);
	if (grown == NULL)
		return loom_error(LOOM_ERR_NO_MEMORY, "out of memory");
	*buf = grown;
	for (size_t i = 0; i < n; i++)
		memcpy((char *)grown + i * size, (const char *)src + i * d->size, size);
	*out = grown;
	return LOOM_OK;
}
