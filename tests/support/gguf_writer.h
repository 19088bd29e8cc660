/*
 * gguf_writer.h - builds GGUF files for tests.
 *
 * Collect key/values and tensors in memory, in the order they will appear,
 * then build the file into a buffer or write it to a path:
 *
 *     gguf_writer *w = gguf_writer_create();          (v3, alignment 32)
 *     gguf_writer_add_string(w, "general.architecture", "llama");
 *     gguf_writer_add_u32(w, "llama.embedding_length", 64);
 *     size_t t = gguf_writer_add_tensor(w, "output_norm.weight", LOOM_DTYPE_F32,
 *                                       1, (int64_t[]){64}, NULL);
 *     float *x = gguf_writer_tensor_data(w, t);     (fill the zeroed bytes)
 *     gguf_writer_write(w, path);
 *     gguf_writer_free(w);
 *
 * The writer checks only what it needs to lay the file out (a known dtype
 * and a shape that fits it). It does not reject duplicate keys or tensor
 * names, so tests can write such files. For other broken files, build into
 * a buffer, overwrite fields with gguf_poke_*() at the offsets the layout
 * functions give, and save it with gguf_write_bytes().
 *
 * Misuse (an unknown type, a NULL argument) and out-of-memory abort with a
 * message: this is test code.
 */
#ifndef LOOM_TEST_GGUF_WRITER_H
#define LOOM_TEST_GGUF_WRITER_H

#include "loom/plugin_api.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct gguf_writer gguf_writer;

/* Byte offsets of the header fields. */
enum {
	GGUF_OFFSET_MAGIC = 0,     /* "GGUF" */
	GGUF_OFFSET_VERSION = 4,   /* u32 */
	GGUF_OFFSET_N_TENSORS = 8, /* u64 */
	GGUF_OFFSET_N_KV = 16,     /* u64 */
	GGUF_HEADER_BYTES = 24
};

/* A new, empty GGUF v3 file with the default alignment (32). */
gguf_writer *gguf_writer_create(void);
void gguf_writer_free(gguf_writer *w); /* NULL is fine */

/* The version number written in the header. Any number is written as is
 * (with the v2/v3 layout), so tests can write unsupported versions. */
void gguf_writer_set_version(gguf_writer *w, uint32_t version);

/* Adds a u32 "general.alignment" key at this point of the key list and lays
 * tensor data out on that boundary. alignment: a nonzero power of two; call
 * at most once. (To write an invalid alignment, add the key with
 * gguf_writer_add_u32 instead: the layout then keeps the default 32.) */
void gguf_writer_set_alignment(gguf_writer *w, uint32_t alignment);

/* Key/values. Each returns the key's index (0, 1, ... in the order added),
 * which the layout functions below take. */
size_t gguf_writer_add_u8(gguf_writer *w, const char *key, uint8_t v);
size_t gguf_writer_add_i8(gguf_writer *w, const char *key, int8_t v);
size_t gguf_writer_add_u16(gguf_writer *w, const char *key, uint16_t v);
size_t gguf_writer_add_i16(gguf_writer *w, const char *key, int16_t v);
size_t gguf_writer_add_u32(gguf_writer *w, const char *key, uint32_t v);
size_t gguf_writer_add_i32(gguf_writer *w, const char *key, int32_t v);
size_t gguf_writer_add_f32(gguf_writer *w, const char *key, float v);
size_t gguf_writer_add_bool(gguf_writer *w, const char *key, bool v);
size_t gguf_writer_add_u64(gguf_writer *w, const char *key, uint64_t v);
size_t gguf_writer_add_i64(gguf_writer *w, const char *key, int64_t v);
size_t gguf_writer_add_f64(gguf_writer *w, const char *key, double v);
size_t gguf_writer_add_string(gguf_writer *w, const char *key, const char *s);

/* An array of count numbers or bools: values points to count elements of
 * the C type of elem_type (uint8_t ... double, bool for LOOM_META_BOOL).
 * For arrays of strings use gguf_writer_add_string_array. */
size_t gguf_writer_add_array(gguf_writer *w, const char *key, loom_meta_type elem_type,
			     const void *values, uint64_t count);
size_t gguf_writer_add_string_array(gguf_writer *w, const char *key,
				    const char *const *values, uint64_t count);

/* Bytes of a tensor of this type and shape (ne[0] contiguous), or 0 if the
 * type is unknown, n_dims is not 1..4, a dimension is < 1, ne[0] is not a
 * multiple of the type's block size, or the size overflows. */
uint64_t gguf_tensor_n_bytes(loom_dtype dtype, int n_dims, const int64_t *ne);

/* Adds a tensor; its data is a copy of gguf_tensor_n_bytes() bytes from
 * data, or zeros if data is NULL. Aborts if the type and shape do not fit
 * (see gguf_tensor_n_bytes). Returns the tensor's index. Data is laid out in
 * the order tensors are added, each on the alignment boundary. */
size_t gguf_writer_add_tensor(gguf_writer *w, const char *name, loom_dtype dtype, int n_dims,
			      const int64_t *ne, const void *data);
/* The writer's copy of a tensor's bytes, to fill in place. */
void *gguf_writer_tensor_data(gguf_writer *w, size_t tensor);

/* The whole file in a malloc'd buffer (free() it); *size is its length. */
uint8_t *gguf_writer_build(const gguf_writer *w, size_t *size);
/* Builds and writes the file; false if the write fails. */
bool gguf_writer_write(const gguf_writer *w, const char *path);

/* Layout: byte offsets in the file the writer builds from what was added so
 * far. */
/* A key/value: its key's u64 length field. */
uint64_t gguf_writer_kv_offset(const gguf_writer *w, size_t kv);
/* A key/value's value, after its u32 type: the scalar itself, a string's u64
 * length, or an array's u32 element type (its u64 count follows at +4, the
 * elements at +12). */
uint64_t gguf_writer_kv_value_offset(const gguf_writer *w, size_t kv);

/* The fields of a tensor info. */
typedef enum gguf_tensor_field {
	GGUF_FIELD_NAME,   /* u64 length, then the bytes */
	GGUF_FIELD_N_DIMS, /* u32 */
	GGUF_FIELD_NE,     /* u64 ne[0]; ne[d] is at + 8 * d */
	GGUF_FIELD_TYPE,   /* u32 */
	GGUF_FIELD_OFFSET  /* u64, relative to the data section */
} gguf_tensor_field;
uint64_t gguf_writer_tensor_field_offset(const gguf_writer *w, size_t tensor,
					 gguf_tensor_field field);
/* Where the data section starts (the aligned end of the tensor infos). */
uint64_t gguf_writer_data_section_offset(const gguf_writer *w);
/* A tensor's data, relative to the data section (what its info records). */
uint64_t gguf_writer_tensor_data_offset(const gguf_writer *w, size_t tensor);

/* Little-endian stores into a built buffer, to break a field on purpose. */
void gguf_poke_u32(uint8_t *buf, uint64_t offset, uint32_t v);
void gguf_poke_u64(uint8_t *buf, uint64_t offset, uint64_t v);

/* Writes size bytes to path (created or truncated); false if it cannot. */
bool gguf_write_bytes(const char *path, const void *data, size_t size);

#endif
