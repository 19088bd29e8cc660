/*
 * cuda_probe.h - what the probe (C, built without the CUDA toolkit's
 * headers) and the CUDA sources share.
 */
#ifndef LOOM_CUDA_PROBE_H
#define LOOM_CUDA_PROBE_H

#include "loom/plugin_api.h"

#ifdef __cplusplus
extern "C" {
#endif

extern const loom_backend_vtable cuda_backend_vtable;

/* A score above 0 when a driver new enough for this build answers and has
 * a device; otherwise 0, with why saying which of those is missing. */
int cuda_probe_driver(char *why, size_t why_size);

#ifdef __cplusplus
}
#endif

#endif
