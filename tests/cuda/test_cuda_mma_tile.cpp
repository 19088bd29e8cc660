/*
 * test_cuda_mma_tile.cpp - the cuda backend's tensor-core tile for
 * quantized weights (cuda_mma_tile.cuh, cuda_unpack_int8.cuh) run on the
 * host, for every quantized weight type:
 *  - each 32-element sub-block unpacked to int8 quants, scales and offsets
 *    gives back the reference decoding of its block
 *    (tests/support/cpu_ref.c, written from the GGUF format's description);
 *  - whole tiles (a part-filled last tile of rows, a row length that is not
 *    a whole number of staged steps, token slots left empty) staged,
 *    multiplied and stored by the header's pieces, a thread or a lane at a
 *    time as the kernel runs them, give each output within rounding of the
 *    weight rows times the Q8_1 activations.
 *
 * The one thing the kernel does that the host cannot is mma.sync: here a
 * warp's product is computed from the lanes' registers as the PTX ISA lays
 * out m16n8k32's and m16n8k16's .s8 fragments, so a fragment loaded from
 * the wrong row, int or byte, or a result scaled as another token's, moves
 * an output by about its own size. test_backend_ops checks what a GPU
 * computes.
 */
#include "check_main.h"

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <vector>

#include "cuda_on_host.h"

#include "cuda_mma_tile.cuh"
#include "random_q8_1.h"

/* ---- the unpacked sub-blocks ---- */

#define N_BLOCKS 2000

template <int type>
static void same_values(const char *name)
{
	constexpr int n = cuda_vecdot_block(type), bytes = cuda_vecdot_bytes(type);
	ref_rng rng = {0xa11ce000u + (uint64_t)type};
	uint8_t block[bytes];
	float want[n];
	int wrong = 0, first = -1;
	for (int k = 0; k < N_BLOCKS; k++) {
		ref_random_blocks(&rng, (loom_dtype)type, block, 1);
		ref_quant_row((loom_dtype)type, block, n, want);
		for (int sub = 0; sub < n / CUDA_QK; sub++) {
			cuda_int8_sub u;
			cuda_unpack_int8<type>((const char *)block, sub, &u);
			for (int e = 0; e < CUDA_QK; e++) {
				int q = (int8_t)(u.q[e / 4] >> (8 * (e % 4)));
				double got = (double)u.scale[e / 16] * q + u.offset[e / 16];
				double w = want[sub * CUDA_QK + e];
				/* One rounding of the reference's (its product and
				 * its offset rounded apart) and one of the float
				 * scale here. */
				if (!(std::fabs(got - w) <= 2e-7 * (std::fabs(w) + std::fabs(u.offset[e / 16])) + 1e-30)) {
					wrong++;
					first = first < 0 ? k : first;
				}
			}
			if (!cuda_unpack_halves(type) && (u.scale[0] != u.scale[1] || u.offset[0] != u.offset[1])) {
				wrong++;
				first = first < 0 ? k : first;
			}
			if (!cuda_unpack_has_offset(type) && (u.offset[0] != 0.0f || u.offset[1] != 0.0f)) {
				wrong++;
				first = first < 0 ? k : first;
			}
		}
	}
	printf("%s: %d blocks unpacked\n", name, N_BLOCKS);
	ck_assert_msg(wrong == 0, "%s: %d elements unpacked wrong (the first in block %d)", name, wrong, first);
}

START_TEST(unpacked_values)
{
	same_values<LOOM_DTYPE_Q4_0>("Q4_0");
	same_values<LOOM_DTYPE_Q4_1>("Q4_1");
	same_values<LOOM_DTYPE_Q5_0>("Q5_0");
	same_values<LOOM_DTYPE_Q5_1>("Q5_1");
	same_values<LOOM_DTYPE_Q8_0>("Q8_0");
	same_values<LOOM_DTYPE_Q2_K>("Q2_K");
	same_values<LOOM_DTYPE_Q3_K>("Q3_K");
	same_values<LOOM_DTYPE_Q4_K>("Q4_K");
	same_values<LOOM_DTYPE_Q5_K>("Q5_K");
	same_values<LOOM_DTYPE_Q6_K>("Q6_K");
	same_values<LOOM_DTYPE_MXFP4>("MXFP4");
}
END_TEST

/* ---- whole tiles ---- */

static int8_t byte_of(int v, int i)
{
	return (int8_t)(v >> (8 * i));
}

/* A warp's mma.sync of one group, written from the PTX ISA's fragment
 * layouts: lane 4g + t holds A's rows g and g + 8 at columns 4t..4t+3 (and
 * 16 + 4t.. for k32) in a[0], a[1] (a[2], a[3]), B's column g at rows
 * 4t.. (and 16 + 4t..) in b[0] (b[1]), and gets C's rows g, g + 8 at
 * columns 2t, 2t + 1 in c[0], c[1], c[2], c[3]. */
static void warp_mma(int group, int (*c)[4], const int (*a)[4], const int (*b)[2])
{
	int8_t A[16][32] = {}, B[32][8] = {};
	for (int lane = 0; lane < 32; lane++) {
		int g = lane / 4, t = lane % 4;
		for (int i = 0; i < 4; i++) {
			A[g][4 * t + i] = byte_of(a[lane][0], i);
			A[g + 8][4 * t + i] = byte_of(a[lane][1], i);
			B[4 * t + i][g] = byte_of(b[lane][0], i);
			if (group == 32) {
				A[g][16 + 4 * t + i] = byte_of(a[lane][2], i);
				A[g + 8][16 + 4 * t + i] = byte_of(a[lane][3], i);
				B[16 + 4 * t + i][g] = byte_of(b[lane][1], i);
			}
		}
	}
	for (int lane = 0; lane < 32; lane++) {
		int g = lane / 4, t = lane % 4;
		for (int e = 0; e < 4; e++) {
			int row = g + 8 * (e / 2), col = 2 * t + e % 2, sum = 0;
			for (int k = 0; k < group; k++)
				sum += A[row][k] * B[k][col];
			c[lane][e] += sum;
		}
	}
}

/* The kernel's loop for the tile of rows o0.., its threads and lanes taken
 * one after another (a step's staging is done by all threads before any
 * lane reads it, as the barriers order it on the device). */
template <int type>
static void host_tile(const char *w, size_t w_stride, int n_out, int n_in, int o0, const cuda_block_q8_1 *const *x_rows,
		      float *const *y_rows, const float *bias)
{
	constexpr int warps = MMA_THREADS / 32, group = mma_stage<type>::group;
	std::unique_ptr<mma_stage<type>> st(new mma_stage<type>());
	std::vector<mma_acc> acc(warps * 32);
	for (mma_acc &a : acc)
		memset(&a, 0, sizeof(a));
	for (int k0 = 0; k0 < n_in; k0 += CUDA_MMA_K) {
		for (int tid = 0; tid < MMA_THREADS; tid++) {
			mma_stage_weights<type>(*st, w + (size_t)o0 * w_stride, w_stride, n_out - o0, k0, n_in, tid);
			mma_stage_activations<type>(*st, x_rows, k0, n_in, tid);
		}
		for (int warp = 0; warp < warps; warp++)
			for (int j = 0; j < mma_stage<type>::groups; j++) {
				mma_frags f[32];
				static mma_sums c[32];
				for (int lane = 0; lane < 32; lane++) {
					mma_load_frags<type>(*st, warp, lane, j, &f[lane]);
					for (int i = 0; i < 2; i++)
						for (int n = 0; n < 4; n++)
							for (int e = 0; e < 4; e++)
								c[lane][i][n][e] = MMA_FLOAT_BIAS;
				}
				for (int i = 0; i < 2; i++)
					for (int n = 0; n < 4; n++) {
						int a[32][4], b[32][2], cc[32][4];
						for (int lane = 0; lane < 32; lane++) {
							memcpy(a[lane], f[lane].a[i], sizeof(a[lane]));
							memcpy(b[lane], f[lane].b[n], sizeof(b[lane]));
							memcpy(cc[lane], c[lane][i][n], sizeof(cc[lane]));
						}
						warp_mma(group, cc, a, b);
						for (int lane = 0; lane < 32; lane++)
							memcpy(c[lane][i][n], cc[lane], sizeof(cc[lane]));
					}
				for (int lane = 0; lane < 32; lane++)
					mma_scale_sums<type>(*st, warp, lane, j, c[lane], acc[warp * 32 + lane]);
			}
	}
	for (int warp = 0; warp < warps; warp++)
		for (int lane = 0; lane < 32; lane++)
			mma_store(acc[warp * 32 + lane], warp, lane, o0, n_out, y_rows, bias);
}

#define TILE_OUT 150  /* a whole tile of 128 rows and 22 of the next */
#define TILE_TOKENS 50 /* of the 64 slots: the rest empty */

template <int type>
static void same_tiles(const char *name)
{
	constexpr int block = cuda_vecdot_block(type), bytes = cuda_vecdot_bytes(type);
	/* Two super-blocks, or 13 blocks: three staged steps and a quarter. */
	constexpr int n_in = block == CUDA_QK_K ? 2 * CUDA_QK_K : 13 * CUDA_QK, n_blocks = n_in / block;
	constexpr int n_x = n_in / CUDA_QK;
	ref_rng rng = {0x7113e000u + (uint64_t)type};
	std::vector<uint8_t> w((size_t)TILE_OUT * n_blocks * bytes);
	std::vector<cuda_block_q8_1> x((size_t)TILE_TOKENS * n_x);
	std::vector<float> bias(TILE_OUT), y((size_t)CUDA_MATMUL_TILE_TOKENS * TILE_OUT, NAN), wf(n_in);
	ref_random_blocks(&rng, (loom_dtype)type, w.data(), w.size() / bytes);
	random_q8_1(&rng, x.data(), (int)x.size());
	for (float &b : bias)
		b = (float)ref_rng_uniform(&rng, -1.0, 1.0);
	/* Slots 0..TILE_TOKENS-1 take the tokens in reverse; the others none. */
	const cuda_block_q8_1 *x_rows[CUDA_MATMUL_TILE_TOKENS];
	float *y_rows[CUDA_MATMUL_TILE_TOKENS];
	for (int i = 0; i < CUDA_MATMUL_TILE_TOKENS; i++) {
		x_rows[i] = i < TILE_TOKENS ? &x[(size_t)(TILE_TOKENS - 1 - i) * n_x] : nullptr;
		y_rows[i] = i < TILE_TOKENS ? &y[(size_t)i * TILE_OUT] : nullptr;
	}
	for (int o0 = 0; o0 < TILE_OUT; o0 += CUDA_MMA_ROWS)
		host_tile<type>((const char *)w.data(), (size_t)n_blocks * bytes, TILE_OUT, n_in, o0, x_rows, y_rows,
				bias.data());

	int wrong = 0, first_o = -1, first_t = -1;
	double worst = 0.0;
	for (int o = 0; o < TILE_OUT; o++) {
		const uint8_t *row = &w[(size_t)o * n_blocks * bytes];
		ref_quant_row((loom_dtype)type, row, n_in, wf.data());
		std::vector<ref_qblock> q(n_blocks);
		for (int b = 0; b < n_blocks; b++)
			ref_decode_block((loom_dtype)type, row + (size_t)b * bytes, &q[b]);
		for (int i = 0; i < TILE_TOKENS; i++) {
			const cuda_block_q8_1 *xr = x_rows[i];
			double want = bias[o], size = std::fabs(bias[o]), s_rounding = 0.0;
			for (int k = 0; k < n_in; k++) {
				const ref_qblock &qb = q[k / block];
				double xv = (double)ref_fp16_to_f32(xr[k / CUDA_QK].d) * xr[k / CUDA_QK].qs[k % CUDA_QK];
				double offset = qb.has_min ? (double)qb.dmin * qb.m[k % block / qb.sub]
						: qb.has_add ? qb.add : 0.0;
				want += wf[k] * xv;
				size += std::fabs(wf[k] * xv) + std::fabs(offset * xv);
			}
			if (q[0].has_add)
				for (int b = 0; b < n_x; b++) {
					double exact = 0.0;
					for (int e = 0; e < CUDA_QK; e++)
						exact += (double)ref_fp16_to_f32(xr[b].d) * xr[b].qs[e];
					s_rounding += std::fabs(q[b].add * (ref_fp16_to_f32(xr[b].s) - exact));
				}
			/* Float rounding: parts in a million of the terms' sizes
			 * (a float product and sum per group), and Q4_1's and
			 * Q5_1's fp16 s. */
			double allowed = 4e-6 * size + 2 * s_rounding, err = std::fabs(y[(size_t)i * TILE_OUT + o] - want);
			if (!(err <= allowed)) {
				if (wrong++ == 0) {
					first_o = o;
					first_t = i;
				}
			}
			worst = allowed > 0 && err / allowed > worst ? err / allowed : worst;
		}
	}
	for (int i = TILE_TOKENS; i < CUDA_MATMUL_TILE_TOKENS; i++)
		ck_assert(y_rows[i] == nullptr);
	printf("%s: %d outputs by %d tokens, the largest difference %.3g of its band\n", name, TILE_OUT, TILE_TOKENS,
	       worst);
	ck_assert_msg(wrong == 0, "%s: %d of %d outputs outside the rounding band (the first: row %d, slot %d; worst "
				  "at %.3g of the band)",
		      name, wrong, TILE_OUT * TILE_TOKENS, first_o, first_t, worst);
}

START_TEST(legacy_tiles)
{
	same_tiles<LOOM_DTYPE_Q4_0>("Q4_0");
	same_tiles<LOOM_DTYPE_Q4_1>("Q4_1");
	same_tiles<LOOM_DTYPE_Q5_0>("Q5_0");
	same_tiles<LOOM_DTYPE_Q5_1>("Q5_1");
	same_tiles<LOOM_DTYPE_Q8_0>("Q8_0");
	same_tiles<LOOM_DTYPE_MXFP4>("MXFP4");
}
END_TEST

START_TEST(k_quant_tiles)
{
	same_tiles<LOOM_DTYPE_Q2_K>("Q2_K");
	same_tiles<LOOM_DTYPE_Q3_K>("Q3_K");
	same_tiles<LOOM_DTYPE_Q4_K>("Q4_K");
	same_tiles<LOOM_DTYPE_Q5_K>("Q5_K");
	same_tiles<LOOM_DTYPE_Q6_K>("Q6_K");
}
END_TEST

static Suite *cuda_mma_tile_suite(void)
{
	Suite *s = suite_create("cuda_mma_tile");
	TCase *tc = tcase_create("the tensor-core tile");
	tcase_add_test(tc, unpacked_values);
	tcase_add_test(tc, legacy_tiles);
	tcase_add_test(tc, k_quant_tiles);
	suite_add_tcase(s, tc);
	return s;
}

LOOM_TEST_MAIN(cuda_mma_tile_suite)
