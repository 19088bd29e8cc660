/* synth_model.c - random-weight llama models as GGUF files (see synth_model.h). */
#include "synth_model.h"

#include "cpu_ref.h"
#include "gguf_writer.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NAME_MAX_LEN 64
#define SP "\xe2\x96\x81" /* U+2581, SentencePiece's word-start mark */

typedef struct synth_tensor {
	char name[NAME_MAX_LEN];
	size_t index; /* in the writer */
	loom_dtype type;
	int64_t ne0, ne1;
} synth_tensor;

struct synth_model {
	synth_config cfg;
	synth_faults faults;
	gguf_writer *w;
	ref_rng rng;
	synth_tensor *tensors;
	int n_tensors, cap_tensors;
};

synth_config synth_default_config(void)
{
	synth_config c = {
		.n_vocab = 300,
		.n_embd = 64,
		.n_layer = 2,
		.n_head = 4,
		.n_head_kv = 2,
		.head_dim = 0,
		.n_rot = 0,
		.n_ff = 160,
		.n_ctx = 128,
		.rope_theta = 10000.0f,
		.norm_eps = 1e-5f,
		.weight_type = LOOM_DTYPE_F32,
		.tied = false,
		.seed = 1,
	};
	return c;
}

static _Noreturn void die(const char *what)
{
	fprintf(stderr, "synth_model: %s\n", what);
	abort();
}

static void *xmalloc(size_t size)
{
	void *p = malloc(size > 0 ? size : 1);
	if (p == NULL)
		die("out of memory");
	return p;
}

static bool same(const char *a, const char *b)
{
	return a != NULL && b != NULL && strcmp(a, b) == 0;
}

/* ---- encoding ------------------------------------------------------------ */

static void encode_q8_0(const float *src, uint8_t *dst, int64_t n)
{
	for (int64_t b = 0; b < n / 32; b++) {
		const float *x = src + 32 * b;
		uint8_t *blk = dst + REF_Q8_0_BLOCK_BYTES * b;
		float amax = 0.0f;

		for (int j = 0; j < 32; j++)
			amax = fmaxf(amax, fabsf(x[j]));
		float d = amax / 127.0f;
		uint16_t dh = ref_f32_to_fp16(d);
		memcpy(blk, &dh, 2);
		/* |x / d| <= 127 up to one f32 rounding, so no clamp is needed. */
		for (int j = 0; j < 32; j++)
			blk[2 + j] = (uint8_t)(int8_t)(d != 0.0f ? nearbyint((double)x[j] / d) : 0.0);
	}
}

/* E2M1's values doubled (ggml's kvalues_mxfp4). */
static const int8_t mxfp4_values[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};

/* ggml's reference MXFP4 quantizer: E puts the block's largest magnitude
 * in [4, 8) of the halved scale's units, each value the nearest (the
 * first on a tie). */
static void encode_mxfp4(const float *src, uint8_t *dst, int64_t n)
{
	for (int64_t b = 0; b < n / 32; b++) {
		const float *x = src + 32 * b;
		uint8_t *blk = dst + 17 * b;
		float amax = 0.0f;
		for (int j = 0; j < 32; j++)
			amax = fmaxf(amax, fabsf(x[j]));
		blk[0] = amax > 0.0f ? (uint8_t)(floorf(log2f(amax)) - 2 + 127) : 0;
		const float d = (float)ldexp(1.0, blk[0] - 128);
		for (int j = 0; j < 32; j++) {
			int best = 0;
			for (int i = 1; i < 16; i++)
				if (fabsf(mxfp4_values[i] * d - x[j]) < fabsf(mxfp4_values[best] * d - x[j]))
					best = i;
			if (j < 16)
				blk[1 + j] = (uint8_t)best;
			else
				blk[1 + j - 16] |= (uint8_t)(best << 4);
		}
	}
}

void synth_encode(loom_dtype type, const float *src, void *dst, int64_t n)
{
	uint16_t *h = dst;

	switch (type) {
	case LOOM_DTYPE_F32:
		memcpy(dst, src, (size_t)n * sizeof(float));
		break;
	case LOOM_DTYPE_F16:
		for (int64_t i = 0; i < n; i++)
			h[i] = ref_f32_to_fp16(src[i]);
		break;
	case LOOM_DTYPE_BF16:
		for (int64_t i = 0; i < n; i++)
			h[i] = ref_f32_to_bf16(src[i]);
		break;
	case LOOM_DTYPE_Q8_0:
		if (n % 32 != 0)
			die("Q8_0 needs a multiple of 32 values");
		encode_q8_0(src, dst, n);
		break;
	case LOOM_DTYPE_MXFP4:
		if (n % 32 != 0)
			die("MXFP4 needs a multiple of 32 values");
		encode_mxfp4(src, dst, n);
		break;
	default:
		die("synth_encode: unsupported type");
	}
}

/* ---- tensors --------------------------------------------------------------- */

static void fill_pseudo_random(synth_model *sm, uint8_t *dst, uint64_t n)
{
	for (uint64_t i = 0; i < n; i++)
		dst[i] = (uint8_t)ref_rng_next(&sm->rng);
}

/* Notes a tensor the writer holds, for synth_model_tensor. */
static void remember(synth_model *sm, const char *name, size_t index, loom_dtype type, int64_t ne0, int64_t ne1)
{
	if (sm->n_tensors == sm->cap_tensors) {
		sm->cap_tensors = sm->cap_tensors ? 2 * sm->cap_tensors : 32;
		sm->tensors = realloc(sm->tensors, (size_t)sm->cap_tensors * sizeof(*sm->tensors));
		if (sm->tensors == NULL)
			die("out of memory");
	}
	synth_tensor *t = &sm->tensors[sm->n_tensors++];
	snprintf(t->name, sizeof(t->name), "%s", name);
	t->index = index;
	t->type = type;
	t->ne0 = ne0;
	t->ne1 = ne1;
}

/* Adds tensor `name` of n_dims dimensions given by want, holding `values`
 * encoded as type, unless a fault says otherwise: omitted, its last
 * dimension one larger, or retyped (those two hold pseudo-random bytes). */
static void add_tensor_nd(synth_model *sm, const char *name, loom_dtype type, int n_dims, const int64_t *want,
			  const float *values)
{
	const synth_faults *f = &sm->faults;
	int64_t ne[3], n = 1;

	if (same(name, f->omit_tensor))
		return;
	for (int d = 0; d < n_dims; d++) {
		ne[d] = want[d];
		n *= want[d];
	}
	if (same(name, f->grow_tensor))
		ne[n_dims - 1]++;
	if (same(name, f->retype_tensor))
		type = f->retype;
	size_t index = gguf_writer_add_tensor(sm->w, name, type, n_dims, ne, NULL);
	uint8_t *data = gguf_writer_tensor_data(sm->w, index);

	if (ne[n_dims - 1] == want[n_dims - 1] && !same(name, f->retype_tensor))
		synth_encode(type, values, data, n);
	else
		fill_pseudo_random(sm, data, gguf_tensor_n_bytes(type, n_dims, ne));

	int64_t rows = 1;
	for (int d = 1; d < n_dims; d++)
		rows *= ne[d];
	remember(sm, name, index, type, ne[0], rows);
}

/* A vector of ne0 (ne1 0) or a matrix of ne0 x ne1. */
static void add_tensor(synth_model *sm, const char *name, loom_dtype type, int64_t ne0, int64_t ne1,
		       const float *values)
{
	const int64_t ne[2] = {ne0, ne1};
	add_tensor_nd(sm, name, type, ne1 > 0 ? 2 : 1, ne, values);
}

/* n normal values of standard deviation sd, the generator's next (malloc'd). */
static float *normal_values(synth_model *sm, int64_t n, double sd)
{
	float *v = xmalloc((size_t)n * sizeof(float));

	for (int64_t i = 0; i < n; i++)
		v[i] = (float)(sd * ref_rng_normal(&sm->rng));
	return v;
}

/* A weight matrix of n_out rows of n_in: normal with standard deviation
 * 1/sqrt(n_in), so every matmul keeps its activations of order one. */
static void add_matrix(synth_model *sm, const char *name, int64_t n_in, int64_t n_out)
{
	float *v = normal_values(sm, n_in * n_out, 1.0 / sqrt((double)n_in));

	add_tensor(sm, name, sm->cfg.weight_type, n_in, n_out, v);
	free(v);
}

/* Every expert's matrix of n_out rows of n_in, as add_matrix's, in one
 * tensor {n_in, n_out, n_expert}. */
static void add_experts(synth_model *sm, const char *name, int64_t n_in, int64_t n_out, int64_t n_expert)
{
	float *v = normal_values(sm, n_in * n_out * n_expert, 1.0 / sqrt((double)n_in));

	const int64_t ne[3] = {n_in, n_out, n_expert};
	add_tensor_nd(sm, name, sm->cfg.expert_type != 0 ? sm->cfg.expert_type : sm->cfg.weight_type, 3, ne, v);
	free(v);
}

/* A router, F32 as converters leave it: its logits spread (standard
 * deviation 2) so that the choice of experts is seldom a near-tie. */
static void add_router(synth_model *sm, const char *name, int64_t n_in, int64_t n_expert)
{
	float *v = normal_values(sm, n_in * n_expert, 2.0 / sqrt((double)n_in));

	add_tensor(sm, name, LOOM_DTYPE_F32, n_in, n_expert, v);
	free(v);
}

/* An f32 vector of n normal values of standard deviation sd. */
static void add_values(synth_model *sm, const char *name, int64_t n, double sd)
{
	float *v = normal_values(sm, n, sd);

	add_tensor(sm, name, LOOM_DTYPE_F32, n, 0, v);
	free(v);
}

/* An f32 vector of n: normal with standard deviation 1/sqrt(n) (a bias,
 * or a shared expert's gate, whose logit it keeps of order one). */
static void add_bias(synth_model *sm, const char *name, int64_t n)
{
	add_values(sm, name, n, 1.0 / sqrt((double)n));
}

/* An f32 table of rows rows of n normal values (standard deviation 0.5):
 * each expert's bias. */
static void add_table(synth_model *sm, const char *name, int64_t n, int64_t rows)
{
	float *v = normal_values(sm, n * rows, 0.5);

	add_tensor(sm, name, LOOM_DTYPE_F32, n, rows, v);
	free(v);
}

/* A norm weight: uniform in [0.5, 1.5], far enough from 1 that a norm
 * applied without its weight would show. */
static void add_norm(synth_model *sm, const char *name, int64_t n)
{
	float *v = xmalloc((size_t)n * sizeof(float));

	for (int64_t i = 0; i < n; i++)
		v[i] = (float)ref_rng_uniform(&sm->rng, 0.5, 1.5);
	add_tensor(sm, name, LOOM_DTYPE_F32, n, 0, v);
	free(v);
}

static void add_layer(synth_model *sm, int il)
{
	const synth_config *c = &sm->cfg;
	const int64_t q_dim = (int64_t)c->n_head * c->head_dim, kv_dim = (int64_t)c->n_head_kv * c->head_dim;
	char name[NAME_MAX_LEN];

#define LAYER_NAME(what) (snprintf(name, sizeof(name), "blk.%d." what ".weight", il), name)
	if (!c->no_pre_norms)
		add_norm(sm, LAYER_NAME("attn_norm"), c->n_embd);
	if (c->fused_qkv) {
		add_matrix(sm, LAYER_NAME("attn_qkv"), c->n_embd, q_dim + 2 * kv_dim);
	} else {
		add_matrix(sm, LAYER_NAME("attn_q"), c->n_embd, q_dim);
		add_matrix(sm, LAYER_NAME("attn_k"), c->n_embd, kv_dim);
		add_matrix(sm, LAYER_NAME("attn_v"), c->n_embd, kv_dim);
	}
	if (c->qkv_bias) {
#define BIAS_NAME(what) (snprintf(name, sizeof(name), "blk.%d." what ".bias", il), name)
		add_bias(sm, BIAS_NAME("attn_q"), q_dim);
		add_bias(sm, BIAS_NAME("attn_k"), kv_dim);
		add_bias(sm, BIAS_NAME("attn_v"), kv_dim);
#undef BIAS_NAME
	}
	add_matrix(sm, LAYER_NAME("attn_output"), q_dim, c->n_embd);
	if (c->o_bias) {
		snprintf(name, sizeof(name), "blk.%d.attn_output.bias", il);
		add_bias(sm, name, c->n_embd);
	}
	if (c->sinks)
		add_values(sm, LAYER_NAME("attn_sinks"), c->n_head, 1.0);
	if (c->qk_norm != 0) {
		add_norm(sm, LAYER_NAME("attn_q_norm"), c->qk_norm == 1 ? c->head_dim : q_dim);
		add_norm(sm, LAYER_NAME("attn_k_norm"), c->qk_norm == 1 ? c->head_dim : kv_dim);
	}
	if (!c->no_pre_norms && !c->parallel)
		add_norm(sm, LAYER_NAME("ffn_norm"), c->n_embd);
	const bool moe = c->n_expert > 0 && il >= c->n_dense_layers;
	const int ff = c->n_ff_expert > 0 ? c->n_ff_expert : c->n_ff;
	if (moe) {
		add_router(sm, LAYER_NAME("ffn_gate_inp"), c->n_embd, c->n_expert);
		if (c->selection_bias) {
			snprintf(name, sizeof(name), "blk.%d.exp_probs_b.bias", il);
			add_values(sm, name, c->n_expert, 0.3);
		}
		add_experts(sm, LAYER_NAME("ffn_gate_exps"), c->n_embd, ff, c->n_expert);
		add_experts(sm, LAYER_NAME("ffn_up_exps"), c->n_embd, ff, c->n_expert);
		add_experts(sm, LAYER_NAME("ffn_down_exps"), ff, c->n_embd, c->n_expert);
		if (c->expert_biases) {
#define EXPERT_BIAS(what) (snprintf(name, sizeof(name), "blk.%d." what ".bias", il), name)
			add_values(sm, EXPERT_BIAS("ffn_gate_inp"), c->n_expert, 0.5);
			add_table(sm, EXPERT_BIAS("ffn_gate_exps"), ff, c->n_expert);
			add_table(sm, EXPERT_BIAS("ffn_up_exps"), ff, c->n_expert);
			add_table(sm, EXPERT_BIAS("ffn_down_exps"), c->n_embd, c->n_expert);
#undef EXPERT_BIAS
		}
	}
	const int64_t shared = c->n_ff_shared > 0 ? c->n_ff_shared : (int64_t)ff * c->n_shared_experts;
	if (moe && shared > 0) {
		if (c->n_ff_shared > 0)
			add_bias(sm, LAYER_NAME("ffn_gate_inp_shexp"), c->n_embd);
		add_matrix(sm, LAYER_NAME("ffn_gate_shexp"), c->n_embd, shared);
		add_matrix(sm, LAYER_NAME("ffn_up_shexp"), c->n_embd, shared);
		add_matrix(sm, LAYER_NAME("ffn_down_shexp"), shared, c->n_embd);
	}
	if (!moe && c->fused_gate_up) {
		add_matrix(sm, LAYER_NAME("ffn_up"), c->n_embd, 2 * c->n_ff);
		add_matrix(sm, LAYER_NAME("ffn_down"), c->n_ff, c->n_embd);
	} else if (!moe) {
		add_matrix(sm, LAYER_NAME("ffn_gate"), c->n_embd, c->n_ff);
		add_matrix(sm, LAYER_NAME("ffn_up"), c->n_embd, c->n_ff);
		add_matrix(sm, LAYER_NAME("ffn_down"), c->n_ff, c->n_embd);
	}
	if (c->post_norms) {
		add_norm(sm, LAYER_NAME("post_attention_norm"), c->n_embd);
		add_norm(sm, LAYER_NAME("post_ffw_norm"), c->n_embd);
	}
#undef LAYER_NAME
}

static void add_tensors(synth_model *sm)
{
	const synth_config *c = &sm->cfg;

	add_matrix(sm, "token_embd.weight", c->n_embd, c->n_vocab);
	for (int il = 0; il < c->n_layer; il++)
		add_layer(sm, il);
	add_norm(sm, "output_norm.weight", c->n_embd);
	if (!c->tied)
		add_matrix(sm, "output.weight", c->n_embd, c->n_vocab);
	const struct {
		float value;
		const char *name;
	} factors[] = {{c->rope_freq_factor, "rope_freqs.weight"},
		       {c->rope_factor_long, "rope_factors_long.weight"},
		       {c->rope_factor_short, "rope_factors_short.weight"}};
	for (int k = 0; k < 3; k++) {
		if (factors[k].value == 0 && (k > 0 || c->rope_freqs == NULL))
			continue;
		float *v = xmalloc((size_t)c->n_rot / 2 * sizeof(float));
		for (int i = 0; i < c->n_rot / 2; i++)
			v[i] = k == 0 && c->rope_freqs != NULL ? c->rope_freqs[i] : factors[k].value;
		add_tensor(sm, factors[k].name, LOOM_DTYPE_F32, c->n_rot / 2, 0, v);
		free(v);
	}
}

/* ---- metadata ------------------------------------------------------------ */

static bool keep_key(const synth_model *sm, const char *key)
{
	return !same(key, sm->faults.omit_key);
}

/* Writes a numeric key as a string, if the faults ask for that; true if
 * they did (or asked to leave the key out). */
static bool diverted(synth_model *sm, const char *key, const char *text)
{
	if (!keep_key(sm, key))
		return true;
	if (!same(key, sm->faults.string_key))
		return false;
	gguf_writer_add_string(sm->w, key, text);
	return true;
}

static void put_u32(synth_model *sm, const char *key, uint32_t v)
{
	char text[16];

	snprintf(text, sizeof(text), "%u", v);
	if (diverted(sm, key, text))
		return;
	gguf_writer_add_u32(sm->w, key, same(key, sm->faults.set_key) ? sm->faults.set_value : v);
}

static void put_f32(synth_model *sm, const char *key, float v)
{
	char text[32];

	snprintf(text, sizeof(text), "%g", v);
	if (!diverted(sm, key, text))
		gguf_writer_add_f32(sm->w, key, v);
}

/* "{arch}.<what>" */
static const char *arch_key(const synth_model *sm, char *buf, size_t size, const char *what)
{
	snprintf(buf, size, "%s.%s", sm->faults.arch != NULL ? sm->faults.arch : "llama", what);
	return buf;
}

static void add_hparams(synth_model *sm)
{
	const synth_config *c = &sm->cfg;
	char k[128];

	if (keep_key(sm, "general.architecture"))
		gguf_writer_add_string(sm->w, "general.architecture",
				       sm->faults.arch != NULL ? sm->faults.arch : "llama");
	if (keep_key(sm, "general.name"))
		gguf_writer_add_string(sm->w, "general.name", "synthetic");
	put_u32(sm, arch_key(sm, k, sizeof(k), "context_length"), (uint32_t)c->n_ctx);
	put_u32(sm, arch_key(sm, k, sizeof(k), "embedding_length"), (uint32_t)c->n_embd);
	put_u32(sm, arch_key(sm, k, sizeof(k), "block_count"), (uint32_t)c->n_layer);
	put_u32(sm, arch_key(sm, k, sizeof(k), "feed_forward_length"), (uint32_t)c->n_ff);
	put_u32(sm, arch_key(sm, k, sizeof(k), "attention.head_count"), (uint32_t)c->n_head);
	put_u32(sm, arch_key(sm, k, sizeof(k), "attention.head_count_kv"), (uint32_t)c->n_head_kv);
	put_u32(sm, arch_key(sm, k, sizeof(k), "attention.key_length"), (uint32_t)c->head_dim);
	put_u32(sm, arch_key(sm, k, sizeof(k), "attention.value_length"), (uint32_t)c->head_dim);
	put_u32(sm, arch_key(sm, k, sizeof(k), "rope.dimension_count"), (uint32_t)c->n_rot);
	put_f32(sm, arch_key(sm, k, sizeof(k), c->layer_norm ? "attention.layer_norm_epsilon" : "attention.layer_norm_rms_epsilon"),
		c->norm_eps);
	put_f32(sm, arch_key(sm, k, sizeof(k), "rope.freq_base"), c->rope_theta);
	if (c->rope_scaling != NULL) {
		gguf_writer_add_string(sm->w, arch_key(sm, k, sizeof(k), "rope.scaling.type"), c->rope_scaling);
		put_f32(sm, arch_key(sm, k, sizeof(k), "rope.scaling.factor"), c->rope_scaling_factor);
	}
	if (c->rope_attn_factor != 0.0f)
		put_f32(sm, arch_key(sm, k, sizeof(k), "rope.scaling.attn_factor"), c->rope_attn_factor);
	const struct {
		float v;
		const char *key;
	} mults[] = {{c->embedding_mult, "embedding_scale"}, {c->residual_mult, "residual_scale"},
		     {c->attention_mult, "attention.scale"}, {c->logit_scale, "logit_scale"},
		     {c->attention_scale_base, "attention.query_pre_attn_scalar"}};
	for (int i = 0; i < 5; i++)
		if (mults[i].v != 0.0f)
			put_f32(sm, arch_key(sm, k, sizeof(k), mults[i].key), mults[i].v);
	if (c->attn_softcap != 0.0f)
		put_f32(sm, arch_key(sm, k, sizeof(k), "attn_logit_softcapping"), c->attn_softcap);
	if (c->final_softcap != 0.0f)
		put_f32(sm, arch_key(sm, k, sizeof(k), "final_logit_softcapping"), c->final_softcap);
	if (c->sliding_window != 0)
		put_u32(sm, arch_key(sm, k, sizeof(k), "attention.sliding_window"), (uint32_t)c->sliding_window);
	if (c->window_layers != NULL)
		gguf_writer_add_array(sm->w, arch_key(sm, k, sizeof(k), "attention.sliding_window_pattern"), LOOM_META_U32,
				      c->window_layers, (uint64_t)c->n_window_layers);
	if (c->n_expert > 0) {
		put_u32(sm, arch_key(sm, k, sizeof(k), "expert_count"), (uint32_t)c->n_expert);
		put_u32(sm, arch_key(sm, k, sizeof(k), "expert_used_count"), (uint32_t)c->n_expert_used);
	}
	if (c->n_ff_expert > 0)
		put_u32(sm, arch_key(sm, k, sizeof(k), "expert_feed_forward_length"), (uint32_t)c->n_ff_expert);
	if (c->n_ff_shared > 0)
		put_u32(sm, arch_key(sm, k, sizeof(k), "expert_shared_feed_forward_length"), (uint32_t)c->n_ff_shared);
	if (c->n_dense_layers > 0)
		put_u32(sm, arch_key(sm, k, sizeof(k), "leading_dense_block_count"), (uint32_t)c->n_dense_layers);
	if (c->n_shared_experts > 0)
		put_u32(sm, arch_key(sm, k, sizeof(k), "expert_shared_count"), (uint32_t)c->n_shared_experts);
	if (c->selection_bias) {
		put_u32(sm, arch_key(sm, k, sizeof(k), "expert_gating_func"), 2);
		gguf_writer_add_bool(sm->w, arch_key(sm, k, sizeof(k), "expert_weights_norm"), true);
		put_f32(sm, arch_key(sm, k, sizeof(k), "expert_weights_scale"), c->expert_weights_scale);
	}
}

/* The normal tokens; past this list they are "▁w<i>". SentencePiece builds
 * a word by merging adjacent pieces that are themselves tokens, so every
 * word comes with all its prefixes. */
static const char *const words[] = {
	SP, SP "t", SP "th", SP "the", SP "a", SP "an", SP "and", SP "c", SP "ca", SP "cat",
	SP "d", SP "do", SP "dog", SP "s", SP "su", SP "sun", SP "o", SP "on", SP "onc", SP "once",
	SP "w", SP "wa", SP "was", SP "h", SP "he", SP "i", SP "it", "e", "t", "a", "o", "s", "n",
	"ed", "ing", ".", ",", "!",
};
#define N_WORDS ((int)(sizeof(words) / sizeof(words[0])))

/* Token types as GGUF numbers them. */
enum { TYPE_NORMAL = 1, TYPE_UNKNOWN = 2, TYPE_CONTROL = 3, TYPE_BYTE = 6 };

#define TOKEN_TEXT_MAX 32

/* Token i's text and GGUF token type. */
static int32_t token_entry(int i, char text[TOKEN_TEXT_MAX])
{
	static const char *const specials[SYNTH_TOKEN_BYTE0] = {"<unk>", "<s>", "</s>"};
	int k = i - SYNTH_TOKEN_BYTE0 - 256; /* index among the normal tokens */

	if (i < SYNTH_TOKEN_BYTE0) {
		snprintf(text, TOKEN_TEXT_MAX, "%s", specials[i]);
		return i == SYNTH_TOKEN_UNK ? TYPE_UNKNOWN : TYPE_CONTROL;
	}
	if (k < 0) {
		snprintf(text, TOKEN_TEXT_MAX, "<0x%02X>", i - SYNTH_TOKEN_BYTE0);
		return TYPE_BYTE;
	}
	if (k < N_WORDS)
		snprintf(text, TOKEN_TEXT_MAX, "%s", words[k]);
	else
		snprintf(text, TOKEN_TEXT_MAX, SP "w%d", k);
	return TYPE_NORMAL;
}

static void add_vocab(synth_model *sm)
{
	const int n = sm->cfg.n_vocab + sm->faults.extra_tokens;
	char (*text)[TOKEN_TEXT_MAX] = xmalloc((size_t)n * TOKEN_TEXT_MAX);
	const char **texts = xmalloc((size_t)n * sizeof(char *));
	float *scores = xmalloc((size_t)n * sizeof(float));
	int32_t *types = xmalloc((size_t)n * sizeof(int32_t));

	int n_control = 0;
	while (sm->cfg.control_tokens != NULL && sm->cfg.control_tokens[n_control] != NULL)
		n_control++;
	const int first_control = sm->cfg.n_vocab - n_control;
	if (first_control < SYNTH_MIN_VOCAB - 1)
		die("control_tokens leave too few other tokens");
	for (int i = 0; i < n; i++) {
		types[i] = token_entry(i, text[i]);
		if (i >= first_control && i < sm->cfg.n_vocab) {
			snprintf(text[i], TOKEN_TEXT_MAX, "%s", sm->cfg.control_tokens[i - first_control]);
			types[i] = TYPE_CONTROL;
		}
		texts[i] = text[i];
		/* SentencePiece merges the highest-scoring pair first: earlier
		 * normal tokens win; specials and bytes score 0. */
		scores[i] = types[i] == TYPE_NORMAL ? -(float)(i - SYNTH_TOKEN_BYTE0 - 256) : 0.0f;
	}
	if (keep_key(sm, "tokenizer.ggml.model"))
		gguf_writer_add_string(sm->w, "tokenizer.ggml.model", "llama");
	if (keep_key(sm, "tokenizer.ggml.tokens"))
		gguf_writer_add_string_array(sm->w, "tokenizer.ggml.tokens", texts, (uint64_t)n);
	if (keep_key(sm, "tokenizer.ggml.scores"))
		gguf_writer_add_array(sm->w, "tokenizer.ggml.scores", LOOM_META_F32, scores, (uint64_t)n);
	if (keep_key(sm, "tokenizer.ggml.token_type"))
		gguf_writer_add_array(sm->w, "tokenizer.ggml.token_type", LOOM_META_I32, types, (uint64_t)n);
	put_u32(sm, "tokenizer.ggml.bos_token_id", SYNTH_TOKEN_BOS);
	put_u32(sm, "tokenizer.ggml.eos_token_id", SYNTH_TOKEN_EOS);
	put_u32(sm, "tokenizer.ggml.unknown_token_id", SYNTH_TOKEN_UNK);
	if (sm->cfg.chat_template != NULL)
		gguf_writer_add_string(sm->w, "tokenizer.chat_template", sm->cfg.chat_template);
	free(text);
	free(texts);
	free(scores);
	free(types);
}

/* ---- public ---------------------------------------------------------------- */

/* Fills the derived fields and rejects shapes that cannot be laid out. */
static void complete_config(synth_config *c)
{
	if (c->head_dim == 0 && c->n_head > 0)
		c->head_dim = c->n_embd / c->n_head;
	if (c->n_rot == 0)
		c->n_rot = c->head_dim;
	if (c->n_vocab < SYNTH_MIN_VOCAB || c->n_embd < 1 || c->n_layer < 1 || c->n_head < 1 ||
	    c->n_head_kv < 1 || c->head_dim < 1 || c->n_ff < 1 || c->n_ctx < 1)
		die("config: every size must be positive and n_vocab at least SYNTH_MIN_VOCAB");
	if (c->weight_type == LOOM_DTYPE_Q8_0 &&
	    (c->n_embd % 32 != 0 || c->n_ff % 32 != 0 || (c->n_head * c->head_dim) % 32 != 0))
		die("config: Q8_0 needs n_embd, n_ff and n_head * head_dim to be multiples of 32");
}

synth_model *synth_model_build(const synth_config *cfg, const synth_faults *faults)
{
	synth_model *sm = xmalloc(sizeof(*sm));

	memset(sm, 0, sizeof(*sm));
	sm->cfg = *cfg;
	complete_config(&sm->cfg);
	if (faults != NULL)
		sm->faults = *faults;
	sm->rng.state = sm->cfg.seed;
	sm->w = gguf_writer_create();
	add_hparams(sm);
	add_vocab(sm);
	add_tensors(sm);
	return sm;
}

void synth_model_free(synth_model *sm)
{
	if (sm == NULL)
		return;
	gguf_writer_free(sm->w);
	free(sm->tensors);
	free(sm);
}

const synth_config *synth_model_config(const synth_model *sm)
{
	return &sm->cfg;
}

bool synth_model_write(const synth_model *sm, const char *path)
{
	return gguf_writer_write(sm->w, path);
}

static const synth_tensor *find_tensor(const synth_model *sm, const char *name)
{
	for (int i = 0; i < sm->n_tensors; i++)
		if (strcmp(sm->tensors[i].name, name) == 0)
			return &sm->tensors[i];
	return NULL;
}

const void *synth_model_tensor(const synth_model *sm, const char *name, loom_dtype *type,
			       int64_t *ne0, int64_t *ne1)
{
	const synth_tensor *t = find_tensor(sm, name);
	if (t == NULL)
		return NULL;
	*type = t->type;
	*ne0 = t->ne0;
	*ne1 = t->ne1;
	return gguf_writer_tensor_data(sm->w, t->index);
}

float *synth_model_f32_tensor(synth_model *sm, const char *name, int64_t *ne0, int64_t *ne1)
{
	const synth_tensor *t = find_tensor(sm, name);
	if (t == NULL || t->type != LOOM_DTYPE_F32)
		return NULL;
	*ne0 = t->ne0;
	*ne1 = t->ne1;
	return gguf_writer_tensor_data(sm->w, t->index);
}
