/*
 * test_hf_tokenizer.c - Hugging Face tokenizers (tokenizer.json and the
 * files beside it) in checkpoint directories, loaded through the
 * safetensors plugin as GGUF's tokenizer.ggml.* keys.
 *
 * - The stories checkpoints, whose tokenizer.json was made from the
 *   stories GGUFs' vocabulary, tokenize every golden prompt and every
 *   llama.cpp test text as those GGUFs do, with the same special tokens
 *   and pieces.
 * - tokenizer.json files written here from llama.cpp's test vocabularies,
 *   as Hugging Face lays each family out, give exactly llama.cpp's ids on
 *   its test texts.
 * - The mapping itself (pre-tokenizer names, special tokens and where they
 *   come from, end-of-generation ids, chat templates) on small
 *   vocabularies, and broken or unsupported files, each failing with a
 *   message that names the file and the construct.
 */
#include "check_main.h"
#include "test_text.h"
#include "fixture.h"
#include "model/meta.h"
#include "plugin_host.h"
#include "st_writer.h"
#include "testdata.h"

#include <cjson/cJSON.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_TOKENS 4096
#define CASE_SEPARATOR "\n__ggml_vocab_test__\n"
#define SPACE "\xe2\x96\x81" /* "▁" */

/* ------------------------------------------------------------------------ */
/* Models and tokens                                                        */

static loom_status try_load(loom_runtime *rt, const char *path, loom_model **m)
{
	loom_model_params mp = loom_model_default_params();
	mp.vocab_only = true;
	*m = NULL;
	return loom_model_load(rt, path, &mp, m);
}

static loom_model *load_vocab(loom_runtime *rt, const char *path)
{
	loom_model *m;
	loom_status st = try_load(rt, path, &m);
	ck_assert_msg(st == LOOM_OK, "loading %s: %s", path, loom_last_error());
	return m;
}

static size_t tokenize(const loom_model *m, const char *text, size_t len, bool add, bool parse,
		       loom_token *out)
{
	size_t n = 0;
	loom_status st = loom_tokenize(m, text, len, add, parse, out, MAX_TOKENS, &n);
	ck_assert_msg(st == LOOM_OK, "tokenize: %s", loom_last_error());
	return n;
}

static size_t piece(const loom_model *m, loom_token id, bool special, char *buf, size_t size)
{
	size_t n = 0;
	loom_status st = loom_token_to_piece(m, id, special, buf, size, &n);
	ck_assert_msg(st == LOOM_OK, "piece of %d: %s", id, loom_last_error());
	return n;
}

/* The value under key rendered as text (malloc'd), or NULL if absent. */
static char *meta_text(const loom_model *m, const char *key)
{
	for (size_t i = 0; i < loom_model_meta_count(m); i++) {
		if (strcmp(loom_model_meta_key(m, i), key) != 0)
			continue;
		size_t n = loom_model_meta_value_str(m, i, NULL, 0);
		char *buf = malloc(n + 1);
		ck_assert(buf != NULL);
		loom_model_meta_value_str(m, i, buf, n + 1);
		return buf;
	}
	return NULL;
}

static void expect_meta(const loom_model *m, const char *key, const char *want)
{
	char *got = meta_text(m, key);
	ck_assert_msg(got != NULL, "no key %s", key);
	ck_assert_msg(strcmp(got, want) == 0, "%s: expected %s, got %s", key, want, got);
	free(got);
}

static void expect_no_meta(const loom_model *m, const char *key)
{
	char *got = meta_text(m, key);
	ck_assert_msg(got == NULL, "%s should be absent, is %s", key, got);
}

/* ------------------------------------------------------------------------ */
/* Checkpoint directories                                                   */

/* A fresh directory holding config.json (config, or a llama's minimal one)
 * and a model.safetensors without tensors; returned in buf. */
static const char *hf_dir(char *buf, size_t size, const char *name, const char *config)
{
	char path[4096];
	const char *tmp = test_tmp_dir(name);
	ck_assert_msg(tmp != NULL, "cannot make the directory %s", name);
	snprintf(buf, size, "%s", tmp);
	snprintf(path, sizeof(path), "%s/model.safetensors", buf);
	ck_assert(st_write_raw(path, "{}", NULL, 0));
	ck_assert(st_write_config(buf, config != NULL ? config : "{\"model_type\": \"llama\"}"));
	return buf;
}

static void write_text(const char *dir, const char *name, const char *text)
{
	char path[4096];
	test_write_file(path, sizeof(path), dir, name, text);
}

/* Writes json to dir/name and deletes it. */
static void write_json(const char *dir, const char *name, cJSON *json)
{
	char *text = cJSON_PrintUnformatted(json);
	ck_assert(text != NULL);
	write_text(dir, name, text);
	free(text);
	cJSON_Delete(json);
}

static cJSON *parse(const char *text)
{
	cJSON *json = cJSON_Parse(text);
	ck_assert_msg(json != NULL, "bad JSON in the test: %s", text);
	return json;
}

/* Loading dir fails, and the safetensors plugin's message holds each of
 * the needles. (The message is read from the plugin itself: the core's
 * open_file formats loom_last_error() into itself and loses it.) */
static void expect_load_error(loom_runtime *rt, const char *dir, const char *needle1,
			      const char *needle2)
{
	loom_model *m;
	loom_status st = try_load(rt, dir, &m);
	ck_assert_msg(st != LOOM_OK, "loading %s should fail", dir);
	ck_assert_ptr_null(m);
	const char *msg = loom_last_error();
	ck_assert_msg(strstr(msg, needle1) != NULL && (needle2 == NULL || strstr(msg, needle2) != NULL),
		      "expected '%s' and '%s' in: %s", needle1, needle2 ? needle2 : "", msg);
}

/* ------------------------------------------------------------------------ */
/* A small byte-level vocabulary                                            */

/* The character GPT-2's byte-level alphabet writes byte b as, in UTF-8. */
static void gpt2_char(unsigned b, char *out)
{
	unsigned cp;
	if ((b >= 0x21 && b <= 0x7e) || (b >= 0xa1 && b <= 0xff && b != 0xad))
		cp = b;
	else if (b <= 0x20)
		cp = 0x100 + b;
	else if (b <= 0xa0)
		cp = 0x100 + 33 + (b - 0x7f);
	else
		cp = 0x100 + 67;
	if (cp < 0x80) {
		out[0] = (char)cp;
		out[1] = '\0';
	} else {
		out[0] = (char)(0xc0 | cp >> 6);
		out[1] = (char)(0x80 | (cp & 0x3f));
		out[2] = '\0';
	}
}

/* Ids 0-255 the bytes, then the merges' results ("Ġthe" = 259), then the
 * added tokens from 262. */
static const char *const tiny_merges[] = {"\xc4\xa0 t", "h e", "\xc4\xa0t he"};
static const char *const tiny_added[] = {"<s>", "</s>", "<|eot_id|>", "<extra>"};
#define TINY_BOS 262
#define TINY_EOS 263
#define TINY_EOT 264
#define TINY_EXTRA 265

static cJSON *tiny_added_tokens(void)
{
	cJSON *added = cJSON_CreateArray();
	for (int i = 0; i < 4; i++) {
		cJSON *a = cJSON_CreateObject();
		cJSON_AddNumberToObject(a, "id", TINY_BOS + i);
		cJSON_AddStringToObject(a, "content", tiny_added[i]);
		cJSON_AddBoolToObject(a, "normalized", false);
		cJSON_AddBoolToObject(a, "special", i < 3);
		cJSON_AddItemToArray(added, a);
	}
	return added;
}

/* A byte-level tokenizer.json with the given pre_tokenizer. */
static cJSON *tiny_byte_level(const char *pre_tokenizer, bool ignore_merges)
{
	cJSON *vocab = cJSON_CreateObject(), *merges = cJSON_CreateArray();
	for (unsigned b = 0; b < 256; b++) {
		char c[4];
		gpt2_char(b, c);
		cJSON_AddNumberToObject(vocab, c, b);
	}
	for (int i = 0; i < 3; i++) {
		char joined[32];
		const char *sp = strchr(tiny_merges[i], ' ');
		snprintf(joined, sizeof(joined), "%.*s%s", (int)(sp - tiny_merges[i]), tiny_merges[i],
			 sp + 1);
		cJSON_AddNumberToObject(vocab, joined, 256 + i);
		/* both spellings of a merge */
		if (i == 1) {
			cJSON *pair = cJSON_CreateArray();
			cJSON_AddItemToArray(pair, cJSON_CreateString("h"));
			cJSON_AddItemToArray(pair, cJSON_CreateString("e"));
			cJSON_AddItemToArray(merges, pair);
		} else {
			cJSON_AddItemToArray(merges, cJSON_CreateString(tiny_merges[i]));
		}
	}
	for (int i = 0; i < 4; i++)
		cJSON_AddNumberToObject(vocab, tiny_added[i], TINY_BOS + i);
	cJSON *model = cJSON_CreateObject();
	cJSON_AddStringToObject(model, "type", "BPE");
	cJSON_AddNullToObject(model, "dropout");
	cJSON_AddBoolToObject(model, "byte_fallback", false);
	cJSON_AddBoolToObject(model, "ignore_merges", ignore_merges);
	cJSON_AddItemToObject(model, "vocab", vocab);
	cJSON_AddItemToObject(model, "merges", merges);
	cJSON *tok = cJSON_CreateObject();
	cJSON_AddStringToObject(tok, "version", "1.0");
	cJSON_AddItemToObject(tok, "added_tokens", tiny_added_tokens());
	cJSON_AddNullToObject(tok, "normalizer");
	cJSON_AddItemToObject(tok, "pre_tokenizer", parse(pre_tokenizer));
	cJSON_AddNullToObject(tok, "post_processor");
	cJSON_AddItemToObject(tok, "decoder", parse("{\"type\": \"ByteLevel\", \"add_prefix_space\": true, "
						   "\"trim_offsets\": true, \"use_regex\": true}"));
	cJSON_AddItemToObject(tok, "model", model);
	return tok;
}

#define BYTE_LEVEL_GPT2 \
	"{\"type\": \"ByteLevel\", \"add_prefix_space\": false, \"trim_offsets\": true, \"use_regex\": true}"
#define BYTE_LEVEL_ONLY \
	"{\"type\": \"ByteLevel\", \"add_prefix_space\": false, \"trim_offsets\": true, \"use_regex\": false}"
#define HF_LLAMA3                                                                                   \
	"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\\\r\\\\n\\\\p{L}\\\\p{N}]?\\\\p{L}+|\\\\p{N}{1,3}| "         \
	"?[^\\\\s\\\\p{L}\\\\p{N}]+[\\\\r\\\\n]*|\\\\s*[\\\\r\\\\n]+|\\\\s+(?!\\\\S)|\\\\s+"
#define HF_QWEN2                                                                                    \
	"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\\\r\\\\n\\\\p{L}\\\\p{N}]?\\\\p{L}+|\\\\p{N}| "              \
	"?[^\\\\s\\\\p{L}\\\\p{N}]+[\\\\r\\\\n]*|\\\\s*[\\\\r\\\\n]+|\\\\s+(?!\\\\S)|\\\\s+"
#define SPLIT(re) \
	"{\"type\": \"Split\", \"pattern\": {\"Regex\": \"" re "\"}, \"behavior\": \"Isolated\", \"invert\": false}"
#define SEQUENCE(a, b) "{\"type\": \"Sequence\", \"pretokenizers\": [" a ", " b "]}"
#define DIGITS "{\"type\": \"Digits\", \"individual_digits\": true}"

/* ------------------------------------------------------------------------ */
/* The stories checkpoints                                                  */

/* Every golden prompt of golden/<model>: the directory gives the recorded
 * ids. Returns how many. */
static int check_golden_prompts(const loom_model *m, const char *model)
{
	char dir_path[4096];
	static loom_token want[MAX_TOKENS], got[MAX_TOKENS];
	int n_checked = 0;
	snprintf(dir_path, sizeof(dir_path), "%s/golden/%s", test_data_dir(), model);
	DIR *dir = opendir(dir_path);
	ck_assert_msg(dir != NULL, "cannot open %s", dir_path);
	for (struct dirent *e; (e = readdir(dir)) != NULL;) {
		size_t len = strlen(e->d_name);
		if (len < 6 || strcmp(e->d_name + len - 5, ".json") != 0)
			continue;
		char path[8192];
		snprintf(path, sizeof(path), "%s/%s", dir_path, e->d_name);
		char *text = test_read_file(path, NULL);
		ck_assert_msg(text != NULL, "cannot read %s", path);
		cJSON *doc = parse(text);
		free(text);
		const char *prompt = cJSON_GetStringValue(cJSON_GetObjectItem(doc, "prompt"));
		const cJSON *how = cJSON_GetObjectItem(doc, "tokenize");
		const cJSON *ids = cJSON_GetObjectItem(doc, "prompt_tokens");
		ck_assert_msg(prompt != NULL && how != NULL && cJSON_IsArray(ids), "%s: not a golden file",
			      path);
		size_t n_want = 0;
		if (!cJSON_IsTrue(cJSON_GetObjectItem(how, "bos_forced_for_empty_prompt")))
			for (const cJSON *i = ids->child; i != NULL; i = i->next)
				want[n_want++] = (loom_token)i->valueint;
		size_t n = tokenize(m, prompt, strlen(prompt),
				    cJSON_IsTrue(cJSON_GetObjectItem(how, "add_special")),
				    cJSON_IsTrue(cJSON_GetObjectItem(how, "parse_special")), got);
		char w[1024], g[1024];
		test_format_tokens(want, n_want, w, sizeof(w));
		test_format_tokens(got, n, g, sizeof(g));
		ck_assert_msg(n == n_want && memcmp(got, want, n * sizeof(*got)) == 0,
			      "%s: '%s': expected [%s], got [%s]", path, prompt, w, g);
		cJSON_Delete(doc);
		n_checked++;
	}
	closedir(dir);
	return n_checked;
}

/* Every text of every llama.cpp tokenizer test, with and without special
 * tokens: a and b give the same ids and the same text back. Returns how
 * many texts. */
static int compare_on_test_texts(const loom_model *a, const loom_model *b)
{
	static loom_token ta[MAX_TOKENS], tb[MAX_TOKENS];
	char dir_path[4096];
	int n_texts = 0;
	snprintf(dir_path, sizeof(dir_path), "%s/golden/tokenizer", test_data_dir());
	DIR *dir = opendir(dir_path);
	ck_assert_msg(dir != NULL, "cannot open %s", dir_path);
	for (struct dirent *e; (e = readdir(dir)) != NULL;) {
		size_t len = strlen(e->d_name);
		if (len < 5 || strcmp(e->d_name + len - 4, ".inp") != 0)
			continue;
		char path[8192];
		snprintf(path, sizeof(path), "%s/%s", dir_path, e->d_name);
		char *inp = test_read_file(path, NULL);
		ck_assert_msg(inp != NULL, "cannot read %s", path);
		for (char *text = inp, *sep; (sep = strstr(text, CASE_SEPARATOR)) != NULL;
		     text = sep + strlen(CASE_SEPARATOR)) {
			size_t tlen = (size_t)(sep - text);
			for (int mode = 0; mode < 3; mode++) {
				bool add = mode != 1, parse_special = mode == 2;
				size_t na = tokenize(a, text, tlen, add, parse_special, ta);
				size_t nb = tokenize(b, text, tlen, add, parse_special, tb);
				char esc[256], wa[1024], wb[1024];
				test_escape(text, tlen, esc, sizeof(esc));
				test_format_tokens(ta, na, wa, sizeof(wa));
				test_format_tokens(tb, nb, wb, sizeof(wb));
				ck_assert_msg(na == nb && memcmp(ta, tb, na * sizeof(*ta)) == 0,
					      "%s '%s' (add %d, parse %d): directory [%s], GGUF [%s]",
					      e->d_name, esc, add, parse_special, wa, wb);
			}
			n_texts++;
		}
		free(inp);
	}
	closedir(dir);
	return n_texts;
}

/* The same special tokens, flags and pieces. */
static void compare_vocabularies(const loom_model *a, const loom_model *b)
{
	int32_t n = loom_model_n_vocab(a);
	ck_assert_int_eq(n, loom_model_n_vocab(b));
	ck_assert_int_eq(loom_token_bos(a), loom_token_bos(b));
	ck_assert_int_eq(loom_token_eos(a), loom_token_eos(b));
	ck_assert_int_eq(loom_model_adds_bos(a), loom_model_adds_bos(b));
	for (loom_token id = 0; id < n; id++) {
		ck_assert_msg(loom_token_is_eog(a, id) == loom_token_is_eog(b, id), "eog of %d", id);
		for (int special = 0; special < 2; special++) {
			char pa[256], pb[256];
			size_t la = piece(a, id, special, pa, sizeof(pa));
			size_t lb = piece(b, id, special, pb, sizeof(pb));
			ck_assert_msg(la == lb && memcmp(pa, pb, la) == 0, "piece of %d (special %d)", id,
				      special);
		}
	}
}

static void check_stories(const char *hf, const char *gguf)
{
	char dir[4096], file[4096], rel[256];
	snprintf(rel, sizeof(rel), "models/%s", hf);
	if (!test_data_path(dir, sizeof(dir), rel))
		return;
	snprintf(rel, sizeof(rel), "models/%s.gguf", gguf);
	ck_assert(test_data_path(file, sizeof(file), rel));
	loom_runtime *rt = test_runtime(NULL, 1);
	if (rt == NULL)
		return;
	loom_model *a = load_vocab(rt, dir), *b = load_vocab(rt, file);
	compare_vocabularies(a, b);
	int n_prompts = check_golden_prompts(a, gguf);
	int n_texts = compare_on_test_texts(a, b);
	printf("%s: %d golden prompts, %d test texts as %s.gguf\n", hf, n_prompts, n_texts, gguf);
	ck_assert(n_prompts > 0 && n_texts > 0);
	loom_model_free(b);
	loom_model_free(a);
	loom_runtime_free(rt);
}

START_TEST(test_stories260k_dir)
{
	check_stories("stories260K-hf", "stories260K-f32");
}
END_TEST

START_TEST(test_stories_d256_dir)
{
	check_stories("stories-llama-d256-hf", "stories-llama-d256-f32");
}
END_TEST

/* ------------------------------------------------------------------------ */
/* tokenizer.json made from llama.cpp's test vocabularies                   */

struct gguf_vocab {
	loom_model_file *file;
	const loom_string *tokens;
	uint64_t n;
	const int32_t *types;
	const float *scores;
	const loom_string *merges;
	uint64_t n_merges;
};

static bool open_gguf_vocab(const char *name, struct gguf_vocab *g)
{
	char path[4096], rel[256];
	const void *data;
	uint64_t n;
	snprintf(rel, sizeof(rel), "golden/tokenizer/%s", name);
	if (!test_data_path(path, sizeof(path), rel))
		return false;
	memset(g, 0, sizeof(*g));
	g->file = test_open_gguf(path);
	ck_assert_msg(g->file != NULL, "opening %s: %s", path, test_plugin_error());
	ck_assert(loom_meta_get_array(g->file, "tokenizer.ggml.tokens", LOOM_META_STRING, &data,
				      &g->n) == LOOM_OK);
	g->tokens = data;
	ck_assert(loom_meta_get_array(g->file, "tokenizer.ggml.token_type", LOOM_META_I32, &data, &n) ==
		  LOOM_OK);
	g->types = data;
	if (loom_meta_find(g->file, "tokenizer.ggml.scores") != NULL) {
		ck_assert(loom_meta_get_array(g->file, "tokenizer.ggml.scores", LOOM_META_F32, &data,
					      &n) == LOOM_OK);
		g->scores = data;
	}
	if (loom_meta_find(g->file, "tokenizer.ggml.merges") != NULL) {
		ck_assert(loom_meta_get_array(g->file, "tokenizer.ggml.merges", LOOM_META_STRING,
					      &data, &g->n_merges) == LOOM_OK);
		g->merges = data;
	}
	return true;
}

/* A NUL-terminated copy of s in buf (tokens never hold a NUL). */
static const char *cstr(loom_string s, char *buf, size_t size)
{
	ck_assert(s.len < size && memchr(s.data, '\0', s.len) == NULL);
	memcpy(buf, s.data, s.len);
	buf[s.len] = '\0';
	return buf;
}

/* Every token in model.vocab; control, unknown and user-defined tokens
 * also in added_tokens, as Hugging Face lists them. */
static void add_vocab(cJSON *tok, cJSON *model, const struct gguf_vocab *g)
{
	cJSON *vocab = cJSON_CreateObject(), *added = cJSON_CreateArray();
	for (uint64_t i = 0; i < g->n; i++) {
		char text[8192];
		cstr(g->tokens[i], text, sizeof(text));
		cJSON_AddItemToObject(vocab, text, cJSON_CreateNumber((double)i));
		if (g->types[i] != 2 && g->types[i] != 3 && g->types[i] != 4)
			continue;
		cJSON *a = cJSON_CreateObject();
		cJSON_AddNumberToObject(a, "id", (double)i);
		cJSON_AddStringToObject(a, "content", text);
		cJSON_AddBoolToObject(a, "single_word", false);
		cJSON_AddBoolToObject(a, "lstrip", false);
		cJSON_AddBoolToObject(a, "rstrip", false);
		cJSON_AddBoolToObject(a, "normalized", g->types[i] == 4);
		cJSON_AddBoolToObject(a, "special", g->types[i] != 4);
		cJSON_AddItemToArray(added, a);
	}
	cJSON_AddItemToObject(model, "vocab", vocab);
	cJSON_AddItemToObject(tok, "added_tokens", added);
}

/* GGUF's merges, as "left right" or as ["left", "right"]. */
static cJSON *byte_level_merges(const struct gguf_vocab *g, bool pairs)
{
	cJSON *merges = cJSON_CreateArray();
	for (uint64_t i = 0; i < g->n_merges; i++) {
		char text[8192];
		cstr(g->merges[i], text, sizeof(text));
		char *space = strchr(text, ' ');
		ck_assert(space != NULL);
		if (!pairs) {
			cJSON_AddItemToArray(merges, cJSON_CreateString(text));
			continue;
		}
		*space = '\0';
		cJSON *pair = cJSON_CreateArray();
		cJSON_AddItemToArray(pair, cJSON_CreateString(text));
		cJSON_AddItemToArray(pair, cJSON_CreateString(space + 1));
		cJSON_AddItemToArray(merges, pair);
	}
	return merges;
}

/* A text -> id map of the GGUF's tokens (later ids win, as in Python's
 * dict of a SentencePiece model). */
struct text_map {
	int64_t *slots;
	size_t mask;
	const struct gguf_vocab *g;
};

static uint64_t fnv(const char *s, size_t n)
{
	uint64_t h = 0xcbf29ce484222325u;
	for (size_t i = 0; i < n; i++)
		h = (h ^ (unsigned char)s[i]) * 0x100000001b3u;
	return h;
}

static size_t map_slot(const struct text_map *m, const char *s, size_t n)
{
	size_t i = fnv(s, n) & m->mask;
	while (m->slots[i] >= 0 &&
	       !(m->g->tokens[m->slots[i]].len == n && memcmp(m->g->tokens[m->slots[i]].data, s, n) == 0))
		i = (i + 1) & m->mask;
	return i;
}

static void map_build(struct text_map *m, const struct gguf_vocab *g)
{
	size_t size = 16;
	while (size < 2 * g->n)
		size *= 2;
	m->slots = malloc(size * sizeof(*m->slots));
	ck_assert(m->slots != NULL);
	memset(m->slots, 0xff, size * sizeof(*m->slots));
	m->mask = size - 1;
	m->g = g;
	for (uint64_t i = 0; i < g->n; i++)
		m->slots[map_slot(m, g->tokens[i].data, g->tokens[i].len)] = (int64_t)i;
}

static int64_t map_find(const struct text_map *m, const char *s, size_t n)
{
	return m->slots[map_slot(m, s, n)];
}

static const float *sort_scores;

/* Higher score first, then lower id. */
static int by_score(const void *pa, const void *pb)
{
	int64_t a = *(const int64_t *)pa, b = *(const int64_t *)pb;
	if (sort_scores[a] != sort_scores[b])
		return sort_scores[a] > sort_scores[b] ? -1 : 1;
	return (a > b) - (a < b);
}

static int by_pair(const void *pa, const void *pb)
{
	const int64_t *a = pa, *b = pb;
	if (a[0] != b[0])
		return (a[0] > b[0]) - (a[0] < b[0]);
	return (a[1] > b[1]) - (a[1] < b[1]);
}

static void add_pair(cJSON *merges, const struct gguf_vocab *g, int64_t l, int64_t r)
{
	char a[8192], b[8192];
	cJSON *pair = cJSON_CreateArray();
	cJSON_AddItemToArray(pair, cJSON_CreateString(cstr(g->tokens[l], a, sizeof(a))));
	cJSON_AddItemToArray(pair, cJSON_CreateString(cstr(g->tokens[r], b, sizeof(b))));
	cJSON_AddItemToArray(merges, pair);
}

/* The merges transformers' SentencePieceExtractor derives from a
 * SentencePiece model: every split of every piece into two pieces, the
 * pieces taken by falling score (a stable sort), each piece's splits by the
 * ids of their parts. */
static cJSON *spm_merges(const struct gguf_vocab *g)
{
	struct text_map map;
	map_build(&map, g);
	int64_t *order = malloc(g->n * sizeof(*order)), (*local)[2] = malloc(1024 * sizeof(*local));
	ck_assert(order != NULL && local != NULL);
	for (uint64_t i = 0; i < g->n; i++)
		order[i] = (int64_t)i;
	sort_scores = g->scores;
	qsort(order, g->n, sizeof(*order), by_score);
	cJSON *merges = cJSON_CreateArray();
	for (uint64_t k = 0; k < g->n; k++) {
		const char *s = g->tokens[order[k]].data;
		size_t len = g->tokens[order[k]].len, n_local = 0;
		for (size_t cut = 1; cut < len; cut++) {
			if (((unsigned char)s[cut] & 0xc0) == 0x80)
				continue;
			int64_t l = map_find(&map, s, cut), r = map_find(&map, s + cut, len - cut);
			if (l >= 0 && r >= 0 && n_local < 1024) {
				local[n_local][0] = l;
				local[n_local++][1] = r;
			}
		}
		qsort(local, n_local, sizeof(*local), by_pair);
		for (size_t i = 0; i < n_local; i++)
			add_pair(merges, g, local[i][0], local[i][1]);
	}
	free(local);
	free(order);
	free(map.slots);
	return merges;
}

enum family {
	FAMILY_GPT2,      /* ByteLevel alone */
	FAMILY_STARCODER, /* Digits, then ByteLevel */
	FAMILY_SPM,       /* SentencePiece converted */
	FAMILY_BERT,      /* WordPiece */
};

static cJSON *family_tokenizer(const struct gguf_vocab *g, enum family f, bool nfc)
{
	cJSON *tok = cJSON_CreateObject(), *model = cJSON_CreateObject();
	cJSON_AddStringToObject(tok, "version", "1.0");
	cJSON_AddNullToObject(tok, "truncation");
	cJSON_AddNullToObject(tok, "padding");
	cJSON_AddStringToObject(model, "type", "BPE");
	cJSON_AddNullToObject(model, "dropout");
	cJSON_AddNullToObject(model, "continuing_subword_prefix");
	cJSON_AddNullToObject(model, "end_of_word_suffix");
	cJSON_AddBoolToObject(model, "ignore_merges", false);
	add_vocab(tok, model, g);
	if (f == FAMILY_SPM) {
		cJSON_AddStringToObject(model, "unk_token", "<unk>");
		cJSON_AddBoolToObject(model, "fuse_unk", true);
		cJSON_AddBoolToObject(model, "byte_fallback", true);
		cJSON_AddItemToObject(model, "merges", spm_merges(g));
		cJSON_AddItemToObject(tok, "normalizer",
				      parse("{\"type\": \"Sequence\", \"normalizers\": ["
					    "{\"type\": \"Prepend\", \"prepend\": \"" SPACE "\"},"
					    "{\"type\": \"Replace\", \"pattern\": {\"String\": \" \"}, "
					    "\"content\": \"" SPACE "\"}]}"));
		cJSON_AddNullToObject(tok, "pre_tokenizer");
		cJSON_AddItemToObject(tok, "decoder",
				      parse("{\"type\": \"Sequence\", \"decoders\": ["
					    "{\"type\": \"Replace\", \"pattern\": {\"String\": \"" SPACE "\"}, "
					    "\"content\": \" \"}, {\"type\": \"ByteFallback\"}, "
					    "{\"type\": \"Fuse\"}, {\"type\": \"Strip\", \"content\": \" \", "
					    "\"start\": 1, \"stop\": 0}]}"));
	} else {
		cJSON_AddNullToObject(model, "unk_token");
		cJSON_AddBoolToObject(model, "fuse_unk", false);
		cJSON_AddBoolToObject(model, "byte_fallback", false);
		cJSON_AddItemToObject(model, "merges", byte_level_merges(g, f == FAMILY_STARCODER));
		if (nfc)
			cJSON_AddItemToObject(tok, "normalizer", parse("{\"type\": \"NFC\"}"));
		else
			cJSON_AddNullToObject(tok, "normalizer");
		cJSON_AddItemToObject(tok, "pre_tokenizer",
				      parse(f == FAMILY_GPT2 ? BYTE_LEVEL_GPT2 : SEQUENCE(DIGITS, BYTE_LEVEL_GPT2)));
		cJSON_AddItemToObject(tok, "decoder", parse(BYTE_LEVEL_GPT2));
	}
	cJSON_AddNullToObject(tok, "post_processor");
	cJSON_AddItemToObject(tok, "model", model);
	return tok;
}

/* BERT's WordPiece vocabulary as Hugging Face has it: the GGUF's "▁word"
 * is "word", its continuation "ing" is "##ing". */
static cJSON *bert_tokenizer(const struct gguf_vocab *g)
{
	cJSON *tok = parse("{\"version\": \"1.0\", \"truncation\": null, \"padding\": null,"
			   "\"normalizer\": {\"type\": \"BertNormalizer\", \"clean_text\": true, "
			   "\"handle_chinese_chars\": true, \"strip_accents\": null, \"lowercase\": true},"
			   "\"pre_tokenizer\": {\"type\": \"BertPreTokenizer\"},"
			   "\"post_processor\": {\"type\": \"TemplateProcessing\", \"single\": ["
			   "{\"SpecialToken\": {\"id\": \"[CLS]\", \"type_id\": 0}},"
			   "{\"Sequence\": {\"id\": \"A\", \"type_id\": 0}},"
			   "{\"SpecialToken\": {\"id\": \"[SEP]\", \"type_id\": 0}}],"
			   "\"special_tokens\": {\"[CLS]\": {\"id\": \"[CLS]\", \"ids\": [101]},"
			   "\"[SEP]\": {\"id\": \"[SEP]\", \"ids\": [102]}}},"
			   "\"decoder\": {\"type\": \"WordPiece\", \"prefix\": \"##\", \"cleanup\": true},"
			   "\"model\": {\"type\": \"WordPiece\", \"unk_token\": \"[UNK]\", "
			   "\"continuing_subword_prefix\": \"##\", \"max_input_chars_per_word\": 100}}");
	cJSON *vocab = cJSON_CreateObject(), *added = cJSON_CreateArray();
	for (uint64_t i = 0; i < g->n; i++) {
		char text[8192], name[8200];
		cstr(g->tokens[i], text, sizeof(text));
		size_t n = strlen(text);
		if (n >= 2 && text[0] == '[' && text[n - 1] == ']')
			snprintf(name, sizeof(name), "%s", text);
		else if (strncmp(text, SPACE, 3) == 0)
			snprintf(name, sizeof(name), "%s", text + 3);
		else
			snprintf(name, sizeof(name), "##%s", text);
		cJSON_AddNumberToObject(vocab, name, (double)i);
		if (g->types[i] != 3)
			continue;
		cJSON *a = cJSON_CreateObject();
		cJSON_AddNumberToObject(a, "id", (double)i);
		cJSON_AddStringToObject(a, "content", name);
		cJSON_AddBoolToObject(a, "special", true);
		cJSON_AddItemToArray(added, a);
	}
	cJSON_AddItemToObject(cJSON_GetObjectItem(tok, "model"), "vocab", vocab);
	cJSON_AddItemToObject(tok, "added_tokens", added);
	return tok;
}

/* tokenizer_config.json naming the GGUF's special tokens and flags. */
static cJSON *family_config(const struct gguf_vocab *g)
{
	static const struct {
		const char *key, *name;
	} roles[] = {
		{"tokenizer.ggml.bos_token_id", "bos_token"},
		{"tokenizer.ggml.eos_token_id", "eos_token"},
		{"tokenizer.ggml.unknown_token_id", "unk_token"},
		{"tokenizer.ggml.padding_token_id", "pad_token"},
	};
	cJSON *config = cJSON_CreateObject();
	for (size_t i = 0; i < sizeof(roles) / sizeof(roles[0]); i++) {
		int64_t id;
		char text[8192];
		if (loom_meta_find(g->file, roles[i].key) == NULL)
			continue;
		ck_assert(loom_meta_get_int(g->file, roles[i].key, &id) == LOOM_OK);
		cJSON_AddStringToObject(config, roles[i].name, cstr(g->tokens[id], text, sizeof(text)));
	}
	bool flag;
	if (loom_meta_get_bool(g->file, "tokenizer.ggml.add_bos_token", &flag) == LOOM_OK)
		cJSON_AddBoolToObject(config, "add_bos_token", flag);
	if (loom_meta_get_bool(g->file, "tokenizer.ggml.add_eos_token", &flag) == LOOM_OK)
		cJSON_AddBoolToObject(config, "add_eos_token", flag);
	return config;
}

/* Every case of <name>.inp gives exactly the ids of <name>.out. */
static void check_cases(const loom_model *m, const char *name)
{
	char rel[256], path[4096];
	static loom_token want[MAX_TOKENS], got[MAX_TOKENS];
	snprintf(rel, sizeof(rel), "golden/tokenizer/%s.inp", name);
	ck_assert(test_data_path(path, sizeof(path), rel));
	char *inp = test_read_file(path, NULL);
	snprintf(rel, sizeof(rel), "golden/tokenizer/%s.out", name);
	ck_assert(test_data_path(path, sizeof(path), rel));
	char *out = test_read_file(path, NULL), *next_out = out;
	ck_assert(inp != NULL && out != NULL);
	size_t n_cases = 0;
	for (char *text = inp, *sep; (sep = strstr(text, CASE_SEPARATOR)) != NULL;
	     text = sep + strlen(CASE_SEPARATOR), n_cases++) {
		size_t len = (size_t)(sep - text), n_want = 0;
		char *eol = strchr(next_out, '\n');
		ck_assert_msg(eol != NULL, "%s.out has fewer lines than cases", name);
		*eol = '\0';
		for (char *p = next_out, *end;; p = end) {
			long id = strtol(p, &end, 10);
			if (end == p)
				break;
			want[n_want++] = (loom_token)id;
		}
		next_out = eol + 1;
		size_t n = tokenize(m, text, len, false, false, got);
		char esc[256], w[1024], g[1024];
		test_escape(text, len, esc, sizeof(esc));
		test_format_tokens(want, n_want, w, sizeof(w));
		test_format_tokens(got, n, g, sizeof(g));
		ck_assert_msg(n == n_want && memcmp(got, want, n * sizeof(*got)) == 0,
			      "%s case %zu '%s': expected [%s], got [%s]", name, n_cases, esc, w, g);
	}
	printf("%s as tokenizer.json: %zu cases match\n", name, n_cases);
	ck_assert(n_cases > 0);
	free(out);
	free(inp);
}

/* Writes name's vocabulary as a family's tokenizer.json, loads the
 * directory and checks llama.cpp's cases, the special tokens and pre. */
static void check_family(const char *name, enum family f, bool nfc, const char *pre)
{
	struct gguf_vocab g;
	char gguf_name[256], dir[4096], path[4096];
	snprintf(gguf_name, sizeof(gguf_name), "ggml-vocab-%s.gguf", name);
	if (!open_gguf_vocab(gguf_name, &g))
		return;
	hf_dir(dir, sizeof(dir), gguf_name, NULL);
	write_json(dir, "tokenizer.json", f == FAMILY_BERT ? bert_tokenizer(&g) : family_tokenizer(&g, f, nfc));
	if (f == FAMILY_BERT)
		write_text(dir, "tokenizer_config.json",
			   "{\"cls_token\": \"[CLS]\", \"sep_token\": \"[SEP]\", \"unk_token\": \"[UNK]\", "
			   "\"pad_token\": \"[PAD]\", \"mask_token\": \"[MASK]\"}");
	else
		write_json(dir, "tokenizer_config.json", family_config(&g));
	test_close_gguf(g.file);
	loom_runtime *rt = test_runtime(NULL, 1);
	if (rt == NULL)
		return;
	loom_model *m = load_vocab(rt, dir);
	snprintf(path, sizeof(path), "%s/golden/tokenizer/%s", test_data_dir(), gguf_name);
	loom_model *ref = load_vocab(rt, path);
	ck_assert_int_eq(loom_model_n_vocab(m), loom_model_n_vocab(ref));
	ck_assert_int_eq(loom_token_bos(m), loom_token_bos(ref));
	ck_assert_int_eq(loom_token_eos(m), loom_token_eos(ref));
	ck_assert_int_eq(loom_model_adds_bos(m), loom_model_adds_bos(ref));
	if (pre != NULL) {
		char want_pre[64];
		snprintf(want_pre, sizeof(want_pre), "\"%s\"", pre);
		expect_meta(m, "tokenizer.ggml.pre", want_pre);
	}
	check_cases(m, gguf_name);
	loom_model_free(ref);
	loom_model_free(m);
	loom_runtime_free(rt);
}

START_TEST(test_family_gpt2)
{
	check_family("gpt-2", FAMILY_GPT2, false, "gpt-2");
}
END_TEST

START_TEST(test_family_mpt)
{
	/* MPT (GPT-NeoX's tokenizer) declares NFC and GPT-2's pre-tokenizer. */
	check_family("mpt", FAMILY_GPT2, true, "gpt-2");
}
END_TEST

START_TEST(test_family_starcoder)
{
	check_family("starcoder", FAMILY_STARCODER, false, "starcoder");
}
END_TEST

START_TEST(test_family_refact)
{
	check_family("refact", FAMILY_STARCODER, false, "starcoder");
}
END_TEST

START_TEST(test_family_llama_spm)
{
	check_family("llama-spm", FAMILY_SPM, false, "default");
}
END_TEST

START_TEST(test_family_bert)
{
	check_family("bert-bge", FAMILY_BERT, false, NULL);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* The mapping                                                              */

static loom_model *load_tiny(loom_runtime *rt, const char *name, const char *pre, bool ignore_merges,
			     const char *config)
{
	char dir[4096];
	hf_dir(dir, sizeof(dir), name, config);
	write_json(dir, "tokenizer.json", tiny_byte_level(pre, ignore_merges));
	return load_vocab(rt, dir);
}

START_TEST(test_pre_names)
{
	static const struct {
		const char *pre;
		bool ignore_merges;
		const char *name;
	} cases[] = {
		{BYTE_LEVEL_GPT2, false, "\"gpt-2\""},
		{"{\"type\": \"ByteLevel\", \"add_prefix_space\": false, \"trim_offsets\": true}", false,
		 "\"gpt-2\""},
		{SEQUENCE(SPLIT(HF_LLAMA3), BYTE_LEVEL_ONLY), true, "\"llama-bpe\""},
		{SEQUENCE(SPLIT(HF_LLAMA3), BYTE_LEVEL_ONLY), false, "\"smaug-bpe\""},
		{SEQUENCE(SPLIT(HF_QWEN2), BYTE_LEVEL_ONLY), false, "\"qwen2\""},
		{SEQUENCE(DIGITS, BYTE_LEVEL_GPT2), false, "\"starcoder\""},
	};
	loom_runtime *rt = test_runtime(NULL, 1);
	if (rt == NULL)
		return;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		loom_model *m = load_tiny(rt, "hf_pre", cases[i].pre, cases[i].ignore_merges, NULL);
		expect_meta(m, "tokenizer.ggml.pre", cases[i].name);
		expect_meta(m, "tokenizer.ggml.model", "\"gpt2\"");
		expect_no_meta(m, "tokenizer.ggml.scores");
		/* both spellings of merges work: "Ġthe" needs all three */
		loom_token t[8];
		size_t n = tokenize(m, " the", 4, false, false, t);
		ck_assert_msg(n == 1 && t[0] == 258, "case %zu: ' the' gave %zu tokens, first %d", i, n,
			      t[0]);
		/* added tokens: special ones are control, the other user-defined */
		n = tokenize(m, "<extra><s>", 10, false, false, t);
		ck_assert_int_eq(n, 4);
		ck_assert_int_eq(t[0], TINY_EXTRA);
		loom_model_free(m);
	}
	loom_runtime_free(rt);
}
END_TEST

START_TEST(test_special_tokens)
{
	char dir[4096];
	loom_runtime *rt = test_runtime(NULL, 1);
	if (rt == NULL)
		return;

	/* tokenizer_config.json: strings or AddedToken objects, and the flags */
	hf_dir(dir, sizeof(dir), "hf_specials_config", NULL);
	write_json(dir, "tokenizer.json", tiny_byte_level(BYTE_LEVEL_GPT2, false));
	write_text(dir, "tokenizer_config.json",
		   "{\"bos_token\": {\"__type\": \"AddedToken\", \"content\": \"<s>\"}, "
		   "\"eos_token\": \"</s>\", \"pad_token\": null, \"add_bos_token\": true}");
	loom_model *m = load_vocab(rt, dir);
	ck_assert_int_eq(loom_token_bos(m), TINY_BOS);
	ck_assert_int_eq(loom_token_eos(m), TINY_EOS);
	ck_assert(loom_model_adds_bos(m));
	loom_token t[8];
	ck_assert_int_eq(tokenize(m, "the", 3, true, false, t), 3);
	ck_assert_int_eq(t[0], TINY_BOS);
	expect_meta(m, "tokenizer.ggml.add_eos_token", "false");
	expect_no_meta(m, "tokenizer.ggml.padding_token_id");
	expect_meta(m, "tokenizer.loom.eog_token_ids", "[1 x i32] 263");
	loom_model_free(m);

	/* special_tokens_map.json, and the post-processor's template adding
	 * BOS and EOS */
	hf_dir(dir, sizeof(dir), "hf_specials_map", NULL);
	cJSON *tok = tiny_byte_level(BYTE_LEVEL_GPT2, false);
	cJSON_ReplaceItemInObject(
		tok, "post_processor",
		parse("{\"type\": \"Sequence\", \"processors\": [{\"type\": \"ByteLevel\"}, "
		      "{\"type\": \"TemplateProcessing\", \"single\": ["
		      "{\"SpecialToken\": {\"id\": \"<s>\", \"type_id\": 0}}, "
		      "{\"Sequence\": {\"id\": \"A\", \"type_id\": 0}}, "
		      "{\"SpecialToken\": {\"id\": \"</s>\", \"type_id\": 0}}], "
		      "\"special_tokens\": {\"<s>\": {\"id\": \"<s>\", \"ids\": [262]}}}]}"));
	write_json(dir, "tokenizer.json", tok);
	write_text(dir, "special_tokens_map.json", "{\"bos_token\": \"<s>\", \"eos_token\": \"</s>\"}");
	m = load_vocab(rt, dir);
	ck_assert_int_eq(loom_token_bos(m), TINY_BOS);
	ck_assert_int_eq(loom_token_eos(m), TINY_EOS);
	ck_assert_int_eq(tokenize(m, "the", 3, true, false, t), 4);
	ck_assert_int_eq(t[0], TINY_BOS);
	ck_assert_int_eq(t[3], TINY_EOS);
	loom_model_free(m);

	/* config.json's ids, eos a list; generation_config.json's list: every
	 * end-of-generation id once, generation_config.json's first */
	hf_dir(dir, sizeof(dir), "hf_specials_ids",
	       "{\"model_type\": \"llama\", \"bos_token_id\": 262, \"eos_token_id\": [263, 264]}");
	write_json(dir, "tokenizer.json", tiny_byte_level(BYTE_LEVEL_GPT2, false));
	write_text(dir, "generation_config.json", "{\"eos_token_id\": [264, 265], \"bos_token_id\": 262}");
	m = load_vocab(rt, dir);
	ck_assert_int_eq(loom_token_bos(m), TINY_BOS);
	ck_assert_int_eq(loom_token_eos(m), TINY_EOS);
	ck_assert(!loom_model_adds_bos(m));
	expect_meta(m, "tokenizer.loom.eog_token_ids", "[3 x i32] 264, 265, 263");
	loom_model_free(m);
	loom_runtime_free(rt);
}
END_TEST

START_TEST(test_chat_templates)
{
	char dir[4096];
	loom_runtime *rt = test_runtime(NULL, 1);
	if (rt == NULL)
		return;
	hf_dir(dir, sizeof(dir), "hf_template_list", NULL);
	write_json(dir, "tokenizer.json", tiny_byte_level(BYTE_LEVEL_GPT2, false));
	write_text(dir, "tokenizer_config.json",
		   "{\"chat_template\": [{\"name\": \"default\", \"template\": \"{{ A }}\"}, "
		   "{\"name\": \"tool use\", \"template\": \"{{ B }}\"}]}");
	/* tokenizer_config.json's wins over the file */
	write_text(dir, "chat_template.jinja", "{{ C }}");
	loom_model *m = load_vocab(rt, dir);
	expect_meta(m, "tokenizer.chat_template", "\"{{ A }}\"");
	expect_meta(m, "tokenizer.chat_template.tool_use", "\"{{ B }}\"");
	expect_meta(m, "tokenizer.chat_templates", "[1 x string] \"tool_use\"");
	loom_model_free(m);

	hf_dir(dir, sizeof(dir), "hf_template_jinja", NULL);
	write_json(dir, "tokenizer.json", tiny_byte_level(BYTE_LEVEL_GPT2, false));
	write_text(dir, "tokenizer_config.json", "{\"eos_token\": \"</s>\"}");
	write_text(dir, "chat_template.jinja", "{{ C }}");
	m = load_vocab(rt, dir);
	expect_meta(m, "tokenizer.chat_template", "\"{{ C }}\"");
	loom_model_free(m);
	loom_runtime_free(rt);
}
END_TEST

/* A directory without tokenizer.json has no tokenizer keys: its metadata
 * loads, a vocabulary does not. */
START_TEST(test_no_tokenizer)
{
	char dir[4096];
	loom_runtime *rt = test_runtime(NULL, 1);
	if (rt == NULL)
		return;
	hf_dir(dir, sizeof(dir), "hf_no_tokenizer", NULL);
	loom_model_params mp = loom_model_default_params();
	mp.metadata_only = true;
	loom_model *m = NULL;
	ck_assert_msg(loom_model_load(rt, dir, &mp, &m) == LOOM_OK, "%s", loom_last_error());
	expect_no_meta(m, "tokenizer.ggml.model");
	loom_model_free(m);
	ck_assert(try_load(rt, dir, &m) != LOOM_OK);
	loom_runtime_free(rt);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Broken and unsupported files                                             */

/* A directory whose tokenizer.json is the tiny one edited by edit. */
static const char *tiny_dir_edited(char *dir, size_t size, const char *name,
				   void (*edit)(cJSON *tok))
{
	hf_dir(dir, size, name, NULL);
	cJSON *tok = tiny_byte_level(BYTE_LEVEL_GPT2, false);
	edit(tok);
	write_json(dir, "tokenizer.json", tok);
	return dir;
}

static cJSON *model_of(cJSON *tok)
{
	return cJSON_GetObjectItem(tok, "model");
}

static void make_unigram(cJSON *tok)
{
	cJSON_ReplaceItemInObject(model_of(tok), "type", cJSON_CreateString("Unigram"));
}

static void make_unknown_regex(cJSON *tok)
{
	cJSON_ReplaceItemInObject(tok, "pre_tokenizer",
				  parse(SEQUENCE(SPLIT("\\\\p{L}+|\\\\p{N}+"), BYTE_LEVEL_ONLY)));
}

static void make_id_out_of_range(cJSON *tok)
{
	cJSON *a = cJSON_GetArrayItem(cJSON_GetObjectItem(tok, "added_tokens"), 3);
	cJSON_ReplaceItemInObject(a, "id", cJSON_CreateNumber(1000000000));
}

static void make_two_texts(cJSON *tok)
{
	cJSON *a = cJSON_GetArrayItem(cJSON_GetObjectItem(tok, "added_tokens"), 3);
	cJSON_ReplaceItemInObject(a, "id", cJSON_CreateNumber(TINY_BOS));
}

static void make_lowercase(cJSON *tok)
{
	cJSON_ReplaceItemInObject(tok, "normalizer",
				  parse("{\"type\": \"Sequence\", \"normalizers\": [{\"type\": \"NFC\"}, "
					"{\"type\": \"Lowercase\"}]}"));
}

static void make_bad_merge(cJSON *tok)
{
	cJSON_AddItemToArray(cJSON_GetObjectItem(model_of(tok), "merges"), cJSON_CreateString("x yz"));
}

static void make_prefix_space(cJSON *tok)
{
	cJSON_ReplaceItemInObject(tok, "pre_tokenizer",
				  parse("{\"type\": \"ByteLevel\", \"add_prefix_space\": true}"));
}

START_TEST(test_broken_files)
{
	char dir[4096];
	loom_runtime *rt = test_runtime(NULL, 1);
	if (rt == NULL)
		return;

	hf_dir(dir, sizeof(dir), "hf_bad_json", NULL);
	write_text(dir, "tokenizer.json", "{\"model\": {\"type\": \"BPE\",\n \"vocab\": [}");
	expect_load_error(rt, dir, "tokenizer.json", "JSON syntax error");

	hf_dir(dir, sizeof(dir), "hf_bad_config_json", NULL);
	write_json(dir, "tokenizer.json", tiny_byte_level(BYTE_LEVEL_GPT2, false));
	write_text(dir, "tokenizer_config.json", "{\"bos_token\": ");
	expect_load_error(rt, dir, "tokenizer_config.json", "JSON syntax error");

	tiny_dir_edited(dir, sizeof(dir), "hf_unigram", make_unigram);
	expect_load_error(rt, dir, "tokenizer.json", "'Unigram'");
	tiny_dir_edited(dir, sizeof(dir), "hf_unknown_regex", make_unknown_regex);
	expect_load_error(rt, dir, "tokenizer.json", "\\\\p{L}+|\\\\p{N}+");
	tiny_dir_edited(dir, sizeof(dir), "hf_id_range", make_id_out_of_range);
	expect_load_error(rt, dir, "'<extra>'", "out of range");
	tiny_dir_edited(dir, sizeof(dir), "hf_two_texts", make_two_texts);
	expect_load_error(rt, dir, "id 262", "'<extra>'");
	tiny_dir_edited(dir, sizeof(dir), "hf_lowercase", make_lowercase);
	expect_load_error(rt, dir, "normalizer", "Lowercase");
	tiny_dir_edited(dir, sizeof(dir), "hf_bad_merge", make_bad_merge);
	expect_load_error(rt, dir, "model.merges[3]", "'yz' is not in the vocabulary");
	tiny_dir_edited(dir, sizeof(dir), "hf_prefix_space", make_prefix_space);
	expect_load_error(rt, dir, "add_prefix_space", NULL);

	/* an id beyond config.json's vocab_size */
	hf_dir(dir, sizeof(dir), "hf_no_tokens", NULL);
	write_text(dir, "tokenizer.json", "{\"model\": {\"type\": \"BPE\", \"vocab\": {}, \"merges\": []}}");
	expect_load_error(rt, dir, "tokenizer.json", "neither byte_fallback nor a ByteLevel");
	write_text(dir, "tokenizer.json", "{\"pre_tokenizer\": " BYTE_LEVEL_GPT2 ", "
		   "\"model\": {\"type\": \"BPE\", \"vocab\": {}, \"merges\": []}}");
	expect_load_error(rt, dir, "tokenizer.json", "no tokens");

	hf_dir(dir, sizeof(dir), "hf_vocab_size", "{\"model_type\": \"llama\", \"vocab_size\": 264}");
	write_json(dir, "tokenizer.json", tiny_byte_level(BYTE_LEVEL_GPT2, false));
	expect_load_error(rt, dir, "out of range", "vocab_size is 264");

	/* an id a generation_config.json names that is no token */
	hf_dir(dir, sizeof(dir), "hf_eog_range", NULL);
	write_json(dir, "tokenizer.json", tiny_byte_level(BYTE_LEVEL_GPT2, false));
	write_text(dir, "generation_config.json", "{\"eos_token_id\": [263, 70000]}");
	expect_load_error(rt, dir, "generation_config.json", "70000");
	loom_runtime_free(rt);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* SentencePiece-style BPE                                                  */

/* A byte_fallback BPE over "a", "b", "c" and byte tokens: merges given. */
static cJSON *tiny_spm(const char *merges_json, const char *pre_tokenizer, const char *extra_token)
{
	char text[4096];
	int n = snprintf(text, sizeof(text),
			 "{\"version\": \"1.0\", \"added_tokens\": ["
			 "{\"id\": 0, \"content\": \"<unk>\", \"special\": true},"
			 "{\"id\": 1, \"content\": \"<s>\", \"special\": true},"
			 "{\"id\": 2, \"content\": \"</s>\", \"special\": true}],"
			 "\"normalizer\": %s, \"pre_tokenizer\": %s,"
			 "\"decoder\": {\"type\": \"Sequence\", \"decoders\": [{\"type\": \"Replace\", "
			 "\"pattern\": {\"String\": \"" SPACE "\"}, \"content\": \" \"}, "
			 "{\"type\": \"ByteFallback\"}, {\"type\": \"Fuse\"}]},"
			 "\"model\": {\"type\": \"BPE\", \"byte_fallback\": true, \"unk_token\": \"<unk>\","
			 "\"vocab\": {\"<unk>\": 0, \"<s>\": 1, \"</s>\": 2, \"<0x0A>\": 3, \"" SPACE "\": 4,"
			 "\"a\": 5, \"b\": 6, \"c\": 7, \"ab\": 8, \"bc\": 9, \"abc\": 10, \"" SPACE "a\": 11 %s},"
			 "\"merges\": %s}}",
			 pre_tokenizer == NULL
				 ? "{\"type\": \"Sequence\", \"normalizers\": [{\"type\": \"Prepend\", "
				   "\"prepend\": \"" SPACE "\"}, {\"type\": \"Replace\", \"pattern\": "
				   "{\"String\": \" \"}, \"content\": \"" SPACE "\"}]}"
				 : "null",
			 pre_tokenizer != NULL ? pre_tokenizer : "null",
			 extra_token != NULL ? extra_token : "", merges_json);
	ck_assert(n > 0 && (size_t)n < sizeof(text));
	return parse(text);
}

static loom_model *load_spm(loom_runtime *rt, const char *name, cJSON *tok)
{
	char dir[4096];
	hf_dir(dir, sizeof(dir), name, NULL);
	write_json(dir, "tokenizer.json", tok);
	return load_vocab(rt, dir);
}

/* Merges of every split, ordered as a SentencePiece conversion orders them:
 * the core's score order gives Hugging Face's rank order. */
START_TEST(test_spm_scores)
{
	loom_runtime *rt = test_runtime(NULL, 1);
	if (rt == NULL)
		return;
	/* "bc" before "ab": "abc" merges b+c first, then a+bc */
	loom_model *m = load_spm(rt, "hf_spm_bc",
				 tiny_spm("[\"b c\", \"a b\", \"a bc\", \"ab c\", \"" SPACE " a\"]", NULL, NULL));
	loom_token t[8];
	ck_assert_int_eq(tokenize(m, "abc", 3, false, false, t), 2);
	ck_assert_int_eq(t[0], 4); /* "▁" */
	ck_assert_int_eq(t[1], 10);
	/* no post-processor: nothing is added */
	ck_assert_int_eq(tokenize(m, "cab\n", 4, true, false, t), 4);
	ck_assert_int_eq(t[0], 4);
	ck_assert_int_eq(t[1], 7);
	ck_assert_int_eq(t[2], 8);
	ck_assert_int_eq(t[3], 3); /* "\n" by byte fallback */
	expect_meta(m, "tokenizer.ggml.model", "\"llama\"");
	expect_meta(m, "tokenizer.ggml.token_type", "[12 x i32] 2, 3, 3, 6, 1, 1, 1, 1, ...");
	expect_meta(m, "tokenizer.ggml.add_space_prefix", "true");
	loom_model_free(m);

	/* Metaspace without split, never prepending */
	m = load_spm(rt, "hf_spm_metaspace",
		     tiny_spm("[\"a b\", \"b c\", \"ab c\", \"a bc\", \"" SPACE " a\"]",
			      "{\"type\": \"Metaspace\", \"replacement\": \"" SPACE "\", "
			      "\"prepend_scheme\": \"never\", \"split\": false}", NULL));
	ck_assert_int_eq(tokenize(m, "abc a", 5, false, false, t), 2);
	ck_assert_int_eq(t[0], 10);
	ck_assert_int_eq(t[1], 11);
	expect_meta(m, "tokenizer.ggml.add_space_prefix", "false");
	loom_model_free(m);

	/* Gemma's: spaces replaced, no "▁" first, a split at spaces that finds
	 * none */
	cJSON *tok = tiny_spm("[\"a b\", \"b c\", \"ab c\", \"a bc\", \"" SPACE " a\"]", NULL, NULL);
	cJSON_ReplaceItemInObject(tok, "normalizer",
				  parse("{\"type\": \"Replace\", \"pattern\": {\"String\": \" \"}, "
					"\"content\": \"" SPACE "\"}"));
	cJSON_ReplaceItemInObject(tok, "pre_tokenizer",
				  parse("{\"type\": \"Split\", \"pattern\": {\"String\": \" \"}, "
					"\"behavior\": \"MergedWithPrevious\", \"invert\": false}"));
	m = load_spm(rt, "hf_spm_gemma", tok);
	ck_assert_int_eq(tokenize(m, "abc a", 5, false, false, t), 2);
	ck_assert_int_eq(t[0], 10);
	ck_assert_int_eq(t[1], 11);
	expect_meta(m, "tokenizer.ggml.add_space_prefix", "false");
	loom_model_free(m);
	loom_runtime_free(rt);
}
END_TEST

START_TEST(test_spm_unsupported)
{
	char dir[4096];
	loom_runtime *rt = test_runtime(NULL, 1);
	if (rt == NULL)
		return;
	/* merges learnt one per token: "abc" is also a + bc, which is no merge */
	hf_dir(dir, sizeof(dir), "hf_spm_learnt", NULL);
	write_json(dir, "tokenizer.json",
		   tiny_spm("[\"a b\", \"b c\", \"ab c\", \"" SPACE " a\"]", NULL, NULL));
	expect_load_error(rt, dir, "'abc' is 'a' + 'bc'", "model.merges does not list");

	/* merges making one token at ranks apart: a warning, not an error */
	hf_dir(dir, sizeof(dir), "hf_spm_apart", NULL);
	write_json(dir, "tokenizer.json",
		   tiny_spm("[\"a b\", \"b c\", \"ab c\", \"" SPACE " a\", \"a bc\"]", NULL, NULL));
	loom_model_free(load_vocab(rt, dir));

	/* Metaspace that splits words, with a token holding "▁" inside */
	hf_dir(dir, sizeof(dir), "hf_spm_split", NULL);
	write_json(dir, "tokenizer.json",
		   tiny_spm("[\"a b\", \"b c\", \"ab c\", \"a bc\", \"" SPACE " a\", \"a " SPACE "\"]",
			    "{\"type\": \"Metaspace\", \"replacement\": \"" SPACE "\", "
			    "\"prepend_scheme\": \"first\", \"split\": true}",
			    ", \"a" SPACE "\": 12"));
	expect_load_error(rt, dir, "Metaspace", "'a" SPACE "'");

	/* Metaspace splitting is no restriction without such tokens */
	hf_dir(dir, sizeof(dir), "hf_spm_split_ok", NULL);
	write_json(dir, "tokenizer.json",
		   tiny_spm("[\"a b\", \"b c\", \"ab c\", \"a bc\", \"" SPACE " a\"]",
			    "{\"type\": \"Metaspace\", \"replacement\": \"" SPACE "\", "
			    "\"prepend_scheme\": \"first\", \"split\": true}", NULL));
	loom_model_free(load_vocab(rt, dir));

	/* no "▁" for spaces */
	hf_dir(dir, sizeof(dir), "hf_spm_no_escape", NULL);
	cJSON *tok = tiny_spm("[\"a b\", \"b c\", \"ab c\", \"a bc\", \"" SPACE " a\"]", NULL, NULL);
	cJSON_ReplaceItemInObject(tok, "normalizer",
				  parse("{\"type\": \"Prepend\", \"prepend\": \"" SPACE "\"}"));
	write_json(dir, "tokenizer.json", tok);
	expect_load_error(rt, dir, "tokenizer.json", "Replace or Metaspace");
	loom_runtime_free(rt);
}
END_TEST

/* ------------------------------------------------------------------------ */

static Suite *hf_tokenizer_suite(void)
{
	Suite *s = suite_create("hf_tokenizer");
	TCase *real = tcase_create("stories");
	tcase_set_timeout(real, 300);
	tcase_add_test(real, test_stories260k_dir);
	tcase_add_test(real, test_stories_d256_dir);
	suite_add_tcase(s, real);

	TCase *family = tcase_create("families");
	tcase_set_timeout(family, 300);
	tcase_add_test(family, test_family_gpt2);
	tcase_add_test(family, test_family_mpt);
	tcase_add_test(family, test_family_starcoder);
	tcase_add_test(family, test_family_refact);
	tcase_add_test(family, test_family_llama_spm);
	tcase_add_test(family, test_family_bert);
	suite_add_tcase(s, family);

	TCase *mapping = tcase_create("mapping");
	tcase_add_test(mapping, test_pre_names);
	tcase_add_test(mapping, test_special_tokens);
	tcase_add_test(mapping, test_chat_templates);
	tcase_add_test(mapping, test_no_tokenizer);
	tcase_add_test(mapping, test_spm_scores);
	suite_add_tcase(s, mapping);

	TCase *broken = tcase_create("broken");
	tcase_add_test(broken, test_broken_files);
	tcase_add_test(broken, test_spm_unsupported);
	suite_add_tcase(s, broken);
	return s;
}

LOOM_TEST_MAIN(hf_tokenizer_suite)
