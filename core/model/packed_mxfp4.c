/* packed_mxfp4.c - transformers' MXFP4 tensors (a _blocks and a _scales
 * tensor) read into GGUF's MXFP4 blocks, once at load. */
#include "model/packed_mxfp4.h"

#include "model/naming.h"
#include "runtime/error.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MXFP4_BLOCK 32               /* elements a block */
#define MXFP4_PACKED (MXFP4_BLOCK / 2) /* bytes of its values */

/* One block's 16 bytes from elements (2j, 2j + 1) in byte j's (low, high)
 * nibbles to (j, j + 16). */
static void reorder_nibbles(const uint8_t *in, uint8_t *out)
{
	uint8_t v[MXFP4_BLOCK];

	for (int j = 0; j < MXFP4_PACKED; j++) {
		v[2 * j] = in[j] & 15;
		v[2 * j + 1] = in[j] >> 4;
	}
	for (int j = 0; j < MXFP4_PACKED; j++)
		out[j] = (uint8_t)(v[j] | v[j + MXFP4_PACKED] << 4);
}

/* Whether blocks and scales are the two parts of one MXFP4 tensor. */
static bool parts_fit(const loom_file_tensor *blocks, const loom_file_tensor *scales)
{
	if (blocks->dtype != LOOM_DTYPE_I8 || scales->dtype != LOOM_DTYPE_I8 || scales->n_dims < 2 ||
	    blocks->n_dims != scales->n_dims + 1 || blocks->ne[0] != MXFP4_PACKED)
		return false;
	for (int d = 0; d < scales->n_dims; d++)
		if (blocks->ne[d + 1] != scales->ne[d] || scales->ne[d] < 1)
			return false;
	uint64_t n_blocks = (uint64_t)(scales->ne[0] * scales->ne[1] * scales->ne[2] * scales->ne[3]);
	return scales->n_bytes == n_blocks && blocks->n_bytes == n_blocks * MXFP4_PACKED;
}

loom_status loom_file_packed_mxfp4(const loom_model_file *f, const char *name, loom_file_tensor *out, void **bytes)
{
	char part[288];
	*bytes = NULL;
	snprintf(part, sizeof(part), "%s_blocks", name);
	const loom_file_tensor *blocks = loom_file_find_tensor(f, part);
	snprintf(part, sizeof(part), "%s_scales", name);
	const loom_file_tensor *scales = loom_file_find_tensor(f, part);
	if (blocks == NULL && scales == NULL)
		return LOOM_OK;
	if (blocks == NULL || scales == NULL)
		return loom_error(LOOM_ERR_BAD_FORMAT, "tensor '%s_%s' is missing beside '%s_%s' (the parts of MXFP4 tensor "
				  "'%s')", name, blocks == NULL ? "blocks" : "scales", name, blocks == NULL ? "scales" : "blocks",
				  name);
	if (!parts_fit(blocks, scales))
		return loom_error(LOOM_ERR_BAD_FORMAT,
				  "tensors '%s_blocks' and '%s_scales' are not the parts of one MXFP4 tensor: bytes [..., "
				  "rows, n / 32, 16] and [..., rows, n / 32] (they are [%" PRId64 ", %" PRId64 ", %" PRId64
				  ", %" PRId64 "] and [%" PRId64 ", %" PRId64 ", %" PRId64 "])",
				  name, name, blocks->ne[0], blocks->ne[1], blocks->ne[2], blocks->ne[3], scales->ne[0],
				  scales->ne[1], scales->ne[2]);
	const uint64_t n_blocks = scales->n_bytes;
	const size_t block_bytes = loom_dtype_block_bytes(LOOM_DTYPE_MXFP4);
	uint8_t *dst = malloc((size_t)n_blocks * block_bytes);
	if (dst == NULL)
		return loom_error(LOOM_ERR_NO_MEMORY, "out of memory reading MXFP4 tensor '%s'", name);
	const uint8_t *q = blocks->data, *e = scales->data;
	for (uint64_t b = 0; b < n_blocks; b++) {
		uint8_t *blk = dst + b * block_bytes;
		blk[0] = e[b];
		reorder_nibbles(q + b * MXFP4_PACKED, blk + 1);
	}
	*out = (loom_file_tensor){.name = {strlen(name), name},
				  .dtype = LOOM_DTYPE_MXFP4,
				  .n_dims = scales->n_dims,
				  .ne = {scales->ne[0] * MXFP4_BLOCK, scales->ne[1], scales->ne[2], scales->ne[3]},
				  .n_bytes = n_blocks * block_bytes,
				  .data = dst};
	*bytes = dst;
	return LOOM_OK;
}
