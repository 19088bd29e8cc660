/* st_header.c - parsing and checking one safetensors file's header. */
#include "st_header.h"
#include "st_json.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The smallest header is "{}". */
#define ST_HEADER_MIN 2

static const struct {
	const char *name;
	loom_dtype dtype;
} usable_dtypes[] = {
	{"F32", LOOM_DTYPE_F32}, {"F16", LOOM_DTYPE_F16}, {"BF16", LOOM_DTYPE_BF16},
	{"F64", LOOM_DTYPE_F64}, {"I8", LOOM_DTYPE_I8},   {"I16", LOOM_DTYPE_I16},
	{"I32", LOOM_DTYPE_I32}, {"I64", LOOM_DTYPE_I64},
	/* Bytes as they are: the parts of transformers' MXFP4 tensors
	 * (*_blocks, *_scales), which the core reads as MXFP4 (loom has no
	 * unsigned 8-bit type of its own, and none computes with these). */
	{"U8", LOOM_DTYPE_I8},
};

/* The rest of safetensors' types: named as such in errors, so that a user
 * sees loom refuse a known type rather than misread the file. */
static const char *const unusable_dtypes[] = {
	"BOOL", "U16", "U32", "U64", "F8_E4M3", "F8_E5M2", "F8_E8M0",
	"F4", "F6_E2M3", "F6_E3M2", "C64",
};

#define N_OF(a) (sizeof(a) / sizeof((a)[0]))

/* What checking one file's tensors needs at hand. */
typedef struct st_parse {
	const loom_host *host;
	const char *path;
	const uint8_t *bytes;
	uint64_t data_start; /* file offset of the byte after the header */
	uint64_t data_size;
} st_parse;

static uint64_t read_le64(const uint8_t *p)
{
	uint64_t v = 0;

	for (int i = 7; i >= 0; i--)
		v = v << 8 | p[i];
	return v;
}

bool st_header_plausible(const uint8_t *head, size_t head_len)
{
	uint64_t n;

	if (head == NULL || head_len < ST_LENGTH_BYTES + 1)
		return false;
	n = read_le64(head);
	return n >= ST_HEADER_MIN && n <= ST_JSON_MAX && head[ST_LENGTH_BYTES] == '{';
}

/* Reports "<path>: tensor '<name>': <message>"; returns false. */
static bool fail(const st_parse *p, const char *name, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static bool fail(const st_parse *p, const char *name, const char *fmt, ...)
{
	char msg[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	p->host->set_error("%s: tensor " ST_NAME_FMT ": %s", p->path, name, msg);
	return false;
}

/* A JSON number that is an integer in 0..2^53. */
static bool exact_uint(const cJSON *item, uint64_t *out)
{
	return st_json_uint(item, ST_MAX_EXACT + 1, out);
}

static bool read_dtype(const st_parse *p, const char *name, const cJSON *entry, loom_dtype *out)
{
	const cJSON *item = cJSON_GetObjectItemCaseSensitive(entry, "dtype");
	const char *s;

	if (!cJSON_IsString(item))
		return fail(p, name, "\"dtype\" is %s", item == NULL ? "missing" : "not a string");
	s = item->valuestring;
	for (size_t i = 0; i < N_OF(usable_dtypes); i++) {
		if (strcmp(s, usable_dtypes[i].name) == 0) {
			*out = usable_dtypes[i].dtype;
			return true;
		}
	}
	for (size_t i = 0; i < N_OF(unusable_dtypes); i++) {
		if (strcmp(s, unusable_dtypes[i]) == 0)
			return fail(p, name,
				    "dtype %s is not one loom can use "
				    "(F32, F16, BF16, F64, I8, I16, I32 and I64 are)",
				    s);
	}
	return fail(p, name, "unknown dtype " ST_NAME_FMT, s);
}

/* "shape" [d0, ..., dn-1], outermost first, into ne (innermost first) and
 * the element count. A scalar (shape []) is a one-element vector, as GGUF
 * stores it. */
static bool read_shape(const st_parse *p, const char *name, const cJSON *entry,
		       loom_file_tensor *t, uint64_t *n_elems)
{
	const cJSON *shape = cJSON_GetObjectItemCaseSensitive(entry, "shape");
	int n_dims;

	if (!cJSON_IsArray(shape))
		return fail(p, name, "\"shape\" is %s", shape == NULL ? "missing" : "not an array");
	n_dims = cJSON_GetArraySize(shape);
	if (n_dims > LOOM_MAX_DIMS)
		return fail(p, name, "shape has %d dimensions; loom supports at most %d", n_dims,
			    LOOM_MAX_DIMS);
	t->n_dims = n_dims > 0 ? n_dims : 1;
	for (int d = 0; d < LOOM_MAX_DIMS; d++)
		t->ne[d] = 1;
	*n_elems = 1;
	for (int i = 0; i < n_dims; i++) {
		const cJSON *dim = cJSON_GetArrayItem(shape, i);
		uint64_t v;

		if (!exact_uint(dim, &v))
			return fail(p, name, "shape[%d] is not an integer in 0..2^53", i);
		t->ne[n_dims - 1 - i] = (int64_t)v;
		if (__builtin_mul_overflow(*n_elems, v, n_elems))
			return fail(p, name, "the element count overflows 64 bits");
	}
	return true;
}

/* "data_offsets" [begin, end] against the shape's byte count, the data
 * section's size and the element alignment loom's kernels need (files are
 * mapped at page boundaries: an aligned file offset is an aligned pointer). */
static bool read_offsets(const st_parse *p, const char *name, const cJSON *entry,
			 loom_file_tensor *t, uint64_t n_elems)
{
	const cJSON *offsets = cJSON_GetObjectItemCaseSensitive(entry, "data_offsets");
	loom_dtype_traits layout = loom_dtype_traits_of(t->dtype);
	uint64_t begin, end, n_bytes;

	if (!cJSON_IsArray(offsets) || cJSON_GetArraySize(offsets) != 2 ||
	    !exact_uint(cJSON_GetArrayItem(offsets, 0), &begin) ||
	    !exact_uint(cJSON_GetArrayItem(offsets, 1), &end))
		return fail(p, name, "\"data_offsets\" is %s",
			    offsets == NULL ? "missing" : "not two integers in 0..2^53");
	if (begin > end)
		return fail(p, name, "data_offsets [%" PRIu64 ", %" PRIu64 "] end before they begin",
			    begin, end);
	if (__builtin_mul_overflow(n_elems, (uint64_t)layout.block_bytes, &n_bytes))
		return fail(p, name, "the byte count of the shape overflows 64 bits");
	if (end - begin != n_bytes)
		return fail(p, name,
			    "data_offsets [%" PRIu64 ", %" PRIu64 "] hold %" PRIu64
			    " bytes, but %" PRIu64 " %s elements take %" PRIu64,
			    begin, end, end - begin, n_elems, layout.name, n_bytes);
	if (end > p->data_size)
		return fail(p, name,
			    "data_offsets [%" PRIu64 ", %" PRIu64 "] run past the end of the file "
			    "(its data section holds %" PRIu64 " bytes)",
			    begin, end, p->data_size);
	t->n_bytes = n_bytes;
	t->file_offset = p->data_start + begin;
	t->data = p->bytes + t->file_offset;
	if (t->file_offset % layout.block_bytes != 0)
		return fail(p, name,
			    "data at file offset %" PRIu64
			    " is not aligned to its %zu-byte %s elements",
			    t->file_offset, layout.block_bytes, layout.name);
	return true;
}

static bool read_tensor(const st_parse *p, const cJSON *entry, loom_file_tensor *t)
{
	const char *name = entry->string;
	uint64_t n_elems = 0;
	char *copy;

	if (!cJSON_IsObject(entry))
		return fail(p, name, "the entry is not a JSON object");
	if (!read_dtype(p, name, entry, &t->dtype) || !read_shape(p, name, entry, t, &n_elems) ||
	    !read_offsets(p, name, entry, t, n_elems))
		return false;
	copy = strdup(name);
	if (copy == NULL)
		return fail(p, name, "out of memory");
	t->name.data = copy;
	t->name.len = strlen(copy);
	return true;
}

/* "__metadata__" is free-form text for the writer's own use. */
static bool check_metadata(const st_parse *p, const cJSON *meta)
{
	const cJSON *item;

	if (!cJSON_IsObject(meta)) {
		p->host->set_error("%s: __metadata__ is not a JSON object", p->path);
		return false;
	}
	cJSON_ArrayForEach(item, meta) {
		if (!cJSON_IsString(item)) {
			p->host->set_error("%s: __metadata__ member " ST_NAME_FMT " is not a string",
					   p->path, item->string);
			return false;
		}
	}
	return true;
}

static bool is_metadata(const cJSON *entry)
{
	return strcmp(entry->string, "__metadata__") == 0;
}

static int by_offset(const void *a, const void *b)
{
	const loom_file_tensor *x = *(const loom_file_tensor *const *)a;
	const loom_file_tensor *y = *(const loom_file_tensor *const *)b;

	return (x->file_offset > y->file_offset) - (x->file_offset < y->file_offset);
}

/* No two tensors share a byte: sorted by where they start, each starts at
 * or after the furthest end so far. Empty tensors hold no bytes to share. */
static bool check_overlaps(const st_parse *p, const st_header *h)
{
	const loom_file_tensor **order = malloc((h->n ? h->n : 1) * sizeof(*order));
	const loom_file_tensor *last = NULL; /* the one reaching furthest */
	uint64_t n = 0;
	bool ok = true;

	if (order == NULL) {
		p->host->set_error("%s: out of memory", p->path);
		return false;
	}
	for (uint64_t i = 0; i < h->n; i++)
		if (h->tensors[i].n_bytes > 0)
			order[n++] = &h->tensors[i];
	qsort(order, n, sizeof(*order), by_offset);
	for (uint64_t i = 0; i < n && ok; i++) {
		const loom_file_tensor *t = order[i];

		if (last != NULL && t->file_offset < last->file_offset + last->n_bytes) {
			ok = fail(p, t->name.data,
				  "data_offsets [%" PRIu64 ", %" PRIu64 "] overlap those of tensor "
				  ST_NAME_FMT " [%" PRIu64 ", %" PRIu64 "]",
				  t->file_offset - p->data_start,
				  t->file_offset - p->data_start + t->n_bytes, last->name.data,
				  last->file_offset - p->data_start,
				  last->file_offset - p->data_start + last->n_bytes);
		}
		if (last == NULL ||
		    t->file_offset + t->n_bytes > last->file_offset + last->n_bytes)
			last = t;
	}
	free(order);
	return ok;
}

/* The tensors of a parsed header object into h. */
static bool read_tensors(const st_parse *p, const cJSON *root, st_header *h)
{
	const cJSON *entry;
	uint64_t n = 0;

	cJSON_ArrayForEach(entry, root) {
		if (is_metadata(entry)) {
			if (!check_metadata(p, entry))
				return false;
		} else {
			n++;
		}
	}
	h->tensors = calloc(n ? n : 1, sizeof(*h->tensors));
	if (h->tensors == NULL) {
		p->host->set_error("%s: out of memory for %" PRIu64 " tensors", p->path, n);
		return false;
	}
	cJSON_ArrayForEach(entry, root) {
		if (is_metadata(entry))
			continue;
		if (!read_tensor(p, entry, &h->tensors[h->n]))
			return false;
		h->n++;
	}
	return check_overlaps(p, h);
}

/* The header length against the file, before any of the JSON is read. */
static bool check_length(const st_parse *p, uint64_t size, uint64_t n)
{
	if (size < ST_LENGTH_BYTES) {
		p->host->set_error("%s: %" PRIu64 " bytes, too short for a safetensors file "
				   "(the header length alone takes %d)",
				   p->path, size, ST_LENGTH_BYTES);
		return false;
	}
	if (n < ST_HEADER_MIN || n > ST_JSON_MAX) {
		p->host->set_error("%s: header length %" PRIu64 " at offset 0 is not in %d..%" PRIu64
				   " (the limit is %" PRIu64 " MiB)",
				   p->path, n, ST_HEADER_MIN, ST_JSON_MAX, ST_JSON_MAX >> 20);
		return false;
	}
	if (n > size - ST_LENGTH_BYTES) {
		p->host->set_error("%s: header length %" PRIu64
				   " at offset 0 runs past the end of the file (%" PRIu64 " bytes)",
				   p->path, n, size);
		return false;
	}
	if (p->bytes[ST_LENGTH_BYTES] != '{') {
		p->host->set_error("%s: the header is not a JSON object (byte %d is not '{')",
				   p->path, ST_LENGTH_BYTES);
		return false;
	}
	return true;
}

bool st_header_read(const loom_host *host, const char *path, const uint8_t *bytes, uint64_t size,
		    st_header *out)
{
	st_parse p = {.host = host, .path = path, .bytes = bytes};
	uint64_t n = size >= ST_LENGTH_BYTES ? read_le64(bytes) : 0;
	cJSON *root;
	bool ok;

	memset(out, 0, sizeof(*out));
	if (!check_length(&p, size, n))
		return false;
	p.data_start = ST_LENGTH_BYTES + n;
	p.data_size = size - p.data_start;
	root = st_json_parse(host, path, "the header", (const char *)bytes + ST_LENGTH_BYTES, n);
	if (root == NULL)
		return false;
	ok = read_tensors(&p, root, out);
	cJSON_Delete(root);
	if (!ok)
		st_header_free(out);
	return ok;
}

void st_header_free(st_header *h)
{
	for (uint64_t i = 0; i < h->n; i++)
		free((char *)h->tensors[i].name.data);
	free(h->tensors);
	memset(h, 0, sizeof(*h));
}
