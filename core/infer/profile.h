/* profile.h - where a context's steps spend their time (loom.h's
 * loom_context_profile): each node's time from the backend, summed by
 * kind, and the step's wall time around it. */
#ifndef LOOM_PROFILE_H
#define LOOM_PROFILE_H

#include "infer/context.h"

/* Runs a step's graph on the backend; while profiling, node by node
 * timed, each node's time added to its kind. */
loom_status profile_compute(loom_context *ctx, const loom_graph *graph);

/* While profiling, adds a step that took ms of wall time. */
void profile_add_step(loom_context *ctx, double ms);

#endif
