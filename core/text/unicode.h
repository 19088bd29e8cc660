/* unicode.h - UTF-8 and the few Unicode character properties the
 * tokenizers need, from tables generated out of the Unicode database
 * (unicode_tables.h). */
#ifndef LOOM_UNICODE_H
#define LOOM_UNICODE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define LOOM_UNICODE_REPLACEMENT 0xFFFDu

/* The code point at s[0 .. len) (len > 0); *n is the bytes it took. A byte
 * that does not start a well-formed sequence is U+FFFD and takes one byte,
 * as in llama.cpp. */
uint32_t loom_utf8_decode(const char *s, size_t len, size_t *n);

/* Bytes of the UTF-8 sequence lead starts, 1 to 4, from its top bits
 * alone (1 for ASCII and for a stray continuation byte): cuts any text,
 * well-formed or not, into characters. */
static inline size_t loom_utf8_seq_len(unsigned char lead)
{
	static const unsigned char len[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
	return len[lead >> 4];
}

/* Writes cp (at most U+10FFFF) as UTF-8; returns its length, 1 to 4. */
size_t loom_utf8_encode(uint32_t cp, char out[4]);

/* Unicode's White_Space property. */
bool loom_unicode_is_space(uint32_t cp);
/* General category C (control, format, surrogate, private use, unassigned). */
bool loom_unicode_is_control(uint32_t cp);
/* General category P (punctuation). */
bool loom_unicode_is_punct(uint32_t cp);
/* The first code point of cp's lower-case mapping. */
uint32_t loom_unicode_tolower(uint32_t cp);
/* The first code point of cp's canonical decomposition (NFD): a letter
 * without its accents, a Hangul syllable's leading consonant. */
uint32_t loom_unicode_nfd_first(uint32_t cp);

#endif
