/* kv_state.c - a sequence's cache entries saved to bytes and restored,
 * into the same context or another of the same model and cache type.
 *
 * The bytes: a header (magic, version, layers, key/value row bytes, cache
 * type, entries, windowed entries), the entries' positions, the windowed
 * layers' cache's entries' positions (a model with windowed layers keeps
 * those in a cache of their own, which may hold fewer), then per layer the
 * key rows and value rows of the entries of the cache that holds it. Rows
 * move between backend and host memory in runs of adjacent cells, one
 * copy per run. */
#include "infer/context.h"

#include "runtime/error.h"

#include <stdlib.h>
#include <string.h>

#define STATE_MAGIC 0x53564b4dU /* "MKVS" */
#define STATE_VERSION 2

typedef struct state_header {
	uint32_t magic, version;
	uint32_t n_layer, row_bytes, kv_type, n_entries, n_window_entries;
} state_header;

static size_t row_bytes(const loom_context *ctx)
{
	return loom_dtype_row_bytes(ctx->kv.type, ctx->model->hp.n_head_kv * ctx->model->hp.head_dim);
}

static bool has_window_cache(const loom_context *ctx)
{
	return ctx->kv_swa.n_cells > 0;
}

/* The cache that holds layer il's rows. */
static loom_kv_cache *layer_cache(loom_context *ctx, int il)
{
	return has_window_cache(ctx) && loom_layer_windowed(&ctx->model->hp, il) ? &ctx->kv_swa : &ctx->kv;
}

/* How many cells of kv hold seq; their indices, in order, into cells
 * unless it is NULL. */
static uint32_t seq_cells(const loom_kv_cache *kv, int32_t seq, uint32_t *cells)
{
	uint32_t n = 0;
	for (uint32_t j = 0; j < kv->n_cells; j++)
		if (kv->cells[j].pos >= 0 && loom_kv_cell_has(&kv->cells[j], seq)) {
			if (cells != NULL)
				cells[n] = j;
			n++;
		}
	return n;
}

/* The bytes of a state of n entries, w of them in the windowed cache. */
static size_t state_bytes(loom_context *ctx, uint32_t n, uint32_t w)
{
	size_t rows = 0;
	for (int il = 0; il < (int)ctx->model->hp.n_layer; il++)
		rows += 2 * (size_t)(layer_cache(ctx, il) == &ctx->kv ? n : w) * row_bytes(ctx);
	return sizeof(state_header) + (size_t)(n + w) * sizeof(int32_t) + rows;
}

static loom_status check_args(const char *fn, const loom_context *ctx, int32_t seq_id, const void *buf)
{
	if (ctx == NULL || buf == NULL || seq_id < 0 || seq_id >= LOOM_MAX_SEQ)
		return loom_error(LOOM_ERR_INVALID_ARGUMENT, "%s: context, buffer and a sequence id in [0, %d) are required",
				  fn, LOOM_MAX_SEQ);
	return LOOM_OK;
}

/* Copies the rows of the given cells of one tensor of cache kv to or from
 * host memory at rows (n rows, in order), a run of adjacent cells at a
 * time. */
static loom_status move_rows(loom_context *ctx, loom_kv_cache *kv, const loom_tensor *t, const uint32_t *cells,
			     uint32_t n, unsigned char *rows, bool to_host)
{
	const loom_backend *be = &ctx->model->rt->backend;
	const size_t rb = row_bytes(ctx), base = (size_t)((char *)t->data - (char *)kv->buf.base);
	loom_status st = LOOM_OK;
	for (uint32_t i = 0; st == LOOM_OK && i < n;) {
		uint32_t run = 1;
		while (i + run < n && cells[i + run] == cells[i] + run)
			run++;
		size_t at = base + cells[i] * rb, bytes = run * rb;
		st = to_host ? loom_backend_download(be, &kv->buf, at, rows + i * rb, bytes)
			     : loom_backend_upload(be, &kv->buf, at, rows + i * rb, bytes);
		i += run;
	}
	return st;
}

/* Every layer's key and value rows, each from or to the cells of the
 * cache that holds it (cells of ctx->kv, or window_cells of ctx->kv_swa). */
static loom_status move_layers(loom_context *ctx, const uint32_t *cells, uint32_t n, const uint32_t *window_cells,
			       uint32_t w, unsigned char *p, bool to_host)
{
	loom_status st = LOOM_OK;
	const size_t rb = row_bytes(ctx);
	for (int il = 0; st == LOOM_OK && il < (int)ctx->model->hp.n_layer; il++) {
		loom_kv_cache *kv = layer_cache(ctx, il);
		const bool full = kv == &ctx->kv;
		const uint32_t count = full ? n : w;
		st = move_rows(ctx, kv, &kv->k[il], full ? cells : window_cells, count, p, to_host);
		p += count * rb;
		if (st == LOOM_OK)
			st = move_rows(ctx, kv, &kv->v[il], full ? cells : window_cells, count, p, to_host);
		p += count * rb;
	}
	return st;
}

loom_status loom_kv_seq_state_size(const loom_context *ctx, int32_t seq_id, size_t *size)
{
	loom_status st = check_args("loom_kv_seq_state_size", ctx, seq_id, size);
	if (st == LOOM_OK)
		*size = state_bytes((loom_context *)ctx, seq_cells(&ctx->kv, seq_id, NULL),
				    has_window_cache(ctx) ? seq_cells(&ctx->kv_swa, seq_id, NULL) : 0);
	return st;
}

loom_status loom_kv_seq_save(loom_context *ctx, int32_t seq_id, void *buf, size_t size, size_t *written)
{
	loom_status st = check_args("loom_kv_seq_save", ctx, seq_id, buf);
	if (st != LOOM_OK)
		return st;
	const uint32_t n = seq_cells(&ctx->kv, seq_id, NULL);
	const uint32_t w = has_window_cache(ctx) ? seq_cells(&ctx->kv_swa, seq_id, NULL) : 0;
	uint32_t *cells = malloc((n + w + 1) * sizeof(uint32_t));
	if (cells == NULL)
		return loom_error(LOOM_ERR_NO_MEMORY, "out of memory");
	uint32_t *window_cells = cells + n;
	seq_cells(&ctx->kv, seq_id, cells);
	if (w > 0)
		seq_cells(&ctx->kv_swa, seq_id, window_cells);
	const size_t need = state_bytes(ctx, n, w);
	if (written != NULL)
		*written = need;
	if (size < need) {
		free(cells);
		return loom_error(LOOM_ERR_BUFFER_TOO_SMALL, "sequence %d's state takes %zu bytes; the buffer has %zu",
				  seq_id, need, size);
	}
	state_header h = {STATE_MAGIC, STATE_VERSION, (uint32_t)ctx->model->hp.n_layer, (uint32_t)row_bytes(ctx),
			  (uint32_t)ctx->kv.type, n, w};
	unsigned char *p = buf;
	memcpy(p, &h, sizeof(h));
	p += sizeof(h);
	for (uint32_t i = 0; i < n; i++, p += sizeof(int32_t))
		memcpy(p, &ctx->kv.cells[cells[i]].pos, sizeof(int32_t));
	for (uint32_t i = 0; i < w; i++, p += sizeof(int32_t))
		memcpy(p, &ctx->kv_swa.cells[window_cells[i]].pos, sizeof(int32_t));
	st = move_layers(ctx, cells, n, window_cells, w, p, true);
	free(cells);
	return st;
}

/* The header of a state this context can take, else BAD_FORMAT. */
static loom_status read_header(loom_context *ctx, const void *buf, size_t size, state_header *h)
{
	if (size < sizeof(*h))
		return loom_error(LOOM_ERR_BAD_FORMAT, "a sequence state: %zu bytes is shorter than its header", size);
	memcpy(h, buf, sizeof(*h));
	if (h->magic != STATE_MAGIC || h->version != STATE_VERSION)
		return loom_error(LOOM_ERR_BAD_FORMAT, "not a loom sequence state (version %d)", STATE_VERSION);
	if (h->n_layer != (uint32_t)ctx->model->hp.n_layer || h->row_bytes != row_bytes(ctx) ||
	    h->kv_type != (uint32_t)ctx->kv.type)
		return loom_error(LOOM_ERR_BAD_FORMAT,
				  "a sequence state of %u layers, %u-byte rows, cache type %u; this context has %d, %zu, %s",
				  h->n_layer, h->row_bytes, h->kv_type, (int)ctx->model->hp.n_layer, row_bytes(ctx),
				  loom_dtype_name(ctx->kv.type));
	if (h->n_entries > ctx->kv.n_cells || h->n_window_entries > h->n_entries ||
	    (h->n_window_entries > 0 && !has_window_cache(ctx)))
		return loom_error(LOOM_ERR_BAD_FORMAT, "a sequence state of %u entries (%u windowed) does not fit a "
				  "context of %u cells%s", h->n_entries, h->n_window_entries, ctx->kv.n_cells,
				  has_window_cache(ctx) ? "" : " without windowed layers");
	if (size != state_bytes(ctx, h->n_entries, h->n_window_entries))
		return loom_error(LOOM_ERR_BAD_FORMAT, "a sequence state of %u entries must be %zu bytes, not %zu",
				  h->n_entries, state_bytes(ctx, h->n_entries, h->n_window_entries), size);
	return LOOM_OK;
}

/* Claims count cells of kv for seq at the positions read from p (making
 * room first in the windowed cache), their indices into cells. */
static loom_status claim_entries(loom_context *ctx, loom_kv_cache *kv, int32_t seq_id, const unsigned char *p,
				 uint32_t count, uint32_t *cells)
{
	int32_t *pos = calloc(count + 1, sizeof(int32_t)), *seqs = calloc(count + 1, sizeof(int32_t));
	int32_t *claimed = malloc((count + 1) * sizeof(int32_t));
	loom_status st = pos != NULL && seqs != NULL && claimed != NULL ? LOOM_OK
									 : loom_error(LOOM_ERR_NO_MEMORY, "out of memory");
	for (uint32_t i = 0; st == LOOM_OK && i < count; i++, p += sizeof(int32_t)) {
		memcpy(&pos[i], p, sizeof(int32_t));
		seqs[i] = seq_id;
		if (pos[i] < 0)
			st = loom_error(LOOM_ERR_BAD_FORMAT, "a sequence state: entry %u has position %d", i, pos[i]);
	}
	if (st == LOOM_OK && kv == &ctx->kv_swa) {
		st = loom_kv_make_room(kv, ctx->model, (int)count, pos, seqs, (uint32_t)ctx->model->hp.n_swa,
				       ctx->params.n_ctx);
		ctx->built.valid = false;
	}
	if (st == LOOM_OK)
		st = loom_kv_claim(kv, (int)count, pos, seqs, claimed);
	for (uint32_t i = 0; st == LOOM_OK && i < count; i++)
		cells[i] = (uint32_t)claimed[i];
	free(pos);
	free(seqs);
	free(claimed);
	return st;
}

loom_status loom_kv_seq_load(loom_context *ctx, int32_t seq_id, const void *buf, size_t size)
{
	state_header h;
	loom_status st = check_args("loom_kv_seq_load", ctx, seq_id, buf);
	if (st == LOOM_OK)
		st = read_header(ctx, buf, size, &h);
	if (st != LOOM_OK)
		return st;
	const unsigned char *p = (const unsigned char *)buf + sizeof(h);
	const uint32_t n = h.n_entries, w = h.n_window_entries;
	uint32_t *cells = malloc((n + 1) * sizeof(uint32_t)), *window_cells = malloc((w + 1) * sizeof(uint32_t));
	if (cells == NULL || window_cells == NULL)
		st = loom_error(LOOM_ERR_NO_MEMORY, "out of memory");
	if (st == LOOM_OK) {
		loom_kv_seq_remove(ctx, seq_id, 0, -1);
		st = claim_entries(ctx, &ctx->kv, seq_id, p, n, cells);
	}
	if (st == LOOM_OK && has_window_cache(ctx))
		st = claim_entries(ctx, &ctx->kv_swa, seq_id, p + n * sizeof(int32_t), w, window_cells);
	p += (size_t)(n + w) * sizeof(int32_t);
	if (st == LOOM_OK)
		st = move_layers(ctx, cells, n, window_cells, w, (unsigned char *)p, false);
	/* Half-restored entries would be read as the sequence's: none stay. */
	if (st != LOOM_OK && cells != NULL && window_cells != NULL)
		loom_kv_seq_remove(ctx, seq_id, 0, -1);
	free(cells);
	free(window_cells);
	return st;
}
