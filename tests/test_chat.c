/* test_chat.c - chat templates (each family's text, recognising a GGUF
 * file's Jinja template, errors) and `loom chat` end to end. */
#include "text/chat_template.h"
#include "check_main.h"
#include "fixture.h"
#include "run_cmd.h"
#include "testdata.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const loom_chat_message conversation[] = {
	{"system", "Be brief."},
	{"user", "Hi"},
	{"assistant", "Hello!"},
	{"user", "Who are you?"},
};
#define N_CONV (sizeof(conversation) / sizeof(conversation[0]))

/* Each family's text for the conversation, with the assistant's opening:
 * the format its model was trained on (BOS left to the tokenizer). */
static const struct {
	loom_chat_kind kind;
	const char *text;
} expected[] = {
	{LOOM_CHAT_CHATML, "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"
			   "<|im_start|>assistant\nHello!<|im_end|>\n<|im_start|>user\nWho are you?<|im_end|>\n"
			   "<|im_start|>assistant\n"},
	{LOOM_CHAT_LLAMA2, "[INST] <<SYS>>\nBe brief.\n<</SYS>>\n\nHi [/INST] Hello! </s><s>[INST] Who are you? [/INST]"},
	{LOOM_CHAT_LLAMA3, "<|start_header_id|>system<|end_header_id|>\n\nBe brief.<|eot_id|>"
			   "<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>"
			   "<|start_header_id|>assistant<|end_header_id|>\n\nHello!<|eot_id|>"
			   "<|start_header_id|>user<|end_header_id|>\n\nWho are you?<|eot_id|>"
			   "<|start_header_id|>assistant<|end_header_id|>\n\n"},
	{LOOM_CHAT_MISTRAL, "[INST] Be brief.\n\nHi [/INST]Hello!</s>[INST] Who are you? [/INST]"},
	{LOOM_CHAT_ZEPHYR, "<|system|>\nBe brief.</s>\n<|user|>\nHi</s>\n<|assistant|>\nHello!</s>\n"
			   "<|user|>\nWho are you?</s>\n<|assistant|>\n"},
	{LOOM_CHAT_PHI3, "<|system|>\nBe brief.<|end|>\n<|user|>\nHi<|end|>\n<|assistant|>\nHello!<|end|>\n"
			 "<|user|>\nWho are you?<|end|>\n<|assistant|>\n"},
	{LOOM_CHAT_GEMMA, "<start_of_turn>user\nBe brief.\n\nHi<end_of_turn>\n<start_of_turn>model\nHello!<end_of_turn>\n"
			  "<start_of_turn>user\nWho are you?<end_of_turn>\n<start_of_turn>model\n"},
	{LOOM_CHAT_PLAIN, "System: Be brief.\nUser: Hi\nAssistant: Hello!\nUser: Who are you?\nAssistant: "},
};

START_TEST(each_family_formats_its_turns)
{
	char buf[1024];
	size_t n;
	for (size_t i = 0; i < sizeof(expected) / sizeof(expected[0]); i++) {
		const char *name = loom_chat_template_name(expected[i].kind);
		loom_status st = loom_chat_format(expected[i].kind, conversation, N_CONV, true, buf, sizeof(buf), &n);
		ck_assert_msg(st == LOOM_OK, "%s: %s", name, loom_last_error());
		ck_assert_msg(strcmp(buf, expected[i].text) == 0 && n == strlen(buf), "%s:\n  got      '%s'\n  expected '%s'",
			      name, buf, expected[i].text);
		loom_chat_kind back;
		ck_assert(loom_chat_template_by_name(name, &back) && back == expected[i].kind);
	}
}
END_TEST

/* Without the assistant's opening, a conversation ending with the
 * assistant's turn is a prefix of the next turn's text: what `loom chat`
 * keeps in the cache. */
START_TEST(a_turn_extends_the_last)
{
	char before[1024], after[1024];
	size_t n1, n2;
	for (int k = 0; k < LOOM_CHAT_COUNT; k++) {
		ck_assert(loom_chat_format((loom_chat_kind)k, conversation, 2, true, before, sizeof(before), &n1) == LOOM_OK);
		ck_assert(loom_chat_format((loom_chat_kind)k, conversation, N_CONV, true, after, sizeof(after), &n2) == LOOM_OK);
		char with_reply[1100];
		snprintf(with_reply, sizeof(with_reply), "%sHello!", before);
		bool prefix = strncmp(after, with_reply, strlen(with_reply)) == 0;
		/* Llama 2 and Mistral reply after the [/INST] with a space of
		 * their own: the text before the reply differs there. */
		if (k != LOOM_CHAT_LLAMA2)
			ck_assert_msg(prefix, "%s: '%s' does not start with '%s'", loom_chat_template_name((loom_chat_kind)k),
				      after, with_reply);
	}
}
END_TEST

/* Real templates' Jinja, cut to the markers that tell them apart. */
static const struct {
	const char *jinja;
	loom_chat_kind kind;
} jinja_cases[] = {
	{"{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + "
	 "'\\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}",
	 LOOM_CHAT_CHATML},
	{"{{ bos_token }}{% for message in messages %}{{ '<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n' + "
	 "message['content'] | trim + '<|eot_id|>' }}{% endfor %}",
	 LOOM_CHAT_LLAMA3},
	{"{% if messages[0]['role'] == 'system' %}{% set system_message = '<<SYS>>\\n' + messages[0]['content'] + "
	 "'\\n<</SYS>>\\n\\n' %}{% endif %}{{ bos_token + '[INST] ' + content.strip() + ' [/INST]' }}",
	 LOOM_CHAT_LLAMA2},
	{"{{ bos_token }}{% for message in messages %}{% if message['role'] == 'user' %}{{ '[INST] ' + message['content'] + "
	 "' [/INST]' }}{% elif message['role'] == 'assistant' %}{{ message['content'] + eos_token}}{% endif %}{% endfor %}",
	 LOOM_CHAT_MISTRAL},
	{"{% for message in messages %}{% if message['role'] == 'user' %}{{ '<|user|>\\n' + message['content'] + eos_token }}"
	 "{% elif message['role'] == 'assistant' %}{{ '<|assistant|>\\n' + message['content'] + eos_token }}{% endif %}{% endfor %}",
	 LOOM_CHAT_ZEPHYR},
	{"{% for message in messages %}{{'<|' + message['role'] + '|>' + '\\n' + message['content'] + '<|end|>\\n' }}"
	 "{% endfor %}{% if add_generation_prompt %}{{ '<|assistant|>\\n' }}{% endif %}",
	 LOOM_CHAT_PHI3},
	{"{{ bos_token }}{% for message in messages %}{{ '<start_of_turn>' + role + '\\n' + message['content'] | trim + "
	 "'<end_of_turn>\\n' }}{% endfor %}{% if add_generation_prompt %}{{'<start_of_turn>model\\n'}}{% endif %}",
	 LOOM_CHAT_GEMMA},
};

START_TEST(jinja_templates_are_recognised)
{
	for (size_t i = 0; i < sizeof(jinja_cases) / sizeof(jinja_cases[0]); i++) {
		loom_chat_kind k;
		ck_assert_msg(loom_chat_template_detect(jinja_cases[i].jinja, strlen(jinja_cases[i].jinja), &k),
			      "case %zu not recognised", i);
		ck_assert_msg(k == jinja_cases[i].kind, "case %zu: %s, expected %s", i, loom_chat_template_name(k),
			      loom_chat_template_name(jinja_cases[i].kind));
	}
	const char *unknown = "{% for m in messages %}{{ m['role'] | upper }}: {{ m['content'] }}\\n{% endfor %}";
	loom_chat_kind k = LOOM_CHAT_COUNT;
	ck_assert(!loom_chat_template_detect(unknown, strlen(unknown), &k));
}
END_TEST

START_TEST(bad_conversations_are_errors)
{
	char buf[256];
	size_t n;
	loom_chat_message bad_role[] = {{"tool", "x"}};
	ck_assert_int_eq(loom_chat_format(LOOM_CHAT_CHATML, bad_role, 1, true, buf, sizeof(buf), &n),
			 LOOM_ERR_INVALID_ARGUMENT);
	ck_assert_msg(strstr(loom_last_error(), "role 'tool'") != NULL, "%s", loom_last_error());
	loom_chat_message late_system[] = {{"user", "x"}, {"system", "y"}};
	ck_assert_int_eq(loom_chat_format(LOOM_CHAT_CHATML, late_system, 2, true, buf, sizeof(buf), &n),
			 LOOM_ERR_INVALID_ARGUMENT);
	loom_chat_message no_content[] = {{"user", NULL}};
	ck_assert_int_eq(loom_chat_format(LOOM_CHAT_CHATML, no_content, 1, true, buf, sizeof(buf), &n),
			 LOOM_ERR_INVALID_ARGUMENT);
	/* Too small a buffer: the length needed, and a terminated prefix. */
	char small[8];
	ck_assert_int_eq(loom_chat_format(LOOM_CHAT_CHATML, conversation, N_CONV, true, small, sizeof(small), &n),
			 LOOM_ERR_BUFFER_TOO_SMALL);
	ck_assert_uint_eq(n, strlen(expected[0].text));
	ck_assert_str_eq(small, "<|im_st");
}
END_TEST

/* A model's template: the contract's for a file without one (gemma), plain
 * for a family without one (llama); a name given overrides it, an unknown
 * name is an error. */
START_TEST(model_templates)
{
	loom_runtime *rt = test_runtime(NULL, 1);
	if (rt == NULL)
		return;
	loom_model *gemma = test_model(rt, "synthetic/gemma-f32.gguf");
	loom_model *llama = test_model(rt, "synthetic/llama-f32.gguf");
	if (gemma == NULL || llama == NULL) {
		loom_model_free(gemma);
		loom_model_free(llama);
		loom_runtime_free(rt);
		return;
	}
	ck_assert_str_eq(loom_chat_template(gemma), "gemma");
	ck_assert_str_eq(loom_chat_template(llama), "plain");
	char buf[1024];
	size_t n;
	ck_assert(loom_chat_apply(gemma, NULL, conversation, N_CONV, true, buf, sizeof(buf), &n) == LOOM_OK);
	ck_assert_str_eq(buf, expected[6].text);
	ck_assert(loom_chat_apply(gemma, "chatml", conversation, N_CONV, true, buf, sizeof(buf), &n) == LOOM_OK);
	ck_assert_str_eq(buf, expected[0].text);
	ck_assert_int_eq(loom_chat_apply(gemma, "jinja2", conversation, N_CONV, true, buf, sizeof(buf), &n),
			 LOOM_ERR_INVALID_ARGUMENT);
	ck_assert_msg(strstr(loom_last_error(), "unknown chat template 'jinja2'") != NULL, "%s", loom_last_error());
	loom_model_free(gemma);
	loom_model_free(llama);
	loom_runtime_free(rt);
}
END_TEST

/* `loom chat`: a reply per line, the second turn evaluating only its new
 * text, the same replies on a second run (greedy). */
START_TEST(chat_command_keeps_the_conversation)
{
	char model[4096];
	if (!test_data_path(model, sizeof(model), "models/synthetic/gemma-f32.gguf"))
		return;
	const char *cmd = "printf 'Hello there\\n\\nHow are you?\\n' | $LOOM chat -m %s -n 8 --temp 0 --plugins %s";
	cmd_result a = run_cmd(cmd, model, test_plugins_file());
	ck_assert_msg(a.status == 0, "exit %d: %s", a.status, a.err);
	ck_assert_msg(strstr(a.err, "chat template gemma") != NULL, "stderr: %s", a.err);
	ck_assert_msg(strstr(a.err, "turn 1:") && strstr(a.err, "turn 2:") && !strstr(a.err, "turn 3:"),
		      "an empty line is not a turn: %s", a.err);
	ck_assert_msg(strstr(strstr(a.err, "turn 2:"), "(the rest was cached)") != NULL, "turn 2 re-evaluated: %s",
		      a.err);
	int lines = 0;
	for (const char *p = a.out; *p; p++)
		lines += *p == '\n';
	ck_assert_msg(lines >= 2, "replies: '%s'", a.out);
	cmd_result b = run_cmd(cmd, model, test_plugins_file());
	ck_assert_msg(b.status == 0 && strcmp(a.out, b.out) == 0, "second run: '%s' vs '%s'", b.out, a.out);
	cmd_result_free(&a);
	cmd_result_free(&b);

	cmd_result r = run_cmd("echo hi | $LOOM chat -m %s --chat-template jinja2 --plugins %s", model, test_plugins_file());
	ck_assert_msg(r.status == 1 && strstr(r.err, "unknown chat template 'jinja2'") != NULL, "exit %d: %s", r.status,
		      r.err);
	cmd_result_free(&r);
}
END_TEST

static Suite *chat_suite(void)
{
	Suite *s = suite_create("chat");
	TCase *tc = tcase_create("chat");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, each_family_formats_its_turns);
	tcase_add_test(tc, a_turn_extends_the_last);
	tcase_add_test(tc, jinja_templates_are_recognised);
	tcase_add_test(tc, bad_conversations_are_errors);
	tcase_add_test(tc, model_templates);
	tcase_add_test(tc, chat_command_keeps_the_conversation);
	suite_add_tcase(s, tc);
	return s;
}

LOOM_TEST_MAIN(chat_suite)
