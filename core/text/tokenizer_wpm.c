/*
 * tokenizer_wpm.c - WordPiece (tokenizer.ggml.model "bert"), token for token
 * what llama.cpp's llm_tokenizer_wpm produces (BERT, BGE and the like).
 *
 * The text is normalized and cut into words: every character is replaced by
 * the first character of its canonical decomposition (which drops accents:
 * "ü" becomes "u"), whitespace ends a word, control characters vanish,
 * and punctuation, ASCII symbols and CJK ideographs are words of their own.
 * Words are lower-cased. Each word is then spelled greedily, longest token
 * first, from its start on: the first piece with the "▁" that the GGUF
 * converter puts before word-initial tokens, the rest as continuations
 * (BERT's "##" pieces, stored without the "##"). A word that cannot be
 * spelled entirely is the unknown token.
 */
#include "runtime/array_grow.h"
#include "runtime/error.h"
#include "text/unicode.h"
#include "text/vocab_internal.h"

#include <stdlib.h>
#include <string.h>


/* The CJK ideograph blocks BERT puts in words of their own. The upper end of
 * the sixth is 0x2CEAF where Unicode has 0x2B81F: Hugging Face's tokenizers
 * have it so, and llama.cpp follows. */
static bool is_cjk(uint32_t cp)
{
	return (cp >= 0x4E00 && cp <= 0x9FFF) || (cp >= 0x3400 && cp <= 0x4DBF) ||
	       (cp >= 0x20000 && cp <= 0x2A6DF) || (cp >= 0x2A700 && cp <= 0x2B73F) ||
	       (cp >= 0x2B740 && cp <= 0x2B81F) || (cp >= 0x2B920 && cp <= 0x2CEAF) ||
	       (cp >= 0xF900 && cp <= 0xFAFF) || (cp >= 0x2F800 && cp <= 0x2FA1F);
}

/* ASCII characters of general category S: $ + < = > ^ ` | ~ */
static bool is_ascii_symbol(uint32_t cp)
{
	return cp != 0 && cp < 0x80 && strchr("$+<=>^`|~", (int)cp) != NULL;
}

/* The word being collected, with room for the "▁" in front. */
struct word {
	char *buf;
	size_t len, cap; /* len counts the "▁" */
};

/* Makes room for one more character. */
static loom_status word_reserve(struct word *w)
{
	char *p = loom_array_grow(w->buf, &w->cap, w->len + 4, 1);
	if (p == NULL)
		return loom_error(LOOM_ERR_NO_MEMORY, "tokenize: out of memory");
	w->buf = p;
	return LOOM_OK;
}

static loom_status word_append(struct word *w, uint32_t cp)
{
	loom_status st = word_reserve(w);
	if (st == LOOM_OK)
		w->len += loom_utf8_encode(cp, w->buf + w->len);
	return st;
}

/* Spells the collected word greedily, longest match first; the unknown
 * token if some part of it is no token. Empties the word. */
static loom_status spell_word(const loom_vocab *v, struct word *w, loom_token_vec *out)
{
	size_t n = w->len, first = out->n;
	loom_status st = LOOM_OK;

	if (n == LOOM_SPM_SPACE_LEN)
		return LOOM_OK;
	w->len = LOOM_SPM_SPACE_LEN;
	for (size_t i = 0; i < n && st == LOOM_OK;) {
		size_t j = n - i > v->max_token_len ? i + v->max_token_len : n;
		loom_token id = -1;
		for (; j > i && (id = loom_vocab_find(v, w->buf + i, j - i)) < 0; j--)
			;
		if (id < 0) {
			out->n = first;
			break;
		}
		st = loom_token_vec_push(out, id);
		i = j;
	}
	if (st == LOOM_OK && out->n == first) {
		if (v->unk < 0)
			return loom_error(LOOM_ERR_INVALID_ARGUMENT,
					  "tokenizer: a word of the text has no tokens and there is no "
					  "unknown token");
		st = loom_token_vec_push(out, v->unk);
	}
	return st;
}

static loom_status encode_fragment(const loom_vocab *v, const char *text, size_t len,
				   struct word *w, loom_token_vec *out)
{
	loom_status st = LOOM_OK;
	w->len = LOOM_SPM_SPACE_LEN;
	for (size_t i = 0, n; i < len && st == LOOM_OK; i += n) {
		uint32_t cp = loom_unicode_nfd_first(loom_utf8_decode(text + i, len - i, &n));
		if (loom_unicode_is_space(cp)) {
			st = spell_word(v, w, out);
			continue;
		}
		if (cp == 0 || cp == LOOM_UNICODE_REPLACEMENT || loom_unicode_is_control(cp))
			continue;
		if (loom_unicode_is_punct(cp) || is_ascii_symbol(cp) || is_cjk(cp)) {
			st = spell_word(v, w, out);
			if (st == LOOM_OK)
				st = word_append(w, loom_unicode_tolower(cp));
			if (st == LOOM_OK)
				st = spell_word(v, w, out);
			continue;
		}
		st = word_append(w, loom_unicode_tolower(cp));
	}
	if (st == LOOM_OK)
		st = spell_word(v, w, out);
	return st;
}

loom_status loom_wpm_tokenize(const loom_vocab *v, const char *text, const loom_fragment *frags,
			      size_t n_frags, bool add_special, loom_token_vec *out)
{
	struct word w = {0};
	loom_status st = word_reserve(&w);
	if (st == LOOM_OK)
		memcpy(w.buf, LOOM_SPM_SPACE, LOOM_SPM_SPACE_LEN);
	if (st == LOOM_OK && add_special && v->add_bos)
		st = loom_token_vec_push(out, v->bos);
	for (size_t i = 0; i < n_frags && st == LOOM_OK; i++) {
		if (frags[i].token >= 0)
			st = loom_token_vec_push(out, frags[i].token);
		else
			st = encode_fragment(v, text + frags[i].off, frags[i].len, &w, out);
	}
	if (st == LOOM_OK && add_special && v->add_sep)
		st = loom_token_vec_push(out, v->sep);
	free(w.buf);
	return st;
}
