/* cli_usage.c - what `loom help`, `loom help CMD` and `loom CMD -h` print. */
#include "cli.h"

#include <string.h>

#define BACKEND_OPTS                                                                            \
	"  -t, --threads N        compute threads (default: every online CPU)\n"                   \
	"  --backend NAME         force a backend (also LOOM_BACKEND); see `loom info --plugins`\n"   \
	"  -ngl N                 0: a CPU backend; N >= the model's layers: a GPU backend, whole\n"  \
	"  --plugins FILE         another plugins.yaml (also LOOM_PLUGINS)\n"                        \
	"  -v, --verbose          loading, memory and backend details on stderr\n"

#define CTX_OPTS                                                                                \
	"  -c, --ctx-size N       context in tokens (default: the training context, at most 4096)\n" \
	"  -b, --batch-size N     most tokens evaluated at once (default 512)\n"                     \
	"  --kv-type T, -ctk T, -ctv T\n"                                                          \
	"                         KV cache type: f16 (default), f32, q8_0, q4_0\n"                  \
	"  --quantize SCHEME      quantize the weights at load (q8_0, q4_0, q4_k_m, ...)\n"

#define SAMPLING_OPTS                                                                             \
	"  -n, --n-predict N      most tokens to generate (-1: until the context is full)\n"          \
	"  --temp T               temperature (default 0.8; 0: greedy)\n"                             \
	"  --top-k K, --top-p P, --min-p P\n"                                                         \
	"                         truncation (defaults 40, 0.95, 0.05)\n"                             \
	"  --repeat-penalty R, --presence-penalty P, --frequency-penalty F, --repeat-last-n N\n"      \
	"  -s, --seed S           sampling seed (default or -1: random; -v prints it)\n"              \
	"  --stop STR             stop at STR (not printed); up to 8\n"                               \
	"  --ignore-eos           never sample end-of-generation tokens\n"

#define SHIFT_OPTS                                                                              \
	"  --keep N               prompt tokens a context shift keeps (default 0; -1: all)\n"

typedef struct usage {
	const char *cmd;
	const char *text;
} usage;

static const usage usages[] = {
	{"run",
	 "usage: loom run -m MODEL (-p PROMPT | -f FILE) [options]\n"
	 "Streams a continuation of the prompt to stdout; timings go to stderr.\n"
	 "MODEL: a GGUF file, or a Hugging Face directory (config.json, *.safetensors).\n"
	 "\n"
	 "  -m, --model MODEL\n"
	 "  -p, --prompt TEXT\n"
	 "  -f, --file FILE        the prompt from FILE (- for stdin), bytes as they are\n"
	 "  --context-shift        when the context is full, drop the older half of what follows\n"
	 "                         the kept tokens and go on (default: stop, saying so)\n"
	 "  --grammar FILE         the output follows this GBNF grammar (llama.cpp's syntax)\n"
	 "  --json-schema FILE     the output is JSON this JSON Schema accepts\n" SHIFT_OPTS
		 SAMPLING_OPTS CTX_OPTS BACKEND_OPTS},
	{"chat",
	 "usage: loom chat -m MODEL [-f FILE] [options]\n"
	 "A conversation: one user message per line of stdin (or of FILE), each reply\n"
	 "streamed to stdout as one paragraph.\n"
	 "\n"
	 "  -m, --model MODEL\n"
	 "  -f, --file FILE        the user's messages from FILE (- for stdin, the default)\n"
	 "  --chat-template NAME   a template by name instead of the model's\n"
	 "  --system TEXT          the system message\n"
	 "  --reasoning LEVEL      none, on, low, medium or high, as the template offers\n"
	 "                         (gpt-oss: low, medium, high; Qwen 3: none or on)\n"
	 "  --no-context-shift     end the chat when the context is full (default: shift)\n" SHIFT_OPTS
		 SAMPLING_OPTS CTX_OPTS BACKEND_OPTS},
	{"serve",
	 "usage: loom serve -m MODEL [options]\n"
	 "An OpenAI-compatible HTTP server (docs/serving.md).\n"
	 "\n"
	 "  -m, --model MODEL\n"
	 "  --host ADDR            address to listen on (default 127.0.0.1)\n"
	 "  --port N               port (default 8080)\n"
	 "  -np, --parallel N      sequences served at once (default 4)\n"
	 "  --queue N              requests waiting beyond those (default 64)\n"
	 "  --prompt-chunk N       prompt tokens per step while others decode (default 128)\n"
	 "  --api-key KEY, --api-key-file FILE\n"
	 "                         require `Authorization: Bearer KEY`\n" CTX_OPTS BACKEND_OPTS},
	{"tokenize",
	 "usage: loom tokenize -m MODEL (-p TEXT | -f FILE) [--no-bos]\n"
	 "Prints the token ids of the text on one line.\n"
	 "\n"
	 "  -m, --model MODEL\n"
	 "  -p, --prompt TEXT\n"
	 "  -f, --file FILE        the text of FILE (- for stdin), bytes as they are\n"
	 "  --no-bos               no BOS, even where the model adds one\n"},
	{"perplexity",
	 "usage: loom perplexity -m MODEL -f FILE [options]\n"
	 "Perplexity of the text, chunk by chunk, as llama-perplexity computes it.\n"
	 "\n"
	 "  -m, --model MODEL\n"
	 "  -f, --file FILE        the text (- for stdin); it needs at least 2 * CTX tokens\n"
	 "  -c, --ctx-size N       chunk size (default 512)\n"
	 "  -b, --batch-size N     most tokens evaluated at once\n"
	 "  --kv-type T            KV cache type: f16 (default), f32, q8_0, q4_0\n"
	 "  --quantize SCHEME      quantize the weights at load\n" BACKEND_OPTS},
	{"info",
	 "usage: loom info MODEL | loom info --plugins [--plugins FILE]\n"
	 "A model's metadata and tensor table; or the plugins found, their scores, which\n"
	 "backend is chosen and why.\n"},
	{"bench",
	 "usage: loom bench -m MODEL [options]\n"
	 "Prompt processing (pp) and generation (tg) speed, as llama-bench measures it.\n"
	 "\n"
	 "  -m, --model MODEL\n"
	 "  -p N                   prompt tokens of the pp test (default 64; 0: none)\n"
	 "  -n N                   tokens of the tg test (default 32; 0: none)\n"
	 "  -d N                   tokens already cached when each test is timed (default 0)\n"
	 "  -r N                   repetitions (default 3)\n"
	 "  -o md|json             output format\n"
	 "  -f, --file FILE        the pp test evaluates FILE's tokens (repeated as needed)\n"
	 "                         instead of random ones\n"
	 "\n"
	 "Several sequences decoded together, as llama-batched-bench measures it:\n"
	 "  -npl B,...             sequences (each value a run: B prompts, then steps of B tokens)\n"
	 "  -npp P,...             prompt tokens per sequence (default 128)\n"
	 "  -ntg G,...             generated tokens per sequence (default 128)\n"
	 "  -pps                   the sequences share one prompt, evaluated once\n" CTX_OPTS BACKEND_OPTS},
	{"quantize",
	 "usage: loom quantize IN.gguf OUT.gguf SCHEME [-t THREADS] [-v]\n"
	 "Writes IN with its weights in SCHEME, choosing types per tensor as llama-quantize\n"
	 "does. SCHEME: q8_0 q4_0 q4_1 q5_0 q5_1 q6_k q4_k_s q4_k_m q5_k_s q5_k_m f16 f32.\n"
	 "Progress is shown on a terminal.\n"},
	{"convert",
	 "usage: loom convert MODEL OUT.gguf [--type SCHEME | --layout] [--backend NAME] [-t THREADS] [-v]\n"
	 "Writes any model loom reads (a Hugging Face directory, a GGUF file) as GGUF.\n"
	 "\n"
	 "  --type SCHEME          quantize as `loom quantize` does\n"
	 "  --layout               a GGUF file in the backend's own layouts, used in place\n"
	 "                         (no repacking at load) by that backend only\n"},
	{"help", "usage: loom help [COMMAND]\n"},
};

bool cli_usage(FILE *out, const char *cmd)
{
	for (size_t i = 0; i < sizeof(usages) / sizeof(usages[0]); i++) {
		if (strcmp(usages[i].cmd, cmd) == 0) {
			fputs(usages[i].text, out);
			return true;
		}
	}
	return false;
}

void cli_usage_all(FILE *out)
{
	fprintf(out,
		"loom %s - LLM inference runtime\n"
		"\n"
		"usage: loom COMMAND [options]\n"
		"\n"
		"  run         generate a continuation of a prompt\n"
		"  chat        a conversation on stdin\n"
		"  serve       an OpenAI-compatible HTTP server\n"
		"  tokenize    token ids of a text\n"
		"  perplexity  perplexity of a text\n"
		"  info        a model's metadata, or the plugins (--plugins)\n"
		"  bench       prompt and generation speed\n"
		"  quantize    a GGUF file's weights in another type\n"
		"  convert     any model loom reads as GGUF\n"
		"  help        this text; `loom help COMMAND` or `loom COMMAND -h`: that command's\n"
		"  --version\n"
		"\n"
		"Environment: LOOM_BACKEND forces a backend, LOOM_PLUGINS names another plugins.yaml.\n",
		loom_version());
}
