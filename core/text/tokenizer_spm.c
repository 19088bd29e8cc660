/*
 * tokenizer_spm.c - SentencePiece-style tokenization (tokenizer.ggml.model
 * "llama"), token for token what llama.cpp's llm_tokenizer_spm produces.
 *
 * A text fragment has its spaces escaped to U+2581 "▁" and is cut into UTF-8
 * characters. Then, as long as some pair of neighbouring symbols spells a
 * vocabulary token, the pair whose token scores highest is merged (on equal
 * scores the leftmost). Pairs wait in a max-heap and are checked for
 * staleness when popped, so n symbols cost O(n log n). Finally each symbol
 * is emitted as its token, or, if it is a character the vocabulary lacks, as
 * one byte token per byte.
 *
 * Merges far apart do not interact, only the order of neighbouring ones
 * matters. In the usual vocabulary no token has a "▁" after any other
 * character, so no merge ever joins a word to the "▁" that starts the next:
 * then each word is merged on its own, with a small heap that stays in cache,
 * and the result is the same as merging the whole fragment at once.
 */
#include "runtime/error.h"
#include "text/merge_queue.h"
#include "text/unicode.h"
#include "text/vocab_internal.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>


/* The escaped text cut into symbols (merge_queue.h). It is at most
 * INT_MAX bytes, so int holds any offset. */
struct spm_session {
	const loom_vocab *vocab;
	const char *text; /* escaped */
	loom_symbol *syms;
	int n_syms;
	loom_merge_queue heap;
};

/* Neighbours merge if together they spell a token; higher scores first. */
static bool spm_pair(const void *ctx, const loom_symbol *syms, int left, int right, double *priority)
{
	const struct spm_session *s = ctx;
	int size = syms[left].n + syms[right].n;
	if ((size_t)size > s->vocab->max_token_len)
		return false;
	loom_token id = loom_vocab_find(s->vocab, s->text + syms[left].start, (size_t)size);
	if (id < 0)
		return false;
	*priority = -(double)s->vocab->scores[id];
	return true;
}

/* Cuts the escaped text into one symbol per UTF-8 character. */
static loom_status split_chars(struct spm_session *s, size_t len)
{
	s->syms = malloc(len * sizeof(*s->syms));
	if (s->syms == NULL)
		return loom_error(LOOM_ERR_NO_MEMORY, "tokenizer: out of memory");
	int n = 0;
	for (size_t off = 0; off < len; n++) {
		size_t cl = loom_utf8_seq_len((unsigned char)s->text[off]);
		if (cl > len - off)
			cl = len - off;
		s->syms[n] = (loom_symbol){.start = (int)off, .n = (int)cl, .prev = n - 1,
					     .next = n + 1};
		off += cl;
	}
	s->syms[n - 1].next = -1;
	s->n_syms = n;
	return LOOM_OK;
}

static bool is_space_symbol(const struct spm_session *s, int i)
{
	return s->syms[i].n == LOOM_SPM_SPACE_LEN &&
	       memcmp(s->text + s->syms[i].start, LOOM_SPM_SPACE, LOOM_SPM_SPACE_LEN) == 0;
}

/* The end of the run of symbols starting at first that merges can never
 * leave: the next "▁" that follows another character when the vocabulary
 * allows cutting there, else the end of the fragment. */
static int word_end(const struct spm_session *s, int first)
{
	if (!s->vocab->spm_word_merges)
		return s->n_syms;
	for (int i = first + 1; i < s->n_syms; i++)
		if (is_space_symbol(s, i) && !is_space_symbol(s, i - 1))
			return i;
	return s->n_syms;
}

/* Merges the best pair of symbols first .. last - 1 until no neighbours
 * spell a token. */
static loom_status merge_pairs(struct spm_session *s, int first, int last)
{
	s->syms[first].prev = -1;
	s->syms[last - 1].next = -1;
	return loom_merge_symbols(&s->heap, s->syms, first, spm_pair, s);
}

/* Spells a symbol that is no token byte by byte. */
static loom_status emit_bytes(const loom_vocab *v, const char *p, size_t n, loom_token_vec *out)
{
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)p[i];
		if (v->byte_token[c] < 0)
			return loom_error(LOOM_ERR_INVALID_ARGUMENT,
					  "tokenizer: byte 0x%02X of the text has no token (no <0x%02X> "
					  "byte token and no unknown token)", c, c);
		loom_status st = loom_token_vec_push(out, v->byte_token[c]);
		if (st != LOOM_OK)
			return st;
	}
	return LOOM_OK;
}

/* Every merge produced a vocabulary token, so a symbol that is no token is a
 * single character the vocabulary lacks (llama.cpp's "resegment" step, which
 * splits a symbol back along the merges that made it, never finds one to
 * undo). */
static loom_status emit_symbols(const struct spm_session *s, int first, loom_token_vec *out)
{
	loom_status st = LOOM_OK;
	for (int i = first; i >= 0 && st == LOOM_OK; i = s->syms[i].next) {
		const char *p = s->text + s->syms[i].start;
		size_t n = (size_t)s->syms[i].n;
		loom_token id = loom_vocab_find(s->vocab, p, n);
		st = id >= 0 ? loom_token_vec_push(out, id) : emit_bytes(s->vocab, p, n, out);
	}
	return st;
}

/* text with every space replaced by "▁", after a "▁" if prefix is set. */
static char *escape_spaces(const char *text, size_t len, bool prefix, size_t *out_len)
{
	if (len > (SIZE_MAX - LOOM_SPM_SPACE_LEN) / LOOM_SPM_SPACE_LEN)
		return NULL;
	char *buf = malloc(LOOM_SPM_SPACE_LEN * (len + 1));
	if (buf == NULL)
		return NULL;
	size_t n = 0;
	if (prefix) {
		memcpy(buf, LOOM_SPM_SPACE, LOOM_SPM_SPACE_LEN);
		n = LOOM_SPM_SPACE_LEN;
	}
	for (size_t i = 0; i < len; i++) {
		if (text[i] == ' ') {
			memcpy(buf + n, LOOM_SPM_SPACE, LOOM_SPM_SPACE_LEN);
			n += LOOM_SPM_SPACE_LEN;
		} else {
			buf[n++] = text[i];
		}
	}
	*out_len = n;
	return buf;
}

static loom_status encode_fragment(const loom_vocab *v, const char *text, size_t len, bool prefix,
				   loom_token_vec *out)
{
	struct spm_session s = {.vocab = v};
	size_t n;
	char *escaped = escape_spaces(text, len, prefix, &n);
	if (escaped == NULL)
		return loom_error(LOOM_ERR_NO_MEMORY, "tokenizer: out of memory for %zu bytes of text",
				  len);
	s.text = escaped;
	loom_status st = LOOM_OK;
	if (n > INT_MAX) {
		st = loom_error(LOOM_ERR_INVALID_ARGUMENT, "tokenizer: text of %zu bytes is too long",
				len);
	} else if (n > 0) {
		st = split_chars(&s, n);
		for (int first = 0, last; st == LOOM_OK && first < s.n_syms; first = last) {
			last = word_end(&s, first);
			st = merge_pairs(&s, first, last);
			if (st == LOOM_OK)
				st = emit_symbols(&s, first, out);
		}
	}
	loom_merge_queue_free(&s.heap);
	free(s.syms);
	free(escaped);
	return st;
}

loom_status loom_spm_tokenize(const loom_vocab *v, const char *text, const loom_fragment *frags,
			      size_t n_frags, bool add_special, loom_token_vec *out)
{
	loom_status st = LOOM_OK;
	/* The space prefix goes before text that starts the input or follows
	 * a special token, as SentencePiece sees each such piece as a new
	 * text. */
	bool after_special = true;

	if (add_special && v->add_bos)
		st = loom_token_vec_push(out, v->bos);
	for (size_t i = 0; i < n_frags && st == LOOM_OK; i++) {
		const loom_fragment *f = &frags[i];
		if (f->token >= 0) {
			st = loom_token_vec_push(out, f->token);
			after_special = true;
		} else {
			st = encode_fragment(v, text + f->off, f->len,
					     v->add_space_prefix && after_special, out);
			after_special = false;
		}
	}
	if (st == LOOM_OK && add_special && v->add_eos)
		st = loom_token_vec_push(out, v->eos);
	return st;
}

bool loom_spm_word_merges(const loom_vocab *v)
{
	for (loom_token id = 0; id < v->n_tokens; id++) {
		size_t len, i = 0;
		const char *t = loom_vocab_text(v, id, &len);
		while (len - i >= LOOM_SPM_SPACE_LEN && memcmp(t + i, LOOM_SPM_SPACE, LOOM_SPM_SPACE_LEN) == 0)
			i += LOOM_SPM_SPACE_LEN;
		for (; len - i >= LOOM_SPM_SPACE_LEN; i++)
			if (memcmp(t + i, LOOM_SPM_SPACE, LOOM_SPM_SPACE_LEN) == 0)
				return false;
	}
	return true;
}
