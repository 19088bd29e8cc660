/* backend.h - the one door to the chosen backend plugin.
 *
 * Every call of a backend's vtable goes through these wrappers: they call
 * a slot only where the plugin's table has it (LOOM_VT_HAS), supply the
 * documented default of an optional slot, and turn a failure into a
 * loom_last_error() message that names the backend and what it was asked
 * to do (with the plugin's own reason, if it gave one). */
#ifndef LOOM_BACKEND_H
#define LOOM_BACKEND_H

#include "loom/plugin_api.h"
#include "runtime/registry.h"

#include <pthread.h>

typedef struct loom_backend {
	const loom_plugin *plugin;
	const loom_backend_vtable *vt;
	void *ctx;
	/* One compute at a time: contexts of different threads share it. */
	pthread_mutex_t lock;
} loom_backend;

/* The vtable size the core needs, so a too-old plugin is refused. */
#define LOOM_BACKEND_VTABLE_MIN_SIZE (offsetof(loom_backend_vtable, compute) + sizeof(void *))

/* The first slot the core calls unconditionally that vt leaves NULL, or
 * NULL when it has them all (vt holds at least the minimum size). */
const char *loom_backend_missing_slot(const loom_backend_vtable *vt);

/* How well loaded backend plugin p fits this machine (0: not at all, with
 * why saying why). */
int loom_backend_probe(const loom_plugin *p, char *why, size_t why_size);

/* Creates an instance of plugin p, which must be a loaded backend. */
loom_status loom_backend_start(loom_backend *be, const loom_plugin *p, const loom_backend_options *opts);
/* Frees the instance, if any; be may then be started again. */
void loom_backend_stop(loom_backend *be);
const char *loom_backend_name(const loom_backend *be);

/* Memory: zeroed on allocation. loom_backend_release frees a buffer that
 * holds memory, ignores a zeroed one, and zeroes it. */
loom_status loom_backend_alloc(const loom_backend *be, size_t size, loom_buffer *out);
void loom_backend_release(const loom_backend *be, loom_buffer *buf);
loom_status loom_backend_upload(const loom_backend *be, loom_buffer *buf, size_t offset, const void *src,
				size_t size);
loom_status loom_backend_download(const loom_backend *be, const loom_buffer *buf, size_t offset, void *dst,
				  size_t size);
/* Host memory used in place as a buffer (buffer_from_host); UNSUPPORTED,
 * without a message, when the backend cannot: the caller then allocates
 * and uploads. */
loom_status loom_backend_wrap_host(const loom_backend *be, void *host, size_t size, loom_buffer *out);

bool loom_backend_supports(const loom_backend *be, const loom_node *node);
/* Runs a whole graph, serialised with every other compute on be. */
loom_status loom_backend_compute(loom_backend *be, const loom_graph *graph);
/* Whether a backend computes on a device of its own (it describes one:
 * device_info); else in host memory, where the core may read its buffers
 * at their base. Of a plugin's table, and of a started backend. */
bool loom_vtable_on_device(const loom_backend_vtable *vt);
bool loom_backend_on_device(const loom_backend *be);
/* Whether the backend times each node (the compute_timed slot). */
bool loom_backend_times_nodes(const loom_backend *be);
/* loom_backend_compute with each node's nanoseconds in node_ns (a backend
 * that does not time nodes: compute, with node_ns left alone). */
loom_status loom_backend_compute_timed(loom_backend *be, const loom_graph *graph, uint64_t *node_ns);
/* Has the backend allocate what compute will need for graphs like this
 * one (its reserve slot); LOOM_OK for a backend without the slot. */
loom_status loom_backend_reserve(loom_backend *be, const loom_graph *graph);

/* Whether the backend has weight_repack at all. */
bool loom_backend_repacks(const loom_backend *be);
/* Offers weight w to weight_repack: *layout stays 0 (and out unset) when
 * the backend keeps the standard layout. */
loom_status loom_backend_repack(const loom_backend *be, const loom_tensor *w, loom_buffer *out, uint32_t *layout);

/* The backend's device (device_info): UNSUPPORTED, without a message, for
 * a backend that runs in host memory. */
loom_status loom_backend_device(const loom_backend *be, loom_device_info *out);
/* LOOM_ERR_NO_MEMORY, naming `what` ("the weights") and the device, when
 * the backend's device has less than `bytes` free; LOOM_OK on a backend in
 * host memory. Asked before allocating, so a model that does not fit is
 * refused with a reason rather than by a failed allocation. */
loom_status loom_backend_fits(const loom_backend *be, size_t bytes, const char *what);

#endif
