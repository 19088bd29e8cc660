/* model.c - loading a model: format plugin, contract, hyperparameters, weights. */
#include "model/model.h"

#include "convert/model_export.h"
#include "convert/quantize.h"
#include "model/meta.h"
#include "model/weight_layout.h"
#include "runtime/error.h"
#include "runtime/host.h"
#include "runtime/log.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define PROBE_HEAD_BYTES 4096

loom_model_params loom_model_default_params(void)
{
	loom_model_params p = {.vocab_only = false, .metadata_only = false, .quantize = NULL};
	return p;
}

/* ---- opening the file ------------------------------------------------- */

static const loom_plugin *choose_format(loom_runtime *rt, const char *path)
{
	unsigned char head[PROBE_HEAD_BYTES];
	ssize_t n = 0;
	int fd = open(path, O_RDONLY);
	if (fd >= 0) {
		n = read(fd, head, sizeof(head));
		close(fd);
	}
	loom_probe_args args = {
		.struct_size = sizeof(args),
		.host = loom_host_table(),
		.path = path,
		.head = head,
		.head_len = n > 0 ? (size_t)n : 0,
	};
	const loom_plugin *best = NULL;
	int best_score = 0;
	for (size_t i = 0; i < rt->registry.n_plugins; i++) {
		const loom_plugin *p = &rt->registry.plugins[i];
		if (p->kind != LOOM_PLUGIN_FORMAT || p->desc == NULL)
			continue;
		char why[256] = "";
		int score = p->desc->probe(&args, why, sizeof(why));
		loom_debug("format '%s' scores %d for %s%s%s", p->name, score, path, why[0] ? ": " : "", why);
		if (score > best_score) {
			best = p;
			best_score = score;
		}
	}
	return best;
}

static loom_status open_file(loom_model *m, const char *path)
{
	if (access(path, R_OK) != 0)
		return loom_error(LOOM_ERR_IO, "%s: %s", path, strerror(errno));
	m->format = choose_format(m->rt, path);
	if (m->format == NULL)
		return loom_error(LOOM_ERR_BAD_FORMAT, "%s: no format plugin recognises this file", path);
	const loom_format_vtable *vt = m->format->desc->vtable;
	loom_error_clear();
	m->file = m->opened = vt->open(loom_host_table(), path);
	if (m->file == NULL)
		return loom_error(LOOM_ERR_BAD_FORMAT, "%s", loom_last_error()[0] ? loom_last_error() : path);
	return LOOM_OK;
}

/* ---- hyperparameters ------------------------------------------------- */

/* The metadata key under which the file stores hp (the first spelling
 * it has, else the first spelling, for messages), or NULL when the
 * contract names none. */
static const loom_meta_value *hparam_value(const loom_model *m, int fmt, loom_hparam hp, char *key, size_t size)
{
	loom_spellings keys = m->contract->hparam_keys[fmt][hp];
	snprintf(key, size, "(no key in the contract)");
	for (char **k = keys; k != NULL && *k != NULL; k++) {
		loom_contract_expand(key, size, *k, "{arch}", m->arch);
		const loom_meta_value *v = loom_meta_find(m->file, key);
		if (v != NULL)
			return v;
	}
	if (keys != NULL)
		loom_contract_expand(key, size, keys[0], "{arch}", m->arch);
	return NULL;
}

/* The value of hp from the file, else the contract's default; *found says
 * whether either had one. */
static loom_status read_hparam(loom_model *m, int fmt, loom_hparam hp, double *out, bool *found)
{
	char key[256];
	*found = false;
	if (hparam_value(m, fmt, hp, key, sizeof(key)) != NULL) {
		loom_status st = loom_meta_get_float(m->file, key, out);
		if (st != LOOM_OK)
			return st;
		*found = true;
		return LOOM_OK;
	}
	if (m->contract->has_default[hp]) {
		*out = m->contract->defaults[hp];
		*found = true;
	}
	return LOOM_OK;
}

static loom_status require_hparam(loom_model *m, int fmt, loom_hparam hp, int64_t *out)
{
	double v;
	bool found;
	loom_status st = read_hparam(m, fmt, hp, &v, &found);
	if (st != LOOM_OK)
		return st;
	if (!found) {
		char key[256];
		hparam_value(m, fmt, hp, key, sizeof(key));
		return loom_error(LOOM_ERR_BAD_FORMAT, "the model lacks hyperparameter %s (%s)",
				  loom_hparam_name(hp), key);
	}
	if (v < 1 || v > (double)(1 << 30) || v != (double)(int64_t)v)
		return loom_error(LOOM_ERR_BAD_FORMAT, "hyperparameter %s = %.17g is out of range",
				  loom_hparam_name(hp), v);
	*out = (int64_t)v;
	return LOOM_OK;
}

/* Like require_hparam, but def when neither file nor contract has it. */
static loom_status optional_hparam(loom_model *m, int fmt, loom_hparam hp, int64_t def, int64_t *out)
{
	double v;
	bool found;
	loom_status st = read_hparam(m, fmt, hp, &v, &found);
	if (st != LOOM_OK || !found) {
		*out = def;
		return st;
	}
	return require_hparam(m, fmt, hp, out);
}

static const loom_file_tensor *find_tensor(const loom_model_file *f, const char *name)
{
	for (uint64_t i = 0; i < f->n_tensors; i++)
		if (loom_string_eq(f->tensors[i].name, name))
			return &f->tensors[i];
	return NULL;
}

const loom_file_tensor *loom_model_find_role(const loom_model *m, int fmt, loom_role role, int il, char *name,
					     size_t size)
{
	loom_spellings names = m->contract->tensor_names[fmt][role];
	char layer[16];
	snprintf(layer, sizeof(layer), "%d", il);
	snprintf(name, size, "(unnamed %s)", loom_role_name(role));
	for (char **n = names; n != NULL && *n != NULL; n++) {
		loom_contract_expand(name, size, *n, "{i}", layer);
		const loom_file_tensor *ft = find_tensor(m->file, name);
		if (ft != NULL)
			return ft;
	}
	if (names != NULL)
		loom_contract_expand(name, size, names[0], "{i}", layer);
	return NULL;
}

/* n_ff from the first layer's up projection, for files that leave it
 * implicit (GPT-2's n_inner: null means 4 n_embd). */
static loom_status n_ff_from_tensor(loom_model *m, int fmt, int64_t *out)
{
	char name[256];
	const loom_file_tensor *ft = loom_model_find_role(m, fmt, LOOM_ROLE_FFN_UP, 0, name, sizeof(name));
	if (ft == NULL || ft->n_dims != 2)
		return loom_error(LOOM_ERR_BAD_FORMAT, "the model lacks hyperparameter n_ff and tensor '%s' to infer it from",
				  name);
	*out = m->contract->transposed[fmt][LOOM_ROLE_FFN_UP] ? ft->ne[0] : ft->ne[1];
	return LOOM_OK;
}

static loom_status n_ff_from_tensor_if_absent(loom_model *m, int fmt, int64_t *out)
{
	double v;
	bool found;
	loom_status st = read_hparam(m, fmt, LOOM_HP_N_FF, &v, &found);
	if (st != LOOM_OK)
		return st;
	return found ? require_hparam(m, fmt, LOOM_HP_N_FF, out) : n_ff_from_tensor(m, fmt, out);
}

/* n_rot from the fraction of each head rotated, where a file gives that
 * instead (Hugging Face's partial_rotary_factor). */
static loom_status n_rot_from_fraction(loom_model *m, int fmt, int64_t *out)
{
	double v;
	bool found;
	loom_status st = read_hparam(m, fmt, LOOM_HP_ROPE_PARTIAL, &v, &found);
	*out = m->hp.head_dim;
	if (st != LOOM_OK || !found)
		return st;
	if (!(v > 0 && v <= 1))
		return loom_error(LOOM_ERR_BAD_FORMAT, "hyperparameter rope_partial_factor = %g is not in (0, 1]", v);
	*out = (int64_t)((double)m->hp.head_dim * v);
	return LOOM_OK;
}

static loom_status read_float_hparam(loom_model *m, int fmt, loom_hparam hp, float *out)
{
	double v;
	bool found;
	loom_status st = read_hparam(m, fmt, hp, &v, &found);
	if (st != LOOM_OK)
		return st;
	if (!found)
		return loom_error(LOOM_ERR_BAD_FORMAT, "the model lacks hyperparameter %s and %s gives no default",
				  loom_hparam_name(hp), m->contract->path);
	if (!(v > 0))
		return loom_error(LOOM_ERR_BAD_FORMAT, "hyperparameter %s = %g must be positive",
				  loom_hparam_name(hp), v);
	*out = (float)v;
	return LOOM_OK;
}

/* A number for hp, from the file or the contract, else def. */
static loom_status float_or(loom_model *m, int fmt, loom_hparam hp, double def, float *out)
{
	double v;
	bool found;
	loom_status st = read_hparam(m, fmt, hp, &v, &found);
	*out = (float)(found ? v : def);
	return st;
}

/* Llama 3's scaling as a divisor of each pair's frequency, as llama.cpp's
 * converter writes rope_freqs: 1 for wavelengths shorter than
 * orig / high_freq_factor, factor for those longer than orig /
 * low_freq_factor, and a smooth blend between. */
static loom_status llama3_freq_factors(loom_model *m, int fmt, float factor, float orig)
{
	loom_hparams *hp = &m->hp;
	float low, high;
	loom_status st;
	if ((st = float_or(m, fmt, LOOM_HP_ROPE_LOW_FREQ, 1.0, &low)) != LOOM_OK ||
	    (st = float_or(m, fmt, LOOM_HP_ROPE_HIGH_FREQ, 4.0, &high)) != LOOM_OK)
		return st;
	if (!(factor > 0) || !(orig >= 1) || !(low > 0) || !(high > low))
		return loom_error(LOOM_ERR_BAD_FORMAT, "Llama 3 RoPE scaling parameters out of range "
				  "(factor %g, low_freq_factor %g, high_freq_factor %g)", factor, low, high);
	const int64_t n = hp->n_rot / 2;
	hp->rope_freq_factors = malloc((size_t)(n > 0 ? n : 1) * sizeof(float));
	if (hp->rope_freq_factors == NULL)
		return loom_error(LOOM_ERR_NO_MEMORY, "out of memory");
	const double low_wavelen = orig / low, high_wavelen = orig / high;
	for (int64_t i = 0; i < n; i++) {
		double freq = pow(hp->rope_theta, -2.0 * (double)i / (double)hp->n_rot);
		double wavelen = 2.0 * 3.14159265358979323846 / freq, f;
		if (wavelen < high_wavelen) {
			f = 1.0;
		} else if (wavelen > low_wavelen) {
			f = factor;
		} else {
			double smooth = (orig / wavelen - low) / (high - low);
			f = 1.0 / ((1.0 - smooth) / factor + smooth);
		}
		hp->rope_freq_factors[i] = (float)f;
	}
	return LOOM_OK;
}

/* RoPE scaling: none, linear (frequencies times 1 / factor), YaRN or
 * Llama 3's, as the file's rope_scaling_type says. */
static loom_status load_rope_scaling(loom_model *m, int fmt)
{
	loom_hparams *hp = &m->hp;
	char key[256], type[32] = "none";
	loom_string s;
	float factor, orig;
	loom_status st;

	hp->rope_freq_scale = 1.0f;
	hp->yarn_ext_factor = 0.0f;
	hp->n_ctx_orig = hp->n_ctx_train;
	if (hparam_value(m, fmt, LOOM_HP_ROPE_SCALING_TYPE, key, sizeof(key)) != NULL) {
		if ((st = loom_meta_get_string(m->file, key, &s)) != LOOM_OK)
			return st;
		snprintf(type, sizeof(type), "%.*s", (int)s.len, s.data);
	}
	if ((st = float_or(m, fmt, LOOM_HP_ROPE_SCALING_FACTOR, 1.0, &factor)) != LOOM_OK ||
	    (st = float_or(m, fmt, LOOM_HP_ROPE_ORIG_CTX, (double)hp->n_ctx_train, &orig)) != LOOM_OK ||
	    (st = float_or(m, fmt, LOOM_HP_ROPE_ATTN_FACTOR, 1.0, &hp->yarn_attn_factor)) != LOOM_OK ||
	    (st = float_or(m, fmt, LOOM_HP_ROPE_BETA_FAST, 32.0, &hp->yarn_beta_fast)) != LOOM_OK ||
	    (st = float_or(m, fmt, LOOM_HP_ROPE_BETA_SLOW, 1.0, &hp->yarn_beta_slow)) != LOOM_OK)
		return st;
	/* Hugging Face spells no scaling "default". */
	if (strcmp(type, "none") == 0 || strcmp(type, "default") == 0)
		return LOOM_OK;
	if (strcmp(type, "llama3") == 0)
		return llama3_freq_factors(m, fmt, factor, orig);
	if (strcmp(type, "linear") != 0 && strcmp(type, "yarn") != 0)
		return loom_error(LOOM_ERR_UNSUPPORTED, "RoPE scaling '%s' is not supported (none, linear, yarn, llama3)",
				  type);
	if (!(factor > 0) || !(orig >= 1) || !(hp->yarn_attn_factor > 0) || !(hp->yarn_beta_fast > 0) ||
	    !(hp->yarn_beta_slow > 0))
		return loom_error(LOOM_ERR_BAD_FORMAT, "RoPE scaling parameters out of range (factor %g)", factor);
	hp->rope_freq_scale = 1.0f / factor;
	hp->n_ctx_orig = (int64_t)orig;
	if (strcmp(type, "yarn") == 0)
		hp->yarn_ext_factor = 1.0f;
	return LOOM_OK;
}

static loom_status load_hparams(loom_model *m, int fmt)
{
	loom_hparams *hp = &m->hp;
	loom_status st;
	if ((st = require_hparam(m, fmt, LOOM_HP_N_EMBD, &hp->n_embd)) != LOOM_OK ||
	    (st = require_hparam(m, fmt, LOOM_HP_N_LAYER, &hp->n_layer)) != LOOM_OK ||
	    (st = n_ff_from_tensor_if_absent(m, fmt, &hp->n_ff)) != LOOM_OK ||
	    (st = require_hparam(m, fmt, LOOM_HP_N_HEAD, &hp->n_head)) != LOOM_OK ||
	    (st = optional_hparam(m, fmt, LOOM_HP_N_HEAD_KV, hp->n_head, &hp->n_head_kv)) != LOOM_OK ||
	    (st = optional_hparam(m, fmt, LOOM_HP_HEAD_DIM, hp->n_embd / hp->n_head, &hp->head_dim)) != LOOM_OK ||
	    (st = n_rot_from_fraction(m, fmt, &hp->n_rot)) != LOOM_OK ||
	    (st = optional_hparam(m, fmt, LOOM_HP_N_ROT, hp->n_rot, &hp->n_rot)) != LOOM_OK ||
	    (st = require_hparam(m, fmt, LOOM_HP_N_CTX_TRAIN, &hp->n_ctx_train)) != LOOM_OK ||
	    (st = read_float_hparam(m, fmt, LOOM_HP_NORM_EPS, &hp->norm_eps)) != LOOM_OK)
		return st;
	if (m->contract->positions == LOOM_POSITIONS_ROPE &&
	    ((st = read_float_hparam(m, fmt, LOOM_HP_ROPE_THETA, &hp->rope_theta)) != LOOM_OK ||
	     (st = load_rope_scaling(m, fmt)) != LOOM_OK))
		return st;
	if (hp->n_layer > 4096)
		return loom_error(LOOM_ERR_BAD_FORMAT, "n_layer = %" PRId64 " is implausible", hp->n_layer);
	if (hp->n_head_kv > hp->n_head || hp->n_head % hp->n_head_kv != 0)
		return loom_error(LOOM_ERR_BAD_FORMAT, "n_head (%" PRId64 ") is not a multiple of n_head_kv (%" PRId64 ")",
				  hp->n_head, hp->n_head_kv);
	int64_t head_dim_v;
	if ((st = optional_hparam(m, fmt, LOOM_HP_HEAD_DIM_V, hp->head_dim, &head_dim_v)) != LOOM_OK)
		return st;
	if (head_dim_v != hp->head_dim)
		return loom_error(LOOM_ERR_UNSUPPORTED, "value heads of %" PRId64 " differ from key heads of %" PRId64
				  "; loom's attention needs them equal", head_dim_v, hp->head_dim);
	if (hp->head_dim < 1 || hp->n_rot % 2 != 0 || hp->n_rot > hp->head_dim)
		return loom_error(LOOM_ERR_BAD_FORMAT, "n_rot = %" PRId64 " must be even and at most head_dim = %" PRId64,
				  hp->n_rot, hp->head_dim);
	return LOOM_OK;
}

/* ---- weights ---------------------------------------------------------- */

static bool uses_in_place(const loom_model *m)
{
	return !m->weights_allocated;
}

/* Places the file's tensors in backend memory: the mapping itself where the
 * backend can use host memory, else one buffer they are uploaded into. */
static loom_status place_weights(loom_model *m)
{
	const loom_backend *be = &m->rt->backend;
	const loom_model_file *f = m->file;
	if (LOOM_VT_HAS(be->vt, buffer_from_host) && f->mapping != NULL &&
	    be->vt->buffer_from_host(be->ctx, (void *)f->mapping, f->mapping_size, &m->weights) == LOOM_OK)
		return LOOM_OK;
	size_t total = 0;
	for (uint64_t i = 0; i < f->n_tensors; i++)
		total += (f->tensors[i].n_bytes + 63) & ~(size_t)63;
	loom_status st = be->vt->buffer_alloc(be->ctx, total ? total : 64, &m->weights);
	if (st != LOOM_OK)
		return loom_error(st, "backend %s cannot allocate %zu bytes for the weights", be->plugin->name, total);
	m->weights_allocated = true;
	return LOOM_OK;
}

/* The offset of a file tensor in the weights buffer. Uploaded tensors are
 * laid out in file order, 64-byte aligned. */
static size_t weight_offset(const loom_model *m, const loom_file_tensor *ft)
{
	if (uses_in_place(m))
		return (size_t)((const char *)ft->data - (const char *)m->file->mapping);
	size_t off = 0;
	for (const loom_file_tensor *t = m->file->tensors; t < ft; t++)
		off += (t->n_bytes + 63) & ~(size_t)63;
	return off;
}

static loom_status upload_weights(loom_model *m)
{
	const loom_backend *be = &m->rt->backend;
	size_t off = 0;
	for (uint64_t i = 0; i < m->file->n_tensors; i++) {
		const loom_file_tensor *ft = &m->file->tensors[i];
		loom_status st = be->vt->buffer_upload(be->ctx, &m->weights, off, ft->data, ft->n_bytes);
		if (st != LOOM_OK)
			return loom_error(st, "uploading %.*s to backend %s failed", (int)ft->name.len, ft->name.data,
					  be->plugin->name);
		off += (ft->n_bytes + 63) & ~(size_t)63;
	}
	return LOOM_OK;
}

/* Asks the backend whether it can use t as the weight of op. */
static bool backend_supports(const loom_model *m, loom_op op, loom_tensor *t)
{
	loom_tensor in, out;
	loom_node node = {.op = op, .dst = &out, .src = {t, &in}};
	memset(&in, 0, sizeof(in));
	memset(&out, 0, sizeof(out));
	if (op == LOOM_OP_GET_ROWS) {
		loom_tensor_set_contiguous(&in, LOOM_DTYPE_I32, 1, 1, 1, 1);
		loom_tensor_set_contiguous(&out, LOOM_DTYPE_F32, t->ne[0], 1, 1, 1);
	} else {
		loom_tensor_set_contiguous(&in, LOOM_DTYPE_F32, t->ne[0], 1, 1, 1);
		loom_tensor_set_contiguous(&out, LOOM_DTYPE_F32, t->ne[1], 1, 1, 1);
	}
	const loom_backend *be = &m->rt->backend;
	return be->vt->supports(be->ctx, &node);
}

/* A backend buffer of the model's own holding a copy of host[0 .. size). */
static loom_status own_copy(loom_model *m, const void *host, size_t size, void **data)
{
	const loom_backend *be = &m->rt->backend;
	if (m->n_owned == m->cap_owned) {
		int cap = m->cap_owned ? 2 * m->cap_owned : 16;
		loom_buffer *owned = realloc(m->owned, (size_t)cap * sizeof(*owned));
		if (owned == NULL)
			return loom_error(LOOM_ERR_NO_MEMORY, "out of memory");
		m->owned = owned;
		m->cap_owned = cap;
	}
	loom_buffer *buf = &m->owned[m->n_owned];
	loom_status st = be->vt->buffer_alloc(be->ctx, size ? size : 1, buf);
	if (st != LOOM_OK)
		return loom_error(st, "backend %s cannot allocate %zu bytes", be->plugin->name, size);
	m->n_owned++;
	if ((st = be->vt->buffer_upload(be->ctx, buf, 0, host, size)) != LOOM_OK)
		return loom_error(st, "uploading %zu bytes to backend %s failed", size, be->plugin->name);
	*data = buf->base;
	return LOOM_OK;
}

/* A norm weight or bias: in place when it is f32 as the block wants it,
 * else an f32 copy with the contract's norm_weight_offset added (a format
 * that stores Gemma's w where the block multiplies by 1 + w). */
static loom_status bind_vector(loom_model *m, int fmt, loom_role role, const loom_file_tensor *ft, const char *name,
			       loom_tensor *t)
{
	const float offset = loom_role_is_norm(role) ? m->contract->norm_weight_offset[fmt] : 0.0f;
	loom_tensor_set_contiguous(t, LOOM_DTYPE_F32, ft->ne[0], 1, 1, 1);
	if (ft->dtype == LOOM_DTYPE_F32 && offset == 0.0f) {
		t->data = (char *)m->weights.base + weight_offset(m, ft);
		return LOOM_OK;
	}
	float *v = NULL;
	loom_status st = loom_weight_vector_f32(m->rt, ft, name, offset, &v);
	if (st == LOOM_OK)
		st = own_copy(m, v, (size_t)ft->ne[0] * sizeof(float), &t->data);
	free(v);
	return st;
}

/* Binds role (of layer il, or -1) to its tensor, checking shape and type.
 * A missing optional tensor leaves t zeroed. */
static loom_status bind(loom_model *m, int fmt, loom_role role, int il, int64_t ne0, int64_t ne1,
			bool optional, loom_tensor *t)
{
	char name[256];
	const loom_file_tensor *ft = loom_model_find_role(m, fmt, role, il, name, sizeof(name));
	const bool transposed = m->contract->transposed[fmt][role];
	memset(t, 0, sizeof(*t));
	if (ft == NULL) {
		if (optional)
			return LOOM_OK;
		return loom_error(LOOM_ERR_BAD_FORMAT, "tensor '%s' (%s) is missing", name, loom_role_name(role));
	}
	int want_dims = ne1 > 0 ? 2 : 1;
	int64_t want0 = transposed ? ne1 : ne0, want1 = transposed ? ne0 : ne1;
	if (ft->n_dims != want_dims || ft->ne[0] != want0 || (ne1 > 0 && ft->ne[1] != want1))
		return loom_error(LOOM_ERR_BAD_FORMAT,
				  "tensor '%s' has shape [%" PRId64 ", %" PRId64 "], expected [%" PRId64 ", %" PRId64 "]%s",
				  name, ft->ne[0], ft->n_dims > 1 ? ft->ne[1] : 1, want0, ne1 > 0 ? want1 : 1,
				  transposed ? " (stored transposed)" : "");
	const char *type = loom_dtype_name(ft->dtype);
	if (ne1 <= 0)
		return bind_vector(m, fmt, role, ft, name, t);
	loom_status st;
	if (transposed) {
		/* A copy with rows and columns swapped: {n_in, n_out}. */
		void *turned;
		if ((st = loom_weight_transposed(ft, name, &turned)) != LOOM_OK)
			return st;
		loom_tensor_set_contiguous(t, ft->dtype, ft->ne[1], ft->ne[0], 1, 1);
		st = own_copy(m, turned, (size_t)(ft->ne[0] * ft->ne[1]) * (ft->dtype == LOOM_DTYPE_F32 ? 4 : 2),
			      &t->data);
		free(turned);
		if (st != LOOM_OK)
			return st;
	} else {
		loom_tensor_set_contiguous(t, ft->dtype, ft->ne[0], ft->n_dims > 1 ? ft->ne[1] : 1, 1, 1);
		t->data = (char *)m->weights.base + weight_offset(m, ft);
	}
	loom_op op = role == LOOM_ROLE_TOKEN_EMBD ? LOOM_OP_GET_ROWS : LOOM_OP_MATMUL;
	if (!backend_supports(m, op, t))
		return loom_error(LOOM_ERR_UNSUPPORTED, "tensor '%s' has type %s, which backend %s cannot %s", name,
				  type ? type : "?", m->rt->backend.plugin->name,
				  op == LOOM_OP_GET_ROWS ? "look rows up in" : "multiply by");
	return LOOM_OK;
}

/* Binds role if the contract's choices use it; leaves t zeroed if not. */
static loom_status bind_used(loom_model *m, int fmt, loom_role role, int il, int64_t ne0, int64_t ne1,
			     loom_tensor *t)
{
	memset(t, 0, sizeof(*t));
	if (!loom_contract_uses_role(m->contract, (loom_contract_format)fmt, role))
		return LOOM_OK;
	return bind(m, fmt, role, il, ne0, ne1, false, t);
}

/* Rows [row, row + n) of matrix w (or elements of vector w) as a tensor of
 * their own: fused QKV split into q, k and v. */
static loom_tensor row_range(const loom_tensor *w, int64_t row, int64_t n)
{
	loom_tensor t = *w;
	bool matrix = w->ne[1] > 1;

	if (matrix) {
		t.ne[1] = n;
		t.data = (char *)w->data + (size_t)row * w->nb[1];
		t.nb[2] = t.nb[3] = t.nb[1] * (size_t)n;
	} else {
		t.ne[0] = n;
		t.data = (char *)w->data + (size_t)row * sizeof(float);
		t.nb[1] = t.nb[2] = t.nb[3] = (size_t)n * sizeof(float);
	}
	return t;
}

static loom_status bind_layer(loom_model *m, int fmt, int il, loom_layer *l)
{
	const loom_hparams *hp = &m->hp;
	const int64_t q_dim = hp->n_head * hp->head_dim, kv_dim = hp->n_head_kv * hp->head_dim;
	const int64_t E = hp->n_embd;
	struct { loom_role role; int64_t ne0, ne1; loom_tensor *t; } roles[] = {
		{LOOM_ROLE_ATTN_NORM, E, 0, &l->attn_norm},
		{LOOM_ROLE_ATTN_NORM_B, E, 0, &l->attn_norm_b},
		{LOOM_ROLE_ATTN_Q, E, q_dim, &l->attn_q},
		{LOOM_ROLE_ATTN_Q_B, q_dim, 0, &l->attn_q_b},
		{LOOM_ROLE_ATTN_K, E, kv_dim, &l->attn_k},
		{LOOM_ROLE_ATTN_K_B, kv_dim, 0, &l->attn_k_b},
		{LOOM_ROLE_ATTN_V, E, kv_dim, &l->attn_v},
		{LOOM_ROLE_ATTN_V_B, kv_dim, 0, &l->attn_v_b},
		{LOOM_ROLE_ATTN_Q_NORM, hp->head_dim, 0, &l->attn_q_norm},
		{LOOM_ROLE_ATTN_K_NORM, hp->head_dim, 0, &l->attn_k_norm},
		{LOOM_ROLE_ATTN_OUTPUT, q_dim, E, &l->attn_output},
		{LOOM_ROLE_ATTN_OUTPUT_B, E, 0, &l->attn_output_b},
		{LOOM_ROLE_FFN_NORM, E, 0, &l->ffn_norm},
		{LOOM_ROLE_FFN_NORM_B, E, 0, &l->ffn_norm_b},
		{LOOM_ROLE_FFN_GATE, E, hp->n_ff, &l->ffn_gate},
		{LOOM_ROLE_FFN_GATE_B, hp->n_ff, 0, &l->ffn_gate_b},
		{LOOM_ROLE_FFN_UP, E, hp->n_ff, &l->ffn_up},
		{LOOM_ROLE_FFN_UP_B, hp->n_ff, 0, &l->ffn_up_b},
		{LOOM_ROLE_FFN_DOWN, hp->n_ff, E, &l->ffn_down},
		{LOOM_ROLE_FFN_DOWN_B, E, 0, &l->ffn_down_b},
	};
	loom_status st;
	for (size_t i = 0; i < sizeof(roles) / sizeof(roles[0]); i++)
		if ((st = bind_used(m, fmt, roles[i].role, il, roles[i].ne0, roles[i].ne1, roles[i].t)) != LOOM_OK)
			return st;
	if (m->contract->qkv[fmt] != LOOM_QKV_FUSED)
		return LOOM_OK;
	/* One matrix whose rows are q's, then k's, then v's. */
	loom_tensor qkv, qkv_b;
	if ((st = bind_used(m, fmt, LOOM_ROLE_ATTN_QKV, il, E, q_dim + 2 * kv_dim, &qkv)) != LOOM_OK ||
	    (st = bind_used(m, fmt, LOOM_ROLE_ATTN_QKV_B, il, q_dim + 2 * kv_dim, 0, &qkv_b)) != LOOM_OK)
		return st;
	l->attn_q = row_range(&qkv, 0, q_dim);
	l->attn_k = row_range(&qkv, q_dim, kv_dim);
	l->attn_v = row_range(&qkv, q_dim + kv_dim, kv_dim);
	if (qkv_b.data != NULL) {
		l->attn_q_b = row_range(&qkv_b, 0, q_dim);
		l->attn_k_b = row_range(&qkv_b, q_dim, kv_dim);
		l->attn_v_b = row_range(&qkv_b, q_dim + kv_dim, kv_dim);
	}
	return LOOM_OK;
}

static loom_status bind_weights(loom_model *m, int fmt)
{
	const loom_hparams *hp = &m->hp;
	loom_status st;

	char name[256];
	const loom_file_tensor *emb = loom_model_find_role(m, fmt, LOOM_ROLE_TOKEN_EMBD, -1, name, sizeof(name));
	if (emb == NULL)
		return loom_error(LOOM_ERR_BAD_FORMAT, "tensor '%s' (token_embd) is missing", name);
	m->hp.n_vocab = emb->n_dims != 2 ? 0 : m->contract->transposed[fmt][LOOM_ROLE_TOKEN_EMBD] ? emb->ne[0] : emb->ne[1];
	if (m->hp.n_vocab < loom_vocab_n_tokens(m->vocab))
		return loom_error(LOOM_ERR_BAD_FORMAT, "tensor '%s' has %" PRId64 " rows but the vocabulary has %d tokens",
				  name, m->hp.n_vocab, loom_vocab_n_tokens(m->vocab));

	if ((st = bind(m, fmt, LOOM_ROLE_TOKEN_EMBD, -1, hp->n_embd, hp->n_vocab, false, &m->token_embd)) != LOOM_OK ||
	    (st = bind_used(m, fmt, LOOM_ROLE_POS_EMBD, -1, hp->n_embd, hp->n_ctx_train, &m->pos_embd)) != LOOM_OK ||
	    (st = bind(m, fmt, LOOM_ROLE_OUTPUT_NORM, -1, hp->n_embd, 0, false, &m->output_norm)) != LOOM_OK ||
	    (st = bind_used(m, fmt, LOOM_ROLE_OUTPUT_NORM_B, -1, hp->n_embd, 0, &m->output_norm_b)) != LOOM_OK ||
	    (st = bind_used(m, fmt, LOOM_ROLE_OUTPUT_B, -1, hp->n_vocab, 0, &m->output_b)) != LOOM_OK)
		return st;
	if (m->contract->tensor_names[fmt][LOOM_ROLE_ROPE_FREQS] != NULL &&
	    (st = bind(m, fmt, LOOM_ROLE_ROPE_FREQS, -1, hp->n_rot / 2, 0, true, &m->rope_freqs)) != LOOM_OK)
		return st;
	if (m->rope_freqs.data == NULL && hp->rope_freq_factors != NULL) {
		loom_tensor_set_contiguous(&m->rope_freqs, LOOM_DTYPE_F32, hp->n_rot / 2, 1, 1, 1);
		if ((st = own_copy(m, hp->rope_freq_factors, (size_t)(hp->n_rot / 2) * sizeof(float),
				   &m->rope_freqs.data)) != LOOM_OK)
			return st;
	}
	if (m->pos_embd.data != NULL && !backend_supports(m, LOOM_OP_GET_ROWS, &m->pos_embd))
		return loom_error(LOOM_ERR_UNSUPPORTED, "the position embeddings have a type backend %s cannot read",
				  m->rt->backend.plugin->name);
	if (m->contract->tied == LOOM_TIED_ALWAYS) {
		m->output = m->token_embd;
	} else {
		bool optional = m->contract->tied == LOOM_TIED_IF_MISSING;
		if ((st = bind(m, fmt, LOOM_ROLE_OUTPUT, -1, hp->n_embd, hp->n_vocab, optional, &m->output)) != LOOM_OK)
			return st;
		if (m->output.data == NULL)
			m->output = m->token_embd;
	}
	if (m->output.data == m->token_embd.data && !backend_supports(m, LOOM_OP_MATMUL, &m->output))
		return loom_error(LOOM_ERR_UNSUPPORTED, "the tied output head (%s) has a type backend %s cannot multiply by",
				  name, m->rt->backend.plugin->name);

	m->layers = calloc((size_t)hp->n_layer, sizeof(loom_layer));
	if (m->layers == NULL)
		return loom_error(LOOM_ERR_NO_MEMORY, "out of memory");
	for (int il = 0; il < hp->n_layer; il++)
		if ((st = bind_layer(m, fmt, il, &m->layers[il])) != LOOM_OK)
			return st;
	return LOOM_OK;
}

/* Offers t, a weight only MATMUL reads, to the backend's weight_repack. */
static loom_status repack(loom_model *m, loom_tensor *t, loom_role role, int il)
{
	const loom_backend *be = &m->rt->backend;
	loom_buffer buf = {0};
	uint32_t layout = 0;
	loom_status st = be->vt->weight_repack(be->ctx, t, &buf, &layout);
	if (st == LOOM_ERR_UNSUPPORTED)
		return LOOM_OK;
	if (st != LOOM_OK)
		return loom_error(st, "backend %s could not repack %s of layer %d", be->plugin->name,
				  loom_role_name(role), il);
	if (layout == 0) {
		be->vt->buffer_free(be->ctx, &buf);
		return LOOM_OK;
	}
	m->repacked[m->n_repacked++] = buf;
	t->data = buf.base;
	t->layout = layout;
	return LOOM_OK;
}

/* The weights of the layers' matmuls and an untied output head; a tied
 * head stays as it is, since GET_ROWS reads it too. */
static loom_status repack_weights(loom_model *m)
{
	const loom_backend *be = &m->rt->backend;
	if (!LOOM_VT_HAS(be->vt, weight_repack))
		return LOOM_OK;
	m->repacked = calloc((size_t)m->hp.n_layer * 7 + 1, sizeof(loom_buffer));
	if (m->repacked == NULL)
		return loom_error(LOOM_ERR_NO_MEMORY, "out of memory");
	loom_status st = LOOM_OK;
	for (int il = 0; il < m->hp.n_layer && st == LOOM_OK; il++) {
		loom_layer *l = &m->layers[il];
		struct { loom_tensor *t; loom_role role; } mats[] = {
			{&l->attn_q, LOOM_ROLE_ATTN_Q},     {&l->attn_k, LOOM_ROLE_ATTN_K},
			{&l->attn_v, LOOM_ROLE_ATTN_V},     {&l->attn_output, LOOM_ROLE_ATTN_OUTPUT},
			{&l->ffn_gate, LOOM_ROLE_FFN_GATE}, {&l->ffn_up, LOOM_ROLE_FFN_UP},
			{&l->ffn_down, LOOM_ROLE_FFN_DOWN},
		};
		for (size_t i = 0; i < sizeof(mats) / sizeof(mats[0]) && st == LOOM_OK; i++)
			st = repack(m, mats[i].t, mats[i].role, il);
	}
	if (st == LOOM_OK && m->output.data != m->token_embd.data)
		st = repack(m, &m->output, LOOM_ROLE_OUTPUT, -1);
	if (st == LOOM_OK && m->n_repacked > 0)
		loom_info("backend %s repacked %d weights into its own layouts", be->plugin->name, m->n_repacked);
	return st;
}

/* The file's format section of the contract, and the hyperparameters. */
static loom_status load_layout(loom_model *m)
{
	int fmt = loom_contract_format_index(m->format->name);
	if (fmt < 0 || m->contract->tensor_names[fmt][LOOM_ROLE_TOKEN_EMBD] == NULL)
		return loom_error(LOOM_ERR_CONTRACT, "%s does not describe %s files", m->contract->path,
				  m->format->name);
	m->fmt = fmt;
	m->rope_style = m->contract->rope_style[fmt];
	return load_hparams(m, fmt);
}

/* Replaces the file by its GGUF layout with the weights quantized to
 * scheme, in memory: what `loom convert --type` would write. */
static loom_status quantize_in_memory(loom_model *m, const char *scheme_name)
{
	const loom_quant_scheme *scheme = loom_quantize_scheme(scheme_name);
	if (scheme == NULL)
		return LOOM_ERR_INVALID_ARGUMENT;
	m->export = calloc(1, sizeof(*m->export));
	m->quantized = calloc(1, sizeof(*m->quantized));
	if (m->export == NULL || m->quantized == NULL)
		return loom_error(LOOM_ERR_NO_MEMORY, "out of memory");
	loom_quantize_params qp = loom_quantize_default_params();
	loom_status st = loom_export_gguf(m, m->export);
	if (st == LOOM_OK)
		st = loom_quantize_file(m->rt, &m->export->file, scheme, &qp, m->quantized);
	if (st != LOOM_OK) {
		free(m->quantized);
		m->quantized = NULL;
		return loom_error_wrap(st, "quantizing to %s at load", scheme->name);
	}
	char *arch = strdup(m->contract->name);
	if (arch == NULL)
		return loom_error(LOOM_ERR_NO_MEMORY, "out of memory");
	free(m->arch);
	m->arch = arch;
	m->file = &m->quantized->out;
	m->fmt = LOOM_CFMT_GGUF;
	m->rope_style = m->contract->rope_style[LOOM_CFMT_GGUF];
	loom_info("quantized the weights to %s at load", scheme->name);
	return LOOM_OK;
}

static loom_status load_weights(loom_model *m)
{
	loom_status st = place_weights(m);
	if (st == LOOM_OK)
		st = bind_weights(m, m->fmt);
	if (st == LOOM_OK && m->weights_allocated)
		st = upload_weights(m);
	if (st == LOOM_OK)
		st = repack_weights(m);
	return st;
}

/* ---- public ------------------------------------------------------------ */

/* Loads path as far as its contract and hyperparameters; the weights
 * too unless layout_only. */
static loom_status load(loom_model *m, const char *path, const loom_model_params *params, bool layout_only)
{
	loom_status st = open_file(m, path);
	if (st != LOOM_OK)
		return st;
	loom_string arch;
	if (loom_meta_get_string(m->file, "general.architecture", &arch) == LOOM_OK)
		m->arch = loom_string_dup(arch);
	else if (!params->vocab_only && !params->metadata_only)
		return loom_error(LOOM_ERR_BAD_FORMAT, "%s: general.architecture is missing", path);
	else
		m->arch = strdup("");
	if (m->arch == NULL)
		return loom_error(LOOM_ERR_NO_MEMORY, "out of memory");
	if (params->metadata_only)
		return LOOM_OK;
	/* A missing tokenizer key is a defect of the file, like any other. */
	if ((st = loom_vocab_load(m->file, &m->vocab)) != LOOM_OK)
		return loom_error_wrap(st == LOOM_ERR_NOT_FOUND ? LOOM_ERR_BAD_FORMAT : st, "%s: vocabulary", path);
	if (params->vocab_only) {
		m->chat_template = loom_chat_template_resolve(m);
		return LOOM_OK;
	}
	st = loom_contract_find(m->arch, m->rt->arch_dirs, m->rt->n_arch_dirs, &m->contract);
	if (st != LOOM_OK)
		return loom_error_wrap(st, "%s", path);
	st = load_layout(m);
	if (st == LOOM_OK && layout_only)
		return LOOM_OK;
	if (st == LOOM_OK && params->quantize != NULL)
		st = quantize_in_memory(m, params->quantize);
	if (st == LOOM_OK)
		st = load_weights(m);
	if (st != LOOM_OK)
		return loom_error_wrap(st, "%s (contract %s)", path, m->contract->path);
	loom_info("loaded %s: %s, %" PRId64 " layers, n_embd %" PRId64 ", vocab %" PRId64 ", weights %s",
		  path, m->arch, m->hp.n_layer, m->hp.n_embd, m->hp.n_vocab,
		  m->weights_allocated ? "uploaded" : "used in place");
	m->chat_template = loom_chat_template_resolve(m);
	return LOOM_OK;
}

static loom_status load_model(loom_runtime *rt, const char *path, const loom_model_params *params, bool layout_only,
			      loom_model **out)
{
	loom_model_params defaults = loom_model_default_params();
	if (out == NULL)
		return loom_error(LOOM_ERR_INVALID_ARGUMENT, "loom_model_load: out is NULL");
	*out = NULL;
	if (rt == NULL || path == NULL)
		return loom_error(LOOM_ERR_INVALID_ARGUMENT, "loom_model_load: runtime and path are required");
	loom_model *m = calloc(1, sizeof(*m));
	if (m == NULL)
		return loom_error(LOOM_ERR_NO_MEMORY, "out of memory");
	m->rt = rt;
	loom_status st = load(m, path, params != NULL ? params : &defaults, layout_only);
	if (st != LOOM_OK) {
		loom_model_free(m);
		return st;
	}
	*out = m;
	return LOOM_OK;
}

loom_status loom_model_load(loom_runtime *rt, const char *path, const loom_model_params *params,
			    loom_model **out)
{
	return load_model(rt, path, params, false, out);
}

loom_status loom_model_load_layout(loom_runtime *rt, const char *path, loom_model **out)
{
	return load_model(rt, path, NULL, true, out);
}

void loom_model_free(loom_model *m)
{
	if (m == NULL)
		return;
	const loom_backend *be = &m->rt->backend;
	for (int i = 0; i < m->n_repacked; i++)
		be->vt->buffer_free(be->ctx, &m->repacked[i]);
	free(m->repacked);
	if (m->weights.handle != NULL || m->weights.base != NULL)
		be->vt->buffer_free(be->ctx, &m->weights);
	for (int i = 0; i < m->n_owned; i++)
		be->vt->buffer_free(be->ctx, &m->owned[i]);
	free(m->owned);
	free(m->layers);
	free(m->hp.rope_freq_factors);
	loom_vocab_free(m->vocab);
	loom_contract_free(m->contract);
	if (m->quantized != NULL)
		loom_quantized_free(m->quantized);
	if (m->export != NULL)
		loom_export_free(m->export);
	free(m->quantized);
	free(m->export);
	if (m->opened != NULL)
		((const loom_format_vtable *)m->format->desc->vtable)->close(m->opened);
	free(m->arch);
	free(m);
}
