/* cpu_amx_float.c - F16 and BF16 weights on the AMX bf16 tiles (cpu_amx.h).
 *
 * The weights are the tiles' first operand, rows as they are: a group's 16
 * rows, split into BF16 parts, make a panel of rows padded with zeros to
 * whole 32-element chunks. The activations are the second operand, in
 * pairs: for each 16 tokens and each chunk, row k of a tile holds elements
 * 2k and 2k + 1 of the 16 tokens. A tile of sums then holds outputs by
 * weight row and token, and is transposed as it is written out. */
#include "cpu_amx.h"

#if defined(CPU_HAS_AMX)
#include "cpu_share.h"
#include "cpu_half.h"
#include "cpu_simd.h"

#include <immintrin.h>
#include <string.h>

#define ROWS 16
#define TOKENS CPU_AMX_TOKENS
#define CHUNK 32                                  /* elements per tile row of weights */
#define TILE_BYTES (ROWS * 64)                    /* one 16 x 64-byte tile */

/* Tiles: two sums for each of two token tiles (F16: high*high + low*low in
 * one, the cross products in the other, two chains of equal length), the
 * weights' high and low parts, and the activations'. */
#define TILE_HIGH0 0
#define TILE_LOW0 1
#define TILE_HIGH1 2
#define TILE_LOW1 3
#define TILE_W_HIGH 4
#define TILE_W_LOW 5
#define TILE_X_HIGH 6
#define TILE_X_LOW 7

static int parts_of(const loom_tensor *w)
{
	return w->dtype == LOOM_DTYPE_F16 ? 2 : 1;
}

static int64_t chunks_of(const loom_tensor *w)
{
	return (w->ne[0] + CHUNK - 1) / CHUNK;
}

size_t cpu_amx_float_shared_bytes(const loom_tensor *w, int64_t n_tok)
{
	return (size_t)(cpu_amx_padded_tokens(n_tok) / TOKENS * chunks_of(w) * parts_of(w)) * TILE_BYTES;
}

size_t cpu_amx_float_panel_bytes(const loom_tensor *w)
{
	return (size_t)(parts_of(w) * ROWS * chunks_of(w) * CHUNK) * sizeof(uint16_t);
}

/* Sixteen f32 values split into BF16 high parts (their top 16 bits) and
 * low parts (the rest, exact in BF16 for a value of F16 precision). */
CPU_INLINE void split_x16(__m512 v, __m256i *high, __m256i *low)
{
	__m512i bits = _mm512_castps_si512(v);
	__m512 h = _mm512_castsi512_ps(_mm512_and_si512(bits, _mm512_set1_epi32((int)0xffff0000u)));
	__m512i rest = _mm512_castps_si512(_mm512_sub_ps(v, h));
	*high = _mm512_cvtepi32_epi16(_mm512_srli_epi32(bits, 16));
	*low = _mm512_cvtepi32_epi16(_mm512_srli_epi32(rest, 16));
}

int64_t cpu_amx_padded_elements(const loom_tensor *w)
{
	return chunks_of(w) * CHUNK;
}

void cpu_amx_float_convert(const loom_tensor *w, const float *x, int64_t t, int64_t e0, int64_t len,
			   void *shared)
{
	uint16_t part[2][256] __attribute__((aligned(64)));
	int64_t n = w->ne[0];
	int64_t real = x == NULL ? 0 : n - e0 < len ? n - e0 : len;
	const int parts = parts_of(w);

	memset(part, 0, sizeof(part));
	if (w->dtype == LOOM_DTYPE_BF16) {
		cpu_f32_to_bf16_row(x + e0, part[0], real);
	} else {
		for (int64_t i = 0; i < real; i += 16) {
			__mmask16 m = real - i >= 16 ? 0xffff : cpu_tail_mask(real - i);
			__m512 v = _mm512_maskz_loadu_ps(m, x + e0 + i);
			__m512 h = _mm512_cvtph_ps(_mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
			__m256i high, low;
			split_x16(h, &high, &low);
			_mm256_storeu_si256((__m256i *)(part[0] + i), high);
			_mm256_storeu_si256((__m256i *)(part[1] + i), low);
		}
	}
	int64_t tile = t / TOKENS, chunks = chunks_of(w);
	for (int p = 0; p < parts; p++) {
		for (int64_t i = 0; i < len; i += 2) {
			int64_t e = e0 + i;
			char *dst = (char *)shared + (size_t)((tile * chunks + e / CHUNK) * parts + p) * TILE_BYTES;
			memcpy(dst + (e % CHUNK) / 2 * 64 + (t % TOKENS) * 4, part[p] + i, 4);
		}
	}
}

/* The group's rows into the panel, each padded with zeros to whole chunks;
 * zero rows past the weight's last. */
static void fill_panel(const loom_tensor *w, int64_t o, uint16_t *panel)
{
	const int64_t n = w->ne[0], width = chunks_of(w) * CHUNK;
	const size_t row_bytes = (size_t)width * sizeof(uint16_t);
	uint16_t *low = panel + ROWS * width;
	/* The high halves of 32 f32 values in two registers, in order. */
	const __m512i high_words = _mm512_set_epi16(63, 61, 59, 57, 55, 53, 51, 49, 47, 45, 43, 41, 39, 37, 35, 33,
						     31, 29, 27, 25, 23, 21, 19, 17, 15, 13, 11, 9, 7, 5, 3, 1);

	for (int r = 0; r < ROWS; r++) {
		if (o + r >= w->ne[1]) {
			memset(panel + r * width, 0, row_bytes);
			if (w->dtype == LOOM_DTYPE_F16)
				memset(low + r * width, 0, row_bytes);
			continue;
		}
		const uint16_t *row = (const uint16_t *)((const char *)w->data + (size_t)(o + r) * w->nb[1]);
		if (w->dtype == LOOM_DTYPE_BF16) {
			memcpy(panel + r * width, row, (size_t)n * sizeof(uint16_t));
			memset(panel + r * width + n, 0, (size_t)(width - n) * sizeof(uint16_t));
			continue;
		}
		for (int64_t i = 0; i < width; i += CHUNK) {
			__m512 v[2], rest[2];
			for (int h = 0; h < 2; h++) {
				int64_t left = n - i - 16 * h;
				__mmask16 m = left >= 16 ? 0xffff : left <= 0 ? 0 : cpu_tail_mask(left);
				v[h] = cpu_load_fp16_x16(row + i + 16 * h, m);
				__m512 top = _mm512_castsi512_ps(
					_mm512_and_si512(_mm512_castps_si512(v[h]), _mm512_set1_epi32((int)0xffff0000u)));
				rest[h] = _mm512_sub_ps(v[h], top);
			}
			_mm512_storeu_si512(panel + r * width + i,
					    _mm512_permutex2var_epi16(_mm512_castps_si512(v[0]), high_words,
								      _mm512_castps_si512(v[1])));
			_mm512_storeu_si512(low + r * width + i,
					    _mm512_permutex2var_epi16(_mm512_castps_si512(rest[0]), high_words,
								      _mm512_castps_si512(rest[1])));
		}
	}
}

static void configure(void)
{
	cpu_amx_config c = {.palette = 1};

	for (int t = 0; t < 8; t++)
		c.rows[t] = ROWS, c.colsb[t] = 64;
	_tile_loadconfig(&c);
}

/* Outputs of a token tile: high[r][k] + low[r][k] (the two sums) is
 * weight row r's with token k. */
static void write_out(const float high[ROWS][TOKENS], const float low[ROWS][TOKENS], bool f16, int tokens,
		      int rows, float *y, size_t y_stride)
{
	for (int k = 0; k < tokens; k++) {
		float *yk = (float *)((char *)y + (size_t)k * y_stride);
		for (int r = 0; r < rows; r++)
			yk[r] = f16 ? high[r][k] + low[r][k] : high[r][k];
	}
}

/* One token tile's activations at x against the weights in the tiles,
 * into its two sums (f16 in scope). */
#define TOKEN_TILE(x, sum_high, sum_low)                                      \
	do {                                                                  \
		CPU_TILE_LOAD(TILE_X_HIGH, x, 64);                            \
		CPU_TILE_DP_BF16(sum_high, TILE_W_HIGH, TILE_X_HIGH);         \
		if (f16) {                                                    \
			CPU_TILE_DP_BF16(sum_low, TILE_W_LOW, TILE_X_HIGH);   \
			CPU_TILE_LOAD(TILE_X_LOW, (x) + TILE_BYTES, 64);      \
			CPU_TILE_DP_BF16(sum_low, TILE_W_HIGH, TILE_X_LOW);   \
			CPU_TILE_DP_BF16(sum_high, TILE_W_LOW, TILE_X_LOW);   \
		}                                                             \
	} while (0)

/* One or two token tiles (tiles[0], tiles[1]) through the panel. */
CPU_INLINE void token_tiles(const bool f16, const bool two, const uint16_t *panel, int64_t chunks,
			    const char *const tiles[2], int tokens[2], int rows, float *y[2], size_t y_stride)
{
	const size_t parts = f16 ? 2 : 1, width_bytes = (size_t)chunks * CHUNK * sizeof(uint16_t);
	const char *low = (const char *)panel + ROWS * width_bytes;

	CPU_TILE_ZERO(TILE_HIGH0);
	CPU_TILE_ZERO(TILE_LOW0);
	CPU_TILE_ZERO(TILE_HIGH1);
	CPU_TILE_ZERO(TILE_LOW1);
	for (int64_t c = 0; c < chunks; c++) {
		const size_t at = (size_t)c * CHUNK * sizeof(uint16_t);
		CPU_TILE_LOAD(TILE_W_HIGH, (const char *)panel + at, (long)width_bytes);
		if (f16)
			CPU_TILE_LOAD(TILE_W_LOW, low + at, (long)width_bytes);
		TOKEN_TILE(tiles[0] + (size_t)c * parts * TILE_BYTES, TILE_HIGH0, TILE_LOW0);
		if (two)
			TOKEN_TILE(tiles[1] + (size_t)c * parts * TILE_BYTES, TILE_HIGH1, TILE_LOW1);
	}
	float high[ROWS][TOKENS] __attribute__((aligned(64))), low_sums[ROWS][TOKENS] __attribute__((aligned(64)));
	CPU_TILE_STORE(TILE_HIGH0, high, TOKENS * sizeof(float));
	CPU_TILE_STORE(TILE_LOW0, low_sums, TOKENS * sizeof(float));
	write_out(high, low_sums, f16, tokens[0], rows, y[0], y_stride);
	if (two) {
		CPU_TILE_STORE(TILE_HIGH1, high, TOKENS * sizeof(float));
		CPU_TILE_STORE(TILE_LOW1, low_sums, TOKENS * sizeof(float));
		write_out(high, low_sums, f16, tokens[1], rows, y[1], y_stride);
	}
}
#undef TOKEN_TILE

#define RUN_TOKEN_TILES(f16)                                                                           \
	do {                                                                                       \
		if (n_tiles == 2)                                                                  \
			token_tiles(f16, true, panel, chunks, tiles, tokens, rows, ys, y_stride);  \
		else                                                                               \
			token_tiles(f16, false, panel, chunks, tiles, tokens, rows, ys, y_stride); \
	} while (0)

void cpu_amx_float_multiply(const loom_tensor *w, int64_t g_lo, int64_t g_hi, const void *shared, void *panel_bytes,
			    int64_t n_tok, float *y, size_t y_stride)
{
	const int64_t chunks = chunks_of(w);
	const size_t tile_bytes = (size_t)(chunks * parts_of(w)) * TILE_BYTES;
	uint16_t *panel = panel_bytes;

	configure();
	for (int64_t gi = g_lo; gi < g_hi; gi++) {
		int64_t o = gi * ROWS;
		int rows = w->ne[1] - o < ROWS ? (int)(w->ne[1] - o) : ROWS;
		fill_panel(w, o, panel);
		for (int64_t t = 0; t < n_tok; t += 2 * TOKENS) {
			const char *tiles[2] = {NULL, NULL};
			int tokens[2] = {0, 0};
			float *ys[2] = {NULL, NULL};
			int n_tiles = 0;
			for (int i = 0; i < 2 && t + i * TOKENS < n_tok; i++, n_tiles++) {
				int64_t t0 = t + i * TOKENS;
				tiles[i] = (const char *)shared + (size_t)(t0 / TOKENS) * tile_bytes;
				tokens[i] = n_tok - t0 < TOKENS ? (int)(n_tok - t0) : TOKENS;
				ys[i] = (float *)((char *)y + (size_t)t0 * y_stride) + o;
			}
			if (w->dtype == LOOM_DTYPE_F16)
				RUN_TOKEN_TILES(true);
			else
				RUN_TOKEN_TILES(false);
		}
	}
	_tile_release();
}

#endif
