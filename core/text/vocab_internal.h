/* vocab_internal.h - the vocabulary's tables, shared by vocab.c and the
 * tokenizer algorithms (tokenizer_*.c). Not part of any public interface. */
#ifndef LOOM_VOCAB_INTERNAL_H
#define LOOM_VOCAB_INTERNAL_H

#include "text/vocab.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* "▁", the SentencePiece meta symbol that stands for a space (and starts
 * a word in llama.cpp's spelling of WordPiece vocabularies). */
#define LOOM_SPM_SPACE "\xe2\x96\x81"
#define LOOM_SPM_SPACE_LEN 3

/* GGUF's token types (tokenizer.ggml.token_type), llama.cpp's numbering. */
enum loom_token_type {
	LOOM_TOKEN_UNDEFINED = 0,
	LOOM_TOKEN_NORMAL = 1,
	LOOM_TOKEN_UNKNOWN = 2,
	LOOM_TOKEN_CONTROL = 3,
	LOOM_TOKEN_USER_DEFINED = 4,
	LOOM_TOKEN_UNUSED = 5,
	LOOM_TOKEN_BYTE = 6,
	LOOM_TOKEN_TYPE_COUNT
};

/* Per-token flags beside the type. */
enum loom_token_flag {
	LOOM_TOKEN_EOG = 1 << 0,    /* ends generation */
	LOOM_TOKEN_RSTRIP = 1 << 1, /* when split out as a special token, eats the
				     * whitespace that follows it */
	LOOM_TOKEN_LSTRIP = 1 << 2, /* ... or the whitespace before it */
};

/* The tokenizer algorithm, chosen by tokenizer.ggml.model. */
enum loom_vocab_kind {
	LOOM_VOCAB_SPM, /* "llama": SentencePiece-style, merges by score */
	LOOM_VOCAB_BPE, /* "gpt2": byte-level BPE, merges by rank */
	LOOM_VOCAB_WPM, /* "bert": WordPiece, greedy longest match */
};

struct loom_bpe; /* merge ranks and pre-tokenizer (tokenizer_bpe.c) */

struct loom_vocab {
	enum loom_vocab_kind kind;
	int32_t n_tokens;

	char *text;       /* every token's text, back to back */
	size_t *text_off; /* token i is text[text_off[i] .. text_off[i + 1]) */
	size_t max_token_len;
	float *scores;
	uint8_t *types;   /* enum loom_token_type */
	uint8_t *flags;   /* enum loom_token_flag */

	/* text -> id, open addressing with linear probing; -1 marks a free
	 * slot. n_slots is a power of two. */
	int32_t *slots;
	size_t n_slots;

	/* Every "▁" in a token is part of its leading run of "▁": SPM may merge
	 * word by word (see tokenizer_spm.c). */
	bool spm_word_merges;

	loom_token bos, eos, unk, sep; /* -1 if none */
	bool add_bos, add_eos, add_sep, add_space_prefix;

	struct loom_bpe *bpe; /* LOOM_VOCAB_BPE only */

	/* The token each byte falls back to when a piece of text is no token:
	 * "<0xXX>", else the byte itself as a token, else unk; -1 if none. */
	loom_token byte_token[256];

	/* Control, user-defined and unknown tokens, longest text first: the
	 * order in which the input is searched for them. */
	loom_token *specials;
	size_t n_specials;
};

static inline const char *loom_vocab_text(const loom_vocab *v, loom_token id, size_t *len)
{
	*len = v->text_off[id + 1] - v->text_off[id];
	return v->text + v->text_off[id];
}

/* FNV-1a over len bytes: token texts and merge pairs are short, and this
 * mixes well enough for them. */
static inline uint64_t loom_text_hash(const char *text, size_t len)
{
	uint64_t h = 0xcbf29ce484222325u;
	for (size_t i = 0; i < len; i++) {
		h ^= (unsigned char)text[i];
		h *= 0x100000001b3u;
	}
	return h;
}

/* The id of the token whose text is exactly text[0 .. len), or -1. */
loom_token loom_vocab_find(const loom_vocab *v, const char *text, size_t len);

/* A growing list of tokens (the tokenizers' output). */
typedef struct loom_token_vec {
	loom_token *data;
	size_t n, cap;
} loom_token_vec;

loom_status loom_token_vec_push(loom_token_vec *vec, loom_token token);

/* A piece of the input after special tokens were split out: either raw text
 * text[off .. off + len) (token == -1) or one special token. */
typedef struct loom_fragment {
	size_t off, len;
	loom_token token;
} loom_fragment;

/* Whether every "▁" of every token of v lies in the token's leading run of
 * "▁", which lets SPM merge word by word (tokenizer_spm.c). */
bool loom_spm_word_merges(const loom_vocab *v);

/* SentencePiece-style tokenization of the fragments of text, appending to
 * out (tokenizer_spm.c). */
loom_status loom_spm_tokenize(const loom_vocab *v, const char *text, const loom_fragment *frags,
			      size_t n_frags, bool add_special, loom_token_vec *out);

/* Reads byte-level BPE's merges and pre-tokenizer (tokenizer.ggml.merges,
 * tokenizer.ggml.pre) from file (tokenizer_bpe.c). */
loom_status loom_bpe_load(const loom_model_file *file, struct loom_bpe **out);
void loom_bpe_free(struct loom_bpe *bpe);
/* The pre-tokenizer's enum loom_pretok_flag. */
unsigned loom_bpe_pretok_flags(const struct loom_bpe *bpe);

/* Byte-level BPE of the fragments of text, appending to out. */
loom_status loom_bpe_tokenize(const loom_vocab *v, const char *text, const loom_fragment *frags,
			      size_t n_frags, bool add_special, loom_token_vec *out);

/* The bytes a byte-level BPE token's text[0 .. len) stands for, with
 * loom_vocab_token_to_piece's contract for buf, size and n_out. */
loom_status loom_bpe_piece(const char *text, size_t len, char *buf, size_t size, size_t *n_out);

/* WordPiece of the fragments of text, appending to out (tokenizer_wpm.c). */
loom_status loom_wpm_tokenize(const loom_vocab *v, const char *text, const loom_fragment *frags,
			      size_t n_frags, bool add_special, loom_token_vec *out);

#endif
