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

/* Q5_0's fifth bits as the byte masks of the registers they complete:
 * bit 4r + i of qh[k] is bit 4k + i of row r's qh (its low nibbles' word
 * k), of qh[WORDS + k] bit 16 + 4k + i (its high nibbles'). */
typedef struct q5_0_x16 {
	uint8_t qs[WORDS][CPU_REPACK_ROWS][4];
	uint64_t qh[2 * WORDS];
	uint16_t d[CPU_REPACK_ROWS];
} q5_0_x16;

typedef struct mxfp4_x16 {
	uint8_t qs[WORDS][CPU_REPACK_ROWS][4];
	uint8_t e[CPU_REPACK_ROWS];
} mxfp4_x16;

_Static_assert(sizeof(q4_0_x16) == CPU_REPACK_ROWS * sizeof(cpu_block_q4_0),
	       "a repacked group takes the bytes of the blocks it holds");
_Static_assert(sizeof(q8_0_x16) == CPU_REPACK_ROWS * sizeof(cpu_block_q8_0),
	       "a repacked group takes the bytes of the blocks it holds");
_Static_assert(sizeof(q5_0_x16) == CPU_REPACK_ROWS * sizeof(cpu_block_q5_0),
	       "a repacked group takes the bytes of the blocks it holds");
_Static_assert(sizeof(mxfp4_x16) == CPU_REPACK_ROWS * sizeof(cpu_block_mxfp4),
	       "a repacked group takes the bytes of the blocks it holds");

/* Bytes of a repacked group of 16 blocks in one of the 32-element layouts. */
static size_t group_block_bytes(uint32_t layout)
{
	switch (layout) {
	case CPU_LAYOUT_Q8_0_X16:
		return sizeof(q8_0_x16);
	case CPU_LAYOUT_Q5_0_X16:
		return sizeof(q5_0_x16);
	case CPU_LAYOUT_MXFP4_X16:
		return sizeof(mxfp4_x16);
	default:
		return sizeof(q4_0_x16);
	}
}

/* The 32-element layouts by their type. */
static uint32_t legacy_layout_of(loom_dtype type)
{
	switch (type) {
	case LOOM_DTYPE_Q4_0:
		return CPU_LAYOUT_Q4_0_X16;
	case LOOM_DTYPE_Q5_0:
		return CPU_LAYOUT_Q5_0_X16;
	case LOOM_DTYPE_Q8_0:
		return CPU_LAYOUT_Q8_0_X16;
	case LOOM_DTYPE_MXFP4:
		return CPU_LAYOUT_MXFP4_X16;
	default:
		return 0;
	}
}

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
	uint32_t l = legacy_layout_of(w->dtype);
	if (l == 0)
		return 0;
	*layout = l;
	return (size_t)groups_of(w) * (size_t)(w->ne[0] / CPU_QK) * group_block_bytes(l);
}

static bool k_layout(uint32_t layout)
{
	return layout == CPU_LAYOUT_Q4_K_X16 || layout == CPU_LAYOUT_Q6_K_X16;
}

/* Block b of a row into row r of its repacked group g. */
static void repack_block(uint32_t layout, const char *row, int64_t b, void *g, int r)
{
	switch (layout) {
	case CPU_LAYOUT_Q4_0_X16: {
		const cpu_block_q4_0 *in = (const cpu_block_q4_0 *)row + b;
		q4_0_x16 *out = g;
		for (int k = 0; k < WORDS; k++)
			memcpy(out->qs[k][r], in->qs + 4 * k, 4);
		out->d[r] = in->d;
		return;
	}
	case CPU_LAYOUT_Q5_0_X16: {
		const cpu_block_q5_0 *in = (const cpu_block_q5_0 *)row + b;
		q5_0_x16 *out = g;
		uint32_t qh;
		memcpy(&qh, in->qh, sizeof(qh));
		for (int k = 0; k < WORDS; k++) {
			memcpy(out->qs[k][r], in->qs + 4 * k, 4);
			out->qh[k] |= (uint64_t)(qh >> 4 * k & 15) << 4 * r;
			out->qh[WORDS + k] |= (uint64_t)(qh >> (16 + 4 * k) & 15) << 4 * r;
		}
		out->d[r] = in->d;
		return;
	}
	case CPU_LAYOUT_MXFP4_X16: {
		const cpu_block_mxfp4 *in = (const cpu_block_mxfp4 *)row + b;
		mxfp4_x16 *out = g;
		for (int k = 0; k < WORDS; k++)
			memcpy(out->qs[k][r], in->qs + 4 * k, 4);
		out->e[r] = in->e;
		return;
	}
	default: {
		const cpu_block_q8_0 *in = (const cpu_block_q8_0 *)row + b;
		q8_0_x16 *out = g;
		for (int k = 0; k < 2 * WORDS; k++) {
			uint32_t word;
			memcpy(&word, in->qs + 4 * k, 4);
			word ^= 0x80808080u; /* signed bytes to unsigned, for VPDPBUSD */
			memcpy(out->qs[k][r], &word, 4);
		}
		out->d[r] = in->d;
		return;
	}
	}
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
		for (int64_t b = 0; b < n_blocks; b++)
			repack_block(layout, row, b, (char *)dst + (size_t)(first + b) * group_block_bytes(layout), r);
	}
}

/* Row r of repacked block g back in the standard layout, per layout. */
static void unpack_q4_0(const q4_0_x16 *g, int r, cpu_block_q4_0 *out)
{
	for (int k = 0; k < WORDS; k++)
		memcpy(out->qs + 4 * k, g->qs[k][r], 4);
	out->d = g->d[r];
}

static void unpack_q5_0(const q5_0_x16 *g, int r, cpu_block_q5_0 *out)
{
	uint32_t qh = 0;

	for (int k = 0; k < WORDS; k++) {
		memcpy(out->qs + 4 * k, g->qs[k][r], 4);
		qh |= (uint32_t)(g->qh[k] >> 4 * r & 15) << 4 * k;
		qh |= (uint32_t)(g->qh[WORDS + k] >> 4 * r & 15) << (16 + 4 * k);
	}
	memcpy(out->qh, &qh, sizeof(qh));
	out->d = g->d[r];
}

static void unpack_mxfp4(const mxfp4_x16 *g, int r, cpu_block_mxfp4 *out)
{
	for (int k = 0; k < WORDS; k++)
		memcpy(out->qs + 4 * k, g->qs[k][r], 4);
	out->e = g->e[r];
}

static void unpack_q8_0(const q8_0_x16 *g, int r, cpu_block_q8_0 *out)
{
	for (int k = 0; k < 2 * WORDS; k++) {
		uint32_t word;
		memcpy(&word, g->qs[k][r], 4);
		word ^= 0x80808080u;
		memcpy(out->qs + 4 * k, &word, 4);
	}
	out->d = g->d[r];
}

void cpu_repacked_block(const loom_tensor *w, int64_t o, int64_t b, void *block)
{
	if (k_layout(w->layout)) {
		cpu_repacked_block_k(w, o, b, block);
		return;
	}
	int64_t at = (o / CPU_REPACK_ROWS) * (w->ne[0] / CPU_QK) + b;
	const void *g = (const char *)w->data + (size_t)at * group_block_bytes(w->layout);
	int r = (int)(o % CPU_REPACK_ROWS);
	if (w->layout == CPU_LAYOUT_Q4_0_X16)
		unpack_q4_0(g, r, block);
	else if (w->layout == CPU_LAYOUT_Q5_0_X16)
		unpack_q5_0(g, r, block);
	else if (w->layout == CPU_LAYOUT_MXFP4_X16)
		unpack_mxfp4(g, r, block);
	else
		unpack_q8_0(g, r, block);
}

void cpu_repack(const loom_tensor *w, void *dst)
{
	uint32_t layout = 0;

	memset(dst, 0, cpu_repacked_bytes(w, &layout));
	cpu_repack_groups(w, dst, 0, (w->ne[1] + CPU_REPACK_ROWS - 1) / CPU_REPACK_ROWS);
}

bool cpu_layout_supported(loom_dtype type, uint32_t layout)
{
	return layout == 0 || layout == CPU_LAYOUT_ROWS || (layout != 0 && layout == legacy_layout_of(type)) ||
	       (layout == CPU_LAYOUT_Q4_K_X16 && type == LOOM_DTYPE_Q4_K) ||
	       (layout == CPU_LAYOUT_Q6_K_X16 && type == LOOM_DTYPE_Q6_K);
}

/* Q4_0's multiply keeps the tile kernels' order; the other 32-element
 * layouts sum each block exactly before scaling it, where the tile
 * kernels scale parts of it (Q8_0, Q5_0) or sum lanes at the end (MXFP4),
 * and the K-quants' sum a super-block as one integer where the tile
 * kernels keep 8 lanes. */
bool cpu_layout_exact(uint32_t layout)
{
	return layout == CPU_LAYOUT_Q4_0_X16;
}

/* What dpbusd's unsigned weights carry on top of the signed values: 8 for
 * Q4_0 (q in 0..15 for q - 8), 16 for Q5_0 (q in 0..31 for q - 16), 128
 * for Q8_0 (stored q + 128), 12 for MXFP4 (its doubled E2M1 values, -12 to
 * 12, looked up shifted). */
static int32_t weight_offset(uint32_t layout)
{
	switch (layout) {
	case CPU_LAYOUT_Q8_0_X16:
		return 128;
	case CPU_LAYOUT_Q5_0_X16:
		return 16;
	case CPU_LAYOUT_MXFP4_X16:
		return 12;
	default:
		return 8;
	}
}

size_t cpu_repacked_act_bytes(uint32_t layout, int64_t n)
{
	return layout != 0 && !k_layout(layout) && layout != CPU_LAYOUT_ROWS
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

/* The 16 rows' MXFP4 scales, halved for the doubled values (as
 * cpu_mxfp4_half_scale: 2^(e - 128), subnormal below e = 2). */
CPU_INLINE __m512 mxfp4_scales(const uint8_t e[CPU_REPACK_ROWS])
{
	__m512i v = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)e));
	__m512i normal = _mm512_slli_epi32(_mm512_sub_epi32(v, _mm512_set1_epi32(1)), 23);
	__m512i tiny = _mm512_sllv_epi32(_mm512_set1_epi32(0x00200000), v);
	__mmask16 small = _mm512_cmplt_epu32_mask(v, _mm512_set1_epi32(2));
	return _mm512_castsi512_ps(_mm512_mask_blend_epi32(small, normal, tiny));
}

/* Block b's weights of a group in one of the 32-element layouts as
 * dpbusd's unsigned operand (each weight plus weight_offset), elements
 * 4j..4j+3 of all 16 rows in w[j]; returns the rows' scales. */
CPU_INLINE __m512 group_block(const uint32_t layout, const void *g, int64_t b, __m512i w[2 * WORDS])
{
	const __m512i low4 = _mm512_set1_epi8(15);

	if (layout == CPU_LAYOUT_Q8_0_X16) {
		const q8_0_x16 *blk = (const q8_0_x16 *)g + b;
		for (int j = 0; j < 2 * WORDS; j++)
			w[j] = _mm512_loadu_si512((const void *)blk->qs[j]);
		return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)blk->d));
	}
	const uint8_t(*qs)[CPU_REPACK_ROWS][4] = layout == CPU_LAYOUT_Q5_0_X16	  ? ((const q5_0_x16 *)g + b)->qs
						 : layout == CPU_LAYOUT_MXFP4_X16 ? ((const mxfp4_x16 *)g + b)->qs
										  : ((const q4_0_x16 *)g + b)->qs;
	for (int k = 0; k < WORDS; k++) {
		__m512i v = _mm512_loadu_si512((const void *)qs[k]);
		w[k] = _mm512_and_si512(v, low4);
		w[k + WORDS] = _mm512_and_si512(_mm512_srli_epi16(v, 4), low4);
	}
	if (layout == CPU_LAYOUT_Q5_0_X16) {
		const q5_0_x16 *blk = (const q5_0_x16 *)g + b;
		for (int j = 0; j < 2 * WORDS; j++)
			w[j] = _mm512_or_si512(w[j], _mm512_maskz_mov_epi8(blk->qh[j], _mm512_set1_epi8(16)));
		return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)blk->d));
	}
	if (layout == CPU_LAYOUT_MXFP4_X16) {
		static const int8_t shifted[16] = {12, 13, 14, 15, 16, 18, 20, 24, 12, 11, 10, 9, 8, 6, 4, 0};
		const __m512i table = _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)shifted));
		for (int j = 0; j < 2 * WORDS; j++)
			w[j] = _mm512_shuffle_epi8(table, w[j]);
		return mxfp4_scales(((const mxfp4_x16 *)g + b)->e);
	}
	return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)((const q4_0_x16 *)g + b)->d));
}

/* A decode's request for block b + DECODE_AHEAD_BLOCKS of the group
 * at g, unless that lies past the end of its run. */
CPU_INLINE void decode_fetch(const char *g, int64_t b, size_t block_bytes, const char *end)
{
	const char *ahead = g + (size_t)(b + DECODE_AHEAD_BLOCKS) * block_bytes;

	for (size_t o = 0; ahead < end && o < block_bytes; o += 64)
		_mm_prefetch(ahead + o, _MM_HINT_T1);
}

/* Only the 4-bit layouts' decodes ask ahead: Q8_0's, with half their
 * work per byte, leaves its streams to the hardware prefetchers. */
CPU_INLINE bool decode_asks_ahead(uint32_t layout)
{
	return layout != CPU_LAYOUT_Q8_0_X16;
}

/*
 * One of the 32-element layouts, nt tokens. A block's 32 products are
 * summed exactly in integers, from the bias that takes the weights' offset
 * back off, then scaled by d_w * d_x and added to one f32 sum per row by
 * FMA. That is llama.cpp's Q4_0 order (cpu_quant_legacy.c), so Q4_0 gives
 * the standard layout's results bit for bit; the tile kernels of the others
 * scale parts of a block (Q8_0's each group of 4 products, which costs 8
 * times the f32 work for no accuracy).
 */
CPU_INLINE void blocks_tokens(const uint32_t layout, const void *g, const char *end, int64_t n_blocks,
			      const char *x, size_t x_stride, const cpu_repacked_act *xa, size_t xa_stride,
			      const int nt, float *y, size_t y_stride, __mmask16 rows)
{
	const size_t block_bytes = group_block_bytes(layout);
	__m512 acc[8];

	for (int t = 0; t < nt; t++)
		acc[t] = _mm512_setzero_ps();
	for (int64_t b = 0; b < n_blocks; b++) {
		__m512i w[2 * WORDS];
		if (nt == 1 && decode_asks_ahead(layout)) {
			decode_fetch((const char *)g, b, block_bytes, end);
		} else if (nt > 1) {
			const char *ahead = (const char *)g + (size_t)(b + PREFETCH_BLOCKS) * block_bytes;
			for (size_t o = 0; o < block_bytes; o += 64)
				_mm_prefetch(ahead + o, _MM_HINT_T0);
		}
		__m512 d = group_block(layout, g, b, w);
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
CPU_INLINE void decode_pair(const uint32_t layout, const char *g, const char *h, const char *end, int64_t n_blocks,
			    const char *x, const cpu_repacked_act *xa, float *y_g, float *y_h, __mmask16 rows_h)
{
	const size_t block_bytes = group_block_bytes(layout);
	__m512 acc_g = _mm512_setzero_ps(), acc_h = _mm512_setzero_ps();

	for (int64_t b = 0; b < n_blocks; b++) {
		__m512i wg[2 * WORDS], wh[2 * WORDS];
		if (decode_asks_ahead(layout)) {
			decode_fetch(g, b, block_bytes, end);
			decode_fetch(h, b, block_bytes, end);
		}
		__m512 dg = group_block(layout, g, b, wg), dh = group_block(layout, h, b, wh);
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
#define BLOCKS_TOKENS(layout)                                                                              \
	do {                                                                                               \
		int n = left >= 8 ? 8 : left >= 4 ? 4 : 1;                                                 \
		if (n == 8)                                                                                \
			blocks_tokens(layout, g, end, n_blocks, x, x_stride, xa, xa_stride, 8, y, y_stride, rows); \
		else if (n == 4)                                                                           \
			blocks_tokens(layout, g, end, n_blocks, x, x_stride, xa, xa_stride, 4, y, y_stride, rows); \
		else                                                                                       \
			blocks_tokens(layout, g, end, n_blocks, x, x_stride, xa, xa_stride, 1, y, y_stride, rows); \
		return n;                                                                                  \
	} while (0)

static int64_t group_tokens(uint32_t layout, const void *g, const char *end, int64_t n_blocks, const char *x,
			    size_t x_stride,
			    const cpu_repacked_act *xa, size_t xa_stride, int64_t left, float *y, size_t y_stride,
			    __mmask16 rows)
{
	switch (layout) {
	case CPU_LAYOUT_Q8_0_X16:
		BLOCKS_TOKENS(CPU_LAYOUT_Q8_0_X16);
	case CPU_LAYOUT_Q5_0_X16:
		BLOCKS_TOKENS(CPU_LAYOUT_Q5_0_X16);
	case CPU_LAYOUT_MXFP4_X16:
		BLOCKS_TOKENS(CPU_LAYOUT_MXFP4_X16);
	default:
		BLOCKS_TOKENS(CPU_LAYOUT_Q4_0_X16);
	}
}

/* A decode's pair of groups, in the weight's layout. */
static void layout_pair(uint32_t layout, const char *g, const char *h, const char *end, int64_t n_blocks,
			const char *x, const cpu_repacked_act *xa, float *y_g, float *y_h, __mmask16 rows_h)
{
	switch (layout) {
	case CPU_LAYOUT_Q8_0_X16:
		decode_pair(CPU_LAYOUT_Q8_0_X16, g, h, end, n_blocks, x, xa, y_g, y_h, rows_h);
		return;
	case CPU_LAYOUT_Q5_0_X16:
		decode_pair(CPU_LAYOUT_Q5_0_X16, g, h, end, n_blocks, x, xa, y_g, y_h, rows_h);
		return;
	case CPU_LAYOUT_MXFP4_X16:
		decode_pair(CPU_LAYOUT_MXFP4_X16, g, h, end, n_blocks, x, xa, y_g, y_h, rows_h);
		return;
	default:
		decode_pair(CPU_LAYOUT_Q4_0_X16, g, h, end, n_blocks, x, xa, y_g, y_h, rows_h);
	}
}

void cpu_repacked_multiply(const loom_tensor *w, int64_t g_lo, int64_t g_hi, const char *x, size_t x_stride,
			   const void *xa, size_t xa_stride, int64_t nt, float *y, size_t y_stride)
{
	if (k_layout(w->layout)) {
		cpu_repacked_multiply_k(w, g_lo, g_hi, x, x_stride, nt, y, y_stride);
		return;
	}
	int64_t n_blocks = w->ne[0] / CPU_QK;
	size_t group_bytes = (size_t)n_blocks * group_block_bytes(w->layout);

	const char *end = (const char *)w->data + (size_t)g_hi * group_bytes;

	if (nt == 1) {
		/* The halves side by side; an odd group out goes alone, below. */
		int64_t half = (g_hi - g_lo) / 2;
		for (int64_t i = 0; i < half; i++) {
			int64_t a = g_lo + i, b = a + half, left = w->ne[1] - b * CPU_REPACK_ROWS;
			const char *g = (const char *)w->data + (size_t)a * group_bytes;
			const char *h = (const char *)w->data + (size_t)b * group_bytes;
			layout_pair(w->layout, g, h, end, n_blocks, x, xa, y + a * CPU_REPACK_ROWS, y + b * CPU_REPACK_ROWS,
				    cpu_rows_mask(left));
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
/* The weights as group_block gives them, less their offset: signed bytes. */
void cpu_repacked_unpack(const loom_tensor *w, int64_t gi, const cpu_unpacked_group *out)
{
	if (k_layout(w->layout)) {
		cpu_repacked_unpack_k(w, gi, out);
		return;
	}
	int64_t n_blocks = w->ne[0] / CPU_QK;
	const size_t block_bytes = group_block_bytes(w->layout);
	const char *group = (const char *)w->data + (size_t)(gi * n_blocks) * block_bytes;
	const __m512i offset = _mm512_set1_epi8((char)weight_offset(w->layout));

	for (int64_t b = 0; b < n_blocks; b++) {
		__m512i *q = (__m512i *)(out->q + b * CPU_QK * CPU_REPACK_ROWS);
		__m512i v[2 * WORDS];
		for (size_t at = 0; at < block_bytes; at += 64)
			_mm_prefetch(group + (size_t)(b + PREFETCH_BLOCKS) * block_bytes + at, _MM_HINT_T0);
		__m512 d = group_block(w->layout, group, b, v);
		for (int j = 0; j < 2 * WORDS; j++)
			_mm512_storeu_si512(q + j, _mm512_sub_epi8(v[j], offset));
		_mm512_storeu_ps(out->dw + b * CPU_REPACK_ROWS, d);
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
