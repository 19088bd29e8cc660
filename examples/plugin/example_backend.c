/*
 * example_backend.c - a complete loom backend plugin in one file, built out
 * of tree against an installed loom (see CMakeLists.txt beside it).
 *
 * It runs every op of a forward step in plain scalar C on f32 tensors, one
 * thread, holding its memory in the host heap. It is meant to be read: the
 * shape of a plugin (one exported entry point, a descriptor, a probe, a
 * vtable), how supports() turns away what the backend cannot do so that
 * the core refuses a model or context at load instead of failing at the
 * first token, and what each op computes. It refuses f16 and quantized
 * weights, an f16 KV cache and YaRN; loom's cpu backends do all of those.
 *
 * It includes loom/plugin_api.h and nothing else of loom's, and links
 * nothing of loom's: everything it needs from the core comes through the
 * loom_host table.
 */
#include <loom/plugin_api.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct example_backend {
	const loom_host *host;
} example_backend;

/* ------------------------------------------------------------------------ */
/* Tensors.                                                                 */

static bool is_f32(const loom_tensor *t)
{
	return t != NULL && t->dtype == LOOM_DTYPE_F32 && t->layout == 0 && t->nb[0] == sizeof(float);
}

static bool is_i32_vector(const loom_tensor *t, int64_t n)
{
	return t != NULL && t->dtype == LOOM_DTYPE_I32 && t->nb[0] == sizeof(int32_t) && t->ne[0] == n &&
	       t->ne[1] == 1 && t->ne[2] == 1 && t->ne[3] == 1;
}

/* Row r of an f32 tensor (the SDK's loom_tensor_row: views have strides of
 * their own). */
static float *row(const loom_tensor *t, int64_t r)
{
	return (float *)loom_tensor_row(t, r);
}

/* src1 of a binary op: the same shape as src0, or one row for every row. */
static bool broadcasts_to(const loom_tensor *b, const loom_tensor *a)
{
	return is_f32(b) && b->ne[0] == a->ne[0] && (loom_tensor_same_shape(a, b) || loom_tensor_nrows(b) == 1);
}

/* An optional per-column vector (a norm's weight or bias). */
static bool optional_vector(const loom_tensor *v, int64_t n)
{
	return v == NULL || (is_f32(v) && v->ne[0] == n && loom_tensor_nrows(v) == 1);
}

/* ------------------------------------------------------------------------ */
/* What this backend can run.                                               */

static bool rope_supported(const loom_node *node)
{
	const loom_tensor *x = node->src[0], *ff = node->src[2];
	int n_rot = node->ip[0], style = node->ip[1];
	if (!is_f32(x) || !loom_tensor_same_shape(x, node->dst) || x->ne[3] != 1 || !is_i32_vector(node->src[1], x->ne[2]))
		return false;
	if (n_rot <= 0 || n_rot % 2 != 0 || n_rot > x->ne[0])
		return false;
	if (ff != NULL && !optional_vector(ff, n_rot / 2))
		return false;
	/* YaRN (fp[2] > 0) is not implemented here. */
	return (style == LOOM_ROPE_NORMAL || style == LOOM_ROPE_NEOX) && node->fp[2] <= 0;
}

static bool attention_supported(const loom_node *node)
{
	const loom_tensor *q = node->src[0], *k = node->src[1], *v = node->src[2], *mask = node->src[3];
	int n_head = node->ip[0], n_head_kv = node->ip[1];
	if (!is_f32(q) || !is_f32(k) || !is_f32(v) || !loom_tensor_same_shape(k, v) || q->ne[1] != n_head)
		return false;
	if (n_head_kv <= 0 || n_head % n_head_kv != 0 || k->ne[0] != q->ne[0] * n_head_kv)
		return false;
	if (mask != NULL && (!is_f32(mask) || mask->ne[0] != k->ne[1] || mask->ne[1] != q->ne[2]))
		return false;
	if (node->src[4] != NULL && (!is_f32(node->src[4]) || node->src[4]->ne[0] != n_head))
		return false;
	if (!(node->fp[1] >= 0.0f))
		return false;
	return node->dst->ne[0] == q->ne[0] * n_head && node->dst->ne[1] == q->ne[2];
}

static bool example_supports(void *backend, const loom_node *node)
{
	(void)backend;
	const loom_tensor *a = node->src[0], *b = node->src[1], *y = node->dst;
	if (!is_f32(y))
		return false;
	switch (node->op) {
	case LOOM_OP_GET_ROWS:
		return is_f32(a) && is_i32_vector(b, loom_tensor_nrows(y)) && a->ne[0] == y->ne[0];
	case LOOM_OP_MATMUL:
		return is_f32(a) && is_f32(b) && a->ne[0] == b->ne[0] && y->ne[0] == a->ne[1] &&
		       loom_tensor_nrows(y) == loom_tensor_nrows(b) && loom_tensor_nrows(a) == a->ne[1];
	case LOOM_OP_RMS_NORM:
		return is_f32(a) && loom_tensor_same_shape(a, y) && optional_vector(b, a->ne[0]);
	case LOOM_OP_LAYER_NORM:
		return is_f32(a) && loom_tensor_same_shape(a, y) && optional_vector(b, a->ne[0]) &&
		       optional_vector(node->src[2], a->ne[0]);
	case LOOM_OP_ADD:
	case LOOM_OP_MUL:
		return is_f32(a) && loom_tensor_same_shape(a, y) && broadcasts_to(b, a);
	case LOOM_OP_SWIGLU:
		return is_f32(a) && is_f32(b) && loom_tensor_same_shape(a, y) && loom_tensor_same_shape(a, b);
	case LOOM_OP_SCALE:
		return is_f32(a) && loom_tensor_same_shape(a, y);
	case LOOM_OP_GELU:
		return is_f32(a) && loom_tensor_same_shape(a, y) && (node->ip[0] == LOOM_GELU_TANH || node->ip[0] == LOOM_GELU_ERF);
	case LOOM_OP_SOFTCAP:
		return is_f32(a) && loom_tensor_same_shape(a, y) && node->fp[0] > 0.0f && isfinite(node->fp[0]);
	case LOOM_OP_SIGMOID:
		return is_f32(a) && loom_tensor_same_shape(a, y);
	case LOOM_OP_ROPE:
		return rope_supported(node);
	case LOOM_OP_KV_STORE:
		return is_f32(a) && is_i32_vector(b, loom_tensor_nrows(a)) && a->ne[0] == y->ne[0];
	case LOOM_OP_ATTENTION:
		return attention_supported(node);
	default:
		/* CONVERT and anything newer than this file. */
		return false;
	}
}

/* ------------------------------------------------------------------------ */
/* The ops.                                                                 */

/* GET_ROWS gathers (dst row r = table row index[r]); KV_STORE scatters
 * (cache row index[t] = src row t). Either way an index outside the
 * indexed tensor is the caller's error, reported rather than followed. */
static loom_status copy_rows(const example_backend *be, const loom_node *node, bool scatter)
{
	const loom_tensor *src = node->src[0], *dst = node->dst, *indexed = scatter ? dst : src;
	const int32_t *index = node->src[1]->data;
	for (int64_t r = 0; r < node->src[1]->ne[0]; r++) {
		if (index[r] < 0 || index[r] >= loom_tensor_nrows(indexed)) {
			be->host->set_error("example-f32: %s index %d outside %s's %lld rows", loom_op_name(node->op),
					    index[r], indexed->name != NULL ? indexed->name : "the tensor",
					    (long long)loom_tensor_nrows(indexed));
			return LOOM_ERR_INVALID_ARGUMENT;
		}
		memcpy(scatter ? row(dst, index[r]) : row(dst, r), scatter ? row(src, r) : row(src, index[r]),
		       (size_t)src->ne[0] * sizeof(float));
	}
	return LOOM_OK;
}

static void matmul(const loom_node *node)
{
	const loom_tensor *w = node->src[0], *x = node->src[1], *y = node->dst;
	for (int64_t t = 0; t < loom_tensor_nrows(x); t++) {
		const float *xt = row(x, t);
		float *yt = row(y, t);
		for (int64_t o = 0; o < w->ne[1]; o++) {
			const float *wo = row(w, o);
			float sum = 0;
			for (int64_t i = 0; i < w->ne[0]; i++)
				sum += wo[i] * xt[i];
			yt[o] = sum;
		}
	}
}

/* RMS_NORM and LAYER_NORM: the row centred (layer norm only), divided by
 * its root mean square, times the weight, plus the bias. */
static void norm(const loom_node *node, bool centre)
{
	const loom_tensor *x = node->src[0], *y = node->dst;
	const float *weight = node->src[1] != NULL ? node->src[1]->data : NULL;
	const float *bias = centre && node->src[2] != NULL ? node->src[2]->data : NULL;
	int64_t n = x->ne[0];
	for (int64_t r = 0; r < loom_tensor_nrows(x); r++) {
		const float *xr = row(x, r);
		float *yr = row(y, r);
		double mean = 0, squares = 0;
		for (int64_t i = 0; centre && i < n; i++)
			mean += xr[i];
		mean /= (double)n;
		for (int64_t i = 0; i < n; i++)
			squares += (xr[i] - mean) * (xr[i] - mean);
		float inv = 1.0f / sqrtf((float)(squares / (double)n) + node->fp[0]);
		for (int64_t i = 0; i < n; i++) {
			float v = (float)(xr[i] - mean) * inv;
			v = weight != NULL ? v * weight[i] : v;
			yr[i] = bias != NULL ? v + bias[i] : v;
		}
	}
}

static float silu(float x)
{
	return x / (1.0f + expf(-x));
}

static float gelu(float x, int kind)
{
	if (kind == LOOM_GELU_ERF)
		return 0.5f * x * (1.0f + erff(x * 0.70710678f));
	return 0.5f * x * (1.0f + tanhf(0.79788456f * (x + 0.044715f * x * x * x)));
}

/* ADD, MUL, SWIGLU, SCALE and GELU: one value out of one or two in. */
static void elementwise(const loom_node *node)
{
	const loom_tensor *a = node->src[0], *b = node->src[1], *y = node->dst;
	for (int64_t r = 0; r < loom_tensor_nrows(a); r++) {
		const float *ar = row(a, r), *br = b != NULL ? row(b, loom_tensor_nrows(b) == 1 ? 0 : r) : NULL;
		float *yr = row(y, r);
		for (int64_t i = 0; i < a->ne[0]; i++) {
			switch (node->op) {
			case LOOM_OP_ADD: yr[i] = ar[i] + br[i]; break;
			case LOOM_OP_MUL: yr[i] = ar[i] * br[i]; break;
			case LOOM_OP_SWIGLU: yr[i] = silu(ar[i]) * br[i]; break;
			case LOOM_OP_SCALE: yr[i] = ar[i] * node->fp[0]; break;
			case LOOM_OP_SOFTCAP: yr[i] = node->fp[0] * tanhf(ar[i] * (1.0f / node->fp[0])); break;
			case LOOM_OP_SIGMOID: yr[i] = 1.0f / (1.0f + expf(-ar[i])); break;
			default: yr[i] = gelu(ar[i], node->ip[0]); break;
			}
		}
	}
}

/* Pair i of a head rotates by pos * scale * base^(-2i/n_rot) / ff[i]; the
 * power is a running product, as the reference computes it. NORMAL pairs
 * are adjacent, NEOX pairs are half a rotation apart. */
static void rope(const loom_node *node)
{
	const loom_tensor *x = node->src[0], *y = node->dst;
	const int32_t *pos = node->src[1]->data;
	const float *ff = node->src[2] != NULL ? node->src[2]->data : NULL;
	int n_rot = node->ip[0], neox = node->ip[1] == LOOM_ROPE_NEOX;
	int step = neox ? 1 : 2, off = neox ? n_rot / 2 : 1;
	float theta_scale = powf(node->fp[0], -2.0f / (float)n_rot);
	float attn_factor = node->fp[3] != 0.0f ? node->fp[3] : 1.0f;

	for (int64_t r = 0; r < loom_tensor_nrows(x); r++) {
		const float *xr = row(x, r);
		float *yr = row(y, r);
		float theta = (float)pos[r / x->ne[1]];
		for (int i = 0; i < n_rot / 2; i++, theta *= theta_scale) {
			float angle = node->fp[1] * (ff != NULL ? theta / ff[i] : theta);
			float c = cosf(angle) * attn_factor, s = sinf(angle) * attn_factor;
			float x0 = xr[i * step], x1 = xr[i * step + off];
			yr[i * step] = x0 * c - x1 * s;
			yr[i * step + off] = x0 * s + x1 * c;
		}
		for (int64_t d = n_rot; d < x->ne[0] && yr != xr; d++)
			yr[d] = xr[d];
	}
}

/* softmax(q.k * scale + mask) . v for every token and query head, the
 * scores soft-capped first when fp[1] > 0, the head's sink (src[4]) in the
 * denominator. Query head h reads kv head h / (n_head / n_head_kv). */
static loom_status attention(const example_backend *be, const loom_node *node)
{
	const loom_tensor *q = node->src[0], *k = node->src[1], *v = node->src[2], *mask = node->src[3];
	const float *sinks = node->src[4] != NULL ? node->src[4]->data : NULL;
	const float cap = node->fp[1];
	int64_t head_dim = q->ne[0], n_head = node->ip[0], n_kv = k->ne[1];
	int64_t group = n_head / node->ip[1];
	float *p = malloc((size_t)(n_kv > 0 ? n_kv : 1) * sizeof(float));
	if (p == NULL) {
		be->host->set_error("example-f32: out of memory for %lld attention scores", (long long)n_kv);
		return LOOM_ERR_NO_MEMORY;
	}
	for (int64_t t = 0; t < q->ne[2]; t++) {
		const float *m = mask != NULL ? row(mask, t) : NULL;
		float *out = row(node->dst, t);
		for (int64_t h = 0; h < n_head; h++) {
			const float *qh = row(q, t * n_head + h);
			int64_t kv_offset = (h / group) * head_dim;
			float max = -INFINITY;
			for (int64_t c = 0; c < n_kv; c++) {
				const float *kc = row(k, c) + kv_offset;
				float dot = 0;
				for (int64_t d = 0; d < head_dim; d++)
					dot += qh[d] * kc[d];
				float score = dot * node->fp[0];
				if (cap > 0.0f)
					score = cap * tanhf(score * (1.0f / cap));
				p[c] = score + (m != NULL ? m[c] : 0.0f);
				max = p[c] > max ? p[c] : max;
			}
			bool none = max == -INFINITY;
			if (sinks != NULL && sinks[h] > max)
				max = sinks[h];
			double sum = none || sinks == NULL ? 0.0 : expf(sinks[h] - max);
			for (int64_t c = 0; c < n_kv; c++) {
				p[c] = none ? 0.0f : expf(p[c] - max);
				sum += p[c];
			}
			float *oh = out + h * head_dim;
			memset(oh, 0, (size_t)head_dim * sizeof(float));
			for (int64_t c = 0; c < n_kv && !none; c++) {
				const float *vc = row(v, c) + kv_offset;
				float weight = (float)(p[c] / sum);
				for (int64_t d = 0; d < head_dim; d++)
					oh[d] += weight * vc[d];
			}
		}
	}
	free(p);
	return LOOM_OK;
}

static loom_status example_compute(void *backend, const loom_graph *graph)
{
	const example_backend *be = backend;
	for (int i = 0; i < graph->n_nodes; i++) {
		const loom_node *node = &graph->nodes[i];
		loom_status status = LOOM_OK;
		switch (node->op) {
		case LOOM_OP_GET_ROWS: status = copy_rows(be, node, false); break;
		case LOOM_OP_MATMUL: matmul(node); break;
		case LOOM_OP_RMS_NORM: norm(node, false); break;
		case LOOM_OP_LAYER_NORM: norm(node, true); break;
		case LOOM_OP_ROPE: rope(node); break;
		case LOOM_OP_KV_STORE: status = copy_rows(be, node, true); break;
		case LOOM_OP_ATTENTION: status = attention(be, node); break;
		case LOOM_OP_ADD:
		case LOOM_OP_MUL:
		case LOOM_OP_SWIGLU:
		case LOOM_OP_SCALE:
		case LOOM_OP_GELU:
		case LOOM_OP_SOFTCAP:
		case LOOM_OP_SIGMOID: elementwise(node); break;
		default:
			be->host->set_error("example-f32: op %d is not supported", (int)node->op);
			return LOOM_ERR_UNSUPPORTED;
		}
		if (status != LOOM_OK)
			return status;
	}
	return LOOM_OK;
}

/* ------------------------------------------------------------------------ */
/* Instances and memory: the host heap, and model files used in place.      */

static void *example_init(const loom_host *host, const loom_backend_options *opts)
{
	(void)opts;
	example_backend *be = calloc(1, sizeof(*be));
	if (be == NULL) {
		host->set_error("example-f32: out of memory");
		return NULL;
	}
	be->host = host;
	return be;
}

static void example_free(void *backend)
{
	free(backend);
}

static loom_status example_buffer_alloc(void *backend, size_t size, loom_buffer *out)
{
	const example_backend *be = backend;
	out->base = calloc(1, size > 0 ? size : 1);
	if (out->base == NULL) {
		be->host->set_error("example-f32: cannot allocate %zu bytes", size);
		return LOOM_ERR_NO_MEMORY;
	}
	out->handle = out->base;
	out->size = size;
	return LOOM_OK;
}

/* A buffer made from host memory has no handle: there is nothing to free. */
static void example_buffer_free(void *backend, loom_buffer *buf)
{
	(void)backend;
	free(buf->handle);
	buf->handle = buf->base = NULL;
}

static loom_status example_buffer_from_host(void *backend, void *host_ptr, size_t size, loom_buffer *out)
{
	(void)backend;
	*out = (loom_buffer){.handle = NULL, .base = host_ptr, .size = size};
	return LOOM_OK;
}

static loom_status example_upload(void *backend, loom_buffer *buf, size_t offset, const void *src, size_t size)
{
	(void)backend;
	memcpy((char *)buf->base + offset, src, size);
	return LOOM_OK;
}

static loom_status example_download(void *backend, const loom_buffer *buf, size_t offset, void *dst, size_t size)
{
	(void)backend;
	memcpy(dst, (const char *)buf->base + offset, size);
	return LOOM_OK;
}

/* ------------------------------------------------------------------------ */
/* What the core finds when it opens the plugin.                            */

static const loom_backend_vtable example_vtable = {
	.struct_size = sizeof(loom_backend_vtable),
	.init = example_init,
	.free = example_free,
	.buffer_alloc = example_buffer_alloc,
	.buffer_free = example_buffer_free,
	.buffer_upload = example_upload,
	.buffer_download = example_download,
	.buffer_from_host = example_buffer_from_host,
	.supports = example_supports,
	.compute = example_compute,
};

/* Any machine can run it, but any real backend should win: the lowest
 * score that is not 0. */
static int example_probe(const loom_probe_args *args, char *why, size_t why_size)
{
	(void)args;
	(void)why;
	(void)why_size;
	return 1;
}

static const loom_plugin_desc example_descriptor = {
	.abi_version = LOOM_PLUGIN_ABI_VERSION,
	.kind = LOOM_PLUGIN_BACKEND,
	.name = "example-f32",
	.version = "1.0.0",
	.description = "example backend: scalar f32, one thread (examples/plugin)",
	.probe = example_probe,
	.vtable = &example_vtable,
};

LOOM_PLUGIN_DEFINE(example_descriptor)
