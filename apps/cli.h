/* cli.h - what the loom command's subcommands share: options, set-up, errors. */
#ifndef LOOM_CLI_H
#define LOOM_CLI_H

#include <loom.h>

#include <stdbool.h>
#include <stdio.h>

/* A comma-separated list of integers (bench's -npp, -ntg, -npl). */
#define CLI_LIST_MAX 16
typedef struct cli_int_list {
	int v[CLI_LIST_MAX];
	int n;
} cli_int_list;

/* Options of every subcommand; each accepts the subset its table allows. */
typedef struct cli_options {
	const char *model;
	const char *prompt;
	const char *file;
	const char *backend;
	const char *plugins;
	const char *output_format; /* bench: md | json */
	const char *chat_template; /* chat: a template name instead of the model's */
	const char *system;        /* chat: the system message */
	const char *reasoning;     /* chat: none, on, low, medium or high; NULL: the template's own */
	const char *quantize;      /* a scheme to quantize the weights to at load */
	const char *type;          /* convert: the output's scheme */
	const char *grammar;       /* run: a GBNF file the output follows */
	const char *json_schema;   /* run: a JSON Schema file the output follows */
	int n_predict;
	int n_threads;
	int n_ctx;
	int n_batch;
	int n_prompt_bench;
	int n_gen_bench;
	int n_depth;               /* bench: tokens cached before each test */
	int repetitions;
	bool bench_single_given;   /* bench: -p, -n, -d, -r or -f, the single-sequence tests' */
	cli_int_list batched_pp;   /* bench -npp: prompt tokens per sequence */
	cli_int_list batched_tg;   /* bench -ntg: generated tokens per sequence */
	cli_int_list batched_pl;   /* bench -npl: sequences decoded together */
	bool batched_pp_shared;    /* bench -pps: one prompt, copied to every sequence */
	loom_dtype kv_type;
	bool kv_type_given; /* by --kv-type, -ctk or -ctv */
	bool backend_layout; /* convert --layout */
	loom_sampler_params sampling;
	bool seed_given;     /* --seed/-s with a value other than -1 */
	bool ignore_eos;     /* end-of-generation tokens are never sampled */
	int n_gpu_layers;    /* -ngl; -1 when not given */
	int context_shift;   /* -1: the subcommand's default; 0 off; 1 on */
	int n_keep;          /* --keep: prompt tokens kept by a shift; -1: all */
	bool no_bos;
	bool verbose;
	bool list_plugins;
	const char *host;          /* serve */
	const char *api_key;
	const char *api_key_file;
	int port;
	int n_slots;
	int queue_size;
	int prompt_chunk;
	const char *stop[8];
	int n_stop;
	const char *positional[4];
	int n_positional;
} cli_options;

/* A prompt or text, from -p or read whole from -f FILE (or -f - for
 * stdin): bytes and length, NULs included. */
typedef struct cli_text {
	char *bytes; /* NUL-terminated as well */
	size_t len;
	bool from_file;
} cli_text;

enum cli_flag {
	CLI_MODEL = 1 << 0,
	CLI_PROMPT = 1 << 1,
	CLI_FILE = 1 << 2,
	CLI_BACKEND = 1 << 3, /* also --plugins, -t, -v */
	CLI_CTX = 1 << 4,     /* -c, -b, --kv-type */
	CLI_SAMPLING = 1 << 5, /* -n, --temp, --top-k, --top-p, --min-p, --repeat-penalty, --seed */
	CLI_NO_BOS = 1 << 6,
	CLI_BENCH = 1 << 7,   /* -p, -n, -d, -r, -o, -npp, -ntg, -npl, -pps */
	CLI_PLUGINS_LIST = 1 << 8,
	CLI_CHAT = 1 << 9,    /* --chat-template, --system */
	CLI_QUANTIZE = 1 << 10, /* --quantize SCHEME */
	CLI_TYPE = 1 << 11,   /* --type SCHEME (convert) */
	CLI_SERVE = 1 << 12,  /* --host, --port, -np, --queue, --prompt-chunk, --api-key, --api-key-file */
	CLI_SHIFT = 1 << 13,  /* --context-shift, --no-context-shift, --keep */
	CLI_GRAMMAR = 1 << 14, /* --grammar FILE, --json-schema FILE */
};

/* The number of positional arguments a subcommand takes, or'ed into its
 * flags; any more is an error naming the first one too many. */
#define CLI_ARGS(n) ((unsigned)(n) << 24)

/* Parses argv[1..argc) for subcommand `cmd`; false (after a message) on a
 * usage error. -h or --help prints the subcommand's usage and exits 0. */
bool cli_parse(const char *cmd, int argc, char **argv, unsigned allowed, cli_options *o);

/* The usage of one subcommand (cli_usage.c); false if there is none. */
bool cli_usage(FILE *out, const char *cmd);
/* Every subcommand's. */
void cli_usage_all(FILE *out);

/* Prints "loom: message" and returns the user-error exit status 1. */
int cli_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Same, appending loom_last_error(). */
int cli_fail_status(loom_status st, const char *what);

/* Runtime and model from the options; on failure prints why and returns
 * false with everything freed. */
bool cli_open_runtime(const cli_options *o, loom_runtime **rt);
bool cli_open_model(const cli_options *o, bool vocab_only, loom_runtime **rt, loom_model **model);
/* A context of -c tokens (without -c: the training context, up to 4096). */
bool cli_open_context(const cli_options *o, loom_model *model, loom_context **ctx);

/* Tokenizes into a malloc'd array; NULL after printing an error. */
loom_token *cli_tokenize(const loom_model *m, const char *text, bool add_special, size_t *n);
loom_token *cli_tokenize_bytes(const loom_model *m, const char *text, size_t len, bool add_special, size_t *n);

/* The text of -p, or of -f FILE (exactly one of them; `what` names it in
 * messages); false after a message. A missing or unreadable file, or a
 * directory, is an error. */
bool cli_read_text(const char *cmd, const cli_options *o, const char *what, cli_text *out);
/* A text file opened for reading (stdin's descriptor for "-"), or -1
 * after a message: a missing file, or a directory, is an error. */
int cli_open_text_file(const char *cmd, const char *path);
/* The bytes of a file, or of stdin for "-"; false after a message. */
bool cli_read_file(const char *cmd, const char *path, cli_text *out);
void cli_text_free(cli_text *t);

/* Progress of quantize and convert (cli_progress.c): pass
 * cli_progress_show with a cli_progress as the user pointer. */
typedef struct cli_progress {
	double t0;
	bool verbose, terminal, drawn;
} cli_progress;
void cli_progress_start(cli_progress *p, bool verbose);
void cli_progress_show(void *user, const loom_convert_progress *progress);
/* Ends a redrawn line. */
void cli_progress_end(cli_progress *p);

/* Standard output, flushed: false after a message if anything written to
 * it was lost (a full disk, a closed pipe), so that the exit status says
 * so. */
bool cli_stdout_ok(void);

double cli_now_ms(void);

/* A token id from a small linear congruential generator: the same
 * sequence for the same state, as a benchmark's random tokens want. */
loom_token cli_random_token(const loom_model *m, unsigned *state);

int cmd_run(int argc, char **argv);
int cmd_chat(int argc, char **argv);
int cmd_serve(int argc, char **argv);
int cmd_tokenize(int argc, char **argv);
int cmd_perplexity(int argc, char **argv);
int cmd_info(int argc, char **argv);
int cmd_bench(int argc, char **argv);
/* bench with -npl: several sequences decoded together (cmd_bench_batched.c). */
int cmd_bench_batched(cli_options *o);
int cmd_quantize(int argc, char **argv);
int cmd_convert(int argc, char **argv);

#endif
