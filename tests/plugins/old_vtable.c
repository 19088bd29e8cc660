/* old_vtable.c - a backend whose vtable predates the slots the core needs:
 * struct_size stops before compute, so the core must not read it. */
#include "fake_backend.h"

#include <stddef.h>

static const loom_backend_vtable vtable = {
	.struct_size = offsetof(loom_backend_vtable, compute),
	.init = fake_init,
	FAKE_STUB_SLOTS,
	.compute = fake_compute,
};

static const loom_plugin_desc desc = {
	.abi_version = LOOM_PLUGIN_ABI_VERSION,
	.kind = LOOM_PLUGIN_BACKEND,
	.name = "old-vtable",
	.version = "0.0.1",
	.description = "test fake: vtable too old",
	.probe = fake_probe_ok,
	.vtable = &vtable,
};

FAKE_PLUGIN_ENTRY(desc)
