/* cpu_quant.c - the table of block-quantized weight types (cpu_quant.h). */
#include "cpu_quant.h"

#define QUANT_TYPE(name, act)                                                          \
	{                                                                              \
		.act_type = act, .dequantize = cpu_dequantize_row_##name,              \
		.quantize = cpu_quantize_row_##name, .dot = cpu_dot_##name,            \
	}

static const cpu_quant_type types[LOOM_DTYPE_COUNT] = {
	[LOOM_DTYPE_Q4_0] = QUANT_TYPE(q4_0, LOOM_DTYPE_Q8_0),
	[LOOM_DTYPE_Q4_1] = QUANT_TYPE(q4_1, LOOM_DTYPE_Q8_1),
	[LOOM_DTYPE_Q5_0] = QUANT_TYPE(q5_0, LOOM_DTYPE_Q8_0),
	[LOOM_DTYPE_Q5_1] = QUANT_TYPE(q5_1, LOOM_DTYPE_Q8_1),
	[LOOM_DTYPE_Q8_0] = QUANT_TYPE(q8_0, LOOM_DTYPE_Q8_0),
	[LOOM_DTYPE_MXFP4] = QUANT_TYPE(mxfp4, LOOM_DTYPE_Q8_0),
	[LOOM_DTYPE_Q2_K] = QUANT_TYPE(q2_k, LOOM_DTYPE_Q8_K),
	[LOOM_DTYPE_Q3_K] = QUANT_TYPE(q3_k, LOOM_DTYPE_Q8_K),
	[LOOM_DTYPE_Q4_K] = QUANT_TYPE(q4_k, LOOM_DTYPE_Q8_K),
	[LOOM_DTYPE_Q5_K] = QUANT_TYPE(q5_k, LOOM_DTYPE_Q8_K),
	[LOOM_DTYPE_Q6_K] = QUANT_TYPE(q6_k, LOOM_DTYPE_Q8_K),
};

const cpu_quant_type *cpu_quant_type_of(loom_dtype type)
{
	if ((int)type < 0 || type >= LOOM_DTYPE_COUNT || types[type].dot == NULL)
		return NULL;
	return &types[type];
}
