/* kv_state.c - a sequence's cache entries saved to bytes and restored,
 * into the same context or another of the same model and cache type.
 *
 * The bytes: a header (magic, version, layers, key/value row bytes, cache
 * type, entries), the entries' positions, then per layer the entries' key
 * rows and value rows. Rows move between backend and host memory in runs
 * of adjacent cells, one copy per run. */
#include "infer/context.h"

#include "runtime/error.h"

#include <stdlib.h>
#include <string.h>

#define STATE_MAGIC 0x53564b4dU /* "MKVS" */
#define STATE_VERSION 1

typedef struct state_header {
	uint32_t magic, version;
	uint32_t n_layer, row_bytes, kv_type, n_entries;
} state_header;

static size_t row_bytes(const loom_context *ctx)
{
	return loom_dtype_row_bytes(ctx->kv.type, ctx->model->hp.n_head_kv * ctx->model->hp.head_dim);
}

/* How many cells hold seq; their indices, in order, into cells unless it
 * is NULL. */
static uint32_t seq_cells(const loom_context *ctx, int32_t seq, uint32_t *cells)
{
	uint32_t n = 0;
	for (uint32_t j = 0; j < ctx->kv.n_cells; j++)
		if (ctx->kv.cells[j].pos >= 0 && loom_kv_cell_has(&ctx->kv.cells[j], seq)) {
			if (cells != NULL)
				cells[n] = j;
			n++;
		}
	return n;
}

static size_t state_bytes(const loom_context *ctx, uint32_t n)
{
	return sizeof(state_header) + n * sizeof(int32_t) + 2 * (size_t)ctx->model->hp.n_layer * n * row_bytes(ctx);
}

static loom_status check_args(const char *fn, const loom_context *ctx, int32_t seq_id, const void *buf)
{
	if (ctx == NULL || buf == NULL || seq_id < 0 || seq_id >= LOOM_MAX_SEQ)
		return loom_error(LOOM_ERR_INVALID_ARGUMENT, "%s: context, buffer and a sequence id in [0, %d) are required",
				  fn, LOOM_MAX_SEQ);
	return LOOM_OK;
}

/* Copies the rows of the given cells of one cache tensor to or from host
 * memory at rows (n rows, in order), a run of adjacent cells at a time. */
static loom_status move_rows(loom_context *ctx, const loom_tensor *t, const uint32_t *cells, uint32_t n,
			     unsigned char *rows, bool to_host)
{
	const loom_backend *be = &ctx->model->rt->backend;
	const size_t rb = row_bytes(ctx), base = (size_t)((char *)t->data - (char *)ctx->kv.buf.base);
	loom_status st = LOOM_OK;
	for (uint32_t i = 0; st == LOOM_OK && i < n;) {
		uint32_t run = 1;
		while (i + run < n && cells[i + run] == cells[i] + run)
			run++;
		size_t at = base + cells[i] * rb, bytes = run * rb;
		st = to_host ? loom_backend_download(be, &ctx->kv.buf, at, rows + i * rb, bytes)
			     : loom_backend_upload(be, &ctx->kv.buf, at, rows + i * rb, bytes);
		i += run;
	}
	return st;
}

loom_status loom_kv_seq_state_size(const loom_context *ctx, int32_t seq_id, size_t *size)
{
	loom_status st = check_args("loom_kv_seq_state_size", ctx, seq_id, size);
	if (st == LOOM_OK)
		*size = state_bytes(ctx, seq_cells(ctx, seq_id, NULL));
	return st;
}

loom_status loom_kv_seq_save(loom_context *ctx, int32_t seq_id, void *buf, size_t size, size_t *written)
{
	loom_status st = check_args("loom_kv_seq_save", ctx, seq_id, buf);
	if (st != LOOM_OK)
		return st;
	const uint32_t n = seq_cells(ctx, seq_id, NULL);
	uint32_t *cells = malloc((n + 1) * sizeof(uint32_t));
	if (cells == NULL)
		return loom_error(LOOM_ERR_NO_MEMORY, "out of memory");
	seq_cells(ctx, seq_id, cells);
	const size_t need = state_bytes(ctx, n), rb = row_bytes(ctx);
	if (written != NULL)
		*written = need;
	if (size < need) {
		free(cells);
		return loom_error(LOOM_ERR_BUFFER_TOO_SMALL, "sequence %d's state takes %zu bytes; the buffer has %zu",
				  seq_id, need, size);
	}
	const int n_layer = (int)ctx->model->hp.n_layer;
	state_header h = {STATE_MAGIC, STATE_VERSION, (uint32_t)n_layer, (uint32_t)rb, (uint32_t)ctx->kv.type, n};
	unsigned char *p = buf;
	memcpy(p, &h, sizeof(h));
	p += sizeof(h);
	for (uint32_t i = 0; i < n; i++, p += sizeof(int32_t))
		memcpy(p, &ctx->kv.cells[cells[i]].pos, sizeof(int32_t));
	for (int il = 0; st == LOOM_OK && il < n_layer; il++) {
		st = move_rows(ctx, &ctx->kv.k[il], cells, n, p, true);
		p += n * rb;
		if (st == LOOM_OK)
			st = move_rows(ctx, &ctx->kv.v[il], cells, n, p, true);
		p += n * rb;
	}
	free(cells);
	return st;
}

/* The header of a state this context can take, else BAD_FORMAT. */
static loom_status read_header(const loom_context *ctx, const void *buf, size_t size, state_header *h)
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
	if (h->n_entries > ctx->kv.n_cells || size != state_bytes(ctx, h->n_entries))
		return loom_error(LOOM_ERR_BAD_FORMAT, "a sequence state of %u entries must be %zu bytes, not %zu",
				  h->n_entries, h->n_entries <= ctx->kv.n_cells ? state_bytes(ctx, h->n_entries) : 0, size);
	return LOOM_OK;
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
	int32_t *pos = malloc((h.n_entries + 1) * sizeof(int32_t)), *seqs = malloc((h.n_entries + 1) * sizeof(int32_t));
	int32_t *claimed = malloc((h.n_entries + 1) * sizeof(int32_t));
	uint32_t *cells = malloc((h.n_entries + 1) * sizeof(uint32_t));
	if (pos == NULL || seqs == NULL || claimed == NULL || cells == NULL)
		st = loom_error(LOOM_ERR_NO_MEMORY, "out of memory");
	for (uint32_t i = 0; st == LOOM_OK && i < h.n_entries; i++, p += sizeof(int32_t)) {
		memcpy(&pos[i], p, sizeof(int32_t));
		seqs[i] = seq_id;
		if (pos[i] < 0)
			st = loom_error(LOOM_ERR_BAD_FORMAT, "a sequence state: entry %u has position %d", i, pos[i]);
	}
	if (st == LOOM_OK) {
		loom_kv_remove(&ctx->kv, seq_id, 0, -1);
		st = loom_kv_claim(&ctx->kv, (int)h.n_entries, pos, seqs, claimed);
	}
	for (uint32_t i = 0; st == LOOM_OK && i < h.n_entries; i++)
		cells[i] = (uint32_t)claimed[i];
	bool claimed_cells = st == LOOM_OK;
	for (uint32_t il = 0; st == LOOM_OK && il < h.n_layer; il++) {
		st = move_rows(ctx, &ctx->kv.k[il], cells, h.n_entries, (unsigned char *)p, false);
		p += h.n_entries * h.row_bytes;
		if (st == LOOM_OK)
			st = move_rows(ctx, &ctx->kv.v[il], cells, h.n_entries, (unsigned char *)p, false);
		p += h.n_entries * h.row_bytes;
	}
	/* Half-restored entries would be read as the sequence's: none stay. */
	if (st != LOOM_OK && claimed_cells)
		loom_kv_remove(&ctx->kv, seq_id, 0, -1);
	free(pos);
	free(seqs);
	free(claimed);
	free(cells);
	return st;
}
