/*
 * cpu_amx.h - matrix products on the AMX tiles (cpu-amx only): prefill and
 * batched decode, where a weight row meets enough tokens to fill a tile.
 * Decode's matrix-vector products stay on the AVX-512 VNNI kernels.
 *
 * Quantized weights (cpu_amx.c) meet their activations quantized as every
 * variant quantizes them (cpu_quant.h), in TDPBSSD tiles: the activations'
 * bytes, 16 tokens by one sub-block (32 or 16 elements), times a 16-row
 * group of weights unpacked to signed bytes. Each tile's exact integer
 * sums are scaled by the f32 product of the two sides' scales and added to
 * one f32 sum per output, plus the min term of the types that have one.
 * The sums per sub-block are those of the other kernels; the f32 order of
 * adding them differs, so outputs agree to rounding.
 *
 * F16 and BF16 weights (cpu_amx_float.c) use TDPBF16PS. A BF16 weight and
 * its activations rounded to BF16 multiply exactly, as in the other
 * kernels. An F16 weight or activation (rounded to F16 first, as
 * everywhere) is split exactly into a BF16 high part (its top 8
 * significant bits) and a BF16 low part (the other 3); the four products
 * of the parts are exact too, so only the f32 order of the sums differs
 * from the other kernels'. (Three products, leaving out low*low, are off
 * by up to 2^-14 of a product: enough to flip an int8 rounding of the
 * next layer's activations on the golden models.)
 *
 * Weights are unpacked per matmul, a 16-row group at a time into a
 * panel each thread keeps in its cache while every token tile passes:
 * repacked at load (cpu_repack.h) they stay as compact as the file's, so
 * decode reads no more bytes for them.
 */
#ifndef LOOM_CPU_AMX_H
#define LOOM_CPU_AMX_H

#include "loom/plugin_api.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#if defined(__AMX_TILE__) && defined(__AMX_INT8__) && defined(__AMX_BF16__)
#define CPU_HAS_AMX 1

/* Tokens of a tile; a matmul with fewer stays on the vector kernels. */
#define CPU_AMX_TOKENS 16
#define CPU_AMX_MIN_TOKENS 8

/* Does a matmul of weight w with n_tok tokens go to the tiles? */
bool cpu_amx_takes(const loom_tensor *w, int64_t n_tok);

/* Scratch bytes shared by the threads (the activations in the tiles'
 * form, past the quantized rows) and per thread (its group's panel). */
size_t cpu_amx_shared_bytes(const loom_tensor *w, int64_t n_tok);
size_t cpu_amx_panel_bytes(const loom_tensor *w);

/* Quantized weights: after tokens' activation rows are quantized, what
 * the tiles also need of elements [e0, e0 + len) of token t: each
 * sub-block's activation scale, and its scale times its sum. `shared`
 * is the shared scratch; the threads also call cpu_amx_quant_pad once
 * between them (ith 0) for the tokens that pad the last tile. */
void cpu_amx_quant_prepare(const loom_tensor *w, const void *act_row, int64_t t, int64_t e0, int64_t len,
			   int64_t n_tok, void *shared);
void cpu_amx_quant_pad(const loom_tensor *w, int64_t n_tok, void *shared);

/* F16/BF16 weights: elements [e0, e0 + len) of token t's row x (len at
 * most 256, e0 a multiple of it) into the shared scratch, in the tiles'
 * pairs. The pieces cover the row padded to whole tile rows
 * (cpu_amx_padded_elements) and the tokens padded to whole tiles
 * (cpu_amx_padded_tokens): what lies past the row, or a padding token
 * (x NULL), is written as zeros. */
void cpu_amx_float_convert(const loom_tensor *w, const float *x, int64_t t, int64_t e0, int64_t len,
			   void *shared);
int64_t cpu_amx_padded_elements(const loom_tensor *w);
int64_t cpu_amx_padded_tokens(int64_t n_tok);

/* Outputs y[t][o] of the 16-row groups [g_lo, g_hi) for all n_tok tokens:
 * x the quantized activation rows (quantized weights only), shared and
 * panel the scratch above. */
void cpu_amx_multiply(const loom_tensor *w, int64_t g_lo, int64_t g_hi, const char *x, size_t x_stride,
		      const void *shared, void *panel, int64_t n_tok, float *y, size_t y_stride);

/* The per-type halves of the above. */
bool cpu_amx_quant_takes(loom_dtype type);
size_t cpu_amx_quant_shared_bytes(const loom_tensor *w, int64_t n_tok);
size_t cpu_amx_quant_panel_bytes(const loom_tensor *w);
void cpu_amx_quant_multiply(const loom_tensor *w, int64_t g_lo, int64_t g_hi, const char *x, size_t x_stride,
			    const void *shared, void *panel, int64_t n_tok, float *y, size_t y_stride);
size_t cpu_amx_float_shared_bytes(const loom_tensor *w, int64_t n_tok);
size_t cpu_amx_float_panel_bytes(const loom_tensor *w);
void cpu_amx_float_multiply(const loom_tensor *w, int64_t g_lo, int64_t g_hi, const void *shared, void *panel,
			    int64_t n_tok, float *y, size_t y_stride);

/* The tile instructions, by tile number: gcc's intrinsics paste their
 * argument into the assembly as written, so these expand a named tile
 * number first. */
#define CPU_TILE_LOAD(tile, base, stride) _tile_loadd(tile, base, stride)
#define CPU_TILE_STORE(tile, base, stride) _tile_stored(tile, base, stride)
#define CPU_TILE_ZERO(tile) _tile_zero(tile)
#define CPU_TILE_DP_S8(c, a, b) _tile_dpbssd(c, a, b)
#define CPU_TILE_DP_BF16(c, a, b) _tile_dpbf16ps(c, a, b)

/* The tile configuration both halves load: palette 1, rows and bytes
 * per row of each of the 8 tiles. */
typedef struct __attribute__((aligned(64))) cpu_amx_config {
	uint8_t palette;
	uint8_t start_row;
	uint8_t reserved[14];
	uint16_t colsb[16];
	uint8_t rows[16];
} cpu_amx_config;

#endif

#endif
