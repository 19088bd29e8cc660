/* weight_adapt.c - re-encoding, turning and widening a file's tensors. */
#include "model/weight_adapt.h"

#include "runtime/error.h"

#include <stdlib.h>
#include <string.h>

/* The tensor's bytes as a backend buffer: in place where the backend can
 * use host memory, else a copy. */
static loom_status buffer_for(loom_backend *be, const loom_file_tensor *t, loom_buffer *buf)
{
	if (loom_backend_wrap_host(be, (void *)t->data, t->n_bytes, buf) == LOOM_OK)
		return LOOM_OK;
	loom_status st = loom_backend_alloc(be, t->n_bytes, buf);
	if (st == LOOM_OK)
		st = loom_backend_upload(be, buf, 0, t->data, t->n_bytes);
	return st;
}

loom_status loom_weight_converted(loom_runtime *rt, const loom_file_tensor *t, loom_dtype type, void **bytes,
				uint64_t *n_bytes)
{
	loom_backend *be = &rt->backend;
	const int64_t rows = t->ne[1] * t->ne[2] * t->ne[3];
	loom_tensor src = {0}, dst = {0};
	loom_buffer in = {0}, out = {0};
	loom_tensor_set_contiguous(&src, t->dtype, t->ne[0], rows, 1, 1);
	loom_tensor_set_contiguous(&dst, type, t->ne[0], rows, 1, 1);
	*n_bytes = (uint64_t)dst.nb[1] * (uint64_t)rows;
	loom_node node = {.op = LOOM_OP_CONVERT, .dst = &dst, .src = {&src}};
	if (!loom_backend_supports(be, &node))
		return loom_error(LOOM_ERR_UNSUPPORTED, "backend %s cannot convert %s to %s", loom_backend_name(be),
				  loom_dtype_name(t->dtype), loom_dtype_name(type));
	*bytes = malloc(*n_bytes ? *n_bytes : 1);
	if (*bytes == NULL)
		return loom_error(LOOM_ERR_NO_MEMORY, "out of memory");
	loom_status st = buffer_for(be, t, &in);
	/* A backend that computes in host memory writes the result where it is
	 * wanted; another computes into its own memory, then it is copied. */
	const bool in_place = st == LOOM_OK && loom_backend_wrap_host(be, *bytes, *n_bytes, &out) == LOOM_OK;
	if (st == LOOM_OK && !in_place)
		st = loom_backend_alloc(be, *n_bytes, &out);
	if (st == LOOM_OK) {
		src.data = in.base;
		dst.data = out.base;
		loom_graph g = {.n_nodes = 1, .nodes = &node};
		st = loom_backend_compute(be, &g);
	}
	if (st == LOOM_OK && !in_place)
		st = loom_backend_download(be, &out, 0, *bytes, *n_bytes);
	loom_backend_release(be, &out);
	loom_backend_release(be, &in);
	if (st != LOOM_OK) {
		free(*bytes);
		*bytes = NULL;
	}
	return st;
}

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
		loom_status st = loom_weight_converted(rt, ft, LOOM_DTYPE_F32, &bytes, &n_bytes);
		if (st != LOOM_OK)
			return loom_error_wrap(st, "tensor '%s'", name);
		v = bytes;
	}
	for (int64_t i = 0; i < n; i++)
		v[i] += add;
	*out = v;
	return LOOM_OK;
}
