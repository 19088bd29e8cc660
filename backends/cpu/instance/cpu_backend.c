/*
 * cpu_backend.c - the CPU backend's vtable: instances, host-memory buffers
 * and the compute loop.
 */
#include "cpu_backend.h"

#include "cpu_arena.h"
#include "cpu_repack.h"

#include <omp.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

typedef struct cpu_backend {
	const loom_host *host;
	int n_threads;
	unsigned barrier_spins; /* cpu_barrier.h */
	/* Held for a whole compute: computes on one instance from several
	 * threads (contexts sharing a backend) take turns over the scratch. */
	pthread_mutex_t lock;
	/* Scratch shared by the ops of a compute, grown to the largest need. */
	unsigned char *scratch;
	size_t scratch_size;
} cpu_backend;

static const cpu_op *const op_table[LOOM_OP_COUNT] = {
	[LOOM_OP_GET_ROWS] = &cpu_op_get_rows,
	[LOOM_OP_RMS_NORM] = &cpu_op_rms_norm,
	[LOOM_OP_MATMUL] = &cpu_op_matmul,
	[LOOM_OP_ADD] = &cpu_op_add,
	[LOOM_OP_MUL] = &cpu_op_mul,
	[LOOM_OP_ROPE] = &cpu_op_rope,
	[LOOM_OP_KV_STORE] = &cpu_op_kv_store,
	[LOOM_OP_ATTENTION] = &cpu_op_attention,
	[LOOM_OP_SWIGLU] = &cpu_op_swiglu,
	[LOOM_OP_SCALE] = &cpu_op_scale,
	[LOOM_OP_CONVERT] = &cpu_op_convert,
	[LOOM_OP_LAYER_NORM] = &cpu_op_layer_norm,
	[LOOM_OP_GELU] = &cpu_op_gelu,
	[LOOM_OP_SOFTCAP] = &cpu_op_softcap,
	[LOOM_OP_TOPK] = &cpu_op_topk,
	[LOOM_OP_MOE_WEIGHTS] = &cpu_op_moe_weights,
	[LOOM_OP_MATMUL_ID] = &cpu_op_matmul_id,
	[LOOM_OP_MOE_SUM] = &cpu_op_moe_sum,
	[LOOM_OP_SIGMOID] = &cpu_op_sigmoid,
	[LOOM_OP_SWIGLU_OAI] = &cpu_op_swiglu_oai,
};

__attribute__((format(printf, 2, 3)))
static void report(const loom_host *host, const char *fmt, ...)
{
	char msg[512];
	va_list ap;

	if (!LOOM_VT_HAS(host, set_error))
		return;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	host->set_error("%s: %s", LOOM_CPU_VARIANT_NAME, msg);
}

static const cpu_op *op_of(const loom_node *node)
{
	if (node == NULL || node->op <= LOOM_OP_NONE || node->op >= LOOM_OP_COUNT)
		return NULL;
	return op_table[node->op];
}

/* ---- instances ---- */

static int online_cpus(void)
{
	long n = sysconf(_SC_NPROCESSORS_ONLN);
	return n > 0 ? (int)n : 1;
}

static void *cpu_init(const loom_host *host, const loom_backend_options *opts)
{
	bool has_threads = opts != NULL &&
			   opts->struct_size >= offsetof(loom_backend_options, n_threads) + sizeof(int);
	bool has_options = opts != NULL &&
			   opts->struct_size >= offsetof(loom_backend_options, option_values) +
							sizeof(opts->option_values);
	cpu_backend *be;

	/* A key here is a typo or meant for another backend, and saying so
	 * beats ignoring it. cpu-amx's one option was checked by its probe. */
	for (int i = 0; has_options && i < opts->n_options; i++) {
		if (CPU_HAS_AMX_OPTION && strcmp(opts->option_keys[i], CPU_AMX_OPTION) == 0)
			continue;
		report(host, "unknown option '%s' (%s)", opts->option_keys[i],
		       CPU_HAS_AMX_OPTION ? "this backend takes " CPU_AMX_OPTION ": on|off"
					  : "this backend takes none");
		return NULL;
	}
	be = calloc(1, sizeof(*be));
	if (be == NULL) {
		report(host, "out of memory");
		return NULL;
	}
	be->host = host;
	be->n_threads = has_threads && opts->n_threads > 0 ? opts->n_threads : online_cpus();
	be->barrier_spins = cpu_barrier_spins();
	pthread_mutex_init(&be->lock, NULL);
	return be;
}

static void cpu_free(void *backend)
{
	cpu_backend *be = backend;

	if (be == NULL)
		return;
	pthread_mutex_destroy(&be->lock);
	free(be->scratch);
	free(be);
}

/* ---- buffers ----
 * A buffer is plain host memory. handle is the allocation to free, NULL
 * for host memory wrapped in place, or a weight slab (cpu_arena.h), which
 * is never the base. */

/* Buffers this large are mapped from the kernel, whose pages come zeroed
 * when first touched: nothing is written (or made resident) before it is
 * used, and the kernel may back them with large pages. */
#define MAPPED_BUFFER_BYTES ((size_t)1 << 20)

static size_t mapped_bytes(size_t size)
{
	size_t page = (size_t)sysconf(_SC_PAGESIZE);
	return (size + page - 1) / page * page;
}

static loom_status cpu_buffer_alloc(void *backend, size_t size, loom_buffer *out)
{
	cpu_backend *be = backend;
	size_t rounded = cpu_align_up(size > 0 ? size : 1);
	void *p;

	if (out == NULL || rounded < size) {
		report(be->host, "buffer_alloc: invalid arguments");
		return LOOM_ERR_INVALID_ARGUMENT;
	}
	if (size >= MAPPED_BUFFER_BYTES) {
		size_t bytes = mapped_bytes(size);
		if ((p = cpu_map_huge(bytes)) == NULL) {
			report(be->host, "buffer_alloc: out of memory mapping %zu bytes", size);
			return LOOM_ERR_NO_MEMORY;
		}
		*out = (loom_buffer){.handle = p, .base = p, .size = size};
		return LOOM_OK;
	}
	p = aligned_alloc(CPU_ALIGN, rounded);
	if (p == NULL) {
		report(be->host, "buffer_alloc: out of memory allocating %zu bytes", size);
		return LOOM_ERR_NO_MEMORY;
	}
	memset(p, 0, rounded);
	*out = (loom_buffer){.handle = p, .base = p, .size = size};
	return LOOM_OK;
}

static void cpu_buffer_free(void *backend, loom_buffer *buf)
{
	(void)backend;
	if (buf == NULL)
		return;
	if (cpu_arena_owns(buf))
		cpu_arena_free(buf);
	else if (buf->handle != NULL && buf->size >= MAPPED_BUFFER_BYTES)
		munmap(buf->handle, mapped_bytes(buf->size));
	else
		free(buf->handle);
	*buf = (loom_buffer){0};
}

/* [offset, offset + size) lies inside the buffer, without overflow. */
static bool in_bounds(const loom_buffer *buf, size_t offset, size_t size)
{
	return buf != NULL && buf->base != NULL && offset <= buf->size && size <= buf->size - offset;
}

static loom_status cpu_buffer_upload(void *backend, loom_buffer *buf, size_t offset, const void *src,
				     size_t size)
{
	cpu_backend *be = backend;

	if (!in_bounds(buf, offset, size) || (src == NULL && size > 0)) {
		report(be->host, "upload of %zu bytes at offset %zu: outside the %zu-byte buffer", size,
		       offset, buf != NULL ? buf->size : 0);
		return LOOM_ERR_INVALID_ARGUMENT;
	}
	if (size > 0)
		memcpy((char *)buf->base + offset, src, size);
	return LOOM_OK;
}

static loom_status cpu_buffer_download(void *backend, const loom_buffer *buf, size_t offset,
				       void *dst, size_t size)
{
	cpu_backend *be = backend;

	if (!in_bounds(buf, offset, size) || (dst == NULL && size > 0)) {
		report(be->host, "download of %zu bytes at offset %zu: outside the %zu-byte buffer", size,
		       offset, buf != NULL ? buf->size : 0);
		return LOOM_ERR_INVALID_ARGUMENT;
	}
	if (size > 0)
		memcpy(dst, (const char *)buf->base + offset, size);
	return LOOM_OK;
}

static loom_status cpu_buffer_from_host(void *backend, void *host_ptr, size_t size,
					loom_buffer *out)
{
	cpu_backend *be = backend;

	if (out == NULL || (host_ptr == NULL && size > 0)) {
		report(be->host, "buffer_from_host: invalid arguments");
		return LOOM_ERR_INVALID_ARGUMENT;
	}
	*out = (loom_buffer){.handle = NULL, .base = host_ptr, .size = size};
	return LOOM_OK;
}

/* ---- compute ---- */

static bool cpu_supports(void *backend, const loom_node *node)
{
	const cpu_op *op = op_of(node);

	(void)backend;
	return op != NULL && node->dst != NULL && op->supports(node);
}

static bool node_has_data(const loom_node *node)
{
	if (node->dst->data == NULL)
		return false;
	for (int i = 0; i < LOOM_NODE_MAX_SRC; i++)
		if (node->src[i] != NULL && node->src[i]->data == NULL)
			return false;
	return true;
}

static const char *dst_name(const loom_node *node)
{
	return node->dst != NULL && node->dst->name != NULL ? node->dst->name : "?";
}

/* The scratch the graph's largest node needs (nodes this backend cannot
 * run need none). */
static size_t scratch_need(const cpu_backend *be, const loom_graph *graph)
{
	size_t need = 0;

	for (int i = 0; i < graph->n_nodes; i++) {
		const cpu_op *op = op_of(&graph->nodes[i]);
		if (op != NULL && op->scratch_size != NULL) {
			size_t n = op->scratch_size(&graph->nodes[i], be->n_threads);
			need = n > need ? n : need;
		}
	}
	return need;
}

static loom_status grow_scratch(cpu_backend *be, size_t need)
{
	if (need <= be->scratch_size)
		return LOOM_OK;
	unsigned char *p = aligned_alloc(CPU_ALIGN, cpu_align_up(need));
	if (p == NULL) {
		report(be->host, "out of memory for %zu bytes of scratch", need);
		return LOOM_ERR_NO_MEMORY;
	}
	free(be->scratch);
	be->scratch = p;
	be->scratch_size = need;
	return LOOM_OK;
}

/* Every node is checked, and the scratch sized, before any thread starts:
 * a graph either runs whole or not at all. */
static loom_status prepare(cpu_backend *be, const loom_graph *graph)
{
	for (int i = 0; i < graph->n_nodes; i++) {
		const loom_node *node = &graph->nodes[i];

		if (!cpu_supports(be, node)) {
			report(be->host, "node %d (%s -> %s): unsupported dtypes or shapes", i,
			       loom_op_name(node->op), dst_name(node));
			return LOOM_ERR_UNSUPPORTED;
		}
		if (!node_has_data(node)) {
			report(be->host, "node %d (%s -> %s): a tensor has no data", i, loom_op_name(node->op),
			       dst_name(node));
			return LOOM_ERR_INVALID_ARGUMENT;
		}
	}
	return grow_scratch(be, scratch_need(be, graph));
}

void cpu_task_barrier(const cpu_task *task)
{
	cpu_barrier_wait(task->barrier);
}

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static bool is_weight_product(const loom_node *node)
{
	return node->op == LOOM_OP_MATMUL || node->op == LOOM_OP_MATMUL_ID;
}

/* The bytes from t's first element to past its last. */
static size_t tensor_span(const loom_tensor *t)
{
	size_t span = loom_dtype_row_bytes(t->dtype, t->ne[0]);
	for (int d = 1; d < 4; d++)
		span += (size_t)(t->ne[d] - 1) * t->nb[d];
	return span;
}

/* Whether a node of [from, to) writes any byte of t. */
static bool written_in(const loom_graph *graph, int from, int to, const loom_tensor *t)
{
	const char *lo = t->data, *hi = lo + tensor_span(t);
	for (int i = from; i < to; i++) {
		const loom_tensor *d = graph->nodes[i].dst;
		const char *d_lo = d->data, *d_hi = d_lo + tensor_span(d);
		if (d_lo < hi && lo < d_hi)
			return true;
	}
	return false;
}

/* What thread ith fetches of weight product `next`'s first weights while
 * it waits after node i: a MATMUL_ID's only once its expert indices are
 * written, by a node before i (node i may still run on other threads). */
static bool first_weights(const loom_graph *graph, int i, int next, int ith, int nth, cpu_fetch *f)
{
	const loom_node *node = &graph->nodes[next];
	if (node->op == LOOM_OP_MATMUL)
		return cpu_matmul_first_weights(node, ith, nth, f);
	return !written_in(graph, i, next, node->src[2]) && cpu_matmul_id_first_weights(node, ith, nth, f);
}

/* Runs every node with all threads, a barrier after each. */
/* Nodes take turns with two work counters: node i's was used last by node
 * i - 2, and thread 0 zeroes it while node i - 1 runs, before the barrier
 * that node i starts after. With node_ns, thread 0 reads the clock as each
 * barrier lets the threads go: a node's time is all threads' time on it. */
static void run_graph(cpu_backend *be, const loom_graph *graph, atomic_int *bad_node, uint64_t *node_ns)
{
	atomic_llong work[2] = {0, 0};
	cpu_barrier barrier;
	uint64_t t_prev = node_ns != NULL ? now_ns() : 0;

#pragma omp parallel num_threads(be->n_threads)
	{
		/* The team may be smaller than asked for. */
#pragma omp single
		cpu_barrier_init(&barrier, omp_get_num_threads(), be->barrier_spins);
		cpu_task task = {
			.ith = omp_get_thread_num(),
			.nth = omp_get_num_threads(),
			.scratch = be->scratch,
			.bad_node = bad_node,
			.barrier = &barrier,
		};
		/* The next weight product, and what of it this thread fetches
		 * while it waits at barriers until then. */
		int next = -1, fetching = -1;
		cpu_fetch fetch = {0};
		for (int i = 0; i < graph->n_nodes; i++) {
			task.node = i;
			task.work = &work[i % 2];
			if (task.ith == 0)
				atomic_store(&work[(i + 1) % 2], 0);
			op_of(&graph->nodes[i])->run(&graph->nodes[i], &task);
			if (next <= i)
				for (next = i + 1; next < graph->n_nodes && !is_weight_product(&graph->nodes[next]); next++)
					;
			if (next < graph->n_nodes && fetching != next) {
				fetching = next;
				if (!first_weights(graph, i, next, task.ith, task.nth, &fetch))
					fetch.left = 0;
			}
			cpu_barrier_wait_fetching(&barrier, &fetch);
			if (node_ns != NULL && task.ith == 0) {
				uint64_t t = now_ns();
				node_ns[i] = t - t_prev;
				t_prev = t;
			}
		}
	}
}

static loom_status compute(cpu_backend *be, const loom_graph *graph, uint64_t *node_ns)
{
	atomic_int bad_node = -1;
	loom_status st;

	if (graph == NULL || (graph->n_nodes > 0 && graph->nodes == NULL)) {
		report(be->host, "compute: no graph");
		return LOOM_ERR_INVALID_ARGUMENT;
	}
	pthread_mutex_lock(&be->lock);
	st = prepare(be, graph);
	if (st == LOOM_OK)
		run_graph(be, graph, &bad_node, node_ns);
	pthread_mutex_unlock(&be->lock);
	if (st != LOOM_OK)
		return st;
	if (bad_node >= 0) {
		const loom_node *node = &graph->nodes[bad_node];
		report(be->host, "node %d (%s -> %s): an index is out of range", (int)bad_node,
		       loom_op_name(node->op), dst_name(node));
		return LOOM_ERR_INVALID_ARGUMENT;
	}
	return LOOM_OK;
}

/* The scratch a context's largest steps need, allocated when it is made. */
static loom_status cpu_reserve(void *backend, const loom_graph *graph)
{
	cpu_backend *be = backend;

	if (graph == NULL || (graph->n_nodes > 0 && graph->nodes == NULL)) {
		report(be->host, "reserve: no graph");
		return LOOM_ERR_INVALID_ARGUMENT;
	}
	pthread_mutex_lock(&be->lock);
	loom_status st = grow_scratch(be, scratch_need(be, graph));
	pthread_mutex_unlock(&be->lock);
	return st;
}

static loom_status cpu_compute(void *backend, const loom_graph *graph)
{
	return compute(backend, graph, NULL);
}

static loom_status cpu_compute_timed(void *backend, const loom_graph *graph, uint64_t *node_ns)
{
	return compute(backend, graph, node_ns);
}

/* The rows of a weight kept in the standard layout, copied [lo, hi) of
 * its 16-row groups at a time. */
static void copy_groups(const loom_tensor *w, void *dst, int64_t lo, int64_t hi)
{
	int64_t o_lo = lo * CPU_REPACK_ROWS, o_hi = hi * CPU_REPACK_ROWS < w->ne[1] ? hi * CPU_REPACK_ROWS : w->ne[1];

	if (o_hi > o_lo)
		memcpy((char *)dst + (size_t)o_lo * w->nb[1], (const char *)w->data + (size_t)o_lo * w->nb[1],
		       (size_t)(o_hi - o_lo - 1) * w->nb[1] + loom_dtype_row_bytes(w->dtype, w->ne[0]));
}

/* A weight kept as it is spans at least this many huge pages to be copied. */
#define ROWS_COPY_MIN_BYTES (4 * CPU_HUGE_PAGE_BYTES)

/* Matmul weights move into the backend's weight slabs (cpu_arena.h):
 * repacked where the variant has a layout for it (cpu_repack.h), else as
 * they are (CPU_LAYOUT_ROWS), for the huge pages, when they span a few.
 * Every expert's matrices ({n_in, n_out, n_expert}, MATMUL_ID's) are
 * repacked as one matrix of all their rows, where each expert's rows are
 * whole groups (cpu_matmul_id.c then finds expert e at group
 * e * n_out / CPU_REPACK_ROWS). */
static loom_status cpu_weight_repack(void *backend, const loom_tensor *weight, loom_buffer *out, uint32_t *layout)
{
	cpu_backend *be = backend;
	uint32_t l = 0;
	size_t bytes;

	if (weight == NULL || out == NULL || layout == NULL) {
		report(be->host, "weight_repack: invalid arguments");
		return LOOM_ERR_INVALID_ARGUMENT;
	}
	const bool experts = weight->ne[2] != 1;
	if (!loom_tensor_standard(weight) || weight->ne[3] != 1 ||
	    (experts && (weight->ne[1] % CPU_REPACK_ROWS != 0 || weight->nb[2] != weight->nb[1] * (size_t)weight->ne[1])))
		return LOOM_ERR_UNSUPPORTED;
	loom_tensor flat = *weight;
	const loom_tensor *w = &flat;
	flat.ne[1] *= weight->ne[2];
	flat.ne[2] = 1;
	flat.nb[2] = flat.nb[3] = flat.nb[1] * (size_t)flat.ne[1];
	if ((bytes = cpu_repacked_bytes(w, &l)) == 0) {
		l = CPU_LAYOUT_ROWS; /* rows as far apart as in the file, so that nb still holds */
		bytes = (size_t)(w->ne[1] - 1) * w->nb[1] + loom_dtype_row_bytes(w->dtype, w->ne[0]);
		/* Mostly small pages anyway: the file's serve as well. */
		if (bytes < ROWS_COPY_MIN_BYTES)
			return LOOM_ERR_UNSUPPORTED;
	}
	if (!cpu_arena_alloc(bytes, out)) {
		report(be->host, "weight_repack: out of memory for %zu bytes", bytes);
		return LOOM_ERR_NO_MEMORY;
	}
	/* Every thread takes a share of the row groups: a start is paid in
	 * repacking time. */
	int64_t n_groups = (w->ne[1] + CPU_REPACK_ROWS - 1) / CPU_REPACK_ROWS;
#pragma omp parallel num_threads(be->n_threads)
	{
		int64_t lo, hi;
		cpu_split(n_groups, omp_get_thread_num(), omp_get_num_threads(), &lo, &hi);
		if (l == CPU_LAYOUT_ROWS)
			copy_groups(w, out->base, lo, hi);
		else
			cpu_repack_groups(w, out->base, lo, hi);
	}
	*layout = l;
	return LOOM_OK;
}

const loom_backend_vtable cpu_backend_vtable = {
	.struct_size = sizeof(loom_backend_vtable),
	.init = cpu_init,
	.free = cpu_free,
	.buffer_alloc = cpu_buffer_alloc,
	.buffer_free = cpu_buffer_free,
	.buffer_upload = cpu_buffer_upload,
	.buffer_download = cpu_buffer_download,
	.buffer_from_host = cpu_buffer_from_host,
	.supports = cpu_supports,
	.compute = cpu_compute,
	.weight_repack = cpu_weight_repack,
	.compute_timed = cpu_compute_timed,
	.reserve = cpu_reserve,
};
