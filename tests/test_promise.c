/* test_promise.c - loom's promise that a model family is a YAML file, not C
 * and not a rebuild: a shipped contract copied under an architecture name
 * no contract has, into a fresh directory, runs a model renamed to that
 * architecture on the installed binaries exactly as the original runs;
 * and a contract with a mistake stops the load with its file and line. */
#include "check_main.h"
#include "fixture.h"
#include "golden.h"
#include "run_cmd.h"
#include "testdata.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The family the test renames, and the names it gives it: as long as the
 * original, so that the file is rewritten in place. */
#define FAMILY "gemma"
#define NEW_NAME "ember"
#define BROKEN_NAME "embar"

/* ---- renaming a GGUF file's architecture -------------------------------- */

typedef struct cursor {
	uint8_t *p, *end;
} cursor;

/* The next n (at most 8) bytes as a little-endian number. */
static uint64_t take(cursor *c, size_t n)
{
	uint64_t v = 0;
	ck_assert_msg(n <= sizeof(v) && c->end - c->p >= (ptrdiff_t)n, "GGUF metadata runs past the file");
	memcpy(&v, c->p, n);
	c->p += n;
	return v;
}

/* A GGUF string: its bytes stay where they are; *len gets the length. */
static uint8_t *take_string(cursor *c, uint64_t *len)
{
	*len = take(c, 8);
	ck_assert_msg((uint64_t)(c->end - c->p) >= *len, "GGUF string runs past the file");
	uint8_t *s = c->p;
	c->p += *len;
	return s;
}

/* Bytes of one value of a fixed-size GGUF type; 0 for strings and arrays. */
static size_t scalar_bytes(uint32_t type)
{
	static const size_t bytes[] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};
	ck_assert_msg(type < sizeof(bytes) / sizeof(bytes[0]), "GGUF value type %u", type);
	return bytes[type];
}

static void skip_value(cursor *c, uint32_t type)
{
	uint64_t len;
	if (type == 8) {
		take_string(c, &len);
	} else if (type == 9) {
		uint32_t item = (uint32_t)take(c, 4);
		uint64_t n = take(c, 8);
		for (uint64_t i = 0; i < n; i++)
			skip_value(c, item);
	} else {
		take(c, scalar_bytes(type));
	}
}

/* Rewrites, in place, general.architecture and every key under "from."
 * to the same-length name `to`; returns how many keys were renamed. */
static int rename_arch(uint8_t *file, size_t size, const char *from, const char *to)
{
	size_t n = strlen(from);
	cursor c = {file, file + size};
	ck_assert_msg(strlen(to) == n && size > 24 && memcmp(file, "GGUF", 4) == 0, "not a GGUF file");
	take(&c, 4); /* magic */
	take(&c, 4); /* version */
	take(&c, 8); /* tensor count */
	uint64_t n_kv = take(&c, 8);
	int renamed = 0;
	for (uint64_t i = 0; i < n_kv; i++) {
		uint64_t klen, vlen;
		uint8_t *key = take_string(&c, &klen);
		uint32_t type = (uint32_t)take(&c, 4);
		if (klen > n && memcmp(key, from, n) == 0 && key[n] == '.') {
			memcpy(key, to, n);
			renamed++;
		}
		if (type == 8 && klen == 20 && memcmp(key, "general.architecture", 20) == 0) {
			uint8_t *v = take_string(&c, &vlen);
			ck_assert_msg(vlen == n && memcmp(v, from, n) == 0, "the model is not %s", from);
			memcpy(v, to, n);
			continue;
		}
		skip_value(&c, type);
	}
	return renamed;
}

/* dir/name: the model file under models/, renamed to architecture to. */
static void write_renamed(const char *model, const char *dir, const char *name, const char *to, char *path,
			  size_t size)
{
	size_t bytes;
	uint8_t *file = test_read_file(model, &bytes);
	ck_assert_msg(file != NULL, "cannot read %s", model);
	ck_assert_msg(rename_arch(file, bytes, FAMILY, to) >= 5, "%s: too few %s.* keys", model, FAMILY);
	snprintf(path, size, "%s/%s", dir, name);
	FILE *f = fopen(path, "wb");
	ck_assert_msg(f != NULL && fwrite(file, 1, bytes, f) == bytes && fclose(f) == 0, "cannot write %s", path);
	free(file);
}

/* ---- the installed tree ---------------------------------------------------- */

/* A plugins.yaml with the installed plugins and only `arch_dir` as the
 * arch path. */
static void write_plugins_yaml(const char *dir, const char *arch_dir, char *path, size_t size)
{
	char text[4096];
	snprintf(text, sizeof(text),
		 "search_path: [%s/staged/lib/loom/plugins]\n"
		 "arch_path: [%s]\n"
		 "backend: auto\n"
		 "backends:\n"
		 "  - name: cpu-avx512\n    file: loom-cpu-avx512.so\n"
		 "  - name: cpu-avx2\n    file: loom-cpu-avx2.so\n"
		 "  - name: cpu-generic\n    file: loom-cpu-generic.so\n"
		 "formats:\n"
		 "  - name: gguf\n    file: loom-gguf.so\n",
		 dir, arch_dir);
	test_write_file(path, size, dir, "plugins.yaml", text);
}

/* The installed contract of FAMILY, its name changed to name, and one
 * edit (from -> to) if from is not NULL, written to arch_dir/name.yaml. */
static void copy_contract(const char *dir, const char *arch_dir, const char *name, const char *from,
			  const char *to)
{
	char src[4096], out[8192], path[4200];
	snprintf(src, sizeof(src), "%s/staged/share/loom/arch/%s.yaml", dir, FAMILY);
	char *text = test_read_file(src, NULL);
	ck_assert_msg(text != NULL, "the installed tree has no %s", src);
	char *at = strstr(text, "name: " FAMILY "\n");
	ck_assert_msg(at != NULL, "%s has no 'name: %s' line", src, FAMILY);
	snprintf(out, sizeof(out), "%.*sname: %s\n%s", (int)(at - text), text, name, at + strlen("name: " FAMILY "\n"));
	if (from != NULL) {
		char *edit = strstr(out, from);
		ck_assert_msg(edit != NULL, "'%s' is not in %s", from, src);
		char tail[8192];
		snprintf(tail, sizeof(tail), "%s", edit + strlen(from));
		snprintf(edit, sizeof(out) - (size_t)(edit - out), "%s%s", to, tail);
	}
	char file[256];
	snprintf(file, sizeof(file), "%s.yaml", name);
	test_write_file(path, sizeof(path), arch_dir, file, out);
	free(text);
}

/* The greedy continuation the reference recorded, as text. */
static void reference_text(const golden_case *g, const char *model_file, char *text, size_t size)
{
	loom_runtime *rt = test_runtime(NULL, 1);
	ck_assert_msg(rt != NULL, "no runtime");
	loom_model *m = test_model(rt, model_file);
	ck_assert_msg(m != NULL, "cannot load %s", model_file);
	size_t len = 0, n;
	for (int i = 0; i < g->n_greedy; i++) {
		ck_assert(loom_token_to_piece(m, g->greedy[i], false, text + len, size - len - 1, &n) == LOOM_OK);
		len += n;
	}
	text[len] = '\0';
	loom_model_free(m);
	loom_runtime_free(rt);
}

START_TEST(copied_contract_runs_a_renamed_model)
{
	char model[4096], renamed[4200], arch_dir[4200], plugins[4200], expected[4096];
	if (!test_data_path(model, sizeof(model), "models/synthetic/" FAMILY "-f32.gguf"))
		return;
	golden_case g;
	ck_assert(golden_load("synthetic/" FAMILY "-f32", "once", &g));
	reference_text(&g, "synthetic/" FAMILY "-f32.gguf", expected, sizeof(expected));

	const char *dir = test_tmp_dir("promise");
	test_install(dir);
	snprintf(arch_dir, sizeof(arch_dir), "%s/arch", dir);
	cmd_result r = run_cmd("mkdir -p %s", arch_dir);
	cmd_result_free(&r);
	copy_contract(dir, arch_dir, NEW_NAME, NULL, NULL);
	write_renamed(model, dir, NEW_NAME ".gguf", NEW_NAME, renamed, sizeof(renamed));
	write_plugins_yaml(dir, arch_dir, plugins, sizeof(plugins));

	r = run_cmd("cd / && unset LOOM_PLUGINS LOOM_BACKEND && %s/staged/bin/loom run -m %s -p '%s' -n %d --temp 0 "
		    "--kv-type f32 --plugins %s",
		    dir, renamed, g.prompt, g.n_greedy, plugins);
	ck_assert_msg(r.status == 0, "installed loom on the renamed model: exit %d: %s", r.status, r.err);
	char want[4200];
	snprintf(want, sizeof(want), "%s\n", expected);
	ck_assert_msg(strcmp(r.out, want) == 0, "renamed model: output\n  '%s'\nexpected (the reference's greedy)\n  '%s'",
		      r.out, want);
	cmd_result_free(&r);

	/* Without the contract the architecture is unknown: the run used it. */
	r = run_cmd("cd / && %s/staged/bin/loom run -m %s -p x -n 1 --plugins %s/staged/etc/loom/plugins.yaml", dir,
		    renamed, dir);
	ck_assert_msg(r.status == 1 && strstr(r.err, "no contract for architecture '" NEW_NAME "'") != NULL,
		      "without the copied contract: exit %d: %s", r.status, r.err);
	cmd_result_free(&r);
	golden_free(&g);
}
END_TEST

/* The same with a mistake in the copy: an activation the FFN kind does not
 * take. The installed loom names the contract file and the line. */
START_TEST(broken_copy_names_file_and_line)
{
	char model[4096], renamed[4200], arch_dir[4200], plugins[4200], contract[4400];
	if (!test_data_path(model, sizeof(model), "models/synthetic/" FAMILY "-f32.gguf"))
		return;
	const char *dir = test_tmp_dir("promise_broken");
	test_install(dir);
	snprintf(arch_dir, sizeof(arch_dir), "%s/arch", dir);
	cmd_result r = run_cmd("mkdir -p %s", arch_dir);
	cmd_result_free(&r);
	copy_contract(dir, arch_dir, BROKEN_NAME, "activation: gelu_tanh", "activation: silu");
	write_renamed(model, dir, BROKEN_NAME ".gguf", BROKEN_NAME, renamed, sizeof(renamed));
	write_plugins_yaml(dir, arch_dir, plugins, sizeof(plugins));

	snprintf(contract, sizeof(contract), "%s/" BROKEN_NAME ".yaml", arch_dir);
	char *text = test_read_file(contract, NULL);
	char where[4500];
	snprintf(where, sizeof(where), "%s:%d: activation: geglu's activation is gelu or gelu_tanh", contract,
		 test_line_of(text, "activation: silu"));
	free(text);

	r = run_cmd("cd / && %s/staged/bin/loom run -m %s -p x -n 1 --plugins %s", dir, renamed, plugins);
	ck_assert_msg(r.status == 1, "exit %d, expected 1: %s", r.status, r.err);
	ck_assert_msg(strstr(r.err, where) != NULL, "the error does not say '%s':\n%s", where, r.err);
	cmd_result_free(&r);
}
END_TEST

static Suite *promise_suite(void)
{
	Suite *s = suite_create("promise");
	TCase *tc = tcase_create("promise");
	tcase_set_timeout(tc, 300);
	tcase_add_test(tc, copied_contract_runs_a_renamed_model);
	tcase_add_test(tc, broken_copy_names_file_and_line);
	suite_add_tcase(s, tc);
	return s;
}

LOOM_TEST_MAIN(promise_suite)
