/*
 * cpu_norm.c - RMS_NORM and LAYER_NORM, a row at a time. Semantics are in
 * plugin_api.h.
 */
#include "cpu_backend.h"

#include "cpu_vec.h"

#include <math.h>

/* ---- RMS_NORM ---- */

static bool rms_norm_supports(const loom_node *node)
{
	const loom_tensor *x = node->src[0], *w = node->src[1], *y = node->dst;

	if (!loom_tensor_is(x, LOOM_DTYPE_F32) || !loom_tensor_is(y, LOOM_DTYPE_F32) ||
	    !loom_tensor_same_shape(x, y))
		return false;
	return w == NULL ||
	       (loom_tensor_is(w, LOOM_DTYPE_F32) && loom_tensor_is_vector(w) && w->ne[0] == x->ne[0]);
}

/* As ggml: squares summed in double, the mean rounded to f32, and the
 * weight applied as a separate f32 multiply. */
static void rms_norm_run(const loom_node *node, const cpu_task *task)
{
	const loom_tensor *x = node->src[0], *w = node->src[1], *y = node->dst;
	int64_t n = x->ne[0], lo, hi;
	float eps = node->fp[0];

	cpu_split(loom_tensor_nrows(x), task->ith, task->nth, &lo, &hi);
	for (int64_t r = lo; r < hi; r++) {
		const float *xr = cpu_row_f32(x, r);
		float mean = (float)(cpu_sum_squares(xr, n) / (double)n);
		float scale = 1.0f / sqrtf(mean + eps);
		cpu_scale_row(xr, scale, w != NULL ? w->data : NULL, cpu_row_f32(y, r), n);
	}
}

const cpu_op cpu_op_rms_norm = {.supports = rms_norm_supports, .run = rms_norm_run};

/* ---- LAYER_NORM ---- */

static bool is_row_param(const loom_tensor *p, int64_t n)
{
	return p == NULL || (loom_tensor_is(p, LOOM_DTYPE_F32) && loom_tensor_is_vector(p) && p->ne[0] == n);
}

static bool layer_norm_supports(const loom_node *node)
{
	const loom_tensor *x = node->src[0], *y = node->dst;

	return loom_tensor_is(x, LOOM_DTYPE_F32) && loom_tensor_is(y, LOOM_DTYPE_F32) && loom_tensor_same_shape(x, y) &&
	       is_row_param(node->src[1], x->ne[0]) && is_row_param(node->src[2], x->ne[0]);
}

/* As ggml's norm: the sum and the sum of squared deviations in double,
 * mean and variance rounded to f32; then ggml's separate mul and add. */
static void layer_norm_run(const loom_node *node, const cpu_task *task)
{
	const loom_tensor *x = node->src[0], *w = node->src[1], *b = node->src[2], *y = node->dst;
	int64_t n = x->ne[0], lo, hi;
	float eps = node->fp[0];

	cpu_split(loom_tensor_nrows(x), task->ith, task->nth, &lo, &hi);
	for (int64_t r = lo; r < hi; r++) {
		const float *xr = cpu_row_f32(x, r);
		float *yr = cpu_row_f32(y, r);
		double sum = 0.0, sum2 = 0.0;
		for (int64_t i = 0; i < n; i++)
			sum += xr[i];
		float mean = (float)(sum / (double)n);
		for (int64_t i = 0; i < n; i++) {
			float v = xr[i] - mean;
			yr[i] = v;
			sum2 += (double)(v * v);
		}
		float scale = 1.0f / sqrtf((float)(sum2 / (double)n) + eps);
		cpu_scale_row(yr, scale, NULL, yr, n);
		if (w != NULL)
			for (int64_t i = 0; i < n; i++)
				yr[i] *= ((const float *)w->data)[i];
		if (b != NULL)
			for (int64_t i = 0; i < n; i++)
				yr[i] += ((const float *)b->data)[i];
	}
}

const cpu_op cpu_op_layer_norm = {.supports = layer_norm_supports, .run = layer_norm_run};
