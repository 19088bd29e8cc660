/* fake_backend.h - stub slots shared by the fake backend plugins the registry
 * tests load. None of them is meant to compute: the registry must reject or
 * pass over every fake before a graph could reach it. */
#ifndef LOOM_TEST_FAKE_BACKEND_H
#define LOOM_TEST_FAKE_BACKEND_H

#include "loom/plugin_api.h"

/* Fails with "fake backend cannot start": no fake is meant to run. */
void *fake_init(const loom_host *host, const loom_backend_options *opts);
void fake_free(void *backend);
loom_status fake_buffer_alloc(void *backend, size_t size, loom_buffer *out);
void fake_buffer_free(void *backend, loom_buffer *buf);
loom_status fake_buffer_upload(void *backend, loom_buffer *buf, size_t offset, const void *src,
			       size_t size);
loom_status fake_buffer_download(void *backend, const loom_buffer *buf, size_t offset, void *dst,
				 size_t size);
bool fake_supports(void *backend, const loom_node *node);
loom_status fake_compute(void *backend, const loom_graph *graph);

/* A probe that accepts any machine with a modest score. */
int fake_probe_ok(const loom_probe_args *args, char *why, size_t why_size);

/* The slots no fake varies: every fake sets init and compute itself. */
#define FAKE_STUB_SLOTS                                                      \
	.free = fake_free, .buffer_alloc = fake_buffer_alloc,                \
	.buffer_free = fake_buffer_free, .buffer_upload = fake_buffer_upload, \
	.buffer_download = fake_buffer_download, .supports = fake_supports

/* The one exported symbol of every fake, returning its descriptor. */
#define FAKE_PLUGIN_ENTRY(descriptor) LOOM_PLUGIN_DEFINE(descriptor)

#endif
