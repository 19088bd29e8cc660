/* detokenizer.c - generated tokens to text a host can show as it comes:
 * whole UTF-8 characters, and nothing that may yet turn out to begin a stop
 * string. */
#include "loom.h"

#include "runtime/array_grow.h"
#include "runtime/error.h"
#include "text/unicode.h"

#include <stdlib.h>
#include <string.h>

struct loom_detokenizer {
	const loom_model *model;
	char **stop;
	size_t n_stop;
	/* Text not yet shown; its first `given` bytes were handed out by the
	 * last call and are dropped at the start of the next. */
	char *buf;
	size_t len, cap, given;
	bool stopped;
};

loom_status loom_detokenizer_create(const loom_model *model, const char *const *stop, size_t n_stop,
				    loom_detokenizer **out)
{
	if (out == NULL || model == NULL || (n_stop > 0 && stop == NULL))
		return loom_error(LOOM_ERR_INVALID_ARGUMENT, "loom_detokenizer_create: model and out are required, "
							     "and stop when n_stop > 0");
	*out = NULL;
	loom_detokenizer *d = calloc(1, sizeof(*d));
	if (d == NULL || (n_stop > 0 && (d->stop = calloc(n_stop, sizeof(char *))) == NULL)) {
		free(d);
		return loom_error(LOOM_ERR_NO_MEMORY, "out of memory");
	}
	d->model = model;
	for (size_t i = 0; i < n_stop; i++) {
		if (stop[i] == NULL || stop[i][0] == '\0')
			continue;
		if ((d->stop[d->n_stop] = strdup(stop[i])) == NULL) {
			loom_detokenizer_free(d);
			return loom_error(LOOM_ERR_NO_MEMORY, "out of memory");
		}
		d->n_stop++;
	}
	*out = d;
	return LOOM_OK;
}

void loom_detokenizer_free(loom_detokenizer *d)
{
	if (d == NULL)
		return;
	for (size_t i = 0; i < d->n_stop; i++)
		free(d->stop[i]);
	free(d->stop);
	free(d->buf);
	free(d);
}

/* Drops what the last call handed out; makes room for n more bytes. */
static loom_status make_room(loom_detokenizer *d, size_t n)
{
	if (d->given > 0) {
		memmove(d->buf, d->buf + d->given, d->len - d->given);
		d->len -= d->given;
		d->given = 0;
	}
	char *b = loom_array_grow(d->buf, &d->cap, d->len + n + 1, 1);
	if (b == NULL)
		return loom_error(LOOM_ERR_NO_MEMORY, "out of memory");
	d->buf = b;
	d->buf[d->len] = '\0';
	return LOOM_OK;
}

/* Bytes at the end of s that start a UTF-8 character not yet complete. */
static size_t incomplete_utf8_tail(const char *s, size_t len)
{
	for (size_t back = 1; back <= 4 && back <= len; back++) {
		unsigned char c = (unsigned char)s[len - back];
		if ((c & 0xC0) == 0x80)
			continue; /* continuation byte: keep looking for the lead */
		size_t need = loom_utf8_seq_len(c);
		return need > back ? back : 0;
	}
	return 0;
}

/* Length of the longest suffix of the text that is a proper prefix of a
 * stop string. */
static size_t partial_stop_tail(const loom_detokenizer *d)
{
	size_t best = 0;
	for (size_t i = 0; i < d->n_stop; i++)
		for (size_t k = strlen(d->stop[i]) - 1; k > best; k--)
			if (k <= d->len && memcmp(d->buf + d->len - k, d->stop[i], k) == 0) {
				best = k;
				break;
			}
	return best;
}

/* Where the first stop string starts in the text, or -1. */
static long find_stop(const loom_detokenizer *d)
{
	long first = -1;
	for (size_t i = 0; i < d->n_stop; i++) {
		const char *at = strstr(d->buf, d->stop[i]);
		if (at != NULL && (first < 0 || at - d->buf < first))
			first = at - d->buf;
	}
	return first;
}

/* Hands out the first n bytes of the text. */
static void give(loom_detokenizer *d, size_t n, const char **text, size_t *len)
{
	d->given = n;
	*text = d->buf;
	*len = n;
}

loom_status loom_detokenizer_push(loom_detokenizer *d, loom_token token, bool last, const char **text,
				  size_t *len, bool *stopped)
{
	char piece[256];
	size_t n = 0;
	if (d == NULL || text == NULL || len == NULL)
		return loom_error(LOOM_ERR_INVALID_ARGUMENT, "loom_detokenizer_push: detokenizer, text and len are required");
	loom_status st = make_room(d, sizeof(piece));
	if (st != LOOM_OK)
		return st;
	if (stopped != NULL)
		*stopped = d->stopped;
	if (d->stopped) {
		give(d, 0, text, len);
		return LOOM_OK;
	}
	if ((st = loom_token_to_piece(d->model, token, false, piece, sizeof(piece), &n)) != LOOM_OK)
		return st;
	memcpy(d->buf + d->len, piece, n);
	d->len += n;
	d->buf[d->len] = '\0';

	long at = find_stop(d);
	if (at >= 0) {
		d->stopped = true;
		if (stopped != NULL)
			*stopped = true;
		give(d, (size_t)at, text, len);
		/* Nothing after the stop string is ever shown. */
		d->len = (size_t)at;
		return LOOM_OK;
	}
	size_t hold = 0;
	if (!last) {
		size_t utf = incomplete_utf8_tail(d->buf, d->len);
		hold = partial_stop_tail(d);
		hold = utf > hold ? utf : hold;
	}
	give(d, d->len - hold, text, len);
	return LOOM_OK;
}

loom_status loom_detokenizer_finish(loom_detokenizer *d, const char **text, size_t *len)
{
	if (d == NULL || text == NULL || len == NULL)
		return loom_error(LOOM_ERR_INVALID_ARGUMENT, "loom_detokenizer_finish: detokenizer, text and len are required");
	loom_status st = make_room(d, 0);
	if (st != LOOM_OK)
		return st;
	give(d, d->stopped ? 0 : d->len, text, len);
	return LOOM_OK;
}
