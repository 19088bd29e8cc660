/* bad_abi.c - a backend built against a newer plugin ABI than the core's. */
#include "fake_backend.h"

static const loom_backend_vtable vtable = {
	.struct_size = sizeof(loom_backend_vtable),
	.init = fake_init,
	.free = fake_free,
	.buffer_alloc = fake_buffer_alloc,
	.buffer_free = fake_buffer_free,
	.buffer_upload = fake_buffer_upload,
	.buffer_download = fake_buffer_download,
	.supports = fake_supports,
	.compute = fake_compute,
};

static const loom_plugin_desc desc = {
	.abi_version = LOOM_PLUGIN_ABI_VERSION + 1,
	.kind = LOOM_PLUGIN_BACKEND,
	.name = "bad-abi",
	.version = "0.0.1",
	.description = "test fake: wrong ABI version",
	.probe = fake_probe_ok,
	.vtable = &vtable,
};

const loom_plugin_desc *loom_plugin_entry(void)
{
	return &desc;
}
