/* st_json.c - parsing a checkpoint's JSON, reading its small JSON files. */
#include "st_json.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
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

/* The whole file in a malloc'd buffer; NULL after host->set_error. */
static char *read_all(const loom_host *host, const char *path, size_t *len)
{
	struct stat st;
	char *buf = NULL;
	size_t done = 0;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0) {
		host->set_error("%s: cannot open: %s", path, strerror(errno));
		return NULL;
	}
	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
		host->set_error("%s: not a regular file", path);
		goto out;
	}
	if ((uint64_t)st.st_size > ST_JSON_MAX) {
		host->set_error("%s: %" PRIu64 " bytes, over the %" PRIu64 " MiB limit for JSON",
				path, (uint64_t)st.st_size, ST_JSON_MAX >> 20);
		goto out;
	}
	buf = malloc((size_t)st.st_size + 1); /* + 1: an empty file is no malloc(0) */
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
	*len = done;
out:
	close(fd);
	return buf;
}

cJSON *st_json_load(const loom_host *host, const char *path)
{
	size_t len;
	char *text = read_all(host, path, &len);
	cJSON *root;

	if (text == NULL)
		return NULL;
	root = st_json_parse(host, path, "the file", text, len);
	free(text);
	return root;
}
