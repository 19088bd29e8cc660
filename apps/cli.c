/* cli.c - option parsing and set-up shared by the loom subcommands. */
#include "cli.h"

#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

int cli_fail(const char *fmt, ...)
{
	va_list ap;
	fputs("loom: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	return 1;
}

int cli_fail_status(loom_status st, const char *what)
{
	const char *msg = loom_last_error();
	return cli_fail("%s: %s", what, msg[0] ? msg : loom_strerror(st));
}

loom_token cli_random_token(const loom_model *m, unsigned *state)
{
	*state = *state * 1103515245u + 12345u;
	return (loom_token)((*state >> 8) % (unsigned)loom_model_n_vocab(m));
}

double cli_now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static bool parse_int(const char *opt, const char *s, long lo, long hi, int *out)
{
	char *end;
	errno = 0;
	long v = strtol(s, &end, 10);
	if (end == s || *end != '\0' || errno != 0 || v < lo || v > hi) {
		cli_fail("%s expects an integer in [%ld, %ld], not '%s'", opt, lo, hi, s);
		return false;
	}
	*out = (int)v;
	return true;
}

static bool parse_int_list(const char *opt, const char *s, long lo, long hi, cli_int_list *out)
{
	out->n = 0;
	for (const char *p = s;; p++) {
		char item[32];
		size_t len = strcspn(p, ",");
		if (out->n == CLI_LIST_MAX)
			return cli_fail("%s takes at most %d values, not '%s'", opt, CLI_LIST_MAX, s), false;
		if (len >= sizeof(item))
			return cli_fail("%s expects integers in [%ld, %ld], not '%s'", opt, lo, hi, s), false;
		memcpy(item, p, len);
		item[len] = '\0';
		if (!parse_int(opt, item, lo, hi, &out->v[out->n++]))
			return false;
		p += len;
		if (*p == '\0')
			return true;
	}
}

static bool parse_float(const char *opt, const char *s, float lo, float hi, float *out)
{
	char *end;
	errno = 0;
	float v = strtof(s, &end);
	if (end == s || *end != '\0' || errno != 0 || !(v >= lo && v <= hi)) {
		cli_fail("%s expects a number in [%g, %g], not '%s'", opt, lo, hi, s);
		return false;
	}
	*out = v;
	return true;
}

/* --kv-type, and llama.cpp's -ctk/-ctv: keys and values share one type. */
static bool parse_kv_type(const char *opt, const char *s, cli_options *o)
{
	static const struct {
		const char *name;
		loom_dtype type;
	} types[] = {{"f16", LOOM_DTYPE_F16}, {"f32", LOOM_DTYPE_F32}, {"q8_0", LOOM_DTYPE_Q8_0}, {"q4_0", LOOM_DTYPE_Q4_0}};

	for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++) {
		if (strcmp(s, types[i].name) != 0)
			continue;
		if (o->kv_type_given && o->kv_type != types[i].type)
			return cli_fail("%s %s: keys and values share one cache type, already given as %s", opt, s,
					loom_dtype_name(o->kv_type)),
			       false;
		o->kv_type = types[i].type;
		o->kv_type_given = true;
		return true;
	}
	return cli_fail("%s must be f16, f32, q8_0 or q4_0, not '%s'", opt, s), false;
}

static void defaults(cli_options *o)
{
	memset(o, 0, sizeof(*o));
	o->n_predict = -1;
	o->n_ctx = 0;
	o->n_batch = 512;
	o->n_prompt_bench = 64;
	o->n_gen_bench = 32;
	o->repetitions = 3;
	o->n_threads = 0;
	o->kv_type = LOOM_DTYPE_F16;
	o->output_format = "md";
	o->host = "127.0.0.1";
	o->port = 8080;
	o->n_slots = 4;
	o->queue_size = 64;
	o->prompt_chunk = 128;
	o->sampling = loom_sampler_default_params();
	o->n_gpu_layers = -1;
	o->context_shift = -1;
	o->n_keep = 0;
}

/* An unseeded run's seed, from the system's entropy source: two runs
 * started in the same second must not repeat each other. */
static uint64_t random_seed(void)
{
	uint64_t seed;
	if (getrandom(&seed, sizeof(seed), 0) == (ssize_t)sizeof(seed))
		return seed;
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return ((uint64_t)ts.tv_sec * 1000000007u) ^ (uint64_t)ts.tv_nsec ^ ((uint64_t)getpid() << 32);
}

/* --seed N, or -1 for a random one. */
static bool parse_seed(const char *opt, const char *v, cli_options *o)
{
	if (strcmp(v, "-1") == 0) {
		o->seed_given = false;
		return true;
	}
	char *end;
	errno = 0;
	unsigned long long seed = strtoull(v, &end, 10);
	if (end == v || *end != '\0' || errno != 0 || v[0] == '-')
		return cli_fail("%s expects a non-negative integer, or -1 for a random seed, not '%s'", opt, v), false;
	o->sampling.seed = seed;
	o->seed_given = true;
	return true;
}

/* A positional argument beyond what cmd takes. */
static bool stray_argument(const char *cmd, const char *arg, unsigned allowed)
{
	if (allowed & CLI_PROMPT)
		cli_fail("%s: unexpected argument '%s' (a prompt with spaces needs quotes: -p \"...\")", cmd, arg);
	else
		cli_fail("%s: unexpected argument '%s' (see `loom help %s`)", cmd, arg, cmd);
	return false;
}

bool cli_parse(const char *cmd, int argc, char **argv, unsigned allowed, cli_options *o)
{
	const int max_positional = (int)(allowed >> 24);
	defaults(o);
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		const char *v = i + 1 < argc ? argv[i + 1] : NULL;
		bool takes_value = true, ok = true;
#define IS(name) (strcmp(a, name) == 0)
#define NEED(flag) ((allowed & (flag)) != 0)
		if (a[0] != '-' || a[1] == '\0') {
			if (o->n_positional == max_positional)
				return stray_argument(cmd, a, allowed);
			o->positional[o->n_positional++] = a;
			continue;
		}
		if (IS("-h") || IS("--help")) {
			cli_usage(stdout, cmd);
			exit(cli_stdout_ok() ? 0 : 1);
		}
		if ((IS("-v") || IS("--verbose")) && NEED(CLI_BACKEND)) {
			o->verbose = true;
			continue;
		}
		if (IS("--ignore-eos") && NEED(CLI_SAMPLING)) {
			o->ignore_eos = true;
			continue;
		}
		if ((IS("--context-shift") || IS("--no-context-shift")) && NEED(CLI_SHIFT)) {
			o->context_shift = IS("--context-shift");
			continue;
		}
		if (IS("-pps") && NEED(CLI_BENCH)) {
			o->batched_pp_shared = true;
			continue;
		}
		if (IS("--layout") && NEED(CLI_TYPE)) {
			o->backend_layout = true;
			continue;
		}
		if (IS("--no-bos") && NEED(CLI_NO_BOS)) {
			o->no_bos = true;
			continue;
		}
		if (IS("--plugins") && NEED(CLI_PLUGINS_LIST) && (v == NULL || v[0] == '-')) {
			o->list_plugins = true;
			continue;
		}
		if (v == NULL)
			return cli_fail("%s: option %s needs a value (or is unknown; see `loom help`)", cmd, a), false;
		if ((IS("-m") || IS("--model")) && NEED(CLI_MODEL))
			o->model = v;
		else if ((IS("-p") || IS("--prompt")) && NEED(CLI_PROMPT))
			o->prompt = v;
		else if ((IS("-f") || IS("--file")) && NEED(CLI_FILE))
			o->file = v;
		else if (IS("--chat-template") && NEED(CLI_CHAT))
			o->chat_template = v;
		else if (IS("--system") && NEED(CLI_CHAT))
			o->system = v;
		else if (IS("--reasoning") && NEED(CLI_CHAT))
			o->reasoning = v;
		else if (IS("--quantize") && NEED(CLI_QUANTIZE))
			o->quantize = v;
		else if (IS("--type") && NEED(CLI_TYPE))
			o->type = v;
		else if (IS("--grammar") && NEED(CLI_GRAMMAR))
			o->grammar = v;
		else if (IS("--json-schema") && NEED(CLI_GRAMMAR))
			o->json_schema = v;
		else if (IS("--host") && NEED(CLI_SERVE))
			o->host = v;
		else if (IS("--port") && NEED(CLI_SERVE))
			ok = parse_int(a, v, 0, 65535, &o->port);
		else if ((IS("-np") || IS("--parallel")) && NEED(CLI_SERVE))
			ok = parse_int(a, v, 1, LOOM_MAX_SEQ - 1, &o->n_slots);
		else if (IS("--queue") && NEED(CLI_SERVE))
			ok = parse_int(a, v, 0, 1 << 20, &o->queue_size);
		else if (IS("--prompt-chunk") && NEED(CLI_SERVE))
			ok = parse_int(a, v, 1, 1 << 16, &o->prompt_chunk);
		else if (IS("--api-key") && NEED(CLI_SERVE))
			o->api_key = v;
		else if (IS("--api-key-file") && NEED(CLI_SERVE))
			o->api_key_file = v;
		else if (IS("--backend") && NEED(CLI_BACKEND))
			o->backend = v;
		else if (IS("--plugins") && NEED(CLI_BACKEND))
			o->plugins = v;
		else if ((IS("-t") || IS("--threads")) && NEED(CLI_BACKEND))
			ok = parse_int(a, v, 1, 1024, &o->n_threads);
		else if ((IS("-c") || IS("--ctx-size")) && NEED(CLI_CTX))
			ok = parse_int(a, v, 1, 1 << 24, &o->n_ctx);
		else if ((IS("-b") || IS("--batch-size")) && NEED(CLI_CTX))
			ok = parse_int(a, v, 1, 1 << 16, &o->n_batch);
		else if ((IS("--kv-type") || IS("-ctk") || IS("--cache-type-k") || IS("-ctv") ||
			  IS("--cache-type-v")) && NEED(CLI_CTX))
			ok = parse_kv_type(a, v, o);
		else if ((IS("-n") || IS("--n-predict")) && NEED(CLI_SAMPLING))
			ok = parse_int(a, v, -1, INT_MAX, &o->n_predict);
		else if (IS("--temp") && NEED(CLI_SAMPLING))
			ok = parse_float(a, v, 0, 100, &o->sampling.temperature);
		else if (IS("--top-k") && NEED(CLI_SAMPLING))
			ok = parse_int(a, v, 0, INT_MAX, &o->sampling.top_k);
		else if (IS("--top-p") && NEED(CLI_SAMPLING))
			ok = parse_float(a, v, 0, 1, &o->sampling.top_p);
		else if (IS("--min-p") && NEED(CLI_SAMPLING))
			ok = parse_float(a, v, 0, 1, &o->sampling.min_p);
		else if (IS("--repeat-penalty") && NEED(CLI_SAMPLING))
			ok = parse_float(a, v, 0.01f, 100, &o->sampling.repeat_penalty);
		else if (IS("--presence-penalty") && NEED(CLI_SAMPLING))
			ok = parse_float(a, v, -2, 2, &o->sampling.presence_penalty);
		else if (IS("--frequency-penalty") && NEED(CLI_SAMPLING))
			ok = parse_float(a, v, -2, 2, &o->sampling.frequency_penalty);
		else if (IS("--repeat-last-n") && NEED(CLI_SAMPLING))
			ok = parse_int(a, v, 0, 1 << 20, &o->sampling.repeat_last_n);
		else if (IS("--stop") && NEED(CLI_SAMPLING)) {
			if (o->n_stop == 8)
				return cli_fail("at most 8 --stop strings"), false;
			o->stop[o->n_stop++] = v;
		} else if ((IS("--seed") || IS("-s")) && NEED(CLI_SAMPLING))
			ok = parse_seed(a, v, o);
		else if (IS("--keep") && NEED(CLI_SHIFT))
			ok = parse_int(a, v, -1, INT_MAX, &o->n_keep);
		else if ((IS("-ngl") || IS("--n-gpu-layers") || IS("--gpu-layers")) && NEED(CLI_BACKEND))
			ok = parse_int(a, v, 0, INT_MAX, &o->n_gpu_layers);
		else if (IS("-p") && NEED(CLI_BENCH))
			ok = parse_int(a, v, 0, 1 << 16, &o->n_prompt_bench), o->bench_single_given = true;
		else if (IS("-n") && NEED(CLI_BENCH))
			ok = parse_int(a, v, 0, 1 << 16, &o->n_gen_bench), o->bench_single_given = true;
		else if (IS("-d") && NEED(CLI_BENCH))
			ok = parse_int(a, v, 0, 1 << 24, &o->n_depth), o->bench_single_given = true;
		else if (IS("-r") && NEED(CLI_BENCH))
			ok = parse_int(a, v, 1, 1000, &o->repetitions), o->bench_single_given = true;
		else if (IS("-npp") && NEED(CLI_BENCH))
			ok = parse_int_list(a, v, 1, 1 << 16, &o->batched_pp);
		else if (IS("-ntg") && NEED(CLI_BENCH))
			ok = parse_int_list(a, v, 0, 1 << 16, &o->batched_tg);
		else if (IS("-npl") && NEED(CLI_BENCH))
			ok = parse_int_list(a, v, 1, LOOM_MAX_SEQ, &o->batched_pl);
		else if (IS("-o") && NEED(CLI_BENCH)) {
			if (strcmp(v, "md") != 0 && strcmp(v, "json") != 0)
				return cli_fail("-o must be md or json, not '%s'", v), false;
			o->output_format = v;
		} else
			return cli_fail("%s: unknown option %s (see `loom help`)", cmd, a), false;
#undef IS
#undef NEED
		if (!ok)
			return false;
		if (takes_value)
			i++;
	}
	if (!o->seed_given)
		o->sampling.seed = random_seed();
	return true;
}

static void log_to_stderr(void *user, loom_log_level level, const char *msg)
{
	static const char *const names[] = {"error", "warning", "info", "debug"};
	(void)user;
	fprintf(stderr, "loom %s: %s\n", names[level], msg);
}

bool cli_open_runtime(const cli_options *o, loom_runtime **rt)
{
	loom_runtime_params rp = loom_runtime_default_params();
	rp.plugins_file = o->plugins;
	rp.backend = o->backend;
	rp.n_threads = o->n_threads;
	rp.log_level = o->verbose ? LOOM_LOG_INFO : LOOM_LOG_WARN;
	rp.log_fn = log_to_stderr;
	/* llama.cpp's -ngl: 0 layers on a GPU is a CPU backend; more is a GPU
	 * backend, checked against the model's layers once it is loaded. */
	if (o->n_gpu_layers >= 0)
		rp.compute_on = o->n_gpu_layers == 0 ? LOOM_COMPUTE_HOST : LOOM_COMPUTE_DEVICE;
	loom_status st = loom_runtime_create(&rp, rt);
	if (st != LOOM_OK) {
		cli_fail_status(st, "cannot start");
		return false;
	}
	return true;
}

bool cli_open_model(const cli_options *o, bool vocab_only, loom_runtime **rt, loom_model **model)
{
	if (o->model == NULL) {
		cli_fail("no model given (-m FILE)");
		return false;
	}
	if (!cli_open_runtime(o, rt))
		return false;
	loom_model_params mp = loom_model_default_params();
	mp.vocab_only = vocab_only;
	mp.quantize = o->quantize;
	loom_status st = loom_model_load(*rt, o->model, &mp, model);
	if (st != LOOM_OK) {
		cli_fail_status(st, "cannot load model");
		loom_runtime_free(*rt);
		*rt = NULL;
		return false;
	}
	/* loom runs a model on one backend, whole. */
	int n_layer = loom_model_n_layer(*model);
	if (o->n_gpu_layers > 0 && o->n_gpu_layers < n_layer) {
		cli_fail("-ngl %d asks for %d of the model's %d layers on the GPU; loom runs a model on one backend, "
			 "whole: -ngl 0 for a CPU backend, -ngl %d (or more) for a GPU",
			 o->n_gpu_layers, o->n_gpu_layers, n_layer, n_layer);
		loom_model_free(*model);
		loom_runtime_free(*rt);
		*model = NULL;
		*rt = NULL;
		return false;
	}
	return true;
}

bool cli_open_context(const cli_options *o, loom_model *model, loom_context **ctx)
{
	loom_context_params cp = loom_context_default_params();
	int train = loom_model_n_ctx_train(model);
	/* No -c: the training context, up to 4096. */
	cp.n_ctx = (uint32_t)(o->n_ctx != 0 ? o->n_ctx : train > 0 && train < 4096 ? train : 4096);
	/* bench -npl's cells are shared by its sequences, which warns of their
	 * own lengths. */
	if (train > 0 && o->n_ctx > train && o->batched_pl.n == 0)
		fprintf(stderr, "loom: warning: -c %d is more than the %d tokens the model was trained on; "
				"what it writes past them may degrade\n", o->n_ctx, train);
	cp.n_batch = (uint32_t)o->n_batch;
	cp.kv_type = o->kv_type;
	loom_status st = loom_context_create(model, &cp, ctx);
	if (st != LOOM_OK) {
		cli_fail_status(st, "cannot create a context");
		return false;
	}
	return true;
}

loom_token *cli_tokenize(const loom_model *m, const char *text, bool add_special, size_t *n)
{
	return cli_tokenize_bytes(m, text, strlen(text), add_special, n);
}

loom_token *cli_tokenize_bytes(const loom_model *m, const char *text, size_t len, bool add_special, size_t *n)
{
	size_t need = 0;
	loom_status st = loom_tokenize(m, text, len, add_special, false, NULL, 0, &need);
	if (st != LOOM_OK && st != LOOM_ERR_BUFFER_TOO_SMALL) {
		cli_fail_status(st, "cannot tokenize");
		return NULL;
	}
	loom_token *toks = malloc((need + 1) * sizeof(loom_token));
	if (toks == NULL) {
		cli_fail("out of memory");
		return NULL;
	}
	st = loom_tokenize(m, text, len, add_special, false, toks, need, n);
	if (st != LOOM_OK) {
		free(toks);
		cli_fail_status(st, "cannot tokenize");
		return NULL;
	}
	return toks;
}

bool cli_stdout_ok(void)
{
	errno = 0;
	if (fflush(stdout) == 0 && !ferror(stdout))
		return true;
	cli_fail("cannot write to standard output%s%s", errno != 0 ? ": " : "", errno != 0 ? strerror(errno) : "");
	return false;
}
