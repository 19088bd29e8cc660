/* vocab.h - a model's vocabulary and its tokenizer. */
#ifndef LOOM_VOCAB_H
#define LOOM_VOCAB_H

#include "loom/plugin_api.h"

typedef struct loom_vocab loom_vocab;

/* What a family's contract adds to a vocabulary that its files do not
 * record (arch/NAME.yaml's tokenizer section). */
typedef struct loom_vocab_rules {
	/* Every special token eats the whitespace after it when the text is
	 * split at special tokens (Hugging Face's rstrip on added tokens,
	 * which GGUF does not keep), except those whose text is listed in
	 * rstrip_except (NULL-terminated, or NULL). */
	bool rstrip_special;
	char **rstrip_except;
} loom_vocab_rules;

/* Builds the vocabulary from the tokenizer.ggml.* metadata of file
 * (tokenizer.ggml.model selects the algorithm), with a contract's rules
 * (NULL: none). The vocab copies what it needs: file may be closed
 * afterwards. UNSUPPORTED for an unknown model or pre-tokenizer
 * (tokenizer.ggml.pre). */
loom_status loom_vocab_load(const loom_model_file *file, const loom_vocab_rules *rules, loom_vocab **out);
void loom_vocab_free(loom_vocab *vocab);

int32_t loom_vocab_n_tokens(const loom_vocab *vocab);
loom_token loom_vocab_bos(const loom_vocab *vocab); /* -1 if none */
loom_token loom_vocab_eos(const loom_vocab *vocab); /* -1 if none */
bool loom_vocab_is_eog(const loom_vocab *vocab, loom_token token);
/* Whether tokenize(add_special=true) adds BOS / EOS. */
bool loom_vocab_adds_bos(const loom_vocab *vocab);
bool loom_vocab_adds_eos(const loom_vocab *vocab);

/* Same contract as loom_tokenize() in loom.h. */
loom_status loom_vocab_tokenize(const loom_vocab *vocab, const char *text, size_t len,
				bool add_special, bool parse_special,
				loom_token *out, size_t capacity, size_t *n_out);

/* Same contract as loom_token_to_piece() in loom.h. */
loom_status loom_vocab_token_to_piece(const loom_vocab *vocab, loom_token token, bool special,
				      char *buf, size_t size, size_t *n_out);

#endif
