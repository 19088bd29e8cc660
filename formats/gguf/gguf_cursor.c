/* gguf_cursor.c - bounds-checked reads from a GGUF file in memory. */
#include "gguf_cursor.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* Names in messages are cut here: a hostile file may hold megabyte keys. */
#define GGUF_NAME_SHOWN 80

void gguf_cursor_init(gguf_cursor *c, const loom_host *host, const char *path)
{
	memset(c, 0, sizeof(*c));
	c->host = host;
	c->path = path;
}

void gguf_cursor_attach(gguf_cursor *c, const void *base, uint64_t size)
{
	c->base = base;
	c->size = size;
	c->pos = 0;
}

void gguf_set_where(gguf_cursor *c, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(c->where, sizeof(c->where), fmt, ap);
	va_end(ap);
}

void gguf_set_where_name(gguf_cursor *c, const char *kind, loom_string name)
{
	int shown = name.len > GGUF_NAME_SHOWN ? GGUF_NAME_SHOWN : (int)name.len;

	gguf_set_where(c, "%s '%.*s%s'", kind, shown, name.data,
		       name.len > GGUF_NAME_SHOWN ? "..." : "");
}

void gguf_fail(const gguf_cursor *c, const char *fmt, ...)
{
	char msg[320];
	va_list ap;

	if (!LOOM_VT_HAS(c->host, set_error))
		return;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (c->where[0] != '\0')
		c->host->set_error("%s: %s: %s", c->path, c->where, msg);
	else
		c->host->set_error("%s: %s", c->path, msg);
}

const uint8_t *gguf_take(gguf_cursor *c, uint64_t n, const char *what)
{
	const uint8_t *p;

	if (n > gguf_left(c)) {
		gguf_fail(c, "%s (%" PRIu64 " bytes) at offset %" PRIu64
			     " runs past the end of the file (%" PRIu64 " bytes)",
			  what, n, c->pos, c->size);
		return NULL;
	}
	p = c->base + c->pos;
	c->pos += n;
	return p;
}

bool gguf_read_u32(gguf_cursor *c, uint32_t *out, const char *what)
{
	const uint8_t *p = gguf_take(c, sizeof(*out), what);

	if (p == NULL)
		return false;
	memcpy(out, p, sizeof(*out));
	return true;
}

bool gguf_read_u64(gguf_cursor *c, uint64_t *out, const char *what)
{
	const uint8_t *p = gguf_take(c, sizeof(*out), what);

	if (p == NULL)
		return false;
	memcpy(out, p, sizeof(*out));
	return true;
}

bool gguf_read_string(gguf_cursor *c, loom_string *out, const char *what)
{
	uint64_t at = c->pos;
	uint64_t len;

	if (!gguf_read_u64(c, &len, what))
		return false;
	if (len > gguf_left(c)) {
		gguf_fail(c, "%s length %" PRIu64 " at offset %" PRIu64
			     " runs past the end of the file (%" PRIu64 " bytes)",
			  what, len, at, c->size);
		return false;
	}
	out->len = len;
	out->data = (const char *)c->base + c->pos;
	c->pos += len;
	return true;
}
