/* missing_slot.c - a backend whose vtable leaves a required slot empty. */
#include "fake_backend.h"

static const loom_backend_vtable vtable = {
	.struct_size = sizeof(loom_backend_vtable),
	.init = fake_init,
	FAKE_STUB_SLOTS,
	.compute = NULL,
};

static const loom_plugin_desc desc = {
	.abi_version = LOOM_PLUGIN_ABI_VERSION,
	.kind = LOOM_PLUGIN_BACKEND,
	.name = "missing-slot",
	.version = "0.0.1",
	.description = "test fake: no compute slot",
	.probe = fake_probe_ok,
	.vtable = &vtable,
};

FAKE_PLUGIN_ENTRY(desc)
