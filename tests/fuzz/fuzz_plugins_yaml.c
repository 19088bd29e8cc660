/* fuzz_plugins_yaml.c - the plugins.yaml reader on arbitrary files. Only
 * the reading: a runtime on the result would dlopen whatever the input
 * names. */
#include "fuzz_support.h"
#include "runtime/config.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	loom_config config;
	if (loom_config_load(fuzz_write_file("plugins.yaml", data, size), &config) == LOOM_OK)
		loom_config_free(&config);
	return 0;
}
