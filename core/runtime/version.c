/* version.c - the library version loaded at run time. */
#include "loom.h"

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
