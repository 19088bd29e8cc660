/* test_text.h - token lists and byte strings rendered for test messages. */
#ifndef LOOM_TEST_TEXT_H
#define LOOM_TEST_TEXT_H

#include <loom.h>

#include <stddef.h>

/* "1 403 407 ..." into buf, cut with " ..." when it does not fit. */
void test_format_tokens(const loom_token *t, size_t n, char *buf, size_t size);

/* s[0 .. n) with control, backslash and non-ASCII bytes as \xNN. */
void test_escape(const char *s, size_t n, char *buf, size_t size);

#endif
