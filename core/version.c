/* version.c - library version and element-type names. */
#include "plugin_api.h"

#define LOOM_STR_(x) #x
#define LOOM_STR(x) LOOM_STR_(x)

const char *loom_version(void)
{
	return LOOM_STR(LOOM_VERSION_MAJOR) "." LOOM_STR(LOOM_VERSION_MINOR) "." LOOM_STR(LOOM_VERSION_PATCH);
}

unsigned loom_version_hex(void)
{
	return LOOM_VERSION_HEX;
}

const char *loom_dtype_name(loom_dtype type)
{
	return loom_dtype_layout_of(type).name;
}

int64_t loom_dtype_block_size(loom_dtype type)
{
	return loom_dtype_layout_of(type).block;
}

size_t loom_dtype_block_bytes(loom_dtype type)
{
	return loom_dtype_layout_of(type).block_bytes;
}
