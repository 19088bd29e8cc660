/* test_grammar_sampling.c - grammars over a real vocabulary: the token
 * trie's mask against each token's bytes walked alone, and sampling from
 * random logits under a grammar, every finished text then parsed by cJSON
 * and checked field by field; most draws checked without a mask. */
#include "check_main.h"

#include "fixture.h"
#include "grammar_check.h"
#include "grammar/grammar_sampler.h"
#include "synth_model.h"
#include "testdata.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static loom_grammar *parse(const char *text)
{
	loom_grammar *g = NULL;
	ck_assert_msg(loom_grammar_parse(text, strlen(text), NULL, &g) == LOOM_OK, "%s", loom_last_error());
	return g;
}

static const char record_gbnf[] = "root ::= \"{\\\"n\\\": \" [1-9] [0-9]{0,2} \", \\\"s\\\": \\\"\" [a-z ]{0,12} "
				  "\"\\\", \\\"ok\\\": \" (\"true\" | \"false\") \"}\"\n";

/* In each of several states of a JSON grammar (after prefixes of a
 * document), the trie's walk allows exactly the tokens whose bytes, walked
 * one by one from that state, continue the grammar, and the
 * end-of-generation token only where a sentence may end. */
START_TEST(mask_is_each_token_walked_alone)
{
	loom_runtime *rt = test_runtime("cpu-generic", 1);
	loom_model *m = grammar_vocab_model(rt, test_tmp_dir("grammar_sampling"));
	const loom_token_trie *t = loom_model_token_trie(m);
	ck_assert_ptr_nonnull(t);
	ck_assert_ptr_eq(t, loom_model_token_trie(m)); /* built once */
	loom_grammar *g = parse("root ::= \"{\" ws (pair (\",\" ws pair)*)? \"}\"\n"
				"pair ::= \"\\\"\" [a-z ]* \"\\\":\" ws (\"true\" | [0-9]+)\n"
				"ws ::= [ \\n]{0,3}\n");
	static const char *const prefixes[] = {"", "{", "{\"", "{\"the", "{\"a\": ", "{\"a\":12", "{\"a\":1}"};
	const int32_t n_vocab = t->n_vocab;
	uint32_t *bits = calloc(((size_t)n_vocab + 31) / 32, sizeof(uint32_t));
	loom_trie_walk walk = {0};
	for (size_t p = 0; p < sizeof(prefixes) / sizeof(prefixes[0]); p++) {
		loom_gr_matcher mt;
		ck_assert_int_eq(loom_gr_matcher_init(&mt, g), LOOM_OK);
		ck_assert(loom_gr_matcher_accept(&mt, (const unsigned char *)prefixes[p], strlen(prefixes[p])));
		int32_t n_allowed, counted = 0;
		ck_assert_int_eq(loom_token_trie_mask(t, &walk, &mt.arena, g, mt.state, bits, &n_allowed), LOOM_OK);
		for (loom_token tok = 0; tok < n_vocab; tok++) {
			bool error, alone = loom_token_trie_allows(t, &mt.arena, g, mt.state, tok, &error);
			bool masked = (bits[tok / 32] >> (tok % 32)) & 1;
			ck_assert_msg(alone == masked, "after '%s', token %d: walked alone %d, in the mask %d", prefixes[p],
				      tok, alone, masked);
			counted += masked;
		}
		ck_assert_int_eq(counted, n_allowed);
		const bool eos = (bits[SYNTH_TOKEN_EOS / 32] >> (SYNTH_TOKEN_EOS % 32)) & 1;
		ck_assert(eos == (p == sizeof(prefixes) / sizeof(prefixes[0]) - 1));
		printf("after '%s': %d of %d tokens allowed\n", prefixes[p], n_allowed, n_vocab);
		loom_gr_matcher_free(&mt);
	}
	free(bits);
	loom_trie_walk_free(&walk);
	loom_grammar_free(g);
	loom_model_free(m);
	loom_runtime_free(rt);
}
END_TEST

/* The text of tokens, as the trie holds their bytes. */
static size_t append_piece(const loom_token_trie *t, loom_token tok, char *text, size_t len, size_t cap)
{
	const uint32_t n = t->piece_off[tok + 1] - t->piece_off[tok];
	ck_assert_uint_lt(len + n, cap);
	memcpy(text + len, t->pieces + t->piece_off[tok], n);
	return len + n;
}

/* Random logits at temperature 1 through a sampler with the record
 * grammar: every text ends (the grammar allows nothing but the end after
 * its last brace), and cJSON reads the fields the grammar promises. */
START_TEST(sampled_texts_follow_the_grammar)
{
	loom_runtime *rt = test_runtime("cpu-generic", 1);
	loom_model *m = grammar_vocab_model(rt, test_tmp_dir("grammar_sampling"));
	loom_grammar *g = parse(record_gbnf);
	uint64_t x = 12345;
	for (int seed = 0; seed < 40; seed++) {
		char text[512];
		size_t len = 0;
		const bool ended = grammar_sample_text(m, g, (uint64_t)seed, &x, 0.0f, 200, text, sizeof(text), &len);
		ck_assert_msg(ended, "seed %d: no end after 200 tokens: %.*s", seed, (int)len, text);
		cJSON *j = cJSON_ParseWithLength(text, len);
		ck_assert_msg(j != NULL, "seed %d: not JSON: %.*s", seed, (int)len, text);
		const cJSON *n = cJSON_GetObjectItemCaseSensitive(j, "n"), *str = cJSON_GetObjectItemCaseSensitive(j, "s"),
			    *ok = cJSON_GetObjectItemCaseSensitive(j, "ok");
		ck_assert(cJSON_IsNumber(n) && n->valuedouble >= 1 && n->valuedouble <= 999);
		ck_assert(cJSON_IsString(str) && strlen(str->valuestring) <= 12);
		ck_assert(cJSON_IsBool(ok));
		if (seed == 0)
			printf("seed 0: %.*s\n", (int)len, text);
		cJSON_Delete(j);
	}
	loom_grammar_free(g);
	loom_model_free(m);
	loom_runtime_free(rt);
}
END_TEST

/* Sample, then check: with the logits favouring what the grammar wants
 * (a model that has learnt the format) a greedy sampler gives the text and
 * no draw needs the whole mask; a favoured token the grammar refuses needs
 * it once a draw. */
START_TEST(most_draws_need_no_mask)
{
	loom_runtime *rt = test_runtime("cpu-generic", 1);
	loom_model *m = grammar_vocab_model(rt, test_tmp_dir("grammar_sampling"));
	const loom_token_trie *t = loom_model_token_trie(m);
	loom_grammar *g = parse("root ::= \" the cat\"\n");
	loom_grammar_follow *f = NULL;
	ck_assert_int_eq(loom_grammar_follow_create(m, g, &f), LOOM_OK);
	const int32_t n_vocab = t->n_vocab;
	float *logits = calloc((size_t)n_vocab, sizeof(float));
	loom_sampler_params sp = loom_sampler_default_params();
	sp.temperature = 0.0f;
	loom_sampler *s = NULL;
	ck_assert(loom_sampler_create(&sp, &s) == LOOM_OK);
	ck_assert_int_eq(loom_sampler_set_grammar(s, m, g), LOOM_OK);
	/* The text in the tokenizer's own tokens, each favoured in turn. */
	loom_token toks[16];
	size_t n = 0;
	ck_assert(loom_tokenize(m, "the cat", 7, false, false, toks, 16, &n) == LOOM_OK);
	char text[64];
	size_t len = 0;
	for (size_t i = 0; i <= n; i++) {
		memset(logits, 0, (size_t)n_vocab * sizeof(float));
		logits[i < n ? toks[i] : SYNTH_TOKEN_EOS] = 5.0f;
		loom_token tok = loom_sampler_sample(s, logits, n_vocab);
		ck_assert_int_eq(tok, i < n ? toks[i] : SYNTH_TOKEN_EOS);
		loom_sampler_accept(s, tok);
		if (i < n)
			len = append_piece(t, tok, text, len, sizeof(text));
	}
	/* SentencePiece's "▁the": the text starts with its space. */
	ck_assert_msg(len == 8 && memcmp(text, " the cat", 8) == 0, "%.*s", (int)len, text);
	loom_sampler_free(s);
	/* The same tokens through a follower: each checked, none masked. */
	for (size_t i = 0; i < n; i++) {
		bool allowed;
		ck_assert_int_eq(loom_grammar_follow_check(f, toks[i], &allowed), LOOM_OK);
		ck_assert(allowed);
		ck_assert_int_eq(loom_grammar_follow_accept(f, toks[i]), LOOM_OK);
	}
	ck_assert_int_eq(f->n_masked, 0);
	ck_assert_int_eq(f->n_checked, (int64_t)n);
	ck_assert_int_eq(loom_grammar_follow_reset(f), LOOM_OK);
	/* The follower directly: a favoured refused token needs the mask. */
	loom_token drawn;
	for (int i = 0; i < 3; i++) {
		bool allowed;
		ck_assert_int_eq(loom_grammar_follow_check(f, SYNTH_TOKEN_BYTE0 + 'z', &allowed), LOOM_OK);
		ck_assert(!allowed);
		const float *masked;
		ck_assert_int_eq(loom_grammar_follow_mask(f, logits, n_vocab, &masked), LOOM_OK);
		drawn = -1;
		for (int32_t k = 0; k < n_vocab; k++)
			if (isfinite(masked[k]) && (drawn < 0 || masked[k] > masked[drawn]))
				drawn = k;
		ck_assert_int_ge(drawn, 0);
	}
	ck_assert_int_eq(f->n_masked, 3);
	ck_assert_int_eq(f->n_checked, (int64_t)n + 3);
	loom_grammar_follow_free(f);
	free(logits);
	loom_grammar_free(g);
	loom_model_free(m);
	loom_runtime_free(rt);
}
END_TEST

/* On a real vocabulary (DeepSeek LLM's 102,400 tokens, byte-level BPE):
 * in states inside strings, where the walk marks the slice of string-body
 * tokens at once and goes through the other tokens only, and in states
 * where it cannot, the mask is each token walked alone. */
START_TEST(mask_with_the_slice_is_each_token_walked_alone)
{
	char path[4096];
	if (!test_data_path(path, sizeof(path), "golden/tokenizer/ggml-vocab-deepseek-llm.gguf"))
		return;
	loom_runtime *rt = test_runtime("cpu-generic", 1);
	loom_model_params mp = loom_model_default_params();
	mp.vocab_only = true;
	loom_model *m = NULL;
	ck_assert_msg(loom_model_load(rt, path, &mp, &m) == LOOM_OK, "%s", loom_last_error());
	const loom_token_trie *t = loom_model_token_trie(m);
	ck_assert_ptr_nonnull(t);
	printf("slice: %d of %d tokens; the rest's trie %u nodes of %u\n", t->n_string, t->n_vocab, t->rest->n_nodes,
	       t->n_nodes);
	ck_assert_int_gt(t->n_string, t->n_vocab / 2);
	static const struct {
		const char *schema, *prefix;
	} states[] = {
		{"{\"type\":\"string\"}", "\""},
		{"{\"type\":\"string\"}", "\"abc"},
		{"{\"type\":\"string\",\"minLength\":3}", "\""},
		{"{\"type\":\"string\",\"minLength\":3}", "\"ab"},
		{"{\"type\":\"string\",\"maxLength\":3}", "\"a"},
		{"{\"type\":\"string\",\"maxLength\":5}", "\""},
		{"{\"type\":\"string\",\"maxLength\":5}", "\"abcd"},
		{"{\"type\":\"string\",\"maxLength\":5}", "\"abcde"},
		{"{\"type\":\"string\",\"minLength\":1,\"maxLength\":2}", "\""},
		{"{\"type\":\"string\",\"maxLength\":40}", "\"ab"},
		{"{\"type\":\"string\",\"pattern\":\"^[a-z]+$\"}", "\"ab"},
		{"{\"type\":\"string\",\"pattern\":\"a+\"}", "\"xx"},
		{"{\"type\":\"object\",\"properties\":{\"s\":{\"type\":\"string\"}}}", "{\"s\": \"q\\u00e9"},
		{"{\"anyOf\":[{\"type\":\"string\"},{\"type\":\"string\",\"format\":\"date\"}]}", "\"20"},
	};
	uint32_t *bits = calloc(((size_t)t->n_vocab + 31) / 32, sizeof(uint32_t));
	loom_trie_walk walk = {0};
	for (size_t i = 0; i < sizeof(states) / sizeof(states[0]); i++) {
		loom_grammar *g = NULL;
		ck_assert_int_eq(loom_grammar_from_json_schema(states[i].schema, strlen(states[i].schema), &g), LOOM_OK);
		loom_gr_matcher mt;
		ck_assert_int_eq(loom_gr_matcher_init(&mt, g), LOOM_OK);
		ck_assert(loom_gr_matcher_accept(&mt, (const unsigned char *)states[i].prefix, strlen(states[i].prefix)));
		int32_t n_allowed;
		ck_assert_int_eq(loom_token_trie_mask(t, &walk, &mt.arena, g, mt.state, bits, &n_allowed), LOOM_OK);
		int32_t counted = 0;
		for (loom_token tok = 0; tok < t->n_vocab; tok++) {
			bool error, alone = loom_token_trie_allows(t, &mt.arena, g, mt.state, tok, &error);
			const bool masked = (bits[tok / 32] >> (tok % 32)) & 1;
			ck_assert_msg(alone == masked, "%s after '%s', token %d: walked alone %d, in the mask %d",
				      states[i].schema, states[i].prefix, tok, alone, masked);
			counted += masked;
		}
		ck_assert_int_eq(counted, n_allowed);
		printf("%s after '%s': %d tokens allowed\n", states[i].schema, states[i].prefix, n_allowed);
		loom_gr_matcher_free(&mt);
		loom_grammar_free(g);
	}
	loom_trie_walk_free(&walk);
	free(bits);
	loom_model_free(m);
	loom_runtime_free(rt);
}
END_TEST

static Suite *grammar_sampling_suite(void)
{
	Suite *s = suite_create("grammar_sampling");
	TCase *tc = tcase_create("grammar_sampling");
	tcase_add_test(tc, mask_is_each_token_walked_alone);
	tcase_add_test(tc, mask_with_the_slice_is_each_token_walked_alone);
	tcase_add_test(tc, sampled_texts_follow_the_grammar);
	tcase_add_test(tc, most_draws_need_no_mask);
	suite_add_tcase(s, tc);
	return s;
}

LOOM_TEST_MAIN(grammar_sampling_suite)
