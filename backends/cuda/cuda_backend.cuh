/*
 * cuda_backend.cuh - what the CUDA backend's files share: the instance, the
 * op table, and tensor helpers for the host and the device.
 *
 * compute() enqueues every node's kernels on the instance's one stream, or
 * replays the graph captured from an earlier step of the same key
 * (cuda_replay.cu), and synchronizes once, at the end: no host round-trip
 * between ops. A kernel
 * that meets a bad index (a row outside a table, a cell outside the cache)
 * records the node in a device word instead of reading or writing out of
 * bounds; compute() reports it after the step.
 */
#ifndef LOOM_CUDA_BACKEND_CUH
#define LOOM_CUDA_BACKEND_CUH

#include "cuda_probe.h"
#include "cuda_replay_key.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <pthread.h>

#include <cstddef>
#include <cstdint>

struct cuda_backend {
	const loom_host *host;
	int device;
	cudaDeviceProp prop;
	cudaStream_t stream;
	/* Device memory ops borrow during a compute (quantized activations,
	 * attention scores): the largest any node of a graph asks for. */
	void *work;
	size_t work_size;
	/* The first node that met a bad index, or -1 (device memory). */
	int *bad_node;
	/* Steps captured as graphs (cuda_replay.cu), the key of the step at
	 * hand, and whether the runtime refused a capture. */
	cuda_replay_table replay;
	cuda_replay_key replay_key;
	bool replay_off;
	/* The step being enqueued: an op may look at the nodes before its own
	 * (cuda_q8_1_reuse.h). */
	const loom_graph *step;
	/* Held by every call that puts work on the stream: contexts on other
	 * threads share it, and a step being captured must find no other
	 * thread's copy or synchronize on it. */
	pthread_mutex_t lock;
};

/* Holds be->lock for a scope. */
struct cuda_stream_lock {
	cuda_backend *be;
	explicit cuda_stream_lock(cuda_backend *b) : be(b) { pthread_mutex_lock(&be->lock); }
	~cuda_stream_lock() { pthread_mutex_unlock(&be->lock); }
	cuda_stream_lock(const cuda_stream_lock &) = delete;
	cuda_stream_lock &operator=(const cuda_stream_lock &) = delete;
};

/* Records a CUDA failure as the caller's error; LOOM_OK when err is
 * cudaSuccess. */
loom_status cuda_status(const cuda_backend *be, cudaError_t err, const char *what);

/* Whether the node's op uses the work memory. */
bool cuda_node_uses_work(const loom_node *node);

/* A step's Q8_1 activations (cuda_q8_1_reuse.h), for the node at
 * node_index of be->step: whether a node before it left its src1 in the
 * work memory as Q8_1 already; and where it writes its own dst as Q8_1
 * too, for the next product, which reads it (the work memory), or NULL where it
 * does not. */
bool cuda_q8_1_ready(const cuda_backend *be, int node_index);
struct cuda_block_q8_1;
cuda_block_q8_1 *cuda_q8_1_fused_out(const cuda_backend *be, int node_index);

/* Runs of nodes enqueued as one kernel (cuda_fusion.h): an ADD and the
 * RMS_NORM of its sum (norm_index: the norm's place in the step); a
 * layer's attention prologue, nodes[0..3] (the two ropes, the two stores)
 * or, where it does not rotate, nodes[0..1] (the stores), the first at
 * first_index. */
loom_status cuda_add_rms_norm_run(cuda_backend *be, const loom_node *add, const loom_node *norm, int norm_index);
loom_status cuda_rope_store_run(cuda_backend *be, const loom_node *nodes, bool rotates, int first_index);

/* Whether an ATTENTION node can write its result as Q8_1 rows too: its
 * scores in shared memory (no work memory of its own), whole Q8_1 blocks
 * a head. */
bool cuda_attention_writes_q8_1(const loom_node *node);

/* Enqueues every node of graph on be->stream, one launch after another,
 * or one for a run of them (cuda_fusion.h). */
loom_status cuda_enqueue_nodes(cuda_backend *be, const loom_graph *graph);

/* Enqueues a step: replayed from its captured graph where one is kept,
 * else node by node (cuda_replay.cu). */
loom_status cuda_run_step(cuda_backend *be, const loom_graph *graph);

/* Destroys the captured graphs and their keys. */
void cuda_replay_free(cuda_backend *be);

/* The last launch's error, if any (launches fail on bad configurations). */
static inline loom_status cuda_launched(const cuda_backend *be, const char *what)
{
	return cuda_status(be, cudaGetLastError(), what);
}

struct cuda_op {
	/* The node's dtypes and shapes are ones this op implements. */
	bool (*supports)(const loom_node *node);
	/* (optional) Bytes of device work memory the node needs; NULL: none. */
	size_t (*work_size)(const loom_node *node);
	/* Enqueue the node on be->stream; work holds work_size bytes. node_index
	 * is what a kernel writes to be->bad_node on a bad index. */
	loom_status (*run)(cuda_backend *be, const loom_node *node, void *work, int node_index);
};

extern const cuda_op cuda_op_get_rows;
extern const cuda_op cuda_op_rms_norm;
extern const cuda_op cuda_op_matmul;
extern const cuda_op cuda_op_add;
extern const cuda_op cuda_op_mul;
extern const cuda_op cuda_op_rope;
extern const cuda_op cuda_op_kv_store;
extern const cuda_op cuda_op_attention;
extern const cuda_op cuda_op_swiglu;
extern const cuda_op cuda_op_scale;
extern const cuda_op cuda_op_convert;
extern const cuda_op cuda_op_layer_norm;
extern const cuda_op cuda_op_gelu;
extern const cuda_op cuda_op_softcap;
extern const cuda_op cuda_op_topk;
extern const cuda_op cuda_op_moe_weights;
extern const cuda_op cuda_op_matmul_id;
extern const cuda_op cuda_op_moe_sum;
extern const cuda_op cuda_op_sigmoid;
extern const cuda_op cuda_op_swiglu_oai;

/* ---- tensors, on the device ---- */

/* (On the host, supports() uses the SDK's predicates: plugin_api.h.) */

/* Where a tensor's rows are: row r counts over dimensions 1..3 in order,
 * as on the CPU. Passed to kernels by value. */
struct cuda_rows {
	char *data;
	int64_t ne1, ne2;
	size_t nb1, nb2, nb3;
};

static inline cuda_rows cuda_rows_of(const loom_tensor *t)
{
	cuda_rows r = {(char *)t->data, t->ne[1], t->ne[2], t->nb[1], t->nb[2], t->nb[3]};
	return r;
}

static __device__ __forceinline__ char *cuda_row(const cuda_rows &t, int64_t r)
{
	int64_t i1 = r % t.ne1, i2 = (r / t.ne1) % t.ne2, i3 = r / (t.ne1 * t.ne2);
	return t.data + i1 * t.nb1 + i2 * t.nb2 + i3 * t.nb3;
}

/* ---- f32, f16 and bf16 values ----
 * The hardware conversions, which make NaNs canonical (cuda_dequant.cuh
 * has the CPU's bit-exact ones, for tables and CONVERT). */

static __device__ __forceinline__ float cuda_to_f32(float v)
{
	return v;
}

static __device__ __forceinline__ float cuda_to_f32(__half v)
{
	return __half2float(v);
}

static __device__ __forceinline__ float cuda_to_f32(__nv_bfloat16 v)
{
	return __bfloat162float(v);
}

/* v rounded to T (to nearest, ties to even). */
template <typename T> static __device__ __forceinline__ T cuda_from_f32(float v);

template <> __device__ __forceinline__ float cuda_from_f32<float>(float v)
{
	return v;
}

template <> __device__ __forceinline__ __half cuda_from_f32<__half>(float v)
{
	return __float2half_rn(v);
}

template <> __device__ __forceinline__ __nv_bfloat16 cuda_from_f32<__nv_bfloat16>(float v)
{
	return __float2bfloat16_rn(v);
}

/* v as a kernel that rounds its inputs to T sees it, back in f32. */
template <typename T> static __device__ __forceinline__ float cuda_round_to(float v)
{
	return cuda_to_f32(cuda_from_f32<T>(v));
}

/* ---- reductions ---- */

/* The sum of v over the 32 lanes of a warp, in every lane. */
template <typename T> static __device__ __forceinline__ T cuda_warp_sum(T v)
{
	for (int offset = 16; offset > 0; offset >>= 1)
		v += __shfl_xor_sync(0xffffffffu, v, offset);
	return v;
}

/* The maximum of v over the 32 lanes of a warp, in every lane. */
static __device__ __forceinline__ float cuda_warp_max(float v)
{
	for (int offset = 16; offset > 0; offset >>= 1)
		v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, offset));
	return v;
}

/* The sum of v over a block of n_warps whole warps, the same in every
 * thread. partial holds one value per warp; it is free again when this
 * returns. */
template <typename T> static __device__ T cuda_block_sum(T v, T *partial, int n_warps)
{
	v = cuda_warp_sum(v);
	if (threadIdx.x % 32 == 0)
		partial[threadIdx.x / 32] = v;
	__syncthreads();
	T sum = 0;
	for (int w = 0; w < n_warps; w++)
		sum += partial[w];
	__syncthreads();
	return sum;
}

/* Marks node as having met a bad index; the first one wins. */
static __device__ __forceinline__ void cuda_fail(int *bad_node, int node)
{
	atomicCAS(bad_node, -1, node);
}

#endif
