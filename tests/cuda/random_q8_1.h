/*
 * random_q8_1.h - random Q8_1 activation blocks for the cuda host tests
 * (test_cuda_vecdot.cpp, test_cuda_mma_tile.cpp), as cuda_quantize_q8_1
 * writes them: quants in [-127, 127], d as an activation row's amax / 127
 * gives, s = fp16(d * sum q). Include it after cuda_on_host.h and the
 * header that defines cuda_block_q8_1.
 */
#ifndef LOOM_TEST_RANDOM_Q8_1_H
#define LOOM_TEST_RANDOM_Q8_1_H

static inline void random_q8_1(ref_rng *rng, cuda_block_q8_1 *x, int n_blocks)
{
	for (int b = 0; b < n_blocks; b++) {
		int sum = 0;
		for (int i = 0; i < CUDA_QK; i++) {
			x[b].qs[i] = (int8_t)(ref_rng_below(rng, 255) - 127);
			sum += x[b].qs[i];
		}
		x[b].d = ref_f32_to_fp16((float)ref_rng_uniform(rng, 0.001, 0.05));
		x[b].s = ref_f32_to_fp16(ref_fp16_to_f32(x[b].d) * (float)sum);
	}
}

#endif
