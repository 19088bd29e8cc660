/* test_detokenizer.c - the streaming detokenizer on a real vocabulary
 * (stories260K: SentencePiece with byte fallback, so characters outside its
 * pieces arrive a byte per token): text is given only in whole UTF-8
 * characters, nothing that may begin a stop string is given before it is
 * known not to, a stop string ends the stream, and what is held back comes
 * out at the end. */
#include "check_main.h"
#include "fixture.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MODEL "stories260K-f32.gguf"

typedef struct stream {
	loom_runtime *rt;
	loom_model *m;
	loom_token tokens[256];
	size_t n_tokens;
	char full[1024]; /* the tokens' text, all of it */
	char shown[1024];
	size_t n_shown;
	int n_empty; /* pushes that gave nothing */
} stream;

static bool open_stream(stream *s, const char *text)
{
	memset(s, 0, sizeof(*s));
	loom_model_params mp = loom_model_default_params();
	mp.vocab_only = true;
	s->rt = test_runtime(NULL, 1);
	if ((s->m = test_model_with(s->rt, MODEL, &mp)) == NULL) {
		loom_runtime_free(s->rt);
		return false;
	}
	ck_assert(loom_tokenize(s->m, text, strlen(text), false, false, s->tokens, 256, &s->n_tokens) == LOOM_OK);
	size_t len = 0, n;
	for (size_t i = 0; i < s->n_tokens; i++) {
		ck_assert(loom_token_to_piece(s->m, s->tokens[i], false, s->full + len, sizeof(s->full) - len - 1, &n) ==
			  LOOM_OK);
		len += n;
	}
	s->full[len] = '\0';
	return true;
}

static void close_stream(stream *s)
{
	loom_model_free(s->m);
	loom_runtime_free(s->rt);
}

/* A chunk holds whole characters: it starts on a lead byte and each lead
 * byte's continuation bytes are all there. */
static bool whole_utf8(const char *t, size_t len)
{
	for (size_t i = 0; i < len;) {
		unsigned char c = (unsigned char)t[i];
		size_t need = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
		if (need == 0 || i + need > len)
			return false;
		for (size_t k = 1; k < need; k++)
			if (((unsigned char)t[i + k] & 0xC0) != 0x80)
				return false;
		i += need;
	}
	return true;
}

static void take(stream *s, const char *text, size_t len)
{
	ck_assert_msg(whole_utf8(text, len), "a chunk of %zu bytes splits a character", len);
	ck_assert(s->n_shown + len < sizeof(s->shown));
	memcpy(s->shown + s->n_shown, text, len);
	s->n_shown += len;
	s->shown[s->n_shown] = '\0';
	s->n_empty += len == 0;
}

START_TEST(characters_arrive_whole)
{
	stream s;
	if (!open_stream(&s, "Tom saw a café and a snowman ☃ in the park."))
		return;
	loom_detokenizer *d = NULL;
	ck_assert(loom_detokenizer_create(s.m, NULL, 0, &d) == LOOM_OK);
	const char *text;
	size_t len;
	bool stopped;
	for (size_t i = 0; i < s.n_tokens; i++) {
		ck_assert(loom_detokenizer_push(d, s.tokens[i], false, &text, &len, &stopped) == LOOM_OK);
		ck_assert(!stopped);
		take(&s, text, len);
	}
	ck_assert(loom_detokenizer_finish(d, &text, &len) == LOOM_OK);
	take(&s, text, len);
	ck_assert_str_eq(s.shown, s.full);
	/* é and ☃ come as byte tokens: their first bytes were held back. */
	ck_assert_msg(s.n_empty >= 3, "%d pushes held text back; é and ☃ take at least 3", s.n_empty);
	loom_detokenizer_free(d);
	close_stream(&s);
}
END_TEST

START_TEST(a_stop_string_ends_the_text_before_it)
{
	stream s;
	if (!open_stream(&s, "Once upon a time there was a little girl."))
		return;
	const char *stop[] = {"", "nothing like this", "a time th"};
	loom_detokenizer *d = NULL;
	ck_assert(loom_detokenizer_create(s.m, stop, 3, &d) == LOOM_OK);
	const char *text;
	size_t len;
	bool stopped = false;
	size_t i = 0;
	for (; i < s.n_tokens && !stopped; i++) {
		ck_assert(loom_detokenizer_push(d, s.tokens[i], false, &text, &len, &stopped) == LOOM_OK);
		take(&s, text, len);
	}
	ck_assert_msg(stopped, "the stop string was not seen in '%s'", s.full);
	ck_assert_msg(i < s.n_tokens, "the stream stopped only at its last token");
	/* Exactly the text before the stop string: nothing of it, nor of what
	 * could have begun it, was given early. */
	*strstr(s.full, "a time th") = '\0';
	ck_assert_str_eq(s.shown, s.full);
	ck_assert(loom_detokenizer_push(d, s.tokens[i], false, &text, &len, &stopped) == LOOM_OK);
	ck_assert(stopped && len == 0);
	ck_assert(loom_detokenizer_finish(d, &text, &len) == LOOM_OK && len == 0);
	loom_detokenizer_free(d);
	close_stream(&s);
}
END_TEST

/* A possible start of a stop string is held until the text goes another
 * way, or given at once when the token is the last. */
START_TEST(a_partial_stop_string_is_held_until_decided)
{
	stream s;
	if (!open_stream(&s, "Once upon a time"))
		return;
	char stop[64];
	snprintf(stop, sizeof(stop), "%s!", s.full);
	const char *stops[] = {stop};
	const char *text;
	size_t len;
	loom_detokenizer *d = NULL;
	ck_assert(loom_detokenizer_create(s.m, stops, 1, &d) == LOOM_OK);
	for (size_t i = 0; i < s.n_tokens; i++) {
		ck_assert(loom_detokenizer_push(d, s.tokens[i], false, &text, &len, NULL) == LOOM_OK);
		ck_assert_msg(len == 0, "token %zu gave '%.*s' while the stop string could still follow", i, (int)len,
			      text);
	}
	ck_assert(loom_detokenizer_finish(d, &text, &len) == LOOM_OK);
	ck_assert(len == strlen(s.full) && memcmp(text, s.full, len) == 0);
	loom_detokenizer_free(d);

	ck_assert(loom_detokenizer_create(s.m, stops, 1, &d) == LOOM_OK);
	s.n_shown = 0;
	for (size_t i = 0; i < s.n_tokens; i++) {
		ck_assert(loom_detokenizer_push(d, s.tokens[i], i + 1 == s.n_tokens, &text, &len, NULL) == LOOM_OK);
		take(&s, text, len);
	}
	ck_assert_str_eq(s.shown, s.full);
	loom_detokenizer_free(d);
	close_stream(&s);
}
END_TEST

START_TEST(bad_arguments_are_refused)
{
	loom_detokenizer *d = NULL;
	const char *text;
	size_t len;
	ck_assert_int_eq(loom_detokenizer_create(NULL, NULL, 0, &d), LOOM_ERR_INVALID_ARGUMENT);
	ck_assert_ptr_null(d);
	ck_assert_int_eq(loom_detokenizer_push(NULL, 0, false, &text, &len, NULL), LOOM_ERR_INVALID_ARGUMENT);
	ck_assert_int_eq(loom_detokenizer_finish(NULL, &text, &len), LOOM_ERR_INVALID_ARGUMENT);
	loom_detokenizer_free(NULL);
}
END_TEST

static Suite *detokenizer_suite(void)
{
	Suite *s = suite_create("detokenizer");
	TCase *tc = tcase_create("stream");
	tcase_add_test(tc, characters_arrive_whole);
	tcase_add_test(tc, a_stop_string_ends_the_text_before_it);
	tcase_add_test(tc, a_partial_stop_string_is_held_until_decided);
	tcase_add_test(tc, bad_arguments_are_refused);
	suite_add_tcase(s, tc);
	return s;
}

LOOM_TEST_MAIN(detokenizer_suite)
