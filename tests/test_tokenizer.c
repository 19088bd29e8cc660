/*
 * test_tokenizer.c - the vocabulary and its tokenizers: SentencePiece-style,
 * byte-level BPE and WordPiece.
 *
 * Unit tests run on small vocabularies built in memory; golden tests compare
 * with what llama.cpp produced for its tokenizer test vocabularies, for the
 * synthetic models and for every golden prompt of every model.
 */
#include "check_main.h"
#include "test_text.h"
#include "fixture.h"
#include "gguf_writer.h"
#include "model/meta.h"
#include "plugin_host.h"
#include "testdata.h"
#include "text/vocab.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define SPACE "\xe2\x96\x81" /* "▁" */
#define MAX_TOKENS 4096

/* ------------------------------------------------------------------------ */
/* A vocabulary built in memory                                             */

#define FAKE_MAX_TOKENS 320
#define FAKE_MAX_MERGES 16
#define FAKE_MAX_KV 24

enum {
	T_NORMAL = 1,
	T_UNKNOWN = 2,
	T_CONTROL = 3,
	T_USER = 4,
	T_UNUSED = 5,
	T_BYTE = 6,
};

struct fake {
	loom_model_file file;
	loom_meta_kv kv[FAKE_MAX_KV];
	loom_string tokens[FAKE_MAX_TOKENS];
	float scores[FAKE_MAX_TOKENS];
	int32_t types[FAKE_MAX_TOKENS];
	char byte_names[256][8];
	int n_tokens;
	loom_string merges[FAKE_MAX_MERGES];
	int n_merges;
};

static loom_string str(const char *s)
{
	return (loom_string){.len = strlen(s), .data = s};
}

/* Sets key to value, replacing an earlier value. */
static void fake_set(struct fake *f, const char *key, loom_meta_value value)
{
	uint64_t i;
	for (i = 0; i < f->file.n_meta; i++)
		if (loom_string_eq(f->kv[i].key, key))
			break;
	ck_assert(i < FAKE_MAX_KV);
	f->kv[i] = (loom_meta_kv){.key = str(key), .value = value};
	if (i == f->file.n_meta)
		f->file.n_meta++;
}

static void fake_string(struct fake *f, const char *key, const char *value)
{
	fake_set(f, key, (loom_meta_value){.type = LOOM_META_STRING, .v.s = str(value)});
}

static void fake_u32(struct fake *f, const char *key, uint32_t value)
{
	fake_set(f, key, (loom_meta_value){.type = LOOM_META_U32, .v.u = value});
}

static void fake_bool(struct fake *f, const char *key, bool value)
{
	fake_set(f, key, (loom_meta_value){.type = LOOM_META_BOOL, .v.b = value});
}

static void fake_array(struct fake *f, const char *key, loom_meta_type type, const void *data,
		       int count)
{
	fake_set(f, key, (loom_meta_value){.type = LOOM_META_ARRAY, .elem_type = type,
					   .count = (uint64_t)count, .v.array = data});
}

static loom_token fake_token(struct fake *f, const char *text, float score, int type)
{
	ck_assert(f->n_tokens < FAKE_MAX_TOKENS);
	f->tokens[f->n_tokens] = str(text);
	f->scores[f->n_tokens] = score;
	f->types[f->n_tokens] = type;
	return f->n_tokens++;
}

/* Points the token arrays at what fake_token() added so far. */
static void fake_arrays(struct fake *f)
{
	fake_array(f, "tokenizer.ggml.tokens", LOOM_META_STRING, f->tokens, f->n_tokens);
	fake_array(f, "tokenizer.ggml.scores", LOOM_META_F32, f->scores, f->n_tokens);
	fake_array(f, "tokenizer.ggml.token_type", LOOM_META_I32, f->types, f->n_tokens);
}

static struct fake *fake_new(void)
{
	struct fake *f = calloc(1, sizeof(*f));
	ck_assert(f != NULL);
	f->file.struct_size = sizeof(f->file);
	f->file.format = "in-memory test";
	f->file.meta = f->kv;
	fake_string(f, "tokenizer.ggml.model", "llama");
	return f;
}

/* Ids of the tiny SentencePiece vocabulary below. */
enum {
	UNK = 0,
	BOS = 1,
	EOS = 2,
	BYTE0 = 3, /* <0x00>; <0xXX> is BYTE0 + 0xXX */
};

struct tiny {
	loom_token sp, h, e, l, o, he, ll, llo, hello, sp_hello, x, y, z, xy, yz, p, q, r, pq, qr,
		tool, tag, tag_bang, unused, end;
};

/* <unk> <s> </s>, the 256 byte tokens if with_bytes, and a few merges: the
 * scores make "▁hello" one token, built through he, ll, llo and hello. */
static struct fake *tiny_vocab(bool with_bytes, struct tiny *t)
{
	struct fake *f = fake_new();
	fake_token(f, "<unk>", 0, T_UNKNOWN);
	fake_token(f, "<s>", 0, T_CONTROL);
	fake_token(f, "</s>", 0, T_CONTROL);
	for (int b = 0; with_bytes && b < 256; b++) {
		snprintf(f->byte_names[b], sizeof(f->byte_names[b]), "<0x%02X>", b);
		fake_token(f, f->byte_names[b], 0, T_BYTE);
	}
	t->sp = fake_token(f, SPACE, -1, T_NORMAL);
	t->h = fake_token(f, "h", -2, T_NORMAL);
	t->e = fake_token(f, "e", -2, T_NORMAL);
	t->l = fake_token(f, "l", -2, T_NORMAL);
	t->o = fake_token(f, "o", -2, T_NORMAL);
	t->he = fake_token(f, "he", -3, T_NORMAL);
	t->ll = fake_token(f, "ll", -3, T_NORMAL);
	t->llo = fake_token(f, "llo", -4, T_NORMAL);
	t->hello = fake_token(f, "hello", -5, T_NORMAL);
	t->sp_hello = fake_token(f, SPACE "hello", -6, T_NORMAL);
	/* xy and yz tie: the left one wins. qr beats pq on score. */
	t->x = fake_token(f, "x", -2, T_NORMAL);
	t->y = fake_token(f, "y", -2, T_NORMAL);
	t->z = fake_token(f, "z", -2, T_NORMAL);
	t->xy = fake_token(f, "xy", -1, T_NORMAL);
	t->yz = fake_token(f, "yz", -1, T_NORMAL);
	t->p = fake_token(f, "p", -2, T_NORMAL);
	t->q = fake_token(f, "q", -2, T_NORMAL);
	t->r = fake_token(f, "r", -2, T_NORMAL);
	t->pq = fake_token(f, "pq", -1, T_NORMAL);
	t->qr = fake_token(f, "qr", -0.5f, T_NORMAL);
	t->tool = fake_token(f, "<tool>", 0, T_USER);
	t->tag = fake_token(f, "<tag>", 0, T_USER);
	t->tag_bang = fake_token(f, "<tag>!", 0, T_USER);
	t->unused = fake_token(f, "<unused0>", 0, T_UNUSED);
	t->end = fake_token(f, "<|end|>", 0, T_NORMAL);
	fake_arrays(f);
	fake_u32(f, "tokenizer.ggml.bos_token_id", BOS);
	fake_u32(f, "tokenizer.ggml.eos_token_id", EOS);
	fake_u32(f, "tokenizer.ggml.unknown_token_id", UNK);
	return f;
}

static loom_vocab *load_with(const loom_model_file *file, const loom_vocab_rules *rules)
{
	loom_vocab *v = NULL;
	loom_status st = loom_vocab_load(file, rules, &v);
	ck_assert_msg(st == LOOM_OK, "loom_vocab_load: %s (%s)", loom_strerror(st), loom_last_error());
	return v;
}

static loom_vocab *load_ok(const loom_model_file *file)
{
	return load_with(file, NULL);
}

static void load_fails(const loom_model_file *file, loom_status want, const char *in_message)
{
	static char sentinel;
	loom_vocab *v = (loom_vocab *)&sentinel; /* must be reset to NULL */
	loom_status st = loom_vocab_load(file, NULL, &v);
	ck_assert_msg(st == want, "loom_vocab_load gave %s (%s), expected %s", loom_strerror(st),
		      loom_last_error(), loom_strerror(want));
	ck_assert_ptr_null(v);
	ck_assert_msg(strstr(loom_last_error(), in_message) != NULL,
		      "error message '%s' does not mention '%s'", loom_last_error(), in_message);
}

/* ------------------------------------------------------------------------ */
/* Helpers                                                                  */

static size_t put_utf8(char *out, unsigned cp)
{
	if (cp < 0x80) {
		out[0] = (char)cp;
		return 1;
	}
	if (cp < 0x800) {
		out[0] = (char)(0xc0 | cp >> 6);
		out[1] = (char)(0x80 | (cp & 0x3f));
		return 2;
	}
	if (cp < 0x10000) {
		out[0] = (char)(0xe0 | cp >> 12);
		out[1] = (char)(0x80 | (cp >> 6 & 0x3f));
		out[2] = (char)(0x80 | (cp & 0x3f));
		return 3;
	}
	out[0] = (char)(0xf0 | cp >> 18);
	out[1] = (char)(0x80 | (cp >> 12 & 0x3f));
	out[2] = (char)(0x80 | (cp >> 6 & 0x3f));
	out[3] = (char)(0x80 | (cp & 0x3f));
	return 4;
}

static size_t tokenize(const loom_vocab *v, const char *text, size_t len, bool add_special,
		       bool parse_special, loom_token *out)
{
	size_t n = 0;
	loom_status st = loom_vocab_tokenize(v, text, len, add_special, parse_special, out,
					     MAX_TOKENS, &n);
	ck_assert_msg(st == LOOM_OK, "tokenize: %s (%s)", loom_strerror(st), loom_last_error());
	return n;
}

/* Tokenizes a C string and compares with the expected ids (ending in -1). */
static void expect_tokens(const loom_vocab *v, const char *text, bool add_special,
			  bool parse_special, const loom_token *want)
{
	loom_token got[MAX_TOKENS];
	size_t n_want = 0;
	while (want[n_want] >= 0)
		n_want++;
	size_t n = tokenize(v, text, strlen(text), add_special, parse_special, got);
	char esc[256], w[512], g[512];
	test_escape(text, strlen(text), esc, sizeof(esc));
	test_format_tokens(want, n_want, w, sizeof(w));
	test_format_tokens(got, n, g, sizeof(g));
	ck_assert_msg(n == n_want && memcmp(got, want, n * sizeof(*got)) == 0,
		      "'%s' (add_special %d, parse_special %d): expected [%s], got [%s]", esc,
		      add_special, parse_special, w, g);
}

#define EXPECT(v, text, add, parse, ...) \
	expect_tokens(v, text, add, parse, (const loom_token[]){__VA_ARGS__, -1})

/* The piece of token (NUL-terminated) into buf. */
static size_t piece(const loom_vocab *v, loom_token token, bool special, char *buf, size_t size)
{
	size_t n = 0;
	loom_status st = loom_vocab_token_to_piece(v, token, special, buf, size - 1, &n);
	ck_assert_msg(st == LOOM_OK, "piece of %d: %s (%s)", token, loom_strerror(st),
		      loom_last_error());
	buf[n] = '\0';
	return n;
}

static void expect_piece(const loom_vocab *v, loom_token token, bool special, const char *want)
{
	char buf[256];
	piece(v, token, special, buf, sizeof(buf));
	ck_assert_msg(strcmp(buf, want) == 0, "piece of %d (special %d): expected '%s', got '%s'",
		      token, special, want, buf);
}

/* The concatenated pieces of tokens, malloc'd; *len its length. */
static char *detokenize(const loom_vocab *v, const loom_token *t, size_t n, bool special,
			size_t *len)
{
	size_t cap = 64, o = 0;
	char *buf = malloc(cap);
	ck_assert(buf != NULL);
	for (size_t i = 0; i < n; i++) {
		size_t need = 0;
		loom_status st = loom_vocab_token_to_piece(v, t[i], special, buf + o, cap - o, &need);
		if (st == LOOM_ERR_BUFFER_TOO_SMALL) {
			cap = 2 * (o + need);
			buf = realloc(buf, cap);
			ck_assert(buf != NULL);
			st = loom_vocab_token_to_piece(v, t[i], special, buf + o, cap - o, &need);
		}
		ck_assert_msg(st == LOOM_OK, "piece of %d: %s", t[i], loom_last_error());
		o += need;
	}
	*len = o;
	return buf;
}

/* ------------------------------------------------------------------------ */
/* Loading                                                                  */

START_TEST(test_load_tiny)
{
	struct tiny t;
	struct fake *f = tiny_vocab(true, &t);
	loom_vocab *v = load_ok(&f->file);
	ck_assert_int_eq(loom_vocab_n_tokens(v), f->n_tokens);
	ck_assert_int_eq(loom_vocab_bos(v), BOS);
	ck_assert_int_eq(loom_vocab_eos(v), EOS);
	ck_assert(loom_vocab_adds_bos(v));
	ck_assert(!loom_vocab_adds_eos(v));
	loom_vocab_free(v);
	loom_vocab_free(NULL);
	free(f);
}
END_TEST

START_TEST(test_load_missing_tokens)
{
	struct fake *f = fake_new();
	load_fails(&f->file, LOOM_ERR_NOT_FOUND, "tokenizer.ggml.tokens");
	free(f);
}
END_TEST

START_TEST(test_load_missing_model)
{
	struct tiny t;
	struct fake *f = tiny_vocab(false, &t);
	f->kv[0].key = str("tokenizer.ggml.modle");
	load_fails(&f->file, LOOM_ERR_NOT_FOUND, "tokenizer.ggml.model");
	free(f);
}
END_TEST

START_TEST(test_load_unsupported_model)
{
	struct tiny t;
	struct fake *f = tiny_vocab(false, &t);
	fake_string(f, "tokenizer.ggml.model", "t5");
	load_fails(&f->file, LOOM_ERR_UNSUPPORTED, "'t5'");
	free(f);
}
END_TEST

START_TEST(test_load_count_mismatch)
{
	struct tiny t;
	struct fake *f = tiny_vocab(false, &t);
	fake_array(f, "tokenizer.ggml.scores", LOOM_META_F32, f->scores, f->n_tokens - 1);
	load_fails(&f->file, LOOM_ERR_BAD_FORMAT, "tokenizer.ggml.scores");
	fake_arrays(f);
	fake_array(f, "tokenizer.ggml.token_type", LOOM_META_I32, f->types, f->n_tokens + 1);
	load_fails(&f->file, LOOM_ERR_BAD_FORMAT, "tokenizer.ggml.token_type");
	fake_arrays(f);
	fake_array(f, "tokenizer.ggml.scores", LOOM_META_I32, f->types, f->n_tokens);
	load_fails(&f->file, LOOM_ERR_BAD_FORMAT, "tokenizer.ggml.scores");
	free(f);
}
END_TEST

START_TEST(test_load_special_out_of_range)
{
	struct tiny t;
	struct fake *f = tiny_vocab(false, &t);
	fake_u32(f, "tokenizer.ggml.eos_token_id", (uint32_t)f->n_tokens);
	load_fails(&f->file, LOOM_ERR_BAD_FORMAT, "tokenizer.ggml.eos_token_id");
	fake_u32(f, "tokenizer.ggml.eos_token_id", EOS);
	fake_u32(f, "tokenizer.ggml.padding_token_id", 100000);
	load_fails(&f->file, LOOM_ERR_BAD_FORMAT, "tokenizer.ggml.padding_token_id");
	free(f);
}
END_TEST

/* Converters write 0xFFFFFFFF for "none"; the default stays. */
START_TEST(test_load_none_sentinel)
{
	struct tiny t;
	struct fake *f = tiny_vocab(false, &t);
	fake_u32(f, "tokenizer.ggml.padding_token_id", UINT32_MAX);
	fake_u32(f, "tokenizer.ggml.bos_token_id", UINT32_MAX);
	loom_vocab *v = load_ok(&f->file);
	ck_assert_int_eq(loom_vocab_bos(v), BOS);
	loom_vocab_free(v);
	free(f);
}
END_TEST

START_TEST(test_load_bad_types)
{
	struct tiny t;
	struct fake *f = tiny_vocab(false, &t);
	f->types[t.x] = 9;
	load_fails(&f->file, LOOM_ERR_BAD_FORMAT, "unknown type 9");
	f->types[t.x] = T_BYTE;
	load_fails(&f->file, LOOM_ERR_BAD_FORMAT, "not <0xXX>");
	free(f);
}
END_TEST

START_TEST(test_load_no_bos_but_add_bos)
{
	struct fake *f = fake_new();
	fake_token(f, "<unk>", 0, T_UNKNOWN);
	fake_arrays(f);
	load_fails(&f->file, LOOM_ERR_BAD_FORMAT, "BOS");
	fake_bool(f, "tokenizer.ggml.add_bos_token", false);
	loom_vocab *v = load_ok(&f->file);
	ck_assert_int_eq(loom_vocab_bos(v), -1);
	ck_assert_int_eq(loom_vocab_eos(v), -1);
	loom_vocab_free(v);
	free(f);
}
END_TEST

/* An empty token is renamed as llama.cpp does, never matched as "". */
START_TEST(test_load_empty_token)
{
	struct tiny t;
	struct fake *f = tiny_vocab(true, &t);
	loom_token id = fake_token(f, "", 0, T_USER);
	fake_arrays(f);
	loom_vocab *v = load_ok(&f->file);
	char buf[64];
	snprintf(buf, sizeof(buf), "[EMPTY_%d]", id);
	expect_piece(v, id, false, buf);
	EXPECT(v, "hello", false, false, t.sp_hello);
	loom_vocab_free(v);
	free(f);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Tokenizing                                                               */

START_TEST(test_merges)
{
	struct tiny t;
	struct fake *f = tiny_vocab(true, &t);
	loom_vocab *v = load_ok(&f->file);
	EXPECT(v, "hello", false, false, t.sp_hello);
	EXPECT(v, "hello hello", false, false, t.sp_hello, t.sp_hello);
	EXPECT(v, "hellohello", false, false, t.sp_hello, t.hello);
	EXPECT(v, "  hel", false, false, t.sp, t.sp, t.sp, t.he, t.l);
	/* equal scores: the leftmost pair first */
	EXPECT(v, "xyz", false, false, t.sp, t.xy, t.z);
	/* a higher score wins wherever it is */
	EXPECT(v, "pqr", false, false, t.sp, t.p, t.qr);
	loom_vocab_free(v);
	free(f);
}
END_TEST

/* A token with a "▁" after another character can join two words, so the
 * fragment must be merged as a whole. */
START_TEST(test_merge_across_words)
{
	struct tiny t;
	struct fake *f = tiny_vocab(true, &t);
	loom_token z_sp = fake_token(f, "z" SPACE, 0, T_NORMAL);
	fake_arrays(f);
	loom_vocab *v = load_ok(&f->file);
	EXPECT(v, "xyz xy", false, false, t.sp, t.xy, z_sp, t.xy);
	EXPECT(v, "hello hello", false, false, t.sp_hello, t.sp_hello);
	loom_vocab_free(v);
	free(f);
}
END_TEST

START_TEST(test_add_special)
{
	struct tiny t;
	struct fake *f = tiny_vocab(true, &t);
	loom_vocab *v = load_ok(&f->file);
	EXPECT(v, "hello", true, false, BOS, t.sp_hello);
	loom_vocab_free(v);

	fake_bool(f, "tokenizer.ggml.add_bos_token", false);
	fake_bool(f, "tokenizer.ggml.add_eos_token", true);
	v = load_ok(&f->file);
	ck_assert(!loom_vocab_adds_bos(v));
	ck_assert(loom_vocab_adds_eos(v));
	EXPECT(v, "hello", true, false, t.sp_hello, EOS);
	EXPECT(v, "hello", false, false, t.sp_hello);
	loom_vocab_free(v);
	free(f);
}
END_TEST

START_TEST(test_no_space_prefix)
{
	struct tiny t;
	struct fake *f = tiny_vocab(true, &t);
	fake_bool(f, "tokenizer.ggml.add_space_prefix", false);
	loom_vocab *v = load_ok(&f->file);
	EXPECT(v, "hello", true, false, BOS, t.hello);
	EXPECT(v, " hello", false, false, t.sp_hello);
	loom_vocab_free(v);
	free(f);
}
END_TEST

START_TEST(test_empty_text)
{
	struct tiny t;
	struct fake *f = tiny_vocab(true, &t);
	loom_vocab *v = load_ok(&f->file);
	loom_token out[4];
	size_t n = 99;
	ck_assert_int_eq(loom_vocab_tokenize(v, NULL, 0, false, false, NULL, 0, &n), LOOM_OK);
	ck_assert_uint_eq(n, 0);
	ck_assert_int_eq(loom_vocab_tokenize(v, "", 0, true, true, out, 4, &n), LOOM_OK);
	ck_assert_uint_eq(n, 1);
	ck_assert_int_eq(out[0], BOS);
	loom_vocab_free(v);
	free(f);
}
END_TEST

START_TEST(test_byte_fallback)
{
	struct tiny t;
	struct fake *f = tiny_vocab(true, &t);
	loom_vocab *v = load_ok(&f->file);
	/* "é" is no token: its two UTF-8 bytes are */
	EXPECT(v, "\xc3\xa9", false, false, t.sp, BYTE0 + 0xc3, BYTE0 + 0xa9);
	EXPECT(v, "a\n", false, false, t.sp, BYTE0 + 'a', BYTE0 + '\n');
	loom_vocab_free(v);
	free(f);
}
END_TEST

START_TEST(test_unk_fallback)
{
	struct tiny t;
	struct fake *f = tiny_vocab(false, &t);
	loom_vocab *v = load_ok(&f->file);
	EXPECT(v, "h\xc3\xa9", false, false, t.sp, t.h, UNK, UNK);
	loom_vocab_free(v);
	free(f);
}
END_TEST

/* A vocabulary without byte tokens may hold a byte as a plain token. */
START_TEST(test_single_byte_token_fallback)
{
	struct tiny t;
	struct fake *f = tiny_vocab(false, &t);
	loom_token b = fake_token(f, "\xc3", 0, T_NORMAL);
	fake_arrays(f);
	loom_vocab *v = load_ok(&f->file);
	EXPECT(v, "\xc3\xa9", false, false, t.sp, b, UNK);
	loom_vocab_free(v);
	free(f);
}
END_TEST

/* Invalid UTF-8 is cut into symbols by its lead bytes and falls back to
 * byte tokens: never a failure, and the bytes come back unchanged. */
START_TEST(test_invalid_utf8)
{
	static const char *const inputs[] = {
		"\xff", "\xc3", "\xc3hello", "\x80\x80 x", "he\xe2\x96", "\xf0\x9f\x98", "a\xed\xa0\x80z",
	};
	struct tiny t;
	struct fake *f = tiny_vocab(true, &t);
	loom_vocab *v = load_ok(&f->file);
	for (size_t i = 0; i < sizeof(inputs) / sizeof(inputs[0]); i++) {
		loom_token toks[MAX_TOKENS];
		size_t len = strlen(inputs[i]), n, back_len;
		n = tokenize(v, inputs[i], len, false, false, toks);
		char *back = detokenize(v, toks, n, false, &back_len);
		char esc[64];
		test_escape(inputs[i], len, esc, sizeof(esc));
		ck_assert_msg(back_len == len + 1 && back[0] == ' ' && memcmp(back + 1, inputs[i], len) == 0,
			      "'%s' does not come back from its tokens", esc);
		free(back);
	}
	EXPECT(v, "\xc3hello", false, false, t.sp, BYTE0 + 0xc3, BYTE0 + 'h', t.e, t.llo);
	/* a 4-byte lead swallows the "▁" of the space after it */
	EXPECT(v, "\xf0 hello", false, false, t.sp, BYTE0 + 0xf0, BYTE0 + 0xe2, BYTE0 + 0x96,
	       BYTE0 + 0x81, t.hello);
	loom_vocab_free(v);
	free(f);
}
END_TEST

START_TEST(test_parse_special)
{
	struct tiny t;
	struct fake *f = tiny_vocab(true, &t);
	loom_vocab *v = load_ok(&f->file);
	/* the text after a special token gets the space prefix again */
	EXPECT(v, "<s>hello</s>", false, true, BOS, t.sp_hello, EOS);
	EXPECT(v, "hello<s>", true, true, BOS, t.sp_hello, BOS);
	EXPECT(v, "<s>hello</s>", false, false, t.sp, BYTE0 + '<', BYTE0 + 's', BYTE0 + '>', t.hello,
	       BYTE0 + '<', BYTE0 + '/', BYTE0 + 's', BYTE0 + '>');
	/* <unk> is special too */
	EXPECT(v, "<unk>", false, true, UNK);
	loom_vocab_free(v);
	free(f);
}
END_TEST

/* User-defined tokens are cut out even without parse_special. */
START_TEST(test_user_defined)
{
	struct tiny t;
	struct fake *f = tiny_vocab(true, &t);
	loom_vocab *v = load_ok(&f->file);
	EXPECT(v, "hello<tool>hello", false, false, t.sp_hello, t.tool, t.sp_hello);
	EXPECT(v, "<tool><tool>", false, false, t.tool, t.tool);
	/* longest first */
	EXPECT(v, "<tag>!<tag>", false, false, t.tag_bang, t.tag);
	loom_vocab_free(v);
	free(f);
}
END_TEST

START_TEST(test_buffer_too_small)
{
	struct tiny t;
	struct fake *f = tiny_vocab(true, &t);
	loom_vocab *v = load_ok(&f->file);
	loom_token out[3] = {-7, -7, -7};
	size_t n = 0;
	const char *text = "hello hello";
	loom_status st = loom_vocab_tokenize(v, text, strlen(text), true, false, out, 2, &n);
	ck_assert_int_eq(st, LOOM_ERR_BUFFER_TOO_SMALL);
	ck_assert_uint_eq(n, 3);
	ck_assert_int_eq(out[0], -7);
	st = loom_vocab_tokenize(v, text, strlen(text), true, false, NULL, 0, &n);
	ck_assert_int_eq(st, LOOM_ERR_BUFFER_TOO_SMALL);
	ck_assert_uint_eq(n, 3);
	ck_assert_int_eq(loom_vocab_tokenize(v, text, strlen(text), true, false, out, 3, &n), LOOM_OK);
	ck_assert_int_eq(out[2], t.sp_hello);

	char buf[8];
	st = loom_vocab_token_to_piece(v, t.sp_hello, false, buf, 3, &n);
	ck_assert_int_eq(st, LOOM_ERR_BUFFER_TOO_SMALL);
	ck_assert_uint_eq(n, 6);
	st = loom_vocab_token_to_piece(v, BOS, true, NULL, 0, &n);
	ck_assert_int_eq(st, LOOM_ERR_BUFFER_TOO_SMALL);
	ck_assert_uint_eq(n, 3);
	loom_vocab_free(v);
	free(f);
}
END_TEST

START_TEST(test_bad_arguments)
{
	struct tiny t;
	struct fake *f = tiny_vocab(true, &t);
	loom_vocab *v = load_ok(&f->file);
	size_t n;
	char buf[8];
	ck_assert_int_eq(loom_vocab_tokenize(v, NULL, 3, false, false, NULL, 0, &n),
			 LOOM_ERR_INVALID_ARGUMENT);
	ck_assert_int_eq(loom_vocab_tokenize(v, "a", 1, false, false, NULL, 0, NULL),
			 LOOM_ERR_INVALID_ARGUMENT);
	ck_assert_int_eq(loom_vocab_token_to_piece(v, -1, false, buf, sizeof(buf), &n),
			 LOOM_ERR_INVALID_ARGUMENT);
	ck_assert_int_eq(loom_vocab_token_to_piece(v, f->n_tokens, false, buf, sizeof(buf), &n),
			 LOOM_ERR_INVALID_ARGUMENT);
	ck_assert_msg(strstr(loom_last_error(), "out of range") != NULL, "%s", loom_last_error());
	ck_assert_int_eq(loom_vocab_load(&f->file, NULL, NULL), LOOM_ERR_INVALID_ARGUMENT);
	loom_vocab_free(v);
	free(f);
}
END_TEST

/* A long input runs in O(n log n): 1 MiB takes well under a second. */
START_TEST(test_long_input)
{
	struct tiny t;
	struct fake *f = tiny_vocab(true, &t);
	loom_vocab *v = load_ok(&f->file);
	static const char unit[] = "hello xyz\xc3\xa9 hellohe ";
	size_t unit_len = sizeof(unit) - 1, reps = (1u << 20) / unit_len;
	size_t len = reps * unit_len;
	char *text = malloc(len);
	loom_token *toks = malloc(len * sizeof(*toks) + 64);
	ck_assert(text != NULL && toks != NULL);
	for (size_t i = 0; i < reps; i++)
		memcpy(text + i * unit_len, unit, unit_len);
	size_t n, back_len;
	ck_assert_int_eq(loom_vocab_tokenize(v, text, len, false, false, toks, len + 16, &n), LOOM_OK);
	/* per unit ▁hello, ▁ xy z <c3> <a9>, ▁hello he; the last space is a
	 * lone ▁ (the others begin the next unit's ▁hello) */
	ck_assert_uint_eq(n, 8 * reps + 1);
	char *back = detokenize(v, toks, n, false, &back_len);
	ck_assert_uint_eq(back_len, len + 1);
	ck_assert(memcmp(back + 1, text, len) == 0);
	free(back);
	free(toks);
	free(text);
	loom_vocab_free(v);
	free(f);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Pieces and end of generation                                             */

START_TEST(test_pieces)
{
	struct tiny t;
	struct fake *f = tiny_vocab(true, &t);
	loom_vocab *v = load_ok(&f->file);
	expect_piece(v, t.sp_hello, false, " hello");
	expect_piece(v, t.sp, false, " ");
	expect_piece(v, t.he, true, "he");
	expect_piece(v, BYTE0 + 'A', false, "A");
	expect_piece(v, BOS, false, "");
	expect_piece(v, BOS, true, "<s>");
	expect_piece(v, UNK, false, "");
	expect_piece(v, UNK, true, "<unk>");
	expect_piece(v, t.tool, false, "<tool>");
	expect_piece(v, t.unused, true, "");
	/* a control token by its text: markup like <s> */
	expect_piece(v, t.end, false, "");
	expect_piece(v, t.end, true, "<|end|>");

	char buf[4];
	size_t n = 0;
	ck_assert_int_eq(loom_vocab_token_to_piece(v, BYTE0 + 0xff, false, buf, 1, &n), LOOM_OK);
	ck_assert_uint_eq(n, 1);
	ck_assert_int_eq((unsigned char)buf[0], 0xff);
	loom_vocab_free(v);
	free(f);
}
END_TEST

START_TEST(test_eog)
{
	struct tiny t;
	struct fake *f = tiny_vocab(true, &t);
	loom_vocab *v = load_ok(&f->file);
	ck_assert(loom_vocab_is_eog(v, EOS));
	ck_assert(loom_vocab_is_eog(v, t.end));
	ck_assert(!loom_vocab_is_eog(v, BOS));
	ck_assert(!loom_vocab_is_eog(v, t.hello));
	ck_assert(!loom_vocab_is_eog(v, -1));
	ck_assert(!loom_vocab_is_eog(v, f->n_tokens));
	loom_vocab_free(v);
	free(f);
}
END_TEST

/* Phi-3 marks its special tokens rstrip: the whitespace after one goes.
 * The rule is arch/phi3.yaml's tokenizer section, as given here. */
START_TEST(test_phi3_rstrip)
{
	static char *except[] = {"<unk>", "<s>", "<|endoftext|>", NULL};
	const loom_vocab_rules phi3 = {.rstrip_special = true, .rstrip_except = except};
	struct tiny t;
	struct fake *f = tiny_vocab(true, &t);
	loom_token user = fake_token(f, "<|user|>", 0, T_CONTROL);
	fake_arrays(f);
	loom_vocab *v = load_ok(&f->file);
	EXPECT(v, "<|user|>\n hello", false, true, user, t.sp, BYTE0 + '\n', t.sp_hello);
	loom_vocab_free(v);

	v = load_with(&f->file, &phi3);
	EXPECT(v, "<|user|>\n hello", false, true, user, t.sp_hello);
	EXPECT(v, "<s> hello", false, true, BOS, t.sp, t.sp_hello);
	loom_vocab_free(v);
	free(f);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Byte-level BPE on a vocabulary built in memory                           */

/* GPT-2's character for byte b, written independently of the tokenizer:
 * printable Latin-1 stands for itself, the other bytes take U+0100 on. */
static unsigned gpt2_cp(unsigned b)
{
	unsigned n = 0;
	for (unsigned c = 0; c < 256; c++) {
		bool printable = (c >= 0x21 && c <= 0x7E) || (c >= 0xA1 && c <= 0xAC) || c >= 0xAE;
		if (c == b)
			return printable ? c : 0x100 + n;
		n += !printable;
	}
	return 0;
}

static void fake_merge(struct fake *f, const char *merge)
{
	ck_assert(f->n_merges < FAKE_MAX_MERGES);
	f->merges[f->n_merges++] = str(merge);
}

struct tiny_bpe {
	loom_token he, ll, hell, hello, sp_hello, sp_one, end, tool, mask, euro;
};

/* Token b is GPT-2's spelling of byte b; merges build "hello" and
 * "Ġhello" ("Ġ" is the space). */
static struct fake *tiny_bpe_vocab(const char *pre, struct tiny_bpe *t)
{
	struct fake *f = fake_new();
	fake_string(f, "tokenizer.ggml.model", "gpt2");
	if (pre != NULL)
		fake_string(f, "tokenizer.ggml.pre", pre);
	for (unsigned b = 0; b < 256; b++) {
		put_utf8(f->byte_names[b], gpt2_cp(b));
		fake_token(f, f->byte_names[b], 0, T_NORMAL);
	}
	t->he = fake_token(f, "he", 0, T_NORMAL);
	t->ll = fake_token(f, "ll", 0, T_NORMAL);
	t->hell = fake_token(f, "hell", 0, T_NORMAL);
	t->hello = fake_token(f, "hello", 0, T_NORMAL);
	t->sp_hello = fake_token(f, "\xc4\xa0hello", 0, T_NORMAL);
	t->sp_one = fake_token(f, "\xc4\xa0" "1", 0, T_NORMAL);
	t->end = fake_token(f, "<|endoftext|>", 0, T_CONTROL);
	t->tool = fake_token(f, "<tool>", 0, T_USER);
	t->mask = fake_token(f, "<mask>", 0, T_CONTROL);
	t->euro = fake_token(f, "\xe2\x82\xac", 0, T_NORMAL); /* "€" is no byte's spelling */
	fake_merge(f, "h e");
	fake_merge(f, "l l");
	fake_merge(f, "he ll");
	fake_merge(f, "hell o");
	fake_merge(f, "\xc4\xa0 hello");
	fake_merge(f, "\xc4\xa0 1");
	fake_merge(f, "broken");
	fake_arrays(f);
	fake_array(f, "tokenizer.ggml.merges", LOOM_META_STRING, f->merges, f->n_merges);
	fake_u32(f, "tokenizer.ggml.bos_token_id", (uint32_t)t->end);
	fake_u32(f, "tokenizer.ggml.eos_token_id", (uint32_t)t->end);
	return f;
}

START_TEST(test_bpe_load)
{
	struct tiny_bpe t;
	struct fake *f = tiny_bpe_vocab("gpt-2", &t);
	loom_vocab *v = load_ok(&f->file);
	ck_assert_int_eq(loom_vocab_bos(v), t.end);
	ck_assert(!loom_vocab_adds_bos(v));
	ck_assert(loom_vocab_is_eog(v, t.end));
	loom_vocab_free(v);

	/* llama3's name implies BOS, unless the file says otherwise */
	fake_string(f, "tokenizer.ggml.pre", "llama-bpe");
	v = load_ok(&f->file);
	ck_assert(loom_vocab_adds_bos(v));
	EXPECT(v, "hello", true, false, t.end, t.hello);
	loom_vocab_free(v);
	fake_bool(f, "tokenizer.ggml.add_bos_token", false);
	v = load_ok(&f->file);
	ck_assert(!loom_vocab_adds_bos(v));
	loom_vocab_free(v);
	free(f);
}
END_TEST

START_TEST(test_bpe_unknown_pretokenizer)
{
	struct tiny_bpe t;
	struct fake *f = tiny_bpe_vocab("no-such-pre", &t);
	load_fails(&f->file, LOOM_ERR_UNSUPPORTED, "'no-such-pre'");
	free(f);
}
END_TEST

/* Without tokenizer.ggml.pre, llama.cpp's "default" expressions apply. */
START_TEST(test_bpe_default_pretokenizer)
{
	struct tiny_bpe t;
	struct fake *f = tiny_bpe_vocab(NULL, &t);
	loom_vocab *v = load_ok(&f->file);
	/* the default cuts digit runs out of the words GPT-2's expression makes */
	EXPECT(v, "hello 1", false, false, t.hello, ' ', '1');
	loom_vocab_free(v);
	/* GPT-2's keeps a space with the number after it */
	fake_string(f, "tokenizer.ggml.pre", "gpt-2");
	v = load_ok(&f->file);
	EXPECT(v, "hello 1", false, false, t.hello, t.sp_one);
	loom_vocab_free(v);
	free(f);
}
END_TEST

START_TEST(test_bpe_missing_merges)
{
	struct tiny_bpe t;
	struct fake *f = tiny_bpe_vocab("gpt-2", &t);
	for (uint64_t i = 0; i < f->file.n_meta; i++)
		if (loom_string_eq(f->kv[i].key, "tokenizer.ggml.merges"))
			f->kv[i].key = str("tokenizer.ggml.mergez");
	load_fails(&f->file, LOOM_ERR_NOT_FOUND, "tokenizer.ggml.merges");
	free(f);
}
END_TEST

/* A vocabulary-only GGUF file (no tensors) with a BPE tokenizer whose
 * pre-tokenizer is pre, written to dir/name; its path goes to buf. */
static const char *write_bpe_gguf(char *buf, size_t size, const char *dir, const char *name,
				  const char *pre)
{
	static const char *const tokens[] = {"h", "e", "l", "o", "\xc4\xa0", "he", "ll", "hell",
					     "hello", "<|endoftext|>"};
	static const int32_t types[] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 3};
	static const char *const merges[] = {"h e", "l l", "he ll", "hell o"};
	gguf_writer *w = gguf_writer_create();
	gguf_writer_add_string(w, "general.architecture", "gpt2");
	gguf_writer_add_string(w, "tokenizer.ggml.model", "gpt2");
	gguf_writer_add_string(w, "tokenizer.ggml.pre", pre);
	gguf_writer_add_string_array(w, "tokenizer.ggml.tokens", tokens, 10);
	gguf_writer_add_array(w, "tokenizer.ggml.token_type", LOOM_META_I32, types, 10);
	gguf_writer_add_string_array(w, "tokenizer.ggml.merges", merges, 4);
	gguf_writer_add_u32(w, "tokenizer.ggml.bos_token_id", 9);
	gguf_writer_add_u32(w, "tokenizer.ggml.eos_token_id", 9);
	snprintf(buf, size, "%s/%s", dir, name);
	ck_assert_msg(gguf_writer_write(w, buf), "cannot write %s", buf);
	gguf_writer_free(w);
	return buf;
}

/* Through the public API: an unknown pre-tokenizer fails the load, naming
 * it; a known one tokenizes from a file without tensors. */
START_TEST(test_bpe_gguf_file)
{
	const char *dir = test_tmp_dir("tokenizer_bpe_gguf");
	char bad[4096], good[4096];
	write_bpe_gguf(bad, sizeof(bad), dir, "bad.gguf", "no-such-pre");
	write_bpe_gguf(good, sizeof(good), dir, "good.gguf", "gpt-2");
	loom_runtime *rt = test_runtime(NULL, 1);
	if (rt == NULL)
		return;
	loom_model_params mp = loom_model_default_params();
	mp.vocab_only = true;
	loom_model *m = NULL;
	loom_status st = loom_model_load(rt, bad, &mp, &m);
	ck_assert_int_eq(st, LOOM_ERR_UNSUPPORTED);
	ck_assert_ptr_null(m);
	ck_assert_msg(strstr(loom_last_error(), "'no-such-pre'") != NULL &&
			      strstr(loom_last_error(), "bad.gguf") != NULL,
		      "message: %s", loom_last_error());

	st = loom_model_load(rt, good, &mp, &m);
	ck_assert_msg(st == LOOM_OK, "%s", loom_last_error());
	loom_token toks[8];
	size_t n = 0;
	ck_assert_int_eq(loom_tokenize(m, "hello hello", 11, true, false, toks, 8, &n), LOOM_OK);
	ck_assert_uint_eq(n, 3);
	ck_assert_int_eq(toks[0], 8);
	ck_assert_int_eq(toks[1], 4);
	ck_assert_int_eq(toks[2], 8);
	loom_model_free(m);
	loom_runtime_free(rt);
}
END_TEST

START_TEST(test_bpe_merges)
{
	struct tiny_bpe t;
	struct fake *f = tiny_bpe_vocab("gpt-2", &t);
	loom_vocab *v = load_ok(&f->file);
	EXPECT(v, "hello", false, false, t.hello);
	EXPECT(v, "hello hello", false, false, t.hello, t.sp_hello);
	/* equal ranks: the leftmost pair first */
	EXPECT(v, "lll", false, false, t.ll, 'l');
	/* he + ll needs both merges first; "hel" stops at he + l */
	EXPECT(v, "hel", false, false, t.he, 'l');
	/* bytes that are not printable are spelled by their GPT-2 characters */
	EXPECT(v, "\n\t", false, false, '\n', '\t');
	loom_vocab_free(v);
	free(f);
}
END_TEST

/* Every byte string is spelled byte for byte when nothing merges, and the
 * pieces give it back exactly. */
START_TEST(test_bpe_invalid_utf8)
{
	static const char *const inputs[] = {
		"\xff", "\xc3", "\xc3hello", "\x80\x80 x", "he\xe2\x96", "\xf0\x9f\x98", "a\xed\xa0\x80z",
		"hello \xfe\xff hello", "\xf4\x90\x80\x80",
	};
	struct tiny_bpe t;
	struct fake *f = tiny_bpe_vocab("gpt-2", &t);
	loom_vocab *v = load_ok(&f->file);
	for (size_t i = 0; i < sizeof(inputs) / sizeof(inputs[0]); i++) {
		loom_token toks[MAX_TOKENS];
		size_t len = strlen(inputs[i]), back_len;
		size_t n = tokenize(v, inputs[i], len, false, false, toks);
		char *back = detokenize(v, toks, n, false, &back_len);
		char esc[64];
		test_escape(inputs[i], len, esc, sizeof(esc));
		ck_assert_msg(back_len == len && memcmp(back, inputs[i], len) == 0,
			      "'%s' does not come back from its tokens", esc);
		free(back);
	}
	EXPECT(v, "\xc3hello", false, false, 0xc3, t.hello);
	loom_vocab_free(v);
	free(f);
}
END_TEST

START_TEST(test_bpe_special)
{
	struct tiny_bpe t;
	struct fake *f = tiny_bpe_vocab("gpt-2", &t);
	loom_vocab *v = load_ok(&f->file);
	EXPECT(v, "<|endoftext|>hello", false, true, t.end, t.hello);
	/* as plain text when special tokens are not parsed */
	EXPECT(v, "<|endoftext|>", false, false, '<', '|', 'e', 'n', 'd', 'o', 'f', 't', 'e', 'x', 't',
	       '|', '>');
	/* user-defined tokens are always cut out */
	EXPECT(v, "hello<tool>hello", false, false, t.hello, t.tool, t.hello);
	EXPECT(v, "hello <mask>", false, true, t.hello, 0x20, t.mask);
	loom_vocab_free(v);

	/* Jina's v2 models strip the whitespace before <mask> */
	fake_string(f, "tokenizer.ggml.pre", "jina-v2-code");
	v = load_ok(&f->file);
	EXPECT(v, "hello \n<mask> hello", false, true, t.hello, t.mask, t.sp_hello);
	loom_vocab_free(v);
	free(f);
}
END_TEST

START_TEST(test_bpe_pieces)
{
	struct tiny_bpe t;
	struct fake *f = tiny_bpe_vocab("gpt-2", &t);
	loom_vocab *v = load_ok(&f->file);
	expect_piece(v, t.sp_hello, false, " hello");
	expect_piece(v, '\n', false, "\n");
	expect_piece(v, 'A', false, "A");
	expect_piece(v, t.end, false, "");
	expect_piece(v, t.end, true, "<|endoftext|>");
	expect_piece(v, t.tool, false, "<tool>");
	/* a token outside GPT-2's alphabet comes out as it is written */
	expect_piece(v, t.euro, false, "\xe2\x82\xac");
	for (unsigned b = 0; b < 256; b++) {
		char buf[4];
		size_t n = 0;
		ck_assert_int_eq(loom_vocab_token_to_piece(v, (loom_token)b, false, buf, 1, &n), LOOM_OK);
		ck_assert_uint_eq(n, 1);
		ck_assert_uint_eq((unsigned char)buf[0], b);
	}
	size_t n = 0;
	char buf[4];
	ck_assert_int_eq(loom_vocab_token_to_piece(v, t.sp_hello, false, buf, 3, &n),
			 LOOM_ERR_BUFFER_TOO_SMALL);
	ck_assert_uint_eq(n, 6);
	loom_vocab_free(v);
	free(f);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* llama.cpp's tokenizer test vocabularies                                  */

#define CASE_SEPARATOR "\n__ggml_vocab_test__\n"

/* Loads a vocabulary from a GGUF file and closes the file: the vocabulary
 * must not need it afterwards. NULL if the reference data is absent. */
static loom_vocab *load_gguf_vocab(const char *relative)
{
	char path[4096];
	if (!test_data_path(path, sizeof(path), relative))
		return NULL;
	loom_model_file *file = test_open_gguf(path);
	ck_assert_msg(file != NULL, "opening %s: %s", path, test_plugin_error());
	loom_vocab *v = load_ok(file);
	test_close_gguf(file);
	return v;
}

struct vocab_cases {
	char *inp, *out;
	char *next_inp, *next_out;
};

static bool open_cases(struct vocab_cases *c, const char *name)
{
	char rel[256], path[4096];
	snprintf(rel, sizeof(rel), "golden/tokenizer/%s.inp", name);
	if (!test_data_path(path, sizeof(path), rel))
		return false;
	c->inp = test_read_file(path, NULL);
	ck_assert_msg(c->inp != NULL, "cannot read %s", path);
	snprintf(rel, sizeof(rel), "golden/tokenizer/%s.out", name);
	ck_assert(test_data_path(path, sizeof(path), rel));
	c->out = test_read_file(path, NULL);
	ck_assert_msg(c->out != NULL, "cannot read %s", path);
	c->next_inp = c->inp;
	c->next_out = c->out;
	return true;
}

/* The next case: its text and expected ids. False after the last. */
static bool next_case(struct vocab_cases *c, const char **text, size_t *len, loom_token *want,
		      size_t *n_want)
{
	char *sep = strstr(c->next_inp, CASE_SEPARATOR);
	if (sep == NULL)
		return false;
	*text = c->next_inp;
	*len = (size_t)(sep - c->next_inp);
	c->next_inp = sep + strlen(CASE_SEPARATOR);

	char *eol = strchr(c->next_out, '\n');
	ck_assert_msg(eol != NULL, ".out has fewer lines than .inp has cases");
	*eol = '\0';
	*n_want = 0;
	for (char *p = c->next_out, *end; *n_want < MAX_TOKENS; p = end) {
		long id = strtol(p, &end, 10);
		if (end == p)
			break;
		want[(*n_want)++] = (loom_token)id;
	}
	c->next_out = eol + 1;
	return true;
}

static void close_cases(struct vocab_cases *c)
{
	free(c->inp);
	free(c->out);
}

/* Every case of a llama.cpp tokenizer test, tokenized without special
 * handling, must give exactly the recorded ids. */
static void check_vocab_cases(const char *name)
{
	char rel[256];
	snprintf(rel, sizeof(rel), "golden/tokenizer/%s", name);
	loom_vocab *v = load_gguf_vocab(rel);
	struct vocab_cases c;
	if (v == NULL || !open_cases(&c, name))
		return;
	static loom_token want[MAX_TOKENS], got[MAX_TOKENS];
	const char *text;
	size_t len, n_want, n_cases = 0, n_failed = 0;
	char first_failure[2048] = "";
	while (next_case(&c, &text, &len, want, &n_want)) {
		size_t n = tokenize(v, text, len, false, false, got);
		n_cases++;
		if (n == n_want && memcmp(got, want, n * sizeof(*got)) == 0)
			continue;
		char esc[512], w[640], g[640], msg[2048];
		test_escape(text, len, esc, sizeof(esc));
		test_format_tokens(want, n_want, w, sizeof(w));
		test_format_tokens(got, n, g, sizeof(g));
		snprintf(msg, sizeof(msg), "%s case %zu '%s': expected [%s], got [%s]", name,
			 n_cases - 1, esc, w, g);
		fprintf(stderr, "%s\n", msg);
		if (n_failed++ == 0)
			snprintf(first_failure, sizeof(first_failure), "%s", msg);
	}
	printf("%s: %zu of %zu cases match\n", name, n_cases - n_failed, n_cases);
	ck_assert_msg(n_cases > 0, "%s: no cases read", name);
	ck_assert_msg(n_failed == 0, "%zu of %zu cases differ; first: %s", n_failed, n_cases,
		      first_failure);
	close_cases(&c);
	loom_vocab_free(v);
}

START_TEST(test_golden_llama_spm)
{
	check_vocab_cases("ggml-vocab-llama-spm.gguf");
}
END_TEST

START_TEST(test_golden_phi3)
{
	check_vocab_cases("ggml-vocab-phi-3.gguf");
}
END_TEST

START_TEST(test_golden_gpt2)
{
	check_vocab_cases("ggml-vocab-gpt-2.gguf");
}
END_TEST

START_TEST(test_golden_falcon)
{
	check_vocab_cases("ggml-vocab-falcon.gguf");
}
END_TEST

START_TEST(test_golden_mpt)
{
	check_vocab_cases("ggml-vocab-mpt.gguf");
}
END_TEST

START_TEST(test_golden_starcoder)
{
	check_vocab_cases("ggml-vocab-starcoder.gguf");
}
END_TEST

START_TEST(test_golden_refact)
{
	check_vocab_cases("ggml-vocab-refact.gguf");
}
END_TEST

START_TEST(test_golden_deepseek_llm)
{
	check_vocab_cases("ggml-vocab-deepseek-llm.gguf");
}
END_TEST

START_TEST(test_golden_deepseek_coder)
{
	check_vocab_cases("ggml-vocab-deepseek-coder.gguf");
}
END_TEST

START_TEST(test_golden_bert_bge)
{
	check_vocab_cases("ggml-vocab-bert-bge.gguf");
}
END_TEST

/* Pieces give the text back, less the space the prefix added. */
static void check_round_trip(const char *name)
{
	char rel[256];
	snprintf(rel, sizeof(rel), "golden/tokenizer/%s", name);
	loom_vocab *v = load_gguf_vocab(rel);
	struct vocab_cases c;
	if (v == NULL || !open_cases(&c, name))
		return;
	static loom_token want[MAX_TOKENS], got[MAX_TOKENS];
	const char *text;
	size_t len, n_want, n_cases = 0;
	while (next_case(&c, &text, &len, want, &n_want)) {
		size_t n = tokenize(v, text, len, false, false, got), back_len;
		char *back = detokenize(v, got, n, false, &back_len);
		char esc[512];
		test_escape(text, len, esc, sizeof(esc));
		bool same = len == 0 ? back_len == 0
				     : back_len == len + 1 && back[0] == ' ' &&
					       memcmp(back + 1, text, len) == 0;
		ck_assert_msg(same, "%s case %zu '%s' does not round-trip", name, n_cases, esc);
		free(back);
		n_cases++;
	}
	ck_assert_uint_gt(n_cases, 0);
	close_cases(&c);
	loom_vocab_free(v);
}

START_TEST(test_round_trip_llama_spm)
{
	check_round_trip("ggml-vocab-llama-spm.gguf");
}
END_TEST

START_TEST(test_round_trip_phi3)
{
	check_round_trip("ggml-vocab-phi-3.gguf");
}
END_TEST

/* Byte-level BPE gives every text back byte for byte. */
static void check_exact_round_trip(const loom_vocab *v, const char *what, const char *text,
				   size_t len)
{
	static loom_token toks[MAX_TOKENS];
	size_t n = tokenize(v, text, len, false, false, toks), back_len;
	char *back = detokenize(v, toks, n, false, &back_len);
	char esc[512];
	test_escape(text, len, esc, sizeof(esc));
	ck_assert_msg(back_len == len && memcmp(back, text, len) == 0,
		      "%s: '%s' does not come back from its tokens", what, esc);
	free(back);
}

START_TEST(test_round_trip_gpt2)
{
	static const char *const invalid[] = {
		"\xff", "\xc3", "\xc3hello", "\x80\x80 x", "he\xe2\x96", "\xf0\x9f\x98", "a\xed\xa0\x80z",
		"Hello \xfe\xff world", "\xf4\x90\x80\x80", " \xc0\xaf\n\xe0\x80\x80  ", "caf\xe9 ",
	};
	const char *name = "ggml-vocab-gpt-2.gguf";
	loom_vocab *v = load_gguf_vocab("golden/tokenizer/ggml-vocab-gpt-2.gguf");
	struct vocab_cases c;
	if (v == NULL || !open_cases(&c, name))
		return;
	static loom_token want[MAX_TOKENS];
	const char *text;
	size_t len, n_want, n_cases = 0;
	while (next_case(&c, &text, &len, want, &n_want)) {
		check_exact_round_trip(v, name, text, len);
		n_cases++;
	}
	ck_assert_uint_gt(n_cases, 0);
	for (size_t i = 0; i < sizeof(invalid) / sizeof(invalid[0]); i++)
		check_exact_round_trip(v, name, invalid[i], strlen(invalid[i]));
	close_cases(&c);
	loom_vocab_free(v);
}
END_TEST

/* GPT-2's <|endoftext|> is a control token: one id when special tokens are
 * parsed, plain text otherwise. */
START_TEST(test_parse_special_gpt2)
{
	loom_vocab *v = load_gguf_vocab("golden/tokenizer/ggml-vocab-gpt-2.gguf");
	if (v == NULL)
		return;
	EXPECT(v, "Hello<|endoftext|>world", false, true, 15496, 50256, 6894);
	EXPECT(v, "<|endoftext|><|endoftext|>", false, true, 50256, 50256);
	EXPECT(v, "Hello<|endoftext|>world", false, false, 15496, 27, 91, 437, 1659, 5239, 91, 29,
	       6894);
	expect_piece(v, 50256, false, "");
	expect_piece(v, 50256, true, "<|endoftext|>");
	expect_piece(v, 15496, false, "Hello");
	loom_vocab_free(v);
}
END_TEST

/* Whitespace is Unicode's White_Space, as in llama.cpp: U+180E is not (it
 * goes with the space before it, as a symbol would), U+3000 is. */
START_TEST(test_white_space_gpt2)
{
	loom_vocab *v = load_gguf_vocab("golden/tokenizer/ggml-vocab-gpt-2.gguf");
	if (v == NULL)
		return;
	EXPECT(v, " \xe1\xa0\x8e" "a", false, false, 28053, 254, 236, 64);
	EXPECT(v, "a\xe3\x80\x80\xe3\x80\x80" "b", false, false, 64, 5099, 222, 5099, 222, 65);
	loom_vocab_free(v);
}
END_TEST

/* BERT's [CLS] and [SEP] around the text; word-initial pieces start with a
 * space, continuations do not. */
START_TEST(test_wpm_special)
{
	loom_vocab *v = load_gguf_vocab("golden/tokenizer/ggml-vocab-bert-bge.gguf");
	if (v == NULL)
		return;
	ck_assert_int_eq(loom_vocab_bos(v), 101);
	ck_assert(loom_vocab_adds_bos(v));
	EXPECT(v, "Hello world", true, false, 101, 7592, 2088, 102);
	EXPECT(v, "Hello world", false, false, 7592, 2088);
	EXPECT(v, "[CLS] hello [SEP]", false, true, 101, 7592, 102);
	EXPECT(v, "", true, false, 101, 102);
	expect_piece(v, 7592, false, " hello");
	expect_piece(v, 101, false, "");
	expect_piece(v, 101, true, "[CLS]");
	/* a word with no spelling is [UNK] as a whole */
	EXPECT(v, "hello \xe2\xbe\x80\xe2\xbe\x81x world", false, false, 7592, 100, 2088);
	loom_vocab_free(v);
}
END_TEST

/* The synthetic models carry GPT-2's BPE cut to 511 tokens and
 * <|endoftext|> at 511; llama.cpp gave these ids. */
START_TEST(test_synthetic_bpe)
{
	static const char *const models[] = {"qwen2", "qwen3", "gpt2", "phi2", "stablelm",
					     "starcoder2"};
	for (size_t i = 0; i < sizeof(models) / sizeof(models[0]); i++) {
		char rel[256];
		snprintf(rel, sizeof(rel), "models/synthetic/%s-f32.gguf", models[i]);
		loom_vocab *v = load_gguf_vocab(rel);
		if (v == NULL)
			return;
		ck_assert_msg(!loom_vocab_adds_bos(v), "%s adds BOS", models[i]);
		EXPECT(v, "Once upon a time", true, false, 46, 77, 344, 510, 261, 257, 256, 320, 68);
		EXPECT(v, "The quick brown fox", true, false, 464, 220, 421, 291, 74, 275, 305, 86, 77,
		       277, 78, 87);
		expect_piece(v, 510, false, " up");
		loom_vocab_free(v);
	}
}
END_TEST

/* A long text goes through the pre-tokenizer and the merges in linear
 * time: 1 MiB takes well under a second. */
START_TEST(test_long_input_gpt2)
{
	loom_vocab *v = load_gguf_vocab("golden/tokenizer/ggml-vocab-gpt-2.gguf");
	if (v == NULL)
		return;
	static const char unit[] = "Hello, y'all! 3333 caf\xc3\xa9\n\n   \xf0\x9f\xa6\x99 x\xff ";
	size_t unit_len = sizeof(unit) - 1, reps = (1u << 20) / unit_len, len = reps * unit_len;
	char *text = malloc(len);
	loom_token *toks = malloc(len * sizeof(*toks));
	ck_assert(text != NULL && toks != NULL);
	for (size_t i = 0; i < reps; i++)
		memcpy(text + i * unit_len, unit, unit_len);
	size_t n, back_len;
	ck_assert_int_eq(loom_vocab_tokenize(v, text, len, false, false, toks, len, &n), LOOM_OK);
	char *back = detokenize(v, toks, n, false, &back_len);
	ck_assert(back_len == len && memcmp(back, text, len) == 0);
	free(back);
	free(toks);
	free(text);
	loom_vocab_free(v);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Golden prompts: a minimal reader for the few JSON values they need.     */

/* The value of the first "key": at or after from, or NULL. */
static const char *json_value(const char *from, const char *key)
{
	char pattern[128];
	snprintf(pattern, sizeof(pattern), "\"%s\":", key);
	const char *p = strstr(from, pattern);
	if (p == NULL)
		return NULL;
	p += strlen(pattern);
	while (*p == ' ' || *p == '\n' || *p == '\t' || *p == '\r')
		p++;
	return p;
}

static unsigned json_hex4(const char *p)
{
	char hex[5] = {p[0], p[1], p[2], p[3], '\0'};
	return (unsigned)strtoul(hex, NULL, 16);
}

/* Bytes from the opening quote at p to the closing one; decoding never makes
 * a string longer than that. */
static size_t json_raw_len(const char *p)
{
	size_t n = 1;
	while (p[n] != '"' && p[n] != '\0')
		n += p[n] == '\\' && p[n + 1] != '\0' ? 2 : 1;
	return n;
}

/* Decodes the JSON string starting at p (its opening quote) into a malloc'd,
 * NUL-terminated buffer; *len is its length, *end points past it. */
static char *json_string(const char *p, size_t *len, const char **end)
{
	ck_assert_msg(*p == '"', "JSON string expected at '%.20s'", p);
	char *out = malloc(json_raw_len(p) + 1);
	ck_assert(out != NULL);
	size_t o = 0;
	for (p++; *p != '"'; p++) {
		ck_assert_msg(*p != '\0', "unterminated JSON string");
		if (*p != '\\') {
			out[o++] = *p;
			continue;
		}
		p++;
		switch (*p) {
		case 'b':
			out[o++] = '\b';
			break;
		case 'f':
			out[o++] = '\f';
			break;
		case 'n':
			out[o++] = '\n';
			break;
		case 'r':
			out[o++] = '\r';
			break;
		case 't':
			out[o++] = '\t';
			break;
		case 'u': {
			unsigned cp = json_hex4(p + 1);
			p += 4;
			if (cp >= 0xd800 && cp < 0xdc00 && p[1] == '\\' && p[2] == 'u') {
				cp = 0x10000 + ((cp - 0xd800) << 10) + (json_hex4(p + 3) - 0xdc00);
				p += 6;
			}
			o += put_utf8(out + o, cp);
			break;
		}
		default: /* \" \\ \/ */
			out[o++] = *p;
			break;
		}
	}
	out[o] = '\0';
	*len = o;
	*end = p + 1;
	return out;
}

static size_t json_int_array(const char *p, loom_token *out, size_t cap)
{
	ck_assert_msg(p != NULL && *p == '[', "JSON array expected");
	size_t n = 0;
	for (p++; *p != ']';) {
		char *end;
		long v = strtol(p, &end, 10);
		ck_assert_msg(end != p && n < cap, "bad JSON integer array at '%.20s'", p);
		out[n++] = (loom_token)v;
		p = end;
		while (*p == ',' || *p == ' ' || *p == '\n')
			p++;
	}
	return n;
}

struct json_strings {
	char *s[MAX_TOKENS];
	size_t len[MAX_TOKENS];
	size_t n;
};

static void json_string_array(const char *p, struct json_strings *a)
{
	ck_assert_msg(p != NULL && *p == '[', "JSON array expected");
	a->n = 0;
	for (p++; *p != ']';) {
		while (*p == ',' || *p == ' ' || *p == '\n')
			p++;
		if (*p == ']')
			break;
		ck_assert(a->n < MAX_TOKENS);
		a->s[a->n] = json_string(p, &a->len[a->n], &p);
		a->n++;
	}
}

static void free_strings(struct json_strings *a)
{
	for (size_t i = 0; i < a->n; i++)
		free(a->s[i]);
	a->n = 0;
}

static bool json_true(const char *from, const char *key)
{
	const char *p = json_value(from, key);
	ck_assert_msg(p != NULL, "key '%s' missing", key);
	return strncmp(p, "true", 4) == 0;
}

/* Each token's piece must equal the recorded one. */
static void check_pieces(const loom_vocab *v, const char *what, const loom_token *t, size_t n,
			 const struct json_strings *want, bool special)
{
	ck_assert_msg(want->n == n, "%s: %zu pieces for %zu tokens", what, want->n, n);
	for (size_t i = 0; i < n; i++) {
		char buf[512], e1[256], e2[256];
		size_t len = piece(v, t[i], special, buf, sizeof(buf));
		test_escape(buf, len, e1, sizeof(e1));
		test_escape(want->s[i], want->len[i], e2, sizeof(e2));
		ck_assert_msg(len == want->len[i] && memcmp(buf, want->s[i], len) == 0,
			      "%s: piece %zu of token %d: expected '%s', got '%s'", what, i, t[i], e2,
			      e1);
	}
}

/* The prompt's tokens and their pieces (special=true). */
static void check_prompt(const loom_vocab *v, const char *what, const char *doc)
{
	static loom_token want[MAX_TOKENS], got[MAX_TOKENS];
	static struct json_strings pieces;
	size_t len;
	const char *end;
	char *prompt = json_string(json_value(doc, "prompt"), &len, &end);
	const char *tok = json_value(doc, "tokenize");
	ck_assert_msg(tok != NULL, "%s: no 'tokenize'", what);
	bool add = json_true(tok, "add_special"), parse = json_true(tok, "parse_special");
	size_t n_fed = json_int_array(json_value(doc, "prompt_tokens"), want, MAX_TOKENS);
	/* The prompt tokenized to nothing and the runner fed one token instead;
	 * the pieces are that token's. */
	size_t n_want = json_true(tok, "bos_forced_for_empty_prompt") ? 0 : n_fed;
	size_t n = tokenize(v, prompt, len, add, parse, got);
	char w[1024], g[1024];
	test_format_tokens(want, n_want, w, sizeof(w));
	test_format_tokens(got, n, g, sizeof(g));
	ck_assert_msg(n == n_want && memcmp(got, want, n * sizeof(*got)) == 0,
		      "%s: prompt '%s': expected [%s], got [%s]", what, prompt, w, g);
	json_string_array(json_value(doc, "prompt_token_pieces"), &pieces);
	check_pieces(v, what, want, n_fed, &pieces, true);
	free_strings(&pieces);
	free(prompt);
}

/* The bytes a JSON string of hex digits spells, malloc'd. */
static char *json_hex(const char *p, size_t *len)
{
	size_t n;
	const char *end;
	char *hex = json_string(p, &n, &end);
	char *out = malloc(n / 2 + 1);
	ck_assert(out != NULL && n % 2 == 0);
	for (size_t i = 0; i < n / 2; i++) {
		char pair[3] = {hex[2 * i], hex[2 * i + 1], '\0'};
		out[i] = (char)strtoul(pair, NULL, 16);
	}
	free(hex);
	*len = n / 2;
	return out;
}

/* The greedy continuation's pieces (special=false), and their concatenation
 * against the exact bytes of the recorded text. */
static void check_greedy(const loom_vocab *v, const char *what, const char *doc)
{
	static loom_token toks[MAX_TOKENS];
	static struct json_strings pieces;
	const char *greedy = json_value(doc, "greedy");
	ck_assert_msg(greedy != NULL, "%s: no 'greedy'", what);
	size_t n = json_int_array(json_value(greedy, "tokens"), toks, MAX_TOKENS), text_len, len;
	json_string_array(json_value(greedy, "pieces"), &pieces);
	check_pieces(v, what, toks, n, &pieces, false);
	char *text = json_hex(json_value(greedy, "text_hex"), &text_len);
	char *got = detokenize(v, toks, n, false, &len);
	ck_assert_msg(len == text_len && memcmp(got, text, len) == 0,
		      "%s: greedy text differs from its concatenated pieces", what);
	free(got);
	free(text);
	free_strings(&pieces);
}

static bool is_json_name(const char *name)
{
	size_t n = strlen(name);
	return n > 5 && strcmp(name + n - 5, ".json") == 0;
}

/* Checks every prompt file of one model's golden directory; returns how
 * many. */
static int check_model_prompts(const char *model, const loom_vocab *v)
{
	char dir_path[4096];
	int n = 0;
	snprintf(dir_path, sizeof(dir_path), "%s/golden/%s", test_data_dir(), model);
	DIR *dir = opendir(dir_path);
	ck_assert_msg(dir != NULL, "cannot open %s", dir_path);
	for (struct dirent *e; (e = readdir(dir)) != NULL;) {
		if (!is_json_name(e->d_name))
			continue;
		char path[8192], what[512];
		snprintf(path, sizeof(path), "%s/%s", dir_path, e->d_name);
		snprintf(what, sizeof(what), "%s/%s", model, e->d_name);
		char *doc = test_read_file(path, NULL);
		ck_assert_msg(doc != NULL, "cannot read %s", path);
		check_prompt(v, what, doc);
		check_greedy(v, what, doc);
		free(doc);
		n++;
	}
	closedir(dir);
	return n;
}

/* The vocabulary of models/<name>.gguf if that file exists; NULL otherwise. */
static loom_vocab *model_vocab(const char *name)
{
	char path[4096];
	struct stat st;
	snprintf(path, sizeof(path), "%s/models/%s.gguf", test_data_dir(), name);
	if (stat(path, &st) != 0)
		return NULL;
	loom_model_file *file = test_open_gguf(path);
	ck_assert_msg(file != NULL, "opening %s: %s", path, test_plugin_error());
	loom_vocab *v = load_ok(file);
	test_close_gguf(file);
	return v;
}

/* Every golden prompt of every model, whatever its tokenizer. */
START_TEST(test_golden_prompts)
{
	if (test_data_dir() == NULL)
		return;
	char golden[4096];
	snprintf(golden, sizeof(golden), "%s/golden", test_data_dir());
	DIR *dir = opendir(golden);
	ck_assert_msg(dir != NULL, "cannot open %s", golden);
	int n_models = 0, n_prompts = 0;
	for (struct dirent *e; (e = readdir(dir)) != NULL;) {
		if (e->d_name[0] == '.')
			continue;
		loom_vocab *v = model_vocab(e->d_name);
		if (v == NULL)
			continue;
		n_prompts += check_model_prompts(e->d_name, v);
		n_models++;
		loom_vocab_free(v);
	}
	closedir(dir);
	printf("golden prompts: %d prompts of %d models match\n", n_prompts, n_models);
	ck_assert_msg(n_models > 0 && n_prompts > 0, "no golden prompts found under %s", golden);
}
END_TEST

/* ------------------------------------------------------------------------ */

static Suite *tokenizer_suite(void)
{
	Suite *s = suite_create("tokenizer");
	TCase *load = tcase_create("load");
	tcase_add_test(load, test_load_tiny);
	tcase_add_test(load, test_load_missing_tokens);
	tcase_add_test(load, test_load_missing_model);
	tcase_add_test(load, test_load_unsupported_model);
	tcase_add_test(load, test_load_count_mismatch);
	tcase_add_test(load, test_load_special_out_of_range);
	tcase_add_test(load, test_load_none_sentinel);
	tcase_add_test(load, test_load_bad_types);
	tcase_add_test(load, test_load_no_bos_but_add_bos);
	tcase_add_test(load, test_load_empty_token);
	suite_add_tcase(s, load);

	TCase *spm = tcase_create("spm");
	tcase_add_test(spm, test_merges);
	tcase_add_test(spm, test_merge_across_words);
	tcase_add_test(spm, test_add_special);
	tcase_add_test(spm, test_no_space_prefix);
	tcase_add_test(spm, test_empty_text);
	tcase_add_test(spm, test_byte_fallback);
	tcase_add_test(spm, test_unk_fallback);
	tcase_add_test(spm, test_single_byte_token_fallback);
	tcase_add_test(spm, test_invalid_utf8);
	tcase_add_test(spm, test_parse_special);
	tcase_add_test(spm, test_user_defined);
	tcase_add_test(spm, test_buffer_too_small);
	tcase_add_test(spm, test_bad_arguments);
	tcase_add_test(spm, test_long_input);
	tcase_add_test(spm, test_pieces);
	tcase_add_test(spm, test_eog);
	tcase_add_test(spm, test_phi3_rstrip);
	suite_add_tcase(s, spm);

	TCase *bpe = tcase_create("bpe");
	tcase_add_test(bpe, test_bpe_load);
	tcase_add_test(bpe, test_bpe_unknown_pretokenizer);
	tcase_add_test(bpe, test_bpe_gguf_file);
	tcase_add_test(bpe, test_bpe_default_pretokenizer);
	tcase_add_test(bpe, test_bpe_missing_merges);
	tcase_add_test(bpe, test_bpe_merges);
	tcase_add_test(bpe, test_bpe_invalid_utf8);
	tcase_add_test(bpe, test_bpe_special);
	tcase_add_test(bpe, test_bpe_pieces);
	suite_add_tcase(s, bpe);

	TCase *golden = tcase_create("golden");
	tcase_add_test(golden, test_golden_llama_spm);
	tcase_add_test(golden, test_golden_phi3);
	tcase_add_test(golden, test_golden_gpt2);
	tcase_add_test(golden, test_golden_falcon);
	tcase_add_test(golden, test_golden_mpt);
	tcase_add_test(golden, test_golden_starcoder);
	tcase_add_test(golden, test_golden_refact);
	tcase_add_test(golden, test_golden_deepseek_llm);
	tcase_add_test(golden, test_golden_deepseek_coder);
	tcase_add_test(golden, test_golden_bert_bge);
	tcase_add_test(golden, test_round_trip_llama_spm);
	tcase_add_test(golden, test_round_trip_phi3);
	tcase_add_test(golden, test_round_trip_gpt2);
	tcase_add_test(golden, test_parse_special_gpt2);
	tcase_add_test(golden, test_white_space_gpt2);
	tcase_add_test(golden, test_wpm_special);
	tcase_add_test(golden, test_synthetic_bpe);
	tcase_add_test(golden, test_long_input_gpt2);
	tcase_add_test(golden, test_golden_prompts);
	suite_add_tcase(s, golden);
	return s;
}

LOOM_TEST_MAIN(tokenizer_suite)
