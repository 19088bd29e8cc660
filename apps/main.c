/* main.c - the loom command: dispatch to subcommands. */
#include "cli.h"

#include <string.h>

static void usage(FILE *out)
{
	fprintf(out,
		"loom %s - LLM inference runtime\n"
		"\n"
		"usage:\n"
		"  loom run -m MODEL -p PROMPT [-n N] [--temp T] [--top-k K] [--top-p P] [--min-p P]\n"
		"           [--repeat-penalty R] [--presence-penalty P] [--frequency-penalty F]\n"
		"           [--repeat-last-n N] [--seed S] [--stop STR]...\n"
		"           [-t THREADS] [-c CTX] [-b BATCH] [--kv-type f16|f32|q8_0|q4_0] [--quantize SCHEME]\n"
		"           [--backend NAME] [--plugins FILE] [-v]\n"
		"           MODEL: a GGUF file, or a Hugging Face directory (config.json, *.safetensors)\n"
		"  loom chat -m FILE [--chat-template NAME] [--system TEXT] [sampling and context options]\n"
		"           a conversation on stdin, one user message per line; replies on stdout\n"
		"  loom serve -m MODEL [--host 127.0.0.1] [--port 8080] [-np SLOTS] [-c CTX] [-b BATCH]\n"
		"           [--queue N] [--prompt-chunk N] [--api-key KEY | --api-key-file F] [--backend NAME]\n"
		"           [-t THREADS] [--kv-type f16|f32|q8_0|q4_0] [-v]\n"
		"           an OpenAI-compatible HTTP server (docs/serving.md)\n"
		"  loom tokenize -m FILE -p TEXT [--no-bos]\n"
		"  loom perplexity -m FILE -f TEXTFILE [-c CTX] [-b BATCH] [-t THREADS] [--kv-type f16|f32|q8_0|q4_0]\n"
		"  loom info FILE            metadata and tensor table\n"
		"  loom info --plugins       plugins found, their scores, which backend is chosen and why\n"
		"  loom bench -m FILE [-p 64] [-n 32] [-d 0] [-t 2] [-r 3] [-o md|json] [--kv-type f16|f32|q8_0|q4_0]\n"
		"           -d: tokens already cached when pp and tg are timed (llama-bench's -d)\n"
		"  loom quantize IN.gguf OUT.gguf SCHEME [-t THREADS] [-v]\n"
		"  loom convert MODEL OUT.gguf [--type SCHEME | --layout] [--backend NAME] [-t THREADS] [-v]\n"
		"           writes any model loom reads (a Hugging Face directory) as GGUF\n"
		"           --layout: a GGUF file in the backend's own layouts, used in place (no repacking)\n"
		"           SCHEME: q8_0 q4_0 q4_1 q5_0 q5_1 q6_k q4_k_s q4_k_m q5_k_s q5_k_m f16 f32\n"
		"  loom help | --version\n"
		"\n"
		"Environment: LOOM_BACKEND forces a backend, LOOM_PLUGINS names another plugins.yaml.\n",
		loom_version());
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		usage(stderr);
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
		usage(stdout);
		return 0;
	}
	if (strcmp(cmd, "--version") == 0) {
		printf("loom %s\n", loom_version());
		return 0;
	}
	usage(stderr);
	return cli_fail("unknown command '%s'", cmd);
}
