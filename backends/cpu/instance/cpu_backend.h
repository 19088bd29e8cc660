/*
 * cpu_backend.h - what the CPU backend's files share: the per-thread task of
 * a compute, the op table, and helpers to walk tensor rows.
 *
 * compute() runs the whole graph inside one OpenMP parallel region. Every
 * thread calls every op's run() with its own task; the op splits its rows by
 * task->ith / task->nth, and the compute loop puts a barrier between nodes.
 */
#ifndef LOOM_CPU_BACKEND_H
#define LOOM_CPU_BACKEND_H

#include "loom/plugin_api.h"

#include "cpu_barrier.h"
#include "cpu_share.h"
#include "cpu_repack.h"

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

extern const loom_backend_vtable cpu_backend_vtable;

/* What one thread knows while it runs one node. */
typedef struct cpu_task {
	int ith;                /* this thread, 0 <= ith < nth */
	int nth;                /* threads running the graph */
	unsigned char *scratch; /* shared by all threads; sized by scratch_size */
	int node;               /* index of the node being run */
	atomic_int *bad_node;   /* first node that met a bad index, else -1 */
	atomic_llong *work;     /* this node's work counter, 0 when it starts */
	cpu_barrier *barrier;   /* where the threads meet between nodes */
} cpu_task;

/* Takes the next `chunk` items of `total` from the node's counter into
 * [*lo, *hi); false when none are left. Threads that find their share
 * slower (a busy core, a page fault) take fewer. */
static inline bool cpu_take_work(const cpu_task *task, int64_t total, int64_t chunk, int64_t *lo,
				 int64_t *hi)
{
	int64_t start = atomic_fetch_add(task->work, chunk);

	if (start >= total)
		return false;
	*lo = start;
	*hi = start + chunk < total ? start + chunk : total;
	return true;
}

/* Takes the next 1/nth of the items in [from, total) left (at least
 * `least`) into [*lo, *hi); false when none are left. The first takes are
 * large, and a thread that comes back for more mostly finds the items
 * right after its last ones: each thread streams through few contiguous
 * runs of the weights, which the memory's prefetchers follow, while the
 * last, small takes still even out the threads' finishing times. */
static inline bool cpu_take_guided(const cpu_task *task, int64_t from, int64_t total, int64_t least, int64_t *lo,
				   int64_t *hi)
{
	long long taken = atomic_load(task->work);
	int64_t take;

	do {
		if (from + taken >= total)
			return false;
		take = (total - from - taken) / task->nth;
		take = take < least ? least : take;
	} while (!atomic_compare_exchange_weak(task->work, &taken, taken + take));
	*lo = from + taken;
	*hi = *lo + take < total ? *lo + take : total;
	return true;
}

/* An input index (row, cell) was out of range: the op skips that row and
 * compute() reports the node once the graph is done. */
static inline void cpu_task_fail(const cpu_task *task)
{
	int none = -1;
	atomic_compare_exchange_strong(task->bad_node, &none, task->node);
}

/* Waits until every thread of the compute has reached it: for an op whose
 * second phase reads what all threads wrote in its first. Every thread must
 * call it, the same number of times. */
void cpu_task_barrier(const cpu_task *task);

typedef struct cpu_op {
	/* The node's dtypes and shapes are ones this op implements. */
	bool (*supports)(const loom_node *node);
	/* (optional) Scratch bytes the op needs when n_threads threads run it;
	 * NULL: none. */
	size_t (*scratch_size)(const loom_node *node, int n_threads);
	/* Called by every thread of the compute; see the file comment. */
	void (*run)(const loom_node *node, const cpu_task *task);
} cpu_op;

/* In *f, the first weight bytes thread ith of nth reads in a decode's
 * MATMUL node (cpu_matmul.c); false if it reads none first for sure. */
bool cpu_matmul_first_weights(const loom_node *node, int ith, int nth, cpu_fetch *f);

extern const cpu_op cpu_op_get_rows;
extern const cpu_op cpu_op_convert;
extern const cpu_op cpu_op_rms_norm;
extern const cpu_op cpu_op_matmul;
extern const cpu_op cpu_op_add;
extern const cpu_op cpu_op_mul;
extern const cpu_op cpu_op_rope;
extern const cpu_op cpu_op_kv_store;
extern const cpu_op cpu_op_attention;
extern const cpu_op cpu_op_swiglu;
extern const cpu_op cpu_op_scale;
extern const cpu_op cpu_op_layer_norm;
extern const cpu_op cpu_op_gelu;


/* cpu-amx's plugins.yaml option: `amx: off` makes its probe refuse, as on a
 * CPU without AMX. The other variants take no options. */
#define CPU_AMX_OPTION "amx"
#if defined(LOOM_CPU_AMX)
#define CPU_HAS_AMX_OPTION 1
#else
#define CPU_HAS_AMX_OPTION 0
#endif

/* ---- tensors ---- */

/* Rows of a tensor: ne[1] * ne[2] * ne[3]. */
static inline int64_t cpu_nrows(const loom_tensor *t)
{
	return t->ne[1] * t->ne[2] * t->ne[3];
}

/* Address of row r, counting rows over dimensions 1..3 in order. */
static inline void *cpu_row(const loom_tensor *t, int64_t r)
{
	int64_t i1 = r % t->ne[1];
	int64_t i2 = (r / t->ne[1]) % t->ne[2];
	int64_t i3 = r / (t->ne[1] * t->ne[2]);
	return (char *)t->data + i1 * t->nb[1] + i2 * t->nb[2] + i3 * t->nb[3];
}

/* A known dtype, positive extents, ne[0] a whole number of blocks and
 * blocks (or elements) packed along dimension 0: what every kernel here
 * assumes of a tensor. Strides of dimensions 1..3 are free. */
/* A tensor of a dtype with a block layout, whole blocks per row, in the
 * standard layout (cpu_repack.h has the others). */
static inline bool cpu_tensor_ok(const loom_tensor *t)
{
	loom_dtype_layout l;

	if (t == NULL || t->layout != 0)
		return false;
	l = loom_dtype_layout_of(t->dtype);
	if (l.block == 0)
		return false;
	for (int i = 0; i < LOOM_MAX_DIMS; i++)
		if (t->ne[i] < 1)
			return false;
	return t->ne[0] % l.block == 0 && t->nb[0] == l.block_bytes;
}

static inline bool cpu_tensor_is(const loom_tensor *t, loom_dtype type)
{
	return cpu_tensor_ok(t) && t->dtype == type;
}

/* A weight (a matmul's, or a table GET_ROWS reads) in the standard layout
 * or one this variant has for its type, otherwise as cpu_tensor_ok wants
 * it. */
static inline bool cpu_weight_ok(const loom_tensor *w)
{
	loom_tensor standard;

	if (w == NULL || !cpu_layout_supported(w->dtype, w->layout))
		return false;
	standard = *w;
	standard.layout = 0;
	return cpu_tensor_ok(&standard);
}

static inline bool cpu_same_shape(const loom_tensor *a, const loom_tensor *b)
{
	for (int i = 0; i < LOOM_MAX_DIMS; i++)
		if (a->ne[i] != b->ne[i])
			return false;
	return true;
}

/* Rows equally spaced nb[1] apart over all of dimensions 1..3, so that row r
 * is at data + r * nb[1]. */
static inline bool cpu_rows_uniform(const loom_tensor *t)
{
	return t->nb[2] == t->nb[1] * (size_t)t->ne[1] &&
	       t->nb[3] == t->nb[2] * (size_t)t->ne[2];
}

/* A vector of n elements: ne = {n, 1, 1, 1}. */
static inline bool cpu_is_vector(const loom_tensor *t)
{
	return t->ne[1] == 1 && t->ne[2] == 1 && t->ne[3] == 1;
}

/* A matrix: ne[2] and ne[3] are 1. */
static inline bool cpu_is_matrix(const loom_tensor *t)
{
	return t->ne[2] == 1 && t->ne[3] == 1;
}

/* An I32 index vector of n entries. */
static inline bool cpu_is_index_vector(const loom_tensor *t, int64_t n)
{
	return cpu_tensor_is(t, LOOM_DTYPE_I32) && cpu_is_vector(t) && t->ne[0] == n;
}

/* Row r of an F32 tensor. */
static inline float *cpu_row_f32(const loom_tensor *t, int64_t r)
{
	return (float *)cpu_row(t, r);
}

#endif
