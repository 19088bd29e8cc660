/* run_cmd.h - run a command line, capturing its output and exit status. */
#ifndef LOOM_TEST_RUN_CMD_H
#define LOOM_TEST_RUN_CMD_H

typedef struct cmd_result {
	char *out;   /* standard output (malloc'd, NUL-terminated) */
	char *err;   /* standard error */
	int status;  /* exit status; 128 + N if killed by signal N */
} cmd_result;

/* Runs `sh -c cmdline` (printf-style), the loom binary of the build tree
 * being available as $LOOM. */
cmd_result run_cmd(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void cmd_result_free(cmd_result *r);

/* Installs the build tree into dir/staged (cmake --install): the files a
 * user of the installed loom has, not the build tree's. */
void test_install(const char *dir);

#endif
