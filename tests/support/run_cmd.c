/* run_cmd.c - run a command line, capturing its output and exit status. */
#include "run_cmd.h"

#include "testdata.h"

#include <check.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

cmd_result run_cmd(const char *fmt, ...)
{
	static int serial;
	char cmd[8192], line[16384], out_path[256], err_path[256];
	cmd_result r = {0};
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(cmd, sizeof(cmd), fmt, ap);
	va_end(ap);
	snprintf(out_path, sizeof(out_path), "/tmp/loom-test-%d-%d.out", (int)getpid(), serial);
	snprintf(err_path, sizeof(err_path), "/tmp/loom-test-%d-%d.err", (int)getpid(), serial++);
	snprintf(line, sizeof(line), "LOOM=%s/loom; export LOOM; (%s) >%s 2>%s", LOOM_TEST_BUILD_DIR, cmd, out_path,
		 err_path);
	int st = system(line);
	ck_assert_msg(st != -1, "cannot run: %s", cmd);
	r.status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
	r.out = test_read_file(out_path, NULL);
	r.err = test_read_file(err_path, NULL);
	unlink(out_path);
	unlink(err_path);
	if (r.out == NULL)
		r.out = strdup("");
	if (r.err == NULL)
		r.err = strdup("");
	return r;
}

void cmd_result_free(cmd_result *r)
{
	free(r->out);
	free(r->err);
	r->out = r->err = NULL;
}

void test_install(const char *dir)
{
	cmd_result r = run_cmd("cmake --install %s --prefix %s/staged >/dev/null", LOOM_TEST_BUILD_DIR, dir);
	ck_assert_msg(r.status == 0, "install: %s", r.err);
	cmd_result_free(&r);
}
