/* high_score.c - a backend that outscores every real one but whose init
 * fails, so the registry must start the next candidate instead. */
#include "fake_backend.h"

static void *init_no_device(const loom_host *host, const loom_backend_options *opts)
{
	(void)opts;
	host->set_error("no device");
	return NULL;
}

static int probe(const loom_probe_args *args, char *why, size_t why_size)
{
	(void)args;
	(void)why;
	(void)why_size;
	return 1000;
}

static const loom_backend_vtable vtable = {
	.struct_size = sizeof(loom_backend_vtable),
	.init = init_no_device,
	FAKE_STUB_SLOTS,
	.compute = fake_compute,
};

static const loom_plugin_desc desc = {
	.abi_version = LOOM_PLUGIN_ABI_VERSION,
	.kind = LOOM_PLUGIN_BACKEND,
	.name = "high-score",
	.version = "0.0.1",
	.description = "test fake: best score, no device",
	.probe = probe,
	.vtable = &vtable,
};

FAKE_PLUGIN_ENTRY(desc)
