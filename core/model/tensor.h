/* tensor.h - element types and tensor strides. */
#ifndef LOOM_TENSOR_H
#define LOOM_TENSOR_H

#include "loom/plugin_api.h"

/* Strides for a contiguous tensor of the given type and shape. */
void loom_tensor_set_contiguous(loom_tensor *t, loom_dtype type, int64_t ne0, int64_t ne1,
				int64_t ne2, int64_t ne3);

#endif
