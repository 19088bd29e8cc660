/*
 * test_config.c - reading plugins.yaml.
 *
 * A good file is checked field by field through loom_config_load; every way
 * of getting it wrong must be LOOM_ERR_CONFIG with a message naming the file
 * and the line to look at (for YAML syntax errors, the line libyaml points
 * to). Relative paths in the file are relative to its directory, whatever
 * the working directory.
 */
#include "check_main.h"
#include "runtime/config.h"
#include "runtime/runtime.h"
#include "testdata.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define REAL_GENERIC \
	"  - name: cpu-generic\n    file: " LOOM_TEST_PLUGIN_DIR "/loom-cpu-generic.so\n"
#define FORMATS "formats:\n  - name: gguf\n    file: " LOOM_TEST_PLUGIN_DIR "/loom-gguf.so\n"

/* ------------------------------------------------------------------------ */
/* Helpers                                                                  */

/* plugins.yaml holding text in a fresh temporary directory for test name. */
static const char *write_yaml(char *buf, size_t size, const char *name, const char *text)
{
	char dir[4096];
	const char *tmp = test_tmp_dir(name);
	ck_assert_msg(tmp != NULL, "cannot make a temporary directory for %s", name);
	snprintf(dir, sizeof(dir), "%s", tmp);
	return test_write_file(buf, size, dir, "plugins.yaml", text);
}

static void expect_in(const char *err, const char *needle)
{
	ck_assert_msg(needle == NULL || strstr(err, needle) != NULL, "\"%s\" is not in the error: %s",
		      needle, err);
}

/* Loading text must fail with LOOM_ERR_CONFIG, "<file>:<line>:" where line
 * is that of mark in text, and each needle; the config comes back empty. */
static void expect_error(const char *test, const char *text, const char *mark, const char *needle1,
			 const char *needle2)
{
	char path[4096], where[4200];
	loom_config cfg;
	write_yaml(path, sizeof(path), test, text);
	loom_status st = loom_config_load(path, &cfg);
	const char *err = loom_last_error();
	ck_assert_msg(st == LOOM_ERR_CONFIG, "%s: status %d (%s), expected LOOM_ERR_CONFIG; message: %s",
		      test, st, loom_strerror(st), err);
	ck_assert_msg(cfg.path == NULL && cfg.backends == NULL && cfg.n_backends == 0,
		      "%s: a failed load left a half-filled config", test);
	snprintf(where, sizeof(where), "%s:%d:", path, test_line_of(text, mark));
	expect_in(err, where);
	expect_in(err, needle1);
	expect_in(err, needle2);
}

static loom_config load_ok(const char *path)
{
	loom_config cfg;
	loom_status st = loom_config_load(path, &cfg);
	ck_assert_msg(st == LOOM_OK, "%s: %s", path, loom_last_error());
	return cfg;
}

/* ------------------------------------------------------------------------ */
/* A good file                                                              */

static const char full_yaml[] =
	"# every key plugins.yaml has\n"
	"search_path: [plugins, /opt/loom/plugins]\n"
	"arch_path:\n"
	"  - arch\n"
	"backend: cpu-avx2\n"
	"\n"
	"backends:\n"
	"  - name: cpu-avx2\n"
	"    file: loom-cpu-avx2.so\n"
	"    options:\n"
	"      threads: 4\n"
	"      numa: \"off\"\n"
	"  - name: cpu-generic\n"
	"    file: ../lib/loom-cpu-generic.so\n"
	"formats:\n"
	"  - {name: gguf, file: loom-gguf.so}\n";

START_TEST(every_field_is_read)
{
	char path[4096], dir[4096];
	write_yaml(path, sizeof(path), "config_full", full_yaml);
	snprintf(dir, sizeof(dir), "%s", path);
	*strrchr(dir, '/') = '\0';
	loom_config cfg = load_ok(path);

	ck_assert_str_eq(cfg.path, path);
	ck_assert_str_eq(cfg.dir, dir);
	ck_assert_int_eq(cfg.n_search_path, 2);
	ck_assert_str_eq(cfg.search_path[0], "plugins");
	ck_assert_str_eq(cfg.search_path[1], "/opt/loom/plugins");
	ck_assert_int_eq(cfg.n_arch_path, 1);
	ck_assert_str_eq(cfg.arch_path[0], "arch");
	ck_assert_str_eq(cfg.backend, "cpu-avx2");

	ck_assert_int_eq(cfg.n_backends, 2);
	const loom_plugin_config *avx2 = &cfg.backends[0], *generic = &cfg.backends[1];
	ck_assert_str_eq(avx2->name, "cpu-avx2");
	ck_assert_str_eq(avx2->file, "loom-cpu-avx2.so");
	ck_assert_int_eq(avx2->line, test_line_of(full_yaml, "name: cpu-avx2"));
	ck_assert_str_eq(generic->name, "cpu-generic");
	ck_assert_str_eq(generic->file, "../lib/loom-cpu-generic.so");
	ck_assert_int_eq(generic->line, test_line_of(full_yaml, "name: cpu-generic"));

	/* Options keep their order and stay text, for the plugin to read. */
	ck_assert_int_eq(avx2->n_options, 2);
	ck_assert_str_eq(avx2->option_keys[0], "threads");
	ck_assert_str_eq(avx2->option_values[0], "4");
	ck_assert_str_eq(avx2->option_keys[1], "numa");
	ck_assert_str_eq(avx2->option_values[1], "off");
	ck_assert_int_eq(generic->n_options, 0);

	/* Flow style is the same YAML. */
	ck_assert_int_eq(cfg.n_formats, 1);
	ck_assert_str_eq(cfg.formats[0].name, "gguf");
	ck_assert_str_eq(cfg.formats[0].file, "loom-gguf.so");
	ck_assert_int_eq(cfg.formats[0].line, test_line_of(full_yaml, "{name: gguf"));

	loom_config_free(&cfg);
	ck_assert_ptr_null(cfg.path);
	/* Freeing twice is harmless: free leaves the config empty. */
	loom_config_free(&cfg);
}
END_TEST

START_TEST(policy_defaults_to_auto)
{
	char path[4096];
	write_yaml(path, sizeof(path), "config_default_policy", "backends:\n" REAL_GENERIC FORMATS);
	loom_config cfg = load_ok(path);
	ck_assert_str_eq(cfg.backend, "auto");
	ck_assert_int_eq(cfg.n_search_path, 0);
	ck_assert_int_eq(cfg.n_arch_path, 0);
	loom_config_free(&cfg);
}
END_TEST

/* The installed plugins.yaml must itself be valid. */
START_TEST(shipped_plugins_yaml_is_valid)
{
	loom_config cfg = load_ok(LOOM_TEST_SOURCE_DIR "/plugins.yaml");
	bool generic = false;
	for (int i = 0; i < cfg.n_backends; i++)
		generic = generic || strcmp(cfg.backends[i].name, "cpu-generic") == 0;
	ck_assert_msg(generic, "the shipped plugins.yaml does not list cpu-generic");
	ck_assert_int_ge(cfg.n_formats, 1);
	loom_config_free(&cfg);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Broken files                                                             */

struct broken {
	const char *test;
	const char *text;
	const char *mark;    /* the error's line is this text's */
	const char *needle1; /* must be in the message */
	const char *needle2;
};

/* YAML that does not parse: libyaml's complaint, at the line it points to. */
static const struct broken syntax_errors[] = {
	{"config_bad_indent",
	 "backends:\n"
	 "  - name: cpu-generic\n"
	 "    file: loom-cpu-generic.so\n"
	 "   options: {}\n" FORMATS,
	 "   options", NULL, NULL},
	{"config_key_indented_under_scalar",
	 "backend: auto\n"
	 "  backends: []\n",
	 "  backends", "mapping values are not allowed", NULL},
	{"config_tab_indent",
	 "backends:\n"
	 "\t- name: cpu-generic\n",
	 "\t-", "cannot start any token", NULL},
	{"config_unclosed_flow",
	 "search_path: [plugins\n"
	 "backends: []\n",
	 "backends", "flow sequence", NULL},
};
#define N_SYNTAX_ERRORS ((int)(sizeof(syntax_errors) / sizeof(syntax_errors[0])))

START_TEST(syntax_error_names_file_and_line)
{
	const struct broken *b = &syntax_errors[_i];
	expect_error(b->test, b->text, b->mark, b->needle1, b->needle2);
}
END_TEST

/* An unclosed quote runs to the end of the file, where libyaml notices; the
 * message must still lead to the line where the quote was opened. */
START_TEST(unclosed_quote_names_the_line_it_opened)
{
	static const char text[] =
		"backends:\n"
		"  - name: \"cpu-generic\n"
		"    file: loom-cpu-generic.so\n" FORMATS;
	char path[4096], at_line[64], at_mark[4200];
	loom_config cfg;
	write_yaml(path, sizeof(path), "config_unclosed_quote", text);
	ck_assert_int_eq(loom_config_load(path, &cfg), LOOM_ERR_CONFIG);
	const char *err = loom_last_error();
	expect_in(err, path);
	expect_in(err, "quoted scalar");
	int line = test_line_of(text, "\"cpu-generic");
	snprintf(at_mark, sizeof(at_mark), "%s:%d:", path, line);
	snprintf(at_line, sizeof(at_line), "line %d", line);
	ck_assert_msg(strstr(err, at_mark) != NULL || strstr(err, at_line) != NULL,
		      "the error does not point at line %d, where the quote opens: %s", line, err);
}
END_TEST

/* Well-formed YAML that is not a plugins.yaml. */
static const struct broken schema_errors[] = {
	{"config_unknown_top_key",
	 "backend: auto\n"
	 "search_paths: [plugins]\n"
	 "backends:\n" REAL_GENERIC FORMATS,
	 "search_paths", "unknown key 'search_paths' in plugins.yaml",
	 "expected one of: search_path, arch_path, backend, backends, formats"},
	{"config_unknown_entry_key",
	 "backends:\n"
	 "  - name: cpu-generic\n"
	 "    flie: loom-cpu-generic.so\n" FORMATS,
	 "flie", "unknown key 'flie' in an entry of backends", "expected one of: name, file, optional, options"},
	{"config_repeated_key",
	 "backend: auto\n"
	 "backends:\n" REAL_GENERIC
	 "backend: cpu-generic\n" FORMATS,
	 "backend: cpu-generic", "key 'backend' appears twice", NULL},
	{"config_root_is_a_list",
	 "- backends\n"
	 "- formats\n",
	 "- backends", "plugins.yaml must be a mapping, not a list", NULL},
	{"config_backends_scalar",
	 "backends: cpu-generic\n" FORMATS,
	 "backends", "backends must be a list, not a scalar", NULL},
	{"config_formats_mapping",
	 "backends:\n" REAL_GENERIC
	 "formats:\n"
	 "  gguf: loom-gguf.so\n",
	 "  gguf", "formats must be a list, not a mapping", NULL},
	{"config_entry_scalar",
	 "backends:\n"
	 "  - cpu-generic\n" FORMATS,
	 "- cpu-generic", "an entry of backends must be a mapping, not a scalar", NULL},
	{"config_search_path_mapping",
	 "search_path:\n"
	 "  first: plugins\n"
	 "backends:\n" REAL_GENERIC FORMATS,
	 "first", "search_path must be a list, not a mapping", NULL},
	{"config_search_path_nested",
	 "search_path: [plugins, [more]]\n"
	 "backends:\n" REAL_GENERIC FORMATS,
	 "search_path", "search_path must be a scalar, not a list", NULL},
	{"config_backend_list",
	 "backend: [cpu-generic]\n"
	 "backends:\n" REAL_GENERIC FORMATS,
	 "backend:", "backend must be a scalar, not a list", NULL},
	{"config_name_list",
	 "backends:\n"
	 "  - name: [cpu-generic]\n"
	 "    file: loom-cpu-generic.so\n" FORMATS,
	 "name:", "name must be a scalar, not a list", NULL},
	{"config_options_list",
	 "backends:\n"
	 "  - name: cpu-generic\n"
	 "    file: loom-cpu-generic.so\n"
	 "    options: [threads]\n" FORMATS,
	 "options:", "options must be a mapping, not a list", NULL},
	{"config_option_value_mapping",
	 "backends:\n"
	 "  - name: cpu-generic\n"
	 "    file: loom-cpu-generic.so\n"
	 "    options:\n"
	 "      threads: {min: 1}\n" FORMATS,
	 "threads", "an option value must be a scalar, not a mapping", NULL},
	{"config_entry_without_file",
	 "backends:\n"
	 "  - name: cpu-generic\n" FORMATS,
	 "name: cpu-generic", "an entry of backends needs both 'name' and 'file'", NULL},
	{"config_entry_without_name",
	 "backends:\n" REAL_GENERIC
	 "formats:\n"
	 "  - file: loom-gguf.so\n",
	 "file: loom-gguf.so", "an entry of formats needs both 'name' and 'file'", NULL},
	{"config_duplicate_plugin",
	 "backends:\n" REAL_GENERIC
	 "  - name: cpu-generic\n"
	 "    file: other.so\n" FORMATS,
	 "  - name: cpu-generic\n    file: other.so", "plugin 'cpu-generic' is listed twice", NULL},
};
#define N_SCHEMA_ERRORS ((int)(sizeof(schema_errors) / sizeof(schema_errors[0])))

START_TEST(schema_error_names_file_and_line)
{
	const struct broken *b = &schema_errors[_i];
	expect_error(b->test, b->text, b->mark, b->needle1, b->needle2);
}
END_TEST

START_TEST(missing_file_is_named)
{
	char path[4096];
	loom_config cfg;
	write_yaml(path, sizeof(path), "config_missing", "backends: []\n");
	strcpy(strrchr(path, '/'), "/no-such-plugins.yaml");
	ck_assert_int_eq(loom_config_load(path, &cfg), LOOM_ERR_CONFIG);
	expect_in(loom_last_error(), path);
	expect_in(loom_last_error(), "cannot open");
	expect_in(loom_last_error(), "No such file");
}
END_TEST

START_TEST(empty_file_is_an_error)
{
	static const char *const texts[] = {"", "# nothing but a comment\n\n", "---\n"};
	for (size_t i = 0; i < sizeof(texts) / sizeof(texts[0]); i++) {
		char path[4096];
		loom_config cfg;
		write_yaml(path, sizeof(path), "config_empty", texts[i]);
		loom_status st = loom_config_load(path, &cfg);
		ck_assert_msg(st == LOOM_ERR_CONFIG, "text %zu: status %d: %s", i, st, loom_last_error());
		expect_in(loom_last_error(), path);
		expect_in(loom_last_error(), "empty");
	}
}
END_TEST

/* Without a backend or a format loom can do nothing: say so at once. */
START_TEST(empty_lists_are_errors)
{
	char path[4096];
	loom_config cfg;
	write_yaml(path, sizeof(path), "config_no_backends", "backends: []\n" FORMATS);
	ck_assert_int_eq(loom_config_load(path, &cfg), LOOM_ERR_CONFIG);
	expect_in(loom_last_error(), path);
	expect_in(loom_last_error(), "no backends are listed");

	write_yaml(path, sizeof(path), "config_no_formats", "backends:\n" REAL_GENERIC);
	ck_assert_int_eq(loom_config_load(path, &cfg), LOOM_ERR_CONFIG);
	expect_in(loom_last_error(), "no formats are listed");
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Relative paths                                                           */

static void link_plugin(const char *dir, const char *file)
{
	char target[4096], link_path[4096];
	snprintf(target, sizeof(target), "%s/%s", LOOM_TEST_PLUGIN_DIR, file);
	snprintf(link_path, sizeof(link_path), "%s/%s", dir, file);
	ck_assert_msg(symlink(target, link_path) == 0, "cannot link %s to %s", link_path, target);
}

/* search_path, a file with a directory and arch_path are relative to the
 * directory of plugins.yaml, not to the working directory. */
START_TEST(relative_paths_follow_the_yaml)
{
	static const char text[] =
		"search_path: [libs]\n"
		"arch_path: [contracts]\n"
		"backends:\n"
		"  - name: cpu-generic\n"
		"    file: loom-cpu-generic.so\n"
		"formats:\n"
		"  - name: gguf\n"
		"    file: other/loom-gguf.so\n";
	char dir[4096], sub[4200], path[4300], expect[4400];
	snprintf(dir, sizeof(dir), "%s", test_tmp_dir("config_relative"));
	snprintf(sub, sizeof(sub), "%s/libs", dir);
	ck_assert_int_eq(mkdir(sub, 0755), 0);
	link_plugin(sub, "loom-cpu-generic.so");
	snprintf(sub, sizeof(sub), "%s/other", dir);
	ck_assert_int_eq(mkdir(sub, 0755), 0);
	link_plugin(sub, "loom-gguf.so");
	test_write_file(path, sizeof(path), dir, "plugins.yaml", text);

	char cwd[4096];
	ck_assert_ptr_nonnull(getcwd(cwd, sizeof(cwd)));
	ck_assert_int_eq(chdir("/"), 0);
	loom_runtime_params p = loom_runtime_default_params();
	loom_runtime *rt = NULL;
	p.plugins_file = path;
	p.log_level = LOOM_LOG_ERROR;
	loom_status st = loom_runtime_create(&p, &rt);
	ck_assert_int_eq(chdir(cwd), 0);
	ck_assert_msg(st == LOOM_OK, "%s: %s", path, loom_last_error());

	loom_plugin_info pi;
	ck_assert_int_eq(loom_runtime_plugin_info(rt, 0, &pi), LOOM_OK);
	snprintf(expect, sizeof(expect), "%s/libs/loom-cpu-generic.so", dir);
	ck_assert_msg(pi.loaded && strcmp(pi.path, expect) == 0, "cpu-generic: loaded %d from %s, expected %s",
		      pi.loaded, pi.path, expect);
	ck_assert_int_eq(loom_runtime_plugin_info(rt, 1, &pi), LOOM_OK);
	snprintf(expect, sizeof(expect), "%s/other/loom-gguf.so", dir);
	ck_assert_msg(pi.loaded && strcmp(pi.path, expect) == 0, "gguf: loaded %d from %s, expected %s",
		      pi.loaded, pi.path, expect);
	snprintf(expect, sizeof(expect), "%s/contracts", dir);
	ck_assert_msg(rt->n_arch_dirs >= 1 && strcmp(rt->arch_dirs[0], expect) == 0,
		      "first contract directory %s, expected %s", rt->n_arch_dirs ? rt->arch_dirs[0] : "(none)",
		      expect);
	loom_runtime_free(rt);
}
END_TEST

/* A relative path to plugins.yaml itself makes its directory relative too. */
START_TEST(relative_yaml_path_has_a_relative_dir)
{
	char dir[4096], path[4200], cwd[4096];
	snprintf(dir, sizeof(dir), "%s", test_tmp_dir("config_relative_yaml"));
	test_write_file(path, sizeof(path), dir, "plugins.yaml", "backends:\n" REAL_GENERIC FORMATS);
	ck_assert_ptr_nonnull(getcwd(cwd, sizeof(cwd)));
	ck_assert_int_eq(chdir(dir), 0);
	loom_config cfg;
	loom_status st = loom_config_load("plugins.yaml", &cfg);
	ck_assert_int_eq(chdir(cwd), 0);
	ck_assert_msg(st == LOOM_OK, "plugins.yaml: %s", loom_last_error());
	ck_assert_str_eq(cfg.dir, ".");
	loom_config_free(&cfg);

	char *joined = loom_path_join("base", "rel/x.so");
	ck_assert_str_eq(joined, "base/rel/x.so");
	free(joined);
	joined = loom_path_join("base", "/abs/x.so");
	ck_assert_str_eq(joined, "/abs/x.so");
	free(joined);
}
END_TEST

static Suite *config_suite(void)
{
	Suite *s = suite_create("config");
	TCase *tc;

	tc = tcase_create("good");
	tcase_add_test(tc, every_field_is_read);
	tcase_add_test(tc, policy_defaults_to_auto);
	tcase_add_test(tc, shipped_plugins_yaml_is_valid);
	suite_add_tcase(s, tc);

	tc = tcase_create("broken");
	tcase_add_loop_test(tc, syntax_error_names_file_and_line, 0, N_SYNTAX_ERRORS);
	tcase_add_test(tc, unclosed_quote_names_the_line_it_opened);
	tcase_add_loop_test(tc, schema_error_names_file_and_line, 0, N_SCHEMA_ERRORS);
	tcase_add_test(tc, missing_file_is_named);
	tcase_add_test(tc, empty_file_is_an_error);
	tcase_add_test(tc, empty_lists_are_errors);
	suite_add_tcase(s, tc);

	tc = tcase_create("paths");
	tcase_add_test(tc, relative_paths_follow_the_yaml);
	tcase_add_test(tc, relative_yaml_path_has_a_relative_dir);
	suite_add_tcase(s, tc);
	return s;
}

LOOM_TEST_MAIN(config_suite)
