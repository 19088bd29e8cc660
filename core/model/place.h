/* place.h - putting a model's bound weights in backend memory. */
#ifndef LOOM_PLACE_H
#define LOOM_PLACE_H

#include "model/model.h"

/* Moves every weight loom_model_bind bound into the backend's memory
 * (using the file's mapping in place where the backend can), then offers
 * the matrices to the backend's weight_repack. */
loom_status loom_model_place(loom_model *m);

#endif
