/* error.c - status texts and the per-thread last-error message. */
#include "runtime/error.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#define LOOM_ERROR_MAX 1024

static _Thread_local char last_error[LOOM_ERROR_MAX];
static _Thread_local unsigned long serial;

const char *loom_strerror(loom_status status)
{
	switch (status) {
	case LOOM_OK:
		return "success";
#define LOOM_STATUS_TEXT_(name, code, text) \
	case LOOM_ERR_##name:               \
		return text;
		LOOM_STATUS_MAP(LOOM_STATUS_TEXT_)
#undef LOOM_STATUS_TEXT_
	}
	return "unknown status";
}

const char *loom_last_error(void)
{
	return last_error;
}

void loom_error_clear(void)
{
	last_error[0] = '\0';
}

unsigned long loom_error_serial(void)
{
	return serial;
}

loom_status loom_error(loom_status code, const char *fmt, ...)
{
	/* Formatted apart first: an argument may be loom_last_error() itself. */
	char text[LOOM_ERROR_MAX];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(text, sizeof(text), fmt, ap);
	va_end(ap);
	memcpy(last_error, text, sizeof(text));
	serial++;
	return code;
}

/* Appends src to dst (of capacity LOOM_ERROR_MAX) at *len, truncating. */
static void append(char *dst, size_t *len, const char *src)
{
	size_t n = strlen(src);
	if (n > LOOM_ERROR_MAX - 1 - *len)
		n = LOOM_ERROR_MAX - 1 - *len;
	memcpy(dst + *len, src, n);
	*len += n;
	dst[*len] = '\0';
}

loom_status loom_error_wrap(loom_status code, const char *fmt, ...)
{
	char old[LOOM_ERROR_MAX];
	size_t len;
	va_list ap;

	memcpy(old, last_error, sizeof(old));
	va_start(ap, fmt);
	vsnprintf(last_error, sizeof(last_error), fmt, ap);
	va_end(ap);
	len = strlen(last_error);
	append(last_error, &len, ": ");
	append(last_error, &len, old[0] != '\0' ? old : loom_strerror(code));
	serial++;
	return code;
}
