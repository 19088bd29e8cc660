/* fuzz_tokenizer.c - tokenizing and detokenizing arbitrary input with real
 * vocabularies of each algorithm: SentencePiece (llama), byte-level BPE
 * (GPT-2) and WordPiece (BERT), loaded once from the shared reference data.
 *
 * The first byte picks the vocabulary and the flags; the rest is the text
 * to tokenize, and also, read as 32-bit token ids, what is turned back into
 * text (ids out of range included). */
#include "fuzz_support.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const vocab_files[] = {
	"golden/tokenizer/ggml-vocab-llama-spm.gguf",
	"golden/tokenizer/ggml-vocab-gpt-2.gguf",
	"golden/tokenizer/ggml-vocab-bert-bge.gguf",
};
#define N_VOCABS (sizeof(vocab_files) / sizeof(vocab_files[0]))

static loom_model *vocabs[N_VOCABS];

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	loom_runtime *rt = fuzz_runtime();
	loom_model_params mp = loom_model_default_params();
	mp.vocab_only = true;
	for (size_t i = 0; i < N_VOCABS; i++) {
		const char *path = fuzz_data_path(vocab_files[i]);
		if (loom_model_load(rt, path, &mp, &vocabs[i]) != LOOM_OK) {
			fprintf(stderr, "fuzz: %s: %s\n", path, loom_last_error());
			abort();
		}
	}
	return 0;
}

/* Streams tokens through a detokenizer with stop strings, as a server
 * would (the third is SentencePiece's word marker). */
static void detokenize(const loom_model *model, const loom_token *tokens, size_t n)
{
	static const char *const stop[] = {"\n\n", "the", "\xe2\x96\x81"};
	loom_detokenizer *d;
	const char *text;
	size_t len;
	if (loom_detokenizer_create(model, stop, sizeof(stop) / sizeof(stop[0]), &d) != LOOM_OK)
		abort();
	for (size_t i = 0; i < n; i++) {
		bool stopped = false;
		if (loom_detokenizer_push(d, tokens[i], i + 1 == n, &text, &len, &stopped) != LOOM_OK || stopped)
			break;
	}
	loom_detokenizer_finish(d, &text, &len);
	loom_detokenizer_free(d);
}

/* Each token's piece into a buffer too small for most, then one that
 * fits. */
static void pieces(const loom_model *model, const loom_token *tokens, size_t n, bool special)
{
	char small[2], buf[256];
	size_t need;
	for (size_t i = 0; i < n; i++) {
		if (loom_token_to_piece(model, tokens[i], special, small, sizeof(small), &need) ==
			    LOOM_ERR_BUFFER_TOO_SMALL &&
		    need <= sizeof(buf))
			loom_token_to_piece(model, tokens[i], special, buf, sizeof(buf), &need);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size == 0)
		return 0;
	const loom_model *model = vocabs[data[0] % N_VOCABS];
	bool add_special = data[0] & 0x10, parse_special = data[0] & 0x20, render_special = data[0] & 0x40;
	const char *text = (const char *)data + 1;
	size_t len = size - 1;

	size_t n = 0;
	loom_token *tokens = NULL;
	loom_status st = loom_tokenize(model, text, len, add_special, parse_special, NULL, 0, &n);
	if (st == LOOM_ERR_BUFFER_TOO_SMALL) {
		tokens = malloc(n * sizeof(*tokens));
		if (tokens == NULL || loom_tokenize(model, text, len, add_special, parse_special, tokens, n, &n) != LOOM_OK)
			abort();
	} else if (st != LOOM_OK) {
		n = 0;
	}
	detokenize(model, tokens, n);
	pieces(model, tokens, n, render_special);
	free(tokens);

	size_t n_ids = len / sizeof(loom_token);
	if (n_ids == 0)
		return 0;
	loom_token *ids = malloc(n_ids * sizeof(*ids));
	if (ids == NULL)
		abort();
	memcpy(ids, text, n_ids * sizeof(*ids));
	pieces(model, ids, n_ids, render_special);
	detokenize(model, ids, n_ids);
	free(ids);
	return 0;
}
