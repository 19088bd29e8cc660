/*
 * test_memory.c - a model is resident once: after a backend repacks the
 * weights into its own layouts, the file's pages they came from are no
 * longer part of the process, so a model whose file fits in memory runs.
 *
 * A synthetic Q8_0 model of about 60 MB is written and loaded on each CPU
 * backend; the process's resident memory (VmRSS, RssFile from
 * /proc/self/status) is read before and after. Without the release the
 * repacked weights would be resident twice (the copy and the file's pages),
 * about twice the file's size.
 */
#include "check_main.h"
#include "fixture.h"
#include "synth_model.h"
#include "testdata.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define UNDER_ASAN 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__)
#define UNDER_ASAN 1
#endif
#ifndef UNDER_ASAN
#define UNDER_ASAN 0
#endif

#define MIB (1024.0 * 1024.0)

typedef struct resident {
	double total, file; /* bytes */
} resident;

static resident resident_now(void)
{
	resident r = {0, 0};
	FILE *f = fopen("/proc/self/status", "r");
	char line[256];
	ck_assert(f != NULL);
	while (fgets(line, sizeof(line), f)) {
		long kb;
		if (sscanf(line, "VmRSS: %ld kB", &kb) == 1)
			r.total = kb * 1024.0;
		else if (sscanf(line, "RssFile: %ld kB", &kb) == 1)
			r.file = kb * 1024.0;
	}
	fclose(f);
	return r;
}

typedef struct log_capture {
	int repacked; /* weights the backend said it repacked */
} log_capture;

static void capture(void *user, loom_log_level level, const char *msg)
{
	log_capture *c = user;
	int n;
	(void)level;
	const char *at = strstr(msg, " repacked ");
	if (at != NULL && sscanf(at, " repacked %d weights", &n) == 1)
		c->repacked = n;
}

static const char *big_model(void)
{
	static char path[4096];
	if (path[0] != '\0')
		return path;
	synth_config c = synth_default_config();
	c.n_vocab = 4096;
	c.n_embd = 1024;
	c.n_layer = 4;
	c.n_head = 16;
	c.n_head_kv = 16;
	c.n_ff = 2816;
	c.weight_type = LOOM_DTYPE_Q8_0;
	synth_model *sm = synth_model_build(&c, NULL);
	snprintf(path, sizeof(path), "%s/big-q8_0.gguf", test_tmp_dir("memory"));
	ck_assert(synth_model_write(sm, path));
	synth_model_free(sm);
	return path;
}

START_TEST(repacked_weights_are_resident_once)
{
	const char *backend = test_cpu_backends[_i];
	if (UNDER_ASAN) {
		printf("SKIP: resident memory under AddressSanitizer counts its shadow too\n");
		return;
	}
	const char *path = big_model();
	struct stat st;
	ck_assert(stat(path, &st) == 0);
	const double file = (double)st.st_size;

	log_capture log = {0};
	loom_runtime_params p = loom_runtime_default_params();
	p.plugins_file = test_plugins_file();
	p.backend = backend;
	p.n_threads = 2;
	p.log_level = LOOM_LOG_INFO;
	p.log_fn = capture;
	p.log_user = &log;
	loom_runtime *rt = NULL;
	loom_status s = loom_runtime_create(&p, &rt);
	if (s == LOOM_ERR_PLUGIN && strstr(loom_last_error(), "unusable on this machine")) {
		printf("SKIP: backend %s: %s\n", backend, loom_last_error());
		return;
	}
	ck_assert_msg(s == LOOM_OK, "%s", loom_last_error());

	resident before = resident_now();
	loom_model *m = NULL;
	ck_assert_msg(loom_model_load(rt, path, NULL, &m) == LOOM_OK, "%s", loom_last_error());
	resident loaded = resident_now();
	loom_context *ctx = test_context(m, 256, 64, LOOM_DTYPE_F16);
	loom_token toks[16];
	for (int i = 0; i < 16; i++)
		toks[i] = 300 + 7 * i;
	loom_batch b = {.n_tokens = 16, .tokens = toks};
	ck_assert_msg(loom_decode(ctx, &b) == LOOM_OK, "%s", loom_last_error());
	resident ran = resident_now();

	double grew = loaded.total - before.total, file_pages = loaded.file - before.file;
	printf("memory %-12s file %.1f MiB, %d weights repacked: load +%.1f MiB resident (+%.1f MiB of file pages), "
	       "after a step +%.1f MiB\n",
	       backend, file / MIB, log.repacked, grew / MIB, file_pages / MIB, (ran.total - before.total) / MIB);
	/* Weights used in place are resident through the file, repacked ones
	 * through their copy: either way once. The embedding table is used in
	 * place and read a row at a time, so little of it is resident. */
	ck_assert_msg(grew <= 1.05 * file + 4 * MIB, "%s: loading a %.1f MiB file made %.1f MiB resident", backend,
		      file / MIB, grew / MIB);
	if (log.repacked > 0)
		ck_assert_msg(file_pages <= 0.1 * file, "%s: %.1f MiB of the file's pages stay resident after %d weights were repacked",
			      backend, file_pages / MIB, log.repacked);
	loom_context_free(ctx);
	loom_model_free(m);
	loom_runtime_free(rt);
}
END_TEST

static Suite *memory_suite(void)
{
	Suite *s = suite_create("memory");
	TCase *tc = tcase_create("resident");
	tcase_set_timeout(tc, 120);
	tcase_add_loop_test(tc, repacked_weights_are_resident_once, 0, test_n_cpu_backends);
	suite_add_tcase(s, tc);
	return s;
}

LOOM_TEST_MAIN(memory_suite)
