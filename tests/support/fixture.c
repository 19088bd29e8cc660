/* fixture.c - runtimes and models for tests, on a chosen backend. */
#include "fixture.h"

#include "testdata.h"

#include <check.h>
#include <stdio.h>
#include <string.h>

const char *const test_cpu_backends[] = {"cpu-amx", "cpu-avx512", "cpu-avx2", "cpu-generic"};
const int test_n_cpu_backends = 4;

bool test_cpu_has_amx(void)
{
	FILE *f = fopen("/proc/cpuinfo", "r");
	char line[8192];
	bool amx = false;
	while (f != NULL && fgets(line, sizeof(line), f) != NULL) {
		if (strncmp(line, "flags", 5) != 0)
			continue;
		amx = strstr(line, " amx_tile") != NULL && strstr(line, " amx_int8") != NULL &&
		      strstr(line, " amx_bf16") != NULL;
		break;
	}
	if (f != NULL)
		fclose(f);
	return amx;
}

const char *test_plugins_file(void)
{
	return LOOM_TEST_BUILD_DIR "/plugins.yaml";
}

loom_runtime *test_runtime(const char *backend, int n_threads)
{
	loom_runtime_params p = loom_runtime_default_params();
	loom_runtime *rt = NULL;
	p.plugins_file = test_plugins_file();
	p.backend = backend;
	p.n_threads = n_threads;
	p.log_level = LOOM_LOG_ERROR;
	loom_status st = loom_runtime_create(&p, &rt);
	if (st == LOOM_ERR_PLUGIN && backend != NULL && strstr(loom_last_error(), "unusable on this machine")) {
		printf("SKIP: backend %s: %s\n", backend, loom_last_error());
		return NULL;
	}
	ck_assert_msg(st == LOOM_OK, "runtime on %s: %s", backend ? backend : "auto", loom_last_error());
	return rt;
}

loom_runtime *test_generic_runtime(const char *arch_dir)
{
	loom_runtime_params p = loom_runtime_default_params();
	loom_runtime *rt = NULL;
	p.plugins_file = test_plugins_file();
	p.backend = "cpu-generic";
	p.arch_dir = arch_dir;
	p.n_threads = 1;
	p.log_level = LOOM_LOG_ERROR;
	ck_assert_msg(loom_runtime_create(&p, &rt) == LOOM_OK, "runtime: %s", loom_last_error());
	return rt;
}

loom_model *test_model(loom_runtime *rt, const char *rel)
{
	return test_model_with(rt, rel, NULL);
}

loom_model *test_model_with(loom_runtime *rt, const char *rel, const loom_model_params *params)
{
	char rel_path[512], path[4096];
	snprintf(rel_path, sizeof(rel_path), "models/%s", rel);
	if (!test_data_path(path, sizeof(path), rel_path))
		return NULL;
	loom_model *m = NULL;
	loom_status st = loom_model_load(rt, path, params, &m);
	ck_assert_msg(st == LOOM_OK, "load %s: %s", path, loom_last_error());
	return m;
}

loom_context *test_context(loom_model *m, uint32_t n_ctx, uint32_t n_batch, loom_dtype kv_type)
{
	loom_context_params p = loom_context_default_params();
	loom_context *ctx = NULL;
	p.n_ctx = n_ctx;
	p.n_batch = n_batch;
	p.kv_type = kv_type;
	loom_status st = loom_context_create(m, &p, &ctx);
	ck_assert_msg(st == LOOM_OK, "context: %s", loom_last_error());
	return ctx;
}

loom_token test_argmax(const float *logits, int n)
{
	int best = 0;
	for (int i = 1; i < n; i++)
		if (logits[i] > logits[best])
			best = i;
	return best;
}

const char *test_load_refused(loom_runtime *rt, const char *path, const char *what, loom_status want,
			      const char *const *needles, int n)
{
	static char poison;
	loom_model *m = (loom_model *)&poison; /* a failed load must set it to NULL */
	loom_status st = loom_model_load(rt, path, NULL, &m);
	const char *msg = loom_last_error();
	ck_assert_msg(st == want, "%s: status %d (%s), expected %d (%s); message: %s", what, st, loom_strerror(st), want,
		      loom_strerror(want), msg);
	ck_assert_msg(m == NULL, "%s: the failed load left a model handle", what);
	for (int k = 0; k < n && needles[k] != NULL; k++)
		ck_assert_msg(strstr(msg, needles[k]) != NULL, "%s: the message lacks \"%s\": %s", what, needles[k], msg);
	return msg;
}
