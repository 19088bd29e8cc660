/* wrong_kind.c - a format plugin, for listing under backends. */
#include "loom/plugin_api.h"

static loom_model_file *open_nothing(const loom_host *host, const char *path)
{
	host->set_error("%s: the wrong-kind fake opens nothing", path);
	return NULL;
}

static void close_nothing(loom_model_file *file)
{
	(void)file;
}

static int probe(const loom_probe_args *args, char *why, size_t why_size)
{
	(void)args;
	(void)why;
	(void)why_size;
	return 1;
}

static const loom_format_vtable vtable = {
	.struct_size = sizeof(loom_format_vtable),
	.open = open_nothing,
	.close = close_nothing,
};

static const loom_plugin_desc desc = {
	.abi_version = LOOM_PLUGIN_ABI_VERSION,
	.kind = LOOM_PLUGIN_FORMAT,
	.name = "wrong-kind",
	.version = "0.0.1",
	.description = "test fake: a format plugin",
	.probe = probe,
	.vtable = &vtable,
};

LOOM_API const loom_plugin_desc *loom_plugin_entry(void);

const loom_plugin_desc *loom_plugin_entry(void)
{
	return &desc;
}
