/* cpu_amx.c - quantized weights on the AMX int8 tiles (cpu_amx.h). */
#include "cpu_amx.h"

#if defined(CPU_HAS_AMX)
#include "cpu_share.h"
#include "cpu_blocks.h"
#include "cpu_half.h"
#include "cpu_quant.h"
#include "cpu_repack.h"
#include "cpu_simd.h"

#include <immintrin.h>
#include <string.h>

#define ROWS CPU_REPACK_ROWS
#define TOKENS CPU_AMX_TOKENS

/* Tiles: two accumulators, the activations and weights of two sub-blocks
 * in flight. */
#define TILE_C0 0
#define TILE_C1 1
#define TILE_X0 2
#define TILE_X1 3
#define TILE_W0 4
#define TILE_W1 5

/* How a weight type meets the tiles: its sub-block (elements per scale)
 * and whether it has mins; and where its activations' bytes are. */
typedef struct quant_shape {
	int sub;
	bool has_min;
	int act_elems;     /* elements per activation block */
	size_t act_bytes;  /* bytes per activation block */
	size_t act_qs;     /* offset of the block's quants */
} quant_shape;

/* sub 0 for a type the tiles do not take. */
static quant_shape shape_of(loom_dtype type)
{
	switch (type) {
	case LOOM_DTYPE_Q4_0:
	case LOOM_DTYPE_Q5_0:
	case LOOM_DTYPE_Q8_0:
		return (quant_shape){32, false, CPU_QK, sizeof(cpu_block_q8_0), offsetof(cpu_block_q8_0, qs)};
	case LOOM_DTYPE_Q4_1:
	case LOOM_DTYPE_Q5_1:
		return (quant_shape){32, true, CPU_QK, sizeof(cpu_block_q8_1), offsetof(cpu_block_q8_1, qs)};
	case LOOM_DTYPE_Q2_K:
		return (quant_shape){16, true, CPU_QK_K, sizeof(cpu_block_q8_k), offsetof(cpu_block_q8_k, qs)};
	case LOOM_DTYPE_Q3_K:
	case LOOM_DTYPE_Q6_K:
		return (quant_shape){16, false, CPU_QK_K, sizeof(cpu_block_q8_k), offsetof(cpu_block_q8_k, qs)};
	case LOOM_DTYPE_Q4_K:
	case LOOM_DTYPE_Q5_K:
		return (quant_shape){32, true, CPU_QK_K, sizeof(cpu_block_q8_k), offsetof(cpu_block_q8_k, qs)};
	default:
		return (quant_shape){0};
	}
}

bool cpu_amx_quant_takes(loom_dtype type)
{
	return shape_of(type).sub != 0;
}

static int64_t padded_tokens(int64_t n_tok)
{
	return (n_tok + TOKENS - 1) / TOKENS * TOKENS;
}

/* ---- the activations' scales ----
 * dx[s][t] is token t's scale for sub-block s, sx[s][t] that times the
 * sub-block's sum of quants (for the min terms); both over the padded
 * tokens, the padding zero. A sub-block's 16 tokens of a tile are then
 * side by side, at fixed offsets from one address. */

static size_t scales_bytes(const loom_tensor *w, int64_t n_tok)
{
	const quant_shape s = shape_of(w->dtype);

	return (size_t)(padded_tokens(n_tok) * (w->ne[0] / s.sub)) * sizeof(float);
}

size_t cpu_amx_quant_shared_bytes(const loom_tensor *w, int64_t n_tok)
{
	return 2 * scales_bytes(w, n_tok);
}

void cpu_amx_quant_prepare(const loom_tensor *w, const void *act_row, int64_t t, int64_t e0, int64_t len,
			   int64_t n_tok, void *shared)
{
	const quant_shape s = shape_of(w->dtype);
	const int64_t stride = padded_tokens(n_tok);
	float *dx = (float *)shared + t;
	float *sx = (float *)((char *)shared + scales_bytes(w, n_tok)) + t;
	for (int64_t j = e0 / s.sub; j < (e0 + len) / s.sub; j++) {
		const char *blk = (const char *)act_row + (size_t)(j * s.sub / s.act_elems) * s.act_bytes;
		if (s.act_elems == CPU_QK_K) {
			const cpu_block_q8_k *b = (const cpu_block_q8_k *)blk;
			int first = (int)(j * s.sub % CPU_QK_K) / 16;
			int sum = b->bsums[first] + (s.sub == 32 ? b->bsums[first + 1] : 0);
			dx[j * stride] = b->d;
			sx[j * stride] = b->d * (float)sum;
		} else if (s.has_min) {
			const cpu_block_q8_1 *b = (const cpu_block_q8_1 *)blk;
			dx[j * stride] = cpu_fp16_to_f32(b->d);
			sx[j * stride] = cpu_fp16_to_f32(b->s);
		} else {
			dx[j * stride] = cpu_fp16_to_f32(((const cpu_block_q8_0 *)blk)->d);
			sx[j * stride] = 0.0f;
		}
	}
}

void cpu_amx_quant_pad(const loom_tensor *w, int64_t n_tok, void *shared)
{
	const quant_shape s = shape_of(w->dtype);
	const int64_t stride = padded_tokens(n_tok), n_sub = w->ne[0] / s.sub;
	float *dx = shared, *sx = (float *)((char *)shared + scales_bytes(w, n_tok));

	for (int64_t j = 0; j < n_sub; j++) {
		memset(dx + j * stride + n_tok, 0, (size_t)(stride - n_tok) * sizeof(float));
		memset(sx + j * stride + n_tok, 0, (size_t)(stride - n_tok) * sizeof(float));
	}
}

/* ---- a group's panel ---- */

size_t cpu_amx_quant_panel_bytes(const loom_tensor *w)
{
	const quant_shape s = shape_of(w->dtype);

	size_t scales = (size_t)(w->ne[0] / s.sub) * ROWS * sizeof(float);
	return cpu_align_up((size_t)w->ne[0] * ROWS) + 2 * cpu_align_up(scales);
}

static cpu_unpacked_group panel_of(const loom_tensor *w, void *panel)
{
	const quant_shape s = shape_of(w->dtype);

	size_t scales = cpu_align_up((size_t)(w->ne[0] / s.sub) * ROWS * sizeof(float));
	char *q = panel, *dw = q + cpu_align_up((size_t)w->ne[0] * ROWS);
	return (cpu_unpacked_group){(int8_t *)q, (float *)dw, s.has_min ? (float *)(dw + scales) : NULL};
}

/* Row r of the group from a weight in the standard layout. */
static void unpack_row(const loom_tensor *w, const char *row, int r, const cpu_unpacked_group *p)
{
	int8_t q[CPU_QK_K];
	int64_t n = w->ne[0];
	const loom_dtype_traits l = loom_dtype_traits_of(w->dtype);

	for (int64_t e0 = 0; e0 < n; e0 += l.block) {
		const void *block = row + (size_t)(e0 / l.block) * l.block_bytes;
		if (l.block == CPU_QK) {
			float d, m;
			cpu_legacy_unpack(w->dtype, block, q, &d, &m);
			p->dw[e0 / CPU_QK * ROWS + r] = d;
			if (p->mw != NULL)
				p->mw[e0 / CPU_QK * ROWS + r] = m;
		} else {
			cpu_k_block k;
			cpu_k_unpack(w->dtype, block, &k);
			memcpy(q, k.q, sizeof(k.q));
			int64_t s0 = e0 / (CPU_QK_K / k.n_sub);
			for (int j = 0; j < k.n_sub; j++) {
				p->dw[(s0 + j) * ROWS + r] = k.d * (float)k.sc[j];
				if (p->mw != NULL)
					p->mw[(s0 + j) * ROWS + r] = -(k.dmin * (float)k.m[j]);
			}
		}
		for (int g = 0; g < l.block / 4; g++)
			memcpy(p->q + (e0 / 4 + g) * 64 + r * 4, q + 4 * g, 4);
	}
}

static void unpack_group(const loom_tensor *w, int64_t gi, const cpu_unpacked_group *p)
{
	if (cpu_layout_rearranges(w->layout)) {
		cpu_repacked_unpack(w, gi, p);
		return;
	}
	int64_t o = gi * ROWS;
	for (int r = 0; r < ROWS && o + r < w->ne[1]; r++)
		unpack_row(w, (const char *)w->data + (size_t)(o + r) * w->nb[1], r, p);
}

/* ---- the tiles ---- */

static void configure(int tokens, int sub)
{
	cpu_amx_config c = {.palette = 1};

	for (int t = TILE_C0; t <= TILE_C1; t++)
		c.rows[t] = (uint8_t)tokens, c.colsb[t] = ROWS * sizeof(int32_t);
	for (int t = TILE_X0; t <= TILE_X1; t++)
		c.rows[t] = (uint8_t)tokens, c.colsb[t] = (uint16_t)sub;
	for (int t = TILE_W0; t <= TILE_W1; t++)
		c.rows[t] = (uint8_t)(sub / 4), c.colsb[t] = ROWS * 4;
	_tile_loadconfig(&c);
}

/* acc[m] += sub-block j's sums c[m] times dw * dx[m], plus mw * sx[m]
 * (dx and sx at sub-block 0 of the tile's first token, stride apart). */
CPU_INLINE void add_scaled(const bool has_min, const int32_t c[TOKENS][ROWS], const cpu_unpacked_group *p,
			   const float *dx, const float *sx, int64_t stride, int64_t j, __m512 acc[TOKENS])
{
	const __m512 dw = _mm512_loadu_ps(p->dw + j * ROWS);
	const __m512 mw = has_min ? _mm512_loadu_ps(p->mw + j * ROWS) : _mm512_setzero_ps();
	const float *dxj = dx + j * stride, *sxj = sx + j * stride;

	CPU_UNROLLED
	for (int m = 0; m < TOKENS; m++) {
		__m512 sums = _mm512_cvtepi32_ps(_mm512_load_si512((const void *)c[m]));
		acc[m] = _mm512_fmadd_ps(sums, _mm512_mul_ps(dw, _mm512_set1_ps(dxj[m])), acc[m]);
		if (has_min)
			acc[m] = _mm512_fmadd_ps(mw, _mm512_set1_ps(sxj[m]), acc[m]);
	}
}

/* Tokens [0, tokens) of a tile (rows x_stride apart from x) through the
 * group's panel; dx and sx at the tile's first token. */
CPU_INLINE void tile_tokens(const bool has_min, const int sub, const quant_shape *s, const cpu_unpacked_group *p,
			    int64_t n_sub, const char *x, size_t x_stride, const float *dx, const float *sx,
			    int64_t stride, int tokens, float *y, size_t y_stride, __mmask16 rows)
{
	int32_t c[2][TOKENS][ROWS] __attribute__((aligned(64)));
	__m512 acc[TOKENS];
	const size_t w_bytes = (size_t)sub * ROWS;

	if (tokens < TOKENS)
		memset(c, 0, sizeof(c)); /* the rows past the tile's are read, never stored */
	CPU_UNROLLED
	for (int m = 0; m < TOKENS; m++)
		acc[m] = _mm512_setzero_ps();
#define ACT(j) (x + (size_t)((j) * sub / s->act_elems) * s->act_bytes + s->act_qs + (size_t)((j) * sub % s->act_elems))
	int64_t j = 0;
	for (; j + 2 <= n_sub; j += 2) {
		CPU_TILE_LOAD(TILE_X0, ACT(j), (long)x_stride);
		CPU_TILE_LOAD(TILE_W0, p->q + j * w_bytes, ROWS * 4);
		CPU_TILE_ZERO(TILE_C0);
		CPU_TILE_DP_S8(TILE_C0, TILE_X0, TILE_W0);
		CPU_TILE_LOAD(TILE_X1, ACT(j + 1), (long)x_stride);
		CPU_TILE_LOAD(TILE_W1, p->q + (j + 1) * w_bytes, ROWS * 4);
		CPU_TILE_ZERO(TILE_C1);
		CPU_TILE_DP_S8(TILE_C1, TILE_X1, TILE_W1);
		CPU_TILE_STORE(TILE_C0, c[0], ROWS * sizeof(int32_t));
		add_scaled(has_min, c[0], p, dx, sx, stride, j, acc);
		CPU_TILE_STORE(TILE_C1, c[1], ROWS * sizeof(int32_t));
		add_scaled(has_min, c[1], p, dx, sx, stride, j + 1, acc);
	}
	if (j < n_sub) {
		CPU_TILE_LOAD(TILE_X0, ACT(j), (long)x_stride);
		CPU_TILE_LOAD(TILE_W0, p->q + j * w_bytes, ROWS * 4);
		CPU_TILE_ZERO(TILE_C0);
		CPU_TILE_DP_S8(TILE_C0, TILE_X0, TILE_W0);
		CPU_TILE_STORE(TILE_C0, c[0], ROWS * sizeof(int32_t));
		add_scaled(has_min, c[0], p, dx, sx, stride, j, acc);
	}
#undef ACT
	/* Over every accumulator, so that they stay registers. */
	CPU_UNROLLED
	for (int m = 0; m < TOKENS; m++)
		if (m < tokens)
			_mm512_mask_storeu_ps((float *)((char *)y + (size_t)m * y_stride), rows, acc[m]);
}

static void group_tokens(const quant_shape *s, const cpu_unpacked_group *p, int64_t n_sub, const char *x,
			 size_t x_stride, const float *dx, const float *sx, int64_t stride, int tokens, float *y,
			 size_t y_stride, __mmask16 rows)
{
	if (s->sub == 32 && s->has_min)
		tile_tokens(true, 32, s, p, n_sub, x, x_stride, dx, sx, stride, tokens, y, y_stride, rows);
	else if (s->sub == 32)
		tile_tokens(false, 32, s, p, n_sub, x, x_stride, dx, sx, stride, tokens, y, y_stride, rows);
	else if (s->has_min)
		tile_tokens(true, 16, s, p, n_sub, x, x_stride, dx, sx, stride, tokens, y, y_stride, rows);
	else
		tile_tokens(false, 16, s, p, n_sub, x, x_stride, dx, sx, stride, tokens, y, y_stride, rows);
}

void cpu_amx_quant_multiply(const loom_tensor *w, int64_t g_lo, int64_t g_hi, const char *x, size_t x_stride,
			    const void *shared, void *panel, int64_t n_tok, float *y, size_t y_stride)
{
	const quant_shape s = shape_of(w->dtype);

	int64_t n_sub = w->ne[0] / s.sub;
	const int64_t stride = padded_tokens(n_tok);
	const float *dx = shared, *sx = (const float *)((const char *)shared + scales_bytes(w, n_tok));
	cpu_unpacked_group p = panel_of(w, panel);
	int configured = 0;

	for (int64_t gi = g_lo; gi < g_hi; gi++) {
		int64_t o = gi * ROWS, left = w->ne[1] - o;
		__mmask16 rows = cpu_rows_mask(left);
		unpack_group(w, gi, &p);
		for (int64_t t = 0; t < n_tok; t += TOKENS) {
			int tokens = n_tok - t < TOKENS ? (int)(n_tok - t) : TOKENS;
			if (tokens != configured) {
				configure(tokens, s.sub);
				configured = tokens;
			}
			group_tokens(&s, &p, n_sub, x + (size_t)t * x_stride, x_stride, dx + t, sx + t, stride, tokens,
				     (float *)((char *)y + (size_t)t * y_stride) + o, y_stride, rows);
		}
	}
	_tile_release();
}

/* ---- both kinds ---- */

bool cpu_amx_takes(const loom_tensor *w, int64_t n_tok)
{
	if (n_tok < CPU_AMX_MIN_TOKENS)
		return false;
	if (w->dtype == LOOM_DTYPE_F16 || w->dtype == LOOM_DTYPE_BF16)
		return true;
	return cpu_amx_quant_takes(w->dtype);
}

static bool is_float(const loom_tensor *w)
{
	return w->dtype == LOOM_DTYPE_F16 || w->dtype == LOOM_DTYPE_BF16;
}

size_t cpu_amx_shared_bytes(const loom_tensor *w, int64_t n_tok)
{
	return is_float(w) ? cpu_amx_float_shared_bytes(w, n_tok) : cpu_amx_quant_shared_bytes(w, n_tok);
}

size_t cpu_amx_panel_bytes(const loom_tensor *w)
{
	return is_float(w) ? cpu_amx_float_panel_bytes(w) : cpu_amx_quant_panel_bytes(w);
}

int64_t cpu_amx_padded_tokens(int64_t n_tok)
{
	return padded_tokens(n_tok);
}

void cpu_amx_multiply(const loom_tensor *w, int64_t g_lo, int64_t g_hi, const char *x, size_t x_stride,
		      const void *shared, void *panel, int64_t n_tok, float *y, size_t y_stride)
{
	if (is_float(w))
		cpu_amx_float_multiply(w, g_lo, g_hi, shared, panel, n_tok, y, y_stride);
	else
		cpu_amx_quant_multiply(w, g_lo, g_hi, x, x_stride, shared, panel, n_tok, y, y_stride);
}

#endif
