/* struct_size.h - public structs as large as the host's loom.h says.
 *
 * A struct crosses the API with its size: a params struct in its first
 * member (set by its *_params_init), any other as the argument the
 * header's inline wrapper passes (sizeof in the host's loom.h). A host
 * built against an older loom.h has a shorter struct: the library reads
 * the fields it has over the defaults and writes back no more than it
 * has. A struct longer than the library's (a newer loom.h than the
 * library) or shorter than its first version is refused, naming both
 * sizes, since reading it would misread it. */
#ifndef LOOM_STRUCT_SIZE_H
#define LOOM_STRUCT_SIZE_H

#include "loom.h"

#include <stddef.h>

typedef struct loom_struct_desc {
	const char *name;  /* "loom_runtime_params" */
	size_t size;       /* this library's sizeof */
	size_t first_size; /* where its first version's last field ends */
} loom_struct_desc;

/* The description of type, whose first version ended with the field
 * first_last. */
#define LOOM_STRUCT_DESC(type, first_last) \
	{#type, sizeof(type), offsetof(type, first_last) + sizeof(((type *)0)->first_last)}

/* loom.h's structs (api_structs.c). */
extern const loom_struct_desc loom_runtime_params_desc, loom_model_params_desc, loom_quantize_params_desc,
	loom_convert_params_desc, loom_context_params_desc, loom_sampler_params_desc, loom_generate_params_desc,
	loom_generator_params_desc, loom_plugin_info_desc, loom_device_info_desc, loom_tensor_info_desc,
	loom_batch_desc, loom_profile_desc, loom_generate_stats_desc, loom_generated_desc, loom_reply_parts_desc,
	loom_chat_message_desc, loom_tool_call_desc;

/* LOOM_OK when a host's struct of size bytes is one the library can read
 * and write; else LOOM_ERR_INVALID_ARGUMENT, saying why. */
loom_status loom_struct_check(const loom_struct_desc *d, size_t size);

/* A host's struct (size bytes at src) read into dst, which holds the
 * defaults: the fields past size keep them. */
loom_status loom_struct_in(const loom_struct_desc *d, void *dst, const void *src, size_t size);

/* loom_struct_in for a params struct, whose size is its first member;
 * src NULL leaves the defaults. dst's size stays the library's. */
loom_status loom_params_in(const loom_struct_desc *d, void *dst, const void *src);

/* A params struct's *_params_init: the first size bytes of defaults (the
 * library's own, size zero past them) into p, and p's size member set to
 * size. A size the library cannot read back later is refused: nothing is
 * written when it is too short to hold the size member, else the rest is
 * written, so that the call the struct is passed to names it too. */
loom_status loom_params_init(const loom_struct_desc *d, void *p, size_t size, const void *defaults);

/* The library's struct src written to a host's of size bytes at dst. */
loom_status loom_struct_out(const loom_struct_desc *d, void *dst, size_t size, const void *src);

/* n of the host's structs, size bytes apart from src, as an array of the
 * library's: src itself when the sizes agree, else a copy in *copy (to
 * free; the fields past size are zero). */
loom_status loom_struct_array_in(const loom_struct_desc *d, const void *src, size_t n, size_t size,
				 const void **out, void **copy);

/* n of the library's structs at src as an array of the host's, size bytes
 * apart: src itself when the sizes agree, else a copy in *buf (grown as
 * needed, *cap bytes; the caller keeps and frees it). */
loom_status loom_struct_array_out(const loom_struct_desc *d, const void *src, size_t n, size_t size,
				  const void **out, void **buf, size_t *cap);

#endif
