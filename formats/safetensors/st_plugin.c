/* st_plugin.c - the descriptor loom-safetensors.so exports. */
#include "st_file.h"
#include "st_header.h"
#include "st_layout.h"
#include "st_plugin.h"

#include <stdio.h>
#include <sys/stat.h>

#define ST_PLUGIN_VERSION "0.1.0"

static int fail_probe(char *why, size_t why_size, const char *reason)
{
	if (why != NULL && why_size > 0)
		snprintf(why, why_size, "%s", reason);
	return 0;
}

/* A directory is ours if it holds the weights (open then asks for
 * config.json, by name); a file, if its first bytes are a safetensors
 * header length and '{', or if it is named as a shard index. open()
 * checks the rest. */
static int st_probe(const loom_probe_args *args, char *why, size_t why_size)
{
	struct stat st;
	st_layout layout;
	char reason[256];

	if (args == NULL || args->path == NULL)
		return fail_probe(why, why_size, "no path to look at");
	if (stat(args->path, &st) == 0 && S_ISDIR(st.st_mode)) {
		if (!st_layout_find(args->path, &layout, reason, sizeof(reason)))
			return fail_probe(why, why_size, reason);
		return 100;
	}
	if (st_header_plausible(args->head, args->head_len) ||
	    st_layout_is_index(args->path))
		return 100;
	return fail_probe(why, why_size, "not a safetensors file or Hugging Face directory");
}

static const loom_format_vtable st_vtable = {
	.struct_size = sizeof(loom_format_vtable),
	.open = st_open,
	.close = st_close,
	.contract_section = "safetensors",
	.release = st_release,
};

static const loom_plugin_desc st_desc = {
	.abi_version = LOOM_PLUGIN_ABI_VERSION,
	.kind = LOOM_PLUGIN_FORMAT,
	.name = PLUGIN,
	.version = ST_PLUGIN_VERSION,
	.description = "Hugging Face checkpoints: model.safetensors or a sharded index, "
		       "config.json and the tokenizer files, memory-mapped",
	.probe = st_probe,
	.vtable = &st_vtable,
};

LOOM_PLUGIN_DEFINE(st_desc)
