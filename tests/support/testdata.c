/* testdata.c - where the shared reference data is. */
#include "testdata.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

const char *test_data_dir(void)
{
	static char dir[4096];
	static int state; /* 0 unknown, 1 present, 2 absent */
	struct stat st;

	if (state == 1)
		return dir;
	if (state == 2)
		return NULL;
	const char *env = getenv("LOOM_TEST_DATA");
	snprintf(dir, sizeof(dir), "%s", env != NULL && env[0] != '\0' ? env : LOOM_TEST_DEFAULT_DATA);
	char probe[4200];
	snprintf(probe, sizeof(probe), "%s/golden", dir);
	if (stat(probe, &st) == 0 && S_ISDIR(st.st_mode)) {
		state = 1;
		return dir;
	}
	printf("SKIP: reference data not found at %s (set LOOM_TEST_DATA); tests that need it are skipped\n",
	       dir);
	state = 2;
	return NULL;
}

bool test_data_path(char *buf, size_t size, const char *relative)
{
	const char *dir = test_data_dir();
	if (dir == NULL)
		return false;
	snprintf(buf, size, "%s/%s", dir, relative);
	return true;
}

void *test_read_file(const char *path, size_t *size)
{
	FILE *f = fopen(path, "rb");
	if (f == NULL)
		return NULL;
	if (fseek(f, 0, SEEK_END) != 0) {
		fclose(f);
		return NULL;
	}
	long n = ftell(f);
	rewind(f);
	char *buf = n >= 0 ? malloc((size_t)n + 1) : NULL;
	if (buf == NULL || fread(buf, 1, (size_t)n, f) != (size_t)n) {
		free(buf);
		fclose(f);
		return NULL;
	}
	fclose(f);
	buf[n] = '\0';
	if (size != NULL)
		*size = (size_t)n;
	return buf;
}

const char *test_tmp_dir(const char *name)
{
	static char path[4096];
	char cmd[8400];
	snprintf(path, sizeof(path), "%s/tmp/%s", LOOM_TEST_BUILD_DIR, name);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s' && mkdir -p '%s'", path, path);
	if (system(cmd) != 0)
		return NULL;
	return path;
}

const char *test_write_file(char *buf, size_t size, const char *dir, const char *name, const char *text)
{
	snprintf(buf, size, "%s/%s", dir, name);
	FILE *f = fopen(buf, "w");
	ck_assert_msg(f != NULL, "cannot create %s", buf);
	ck_assert_msg(fputs(text, f) >= 0 && fclose(f) == 0, "cannot write %s", buf);
	return buf;
}

int test_line_of(const char *text, const char *needle)
{
	const char *at = strstr(text, needle);
	ck_assert_msg(at != NULL, "\"%s\" is not in the text", needle);
	int line = 1;
	for (const char *p = text; p < at; p++)
		line += *p == '\n';
	return line;
}
