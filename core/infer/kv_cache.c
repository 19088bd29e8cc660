/* kv_cache.c - the key/value cache: cells shared by sequences. */
#include "infer/kv_cache.h"

#include "runtime/error.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

bool loom_kv_holds(const loom_kv_cache *kv, const loom_model *m, int il)
{
	return kv->layers == LOOM_KV_ALL_LAYERS || (kv->layers == LOOM_KV_WINDOWED_LAYERS) == loom_layer_windowed(&m->hp, il);
}

static int held_layers(const loom_model *m, loom_kv_layers layers)
{
	int n = 0;
	for (int il = 0; il < (int)m->hp.n_layer; il++)
		n += layers == LOOM_KV_ALL_LAYERS || (layers == LOOM_KV_WINDOWED_LAYERS) == loom_layer_windowed(&m->hp, il);
	return n;
}

size_t loom_kv_bytes(const loom_model *m, uint32_t n_cells, loom_dtype type, loom_kv_layers layers)
{
	return loom_dtype_row_bytes(type, m->hp.n_head_kv * m->hp.head_dim) * n_cells * 2 * (size_t)held_layers(m, layers);
}

/* The held layers' key and value tensors over a buffer of n_cells rows
 * each, laid out layer by layer. */
static void lay_out(loom_kv_cache *kv, const loom_model *m, char *base, uint32_t n_cells)
{
	const int64_t kv_dim = m->hp.n_head_kv * m->hp.head_dim;
	const size_t per_layer = loom_dtype_row_bytes(kv->type, kv_dim) * n_cells;
	int held = 0;
	for (int il = 0; il < (int)m->hp.n_layer; il++) {
		memset(&kv->k[il], 0, sizeof(loom_tensor));
		memset(&kv->v[il], 0, sizeof(loom_tensor));
		if (!loom_kv_holds(kv, m, il))
			continue;
		loom_tensor_set_contiguous(&kv->k[il], kv->type, kv_dim, n_cells, 1, 1);
		loom_tensor_set_contiguous(&kv->v[il], kv->type, kv_dim, n_cells, 1, 1);
		kv->k[il].data = base + per_layer * (size_t)(2 * held);
		kv->v[il].data = base + per_layer * (size_t)(2 * held + 1);
		kv->k[il].name = "k cache";
		kv->v[il].name = "v cache";
		held++;
	}
}

loom_status loom_kv_init(loom_kv_cache *kv, loom_model *m, uint32_t n_cells, loom_dtype type, loom_kv_layers layers)
{
	const int n_layer = (int)m->hp.n_layer;

	memset(kv, 0, sizeof(*kv));
	kv->n_cells = n_cells;
	kv->type = type;
	kv->layers = layers;
	kv->cells = malloc(n_cells * sizeof(loom_kv_cell));
	kv->k = calloc((size_t)n_layer, sizeof(loom_tensor));
	kv->v = calloc((size_t)n_layer, sizeof(loom_tensor));
	if (kv->cells == NULL || kv->k == NULL || kv->v == NULL)
		return loom_error(LOOM_ERR_NO_MEMORY, "out of memory");
	for (uint32_t i = 0; i < n_cells; i++)
		kv->cells[i] = (loom_kv_cell){.pos = -1};
	const size_t bytes = loom_kv_bytes(m, n_cells, type, layers);
	if (bytes == 0)
		return LOOM_OK;
	loom_status st = loom_backend_alloc(&m->rt->backend, bytes, &kv->buf);
	if (st != LOOM_OK)
		return loom_error_wrap(st, "a KV cache of %u cells (%zu MiB)", n_cells, bytes >> 20);
	lay_out(kv, m, kv->buf.base, n_cells);
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

/* The cache over a buffer of n_cells cells, each held layer's rows copied
 * from the old one through host memory (the backend's buffers may be on a
 * device); the new cells free. */
static loom_status grow(loom_kv_cache *kv, loom_model *m, uint32_t n_cells)
{
	const loom_backend *be = &m->rt->backend;
	const size_t rb = loom_dtype_row_bytes(kv->type, m->hp.n_head_kv * m->hp.head_dim);
	const size_t old_bytes = rb * kv->n_cells, bytes = loom_kv_bytes(m, n_cells, kv->type, kv->layers);
	loom_kv_cell *cells = realloc(kv->cells, n_cells * sizeof(loom_kv_cell));
	unsigned char *rows = malloc(old_bytes > 0 ? old_bytes : 1);
	if (cells == NULL || rows == NULL) {
		free(rows);
		if (cells != NULL)
			kv->cells = cells;
		return loom_error(LOOM_ERR_NO_MEMORY, "out of memory growing the windowed layers' cache to %u cells",
				  n_cells);
	}
	kv->cells = cells;
	loom_buffer buf;
	loom_status st = loom_backend_alloc(be, bytes, &buf);
	if (st != LOOM_OK) {
		free(rows);
		return loom_error_wrap(st, "the windowed layers' cache grown to %u cells (%zu MiB)", n_cells, bytes >> 20);
	}
	/* Layer by layer, in the order both layouts share. */
	for (int i = 0; st == LOOM_OK && i < 2 * held_layers(m, kv->layers); i++) {
		st = loom_backend_download(be, &kv->buf, (size_t)i * old_bytes, rows, old_bytes);
		if (st == LOOM_OK)
			st = loom_backend_upload(be, &buf, (size_t)i * rb * n_cells, rows, old_bytes);
	}
	free(rows);
	if (st != LOOM_OK) {
		loom_backend_release(be, &buf);
		return st;
	}
	loom_backend_release(be, &kv->buf);
	kv->buf = buf;
	for (uint32_t i = kv->n_cells; i < n_cells; i++)
		kv->cells[i] = (loom_kv_cell){.pos = -1};
	kv->n_cells = n_cells;
	lay_out(kv, m, kv->buf.base, n_cells);
	return LOOM_OK;
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

/* The earliest position each sequence keeps: the window of the batch's
 * earliest token of the sequence, else of its next token, less the slack.
 * lo[s] = INT32_MAX for a sequence with no cells. */
static void window_starts(const loom_kv_cache *kv, int n, const int32_t *pos, const int32_t *seq, uint32_t w,
			  int32_t *lo)
{
	for (int s = 0; s < LOOM_MAX_SEQ; s++)
		lo[s] = INT32_MAX;
	for (uint32_t j = 0; j < kv->n_cells; j++) {
		const loom_kv_cell *c = &kv->cells[j];
		if (c->pos < 0)
			continue;
		for (int s = 0; s < LOOM_MAX_SEQ; s++)
			if (loom_kv_cell_has(c, s)) {
				int32_t next = c->pos + 2 - (int32_t)w - LOOM_KV_WINDOW_SLACK;
				lo[s] = lo[s] == INT32_MAX || next > lo[s] ? next : lo[s];
			}
	}
	bool in_batch[LOOM_MAX_SEQ] = {false};
	for (int i = 0; i < n; i++) {
		int32_t first = pos[i] + 1 - (int32_t)w - LOOM_KV_WINDOW_SLACK;
		lo[seq[i]] = !in_batch[seq[i]] || first < lo[seq[i]] ? first : lo[seq[i]];
		in_batch[seq[i]] = true;
	}
}

loom_status loom_kv_make_room(loom_kv_cache *kv, loom_model *m, int n, const int32_t *pos, const int32_t *seq,
			      uint32_t w, uint32_t max_cells)
{
	if ((uint32_t)n <= kv->n_cells - kv->used)
		return LOOM_OK;
	int32_t *lo = malloc(LOOM_MAX_SEQ * sizeof(int32_t));
	if (lo == NULL)
		return loom_error(LOOM_ERR_NO_MEMORY, "out of memory");
	window_starts(kv, n, pos, seq, w, lo);
	for (uint32_t j = 0; j < kv->n_cells; j++) {
		loom_kv_cell *c = &kv->cells[j];
		for (int s = 0; c->pos >= 0 && s < LOOM_MAX_SEQ; s++)
			if (loom_kv_cell_has(c, s) && c->pos < lo[s])
				drop(kv, c, s);
	}
	free(lo);
	if ((uint32_t)n <= kv->n_cells - kv->used)
		return LOOM_OK;
	uint64_t want = (uint64_t)kv->used + (uint64_t)n;
	uint64_t cells = (uint64_t)kv->n_cells * 2 > want ? (uint64_t)kv->n_cells * 2 : want;
	cells = (cells + LOOM_KV_WINDOW_STEP - 1) / LOOM_KV_WINDOW_STEP * LOOM_KV_WINDOW_STEP;
	if (cells > max_cells)
		cells = max_cells;
	if (cells < want)
		return loom_error(LOOM_ERR_CONTEXT_FULL, "the context is full: the windowed layers' %u cells hold %u tokens "
				  "their windows still see; %d more do not fit", kv->n_cells, kv->used, n);
	return grow(kv, m, (uint32_t)cells);
}

/* How many of seq's cells have positions in [p0, p1). */
static uint32_t cells_between(const loom_kv_cache *kv, int32_t seq, int32_t p0, int32_t p1)
{
	uint32_t n = 0;
	for (uint32_t j = 0; j < kv->n_cells; j++) {
		const loom_kv_cell *c = &kv->cells[j];
		n += c->pos >= p0 && c->pos < p1 && loom_kv_cell_has(c, seq);
	}
	return n;
}

loom_status loom_kv_check_windows(const loom_kv_cache *full, const loom_kv_cache *windowed, int n, const int32_t *pos,
				  const int32_t *seq, uint32_t w)
{
	/* The windowed cache's cells are the full cache's less those it
	 * dropped, so equal counts mean nothing a token sees is missing. */
	for (int i = 0; i < n; i++) {
		bool first = true;
		for (int j = 0; j < i && first; j++)
			first = seq[j] != seq[i] || pos[j] > pos[i];
		for (int j = i + 1; j < n && first; j++)
			first = seq[j] != seq[i] || pos[j] >= pos[i];
		if (!first)
			continue;
		int32_t p0 = pos[i] + 1 - (int32_t)w;
		if (cells_between(full, seq[i], p0, pos[i]) != cells_between(windowed, seq[i], p0, pos[i]))
			return loom_error(LOOM_ERR_INVALID_ARGUMENT,
					  "sequence %d at position %d: the windowed layers' cache dropped some of positions "
					  "%d..%d, which its window sees, to make room; remove the sequence and decode it "
					  "again",
					  seq[i], pos[i], p0 > 0 ? p0 : 0, pos[i] - 1);
	}
	return LOOM_OK;
}

int32_t loom_kv_resume_min(const loom_kv_cache *full, const loom_kv_cache *windowed, int32_t seq, uint32_t w)
{
	/* The windowed cache dropped a sequence's cells below a position and
	 * kept the rest, so what it lacks is what the full cache has below
	 * the windowed cache's earliest. */
	int32_t kept = INT32_MAX, dropped = -1;
	for (uint32_t j = 0; j < windowed->n_cells; j++) {
		const loom_kv_cell *c = &windowed->cells[j];
		if (c->pos >= 0 && c->pos < kept && loom_kv_cell_has(c, seq))
			kept = c->pos;
	}
	for (uint32_t j = 0; j < full->n_cells; j++) {
		const loom_kv_cell *c = &full->cells[j];
		if (c->pos >= 0 && c->pos < kept && c->pos > dropped && loom_kv_cell_has(c, seq))
			dropped = c->pos;
	}
	return dropped < 0 ? 0 : dropped + (int32_t)w;
}
