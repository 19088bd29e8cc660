/* fuzz_chat_tools.c - conversations with tools and replies with tool
 * calls, on arbitrary bytes, for a small real model. The first byte picks
 * the template and what to do: format the rest as the API's messages and
 * tools (split at the first NUL) with loom_chat_apply_json, or read it as
 * a reply, cut into steps of the second byte's size, through a reply
 * reader that reads tool calls, checking as it goes that each call's
 * arguments only grow (what a streaming client is sent must never be
 * taken back). */
#include "fuzz_support.h"

#include <loom.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static loom_model *model;
static const char *const templates[] = {"chatml",     "llama3",      "mistral",     "plain",  "harmony",
					"mistral-v7", "mistral-v11", "mistral-v13", "granite"};

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	loom_runtime *rt = fuzz_runtime();
	const char *path = fuzz_data_path("models/stories260K-f32.gguf");
	if (loom_model_load(rt, path, NULL, &model) != LOOM_OK) {
		fprintf(stderr, "fuzz: %s: %s\n", path, loom_last_error());
		abort();
	}
	return 0;
}

static void render(const char *template_name, const char *data, size_t size)
{
	const char *nul = memchr(data, '\0', size);
	const size_t n_messages = nul != NULL ? (size_t)(nul - data) : size;
	const char *tools = nul != NULL ? nul + 1 : NULL;
	const size_t n_tools = nul != NULL ? size - n_messages - 1 : 0;
	char buf[4096];
	size_t n = 0;
	loom_status st = loom_chat_apply_json(model, template_name, data, n_messages, tools, n_tools, true, buf, sizeof(buf),
					      &n);
	if (st == LOOM_OK && strlen(buf) != n)
		abort();
}

static void read_reply(const char *template_name, size_t cut, const char *data, size_t size)
{
	loom_reply_reader *r = NULL;
	if (loom_reply_reader_create(model, template_name, NULL, 0, &r) != LOOM_OK)
		return;
	if (loom_reply_reader_read_tools(r, NULL) != LOOM_OK) {
		loom_reply_reader_free(r);
		return;
	}
	char *seen[8] = {0};
	size_t n_seen[8] = {0};
	for (size_t at = 0; at <= size; at += cut) {
		const size_t k = at + cut < size ? cut : size - at;
		const loom_generated g = {.token = 300, .text = data + at, .len = k, .done = at + cut >= size};
		loom_reply_parts parts;
		if (loom_reply_reader_push(r, &g, &parts) != LOOM_OK)
			break;
		const loom_tool_call *calls;
		const size_t n = loom_reply_reader_tool_calls(r, &calls);
		for (size_t i = 0; i < n && i < 8; i++) {
			if (calls[i].n_arguments < n_seen[i] || memcmp(calls[i].arguments, seen[i] ? seen[i] : "", n_seen[i]) != 0)
				abort(); /* a call's arguments were taken back */
			free(seen[i]);
			seen[i] = malloc(calls[i].n_arguments + 1);
			memcpy(seen[i], calls[i].arguments, calls[i].n_arguments);
			n_seen[i] = calls[i].n_arguments;
		}
		if (g.done)
			break;
	}
	for (int i = 0; i < 8; i++)
		free(seen[i]);
	loom_reply_reader_free(r);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 2)
		return 0;
	const char *template_name = templates[data[0] % (sizeof(templates) / sizeof(templates[0]))];
	if (data[0] & 0x80)
		read_reply(template_name, (size_t)data[1] % 16 + 1, (const char *)data + 2, size - 2);
	else
		render(template_name, (const char *)data + 1, size - 1);
	return 0;
}
