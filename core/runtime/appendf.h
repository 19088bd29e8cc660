/* appendf.h - building text in a fixed buffer piece by piece. */
#ifndef LOOM_APPENDF_H
#define LOOM_APPENDF_H

#include <stddef.h>

/* Appends to buf (of size bytes, NUL-terminated) at *len like snprintf,
 * truncating; *len grows by the length the full text needs, so a caller
 * can tell what a larger buffer would take. */
void loom_appendf(char *buf, size_t size, size_t *len, const char *fmt, ...) __attribute__((format(printf, 4, 5)));

#endif
