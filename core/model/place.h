/* place.h - putting a model's bound weights in backend memory. */
#ifndef LOOM_PLACE_H
#define LOOM_PLACE_H

#include "model/model.h"

/* Moves every weight loom_model_bind bound into the backend's memory
 * (using the file's mapping in place where the backend can), then offers
 * the matrices to the backend's weight_repack. */
loom_status loom_model_place(loom_model *m);

/* The weights' bytes by where they live: the file's mapping used in place
 * (what is still needed of it), the backend's repacked copies, and the
 * rest in backend memory (uploaded, or converted at bind). */
typedef struct loom_weight_bytes {
	size_t in_place, repacked, other;
} loom_weight_bytes;

loom_weight_bytes loom_model_weight_bytes(const loom_model *m);

/* A file in a backend's own layouts (`loom convert --layout`) says for which
 * backend (name and version: a layout may change between versions), and
 * the layout of each tensor it holds that way. */
#define LOOM_LAYOUT_KEY_BACKEND "loom.layout.backend"
#define LOOM_LAYOUT_KEY_TENSORS "loom.layout.tensors"
#define LOOM_LAYOUT_KEY_IDS "loom.layout.ids"

/* Does a backend's repacked copy of a weight (bytes of it at src) hold
 * the file's bytes as they are: a copy for the memory it lives in, not a
 * layout of its own? */
bool loom_repack_is_copy(const loom_buffer *buf, const void *src, size_t bytes);

/* "NAME VERSION" of the backend, as LOOM_LAYOUT_KEY_BACKEND holds it. */
void loom_layout_backend_id(const loom_backend *be, char *out, size_t size);

#endif
