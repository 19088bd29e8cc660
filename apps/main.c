/* main.c - the loom command: dispatch to subcommands. */
#include "cli.h"

#include <string.h>

int main(int argc, char **argv)
{
	if (argc < 2) {
		cli_usage_all(stderr);
		return 1;
	}
	const char *cmd = argv[1];
	if (strcmp(cmd, "run") == 0)
		return cmd_run(argc - 1, argv + 1);
	if (strcmp(cmd, "chat") == 0)
		return cmd_chat(argc - 1, argv + 1);
	if (strcmp(cmd, "serve") == 0)
		return cmd_serve(argc - 1, argv + 1);
	if (strcmp(cmd, "tokenize") == 0)
		return cmd_tokenize(argc - 1, argv + 1);
	if (strcmp(cmd, "perplexity") == 0)
		return cmd_perplexity(argc - 1, argv + 1);
	if (strcmp(cmd, "info") == 0)
		return cmd_info(argc - 1, argv + 1);
	if (strcmp(cmd, "bench") == 0)
		return cmd_bench(argc - 1, argv + 1);
	if (strcmp(cmd, "quantize") == 0)
		return cmd_quantize(argc - 1, argv + 1);
	if (strcmp(cmd, "convert") == 0)
		return cmd_convert(argc - 1, argv + 1);
	if (strcmp(cmd, "help") == 0 || strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0) {
		if (argc > 3)
			return cli_fail("help: unexpected argument '%s'", argv[3]);
		if (argc == 3 && !cli_usage(stdout, argv[2]))
			return cli_fail("help: unknown command '%s' (see `loom help`)", argv[2]);
		if (argc == 2)
			cli_usage_all(stdout);
		return cli_stdout_ok() ? 0 : 1;
	}
	if (strcmp(cmd, "--version") == 0) {
		printf("loom %s\n", loom_version());
		return cli_stdout_ok() ? 0 : 1;
	}
	return cli_fail("unknown command '%s' (see `loom help`)", cmd);
}
