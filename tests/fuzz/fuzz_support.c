/* fuzz_support.c - what the libFuzzer targets share. */
#include "fuzz_support.h"

#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

/* Messages are formatted and dropped: formatting is where a name taken
 * from the input (not NUL-terminated, megabytes long) would be misread. */
static char message[4096];

static void host_log(loom_log_level level, const char *plugin, const char *fmt, ...)
{
	va_list ap;
	(void)level;
	(void)plugin;
	va_start(ap, fmt);
	vsnprintf(message, sizeof(message), fmt, ap);
	va_end(ap);
}

static void host_set_error(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(message, sizeof(message), fmt, ap);
	va_end(ap);
}

static const loom_host host = {
	.struct_size = sizeof(loom_host),
	.log = host_log,
	.set_error = host_set_error,
};

const loom_host *fuzz_host(void)
{
	return &host;
}

static char scratch_dir[64];

static void remove_scratch(void)
{
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", scratch_dir);
	if (system(cmd) != 0)
		fprintf(stderr, "fuzz: could not remove %s\n", scratch_dir);
}

static const char *scratch(void)
{
	if (scratch_dir[0] == '\0') {
		snprintf(scratch_dir, sizeof(scratch_dir), "/dev/shm/loom-fuzz-XXXXXX");
		if (mkdtemp(scratch_dir) == NULL) {
			perror("fuzz: mkdtemp /dev/shm");
			abort();
		}
		atexit(remove_scratch);
	}
	return scratch_dir;
}

const char *fuzz_write_file(const char *name, const uint8_t *data, size_t size)
{
	static char path[PATH_MAX];
	if (name == NULL)
		return scratch();
	snprintf(path, sizeof(path), "%s/%s", scratch(), name);
	FILE *f = fopen(path, "wb");
	if (f == NULL || (size > 0 && fwrite(data, 1, size, f) != size) || fclose(f) != 0) {
		perror(path);
		abort();
	}
	return path;
}

const char *fuzz_data_path(const char *relative)
{
	static char path[PATH_MAX];
	const char *dir = getenv("LOOM_TEST_DATA");
	snprintf(path, sizeof(path), "%s/%s", dir != NULL && dir[0] != '\0' ? dir : LOOM_FUZZ_DEFAULT_DATA,
		 relative);
	if (access(path, R_OK) != 0) {
		fprintf(stderr, "fuzz: %s is missing (set LOOM_TEST_DATA to the shared data)\n", path);
		abort();
	}
	return path;
}
