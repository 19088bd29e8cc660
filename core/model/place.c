/* place.c - the bound weights moved into backend memory: the file's
 * mapping used in place where the backend takes host memory, else the
 * file's tensors uploaded into one buffer; bind's host copies uploaded
 * each into a buffer of its own; every weight pointed at its new address;
 * then the matrices offered to the backend's own layouts. File pages the
 * backend has its own copy of are handed back to the format plugin to
 * drop. */
#include "model/place.h"

#include "model/bind.h"
#include "model/meta.h"
#include "runtime/clock.h"
#include "runtime/error.h"
#include "runtime/format.h"
#include "runtime/log.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* Uploaded tensors start at multiples of this. */
#define WEIGHT_ALIGN 64

static size_t aligned(size_t n)
{
	return (n + WEIGHT_ALIGN - 1) & ~(size_t)(WEIGHT_ALIGN - 1);
}

/* Bytes of bind's host copies, each placed in a buffer of its own. */
static size_t copies_bytes(const loom_model *m)
{
	size_t n = 0;
	for (size_t k = 0; k < m->n_copies; k++)
		n += m->copies[k].size;
	return n;
}

/* Brings every page of [p, p + n) into memory, in one call where the
 * kernel can: reading is then timed apart from repacking, and costs no
 * page fault per page. */
static void touch_pages(const void *p, size_t n)
{
	uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE), lo = (uintptr_t)p / page * page;
	if (n == 0 || madvise((void *)lo, (uintptr_t)p + n - lo, MADV_POPULATE_READ) == 0)
		return;
	const volatile char *at = p;
	for (size_t i = 0; i < n; i += page)
		(void)at[i];
}

/* The file's tensors in backend memory: the mapping itself where the
 * backend can use host memory (*offsets stays NULL), else one buffer
 * holding tensor i at (*offsets)[i], in file order. */
static loom_status place_file(loom_model *m, size_t **offsets)
{
	const loom_backend *be = &m->rt->backend;
	const loom_model_file *f = m->file;
	*offsets = NULL;
	if (f->mapping != NULL && loom_backend_wrap_host(be, (void *)f->mapping, f->mapping_size, &m->weights) == LOOM_OK)
		return LOOM_OK;
	size_t *off = malloc((f->n_tensors + 1) * sizeof(*off)), total = 0;
	if (off == NULL)
		return loom_error(LOOM_ERR_NO_MEMORY, "out of memory");
	*offsets = off;
	for (uint64_t i = 0; i < f->n_tensors; i++) {
		off[i] = total;
		total += aligned(f->tensors[i].n_bytes);
	}
	loom_status st = loom_backend_fits(be, total + copies_bytes(m), "the weights");
	if (st != LOOM_OK)
		return st;
	st = loom_backend_alloc(be, total ? total : WEIGHT_ALIGN, &m->weights);
	if (st != LOOM_OK)
		return loom_error_wrap(st, "placing the weights");
	m->weights_allocated = true;
	for (uint64_t i = 0; i < f->n_tensors; i++) {
		const loom_file_tensor *ft = &f->tensors[i];
		double t0 = loom_now_s();
		touch_pages(ft->data, ft->n_bytes);
		double t1 = loom_now_s();
		if ((st = loom_backend_upload(be, &m->weights, off[i], ft->data, ft->n_bytes)) != LOOM_OK)
			return loom_error_wrap(st, "placing tensor %.*s", (int)ft->name.len, ft->name.data);
		m->load_times.read += t1 - t0;
		m->load_times.upload += loom_now_s() - t1;
		/* The backend holds its own copy now. */
		if (f == m->opened) {
			loom_format_release(m->format, m->opened, ft->data, ft->n_bytes);
			m->released_bytes += ft->n_bytes;
		}
	}
	return LOOM_OK;
}

/* Each host copy bind.c made, in a backend buffer of its own. */
static loom_status place_copies(loom_model *m)
{
	const loom_backend *be = &m->rt->backend;
	m->owned = calloc(m->n_copies + 1, sizeof(*m->owned));
	if (m->owned == NULL)
		return loom_error(LOOM_ERR_NO_MEMORY, "out of memory");
	for (size_t k = 0; k < m->n_copies; k++) {
		const loom_host_copy *c = &m->copies[k];
		loom_status st = loom_backend_alloc(be, c->size ? c->size : 1, &m->owned[k]);
		if (st == LOOM_OK)
			m->n_owned++;
		if (st == LOOM_OK)
			st = loom_backend_upload(be, &m->owned[k], 0, c->data, c->size);
		if (st != LOOM_OK)
			return loom_error_wrap(st, "placing a weight of %zu bytes", c->size);
	}
	return LOOM_OK;
}

/* Where host address p, as bind.c left it, now lives in backend memory. */
static void *placed(const loom_model *m, const size_t *offsets, const void *p)
{
	const char *at = p;
	for (size_t k = 0; k < m->n_copies; k++) {
		const char *copy = m->copies[k].data;
		if (at >= copy && at < copy + m->copies[k].size)
			return (char *)m->owned[k].base + (at - copy);
	}
	const loom_model_file *f = m->file;
	if (offsets == NULL)
		return (char *)m->weights.base + (at - (const char *)f->mapping);
	for (uint64_t i = 0; i < f->n_tensors; i++) {
		const char *data = f->tensors[i].data;
		if (at >= data && at < data + f->tensors[i].n_bytes)
			return (char *)m->weights.base + offsets[i] + (at - data);
	}
	return NULL;
}

/* Points every bound weight at its place; frees bind's host copies. */
static void move_tensors(loom_model *m, const size_t *offsets)
{
	loom_tensor *model_tensors[] = {&m->token_embd, &m->pos_embd, &m->output_norm, &m->output_norm_b,
					&m->output,	&m->output_b,	&m->rope_freqs, &m->rope_factors_long,
					&m->rope_factors_short};
	for (size_t i = 0; i < sizeof(model_tensors) / sizeof(model_tensors[0]); i++)
		if (model_tensors[i]->data != NULL)
			model_tensors[i]->data = placed(m, offsets, model_tensors[i]->data);
	for (int il = 0; il < m->hp.n_layer; il++) {
		loom_weight_slot slots[LOOM_ROLE_COUNT];
		const int n = loom_layer_slots(m, il, &m->layers[il], slots);
		for (int i = 0; i < n; i++)
			if (slots[i].t->data != NULL)
				slots[i].t->data = placed(m, offsets, slots[i].t->data);
	}
	for (size_t k = 0; k < m->n_copies; k++)
		free(m->copies[k].data);
	free(m->copies);
	m->copies = NULL;
	m->n_copies = m->cap_copies = 0;
}

static size_t tensor_bytes(const loom_tensor *t)
{
	return loom_dtype_row_bytes(t->dtype, t->ne[0]) * (size_t)(t->ne[1] * t->ne[2] * t->ne[3]);
}

/* Whether p points into the opened file's mapping, used in place. */
static bool in_mapping(const loom_model *m, const void *p)
{
	const char *at = p, *map = m->file->mapping;
	return !m->weights_allocated && m->file == m->opened && map != NULL && at >= map &&
	       at < map + m->file->mapping_size;
}

/* Index of the file tensor whose bytes start at p, or -1. */
static int64_t file_tensor_at(const loom_model *m, const void *p)
{
	for (uint64_t i = 0; i < m->file->n_tensors; i++)
		if (m->file->tensors[i].data == p)
			return (int64_t)i;
	return -1;
}

/* The layout a file in a backend's layouts (`loom convert --layout`)
 * declares for the file tensor at p; 0 for none. */
static uint32_t declared_layout(const loom_model *m, const void *p)
{
	const loom_string *names;
	const uint32_t *ids;
	uint64_t n, n_ids;
	int64_t i = file_tensor_at(m, p);
	if (i < 0 || loom_meta_get_array(m->file, LOOM_LAYOUT_KEY_TENSORS, LOOM_META_STRING, (const void **)&names, &n) ||
	    loom_meta_get_array(m->file, LOOM_LAYOUT_KEY_IDS, LOOM_META_U32, (const void **)&ids, &n_ids) || n != n_ids)
		return 0;
	loom_string name = m->file->tensors[i].name;
	for (uint64_t k = 0; k < n; k++)
		if (names[k].len == name.len && memcmp(names[k].data, name.data, name.len) == 0)
			return ids[k];
	return 0;
}

/* A tied head, repacked, is the embedding's one copy where the backend
 * reads rows from its layout: GET_ROWS then takes no page of the file's,
 * which is let go (otherwise each new token's row is faulted back in from
 * the page cache). */
static void embed_from_head(loom_model *m)
{
	loom_tensor embd = m->token_embd;
	embd.data = m->output.data;
	embd.layout = m->output.layout;
	if (loom_backend_takes(m, LOOM_OP_GET_ROWS, &embd))
		m->token_embd = embd;
}

/* Offers t, a weight MATMUL reads (through this tensor only), to the
 * backend's weight_repack.
 * Once repacked, the file's copy is let go: the model is resident once.
 * A file in the backend's layouts holds its tensors so already: they are
 * used in place. */
static loom_status repack(loom_model *m, loom_tensor *t, loom_role role, int il)
{
	loom_buffer buf;
	uint32_t layout;
	const void *src = t->data;
	const size_t bytes = tensor_bytes(t);
	if (m->in_backend_layouts && in_mapping(m, src) && (layout = declared_layout(m, src)) != 0) {
		double t0 = loom_now_s();
		touch_pages(src, bytes); /* in one call, rather than a fault a page at the first step */
		m->load_times.read += loom_now_s() - t0;
		t->layout = layout;
		return LOOM_OK;
	}
	double t0 = loom_now_s();
	if (in_mapping(m, src))
		touch_pages(src, bytes);
	double t1 = loom_now_s();
	loom_status st = loom_backend_repack(&m->rt->backend, t, &buf, &layout);
	m->load_times.read += t1 - t0;
	m->load_times.repack += loom_now_s() - t1;
	if (st != LOOM_OK)
		return loom_error_wrap(st, "%s of layer %d", loom_role_name(role), il);
	if (layout == 0)
		return LOOM_OK;
	/* A tied head's file tensor is the embedding: it is not one a file in
	 * a backend's layouts may replace. A copy that only moved its bytes (a
	 * CPU backend's, for huge pages) would hold them twice while GET_ROWS
	 * reads the file's: the file's serve. */
	const bool shared = t == &m->output && src == m->token_embd.data;
	if (shared && loom_repack_is_copy(&buf, src, bytes)) {
		loom_backend_release(&m->rt->backend, &buf);
		return LOOM_OK;
	}
	m->repacked[m->n_repacked++] = (loom_repacked_weight){
		.buf = buf, .layout = layout, .file_tensor = in_mapping(m, src) && !shared ? file_tensor_at(m, src) : -1};
	t->data = buf.base;
	t->layout = layout;
	if (shared)
		embed_from_head(m);
	if (in_mapping(m, src)) {
		loom_format_release(m->format, m->opened, src, bytes);
		m->released_bytes += bytes;
	}
	return LOOM_OK;
}

/* A file written in a backend's layouts runs only on that backend, and
 * only in place. */
static loom_status check_backend_layouts(loom_model *m)
{
	loom_string for_backend;
	if (loom_meta_get_string(m->file, LOOM_LAYOUT_KEY_BACKEND, &for_backend) != LOOM_OK)
		return LOOM_OK;
	char mine[256];
	const loom_backend *be = &m->rt->backend;
	loom_layout_backend_id(be, mine, sizeof(mine));
	if (!loom_string_eq(for_backend, mine) || m->weights_allocated || m->file != m->opened)
		return loom_error(LOOM_ERR_UNSUPPORTED,
				  "its weights are laid out for backend %.*s (loom convert --layout), which this runtime's "
				  "backend, %s, cannot use as they are: run it on that backend, or use the original file",
				  (int)for_backend.len, for_backend.data, mine);
	m->in_backend_layouts = true;
	return LOOM_OK;
}

/* The layers' matrices and the output head. A head tied to the token
 * embedding is repacked into a copy of its own (the matmul over the whole
 * vocabulary is a large part of a small model's step), which GET_ROWS
 * reads too where the backend can (embed_from_head). */
static loom_status repack_weights(loom_model *m)
{
	const loom_backend *be = &m->rt->backend;
	if (!loom_backend_repacks(be))
		return LOOM_OK;
	m->repacked = calloc((size_t)m->hp.n_layer * LOOM_ROLE_COUNT + 1, sizeof(*m->repacked));
	if (m->repacked == NULL)
		return loom_error(LOOM_ERR_NO_MEMORY, "out of memory");
	loom_status st = LOOM_OK;
	for (int il = 0; il < m->hp.n_layer && st == LOOM_OK; il++) {
		loom_weight_slot slots[LOOM_ROLE_COUNT];
		const int n = loom_layer_slots(m, il, &m->layers[il], slots);
		for (int i = 0; i < n && st == LOOM_OK; i++)
			if ((loom_role_is_matrix(slots[i].role) || loom_role_is_experts(slots[i].role)) &&
			    slots[i].t->data != NULL)
				st = repack(m, slots[i].t, slots[i].role, il);
	}
	if (st == LOOM_OK)
		st = repack(m, &m->output, LOOM_ROLE_OUTPUT, -1);
	if (st == LOOM_OK && m->n_repacked > 0)
		loom_info("backend %s repacked %d weights into its own layouts", loom_backend_name(be), m->n_repacked);
	if (st == LOOM_OK && m->in_backend_layouts)
		loom_info("the file holds backend %s's layouts: its weights are used in place", loom_backend_name(be));
	return st;
}

/* What the weights take in backend memory, for `loom run -v`. */
static void log_memory(const loom_model *m, size_t copied)
{
	size_t repacked = 0;
	for (int i = 0; i < m->n_repacked; i++)
		repacked += m->repacked[i].buf.size;
	const double mib = 1 << 20;
	if (m->weights_allocated)
		loom_info("backend %s: weights %.1f MiB uploaded, %.1f MiB converted, %.1f MiB repacked",
			  loom_backend_name(&m->rt->backend), (double)m->weights.size / mib, (double)copied / mib,
			  (double)repacked / mib);
	else
		loom_info("backend %s: weights used in place (%.1f MiB of %.1f MiB mapped), %.1f MiB converted, "
			  "%.1f MiB repacked",
			  loom_backend_name(&m->rt->backend), (double)(m->file->mapping_size - m->released_bytes) / mib,
			  (double)m->file->mapping_size / mib, (double)copied / mib, (double)repacked / mib);
}

bool loom_repack_is_copy(const loom_buffer *buf, const void *src, size_t bytes)
{
	return buf->size == bytes && memcmp(buf->base, src, bytes) == 0;
}

void loom_layout_backend_id(const loom_backend *be, char *out, size_t size)
{
	const char *version = be->plugin != NULL && be->plugin->desc != NULL ? be->plugin->desc->version : "?";
	snprintf(out, size, "%s %s", loom_backend_name(be), version);
}

loom_weight_bytes loom_model_weight_bytes(const loom_model *m)
{
	loom_weight_bytes b = {0, 0, 0};
	for (int i = 0; i < m->n_repacked; i++)
		b.repacked += m->repacked[i].buf.size;
	for (size_t k = 0; k < m->n_owned; k++)
		b.other += m->owned[k].size;
	if (m->weights_allocated)
		b.other += m->weights.size;
	else if (m->file != NULL)
		b.in_place = m->file->mapping_size - m->released_bytes;
	return b;
}

loom_status loom_model_place(loom_model *m)
{
	size_t *offsets = NULL;
	loom_status st = place_file(m, &offsets);
	const size_t copied = copies_bytes(m);
	if (st == LOOM_OK)
		st = place_copies(m);
	if (st == LOOM_OK)
		move_tensors(m, offsets);
	free(offsets);
	if (st == LOOM_OK)
		st = check_backend_layouts(m);
	if (st == LOOM_OK)
		st = repack_weights(m);
	if (st == LOOM_OK)
		log_memory(m, copied);
	return st;
}
