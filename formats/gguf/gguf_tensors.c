/* gguf_tensors.c - the tensor infos of a GGUF file and where their data lies. */
#include "gguf_names.h"
#include "gguf_reader.h"

#include <inttypes.h>

/* n_dims and ne[]: each dimension at least 1, the element count within int64. */
static bool read_shape(gguf_cursor *c, loom_file_tensor *t)
{
	uint64_t at = c->pos;
	uint32_t n_dims;
	int64_t n_elems = 1;

	if (!gguf_read_u32(c, &n_dims, "n_dims"))
		return false;
	if (n_dims < 1 || n_dims > LOOM_MAX_DIMS) {
		gguf_fail(c, "n_dims %" PRIu32 " at offset %" PRIu64 " is not in 1..%d", n_dims, at,
			  LOOM_MAX_DIMS);
		return false;
	}
	t->n_dims = (int)n_dims;
	for (int d = 0; d < LOOM_MAX_DIMS; d++)
		t->ne[d] = 1;
	for (int d = 0; d < t->n_dims; d++) {
		uint64_t ne;

		at = c->pos;
		if (!gguf_read_u64(c, &ne, "dimension"))
			return false;
		if (ne < 1 || ne > INT64_MAX) {
			gguf_fail(c, "ne[%d] = %" PRIu64 " at offset %" PRIu64 " is out of range",
				  d, ne, at);
			return false;
		}
		t->ne[d] = (int64_t)ne;
		if (__builtin_mul_overflow(n_elems, t->ne[d], &n_elems)) {
			gguf_fail(c, "ne[%d] = %" PRIu64 " at offset %" PRIu64
				     " makes the element count overflow 64 bits",
				  d, ne, at);
			return false;
		}
	}
	return true;
}

/* The element type, and from it and the shape the size in bytes. */
static bool read_type(gguf_cursor *c, loom_file_tensor *t)
{
	uint64_t at = c->pos;
	uint32_t type;
	loom_dtype_traits layout;
	uint64_t row_bytes, n_bytes;

	if (!gguf_read_u32(c, &type, "type"))
		return false;
	layout = loom_dtype_traits_of(type < LOOM_DTYPE_COUNT ? (int)type : -1);
	if (layout.name == NULL) {
		gguf_fail(c, "unknown type %" PRIu32 " at offset %" PRIu64, type, at);
		return false;
	}
	if (t->ne[0] % layout.block != 0) {
		gguf_fail(c, "ne[0] = %" PRId64 " is not a multiple of the %s block size %" PRId64
			     " (type at offset %" PRIu64 ")",
			  t->ne[0], layout.name, layout.block, at);
		return false;
	}
	/* The element count fits int64, but a row of wide blocks may not. */
	if (__builtin_mul_overflow((uint64_t)(t->ne[0] / layout.block), layout.block_bytes,
				   &row_bytes) ||
	    __builtin_mul_overflow(row_bytes, (uint64_t)(t->ne[1] * t->ne[2] * t->ne[3]),
				   &n_bytes)) {
		gguf_fail(c, "the size of this %s tensor overflows 64 bits (type at offset %" PRIu64
			     ")",
			  layout.name, at);
		return false;
	}
	t->dtype = (loom_dtype)type;
	t->n_bytes = n_bytes;
	return true;
}

static bool read_tensor_info(gguf_cursor *c, loom_file_tensor *t, uint64_t index,
			     gguf_name_set *names, uint32_t alignment)
{
	uint64_t at = c->pos;
	uint64_t offset;

	gguf_set_where(c, "tensor #%" PRIu64, index);
	if (!gguf_read_string(c, &t->name, "tensor name"))
		return false;
	gguf_set_where_name(c, "tensor", t->name);
	if (!gguf_name_set_add(names, &t->name)) {
		gguf_fail(c, "duplicate tensor name at offset %" PRIu64, at);
		return false;
	}
	if (!read_shape(c, t) || !read_type(c, t))
		return false;
	at = c->pos;
	if (!gguf_read_u64(c, &offset, "data offset"))
		return false;
	if (offset % alignment != 0) {
		gguf_fail(c, "data offset %" PRIu64 " at offset %" PRIu64
			     " is not a multiple of the alignment %" PRIu32,
			  offset, at, alignment);
		return false;
	}
	t->file_offset = offset;
	return true;
}

bool gguf_parse_tensor_infos(gguf_cursor *c, loom_file_tensor *t, uint64_t n, uint32_t alignment)
{
	gguf_name_set names;
	bool ok = true;

	if (!gguf_name_set_init(&names, n)) {
		gguf_fail(c, "out of memory for %" PRIu64 " tensor names", n);
		return false;
	}
	for (uint64_t i = 0; i < n && ok; i++)
		ok = read_tensor_info(c, &t[i], i, &names, alignment);
	gguf_name_set_free(&names);
	return ok;
}

bool gguf_place_tensors(gguf_cursor *c, loom_file_tensor *t, uint64_t n, uint64_t data_start)
{
	for (uint64_t i = 0; i < n; i++) {
		uint64_t start, end;

		if (__builtin_add_overflow(data_start, t[i].file_offset, &start) ||
		    __builtin_add_overflow(start, t[i].n_bytes, &end) || end > c->size) {
			gguf_set_where_name(c, "tensor", t[i].name);
			gguf_fail(c, "%" PRIu64 " bytes of data at offset %" PRIu64
				     " of the data section (which starts at %" PRIu64
				     ") run past the end of the file (%" PRIu64 " bytes)",
				  t[i].n_bytes, t[i].file_offset, data_start, c->size);
			return false;
		}
		t[i].file_offset = start;
		t[i].data = c->base + start;
	}
	return true;
}
