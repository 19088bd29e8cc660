/*
 * tokenizer_bpe.c - byte-level BPE (tokenizer.ggml.model "gpt2"), token for
 * token what llama.cpp's llm_tokenizer_bpe produces: GPT-2, Llama 3, Qwen,
 * Phi-2, StableLM 2, StarCoder, Falcon, MPT, DeepSeek and the like.
 *
 * The pre-tokenizer (pretokenizer.c) cuts a text fragment into words. Each
 * byte of a word is written as the character GPT-2's byte-level alphabet
 * gives it (printable Latin-1 bytes stand for themselves, the others for
 * U+0100 onwards), which is how the vocabulary spells its tokens. Starting
 * from one symbol per byte, the neighbouring pair with the lowest merge
 * rank (tokenizer.ggml.merges, "left right", in order) is merged, the
 * leftmost on a tie, until no pair has a rank. Pairs wait in a min-heap and
 * are checked for staleness when popped, as in tokenizer_spm.c.
 *
 * Because every byte is a symbol, any byte string - invalid UTF-8 included -
 * is spelled exactly, and token_to_piece gives the bytes back.
 */
#include "model/meta.h"
#include "runtime/array_grow.h"
#include "runtime/error.h"
#include "text/merge_queue.h"
#include "text/pretokenizer.h"
#include "text/unicode.h"
#include "text/vocab_internal.h"

#include <inttypes.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#define KEY_PRE "tokenizer.ggml.pre"
#define KEY_MERGES "tokenizer.ggml.merges"

/* ------------------------------------------------------------------------ */
/* GPT-2's byte-level alphabet                                              */

/* Bytes that are not printable Latin-1: 0x00-0x20, 0x7F-0xA0 and 0xAD. */
#define N_HIDDEN_BYTES 68

static bool byte_is_printable(unsigned b)
{
	return (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xFF && b != 0xAD);
}

/* The code point standing for byte b. */
static uint32_t byte_to_cp(unsigned b)
{
	if (byte_is_printable(b))
		return b;
	if (b <= 0x20)
		return 0x100 + b;
	if (b <= 0xA0)
		return 0x100 + 33 + (b - 0x7F);
	return 0x100 + 67; /* 0xAD */
}

/* The byte code point cp stands for, or -1 if it stands for none. */
static int cp_to_byte(uint32_t cp)
{
	if (cp < 0x100)
		return byte_is_printable(cp) ? (int)cp : -1;
	if (cp >= 0x100 + N_HIDDEN_BYTES)
		return -1;
	uint32_t n = cp - 0x100;
	if (n <= 0x20)
		return (int)n;
	if (n < 67)
		return (int)(0x7F + (n - 33));
	return 0xAD;
}

/* ------------------------------------------------------------------------ */
/* Merge ranks                                                              */

/* One merge: left and right back to back in merge_text. */
struct merge {
	size_t off;
	uint32_t left_len, len;
	int32_t rank;
};

struct loom_bpe {
	loom_pretokenizer *pre;
	bool ignore_merges;
	/* GPT-2's spelling of each byte. */
	char byte_text[256][2];
	uint8_t byte_len[256];

	char *merge_text;
	struct merge *merges;
	size_t n_merges;
	/* (left, right) -> merge, open addressing; -1 marks a free slot. */
	int32_t *slots;
	size_t n_slots;
};

static bool merge_is(const struct loom_bpe *b, const struct merge *m, const char *pair,
		     size_t left_len, size_t len)
{
	return m->left_len == left_len && m->len == len &&
	       memcmp(b->merge_text + m->off, pair, len) == 0;
}

/* The slot of the pair pair[0 .. len) split at left_len: its merge's, or the
 * free one where it would go. */
static size_t merge_slot(const struct loom_bpe *b, const char *pair, size_t left_len, size_t len)
{
	size_t mask = b->n_slots - 1;
	/* The pair's bytes; the split point is compared separately. */
	size_t i = loom_text_hash(pair, len) & mask;
	while (b->slots[i] >= 0 && !merge_is(b, &b->merges[b->slots[i]], pair, left_len, len))
		i = (i + 1) & mask;
	return i;
}

/* The rank of merging pair[0 .. left_len) with pair[left_len .. len), or -1. */
static int32_t merge_rank(const struct loom_bpe *b, const char *pair, size_t left_len, size_t len)
{
	int32_t m = b->slots[merge_slot(b, pair, left_len, len)];
	return m >= 0 ? b->merges[m].rank : -1;
}

/* Copies the merges "left right" and indexes them. A string without a space
 * after its first byte merges nothing and is skipped (llama.cpp files it
 * under an empty pair); where a pair repeats, its first rank counts. */
static loom_status load_merges(struct loom_bpe *b, const loom_model_file *file)
{
	const void *data;
	uint64_t n;
	loom_status st = loom_meta_get_array(file, KEY_MERGES, LOOM_META_STRING, &data, &n);
	if (st != LOOM_OK)
		return st;
	const loom_string *words = data;
	if (n > INT32_MAX)
		return loom_error(LOOM_ERR_BAD_FORMAT, "'%s' has %" PRIu64 " entries", KEY_MERGES, n);
	size_t total = 0;
	for (uint64_t i = 0; i < n; i++) {
		if (words[i].len > UINT32_MAX || words[i].len > SIZE_MAX - total)
			return loom_error(LOOM_ERR_BAD_FORMAT, "'%s' is too large", KEY_MERGES);
		total += words[i].len;
	}
	size_t n_slots = 16;
	while (n_slots < 2 * (size_t)n)
		n_slots *= 2;
	b->merge_text = malloc(total + 1);
	b->merges = malloc(((size_t)n + 1) * sizeof(*b->merges));
	b->slots = malloc(n_slots * sizeof(*b->slots));
	if (b->merge_text == NULL || b->merges == NULL || b->slots == NULL)
		return loom_error(LOOM_ERR_NO_MEMORY, "out of memory for %" PRIu64 " merges", n);
	memset(b->slots, 0xff, n_slots * sizeof(*b->slots));
	b->n_slots = n_slots;

	size_t off = 0;
	for (uint64_t i = 0; i < n; i++) {
		const char *w = words[i].data;
		const char *space = words[i].len > 1 ? memchr(w + 1, ' ', words[i].len - 1) : NULL;
		if (space == NULL)
			continue;
		size_t left = (size_t)(space - w), right = words[i].len - left - 1;
		char *pair = b->merge_text + off;
		memcpy(pair, w, left);
		memcpy(pair + left, space + 1, right);
		size_t slot = merge_slot(b, pair, left, left + right);
		if (b->slots[slot] >= 0)
			continue;
		b->merges[b->n_merges] = (struct merge){
			.off = off, .left_len = (uint32_t)left, .len = (uint32_t)(left + right),
			.rank = (int32_t)i};
		b->slots[slot] = (int32_t)b->n_merges++;
		off += left + right;
	}
	return LOOM_OK;
}

static void init_bytes(struct loom_bpe *b)
{
	for (unsigned c = 0; c < 256; c++) {
		char utf8[4];
		b->byte_len[c] = (uint8_t)loom_utf8_encode(byte_to_cp(c), utf8);
		memcpy(b->byte_text[c], utf8, b->byte_len[c]);
	}
}

loom_status loom_bpe_load(const loom_model_file *file, struct loom_bpe **out)
{
	*out = NULL;
	struct loom_bpe *b = calloc(1, sizeof(*b));
	if (b == NULL)
		return loom_error(LOOM_ERR_NO_MEMORY, "out of memory for the BPE tokenizer");
	init_bytes(b);
	loom_string pre = {0};
	bool has_pre = loom_meta_find(file, KEY_PRE) != NULL;
	loom_status st = has_pre ? loom_meta_get_string(file, KEY_PRE, &pre) : LOOM_OK;
	if (st == LOOM_OK)
		st = loom_pretokenizer_create(has_pre ? pre.data : NULL, pre.len, &b->pre);
	if (st == LOOM_OK)
		st = load_merges(b, file);
	if (st != LOOM_OK) {
		loom_bpe_free(b);
		return st;
	}
	b->ignore_merges = loom_pretokenizer_flags(b->pre) & LOOM_PRETOK_IGNORE_MERGES;
	*out = b;
	return LOOM_OK;
}

void loom_bpe_free(struct loom_bpe *b)
{
	if (b == NULL)
		return;
	loom_pretokenizer_free(b->pre);
	free(b->slots);
	free(b->merges);
	free(b->merge_text);
	free(b);
}

unsigned loom_bpe_pretok_flags(const struct loom_bpe *b)
{
	return loom_pretokenizer_flags(b->pre);
}

/* ------------------------------------------------------------------------ */
/* Merging one word                                                         */

/* One word at a time: its text in GPT-2's alphabet, cut into symbols
 * (merge_queue.h). */
struct bpe_session {
	const loom_vocab *vocab;
	const struct loom_bpe *bpe;
	char *text; /* the word in GPT-2's alphabet */
	size_t text_cap;
	loom_symbol *syms;
	size_t syms_cap;
	loom_merge_queue heap;
	loom_span_vec words;
};

/* Neighbours merge if the pair has a rank; lower ranks first. They are
 * adjacent in the text, so the pair is one run of it. */
static bool bpe_pair(const void *ctx, const loom_symbol *syms, int left, int right, double *priority)
{
	const struct bpe_session *s = ctx;
	const loom_symbol *l = &syms[left], *r = &syms[right];
	int32_t rank = merge_rank(s->bpe, s->text + l->start, (size_t)l->n, (size_t)(l->n + r->n));
	*priority = rank;
	return rank >= 0;
}

/* Writes word[0 .. len) in GPT-2's alphabet into s->text, one symbol per
 * byte. */
static loom_status encode_word(struct bpe_session *s, const char *word, size_t len, int *n_syms)
{
	if (len > INT_MAX / 2)
		return loom_error(LOOM_ERR_INVALID_ARGUMENT, "tokenizer: a word of %zu bytes is too long",
				  len);
	char *text = loom_array_grow(s->text, &s->text_cap, 2 * len, 1);
	if (text != NULL)
		s->text = text;
	loom_symbol *syms = loom_array_grow(s->syms, &s->syms_cap, len, sizeof(*s->syms));
	if (syms != NULL)
		s->syms = syms;
	if (text == NULL || syms == NULL)
		return loom_error(LOOM_ERR_NO_MEMORY, "tokenizer: out of memory");
	int off = 0;
	for (size_t i = 0; i < len; i++) {
		unsigned char c = (unsigned char)word[i];
		memcpy(s->text + off, s->bpe->byte_text[c], s->bpe->byte_len[c]);
		s->syms[i] = (loom_symbol){.start = off, .n = s->bpe->byte_len[c], .prev = (int)i - 1,
					     .next = (int)i + 1};
		off += s->bpe->byte_len[c];
	}
	s->syms[len - 1].next = -1;
	*n_syms = (int)len;
	return LOOM_OK;
}

/* Merges the best-ranked pair until none has a rank. */
static loom_status merge_word(struct bpe_session *s)
{
	return loom_merge_symbols(&s->heap, s->syms, 0, bpe_pair, s);
}

/* Each symbol as its token. One that is no token (the vocabulary lacks a
 * merge's result) goes byte by byte of its spelling, skipping bytes that are
 * no token either, as llama.cpp does. */
static loom_status emit_symbols(const struct bpe_session *s, loom_token_vec *out)
{
	loom_status st = LOOM_OK;
	for (int i = 0; i >= 0 && st == LOOM_OK; i = s->syms[i].next) {
		const char *p = s->text + s->syms[i].start;
		size_t n = (size_t)s->syms[i].n;
		loom_token id = loom_vocab_find(s->vocab, p, n);
		if (id >= 0) {
			st = loom_token_vec_push(out, id);
			continue;
		}
		for (size_t j = 0; j < n && st == LOOM_OK; j++)
			if ((id = loom_vocab_find(s->vocab, p + j, 1)) >= 0)
				st = loom_token_vec_push(out, id);
	}
	return st;
}

static loom_status encode_fragment(struct bpe_session *s, const char *text, size_t len,
				   loom_token_vec *out)
{
	loom_status st = loom_pretokenizer_split(s->bpe->pre, text, len, &s->words);
	for (size_t w = 0; w < s->words.n && st == LOOM_OK; w++) {
		int n_syms = 0;
		st = encode_word(s, text + s->words.data[w].off, s->words.data[w].len, &n_syms);
		if (st != LOOM_OK)
			break;
		if (s->bpe->ignore_merges) {
			size_t n = (size_t)(s->syms[n_syms - 1].start + s->syms[n_syms - 1].n);
			loom_token id = loom_vocab_find(s->vocab, s->text, n);
			if (id >= 0) {
				st = loom_token_vec_push(out, id);
				continue;
			}
		}
		st = merge_word(s);
		if (st == LOOM_OK)
			st = emit_symbols(s, out);
	}
	return st;
}

loom_status loom_bpe_tokenize(const loom_vocab *v, const char *text, const loom_fragment *frags,
			      size_t n_frags, bool add_special, loom_token_vec *out)
{
	struct bpe_session s = {.vocab = v, .bpe = v->bpe};
	loom_status st = LOOM_OK;

	if (add_special && v->add_bos)
		st = loom_token_vec_push(out, v->bos);
	for (size_t i = 0; i < n_frags && st == LOOM_OK; i++) {
		if (frags[i].token >= 0)
			st = loom_token_vec_push(out, frags[i].token);
		else
			st = encode_fragment(&s, text + frags[i].off, frags[i].len, out);
	}
	if (st == LOOM_OK && add_special && v->add_eos)
		st = loom_token_vec_push(out, v->eos);
	free(s.words.data);
	loom_merge_queue_free(&s.heap);
	free(s.syms);
	free(s.text);
	return st;
}

/* ------------------------------------------------------------------------ */
/* Token to bytes                                                           */

/* How many bytes text[0 .. len) stands for in GPT-2's alphabet, written
 * to buf unless it is NULL; -1 if some character stands for no byte. */
static long decode_bytes(const char *text, size_t len, char *buf)
{
	long n = 0;
	for (size_t i = 0, k; i < len; i += k) {
		int b = cp_to_byte(loom_utf8_decode(text + i, len - i, &k));
		if (b < 0)
			return -1;
		if (buf != NULL)
			buf[n] = (char)b;
		n++;
	}
	return n;
}

loom_status loom_bpe_piece(const char *text, size_t len, char *buf, size_t size, size_t *n_out)
{
	long n = decode_bytes(text, len, NULL);
	/* Hugging Face's byte-level decoder keeps a token that is not in the
	 * alphabet as it is written. */
	*n_out = n < 0 ? len : (size_t)n;
	if (*n_out > size)
		return loom_error(LOOM_ERR_BUFFER_TOO_SMALL,
				  "token piece: %zu bytes do not fit in a buffer of %zu", *n_out, size);
	if (n >= 0)
		decode_bytes(text, len, buf);
	else if (len > 0)
		memcpy(buf, text, len);
	return LOOM_OK;
}
