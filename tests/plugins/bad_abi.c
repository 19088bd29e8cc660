/* bad_abi.c - a backend built against a newer plugin ABI than the core's. */
#include "fake_backend.h"

static const loom_backend_vtable vtable = {
	.struct_size = sizeof(loom_backend_vtable),
	.init = fake_init,
	FAKE_STUB_SLOTS,
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

FAKE_PLUGIN_ENTRY(desc)
