/* gguf_cursor.h - bounds-checked reads from a GGUF file in memory. */
#ifndef LOOM_GGUF_CURSOR_H
#define LOOM_GGUF_CURSOR_H

#include "loom/plugin_api.h"

/* GGUF is little-endian and the reader copies arrays of numbers as they lie. */
_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
	       "the GGUF reader needs a little-endian host");

/* A read position in a mapped file. Every read checks the bytes it needs
 * against the end of the file; a failure is reported through the host with
 * the path, the item being read (`where`) and the byte offset. */
typedef struct gguf_cursor {
	const loom_host *host;
	const char *path;
	const uint8_t *base;
	uint64_t size;
	uint64_t pos;
	char where[128]; /* "header", "key 'general.name'", "tensor 'output.weight'" */
} gguf_cursor;

void gguf_cursor_init(gguf_cursor *c, const loom_host *host, const char *path);
void gguf_cursor_attach(gguf_cursor *c, const void *base, uint64_t size);

/* Names the item being read, printf-style, for error messages. */
void gguf_set_where(gguf_cursor *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The same for an item named by a string of the file: "<kind> '<name>'". */
void gguf_set_where_name(gguf_cursor *c, const char *kind, loom_string name);

/* Reports "<path>: <where>: <message>" through host->set_error. */
void gguf_fail(const gguf_cursor *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static inline uint64_t gguf_left(const gguf_cursor *c)
{
	return c->size - c->pos;
}

/* The next n bytes (advancing past them), or NULL after reporting that
 * `what` runs past the end of the file. */
const uint8_t *gguf_take(gguf_cursor *c, uint64_t n, const char *what);

bool gguf_read_u32(gguf_cursor *c, uint32_t *out, const char *what);
bool gguf_read_u64(gguf_cursor *c, uint64_t *out, const char *what);
/* A u64 length and that many bytes; out points into the file. */
bool gguf_read_string(gguf_cursor *c, loom_string *out, const char *what);

#endif
