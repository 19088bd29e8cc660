/* weight_layout.c - turning matrices and widening vectors of a file. */
#include "model/weight_layout.h"

#include "convert/quantize.h"
#include "runtime/error.h"

#include <stdlib.h>
#include <string.h>

static bool is_float(loom_dtype t)
{
	return t == LOOM_DTYPE_F32 || t == LOOM_DTYPE_F16 || t == LOOM_DTYPE_BF16;
}

loom_status loom_weight_transposed(const loom_file_tensor *ft, const char *name, void **out)
{
	if (!is_float(ft->dtype))
		return loom_error(LOOM_ERR_UNSUPPORTED, "tensor '%s' is stored transposed as %s; only f32, f16 and bf16 can be",
				  name, loom_dtype_name(ft->dtype));
	const size_t es = ft->dtype == LOOM_DTYPE_F32 ? 4 : 2;
	const int64_t rows = ft->ne[1], cols = ft->ne[0];
	char *dst = malloc((size_t)(rows * cols) * es + 1);
	if (dst == NULL)
		return loom_error(LOOM_ERR_NO_MEMORY, "out of memory transposing '%s'", name);
	const char *src = ft->data;
	/* Tiles keep both sides' rows in cache. */
	for (int64_t r0 = 0; r0 < rows; r0 += 32)
		for (int64_t c0 = 0; c0 < cols; c0 += 32)
			for (int64_t r = r0; r < rows && r < r0 + 32; r++)
				for (int64_t c = c0; c < cols && c < c0 + 32; c++)
					memcpy(dst + (size_t)(c * rows + r) * es, src + (size_t)(r * cols + c) * es, es);
	*out = dst;
	return LOOM_OK;
}

loom_status loom_weight_vector_f32(loom_runtime *rt, const loom_file_tensor *ft, const char *name, float add,
				   float **out)
{
	if (!is_float(ft->dtype))
		return loom_error(LOOM_ERR_UNSUPPORTED, "tensor '%s' is %s; norm weights and biases must be f32, f16 or bf16",
				  name, loom_dtype_name(ft->dtype));
	const int64_t n = ft->ne[0];
	float *v;
	if (ft->dtype == LOOM_DTYPE_F32) {
		v = malloc((size_t)n * sizeof(float) + 1);
		if (v == NULL)
			return loom_error(LOOM_ERR_NO_MEMORY, "out of memory");
		memcpy(v, ft->data, (size_t)n * sizeof(float));
	} else {
		void *bytes;
		uint64_t n_bytes;
		loom_status st = loom_convert_tensor(rt, ft, LOOM_DTYPE_F32, &bytes, &n_bytes);
		if (st != LOOM_OK)
			return loom_error_wrap(st, "tensor '%s'", name);
		v = bytes;
	}
	for (int64_t i = 0; i < n; i++)
		v[i] += add;
	*out = v;
	return LOOM_OK;
}
