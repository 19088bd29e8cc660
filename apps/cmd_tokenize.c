/* cmd_tokenize.c - `loom tokenize`: token ids of a text, on one line. */
#include "cli.h"

#include <stdlib.h>

int cmd_tokenize(int argc, char **argv)
{
	cli_options o;
	loom_runtime *rt = NULL;
	loom_model *model = NULL;

	if (!cli_parse("tokenize", argc, argv, CLI_MODEL | CLI_PROMPT | CLI_BACKEND | CLI_NO_BOS, &o))
		return 1;
	if (o.prompt == NULL)
		return cli_fail("tokenize: no text given (-p TEXT)");
	if (!cli_open_model(&o, true, &rt, &model))
		return 1;
	size_t n = 0;
	loom_token *toks = cli_tokenize(model, o.prompt, !o.no_bos, &n);
	if (toks != NULL) {
		for (size_t i = 0; i < n; i++)
			printf(i ? " %d" : "%d", toks[i]);
		printf("\n");
	}
	free(toks);
	loom_model_free(model);
	loom_runtime_free(rt);
	return toks != NULL ? 0 : 1;
}
