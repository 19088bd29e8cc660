/* cmd_bench_batched.c - `loom bench -npl B,...`: several sequences decoded
 * together, in the manner of llama-batched-bench. For each prompt length
 * PP (-npp), generation length TG (-ntg) and sequence count B (-npl), from
 * an empty cache: B prompts of PP random tokens are evaluated (in n_batch
 * pieces, the logits of each prompt's last token asked for), then TG steps
 * each decode one random token of every sequence. With -pps the B
 * sequences share one prompt, evaluated once and copied. Prompt and
 * generation tokens per second are reported for every combination. */
#include "cli.h"

#include <stdlib.h>
#include <string.h>

typedef struct batched_result {
	int pp, tg, pl, n_kv;
	double t_pp, t_tg; /* seconds */
} batched_result;

/* Cache cells a combination needs. */
static int cells_needed(int pp, int tg, int pl, bool shared)
{
	return shared ? pp + pl * tg : pl * (pp + tg);
}

typedef struct batch_buffers {
	loom_token *tokens;
	int32_t *pos, *seq_id;
	int8_t *logits;
	int n;
} batch_buffers;

static loom_status flush(loom_context *ctx, batch_buffers *b)
{
	loom_batch batch = {.n_tokens = b->n, .tokens = b->tokens, .pos = b->pos, .seq_id = b->seq_id,
			    .logits = b->logits};
	loom_status st = b->n > 0 ? loom_decode(ctx, &batch) : LOOM_OK;
	b->n = 0;
	return st;
}

static void put(batch_buffers *b, loom_token tok, int32_t pos, int32_t seq, bool logits)
{
	b->tokens[b->n] = tok;
	b->pos[b->n] = pos;
	b->seq_id[b->n] = seq;
	b->logits[b->n] = logits;
	b->n++;
}

/* Adds one token; decodes the batch when it holds n_batch. */
static loom_status add(loom_context *ctx, batch_buffers *b, int n_batch, loom_token tok, int32_t pos,
		       int32_t seq, bool logits)
{
	put(b, tok, pos, seq, logits);
	return b->n == n_batch ? flush(ctx, b) : LOOM_OK;
}

/* The prompts: every sequence's in turn, or sequence 0's copied to the
 * others. */
static loom_status prompts(loom_context *ctx, const loom_model *m, batch_buffers *b, int n_batch, int pp, int pl,
			   bool shared, unsigned *rng)
{
	const loom_token bos = loom_token_bos(m) >= 0 ? loom_token_bos(m) : 0;
	loom_status st = LOOM_OK;

	for (int s = 0; s < (shared ? 1 : pl) && st == LOOM_OK; s++)
		for (int i = 0; i < pp && st == LOOM_OK; i++)
			st = add(ctx, b, n_batch, i == 0 ? bos : cli_random_token(m, rng), i, s,
				 i == pp - 1);
	if (st == LOOM_OK)
		st = flush(ctx, b);
	for (int s = 1; shared && s < pl && st == LOOM_OK; s++)
		st = loom_kv_seq_copy(ctx, 0, s, -1, -1);
	return st;
}

/* One combination, from an empty cache (n_batch >= r->pl); false after
 * printing an error. */
static bool run_one(loom_context *ctx, const loom_model *m, int n_batch, bool shared, unsigned *rng,
		    batched_result *r)
{
	batch_buffers b = {
		.tokens = malloc((size_t)n_batch * sizeof(loom_token)),
		.pos = malloc((size_t)n_batch * sizeof(int32_t)),
		.seq_id = malloc((size_t)n_batch * sizeof(int32_t)),
		.logits = malloc((size_t)n_batch),
	};
	loom_status st = LOOM_ERR_NO_MEMORY;

	if (b.tokens != NULL && b.pos != NULL && b.seq_id != NULL && b.logits != NULL) {
		loom_kv_clear(ctx);
		double t0 = cli_now_ms();
		st = prompts(ctx, m, &b, n_batch, r->pp, r->pl, shared, rng);
		double t1 = cli_now_ms();
		for (int i = 0; i < r->tg && st == LOOM_OK; i++) {
			for (int s = 0; s < r->pl; s++)
				put(&b, cli_random_token(m, rng), r->pp + i, s, true);
			st = flush(ctx, &b);
		}
		r->t_pp = (t1 - t0) / 1e3;
		r->t_tg = (cli_now_ms() - t1) / 1e3;
		r->n_kv = cells_needed(r->pp, r->tg, r->pl, shared);
	}
	free(b.tokens);
	free(b.pos);
	free(b.seq_id);
	free(b.logits);
	if (st != LOOM_OK) {
		char what[96];
		snprintf(what, sizeof(what), "bench: %d sequences of %d + %d tokens", r->pl, r->pp, r->tg);
		return cli_fail_status(st, what), false;
	}
	return true;
}

/* Prompt tokens per second: a shared prompt's once, as llama-batched-bench
 * counts them. */
static double speed_pp(const batched_result *r, bool shared)
{
	return r->t_pp > 0 ? (shared ? 1 : r->pl) * r->pp / r->t_pp : 0;
}

static void print_md(const cli_options *o, loom_runtime *rt, const batched_result *r, int n)
{
	printf("model: %s, backend: %s, threads: %d, n_batch: %d, type_kv: %s, pp shared: %s\n\n", o->model,
	       loom_runtime_backend_name(rt), loom_runtime_n_threads(rt), o->n_batch, loom_dtype_name(o->kv_type),
	       o->batched_pp_shared ? "yes" : "no");
	printf("| PP | TG | B | N_KV | T_PP s | S_PP t/s | T_TG s | S_TG t/s | T s | S t/s |\n");
	printf("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n");
	for (int i = 0; i < n; i++) {
		double t = r[i].t_pp + r[i].t_tg;
		double s_pp = speed_pp(&r[i], o->batched_pp_shared);
		double s_tg = r[i].t_tg > 0 ? r[i].pl * r[i].tg / r[i].t_tg : 0;
		printf("| %d | %d | %d | %d | %.3f | %.2f | %.3f | %.2f | %.3f | %.2f |\n", r[i].pp, r[i].tg,
		       r[i].pl, r[i].n_kv, r[i].t_pp, s_pp, r[i].t_tg, s_tg, t, r[i].n_kv / t);
	}
}

/* llama-batched-bench's jsonl keys, as one array. */
static void print_json(const cli_options *o, loom_runtime *rt, const batched_result *r, int n)
{
	printf("[\n");
	for (int i = 0; i < n; i++) {
		double t = r[i].t_pp + r[i].t_tg;
		printf("  {\"model_filename\": \"%s\", \"backends\": \"%s\", \"n_threads\": %d, \"n_batch\": %d, "
		       "\"is_pp_shared\": %d, \"pp\": %d, \"tg\": %d, \"pl\": %d, \"n_kv\": %d, "
		       "\"t_pp\": %.9f, \"speed_pp\": %.6f, \"t_tg\": %.9f, \"speed_tg\": %.6f, "
		       "\"t\": %.9f, \"speed\": %.6f}%s\n",
		       o->model, loom_runtime_backend_name(rt), loom_runtime_n_threads(rt), o->n_batch,
		       o->batched_pp_shared, r[i].pp, r[i].tg, r[i].pl, r[i].n_kv, r[i].t_pp,
		       speed_pp(&r[i], o->batched_pp_shared), r[i].t_tg,
		       r[i].t_tg > 0 ? r[i].pl * r[i].tg / r[i].t_tg : 0, t, r[i].n_kv / t, i + 1 < n ? "," : "");
	}
	printf("]\n");
}

int cmd_bench_batched(cli_options *o)
{
	loom_runtime *rt = NULL;
	loom_model *model = NULL;
	loom_context *ctx = NULL;
	batched_result *results = NULL;
	int n_results = 0, rc = 1, most_cells = 0, most_seqs = 0, longest = 0;
	unsigned rng = 1234;

	if (o->bench_single_given || o->file != NULL)
		return cli_fail("bench: -p, -n, -d, -r and -f are the single-sequence tests'; "
				"with -npl use -npp and -ntg");
	if (o->batched_pp.n == 0)
		o->batched_pp = (cli_int_list){.v = {128}, .n = 1};
	if (o->batched_tg.n == 0)
		o->batched_tg = (cli_int_list){.v = {128}, .n = 1};
	for (int a = 0; a < o->batched_pp.n; a++)
		for (int g = 0; g < o->batched_tg.n; g++)
			for (int p = 0; p < o->batched_pl.n; p++) {
				int cells = cells_needed(o->batched_pp.v[a], o->batched_tg.v[g], o->batched_pl.v[p],
							 o->batched_pp_shared);
				int tokens = o->batched_pp.v[a] + o->batched_tg.v[g];
				most_cells = cells > most_cells ? cells : most_cells;
				most_seqs = o->batched_pl.v[p] > most_seqs ? o->batched_pl.v[p] : most_seqs;
				longest = tokens > longest ? tokens : longest;
			}
	if (o->n_ctx == 0)
		o->n_ctx = most_cells;
	/* A generation step is one batch of a token per sequence. */
	if (o->n_batch < most_seqs)
		o->n_batch = most_seqs;
	if (!cli_open_model(o, false, &rt, &model) || !cli_open_context(o, model, &ctx))
		goto out;
	int train = loom_model_n_ctx_train(model);
	if (train > 0 && longest > train)
		fprintf(stderr, "loom: warning: sequences of %d tokens are longer than the %d the model was "
				"trained on\n", longest, train);
	results = calloc((size_t)(o->batched_pp.n * o->batched_tg.n * o->batched_pl.n), sizeof(*results));
	if (results == NULL) {
		cli_fail("out of memory");
		goto out;
	}
	/* Warm-up: the first prompt length, two steps, the first count. */
	batched_result warm = {.pp = o->batched_pp.v[0], .tg = 2, .pl = o->batched_pl.v[0]};
	if (cells_needed(warm.pp, warm.tg, warm.pl, o->batched_pp_shared) <= o->n_ctx &&
	    !run_one(ctx, model, o->n_batch, o->batched_pp_shared, &rng, &warm))
		goto out;
	for (int a = 0; a < o->batched_pp.n; a++)
		for (int g = 0; g < o->batched_tg.n; g++)
			for (int p = 0; p < o->batched_pl.n; p++) {
				batched_result r = {.pp = o->batched_pp.v[a], .tg = o->batched_tg.v[g],
						    .pl = o->batched_pl.v[p]};
				int cells = cells_needed(r.pp, r.tg, r.pl, o->batched_pp_shared);
				if (cells > o->n_ctx) {
					fprintf(stderr, "loom: skipping PP %d TG %d B %d: %d cells, the context has %d\n",
						r.pp, r.tg, r.pl, cells, o->n_ctx);
					continue;
				}
				if (!run_one(ctx, model, o->n_batch, o->batched_pp_shared, &rng, &r))
					goto out;
				results[n_results++] = r;
			}
	if (strcmp(o->output_format, "json") == 0)
		print_json(o, rt, results, n_results);
	else
		print_md(o, rt, results, n_results);
	rc = cli_stdout_ok() ? 0 : 1;
out:
	free(results);
	loom_context_free(ctx);
	loom_model_free(model);
	loom_runtime_free(rt);
	return rc;
}
