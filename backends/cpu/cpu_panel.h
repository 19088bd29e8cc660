/*
 * cpu_panel.h - the matmul path for many tokens at once (prefill): a panel
 * of CPU_PANEL_ROWS weight rows is repacked once into a layout where one
 * 512-bit register holds the same 4 elements of every row, then meets the
 * tokens in turn. dpbusd of such a register with 4 activation bytes copied
 * to every lane advances all the rows' dot products at once, with no
 * horizontal sums; the repacking is paid once per panel and shared by all
 * the tokens.
 *
 * The activations are Q8_0 blocks whose bytes carry +128 (x ^ 0x80), so
 * that they are dpbusd's unsigned operand and the weights its signed one;
 * the 128 * sum(w) that this adds is taken off by starting each sum from
 * its negation, which the packed panel holds per row.
 */
#ifndef LOOM_CPU_PANEL_H
#define LOOM_CPU_PANEL_H

#include "plugin_api.h"

#include <stddef.h>
#include <stdint.h>

#define CPU_PANEL_ROWS 16

typedef struct cpu_panel_kernel {
	/* Bytes of a packed panel of rows of n elements. */
	size_t (*packed_bytes)(int64_t n);
	/* Packs rows w, w + w_stride, ... (nr <= CPU_PANEL_ROWS of them; the
	 * rest of the panel multiplies as zeros). */
	void (*pack)(const char *w, size_t w_stride, int nr, int64_t n, void *panel);
	/* y[t][r] = dot(row r, token t) for r < nr, t < nt: x holds nt rows of
	 * offset Q8_0 blocks, x_stride bytes apart; y rows y_stride apart. */
	void (*multiply)(const void *panel, int64_t n, const char *x, size_t x_stride, int nt, float *y,
			 size_t y_stride, int nr);
} cpu_panel_kernel;

/* The panel kernel for weights of this dtype; NULL where there is none (the
 * tiles of cpu_gemm.h serve every token count). */
const cpu_panel_kernel *cpu_panel_kernel_of(loom_dtype weight_type);

#endif
