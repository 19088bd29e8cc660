/* backend.c - the one door to the chosen backend plugin: slot checks,
 * defaults and messages in one place. */
#include "runtime/backend.h"

#include "runtime/error.h"
#include "runtime/host.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

const char *loom_backend_missing_slot(const loom_backend_vtable *vt)
{
#define REQUIRE_SLOT(slot)        \
	if (vt->slot == NULL)     \
		return #slot
	REQUIRE_SLOT(init);
	REQUIRE_SLOT(free);
	REQUIRE_SLOT(buffer_alloc);
	REQUIRE_SLOT(buffer_free);
	REQUIRE_SLOT(buffer_upload);
	REQUIRE_SLOT(buffer_download);
	REQUIRE_SLOT(supports);
	REQUIRE_SLOT(compute);
#undef REQUIRE_SLOT
	return NULL;
}

int loom_backend_probe(const loom_plugin *p, char *why, size_t why_size)
{
	loom_probe_args args = {
		.struct_size = sizeof(args),
		.host = loom_host_table(),
		.n_options = p->config->n_options,
		.option_keys = (const char *const *)p->config->option_keys,
		.option_values = (const char *const *)p->config->option_values,
	};
	return p->desc->probe(&args, why, why_size);
}

const char *loom_backend_name(const loom_backend *be)
{
	return be->plugin != NULL ? be->plugin->name : "(none)";
}

/* "backend NAME: <what>: <the plugin's reason, else the status's text>";
 * the plugin gave a reason if a message was recorded since `serial`. */
static loom_status fail(const loom_backend *be, loom_status st, unsigned long serial, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

static loom_status fail(const loom_backend *be, loom_status st, unsigned long serial, const char *fmt, ...)
{
	char what[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(what, sizeof(what), fmt, ap);
	va_end(ap);
	if (loom_error_serial() == serial)
		loom_error_clear();
	return loom_error_wrap(st, "backend %s: %s", loom_backend_name(be), what);
}

loom_status loom_backend_start(loom_backend *be, const loom_plugin *p, const loom_backend_options *opts)
{
	const loom_backend_vtable *vt = p->desc->vtable;
	loom_error_clear();
	/* The caller reports the plugin's reason, if any, as the plugin's. */
	void *ctx = vt->init(loom_host_table(), opts);
	if (ctx == NULL)
		return LOOM_ERR_BACKEND;
	be->plugin = p;
	be->vt = vt;
	be->ctx = ctx;
	return LOOM_OK;
}

void loom_backend_stop(loom_backend *be)
{
	if (be->ctx != NULL)
		be->vt->free(be->ctx);
	be->plugin = NULL;
	be->vt = NULL;
	be->ctx = NULL;
}

loom_status loom_backend_alloc(const loom_backend *be, size_t size, loom_buffer *out)
{
	const unsigned long serial = loom_error_serial();
	memset(out, 0, sizeof(*out));
	loom_status st = be->vt->buffer_alloc(be->ctx, size, out);
	if (st != LOOM_OK) {
		memset(out, 0, sizeof(*out));
		return fail(be, st, serial, "cannot allocate %zu bytes", size);
	}
	return LOOM_OK;
}

void loom_backend_release(const loom_backend *be, loom_buffer *buf)
{
	if (buf->base != NULL || buf->handle != NULL)
		be->vt->buffer_free(be->ctx, buf);
	memset(buf, 0, sizeof(*buf));
}

loom_status loom_backend_upload(const loom_backend *be, loom_buffer *buf, size_t offset, const void *src,
				size_t size)
{
	const unsigned long serial = loom_error_serial();
	loom_status st = be->vt->buffer_upload(be->ctx, buf, offset, src, size);
	return st == LOOM_OK ? LOOM_OK : fail(be, st, serial, "uploading %zu bytes failed", size);
}

loom_status loom_backend_download(const loom_backend *be, const loom_buffer *buf, size_t offset, void *dst,
				  size_t size)
{
	const unsigned long serial = loom_error_serial();
	loom_status st = be->vt->buffer_download(be->ctx, buf, offset, dst, size);
	return st == LOOM_OK ? LOOM_OK : fail(be, st, serial, "downloading %zu bytes failed", size);
}

loom_status loom_backend_wrap_host(const loom_backend *be, void *host, size_t size, loom_buffer *out)
{
	memset(out, 0, sizeof(*out));
	if (!LOOM_VT_HAS(be->vt, buffer_from_host))
		return LOOM_ERR_UNSUPPORTED;
	loom_status st = be->vt->buffer_from_host(be->ctx, host, size, out);
	if (st != LOOM_OK)
		memset(out, 0, sizeof(*out));
	return st == LOOM_OK ? LOOM_OK : LOOM_ERR_UNSUPPORTED;
}

bool loom_backend_supports(const loom_backend *be, const loom_node *node)
{
	return be->vt->supports(be->ctx, node);
}

loom_status loom_backend_compute(loom_backend *be, const loom_graph *graph)
{
	const unsigned long serial = loom_error_serial();
	pthread_mutex_lock(&be->lock);
	loom_status st = be->vt->compute(be->ctx, graph);
	pthread_mutex_unlock(&be->lock);
	return st == LOOM_OK ? LOOM_OK : fail(be, st, serial, "computing a step");
}

loom_status loom_backend_reserve(loom_backend *be, const loom_graph *graph)
{
	if (!LOOM_VT_HAS(be->vt, reserve))
		return LOOM_OK;
	const unsigned long serial = loom_error_serial();
	pthread_mutex_lock(&be->lock);
	loom_status st = be->vt->reserve(be->ctx, graph);
	pthread_mutex_unlock(&be->lock);
	return st == LOOM_OK ? LOOM_OK : fail(be, st, serial, "reserving memory for a step");
}

bool loom_vtable_on_device(const loom_backend_vtable *vt)
{
	return LOOM_VT_HAS(vt, device_info);
}

bool loom_backend_on_device(const loom_backend *be)
{
	return loom_vtable_on_device(be->vt);
}

bool loom_backend_times_nodes(const loom_backend *be)
{
	return LOOM_VT_HAS(be->vt, compute_timed);
}

loom_status loom_backend_compute_timed(loom_backend *be, const loom_graph *graph, uint64_t *node_ns)
{
	if (!loom_backend_times_nodes(be))
		return loom_backend_compute(be, graph);
	const unsigned long serial = loom_error_serial();
	pthread_mutex_lock(&be->lock);
	loom_status st = be->vt->compute_timed(be->ctx, graph, node_ns);
	pthread_mutex_unlock(&be->lock);
	return st == LOOM_OK ? LOOM_OK : fail(be, st, serial, "computing a step");
}

bool loom_backend_repacks(const loom_backend *be)
{
	return LOOM_VT_HAS(be->vt, weight_repack);
}

loom_status loom_backend_repack(const loom_backend *be, const loom_tensor *w, loom_buffer *out, uint32_t *layout)
{
	memset(out, 0, sizeof(*out));
	*layout = 0;
	if (!loom_backend_repacks(be))
		return LOOM_OK;
	const unsigned long serial = loom_error_serial();
	loom_status st = be->vt->weight_repack(be->ctx, w, out, layout);
	if (st == LOOM_ERR_UNSUPPORTED) {
		*layout = 0;
		return LOOM_OK;
	}
	if (st != LOOM_OK) {
		*layout = 0;
		return fail(be, st, serial, "cannot repack %s", w->name != NULL ? w->name : "a weight");
	}
	if (*layout == 0)
		loom_backend_release(be, out);
	return LOOM_OK;
}

loom_status loom_backend_device(const loom_backend *be, loom_device_info *out)
{
	memset(out, 0, sizeof(*out));
	if (!LOOM_VT_HAS(be->vt, device_info))
		return LOOM_ERR_UNSUPPORTED;
	const unsigned long serial = loom_error_serial();
	loom_status st = be->vt->device_info(be->ctx, out);
	if (st != LOOM_OK) {
		memset(out, 0, sizeof(*out));
		return fail(be, st, serial, "cannot describe its device");
	}
	out->name[sizeof(out->name) - 1] = '\0';
	return LOOM_OK;
}

loom_status loom_backend_fits(const loom_backend *be, size_t bytes, const char *what)
{
	loom_device_info dev;
	loom_status st = loom_backend_device(be, &dev);
	if (st == LOOM_ERR_UNSUPPORTED)
		return LOOM_OK;
	if (st != LOOM_OK)
		return st;
	if (bytes > dev.memory_free)
		return loom_error(LOOM_ERR_NO_MEMORY,
				  "%s need %.1f MiB of device memory; %s has %.1f MiB free of %.1f MiB", what,
				  (double)bytes / (1 << 20), dev.name, (double)dev.memory_free / (1 << 20),
				  (double)dev.memory_total / (1 << 20));
	return LOOM_OK;
}
