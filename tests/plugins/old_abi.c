/* old_abi.c - a backend built against an older plugin ABI than the core's: its
 * vtable may be laid out as this header says, but its ops may mean what they
 * meant then. */
#include "fake_backend.h"

static const loom_backend_vtable vtable = {
	.struct_size = sizeof(loom_backend_vtable),
	.init = fake_init,
	FAKE_STUB_SLOTS,
	.compute = fake_compute,
};

static const loom_plugin_desc desc = {
	.abi_version = LOOM_PLUGIN_ABI_VERSION - 1,
	.kind = LOOM_PLUGIN_BACKEND,
	.name = "old-abi",
	.version = "0.0.1",
	.description = "test fake: an older ABI version",
	.probe = fake_probe_ok,
	.vtable = &vtable,
};

FAKE_PLUGIN_ENTRY(desc)
