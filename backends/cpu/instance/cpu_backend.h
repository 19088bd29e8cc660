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

/* A decode's share of a weight product's items: a decode's weights stream
 * past once, and a thread that jumps to another part of them loses the
 * memory's prefetch for a while. 3/4 of the items go out in even shares,
 * a contiguous run per thread known before the node starts (what
 * cpu_weights_first fetches while the threads wait), the rest in guided
 * takes, mostly contiguous too (small-q4_0's 768-row matrices from memory:
 * 40 -> 50 GB/s against chunks of 1/4 of a thread's share, 20 at 1/16). */
static inline int64_t cpu_decode_share(int64_t total, int nth)
{
	return total * 3 / (4 * nth);
}

/* The next of a decode's items for this thread: its share first (*first:
 * it has taken none yet), then guided takes of the rest. */
static inline bool cpu_take_decode(const cpu_task *task, int64_t total, bool *first, int64_t *lo, int64_t *hi)
{
	int64_t share = cpu_decode_share(total, task->nth);

	if (*first) {
		*first = false;
		*lo = task->ith * share;
		*hi = *lo + share;
		if (share > 0)
			return true;
	}
	return cpu_take_guided(task, share * task->nth, total, 1, lo, hi);
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

/* What a thread waiting for a decode's weight product fetches of its
 * first weights at most: the core's L2 keeps that much for it. */
#define CPU_FETCH_MAX_BYTES (128 * 1024)

/* In *f, the first weight bytes thread ith of nth reads in a decode's
 * MATMUL node (cpu_matmul.c) or MATMUL_ID node (cpu_matmul_id.c, whose
 * expert indices must be written by then); false if it reads none first
 * for sure. */
bool cpu_matmul_first_weights(const loom_node *node, int ith, int nth, cpu_fetch *f);
bool cpu_matmul_id_first_weights(const loom_node *node, int ith, int nth, cpu_fetch *f);

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
extern const cpu_op cpu_op_softcap;
extern const cpu_op cpu_op_topk;
extern const cpu_op cpu_op_moe_weights;
extern const cpu_op cpu_op_matmul_id;
extern const cpu_op cpu_op_moe_sum;
extern const cpu_op cpu_op_sigmoid;
extern const cpu_op cpu_op_swiglu_oai;


/* cpu-amx's plugins.yaml option: `amx: off` makes its probe refuse, as on a
 * CPU without AMX. The other variants take no options. */
#define CPU_AMX_OPTION "amx"
#if defined(LOOM_CPU_AMX)
#define CPU_HAS_AMX_OPTION 1
#else
#define CPU_HAS_AMX_OPTION 0
#endif

/* ---- tensors (beside the SDK's predicates in plugin_api.h) ---- */

/* A weight (a matmul's, or a table GET_ROWS reads) in the standard layout
 * or one this variant has for its type, otherwise as loom_tensor_standard
 * wants it. */
static inline bool cpu_weight_ok(const loom_tensor *w)
{
	loom_tensor standard;

	if (w == NULL || !cpu_layout_supported(w->dtype, w->layout))
		return false;
	standard = *w;
	standard.layout = 0;
	return loom_tensor_standard(&standard);
}

/* Rows equally spaced nb[1] apart over all of dimensions 1..3, so that row r
 * is at data + r * nb[1]. */
static inline bool cpu_rows_uniform(const loom_tensor *t)
{
	return t->nb[2] == t->nb[1] * (size_t)t->ne[1] &&
	       t->nb[3] == t->nb[2] * (size_t)t->ne[2];
}

/* An I32 index vector of n entries. */
static inline bool cpu_is_index_vector(const loom_tensor *t, int64_t n)
{
	return loom_tensor_is(t, LOOM_DTYPE_I32) && loom_tensor_is_vector(t) && t->ne[0] == n;
}

/* Row r of an F32 tensor. */
static inline float *cpu_row_f32(const loom_tensor *t, int64_t r)
{
	return (float *)loom_tensor_row(t, r);
}

#endif
