/* family_fixture.c - the family models loaded and stepped inside a test
 * (see family_fixture.h). */
#include "family_fixture.h"

#include "family_check.h"
#include "fixture.h"
#include "infer/context.h"

#include <check.h>

loom_model *family_model_load(loom_runtime *rt, const char *name, const char *dir)
{
	const family_model *fm = family_model_named(name);
	ck_assert_msg(fm != NULL, "no family model %s", name);
	char path[4200];
	family_model_write_tmp(fm, dir, path, sizeof(path));
	loom_model *m = NULL;
	ck_assert_msg(loom_model_load(rt, path, NULL, &m) == LOOM_OK, "loading %s: %s", name, loom_last_error());
	return m;
}

void family_model_steps(const char *name, const char *dir, family_step_visit visit, void *arg)
{
	loom_runtime *rt = test_runtime("cpu-generic", 1);
	loom_model *m = family_model_load(rt, name, dir);
	loom_context *ctx = test_context(m, 256, 8, LOOM_DTYPE_F16);
	for (int n = 1; n <= 4; n += 3) {
		loom_token tok[4] = {3, 9, 27, 81};
		int32_t pos[4] = {0, 1, 2, 3};
		loom_batch b = {.n_tokens = n, .tokens = tok, .pos = pos};
		ck_assert_msg(loom_decode(ctx, &b) == LOOM_OK, "%s", loom_last_error());
		loom_graph graph = {.n_nodes = ctx->n_nodes, .nodes = ctx->nodes};
		visit(&graph, n, arg);
		loom_kv_clear(ctx);
	}
	loom_context_free(ctx);
	loom_model_free(m);
	loom_runtime_free(rt);
}
