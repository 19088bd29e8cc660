/* test_sdk.c - the plugin SDK as a plugin author meets it: loom installed,
 * examples/plugin built out of tree against the installed headers with
 * find_package(loom), listed in a plugins.yaml of the test's own, and run
 * by the installed loom to the reference's greedy continuation. What it
 * cannot run (an f16 cache) it refuses when the context is made, and the
 * conformance suite passes it, given its file. The SDK
 * holds the ABI and nothing of the core: a plugin that reaches into core/
 * does not compile. */
#include "check_main.h"
#include "fixture.h"
#include "golden.h"
#include "run_cmd.h"
#include "testdata.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MODEL "stories260K-f32"
#define PROMPT_ID "once_upon_a_time"

/* Builds examples/plugin into dir/plugin with the installed tree at
 * dir/staged, as its CMakeLists.txt tells a user to (under the sanitizers
 * when loom is built with them). */
static void build_example(const char *dir)
{
	cmd_result r = run_cmd("cmake -S %s/examples/plugin -B %s/plugin -DCMAKE_PREFIX_PATH=%s/staged "
			       "-DCMAKE_BUILD_TYPE=Release -DCMAKE_C_FLAGS='-Wall -Wextra -Werror " LOOM_TEST_HOST_CFLAGS
			       "' >/dev/null && "
			       "cmake --build %s/plugin >/dev/null",
			       LOOM_TEST_SOURCE_DIR, dir, dir, dir);
	ck_assert_msg(r.status == 0, "building examples/plugin against the installed loom: %s%s", r.out, r.err);
	cmd_result_free(&r);
}

/* plugins.yaml: the example as the only backend, the installed gguf
 * plugin and contracts. */
static void write_plugins_yaml(const char *dir, char *path, size_t size)
{
	char text[4096];
	snprintf(text, sizeof(text),
		 "search_path: [%s/plugin, %s/staged/lib/loom/plugins]\n"
		 "arch_path: [%s/staged/share/loom/arch]\n"
		 "backend: example-f32\n"
		 "backends:\n"
		 "  - name: example-f32\n    file: loom-example-f32.so\n"
		 "formats:\n"
		 "  - name: gguf\n    file: loom-gguf.so\n",
		 dir, dir, dir);
	test_write_file(path, size, dir, "plugins.yaml", text);
}

/* The greedy continuation the reference recorded, as text. */
static void reference_text(const golden_case *g, char *text, size_t size)
{
	loom_runtime *rt = test_runtime(NULL, 1);
	loom_model *m = test_model(rt, MODEL ".gguf");
	ck_assert_msg(m != NULL, "cannot load %s", MODEL);
	size_t len = 0, n;
	for (int i = 0; i < g->n_greedy; i++) {
		ck_assert(loom_token_to_piece(m, g->greedy[i], false, text + len, size - len - 1, &n) == LOOM_OK);
		len += n;
	}
	text[len] = '\0';
	loom_model_free(m);
	loom_runtime_free(rt);
}

START_TEST(out_of_tree_backend_runs_a_model)
{
	char model[4096], plugins[4200], expected[4096], want[4200];
	if (!test_data_path(model, sizeof(model), "models/" MODEL ".gguf"))
		return;
	golden_case g;
	ck_assert(golden_load(MODEL, PROMPT_ID, &g));
	reference_text(&g, expected, sizeof(expected));

	const char *dir = test_tmp_dir("sdk");
	test_install(dir);
	build_example(dir);
	write_plugins_yaml(dir, plugins, sizeof(plugins));

	cmd_result r = run_cmd("cd / && unset LOOM_PLUGINS LOOM_BACKEND && %s/staged/bin/loom info --plugins --plugins %s",
			       dir, plugins);
	ck_assert_msg(r.status == 0 && strstr(r.out, "chose backend: example-f32") != NULL,
		      "loom info --plugins: exit %d:\n%s%s", r.status, r.out, r.err);
	cmd_result_free(&r);

	r = run_cmd("cd / && unset LOOM_PLUGINS LOOM_BACKEND && %s/staged/bin/loom run -m %s -p '%s' -n %d --temp 0 "
		    "--kv-type f32 --plugins %s",
		    dir, model, g.prompt, g.n_greedy, plugins);
	ck_assert_msg(r.status == 0, "the example backend: exit %d: %s", r.status, r.err);
	snprintf(want, sizeof(want), "%s\n", expected);
	ck_assert_msg(strcmp(r.out, want) == 0, "the example backend wrote\n  '%s'\nthe reference's greedy is\n  '%s'",
		      r.out, want);
	cmd_result_free(&r);

	/* It stores keys and values only as f32: an f16 cache is refused. */
	r = run_cmd("cd / && %s/staged/bin/loom run -m %s -p x -n 1 --kv-type f16 --plugins %s", dir, model, plugins);
	ck_assert_msg(r.status == 1 && strstr(r.err, "backend example-f32 cannot run KV_STORE") != NULL &&
			      strstr(r.err, "f16") != NULL,
		      "an f16 cache: exit %d: %s", r.status, r.err);
	cmd_result_free(&r);

	/* The conformance suite, given the plugin's file as its author would
	 * give it: one group here (test_backend_ops runs them all on the
	 * in-tree build of the example). */
	r = run_cmd("CK_RUN_CASE=norms %s/tests/test_backend_ops %s/plugin/loom-example-f32.so", LOOM_TEST_BUILD_DIR,
		    dir);
	ck_assert_msg(r.status == 0 && strstr(r.out, "RMS_NORM, LAYER_NORM on example-f32: 204 cases run") != NULL &&
			      strstr(r.out, "Failures: 0, Errors: 0") != NULL,
		      "test_backend_ops on the example: exit %d:\n%s%s", r.status, r.out, r.err);
	cmd_result_free(&r);
	golden_free(&g);
}
END_TEST

/* A plugin sees include/ alone: the core's headers are not there, in the
 * installed SDK as in the tree. */
START_TEST(the_sdk_holds_the_abi_and_not_the_core)
{
	const char *dir = test_tmp_dir("sdk_fence");
	char abi[4200], core[4200];
	test_write_file(abi, sizeof(abi), dir, "abi.c",
			"#include <loom/plugin_api.h>\nint abi_version = LOOM_PLUGIN_ABI_VERSION;\n");
	test_write_file(core, sizeof(core), dir, "core.c", "#include \"runtime/error.h\"\nint x;\n");
	cmd_result r = run_cmd("cc -std=c11 -Wall -Werror -fsyntax-only -I%s/include %s", LOOM_TEST_SOURCE_DIR, abi);
	ck_assert_msg(r.status == 0, "the ABI header alone does not compile: %s", r.err);
	cmd_result_free(&r);
	r = run_cmd("cc -std=c11 -fsyntax-only -I%s/include %s", LOOM_TEST_SOURCE_DIR, core);
	ck_assert_msg(r.status != 0 && strstr(r.err, "runtime/error.h") != NULL,
		      "a plugin reached a core header: exit %d: %s", r.status, r.err);
	cmd_result_free(&r);
}
END_TEST

static Suite *sdk_suite(void)
{
	Suite *s = suite_create("sdk");
	TCase *tc = tcase_create("sdk");
	tcase_set_timeout(tc, 300);
	tcase_add_test(tc, out_of_tree_backend_runs_a_model);
	tcase_add_test(tc, the_sdk_holds_the_abi_and_not_the_core);
	suite_add_tcase(s, tc);
	return s;
}

LOOM_TEST_MAIN(sdk_suite)
