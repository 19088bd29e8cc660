/* op_reference.c - MATMUL, MATMUL_ID and ATTENTION in double arithmetic. */
#include "op_reference.h"

#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* The activation as the dot product sees it for F32, F16 and BF16 weights. */
static void round_activations(loom_dtype type, const float *x, int64_t n, double *out)
{
	for (int64_t i = 0; i < n; i++)
		out[i] = type == LOOM_DTYPE_F16 ? ref_round_fp16(x[i])
			 : type == LOOM_DTYPE_BF16 ? ref_round_bf16(x[i])
						   : x[i];
}

/* Per output, the sums over i of |w[o][i] * x[t][i]| (into mag) and of
 * its square (into energy); either may be NULL. */
static void matmul_sizes(const op_case *c, double *mag, double *energy)
{
	const htensor *w = &c->src[0], *x = &c->src[1];
	int64_t n = w->ne[0], n_out = w->ne[1], n_tok = x->ne[1];
	double *wd = malloc(sizeof(double) * (size_t)(n * n_out)), *xd = malloc(sizeof(double) * (size_t)n);
	float *wo = malloc(sizeof(float) * (size_t)n);

	ck_assert(wd != NULL && xd != NULL && wo != NULL);
	for (int64_t o = 0; o < n_out; o++) {
		ht_row_values(w, o, wo);
		for (int64_t i = 0; i < n; i++)
			wd[o * n + i] = fabs((double)wo[i]);
	}
	for (int64_t t = 0; t < n_tok; t++) {
		for (int64_t i = 0; i < n; i++)
			xd[i] = fabs((double)ht_f32(x)[t * n + i]);
		for (int64_t o = 0; o < n_out; o++) {
			double m = 0.0, e = 0.0;
			for (int64_t i = 0; i < n; i++) {
				double p = wd[o * n + i] * xd[i];
				m += p;
				e += p * p;
			}
			if (mag != NULL)
				mag[t * n_out + o] = m;
			if (energy != NULL)
				energy[t * n_out + o] = e;
		}
	}
	free(wo);
	free(xd);
	free(wd);
}

void matmul_reference(const op_case *c, double *ref, double *mag, double *energy)
{
	const htensor *w = &c->src[0], *x = &c->src[1];
	int64_t n = w->ne[0], n_out = w->ne[1], n_tok = x->ne[1];
	bool quant = ref_block_elems(w->dtype) > 0;
	loom_dtype act = ref_act_type(w->dtype);
	double *xr = malloc(sizeof(double) * (size_t)n);
	uint8_t *xq = malloc(quant ? loom_dtype_row_bytes(act, n) : 1);
	/* The weights decoded once: float rows as f32, quantized rows as
	 * blocks of small integers and scales. */
	int64_t per = quant ? ref_block_elems(w->dtype) : 1;
	size_t block_bytes = quant ? ref_block_bytes(w->dtype) : 0;
	float *wf = malloc(quant ? 1 : sizeof(float) * (size_t)(n * n_out));
	ref_qblock *wb = malloc(quant ? sizeof(ref_qblock) * (size_t)(n / per * n_out) : 1);

	ck_assert(xr != NULL && xq != NULL && wf != NULL && wb != NULL);
	for (int64_t o = 0; !quant && o < n_out; o++)
		ht_row_values(w, o, wf + o * n);
	for (int64_t k = 0; quant && k < n / per * n_out; k++)
		ref_decode_block(w->dtype, (const uint8_t *)w->data + (size_t)k * block_bytes, &wb[k]);
	for (int64_t t = 0; t < n_tok; t++) {
		const float *xt = ht_f32(x) + t * n;
		if (quant)
			ref_quantize_act(act, xt, xq, n);
		else
			round_activations(w->dtype, xt, n, xr);
		for (int64_t o = 0; o < n_out; o++) {
			double sum = 0.0;
			if (quant)
				sum = ref_decoded_dot(w->dtype, wb + o * (n / per), xq, n);
			else
				for (int64_t i = 0; i < n; i++)
					sum += (double)wf[o * n + i] * xr[i];
			ref[t * n_out + o] = sum;
		}
	}
	free(wf);
	free(wb);
	free(xr);
	free(xq);
	if (mag != NULL || energy != NULL)
		matmul_sizes(c, mag, energy);
}

void matmul_id_reference(const op_case *c, double *ref, double *mag, double *energy)
{
	const htensor *w = &c->src[0], *x = &c->src[1], *ids = &c->src[2];
	int64_t n = w->ne[0], n_out = w->ne[1], k = ids->ne[0], n_pairs = k * ids->ne[1];
	size_t matrix_bytes = ht_row_bytes(w) * (size_t)n_out;
	float *rows = malloc(sizeof(float) * (size_t)(n * n_pairs));
	int64_t *pairs = malloc(sizeof(int64_t) * (size_t)n_pairs);
	double *r = malloc(sizeof(double) * (size_t)(n_out * n_pairs)), *m = malloc(sizeof(double) * (size_t)(n_out * n_pairs));
	double *e = malloc(sizeof(double) * (size_t)(n_out * n_pairs));
	ck_assert(rows != NULL && pairs != NULL && r != NULL && m != NULL && e != NULL);

	/* Each expert's rows together, through matmul_reference. */
	for (int64_t expert = 0; expert < w->ne[2]; expert++) {
		int64_t count = 0;
		for (int64_t p = 0; p < n_pairs; p++) {
			if (ht_i32(ids)[p] != expert)
				continue;
			int64_t j = x->ne[1] == 1 ? 0 : p % k;
			memcpy(rows + count * n, ht_f32(x) + (p / k * x->ne[1] + j) * n, sizeof(float) * (size_t)n);
			pairs[count++] = p;
		}
		if (count == 0)
			continue;
		op_case sub = {.op = LOOM_OP_MATMUL};
		sub.src[0] = (htensor){.dtype = w->dtype, .ne = {n, n_out, 1, 1},
				       .data = (char *)w->data + (size_t)expert * matrix_bytes};
		sub.src[1] = (htensor){.dtype = LOOM_DTYPE_F32, .ne = {n, count, 1, 1}, .data = rows};
		matmul_reference(&sub, r, mag != NULL ? m : NULL, energy != NULL ? e : NULL);
		for (int64_t i = 0; i < count; i++)
			for (int64_t o = 0; o < n_out; o++) {
				double b = ht_present(&c->src[3]) ? ht_f32(&c->src[3])[expert * n_out + o] : 0.0;
				ref[pairs[i] * n_out + o] = r[i * n_out + o] + b;
				if (mag != NULL)
					mag[pairs[i] * n_out + o] = m[i * n_out + o];
				if (energy != NULL)
					energy[pairs[i] * n_out + o] = e[i * n_out + o];
			}
	}
	free(rows);
	free(pairs);
	free(r);
	free(m);
	free(e);
}

/* The query row qv (hd elements) as the cache type meets it: rounded to
 * fp16 for an F16 cache (into qr), quantized to Q8_0 for a Q8_0 or Q4_0
 * cache (into xq, then integer dot products per block), as is for F32. */
static void attention_query(const htensor *k, const float *qv, int64_t hd, double *qr, uint8_t *xq)
{
	if (ref_block_elems(k->dtype) > 0)
		ref_quantize_act(LOOM_DTYPE_Q8_0, qv, xq, hd);
	for (int64_t d = 0; d < hd; d++)
		qr[d] = k->dtype == LOOM_DTYPE_F16 ? ref_round_fp16(qv[d]) : qv[d];
}

/* Score of the prepared query against kv head g of cache row j; kf holds
 * the cache's rows as f32 (unused for a quantized cache). */
static double attention_score(const htensor *k, const float *kf, const double *qr, const uint8_t *xq, int64_t hd,
			      int64_t g, int64_t j)
{
	double dot = 0.0;

	if (ref_block_elems(k->dtype) > 0) {
		const uint8_t *row = (const uint8_t *)k->data + j * ht_row_bytes(k) +
				     (size_t)(g * hd / 32) * loom_dtype_traits_of(k->dtype).block_bytes;
		return ref_quant_dot(k->dtype, row, xq, hd);
	}
	for (int64_t d = 0; d < hd; d++)
		dot += qr[d] * kf[j * k->ne[0] + g * hd + d];
	return dot;
}

/* The softmax's probabilities weight the values unrounded, as in a flash
 * attention (llama.cpp's non-flash path rounds them to fp16 for an F16 V
 * cache; the difference is below the F16 tolerance of the suites). */
void attention_reference(const op_case *c, double *ref)
{
	const htensor *q = &c->src[0], *k = &c->src[1], *vv = &c->src[2], *m = &c->src[3], *sinks = &c->src[4];
	const double cap = c->fp[1];
	int64_t hd = q->ne[0], nh = q->ne[1], nt = q->ne[2], n_kv = k->ne[1];
	int64_t group = c->ip[0] / c->ip[1];
	double *s = malloc(sizeof(double) * (size_t)n_kv), *qr = malloc(sizeof(double) * (size_t)hd);
	uint8_t *xq = malloc((size_t)(hd / 32 + 1) * REF_Q8_0_BLOCK_BYTES);
	/* The keys and values as f32, each row decoded once. */
	float *kf = malloc(sizeof(float) * (size_t)(n_kv * k->ne[0]));
	float *vf = malloc(sizeof(float) * (size_t)(n_kv * vv->ne[0]));
	ck_assert(s != NULL && qr != NULL && xq != NULL && kf != NULL && vf != NULL);
	for (int64_t j = 0; j < n_kv; j++) {
		ht_row_values(k, j, kf + j * k->ne[0]);
		ht_row_values(vv, j, vf + j * vv->ne[0]);
	}

	for (int64_t t = 0; t < nt; t++) {
		for (int64_t h = 0; h < nh; h++) {
			int64_t g = h / group;
			double max = -INFINITY, sum = 0.0;
			double *out = ref + t * nh * hd + h * hd;
			attention_query(k, ht_f32(q) + (t * nh + h) * hd, hd, qr, xq);
			for (int64_t j = 0; j < n_kv; j++) {
				double mv = ht_present(m) ? ht_f32(m)[t * n_kv + j] : 0.0;
				double score = mv == -INFINITY ? 0.0 : attention_score(k, kf, qr, xq, hd, g, j) * c->fp[0];
				if (cap > 0.0)
					score = cap * tanh(score / cap);
				s[j] = mv == -INFINITY ? -INFINITY : score + mv;
				max = fmax(max, s[j]);
			}
			for (int64_t d = 0; d < hd; d++)
				out[d] = 0.0;
			if (max == -INFINITY)
				continue;
			if (ht_present(sinks))
				max = fmax(max, ht_f32(sinks)[h]);
			for (int64_t j = 0; j < n_kv; j++)
				sum += s[j] = exp(s[j] - max);
			if (ht_present(sinks))
				sum += exp(ht_f32(sinks)[h] - max);
			for (int64_t j = 0; j < n_kv; j++) {
				if (s[j] == 0.0)
					continue;
				for (int64_t d = 0; d < hd; d++)
					out[d] += s[j] / sum * vf[j * vv->ne[0] + g * hd + d];
			}
		}
	}
	free(s);
	free(qr);
	free(xq);
	free(kf);
	free(vf);
}
