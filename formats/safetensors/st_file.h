/* st_file.h - opening a safetensors checkpoint as one loom_model_file. */
#ifndef LOOM_ST_FILE_H
#define LOOM_ST_FILE_H

#include "loom/plugin_api.h"

/* The format vtable's open and close. open takes what st_layout_find
 * accepts; every shard is mapped into one contiguous read-only region
 * (mapping/mapping_size), each at a page boundary. */
loom_model_file *st_open(const loom_host *host, const char *path);
void st_close(loom_model_file *file);
/* Drops the whole pages of [data, data + n) of the mapping from memory. */
void st_release(loom_model_file *file, const void *data, uint64_t n);

#endif
