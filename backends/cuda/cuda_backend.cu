/*
 * cuda_backend.cu - the backend vtable: instances, device memory, and the
 * compute loop that enqueues a graph's nodes on one stream (or replays
 * them, cuda_replay.cu).
 *
 * Memory is plain cudaMalloc'd device memory: the core uploads the weights
 * once, in their stored types, and the KV cache and activations are
 * allocated here too. Host memory is never used in place (buffer_from_host
 * is absent), so the core uploads.
 */
#include "cuda_backend.cuh"
#include "cuda_fusion.h"

#include "cuda_blocks.cuh"
#include "cuda_matmul.cuh"
#include "cuda_q8_1_reuse.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>

loom_status cuda_status(const cuda_backend *be, cudaError_t err, const char *what)
{
	if (err == cudaSuccess)
		return LOOM_OK;
	be->host->set_error("cuda: %s: %s", what, cudaGetErrorString(err));
	return err == cudaErrorMemoryAllocation ? LOOM_ERR_NO_MEMORY : LOOM_ERR_BACKEND;
}

static const cuda_op *const cuda_ops[LOOM_OP_COUNT] = {
	[LOOM_OP_NONE] = NULL,
	[LOOM_OP_GET_ROWS] = &cuda_op_get_rows,
	[LOOM_OP_RMS_NORM] = &cuda_op_rms_norm,
	[LOOM_OP_MATMUL] = &cuda_op_matmul,
	[LOOM_OP_ADD] = &cuda_op_add,
	[LOOM_OP_MUL] = &cuda_op_mul,
	[LOOM_OP_ROPE] = &cuda_op_rope,
	[LOOM_OP_KV_STORE] = &cuda_op_kv_store,
	[LOOM_OP_ATTENTION] = &cuda_op_attention,
	[LOOM_OP_SWIGLU] = &cuda_op_swiglu,
	[LOOM_OP_SCALE] = &cuda_op_scale,
	[LOOM_OP_CONVERT] = &cuda_op_convert,
	[LOOM_OP_LAYER_NORM] = &cuda_op_layer_norm,
	[LOOM_OP_GELU] = &cuda_op_gelu,
	[LOOM_OP_SOFTCAP] = &cuda_op_softcap,
	[LOOM_OP_TOPK] = &cuda_op_topk,
	[LOOM_OP_MOE_WEIGHTS] = &cuda_op_moe_weights,
	[LOOM_OP_MATMUL_ID] = &cuda_op_matmul_id,
	[LOOM_OP_MOE_SUM] = &cuda_op_moe_sum,
	[LOOM_OP_SIGMOID] = &cuda_op_sigmoid,
	[LOOM_OP_SWIGLU_OAI] = &cuda_op_swiglu_oai,
};

static const cuda_op *op_of(const loom_node *node)
{
	return node->op > LOOM_OP_NONE && node->op < LOOM_OP_COUNT ? cuda_ops[node->op] : NULL;
}

/* ---- instances ---- */

static void cuda_free(void *backend);

static void *cuda_init(const loom_host *host, const loom_backend_options *opts)
{
	cuda_backend *be = (cuda_backend *)calloc(1, sizeof(*be));
	if (be == NULL) {
		host->set_error("cuda: out of memory");
		return NULL;
	}
	if (pthread_mutex_init(&be->lock, NULL) != 0) {
		host->set_error("cuda: cannot make the instance's lock");
		free(be);
		return NULL;
	}
	be->host = host;
	be->device = opts->device;
	int count = 0;
	loom_status st = cuda_status(be, cudaGetDeviceCount(&count), "counting devices");
	if (st == LOOM_OK && (be->device < 0 || be->device >= count)) {
		host->set_error("cuda: device %d asked for, %d present", be->device, count);
		st = LOOM_ERR_INVALID_ARGUMENT;
	}
	if (st == LOOM_OK)
		st = cuda_status(be, cudaSetDevice(be->device), "selecting the device");
	if (st == LOOM_OK)
		st = cuda_status(be, cudaGetDeviceProperties(&be->prop, be->device), "reading the device's properties");
	if (st == LOOM_OK && be->prop.major < 8) {
		host->set_error("cuda: %s is compute capability %d.%d; loom-cuda needs 8.0 or newer", be->prop.name,
				be->prop.major, be->prop.minor);
		st = LOOM_ERR_UNSUPPORTED;
	}
	if (st == LOOM_OK)
		st = cuda_status(be, cudaStreamCreateWithFlags(&be->stream, cudaStreamNonBlocking), "creating a stream");
	if (st == LOOM_OK)
		st = cuda_status(be, cudaMalloc((void **)&be->bad_node, sizeof(int)), "allocating the error word");
	/* On the stream every kernel runs on: the legacy default stream does
	 * not order a non-blocking one. */
	if (st == LOOM_OK)
		st = cuda_status(be, cudaMemsetAsync(be->bad_node, 0xff, sizeof(int), be->stream), "clearing the error word");
	if (st == LOOM_OK)
		st = cuda_status(be, cudaStreamSynchronize(be->stream), "clearing the error word");
	if (st != LOOM_OK) {
		cuda_free(be);
		return NULL;
	}
	return be;
}

static void cuda_free(void *backend)
{
	cuda_backend *be = (cuda_backend *)backend;
	if (be == NULL)
		return;
	cudaSetDevice(be->device);
	if (be->stream != NULL)
		cudaStreamSynchronize(be->stream);
	cuda_replay_free(be);
	cudaFree(be->work);
	cudaFree(be->bad_node);
	if (be->stream != NULL)
		cudaStreamDestroy(be->stream);
	pthread_mutex_destroy(&be->lock);
	free(be);
}

/* The device is a host thread's setting: a call may come from another
 * thread than the one that made the instance (a server's). */
static loom_status select_device(cuda_backend *be)
{
	return cuda_status(be, cudaSetDevice(be->device), "selecting the device");
}

static loom_status cuda_device_info(void *backend, loom_device_info *out)
{
	cuda_backend *be = (cuda_backend *)backend;
	size_t free_bytes = 0, total_bytes = 0;
	loom_status st = select_device(be);
	if (st == LOOM_OK)
		st = cuda_status(be, cudaMemGetInfo(&free_bytes, &total_bytes), "reading free memory");
	if (st != LOOM_OK)
		return st;
	snprintf(out->name, sizeof(out->name), "%s (sm_%d%d)", be->prop.name, be->prop.major, be->prop.minor);
	out->memory_total = total_bytes;
	out->memory_free = free_bytes;
	return LOOM_OK;
}

/* ---- memory ---- */

static loom_status cuda_buffer_alloc(void *backend, size_t size, loom_buffer *out)
{
	cuda_backend *be = (cuda_backend *)backend;
	cuda_stream_lock hold(be);
	void *p = NULL;
	char what[96];
	snprintf(what, sizeof(what), "allocating %zu MiB of device memory", (size + (1u << 20) - 1) >> 20);
	loom_status st = select_device(be);
	if (st == LOOM_OK)
		st = cuda_status(be, cudaMalloc(&p, size > 0 ? size : 1), what);
	if (st == LOOM_OK)
		st = cuda_status(be, cudaMemsetAsync(p, 0, size, be->stream), "clearing new device memory");
	if (st == LOOM_OK)
		st = cuda_status(be, cudaStreamSynchronize(be->stream), "clearing new device memory");
	if (st != LOOM_OK) {
		cudaFree(p);
		return st;
	}
	out->handle = p;
	out->base = p;
	out->size = size;
	return LOOM_OK;
}

static void cuda_buffer_free(void *backend, loom_buffer *buf)
{
	cuda_backend *be = (cuda_backend *)backend;
	cuda_stream_lock hold(be);
	if (buf->handle != NULL) {
		cudaSetDevice(be->device);
		cudaStreamSynchronize(be->stream);
		cudaFree(buf->handle);
	}
	buf->handle = buf->base = NULL;
	buf->size = 0;
}

static loom_status cuda_buffer_upload(void *backend, loom_buffer *buf, size_t offset, const void *src, size_t size)
{
	cuda_backend *be = (cuda_backend *)backend;
	cuda_stream_lock hold(be);
	/* Ordered after any compute still on the stream, and complete when this
	 * returns: the caller may reuse src. */
	loom_status st = select_device(be);
	if (st == LOOM_OK)
		st = cuda_status(be, cudaMemcpyAsync((char *)buf->base + offset, src, size, cudaMemcpyHostToDevice,
						     be->stream), "uploading");
	return st == LOOM_OK ? cuda_status(be, cudaStreamSynchronize(be->stream), "uploading") : st;
}

static loom_status cuda_buffer_download(void *backend, const loom_buffer *buf, size_t offset, void *dst, size_t size)
{
	cuda_backend *be = (cuda_backend *)backend;
	cuda_stream_lock hold(be);
	loom_status st = select_device(be);
	if (st == LOOM_OK)
		st = cuda_status(be, cudaMemcpyAsync(dst, (const char *)buf->base + offset, size, cudaMemcpyDeviceToHost,
						     be->stream), "downloading");
	return st == LOOM_OK ? cuda_status(be, cudaStreamSynchronize(be->stream), "downloading") : st;
}

/* ---- compute ---- */

static bool cuda_supports(void *backend, const loom_node *node)
{
	(void)backend;
	const cuda_op *op = op_of(node);
	return op != NULL && node->dst != NULL && op->supports(node);
}

/* Grows the work memory to the largest any node of the graph needs. */
static loom_status reserve_work(cuda_backend *be, const loom_graph *graph)
{
	size_t need = 0;
	for (int i = 0; i < graph->n_nodes; i++) {
		const cuda_op *op = op_of(&graph->nodes[i]);
		size_t n = op != NULL && op->work_size != NULL ? op->work_size(&graph->nodes[i]) : 0;
		need = n > need ? n : need;
	}
	if (need <= be->work_size)
		return LOOM_OK;
	loom_status st = cuda_status(be, cudaStreamSynchronize(be->stream), "waiting for the stream");
	if (st != LOOM_OK)
		return st;
	cudaFree(be->work);
	be->work = NULL;
	be->work_size = 0;
	char what[96];
	snprintf(what, sizeof(what), "allocating %zu MiB of work memory", (need + (1u << 20) - 1) >> 20);
	if ((st = cuda_status(be, cudaMalloc(&be->work, need), what)) == LOOM_OK)
		be->work_size = need;
	return st;
}

bool cuda_node_uses_work(const loom_node *node)
{
	const cuda_op *op = op_of(node);
	return op != NULL && op->work_size != NULL && op->work_size(node) > 0;
}

static bool node_quantizes(const loom_node *node)
{
	return (node->op == LOOM_OP_MATMUL || node->op == LOOM_OP_MATMUL_ID) && cuda_matmul_is_quant(node->src[0]->dtype);
}

/* The ops whose kernels can write their result as Q8_1 as well (a warp's
 * 32 lanes on 32 consecutive elements of a row): RMS_NORM's, the
 * element-wise ones, and ATTENTION's with its scores in shared memory. */
static bool node_fusable(const loom_node *node)
{
	switch (node->op) {
	case LOOM_OP_ATTENTION:
		return cuda_attention_writes_q8_1(node);
	case LOOM_OP_RMS_NORM: case LOOM_OP_ADD: case LOOM_OP_MUL: case LOOM_OP_SCALE: case LOOM_OP_SWIGLU:
	case LOOM_OP_GELU: case LOOM_OP_SOFTCAP: case LOOM_OP_SIGMOID: case LOOM_OP_SWIGLU_OAI:
		return node->dst->ne[0] % CUDA_QK == 0;
	default:
		return false;
	}
}

static const cuda_q8_1_ops q8_1_ops = {node_quantizes, node_fusable, cuda_node_uses_work};

bool cuda_q8_1_ready(const cuda_backend *be, int node_index)
{
	return be->step != NULL && cuda_q8_1_source(be->step, node_index, &q8_1_ops) >= 0;
}

cuda_block_q8_1 *cuda_q8_1_fused_out(const cuda_backend *be, int node_index)
{
	return be->step != NULL && cuda_q8_1_feeds(be->step, node_index, &q8_1_ops) ? (cuda_block_q8_1 *)be->work
										      : NULL;
}

/* Whether the run at node i is one kernel's: each of its nodes one the
 * ops take. (A run's products are of block-quantized weights, which a
 * MATMUL the ops take multiplies with the quantized kernels; an ADD before
 * a norm never writes Q8_1 itself, the norm being the op that does.) */
static bool run_fuses(const loom_graph *graph, int i, const cuda_fusion *f)
{
	if (f->kind == CUDA_FUSION_NONE)
		return false;
	for (int k = i; k < i + f->n_nodes; k++) {
		const cuda_op *op = op_of(&graph->nodes[k]);
		if (op == NULL || !op->supports(&graph->nodes[k]))
			return false;
	}
	return true;
}

static loom_status run_fused(cuda_backend *be, const loom_node *nodes, const cuda_fusion *f, int i)
{
	switch (f->kind) {
	case CUDA_FUSION_ADD_RMS_NORM: return cuda_add_rms_norm_run(be, &nodes[0], &nodes[1], i + 1);
	case CUDA_FUSION_ROPE_STORE: return cuda_rope_store_run(be, nodes, f->rotates, i);
	case CUDA_FUSION_PRODUCTS: return cuda_matmul_quant_group(be, nodes, f->n_nodes, be->work, i);
	default: break;
	}
	return LOOM_ERR_UNSUPPORTED;
}

loom_status cuda_enqueue_nodes(cuda_backend *be, const loom_graph *graph)
{
	loom_status st = LOOM_OK;
	be->step = graph;
	for (int i = 0; st == LOOM_OK && i < graph->n_nodes; i++) {
		const loom_node *node = &graph->nodes[i];
		cuda_fusion f = cuda_fusion_at(graph, i);
		if (run_fuses(graph, i, &f)) {
			st = run_fused(be, node, &f, i);
			i += f.n_nodes - 1;
			continue;
		}
		const cuda_op *op = op_of(node);
		if (op == NULL || !op->supports(node)) {
			be->host->set_error("cuda: node %d (op %d) is not supported", i, (int)node->op);
			st = LOOM_ERR_UNSUPPORTED;
			break;
		}
		st = op->run(be, node, be->work, i);
	}
	be->step = NULL;
	return st;
}

static loom_status cuda_compute(void *backend, const loom_graph *graph)
{
	cuda_backend *be = (cuda_backend *)backend;
	cuda_stream_lock hold(be);
	loom_status st = select_device(be);
	if (st == LOOM_OK)
		st = reserve_work(be, graph);
	if (st == LOOM_OK)
		st = cuda_run_step(be, graph);
	if (st != LOOM_OK)
		return st;
	int bad = -1;
	st = cuda_status(be, cudaMemcpyAsync(&bad, be->bad_node, sizeof(int), cudaMemcpyDeviceToHost, be->stream),
			 "reading the error word");
	if (st == LOOM_OK)
		st = cuda_status(be, cudaStreamSynchronize(be->stream), "running the graph");
	if (st == LOOM_OK && bad >= 0) {
		const loom_node *node = &graph->nodes[bad];
		be->host->set_error("cuda: node %d (%s): an index outside its table or cache", bad,
				    node->src[0] != NULL && node->src[0]->name != NULL ? node->src[0]->name : "unnamed");
		cudaMemsetAsync(be->bad_node, 0xff, sizeof(int), be->stream);
		return LOOM_ERR_INVALID_ARGUMENT;
	}
	return st;
}

/* The work memory of a context's largest steps, allocated when it is made:
 * a device without room for it refuses the context, and no later step
 * frees and allocates it again (which would also change every step's
 * replay key). */
static loom_status cuda_reserve(void *backend, const loom_graph *graph)
{
	cuda_backend *be = (cuda_backend *)backend;
	cuda_stream_lock hold(be);
	loom_status st = select_device(be);
	return st == LOOM_OK ? reserve_work(be, graph) : st;
}

const loom_backend_vtable cuda_backend_vtable = {
	.struct_size = sizeof(loom_backend_vtable),
	.init = cuda_init,
	.free = cuda_free,
	.buffer_alloc = cuda_buffer_alloc,
	.buffer_free = cuda_buffer_free,
	.buffer_upload = cuda_buffer_upload,
	.buffer_download = cuda_buffer_download,
	.buffer_from_host = NULL,
	.supports = cuda_supports,
	.compute = cuda_compute,
	.weight_repack = NULL,
	.device_info = cuda_device_info,
	.compute_timed = NULL,
	.reserve = cuda_reserve,
};
