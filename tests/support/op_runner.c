/* op_runner.c - a case through a backend plugin, and the checks of what
 * comes back. */
#include "op_runner.h"

#include "plugin_host.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

uint32_t op_last_repack_layout;

void op_place(const op_backend *b, void *be, const htensor *h, size_t pad, dtensor *d)
{
	size_t rb = ht_row_bytes(h), total;
	loom_dtype_traits l = loom_dtype_traits_of(h->dtype);
	unsigned char *image;

	d->stride = rb + pad;
	total = OP_GUARD + d->stride * (size_t)ht_rows(h) + OP_GUARD;
	image = malloc(total);
	ck_assert(image != NULL);
	memset(image, OP_SENTINEL, total);
	for (int64_t r = 0; r < ht_rows(h); r++)
		memcpy(image + OP_GUARD + r * d->stride, (const char *)h->data + r * rb, rb);
	ck_assert_msg(b->vt->buffer_alloc(be, total, &d->buf) == LOOM_OK, "%s: buffer_alloc(%zu): %s", b->name, total,
		      test_plugin_error());
	ck_assert_msg(b->vt->buffer_upload(be, &d->buf, 0, image, total) == LOOM_OK, "%s: upload", b->name);
	free(image);
	d->t = (loom_tensor){
		.dtype = h->dtype,
		.ne = {h->ne[0], h->ne[1], h->ne[2], h->ne[3]},
		.nb = {l.block_bytes, d->stride, d->stride * h->ne[1], d->stride * h->ne[1] * h->ne[2]},
		.data = (char *)d->buf.base + OP_GUARD,
	};
}

static size_t first_not_sentinel(const unsigned char *image, size_t lo, size_t hi, size_t none)
{
	for (size_t i = lo; i < hi; i++)
		if (image[i] != OP_SENTINEL)
			return i;
	return none;
}

void op_fetch(const op_backend *b, void *be, const dtensor *d, const htensor *h, void *out, const char *what)
{
	size_t rb = ht_row_bytes(h), total = d->buf.size, body_end = OP_GUARD + d->stride * (size_t)ht_rows(h);
	unsigned char *image = malloc(total);

	ck_assert(image != NULL);
	ck_assert_msg(b->vt->buffer_download(be, &d->buf, 0, image, total) == LOOM_OK, "%s: download", b->name);
	/* Assertions are costly in Check's fork mode: find, then assert once.
	 * Only the bytes around the rows are looked at: the guard before,
	 * each row's padding, the guard after. */
	size_t bad = first_not_sentinel(image, 0, OP_GUARD, total);
	for (int64_t r = 0; r < ht_rows(h) && bad == total; r++)
		bad = first_not_sentinel(image, OP_GUARD + (size_t)r * d->stride + rb,
					 OP_GUARD + (size_t)(r + 1) * d->stride, total);
	if (bad == total)
		bad = first_not_sentinel(image, body_end, total, total);
	ck_assert_msg(bad == total, "%s on %s: guard byte %zu of a %zu-byte buffer (data at %d..%zu) overwritten", what,
		      b->name, bad, total, OP_GUARD, body_end);
	if (out != NULL)
		for (int64_t r = 0; r < ht_rows(h); r++)
			memcpy((char *)out + r * rb, image + OP_GUARD + r * d->stride, rb);
	free(image);
}

/* A descriptor of h with packed strides and no memory: enough for
 * supports(). */
static loom_tensor descriptor(const htensor *h)
{
	loom_dtype_traits l = loom_dtype_traits_of(h->dtype);
	size_t rb = ht_row_bytes(h);
	return (loom_tensor){.dtype = h->dtype,
			     .ne = {h->ne[0], h->ne[1], h->ne[2], h->ne[3]},
			     .nb = {l.block_bytes, rb, rb * h->ne[1], rb * h->ne[1] * h->ne[2]}};
}

bool op_supported(const op_backend *b, const op_case *c)
{
	loom_tensor src[LOOM_NODE_MAX_SRC], dst = descriptor(&c->dst);
	loom_node node = {.op = c->op, .dst = &dst};

	for (int i = 0; i < LOOM_NODE_MAX_SRC; i++) {
		if (ht_present(&c->src[i])) {
			src[i] = descriptor(&c->src[i]);
			node.src[i] = &src[i];
		}
	}
	if (c->in_place)
		node.dst = node.src[0];
	memcpy(node.ip, c->ip, sizeof(node.ip));
	memcpy(node.fp, c->fp, sizeof(node.fp));
	return b->vt->supports(b->be[0], &node);
}

void op_run(const op_backend *b, int k, const op_case *c, size_t pad, void *out)
{
	void *be = b->be[k];
	dtensor src[LOOM_NODE_MAX_SRC] = {0}, dst = {0};
	loom_node node = {.op = c->op};
	loom_graph graph = {.n_nodes = 1, .nodes = &node};
	loom_status st;

	for (int i = 0; i < LOOM_NODE_MAX_SRC; i++) {
		if (!ht_present(&c->src[i]))
			continue;
		op_place(b, be, &c->src[i], pad, &src[i]);
		node.src[i] = &src[i].t;
	}
	if (c->in_place) {
		node.dst = &src[0].t;
	} else {
		op_place(b, be, &c->dst, pad, &dst);
		node.dst = &dst.t;
	}
	memcpy(node.ip, c->ip, sizeof(node.ip));
	memcpy(node.fp, c->fp, sizeof(node.fp));
	loom_buffer packed = {0};
	loom_tensor repacked;
	if (c->repack && LOOM_VT_HAS(b->vt, weight_repack)) {
		uint32_t layout = 0;
		st = b->vt->weight_repack(be, &src[0].t, &packed, &layout);
		ck_assert_msg(st == LOOM_OK || st == LOOM_ERR_UNSUPPORTED, "%s on %s: weight_repack: %d", c->what,
			      b->name, st);
		op_last_repack_layout = st == LOOM_OK ? layout : 0;
		if (st == LOOM_OK) {
			ck_assert_msg(layout != 0, "%s on %s: repacked into layout 0", c->what, b->name);
			repacked = src[0].t;
			repacked.data = packed.base;
			repacked.layout = layout;
			node.src[0] = &repacked;
		}
	}
	ck_assert_msg(b->vt->supports(be, &node), "%s%s on %s: supports() refused it", c->what,
		      pad ? " (padded rows)" : "", b->name);
	test_clear_error();
	st = b->vt->compute(be, &graph);
	if (packed.base != NULL)
		b->vt->buffer_free(be, &packed);
	ck_assert_msg(st == LOOM_OK, "%s on %s: compute failed (%d): %s", c->what, b->name, st, test_plugin_error());
	for (int i = 0; i < LOOM_NODE_MAX_SRC; i++) {
		if (!ht_present(&c->src[i]))
			continue;
		op_fetch(b, be, &src[i], &c->src[i], i == 0 && c->in_place ? out : NULL, c->what);
		b->vt->buffer_free(be, &src[i].buf);
	}
	if (!c->in_place) {
		op_fetch(b, be, &dst, &c->dst, out, c->what);
		b->vt->buffer_free(be, &dst.buf);
	}
}

static void *new_output(const op_case *c)
{
	void *out = malloc(ht_bytes(&c->dst) > 0 ? ht_bytes(&c->dst) : 1);
	ck_assert(out != NULL);
	return out;
}

void op_outputs(const op_backend *b, const op_case *c, void *out[2])
{
	out[0] = new_output(c);
	out[1] = new_output(c);
	op_run(b, 0, c, 0, out[0]);
	op_run(b, 1, c, OP_ROW_PAD, out[1]);
	if (b->deterministic) {
		ck_assert_msg(memcmp(out[0], out[1], ht_bytes(&c->dst)) == 0,
			      "%s on %s: 2 threads (padded rows) differ from 1 thread", c->what, b->name);
		free(out[1]);
		out[1] = NULL;
	}
}

void *op_exercise(const op_backend *b, const op_case *c)
{
	void *out = new_output(c);
	op_run(b, 0, c, 0, out);
	return out;
}

void op_check_close(const op_backend *b, const op_case *c, const float *got, const double *ref, const double *norm2,
		    double tol)
{
	size_t n = ht_elements(&c->dst);
	int64_t bad = ref_first_nonfinite(got, n);
	double err = 0.0, norm = 0.0;

	ck_assert_msg(bad < 0, "%s on %s: element %lld is %g", c->what, b->name, (long long)bad,
		      bad < 0 ? 0.0 : got[bad]);
	for (size_t i = 0; i < n; i++) {
		double d = (double)got[i] - ref[i];
		err += d * d;
		norm += norm2 != NULL ? norm2[i] : ref[i] * ref[i];
	}
	double e = norm > 0.0 ? err / norm : err;
	ck_assert_msg(e <= tol, "%s on %s: nmse %.3g against the reference exceeds %.1g", c->what, b->name, e, tol);
}

static bool fp16_nan(const unsigned char *p)
{
	uint16_t h;
	memcpy(&h, p, 2);
	return (h & 0x7c00) == 0x7c00 && (h & 0x03ff) != 0;
}

void op_check_bytes(const op_backend *b, const op_case *c, const void *got, const void *want, bool any_nan16)
{
	const unsigned char *g = got, *w = want;
	size_t bytes = ht_bytes(&c->dst), i = 0;

	while (i < bytes) {
		if (any_nan16 && i % 2 == 0 && fp16_nan(g + i) && fp16_nan(w + i)) {
			i += 2;
			continue;
		}
		if (g[i] != w[i])
			break;
		i++;
	}
	ck_assert_msg(i == bytes, "%s on %s: byte %zu of %zu is %#x, expected %#x", c->what, b->name, i, bytes,
		      i < bytes ? g[i] : 0, i < bytes ? w[i] : 0);
}

void op_expect_close(const op_backend *b, const op_case *c, const double *ref, const double *norm2, double tol)
{
	void *out[2];

	op_outputs(b, c, out);
	for (int k = 0; k < 2; k++)
		if (out[k] != NULL)
			op_check_close(b, c, out[k], ref, norm2, tol);
	free(out[0]);
	free(out[1]);
}

void op_expect_bytes(const op_backend *b, const op_case *c, const void *want, bool any_nan16)
{
	void *out[2];

	op_outputs(b, c, out);
	for (int k = 0; k < 2; k++)
		if (out[k] != NULL)
			op_check_bytes(b, c, out[k], want, any_nan16);
	free(out[0]);
	free(out[1]);
}
