/* test_chat.c - chat templates (each family's text, recognising a GGUF
 * file's Jinja template, errors), generation from tokens (what a chat
 * matching its cache by tokens runs) and `loom chat` end to end. */
#include "text/chat_template.h"
#include "check_main.h"
#include "fixture.h"
#include "golden.h"
#include "run_cmd.h"
#include "synth_model.h"
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
	{LOOM_CHAT_HARMONY, "<|start|>system<|message|>You are ChatGPT, a large language model trained by OpenAI.\n"
			    "Knowledge cutoff: 2024-06\n\nReasoning: medium\n\n# Valid channels: analysis, commentary, final. "
			    "Channel must be included for every message.<|end|>"
			    "<|start|>developer<|message|># Instructions\n\nBe brief.\n\n<|end|>"
			    "<|start|>user<|message|>Hi<|end|><|start|>assistant<|channel|>final<|message|>Hello!<|end|>"
			    "<|start|>user<|message|>Who are you?<|end|><|start|>assistant"},
	{LOOM_CHAT_MISTRAL_V7, "[SYSTEM_PROMPT]Be brief.[/SYSTEM_PROMPT][INST]Hi[/INST]Hello!</s>"
			       "[INST]Who are you?[/INST]"},
	{LOOM_CHAT_MISTRAL_V11, "[SYSTEM_PROMPT]Be brief.[/SYSTEM_PROMPT][INST]Hi[/INST]Hello!</s>"
				"[INST]Who are you?[/INST]"},
	{LOOM_CHAT_MISTRAL_V13, "[SYSTEM_PROMPT]Be brief.[/SYSTEM_PROMPT][INST]Hi[/INST]Hello!</s>"
				"[INST]Who are you?[/INST]"},
	/* llama.cpp's chatglm4. */
	{LOOM_CHAT_GLM4, "[gMASK]<sop><|system|>\nBe brief.<|user|>\nHi<|assistant|>\nHello!<|user|>\nWho are you?"
			 "<|assistant|>"},
	{LOOM_CHAT_GRANITE, "<|start_of_role|>system<|end_of_role|>Be brief.<|end_of_text|>\n"
			    "<|start_of_role|>user<|end_of_role|>Hi<|end_of_text|>\n"
			    "<|start_of_role|>assistant<|end_of_role|>Hello!<|end_of_text|>\n"
			    "<|start_of_role|>user<|end_of_role|>Who are you?<|end_of_text|>\n"
			    "<|start_of_role|>assistant<|end_of_role|>"},
	{LOOM_CHAT_COMMAND_R7B, "<|START_OF_TURN_TOKEN|><|SYSTEM_TOKEN|>Be brief.<|END_OF_TURN_TOKEN|>"
				"<|START_OF_TURN_TOKEN|><|USER_TOKEN|>Hi<|END_OF_TURN_TOKEN|>"
				"<|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|><|START_RESPONSE|>Hello!<|END_RESPONSE|>"
				"<|END_OF_TURN_TOKEN|><|START_OF_TURN_TOKEN|><|USER_TOKEN|>Who are you?<|END_OF_TURN_TOKEN|>"
				"<|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|><|START_RESPONSE|>"},
	/* Without a model, OLMo's end-of-sequence text. */
	{LOOM_CHAT_TULU, "<|system|>\nBe brief.\n<|user|>\nHi\n<|assistant|>\nHello!<|endoftext|>\n"
			 "<|user|>\nWho are you?\n<|assistant|>\n"},
	/* As ms-swift's template registry writes dots.llm1's turns. */
	{LOOM_CHAT_DOTS1, "<|system|>Be brief.<|endofsystem|><|userprompt|>Hi<|endofuserprompt|><|response|>Hello!"
			  "<|endofresponse|><|userprompt|>Who are you?<|endofuserprompt|><|response|>"},
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
 * assistant's turn is a prefix of the next turn's text: what lets `loom
 * chat` reuse all it keeps in the cache. */
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
		 * their own, and GLM-4 after <|assistant|> with a newline: the
		 * text before the reply differs there. A harmony reply names
		 * its channel before its text. */
		if (k != LOOM_CHAT_LLAMA2 && k != LOOM_CHAT_HARMONY && k != LOOM_CHAT_GLM4)
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
	/* Mistral's later tokenizers, told apart by their calls' markers
	 * (Mistral Small 3.1's, 3.2's and Ministral 3's, abridged). */
	{"{{- '[SYSTEM_PROMPT]' + system_message + '[/SYSTEM_PROMPT]' }}{%- for message in loop_messages %}"
	 "{{- '[INST]' + message['content'] + '[/INST]' }}{{- \"[TOOL_CALLS] [\" }}{%- endfor %}",
	 LOOM_CHAT_MISTRAL_V7},
	{"{{- '[SYSTEM_PROMPT]' + system_prompt + '[/SYSTEM_PROMPT]' }}{{- '[INST]' }}{{- '[TOOL_CALLS]' + "
	 "tool_call.function.name }}{{- '[CALL_ID]' + tool_call.id }}{{- '[ARGS]' + arguments }}",
	 LOOM_CHAT_MISTRAL_V11},
	{"{{- '[SYSTEM_PROMPT]' + default_system_message + '[/SYSTEM_PROMPT]' }}{{- '[INST]' + message['content'] + "
	 "'[/INST]' }}{{- '[TOOL_CALLS]' + tool['function']['name'] + '[ARGS]' + arguments }}",
	 LOOM_CHAT_MISTRAL_V13},
	/* GLM-4-0414's, abridged (its <|user|> and <|assistant|> would read as
	 * Zephyr's). */
	{"[gMASK]<sop>{%- for msg in messages %}{%- if msg.role == 'system' %}<|system|>\n{{ msg.content }}{%- endif %}"
	 "{%- endfor %}{%- for message in messages if message.role != 'system' %}{%- if role == 'user' %}<|user|>\n"
	 "{{ content }}{%- elif role == 'assistant' %}<|assistant|>\n{{ content }}{%- endif %}{%- endfor %}"
	 "{% if add_generation_prompt %}<|assistant|>{% endif %}",
	 LOOM_CHAT_GLM4},
	/* OLMo 2's, abridged: Zephyr's markers, but a newline, not EOS,
	 * after a question. */
	{"{% for message in messages %}{% if message['role'] == 'user' %}{{ '<|user|>\\n' + message['content'] + '\\n' }}"
	 "{% elif message['role'] == 'assistant' %}{% if not loop.last %}{{ '<|assistant|>\\n'  + message['content'] + "
	 "eos_token + '\\n' }}{% endif %}{% endif %}{% endfor %}",
	 LOOM_CHAT_TULU},
	/* dots.llm1's, abridged. */
	{"{% if messages[0]['role'] == 'system' %}<|system|>{{ messages[0]['content'] }}<|endofsystem|>{% endif %}"
	 "{% for idx in range(start_idx, messages|length) %}{% if messages[idx]['role'] == 'user' %}<|userprompt|>"
	 "{{ messages[idx]['content'] }}<|endofuserprompt|>{% endif %}{% endfor %}",
	 LOOM_CHAT_DOTS1},
	/* Command R7B's, abridged. */
	{"{%- for message in loop_messages %}{%- if message['role'] == 'user' -%}{{ '<|START_OF_TURN_TOKEN|><|USER_TOKEN|>'"
	 " + content.strip() + '<|END_OF_TURN_TOKEN|>' }}{%- elif message['role'] == 'assistant' -%}"
	 "{{ '<|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|><|START_RESPONSE|>'  + content.strip() + '<|END_RESPONSE|>"
	 "<|END_OF_TURN_TOKEN|>' }}{%- endif %}{%- endfor %}",
	 LOOM_CHAT_COMMAND_R7B},
	/* Granite 3.3's, abridged. */
	{"{%- for message in loop_messages %}{{- '<|start_of_role|>' + message['role'] + '<|end_of_role|>' + "
	 "message['content'] + '<|end_of_text|>\n' }}{%- if loop.last and add_generation_prompt %}"
	 "{{- '<|start_of_role|>assistant' }}{{- '<|end_of_role|>' }}{%- endif %}{%- endfor %}",
	 LOOM_CHAT_GRANITE},
	/* gpt-oss's, abridged. */
	{"{%- for message in loop_messages -%}{%- if message.role == 'user' -%}{{- '<|start|>user<|message|>' + "
	 "message.content + '<|end|>' }}{%- elif message.role == 'assistant' -%}{{- '<|start|>assistant<|channel|>final"
	 "<|message|>' + message.content + '<|end|>' }}{%- endif -%}{%- endfor -%}{%- if add_generation_prompt -%}"
	 "<|start|>assistant{%- endif -%}",
	 LOOM_CHAT_HARMONY},
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

/* The tokens and text a generation passed to its callback. */
typedef struct collected {
	loom_token tokens[64];
	int n;
	char text[1024];
	size_t len;
} collected;

static bool collect(void *user, loom_token token, const char *text, size_t len)
{
	collected *c = user;
	ck_assert_int_lt(c->n, 64);
	ck_assert_uint_lt(c->len + len, sizeof(c->text));
	c->tokens[c->n++] = token;
	memcpy(c->text + c->len, text, len);
	c->len += len;
	c->text[c->len] = '\0';
	return true;
}

static void expect_greedy(const collected *c, const golden_case *g, const char *what)
{
	ck_assert_msg(c->n == g->n_greedy, "%s: %d tokens, llama.cpp %d", what, c->n, g->n_greedy);
	for (int i = 0; i < c->n; i++)
		ck_assert_msg(c->tokens[i] == g->greedy[i], "%s: token %d is %d, llama.cpp %d", what, i, c->tokens[i],
			      g->greedy[i]);
	ck_assert_msg(strcmp(c->text, g->greedy_text) == 0, "%s: '%s', llama.cpp '%s'", what, c->text, g->greedy_text);
}

/* loom_generate_tokens on a text's tokens gives what loom_generate gives
 * on the text (llama.cpp's greedy continuation), clearing what the
 * sequence held; with keep_cache the tokens continue the sequence. */
START_TEST(generation_from_tokens_matches_generation_from_text)
{
	loom_runtime *rt = test_runtime("cpu-generic", 1);
	loom_model *m = rt != NULL ? test_model(rt, "stories260K-f32.gguf") : NULL;
	if (m == NULL) {
		loom_runtime_free(rt);
		return;
	}
	golden_case g;
	ck_assert(golden_load("stories260K-f32", "once_upon_a_time", &g));
	loom_context *ctx = test_context(m, 128, 512, LOOM_DTYPE_F32);
	loom_sampler_params greedy = loom_sampler_default_params();
	greedy.temperature = 0;
	loom_generate_params gp = loom_generate_default_params();
	gp.n_predict = g.n_greedy;
	gp.sampling = &greedy;
	loom_generate_stats stats;

	collected text = {0}, toks = {0}, cont = {0};
	ck_assert_msg(loom_generate(ctx, g.prompt, &gp, collect, &text, &stats) == LOOM_OK, "%s", loom_last_error());
	expect_greedy(&text, &g, "loom_generate");

	loom_token prompt[16];
	size_t n = 0;
	ck_assert(loom_tokenize(m, g.prompt, strlen(g.prompt), true, false, prompt, 16, &n) == LOOM_OK);
	ck_assert_uint_eq(n, (size_t)g.n_tokens);
	ck_assert_msg(loom_generate_tokens(ctx, prompt, n, &gp, collect, &toks, &stats) == LOOM_OK, "%s",
		      loom_last_error());
	expect_greedy(&toks, &g, "loom_generate_tokens");
	ck_assert_int_eq(stats.n_prompt, (int)n);
	ck_assert_int_eq(stats.n_generated, g.n_greedy);
	ck_assert_int_eq(stats.stop_reason, LOOM_STOP_LENGTH);
	/* The prompt and every generated token but the last, from 0. */
	ck_assert_int_eq(loom_kv_seq_pos_max(ctx, 0), (int)n + g.n_greedy - 2);

	/* Two tokens evaluated alone, then the rest after them. */
	loom_generate_params first = gp;
	first.n_predict = 0;
	ck_assert(loom_generate_tokens(ctx, prompt, 2, &first, NULL, NULL, &stats) == LOOM_OK);
	ck_assert_int_eq(loom_kv_seq_pos_max(ctx, 0), 1);
	gp.keep_cache = true;
	ck_assert_msg(loom_generate_tokens(ctx, prompt + 2, n - 2, &gp, collect, &cont, &stats) == LOOM_OK, "%s",
		      loom_last_error());
	ck_assert_int_eq(stats.n_prompt, (int)n - 2);
	expect_greedy(&cont, &g, "continued");
	ck_assert_int_eq(loom_kv_seq_pos_max(ctx, 0), (int)n + g.n_greedy - 2);
	ck_assert_uint_eq(loom_kv_used(ctx), n + (size_t)g.n_greedy - 1);

	ck_assert_int_eq(loom_generate_tokens(ctx, prompt, 0, &gp, collect, &cont, &stats), LOOM_ERR_INVALID_ARGUMENT);
	ck_assert_int_eq(loom_generate_tokens(ctx, NULL, 1, &gp, collect, &cont, &stats), LOOM_ERR_INVALID_ARGUMENT);
	loom_context_free(ctx);
	golden_free(&g);
	loom_model_free(m);
	loom_runtime_free(rt);
}
END_TEST

/* Turn n's stderr line: its evaluated and cached prompt tokens. */
static void turn_counts(const char *err, int turn, int *evaluated, int *cached)
{
	char tag[32];
	snprintf(tag, sizeof(tag), "turn %d:", turn);
	const char *line = strstr(err, tag);
	ck_assert_msg(line != NULL, "no '%s' in %s", tag, err);
	ck_assert_msg(sscanf(line + strlen(tag), " %d prompt tokens evaluated, %d from the cache", evaluated, cached) == 2,
		      "turn %d: %s", turn, line);
}

/* The greedy reply (8 tokens at most) to a conversation, evaluated from
 * an empty cache as `loom chat` formats it. */
static void fresh_reply(loom_context *ctx, const loom_chat_message *msgs, size_t n, collected *out)
{
	char text[4096];
	size_t len;
	ck_assert(loom_chat_apply(loom_context_model(ctx), NULL, msgs, n, true, text, sizeof(text), &len) == LOOM_OK);
	loom_sampler_params greedy = loom_sampler_default_params();
	greedy.temperature = 0;
	loom_generate_params gp = loom_generate_default_params();
	gp.n_predict = 8;
	gp.sampling = &greedy;
	gp.parse_special = true;
	ck_assert_msg(loom_generate(ctx, text, &gp, collect, out, NULL) == LOOM_OK, "%s", loom_last_error());
}

/* `loom chat`: a reply per line, the second turn evaluating only the
 * tokens after those the cache holds, yet replying as the conversation
 * evaluated afresh does; the same replies on a second run (greedy). */
START_TEST(chat_command_keeps_the_conversation)
{
	char model[4096];
	if (!test_data_path(model, sizeof(model), "models/synthetic/gemma-f32.gguf"))
		return;
	const char *cmd = "printf 'Hello there\\n\\nHow are you?\\n' | $LOOM chat -m %s -n 8 --temp 0 -t 1 --plugins %s";
	cmd_result a = run_cmd(cmd, model, test_plugins_file());
	ck_assert_msg(a.status == 0, "exit %d: %s", a.status, a.err);
	ck_assert_msg(strstr(a.err, "chat template gemma") != NULL, "stderr: %s", a.err);
	ck_assert_msg(strstr(a.err, "turn 1:") && strstr(a.err, "turn 2:") && !strstr(a.err, "turn 3:"),
		      "an empty line is not a turn: %s", a.err);
	/* Turn 2 finds all of turn 1's prompt in the cache. */
	int evaluated1, cached1, evaluated2, cached2;
	turn_counts(a.err, 1, &evaluated1, &cached1);
	turn_counts(a.err, 2, &evaluated2, &cached2);
	ck_assert_msg(cached1 == 0 && evaluated1 > 0 && cached2 >= evaluated1 && evaluated2 > 0,
		      "turn 2 re-evaluated: %s", a.err);
	/* Each reply is what the whole conversation so far, evaluated
	 * afresh, gives. */
	loom_runtime *rt = test_runtime(NULL, 1);
	loom_model *m = test_model(rt, "synthetic/gemma-f32.gguf");
	loom_context *ctx = test_context(m, 512, 512, LOOM_DTYPE_F16);
	loom_chat_message msgs[] = {{"user", "Hello there"}, {"assistant", NULL}, {"user", "How are you?"}};
	collected r1 = {0}, r2 = {0};
	fresh_reply(ctx, msgs, 1, &r1);
	msgs[1].content = r1.text;
	fresh_reply(ctx, msgs, 3, &r2);
	char want[2 * sizeof(r1.text) + 2];
	snprintf(want, sizeof(want), "%s\n%s\n", r1.text, r2.text);
	ck_assert_msg(strcmp(a.out, want) == 0, "replies '%s', evaluated afresh '%s'", a.out, want);
	loom_context_free(ctx);
	loom_model_free(m);
	loom_runtime_free(rt);
	cmd_result b = run_cmd(cmd, model, test_plugins_file());
	ck_assert_msg(b.status == 0 && strcmp(a.out, b.out) == 0, "second run: '%s' vs '%s'", b.out, a.out);
	cmd_result_free(&b);
	/* Gemma's template has no reasoning: none is what it writes anyway,
	 * asking for some is refused before the chat starts. */
	const char *reasoning = "printf 'Hello there\\n\\nHow are you?\\n' | $LOOM chat -m %s -n 8 --temp 0 -t 1 --plugins %s "
				"--reasoning %s";
	b = run_cmd(reasoning, model, test_plugins_file(), "none");
	ck_assert_msg(b.status == 0 && strcmp(a.out, b.out) == 0, "--reasoning none: '%s' vs '%s'", b.out, a.out);
	cmd_result_free(&b);
	b = run_cmd(reasoning, model, test_plugins_file(), "high");
	ck_assert_msg(b.status == 1 && strstr(b.err, "has no reasoning to ask for") != NULL, "exit %d: %s", b.status,
		      b.err);
	cmd_result_free(&b);
	b = run_cmd(reasoning, model, test_plugins_file(), "lots");
	ck_assert_msg(b.status == 1 && strstr(b.err, "none, on, low, medium or high") != NULL, "exit %d: %s", b.status,
		      b.err);
	cmd_result_free(&b);
	cmd_result_free(&a);

	cmd_result r = run_cmd("echo hi | $LOOM chat -m %s --chat-template jinja2 --plugins %s", model, test_plugins_file());
	ck_assert_msg(r.status == 1 && strstr(r.err, "unknown chat template 'jinja2'") != NULL, "exit %d: %s", r.status,
		      r.err);
	cmd_result_free(&r);
}
END_TEST

/* ---- a reply's parts ------------------------------------------------------ */

static const char *const harmony_markers[] = {"<|start|>", "<|end|>",    "<|message|>",   "<|channel|>",
					      "<|return|>", "<|call|>", "<|constrain|>", NULL};
static const char *const end_only[] = {"<|end|>", NULL};
static const char *const think_markers[] = {"<think>", "</think>", NULL};

/* A synthetic model whose vocabulary ends with markers, and its chat
 * template jinja (NULL: none). */
static loom_model *model_with_template(loom_runtime *rt, const char *name, const char *const *markers, const char *jinja)
{
	synth_config c = synth_default_config();
	c.control_tokens = markers;
	c.chat_template = jinja;
	synth_model *sm = synth_model_build(&c, NULL);
	char path[4200];
	snprintf(path, sizeof(path), "%s/model.gguf", test_tmp_dir(name));
	ck_assert(synth_model_write(sm, path));
	synth_model_free(sm);
	loom_model *m = NULL;
	ck_assert_msg(loom_model_load(rt, path, NULL, &m) == LOOM_OK, "%s: %s", path, loom_last_error());
	return m;
}

static loom_model *model_with_markers(loom_runtime *rt, const char *name, const char *const *markers)
{
	return model_with_template(rt, name, markers, NULL);
}

/* A reply as its tokens, and the text each part should read: the pieces
 * of its messages' tokens, markers and headers left out. */
typedef struct reply {
	loom_token tokens[256];
	int n;
	char part[2][512]; /* content, reasoning */
} reply;

static loom_token marker(const loom_model *m, const char *text)
{
	loom_token t[4];
	size_t n = 0;
	ck_assert(loom_tokenize(m, text, strlen(text), false, true, t, 4, &n) == LOOM_OK);
	ck_assert_msg(n == 1, "%s is %zu tokens", text, n);
	return t[0];
}

/* text's tokens, read into part (0, 1) or into none (-1: a header). */
static void add_text(reply *r, const loom_model *m, const char *text, int part)
{
	size_t n = 0;
	ck_assert(loom_tokenize(m, text, strlen(text), false, false, r->tokens + r->n, 256 - (size_t)r->n, &n) ==
		  LOOM_OK);
	for (size_t i = 0; i < n && part >= 0; i++) {
		char piece[64];
		size_t len = 0;
		ck_assert(loom_token_to_piece(m, r->tokens[r->n + (int)i], false, piece, sizeof(piece), &len) == LOOM_OK);
		strncat(r->part[part], piece, len);
	}
	r->n += (int)n;
}

static void add_marker(reply *r, const loom_model *m, const char *text)
{
	r->tokens[r->n++] = marker(m, text);
}

/* A reply of an analysis, then a final answer: what harmony models say. */
static void add_analysis_then_final(reply *r, const loom_model *m, const char *analysis, const char *final)
{
	add_marker(r, m, "<|channel|>");
	add_text(r, m, "analysis", -1);
	add_marker(r, m, "<|message|>");
	add_text(r, m, analysis, 1);
	add_marker(r, m, "<|end|>");
	add_marker(r, m, "<|start|>");
	add_text(r, m, "assistant", -1);
	add_marker(r, m, "<|channel|>");
	add_text(r, m, "final", -1);
	add_marker(r, m, "<|message|>");
	add_text(r, m, final, 0);
	add_marker(r, m, "<|return|>");
}

/* Pushes the reply's tokens as generator steps (the last one done) and
 * checks what each part read. */
static void expect_parts(const loom_model *m, const char *template_name, const reply *r, const char *stop)
{
	loom_reply_reader *rr = NULL;
	ck_assert_msg(loom_reply_reader_create(m, template_name, &stop, stop != NULL, &rr) == LOOM_OK, "%s",
		      loom_last_error());
	char got[2][512] = {"", ""};
	for (int i = 0; i < r->n; i++) {
		loom_generated step = {.token = r->tokens[i], .text = "", .done = i == r->n - 1};
		loom_reply_parts parts;
		ck_assert(loom_reply_reader_push(rr, &step, &parts) == LOOM_OK);
		strncat(got[0], parts.content, parts.n_content);
		strncat(got[1], parts.reasoning, parts.n_reasoning);
	}
	ck_assert_str_eq(got[0], r->part[0]);
	ck_assert_str_eq(got[1], r->part[1]);
	loom_reply_reader_free(rr);
}

/* gpt-oss's replies: the analysis channel is reasoning, the final channel
 * the content, headers neither, a character split over byte tokens whole
 * in its part; a tool call (commentary, to=...) is reasoning. <|end|> ends
 * a message, not the reply; <|return|> and <|call|> end it. */
START_TEST(harmony_replies_split_into_content_and_reasoning)
{
	loom_runtime *rt = test_runtime("cpu-generic", 1);
	loom_model *m = model_with_markers(rt, "chat-harmony", harmony_markers);
	ck_assert(!loom_token_is_eog(m, marker(m, "<|end|>")));
	ck_assert(loom_token_is_eog(m, marker(m, "<|return|>")));
	ck_assert(loom_token_is_eog(m, marker(m, "<|call|>")));

	reply *r = calloc(1, sizeof(*r));
	add_analysis_then_final(r, m, "the cat sat on the mat, caf\xc3\xa9", "a dog ran \xc3\xa9");
	ck_assert(strlen(r->part[0]) > 8 && strlen(r->part[1]) > 8);
	expect_parts(m, "harmony", r, NULL);
	/* Each message ends with what may begin a stop string: held back,
	 * then given to its own part when the message ends. */
	memset(r, 0, sizeof(*r));
	add_analysis_then_final(r, m, "the cat sat on the mat", "a dog on the mat");
	expect_parts(m, "harmony", r, "matte");

	memset(r, 0, sizeof(*r));
	add_marker(r, m, "<|channel|>");
	add_text(r, m, "commentary to=functions.add ", -1);
	add_marker(r, m, "<|constrain|>");
	add_text(r, m, "json", -1);
	add_marker(r, m, "<|message|>");
	add_text(r, m, "{\"a\": 2}", 1);
	add_marker(r, m, "<|call|>");
	expect_parts(m, "harmony", r, NULL);

	/* A reply with no header, cut by its length: all content. */
	memset(r, 0, sizeof(*r));
	add_text(r, m, "the sun", 0);
	expect_parts(m, "harmony", r, NULL);
	free(r);

	/* Other templates pass the generator's text through. */
	loom_reply_reader *rr = NULL;
	ck_assert(loom_reply_reader_create(m, "chatml", NULL, 0, &rr) == LOOM_OK);
	loom_generated step = {.token = marker(m, "<|channel|>"), .text = "abc", .len = 3};
	loom_reply_parts parts;
	ck_assert(loom_reply_reader_push(rr, &step, &parts) == LOOM_OK);
	ck_assert(parts.n_content == 3 && memcmp(parts.content, "abc", 3) == 0 && parts.n_reasoning == 0);
	loom_reply_reader_free(rr);
	ck_assert_int_eq(loom_reply_reader_create(m, "jinja2", NULL, 0, &rr), LOOM_ERR_INVALID_ARGUMENT);
	loom_model_free(m);

	/* Phi-3's <|end|> still ends generation; harmony needs its markers. */
	m = model_with_markers(rt, "chat-end-only", end_only);
	ck_assert(loom_token_is_eog(m, marker(m, "<|end|>")));
	ck_assert_int_eq(loom_reply_reader_create(m, "harmony", NULL, 0, &rr), LOOM_ERR_UNSUPPORTED);
	ck_assert_msg(strstr(loom_last_error(), "<|channel|>") != NULL, "%s", loom_last_error());
	loom_model_free(m);
	loom_runtime_free(rt);
}
END_TEST

/* Qwen3's replies: what it thinks between <think> and </think> is
 * reasoning, the answer after it content, without its leading newlines. */
START_TEST(thinking_is_read_apart_from_the_answer)
{
	loom_runtime *rt = test_runtime("cpu-generic", 1);
	loom_model *m = model_with_markers(rt, "chat-think", think_markers);
	reply *r = calloc(1, sizeof(*r));
	add_marker(r, m, "<think>");
	add_text(r, m, "the cat sat on the mat", 1);
	add_marker(r, m, "</think>");
	add_text(r, m, "\n\nthe dog ran", 0);
	size_t lead = strspn(r->part[0], " \n");
	ck_assert(lead >= 2);
	memmove(r->part[0], r->part[0] + lead, strlen(r->part[0]) - lead + 1);
	ck_assert(strlen(r->part[0]) > 4);
	expect_parts(m, "chatml", r, "matte");
	free(r);
	loom_model_free(m);
	loom_runtime_free(rt);
}
END_TEST

/* Qwen 3's thinking-only releases open every reply in <think> in the
 * prompt (their template cut to what tells it): the model writes its
 * reasoning first and only </think> of the markers, and the reader starts
 * in the reasoning; named as plain chatml the template opens nothing. */
START_TEST(a_reply_opened_in_thinking_starts_in_the_reasoning)
{
	static const char jinja[] =
		"{%- for message in messages %}{{- '<|im_start|>' + message.role + '\\n' + "
		"message.content.split('</think>')[-1] + '<|im_end|>\\n' }}{%- endfor %}"
		"{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n<think>\\n' }}{%- endif %}";
	loom_runtime *rt = test_runtime("cpu-generic", 1);
	loom_model *m = model_with_template(rt, "chat-think-only", think_markers, jinja);
	loom_chat_message msg = {"user", "Hi"};
	char text[256];
	size_t n = 0;
	ck_assert_int_eq(loom_chat_apply(m, NULL, &msg, 1, true, text, sizeof(text), &n), LOOM_OK);
	ck_assert_str_eq(text, "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n<think>\n");
	ck_assert_int_eq(loom_chat_apply(m, "chatml", &msg, 1, true, text, sizeof(text), &n), LOOM_OK);
	ck_assert_str_eq(text, "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
	ck_assert_int_eq(loom_chat_check_reasoning(m, NULL, LOOM_REASONING_ON), LOOM_OK);
	ck_assert_int_eq(loom_chat_check_reasoning(m, NULL, LOOM_REASONING_NONE), LOOM_ERR_INVALID_ARGUMENT);
	ck_assert_msg(strstr(loom_last_error(), "always reasons") != NULL, "%s", loom_last_error());
	ck_assert_int_eq(loom_chat_check_reasoning(m, "chatml", LOOM_REASONING_NONE), LOOM_OK);
	ck_assert_int_eq(loom_chat_check_reasoning(m, "chatml", LOOM_REASONING_ON), LOOM_ERR_INVALID_ARGUMENT);
	ck_assert_int_eq(loom_chat_check_reasoning(m, NULL, (loom_reasoning)99), LOOM_ERR_INVALID_ARGUMENT);

	reply *r = calloc(1, sizeof(*r));
	add_text(r, m, "the cat sat on the mat", 1);
	add_marker(r, m, "</think>");
	add_text(r, m, "\n\nthe dog ran", 0);
	size_t lead = strspn(r->part[0], " \n");
	memmove(r->part[0], r->part[0] + lead, strlen(r->part[0]) - lead + 1);
	ck_assert(strlen(r->part[0]) > 4 && strlen(r->part[1]) > 4);
	expect_parts(m, NULL, r, NULL);
	/* Named chatml, the same reply reads as content until </think>. */
	reply *as_named = calloc(1, sizeof(*as_named));
	add_text(as_named, m, "the cat sat on the mat", 0);
	add_marker(as_named, m, "</think>");
	char answer[512];
	strcpy(answer, as_named->part[0]);
	add_text(as_named, m, "\n\nthe dog ran", 0);
	strcpy(as_named->part[0], answer);
	strcat(as_named->part[0], r->part[0]);
	expect_parts(m, "chatml", as_named, NULL);
	free(as_named);

	/* A call the host opens closes the reasoning, empty, first; the reader
	 * then reads the call, no reasoning. */
	char opening[64];
	unsigned flags;
	ck_assert_int_eq(loom_tool_call_opening(m, NULL, NULL, opening, sizeof(opening), &n, &flags), LOOM_OK);
	ck_assert_str_eq(opening, "\n</think>\n\n<tool_call>\n");
	ck_assert_int_eq(loom_tool_call_opening(m, "chatml", NULL, opening, sizeof(opening), &n, &flags), LOOM_OK);
	ck_assert_str_eq(opening, "<tool_call>\n");
	ck_assert_int_eq(loom_tool_call_opening(m, NULL, NULL, opening, sizeof(opening), &n, &flags), LOOM_OK);
	loom_reply_reader *rr = NULL;
	ck_assert_int_eq(loom_reply_reader_create(m, NULL, NULL, 0, &rr), LOOM_OK);
	ck_assert_int_eq(loom_reply_reader_read_tools(rr, opening), LOOM_OK);
	static const char call[] = "{\"name\": \"get_time\", \"arguments\": {}}\n</tool_call>";
	loom_token toks[128];
	size_t n_toks = 0;
	ck_assert_int_eq(loom_tokenize(m, call, strlen(call), false, true, toks, 128, &n_toks), LOOM_OK);
	for (size_t i = 0; i < n_toks; i++) {
		char piece[64];
		size_t len = 0;
		ck_assert_int_eq(loom_token_to_piece(m, toks[i], false, piece, sizeof(piece), &len), LOOM_OK);
		loom_generated step = {.token = toks[i], .text = piece, .len = len, .done = i + 1 == n_toks};
		loom_reply_parts parts;
		ck_assert_int_eq(loom_reply_reader_push(rr, &step, &parts), LOOM_OK);
		ck_assert_uint_eq(parts.n_reasoning, 0);
	}
	const loom_tool_call *calls = NULL;
	ck_assert_uint_eq(loom_reply_reader_tool_calls(rr, &calls), 1);
	ck_assert_str_eq(calls[0].name, "get_time");
	ck_assert(calls[0].done);
	loom_reply_reader_free(rr);
	free(r);
	loom_model_free(m);
	loom_runtime_free(rt);
}
END_TEST

/* A ChatML template that reads enable_thinking but writes it another way
 * than Qwen 3's (SmolLM3's, cut to what tells it: its reasoning mode in a
 * metadata block): loom does not write that switch, so a request for any
 * reasoning but the template's own default is refused. */
START_TEST(a_reasoning_switch_loom_does_not_write_is_refused)
{
	static const char jinja[] =
		"{%- if enable_thinking -%}{%- set reasoning_mode = \"/think\" -%}{%- else -%}"
		"{%- set reasoning_mode = \"/no_think\" -%}{%- endif -%}{{- \"<|im_start|>system\\n\" -}}"
		"{{- \"## Metadata\\n\\nReasoning Mode: \" + reasoning_mode + \"\\n\\n\" -}}"
		"{%- for message in messages -%}{{ '<|im_start|>' + message.role + '\\n' + "
		"message.content.split('</think>')[-1] + '<|im_end|>\\n' }}{%- endfor -%}";
	loom_runtime *rt = test_runtime("cpu-generic", 1);
	loom_model *m = model_with_template(rt, "chat-think-switch", think_markers, jinja);
	ck_assert_str_eq(loom_chat_template(m), "chatml");
	ck_assert_int_eq(loom_chat_check_reasoning(m, NULL, LOOM_REASONING_DEFAULT), LOOM_OK);
	static const loom_reasoning asked[] = {LOOM_REASONING_NONE, LOOM_REASONING_ON, LOOM_REASONING_HIGH};
	for (size_t i = 0; i < sizeof(asked) / sizeof(asked[0]); i++) {
		ck_assert_int_eq(loom_chat_check_reasoning(m, NULL, asked[i]), LOOM_ERR_INVALID_ARGUMENT);
		ck_assert_msg(strstr(loom_last_error(), "does not write") != NULL, "%s", loom_last_error());
	}
	loom_model_free(m);
	loom_runtime_free(rt);
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
	tcase_add_test(tc, generation_from_tokens_matches_generation_from_text);
	tcase_add_test(tc, chat_command_keeps_the_conversation);
	tcase_add_test(tc, harmony_replies_split_into_content_and_reasoning);
	tcase_add_test(tc, thinking_is_read_apart_from_the_answer);
	tcase_add_test(tc, a_reply_opened_in_thinking_starts_in_the_reasoning);
	tcase_add_test(tc, a_reasoning_switch_loom_does_not_write_is_refused);
	suite_add_tcase(s, tc);
	return s;
}

LOOM_TEST_MAIN(chat_suite)
