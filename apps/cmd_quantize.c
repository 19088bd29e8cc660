/* cmd_quantize.c - `loom quantize IN OUT SCHEME`: a copy of a model with its
 * weights converted (q8_0, q4_0, q4_k_m, q5_k_m, ...). */
#include "cli.h"

#include <string.h>
#include <sys/stat.h>

int cmd_quantize(int argc, char **argv)
{
	cli_options o;
	loom_runtime *rt = NULL;

	if (!cli_parse("quantize", argc, argv, CLI_BACKEND | CLI_ARGS(3), &o))
		return 1;
	if (o.n_positional != 3)
		return cli_fail("quantize: needs IN.gguf OUT.gguf SCHEME (see `loom help quantize`)");
	const char *in = o.positional[0], *out = o.positional[1];
	if (strcmp(in, out) == 0)
		return cli_fail("quantize: the output would overwrite the input");
	if (!cli_open_runtime(&o, &rt))
		return 1;
	loom_quantize_params qp = loom_quantize_default_params();
	qp.scheme = o.positional[2];
	cli_progress progress;
	cli_progress_start(&progress, o.verbose);
	qp.progress = cli_progress_show;
	qp.progress_user = &progress;
	double t0 = cli_now_ms();
	loom_status st = loom_quantize(rt, in, out, &qp);
	cli_progress_end(&progress);
	loom_runtime_free(rt);
	if (st != LOOM_OK)
		return cli_fail_status(st, "quantize");
	struct stat a, b;
	if (stat(in, &a) == 0 && stat(out, &b) == 0)
		fprintf(stderr, "loom: %s (%.2f MiB) -> %s (%.2f MiB, %s) in %.1f s\n", in, a.st_size / 1048576.0, out,
			b.st_size / 1048576.0, qp.scheme, (cli_now_ms() - t0) / 1e3);
	return 0;
}
