/* op_case.c - host tensors, cases and their random contents. */
#include "op_case.h"

#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

size_t ht_row_bytes(const htensor *t)
{
	return loom_dtype_row_bytes(t->dtype, t->ne[0]);
}

int64_t ht_rows(const htensor *t)
{
	return t->ne[1] * t->ne[2] * t->ne[3];
}

size_t ht_bytes(const htensor *t)
{
	return ht_row_bytes(t) * (size_t)ht_rows(t);
}

size_t ht_elements(const htensor *t)
{
	return (size_t)(t->ne[0] * ht_rows(t));
}

bool ht_present(const htensor *t)
{
	return t->ne[0] != 0;
}

htensor ht(loom_dtype type, int64_t ne0, int64_t ne1, int64_t ne2, int64_t ne3)
{
	htensor t = {.dtype = type, .ne = {ne0, ne1, ne2, ne3}};
	t.data = calloc(1, ht_bytes(&t) > 0 ? ht_bytes(&t) : 1);
	ck_assert(t.data != NULL);
	return t;
}

htensor ht_copy(const htensor *t)
{
	htensor c = ht(t->dtype, t->ne[0], t->ne[1], t->ne[2], t->ne[3]);
	memcpy(c.data, t->data, ht_bytes(t));
	return c;
}

void op_case_free(op_case *c)
{
	for (int i = 0; i < LOOM_NODE_MAX_SRC; i++)
		free(c->src[i].data);
	free(c->dst.data);
}

const char *dtype_name(loom_dtype t)
{
	return loom_dtype_traits_of(t).name;
}

void fill_normal(ref_rng *rng, float *x, size_t n, double scale)
{
	/* Both of Box-Muller's values from each pair of uniforms, in float:
	 * the suites draw millions, and the logarithm and the sine and cosine
	 * are most of their cost. */
	for (size_t i = 0; i < n; i += 2) {
		float u1 = (float)ref_rng_uniform(rng, 0x1p-24, 1.0), u2 = (float)ref_rng_uniform(rng, 0.0, 1.0);
		float r = (float)scale * sqrtf(-2.0f * logf(u1)), a = 2.0f * (float)M_PI * u2;
		x[i] = r * cosf(a);
		if (i + 1 < n)
			x[i + 1] = r * sinf(a);
	}
}

htensor random_weights(ref_rng *rng, loom_dtype type, int64_t ne0, int64_t ne1, double s)
{
	htensor t = ht(type, ne0, ne1, 1, 1);
	size_t n = ht_elements(&t);

	if (ref_block_elems(type) > 0) {
		ref_random_blocks(rng, type, t.data, n / (size_t)ref_block_elems(type));
		return t;
	}
	if (type == LOOM_DTYPE_F32) {
		fill_normal(rng, ht_f32(&t), n, s);
		return t;
	}
	float *x = malloc(n * sizeof(float));
	ck_assert(x != NULL);
	fill_normal(rng, x, n, s);
	for (size_t i = 0; i < n; i++)
		ht_u16(&t)[i] = type == LOOM_DTYPE_F16 ? ref_f32_to_fp16(x[i]) : ref_f32_to_bf16(x[i]);
	free(x);
	return t;
}

float awkward_f32(ref_rng *rng)
{
	uint32_t u;
	float f;

	switch (ref_rng_below(rng, 6)) {
	case 0: /* any bit pattern */
		u = (uint32_t)ref_rng_next(rng);
		break;
	case 1: /* an fp16 value plus exactly half its ulp (a tie) */
		u = (uint32_t)(ref_rng_below(rng, 0x7c00) | ref_rng_below(rng, 2) << 15);
		f = ref_fp16_to_f32((uint16_t)u);
		memcpy(&u, &f, 4);
		u |= 1u << 12;
		break;
	case 2: /* fp16 subnormal range */
		f = (float)ref_rng_uniform(rng, -0x1p-14, 0x1p-14);
		memcpy(&u, &f, 4);
		break;
	case 3: /* near the top of fp16's range */
		f = (float)ref_rng_uniform(rng, 65000.0, 66000.0);
		memcpy(&u, &f, 4);
		break;
	default:
		f = (float)ref_rng_normal(rng);
		memcpy(&u, &f, 4);
		break;
	}
	memcpy(&f, &u, 4);
	return f;
}

void pick_cells(ref_rng *rng, int32_t *out, int64_t nt, int64_t n_cells)
{
	int32_t *cells = malloc(sizeof(int32_t) * (size_t)n_cells);

	ck_assert(cells != NULL);
	for (int64_t i = 0; i < n_cells; i++)
		cells[i] = (int32_t)i;
	for (int64_t i = 0; i < nt; i++) {
		int64_t j = i + ref_rng_below(rng, n_cells - i);
		int32_t tmp = cells[i];
		cells[i] = cells[j];
		cells[j] = tmp;
		out[i] = cells[i];
	}
	free(cells);
}

op_case batched_decode_case(ref_rng *rng, loom_dtype cache_type, int64_t n_head, int64_t n_head_kv)
{
	const int64_t n_kv = BATCHED_SEQS * (BATCHED_PROMPT + BATCHED_GEN), hd = BATCHED_HEAD_DIM;
	op_case c = {.op = LOOM_OP_ATTENTION, .ip = {(int32_t)n_head, (int32_t)n_head_kv},
		     .fp = {(float)(1.0 / sqrt((double)hd))}};

	c.src[0] = ht(LOOM_DTYPE_F32, hd, n_head, BATCHED_SEQS, 1);
	fill_normal(rng, ht_f32(&c.src[0]), ht_elements(&c.src[0]), 1.0);
	c.src[1] = random_weights(rng, cache_type, hd * n_head_kv, n_kv, 1.0);
	c.src[2] = random_weights(rng, cache_type, hd * n_head_kv, n_kv, 1.0);
	c.src[3] = ht(LOOM_DTYPE_F32, n_kv, BATCHED_SEQS, 1, 1);
	for (int64_t t = 0; t < BATCHED_SEQS; t++)
		for (int64_t j = 0; j < n_kv; j++) {
			int64_t owner = j < BATCHED_SEQS * BATCHED_PROMPT ? j / BATCHED_PROMPT
									 : (j - BATCHED_SEQS * BATCHED_PROMPT) % BATCHED_SEQS;
			ht_f32(&c.src[3])[t * n_kv + j] = owner == t ? 0.0f : -INFINITY;
		}
	c.dst = ht(LOOM_DTYPE_F32, hd * n_head, BATCHED_SEQS, 1, 1);
	snprintf(c.what, sizeof(c.what), "ATTENTION batched decode %s heads %lld/%lld", dtype_name(cache_type),
		 (long long)n_head, (long long)n_head_kv);
	return c;
}

float ht_value(const htensor *t, int64_t r, int64_t i)
{
	const char *row = (const char *)t->data + r * ht_row_bytes(t);

	switch (t->dtype) {
	case LOOM_DTYPE_F16:
		return ref_fp16_to_f32(((const uint16_t *)row)[i]);
	case LOOM_DTYPE_BF16:
		return ref_bf16_to_f32(((const uint16_t *)row)[i]);
	case LOOM_DTYPE_F32:
		return ((const float *)row)[i];
	default:
		return ref_quant_value(t->dtype, (const uint8_t *)row, i);
	}
}

void ht_row_values(const htensor *t, int64_t r, float *out)
{
	if (ref_block_elems(t->dtype) > 0) {
		ref_quant_row(t->dtype, (const uint8_t *)t->data + r * ht_row_bytes(t), t->ne[0], out);
		return;
	}
	for (int64_t i = 0; i < t->ne[0]; i++)
		out[i] = ht_value(t, r, i);
}

bool grid_next(int *idx, const int *sizes, int n)
{
	for (int k = n - 1; k >= 0; k--) {
		if (++idx[k] < sizes[k])
			return true;
		idx[k] = 0;
	}
	return false;
}
