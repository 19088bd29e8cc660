/* test_grammar.c - GBNF text compiled and followed byte by byte: what a
 * grammar accepts and refuses, where a sentence may end, code points cut
 * between bytes, repetition bounds, tokens named by id between the bytes,
 * and each compile error with its line and column. */
#include "check_main.h"

#include "grammar/grammar.h"
#include "grammar_check.h"

#include <string.h>

static loom_grammar *compile(const char *text)
{
	loom_grammar *g = NULL;
	ck_assert_msg(loom_grammar_parse(text, strlen(text), NULL, &g) == LOOM_OK, "%s", loom_last_error());
	return g;
}

static const char json_gbnf[] = "# JSON, as llama.cpp's json.gbnf describes it\n"
				"root   ::= object\n"
				"value  ::= object | array | string | number | (\"true\" | \"false\" | \"null\") ws\n"
				"object ::=\n"
				"  \"{\" ws (\n"
				"            string \":\" ws value\n"
				"    (\",\" ws string \":\" ws value)*\n"
				"  )? \"}\" ws\n"
				"array  ::=\n"
				"  \"[\" ws (\n"
				"            value\n"
				"    (\",\" ws value)*\n"
				"  )? \"]\" ws\n"
				"string ::=\n"
				"  \"\\\"\" (\n"
				"    [^\"\\\\\\x7F\\x00-\\x1F] |\n"
				"    \"\\\\\" ([\"\\\\/bfnrt] | \"u\" [0-9a-fA-F]{4})\n"
				"  )* \"\\\"\" ws\n"
				"number ::= (\"-\"? ([0-9] | [1-9] [0-9]{0,15})) (\".\" [0-9]+)? ([eE] [-+]? [0-9] [1-9]{0,15})? ws\n"
				"ws ::= | \" \" | \"\\n\" [ \\t]{0,20}\n";

START_TEST(json_grammar_takes_json_and_refuses_the_rest)
{
	loom_grammar *g = compile(json_gbnf);
	ck_assert(grammar_takes(g, "{}"));
	ck_assert(grammar_takes(g, "{\"a\": [1, 2.5, -3e7, {\"b\": \"c\\n\\u00e9\"}], \"d\": true, \"e\": null}"));
	ck_assert(grammar_takes(g, "{\"caf\xc3\xa9\": \"\xe2\x82\xac \xf0\x9f\x98\x80\"}"));
	ck_assert(grammar_takes(g, "{\n  \"a\": 1\n}"));
	ck_assert(!grammar_takes(g, "{\"a\": }"));
	ck_assert(!grammar_takes(g, "{\"a\" 1}"));
	ck_assert(!grammar_takes(g, "[1, 2]"));          /* the root is an object */
	ck_assert(!grammar_takes(g, "{\"a\": 01}"));     /* no leading zeros */
	ck_assert(!grammar_takes(g, "{\"a\": \"\x01\"}")); /* no raw control characters */
	ck_assert(!grammar_takes(g, "{\"a\": 1"));       /* unfinished: cannot end */
	ck_assert(grammar_starts(g, "{\"a\": [1, 2"));
	ck_assert(!grammar_starts(g, "{\"a\": [1, 2]]"));
	/* Whitespace is bounded: 20 spaces after a newline, not 21. */
	char pad[64] = "{\n";
	memset(pad + 2, ' ', 20);
	ck_assert(grammar_starts(g, pad));
	pad[22] = ' ';
	ck_assert(!grammar_starts(g, pad));
	loom_grammar_free(g);
}
END_TEST

START_TEST(repetitions_keep_their_bounds)
{
	loom_grammar *g = compile("root ::= \"a\"{2,4} \"b\"* (\"c\" \"d\")+ \"e\"?\n");
	ck_assert(!grammar_takes(g, "acd"));
	ck_assert(grammar_takes(g, "aacd"));
	ck_assert(grammar_takes(g, "aaaabbbcdcde"));
	ck_assert(!grammar_takes(g, "aaaaacd"));
	ck_assert(!grammar_takes(g, "aa"));
	ck_assert(!grammar_takes(g, "aacdee"));
	loom_grammar_free(g);
	g = compile("root ::= [0-9]{3} | \"x\"{2,}\n");
	ck_assert(grammar_takes(g, "123"));
	ck_assert(!grammar_takes(g, "12"));
	ck_assert(!grammar_takes(g, "x"));
	ck_assert(grammar_takes(g, "xxxxxxxx"));
	loom_grammar_free(g);
}
END_TEST

/* A code point's first bytes are taken when some allowed code point
 * begins with them, refused at once when none does; bytes that are not
 * UTF-8 are refused. */
START_TEST(code_points_cut_between_bytes)
{
	loom_grammar *g = compile("root ::= [a-z\\u00e9]+ | \"\\u20ac\" .\n");
	ck_assert(grammar_takes(g, "caf\xc3\xa9"));
	ck_assert(grammar_starts(g, "caf\xc3"));     /* the first byte of é */
	ck_assert(!grammar_starts(g, "caf\xc4"));    /* U+0100..U+013F: none allowed */
	ck_assert(!grammar_starts(g, "caf\xc3\xa8")); /* è */
	ck_assert(grammar_starts(g, "\xe2\x82"));    /* two bytes of € */
	ck_assert(!grammar_takes(g, "\xe2\x82"));    /* a code point unfinished cannot end */
	ck_assert(grammar_takes(g, "\xe2\x82\xac\xf0\x9f\x98\x80")); /* €, then any one character */
	ck_assert(!grammar_starts(g, "\xe2\x82\xac\xff"));          /* not UTF-8 */
	ck_assert(!grammar_starts(g, "\xe2\x82\xac\x80"));          /* a stray continuation byte */
	ck_assert(!grammar_starts(g, "\xc0\xaf"));                  /* an overlong lead */
	loom_grammar_free(g);
	/* A lead byte's own least code point: 0xE0 cannot begin "a". */
	g = compile("root ::= \"a\" | .\n");
	ck_assert(!grammar_starts(g, "\xe0\x80"));     /* overlong, whatever follows */
	ck_assert(!grammar_takes(g, "\xe0\x80\x81")); /* U+0001, overlong */
	ck_assert(!grammar_takes(g, "\xed\xa0\x80")); /* a surrogate */
	ck_assert(!grammar_starts(g, "\xed\xa0"));     /* one whatever follows: refused at once */
	ck_assert(grammar_starts(g, "\xed\x9f"));      /* U+D7C0..U+D7FF */
	ck_assert(!grammar_starts(g, "\xf4\x90"));     /* past U+10FFFF */
	ck_assert(grammar_takes(g, "\xf4\x8f\xbf\xbf"));
	ck_assert(grammar_takes(g, "\xe0\xa0\x80"));  /* U+0800 */
	loom_grammar_free(g);
	g = compile("root ::= \"a\"\n");
	ck_assert(!grammar_starts(g, "\xe0"));
	ck_assert(!grammar_starts(g, "\xf0"));
	loom_grammar_free(g);
	/* A negated class meets a partial code point unless every code point
	 * it could still become is excluded. */
	g = compile("root ::= [^\\u00c0-\\u00ff]\n");
	ck_assert(!grammar_starts(g, "\xc3")); /* U+00C0..U+00FF: all excluded */
	ck_assert(grammar_starts(g, "\xc4"));
	ck_assert(grammar_takes(g, "\xc4\x80"));
	loom_grammar_free(g);
}
END_TEST

START_TEST(rules_refer_and_recurse)
{
	loom_grammar *g = compile("root ::= list\nlist ::= \"(\" (item (\" \" item)*)? \")\"\nitem ::= [a-z]+ | list\n");
	ck_assert(grammar_takes(g, "()"));
	ck_assert(grammar_takes(g, "(a (b c) ((d)))"));
	ck_assert(!grammar_takes(g, "(a (b c)"));
	ck_assert(!grammar_takes(g, "(a  b)"));
	loom_grammar_free(g);
	/* Another start rule. */
	const char *text = "root ::= \"x\"\nother ::= \"y\"\n";
	ck_assert_int_eq(loom_grammar_parse(text, strlen(text), "other", &g), LOOM_OK);
	ck_assert(grammar_takes(g, "y"));
	ck_assert(!grammar_takes(g, "x"));
	loom_grammar_free(g);
}
END_TEST

/* A token by id (<[id]>: a format's marker, a control token with no
 * text) comes between bytes in one step, and only where the grammar has
 * it. */
START_TEST(tokens_by_id_come_whole)
{
	loom_grammar *g = compile("root ::= name <[7]> [0-9]+ (<[9]> name)?\nname ::= [a-z]+\n");
	loom_gr_matcher m;
	ck_assert_int_eq(loom_gr_matcher_init(&m, g), LOOM_OK);
	ck_assert(!loom_gr_takes_token(g, m.state, 7));
	ck_assert(!loom_gr_matcher_accept_token(&m, 7)); /* a name first */
	ck_assert(loom_gr_matcher_accept(&m, (const unsigned char *)"ab", 2));
	ck_assert(loom_gr_takes_token(g, m.state, 7) && !loom_gr_takes_token(g, m.state, 9));
	ck_assert(!loom_gr_can_end(m.state));
	ck_assert(loom_gr_matcher_accept_token(&m, 7));
	ck_assert(!loom_gr_matcher_accept_token(&m, 7)); /* once */
	ck_assert(!loom_gr_matcher_accept(&m, (const unsigned char *)"c", 1));
	ck_assert(loom_gr_matcher_accept(&m, (const unsigned char *)"42", 2));
	ck_assert(loom_gr_can_end(m.state) && loom_gr_takes_token(g, m.state, 9));
	ck_assert(loom_gr_matcher_accept_token(&m, 9));
	ck_assert(!loom_gr_can_end(m.state));
	ck_assert(loom_gr_matcher_accept(&m, (const unsigned char *)"z", 1));
	ck_assert(loom_gr_can_end(m.state) && !loom_gr_takes_token(g, m.state, 9));
	/* The token's id is not its text. */
	ck_assert(!grammar_takes(g, "ab<[7]>42"));
	loom_gr_matcher_free(&m);
	loom_grammar_free(g);
}
END_TEST

/* An ambiguous grammar: a run of a's splits into x's of one or two in
 * many ways, so after n of them the matcher holds a stack for each place
 * the parse may be (hundreds at once), each kept once, however many ways
 * lead to it. A step finds each new stack among the others by hash
 * (where it compared each with every other, this suite took 1.7 s rather
 * than 0.3, and a fuzzed grammar near the 4,096-stack limit 5 s for 170
 * bytes rather than 0.08). */
START_TEST(ambiguous_grammars_keep_each_stack_once)
{
	loom_grammar *g = compile("root ::= x{0,600} \"b\"\nx ::= \"a\" | \"a\" \"a\"\n");
	static char text[1300];
	/* 600 x's hold 600 to 1200 a's. */
	memset(text, 'a', 1200);
	strcpy(text + 1200, "b");
	ck_assert(grammar_takes(g, text));
	memset(text, 'a', 1201);
	strcpy(text + 1201, "b");
	ck_assert(!grammar_takes(g, text));
	strcpy(text + 300, "b");
	ck_assert(grammar_takes(g, text));
	/* After 400 a's: any count of x's from 200 to 400, the last one
	 * maybe half read; the same stack reached both ways is there once. */
	loom_gr_matcher m;
	memset(text, 'a', 401);
	ck_assert_int_eq(loom_gr_matcher_init(&m, g), LOOM_OK);
	ck_assert(loom_gr_matcher_accept(&m, (const unsigned char *)text, 400));
	const uint32_t after_400 = m.state->n_stacks;
	ck_assert(loom_gr_matcher_accept(&m, (const unsigned char *)text, 1));
	ck_assert_msg(after_400 >= 200 && m.state->n_stacks >= after_400 && m.state->n_stacks <= after_400 + 2,
		      "%u stacks after 400 a's, %u after 401", after_400, m.state->n_stacks);
	for (uint32_t i = 0; i < m.state->n_stacks; i++)
		for (uint32_t j = i + 1; j < m.state->n_stacks; j++) {
			const uint32_t li = m.state->offsets[i + 1] - m.state->offsets[i];
			const uint32_t lj = m.state->offsets[j + 1] - m.state->offsets[j];
			ck_assert_msg(li != lj || memcmp(m.state->data + m.state->offsets[i],
							 m.state->data + m.state->offsets[j], li * sizeof(uint32_t)) != 0,
				      "stacks %u and %u are the same", i, j);
		}
	loom_gr_matcher_free(&m);
	loom_grammar_free(g);
}
END_TEST

static const struct broken {
	const char *text, *message;
} broken[] = {
	{"root ::= \"a\" b\n", "grammar:1:14: rule 'b' is used but not defined"},
	{"root ::= \"a\n", "grammar:1:10: a string literal without its closing quote"},
	{"root ::= [ab\n", "grammar:1:10: a character class without its closing bracket"},
	{"root ::= (\"a\"\n", "grammar:1:10: a group without its closing parenthesis"},
	{"root = \"a\"\n", "grammar:1:6: expected '::='"},
	{"root ::= \"a\"\nroot ::= \"b\"\n", "grammar:2:1: a rule defined twice"},
	{"x ::= \"a\"\n", "grammar: no rule 'root' to start from"},
	{"root ::= root \"a\" | \"b\"\n", "grammar:1:1: rule 'root' is left-recursive"},
	{"root ::= e \"a\"\ne ::= \"\" | root\n", "is left-recursive"},
	{"root ::= \"a\"{20000}\n", "grammar:1:13: a repetition count past 10000"},
	{"root ::= \"a\"{3,2}\n", "a repetition's bound is below its count"},
	{"root ::= \"\\q\"\n", "grammar:1:11: an unknown escape"},
	{"root ::= \"\\x4\"\n", "an escape needs its hex digits"},
	{"root ::= [z-a]\n", "a class range whose end is before its start"},
	{"root ::= <think>\n", "grammar:1:10: a token reference is <[id]>: tokens by their text are not supported"},
	{"root ::= <[12x]>\n", "a token reference is <[id]>, its id a number from 0 to 2147483647"},
	{"root ::= <[2147483648]>\n", "its id a number from 0 to 2147483647"},
	{"root ::= <[7]\n", "a token reference is <[id]>"},
	{"root ::= \"a\" )\n", "a closing parenthesis without its opening one"},
	{"root ::= @\n", "grammar:1:10: expected a literal, a class, '.', '(' or a rule name"},
};

START_TEST(broken_grammars_say_where)
{
	const struct broken *b = &broken[_i];
	loom_grammar *g = (loom_grammar *)1;
	ck_assert_int_eq(loom_grammar_parse(b->text, strlen(b->text), NULL, &g), LOOM_ERR_INVALID_ARGUMENT);
	ck_assert_ptr_null(g);
	ck_assert_msg(strstr(loom_last_error(), b->message) != NULL, "'%s': %s (expected '%s')", b->text,
		      loom_last_error(), b->message);
}
END_TEST

static Suite *grammar_suite(void)
{
	Suite *s = suite_create("grammar");
	TCase *tc = tcase_create("grammar");
	tcase_add_test(tc, json_grammar_takes_json_and_refuses_the_rest);
	tcase_add_test(tc, repetitions_keep_their_bounds);
	tcase_add_test(tc, code_points_cut_between_bytes);
	tcase_add_test(tc, rules_refer_and_recurse);
	tcase_add_test(tc, tokens_by_id_come_whole);
	tcase_add_test(tc, ambiguous_grammars_keep_each_stack_once);
	tcase_add_loop_test(tc, broken_grammars_say_where, 0, (int)(sizeof(broken) / sizeof(broken[0])));
	suite_add_tcase(s, tc);
	return s;
}

LOOM_TEST_MAIN(grammar_suite)
