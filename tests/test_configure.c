/* test_configure.c - the build without its tests: with Check missing (a
 * pkg-config search path without check.pc), CMake configures loom with
 * one line saying the tests are off, and every target but the tests
 * stays (the library, the plugins, the tools); asked to require the
 * tests (as scripts/test.sh asks), it fails saying why. */
#include "check_main.h"

#include "run_cmd.h"
#include "testdata.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A pkg-config directory holding every .pc file the system's has, but
 * Check's (its path in dir). */
static void pc_dir_without_check(char *dir, size_t size)
{
	snprintf(dir, size, "%s", test_tmp_dir("configure_pc"));
	cmd_result r = run_cmd("for d in $(pkg-config --variable pc_path pkg-config | tr ':' ' '); do "
			       "[ -d \"$d\" ] || continue; for f in \"$d\"/*.pc; do "
			       "[ \"$(basename \"$f\")\" = check.pc ] || ln -sf \"$f\" %s/; done; done; "
			       "ls %s | grep -c '\\.pc$'; [ ! -e %s/check.pc ]",
			       dir, dir, dir);
	ck_assert_msg(r.status == 0, "making the pkg-config directory: %s%s", r.out, r.err);
	cmd_result_free(&r);
}

START_TEST(configures_without_check)
{
	cmd_result have = run_cmd("command -v cmake >/dev/null && pkg-config --exists check");
	const bool ok = have.status == 0;
	cmd_result_free(&have);
	if (!ok) {
		printf("SKIP: cmake or pkg-config's check is not here\n");
		return;
	}
	char pc[4200], build[4200];
	pc_dir_without_check(pc, sizeof(pc));
	snprintf(build, sizeof(build), "%s", test_tmp_dir("configure_build"));
	cmd_result r = run_cmd("PKG_CONFIG_LIBDIR=%s PKG_CONFIG_PATH= cmake -S %s -B %s 2>&1", pc, LOOM_TEST_SOURCE_DIR,
			       build);
	ck_assert_msg(r.status == 0, "configure without Check failed:\n%s", r.out);
	ck_assert_msg(strstr(r.out, "the tests are off") != NULL, "no line saying the tests are off:\n%s", r.out);
	cmd_result_free(&r);
	r = run_cmd("cmake --build %s --target help", build);
	ck_assert_int_eq(r.status, 0);
	/* The library, the CLI, the plugins and the benches stay; no suite. */
	static const char *const targets[] = {"... loom\n", "loom-cli", "loom-gguf", "loom-cpu-generic", "loom-bench-grammar"};
	for (size_t i = 0; i < sizeof(targets) / sizeof(targets[0]); i++)
		ck_assert_msg(strstr(r.out, targets[i]) != NULL, "no target '%s' without Check:\n%s", targets[i], r.out);
	ck_assert_msg(strstr(r.out, "test_") == NULL, "a test target without Check:\n%s", r.out);
	cmd_result_free(&r);
	/* Asked to require the tests, it fails saying why. */
	snprintf(build, sizeof(build), "%s", test_tmp_dir("configure_required"));
	r = run_cmd("PKG_CONFIG_LIBDIR=%s PKG_CONFIG_PATH= cmake -S %s -B %s -DLOOM_TESTS_REQUIRED=ON 2>&1", pc,
		    LOOM_TEST_SOURCE_DIR, build);
	ck_assert_msg(r.status != 0 && strstr(r.out, "Check (pkg-config 'check') is missing and the tests are required"),
		      "LOOM_TESTS_REQUIRED without Check: status %d\n%s", r.status, r.out);
	cmd_result_free(&r);
}
END_TEST

static Suite *configure_suite(void)
{
	Suite *s = suite_create("configure");
	TCase *tc = tcase_create("configure");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, configures_without_check);
	suite_add_tcase(s, tc);
	return s;
}

LOOM_TEST_MAIN(configure_suite)
