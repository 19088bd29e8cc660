/* tensor.c - element types and tensor strides. */
#include "model/tensor.h"

const char *loom_dtype_name(loom_dtype type)
{
	return loom_dtype_traits_of(type).name;
}

int64_t loom_dtype_block_size(loom_dtype type)
{
	return loom_dtype_traits_of(type).block;
}

size_t loom_dtype_block_bytes(loom_dtype type)
{
	return loom_dtype_traits_of(type).block_bytes;
}

void loom_tensor_set_contiguous(loom_tensor *t, loom_dtype type, int64_t ne0, int64_t ne1,
				int64_t ne2, int64_t ne3)
{
	loom_dtype_traits l = loom_dtype_traits_of(type);
	t->dtype = type;
	t->ne[0] = ne0;
	t->ne[1] = ne1;
	t->ne[2] = ne2;
	t->ne[3] = ne3;
	t->nb[0] = l.block_bytes;
	t->nb[1] = loom_dtype_row_bytes(type, ne0);
	t->nb[2] = t->nb[1] * (size_t)ne1;
	t->nb[3] = t->nb[2] * (size_t)ne2;
}
