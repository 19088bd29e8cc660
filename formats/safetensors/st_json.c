/* st_json.c - parsing a checkpoint's JSON, reading its small JSON files. */
#include "st_json.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static bool is_space(char c)
{
	return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

cJSON *st_json_parse(const loom_host *host, const char *path, const char *what,
		     const char *text, size_t len)
{
	const char *end = NULL;
	cJSON *root = cJSON_ParseWithLengthOpts(text, len, &end, false);

	if (root == NULL) {
		host->set_error("%s: JSON syntax error at byte %zu of %s", path,
				end != NULL ? (size_t)(end - text) : (size_t)0, what);
		return NULL;
	}
	/* cJSON stops after the first value; safetensors pads with spaces, and
	 * anything else after the value is a broken file. */
	while (end < text + len && is_space(*end))
		end++;
	if (end < text + len) {
		host->set_error("%s: unexpected bytes after the JSON value at byte %zu of %s", path,
				(size_t)(end - text), what);
		cJSON_Delete(root);
		return NULL;
	}
	return root;
}

bool st_json_uint(const cJSON *item, uint64_t limit, uint64_t *out)
{
	double x;

	if (!cJSON_IsNumber(item))
		return false;
	x = item->valuedouble;
	/* Below 2^64 before the conversion; then limit compared exactly, as a
	 * double may not hold it. */
	if (!(x >= 0 && x < 18446744073709551616.0) || x != floor(x) || (uint64_t)x >= limit)
		return false;
	*out = (uint64_t)x;
	return true;
}

char *st_read_file(const loom_host *host, const char *path, size_t max, const char *what,
		   size_t *len, bool *missing)
{
	struct stat st;
	char *buf = NULL;
	size_t done = 0;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (missing != NULL)
		*missing = false;
	if (fd < 0) {
		if (missing != NULL && errno == ENOENT)
			*missing = true;
		else
			host->set_error("%s: cannot open: %s", path, strerror(errno));
		return NULL;
	}
	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
		host->set_error("%s: not a regular file", path);
		goto out;
	}
	if ((uint64_t)st.st_size > (uint64_t)max) {
		host->set_error("%s: %" PRIu64 " bytes, over the %" PRIu64 " MiB limit for %s",
				path, (uint64_t)st.st_size, (uint64_t)max >> 20, what);
		goto out;
	}
	buf = malloc((size_t)st.st_size + 1);
	if (buf == NULL) {
		host->set_error("%s: out of memory", path);
		goto out;
	}
	while (done < (size_t)st.st_size) {
		ssize_t n = read(fd, buf + done, (size_t)st.st_size - done);

		if (n <= 0) {
			host->set_error("%s: cannot read: %s", path,
					n < 0 ? strerror(errno) : "the file shrank");
			free(buf);
			buf = NULL;
			goto out;
		}
		done += (size_t)n;
	}
	buf[done] = '\0';
	*len = done;
out:
	close(fd);
	return buf;
}

cJSON *st_json_load(const loom_host *host, const char *path, bool *missing)
{
	size_t len;
	char *text = st_read_file(host, path, ST_JSON_MAX, "JSON", &len, missing);
	cJSON *root;

	if (text == NULL)
		return NULL;
	root = st_json_parse(host, path, "the file", text, len);
	free(text);
	return root;
}
