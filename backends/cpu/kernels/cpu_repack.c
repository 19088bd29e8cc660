/* cpu_repack.c - weights in the CPU backends' own layouts (cpu_repack.h). */
#include "cpu_repack.h"

#include "cpu_blocks.h"
#include "cpu_half.h"
#include "cpu_simd.h"

#include <string.h>

#if defined(__AVX512F__) && defined(__AVX512VNNI__)
#include <immintrin.h>

#define WORDS (CPU_QK / 8) /* 32-bit words of nibbles in a Q4_0 block */
/* The hardware prefetchers stop at every 4 KiB page; the multiply of
 * several tokens and the unpacking for the tiles ask for a group's blocks
 * this many blocks ahead of their reads, into L1. */
#define PREFETCH_BLOCKS 8
/* A decode's Q4_0 multiply asks for them this far ahead (9 KiB) into L2,
 * no further than its run of groups goes: tiny1b's matrices from memory at
 * 1.1-1.2x the speed of 8 blocks ahead into L1. Q8_0's, with half the work
 * per byte, leaves its streams to the hardware prefetchers: the requests
 * only crowd them (tiny1b-q8_0 decode 1.04-1.06x without). */
#define DECODE_AHEAD_BLOCKS 32

typedef struct q4_0_x16 {
	uint8_t qs[WORDS][CPU_REPACK_ROWS][4];
	uint16_t d[CPU_REPACK_ROWS];
} q4_0_x16;

typedef struct q8_0_x16 {
	uint8_t qs[2 * WORDS][CPU_REPACK_ROWS][4];
	uint16_t d[CPU_REPACK_ROWS];
} q8_0_x16;

_Static_assert(sizeof(q4_0_x16) == CPU_REPACK_ROWS * sizeof(cpu_block_q4_0),
	       "a repacked group takes the bytes of the blocks it holds");
_Static_assert(sizeof(q8_0_x16) == CPU_REPACK_ROWS * sizeof(cpu_block_q8_0),
	       "a repacked group takes the bytes of the blocks it holds");

static int64_t groups_of(const loom_tensor *w)
{
	return (w->ne[1] + CPU_REPACK_ROWS - 1) / CPU_REPACK_ROWS;
}

size_t cpu_repacked_bytes(const loom_tensor *w, uint32_t *layout)
{
	if (w->layout != 0 || w->ne[2] != 1 || w->ne[3] != 1)
		return 0;
	if (w->ne[0] % CPU_QK_K == 0) {
		size_t block = cpu_repacked_k_block_bytes(w->dtype, layout);
		if (block != 0)
			return (size_t)groups_of(w) * (size_t)(w->ne[0] / CPU_QK_K) * block;
	}
	if (w->ne[0] % CPU_QK != 0)
		return 0;
	size_t blocks = (size_t)groups_of(w) * (size_t)(w->ne[0] / CPU_QK);
	if (w->dtype == LOOM_DTYPE_Q4_0) {
		*layout = CPU_LAYOUT_Q4_0_X16;
		return blocks * sizeof(q4_0_x16);
	}
	if (w->dtype == LOOM_DTYPE_Q8_0) {
		*layout = CPU_LAYOUT_Q8_0_X16;
		return blocks * sizeof(q8_0_x16);
	}
	return 0;
}

static bool k_layout(uint32_t layout)
{
	return layout == CPU_LAYOUT_Q4_K_X16 || layout == CPU_LAYOUT_Q6_K_X16;
}

void cpu_repack_groups(const loom_tensor *w, void *dst, int64_t g_lo, int64_t g_hi)
{
	int64_t n_blocks = w->ne[0] / CPU_QK;
	int64_t o_hi = g_hi * CPU_REPACK_ROWS < w->ne[1] ? g_hi * CPU_REPACK_ROWS : w->ne[1];
	uint32_t layout = 0;

	cpu_repacked_bytes(w, &layout);
	if (k_layout(layout)) {
		cpu_repack_k(w, layout, dst, g_lo, g_hi);
		return;
	}
	for (int64_t o = g_lo * CPU_REPACK_ROWS; o < o_hi; o++) {
		const char *row = (const char *)w->data + o * w->nb[1];
		int64_t first = (o / CPU_REPACK_ROWS) * n_blocks;
		int r = (int)(o % CPU_REPACK_ROWS);
		for (int64_t b = 0; b < n_blocks; b++) {
			if (layout == CPU_LAYOUT_Q4_0_X16) {
				const cpu_block_q4_0 *in = (const cpu_block_q4_0 *)row + b;
				q4_0_x16 *g = (q4_0_x16 *)dst + first + b;
				for (int k = 0; k < WORDS; k++)
					memcpy(g->qs[k][r], in->qs + 4 * k, 4);
				g->d[r] = in->d;
			} else {
				const cpu_block_q8_0 *in = (const cpu_block_q8_0 *)row + b;
				q8_0_x16 *g = (q8_0_x16 *)dst + first + b;
				for (int k = 0; k < 2 * WORDS; k++) {
					uint32_t word;
					memcpy(&word, in->qs + 4 * k, 4);
					word ^= 0x80808080u; /* signed bytes to unsigned, for VPDPBUSD */
					memcpy(g->qs[k][r], &word, 4);
				}
				g->d[r] = in->d;
			}
		}
	}
}

void cpu_repacked_block(const loom_tensor *w, int64_t o, int64_t b, void *block)
{
	if (k_layout(w->layout)) {
		cpu_repacked_block_k(w, o, b, block);
		return;
	}
	int64_t at = (o / CPU_REPACK_ROWS) * (w->ne[0] / CPU_QK) + b;
	int r = (int)(o % CPU_REPACK_ROWS);
	if (w->layout == CPU_LAYOUT_Q4_0_X16) {
		const q4_0_x16 *g = (const q4_0_x16 *)w->data + at;
		cpu_block_q4_0 *out = block;
		for (int k = 0; k < WORDS; k++)
			memcpy(out->qs + 4 * k, g->qs[k][r], 4);
		out->d = g->d[r];
		return;
	}
	const q8_0_x16 *g = (const q8_0_x16 *)w->data + at;
	cpu_block_q8_0 *out = block;
	for (int k = 0; k < 2 * WORDS; k++) {
		uint32_t word;
		memcpy(&word, g->qs[k][r], 4);
		word ^= 0x80808080u;
		memcpy(out->qs + 4 * k, &word, 4);
	}
	out->d = g->d[r];
}

void cpu_repack(const loom_tensor *w, void *dst)
{
	uint32_t layout = 0;

	memset(dst, 0, cpu_repacked_bytes(w, &layout));
	cpu_repack_groups(w, dst, 0, (w->ne[1] + CPU_REPACK_ROWS - 1) / CPU_REPACK_ROWS);
}

bool cpu_layout_supported(loom_dtype type, uint32_t layout)
{
	return layout == 0 || layout == CPU_LAYOUT_ROWS || (layout == CPU_LAYOUT_Q4_0_X16 && type == LOOM_DTYPE_Q4_0) ||
	       (layout == CPU_LAYOUT_Q8_0_X16 && type == LOOM_DTYPE_Q8_0) ||
	       (layout == CPU_LAYOUT_Q4_K_X16 && type == LOOM_DTYPE_Q4_K) ||
	       (layout == CPU_LAYOUT_Q6_K_X16 && type == LOOM_DTYPE_Q6_K);
}

bool cpu_layout_exact(uint32_t layout)
{
	return layout != CPU_LAYOUT_Q8_0_X16;
}

/* What dpbusd's unsigned weights carry on top of the signed values:
 * 8 for Q4_0 (q in 0..15 for q - 8), 128 for Q8_0 (stored q + 128). */
static int32_t weight_offset(uint32_t layout)
{
	return layout == CPU_LAYOUT_Q8_0_X16 ? 128 : 8;
}

size_t cpu_repacked_act_bytes(uint32_t layout, int64_t n)
{
	return layout == CPU_LAYOUT_Q4_0_X16 || layout == CPU_LAYOUT_Q8_0_X16
		       ? (size_t)(n / CPU_QK) * sizeof(cpu_repacked_act)
		       : 0;
}

void cpu_repacked_prepare(uint32_t layout, const void *x, int64_t n_blocks, void *out)
{
	const cpu_block_q8_0 *blocks = x;
	cpu_repacked_act *a = out;
	const __m256i ones = _mm256_set1_epi8(1);

	for (int64_t b = 0; b < n_blocks; b++) {
		__m256i q = _mm256_loadu_si256((const __m256i *)blocks[b].qs);
		__m256i s = _mm256_dpbusd_epi32(_mm256_setzero_si256(), ones, q);
		__m128i h = _mm_add_epi32(_mm256_castsi256_si128(s), _mm256_extracti128_si256(s, 1));
		h = _mm_add_epi32(h, _mm_shuffle_epi32(h, 0x4e));
		h = _mm_add_epi32(h, _mm_shuffle_epi32(h, 0xb1));
		a[b].bias = -weight_offset(layout) * _mm_cvtsi128_si32(h);
		a[b].d = cpu_fp16_to_f32(blocks[b].d);
	}
}

/* Group j (elements 4j..4j+3) of token t's activation block b in every
 * lane. */
CPU_INLINE __m512i act_group(const char *x, size_t x_stride, int t, int64_t b, int j)
{
	const cpu_block_q8_0 *blk = (const cpu_block_q8_0 *)(x + (size_t)t * x_stride) + b;
	int32_t v;

	memcpy(&v, blk->qs + 4 * j, sizeof(v));
	return _mm512_set1_epi32(v);
}

/* What cpu_repacked_prepare made of token t's block b. */
CPU_INLINE const cpu_repacked_act *act_of(const cpu_repacked_act *xa, size_t xa_stride, int t, int64_t b)
{
	return (const cpu_repacked_act *)((const char *)xa + (size_t)t * xa_stride) + b;
}

/* Block b's weights of a Q4_0 or Q8_0 group as dpbusd's unsigned operand,
 * elements 4j..4j+3 of all 16 rows in w[j]; returns the rows' scales. */
CPU_INLINE __m512 group_block(const bool q8, const void *g, int64_t b, __m512i w[2 * WORDS])
{
	const uint16_t *d;

	if (q8) {
		const q8_0_x16 *blk = (const q8_0_x16 *)g + b;
		for (int j = 0; j < 2 * WORDS; j++)
			w[j] = _mm512_loadu_si512((const void *)blk->qs[j]);
		d = blk->d;
	} else {
		const q4_0_x16 *blk = (const q4_0_x16 *)g + b;
		for (int k = 0; k < WORDS; k++) {
			__m512i qs = _mm512_loadu_si512((const void *)blk->qs[k]);
			w[k] = _mm512_and_si512(qs, _mm512_set1_epi8(15));
			w[k + WORDS] = _mm512_and_si512(_mm512_srli_epi16(qs, 4), _mm512_set1_epi8(15));
		}
		d = blk->d;
	}
	return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)d));
}

/* A decode's Q4_0 request for block b + DECODE_AHEAD_BLOCKS of the group
 * at g, unless that lies past the end of its run. */
CPU_INLINE void decode_fetch(const char *g, int64_t b, size_t block_bytes, const char *end)
{
	const char *ahead = g + (size_t)(b + DECODE_AHEAD_BLOCKS) * block_bytes;

	for (size_t o = 0; ahead < end && o < block_bytes; o += 64)
		_mm_prefetch(ahead + o, _MM_HINT_T1);
}

/*
 * Q4_0 or Q8_0, nt tokens. A block's 32 products are summed exactly in
 * integers, from the bias that takes the weights' offset back off, then
 * scaled by d_w * d_x and added to one f32 sum per row by FMA. That is
 * llama.cpp's Q4_0 order (cpu_quant_legacy.c), so Q4_0 gives the standard
 * layout's results bit for bit; Q8_0's row kernel scales each group of 4
 * products on its own, which costs 8 times the f32 work for no accuracy.
 */
CPU_INLINE void blocks_tokens(const bool q8, const void *g, const char *end, int64_t n_blocks, const char *x,
			      size_t x_stride,
			      const cpu_repacked_act *xa, size_t xa_stride, const int nt, float *y,
			      size_t y_stride, __mmask16 rows)
{
	const size_t block_bytes = q8 ? sizeof(q8_0_x16) : sizeof(q4_0_x16);
	__m512 acc[8];

	for (int t = 0; t < nt; t++)
		acc[t] = _mm512_setzero_ps();
	for (int64_t b = 0; b < n_blocks; b++) {
		__m512i w[2 * WORDS];
		if (nt == 1 && !q8) {
			decode_fetch((const char *)g, b, block_bytes, end);
		} else if (nt > 1) {
			const char *ahead = (const char *)g + (size_t)(b + PREFETCH_BLOCKS) * block_bytes;
			for (size_t o = 0; o < block_bytes; o += 64)
				_mm_prefetch(ahead + o, _MM_HINT_T0);
		}
		__m512 d = group_block(q8, g, b, w);
		/* Tokens inner: the tokens' dpbusd chains side by side, so that
		 * the scheduler always has independent ones at hand. */
		__m512i sum[8];
		for (int t = 0; t < nt; t++)
			sum[t] = _mm512_set1_epi32(act_of(xa, xa_stride, t, b)->bias);
		for (int j = 0; j < 2 * WORDS; j++)
			for (int t = 0; t < nt; t++)
				sum[t] = _mm512_dpbusd_epi32(sum[t], w[j], act_group(x, x_stride, t, b, j));
		for (int t = 0; t < nt; t++) {
			__m512 scale = _mm512_mul_ps(d, _mm512_set1_ps(act_of(xa, xa_stride, t, b)->d));
			acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sum[t]), scale, acc[t]);
		}
	}
	for (int t = 0; t < nt; t++)
		_mm512_mask_storeu_ps((float *)((char *)y + (size_t)t * y_stride), rows, acc[t]);
}

/* A decode's groups g and h side by side: its run of groups read as two
 * streams, its two halves, which keep more of the memory busy than one
 * (tiny1b-q8_0 decode 1.12x, small-q8_0 1.06-1.10x, Q4_0 1.01-1.06x;
 * groups next to each other instead, a stream restarted every group:
 * small-q8_0 0.89-0.94x, tiny1b-q4_0 0.92x), and each activation word
 * broadcast once for both. Every row gets blocks_tokens' operations in its
 * order, so the results are the same bit for bit. h's rows are those
 * rows_h sets. */
CPU_INLINE void decode_pair(const bool q8, const char *g, const char *h, const char *end, int64_t n_blocks,
			    const char *x, const cpu_repacked_act *xa, float *y_g, float *y_h, __mmask16 rows_h)
{
	const size_t block_bytes = q8 ? sizeof(q8_0_x16) : sizeof(q4_0_x16);
	__m512 acc_g = _mm512_setzero_ps(), acc_h = _mm512_setzero_ps();

	for (int64_t b = 0; b < n_blocks; b++) {
		__m512i wg[2 * WORDS], wh[2 * WORDS];
		if (!q8) {
			decode_fetch(g, b, block_bytes, end);
			decode_fetch(h, b, block_bytes, end);
		}
		__m512 dg = group_block(q8, g, b, wg), dh = group_block(q8, h, b, wh);
		const cpu_repacked_act *a = act_of(xa, 0, 0, b);
		__m512i sg = _mm512_set1_epi32(a->bias), sh = sg;
		for (int j = 0; j < 2 * WORDS; j++) {
			__m512i xj = act_group(x, 0, 0, b, j);
			sg = _mm512_dpbusd_epi32(sg, wg[j], xj);
			sh = _mm512_dpbusd_epi32(sh, wh[j], xj);
		}
		__m512 xd = _mm512_set1_ps(a->d);
		acc_g = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sg), _mm512_mul_ps(dg, xd), acc_g);
		acc_h = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sh), _mm512_mul_ps(dh, xd), acc_h);
	}
	_mm512_storeu_ps(y_g, acc_g);
	_mm512_mask_storeu_ps(y_h, rows_h, acc_h);
}

/* Tokens [t, nt) through one group, 8, 4 or 1 at a time; returns how
 * many it did. */
#define BLOCKS_TOKENS(q8)                                                                              \
	do {                                                                                           \
		int n = left >= 8 ? 8 : left >= 4 ? 4 : 1;                                             \
		if (n == 8)                                                                            \
			blocks_tokens(q8, g, end, n_blocks, x, x_stride, xa, xa_stride, 8, y, y_stride, rows); \
		else if (n == 4)                                                                       \
			blocks_tokens(q8, g, end, n_blocks, x, x_stride, xa, xa_stride, 4, y, y_stride, rows); \
		else                                                                                   \
			blocks_tokens(q8, g, end, n_blocks, x, x_stride, xa, xa_stride, 1, y, y_stride, rows); \
		return n;                                                                              \
	} while (0)

static int64_t group_tokens(uint32_t layout, const void *g, const char *end, int64_t n_blocks, const char *x,
			    size_t x_stride,
			    const cpu_repacked_act *xa, size_t xa_stride, int64_t left, float *y, size_t y_stride,
			    __mmask16 rows)
{
	if (layout == CPU_LAYOUT_Q8_0_X16)
		BLOCKS_TOKENS(true);
	BLOCKS_TOKENS(false);
}

void cpu_repacked_multiply(const loom_tensor *w, int64_t g_lo, int64_t g_hi, const char *x, size_t x_stride,
			   const void *xa, size_t xa_stride, int64_t nt, float *y, size_t y_stride)
{
	if (k_layout(w->layout)) {
		cpu_repacked_multiply_k(w, g_lo, g_hi, x, x_stride, nt, y, y_stride);
		return;
	}
	int64_t n_blocks = w->ne[0] / CPU_QK;
	size_t group_bytes = (size_t)n_blocks *
			     (w->layout == CPU_LAYOUT_Q8_0_X16 ? sizeof(q8_0_x16) : sizeof(q4_0_x16));

	const char *end = (const char *)w->data + (size_t)g_hi * group_bytes;

	if (nt == 1) {
		/* The halves side by side; an odd group out goes alone, below. */
		int64_t half = (g_hi - g_lo) / 2;
		for (int64_t i = 0; i < half; i++) {
			int64_t a = g_lo + i, b = a + half, left = w->ne[1] - b * CPU_REPACK_ROWS;
			const char *g = (const char *)w->data + (size_t)a * group_bytes;
			const char *h = (const char *)w->data + (size_t)b * group_bytes;
			if (w->layout == CPU_LAYOUT_Q8_0_X16)
				decode_pair(true, g, h, end, n_blocks, x, xa, y + a * CPU_REPACK_ROWS,
					    y + b * CPU_REPACK_ROWS, cpu_rows_mask(left));
			else
				decode_pair(false, g, h, end, n_blocks, x, xa, y + a * CPU_REPACK_ROWS,
					    y + b * CPU_REPACK_ROWS, cpu_rows_mask(left));
		}
		g_lo += 2 * half;
	}
	for (int64_t gi = g_lo; gi < g_hi; gi++) {
		int64_t o = gi * CPU_REPACK_ROWS, left = w->ne[1] - o;
		__mmask16 rows = cpu_rows_mask(left);
		const char *g = (const char *)w->data + (size_t)gi * group_bytes;
		for (int64_t t = 0; t < nt;) {
			const char *xt = x + (size_t)t * x_stride;
			const cpu_repacked_act *at = (const cpu_repacked_act *)((const char *)xa + (size_t)t * xa_stride);
			float *yt = (float *)((char *)y + (size_t)t * y_stride) + o;
			t += group_tokens(w->layout, g, end, n_blocks, xt, x_stride, at, xa_stride, nt - t, yt, y_stride,
					  rows);
		}
	}
}

#if defined(__AMX_INT8__)
/* Q8_0 blocks are stored + 128: the xor takes it off. Q4_0's low nibbles
 * are elements 0..15 of a block, its high ones 16..31, both less 8. */
void cpu_repacked_unpack(const loom_tensor *w, int64_t gi, const cpu_unpacked_group *out)
{
	if (k_layout(w->layout)) {
		cpu_repacked_unpack_k(w, gi, out);
		return;
	}
	int64_t n_blocks = w->ne[0] / CPU_QK;
	const __m512i low4 = _mm512_set1_epi8(15), eight = _mm512_set1_epi8(8);

	const size_t block_bytes = w->layout == CPU_LAYOUT_Q8_0_X16 ? sizeof(q8_0_x16) : sizeof(q4_0_x16);
	const char *group = (const char *)w->data + (size_t)(gi * n_blocks) * block_bytes;

	for (int64_t b = 0; b < n_blocks; b++) {
		__m512i *q = (__m512i *)(out->q + b * CPU_QK * CPU_REPACK_ROWS);
		const uint16_t *d;
		for (size_t at = 0; at < block_bytes; at += 64)
			_mm_prefetch(group + (size_t)(b + PREFETCH_BLOCKS) * block_bytes + at, _MM_HINT_T0);
		if (w->layout == CPU_LAYOUT_Q8_0_X16) {
			const q8_0_x16 *g = (const q8_0_x16 *)w->data + gi * n_blocks + b;
			for (int k = 0; k < 2 * WORDS; k++)
				_mm512_storeu_si512(q + k, _mm512_xor_si512(_mm512_loadu_si512((const void *)g->qs[k]),
									    _mm512_set1_epi8((char)0x80)));
			d = g->d;
		} else {
			const q4_0_x16 *g = (const q4_0_x16 *)w->data + gi * n_blocks + b;
			for (int k = 0; k < WORDS; k++) {
				__m512i v = _mm512_loadu_si512((const void *)g->qs[k]);
				_mm512_storeu_si512(q + k, _mm512_sub_epi8(_mm512_and_si512(v, low4), eight));
				_mm512_storeu_si512(q + WORDS + k,
						    _mm512_sub_epi8(_mm512_and_si512(_mm512_srli_epi16(v, 4), low4), eight));
			}
			d = g->d;
		}
		_mm512_storeu_ps(out->dw + b * CPU_REPACK_ROWS, _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)d)));
	}
}
#endif

#else

size_t cpu_repacked_bytes(const loom_tensor *w, uint32_t *layout)
{
	(void)w;
	(void)layout;
	return 0;
}

void cpu_repack(const loom_tensor *w, void *dst)
{
	(void)w;
	(void)dst;
}

void cpu_repack_groups(const loom_tensor *w, void *dst, int64_t g_lo, int64_t g_hi)
{
	(void)w, (void)dst, (void)g_lo, (void)g_hi;
}

void cpu_repacked_block(const loom_tensor *w, int64_t o, int64_t b, void *block)
{
	(void)w, (void)o, (void)b, (void)block;
}

bool cpu_layout_supported(loom_dtype type, uint32_t layout)
{
	(void)type;
	return layout == 0 || layout == CPU_LAYOUT_ROWS;
}

bool cpu_layout_exact(uint32_t layout)
{
	(void)layout;
	return true;
}

size_t cpu_repacked_act_bytes(uint32_t layout, int64_t n)
{
	(void)layout;
	(void)n;
	return 0;
}

void cpu_repacked_prepare(uint32_t layout, const void *x, int64_t n_blocks, void *out)
{
	(void)layout, (void)x, (void)n_blocks, (void)out;
}

void cpu_repacked_multiply(const loom_tensor *w, int64_t g_lo, int64_t g_hi, const char *x, size_t x_stride,
			   const void *xa, size_t xa_stride, int64_t nt, float *y, size_t y_stride)
{
	(void)w, (void)g_lo, (void)g_hi, (void)x, (void)x_stride, (void)xa, (void)xa_stride;
	(void)nt, (void)y, (void)y_stride;
}

#endif
