/* test_text.c - token lists and byte strings rendered for test messages. */
#include "test_text.h"

#include <stdio.h>

void test_format_tokens(const loom_token *t, size_t n, char *buf, size_t size)
{
	size_t o = 0;
	buf[0] = '\0';
	for (size_t i = 0; i < n && o + 16 < size; i++)
		o += (size_t)snprintf(buf + o, size - o, "%s%d", i ? " " : "", t[i]);
	if (n > 0 && o + 16 >= size)
		snprintf(buf + o, size - o, " ...");
}

void test_escape(const char *s, size_t n, char *buf, size_t size)
{
	size_t o = 0;
	for (size_t i = 0; i < n && o + 8 < size; i++) {
		unsigned char c = (unsigned char)s[i];
		if (c >= 0x20 && c < 0x7f && c != '\\')
			buf[o++] = (char)c;
		else
			o += (size_t)snprintf(buf + o, size - o, "\\x%02x", c);
	}
	buf[o] = '\0';
}
