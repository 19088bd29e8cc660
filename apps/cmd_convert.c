/* cmd_convert.c - `loom convert IN OUT.gguf [--type T]`: a Hugging Face
 * checkpoint (or any model loom reads) written as GGUF; with --layout, a
 * GGUF file written in the backend's own layouts, to be used in place. */
#include "cli.h"

#include <string.h>

int cmd_convert(int argc, char **argv)
{
	cli_options o;
	loom_runtime *rt = NULL;

	if (!cli_parse("convert", argc, argv, CLI_BACKEND | CLI_TYPE | CLI_ARGS(2), &o))
		return 1;
	if (o.n_positional != 2)
		return cli_fail("convert: needs MODEL OUT.gguf (see `loom help convert`)");
	const char *in = o.positional[0], *out = o.positional[1];
	if (strcmp(in, out) == 0)
		return cli_fail("convert: the output would overwrite the input");
	if (!cli_open_runtime(&o, &rt))
		return 1;
	loom_convert_params cp = loom_convert_default_params();
	cp.type = o.type;
	cp.backend_layout = o.backend_layout;
	cli_progress progress;
	cli_progress_start(&progress, o.verbose);
	cp.progress = cli_progress_show;
	cp.progress_user = &progress;
	double t0 = cli_now_ms();
	loom_status st = loom_convert(rt, in, out, &cp);
	cli_progress_end(&progress);
	loom_runtime_free(rt);
	if (st != LOOM_OK)
		return cli_fail_status(st, "convert");
	fprintf(stderr, "loom: %s -> %s (%s) in %.1f s\n", in, out,
		o.backend_layout ? "the backend's layouts" : o.type != NULL ? o.type : "types kept", (cli_now_ms() - t0) / 1e3);
	return 0;
}
