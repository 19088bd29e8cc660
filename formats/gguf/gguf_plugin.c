/* gguf_plugin.c - the descriptor loom-gguf.so exports. */
#include "gguf_reader.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#define GGUF_PLUGIN_VERSION "0.1.0"

static int fail_probe(char *why, size_t why_size, const char *reason)
{
	if (why != NULL && why_size > 0)
		snprintf(why, why_size, "%s", reason);
	return 0;
}

/* Magic and version are enough: open() checks the rest. */
static int gguf_probe(const loom_probe_args *args, char *why, size_t why_size)
{
	uint32_t version;
	char reason[96];

	if (args == NULL || args->head == NULL || args->head_len < 8 ||
	    memcmp(args->head, GGUF_MAGIC, 4) != 0)
		return fail_probe(why, why_size, "not a GGUF file (no \"" GGUF_MAGIC "\" magic)");
	memcpy(&version, args->head + 4, sizeof(version));
	if (!gguf_version_supported(version)) {
		snprintf(reason, sizeof(reason),
			 "GGUF version %" PRIu32 " is not supported (2 and 3 are)", version);
		return fail_probe(why, why_size, reason);
	}
	return 100;
}

static const loom_format_vtable gguf_vtable = {
	.struct_size = sizeof(loom_format_vtable),
	.open = gguf_open,
	.close = gguf_close,
	.write = gguf_write,
	.contract_section = "gguf",
	.release = gguf_release,
};

static const loom_plugin_desc gguf_desc = {
	.abi_version = LOOM_PLUGIN_ABI_VERSION,
	.kind = LOOM_PLUGIN_FORMAT,
	.name = "gguf",
	.version = GGUF_PLUGIN_VERSION,
	.description = "GGUF v2 and v3 model files, memory-mapped; writes v3",
	.probe = gguf_probe,
	.vtable = &gguf_vtable,
};

LOOM_PLUGIN_DEFINE(gguf_desc)
