/* testdata.h - where the shared reference data is, and skipping without it. */
#ifndef LOOM_TESTDATA_H
#define LOOM_TESTDATA_H

#include <stdbool.h>
#include <stddef.h>

/* The shared data directory: $LOOM_TEST_DATA, else ../shared beside the
 * source tree; NULL (after printing one "SKIP ..." line) if absent. */
const char *test_data_dir(void);

/* test_data_path(buf, size, "models/x.gguf") -> "<dir>/models/x.gguf".
 * Returns false, printing why the caller skips, if the data is absent. */
bool test_data_path(char *buf, size_t size, const char *relative);

/* Reads a whole file into a malloc'd buffer (NUL-terminated); NULL if it
 * cannot. */
void *test_read_file(const char *path, size_t *size);

/* A fresh empty directory under the build tree's tmp/ for this test. */
const char *test_tmp_dir(const char *name);

/* Writes text to dir/name, failing the test if it cannot; the path goes to
 * buf, which is returned. */
const char *test_write_file(char *buf, size_t size, const char *dir, const char *name, const char *text);

/* 1-based line of the first occurrence of needle in text (fails the test if
 * there is none). */
int test_line_of(const char *text, const char *needle);

#endif
