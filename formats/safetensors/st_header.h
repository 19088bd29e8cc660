/* st_header.h - one safetensors file: its JSON header parsed and checked
 * against the file's bytes, as loom's tensor table.
 *
 * The file is an 8-byte little-endian header length N, N bytes of JSON
 * mapping each tensor name to {"dtype", "shape", "data_offsets"} (offsets
 * relative to the byte after the header), an optional "__metadata__" object
 * of strings, then the data. */
#ifndef LOOM_ST_HEADER_H
#define LOOM_ST_HEADER_H

#include "loom/plugin_api.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define ST_LENGTH_BYTES 8

/* The tensors of one file, in the header's order. Names are malloc'd copies
 * the table owns; file_offset counts from the start of the file and data
 * points at the same bytes in the caller's view of the file. The table may
 * hold a name twice (JSON objects may repeat keys): the caller checks. */
typedef struct st_header {
	loom_file_tensor *tensors;
	uint64_t n;
} st_header;

/* Do the first head_len bytes of a file start like a safetensors file: a
 * header length loom would read, then '{'? Enough to tell it from a GGUF. */
bool st_header_plausible(const uint8_t *head, size_t head_len);

/* Reads the header of the file at path, whose size bytes lie at bytes, and
 * checks every tensor against the file. false (with *out empty) after
 * host->set_error naming path and, where there is one, the tensor. */
bool st_header_read(const loom_host *host, const char *path, const uint8_t *bytes, uint64_t size,
		    st_header *out);
void st_header_free(st_header *h);

#endif
