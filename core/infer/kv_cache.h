/* kv_cache.h - the key/value cache: cells shared by sequences. */
#ifndef LOOM_KV_CACHE_H
#define LOOM_KV_CACHE_H

#include "model/model.h"

#define LOOM_KV_SEQ_WORDS (LOOM_MAX_SEQ / 64)

/* A cell holds one token's keys and values (in every layer) for the
 * sequences in seqs (a bit per id): several when they share a prefix
 * (loom_kv_copy). pos < 0 means free, and then seqs is empty. */
typedef struct loom_kv_cell {
	int32_t pos;
	uint64_t seqs[LOOM_KV_SEQ_WORDS];
} loom_kv_cell;

static inline bool loom_kv_cell_has(const loom_kv_cell *c, int32_t seq)
{
	return (c->seqs[seq / 64] >> (seq % 64)) & 1;
}

/* Cells are claimed in pages: a sequence's next token goes after its last
 * one while that page lasts, then to a page no sequence uses (when one is
 * left), so that a backend reading the cache in blocks of up to this many
 * cells finds each block owned by one sequence, and a token of a batch of
 * several sequences skips the blocks of the others. */
#define LOOM_KV_PAGE 32

/* The layers a cache holds keys and values for. A model with windowed
 * layers keeps them in a cache of their own, which holds only what their
 * windows can still see: a 128k context of Gemma 3 then holds 128k cells
 * in its global layers alone. */
typedef enum loom_kv_layers {
	LOOM_KV_ALL_LAYERS,
	LOOM_KV_GLOBAL_LAYERS,   /* the layers without a window */
	LOOM_KV_WINDOWED_LAYERS  /* the windowed layers */
} loom_kv_layers;

typedef struct loom_kv_cache {
	uint32_t n_cells;
	uint32_t used;
	loom_kv_cell *cells;
	uint32_t after[LOOM_MAX_SEQ]; /* one past each sequence's last claimed cell, 0 for none */
	loom_dtype type;
	loom_kv_layers layers;
	loom_buffer buf;
	loom_tensor *k; /* per layer: {kv_dim, n_cells}; data NULL in a layer it does not hold */
	loom_tensor *v;
} loom_kv_cache;

loom_status loom_kv_init(loom_kv_cache *kv, loom_model *m, uint32_t n_cells, loom_dtype type, loom_kv_layers layers);
void loom_kv_free(loom_kv_cache *kv, loom_model *m);

/* Whether the cache holds layer il. */
bool loom_kv_holds(const loom_kv_cache *kv, const loom_model *m, int il);

/* Positions a windowed layers' cache keeps past what the windows see, so
 * that a sequence cut back by a few tokens (a chat whose template renders
 * the last reply otherwise than it was generated) continues without being
 * decoded again. */
#define LOOM_KV_WINDOW_SLACK 64

/* Room for n more tokens (pos, seq) in a cache of windowed layers whose
 * window is w: when too few cells are free, each sequence's cells that no
 * window will see again, LOOM_KV_WINDOW_SLACK positions aside, are dropped
 * (those before the batch's earliest token's window, or for a sequence
 * not in the batch before its next token's); when that is not enough the
 * cache grows, at most to max_cells, its rows copied. Dropping waits until
 * room is needed, so that a sequence can be cut back as far as the cache's
 * room allows. */
loom_status loom_kv_make_room(loom_kv_cache *kv, loom_model *m, int n, const int32_t *pos, const int32_t *seq,
			      uint32_t w, uint32_t max_cells);

/* LOOM_OK if every token (pos, seq) finds in the windowed cache all of
 * its sequence's cells of the last w positions before its batch that the
 * full cache has; else INVALID_ARGUMENT naming the sequence (the cache
 * dropped them, and a rolled-back sequence must be decoded again). */
/* The earliest position seq can be continued from after a cut back: the
 * latest position the full cache has and the windowed one dropped, plus
 * w; 0 if none was dropped. */
int32_t loom_kv_resume_min(const loom_kv_cache *full, const loom_kv_cache *windowed, int32_t seq, uint32_t w);

loom_status loom_kv_check_windows(const loom_kv_cache *full, const loom_kv_cache *windowed, int n, const int32_t *pos,
				  const int32_t *seq, uint32_t w);

/* Claims a free cell for each of n tokens (writing their indices to cells),
 * by pages (LOOM_KV_PAGE), else the lowest free; CONTEXT_FULL, claiming
 * nothing, if there are too few. */
loom_status loom_kv_claim(loom_kv_cache *kv, int n, const int32_t *pos, const int32_t *seq, int32_t *cells);
/* Frees cells claimed by a batch that then failed. */
void loom_kv_unclaim(loom_kv_cache *kv, int n, const int32_t *cells);

/* Bytes of device memory a cache of n_cells cells of type takes. */
size_t loom_kv_bytes(const loom_model *m, uint32_t n_cells, loom_dtype type, loom_kv_layers layers);

/* One past the highest cell in use. */
uint32_t loom_kv_span(const loom_kv_cache *kv);

/* The cells a step attends to, [0, window): the span rounded up to a
 * multiple of LOOM_KV_WINDOW_STEP (at most n_cells), the cells past the
 * span masked. A step's shapes then change once in that many tokens, not
 * every token, so a GPU backend can replay one captured decode graph; the
 * masked cells cost the CPU backends a mask read each. */
#define LOOM_KV_WINDOW_STEP 256
uint32_t loom_kv_window(const loom_kv_cache *kv);

/* mask[t * n_kv + j] = 0 if token t (seq[t], pos[t]) may attend to cell j,
 * else -INFINITY. With a window w > 0 a token sees only the cells of the
 * last w positions, pos[t] - w < cell pos <= pos[t] (a sliding window). */
void loom_kv_build_mask(const loom_kv_cache *kv, uint32_t n_kv, int n, const int32_t *pos,
			const int32_t *seq, uint32_t window, float *mask);

/* Frees seq's cells with p0 <= pos < p1 (p1 < 0: no upper bound; seq < 0:
 * every sequence). */
void loom_kv_remove(loom_kv_cache *kv, int32_t seq, int32_t p0, int32_t p1);
/* dst's cells at positions [p0, p1) (p1 < 0: to the end) are dropped and
 * src's there become dst's too: shared, not copied. */
void loom_kv_copy(loom_kv_cache *kv, int32_t src, int32_t dst, int32_t p0, int32_t p1);
/* Every sequence but seq is dropped. */
void loom_kv_keep(loom_kv_cache *kv, int32_t seq);
int32_t loom_kv_pos_max(const loom_kv_cache *kv, int32_t seq);

#endif
