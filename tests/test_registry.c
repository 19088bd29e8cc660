/*
 * test_registry.c - the plugin registry and the backend policy.
 *
 * Each test writes its own plugins.yaml into a temporary directory. Entries
 * point by absolute path at the real plugins of the build tree and at the
 * fakes of tests/plugins/, each broken in one way. A broken plugin must be
 * kept in the list with score 0 and the reason, logged once, and passed over
 * for the next candidate; a forced backend is used or the runtime fails
 * naming it. The loom command is checked to report the same.
 */
#include "check_main.h"
#include "fixture.h"
#include "synth_model.h"
#include "testdata.h"

#include <loom.h>
#include <loom/plugin_api.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#ifndef LOOM_TEST_FAKE_PLUGIN_DIR
#error "LOOM_TEST_FAKE_PLUGIN_DIR must name the directory of the fake plugins"
#endif

/* plugins.yaml entries. */
#define REAL(name) "  - name: " name "\n    file: " LOOM_TEST_PLUGIN_DIR "/loom-" name ".so\n"
#define FAKE(name, file) "  - name: " name "\n    file: " LOOM_TEST_FAKE_PLUGIN_DIR "/" file "\n"
#define REAL_CPU REAL("cpu-avx512") REAL("cpu-avx2") REAL("cpu-generic")
#define FORMATS "formats:\n" REAL("gguf")

/* Every way a plugin can be broken, beside cpu-generic so the runtime still
 * starts. fake.so is a text file the test writes beside plugins.yaml; the
 * entry's relative path is resolved against that directory. */
static const char broken_yaml[] =
	"backend: auto\n"
	"backends:\n"
	FAKE("bad-abi", "bad_abi.so")
	FAKE("old-abi", "old_abi.so")
	FAKE("no-entry", "no_entry.so")
	"  - name: not-a-library\n"
	"    file: ./fake.so\n"
	FAKE("unmet-cpu", "unmet_cpu.so")
	FAKE("missing-slot", "missing_slot.so")
	FAKE("old-vtable", "old_vtable.so")
	FAKE("wrong-kind", "wrong_kind.so")
	FAKE("misnamed", "unmet_cpu.so")
	"  - name: absent\n"
	"    file: absent-plugin.so\n"
	"  - name: absent-optional\n"
	"    file: absent-optional.so\n"
	"    optional: true\n"
	"  - name: cpu-amx\n"
	"    file: " LOOM_TEST_PLUGIN_DIR "/loom-cpu-amx.so\n"
	"    options: {amx: maybe}\n"
	REAL("cpu-generic")
	FORMATS;

/* ------------------------------------------------------------------------ */
/* Helpers                                                                  */

#define MAX_LOG 64

/* Messages the runtime logged, in order. The sink is called with the core's
 * log lock held, so it only records; the checks come after. */
static struct {
	int n;       /* messages seen, even beyond MAX_LOG */
	loom_log_level level[MAX_LOG];
	char text[MAX_LOG][1024];
} logged;

static void capture_log(void *user, loom_log_level level, const char *message)
{
	(void)user;
	if (logged.n < MAX_LOG) {
		logged.level[logged.n] = level;
		snprintf(logged.text[logged.n], sizeof(logged.text[0]), "%s", message);
	}
	logged.n++;
}

static void check_log_fits(void)
{
	ck_assert_msg(logged.n <= MAX_LOG, "%d messages logged; the test keeps %d", logged.n, MAX_LOG);
}

/* Index of the one message holding needle; fails unless exactly one does. */
static int logged_once(const char *needle)
{
	int found = -1, count = 0;
	check_log_fits();
	for (int i = 0; i < logged.n; i++) {
		if (strstr(logged.text[i], needle) != NULL) {
			found = i;
			count++;
		}
	}
	ck_assert_msg(count == 1, "\"%s\" logged %d times, expected once", needle, count);
	return found;
}

static int logged_at(loom_log_level level)
{
	int count = 0;
	check_log_fits();
	for (int i = 0; i < logged.n; i++)
		count += logged.level[i] == level;
	return count;
}

/* No test may depend on the caller's environment. */
static void clear_env(void)
{
	unsetenv("LOOM_BACKEND");
	unsetenv("LOOM_PLUGINS");
}

/* A fresh temporary directory for test `name` holding plugins.yaml with
 * text; the yaml's path goes to buf. */
static const char *write_yaml(char *buf, size_t size, const char *name, const char *text)
{
	const char *dir = test_tmp_dir(name);
	ck_assert_msg(dir != NULL, "cannot make a temporary directory for %s", name);
	char copy[4096];
	snprintf(copy, sizeof(copy), "%s", dir);
	return test_write_file(buf, size, copy, "plugins.yaml", text);
}

/* The broken-plugin yaml and its fake.so (plain text) in a fresh directory. */
static const char *write_broken_yaml(char *buf, size_t size, const char *name)
{
	char dir[4096], fake[4200];
	write_yaml(buf, size, name, broken_yaml);
	snprintf(dir, sizeof(dir), "%s", buf);
	*strrchr(dir, '/') = '\0';
	test_write_file(fake, sizeof(fake), dir, "fake.so", "this is not a shared library\n");
	return buf;
}

/* loom_runtime_create on plugins_file (NULL: not given), capturing every
 * message down to debug level. */
static loom_status start(const char *plugins_file, const char *backend, loom_runtime **rt)
{
	loom_runtime_params p = loom_runtime_default_params();
	p.plugins_file = plugins_file;
	p.backend = backend;
	p.n_threads = 1;
	p.log_level = LOOM_LOG_DEBUG;
	p.log_fn = capture_log;
	memset(&logged, 0, sizeof(logged));
	return loom_runtime_create(&p, rt);
}

static loom_runtime *start_ok(const char *plugins_file, const char *backend)
{
	loom_runtime *rt = NULL;
	loom_status st = start(plugins_file, backend, &rt);
	ck_assert_msg(st == LOOM_OK, "runtime on %s (backend %s): %s", plugins_file,
		      backend ? backend : "by policy", loom_last_error());
	ck_assert_ptr_nonnull(rt);
	return rt;
}

/* Starting must fail with code and a message holding both needles. */
static void start_fails(const char *plugins_file, const char *backend, loom_status code,
			const char *needle1, const char *needle2)
{
	loom_runtime *rt = NULL;
	loom_status st = start(plugins_file, backend, &rt);
	const char *err = loom_last_error();
	ck_assert_msg(st == code, "backend %s: status %d (%s), expected %d; message: %s",
		      backend ? backend : "by policy", st, loom_strerror(st), code, err);
	ck_assert_msg(rt == NULL, "a failed create left a runtime");
	ck_assert_msg(strstr(err, needle1) != NULL, "\"%s\" is not in the error: %s", needle1, err);
	ck_assert_msg(needle2 == NULL || strstr(err, needle2) != NULL, "\"%s\" is not in the error: %s",
		      needle2, err);
}

static loom_plugin_info plugin_info(const loom_runtime *rt, const char *name)
{
	loom_plugin_info pi;
	for (size_t i = 0; i < loom_runtime_plugin_count(rt); i++) {
		ck_assert_int_eq(loom_runtime_plugin_info(rt, i, &pi), LOOM_OK);
		if (strcmp(pi.name, name) == 0)
			return pi;
	}
	ck_abort_msg("plugin %s is not in the registry", name);
}

/* The usable real CPU backend with the highest probe score. */
static loom_plugin_info best_cpu(const loom_runtime *rt)
{
	static const char *const names[] = {"cpu-avx512", "cpu-avx2", "cpu-generic"};
	loom_plugin_info best = {.score = 0};
	/* Tests that list cpu-amx turn it off or check it apart. */
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		loom_plugin_info pi = plugin_info(rt, names[i]);
		if (pi.loaded && pi.score > best.score)
			best = pi;
	}
	ck_assert_msg(best.score > 0, "no real CPU backend is usable");
	return best;
}

static void expect_chosen(const loom_runtime *rt, const char *name)
{
	const char *in_use = loom_runtime_backend_name(rt);
	ck_assert_msg(in_use != NULL && strcmp(in_use, name) == 0, "backend in use is %s, expected %s",
		      in_use ? in_use : "(none)", name);
	loom_plugin_info pi = plugin_info(rt, name);
	ck_assert_msg(pi.chosen && pi.why[0] == '\0', "%s: chosen %d, why \"%s\"", name, pi.chosen, pi.why);
	for (size_t i = 0; i < loom_runtime_plugin_count(rt); i++) {
		ck_assert_int_eq(loom_runtime_plugin_info(rt, i, &pi), LOOM_OK);
		ck_assert_msg(!pi.chosen || strcmp(pi.name, name) == 0, "%s is chosen too", pi.name);
	}
}

/* Runs `env ENV loom ARGS` from the build tree (ENV: NAME=VALUE assignments,
 * may be empty) with standard error folded into out; returns the exit
 * status. */
static int run_loom(char *out, size_t size, const char *env, const char *args)
{
	char cmd[8192];
	snprintf(cmd, sizeof(cmd), "env %s '%s/loom' %s 2>&1", env, LOOM_TEST_BUILD_DIR, args);
	FILE *p = popen(cmd, "r");
	ck_assert_msg(p != NULL, "cannot run %s", cmd);
	size_t n = fread(out, 1, size - 1, p);
	out[n] = '\0';
	int status = pclose(p);
	ck_assert_msg(WIFEXITED(status), "%s did not exit normally (status %d)", cmd, status);
	return WEXITSTATUS(status);
}

static void expect_text(const char *text, const char *needle, const char *what)
{
	ck_assert_msg(strstr(text, needle) != NULL, "%s lacks \"%s\":\n%s", what, needle, text);
}

/* ------------------------------------------------------------------------ */
/* Rejected plugins                                                         */

struct rejection {
	const char *name;
	bool loaded;           /* checks passed, only the probe said no */
	loom_log_level level;  /* warn: broken; info: absent or not for this machine */
	const char *why;       /* must be in the reason */
};

static const struct rejection rejections[] = {
	{"bad-abi", false, LOOM_LOG_WARN, "incompatible ABI version"},
	{"old-abi", false, LOOM_LOG_WARN, "rebuild it against this loom's loom/plugin_api.h"},
	{"no-entry", false, LOOM_LOG_WARN, "no entry symbol '" LOOM_PLUGIN_ENTRY_SYMBOL "'"},
	{"not-a-library", false, LOOM_LOG_WARN, "cannot load"},
	{"unmet-cpu", true, LOOM_LOG_INFO, "unusable on this machine: CPU lacks AVX9000"},
	{"missing-slot", false, LOOM_LOG_WARN, "vtable slot 'compute' is missing"},
	{"old-vtable", false, LOOM_LOG_WARN, "vtable too old"},
	{"wrong-kind", false, LOOM_LOG_WARN, "is not a backend plugin"},
	{"misnamed", false, LOOM_LOG_WARN, "calls itself 'unmet-cpu', plugins.yaml says 'misnamed'"},
	/* A misspelt file name must not cost a backend in silence. */
	{"absent", false, LOOM_LOG_WARN, "file 'absent-plugin.so' not found"},
	{"absent-optional", false, LOOM_LOG_INFO, "file 'absent-optional.so' not found"},
	{"cpu-amx", true, LOOM_LOG_WARN, "misconfigured in plugins.yaml: option amx must be on or off, not 'maybe'"},
};
#define N_REJECTIONS ((int)(sizeof(rejections) / sizeof(rejections[0])))

START_TEST(broken_plugin_is_rejected_with_its_reason)
{
	const struct rejection *r = &rejections[_i];
	char yaml[4096], needle[256];
	write_broken_yaml(yaml, sizeof(yaml), "registry_broken");
	loom_runtime *rt = start_ok(yaml, NULL);

	loom_plugin_info pi = plugin_info(rt, r->name);
	ck_assert_msg(pi.score == 0 && !pi.chosen, "%s: score %d, chosen %d", r->name, pi.score, pi.chosen);
	ck_assert_msg(pi.loaded == r->loaded, "%s: loaded %d, expected %d", r->name, pi.loaded, r->loaded);
	ck_assert_msg(pi.kind == LOOM_PLUGIN_BACKEND, "%s: kind %d", r->name, pi.kind);
	ck_assert_msg(strstr(pi.why, r->why) != NULL, "%s: why is \"%s\", expected \"%s\"", r->name, pi.why,
		      r->why);

	/* Logged once, at its level, naming the file and the reason. */
	snprintf(needle, sizeof(needle), "plugin '%s' (", r->name);
	int at = logged_once(needle);
	ck_assert_msg(logged.level[at] == r->level, "%s logged at level %d, expected %d: %s", r->name,
		      logged.level[at], r->level, logged.text[at]);
	ck_assert_msg(strstr(logged.text[at], pi.path) != NULL && strstr(logged.text[at], pi.why) != NULL,
		      "%s: the log line lacks the path %s or the reason: %s", r->name, pi.path, logged.text[at]);
	loom_runtime_free(rt);
}
END_TEST

/* The details each reason must carry beyond its kind. */
START_TEST(reasons_carry_their_details)
{
	char yaml[4096], abi[128], where[4200];
	write_broken_yaml(yaml, sizeof(yaml), "registry_details");
	loom_runtime *rt = start_ok(yaml, NULL);

	/* Both ABI numbers, as ggml's loader gives them. */
	snprintf(abi, sizeof(abi), "(plugin: %d, loom: %d)", LOOM_PLUGIN_ABI_VERSION + 1,
		 LOOM_PLUGIN_ABI_VERSION);
	loom_plugin_info pi = plugin_info(rt, "bad-abi");
	ck_assert_msg(strstr(pi.why, abi) != NULL, "bad-abi: why \"%s\" lacks %s", pi.why, abi);
	ck_assert_msg(pi.version == NULL, "bad-abi: version %s, though it never loaded", pi.version);
	/* A plugin built for an older version is refused the same way: its
	 * ops may mean what they meant then. */
	snprintf(abi, sizeof(abi), "(plugin: %d, loom: %d)", LOOM_PLUGIN_ABI_VERSION - 1, LOOM_PLUGIN_ABI_VERSION);
	pi = plugin_info(rt, "old-abi");
	ck_assert_msg(strstr(pi.why, abi) != NULL, "old-abi: why \"%s\" lacks %s", pi.why, abi);
	ck_assert_msg(pi.version == NULL, "old-abi: version %s, though it never loaded", pi.version);

	/* dlopen's own text follows "cannot load", and the path is resolved
	 * against the directory of plugins.yaml. */
	pi = plugin_info(rt, "not-a-library");
	snprintf(where, sizeof(where), "%s", yaml);
	strcpy(strrchr(where, '/'), "/./fake.so");
	ck_assert_msg(strcmp(pi.path, where) == 0, "not-a-library: path %s, expected %s", pi.path, where);
	ck_assert_msg(strlen(pi.why) > strlen("cannot load: "), "not-a-library: why \"%s\" gives no detail",
		      pi.why);

	/* A missing file names plugins.yaml and the line of its entry. */
	snprintf(where, sizeof(where), "(%s:%d)", yaml, test_line_of(broken_yaml, "name: absent"));
	pi = plugin_info(rt, "absent");
	ck_assert_msg(strstr(pi.why, where) != NULL, "absent: why \"%s\" lacks %s", pi.why, where);
	ck_assert_str_eq(pi.path, "absent-plugin.so");
	loom_runtime_free(rt);
}
END_TEST

/* Nothing but the rejections is logged above info, and each one once. */
START_TEST(each_rejection_is_logged_once)
{
	char yaml[4096];
	int warnings = 0, infos = 0;
	write_broken_yaml(yaml, sizeof(yaml), "registry_log_once");
	loom_runtime *rt = start_ok(yaml, NULL);

	for (int i = 0; i < N_REJECTIONS; i++) {
		warnings += rejections[i].level == LOOM_LOG_WARN;
		infos += rejections[i].level == LOOM_LOG_INFO;
	}
	ck_assert_msg(logged_at(LOOM_LOG_ERROR) == 0, "errors were logged");
	ck_assert_msg(logged_at(LOOM_LOG_WARN) == warnings, "%d warnings logged, expected %d",
		      logged_at(LOOM_LOG_WARN), warnings);
	/* The rejections at info level, and the line naming the backend. */
	ck_assert_msg(logged_at(LOOM_LOG_INFO) == infos + 1, "%d info messages logged, expected %d",
		      logged_at(LOOM_LOG_INFO), infos + 1);
	logged_once("backend: cpu-generic");
	expect_chosen(rt, "cpu-generic");
	loom_runtime_free(rt);
}
END_TEST

/* A broken plugin is passed over under auto, but forcing it is an error
 * that names it and says why, never a silent substitute. */
START_TEST(forcing_a_rejected_plugin_fails_naming_it)
{
	const struct rejection *r = &rejections[_i];
	char yaml[4096], name[128];
	write_broken_yaml(yaml, sizeof(yaml), "registry_force_broken");
	snprintf(name, sizeof(name), "'%s'", r->name);
	start_fails(yaml, r->name, LOOM_ERR_PLUGIN, name, r->why);
}
END_TEST

START_TEST(forcing_an_unlisted_backend_fails_naming_it)
{
	char yaml[4096];
	write_yaml(yaml, sizeof(yaml), "registry_force_unlisted",
		   "backends:\n" REAL("cpu-generic") FORMATS);
	start_fails(yaml, "cuda", LOOM_ERR_PLUGIN, "backend 'cuda' is not listed", yaml);
	/* A format is not a backend, whatever its name. */
	start_fails(yaml, "gguf", LOOM_ERR_PLUGIN, "backend 'gguf' is not listed", yaml);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Falling back when the best backend cannot start                          */

START_TEST(failed_init_falls_back_to_the_next_candidate)
{
	char yaml[4096];
	write_yaml(yaml, sizeof(yaml), "registry_high_score",
		   "backends:\n" FAKE("high-score", "high_score.so") REAL_CPU FORMATS);
	loom_runtime *rt = start_ok(yaml, NULL);

	loom_plugin_info hi = plugin_info(rt, "high-score");
	ck_assert_msg(hi.loaded && hi.score == 1000, "high-score: loaded %d, score %d", hi.loaded, hi.score);
	ck_assert_msg(!hi.chosen, "high-score is chosen though its init failed");
	ck_assert_msg(strstr(hi.why, "init failed: no device") != NULL, "high-score: why \"%s\"", hi.why);
	loom_plugin_info best = best_cpu(rt);
	expect_chosen(rt, best.name);

	int at = logged_once("'high-score' init failed");
	ck_assert_msg(logged.level[at] == LOOM_LOG_WARN && strstr(logged.text[at], "no device") != NULL,
		      "init failure logged at level %d as: %s", logged.level[at], logged.text[at]);
	loom_runtime_free(rt);
}
END_TEST

START_TEST(forcing_a_backend_whose_init_fails_names_it)
{
	char yaml[4096];
	write_yaml(yaml, sizeof(yaml), "registry_force_high_score",
		   "backends:\n" FAKE("high-score", "high_score.so") REAL("cpu-generic") FORMATS);
	start_fails(yaml, "high-score", LOOM_ERR_PLUGIN, "backend 'high-score' cannot be used",
		    "init failed: no device");
}
END_TEST

START_TEST(no_usable_backend_is_an_error)
{
	char yaml[4096];
	write_yaml(yaml, sizeof(yaml), "registry_none_usable",
		   "backends:\n" FAKE("unmet-cpu", "unmet_cpu.so") FAKE("high-score", "high_score.so")
		   FORMATS);
	start_fails(yaml, NULL, LOOM_ERR_PLUGIN, "no usable backend", yaml);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Policy: auto, a name in plugins.yaml, --backend, LOOM_BACKEND            */

/* Listed worst first, so the order of the file cannot be what decides. */
START_TEST(auto_takes_the_highest_score)
{
	char yaml[4096];
	write_yaml(yaml, sizeof(yaml), "registry_auto",
		   "backend: auto\nbackends:\n" REAL("cpu-generic") REAL("cpu-avx2") REAL("cpu-avx512")
		   FORMATS);
	loom_runtime *rt = start_ok(yaml, NULL);

	/* Every variant the CPU has outscores the ones it builds on. */
	loom_plugin_info generic = plugin_info(rt, "cpu-generic");
	loom_plugin_info avx2 = plugin_info(rt, "cpu-avx2");
	loom_plugin_info avx512 = plugin_info(rt, "cpu-avx512");
	ck_assert_msg(generic.loaded && generic.score > 0, "cpu-generic: score %d, why %s", generic.score,
		      generic.why);
	ck_assert_msg(avx2.score == 0 || avx2.score > generic.score, "cpu-avx2 scores %d, cpu-generic %d",
		      avx2.score, generic.score);
	ck_assert_msg(avx512.score == 0 || avx512.score > avx2.score, "cpu-avx512 scores %d, cpu-avx2 %d",
		      avx512.score, avx2.score);
	ck_assert_msg(avx512.score == 0 || avx2.score > 0, "cpu-avx512 usable but cpu-avx2 not: %s",
		      avx2.why);

	loom_plugin_info best = best_cpu(rt);
	expect_chosen(rt, best.name);
	for (size_t i = 0; i < loom_runtime_plugin_count(rt); i++) {
		loom_plugin_info pi;
		ck_assert_int_eq(loom_runtime_plugin_info(rt, i, &pi), LOOM_OK);
		if (pi.kind != LOOM_PLUGIN_BACKEND || pi.chosen)
			continue;
		/* Beaten, or unusable here with the probe's reason. */
		const char *expect = pi.score > 0 ? "scores higher" : "unusable on this machine";
		ck_assert_msg(strstr(pi.why, expect) != NULL, "%s (score %d): why \"%s\", expected \"%s\"",
			      pi.name, pi.score, pi.why, expect);
	}
	loom_runtime_free(rt);
}
END_TEST

#define AMX_ENTRY(option)                                            \
	"  - name: cpu-amx\n"                                         \
	"    file: " LOOM_TEST_PLUGIN_DIR "/loom-cpu-amx.so\n"        \
	"    options: {amx: " option "}\n"

/* On a CPU with AMX (and a kernel that grants the tile state) cpu-amx
 * outscores every other CPU backend and is chosen; elsewhere it scores 0,
 * naming what is missing, and the best of the others is chosen. */
START_TEST(amx_is_chosen_where_the_cpu_has_it)
{
	char yaml[4096];
	write_yaml(yaml, sizeof(yaml), "registry_amx", "backends:\n" AMX_ENTRY("on") REAL_CPU FORMATS);
	loom_runtime *rt = start_ok(yaml, NULL);
	loom_plugin_info amx = plugin_info(rt, "cpu-amx");
	loom_plugin_info others = best_cpu(rt);
	ck_assert_msg(amx.loaded, "cpu-amx did not load: %s", amx.why);
	if (test_cpu_has_amx()) {
		ck_assert_msg(amx.score > others.score, "cpu-amx scores %d (%s) on a CPU with AMX, %s %d",
			      amx.score, amx.why, others.name, others.score);
		expect_chosen(rt, "cpu-amx");
	} else {
		ck_assert_msg(amx.score == 0, "cpu-amx scores %d on a CPU without AMX", amx.score);
		ck_assert_msg(strstr(amx.why, "unusable on this machine: CPU lacks A") != NULL ||
				      strstr(amx.why, "the kernel refuses the AMX tile state") != NULL,
			      "cpu-amx: why \"%s\"", amx.why);
		expect_chosen(rt, others.name);
		printf("cpu-amx on this machine: %s\n", amx.why);
	}
	loom_runtime_free(rt);
}
END_TEST

/* `amx: off` takes the path of a CPU without AMX on any machine: score 0,
 * the reason, an info line rather than a warning, and cpu-avx512 (or the
 * best the CPU has) chosen. */
START_TEST(amx_off_in_plugins_yaml_takes_the_path_without_amx)
{
	char yaml[4096];
	write_yaml(yaml, sizeof(yaml), "registry_amx_off", "backends:\n" AMX_ENTRY("off") REAL_CPU FORMATS);
	loom_runtime *rt = start_ok(yaml, NULL);
	loom_plugin_info amx = plugin_info(rt, "cpu-amx");
	ck_assert_msg(amx.loaded && amx.score == 0 && !amx.chosen, "cpu-amx: loaded %d, score %d, chosen %d",
		      amx.loaded, amx.score, amx.chosen);
	ck_assert_msg(strstr(amx.why, "unusable on this machine: turned off in plugins.yaml (amx: off)") != NULL,
		      "cpu-amx: why \"%s\"", amx.why);
	ck_assert_int_eq(logged_at(LOOM_LOG_WARN), 0);
	expect_chosen(rt, best_cpu(rt).name);
	loom_runtime_free(rt);
}
END_TEST

/* No backend key means auto. */
START_TEST(auto_is_the_default_policy)
{
	char yaml[4096];
	write_yaml(yaml, sizeof(yaml), "registry_default_policy", "backends:\n" REAL_CPU FORMATS);
	loom_runtime *rt = start_ok(yaml, NULL);
	expect_chosen(rt, best_cpu(rt).name);
	loom_runtime_free(rt);
}
END_TEST

START_TEST(a_name_in_plugins_yaml_forces_that_backend)
{
	char yaml[4096];
	write_yaml(yaml, sizeof(yaml), "registry_yaml_forces",
		   "backend: cpu-generic\nbackends:\n" REAL_CPU FORMATS);
	loom_runtime *rt = start_ok(yaml, NULL);
	expect_chosen(rt, "cpu-generic");
	loom_plugin_info best = best_cpu(rt);
	if (strcmp(best.name, "cpu-generic") != 0)
		ck_assert_msg(strstr(best.why, "backend 'cpu-generic' was asked for") != NULL,
			      "%s: why \"%s\"", best.name, best.why);
	loom_runtime_free(rt);
}
END_TEST

/* plugins.yaml forces a backend that cannot run; each override must win over
 * it, which the failure without one proves. */
static const char unusable_policy_yaml[] =
	"backend: unmet-cpu\nbackends:\n" FAKE("unmet-cpu", "unmet_cpu.so") REAL_CPU FORMATS;

START_TEST(a_forced_unusable_backend_is_an_error)
{
	char yaml[4096];
	write_yaml(yaml, sizeof(yaml), "registry_yaml_unusable", unusable_policy_yaml);
	start_fails(yaml, NULL, LOOM_ERR_PLUGIN, "backend 'unmet-cpu' cannot be used", "CPU lacks AVX9000");
}
END_TEST

START_TEST(params_backend_overrides_plugins_yaml)
{
	char yaml[4096];
	write_yaml(yaml, sizeof(yaml), "registry_params_backend", unusable_policy_yaml);
	loom_runtime *rt = start_ok(yaml, "cpu-generic");
	expect_chosen(rt, "cpu-generic");
	loom_runtime_free(rt);
}
END_TEST

START_TEST(env_backend_overrides_plugins_yaml)
{
	char yaml[4096];
	write_yaml(yaml, sizeof(yaml), "registry_env_backend", unusable_policy_yaml);
	setenv("LOOM_BACKEND", "cpu-generic", 1);
	loom_runtime *rt = start_ok(yaml, NULL);
	expect_chosen(rt, "cpu-generic");
	loom_runtime_free(rt);

	/* Forcing through the environment is as strict as any other way. */
	setenv("LOOM_BACKEND", "cuda", 1);
	start_fails(yaml, NULL, LOOM_ERR_PLUGIN, "backend 'cuda' is not listed", yaml);
	unsetenv("LOOM_BACKEND");
}
END_TEST

START_TEST(params_backend_overrides_env)
{
	char yaml[4096];
	write_yaml(yaml, sizeof(yaml), "registry_params_over_env", "backends:\n" REAL_CPU FORMATS);
	setenv("LOOM_BACKEND", "cuda", 1);
	loom_runtime *rt = start_ok(yaml, "cpu-generic");
	expect_chosen(rt, "cpu-generic");
	loom_runtime_free(rt);
	unsetenv("LOOM_BACKEND");
}
END_TEST

/* An empty variable is unset, not a backend named "". */
START_TEST(empty_env_backend_is_ignored)
{
	char yaml[4096];
	write_yaml(yaml, sizeof(yaml), "registry_empty_env",
		   "backend: cpu-generic\nbackends:\n" REAL_CPU FORMATS);
	setenv("LOOM_BACKEND", "", 1);
	loom_runtime *rt = start_ok(yaml, NULL);
	expect_chosen(rt, "cpu-generic");
	loom_runtime_free(rt);
	unsetenv("LOOM_BACKEND");
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Which plugins.yaml: params.plugins_file, LOOM_PLUGINS                     */

START_TEST(env_plugins_names_the_file)
{
	char yaml[4096];
	write_yaml(yaml, sizeof(yaml), "registry_env_plugins",
		   "backends:\n" REAL("cpu-generic") FORMATS);
	setenv("LOOM_PLUGINS", yaml, 1);
	loom_runtime *rt = start_ok(NULL, NULL);
	ck_assert_msg(loom_runtime_plugin_count(rt) == 2, "%zu plugins; the file lists 2",
		      loom_runtime_plugin_count(rt));
	expect_chosen(rt, "cpu-generic");
	loom_runtime_free(rt);

	/* A missing file is an error naming it, not a fallback. */
	strcpy(strrchr(yaml, '/'), "/missing.yaml");
	setenv("LOOM_PLUGINS", yaml, 1);
	start_fails(NULL, NULL, LOOM_ERR_CONFIG, yaml, "cannot open");
	unsetenv("LOOM_PLUGINS");
}
END_TEST

START_TEST(params_plugins_file_overrides_env)
{
	char yaml[4096], missing[4200];
	write_yaml(yaml, sizeof(yaml), "registry_params_plugins",
		   "backends:\n" REAL("cpu-generic") FORMATS);
	snprintf(missing, sizeof(missing), "%s.missing", yaml);
	setenv("LOOM_PLUGINS", missing, 1);
	loom_runtime *rt = start_ok(yaml, NULL);
	expect_chosen(rt, "cpu-generic");
	loom_runtime_free(rt);
	unsetenv("LOOM_PLUGINS");
}
END_TEST

START_TEST(plugin_info_checks_its_arguments)
{
	char yaml[4096];
	loom_plugin_info pi;
	write_yaml(yaml, sizeof(yaml), "registry_info_args", "backends:\n" REAL("cpu-generic") FORMATS);
	loom_runtime *rt = start_ok(yaml, NULL);
	size_t n = loom_runtime_plugin_count(rt);
	ck_assert_int_eq(loom_runtime_plugin_info(rt, n, &pi), LOOM_ERR_INVALID_ARGUMENT);
	ck_assert_int_eq(loom_runtime_plugin_info(rt, 0, NULL), LOOM_ERR_INVALID_ARGUMENT);
	ck_assert_int_eq(loom_runtime_plugin_info(NULL, 0, &pi), LOOM_ERR_INVALID_ARGUMENT);
	ck_assert_uint_eq(loom_runtime_plugin_count(NULL), 0);
	ck_assert_ptr_null(loom_runtime_backend_name(NULL));

	/* The format loaded, with its version, and is never "chosen". */
	pi = plugin_info(rt, "gguf");
	ck_assert_msg(pi.kind == LOOM_PLUGIN_FORMAT && pi.loaded && !pi.chosen && pi.version != NULL,
		      "gguf: kind %d loaded %d chosen %d", pi.kind, pi.loaded, pi.chosen);
	loom_runtime_free(rt);
	loom_runtime_free(NULL);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Models a backend cannot run                                              */

/* plugins.yaml with the picky fake as the only backend, refusing what
 * options say; and a small synthetic llama beside it. */
static void write_picky(char *yaml, size_t yaml_size, char *model, size_t model_size, const char *name,
			const char *options)
{
	char text[4096], dir[4096];
	snprintf(text, sizeof(text),
		 "arch_path: [" LOOM_TEST_SOURCE_DIR "/arch]\nbackend: picky\nbackends:\n" FAKE("picky", "picky.so") "    options: {%s}\n" FORMATS, options);
	write_yaml(yaml, yaml_size, name, text);
	snprintf(dir, sizeof(dir), "%s", yaml);
	*strrchr(dir, '/') = '\0';
	snprintf(model, model_size, "%s/model.gguf", dir);
	synth_config c = synth_default_config();
	synth_model *sm = synth_model_build(&c, NULL);
	synth_model_write(sm, model);
	synth_model_free(sm);
}

static loom_model *load_ok(loom_runtime *rt, const char *path)
{
	loom_model *m = NULL;
	loom_status st = loom_model_load(rt, path, NULL, &m);
	ck_assert_msg(st == LOOM_OK, "%s: %s", path, loom_last_error());
	return m;
}

/* Creating a context must fail naming the op and holding needle. */
static void context_refused(loom_model *m, loom_dtype kv_type, const char *op, const char *needle)
{
	loom_context_params cp = loom_context_default_params();
	cp.n_ctx = 64;
	cp.kv_type = kv_type;
	loom_context *ctx = NULL;
	loom_status st = loom_context_create(m, &cp, &ctx);
	const char *err = loom_last_error();
	char want[128];
	snprintf(want, sizeof(want), "backend picky cannot run %s on ", op);
	ck_assert_msg(st == LOOM_ERR_UNSUPPORTED && ctx == NULL, "context on a backend refusing %s: status %d (%s)", op,
		      st, err);
	ck_assert_msg(strstr(err, want) != NULL, "\"%s\" is not in the error: %s", want, err);
	ck_assert_msg(strstr(err, needle) != NULL, "\"%s\" is not in the error: %s", needle, err);
}

START_TEST(a_step_the_backend_refuses_stops_the_context)
{
	char yaml[4096], model[4200];
	write_picky(yaml, sizeof(yaml), model, sizeof(model), "registry_refuse_rope", "refuse: ROPE");
	loom_runtime *rt = start_ok(yaml, NULL);
	loom_model *m = load_ok(rt, model);
	/* The queries' heads, rotated in place: {head_dim, n_head, tokens}. */
	context_refused(m, LOOM_DTYPE_F16, "ROPE", "positions i32 [1] -> q f32 [16, 4]");
	loom_model_free(m);
	loom_runtime_free(rt);
}
END_TEST

START_TEST(a_cache_type_the_backend_refuses_stops_the_context)
{
	char yaml[4096], model[4200];
	write_picky(yaml, sizeof(yaml), model, sizeof(model), "registry_refuse_f16_cache",
		    "refuse: KV_STORE, refuse_type: f16");
	loom_runtime *rt = start_ok(yaml, NULL);
	loom_model *m = load_ok(rt, model);
	context_refused(m, LOOM_DTYPE_F16, "KV_STORE", "-> k cache f16 [32, 64]");
	loom_context_params cp = loom_context_default_params();
	cp.n_ctx = 64;
	cp.kv_type = LOOM_DTYPE_F32;
	loom_context *ctx = NULL;
	ck_assert_msg(loom_context_create(m, &cp, &ctx) == LOOM_OK, "an f32 cache: %s", loom_last_error());
	loom_context_free(ctx);
	loom_model_free(m);
	loom_runtime_free(rt);
}
END_TEST

START_TEST(a_weight_type_the_backend_refuses_stops_the_load)
{
	char yaml[4096], model[4200];
	write_picky(yaml, sizeof(yaml), model, sizeof(model), "registry_refuse_f32_matmul",
		    "refuse: MATMUL, refuse_type: f32");
	loom_runtime *rt = start_ok(yaml, NULL);
	loom_model *m = NULL;
	loom_status st = loom_model_load(rt, model, NULL, &m);
	ck_assert_msg(st == LOOM_ERR_UNSUPPORTED && m == NULL, "load: status %d (%s)", st, loom_last_error());
	expect_text(loom_last_error(), "tensor 'output.weight' has type f32, which backend picky cannot multiply by",
		    "the load error");
	loom_runtime_free(rt);
}
END_TEST

START_TEST(cli_names_the_op_the_backend_refuses)
{
	char yaml[4096], model[4200], args[8600], out[16384];
	write_picky(yaml, sizeof(yaml), model, sizeof(model), "registry_cli_refuse", "refuse: SWIGLU");
	snprintf(args, sizeof(args), "run -m '%s' -p hi -n 1 --plugins '%s'", model, yaml);
	int status = run_loom(out, sizeof(out), "", args);
	ck_assert_msg(status == 1, "loom %s exited %d, expected 1:\n%s", args, status, out);
	expect_text(out, "backend picky cannot run SWIGLU on gate f32 [160], up f32 [160] -> gate f32 [160]",
		    "loom run on a backend refusing SWIGLU");
}
END_TEST

/* llama.cpp's -ngl: 0 takes a backend that computes in host memory, a
 * count of the model's layers or more one with a device of its own, even
 * where it scores lower; a count below the model's layers asks for a split
 * loom does not make, and is refused with the reason; a forced backend
 * that computes elsewhere is an error. */
START_TEST(cli_ngl_chooses_where_to_compute)
{
	char yaml[4096], model[4200], args[8600], out[16384];
	char text[4096], dir[4096];
	snprintf(text, sizeof(text),
		 "arch_path: [" LOOM_TEST_SOURCE_DIR "/arch]\nbackend: auto\nbackends:\n" FAKE("picky", "picky.so")
		 "    options: {refuse: SWIGLU}\n" REAL("cpu-generic") FORMATS);
	write_yaml(yaml, sizeof(yaml), "registry_cli_ngl", text);
	snprintf(dir, sizeof(dir), "%s", yaml);
	*strrchr(dir, '/') = '\0';
	snprintf(model, sizeof(model), "%s/model.gguf", dir);
	synth_config c = synth_default_config();
	synth_model *sm = synth_model_build(&c, NULL);
	synth_model_write(sm, model);
	synth_model_free(sm);

	/* picky scores below cpu-generic, but is the one device backend: -ngl
	 * 99 takes it (and it refuses the model, which shows it was taken). */
	snprintf(args, sizeof(args), "run -m '%s' -p hi -n 1 -ngl 99 --plugins '%s'", model, yaml);
	ck_assert_int_eq(run_loom(out, sizeof(out), "", args), 1);
	expect_text(out, "backend picky cannot run SWIGLU", "loom run -ngl 99");

	snprintf(args, sizeof(args), "run -m '%s' -p hi -n 1 -ngl 0 -v --plugins '%s'", model, yaml);
	int status = run_loom(out, sizeof(out), "", args);
	ck_assert_msg(status == 0, "loom %s exited %d:\n%s", args, status, out);
	expect_text(out, "backend: cpu-generic", "loom run -ngl 0");

	snprintf(args, sizeof(args), "run -m '%s' -p hi -n 1 -ngl 1 --plugins '%s'", model, yaml);
	ck_assert_int_eq(run_loom(out, sizeof(out), "", args), 1);
	expect_text(out, "-ngl 1 asks for 1 of the model's 2 layers on the GPU", "loom run -ngl 1");

	snprintf(args, sizeof(args), "run -m '%s' -p hi -n 1 -ngl 99 --backend cpu-generic --plugins '%s'", model, yaml);
	ck_assert_int_eq(run_loom(out, sizeof(out), "", args), 1);
	expect_text(out, "backend 'cpu-generic' computes in host memory (a CPU backend); one that computes on a device",
		    "loom run -ngl 99 --backend cpu-generic");
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Models and contexts the device has no room for                           */

START_TEST(a_model_larger_than_the_device_is_refused)
{
	char yaml[4096], model[4200];
	write_picky(yaml, sizeof(yaml), model, sizeof(model), "registry_small_device", "free_kib: 1");
	loom_runtime *rt = start_ok(yaml, NULL);
	loom_model *m = NULL;
	loom_status st = loom_model_load(rt, model, NULL, &m);
	ck_assert_msg(st == LOOM_ERR_NO_MEMORY && m == NULL, "load: status %d (%s)", st, loom_last_error());
	expect_text(loom_last_error(), "the weights need ", "the load error");
	expect_text(loom_last_error(), "MiB of device memory; picky device has 0.0 MiB free of 0.0 MiB",
		    "the load error");
	loom_runtime_free(rt);
}
END_TEST

START_TEST(a_context_larger_than_the_device_is_refused)
{
	char yaml[4096], model[4200];
	write_picky(yaml, sizeof(yaml), model, sizeof(model), "registry_small_context", "free_kib: 4096");
	loom_runtime *rt = start_ok(yaml, NULL);
	loom_model *m = load_ok(rt, model);
	loom_context_params cp = loom_context_default_params();
	loom_context *ctx = NULL;
	cp.n_ctx = 64;
	ck_assert_msg(loom_context_create(m, &cp, &ctx) == LOOM_OK, "64 cells: %s", loom_last_error());
	loom_context_free(ctx);
	/* Its mask alone is 512 rows of 8192 cells: 16 MiB. */
	cp.n_ctx = 8192;
	loom_status st = loom_context_create(m, &cp, &ctx);
	ck_assert_msg(st == LOOM_ERR_NO_MEMORY && ctx == NULL, "8192 cells: status %d (%s)", st, loom_last_error());
	expect_text(loom_last_error(), "a context of 8192 cells (KV cache ", "the context error");
	expect_text(loom_last_error(), "picky device has 4.0 MiB free of 8.0 MiB", "the context error");
	loom_model_free(m);
	loom_runtime_free(rt);
}
END_TEST

/* A device with room for the context's buffers but not for the work
 * memory of its largest step refuses the context when it is made (the
 * backend's reserve slot, asked for a full batch), not at that step. */
START_TEST(a_context_without_room_for_its_work_memory_is_refused)
{
	char yaml[4096], model[4200];
	write_picky(yaml, sizeof(yaml), model, sizeof(model), "registry_small_work", "free_kib: 4096, work_kib: 16");
	loom_runtime *rt = start_ok(yaml, NULL);
	loom_model *m = load_ok(rt, model);
	loom_context_params cp = loom_context_default_params();
	loom_context *ctx = NULL;
	cp.n_ctx = 512;
	cp.n_batch = 64;
	ck_assert_msg(loom_context_create(m, &cp, &ctx) == LOOM_OK, "batches of 64: %s", loom_last_error());
	loom_context_free(ctx);
	cp.n_batch = 512;
	loom_status st = loom_context_create(m, &cp, &ctx);
	ck_assert_msg(st == LOOM_ERR_NO_MEMORY && ctx == NULL, "batches of 512: status %d (%s)", st, loom_last_error());
	expect_text(loom_last_error(), "a context of 512 cells with batches of 512 tokens", "the context error");
	expect_text(loom_last_error(), "backend picky: reserving memory for a step", "the context error");
	expect_text(loom_last_error(), "picky: no room for the work memory of a 512-token step", "the context error");
	loom_model_free(m);
	loom_runtime_free(rt);
}
END_TEST

/* loom_runtime_device and `loom info --plugins` describe a backend's
 * device; a CPU backend has none. */
START_TEST(the_device_is_described)
{
	char yaml[4096], model[4200], args[8600], out[16384];
	write_picky(yaml, sizeof(yaml), model, sizeof(model), "registry_device", "free_kib: 4096");
	loom_runtime *rt = start_ok(yaml, NULL);
	loom_device_info dev;
	ck_assert_int_eq(loom_runtime_device(rt, &dev), LOOM_OK);
	ck_assert_str_eq(dev.name, "picky device");
	ck_assert(dev.memory_free == 4096 << 10 && dev.memory_total == 8192 << 10);
	loom_runtime_free(rt);
	snprintf(args, sizeof(args), "info --plugins --plugins '%s'", yaml);
	int status = run_loom(out, sizeof(out), "", args);
	ck_assert_msg(status == 0, "loom %s exited %d:\n%s", args, status, out);
	expect_text(out, "device: picky device, 4 MiB free of 8 MiB", "loom info --plugins");

	write_yaml(yaml, sizeof(yaml), "registry_no_device", "backends:\n" REAL("cpu-generic") FORMATS);
	rt = start_ok(yaml, NULL);
	ck_assert_int_eq(loom_runtime_device(rt, &dev), LOOM_ERR_UNSUPPORTED);
	loom_runtime_free(rt);
}
END_TEST

START_TEST(a_format_without_a_contract_section_is_inspected_not_run)
{
	char yaml[4096], dir[4096], model[4200];
	write_yaml(yaml, sizeof(yaml), "registry_sectionless",
		   "arch_path: [" LOOM_TEST_SOURCE_DIR "/arch]\nbackends:\n" REAL("cpu-generic")
		   "formats:\n" FAKE("sectionless", "sectionless.so"));
	snprintf(dir, sizeof(dir), "%s", yaml);
	*strrchr(dir, '/') = '\0';
	test_write_file(model, sizeof(model), dir, "model.sectionless", "any bytes\n");
	loom_runtime *rt = start_ok(yaml, NULL);
	loom_model_params mp = loom_model_default_params();
	mp.metadata_only = true;
	loom_model *m = NULL;
	ck_assert_msg(loom_model_load(rt, model, &mp, &m) == LOOM_OK, "inspecting: %s", loom_last_error());
	ck_assert_str_eq(loom_model_architecture(m), "llama");
	ck_assert_str_eq(loom_model_format(m), "sectionless");
	loom_model_free(m);
	m = NULL;
	loom_status st = loom_model_load(rt, model, NULL, &m);
	ck_assert_msg(st == LOOM_ERR_UNSUPPORTED && m == NULL, "running: status %d (%s)", st, loom_last_error());
	expect_text(loom_last_error(), "format sectionless names no contract section", "the load error");
	loom_runtime_free(rt);
}
END_TEST

/* loom convert writes GGUF through whichever format plugin declares the
 * contracts' gguf section and can write: with none listed, it says so. */
START_TEST(convert_needs_a_plugin_that_writes_the_gguf_section)
{
	char yaml[4096], model[4096], out[4200];
	if (!test_data_path(model, sizeof(model), "models/stories260K-hf"))
		return;
	write_yaml(yaml, sizeof(yaml), "registry_no_writer",
		   "arch_path: [" LOOM_TEST_SOURCE_DIR "/arch]\nbackends:\n" REAL("cpu-generic")
		   "formats:\n" REAL("safetensors"));
	snprintf(out, sizeof(out), "%s", yaml);
	snprintf(strrchr(out, '/'), sizeof(out) - (size_t)(strrchr(out, '/') - out), "/out.gguf");
	loom_runtime *rt = start_ok(yaml, NULL);
	loom_status st = loom_convert(rt, model, out, NULL);
	ck_assert_msg(st == LOOM_ERR_UNSUPPORTED, "convert: status %d (%s)", st, loom_last_error());
	expect_text(loom_last_error(), "no usable format plugin writes gguf files", "the convert error");
	loom_runtime_free(rt);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* The loom command                                                         */

START_TEST(cli_lists_plugins_with_reasons)
{
	char yaml[4096], args[4400], out[16384];
	write_broken_yaml(yaml, sizeof(yaml), "registry_cli_list");
	snprintf(args, sizeof(args), "info --plugins --plugins '%s'", yaml);
	int status = run_loom(out, sizeof(out), "", args);
	ck_assert_msg(status == 0, "loom %s exited %d:\n%s", args, status, out);
	expect_text(out, "chose backend: cpu-generic", "the plugin table");
	for (int i = 0; i < N_REJECTIONS; i++) {
		expect_text(out, rejections[i].name, "the plugin table");
		expect_text(out, rejections[i].why, "the plugin table");
	}
}
END_TEST

START_TEST(cli_backend_flag_and_env_force_a_backend)
{
	char yaml[4096], args[4400], out[16384];
	write_yaml(yaml, sizeof(yaml), "registry_cli_backend", unusable_policy_yaml);

	snprintf(args, sizeof(args), "info --plugins --plugins '%s' --backend cpu-generic", yaml);
	int status = run_loom(out, sizeof(out), "", args);
	ck_assert_msg(status == 0, "loom %s exited %d:\n%s", args, status, out);
	expect_text(out, "chose backend: cpu-generic", "loom --backend cpu-generic");

	snprintf(args, sizeof(args), "info --plugins --plugins '%s'", yaml);
	status = run_loom(out, sizeof(out), "LOOM_BACKEND=cpu-generic", args);
	ck_assert_msg(status == 0, "LOOM_BACKEND=cpu-generic loom %s exited %d:\n%s", args, status, out);
	expect_text(out, "chose backend: cpu-generic", "LOOM_BACKEND=cpu-generic loom");

	/* Without an override the file's unusable choice stands, and fails. */
	status = run_loom(out, sizeof(out), "", args);
	ck_assert_msg(status == 1, "loom %s exited %d, expected 1:\n%s", args, status, out);
	expect_text(out, "backend 'unmet-cpu' cannot be used", "loom with an unusable forced backend");
}
END_TEST

START_TEST(cli_env_plugins_names_the_file)
{
	char yaml[4096], env[4400], out[16384];
	write_yaml(yaml, sizeof(yaml), "registry_cli_env_plugins",
		   "backend: cpu-generic\nbackends:\n" REAL("cpu-generic") FORMATS);
	snprintf(env, sizeof(env), "LOOM_PLUGINS='%s'", yaml);
	int status = run_loom(out, sizeof(out), env, "info --plugins");
	ck_assert_msg(status == 0, "%s loom info --plugins exited %d:\n%s", env, status, out);
	expect_text(out, "chose backend: cpu-generic", "loom info --plugins");
	expect_text(out, LOOM_TEST_PLUGIN_DIR "/loom-gguf.so", "loom info --plugins");
}
END_TEST

/* Exit status 1 and one line saying where the file is broken. */
START_TEST(cli_broken_plugins_yaml_is_one_line)
{
	static const char text[] = "backends:\n  - name: cpu-generic\n   file: x.so\n" FORMATS;
	char yaml[4096], args[4400], out[16384], where[4200];
	write_yaml(yaml, sizeof(yaml), "registry_cli_broken", text);
	snprintf(args, sizeof(args), "info --plugins --plugins '%s'", yaml);
	int status = run_loom(out, sizeof(out), "", args);
	ck_assert_msg(status == 1, "loom %s exited %d, expected 1:\n%s", args, status, out);
	ck_assert_msg(strncmp(out, "loom: ", 6) == 0, "the message does not start with \"loom: \":\n%s", out);
	char *nl = strchr(out, '\n');
	ck_assert_msg(nl != NULL && nl[1] == '\0', "expected exactly one line:\n%s", out);
	snprintf(where, sizeof(where), "%s:%d:", yaml, test_line_of(text, "   file"));
	expect_text(out, where, "the message");
}
END_TEST

static Suite *registry_suite(void)
{
	Suite *s = suite_create("registry");
	TCase *tc;

	tc = tcase_create("rejections");
	tcase_add_checked_fixture(tc, clear_env, NULL);
	tcase_add_loop_test(tc, broken_plugin_is_rejected_with_its_reason, 0, N_REJECTIONS);
	tcase_add_test(tc, reasons_carry_their_details);
	tcase_add_test(tc, each_rejection_is_logged_once);
	tcase_add_loop_test(tc, forcing_a_rejected_plugin_fails_naming_it, 0, N_REJECTIONS);
	tcase_add_test(tc, forcing_an_unlisted_backend_fails_naming_it);
	tcase_add_test(tc, failed_init_falls_back_to_the_next_candidate);
	tcase_add_test(tc, forcing_a_backend_whose_init_fails_names_it);
	tcase_add_test(tc, no_usable_backend_is_an_error);
	suite_add_tcase(s, tc);

	tc = tcase_create("policy");
	tcase_add_checked_fixture(tc, clear_env, NULL);
	tcase_add_test(tc, auto_takes_the_highest_score);
	tcase_add_test(tc, auto_is_the_default_policy);
	tcase_add_test(tc, amx_is_chosen_where_the_cpu_has_it);
	tcase_add_test(tc, amx_off_in_plugins_yaml_takes_the_path_without_amx);
	tcase_add_test(tc, a_name_in_plugins_yaml_forces_that_backend);
	tcase_add_test(tc, a_forced_unusable_backend_is_an_error);
	tcase_add_test(tc, params_backend_overrides_plugins_yaml);
	tcase_add_test(tc, env_backend_overrides_plugins_yaml);
	tcase_add_test(tc, params_backend_overrides_env);
	tcase_add_test(tc, empty_env_backend_is_ignored);
	tcase_add_test(tc, env_plugins_names_the_file);
	tcase_add_test(tc, params_plugins_file_overrides_env);
	tcase_add_test(tc, plugin_info_checks_its_arguments);
	suite_add_tcase(s, tc);

	tc = tcase_create("cli");
	tcase_add_checked_fixture(tc, clear_env, NULL);
	tcase_add_test(tc, cli_lists_plugins_with_reasons);
	tcase_add_test(tc, cli_backend_flag_and_env_force_a_backend);
	tcase_add_test(tc, cli_env_plugins_names_the_file);
	tcase_add_test(tc, cli_broken_plugins_yaml_is_one_line);
	tcase_add_test(tc, cli_names_the_op_the_backend_refuses);
	tcase_add_test(tc, cli_ngl_chooses_where_to_compute);
	suite_add_tcase(s, tc);

	tc = tcase_create("refusals");
	tcase_add_checked_fixture(tc, clear_env, NULL);
	tcase_add_test(tc, a_step_the_backend_refuses_stops_the_context);
	tcase_add_test(tc, a_cache_type_the_backend_refuses_stops_the_context);
	tcase_add_test(tc, a_weight_type_the_backend_refuses_stops_the_load);
	tcase_add_test(tc, a_format_without_a_contract_section_is_inspected_not_run);
	tcase_add_test(tc, convert_needs_a_plugin_that_writes_the_gguf_section);
	tcase_add_test(tc, a_model_larger_than_the_device_is_refused);
	tcase_add_test(tc, a_context_larger_than_the_device_is_refused);
	tcase_add_test(tc, a_context_without_room_for_its_work_memory_is_refused);
	tcase_add_test(tc, the_device_is_described);
	suite_add_tcase(s, tc);
	return s;
}

LOOM_TEST_MAIN(registry_suite)
