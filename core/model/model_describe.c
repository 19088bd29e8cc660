/* model_describe.c - a model file's block as its contract and
 * hyperparameters make it, in words, without its weights (`loom info`). */
#include "model/model.h"

#include "runtime/appendf.h"
#include "runtime/error.h"
#include "text/chat_json.h"
#include "text/chat_template.h"

#include <inttypes.h>
#include <stdio.h>

/* The first 8 layers for which has() is false, each after a comma, the
 * first after `first` in place of it, then "..." where there are more. */
static void append_layers_without(char *buf, size_t size, size_t *len, const loom_hparams *hp,
				  bool (*has)(const loom_hparams *, int64_t), const char *first)
{
	for (int64_t il = 0, listed = 0; il < hp->n_layer; il++) {
		if (has(hp, il))
			continue;
		if (listed++ == 8) {
			loom_appendf(buf, size, len, ", ...");
			break;
		}
		loom_appendf(buf, size, len, "%s%" PRId64, listed > 1 ? ", " : first, il);
	}
}

/* The layers without RoPE (loom_layer_has_rope), as text after the rope
 * line's other words: nothing where every layer has it. */
static void unrotated_layers(const loom_hparams *hp, char *buf, size_t size)
{
	size_t len = 0;
	buf[0] = '\0';
	append_layers_without(buf, size, &len, hp, loom_layer_has_rope, ", none on layers ");
}

static const char *gating_name(int gating)
{
	static const char *const names[] = {"softmax", "softmax of the chosen", "sigmoid"};
	return gating >= 0 && gating < 3 ? names[gating] : "?";
}

/* Which layers are windowed, as text: "every layer", or how many and the
 * pattern's period, or the file's list's layers that see everything. */
static void windowed_layers(const loom_hparams *hp, char *buf, size_t size)
{
	int64_t n = 0;
	for (int64_t il = 0; il < hp->n_layer; il++)
		n += loom_layer_windowed(hp, il);
	if (hp->swa_layers != NULL) {
		size_t len = 0;
		loom_appendf(buf, size, &len, "%" PRId64 " of %" PRId64 " layers, as the file lists them", n, hp->n_layer);
		if (n == hp->n_layer)
			return;
		append_layers_without(buf, size, &len, hp, loom_layer_windowed, " (");
		loom_appendf(buf, size, &len, " see%s everything)", hp->n_layer - n == 1 ? "s" : "");
		return;
	}
	if (hp->swa_pattern == 0)
		snprintf(buf, size, "every layer");
	else
		snprintf(buf, size, "%" PRId64 " of %" PRId64 " layers (one in every %" PRId64 " sees everything)", n,
			 hp->n_layer, hp->swa_pattern);
}

/* The chat template loom formats conversations with, where it comes
 * from, how its tool calls look and the reasoning a request may ask of
 * it. */
static void describe_chat(const loom_model *m, char *buf, size_t size, size_t *len)
{
	loom_appendf(buf, size, len, "chat template: %s (%s); tool calls %s", loom_chat_template_name(m->chat_template),
		     m->chat_template_source != NULL ? m->chat_template_source : "no template",
		     loom_tool_style_described(loom_tool_style_of(m->chat_template)));
	const char *reasoning = loom_chat_reasoning_offered(m);
	if (reasoning != NULL)
		loom_appendf(buf, size, len, "; reasoning %s", reasoning);
	loom_appendf(buf, size, len, "\n");
}

static void describe(const loom_model *m, char *buf, size_t size, size_t *len)
{
	const loom_hparams *hp = &m->hp;
	const loom_contract *c = m->contract;

	loom_appendf(buf, size, len, "contract: %s (%s)\n", c->name, c->path);
	loom_appendf(buf, size, len,
		     "block: %" PRId64 " layers, n_embd %" PRId64 ", %" PRId64 " heads of %" PRId64 " (%" PRId64
		     " kv heads), n_ff %" PRId64 ", context %" PRId64 "\n",
		     hp->n_layer, hp->n_embd, hp->n_head, hp->head_dim, hp->n_head_kv, hp->n_ff, hp->n_ctx_train);
	if (c->positions == LOOM_POSITIONS_ROPE) {
		char unrotated[128];
		unrotated_layers(hp, unrotated, sizeof(unrotated));
		loom_appendf(buf, size, len, "rope: base %g, %" PRId64 " dimensions, frequencies x %g%s%s%s\n",
			     (double)hp->rope_theta, hp->n_rot, (double)hp->rope_freq_scale,
			     hp->yarn_ext_factor > 0 ? ", yarn" : "", c->global_rope ? "" : ", windowed layers only",
			     unrotated);
	}
	if (hp->n_swa > 0) {
		char which[128];
		windowed_layers(hp, which, sizeof(which));
		loom_appendf(buf, size, len, "sliding window: %" PRId64 " positions on %s", hp->n_swa, which);
		if (hp->rope_theta_swa > 0)
			loom_appendf(buf, size, len, ", their rope base %g", (double)hp->rope_theta_swa);
		loom_appendf(buf, size, len, "\n");
	}
	if (hp->attn_logit_softcap > 0 || hp->final_logit_softcap > 0)
		loom_appendf(buf, size, len, "soft-caps: attention %g, logits %g (0: none)\n",
			     (double)hp->attn_logit_softcap, (double)hp->final_logit_softcap);
	if (c->attn_sinks)
		loom_appendf(buf, size, len, "attention sinks: a logit per head\n");
	if (hp->embedding_mult != 1 || hp->residual_mult != 1 || hp->attention_mult > 0 || hp->logit_scale != 1 ||
	    hp->logit_mult != 1)
		loom_appendf(buf, size, len,
			     "multipliers: embeddings %g, residual %g, attention %g (0: the contract's), logits x %g\n",
			     (double)hp->embedding_mult, (double)hp->residual_mult, (double)hp->attention_mult,
			     (double)(hp->logit_mult / hp->logit_scale));
	if (hp->n_expert > 0) {
		loom_appendf(buf, size, len,
			     "experts: %" PRId64 " a layer of n_ff %" PRId64 ", %" PRId64 " a token, weighted by the %s%s",
			     hp->n_expert, hp->n_ff_exp, hp->n_expert_used, gating_name(hp->expert_gating),
			     hp->expert_weights_norm ? ", renormalised" : "");
		if (hp->expert_weights_scale != 1)
			loom_appendf(buf, size, len, ", times %g", (double)hp->expert_weights_scale);
		if (c->selection_bias)
			loom_appendf(buf, size, len, ", chosen with a bias");
		if (c->shared_expert)
			loom_appendf(buf, size, len, "; a%s shared expert of n_ff %" PRId64,
				     c->shared_expert_gated ? " gated" : "n ungated", hp->n_ff_shared);
		if (hp->n_dense_layers > 0)
			loom_appendf(buf, size, len, "; the first %" PRId64 " layers dense", hp->n_dense_layers);
		loom_appendf(buf, size, len, "\n");
	}
	describe_chat(m, buf, size, len);
}

LOOM_API loom_status loom_model_describe_file(loom_runtime *rt, const char *path, char *buf, size_t size,
					      size_t *n_out)
{
	if (rt == NULL || path == NULL || (buf == NULL && size > 0) || n_out == NULL)
		return loom_error(LOOM_ERR_INVALID_ARGUMENT, "loom_model_describe_file: bad arguments");
	loom_model *m = NULL;
	loom_status st = loom_model_open(rt, path, LOOM_STAGE_CONTRACT, &m);
	if (st != LOOM_OK) {
		loom_model_free(m);
		return st;
	}
	size_t len = 0;
	if (size > 0)
		buf[0] = '\0';
	describe(m, buf, size, &len);
	loom_model_free(m);
	*n_out = len;
	if (len >= size)
		return loom_error(LOOM_ERR_BUFFER_TOO_SMALL, "the description needs %zu bytes, the buffer has %zu", len + 1,
				  size);
	return LOOM_OK;
}
