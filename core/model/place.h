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

#endif
