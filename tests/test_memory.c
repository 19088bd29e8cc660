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

typedef enum model_kind {
	BIG_Q8_0,  /* the file comment's */
	TIED_F16,  /* one layer, its head tied to an 8 MiB F16 embedding: a weight
		    * the CPU backends would copy into their memory as it is, but
		    * whose file tensor the embedding keeps */
	TIED_Q8_0, /* one layer, its head tied to a Q8_0 embedding, which the
		    * AVX-512 VNNI variants rearrange */
	N_KINDS
} model_kind;

static const char *model_path(model_kind kind)
{
	static const char *const names[N_KINDS] = {"big-q8_0.gguf", "tied-f16.gguf", "tied-q8_0.gguf"};
	static char paths[N_KINDS][4096];
	char *path = paths[kind];
	if (path[0] != '\0')
		return path;
	synth_config c = synth_default_config();
	c.n_vocab = 4096;
	c.n_embd = 1024;
	c.n_layer = kind == BIG_Q8_0 ? 4 : 1;
	c.n_head = 16;
	c.n_head_kv = 16;
	c.n_ff = 2816;
	c.weight_type = kind == TIED_F16 ? LOOM_DTYPE_F16 : LOOM_DTYPE_Q8_0;
	c.tied = kind != BIG_Q8_0;
	synth_model *sm = synth_model_build(&c, NULL);
	snprintf(path, sizeof(paths[0]), "%s/%s", test_tmp_dir("memory"), names[kind]);
	ck_assert(synth_model_write(sm, path));
	synth_model_free(sm);
	return path;
}

/* A runtime on backend that logs to log; NULL (having said why) where the
 * backend cannot run here. */
static loom_runtime *runtime_on(const char *backend, log_capture *log)
{
	loom_runtime_params p = loom_runtime_default_params();
	p.plugins_file = test_plugins_file();
	p.backend = backend;
	p.n_threads = 2;
	p.log_level = LOOM_LOG_INFO;
	p.log_fn = capture;
	p.log_user = log;
	loom_runtime *rt = NULL;
	loom_status s = loom_runtime_create(&p, &rt);
	if (s == LOOM_ERR_PLUGIN && strstr(loom_last_error(), "unusable on this machine")) {
		printf("SKIP: backend %s: %s\n", backend, loom_last_error());
		return NULL;
	}
	ck_assert_msg(s == LOOM_OK, "%s", loom_last_error());
	return rt;
}

/* Loads the model on backend, runs a step; resident memory must grow by
 * about the file's size, once. */
static void check_resident_once(const char *backend, bool tied_f16)
{
	if (UNDER_ASAN) {
		printf("SKIP: resident memory under AddressSanitizer counts its shadow too\n");
		return;
	}
	const char *path = model_path(tied_f16 ? TIED_F16 : BIG_Q8_0);
	struct stat st;
	ck_assert(stat(path, &st) == 0);
	const double file = (double)st.st_size;

	log_capture log = {0};
	loom_runtime *rt = runtime_on(backend, &log);
	if (rt == NULL)
		return;

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
	double after_step = ran.total - before.total;
	printf("memory %-12s %s file %.1f MiB, %d weights repacked: load +%.1f MiB resident (+%.1f MiB of file pages), "
	       "after a step +%.1f MiB\n",
	       backend, tied_f16 ? "tied f16" : "q8_0", file / MIB, log.repacked, grew / MIB, file_pages / MIB,
	       after_step / MIB);
	/* Weights used in place are resident through the file, repacked ones
	 * through their copy: either way once. The embedding table is used in
	 * place and read a row at a time, so little of it is resident, unless
	 * a tied head reads all of it. */
	ck_assert_msg(grew <= 1.05 * file + 4 * MIB, "%s: loading a %.1f MiB file made %.1f MiB resident", backend,
		      file / MIB, grew / MIB);
	/* Its only weight big enough to copy is the tied head (the layers'
	 * are under the backends' 8 MiB floor): kept where it is. */
	if (tied_f16)
		ck_assert_msg(log.repacked == 0, "%s: the tied head was copied, and its file tensor kept too", backend);
	if (log.repacked > 0 && !tied_f16)
		ck_assert_msg(file_pages <= 0.1 * file, "%s: %.1f MiB of the file's pages stay resident after %d weights were repacked",
			      backend, file_pages / MIB, log.repacked);
	loom_context_free(ctx);
	loom_model_free(m);
	loom_runtime_free(rt);
}

START_TEST(repacked_weights_are_resident_once)
{
	check_resident_once(test_cpu_backends[_i], false);
}
END_TEST

/* A CPU backend copies an F16 head of 8 MiB into its memory for the huge
 * pages, but the embedding it is tied to keeps the file's tensor: that
 * copy would hold the table twice, and the core drops it (8 MiB over a
 * 33 MiB file, which the bound above alone would let pass). */
START_TEST(tied_head_is_resident_once)
{
	check_resident_once(test_cpu_backends[_i], true);
}
END_TEST

/* A tied head the backend rearranged is the embedding's one copy: GET_ROWS
 * reads it, so once a first step has mapped the file pages every step
 * needs (the norms', used in place), a step over rows from all through the
 * table maps none (reading the file's rows instead, it would map their
 * pages again: at least 2 MiB). */
START_TEST(tied_embedding_reads_the_head)
{
	const char *backend = test_cpu_backends[_i];
	if (UNDER_ASAN) {
		printf("SKIP: resident memory under AddressSanitizer counts its shadow too\n");
		return;
	}
	log_capture log = {0};
	loom_runtime *rt = runtime_on(backend, &log);
	if (rt == NULL)
		return;
	loom_model *m = NULL;
	ck_assert_msg(loom_model_load(rt, model_path(TIED_Q8_0), NULL, &m) == LOOM_OK, "%s", loom_last_error());
	loom_context *ctx = test_context(m, 1024, 512, LOOM_DTYPE_F16);
	loom_token toks[512];
	for (int i = 0; i < 512; i++)
		toks[i] = 1 + 8 * i;
	loom_batch first = {.n_tokens = 1, .tokens = toks}, spread = {.n_tokens = 512, .tokens = toks};
	ck_assert_msg(loom_decode(ctx, &first) == LOOM_OK, "%s", loom_last_error());
	resident before = resident_now();
	ck_assert_msg(loom_decode(ctx, &spread) == LOOM_OK, "%s", loom_last_error());
	double file_pages = resident_now().file - before.file;
	printf("memory %-12s tied q8_0, %d weights repacked: a step over 512 rows of the table +%.2f MiB of file pages\n",
	       backend, log.repacked, file_pages / MIB);
	if (log.repacked > 0)
		ck_assert_msg(file_pages < 0.25 * MIB, "%s: the embedding's rows were read from the file (+%.2f MiB)",
			      backend, file_pages / MIB);
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
	tcase_add_loop_test(tc, tied_head_is_resident_once, 0, test_n_cpu_backends);
	tcase_add_loop_test(tc, tied_embedding_reads_the_head, 0, test_n_cpu_backends);
	suite_add_tcase(s, tc);
	return s;
}

LOOM_TEST_MAIN(memory_suite)
