/* fake_backend.c - stub slots shared by the fake backend plugins. */
#include "fake_backend.h"

void *fake_init(const loom_host *host, const loom_backend_options *opts)
{
	(void)opts;
	host->set_error("fake backend cannot start");
	return NULL;
}

void fake_free(void *backend)
{
	(void)backend;
}

loom_status fake_buffer_alloc(void *backend, size_t size, loom_buffer *out)
{
	(void)backend;
	(void)size;
	(void)out;
	return LOOM_ERR_UNSUPPORTED;
}

void fake_buffer_free(void *backend, loom_buffer *buf)
{
	(void)backend;
	(void)buf;
}

loom_status fake_buffer_upload(void *backend, loom_buffer *buf, size_t offset, const void *src,
			       size_t size)
{
	(void)backend;
	(void)buf;
	(void)offset;
	(void)src;
	(void)size;
	return LOOM_ERR_UNSUPPORTED;
}

loom_status fake_buffer_download(void *backend, const loom_buffer *buf, size_t offset, void *dst,
				 size_t size)
{
	(void)backend;
	(void)buf;
	(void)offset;
	(void)dst;
	(void)size;
	return LOOM_ERR_UNSUPPORTED;
}

bool fake_supports(void *backend, const loom_node *node)
{
	(void)backend;
	(void)node;
	return false;
}

loom_status fake_compute(void *backend, const loom_graph *graph)
{
	(void)backend;
	(void)graph;
	return LOOM_ERR_UNSUPPORTED;
}

int fake_probe_ok(const loom_probe_args *args, char *why, size_t why_size)
{
	(void)args;
	(void)why;
	(void)why_size;
	return 5;
}
