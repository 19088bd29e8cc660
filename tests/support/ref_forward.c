/* ref_forward.c - a plain double-precision llama forward pass (see
 * ref_forward.h). Read top to bottom, like llama2.c's run.c. */
#include "ref_forward.h"

#include "cpu_ref.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A weight matrix: n_out rows of n_in, and the type it was stored in, which
 * decides how its input is rounded. */
typedef struct ref_matrix {
	int n_in, n_out;
	loom_dtype type;
	double *w; /* [n_out][n_in] */
} ref_matrix;

typedef struct ref_layer {
	double *attn_norm;      /* [n_embd] */
	ref_matrix wq;          /* n_embd -> n_head * head_dim */
	ref_matrix wk, wv;      /* n_embd -> n_head_kv * head_dim */
	ref_matrix wo;          /* n_head * head_dim -> n_embd */
	double *ffn_norm;       /* [n_embd] */
	ref_matrix w_gate, w_up; /* n_embd -> n_ff */
	ref_matrix w_down;      /* n_ff -> n_embd */
	double *attn_post_norm, *ffn_post_norm; /* [n_embd], with post_norms; else NULL */
} ref_layer;

struct ref_model {
	synth_config c;
	ref_matrix token_embd;  /* n_embd -> n_vocab: row t is token t's embedding */
	ref_layer *layers;
	double *output_norm;    /* [n_embd] */
	ref_matrix output;      /* n_embd -> n_vocab; a copy of token_embd when tied */
};

static _Noreturn void die(const char *what, const char *name)
{
	fprintf(stderr, "ref_forward: %s: %s\n", name, what);
	abort();
}

static void *xcalloc(size_t n, size_t size)
{
	void *p = calloc(n > 0 ? n : 1, size);
	if (p == NULL)
		die("out of memory", "");
	return p;
}

/* ---- loading: every stored value, dequantized in double ------------------ */

static double stored_value(loom_dtype type, const void *data, int64_t i)
{
	const uint16_t *h = data;

	switch (type) {
	case LOOM_DTYPE_F32:
		return ((const float *)data)[i];
	case LOOM_DTYPE_F16:
		return ref_fp16_to_f32(h[i]);
	case LOOM_DTYPE_BF16:
		return ref_bf16_to_f32(h[i]);
	case LOOM_DTYPE_Q8_0:
		return ref_q8_0_value(data, i);
	default:
		die("unsupported weight type", loom_dtype_name(type));
	}
}

/* Tensor `name`, which must have ne0 x ne1 elements (ne1 1 for a vector). */
static double *load(const synth_model *sm, const char *name, int64_t ne0, int64_t ne1, loom_dtype *type)
{
	int64_t got0, got1;
	const void *data = synth_model_tensor(sm, name, type, &got0, &got1);

	if (data == NULL)
		die("missing", name);
	if (got0 != ne0 || got1 != ne1)
		die("unexpected shape", name);
	double *out = xcalloc((size_t)(ne0 * ne1), sizeof(double));
	for (int64_t i = 0; i < ne0 * ne1; i++)
		out[i] = stored_value(*type, data, i);
	return out;
}

static double *load_vector(const synth_model *sm, const char *name, int64_t n)
{
	loom_dtype type;
	return load(sm, name, n, 1, &type);
}

static ref_matrix load_matrix(const synth_model *sm, const char *name, int n_in, int n_out)
{
	ref_matrix m = {.n_in = n_in, .n_out = n_out};
	m.w = load(sm, name, n_in, n_out, &m.type);
	return m;
}

static void load_layer(const synth_model *sm, const synth_config *c, int il, ref_layer *l)
{
	const int q_dim = c->n_head * c->head_dim, kv_dim = c->n_head_kv * c->head_dim;
	char name[64];

#define LAYER_NAME(what) (snprintf(name, sizeof(name), "blk.%d." what ".weight", il), name)
	l->attn_norm = load_vector(sm, LAYER_NAME("attn_norm"), c->n_embd);
	l->wq = load_matrix(sm, LAYER_NAME("attn_q"), c->n_embd, q_dim);
	l->wk = load_matrix(sm, LAYER_NAME("attn_k"), c->n_embd, kv_dim);
	l->wv = load_matrix(sm, LAYER_NAME("attn_v"), c->n_embd, kv_dim);
	l->wo = load_matrix(sm, LAYER_NAME("attn_output"), q_dim, c->n_embd);
	l->ffn_norm = load_vector(sm, LAYER_NAME("ffn_norm"), c->n_embd);
	l->w_gate = load_matrix(sm, LAYER_NAME("ffn_gate"), c->n_embd, c->n_ff);
	l->w_up = load_matrix(sm, LAYER_NAME("ffn_up"), c->n_embd, c->n_ff);
	l->w_down = load_matrix(sm, LAYER_NAME("ffn_down"), c->n_ff, c->n_embd);
	if (c->post_norms) {
		l->attn_post_norm = load_vector(sm, LAYER_NAME("post_attention_norm"), c->n_embd);
		l->ffn_post_norm = load_vector(sm, LAYER_NAME("post_ffw_norm"), c->n_embd);
	}
#undef LAYER_NAME
}

static ref_matrix copy_matrix(const ref_matrix *src)
{
	ref_matrix m = *src;
	size_t n = (size_t)m.n_in * (size_t)m.n_out;
	m.w = xcalloc(n, sizeof(double));
	memcpy(m.w, src->w, n * sizeof(double));
	return m;
}

ref_model *ref_model_create(const synth_model *sm)
{
	ref_model *m = xcalloc(1, sizeof(*m));
	const synth_config *c = synth_model_config(sm);

	m->c = *c;
	m->token_embd = load_matrix(sm, "token_embd.weight", c->n_embd, c->n_vocab);
	m->layers = xcalloc((size_t)c->n_layer, sizeof(ref_layer));
	for (int il = 0; il < c->n_layer; il++)
		load_layer(sm, c, il, &m->layers[il]);
	m->output_norm = load_vector(sm, "output_norm.weight", c->n_embd);
	if (c->tied)
		m->output = copy_matrix(&m->token_embd);
	else
		m->output = load_matrix(sm, "output.weight", c->n_embd, c->n_vocab);
	return m;
}

void ref_model_free(ref_model *m)
{
	if (m == NULL)
		return;
	for (int il = 0; il < m->c.n_layer; il++) {
		ref_layer *l = &m->layers[il];
		free(l->attn_norm);
		free(l->wq.w);
		free(l->wk.w);
		free(l->wv.w);
		free(l->wo.w);
		free(l->ffn_norm);
		free(l->w_gate.w);
		free(l->w_up.w);
		free(l->w_down.w);
		free(l->attn_post_norm);
		free(l->ffn_post_norm);
	}
	free(m->layers);
	free(m->token_embd.w);
	free(m->output_norm);
	free(m->output.w);
	free(m);
}

/* ---- the building blocks --------------------------------------------------- */

static void rmsnorm(double *out, const double *x, const double *weight, int n, double eps)
{
	double ss = 0.0;
	for (int i = 0; i < n; i++)
		ss += x[i] * x[i];
	double scale = 1.0 / sqrt(ss / n + eps);
	for (int i = 0; i < n; i++)
		out[i] = x[i] * scale * weight[i];
}

/* x rounded as loom rounds a matmul input for a weight of this type. */
static void round_input(loom_dtype type, const double *x, double *out, int n)
{
	switch (type) {
	case LOOM_DTYPE_F16:
		for (int i = 0; i < n; i++)
			out[i] = ref_round_fp16((float)x[i]);
		break;
	case LOOM_DTYPE_BF16:
		for (int i = 0; i < n; i++)
			out[i] = ref_round_bf16((float)x[i]);
		break;
	case LOOM_DTYPE_Q8_0: {
		float *xf = xcalloc((size_t)n, sizeof(float));
		uint8_t *blocks = xcalloc((size_t)n / 32, REF_Q8_0_BLOCK_BYTES);
		for (int i = 0; i < n; i++)
			xf[i] = (float)x[i];
		ref_quantize_q8_0(xf, blocks, n);
		for (int i = 0; i < n; i++)
			out[i] = ref_q8_0_value(blocks, i);
		free(xf);
		free(blocks);
		break;
	}
	default:
		memcpy(out, x, (size_t)n * sizeof(double));
		break;
	}
}

/* out = W x */
static void matmul(double *out, const ref_matrix *m, const double *x)
{
	double *xr = xcalloc((size_t)m->n_in, sizeof(double));

	round_input(m->type, x, xr, m->n_in);
	for (int o = 0; o < m->n_out; o++) {
		const double *row = m->w + (size_t)o * (size_t)m->n_in;
		double sum = 0.0;
		for (int i = 0; i < m->n_in; i++)
			sum += row[i] * xr[i];
		out[o] = sum;
	}
	free(xr);
}

/* Rotates the adjacent pairs (v[2i], v[2i+1]), i < n_rot/2, of each head by
 * pos * theta^(-2i/n_rot); dimensions past n_rot pass through. */
static void rope(double *v, int n_heads, int head_dim, int n_rot, int pos, double theta)
{
	for (int h = 0; h < n_heads; h++) {
		double *x = v + (size_t)h * (size_t)head_dim;
		for (int i = 0; i < n_rot / 2; i++) {
			double angle = pos * pow(theta, -2.0 * i / n_rot);
			double c = cos(angle), s = sin(angle);
			double x0 = x[2 * i], x1 = x[2 * i + 1];
			x[2 * i] = x0 * c - x1 * s;
			x[2 * i + 1] = x0 * s + x1 * c;
		}
	}
}

static double silu(double x)
{
	return x / (1.0 + exp(-x));
}

/* ---- the forward pass -------------------------------------------------------- */

/* Scratch for one position, plus the key/value cache of the sequence. */
typedef struct ref_state {
	double *x, *xb, *q, *att_out, *proj, *gate, *up, *scores;
	double *k_cache, *v_cache; /* [n_layer][n_tokens][kv_dim] */
} ref_state;

/* Granite's residual multiplier; 1 when the model has none. */
static double residual_mult(const synth_config *c)
{
	return c->residual_mult != 0.0f ? c->residual_mult : 1.0;
}

/* One query position attends to keys 0..pos of its kv head. */
static void attention(const synth_config *c, const ref_state *s, int il, int pos, int n_tokens)
{
	const int hd = c->head_dim, kv_dim = c->n_head_kv * hd, group = c->n_head / c->n_head_kv;
	const double *kc = s->k_cache + (size_t)il * n_tokens * kv_dim;
	const double *vc = s->v_cache + (size_t)il * n_tokens * kv_dim;

	for (int h = 0; h < c->n_head; h++) {
		const double *q = s->q + (size_t)h * hd;
		const int g = h / group;
		double max = -INFINITY, sum = 0.0;
		for (int j = 0; j <= pos; j++) {
			const double *k = kc + (size_t)j * kv_dim + (size_t)g * hd;
			double dot = 0.0;
			for (int d = 0; d < hd; d++)
				dot += q[d] * k[d];
			s->scores[j] = c->attention_mult != 0.0f	  ? dot * c->attention_mult
				       : c->attention_scale_base != 0.0f ? dot / sqrt((double)c->attention_scale_base)
									  : dot / sqrt((double)hd);
			max = fmax(max, s->scores[j]);
		}
		for (int j = 0; j <= pos; j++) {
			s->scores[j] = exp(s->scores[j] - max);
			sum += s->scores[j];
		}
		double *out = s->att_out + (size_t)h * hd;
		memset(out, 0, (size_t)hd * sizeof(double));
		for (int j = 0; j <= pos; j++) {
			const double *v = vc + (size_t)j * kv_dim + (size_t)g * hd;
			for (int d = 0; d < hd; d++)
				out[d] += s->scores[j] / sum * v[d];
		}
	}
}

/* x += attention(norm(x)), storing this position's keys and values. */
static void attention_block(const ref_model *m, const ref_state *s, int il, int pos, int n_tokens)
{
	const synth_config *c = &m->c;
	const ref_layer *l = &m->layers[il];
	const int kv_dim = c->n_head_kv * c->head_dim;
	double *k = s->k_cache + ((size_t)il * n_tokens + pos) * kv_dim;
	double *v = s->v_cache + ((size_t)il * n_tokens + pos) * kv_dim;

	rmsnorm(s->xb, s->x, l->attn_norm, c->n_embd, c->norm_eps);
	matmul(s->q, &l->wq, s->xb);
	matmul(k, &l->wk, s->xb);
	matmul(v, &l->wv, s->xb);
	rope(s->q, c->n_head, c->head_dim, c->n_rot, pos, c->rope_theta);
	rope(k, c->n_head_kv, c->head_dim, c->n_rot, pos, c->rope_theta);
	attention(c, s, il, pos, n_tokens);
	matmul(s->proj, &l->wo, s->att_out);
	if (l->attn_post_norm != NULL)
		rmsnorm(s->proj, s->proj, l->attn_post_norm, c->n_embd, c->norm_eps);
	for (int i = 0; i < c->n_embd; i++)
		s->x[i] += s->proj[i] * residual_mult(c);
}

/* x += w_down (silu(w_gate norm(x)) * w_up norm(x)) */
static void ffn_block(const ref_model *m, const ref_state *s, int il)
{
	const synth_config *c = &m->c;
	const ref_layer *l = &m->layers[il];

	rmsnorm(s->xb, s->x, l->ffn_norm, c->n_embd, c->norm_eps);
	matmul(s->gate, &l->w_gate, s->xb);
	matmul(s->up, &l->w_up, s->xb);
	for (int i = 0; i < c->n_ff; i++)
		s->gate[i] = silu(s->gate[i]) * s->up[i];
	matmul(s->proj, &l->w_down, s->gate);
	if (l->ffn_post_norm != NULL)
		rmsnorm(s->proj, s->proj, l->ffn_post_norm, c->n_embd, c->norm_eps);
	for (int i = 0; i < c->n_embd; i++)
		s->x[i] += s->proj[i] * residual_mult(c);
}

static void state_init(ref_state *s, const synth_config *c, int n_tokens)
{
	const size_t q_dim = (size_t)c->n_head * c->head_dim, kv_dim = (size_t)c->n_head_kv * c->head_dim;
	const size_t cache = (size_t)c->n_layer * (size_t)n_tokens * kv_dim;

	s->x = xcalloc((size_t)c->n_embd, sizeof(double));
	s->xb = xcalloc((size_t)c->n_embd, sizeof(double));
	s->q = xcalloc(q_dim, sizeof(double));
	s->att_out = xcalloc(q_dim, sizeof(double));
	s->proj = xcalloc((size_t)c->n_embd, sizeof(double));
	s->gate = xcalloc((size_t)c->n_ff, sizeof(double));
	s->up = xcalloc((size_t)c->n_ff, sizeof(double));
	s->scores = xcalloc((size_t)n_tokens, sizeof(double));
	s->k_cache = xcalloc(cache, sizeof(double));
	s->v_cache = xcalloc(cache, sizeof(double));
}

static void state_free(ref_state *s)
{
	free(s->x);
	free(s->xb);
	free(s->q);
	free(s->att_out);
	free(s->proj);
	free(s->gate);
	free(s->up);
	free(s->scores);
	free(s->k_cache);
	free(s->v_cache);
}

void ref_forward(const ref_model *m, const loom_token *tokens, int n, double *logits)
{
	const synth_config *c = &m->c;
	ref_state s;

	state_init(&s, c, n);
	for (int pos = 0; pos < n; pos++) {
		if (tokens[pos] < 0 || tokens[pos] >= c->n_vocab)
			die("token out of range", "ref_forward");
		/* The token's embedding starts the residual stream. */
		memcpy(s.x, m->token_embd.w + (size_t)tokens[pos] * c->n_embd, (size_t)c->n_embd * sizeof(double));
		for (int i = 0; c->embedding_mult != 0.0f && i < c->n_embd; i++)
			s.x[i] *= c->embedding_mult;
		for (int il = 0; il < c->n_layer; il++) {
			attention_block(m, &s, il, pos, n);
			ffn_block(m, &s, il);
		}
		rmsnorm(s.xb, s.x, m->output_norm, c->n_embd, c->norm_eps);
		matmul(logits + (size_t)pos * c->n_vocab, &m->output, s.xb);
		for (int v = 0; c->logit_scale != 0.0f && v < c->n_vocab; v++)
			logits[(size_t)pos * c->n_vocab + v] /= c->logit_scale;
	}
	state_free(&s);
}
