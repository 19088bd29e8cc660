/* no_entry.c - a library that exports a symbol, but not loom_plugin_entry. */
#include "loom/plugin_api.h"

LOOM_API int loom_plugin_init(void);

int loom_plugin_init(void)
{
	return LOOM_PLUGIN_ABI_VERSION;
}
