/*
 * st_tokenizer.c - a Hugging Face tokenizer (tokenizer.json and the files
 * beside it) as the tokenizer.ggml.* keys llama.cpp's convert_hf_to_gguf.py
 * writes, so that the core's vocabulary loader treats a checkpoint
 * directory as it treats the converted GGUF.
 *
 * tokenizer.json's model picks the GGUF tokenizer:
 *   BPE with byte_fallback   -> "llama" (SentencePiece-style: merges by score)
 *   BPE, ByteLevel           -> "gpt2"  (byte-level: merges by rank)
 *   WordPiece                -> "bert"
 * Anything else (Unigram, WordLevel, normalizers GGUF cannot express) is an
 * error naming tokenizer.json and what it does not support.
 *
 * Special tokens come from tokenizer_config.json, else
 * special_tokens_map.json, else config.json's ids (already in the
 * metadata); whether BOS and EOS are added from tokenizer_config.json, else
 * from the post_processor's template. Every end-of-generation id
 * (generation_config.json's and config.json's eos_token_id, and the EOS
 * token) goes to tokenizer.loom.eog_token_ids.
 */
#include "st_tokenizer.h"

#include "st_json.h"
#include "st_layout.h"
#include "st_merges.h"
#include "st_plugin.h"
#include "st_pretokenizer.h"
#include "st_vocab.h"

#include <cjson/cJSON.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Larger chat templates are refused unread. */
#define MAX_TEMPLATE_BYTES ((size_t)16 << 20)

/* More ids than any vocabulary has: a bound on what a hostile file makes us
 * allocate. */
#define MAX_TOKENS (1 << 24)

enum tok_kind { KIND_LLAMA, KIND_GPT2, KIND_BERT };

static const char *const kind_names[] = {"llama", "gpt2", "bert"};

/* Everything one load reads and builds. */
struct tok {
	const loom_host *host;
	const char *dir;
	st_meta *meta;
	char path[PATH_MAX]; /* DIR/tokenizer.json, for messages */
	cJSON *json;         /* tokenizer.json */
	cJSON *config;       /* tokenizer_config.json, or NULL */
	cJSON *special_map;  /* special_tokens_map.json, or NULL */
	cJSON *generation;   /* generation_config.json, or NULL */
	const cJSON *model;
	enum tok_kind kind;
	st_pipeline pipe;
	st_vocab vocab;
	int32_t unk; /* model.unk_token's id ("llama" only), or -1 */
};

/* ------------------------------------------------------------------------ */
/* Files                                                                    */

/* DIR/name into buf of PATH_MAX bytes. */
static bool join_path(const struct tok *t, char *buf, const char *name)
{
	if (st_layout_join(buf, t->dir, name))
		return true;
	t->host->set_error("%s/%s: path too long", t->dir, name);
	return false;
}

/* DIR/name parsed; NULL if there is no such file, or (*failed set) after
 * set_error. */
static cJSON *load_json(const struct tok *t, const char *name, bool *failed)
{
	char path[PATH_MAX];
	bool missing = false;
	*failed = !join_path(t, path, name);
	if (*failed)
		return NULL;
	cJSON *json = st_json_load(t->host, path, &missing);
	if (json != NULL && !cJSON_IsObject(json)) {
		t->host->set_error("%s: not a JSON object", path);
		cJSON_Delete(json);
		json = NULL;
	}
	*failed = json == NULL && !missing;
	return json;
}

static bool load_companions(struct tok *t)
{
	bool failed;
	t->config = load_json(t, "tokenizer_config.json", &failed);
	if (!failed)
		t->special_map = load_json(t, "special_tokens_map.json", &failed);
	if (!failed)
		t->generation = load_json(t, "generation_config.json", &failed);
	return !failed;
}

/* ------------------------------------------------------------------------ */
/* JSON helpers                                                             */

static const cJSON *member(const cJSON *obj, const char *key)
{
	return cJSON_GetObjectItemCaseSensitive(obj, key);
}

static bool is_absent(const cJSON *item)
{
	return item == NULL || cJSON_IsNull(item);
}

/* A JSON number that is a whole number in [0, limit). */
static bool as_id(const cJSON *item, int64_t limit, int64_t *out)
{
	uint64_t id;
	if (limit < 0 || !st_json_uint(item, (uint64_t)limit, &id))
		return false;
	*out = (int64_t)id;
	return true;
}

/* A string member; absent or null gives "" (Hugging Face's None). */
static bool empty_or_null(const cJSON *obj, const char *key)
{
	const cJSON *item = member(obj, key);
	return is_absent(item) || (cJSON_IsString(item) && item->valuestring[0] == '\0');
}

/* ------------------------------------------------------------------------ */
/* The model                                                                */

static bool read_kind(struct tok *t)
{
	t->model = member(t->json, "model");
	const cJSON *type = member(t->model, "type");
	if (!cJSON_IsObject(t->model) || !cJSON_IsString(type)) {
		t->host->set_error("%s: no model with a type", t->path);
		return false;
	}
	const cJSON *fallback = member(t->model, "byte_fallback");
	if (strcmp(type->valuestring, "BPE") == 0) {
		t->kind = cJSON_IsTrue(fallback) ? KIND_LLAMA : KIND_GPT2;
		return true;
	}
	if (strcmp(type->valuestring, "WordPiece") == 0) {
		t->kind = KIND_BERT;
		return true;
	}
	t->host->set_error("%s: model type '%.40s' is not supported: GGUF's tokenizers are BPE "
			   "(SentencePiece-style with byte_fallback, or byte-level) and WordPiece",
			   t->path, type->valuestring);
	return false;
}

/* BPE options that change tokens and that GGUF has no key for. */
static bool check_bpe_options(struct tok *t, bool *ignore_merges)
{
	const cJSON *dropout = member(t->model, "dropout");
	const cJSON *ignore = member(t->model, "ignore_merges");
	const char *bad = NULL;
	if (!is_absent(dropout) && !(cJSON_IsNumber(dropout) && dropout->valuedouble == 0))
		bad = "dropout";
	else if (!empty_or_null(t->model, "continuing_subword_prefix"))
		bad = "continuing_subword_prefix";
	else if (!empty_or_null(t->model, "end_of_word_suffix"))
		bad = "end_of_word_suffix";
	else if (!is_absent(ignore) && !cJSON_IsBool(ignore))
		bad = "ignore_merges";
	*ignore_merges = cJSON_IsTrue(ignore);
	/* A SentencePiece-style word is the whole text: keeping it whole when
	 * it is a token has no equivalent in the core. */
	if (bad == NULL && t->kind == KIND_LLAMA && *ignore_merges)
		bad = "ignore_merges";
	if (bad != NULL) {
		t->host->set_error("%s: model.%s is not supported with a %s tokenizer", t->path, bad,
				   kind_names[t->kind]);
		return false;
	}
	return true;
}

static bool read_pipeline(struct tok *t)
{
	bool ignore_merges = false;
	switch (t->kind) {
	case KIND_LLAMA:
		return check_bpe_options(t, &ignore_merges) &&
		       st_pipeline_llama(t->host, t->path, t->json, &t->pipe);
	case KIND_GPT2:
		return check_bpe_options(t, &ignore_merges) &&
		       st_pipeline_gpt2(t->host, t->path, t->json, ignore_merges, &t->pipe);
	case KIND_BERT:
		if (!cJSON_IsString(member(t->model, "continuing_subword_prefix")) ||
		    strcmp(member(t->model, "continuing_subword_prefix")->valuestring, "##") != 0) {
			t->host->set_error("%s: a WordPiece model whose continuing_subword_prefix is "
					   "not \"##\" is not supported", t->path);
			return false;
		}
		return st_pipeline_bert(t->host, t->path, t->json, &t->pipe);
	}
	return false;
}

/* ------------------------------------------------------------------------ */
/* Tokens                                                                   */

/* config.json's value under key as an id list (an int or ints); n = 0 if
 * absent. */
static size_t config_ids(const struct tok *t, const char *key, int64_t *out, size_t cap)
{
	const loom_meta_value *v = st_meta_get(t->meta, key);
	if (v == NULL)
		return 0;
	/* st_config writes whole numbers as I64, others as F64. */
	if (v->type == LOOM_META_I64) {
		out[0] = v->v.i;
		return 1;
	}
	if (v->type == LOOM_META_ARRAY && v->elem_type == LOOM_META_I64) {
		size_t n = v->count < cap ? (size_t)v->count : cap;
		memcpy(out, v->v.array, n * sizeof(*out));
		return n;
	}
	return 0;
}

/* How many ids: config.json's vocab_size (the embedding's rows) if it says,
 * else one past the largest id. Every id must lie below that vocab_size,
 * or without one below the number of entries, as llama.cpp's converter
 * requires. */
static bool count_ids(struct tok *t, const cJSON *vocab, const cJSON *added, int32_t *n)
{
	int64_t size = -1, max_id = -1, id;
	if (config_ids(t, "vocab_size", &size, 1) == 0)
		config_ids(t, "text_config.vocab_size", &size, 1);
	if (size > MAX_TOKENS) {
		t->host->set_error("%s/config.json: vocab_size %" PRId64 " is too large", t->dir, size);
		return false;
	}
	int64_t limit = size >= 0 ? size
				  : (int64_t)cJSON_GetArraySize(vocab) + cJSON_GetArraySize(added);
	for (int pass = 0; pass < 2; pass++) {
		const cJSON *item = pass == 0 ? vocab->child : added != NULL ? added->child : NULL;
		for (; item != NULL; item = item->next) {
			const cJSON *idv = pass == 0 ? item : member(item, "id");
			const char *text = pass == 0 ? item->string : cJSON_GetStringValue(member(item, "content"));
			if (!as_id(idv, limit, &id)) {
				t->host->set_error("%s: %s '%.80s' has id %.0f, out of range (%s %" PRId64 ")",
						   t->path, pass == 0 ? "token" : "added token",
						   text != NULL ? text : "?",
						   cJSON_IsNumber(idv) ? idv->valuedouble : -1.0,
						   size >= 0 ? "config.json's vocab_size is" : "there are",
						   limit);
				return false;
			}
			if (id > max_id)
				max_id = id;
		}
	}
	*n = (int32_t)(size >= 0 ? size : max_id + 1);
	if (*n == 0) {
		t->host->set_error("%s: no tokens", t->path);
		return false;
	}
	return true;
}

static bool name_token(struct tok *t, int64_t id, const char *text)
{
	switch (st_vocab_set(&t->vocab, (int32_t)id, text, strlen(text))) {
	case ST_VOCAB_SET:
		return true;
	case ST_VOCAB_CONFLICT:
		t->host->set_error("%s: id %" PRId64 " is both '%.80s' and '%.80s'", t->path, id,
				   t->vocab.text[id], text);
		return false;
	case ST_VOCAB_NO_MEMORY:
		break;
	}
	t->host->set_error("%s: out of memory for the tokens", t->path);
	return false;
}

static bool is_byte_piece(const char *s)
{
	static const char hex[] = "0123456789ABCDEFabcdef";
	return strlen(s) == 6 && memcmp(s, "<0x", 3) == 0 && strchr(hex, s[3]) != NULL &&
	       strchr(hex, s[4]) != NULL && s[5] == '>';
}

/* llama.cpp's converter makes control tokens of added tokens that look it,
 * whatever they say (command-r, deepseek-coder, gemma). */
static bool looks_special(const char *s)
{
	size_t n = strlen(s);
	static const char *const names[] = {"<pad>", "<mask>", "<2mass>", "[@BOS@]"};
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (strcmp(s, names[i]) == 0)
			return true;
	return (n >= 3 && memcmp(s, "<|", 2) == 0 && memcmp(s + n - 2, "|>", 2) == 0) ||
	       (n >= 5 && memcmp(s, "<\xef\xbd\x9c", 4) == 0 && memcmp(s + n - 4, "\xef\xbd\x9c>", 4) == 0) ||
	       (n >= 8 && memcmp(s, "<unused", 7) == 0 && s[n - 1] == '>');
}

static bool read_added(struct tok *t, const cJSON *added)
{
	for (const cJSON *a = added != NULL ? added->child : NULL; a != NULL; a = a->next) {
		const char *text = cJSON_GetStringValue(member(a, "content"));
		int64_t id = (int64_t)member(a, "id")->valuedouble;
		if (text == NULL) {
			t->host->set_error("%s: added token %" PRId64 " has no content", t->path, id);
			return false;
		}
		if (!name_token(t, id, text))
			return false;
		bool special = cJSON_IsTrue(member(a, "special"));
		if (!special && t->kind != KIND_LLAMA && looks_special(text))
			special = true;
		t->vocab.type[id] = special ? ST_TOKEN_CONTROL : ST_TOKEN_USER_DEFINED;
	}
	return true;
}

/* BERT's vocabulary as llama.cpp's converter writes it: a word-initial
 * piece after "▁", a continuation without its "##", [BRACKETED] tokens as
 * they are. */
static bool phantom_spaces(struct tok *t)
{
	st_vocab *v = &t->vocab;
	for (int32_t id = 0; id < v->n; id++) {
		const char *s = v->text[id];
		size_t n = v->len[id];
		char *buf = NULL;
		bool ok = true;
		if (n >= 2 && s[0] == '[' && s[n - 1] == ']')
			continue;
		if (n >= 2 && memcmp(s, "##", 2) == 0) {
			ok = st_vocab_rename(v, id, s + 2, n - 2);
		} else if ((buf = malloc(n + 3)) != NULL) {
			memcpy(buf, SPM_SPACE, 3);
			memcpy(buf + 3, s, n);
			ok = st_vocab_rename(v, id, buf, n + 3);
			free(buf);
		} else {
			ok = false;
		}
		if (!ok) {
			t->host->set_error("%s: out of memory for the tokens", t->path);
			return false;
		}
	}
	return true;
}

static bool read_tokens(struct tok *t)
{
	const cJSON *vocab = member(t->model, "vocab"), *added = member(t->json, "added_tokens");
	int32_t n;
	if (!cJSON_IsObject(vocab)) {
		t->host->set_error("%s: model.vocab is not an object of token: id", t->path);
		return false;
	}
	if (!is_absent(added) && !cJSON_IsArray(added)) {
		t->host->set_error("%s: added_tokens is not an array", t->path);
		return false;
	}
	if (is_absent(added))
		added = NULL;
	if (!count_ids(t, vocab, added, &n))
		return false;
	if (!st_vocab_init(&t->vocab, n)) {
		t->host->set_error("%s: out of memory for %" PRId32 " tokens", t->path, n);
		return false;
	}
	for (const cJSON *e = vocab->child; e != NULL; e = e->next) {
		int64_t id = (int64_t)e->valuedouble;
		if (!name_token(t, id, e->string))
			return false;
		if (t->kind == KIND_LLAMA && is_byte_piece(e->string))
			t->vocab.type[id] = ST_TOKEN_BYTE;
	}
	if (!read_added(t, added))
		return false;
	if (!st_vocab_fill_holes(&t->vocab)) {
		t->host->set_error("%s: out of memory for the tokens", t->path);
		return false;
	}
	if (t->kind == KIND_BERT && !phantom_spaces(t))
		return false;
	if (!st_vocab_index(&t->vocab)) {
		t->host->set_error("%s: out of memory for the token index", t->path);
		return false;
	}
	return true;
}

/* The token a model.unk_token names is the unknown token. */
static bool mark_unknown(struct tok *t)
{
	const char *unk = cJSON_GetStringValue(member(t->model, "unk_token"));
	if (unk == NULL || t->kind != KIND_LLAMA)
		return true;
	int32_t id = st_vocab_find(&t->vocab, unk, strlen(unk));
	if (id < 0) {
		t->host->set_error("%s: model.unk_token '%.80s' is not a token", t->path, unk);
		return false;
	}
	t->vocab.type[id] = ST_TOKEN_UNKNOWN;
	t->unk = id;
	return true;
}

/* Metaspace with split cuts the text before every "▁": the core merges
 * across those cuts unless no token has a "▁" after its first character,
 * in which case no merge could span two words anyway. */
static bool check_word_split(struct tok *t)
{
	const st_vocab *v = &t->vocab;
	for (int32_t id = 0; t->pipe.split_words && id < v->n; id++) {
		const char *s = v->text[id];
		size_t n = v->len[id];
		for (size_t i = 1; i + 3 <= n; i++) {
			if (memcmp(s + i, SPM_SPACE, 3) != 0)
				continue;
			t->host->set_error("%s: the Metaspace pre_tokenizer splits words, but token %" PRId32
					   " '%.80s' spans a \"" SPM_SPACE "\": GGUF's tokenizer "
					   "would merge across words", t->path, id, s);
			return false;
		}
	}
	return true;
}

/* ------------------------------------------------------------------------ */
/* Special tokens                                                           */

/* A token named by a string or an AddedToken object {"content": ...}:
 * its id, -1 if that is no token, -2 if nothing is named. */
static int32_t named_token(const struct tok *t, const cJSON *entry, const char **text)
{
	*text = cJSON_IsString(entry) ? entry->valuestring
					 : cJSON_GetStringValue(member(entry, "content"));
	if (*text == NULL)
		return -2;
	return st_vocab_find(&t->vocab, *text, strlen(*text));
}

/* The id of role ("bos", "eos", ...): tokenizer_config.json's <role>_token,
 * else special_tokens_map.json's, else config.json's <role>_token_id;
 * -1 if none says. */
static bool role_id(struct tok *t, const char *role, int32_t *out)
{
	char key[32];
	const cJSON *sources[] = {t->config, t->special_map};
	const char *names[] = {"tokenizer_config.json", "special_tokens_map.json"};
	*out = -1;
	snprintf(key, sizeof(key), "%s_token", role);
	for (int i = 0; i < 2; i++) {
		const char *text;
		int32_t id = named_token(t, member(sources[i], key), &text);
		if (id >= 0) {
			*out = id;
			return true;
		}
		if (id == -1)
			t->host->log(LOOM_LOG_WARN, PLUGIN, "%s/%s: %s '%.80s' is not a token", t->dir,
				     names[i], key, text);
	}
	int64_t ids[1];
	snprintf(key, sizeof(key), "%s_token_id", role);
	if (config_ids(t, key, ids, 1) == 0 || ids[0] < 0)
		return true;
	if (ids[0] >= t->vocab.n) {
		t->host->set_error("%s/config.json: %s %" PRId64 " is not a token (%" PRId32 " tokens)",
				   t->dir, key, ids[0], t->vocab.n);
		return false;
	}
	*out = (int32_t)ids[0];
	return true;
}

/* The post_processor's TemplateProcessing (alone or in a Sequence), or
 * NULL. */
static const cJSON *template_processor(const cJSON *pp)
{
	if (cJSON_IsString(member(pp, "type")) &&
	    strcmp(member(pp, "type")->valuestring, "TemplateProcessing") == 0)
		return pp;
	const cJSON *list = member(pp, "processors");
	for (const cJSON *p = cJSON_IsArray(list) ? list->child : NULL; p != NULL; p = p->next)
		if (template_processor(p) != NULL)
			return p;
	return NULL;
}

/* The token the template's "single" puts first (at_end false) or last,
 * or -1 if it puts none there. */
static int32_t template_token(const struct tok *t, bool at_end)
{
	const cJSON *tp = template_processor(member(t->json, "post_processor"));
	const cJSON *single = member(tp, "single");
	if (!cJSON_IsArray(single) || cJSON_GetArraySize(single) < 2)
		return -1;
	const cJSON *item = cJSON_GetArrayItem(single, at_end ? cJSON_GetArraySize(single) - 1 : 0);
	const char *name = cJSON_GetStringValue(member(member(item, "SpecialToken"), "id"));
	if (name == NULL)
		return -1;
	/* Its ids are listed under special_tokens; else it is a token's text. */
	const cJSON *ids = member(member(member(tp, "special_tokens"), name), "ids");
	int64_t id;
	if (cJSON_IsArray(ids) && cJSON_GetArraySize(ids) == 1 &&
	    as_id(ids->child, t->vocab.n, &id))
		return (int32_t)id;
	return st_vocab_find(&t->vocab, name, strlen(name));
}

/* Whether BOS (at_end false) or EOS is added: tokenizer_config.json's
 * add_<role>_token if it says, else whether the template puts that token
 * first (last). */
static bool adds_token(const struct tok *t, const char *role, bool at_end, int32_t id)
{
	char key[32];
	snprintf(key, sizeof(key), "add_%s_token", role);
	const cJSON *flag = member(t->config, key);
	if (cJSON_IsBool(flag))
		return cJSON_IsTrue(flag);
	int32_t first = template_token(t, at_end);
	if (first >= 0 && first != id)
		t->host->log(LOOM_LOG_WARN, PLUGIN,
			     "%s: the post_processor adds token %" PRId32 " %s, which is not the %s "
			     "token; it is not added", t->path, first, at_end ? "last" : "first", role);
	return first >= 0 && first == id;
}

static bool set_id(struct tok *t, const char *key, int32_t id)
{
	if (id < 0)
		return true;
	if (st_meta_set_int(t->meta, key, id))
		return true;
	t->host->set_error("%s: out of memory", t->path);
	return false;
}

static bool set_flag(struct tok *t, const char *key, bool value)
{
	if (st_meta_set_bool(t->meta, key, value))
		return true;
	t->host->set_error("%s: out of memory", t->path);
	return false;
}

static bool write_roles(struct tok *t)
{
	static const struct {
		const char *role, *key;
	} roles[] = {
		{"bos", "tokenizer.ggml.bos_token_id"},
		{"eos", "tokenizer.ggml.eos_token_id"},
		{"unk", "tokenizer.ggml.unknown_token_id"},
		{"pad", "tokenizer.ggml.padding_token_id"},
		{"sep", "tokenizer.ggml.seperator_token_id"}, /* GGUF's spelling */
		{"mask", "tokenizer.ggml.mask_token_id"},
	};
	int32_t ids[6];
	for (size_t i = 0; i < 6; i++)
		if (!role_id(t, roles[i].role, &ids[i]))
			return false;
	/* BERT's CLS is the core's BOS; a template names BOS where no file
	 * does (as llama.cpp's converter reads it). */
	if (ids[0] < 0 && t->kind == KIND_BERT && !role_id(t, "cls", &ids[0]))
		return false;
	if (ids[0] < 0)
		ids[0] = template_token(t, false);
	if (ids[2] < 0)
		ids[2] = t->unk;
	for (size_t i = 0; i < 6; i++)
		if (!set_id(t, roles[i].key, ids[i]))
			return false;
	if (t->kind == KIND_BERT)
		return set_flag(t, "tokenizer.ggml.add_bos_token", adds_token(t, "bos", false, ids[0])) &&
		       set_flag(t, "tokenizer.ggml.add_sep_token", adds_token(t, "sep", true, ids[4]));
	return set_flag(t, "tokenizer.ggml.add_bos_token", adds_token(t, "bos", false, ids[0])) &&
	       set_flag(t, "tokenizer.ggml.add_eos_token", adds_token(t, "eos", true, ids[1]));
}

/* ------------------------------------------------------------------------ */
/* End of generation                                                        */

#define MAX_EOG 64

struct id_list {
	int32_t ids[MAX_EOG];
	size_t n;
};

static bool add_eog(struct tok *t, struct id_list *l, int64_t id, const char *from)
{
	if (id < 0 || id >= t->vocab.n) {
		t->host->set_error("%s/%s: eos_token_id %" PRId64 " is not a token (%" PRId32 " tokens)",
				   t->dir, from, id, t->vocab.n);
		return false;
	}
	for (size_t i = 0; i < l->n; i++)
		if (l->ids[i] == id)
			return true;
	if (l->n < MAX_EOG)
		l->ids[l->n++] = (int32_t)id;
	return true;
}

static bool write_eog(struct tok *t)
{
	struct id_list l = {.n = 0};
	const cJSON *gen = member(t->generation, "eos_token_id");
	int64_t id, config[MAX_EOG];
	const cJSON *item = cJSON_IsArray(gen) ? gen->child : gen;
	for (; item != NULL && !cJSON_IsNull(item); item = cJSON_IsArray(gen) ? item->next : NULL) {
		if (!as_id(item, INT64_MAX, &id)) {
			t->host->set_error("%s/generation_config.json: eos_token_id is not an id or a list "
					   "of ids", t->dir);
			return false;
		}
		if (!add_eog(t, &l, id, "generation_config.json"))
			return false;
	}
	size_t n = config_ids(t, "eos_token_id", config, MAX_EOG);
	for (size_t i = 0; i < n; i++)
		if (config[i] >= 0 && !add_eog(t, &l, config[i], "config.json"))
			return false;
	const loom_meta_value *eos = st_meta_get(t->meta, "tokenizer.ggml.eos_token_id");
	if (eos != NULL && !add_eog(t, &l, eos->v.i, "tokenizer.json"))
		return false;
	if (l.n == 0)
		return true;
	if (!st_meta_set_array(t->meta, "tokenizer.loom.eog_token_ids", LOOM_META_I32, l.ids, l.n)) {
		t->host->set_error("%s: out of memory", t->path);
		return false;
	}
	return true;
}

/* ------------------------------------------------------------------------ */
/* Chat template                                                            */

static bool set_string(struct tok *t, const char *key, const char *s, size_t len)
{
	if (st_meta_set_string(t->meta, key, s, len))
		return true;
	t->host->set_error("%s: out of memory", t->path);
	return false;
}

/* A list of {"name", "template"}: "default" as tokenizer.chat_template,
 * the others as tokenizer.chat_template.<name> (non-alphanumerics as "_")
 * listed in tokenizer.chat_templates, as gguf-py writes them. */
static bool write_template_list(struct tok *t, const cJSON *list)
{
	loom_string names[64];
	char name_buf[64][64];
	size_t n = 0;
	for (const cJSON *e = list->child; e != NULL; e = e->next) {
		const char *name = cJSON_GetStringValue(member(e, "name"));
		const char *text = cJSON_GetStringValue(member(e, "template"));
		char key[128];
		if (name == NULL || name[0] == '\0' || text == NULL)
			continue;
		if (strcmp(name, "default") == 0) {
			if (!set_string(t, "tokenizer.chat_template", text, strlen(text)))
				return false;
			continue;
		}
		if (n == 64)
			continue;
		size_t len = 0;
		for (; name[len] != '\0' && len < 63; len++) {
			char c = name[len];
			bool alnum = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
			name_buf[n][len] = alnum ? c : '_';
		}
		name_buf[n][len] = '\0';
		snprintf(key, sizeof(key), "tokenizer.chat_template.%s", name_buf[n]);
		if (!set_string(t, key, text, strlen(text)))
			return false;
		names[n] = (loom_string){.len = len, .data = name_buf[n]};
		n++;
	}
	if (n > 0 && !st_meta_set_array(t->meta, "tokenizer.chat_templates", LOOM_META_STRING, names, n)) {
		t->host->set_error("%s: out of memory", t->path);
		return false;
	}
	return true;
}

/* tokenizer_config.json's chat_template, else chat_template.jinja, else
 * chat_template.json's. */
static bool write_chat_template(struct tok *t)
{
	const cJSON *tmpl = member(t->config, "chat_template");
	if (cJSON_IsString(tmpl))
		return set_string(t, "tokenizer.chat_template", tmpl->valuestring,
				  strlen(tmpl->valuestring));
	if (cJSON_IsArray(tmpl))
		return write_template_list(t, tmpl);
	if (!is_absent(tmpl))
		t->host->log(LOOM_LOG_WARN, PLUGIN, "%s/tokenizer_config.json: chat_template is neither "
			     "a string nor a list; ignored", t->dir);
	char path[PATH_MAX];
	size_t len;
	bool missing, failed;
	if (!join_path(t, path, "chat_template.jinja"))
		return false;
	char *jinja = st_read_file(t->host, path, MAX_TEMPLATE_BYTES, "a chat template", &len,
				   &missing);
	if (jinja != NULL) {
		bool ok = set_string(t, "tokenizer.chat_template", jinja, len);
		free(jinja);
		return ok;
	}
	if (!missing)
		return false;
	cJSON *json = load_json(t, "chat_template.json", &failed);
	bool ok = !failed;
	tmpl = member(json, "chat_template");
	if (cJSON_IsString(tmpl))
		ok = set_string(t, "tokenizer.chat_template", tmpl->valuestring, strlen(tmpl->valuestring));
	else if (cJSON_IsArray(tmpl))
		ok = write_template_list(t, tmpl);
	cJSON_Delete(json);
	return ok;
}

/* ------------------------------------------------------------------------ */
/* Writing the keys                                                         */

static bool write_vocab(struct tok *t)
{
	const st_vocab *v = &t->vocab;
	loom_string *texts = malloc((size_t)v->n * sizeof(*texts) + 1);
	bool ok = texts != NULL;
	for (int32_t i = 0; ok && i < v->n; i++)
		texts[i] = (loom_string){.len = v->len[i], .data = v->text[i]};
	ok = ok && st_meta_set_string(t->meta, "tokenizer.ggml.model", kind_names[t->kind],
				      strlen(kind_names[t->kind])) &&
	     st_meta_set_array(t->meta, "tokenizer.ggml.tokens", LOOM_META_STRING, texts,
			       (uint64_t)v->n) &&
	     st_meta_set_array(t->meta, "tokenizer.ggml.token_type", LOOM_META_I32, v->type,
			       (uint64_t)v->n) &&
	     (t->pipe.pre == NULL ||
	      st_meta_set_string(t->meta, "tokenizer.ggml.pre", t->pipe.pre, strlen(t->pipe.pre))) &&
	     (t->kind != KIND_LLAMA ||
	      (st_meta_set_array(t->meta, "tokenizer.ggml.scores", LOOM_META_F32, v->score,
				 (uint64_t)v->n) &&
	       st_meta_set_bool(t->meta, "tokenizer.ggml.add_space_prefix",
				t->pipe.add_space_prefix)));
	free(texts);
	if (!ok)
		t->host->set_error("%s: out of memory for the tokens", t->path);
	return ok;
}

static bool write_merges(struct tok *t)
{
	const cJSON *merges = member(t->model, "merges");
	switch (t->kind) {
	case KIND_LLAMA:
		return st_merges_to_scores(t->host, t->path, merges, &t->vocab);
	case KIND_GPT2:
		return st_merges_to_meta(t->host, t->path, merges, &t->vocab, t->meta);
	case KIND_BERT:
		break;
	}
	return true;
}

bool st_tokenizer_load(const loom_host *host, const char *dir, st_meta *meta)
{
	struct tok t = {.host = host, .dir = dir, .meta = meta, .unk = -1};
	bool failed;
	if (!join_path(&t, t.path, "tokenizer.json"))
		return false;
	t.json = load_json(&t, "tokenizer.json", &failed);
	if (t.json == NULL)
		return !failed;
	bool ok = load_companions(&t) && read_kind(&t) && read_pipeline(&t) && read_tokens(&t) &&
		  mark_unknown(&t) && check_word_split(&t) && write_merges(&t) && write_vocab(&t) &&
		  write_roles(&t) && write_eog(&t) && write_chat_template(&t);
	st_vocab_free(&t.vocab);
	cJSON_Delete(t.generation);
	cJSON_Delete(t.special_map);
	cJSON_Delete(t.config);
	cJSON_Delete(t.json);
	return ok;
}
