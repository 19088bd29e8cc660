/* test_abi.c - the ABI check (scripts/abi_check.sh) catches what broke
 * hosts before: a field appended to loom_runtime_params the old way, where
 * a function returns the struct by value (as loom_runtime_default_params
 * did before the structs carried their size), is a change the check
 * refuses without a version bump, and so is a field inserted before the
 * struct's end. A field appended to it now that it carries its size, and
 * is passed by pointer, passes, as a function added does; the same header
 * is no change. Each is a small library built from loom.h as it is and as
 * changed, compared the way the check compares libloom.so with its
 * baseline (with abi/libloom.supp). Skips without abigail-tools. */
#include "check_main.h"

#include "run_cmd.h"
#include "testdata.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A library of two of loom.h's functions; with BY_VALUE a third that
 * returns loom_runtime_params by value (the old way), with EXTRA one
 * more. */
static const char shim[] = "#include <string.h>\n"
			   "#include \"loom.h\"\n"
			   "LOOM_API loom_status loom_runtime_params_init(loom_runtime_params *p, size_t size)\n"
			   "{ memset(p, 0, size); p->size = size; return LOOM_OK; }\n"
			   "LOOM_API loom_status loom_runtime_create(const loom_runtime_params *p, loom_runtime **out)\n"
			   "{ (void)p; *out = NULL; return LOOM_OK; }\n"
			   "#ifdef BY_VALUE\n"
			   "LOOM_API loom_runtime_params loom_runtime_params_by_value(void);\n"
			   "LOOM_API loom_runtime_params loom_runtime_params_by_value(void)\n"
			   "{ return loom_runtime_default_params(); }\n"
			   "#endif\n"
			   "#ifdef EXTRA\n"
			   "LOOM_API int loom_extra(void);\n"
			   "LOOM_API int loom_extra(void) { return 1; }\n"
			   "#endif\n";

/* How the shim's loom.h differs from the tree's. */
typedef enum change { AS_IS, APPENDED, INSERTED } change;

/* dir/include: loom's headers, loom_runtime_params grown by a field at its
 * end or before its last one; dir/lib.so the shim built against them with
 * the cc flags given. */
static void build_shim(const char *dir, change c, const char *flags)
{
	cmd_result r = run_cmd("mkdir -p %s/include && cp -r %s/include/. %s/include/", dir, LOOM_TEST_SOURCE_DIR, dir);
	ck_assert_msg(r.status == 0, "%s", r.err);
	cmd_result_free(&r);
	if (c != AS_IS) {
		r = run_cmd(c == APPENDED ? "sed -i 's|^} loom_runtime_params;|\\tint grown;\\n} loom_runtime_params;|' "
					    "%1$s/include/loom.h && grep -q 'int grown' %1$s/include/loom.h"
					  : "sed -i 's|^\\tloom_compute_on compute_on;|\\tint grown;\\n&|' "
					    "%1$s/include/loom.h && grep -q 'int grown' %1$s/include/loom.h",
			    dir);
		ck_assert_msg(r.status == 0, "growing loom_runtime_params: %s", r.err);
		cmd_result_free(&r);
	}
	char src[4300];
	test_write_file(src, sizeof(src), dir, "shim.c", shim);
	r = run_cmd("cc -g -O1 -shared -fPIC -fvisibility=hidden %s -I%s/include %s -o %s/lib.so", flags, dir, src, dir);
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

START_TEST(a_struct_grows_only_as_its_size_allows)
{
	cmd_result have = run_cmd("command -v abidw && command -v abidiff && command -v cc");
	const bool ok = have.status == 0;
	cmd_result_free(&have);
	if (!ok) {
		printf("SKIP: abigail-tools (abidw, abidiff) or a C compiler is missing\n");
		return;
	}
	static const struct {
		const char *name;
		change c;
		const char *base_flags, *flags;
		const char *want;
	} cases[] = {
		{"the same header", AS_IS, "", "", "same"},
		{"a field appended to loom_runtime_params, returned by value (the old way)", APPENDED,
		 "-DBY_VALUE", "-DBY_VALUE", "changed"},
		{"a field inserted before loom_runtime_params's last", INSERTED, "", "", "changed"},
		{"a field appended to loom_runtime_params, which carries its size", APPENDED, "", "", "added"},
		{"a function added", AS_IS, "", "-DEXTRA", "added"},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char old_dir[4200], new_dir[4200];
		snprintf(old_dir, sizeof(old_dir), "%s", test_tmp_dir("abi_old"));
		snprintf(new_dir, sizeof(new_dir), "%s", test_tmp_dir("abi_new"));
		build_shim(old_dir, AS_IS, cases[i].base_flags);
		build_shim(new_dir, cases[i].c, cases[i].flags);
		char *v = verdict(old_dir, new_dir);
		ck_assert_msg(strcmp(v, cases[i].want) == 0, "%s: '%s', not %s", cases[i].name, v, cases[i].want);
		printf("%s: %s\n", cases[i].name, v);
		free(v);
	}
}
END_TEST

static Suite *abi_suite(void)
{
	Suite *s = suite_create("abi");
	TCase *tc = tcase_create("abi");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, a_struct_grows_only_as_its_size_allows);
	suite_add_tcase(s, tc);
	return s;
}

LOOM_TEST_MAIN(abi_suite)
