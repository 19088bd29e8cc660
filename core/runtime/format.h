/* format.h - the one door to the format plugins: choosing one for a file,
 * opening, closing and writing files through it, and what it declares. */
#ifndef LOOM_FORMAT_H
#define LOOM_FORMAT_H

#include "loom/plugin_api.h"
#include "runtime/registry.h"

/* The vtable size the core needs, so a too-old plugin is refused. */
#define LOOM_FORMAT_VTABLE_MIN_SIZE (offsetof(loom_format_vtable, close) + sizeof(void *))

/* The first slot the core calls unconditionally that vt leaves NULL, or
 * NULL when it has them all (vt holds at least the minimum size). */
const char *loom_format_missing_slot(const loom_format_vtable *vt);

/* The loaded format plugin whose probe scores path highest; NULL (with a
 * message) when none recognises it. */
const loom_plugin *loom_format_choose(const loom_registry *reg, const char *path);

/* Opens path with format plugin p; the plugin's message says why not. */
loom_status loom_format_open(const loom_plugin *p, const char *path, loom_model_file **out);
void loom_format_close(const loom_plugin *p, loom_model_file *file);

/* Whether p can write files, and writing one. */
bool loom_format_writes(const loom_plugin *p);
loom_status loom_format_write(const loom_plugin *p, const char *path, const loom_model_file *content);

/* Tells p that the core holds its own copy of [data, data + n_bytes) of
 * file, which p may drop from memory; nothing when p cannot. */
void loom_format_release(const loom_plugin *p, loom_model_file *file, const void *data, uint64_t n_bytes);

/* The contract section that names p's keys and tensors, or NULL. */
const char *loom_format_contract_section(const loom_plugin *p);

/* A loaded format plugin that writes files named by contract section
 * `section`, or NULL. */
const loom_plugin *loom_format_writer(const loom_registry *reg, const char *section);

#endif
