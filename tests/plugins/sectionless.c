/* sectionless.c - a format plugin that declares no contract section, as
 * one built against an older plugin header would: it opens any file whose
 * name ends in ".sectionless" as a llama model of no tensors. Its files can
 * be inspected, not run. */
#include "loom/plugin_api.h"

#include <string.h>

static const char arch_key[] = "general.architecture", arch[] = "llama";

static const loom_meta_kv meta[] = {
	{{sizeof(arch_key) - 1, arch_key}, {.type = LOOM_META_STRING, .v.s = {sizeof(arch) - 1, arch}}},
};

static loom_model_file file = {
	.struct_size = sizeof(loom_model_file),
	.format = "sectionless",
	.n_meta = 1,
	.meta = meta,
};

static loom_model_file *open_file(const loom_host *host, const char *path)
{
	(void)host;
	(void)path;
	return &file;
}

static void close_file(loom_model_file *f)
{
	(void)f;
}

static int probe(const loom_probe_args *args, char *why, size_t why_size)
{
	(void)why;
	(void)why_size;
	size_t n = args->path != NULL ? strlen(args->path) : 0;
	return n > 12 && strcmp(args->path + n - 12, ".sectionless") == 0 ? 50 : 0;
}

static const loom_format_vtable vtable = {
	.struct_size = sizeof(loom_format_vtable),
	.open = open_file,
	.close = close_file,
};

static const loom_plugin_desc desc = {
	.abi_version = LOOM_PLUGIN_ABI_VERSION,
	.kind = LOOM_PLUGIN_FORMAT,
	.name = "sectionless",
	.version = "0.0.1",
	.description = "test fake: a format without a contract section",
	.probe = probe,
	.vtable = &vtable,
};

LOOM_API const loom_plugin_desc *loom_plugin_entry(void);
const loom_plugin_desc *loom_plugin_entry(void)
{
	return &desc;
}
