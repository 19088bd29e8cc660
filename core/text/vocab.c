/*
 * vocab.c - a model's vocabulary: the tokenizer.ggml.* metadata, special
 * tokens, and the steps of tokenizing that do not depend on the algorithm.
 *
 * Loading follows llama.cpp (llama_vocab::load, commit c392e5094) so that a
 * file gives the same token ids, the same special tokens and the same
 * end-of-generation set as there. Where llama.cpp only warns about a broken
 * file and carries on, loom stops with an error naming the key.
 *
 * The vocabulary is immutable once loaded, so tokenizing from several
 * threads at once is safe.
 */
#include "model/meta.h"
#include "runtime/array_grow.h"
#include "runtime/error.h"
#include "text/pretokenizer.h"
#include "text/vocab_internal.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define KEY_MODEL "tokenizer.ggml.model"
#define KEY_TOKENS "tokenizer.ggml.tokens"
#define KEY_SCORES "tokenizer.ggml.scores"
#define KEY_TYPES "tokenizer.ggml.token_type"
#define KEY_ADD_BOS "tokenizer.ggml.add_bos_token"
#define KEY_ADD_EOS "tokenizer.ggml.add_eos_token"
#define KEY_ADD_SEP "tokenizer.ggml.add_sep_token"
#define KEY_ADD_SPACE_PREFIX "tokenizer.ggml.add_space_prefix"
#define KEY_EOG_IDS "tokenizer.loom.eog_token_ids"

/* ------------------------------------------------------------------------ */
/* Text -> id                                                               */

static bool text_is(const loom_vocab *v, loom_token id, const char *text, size_t len)
{
	size_t n;
	const char *t = loom_vocab_text(v, id, &n);
	return n == len && memcmp(t, text, len) == 0;
}

loom_token loom_vocab_find(const loom_vocab *v, const char *text, size_t len)
{
	size_t mask = v->n_slots - 1;
	for (size_t i = loom_text_hash(text, len) & mask;; i = (i + 1) & mask) {
		loom_token id = v->slots[i];
		if (id < 0 || text_is(v, id, text, len))
			return id;
	}
}

static loom_token find_cstr(const loom_vocab *v, const char *text)
{
	return loom_vocab_find(v, text, strlen(text));
}

/* Indexes every token; for a text that occurs twice the later id wins, as in
 * llama.cpp. The table is at most half full, so probes stay short and always
 * end at a free slot. */
static loom_status build_index(loom_vocab *v)
{
	size_t n = 16;
	while (n < 2 * (size_t)v->n_tokens)
		n *= 2;
	v->slots = malloc(n * sizeof(*v->slots));
	if (v->slots == NULL)
		return loom_error(LOOM_ERR_NO_MEMORY, "out of memory for the token index");
	memset(v->slots, 0xff, n * sizeof(*v->slots));
	v->n_slots = n;
	for (loom_token id = 0; id < v->n_tokens; id++) {
		size_t len;
		const char *t = loom_vocab_text(v, id, &len);
		size_t i = loom_text_hash(t, len) & (n - 1);
		while (v->slots[i] >= 0 && !text_is(v, v->slots[i], t, len))
			i = (i + 1) & (n - 1);
		v->slots[i] = id;
		if (len > v->max_token_len)
			v->max_token_len = len;
	}
	return LOOM_OK;
}

/* ------------------------------------------------------------------------ */
/* Tokens, scores and types                                                 */

/* llama.cpp renames an empty token "[EMPTY_<id>]" (an empty text could never
 * be matched or printed); do the same so ids and pieces agree. */
#define EMPTY_NAME_MAX 24

static size_t token_len(const loom_string *w, int32_t i)
{
	char tmp[EMPTY_NAME_MAX];
	if (w->len > 0)
		return w->len;
	return (size_t)snprintf(tmp, sizeof(tmp), "[EMPTY_%" PRId32 "]", i);
}

static loom_status copy_texts(loom_vocab *v, const loom_string *words)
{
	size_t total = 0;
	for (int32_t i = 0; i < v->n_tokens; i++) {
		if (words[i].len > SIZE_MAX - total - EMPTY_NAME_MAX)
			return loom_error(LOOM_ERR_BAD_FORMAT, "'%s' is too large", KEY_TOKENS);
		total += token_len(&words[i], i);
	}
	v->text = malloc(total + 1);
	v->text_off = malloc(((size_t)v->n_tokens + 1) * sizeof(*v->text_off));
	if (v->text == NULL || v->text_off == NULL)
		return loom_error(LOOM_ERR_NO_MEMORY, "out of memory for %d tokens", v->n_tokens);
	size_t off = 0;
	for (int32_t i = 0; i < v->n_tokens; i++) {
		v->text_off[i] = off;
		if (words[i].len > 0)
			memcpy(v->text + off, words[i].data, words[i].len);
		else
			snprintf(v->text + off, EMPTY_NAME_MAX, "[EMPTY_%" PRId32 "]", i);
		off += token_len(&words[i], i);
	}
	v->text_off[v->n_tokens] = off;
	return LOOM_OK;
}

/* An optional per-token array: absent means every token gets the default. */
static loom_status optional_array(const loom_model_file *file, const char *key,
				  loom_meta_type type, int32_t n_tokens, const void **data)
{
	uint64_t count;
	*data = NULL;
	if (loom_meta_find(file, key) == NULL)
		return LOOM_OK;
	loom_status st = loom_meta_get_array(file, key, type, data, &count);
	if (st != LOOM_OK)
		return st;
	if (count != (uint64_t)n_tokens)
		return loom_error(LOOM_ERR_BAD_FORMAT, "'%s' has %" PRIu64 " entries for %d tokens", key,
				  count, n_tokens);
	return LOOM_OK;
}

static loom_status load_scores(loom_vocab *v, const loom_model_file *file)
{
	const void *scores;
	loom_status st = optional_array(file, KEY_SCORES, LOOM_META_F32, v->n_tokens, &scores);
	if (st != LOOM_OK)
		return st;
	v->scores = calloc((size_t)v->n_tokens, sizeof(*v->scores));
	if (v->scores == NULL)
		return loom_error(LOOM_ERR_NO_MEMORY, "out of memory for %d scores", v->n_tokens);
	if (scores != NULL)
		memcpy(v->scores, scores, (size_t)v->n_tokens * sizeof(*v->scores));
	return LOOM_OK;
}

static bool is_hex(char c)
{
	return (c >= '0' && c <= '9') || (c >= 'A' && c <= 'F') || (c >= 'a' && c <= 'f');
}

/* A byte token stands for the byte its text "<0xXX>" names. */
static bool is_byte_text(const char *t, size_t len)
{
	return len == 6 && memcmp(t, "<0x", 3) == 0 && is_hex(t[3]) && is_hex(t[4]) && t[5] == '>';
}

static loom_status load_types(loom_vocab *v, const loom_model_file *file)
{
	const void *data;
	loom_status st = optional_array(file, KEY_TYPES, LOOM_META_I32, v->n_tokens, &data);
	if (st != LOOM_OK)
		return st;
	const int32_t *types = data;
	v->types = malloc((size_t)v->n_tokens);
	v->flags = calloc((size_t)v->n_tokens, 1);
	if (v->types == NULL || v->flags == NULL)
		return loom_error(LOOM_ERR_NO_MEMORY, "out of memory for %d token types", v->n_tokens);
	for (int32_t i = 0; i < v->n_tokens; i++) {
		int32_t t = types != NULL ? types[i] : LOOM_TOKEN_NORMAL;
		size_t len;
		const char *text = loom_vocab_text(v, i, &len);
		if (t < 0 || t >= LOOM_TOKEN_TYPE_COUNT)
			return loom_error(LOOM_ERR_BAD_FORMAT, "'%s': token %d has unknown type %d",
					  KEY_TYPES, i, t);
		if (t == LOOM_TOKEN_BYTE && !is_byte_text(text, len))
			return loom_error(LOOM_ERR_BAD_FORMAT,
					  "'%s': token %d is a byte token but its text '%.*s' is not <0xXX>",
					  KEY_TYPES, i, (int)len, text);
		v->types[i] = (uint8_t)t;
	}
	return LOOM_OK;
}

static loom_status load_tokens(loom_vocab *v, const loom_model_file *file)
{
	const void *data;
	uint64_t n;
	loom_status st = loom_meta_get_array(file, KEY_TOKENS, LOOM_META_STRING, &data, &n);
	if (st != LOOM_OK)
		return st;
	if (n == 0 || n > INT32_MAX)
		return loom_error(LOOM_ERR_BAD_FORMAT, "'%s' has %" PRIu64 " tokens", KEY_TOKENS, n);
	v->n_tokens = (int32_t)n;
	st = copy_texts(v, data);
	if (st == LOOM_OK)
		st = load_scores(v, file);
	if (st == LOOM_OK)
		st = load_types(v, file);
	return st;
}

/* ------------------------------------------------------------------------ */
/* Special tokens                                                           */

enum special_role {
	ROLE_BOS,
	ROLE_EOS,
	ROLE_EOT,
	ROLE_EOM,
	ROLE_UNK,
	ROLE_SEP,
	ROLE_PAD,
	ROLE_MASK,
	ROLE_FIM_PRE,
	ROLE_FIM_SUF,
	ROLE_FIM_MID,
	ROLE_FIM_PAD,
	ROLE_FIM_REP,
	ROLE_FIM_SEP,
	ROLE_COUNT
};

/* Read in this order, so where a file has both, the older FIM key wins (as
 * in llama.cpp). "seperator" is the key's actual spelling. */
static const struct {
	const char *key;
	enum special_role role;
} role_keys[] = {
	{"tokenizer.ggml.bos_token_id", ROLE_BOS},
	{"tokenizer.ggml.eos_token_id", ROLE_EOS},
	{"tokenizer.ggml.eot_token_id", ROLE_EOT},
	{"tokenizer.ggml.eom_token_id", ROLE_EOM},
	{"tokenizer.ggml.unknown_token_id", ROLE_UNK},
	{"tokenizer.ggml.seperator_token_id", ROLE_SEP},
	{"tokenizer.ggml.padding_token_id", ROLE_PAD},
	{"tokenizer.ggml.mask_token_id", ROLE_MASK},
	{"tokenizer.ggml.fim_pre_token_id", ROLE_FIM_PRE},
	{"tokenizer.ggml.fim_suf_token_id", ROLE_FIM_SUF},
	{"tokenizer.ggml.fim_mid_token_id", ROLE_FIM_MID},
	{"tokenizer.ggml.fim_pad_token_id", ROLE_FIM_PAD},
	{"tokenizer.ggml.fim_rep_token_id", ROLE_FIM_REP},
	{"tokenizer.ggml.fim_sep_token_id", ROLE_FIM_SEP},
	{"tokenizer.ggml.prefix_token_id", ROLE_FIM_PRE},
	{"tokenizer.ggml.suffix_token_id", ROLE_FIM_SUF},
	{"tokenizer.ggml.middle_token_id", ROLE_FIM_MID},
};

/* Many converters name some special tokens only by their text; llama.cpp
 * finds them so, and so does loom. The DeepSeek spellings use U+FF5C "｜"
 * and U+2581 "▁". */
#define FW_BAR "\xef\xbd\x9c"
#define SP LOOM_SPM_SPACE
static const char *const *const role_texts[ROLE_COUNT] = {
	[ROLE_EOT] = (const char *const[]){"<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>",
					   "<|endoftext|>", "<EOT>",
					   "<" FW_BAR "end" SP "of" SP "sentence" FW_BAR ">", NULL},
	[ROLE_EOM] = (const char *const[]){"<|eom_id|>", NULL},
	[ROLE_FIM_PRE] = (const char *const[]){"<|fim_prefix|>", "<fim-prefix>",
					       "<" FW_BAR "fim" SP "begin" FW_BAR ">", "<PRE>", NULL},
	[ROLE_FIM_SUF] = (const char *const[]){"<|fim_suffix|>", "<fim-suffix>",
					       "<" FW_BAR "fim" SP "hole" FW_BAR ">", "<SUF>", NULL},
	[ROLE_FIM_MID] = (const char *const[]){"<|fim_middle|>", "<fim-middle>",
					       "<" FW_BAR "fim" SP "end" FW_BAR ">", "<MID>", NULL},
	[ROLE_FIM_PAD] = (const char *const[]){"<|fim_pad|>", "<fim-pad>", "<PAD>", NULL},
	[ROLE_FIM_REP] = (const char *const[]){"<|fim_repo|>", "<|repo_name|>", "<fim-repo>",
					       "<REPO>", NULL},
	[ROLE_FIM_SEP] = (const char *const[]){"<|file_sep|>", NULL},
};
#undef FW_BAR
#undef SP

/* Tokens that end generation because of their text. */
static const char *const eog_texts[] = {
	"<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>", "<|eom_id|>", "<EOT>",
	"<|return|>", "<|call|>",
};

/* Roles whose token also ends generation. */
static const enum special_role eog_roles[] = {
	ROLE_EOS, ROLE_EOT, ROLE_EOM, ROLE_FIM_PAD, ROLE_FIM_REP, ROLE_FIM_SEP,
};

/* Reads the role ids from the metadata over the defaults in ids. Converters
 * write 0xFFFFFFFF (-1 as int32) for "no such token"; like llama.cpp, that
 * leaves the default. */
static loom_status read_role_ids(const loom_vocab *v, const loom_model_file *file,
				 loom_token ids[ROLE_COUNT])
{
	for (size_t i = 0; i < sizeof(role_keys) / sizeof(role_keys[0]); i++) {
		int64_t id;
		if (loom_meta_find(file, role_keys[i].key) == NULL)
			continue;
		loom_status st = loom_meta_get_int(file, role_keys[i].key, &id);
		if (st != LOOM_OK)
			return st;
		if (id == -1 || id == UINT32_MAX)
			continue;
		if (id < 0 || id >= v->n_tokens)
			return loom_error(LOOM_ERR_BAD_FORMAT,
					  "'%s' = %" PRId64 " is out of range (%d tokens)",
					  role_keys[i].key, id, v->n_tokens);
		ids[role_keys[i].role] = (loom_token)id;
	}
	return LOOM_OK;
}

/* A token found by its text is special whatever its type says. */
static void make_control(loom_vocab *v, loom_token id)
{
	v->types[id] = LOOM_TOKEN_CONTROL;
}

/* Fills the roles the metadata left open from the texts that name them.
 * Where several candidates exist the lowest id wins (llama.cpp takes
 * whichever its hash map yields first). */
static void find_roles_by_text(loom_vocab *v, loom_token ids[ROLE_COUNT])
{
	for (int r = 0; r < ROLE_COUNT; r++) {
		if (ids[r] >= 0 || role_texts[r] == NULL)
			continue;
		for (const char *const *t = role_texts[r]; *t != NULL; t++) {
			loom_token id = find_cstr(v, *t);
			if (id >= 0 && (ids[r] < 0 || id < ids[r]))
				ids[r] = id;
		}
		if (ids[r] >= 0)
			make_control(v, ids[r]);
	}
}

static void mark_eog(loom_vocab *v, const loom_token ids[ROLE_COUNT])
{
	for (size_t i = 0; i < sizeof(eog_texts) / sizeof(eog_texts[0]); i++) {
		loom_token id = find_cstr(v, eog_texts[i]);
		if (id >= 0) {
			v->flags[id] |= LOOM_TOKEN_EOG;
			make_control(v, id);
		}
	}
	for (size_t i = 0; i < sizeof(eog_roles) / sizeof(eog_roles[0]); i++)
		if (ids[eog_roles[i]] >= 0)
			v->flags[ids[eog_roles[i]]] |= LOOM_TOKEN_EOG;
}

/* In the harmony format (gpt-oss) <|end|> closes each message of a reply
 * (its analysis, then its final answer): the reply ends at <|return|>, or
 * at <|call|> for a tool. As llama.cpp, a vocabulary with either keeps
 * <|end|> from ending generation. */
static void unmark_harmony_end(loom_vocab *v)
{
	loom_token end = find_cstr(v, "<|end|>");
	if (end >= 0 && (find_cstr(v, "<|return|>") >= 0 || find_cstr(v, "<|call|>") >= 0))
		v->flags[end] &= (uint8_t)~LOOM_TOKEN_EOG;
}

/* Further end-of-generation tokens a file lists (Hugging Face's
 * generation_config.json gives several: Llama 3's <|eot_id|> and
 * <|eom_id|> besides EOS). */
static loom_status mark_listed_eog(loom_vocab *v, const loom_model_file *file)
{
	const loom_meta_value *list = loom_meta_find(file, KEY_EOG_IDS);
	if (list == NULL)
		return LOOM_OK;
	if (list->type != LOOM_META_ARRAY || (list->elem_type != LOOM_META_I32 && list->elem_type != LOOM_META_I64))
		return loom_error(LOOM_ERR_BAD_FORMAT, "'%s' is not an array of integers", KEY_EOG_IDS);
	for (uint64_t i = 0; i < list->count; i++) {
		int64_t id = list->elem_type == LOOM_META_I32 ? ((const int32_t *)list->v.array)[i]
							       : ((const int64_t *)list->v.array)[i];
		if (id < 0 || id >= v->n_tokens)
			return loom_error(LOOM_ERR_BAD_FORMAT, "'%s' lists token %" PRId64 " of %d", KEY_EOG_IDS, id,
					  v->n_tokens);
		v->flags[id] |= LOOM_TOKEN_EOG;
	}
	return LOOM_OK;
}

/* A bool key that may be absent. */
static loom_status optional_bool(const loom_model_file *file, const char *key, bool *value)
{
	if (loom_meta_find(file, key) == NULL)
		return LOOM_OK;
	return loom_meta_get_bool(file, key, value);
}

/* The special tokens and flags llama.cpp assumes for each algorithm where
 * the file does not say. */
static void kind_defaults(loom_vocab *v, loom_token ids[ROLE_COUNT])
{
	unsigned pre;
	for (int r = 0; r < ROLE_COUNT; r++)
		ids[r] = -1;
	v->add_eos = false;
	v->add_sep = false;
	v->add_space_prefix = false;
	switch (v->kind) {
	case LOOM_VOCAB_SPM:
		/* SentencePiece's fixed order: <unk> <s> </s>. */
		ids[ROLE_UNK] = 0;
		ids[ROLE_BOS] = 1;
		ids[ROLE_EOS] = 2;
		v->add_bos = true;
		v->add_space_prefix = true;
		break;
	case LOOM_VOCAB_BPE:
		/* Falcon's <|endoftext|>, where GGUF BPE support began. */
		pre = loom_bpe_pretok_flags(v->bpe);
		ids[ROLE_BOS] = (pre & LOOM_PRETOK_NO_BOS) ? -1 : 11;
		ids[ROLE_EOS] = 11;
		v->add_bos = pre & LOOM_PRETOK_ADD_BOS;
		break;
	case LOOM_VOCAB_WPM:
		/* BERT's [PAD] ... [MASK] at 0 and 100-103. */
		ids[ROLE_PAD] = 0;
		ids[ROLE_UNK] = 100;
		ids[ROLE_BOS] = 101;
		ids[ROLE_SEP] = 102;
		ids[ROLE_MASK] = 103;
		v->add_bos = true;
		v->add_sep = true;
		break;
	}
	for (int r = 0; r < ROLE_COUNT; r++)
		if (ids[r] >= v->n_tokens)
			ids[r] = -1;
}

static loom_status load_specials(loom_vocab *v, const loom_model_file *file)
{
	loom_token ids[ROLE_COUNT];
	kind_defaults(v, ids);
	loom_status st = read_role_ids(v, file, ids);
	if (st == LOOM_OK)
		st = optional_bool(file, KEY_ADD_BOS, &v->add_bos);
	if (st == LOOM_OK)
		st = optional_bool(file, KEY_ADD_EOS, &v->add_eos);
	if (st == LOOM_OK)
		st = optional_bool(file, KEY_ADD_SEP, &v->add_sep);
	if (st == LOOM_OK)
		st = optional_bool(file, KEY_ADD_SPACE_PREFIX, &v->add_space_prefix);
	if (st != LOOM_OK)
		return st;
	find_roles_by_text(v, ids);
	mark_eog(v, ids);
	if ((st = mark_listed_eog(v, file)) != LOOM_OK)
		return st;
	unmark_harmony_end(v);
	v->bos = ids[ROLE_BOS];
	v->eos = ids[ROLE_EOS];
	v->unk = ids[ROLE_UNK];
	v->sep = ids[ROLE_SEP];
	if (v->add_bos && v->bos < 0)
		return loom_error(LOOM_ERR_BAD_FORMAT, "'%s' is set but there is no BOS token",
				  KEY_ADD_BOS);
	if (v->add_eos && v->eos < 0)
		return loom_error(LOOM_ERR_BAD_FORMAT, "'%s' is set but there is no EOS token",
				  KEY_ADD_EOS);
	if (v->kind == LOOM_VOCAB_WPM && v->add_sep && v->sep < 0)
		return loom_error(LOOM_ERR_BAD_FORMAT, "'%s' is set but there is no separator token",
				  KEY_ADD_SEP);
	return LOOM_OK;
}

static bool is_special_type(uint8_t type)
{
	return type == LOOM_TOKEN_CONTROL || type == LOOM_TOKEN_USER_DEFINED ||
	       type == LOOM_TOKEN_UNKNOWN;
}

struct special_key {
	size_t len;
	loom_token id;
};

/* Longest first, so that a token is found before any shorter one inside it;
 * equal lengths by id, to be deterministic. */
static int special_key_cmp(const void *pa, const void *pb)
{
	const struct special_key *a = pa, *b = pb;
	if (a->len != b->len)
		return a->len > b->len ? -1 : 1;
	return (a->id > b->id) - (a->id < b->id);
}

static loom_status sort_specials(loom_vocab *v)
{
	size_t n = 0;
	for (loom_token id = 0; id < v->n_tokens; id++)
		n += is_special_type(v->types[id]);
	if (n == 0)
		return LOOM_OK;
	struct special_key *keys = malloc(n * sizeof(*keys));
	v->specials = malloc(n * sizeof(*v->specials));
	if (keys == NULL || v->specials == NULL) {
		free(keys);
		return loom_error(LOOM_ERR_NO_MEMORY, "out of memory for %zu special tokens", n);
	}
	n = 0;
	for (loom_token id = 0; id < v->n_tokens; id++)
		if (is_special_type(v->types[id]))
			keys[n++] = (struct special_key){.len = v->text_off[id + 1] - v->text_off[id],
							 .id = id};
	qsort(keys, n, sizeof(*keys), special_key_cmp);
	for (size_t i = 0; i < n; i++)
		v->specials[i] = keys[i].id;
	v->n_specials = n;
	free(keys);
	return LOOM_OK;
}

/* The contract's rules: special tokens that eat the whitespace after them
 * (Phi-3's tokenizer.json marks them rstrip; GGUF does not record it). */
static void apply_rules(loom_vocab *v, const loom_vocab_rules *rules)
{
	if (rules == NULL || !rules->rstrip_special)
		return;
	for (size_t i = 0; i < v->n_specials; i++)
		v->flags[v->specials[i]] |= LOOM_TOKEN_RSTRIP;
	for (char **text = rules->rstrip_except; text != NULL && *text != NULL; text++) {
		loom_token id = find_cstr(v, *text);
		if (id >= 0)
			v->flags[id] &= (uint8_t)~LOOM_TOKEN_RSTRIP;
	}
}

/* Jina's v2 embedding models declare "<mask>" lstrip, which GGUF does not
 * record either; llama.cpp restores it by the pre-tokenizer's name. */
static void apply_mask_lstrip(loom_vocab *v)
{
	if (v->kind != LOOM_VOCAB_BPE || !(loom_bpe_pretok_flags(v->bpe) & LOOM_PRETOK_LSTRIP_MASK))
		return;
	loom_token mask = find_cstr(v, "<mask>");
	if (mask >= 0)
		v->flags[mask] |= LOOM_TOKEN_LSTRIP;
}

static void find_byte_tokens(loom_vocab *v)
{
	for (int b = 0; b < 256; b++) {
		char hex[8], raw = (char)b;
		snprintf(hex, sizeof(hex), "<0x%02X>", b);
		loom_token id = find_cstr(v, hex);
		if (id < 0)
			id = loom_vocab_find(v, &raw, 1);
		v->byte_token[b] = id >= 0 ? id : v->unk;
	}
}

/* ------------------------------------------------------------------------ */
/* Loading                                                                  */

static loom_status read_kind(const loom_model_file *file, enum loom_vocab_kind *kind)
{
	loom_string model;
	loom_status st = loom_meta_get_string(file, KEY_MODEL, &model);
	if (st != LOOM_OK)
		return st;
	static const struct {
		const char *name;
		enum loom_vocab_kind kind;
	} kinds[] = {
		{"llama", LOOM_VOCAB_SPM},
		{"gpt2", LOOM_VOCAB_BPE},
		{"bert", LOOM_VOCAB_WPM},
	};
	for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++) {
		if (loom_string_eq(model, kinds[i].name)) {
			*kind = kinds[i].kind;
			return LOOM_OK;
		}
	}
	return loom_error(LOOM_ERR_UNSUPPORTED,
			  "tokenizer model '%.*s' is not supported ('llama', 'gpt2' or 'bert')",
			  (int)(model.len > 64 ? 64 : model.len), model.data);
}

loom_status loom_vocab_load(const loom_model_file *file, const loom_vocab_rules *rules, loom_vocab **out)
{
	if (out == NULL || file == NULL)
		return loom_error(LOOM_ERR_INVALID_ARGUMENT, "loom_vocab_load: NULL argument");
	*out = NULL;
	loom_vocab *v = calloc(1, sizeof(*v));
	if (v == NULL)
		return loom_error(LOOM_ERR_NO_MEMORY, "out of memory for the vocabulary");
	loom_status st = read_kind(file, &v->kind);
	if (st == LOOM_OK)
		st = load_tokens(v, file);
	if (st == LOOM_OK)
		st = build_index(v);
	if (st == LOOM_OK && v->kind == LOOM_VOCAB_BPE)
		st = loom_bpe_load(file, &v->bpe);
	if (st == LOOM_OK)
		st = load_specials(v, file);
	if (st == LOOM_OK)
		st = sort_specials(v);
	if (st != LOOM_OK) {
		loom_vocab_free(v);
		return st;
	}
	apply_rules(v, rules);
	apply_mask_lstrip(v);
	find_byte_tokens(v);
	v->spm_word_merges = v->kind == LOOM_VOCAB_SPM && loom_spm_word_merges(v);
	*out = v;
	return LOOM_OK;
}

void loom_vocab_free(loom_vocab *v)
{
	if (v == NULL)
		return;
	loom_bpe_free(v->bpe);
	free(v->specials);
	free(v->slots);
	free(v->flags);
	free(v->types);
	free(v->scores);
	free(v->text_off);
	free(v->text);
	free(v);
}

int32_t loom_vocab_n_tokens(const loom_vocab *v)
{
	return v->n_tokens;
}

loom_token loom_vocab_bos(const loom_vocab *v)
{
	return v->bos;
}

loom_token loom_vocab_eos(const loom_vocab *v)
{
	return v->eos;
}

bool loom_vocab_is_eog(const loom_vocab *v, loom_token token)
{
	return token >= 0 && token < v->n_tokens && (v->flags[token] & LOOM_TOKEN_EOG);
}

bool loom_vocab_adds_bos(const loom_vocab *v)
{
	return v->add_bos;
}

bool loom_vocab_adds_eos(const loom_vocab *v)
{
	return v->add_eos;
}

/* ------------------------------------------------------------------------ */
/* Tokenizing                                                               */

loom_status loom_token_vec_push(loom_token_vec *vec, loom_token token)
{
	loom_token *p = loom_array_grow(vec->data, &vec->cap, vec->n + 1, sizeof(*p));
	if (p == NULL)
		return loom_error(LOOM_ERR_NO_MEMORY, "tokenize: out of memory");
	vec->data = p;
	vec->data[vec->n++] = token;
	return LOOM_OK;
}

struct frag_list {
	loom_fragment *data;
	size_t n, cap;
};

static loom_status frag_push(struct frag_list *l, size_t off, size_t len, loom_token token)
{
	loom_fragment *p = loom_array_grow(l->data, &l->cap, l->n + 1, sizeof(*p));
	if (p == NULL)
		return loom_error(LOOM_ERR_NO_MEMORY, "tokenize: out of memory");
	l->data = p;
	l->data[l->n++] = (loom_fragment){.off = off, .len = len, .token = token};
	return LOOM_OK;
}

/* The first occurrence of needle in hay, or NULL. */
static const char *find_bytes(const char *hay, size_t n, const char *needle, size_t m)
{
	if (m == 0 || m > n)
		return NULL;
	const char *end = hay + (n - m);
	for (const char *p = hay; p <= end; p++) {
		p = memchr(p, needle[0], (size_t)(end - p) + 1);
		if (p == NULL)
			return NULL;
		if (memcmp(p, needle, m) == 0)
			return p;
	}
	return NULL;
}

/* The C locale's isspace(), which llama.cpp uses for rstrip. */
static bool is_space(char c)
{
	return c == ' ' || (c >= '\t' && c <= '\r');
}

/* Splits raw fragment f on every occurrence of special token id, appending
 * the pieces to out. */
static loom_status split_fragment(const loom_vocab *v, const char *text, loom_fragment f,
				  loom_token id, struct frag_list *out)
{
	size_t tlen;
	const char *t = loom_vocab_text(v, id, &tlen);
	size_t pos = f.off, end = f.off + f.len;
	loom_status st = LOOM_OK;
	const char *m;

	while (st == LOOM_OK && (m = find_bytes(text + pos, end - pos, t, tlen)) != NULL) {
		size_t at = (size_t)(m - text), left_end = at;
		if (v->flags[id] & LOOM_TOKEN_LSTRIP)
			while (left_end > pos && is_space(text[left_end - 1]))
				left_end--;
		if (left_end > pos)
			st = frag_push(out, pos, left_end - pos, -1);
		if (st == LOOM_OK)
			st = frag_push(out, at, tlen, id);
		pos = at + tlen;
		if (v->flags[id] & LOOM_TOKEN_RSTRIP)
			while (pos < end && is_space(text[pos]))
				pos++;
	}
	if (st == LOOM_OK && pos < end)
		st = frag_push(out, pos, end - pos, -1);
	return st;
}

static void frag_swap(struct frag_list *a, struct frag_list *b)
{
	struct frag_list t = *a;
	*a = *b;
	*b = t;
}

/* Cuts the special tokens out of text, each in turn, longest first.
 * User-defined tokens are always cut out (they are pre-tokenized before
 * everything else, as in Hugging Face tokenizers); control and unknown tokens
 * only when parse_special asks for it, otherwise their text is plain text. */
static loom_status partition(const loom_vocab *v, const char *text, size_t len, bool parse_special,
			     struct frag_list *frags)
{
	struct frag_list next = {0};
	loom_status st = LOOM_OK;

	if (len > 0)
		st = frag_push(frags, 0, len, -1);
	for (size_t s = 0; s < v->n_specials && st == LOOM_OK; s++) {
		loom_token id = v->specials[s];
		if (!parse_special && v->types[id] != LOOM_TOKEN_USER_DEFINED)
			continue;
		next.n = 0;
		for (size_t i = 0; i < frags->n && st == LOOM_OK; i++) {
			if (frags->data[i].token >= 0)
				st = frag_push(&next, frags->data[i].off, frags->data[i].len,
					       frags->data[i].token);
			else
				st = split_fragment(v, text, frags->data[i], id, &next);
		}
		frag_swap(frags, &next);
	}
	free(next.data);
	return st;
}

loom_status loom_vocab_tokenize(const loom_vocab *v, const char *text, size_t len,
				bool add_special, bool parse_special,
				loom_token *out, size_t capacity, size_t *n_out)
{
	if (v == NULL || n_out == NULL || (text == NULL && len > 0) || (out == NULL && capacity > 0))
		return loom_error(LOOM_ERR_INVALID_ARGUMENT, "tokenize: NULL argument");
	*n_out = 0;
	struct frag_list frags = {0};
	loom_token_vec toks = {0};
	loom_status st = partition(v, text, len, parse_special, &frags);
	if (st == LOOM_OK) {
		switch (v->kind) {
		case LOOM_VOCAB_SPM:
			st = loom_spm_tokenize(v, text, frags.data, frags.n, add_special, &toks);
			break;
		case LOOM_VOCAB_BPE:
			st = loom_bpe_tokenize(v, text, frags.data, frags.n, add_special, &toks);
			break;
		case LOOM_VOCAB_WPM:
			st = loom_wpm_tokenize(v, text, frags.data, frags.n, add_special, &toks);
			break;
		}
	}
	if (st == LOOM_OK) {
		*n_out = toks.n;
		if (toks.n > capacity)
			st = loom_error(LOOM_ERR_BUFFER_TOO_SMALL,
					"tokenize: %zu tokens do not fit in a buffer of %zu", toks.n,
					capacity);
		else if (toks.n > 0)
			memcpy(out, toks.data, toks.n * sizeof(*out));
	}
	free(toks.data);
	free(frags.data);
	return st;
}

/* ------------------------------------------------------------------------ */
/* Token to text                                                            */

static loom_status put_piece(const char *piece, size_t n, char *buf, size_t size, size_t *n_out)
{
	*n_out = n;
	if (n > size)
		return loom_error(LOOM_ERR_BUFFER_TOO_SMALL,
				  "token piece: %zu bytes do not fit in a buffer of %zu", n, size);
	if (n > 0)
		memcpy(buf, piece, n);
	return LOOM_OK;
}

/* A normal token's text with each "▁" turned back into a space. */
static bool spm_space_at(const char *t, size_t len, size_t i)
{
	return len - i >= LOOM_SPM_SPACE_LEN && memcmp(t + i, LOOM_SPM_SPACE, LOOM_SPM_SPACE_LEN) == 0;
}

static loom_status put_unescaped(const char *t, size_t len, char *buf, size_t size, size_t *n_out)
{
	size_t n = 0;
	for (size_t i = 0; i < len; n++)
		i += spm_space_at(t, len, i) ? LOOM_SPM_SPACE_LEN : 1;
	*n_out = n;
	if (n > size)
		return loom_error(LOOM_ERR_BUFFER_TOO_SMALL,
				  "token piece: %zu bytes do not fit in a buffer of %zu", n, size);
	for (size_t i = 0, o = 0; i < len; o++) {
		if (spm_space_at(t, len, i)) {
			buf[o] = ' ';
			i += LOOM_SPM_SPACE_LEN;
		} else {
			buf[o] = t[i++];
		}
	}
	return LOOM_OK;
}

static unsigned hex_value(char c)
{
	if (c >= '0' && c <= '9')
		return (unsigned)(c - '0');
	return (unsigned)((c | 0x20) - 'a' + 10);
}

loom_status loom_vocab_token_to_piece(const loom_vocab *v, loom_token token, bool special,
				      char *buf, size_t size, size_t *n_out)
{
	if (v == NULL || n_out == NULL || (buf == NULL && size > 0))
		return loom_error(LOOM_ERR_INVALID_ARGUMENT, "token piece: NULL argument");
	*n_out = 0;
	if (token < 0 || token >= v->n_tokens)
		return loom_error(LOOM_ERR_INVALID_ARGUMENT,
				  "token piece: token %" PRId32 " is out of range (%" PRId32 " tokens)",
				  token, v->n_tokens);
	size_t len;
	const char *t = loom_vocab_text(v, token, &len);
	char byte;

	switch (v->types[token]) {
	case LOOM_TOKEN_CONTROL:
	case LOOM_TOKEN_UNKNOWN:
		/* Markup, shown only on request. */
		return put_piece(t, special ? len : 0, buf, size, n_out);
	case LOOM_TOKEN_USER_DEFINED:
		return put_piece(t, len, buf, size, n_out);
	case LOOM_TOKEN_NORMAL:
		if (v->kind == LOOM_VOCAB_BPE)
			return loom_bpe_piece(t, len, buf, size, n_out);
		return put_unescaped(t, len, buf, size, n_out);
	case LOOM_TOKEN_BYTE:
		byte = (char)(hex_value(t[3]) << 4 | hex_value(t[4]));
		return put_piece(&byte, 1, buf, size, n_out);
	default:
		/* Unused and undefined tokens print as nothing. */
		return LOOM_OK;
	}
}
