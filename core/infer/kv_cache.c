/* kv_cache.c - the key/value cache: cells shared by sequences. */
#include "infer/kv_cache.h"

#include "runtime/error.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

size_t loom_kv_bytes(const loom_model *m, uint32_t n_cells, loom_dtype type)
{
	return loom_dtype_row_bytes(type, m->hp.n_head_kv * m->hp.head_dim) * n_cells * 2 * (size_t)m->hp.n_layer;
}

loom_status loom_kv_init(loom_kv_cache *kv, loom_model *m, uint32_t n_cells, loom_dtype type)
{
	const int64_t kv_dim = m->hp.n_head_kv * m->hp.head_dim;
	const size_t per_layer = loom_dtype_row_bytes(type, kv_dim) * n_cells;
	const int n_layer = (int)m->hp.n_layer;

	memset(kv, 0, sizeof(*kv));
	kv->n_cells = n_cells;
	kv->type = type;
	kv->cells = malloc(n_cells * sizeof(loom_kv_cell));
	kv->k = calloc((size_t)n_layer, sizeof(loom_tensor));
	kv->v = calloc((size_t)n_layer, sizeof(loom_tensor));
	if (kv->cells == NULL || kv->k == NULL || kv->v == NULL)
		return loom_error(LOOM_ERR_NO_MEMORY, "out of memory");
	for (uint32_t i = 0; i < n_cells; i++)
		kv->cells[i] = (loom_kv_cell){.pos = -1};
	loom_status st = loom_backend_alloc(&m->rt->backend, per_layer * 2 * (size_t)n_layer, &kv->buf);
	if (st != LOOM_OK)
		return loom_error_wrap(st, "a KV cache of %u cells (%zu MiB)", n_cells,
				       per_layer * 2 * (size_t)n_layer >> 20);
	char *base = kv->buf.base;
	for (int il = 0; il < n_layer; il++) {
		loom_tensor_set_contiguous(&kv->k[il], type, kv_dim, n_cells, 1, 1);
		loom_tensor_set_contiguous(&kv->v[il], type, kv_dim, n_cells, 1, 1);
		kv->k[il].data = base + per_layer * (size_t)(2 * il);
		kv->v[il].data = base + per_layer * (size_t)(2 * il + 1);
		kv->k[il].name = "k cache";
		kv->v[il].name = "v cache";
	}
	return LOOM_OK;
}

void loom_kv_free(loom_kv_cache *kv, loom_model *m)
{
	loom_backend_release(&m->rt->backend, &kv->buf);
	free(kv->cells);
	free(kv->k);
	free(kv->v);
	memset(kv, 0, sizeof(*kv));
}

/* The cell after seq's last one, if it is free and in the same page. */
static bool continues_page(const loom_kv_cache *kv, int32_t seq, uint32_t *cell)
{
	uint32_t c = kv->after[seq];

	if (c == 0 || c >= kv->n_cells || c % LOOM_KV_PAGE == 0 || kv->cells[c].pos >= 0 ||
	    !loom_kv_cell_has(&kv->cells[c - 1], seq))
		return false;
	*cell = c;
	return true;
}

/* The first cell of the first page with no cell in use, from page *from on
 * (pages before it were full or partly used when last looked at). */
static bool empty_page(const loom_kv_cache *kv, uint32_t *from, uint32_t *cell)
{
	for (uint32_t p = *from; (p + 1) * LOOM_KV_PAGE <= kv->n_cells; p++) {
		uint32_t i = 0;
		while (i < LOOM_KV_PAGE && kv->cells[p * LOOM_KV_PAGE + i].pos < 0)
			i++;
		if (i == LOOM_KV_PAGE) {
			*from = p;
			*cell = p * LOOM_KV_PAGE;
			return true;
		}
	}
	*from = kv->n_cells / LOOM_KV_PAGE;
	return false;
}

loom_status loom_kv_claim(loom_kv_cache *kv, int n, const int32_t *pos, const int32_t *seq, int32_t *cells)
{
	if ((uint32_t)n > kv->n_cells - kv->used)
		return loom_error(LOOM_ERR_CONTEXT_FULL, "the context is full: %d tokens do not fit in %u free of %u cells",
				  n, kv->n_cells - kv->used, kv->n_cells);
	/* Within the pages, and past them, lowest cells first, so the
	 * attended span stays short. */
	uint32_t lowest = 0, page = 0;
	for (int i = 0; i < n; i++) {
		uint32_t c;
		if (!continues_page(kv, seq[i], &c) && !empty_page(kv, &page, &c)) {
			while (kv->cells[lowest].pos >= 0)
				lowest++;
			c = lowest;
		}
		kv->cells[c] = (loom_kv_cell){.pos = pos[i]};
		kv->cells[c].seqs[seq[i] / 64] = (uint64_t)1 << (seq[i] % 64);
		kv->after[seq[i]] = c + 1;
		cells[i] = (int32_t)c;
	}
	kv->used += (uint32_t)n;
	return LOOM_OK;
}

void loom_kv_unclaim(loom_kv_cache *kv, int n, const int32_t *cells)
{
	for (int i = 0; i < n; i++)
		kv->cells[cells[i]] = (loom_kv_cell){.pos = -1};
	kv->used -= (uint32_t)n;
}

uint32_t loom_kv_span(const loom_kv_cache *kv)
{
	uint32_t span = kv->n_cells;
	while (span > 0 && kv->cells[span - 1].pos < 0)
		span--;
	return span;
}

uint32_t loom_kv_window(const loom_kv_cache *kv)
{
	uint32_t span = loom_kv_span(kv);
	uint32_t window = (span + LOOM_KV_WINDOW_STEP - 1) / LOOM_KV_WINDOW_STEP * LOOM_KV_WINDOW_STEP;
	return window < kv->n_cells ? window : kv->n_cells;
}

void loom_kv_build_mask(const loom_kv_cache *kv, uint32_t n_kv, int n, const int32_t *pos,
			const int32_t *seq, uint32_t window, float *mask)
{
	for (int t = 0; t < n; t++) {
		float *row = mask + (size_t)t * n_kv;
		/* The oldest position the window keeps; cells before it are masked. */
		int64_t oldest = window > 0 ? (int64_t)pos[t] - window + 1 : INT64_MIN;
		for (uint32_t j = 0; j < n_kv; j++) {
			const loom_kv_cell *c = &kv->cells[j];
			row[j] = c->pos >= 0 && loom_kv_cell_has(c, seq[t]) && c->pos <= pos[t] && c->pos >= oldest
					 ? 0.0f
					 : -INFINITY;
		}
	}
}

static bool in_range(const loom_kv_cell *c, int32_t p0, int32_t p1)
{
	return c->pos >= 0 && c->pos >= p0 && (p1 < 0 || c->pos < p1);
}

/* Takes seq (every sequence when seq < 0) out of cell c, freeing it when
 * no sequence is left. */
static void drop(loom_kv_cache *kv, loom_kv_cell *c, int32_t seq)
{
	bool left = false;
	for (int w = 0; w < LOOM_KV_SEQ_WORDS; w++) {
		if (seq < 0 || w == seq / 64)
			c->seqs[w] &= seq < 0 ? 0 : ~((uint64_t)1 << (seq % 64));
		left |= c->seqs[w] != 0;
	}
	if (!left) {
		c->pos = -1;
		kv->used--;
	}
}

void loom_kv_remove(loom_kv_cache *kv, int32_t seq, int32_t p0, int32_t p1)
{
	for (uint32_t j = 0; j < kv->n_cells; j++) {
		loom_kv_cell *c = &kv->cells[j];
		if (in_range(c, p0, p1) && (seq < 0 || loom_kv_cell_has(c, seq)))
			drop(kv, c, seq);
	}
}

void loom_kv_copy(loom_kv_cache *kv, int32_t src, int32_t dst, int32_t p0, int32_t p1)
{
	if (src == dst)
		return;
	loom_kv_remove(kv, dst, p0, p1);
	for (uint32_t j = 0; j < kv->n_cells; j++) {
		loom_kv_cell *c = &kv->cells[j];
		if (in_range(c, p0, p1) && loom_kv_cell_has(c, src))
			c->seqs[dst / 64] |= (uint64_t)1 << (dst % 64);
	}
}

void loom_kv_keep(loom_kv_cache *kv, int32_t seq)
{
	for (uint32_t j = 0; j < kv->n_cells; j++) {
		loom_kv_cell *c = &kv->cells[j];
		if (c->pos < 0)
			continue;
		if (!loom_kv_cell_has(c, seq)) {
			drop(kv, c, -1);
			continue;
		}
		memset(c->seqs, 0, sizeof(c->seqs));
		c->seqs[seq / 64] = (uint64_t)1 << (seq % 64);
	}
}

int32_t loom_kv_pos_max(const loom_kv_cache *kv, int32_t seq)
{
	int32_t best = -1;
	for (uint32_t j = 0; j < kv->n_cells; j++)
		if (kv->cells[j].pos > best && loom_kv_cell_has(&kv->cells[j], seq))
			best = kv->cells[j].pos;
	return best;
}
