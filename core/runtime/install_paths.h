/* install_paths.h - where an installed loom keeps its plugins.yaml, plugins
 * and contracts, found relative to libloom.so so an install can move. */
#ifndef LOOM_INSTALL_PATHS_H
#define LOOM_INSTALL_PATHS_H

typedef enum loom_install_item {
	LOOM_INSTALLED_PLUGINS_FILE,
	LOOM_INSTALLED_PLUGIN_DIR,
	LOOM_INSTALLED_ARCH_DIR
} loom_install_item;

/* Absolute path (malloc'd), or NULL if out of memory. */
char *loom_installed_path(loom_install_item item);

/* The directory libloom's code was loaded from (malloc'd), or NULL. */
char *loom_library_dir(void);

#endif
