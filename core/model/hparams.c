/* hparams.c - a model's hyperparameters: read where its contract says the
 * file keeps them, else the contract's defaults, checked for range and
 * consistency; RoPE scaling turned into the ROPE op's parameters. */
#include "model/hparams.h"

#include "model/meta.h"
#include "model/naming.h"
#include "runtime/error.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The value of hp from the file, else the contract's default for a model
 * of this depth, else its default; *found says whether any had one. */
static loom_status read_hparam(loom_model *m, int fmt, loom_hparam hp, double *out, bool *found)
{
	char key[256];
	*found = false;
	if (loom_model_hparam_value(m, fmt, hp, key, sizeof(key)) != NULL) {
		loom_status st = loom_meta_get_float(m->file, key, out);
		if (st != LOOM_OK)
			return st;
		*found = true;
		return LOOM_OK;
	}
	for (int i = 0; i < m->contract->n_layer_defaults; i++) {
		const struct loom_layer_defaults *d = &m->contract->layer_defaults[i];
		if (d->n_layer == m->hp.n_layer && d->has_default[hp]) {
			*out = d->defaults[hp];
			*found = true;
			return LOOM_OK;
		}
	}
	if (m->contract->has_default[hp]) {
		*out = m->contract->defaults[hp];
		*found = true;
	}
	return LOOM_OK;
}

/* v as a count of at least min (1 for sizes, 0 where 0 means none). */
static loom_status as_count(loom_hparam hp, double v, int64_t min, int64_t *out)
{
	if (v < (double)min || v > (double)(1 << 30) || v != (double)(int64_t)v)
		return loom_error(LOOM_ERR_BAD_FORMAT, "hyperparameter %s = %.17g is out of range", loom_hparam_name(hp), v);
	*out = (int64_t)v;
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
		loom_model_hparam_value(m, fmt, hp, key, sizeof(key));
		return loom_error(LOOM_ERR_BAD_FORMAT, "the model lacks hyperparameter %s (%s)",
				  loom_hparam_name(hp), key);
	}
	return as_count(hp, v, 1, out);
}

/* A count of at least min, else def when neither file nor contract has
 * it. */
static loom_status count_or(loom_model *m, int fmt, loom_hparam hp, int64_t min, int64_t def, int64_t *out)
{
	double v;
	bool found;
	loom_status st = read_hparam(m, fmt, hp, &v, &found);
	if (st != LOOM_OK || !found) {
		*out = def;
		return st;
	}
	return as_count(hp, v, min, out);
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
	if (!(v > 0) || isinf((float)v))
		return loom_error(LOOM_ERR_BAD_FORMAT, "hyperparameter %s = %g must be positive and finite",
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

/* YaRN as transformers computes it with truncate: false: pair i's
 * frequency scaled by 1 / factor where the ramp is 1, kept where it is 0,
 * the ramp going between the pairs whose wavelengths turn beta_fast and
 * beta_slow times in the original context, not rounded to whole pairs. As
 * divisors of each pair's frequency, which the ROPE op takes. */
static loom_status yarn_freq_factors(loom_hparams *hp, float factor, float orig)
{
	const double pi = 3.14159265358979323846, dim = (double)hp->n_rot;
	double low = dim * log(orig / (hp->yarn_beta_fast * 2.0 * pi)) / (2.0 * log(hp->rope_theta));
	double high = dim * log(orig / (hp->yarn_beta_slow * 2.0 * pi)) / (2.0 * log(hp->rope_theta));
	low = low > 0.0 ? low : 0.0;
	high = high < dim - 1.0 ? high : dim - 1.0;
	if (low == high)
		high += 0.001;
	const int64_t n = hp->n_rot / 2;
	hp->rope_freq_factors = malloc((size_t)(n > 0 ? n : 1) * sizeof(float));
	if (hp->rope_freq_factors == NULL)
		return loom_error(LOOM_ERR_NO_MEMORY, "out of memory");
	for (int64_t i = 0; i < n; i++) {
		double ramp = ((double)i - low) / (high - low);
		ramp = ramp < 0.0 ? 0.0 : ramp > 1.0 ? 1.0 : ramp;
		hp->rope_freq_factors[i] = (float)(1.0 / (ramp / factor + (1.0 - ramp)));
	}
	return LOOM_OK;
}

/* One of LongRoPE's lists of factors, n_rot / 2 positive numbers, into a
 * new array at *out. */
static loom_status longrope_list(loom_model *m, int fmt, loom_hparam which, float **out)
{
	char key[256];
	const loom_meta_value *v = loom_model_hparam_value(m, fmt, which, key, sizeof(key));
	const uint64_t n = (uint64_t)(m->hp.n_rot / 2);
	if (v == NULL)
		return loom_error(LOOM_ERR_BAD_FORMAT, "RoPE scaling longrope without its %s (%s)", loom_hparam_name(which),
				  key);
	if (v->type != LOOM_META_ARRAY || (v->elem_type != LOOM_META_F64 && v->elem_type != LOOM_META_I64) ||
	    v->count != n)
		return loom_error(LOOM_ERR_BAD_FORMAT, "%s must be a list of %" PRIu64 " numbers (n_rot / 2)", key, n);
	if ((*out = malloc((size_t)n * sizeof(float) + 1)) == NULL)
		return loom_error(LOOM_ERR_NO_MEMORY, "out of memory");
	for (uint64_t i = 0; i < n; i++) {
		double x = v->elem_type == LOOM_META_F64 ? ((const double *)v->v.array)[i]
							  : (double)((const int64_t *)v->v.array)[i];
		if (!(x > 0.0) || isinf(x))
			return loom_error(LOOM_ERR_BAD_FORMAT, "%s[%" PRIu64 "] = %g must be positive and finite", key, i, x);
		(*out)[i] = (float)x;
	}
	return LOOM_OK;
}

/* LongRoPE (Phi-3's) as Hugging Face's rope_scaling gives it: the long and
 * short factors as lists, and the cos and sin scale, where the file leaves
 * it out, as transformers computes it from the context's growth s =
 * n_ctx_train / rope_orig_ctx: sqrt(1 + ln s / ln rope_orig_ctx), 1 when
 * s <= 1. */
static loom_status longrope(loom_model *m, int fmt, float orig)
{
	loom_hparams *hp = &m->hp;
	char key[256];
	loom_status st;
	if ((st = longrope_list(m, fmt, LOOM_HP_ROPE_FACTORS_LONG, &hp->rope_long_factors)) != LOOM_OK ||
	    (st = longrope_list(m, fmt, LOOM_HP_ROPE_FACTORS_SHORT, &hp->rope_short_factors)) != LOOM_OK)
		return st;
	if (!(orig >= 1))
		return loom_error(LOOM_ERR_BAD_FORMAT, "RoPE scaling longrope: original context %g out of range", orig);
	hp->n_ctx_orig = (int64_t)orig;
	if (loom_model_hparam_value(m, fmt, LOOM_HP_ROPE_ATTN_FACTOR, key, sizeof(key)) != NULL)
		return LOOM_OK;
	const double growth = (double)hp->n_ctx_train / (double)orig;
	hp->yarn_attn_factor = growth <= 1.0 ? 1.0f : (float)sqrt(1.0 + log(growth) / log((double)orig));
	return LOOM_OK;
}

/* RoPE scaling: none, linear (frequencies times 1 / factor), YaRN,
 * Llama 3's or LongRoPE, as the file's rope_scaling_type says. */
static loom_status load_rope_scaling(loom_model *m, int fmt)
{
	loom_hparams *hp = &m->hp;
	char key[256], type[32] = "none";
	loom_string s;
	float factor, orig;
	loom_status st;

	hp->rope_freq_scale = 1.0f;
	hp->yarn_ext_factor = 0.0f;
	hp->yarn_truncate = true;
	hp->n_ctx_orig = hp->n_ctx_train;
	if (loom_model_hparam_value(m, fmt, LOOM_HP_ROPE_SCALING_TYPE, key, sizeof(key)) != NULL) {
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
	/* "su": LongRoPE's name in Phi-3's first checkpoints. */
	if (strcmp(type, "longrope") == 0 || strcmp(type, "su") == 0)
		return longrope(m, fmt, orig);
	if (strcmp(type, "linear") != 0 && strcmp(type, "yarn") != 0)
		return loom_error(LOOM_ERR_UNSUPPORTED,
				  "RoPE scaling '%s' is not supported (none, linear, yarn, llama3, longrope)", type);
	if (!(factor > 0) || !(orig >= 1) || !(hp->yarn_attn_factor > 0) || !(hp->yarn_beta_fast > 0) ||
	    !(hp->yarn_beta_slow > 0))
		return loom_error(LOOM_ERR_BAD_FORMAT, "RoPE scaling parameters out of range (factor %g)", factor);
	hp->rope_freq_scale = 1.0f / factor;
	hp->n_ctx_orig = (int64_t)orig;
	if (strcmp(type, "yarn") != 0)
		return LOOM_OK;
	hp->yarn_ext_factor = 1.0f;
	float truncate;
	if ((st = float_or(m, fmt, LOOM_HP_ROPE_TRUNCATE, 1.0, &truncate)) != LOOM_OK)
		return st;
	hp->yarn_truncate = truncate != 0.0f;
	return hp->yarn_truncate ? LOOM_OK : yarn_freq_factors(hp, factor, orig);
}

/* Element i of an array of integers or booleans; false for other arrays. */
static bool array_integer(const loom_meta_value *v, uint64_t i, int64_t *out)
{
	const unsigned char *p = (const unsigned char *)v->v.array + i * loom_meta_elem_size(v->elem_type);
	union {
		uint8_t u8; int8_t i8; uint16_t u16; int16_t i16; uint32_t u32; int32_t i32; uint64_t u64; int64_t i64;
	} x;
	memcpy(&x, p, loom_meta_elem_size(v->elem_type));
	switch (v->elem_type) {
	case LOOM_META_BOOL: case LOOM_META_U8: *out = x.u8; return true;
	case LOOM_META_I8: *out = x.i8; return true;
	case LOOM_META_U16: *out = x.u16; return true;
	case LOOM_META_I16: *out = x.i16; return true;
	case LOOM_META_U32: *out = x.u32; return true;
	case LOOM_META_I32: *out = x.i32; return true;
	case LOOM_META_U64: *out = (int64_t)(x.u64 > INT64_MAX ? INT64_MAX : x.u64); return true;
	case LOOM_META_I64: *out = x.i64; return true;
	default: return false;
	}
}

/* *flags, a flag a layer, for a list under key with an entry a layer, or
 * why not. */
static loom_status new_layer_flags(loom_model *m, const char *key, const loom_meta_value *v, bool strings,
				   uint8_t **flags)
{
	if (v->type != LOOM_META_ARRAY || (strings ? v->elem_type != LOOM_META_STRING : v->elem_type == LOOM_META_STRING))
		return loom_error(LOOM_ERR_BAD_FORMAT, "metadata key '%s' is not a list of %s", key,
				  strings ? "strings" : "numbers");
	if (v->count != (uint64_t)m->hp.n_layer)
		return loom_error(LOOM_ERR_BAD_FORMAT, "metadata key '%s' has %" PRIu64 " entries for %" PRId64 " layers", key,
				  v->count, m->hp.n_layer);
	if ((*flags = malloc((size_t)v->count + 1)) == NULL)
		return loom_error(LOOM_ERR_NO_MEMORY, "out of memory");
	return LOOM_OK;
}

/* A list of numbers, one a layer, as flags: nonzero set. */
static loom_status layer_flags_from_numbers(loom_model *m, const char *key, const loom_meta_value *v, uint8_t **flags)
{
	loom_status st = new_layer_flags(m, key, v, false, flags);
	if (st != LOOM_OK)
		return st;
	for (uint64_t il = 0; il < v->count; il++) {
		int64_t flag;
		if (!array_integer(v, il, &flag))
			return loom_error(LOOM_ERR_BAD_FORMAT, "metadata key '%s' is not a list of integers", key);
		(*flags)[il] = flag != 0;
	}
	return LOOM_OK;
}

/* Hugging Face's layer_types: which layers attend through the window. */
static loom_status window_layers_from_types(loom_model *m, const char *key, const loom_meta_value *v)
{
	loom_status st = new_layer_flags(m, key, v, true, &m->hp.swa_layers);
	if (st != LOOM_OK)
		return st;
	for (uint64_t il = 0; il < v->count; il++) {
		loom_string type = ((const loom_string *)v->v.array)[il];
		if (loom_string_eq(type, "sliding_attention") || loom_string_eq(type, "full_attention")) {
			m->hp.swa_layers[il] = loom_string_eq(type, "sliding_attention");
			continue;
		}
		return loom_error(LOOM_ERR_UNSUPPORTED, "%s: layer %" PRIu64 " is of type '%.*s', not one loom runs "
				  "(sliding_attention, full_attention)", key, il, (int)type.len, type.data);
	}
	return LOOM_OK;
}

/* Which layers are windowed: Hugging Face's layer_types where the file
 * has them, else the pattern, a period or a list of flags. */
static loom_status read_window_layers(loom_model *m, int fmt)
{
	char key[256];
	const loom_meta_value *v = loom_model_hparam_value(m, fmt, LOOM_HP_LAYER_TYPES, key, sizeof(key));
	if (v != NULL)
		return window_layers_from_types(m, key, v);
	v = loom_model_hparam_value(m, fmt, LOOM_HP_SLIDING_WINDOW_PATTERN, key, sizeof(key));
	/* llama.cpp's list form of the pattern: a flag a layer, 1 windowed. */
	if (v != NULL && v->type == LOOM_META_ARRAY)
		return layer_flags_from_numbers(m, key, v, &m->hp.swa_layers);
	return count_or(m, fmt, LOOM_HP_SLIDING_WINDOW_PATTERN, 0, 0, &m->hp.swa_pattern);
}

/* Which layers have no RoPE: Hugging Face's no_rope_layers (0 for such a
 * layer) where the file has them, else every n-th by the interval. */
static loom_status read_rope_layers(loom_model *m, int fmt)
{
	char key[256];
	const loom_meta_value *v = loom_model_hparam_value(m, fmt, LOOM_HP_NO_ROPE_LAYERS, key, sizeof(key));
	if (v != NULL)
		return layer_flags_from_numbers(m, key, v, &m->hp.rope_layers);
	return count_or(m, fmt, LOOM_HP_NO_ROPE_LAYER_INTERVAL, 0, 0, &m->hp.nope_interval);
}

/* A mixture of experts' shape, where the file has experts. */
static loom_status read_experts(loom_model *m, int fmt)
{
	loom_hparams *hp = &m->hp;
	float norm;
	loom_status st;
	if ((st = count_or(m, fmt, LOOM_HP_N_EXPERT, 0, 0, &hp->n_expert)) != LOOM_OK || hp->n_expert == 0)
		return st;
	if (!m->contract->experts)
		return loom_error(LOOM_ERR_UNSUPPORTED, "the model has %" PRId64 " experts a layer; contract %s describes no "
				  "mixture of experts (block.experts)", hp->n_expert, m->contract->name);
	if ((st = require_hparam(m, fmt, LOOM_HP_N_EXPERT_USED, &hp->n_expert_used)) != LOOM_OK ||
	    (st = count_or(m, fmt, LOOM_HP_N_FF_EXPERT, 1, hp->n_ff, &hp->n_ff_exp)) != LOOM_OK ||
	    (st = count_or(m, fmt, LOOM_HP_N_DENSE_LAYERS, 0, 0, &hp->n_dense_layers)) != LOOM_OK ||
	    (st = count_or(m, fmt, LOOM_HP_N_EXPERT_SHARED, 0, 0, &hp->n_expert_shared)) != LOOM_OK ||
	    (st = float_or(m, fmt, LOOM_HP_EXPERT_WEIGHTS_NORM, 0.0, &norm)) != LOOM_OK ||
	    (st = float_or(m, fmt, LOOM_HP_EXPERT_WEIGHTS_SCALE, 1.0, &hp->expert_weights_scale)) != LOOM_OK)
		return st;
	int64_t func = 0;
	hp->expert_gating = m->contract->expert_gating;
	if ((st = count_or(m, fmt, LOOM_HP_EXPERT_GATING_FUNC, 1, loom_gating_func_number(hp->expert_gating), &func)) !=
	    LOOM_OK)
		return st;
	static const int gating_of[] = {-1, LOOM_GATING_SOFTMAX, LOOM_GATING_SIGMOID, LOOM_GATING_SOFTMAX_SELECTED};
	if (func > 3)
		return loom_error(LOOM_ERR_UNSUPPORTED, "expert gating function %" PRId64 " is not one loom knows (1 softmax, "
				  "2 sigmoid, 3 softmax of the chosen)", func);
	hp->expert_gating = gating_of[func];
	if (m->contract->selection_bias && hp->expert_gating != LOOM_GATING_SIGMOID)
		return loom_error(LOOM_ERR_UNSUPPORTED, "the model's experts are gated by function %" PRId64 "; contract %s "
				  "chooses them by sigmoid plus a bias (block.experts.selection_bias)", func,
				  m->contract->name);
	if (hp->n_expert_shared > 4096)
		return loom_error(LOOM_ERR_BAD_FORMAT, "%" PRId64 " shared experts is out of range", hp->n_expert_shared);
	if (hp->n_expert_shared > 0 && !m->contract->shared_expert)
		return loom_error(LOOM_ERR_UNSUPPORTED, "the model has %" PRId64 " shared experts; contract %s describes "
				  "none (block.experts.shared_expert)", hp->n_expert_shared, m->contract->name);
	/* Several shared experts run as one of their summed width, as their
	 * files store them. */
	const int64_t shared_width = hp->n_expert_shared > 0 ? hp->n_ff_exp * hp->n_expert_shared : hp->n_ff;
	if ((st = count_or(m, fmt, LOOM_HP_N_FF_SHARED, 1, shared_width, &hp->n_ff_shared)) != LOOM_OK)
		return st;
	hp->expert_weights_norm = norm != 0.0f;
	if (hp->n_dense_layers > hp->n_layer)
		return loom_error(LOOM_ERR_BAD_FORMAT, "n_dense_layers = %" PRId64 " (the leading dense layers) is past the "
				  "model's %" PRId64 " layers", hp->n_dense_layers, hp->n_layer);
	if (hp->n_expert < 0 || hp->n_expert > 4096 || hp->n_expert_used < 1 || hp->n_expert_used > hp->n_expert)
		return loom_error(LOOM_ERR_BAD_FORMAT, "%" PRId64 " experts a token out of %" PRId64 " is out of range",
				  hp->n_expert_used, hp->n_expert);
	if (hp->n_ff_exp < 1 || hp->n_dense_layers < 0 || !(hp->expert_weights_scale > 0.0f) ||
	    isinf(hp->expert_weights_scale))
		return loom_error(LOOM_ERR_BAD_FORMAT, "n_ff_expert = %" PRId64 ", n_dense_layers = %" PRId64
				  " or expert_weights_scale = %g is out of range",
				  hp->n_ff_exp, hp->n_dense_layers, (double)hp->expert_weights_scale);
	return LOOM_OK;
}

loom_status loom_model_read_hparams(loom_model *m)
{
	const int fmt = m->fmt;
	loom_hparams *hp = &m->hp;
	loom_status st;
	/* The depth first: defaults_by_layers pick by it. */
	if ((st = require_hparam(m, fmt, LOOM_HP_N_LAYER, &hp->n_layer)) != LOOM_OK ||
	    (st = require_hparam(m, fmt, LOOM_HP_N_EMBD, &hp->n_embd)) != LOOM_OK ||
	    (st = n_ff_from_tensor_if_absent(m, fmt, &hp->n_ff)) != LOOM_OK ||
	    (st = require_hparam(m, fmt, LOOM_HP_N_HEAD, &hp->n_head)) != LOOM_OK ||
	    (st = count_or(m, fmt, LOOM_HP_N_HEAD_KV, 1, hp->n_head, &hp->n_head_kv)) != LOOM_OK ||
	    (st = count_or(m, fmt, LOOM_HP_HEAD_DIM, 1, hp->n_embd / hp->n_head, &hp->head_dim)) != LOOM_OK ||
	    (st = n_rot_from_fraction(m, fmt, &hp->n_rot)) != LOOM_OK ||
	    (st = count_or(m, fmt, LOOM_HP_N_ROT, 1, hp->n_rot, &hp->n_rot)) != LOOM_OK ||
	    (st = require_hparam(m, fmt, LOOM_HP_N_CTX_TRAIN, &hp->n_ctx_train)) != LOOM_OK ||
	    (st = read_float_hparam(m, fmt, LOOM_HP_NORM_EPS, &hp->norm_eps)) != LOOM_OK)
		return st;
	if (m->contract->positions == LOOM_POSITIONS_ROPE &&
	    ((st = read_float_hparam(m, fmt, LOOM_HP_ROPE_THETA, &hp->rope_theta)) != LOOM_OK ||
	     (st = load_rope_scaling(m, fmt)) != LOOM_OK))
		return st;
	if ((st = float_or(m, fmt, LOOM_HP_FINAL_LOGIT_SOFTCAP, 0.0, &hp->final_logit_softcap)) != LOOM_OK ||
	    (st = float_or(m, fmt, LOOM_HP_EMBEDDING_MULT, 1.0, &hp->embedding_mult)) != LOOM_OK ||
	    (st = float_or(m, fmt, LOOM_HP_RESIDUAL_MULT, 1.0, &hp->residual_mult)) != LOOM_OK ||
	    (st = float_or(m, fmt, LOOM_HP_ATTENTION_MULT, 0.0, &hp->attention_mult)) != LOOM_OK ||
	    (st = float_or(m, fmt, LOOM_HP_LOGIT_SCALE, 1.0, &hp->logit_scale)) != LOOM_OK ||
	    (st = float_or(m, fmt, LOOM_HP_ATTENTION_SCALE_BASE, 0.0, &hp->attention_scale_base)) != LOOM_OK ||
	    (st = float_or(m, fmt, LOOM_HP_ATTN_LOGIT_SOFTCAP, 0.0, &hp->attn_logit_softcap)) != LOOM_OK ||
	    (st = count_or(m, fmt, LOOM_HP_SLIDING_WINDOW, 0, 0, &hp->n_swa)) != LOOM_OK ||
	    (st = read_window_layers(m, fmt)) != LOOM_OK || (st = read_rope_layers(m, fmt)) != LOOM_OK ||
	    (st = float_or(m, fmt, LOOM_HP_ROPE_THETA_SWA, 0.0, &hp->rope_theta_swa)) != LOOM_OK ||
	    (st = float_or(m, fmt, LOOM_HP_SWIGLU_ALPHA, 1.702, &hp->swiglu_alpha)) != LOOM_OK ||
	    (st = float_or(m, fmt, LOOM_HP_SWIGLU_LIMIT, 7.0, &hp->swiglu_limit)) != LOOM_OK ||
	    (st = float_or(m, fmt, LOOM_HP_LOGIT_MULT, 1.0, &hp->logit_mult)) != LOOM_OK ||
	    (st = read_experts(m, fmt)) != LOOM_OK)
		return st;
	const float mults[] = {hp->embedding_mult, hp->residual_mult, hp->logit_scale, hp->logit_mult};
	const loom_hparam mult_ids[] = {LOOM_HP_EMBEDDING_MULT, LOOM_HP_RESIDUAL_MULT, LOOM_HP_LOGIT_SCALE,
					LOOM_HP_LOGIT_MULT};
	for (int i = 0; i < 4; i++)
		if (!(mults[i] > 0.0f) || isinf(mults[i]))
			return loom_error(LOOM_ERR_BAD_FORMAT, "hyperparameter %s = %g must be positive and finite",
					  loom_hparam_name(mult_ids[i]), (double)mults[i]);
	if (!(hp->attention_mult >= 0.0f) || isinf(hp->attention_mult))
		return loom_error(LOOM_ERR_BAD_FORMAT, "hyperparameter attention_multiplier = %g must be 0 (none) or positive "
				  "and finite",
				  (double)hp->attention_mult);
	if (!(hp->attention_scale_base >= 0.0f) || isinf(hp->attention_scale_base))
		return loom_error(LOOM_ERR_BAD_FORMAT, "hyperparameter attention_scale_base = %g must be 0 (none) or positive "
				  "and finite",
				  (double)hp->attention_scale_base);
	if (hp->attention_mult > 0.0f && hp->attention_scale_base > 0.0f)
		return loom_error(LOOM_ERR_BAD_FORMAT, "the model gives both attention_multiplier and "
				  "attention_scale_base: which scales q.k is ambiguous");
	const float caps[] = {hp->final_logit_softcap, hp->attn_logit_softcap, hp->rope_theta_swa};
	const loom_hparam cap_ids[] = {LOOM_HP_FINAL_LOGIT_SOFTCAP, LOOM_HP_ATTN_LOGIT_SOFTCAP, LOOM_HP_ROPE_THETA_SWA};
	for (int i = 0; i < 3; i++)
		if (!(caps[i] >= 0.0f) || isinf(caps[i]))
			return loom_error(LOOM_ERR_BAD_FORMAT, "hyperparameter %s = %g must be 0 (none) or positive and finite",
					  loom_hparam_name(cap_ids[i]), (double)caps[i]);
	if (!isfinite(hp->swiglu_alpha) || !(hp->swiglu_limit > 0.0f) || isinf(hp->swiglu_limit))
		return loom_error(LOOM_ERR_BAD_FORMAT, "swiglu_alpha = %g or swiglu_limit = %g is out of range",
				  (double)hp->swiglu_alpha, (double)hp->swiglu_limit);
	if (hp->n_swa < 0 || hp->n_swa > INT32_MAX || hp->swa_pattern < 0 || hp->swa_pattern > 4096)
		return loom_error(LOOM_ERR_BAD_FORMAT,
				  "sliding_window = %" PRId64 " or sliding_window_pattern = %" PRId64 " is out of range",
				  hp->n_swa, hp->swa_pattern);
	/* A family whose contract windows its layers by default (Gemma's,
	 * gpt-oss's) keeps a window: a file's 0 would silently let those
	 * layers see the whole context. */
	if (hp->n_swa == 0 && m->contract->has_default[LOOM_HP_SLIDING_WINDOW] &&
	    m->contract->defaults[LOOM_HP_SLIDING_WINDOW] > 0)
		return loom_error(LOOM_ERR_BAD_FORMAT, "hyperparameter sliding_window = 0: this family's windowed layers "
				  "need a window of at least one position");
	if (hp->n_layer > 4096)
		return loom_error(LOOM_ERR_BAD_FORMAT, "n_layer = %" PRId64 " is implausible", hp->n_layer);
	if (hp->n_head_kv > hp->n_head || hp->n_head % hp->n_head_kv != 0)
		return loom_error(LOOM_ERR_BAD_FORMAT, "n_head (%" PRId64 ") is not a multiple of n_head_kv (%" PRId64 ")",
				  hp->n_head, hp->n_head_kv);
	int64_t head_dim_v;
	if ((st = count_or(m, fmt, LOOM_HP_HEAD_DIM_V, 1, hp->head_dim, &head_dim_v)) != LOOM_OK)
		return st;
	if (head_dim_v != hp->head_dim)
		return loom_error(LOOM_ERR_UNSUPPORTED, "value heads of %" PRId64 " differ from key heads of %" PRId64
				  "; loom's attention needs them equal", head_dim_v, hp->head_dim);
	if (hp->head_dim < 1 || hp->n_rot % 2 != 0 || hp->n_rot > hp->head_dim)
		return loom_error(LOOM_ERR_BAD_FORMAT, "n_rot = %" PRId64 " must be even and at most head_dim = %" PRId64,
				  hp->n_rot, hp->head_dim);
	return LOOM_OK;
}
