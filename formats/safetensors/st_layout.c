/* st_layout.c - finding a checkpoint's files from the path given to open. */
#include "st_layout.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

bool st_layout_join(char *buf, const char *dir, const char *name)
{
	int n = snprintf(buf, PATH_MAX, "%s/%s", dir, name);

	return n >= 0 && n < PATH_MAX;
}

static bool is_file(const char *path)
{
	struct stat st;

	return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

bool st_layout_is_index(const char *path)
{
	size_t n = strlen(path), k = strlen(ST_INDEX_SUFFIX);

	return n >= k && strcmp(path + n - k, ST_INDEX_SUFFIX) == 0;
}

static bool fail(char *why, size_t why_size, const char *reason)
{
	snprintf(why, why_size, "%s", reason);
	return false;
}

static bool find_in_dir(const char *path, st_layout *out, char *why, size_t why_size)
{
	if (snprintf(out->dir, sizeof(out->dir), "%s", path) >= (int)sizeof(out->dir))
		return fail(why, why_size, "the path is too long");
	if (!st_layout_join(out->weights, path, ST_INDEX_FILE))
		return fail(why, why_size, "the path is too long");
	out->sharded = is_file(out->weights);
	if (out->sharded)
		return true;
	if (!st_layout_join(out->weights, path, ST_SINGLE_FILE))
		return fail(why, why_size, "the path is too long");
	if (is_file(out->weights))
		return true;
	return fail(why, why_size,
		    "a directory without " ST_SINGLE_FILE " or " ST_INDEX_FILE);
}

/* The weight file itself; config.json and the rest are beside it. */
static bool find_beside(const char *path, st_layout *out, char *why, size_t why_size)
{
	const char *slash = strrchr(path, '/');

	if (snprintf(out->weights, sizeof(out->weights), "%s", path) >= (int)sizeof(out->weights))
		return fail(why, why_size, "the path is too long");
	if (slash == NULL)
		snprintf(out->dir, sizeof(out->dir), ".");
	else if (slash == path)
		snprintf(out->dir, sizeof(out->dir), "/");
	else
		snprintf(out->dir, sizeof(out->dir), "%.*s", (int)(slash - path), path);
	out->sharded = st_layout_is_index(path);
	return true;
}

bool st_layout_find(const char *path, st_layout *out, char *why, size_t why_size)
{
	struct stat st;

	memset(out, 0, sizeof(*out));
	if (stat(path, &st) != 0)
		return fail(why, why_size, strerror(errno));
	if (S_ISDIR(st.st_mode))
		return find_in_dir(path, out, why, why_size);
	return find_beside(path, out, why, why_size);
}
