/* unmet_cpu.c - a backend whose probe finds a CPU feature missing. */
#include "fake_backend.h"

#include <stdio.h>

static int probe(const loom_probe_args *args, char *why, size_t why_size)
{
	(void)args;
	snprintf(why, why_size, "CPU lacks AVX9000");
	return 0;
}

static const loom_backend_vtable vtable = {
	.struct_size = sizeof(loom_backend_vtable),
	.init = fake_init,
	FAKE_STUB_SLOTS,
	.compute = fake_compute,
};

static const loom_plugin_desc desc = {
	.abi_version = LOOM_PLUGIN_ABI_VERSION,
	.kind = LOOM_PLUGIN_BACKEND,
	.name = "unmet-cpu",
	.version = "0.0.1",
	.description = "test fake: needs a CPU feature no CPU has",
	.probe = probe,
	.vtable = &vtable,
};

FAKE_PLUGIN_ENTRY(desc)
