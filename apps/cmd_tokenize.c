/* cmd_tokenize.c - `loom tokenize`: token ids of a text, on one line. */
#include "cli.h"

#include <stdlib.h>

int cmd_tokenize(int argc, char **argv)
{
	cli_options o;
	loom_runtime *rt = NULL;
	loom_model *model = NULL;
	cli_text text;

	if (!cli_parse("tokenize", argc, argv, CLI_MODEL | CLI_PROMPT | CLI_FILE | CLI_BACKEND | CLI_NO_BOS, &o))
		return 1;
	if (!cli_read_text("tokenize", &o, "text", &text))
		return 1;
	if (!cli_open_model(&o, true, &rt, &model)) {
		cli_text_free(&text);
		return 1;
	}
	size_t n = 0;
	loom_token *toks = cli_tokenize_bytes(model, text.bytes, text.len, !o.no_bos, &n);
	bool ok = toks != NULL;
	if (ok) {
		for (size_t i = 0; i < n; i++)
			printf(i ? " %d" : "%d", toks[i]);
		printf("\n");
		ok = cli_stdout_ok();
	}
	free(toks);
	cli_text_free(&text);
	loom_model_free(model);
	loom_runtime_free(rt);
	return ok ? 0 : 1;
}
