/* install_paths.c - where an installed loom keeps its plugins.yaml, plugins
 * and contracts, found relative to libloom.so so an install can move. */
#define _GNU_SOURCE /* dladdr */
#include "runtime/install_paths.h"

#include "runtime/config.h"

#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>

char *loom_library_dir(void)
{
	Dl_info info;
	if (dladdr((void *)loom_library_dir, &info) == 0 || info.dli_fname == NULL)
		return NULL;
	char *dir = realpath(info.dli_fname, NULL);
	char *slash = dir != NULL ? strrchr(dir, '/') : NULL;
	if (slash == NULL) {
		free(dir);
		return NULL;
	}
	*slash = '\0';
	return dir;
}

char *loom_installed_path(loom_install_item item)
{
	/* Relative to the library directory, as CMake laid the install out. */
	static const char *const rel[] = {
		[LOOM_INSTALLED_PLUGINS_FILE] = LOOM_REL_PLUGINS_FILE,
		[LOOM_INSTALLED_PLUGIN_DIR] = LOOM_REL_PLUGIN_DIR,
		[LOOM_INSTALLED_ARCH_DIR] = LOOM_REL_ARCH_DIR,
	};
	char *lib = loom_library_dir();
	char *path = loom_path_join(lib != NULL ? lib : ".", rel[item]);
	free(lib);
	return path;
}
