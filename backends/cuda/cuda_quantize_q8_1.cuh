/*
 * cuda_quantize_q8_1.cuh - F32 activations to Q8_1 blocks, the other side of
 * every quantized MATMUL's integer dot products (cuda_vecdot.cuh).
 */
#ifndef LOOM_CUDA_QUANTIZE_Q8_1_CUH
#define LOOM_CUDA_QUANTIZE_Q8_1_CUH

#include "cuda_backend.cuh"
#include "cuda_blocks.cuh"

/* A warp's 32 values, lane j's v element j of a block, into the Q8_1 block
 * b. The rounding is the CPU's (cpu_quantize_act_q8_1): d = amax / 127,
 * q = round-half-even(x * 127 / amax), s = d * sum(q), d and s rounded to
 * fp16. Every lane of the warp calls it. */
static __device__ __forceinline__ void cuda_q8_1_from_warp(float v, cuda_block_q8_1 *b)
{
	int lane = threadIdx.x % 32;
	float amax = cuda_warp_max(fabsf(v));
	float id = amax != 0.0f ? 127.0f / amax : 0.0f;
	int q = __float2int_rn(v * id);
	int sum = cuda_warp_sum(q);
	b->qs[lane] = (int8_t)q;
	if (lane == 0) {
		float d = amax / 127.0f;
		b->d = __half_as_ushort(__float2half_rn(d));
		b->s = __half_as_ushort(__float2half_rn(d * (float)sum));
	}
}

/* Enqueues on stream the quantization of rows 0..n_rows-1 of x, n
 * elements each (a multiple of 32), to out: row r's blocks at
 * out + r * (n / 32). The caller checks the launch (cuda_launched). */
void cuda_quantize_q8_1(cudaStream_t stream, cuda_rows x, int64_t n, int64_t n_rows, cuda_block_q8_1 *out);

#endif
