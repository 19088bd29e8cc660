/* gguf_names.h - a set of names, to find duplicate keys and tensor names. */
#ifndef LOOM_GGUF_NAMES_H
#define LOOM_GGUF_NAMES_H

#include "loom/plugin_api.h"

/* Open addressing over pointers to names the caller keeps alive; a file with
 * many thousands of tensors is checked in linear time. */
typedef struct gguf_name_set {
	const loom_string **slots;
	uint64_t mask;
} gguf_name_set;

/* Room for up to n names; false if out of memory. */
bool gguf_name_set_init(gguf_name_set *set, uint64_t n);
void gguf_name_set_free(gguf_name_set *set);

/* Adds *name; returns false if an equal name is already there. */
bool gguf_name_set_add(gguf_name_set *set, const loom_string *name);

#endif
