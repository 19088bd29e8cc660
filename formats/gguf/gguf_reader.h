/* gguf_reader.h - parsing of GGUF v2 and v3 files. */
#ifndef LOOM_GGUF_READER_H
#define LOOM_GGUF_READER_H

#include "gguf_cursor.h"

#define GGUF_MAGIC "GGUF"
#define GGUF_DEFAULT_ALIGNMENT 32
#define GGUF_ALIGNMENT_KEY "general.alignment"

/* The smallest a key/value can be: key length, value type, one byte. */
#define GGUF_MIN_KV_BYTES (8 + 4 + 1)
/* The smallest a tensor info can be: name length, n_dims, one dimension,
 * type, offset. */
#define GGUF_MIN_TENSOR_BYTES (8 + 4 + 8 + 4 + 8)

/* v1 used 32-bit counts and lengths; v2 made them 64-bit, v3 added
 * big-endian files (which carry their own version number). */
static inline bool gguf_version_supported(uint32_t version)
{
	return version == 2 || version == 3;
}

/* Reads n_kv key/values into kv (zeroed by the caller, so that
 * gguf_free_meta can run on a partly read table). *alignment is
 * general.alignment if present and valid, else the default. */
bool gguf_parse_meta(gguf_cursor *c, loom_meta_kv *kv, uint64_t n_kv, uint32_t *alignment);
/* Frees the arrays gguf_parse_meta allocated (not kv itself). */
void gguf_free_meta(loom_meta_kv *kv, uint64_t n_kv);

/* Reads n tensor infos; file_offset is left relative to the data section. */
bool gguf_parse_tensor_infos(gguf_cursor *c, loom_file_tensor *t, uint64_t n, uint32_t alignment);
/* Checks each tensor's bytes lie inside the file, given where the data
 * section starts, and makes file_offset absolute and data point at them. */
bool gguf_place_tensors(gguf_cursor *c, loom_file_tensor *t, uint64_t n, uint64_t data_start);

/* The format vtable's open, close and write. */
loom_model_file *gguf_open(const loom_host *host, const char *path);
void gguf_close(loom_model_file *file);
/* Drops the whole pages of [data, data + n) of the mapping from memory. */
void gguf_release(loom_model_file *file, const void *data, uint64_t n);
loom_status gguf_write(const loom_host *host, const char *path, const loom_model_file *content);

#endif
