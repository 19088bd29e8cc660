/* fuzz_runtime.c - the runtime the targets that go through loom.h share
 * (apart from fuzz_support.c, which the plugin targets link without the
 * core). */
#include "fuzz_support.h"

#include <stdio.h>
#include <stdlib.h>

static void drop_message(void *user, loom_log_level level, const char *message)
{
	(void)user;
	(void)level;
	(void)message;
}

loom_runtime *fuzz_runtime(void)
{
	loom_runtime_params p = loom_runtime_default_params();
	p.plugins_file = LOOM_FUZZ_BUILD_DIR "/plugins.yaml";
	p.n_threads = 1;
	p.log_level = LOOM_LOG_ERROR;
	p.log_fn = drop_message;
	loom_runtime *rt;
	if (loom_runtime_create(&p, &rt) != LOOM_OK) {
		fprintf(stderr, "fuzz: runtime: %s\n", loom_last_error());
		abort();
	}
	return rt;
}
