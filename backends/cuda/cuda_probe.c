/*
 * cuda_probe.c - the plugin's entry point and probe.
 *
 * The core calls these before anything else of the plugin, on machines with
 * or without a GPU, so they touch nothing that needs a driver: the probe
 * opens libcuda.so.1 itself, asks it for devices, and refuses with a
 * one-line reason where there is no driver, no device, or a driver too old
 * for the CUDA runtime the plugin was built with. Only an instance (init)
 * starts the runtime, and only after a probe said yes.
 */
#include "cuda_probe.h"

#include <dlfcn.h>
#include <stdbool.h>
#include <stdio.h>

#define CUDA_STR_(x) #x
#define CUDA_STR(x) CUDA_STR_(x)
#define CUDA_PLUGIN_VERSION \
	CUDA_STR(LOOM_VERSION_MAJOR) "." CUDA_STR(LOOM_VERSION_MINOR) "." CUDA_STR(LOOM_VERSION_PATCH)

/* Above every CPU backend: a usable GPU is what the user installed it for. */
#define CUDA_PROBE_SCORE 100

/* The driver API's types, as cuda.h declares them; the probe does not
 * include cuda.h so that it builds the same with any toolkit. */
typedef int cu_result;
typedef cu_result (*cu_init_fn)(unsigned int flags);
typedef cu_result (*cu_count_fn)(int *count);
typedef cu_result (*cu_version_fn)(int *version);

int cuda_probe_driver(char *why, size_t why_size)
{
	void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
	if (lib == NULL) {
		snprintf(why, why_size, "no CUDA driver (libcuda.so.1 not found)");
		return 0;
	}
	cu_init_fn cu_init = (cu_init_fn)dlsym(lib, "cuInit");
	cu_count_fn cu_count = (cu_count_fn)dlsym(lib, "cuDeviceGetCount");
	cu_version_fn cu_version = (cu_version_fn)dlsym(lib, "cuDriverGetVersion");
	int score = 0, count = 0, version = 0;
	bool started = false;
	cu_result r;
	if (cu_init == NULL || cu_count == NULL || cu_version == NULL)
		snprintf(why, why_size, "libcuda.so.1 lacks the driver API (cuInit, cuDeviceGetCount)");
	else if (cu_version(&version) != 0 || version / 1000 < CUDA_RUNTIME_MAJOR_BUILT)
		/* A runtime runs on any driver of its major version or newer. */
		snprintf(why, why_size, "CUDA driver %d.%d is older than the CUDA %d runtime loom-cuda was built with",
			 version / 1000, version % 1000 / 10, CUDA_RUNTIME_MAJOR_BUILT);
	else if (started = true, (r = cu_init(0)) != 0)
		snprintf(why, why_size, r == 100 ? "no CUDA device" : "the CUDA driver failed to start (cuInit error %d)", r);
	else if (cu_count(&count) != 0 || count == 0)
		snprintf(why, why_size, "no CUDA device");
	else
		score = CUDA_PROBE_SCORE;
	/* A driver that cuInit started stays loaded for the process (the
	 * runtime opens it again when an instance starts): unloading a
	 * started driver is not something it promises to survive. One that
	 * was never started only had to answer the probe. */
	if (!started)
		dlclose(lib);
	return score;
}

static int cuda_probe(const loom_probe_args *args, char *why, size_t why_size)
{
	(void)args;
	return cuda_probe_driver(why, why_size);
}

static const loom_plugin_desc cuda_descriptor = {
	.abi_version = LOOM_PLUGIN_ABI_VERSION,
	.kind = LOOM_PLUGIN_BACKEND,
	.name = "cuda",
	.version = CUDA_PLUGIN_VERSION,
	.description = "NVIDIA GPU backend (CUDA, sm_80 and newer)",
	.probe = cuda_probe,
	.vtable = &cuda_backend_vtable,
};

LOOM_PLUGIN_DEFINE(cuda_descriptor)
