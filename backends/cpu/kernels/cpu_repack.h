/*
 * cpu_repack.h - weights repacked once, at load, into layouts faster to
 * multiply than the file's (the backend's weight_repack slot).
 *
 * CPU_LAYOUT_Q4_0_X16: Q4_0 rows in groups of 16. For each block of a
 * group: word k (bytes 4k..4k+3 of qs, the nibbles of elements 4k..4k+3 and
 * 16+4k..16+4k+3) of all 16 rows side by side, for k = 0..3, then the 16
 * rows' fp16 scales; 288 bytes, as many as the 16 blocks it replaces. A
 * missing last row of a group is zeros. One 512-bit register then holds
 * the same elements of all 16 rows, so dpbusd with four activation bytes
 * copied to every lane advances every row's dot product at once, with no
 * unpacking across rows and no horizontal sums.
 *
 * CPU_LAYOUT_Q8_0_X16: Q8_0 rows in groups of 16 the same way: word k
 * (elements 4k..4k+3, k = 0..7) of all 16 rows, each byte + 128 (so that
 * the weights are dpbusd's unsigned operand), then the scales; 544 bytes
 * for 16 blocks. Its multiply sums each block exactly before scaling it,
 * which is not the standard layout's (llama.cpp's) order: results agree
 * to rounding, not bit for bit.
 *
 * CPU_LAYOUT_Q5_0_X16: Q5_0 as Q4_0's, the fifth bits of each word's
 * 16 rows then as the 64-bit byte mask that sets them (bit 4r + i: row r's
 * element i of the word), eight masks a block; 352 bytes for 16 blocks.
 *
 * CPU_LAYOUT_MXFP4_X16: MXFP4 (gpt-oss's experts) as Q4_0's, each nibble
 * an index of a doubled E2M1 value, then the 16 rows' E8M0 exponents; 272
 * bytes for 16 blocks.
 *
 * The multiplies of Q8_0, Q5_0 and MXFP4 sum each block exactly before
 * scaling it, where their tile kernels scale parts of it or sum lanes at
 * the end: results agree to rounding, not bit for bit.
 *
 * CPU_LAYOUT_Q4_K_X16 and CPU_LAYOUT_Q6_K_X16: super-blocks of 16 rows
 * with the quants of each 4-element group of all 16 rows side by side and
 * the sub-block scales as bytes (cpu_repack_k.c); Q6_K's take the bytes of
 * the blocks they replace, Q4_K's 2368 for 16 blocks of 144. Their
 * multiplies sum a super-block as one exact integer where the row kernels
 * keep 8 lanes: results agree to rounding, not bit for bit.
 *
 * Only variants with AVX-512 VNNI repack.
 *
 * CPU_LAYOUT_ROWS: the standard layout's bytes, in the backend's own
 * memory, which is backed by huge pages: every other matmul weight, in
 * every variant. Decode streams each weight byte once per token; from a
 * file's mapping it does so a 4 KiB page at a time, and the TLB misses
 * cost F16 decode a sixth of its speed. Every kernel reads it as the
 * standard layout.
 */
#ifndef LOOM_CPU_REPACK_H
#define LOOM_CPU_REPACK_H

#include "loom/plugin_api.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define CPU_LAYOUT_Q4_0_X16 1u
#define CPU_LAYOUT_Q8_0_X16 2u
#define CPU_LAYOUT_Q4_K_X16 3u
#define CPU_LAYOUT_Q6_K_X16 4u
#define CPU_LAYOUT_ROWS 5u
#define CPU_LAYOUT_Q5_0_X16 6u
#define CPU_LAYOUT_MXFP4_X16 7u
#define CPU_REPACK_ROWS 16

/* Does a weight in this layout have its bytes rearranged (not the
 * standard layout's, or CPU_LAYOUT_ROWS's copy of it)? */
static inline bool cpu_layout_rearranges(uint32_t layout)
{
	return layout != 0 && layout != CPU_LAYOUT_ROWS;
}

/* Bytes of w in the layout this variant would repack it into; 0 if it
 * keeps w as it is. */
size_t cpu_repacked_bytes(const loom_tensor *w, uint32_t *layout);

/* Writes w (standard layout) into dst in that layout. */
void cpu_repack(const loom_tensor *w, void *dst);
/* The same for the groups of CPU_REPACK_ROWS rows [g_lo, g_hi) only, into
 * a dst already zeroed (the last group's missing rows stay zero): threads
 * repack a weight's groups side by side. */
void cpu_repack_groups(const loom_tensor *w, void *dst, int64_t g_lo, int64_t g_hi);

/* Block b of row o of w, a weight in one of the rearranged layouts, as
 * the standard layout has it: the repacking undone, byte for byte (GET_ROWS
 * reads a tied head's repacked copy as the token embedding). */
void cpu_repacked_block(const loom_tensor *w, int64_t o, int64_t b, void *block);

/* Can this variant multiply by a weight in this layout? */
bool cpu_layout_supported(loom_dtype type, uint32_t layout);

/* Does the multiply in this layout give the standard layout's results
 * bit for bit? */
bool cpu_layout_exact(uint32_t layout);

/* What the 32-element layouts' multiplies take per Q8_0 activation block
 * besides its quants, made once per matmul by cpu_repacked_prepare. */
typedef struct cpu_repacked_act {
	int32_t bias; /* takes the weights' offset back off: -offset * sum of q_x */
	float d;      /* the block's scale */
} cpu_repacked_act;

/* Bytes of those for an activation row of n elements; 0 for the layouts
 * that need none (the K-quants, whose Q8_K blocks carry their sums). */
size_t cpu_repacked_act_bytes(uint32_t layout, int64_t n);

/* Fills out with them for n_blocks Q8_0 blocks x. */
void cpu_repacked_prepare(uint32_t layout, const void *x, int64_t n_blocks, void *out);

/* y[t][o] for the 16-row groups [g_lo, g_hi) of a repacked weight w, with
 * nt tokens of activations x (Q8_0 or Q8_K, rows x_stride bytes apart)
 * and, where needed, what cpu_repacked_prepare made of them (rows
 * xa_stride bytes apart). */
void cpu_repacked_multiply(const loom_tensor *w, int64_t g_lo, int64_t g_hi, const char *x, size_t x_stride,
			   const void *xa, size_t xa_stride, int64_t nt, float *y, size_t y_stride);

/* The K-quant layouts (cpu_repack_k.c), behind the functions above:
 * bytes of a repacked super-block of 16 rows of this type, 0 if the type
 * has no such layout; the repacking; the multiply, with Q8_K activations. */
size_t cpu_repacked_k_block_bytes(loom_dtype type, uint32_t *layout);
void cpu_repack_k(const loom_tensor *w, uint32_t layout, void *dst, int64_t g_lo, int64_t g_hi);
void cpu_repacked_block_k(const loom_tensor *w, int64_t o, int64_t b, void *block);
void cpu_repacked_multiply_k(const loom_tensor *w, int64_t g_lo, int64_t g_hi, const char *x, size_t x_stride,
			     int64_t nt, float *y, size_t y_stride);

#if defined(__AMX_INT8__)
/* A 16-row group of a weight as the AMX kernels take it (cpu_amx.c):
 * element e of row r as a signed byte at q[(e / 4) * 64 + r * 4 + e % 4],
 * so that each sub-block is a tile of 4-byte groups of all 16 rows; the
 * f32 scale and min of row r's sub-block s at dw[s * 16 + r] and
 * mw[s * 16 + r] (mw only for the types with mins, NULL otherwise). */
typedef struct cpu_unpacked_group {
	int8_t *q;
	float *dw;
	float *mw;
} cpu_unpacked_group;

/* Group gi of a weight in one of the layouts above, unpacked. */
void cpu_repacked_unpack(const loom_tensor *w, int64_t gi, const cpu_unpacked_group *out);
void cpu_repacked_unpack_k(const loom_tensor *w, int64_t gi, const cpu_unpacked_group *out);
#endif

#endif
