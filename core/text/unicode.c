/* unicode.c - UTF-8 and character properties, by binary search in the
 * generated tables. */
#include "text/unicode.h"

#include <string.h>

/* Every table entry starts with the first code point it covers. */
struct cp_range {
	uint32_t first, last;
};

/* Every step-th code point from first to last maps to itself + delta. */
struct cp_lower_run {
	uint32_t first, last;
	int32_t step, delta;
};

/* first .. last all map to `to`. */
struct cp_map_run {
	uint32_t first, last, to;
};

#include "text/unicode_tables.h"

#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

/* The index of the last of n entries (each `size` bytes, sorted by their
 * leading uint32_t) whose first code point is <= cp, or -1. */
static long find_entry(const void *table, size_t n, size_t size, uint32_t cp)
{
	long lo = 0, hi = (long)n - 1, at = -1;
	while (lo <= hi) {
		long mid = lo + (hi - lo) / 2;
		uint32_t first;
		memcpy(&first, (const char *)table + (size_t)mid * size, sizeof(first));
		if (first <= cp) {
			at = mid;
			lo = mid + 1;
		} else {
			hi = mid - 1;
		}
	}
	return at;
}

static bool in_ranges(const struct cp_range *r, size_t n, uint32_t cp)
{
	long i = find_entry(r, n, sizeof(*r), cp);
	return i >= 0 && cp <= r[i].last;
}

bool loom_unicode_is_space(uint32_t cp)
{
	if (cp <= 0x20)
		return cp == 0x20 || (cp >= 0x09 && cp <= 0x0D);
	return cp == 0x85 || cp == 0xA0 || cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200A) ||
	       cp == 0x2028 || cp == 0x2029 || cp == 0x202F || cp == 0x205F || cp == 0x3000;
}

bool loom_unicode_is_control(uint32_t cp)
{
	return in_ranges(control_ranges, COUNT(control_ranges), cp);
}

bool loom_unicode_is_punct(uint32_t cp)
{
	return in_ranges(punct_ranges, COUNT(punct_ranges), cp);
}

uint32_t loom_unicode_tolower(uint32_t cp)
{
	long i = find_entry(lower_runs, COUNT(lower_runs), sizeof(lower_runs[0]), cp);
	if (i < 0 || cp > lower_runs[i].last || (cp - lower_runs[i].first) % (uint32_t)lower_runs[i].step)
		return cp;
	return (uint32_t)((int32_t)cp + lower_runs[i].delta);
}

#define HANGUL_FIRST 0xAC00u
#define HANGUL_LAST 0xD7A3u
#define HANGUL_LEAD 0x1100u
#define HANGUL_PER_LEAD 588u /* 21 vowels x 28 trailing consonants */

uint32_t loom_unicode_nfd_first(uint32_t cp)
{
	if (cp >= HANGUL_FIRST && cp <= HANGUL_LAST)
		return HANGUL_LEAD + (cp - HANGUL_FIRST) / HANGUL_PER_LEAD;
	long i = find_entry(nfd_runs, COUNT(nfd_runs), sizeof(nfd_runs[0]), cp);
	return i >= 0 && cp <= nfd_runs[i].last ? nfd_runs[i].to : cp;
}

static bool is_cont(const char *s, size_t len, size_t i)
{
	return i < len && ((unsigned char)s[i] & 0xC0) == 0x80;
}

uint32_t loom_utf8_decode(const char *s, size_t len, size_t *n)
{
	const unsigned char *u = (const unsigned char *)s;
	uint32_t cp;
	*n = 1;
	if (u[0] < 0x80)
		return u[0];
	if (u[0] < 0xC0 || u[0] >= 0xF8)
		return LOOM_UNICODE_REPLACEMENT;
	size_t need = u[0] < 0xE0 ? 2 : u[0] < 0xF0 ? 3 : 4;
	cp = u[0] & (0x7Fu >> need);
	for (size_t i = 1; i < need; i++) {
		if (!is_cont(s, len, i))
			return LOOM_UNICODE_REPLACEMENT;
		cp = cp << 6 | (u[i] & 0x3Fu);
	}
	if (cp > 0x10FFFF)
		return LOOM_UNICODE_REPLACEMENT;
	*n = need;
	return cp;
}

size_t loom_utf8_encode(uint32_t cp, char out[4])
{
	if (cp < 0x80) {
		out[0] = (char)cp;
		return 1;
	}
	if (cp < 0x800) {
		out[0] = (char)(0xC0 | cp >> 6);
		out[1] = (char)(0x80 | (cp & 0x3F));
		return 2;
	}
	if (cp < 0x10000) {
		out[0] = (char)(0xE0 | cp >> 12);
		out[1] = (char)(0x80 | (cp >> 6 & 0x3F));
		out[2] = (char)(0x80 | (cp & 0x3F));
		return 3;
	}
	out[0] = (char)(0xF0 | cp >> 18);
	out[1] = (char)(0x80 | (cp >> 12 & 0x3F));
	out[2] = (char)(0x80 | (cp >> 6 & 0x3F));
	out[3] = (char)(0x80 | (cp & 0x3F));
	return 4;
}
