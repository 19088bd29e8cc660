/*
 * cuda_replay.cu - a step run as one CUDA graph: captured the second time
 * its key (cuda_replay_key.h) is seen, replayed every time after.
 *
 * A decode step is hundreds of small kernels; launched one at a time, the
 * host's cost per launch and the gaps between kernels set the pace, not
 * the GPU's memory. Replayed from one graph, the GPU runs them back to
 * back. A step seen once (a prompt's pieces, a batch of a new size) is
 * launched node by node: capturing it would cost more than one replay
 * saves. A decode's key stays the same while its cache grows within a
 * window step (256 cells), and CUDA_REPLAY_SLOTS shapes are kept at once.
 *
 * Should the runtime refuse a capture, the instance says so once and runs
 * every later step node by node.
 */
#include "cuda_backend.cuh"

static void forget_exec(cuda_replay_slot *slot)
{
	if (slot->exec != NULL)
		cudaGraphExecDestroy((cudaGraphExec_t)slot->exec);
	slot->exec = NULL;
}

/* Stops replaying on this instance, with the reason, and clears the
 * runtime's last error (a refused capture leaves the device usable). */
static void replay_refused(cuda_backend *be, cudaError_t err, const char *what)
{
	be->replay_off = true;
	(void)cudaGetLastError();
	be->host->log(LOOM_LOG_WARN, "cuda", "%s: %s; steps are launched node by node from now on", what,
		      cudaGetErrorString(err));
}

/* The graph's launches captured and instantiated: the graph, or NULL.
 * Nothing has run either way. A runtime that refuses the capture turns
 * replay off; a node that refuses to enqueue (a step that cannot run)
 * only leaves this step without a graph: launched directly after, it
 * fails again with its own error, and other steps still replay. */
static cudaGraphExec_t capture(cuda_backend *be, const loom_graph *graph)
{
	cudaError_t err = cudaStreamBeginCapture(be->stream, cudaStreamCaptureModeThreadLocal);
	if (err != cudaSuccess) {
		replay_refused(be, err, "capturing a step");
		return NULL;
	}
	loom_status st = cuda_enqueue_nodes(be, graph);
	cudaGraph_t captured = NULL;
	err = cudaStreamEndCapture(be->stream, &captured);
	if (err == cudaSuccess && st != LOOM_OK) {
		if (captured != NULL)
			cudaGraphDestroy(captured);
		(void)cudaGetLastError();
		return NULL;
	}
	const char *what = "capturing a step";
	cudaGraphExec_t exec = NULL;
	if (err == cudaSuccess) {
		what = "instantiating a step's graph";
		err = cudaGraphInstantiate(&exec, captured, 0);
	}
	if (captured != NULL)
		cudaGraphDestroy(captured);
	if (err != cudaSuccess) {
		if (exec != NULL)
			cudaGraphExecDestroy(exec);
		replay_refused(be, err, what);
		return NULL;
	}
	return exec;
}

loom_status cuda_run_step(cuda_backend *be, const loom_graph *graph)
{
	if (be->replay_off)
		return cuda_enqueue_nodes(be, graph);
	/* A key that cannot be built or stored only means no replay for it. */
	if (!cuda_replay_key_build(graph, be->work, &be->replay_key))
		return cuda_enqueue_nodes(be, graph);
	cuda_replay_slot *slot = cuda_replay_find(&be->replay, &be->replay_key);
	if (slot == NULL) {
		/* First sight: launched directly, and remembered. */
		slot = cuda_replay_victim(&be->replay);
		forget_exec(slot);
		(void)cuda_replay_store(&be->replay, slot, &be->replay_key);
		return cuda_enqueue_nodes(be, graph);
	}
	if (slot->exec == NULL && (slot->exec = capture(be, graph)) == NULL)
		return cuda_enqueue_nodes(be, graph);
	return cuda_status(be, cudaGraphLaunch((cudaGraphExec_t)slot->exec, be->stream), "launching a step's graph");
}

void cuda_replay_free(cuda_backend *be)
{
	for (int i = 0; i < CUDA_REPLAY_SLOTS; i++) {
		forget_exec(&be->replay.slots[i]);
		cuda_replay_key_free(&be->replay.slots[i].key);
	}
	cuda_replay_key_free(&be->replay_key);
}
