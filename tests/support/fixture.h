/* fixture.h - runtimes and models for tests, on a chosen backend. */
#ifndef LOOM_TEST_FIXTURE_H
#define LOOM_TEST_FIXTURE_H

#include <loom.h>

#include <stdbool.h>

/* The CPU backends, best first. */
extern const char *const test_cpu_backends[];
extern const int test_n_cpu_backends;

/* Whether /proc/cpuinfo lists every AMX feature cpu-amx needs (amx_tile,
 * amx_int8, amx_bf16): the kernel's view, beside the plugin's own probe. */
bool test_cpu_has_amx(void);

/* The build tree's plugins.yaml. */
const char *test_plugins_file(void);

/* A runtime on `backend` (NULL: the policy's choice) with n_threads; NULL
 * (after printing SKIP) if that backend cannot run on this machine. Fails
 * the test on any other error. */
loom_runtime *test_runtime(const char *backend, int n_threads);
/* A cpu-generic runtime, 1 thread, that looks for contracts in arch_dir
 * first (NULL: the built-in ones alone). */
loom_runtime *test_generic_runtime(const char *arch_dir);

/* Loads models/<rel> from the shared data; NULL (after SKIP) if the data
 * is absent. Fails the test if loading fails. */
loom_model *test_model(loom_runtime *rt, const char *rel);
/* The same with load parameters. */
loom_model *test_model_with(loom_runtime *rt, const char *rel, const loom_model_params *params);

/* A context with an f32 KV cache (as the reference data was made). */
loom_context *test_context(loom_model *m, uint32_t n_ctx, uint32_t n_batch, loom_dtype kv_type);

/* Loads path on rt, which must fail with status want, set the model handle
 * to NULL and give a message holding each of needles[0..n) up to the first
 * NULL; returns the message. what names the case in a failure. */
const char *test_load_refused(loom_runtime *rt, const char *path, const char *what, loom_status want,
			      const char *const *needles, int n);

/* Index of the largest logit, lowest id on ties. */
loom_token test_argmax(const float *logits, int n);

#endif
