/*
 * quantizers_ref.c - the CPU backend's scalar weight quantizers, built
 * here without the variants' flags (as test_backend_ops builds its
 * reference), for test_cuda_quantizers.cpp, with the fp16 conversions its
 * host build of the cuda encoders decodes scales through.
 */
#include "../../backends/cpu/kernels/cpu_half.c"
#include "../../backends/cpu/kernels/cpu_quant_k_search.c"
#include "../../backends/cpu/kernels/cpu_quant_legacy.c"
#include "../../backends/cpu/kernels/cpu_quant_mxfp4.c"

uint16_t ref_f32_to_fp16(float f);
float ref_fp16_to_f32(uint16_t h);

uint16_t ref_f32_to_fp16(float f)
{
	return cpu_f32_to_fp16(f);
}

float ref_fp16_to_f32(uint16_t h)
{
	return cpu_fp16_to_f32(h);
}
