/* test_abi.c - the ABI check (scripts/abi_check.sh) catches what broke
 * hosts before: a field appended to loom_runtime_params, the struct a host
 * fills and loom_runtime_default_params returns, is a change the check
 * refuses without a version bump; the same header is no change; a
 * function added is an addition, which passes. Each is a small library
 * built from loom.h as it is and as changed, compared the way the check
 * compares libloom.so with its baseline. Skips without abigail-tools. */
#include "check_main.h"

#include "run_cmd.h"
#include "testdata.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A library of two of loom.h's functions, and a third when extra. */
static const char shim[] = "#include <string.h>\n"
			   "#include \"loom.h\"\n"
			   "LOOM_API loom_runtime_params loom_runtime_default_params(void)\n"
			   "{ loom_runtime_params p; memset(&p, 0, sizeof(p)); return p; }\n"
			   "LOOM_API loom_status loom_runtime_create(const loom_runtime_params *p, loom_runtime **out)\n"
			   "{ (void)p; *out = NULL; return LOOM_OK; }\n"
			   "#ifdef EXTRA\n"
			   "LOOM_API int loom_extra(void);\n"
			   "LOOM_API int loom_extra(void) { return 1; }\n"
			   "#endif\n";

/* dir/include: loom's headers, loom_runtime_params grown by a field at its
 * end when appended; dir/lib.so the shim built against them. */
static void build_shim(const char *dir, bool appended, bool extra)
{
	cmd_result r = run_cmd("mkdir -p %s/include && cp -r %s/include/. %s/include/", dir, LOOM_TEST_SOURCE_DIR, dir);
	ck_assert_msg(r.status == 0, "%s", r.err);
	cmd_result_free(&r);
	if (appended) {
		r = run_cmd("sed -i 's|^} loom_runtime_params;|\\tint appended; /* the old way */\\n} loom_runtime_params;|' "
			    "%s/include/loom.h && grep -q 'int appended' %s/include/loom.h",
			    dir, dir);
		ck_assert_msg(r.status == 0, "appending the field: %s", r.err);
		cmd_result_free(&r);
	}
	char src[4300];
	test_write_file(src, sizeof(src), dir, "shim.c", shim);
	r = run_cmd("cc -g -O1 -shared -fPIC -fvisibility=hidden %s -I%s/include %s -o %s/lib.so", extra ? "-DEXTRA" : "",
		    dir, src, dir);
	ck_assert_msg(r.status == 0, "building the shim: %s", r.err);
	cmd_result_free(&r);
}

static char *verdict(const char *old_dir, const char *new_dir)
{
	cmd_result r = run_cmd("bash %s/scripts/abi_check.sh --verdict %s/lib.so %s/include %s/lib.so %s/include",
			       LOOM_TEST_SOURCE_DIR, old_dir, old_dir, new_dir, new_dir);
	ck_assert_msg(r.status == 0, "abi_check --verdict: %s%s", r.out, r.err);
	char *out = strdup(r.out);
	cmd_result_free(&r);
	out[strcspn(out, "\n")] = '\0';
	return out;
}

START_TEST(appending_a_field_fails_the_check)
{
	cmd_result have = run_cmd("command -v abidw && command -v abidiff && command -v cc");
	const bool ok = have.status == 0;
	cmd_result_free(&have);
	if (!ok) {
		printf("SKIP: abigail-tools (abidw, abidiff) or a C compiler is missing\n");
		return;
	}
	char old_dir[4200], same_dir[4200], appended_dir[4200], added_dir[4200];
	snprintf(old_dir, sizeof(old_dir), "%s", test_tmp_dir("abi_old"));
	snprintf(same_dir, sizeof(same_dir), "%s", test_tmp_dir("abi_same"));
	snprintf(appended_dir, sizeof(appended_dir), "%s", test_tmp_dir("abi_appended"));
	snprintf(added_dir, sizeof(added_dir), "%s", test_tmp_dir("abi_added"));
	build_shim(old_dir, false, false);
	build_shim(same_dir, false, false);
	build_shim(appended_dir, true, false);
	build_shim(added_dir, false, true);
	char *v = verdict(old_dir, same_dir);
	ck_assert_str_eq(v, "same");
	free(v);
	v = verdict(old_dir, appended_dir);
	ck_assert_msg(strcmp(v, "changed") == 0, "a field appended to loom_runtime_params: '%s', not changed", v);
	free(v);
	v = verdict(old_dir, added_dir);
	ck_assert_str_eq(v, "added");
	free(v);
	printf("the same header: same; a field appended to loom_runtime_params: changed (refused); a function "
	       "added: added (passes)\n");
}
END_TEST

static Suite *abi_suite(void)
{
	Suite *s = suite_create("abi");
	TCase *tc = tcase_create("abi");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, appending_a_field_fails_the_check);
	suite_add_tcase(s, tc);
	return s;
}

LOOM_TEST_MAIN(abi_suite)
